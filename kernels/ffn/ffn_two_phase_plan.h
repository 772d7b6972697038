// How the portable two-phase FFN (kernels/ffn/ffn_two_phase.cu) cuts its work, in plain C++ so
// that the level table's choice (kernels/variants.cpp) and CPU tests can ask whether it fits.
//
// One block an SM, `blocks` of them, all resident (a cooperative launch), two phases with one
// grid barrier between them:
//   phase 1, up tiles: tile t owns h's columns [up_cols t, up_cols (t + 1)) for all tokens (16
//     mtc rows, zero past the tokens); x's rows and W1's columns stream through a ring of
//     `stages` slots of ring_k of K each ([x's 16 mtc rows x ring_k | W1's ring_k rows x
//     up_cols]); bias + GELU, rounded to bf16, into h in global memory (L2 keeps it);
//   phase 2, down tiles: tile t = (column tile t % col_tiles, part of K t / col_tiles) multiplies
//     h's columns [down_k part, ...) by W2's rows there and columns [down_cols ct, ...): W2's
//     tile ([down_k x down_cols]) is asked for before the barrier (it does not depend on h), h's
//     tile ([16 mtc x down_k]) after it. The tile's fp32 partial sum goes through shared memory
//     and is added into an fp32 accumulator in L2 (16-byte vector reds on sm_90, atomics
//     before); the last of a column tile's `splits` blocks to finish (a counter per column
//     tile) adds b2, writes y in bf16 and leaves the accumulator and its counter at zero.
// Shared memory: the ring in phase 1; W2's tile, then h's tile, in phase 2 (over the ring); the
// partial sums over both once the products are done.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/gemm_core/slice_plan.h"

