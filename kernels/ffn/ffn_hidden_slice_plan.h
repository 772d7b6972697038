// How the portable hidden-slice FFN (kernels/ffn/ffn_hidden_slice.cu) cuts its work, in plain
// C++ so that a CPU test (tests/unit/stream_plan_test.cpp) checks what the kernel's correctness
// rests on: every hidden unit in exactly one block, one block per SM at most (the blocks wait
// for each other at the end), every column of y summed by one block, shared memory within the
// GPU's.
//
// Block b owns hidden units [units b, units (b + 1)): W1's columns and W2's rows of them.
// Shared memory, byte offsets: [W2's rows | x, W1's columns (the up product's partial sums
// overlay them once it is done) | h's slice | b1's slice]; with w2_late (GPUs with less shared
// memory) W2's rows are asked for after the up product, into the region x and W1 held. With
// w2_pad_over_x (units not a multiple of the k step, 16 in bf16: 24 units on an RTX card's 99 KiB)
// only W2's `units` rows come before x; its zero rows up to kp (the down product's last k step)
// overlay x's first rows and are zeroed once the up product is done with x. With w2_during_up
// (W2 late, bf16, 32 units, 8 warps, a warp's up operands within kSliceUpRegSteps k steps) each
// warp loads its whole part of the up product's operands into registers, and W2's rows are asked
// for as soon as every warp has them, while the mma run: the up product's partial sums then
// go after W2's rows (off_red), not over them.
// With x_ring (bf16, where x's rows do not fit beside the slices: 33-64 tokens in 99 KiB) x
// streams through a ring of ring_stages slots, ring_k of K a slot. With ring_w1 (the plan's
// where it fits) W1's columns are resident, asked for whole before the ring, and W2's rows come
// late, over them (after the up product; as a tuning each as soon as the W1 rows under it are
// done): [W1's columns (W2's rows once the up product is done) | ring of x | h | b1];
// else W1's rows ride in the slots too ([x's 16 mtc rows x ring_k | W1's ring_k rows x units])
// and W2's rows stay resident before the ring, a share of them asked for with each chunk:
// [W2's rows | ring | h | b1]. With ring_stagger (a tuning) block b takes the chunks from chunk b
// mod ring_chunks on (and round), so that a few blocks, not all, ask for a chunk's lines of x at
// once.
// With x_rows (fp32 at 1-16 tokens where the 16-row form does not fit: an RTX card's 99 KiB) x
// has only the exact-row products' rows (a power of 2 >= m, 8 at most: from 9 tokens the up
// product runs in passes of 8 rows, the next rows asked for into the same rows) and W1's rows no
// padding (those products read W1 a column a lane, without bank conflicts at any row length),
// W2 late over them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/gemm_core/slice_plan.h"