namespace fl {

constexpr int64_t kTwoPhaseMaxTokens = 64;
// The level table prefers it from this many tokens on: past kTwoPhaseMaxTokens, so nowhere (it
// measured slower than the hidden slice at 1-16 tokens and about level at 64, one run:
// docs/PERFORMANCE.md; `bench --variant ffn_fused=ffn_two_phase` runs it).
constexpr int64_t kTwoPhaseFrom = kTwoPhaseMaxTokens + 1;
constexpr int kTwoPhaseRingK = 64;      // K a ring slot
constexpr int kTwoPhaseMaxStages = 12;  // the ring's most slots (all of K in flight at C = 768)
constexpr int kTwoPhaseMaxUpCols = 64;  // h's columns an up tile at most (8 column tiles)
constexpr int kTwoPhaseWarps = 8;
constexpr size_t kTwoPhaseCounterBytes = 4096;  // the barrier's and the column tiles' counters
// Whether phase 1 takes the direct up tiles (FfnTwoPhasePlan::direct) where they fit: measured
// faster than the ring at 33 and 64 tokens, 1-32 not measured (docs/PERFORMANCE.md),
// and the kernel runs only when forced, so off until measured there.
constexpr bool kTwoPhaseDirect = false;

struct FfnTwoPhasePlan {
  int m = 0, c = 0, h = 0, mtc = 1;  // tokens, C, 4C, 16-row tiles of tokens
  int blocks = 0;                    // max(up_tiles, down tiles), at most the SMs
  int up_cols = 8, up_tiles = 0;     // phase 1
  int down_cols = 8, col_tiles = 0;  // phase 2: y's columns a tile, column tiles
  int down_k = 16, splits = 0;       // ... h's columns (W2's rows) a tile, parts of K
  int ring_k = kTwoPhaseRingK, stages = 2, chunks = 0;
  int ld_x = 0, ld_w1 = 0, ld_w2 = 0, ld_h = 0, ld_part = 0;  // shared rows, in elements
  size_t x_bytes = 0, stage_bytes = 0;                        // a slot's x part; a whole slot
  size_t off_h = 0;                                           // h's tile, after W2's (phase 2)
  size_t smem = 0;
  bool prefetch_w2 = false;  // each block asks L2 for its W2 tile's lines at the start
  bool rotate = false;       // block b's ring starts at K chunk b % chunks (else all at chunk 0)
  // Direct up tiles (direct_x.cuh; 24 or 32 columns a tile): no ring; each warp loads x's
  // fragments into registers, W1's tile (w1_rows rows of ld_w1d, zero past C) and W2's tile are
  // asked for together at the start, W1's over h's tile (at off_h; phase 2 needs it only after
  // the barrier), W2's at 0.
  bool direct = false;
  int ld_w1d = 0, w1_rows = 0;
};

// The plan at m tokens and hidden size c (bf16, C a multiple of 8) on `sms` SMs with
// `smem_optin` bytes of shared memory a block; `stages` 0: the most that fit (at most the
// chunks), `down_cols` 0: the widest of 48, 32, 16, 8 that fits; `up_cols` 0: the fewest
// multiple of 8 that covers 4C in `sms` tiles (more: wider W1 rows, fewer up tiles). False when
// nothing fits.
// direct: the direct up tiles where the up tile is 24 or 32 columns (else the ring).
inline bool ffn_two_phase_plan_for(int64_t m, int64_t c, int sms, int smem_optin,
                                   FfnTwoPhasePlan* out, int stages = 0, int down_cols = 0,
                                   int up_cols = 0, bool direct = false) {
  if (m < 1 || m > kTwoPhaseMaxTokens || c < 8 || c % 8 != 0 || sms < 1) return false;
  FfnTwoPhasePlan p;
  p.m = int(m), p.c = int(c), p.h = int(4 * c), p.mtc = int((m + 15) / 16);
  const int rows = 16 * p.mtc;
  const size_t room = size_t(smem_optin) - 64;  // the kernel's static shared memory
  const int units8 = (p.h + 7) / 8;
  p.up_cols = std::max((units8 + sms - 1) / sms * 8, slice::round_up(up_cols, 8));
  if (p.up_cols > kTwoPhaseMaxUpCols) return false;
  p.up_tiles = (p.h + p.up_cols - 1) / p.up_cols;
  p.chunks = (p.c + p.ring_k - 1) / p.ring_k;
  p.ld_x = slice::padded_ld(p.ring_k, 2);
  p.ld_w1 = slice::padded_ld(p.up_cols, 2);
  p.x_bytes = 2 * size_t(rows) * p.ld_x;
  p.stage_bytes = p.x_bytes + 2 * size_t(p.ring_k) * p.ld_w1;
  const int most = int(std::min<size_t>(room / p.stage_bytes, size_t(kTwoPhaseMaxStages)));
  p.stages = stages > 0 ? stages : std::max(2, std::min(most, p.chunks));
  if (p.stages < 2 || p.stages > kTwoPhaseMaxStages || p.stages > most) return false;
  // Direct: 24 columns unpadded (48-byte rows: direct_x.cuh's ldmatrix rows conflict-free), 32
  // padded to 40; rows to a whole 32-wide group of K; the parts of K (one a warp's row tile's
  // share) over it once the product is done.
  p.direct = direct && (p.up_cols == 24 || p.up_cols == 32);
  p.ld_w1d = p.up_cols == 24 ? 24 : slice::padded_ld(p.up_cols, 2);
  p.w1_rows = (p.c + 31) / 32 * 32;
  const size_t w1d = 2 * size_t(p.w1_rows) * p.ld_w1d;
  const size_t red1 = 4 * size_t(kTwoPhaseWarps / p.mtc) * rows * p.up_cols;
  const size_t up_room = p.direct ? std::max(w1d, red1) : 0;
  const int widths[] = {48, 32, 16, 8};
  for (int dc : widths) {
    if (down_cols > 0 && dc != down_cols) continue;
    const int col_tiles = (p.c + dc - 1) / dc;
    if (col_tiles > sms) continue;
    const int parts = sms / col_tiles;  // the most parts of K the SMs take
    const int dk = slice::round_up((p.h + parts - 1) / parts, 16);
    const int ld_w2 = slice::padded_ld(dc, 2), ld_h = slice::padded_ld(dk, 2);
    const size_t w2 = 2 * size_t(dk) * ld_w2, hs = 2 * size_t(rows) * ld_h;
    const size_t part = 4 * size_t(rows) * (dc + 4);
    if (w2 + std::max(hs, up_room) > room || part > room) continue;
    p.down_cols = dc, p.col_tiles = col_tiles, p.down_k = dk;
    p.splits = (p.h + dk - 1) / dk;
    p.ld_w2 = ld_w2, p.ld_h = ld_h, p.ld_part = dc + 4;
    p.off_h = w2;
    p.blocks = std::max(p.up_tiles, p.col_tiles * p.splits);
    p.smem = std::max(
        {p.direct ? 0 : size_t(p.stages) * p.stage_bytes, w2 + std::max(hs, up_room), part});
    *out = p;
    return p.blocks <= sms;
  }
  return false;
}

// Warp `warp`'s share of a 16 mtc x 8 nt tile (phase 1's up tile, phase 2's down tile): row
// tile mt = warp / jr, column tiles [nt0, nt0 + ntc) (ntc 0: none), jr warps a row tile (the
// most, a power of 2, that the 8 warps allow), at most 4 column tiles a warp.
struct FfnTwoPhaseWarp {
  int mt, nt0, ntc;
};
FL_SLICE_HD inline FfnTwoPhaseWarp ffn_two_phase_warp(int warp, int mtc, int nt) {
  int jr = kTwoPhaseWarps;
  while (jr > 1 && jr * mtc > kTwoPhaseWarps) jr /= 2;
  const int per = (nt + jr - 1) / jr, mt = warp / jr, nt0 = (warp % jr) * per;
  const int left = nt - nt0 < per ? nt - nt0 : per;
  return {mt, nt0, mt < mtc && left > 0 ? left : 0};
}

// Block b's tiles: up tile b (h's columns from up_col0) where b < up_tiles; down tile b (y's
// columns from n0, column tile ct; h's columns from k0) where b < col_tiles x splits.
struct FfnTwoPhaseTiles {
  int up_col0, ct, n0, k0;
  bool up, down;
};
FL_SLICE_HD inline FfnTwoPhaseTiles ffn_two_phase_tiles(const FfnTwoPhasePlan& p, int b) {
  const int ct = b % p.col_tiles;
  return {b * p.up_cols,    ct,
          ct * p.down_cols, (b / p.col_tiles) * p.down_k,
          b < p.up_tiles,   b < p.col_tiles * p.splits};
}

// The scratch buffer: counters (zero when allocated, left zero by every launch), then the fp32
// accumulator of y (m x C, zero likewise).
inline size_t ffn_two_phase_scratch_bytes_for(const FfnTwoPhasePlan& p) {
  return kTwoPhaseCounterBytes + sizeof(float) * size_t(p.m) * size_t(p.c);
}

}  // namespace fl