namespace fl {

constexpr int kSliceMaxUnits = 64;  // hidden units a block at most (8 mma column tiles)
constexpr int kSliceDownCols = 96;  // a warp's columns of the down product at a time (8 warps)
constexpr int kSliceTileCols = 8;   // y's columns a block adds up after the barrier
constexpr int64_t kSliceMaxTokens = 64;
// The most tokens at which the level table prefers this kernel to ffn_stream (the shares of y
// grow with the tokens; docs/PERFORMANCE.md has both measured: ahead to 12 tokens, about level at
// 16, where its fp32 form was not compared).
constexpr int64_t kSliceFasterTo = 16;
// In bf16 (its shares bf16, half fp32's bytes) the table prefers it to ffn_stream up to this many
// tokens, where it measured faster than ffn_stream at 32 and 64 (docs/PERFORMANCE.md, the
// portable FFN's bf16 shares).
constexpr int64_t kSliceBf16FasterTo = 64;
// The most tokens at which fp32 multiplies exact rows on the CUDA cores
// (kernels/gemm_core/row_products.cuh) rather than 16-row tiles.
constexpr int kSliceRowsTo = 8;
// Warps a block: 8, or 16 in bf16 (the copies, both products' parts and the sum over twice the
// warps, 4 a scheduler instead of 2). 16 measured slower up to 32 tokens (x and W1 land later,
// each warp's fixed steps run twice as often) and faster at 64 (four row tiles: twice the down
// jobs a warp with 8; docs/PERFORMANCE.md), so the plan takes 16 in bf16 from this many
// tokens (in bf16 shares only):
constexpr int64_t kSliceWarps16From = 49;
// The shares of y in bf16: bf16 values (2 bytes, rounded as level 1's h is: half fp32's bytes
// written and read through L2 after the down product) from this many tokens, kept tile by tile
// (an 8-column tile's m rows, 16 bytes each, one after another); fp32 below, row by row, as fp32
// keeps them at every count. At 1-8 tokens the shares are a few KB a block and fp32's measured
// faster (a bf16 tile row of one token is half a 32-byte sector a store); at 16 tokens bf16's
// (docs/PERFORMANCE.md).
constexpr int64_t kSliceBf16SharesFrom = 9;
// The most k steps of 16 a warp's part of the up product may take to be held in registers
// (w2_during_up: 12 registers a step, A's fragment and four column tiles' of W1).
constexpr int kSliceUpRegSteps = 8;
// The ring's K a slot (x_ring): 4 k steps of 16; and its most slots.
constexpr int kSliceRingK = 64;
constexpr int kSliceRingMaxStages = 4;
// Whether the ring's block b starts at chunk b mod ring_chunks (FL_FFN_SLICE's ninth number: 1
// on, 2 off): measured 2-3 us slower than every block in K's order at 33-64 tokens
// (docs/PERFORMANCE.md), so off.
constexpr bool kSliceRingStagger = false;
// Whether the ring's up product splits K among warps (ring_split; FL_FFN_SLICE's eleventh
// number: 1 on, 2 off): warp w takes row tile w % mtc, all of the slice's column tiles and its
// part w / mtc of each chunk's k steps, the parts added once after the ring; else a warp takes
// 1-4 column tiles over all of K (docs/PERFORMANCE.md has both measured).
constexpr bool kSliceRingSplit = true;
// Whether the ring form's warps load x's fragments straight from global memory into registers,
// K permuted within 32-wide groups alike for x and W1, instead of x through the ring
// (ring_direct; FL_FFN_SLICE's fifteenth number: 1 on, 2 off), where it fits. Measured faster
// at 33-64 tokens (docs/PERFORMANCE.md), so on.
constexpr bool kSliceRingDirect = true;
// ring_direct: a warp asks for its first two batches of x's loads (6 of K's 32-wide groups:
// all of them at C = 768 on 16 warps) before it waits for W1, else one (FL_FFN_SLICE's
// seventeenth number: 1 on, 2 off). Measured slower at 33-64 tokens (x's loads are not waiting
// on their latency; docs/PERFORMANCE.md), so off.
constexpr bool kSliceDirectDeep = false;
// ring_direct: W2's rows that fit the unused slots asked for with W1 (ffn_slice_w2_early;
// FL_FFN_SLICE's sixteenth number: 1 on, 2 off). Measured a little faster at 33-64 tokens
// (docs/PERFORMANCE.md), so on.
constexpr bool kSliceW2Early = true;

// The sum of y by groups (group_sum; FL_FFN_SLICE's nineteenth number: 1 on, 2 off), in bf16
// shares at 9-64 tokens, 8 or 16 warps, 8 to kSliceGroupBlocks blocks: no grid
// barrier; the blocks are kSliceGroups interleaved groups (b % 8), each with its own count, and
// warp w of every block waits only for group w's count, then adds that group's shares: the warps
// whose groups are in add while the last blocks are still on their down product
// (ffn_hidden_slice_groups.cuh). The plan's where W2 comes under the up product (w2_during_up, an
// RTX card's 99 KiB): measured faster there at 16 tokens than the grid barrier, also than groups
// of consecutive blocks, and the same with polls back to back; a word a block instead of a count
// a group measured slower (docs/PERFORMANCE.md). Elsewhere not measured, so not the plan's.
constexpr bool kSliceGroupSum = true;
// The sum of y by groups in the ring form (33-64 tokens in 99 KiB; FL_FFN_SLICE's nineteenth
// number 1 forces it): off until measured faster than the grid barrier there.
constexpr bool kSliceGroupSumRing = false;
constexpr int kSliceGroups = 8;
constexpr int kSliceGroupBlocks = 128;
// A group's counter a 128-byte line (32 words): the warps' polls of different counters go to
// different lines.
constexpr int kSliceCounterWords = 32;
// The scratch buffer's head: the barrier's counter (256 bytes), then the groups' counters (room
// for a line a block, kSliceGroupBlocks lines, of which the groups use 8); the shares after it.
constexpr size_t kSliceScratchHead = 256 + 4 * size_t(kSliceCounterWords) * kSliceGroupBlocks;

// Whether launches read W1 packed (ffn_slice_pack_w1: a block's slice one contiguous run) rather
// than W1's columns, where FL_FFN_W1_PACKED does not say (0 off, 1 on). Measured and left off:
// half W1's lines (bf16) saved 0.5-1% at 1-64 tokens, fp32's 1-2% at 1-16 (an RTX card's plan on
// an H100, 2026-11-27: docs/PERFORMANCE.md, W1 packed for the hidden slice).
constexpr bool kSliceW1Packed = false;

// Rows the exact-row products compute at m tokens (row_products.cuh: 1, 2, 4 or 8).
inline int ffn_slice_exact_rows(int64_t m) {
  return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8;
}

// The plan's warps and share bytes at m tokens of elem_bytes (16 warps, asked for or not, take
// bf16 shares: their kernel has no other).
inline int ffn_slice_default_warps(int64_t m, int elem_bytes) {
  return elem_bytes == 2 && m >= kSliceWarps16From ? 16 : 8;
}
inline int ffn_slice_share_bytes(int64_t m, int elem_bytes) {
  return elem_bytes == 2 && m >= kSliceBf16SharesFrom ? 2 : 4;
}

struct FfnSlicePlan {
  int m = 0, c = 0, h = 0, mtc = 1;  // tokens, C, 4C, 16-row tiles of tokens
  int units = 8, blocks = 0;         // hidden units a block; blocks
  int warps = 8;                     // warps a block (8, or 16 in bf16)
  int share_bytes = 4;               // a value of a block's share of y: 4 (fp32) or 2 (bf16)
  int ck = 0, kp = 0, cp = 0;        // C and units padded to the k step; C padded to 8
  int ld_x = 0, ld_w1 = 0, ld_w2 = 0, ld_h = 0;
  bool w2_late = false;
  bool w2_pad_over_x = false;  // W2's rows units..kp-1 overlay x (zeroed after the up product)
  bool w2_during_up = false;   // W2 late, asked for once the up operands are in registers
  size_t off_w2 = 0, off_x = 0, off_w1 = 0, off_h = 0, off_bias = 0, smem = 0;
  size_t off_red = 0;    // the up product's partial sums (over x and W1; after W2, w2_during_up)
  bool x_ring = false;   // x through a ring of K chunks (bf16)
  bool ring_w1 = false;  // ... W1 resident and W2 late over it; else W1 in the ring, W2 with its
                         // chunks
  bool ring_w2_after = false;  // ring_w1: W2's rows all asked for after the up product (the
                               // plan's); else each as soon as the W1 rows under it are done
  bool ring_stagger = false;   // block b's chunks from b mod ring_chunks on (not with the W2
                               // rows asked for as W1's are done: they free W1 from row 0)
  bool ring_walk = true;       // x's copies a chunk by each thread's walk, worked out once a launch
                               // (gemm_core/stage_walk.cuh); else stage() every chunk (a tuning)
  bool ring_split = false;     // the ring's K split among warps, the parts added after the ring
  bool ring_direct = false;    // no ring: each warp loads its x fragments into registers
                               // (ffn_slice_ring_direct_fits; ffn_hidden_slice_direct.cuh)
  bool direct_deep = kSliceDirectDeep;  // ring_direct: two batches of x's loads before W1's wait
  int w2_early_from = 0;  // ring_direct: W2's rows from this one on (0: none) lie past W1's
                          // and the parts' bytes, in the unused slots, and are asked for
                          // with W1 (ffn_slice_w2_early); w2_during_up: past x's rows and W1's
                          // columns, asked for after them (ffn_slice_w2_early_resident)
  // The resident copies' offsets stepped by constants (gemm_core/stage_walk.cuh's
  // stage_stepped); else stage() a copy (a tuning). w1_l2_ahead: W1's lines of the slice asked
  // into L2 before its copies (a tuning; measured slower).
  bool stepped_copies = true;
  // stepped: each thread one column of the rows where the block's threads hold a whole row of
  // chunks (x's and W2's rows: 192 of 256 threads at C = 768 bf16); else the column wraps (a
  // tuning).
  bool fixed_column = true;
  // The sum's shuffle offsets worked out before the copies land; else a division after the grid
  // barrier, on the chain to y (a tuning).
  bool sum_apart_ahead = true;
  // The grid barrier's arrival an acq_rel atomic, no fence after the poll (count_barrier.cuh);
  // else __threadfence before and after (a tuning).
  bool barrier_acq_rel = true;
  bool w1_l2_ahead = false;
  // w2_early_from with w2_during_up: W2's rows past x and W1 asked for once x and W1 are in
  // (before the operands go into registers), not right after x's and W1's copies (a tuning).
  bool w2_early_after_xw1 = false;
  // The resident copies: W1's columns asked for before x's rows (W1's lines from DRAM, x's mostly
  // L2 hits after the first block's), else x's first (make_plan: kSliceW1First's forms).
  bool w1_first = false;
  // The sum of y by groups, no grid barrier (kSliceGroupSum; make_plan: ffn_slice_groups_fit).
  bool group_sum = false;
  bool group_contiguous = false;  // groups of consecutive blocks, not b % 8 (a tuning)
  bool group_spin = false;        // the groups' polls without __nanosleep (a tuning)
  int x_rows = 0;  // fp32 exact rows: x's rows in shared memory (a power of 2 >= min(m, 8), in
                   // passes of 8 rows beyond 8 tokens); 0: 16 mtc
  // Blocks past `blocks`, one on each SM the slices leave idle: they ask L2 for W2's lines (a
  // prefetch, no shared memory) ahead of the slices' own copies, and leave. The ring form's
  // (measured with them); elsewhere a tuning (ffn_slice_prefetch_blocks): measured slower at
  // 1-16 tokens (docs/PERFORMANCE.md).
  int prefetch_blocks = 0;
  int ring_k = 0, ring_stages = 0, ring_chunks = 0, ld_xr = 0;  // a slot's K; slots; chunks; x's ld
  size_t ring_x_bytes = 0, ring_stage_bytes = 0;  // a slot's x, and the whole slot (x, then W1)
  // h exchanged in groups of ex_group blocks (0: off; ffn_slice_exchange,
  // ffn_hidden_slice_exchange.cuh): the group's h (16 mtc rows x 32 ex_group, row stride ld_hx)
  // at 0, its W2 tile (32 ex_group rows x cp / ex_group columns, ld_w2x) at off_w2x, its rows from
  // ex_from on asked for with W1.
  int ex_group = 0, ld_hx = 0, ld_w2x = 0, ex_from = 0;
  size_t off_w2x = 0;
};

inline FfnSlicePlan ffn_slice_plan_for(int64_t m, int64_t c, int elem_bytes, int units,
                                       bool w2_late, int warps = 8, bool w2_pad_over_x = false,
                                       bool exact_rows = false) {
  using slice::padded_ld;
  using slice::round_up;
  FfnSlicePlan p;
  const int s = slice::k_step(elem_bytes);
  const size_t e = size_t(elem_bytes);
  p.m = int(m), p.c = int(c), p.h = int(4 * c);
  p.mtc = int((m + 15) / 16);
  p.units = units;
  p.warps = warps;
  p.blocks = (p.h + units - 1) / units;
  p.ck = round_up(p.c, s);
  p.kp = round_up(units, s);
  p.cp = round_up(p.c, 8);
  p.ld_x = padded_ld(p.ck, elem_bytes);
  p.ld_w1 = padded_ld(units, elem_bytes);
  if (exact_rows && elem_bytes == 4 && m <= kSliceFasterTo) {
    p.x_rows = ffn_slice_exact_rows(std::min<int64_t>(m, kSliceRowsTo));
    p.ld_w1 = round_up(units, 4);
  }
  p.ld_w2 = padded_ld(p.cp, elem_bytes);
  p.ld_h = padded_ld(p.kp, elem_bytes);
  p.w2_late = w2_late;
  p.w2_pad_over_x = w2_pad_over_x && !w2_late && p.kp > units;
  const size_t x = e * (p.x_rows > 0 ? p.x_rows : 16 * p.mtc) * p.ld_x;
  const size_t w2 = e * p.kp * p.ld_w2, w1 = e * p.ck * p.ld_w1;
  const size_t red = std::max(slice::red_bytes(units / 8, warps), size_t(16) * 32 * warps);
  const size_t region = std::max({x + w1, red, w2_late ? w2 : 0});
  p.off_w2 = 0;
  p.off_x = w2_late ? 0 : p.w2_pad_over_x ? e * units * p.ld_w2 : w2;
  p.off_w1 = p.off_x + x;
  p.off_h = p.off_x + size_t(round_up(int(region), 16));
  p.off_bias = p.off_h + e * 16 * p.mtc * p.ld_h;
  p.smem = p.off_bias + sizeof(float) * units;
  p.off_red = p.off_x;
  const int parts = warps / p.mtc, up_steps = (p.ck / s + parts - 1) / parts;
  const size_t red_after_w2 = p.off_x + size_t(round_up(int(w2), 16));
  if (w2_late && elem_bytes == 2 && units == 32 && warps == 8 && up_steps <= kSliceUpRegSteps &&
      red_after_w2 + red <= p.off_h) {
    p.w2_during_up = true;
    p.off_red = red_after_w2;
  }
  return p;
}

// The ring form (x_ring, bf16): `stages` slots of x's rows of ring_k of K each (and, without
// w1_resident, W1's rows of them), after W1's whole columns (w1_resident; W2's rows late over
// them, after the up product) or W2's rows; then h and b1. The up product needs no partial sums
// across warps (a warp takes whole K for its tiles); the plan keeps block_product's room for them
// all the same.
inline FfnSlicePlan ffn_slice_ring_plan_for(int64_t m, int64_t c, int units, int warps, int stages,
                                            bool w1_resident) {
  FfnSlicePlan p = ffn_slice_plan_for(m, c, 2, units, w1_resident, warps);
  const size_t e = 2;
  p.x_ring = true;
  p.ring_w1 = w1_resident;
  p.ring_w2_after = w1_resident;
  p.ring_stagger = kSliceRingStagger;
  p.ring_split = kSliceRingSplit;
  p.ring_direct = kSliceRingDirect;  // where ffn_slice_ring_direct_fits (make_plan checks)
  p.w2_during_up = false;
  p.ring_k = kSliceRingK;
  p.ring_stages = stages;
  p.ring_chunks = (p.ck + kSliceRingK - 1) / kSliceRingK;
  p.ld_xr = slice::padded_ld(kSliceRingK, 2);
  p.ring_x_bytes = e * 16 * p.mtc * p.ld_xr;
  p.ring_stage_bytes = p.ring_x_bytes + (w1_resident ? 0 : e * kSliceRingK * p.ld_w1);
  // W1 resident: rows to the last chunk's end (zero past C: the last chunk multiplies them all).
  const size_t w2 = e * p.kp * p.ld_w2, w1 = e * p.ring_chunks * kSliceRingK * p.ld_w1;
  const size_t red = std::max(slice::red_bytes(units / 8, warps), size_t(16) * 32 * warps);
  const size_t ahead = w1_resident ? std::max({w1, w2, red}) : w2;
  const size_t region = size_t(stages) * p.ring_stage_bytes;
  p.off_w2 = 0;
  p.off_x = size_t(slice::round_up(int(ahead), 16));
  p.off_w1 = w1_resident ? 0 : p.off_x + p.ring_x_bytes;
  p.off_red = w1_resident ? 0 : p.off_x;
  p.off_h =
      p.off_x + size_t(slice::round_up(int(w1_resident ? region : std::max(region, red)), 16));
  p.off_bias = p.off_h + e * 16 * p.mtc * p.ld_h;
  p.smem = p.off_bias + sizeof(float) * units;
  return p;
}

// Where ring_direct can run: W1 resident (its rows zero past C to a whole 64-wide chunk), W2
// after the up product (its parts meet over W1), K split among warps, 32 units (all four column
// tiles a warp's) and C a multiple of 8 (16-byte loads of x's rows).
inline bool ffn_slice_ring_direct_fits(const FfnSlicePlan& p) {
  return p.x_ring && p.ring_w1 && p.ring_w2_after && p.ring_split && p.units == 32 && p.c % 8 == 0;
}

// ring_direct leaves the ring's slots unused: W2's rows end where h begins instead of starting at
// 0, and those wholly past W1's rows and the up product's parts are asked for with W1 (a tuning,
// FL_FFN_SLICE's sixteenth number). False (the plan unchanged) where no row lies there.
inline bool ffn_slice_w2_early(FfnSlicePlan* p) {
  if (!p->ring_direct) return false;
  const size_t row = 2 * size_t(p->ld_w2), w2 = row * p->kp;
  const size_t w1 = 2 * size_t(p->ring_chunks) * p->ring_k * p->ld_w1;
  const size_t parts = size_t(p->warps / p->mtc) * 16 * p->mtc * 32 * sizeof(float);
  if (w2 > p->off_h) return false;
  const size_t at = (p->off_h - w2) / 16 * 16, busy = std::max(w1, parts);
  const int from = busy <= at ? 0 : int((busy - at + row - 1) / row);
  if (from < 1 || from >= p->kp) return false;
  p->off_w2 = at;
  p->w2_early_from = from;
  return true;
}

// W2 late over x and W1 once the up operands are in registers (w2_during_up) leaves the shared
// memory past x's rows and W1's columns unused (13 KB at C = 768, 16 tokens, 99 KiB: 8 of W2's
// 32 rows of 1,552 bytes). With w2_early_resident h and b1 move to the end of `limit` bytes, W2's
// rows end where h begins, those wholly past W1's columns (from w2_early_from on) are asked for
// right after x and W1 (their own commit group, in flight while x and W1 land and the operands go
// into registers) and only the first rows over W1 after; the up product's partial sums go over x
// (free once every warp holds its operands), clear of W2's rows. False (the plan unchanged) where
// no row lies there or the partial sums would meet W2's rows.
// Measured slower at 16 tokens, asked for either right after x's and W1's copies or once they
// are in (docs/PERFORMANCE.md), so off.
constexpr bool kSliceW2EarlyResident = false;
// The resident copies ask for W1's columns (W1's lines from DRAM) before x's rows (L2 hits after
// the first block's) where W2 comes under the up product (w2_during_up; FL_FFN_SLICE's eighteenth
// number: 1 on, 2 off, anywhere). Measured faster at 1 and 16 tokens (docs/PERFORMANCE.md), so on.
constexpr bool kSliceW1First = true;
inline bool ffn_slice_w2_early_resident(FfnSlicePlan* p, size_t limit) {
  if (!p->w2_during_up || p->x_ring || p->w2_pad_over_x || p->x_rows > 0) return false;
  const size_t e = 2, tail = p->smem - p->off_h;  // h's tile and b1's slice
  const size_t end = limit / 16 * 16;
  if (end <= p->smem) return false;  // no room past the plan's
  const size_t off_h = (end - tail) / 16 * 16, row = e * size_t(p->ld_w2), w2 = row * p->kp;
  if (w2 > off_h) return false;
  const size_t at = (off_h - w2) / 16 * 16;
  const size_t busy = p->off_w1 + e * size_t(p->ck) * p->ld_w1;  // x's rows and W1's columns
  const size_t red = std::max(slice::red_bytes(p->units / 8, p->warps), size_t(16) * 32 * p->warps);
  if (busy <= at || p->off_x + red > at) return false;
  const int from = int((busy - at + row - 1) / row);
  if (from < 1 || from >= p->kp) return false;
  p->off_bias = off_h + (p->off_bias - p->off_h);
  p->off_h = off_h;
  p->smem = p->off_h + tail;
  p->off_w2 = at;
  p->off_red = p->off_x;
  p->w2_early_from = from;
  return true;
}

// The plan at m tokens and hidden size c on a GPU of `sms` SMs and `smem_optin` bytes of shared
// memory a block: the fewest hidden units a block (a multiple of 8) that keep the grid within
// one block per SM (or `units`, when given and no fewer), both slices asked for at once where
// they fit (W2's zero rows over x where only that way: w2_pad_over_x), else W2's after the up
// product (or only that, with late_only), else in fp32 at 1-16 tokens x's exact rows (x_rows;
// passes of 8 rows from 9), W2 late. In bf16 the units are
// rounded up to a multiple of 32 where that still keeps kSliceWideShare of the SMs busy: W1's rows
// of a slice are then 64-byte requests on 64-byte boundaries (24 units: 48 bytes, a third of them
// across two 64-byte halves of a line), and there are fewer shares of y to add (docs/PERFORMANCE.md
// has both measured; at 99 KiB a block, 32 units with W2 late measured faster than 24 with both
// at once and W2's zero rows over x). Where none of those fits in bf16 (x's rows too many: 33-64
// tokens in 99 KiB), the ring form (x_ring, at most 32 units a block: a warp's tiles in one
// accumulator set), W1 resident where it fits (else, or with ring_w1_streamed, W1 in the slots),
// with the most slots that fit, at most kSliceRingMaxStages, at least 2; with ring_only that form
// only (`ring_stages` slots, where given). False when nothing fits.
constexpr double kSliceWideShare = 0.7;
inline bool ffn_slice_choose_form(int64_t m, int64_t c, int elem_bytes, int sms, int smem_optin,
                                  FfnSlicePlan* out, int units, bool late_only, int warps,
                                  bool ring_only, int ring_stages, bool ring_w1_streamed) {
  if (m < 1 || m > kSliceMaxTokens || c < 1 || sms < 1) return false;
  if (warps == 0) warps = ffn_slice_default_warps(m, elem_bytes);
  if (warps != 8 && (warps != 16 || elem_bytes != 2)) return false;
  const int64_t units8 = (4 * c + 7) / 8;
  const int64_t fewest = (units8 + sms - 1) / sms * 8;
  const int64_t first = units > 0 ? units : fewest;
  if (first < fewest || first % 8 != 0 || first > kSliceMaxUnits) return false;
  auto fits = [&](int64_t u, bool late) {
    if (ring_only || (late_only && !late)) return false;
    for (bool pad : {false, true}) {
      if (pad && late) break;
      const FfnSlicePlan p = ffn_slice_plan_for(m, c, elem_bytes, int(u), late, warps, pad);
      if (p.smem + 64 <= size_t(smem_optin)) {  // + 64: the kernel's static shared memory
        *out = p;
        out->share_bytes = warps == 16 ? 2 : ffn_slice_share_bytes(m, elem_bytes);
        return true;
      }
    }
    return false;
  };
  const int64_t wide = (first + 31) / 32 * 32;
  const bool wide_busy = double((4 * c + wide - 1) / wide) >= kSliceWideShare * sms;
  const bool try_wide = units == 0 && elem_bytes == 2 && wide <= kSliceMaxUnits && wide_busy;
  if (try_wide && (fits(wide, false) || fits(wide, true))) return true;
  if (fits(first, false) || fits(first, true)) return true;
  // fp32 at 1-16 tokens: x's exact rows (passes of 8 from 9 tokens) and W1's rows unpadded, W2
  // late over them; in passes, the up product's partial sums (8 warps' of 8 rows) within x's.
  if (elem_bytes == 4 && !ring_only && m <= kSliceFasterTo && warps == 8) {
    const FfnSlicePlan p = ffn_slice_plan_for(m, c, 4, int(first), true, warps, false, true);
    const bool red_over_x = 8 * 8 * p.units <= kSliceRowsTo * p.ld_x;
    if (p.smem + 64 <= size_t(smem_optin) && (m <= kSliceRowsTo || red_over_x)) {
      *out = p;
      out->share_bytes = ffn_slice_share_bytes(m, elem_bytes);
      return true;
    }
  }
  if (elem_bytes != 2 || late_only || ring_stages < 0 || ring_stages == 1 ||
      ring_stages > kSliceRingMaxStages) {
    return false;
  }
  auto ring_fits = [&](int64_t u) {
    if (u > 32) return false;
    for (bool w1_resident : {true, false}) {
      if (w1_resident && ring_w1_streamed) continue;
      for (int s = ring_stages > 0 ? ring_stages : kSliceRingMaxStages; s >= 2; --s) {
        const FfnSlicePlan p = ffn_slice_ring_plan_for(m, c, int(u), warps, s, w1_resident);
        if (p.smem + 64 <= size_t(smem_optin)) {
          *out = p;
          out->share_bytes = warps == 16 ? 2 : ffn_slice_share_bytes(m, elem_bytes);
          return true;
        }
        if (ring_stages > 0) break;
      }
    }
    return false;
  };
  return (try_wide && ring_fits(wide)) || ring_fits(first);
}
inline bool ffn_slice_choose_plan(int64_t m, int64_t c, int elem_bytes, int sms, int smem_optin,
                                  FfnSlicePlan* out, int units = 0, bool late_only = false,
                                  int warps = 0, bool ring_only = false, int ring_stages = 0,
                                  bool ring_w1_streamed = false) {
  if (!ffn_slice_choose_form(m, c, elem_bytes, sms, smem_optin, out, units, late_only, warps,
                             ring_only, ring_stages, ring_w1_streamed)) {
    return false;
  }
  out->prefetch_blocks = out->x_ring ? std::max(0, sms - out->blocks) : 0;
  return true;
}

// The prefetching blocks a launch of plan p may add on `sms` SMs (one block an SM at most).
inline int ffn_slice_prefetch_blocks(const FfnSlicePlan& p, int sms) {
  return std::max(0, sms - p.blocks);
}

// The scratch buffer: the grid barrier's counter (padded to 256 bytes) and the groups' counters
// (kSliceScratchHead in all), zero when allocated, and a partial sum per
// block (blocks x m x C, sized for fp32 shares whatever the plan's, so a tuning may change the
// share's type without a larger buffer).
inline size_t ffn_slice_scratch_bytes_for(const FfnSlicePlan& p) {
  return kSliceScratchHead + sizeof(float) * size_t(p.m) * size_t(p.cp) * size_t(p.blocks) +
         2 * size_t(p.m) * size_t(p.h);  // h in bf16 for the exchange (ffn_slice_exchange)
}

// The ring form's h exchanged in groups (ex_group; FL_FFN_SLICE's twentieth number: 1 on, 2 off;
// ffn_hidden_slice_exchange.cuh): block b of group g = b / G (G consecutive blocks, G of 8, 4 or
// 2, the first that divides the blocks and fits) writes its 32 units of h to L2, and after a
// barrier of the group's blocks multiplies the group's h (m x 32 G) by a tile of W2 (the group's
// 32 G rows x y's columns [cp / G j, cp / G (j + 1)), j = b mod G), one of blocks / G shares of y
// instead of one of `blocks` (at 64 tokens, C = 768: 12 shares, 1.2 MB, against 96 and 9.4 MB).
// The plan's where it has 16 warps (from kSliceWarps16From tokens; make_plan, unless a tuning
// asks for the sum by groups): on the plan's 8 warps a warp's down product is 64-128 mma, slower
// than each block's own share (docs/PERFORMANCE.md has the figures).
constexpr bool kSliceExchange = true;
// only: that group size only (a tuning; 0: the first of 8, 4, 2 that fits).
inline bool ffn_slice_exchange(FfnSlicePlan* p, int only = 0) {
  if (!p->ring_direct || p->share_bytes != 2 || p->units != 32 || p->w2_early_from > 0) {
    return false;
  }
  const size_t e = 2, w1 = e * size_t(p->ring_chunks) * p->ring_k * p->ld_w1;
  const size_t parts = size_t(p->warps / p->mtc) * 16 * p->mtc * 32 * sizeof(float);
  const size_t busy = std::max(w1, parts);  // W1's rows and the up product's parts
  for (int g : {8, 4, 2}) {
    if ((only != 0 && g != only) || p->blocks % g != 0 || p->cp % (8 * g) != 0) continue;
    const int nc = p->cp / g, kh = 32 * g;
    const int ld_w2 = slice::padded_ld(nc, 2), ld_h = slice::padded_ld(kh, 2);
    const size_t hb = e * 16 * p->mtc * ld_h, row = e * size_t(ld_w2), wb = row * kh;
    if (hb + wb > p->off_h) continue;
    const size_t at = (p->off_h - wb) / 16 * 16;
    if (at < hb) continue;
    p->ex_group = g, p->ld_hx = ld_h, p->ld_w2x = ld_w2, p->off_w2x = at;
    p->ex_from = busy <= at ? 0 : int(std::min<size_t>(kh, (busy - at + row - 1) / row));
    return true;
  }
  return false;
}

// Where the sum of y by groups can run: bf16 shares of at most 64 tokens (one 16-byte item a row
// of a tile, a lane a row of a row tile), 8 or 16 warps (warp w on group w % 8; a group's shares,
// blocks / 8, at least 1 and at most 16: 8 loads a lane a row tile), the resident forms or the
// ring's, and the warps' sums meeting in the up product's partial sums' room (8 groups x 16 mtc
// rows x 8 fp32 values: 4 KB a row tile, free once the down product is done).
inline bool ffn_slice_groups_fit(const FfnSlicePlan& p) {
  return p.share_bytes == 2 && p.m <= kSliceMaxTokens && (p.warps == 8 || p.warps == 16) &&
         p.x_rows == 0 && p.blocks >= kSliceGroups && p.blocks <= kSliceGroupBlocks &&
         p.off_red + size_t(8) * 16 * p.mtc * 8 * sizeof(float) <= p.smem;
}

}  // namespace fl
