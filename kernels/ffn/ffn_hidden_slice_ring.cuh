// The hidden-slice FFN's ring form (x_ring; kernels/ffn/ffn_hidden_slice.cu, plan in
// ffn_hidden_slice_plan.h): where x's rows do not fit beside the block's slices (an RTX 30/40
// card's 99 KiB a block at 33-64 bf16 tokens: x's 64 rows alone are 96 KB), x streams through a
// cp.async ring in K chunks instead of being held whole. Where W1 is resident, the slice 32 units
// and C a multiple of 8 (the plan's shapes at C = 768), ffn_hidden_slice_direct.cuh replaces the
// ring's up product: x's fragments straight into registers (ring_direct, measured
// faster at 33-64 tokens); ring_issue() then asks for no chunks.
//
// What changes against the resident form: the up product runs chunk by chunk as x's chunks land,
// K split among warps as there (ring_split): warp w takes row tile w % mtc, all of the slice's
// column tiles and part w / mtc of each chunk's 4 k steps, and the parts meet once, after the
// ring (a tuning, as before 2026-11-27: warp w takes row tile w / jr and 1-4 column tiles over all
// of K, jr warps a row tile, no partial sums). The plan's
// form (ring_w1) asks for W1's whole columns before the ring, as the resident form does (all of a
// block's DRAM bytes of W1 in flight at once), and W2's rows over them after the up product.
// Tunings: W2's rows each as soon as every warp is done with the W1 rows under it (at C = 768 all
// 32 by the 11th of 12 chunks; ring_w2_after off), or W1's rows in the slots with x's and a share
// of W2's rows (resident before the ring) asked for with each chunk (ring_w1 off).
// Staggered (ring_stagger, a tuning, off: PERFORMANCE.md's lesson 8) block b takes K's chunks
// from chunk b mod 12 on, and round, so that ~8 of the 96 blocks, not all, ask L2 for a chunk's
// 64 lines of x at once.
// Tiles at C = 768, 64 tokens, 32 units a block (96 blocks on 132 SMs), ring_w1: W1's 768 x 32
// (60 KB with rows padded to 40; W2's 32 x 768 later, 49 KB), 3 slots of x's 64 rows x 64 of K
// (9 KB each, rows padded to 72), h (5 KB) and b1: 92 KB. 12 chunks, two in flight while one is
// multiplied.
// Napkin math at 64 tokens, C = 768: the weights are 9.4 MB (3.1 us at 3 TB/s), 98 KB a block,
// and x's 96 KB comes from L2 to each of the 96 blocks (9.4 MB of L2 reads); a block's copy
// stream is ~195 KB (~8 us at the ~25 GB/s an SM's share of DRAM gives, less where x's part
// comes from L2 faster). The FLOPs: 2 x 64 x 768 x 3072 x 2 = 0.6 GFLOP, 6.3 MFLOP a block
// (1536 mma of m16n8k16), ~2 us at the ~3 TFLOP/s an SM's mma.sync reaches here, half of it
// (the up product) under x's copies. Nsight Compute saw no memory wait in the ring, and x asked
// into L2 ahead of it changed nothing (2026-11-27): a chunk costs its instructions, a warp's
// ~180 for 4 mma before the split at 64 tokens (PERFORMANCE.md), so a warp takes a k step of all
// 4 column tiles (an A fragment and two B fragments for 4 mma); its parts, 32 KB of fp32 at 64
// tokens, meet over W1's columns after the ring. Between a chunk's barrier and its mma a thread
// does no index division: its copies of x's chunk are a walk worked out once a launch
// (gemm_core/stage_walk.cuh), the slots running indices, the warp's ldmatrix addresses worked
// out for slot 0 (where a chunk's time went before and after: lesson 8's ring form in
// docs/PERFORMANCE.md). Beyond that: W2's copy after the up product, and the shares of y, 96 x
// 64 x 768 x 2 B = 9.4 MB written to L2 and read back after the grid barrier, as many bytes as
// the weights.
#pragma once

#include <cuda_runtime.h>

#include "kernels/activations.cuh"
#include "kernels/ffn/ffn_hidden_slice_copies.cuh"
#include "kernels/ffn/ffn_hidden_slice_steps.cuh"
#include "kernels/gemm_core/stage_walk.cuh"
#include "kernels/gemm_core/weight_slice.cuh"

namespace fl::hidden_slice {

// The block's i-th chunk is chunk ring_chunk(p, i, start) of K: from start = b mod ring_chunks
// on, and round, with ring_stagger (so that ~ring_chunks times fewer blocks ask for a chunk's
// lines of x at once; the up product's sum runs over K in that order, fixed a block), else in
// order (start 0). ring_start() works start out once a launch (a division).
__device__ __forceinline__ int ring_start(const FfnSlicePlan& p) {
  return p.ring_stagger ? int(blockIdx.x % unsigned(p.ring_chunks)) : 0;
}
__device__ __forceinline__ int ring_chunk(const FfnSlicePlan& p, int i, int start) {
  const int k = i + start;
  return k < p.ring_chunks ? k : k - p.ring_chunks;
}

// Slot `slot` of the ring: x's rows of a chunk; W1's rows of K chunk kc (resident with ring_w1,
// else in the slot after x's). The callers keep the slot as a running index (no i % stages).
template <typename T>
__device__ __forceinline__ T* ring_x(const FfnSlicePlan& p, unsigned char* smem, int slot) {
  return reinterpret_cast<T*>(smem + p.off_x + size_t(slot) * p.ring_stage_bytes);
}
template <typename T>
__device__ __forceinline__ T* ring_w1(const FfnSlicePlan& p, unsigned char* smem, int kc,
                                      int slot) {
  if (p.ring_w1) return reinterpret_cast<T*>(smem + p.off_w1) + kc * p.ring_k * p.ld_w1;
  return reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(ring_x<T>(p, smem, slot)) +
                              p.ring_x_bytes);
}

// The thread's 16-byte chunks of a slot's x (m rows x ring_k), worked out once a launch
// (gemm_core/stage_walk.cuh): at most 64 rows x 8 chunks over the block's threads.
template <int kThr, typename T>
constexpr int kRingXWalkMax = (kSliceMaxTokens * kSliceRingK / slice::kChunk<T> + kThr - 1) / kThr;
template <int kThr, typename T>
__device__ __forceinline__ slice::Walk<kRingXWalkMax<kThr, T>> ring_x_walk(const FfnSlicePlan& p) {
  return slice::walk<kThr, kRingXWalkMax<kThr, T>, T>(p.ld_xr, p.c, p.m, kSliceRingK);
}

// W2's rows [r0, r1) of the block's slice (its zero rows past the slice, to kp, zero), no commit.
// kStepped: as copy_rows' (false inside the chunk loop).
template <int kThr, bool kStepped = true, typename T>
__device__ __forceinline__ void ring_w2_rows(const SliceArgs<T>& a, unsigned char* smem, int r0,
                                             int r1, int j0, int valid) {
  const FfnSlicePlan& p = a.p;
  if (r1 <= r0) return;
  T* w2s = reinterpret_cast<T*>(smem + p.off_w2) + r0 * p.ld_w2;
  const int rows_valid = valid - r0;
  const T* src = rows_valid > 0 ? a.w2 + int64_t(j0 + r0) * p.c : a.w2;
  copy_rows<kThr, kStepped>(p, w2s, p.ld_w2, src, p.c, r1 - r0, p.cp, rows_valid, p.c, a.w2_vec);
}

// The block's i-th chunk's copies into slot `slot` (x's columns by the walk xw; by stage() where
// C is odd, element by element, or with ring_walk off; without ring_w1 W1's rows and W2's i-th
// share of rows) as one commit group; past the last chunk an empty group, so that every thread
// counts the same groups.
template <int kThr, typename T, class XWalk>
__device__ __forceinline__ void ring_stage(const SliceArgs<T>& a, unsigned char* smem,
                                           const XWalk& xw, int i, int slot, int start, int j0,
                                           int valid) {
  const FfnSlicePlan& p = a.p;
  if (i < p.ring_chunks) {
    const int kc = ring_chunk(p, i, start), k0 = kc * p.ring_k;
    const int kv = min(p.ring_k, p.c - k0);  // kv >= 1: k0 < ck <= c + 15
    T* xs = ring_x<T>(p, smem, slot);
    if (a.x_vec && p.ring_walk) {
      slice::stage_at(xw, xs, a.x + k0, p.m, kv);
    } else {
      slice::stage<kThr>(xs, p.ld_xr, a.x + k0, p.c, p.m, p.ring_k, p.m, kv, a.x_vec);
    }
    if (p.ring_w1) return tc::async_commit();
    stage_w1_rows<kThr, false>(a, ring_w1<T>(p, smem, kc, slot), k0, p.ring_k, kv, j0, valid);
    ring_w2_rows<kThr, false>(a, smem, p.kp * i / p.ring_chunks, p.kp * (i + 1) / p.ring_chunks, j0,
                              valid);
  }
  tc::async_commit();
}

// b1's slice (and with ring_w1 W1's whole columns) as one commit group, then the first
// ring_stages - 1 chunks' copies; the slots' x rows past the tokens (never copied) and h zeroed.
template <int kThr, typename T>
__device__ __forceinline__ void ring_issue(const SliceArgs<T>& a, unsigned char* smem, T* hs,
                                           int j0, int valid) {
  const FfnSlicePlan& p = a.p;
  constexpr int E = slice::kChunk<T>;
  T* b1s = reinterpret_cast<T*>(smem + p.off_bias);
  slice::stage<kThr>(b1s, 0, a.b1 + j0, 0, 1, p.units, 1, valid, a.b1_vec && valid % E == 0);
  if (p.ring_w1) {
    stage_w1_rows<kThr>(a, reinterpret_cast<T*>(smem + p.off_w1), 0, p.ring_chunks * p.ring_k, p.c,
                        j0, valid);
    // ring_direct with W2's last rows in the unused slots (ffn_slice_w2_early): those now.
    if (p.w2_early_from > 0) ring_w2_rows<kThr>(a, smem, p.w2_early_from, p.kp, j0, valid);
  }
  tc::async_commit();
  const auto xw = ring_x_walk<kThr, T>(p);
  const int start = ring_start(p);
  // ring_direct (ffn_hidden_slice_direct.cuh): no slots of x, so no chunks and no zero rows.
  const int slots = p.ring_direct ? 0 : p.ring_stages;
  for (int i = 0; i + 1 < slots; ++i) ring_stage<kThr>(a, smem, xw, i, i, start, j0, valid);
  const int row_chunks = p.ld_xr * int(sizeof(T)) / 16, pad_rows = 16 * p.mtc - p.m;
  const int nx = p.ring_direct ? 0 : pad_rows * row_chunks, per_slot = nx;
  const int n = p.ring_stages * per_slot + 16 * p.mtc * p.ld_h * int(sizeof(T)) / 16;
  uint4* zh = reinterpret_cast<uint4*>(hs);
  for (int i = threadIdx.x; i < n; i += kThr) {
    if (i < p.ring_stages * per_slot) {
      uint4* zx = reinterpret_cast<uint4*>(ring_x<T>(p, smem, i / per_slot) + p.m * p.ld_xr);
      zx[i % per_slot] = make_uint4(0, 0, 0, 0);
    } else {
      zh[i - p.ring_stages * per_slot] = make_uint4(0, 0, 0, 0);
    }
  }
}

// h[:, slice] = GELU(x W1[:, slice] + b1) through the ring: chunk i is multiplied once every
// thread's copies of it are in (and the group before the ring's: b1, W1 with ring_w1), after
// chunk i + stages - 1 is asked for into the slot chunk i - 1 left (with ring_w1, with it W2's
// rows that now lie over W1's rows of chunks every warp is done with; the rest once h is
// written: all of W2's asked for by the end). first_in() runs once the first chunk is in.
// Split (ring_split, the plan's): warp w takes row tile w % mtc, every column tile of the slice
// and its part w / mtc of each chunk's 4 k steps (one step a chunk at 64 tokens on 16 warps:
// an A fragment, two B fragments and 4 mma, no per-tile tests); the parts meet once, after the
// ring, in shared memory over W1's columns (slice::reduce_parts). Else warp w takes row tile
// w / jr and column tiles [per q, per (q + 1)) over all of K (q = w % jr; jr of 1, 2 or 4 warps a
// row tile): at 64 tokens one tile a warp, 4 mma a chunk behind ~180 instructions (the profile
// in docs/PERFORMANCE.md). Ends with the block synchronized, h written.
template <int kW, typename T, class FirstIn>
__device__ __forceinline__ void ring_up_product(const SliceArgs<T>& a, unsigned char* smem, T* hs,
                                                int j0, int valid, const FirstIn& first_in) {
  constexpr int kThr = 32 * kW, kSteps = kSliceRingK / 16;
  const FfnSlicePlan& p = a.p;
  const int tiles = p.units / 8, warp = threadIdx.x >> 5;
  int jr = 4;
  while (jr > 1 && jr * p.mtc > kW) jr /= 2;
  const int per = (tiles + jr - 1) / jr;
  const slice::PanelWarp pw = slice::panel_warp<kW>(p.mtc);
  // The warp's row tile, first column tile, column tiles, and k steps [s0, s1) of a chunk.
  const int mt = p.ring_split ? pw.mt : warp / jr, nt0 = p.ring_split ? 0 : (warp % jr) * per;
  int ntc = p.ring_split ? tiles : mt < p.mtc ? max(0, min(per, tiles - nt0)) : 0;
  const int s0 = !p.ring_split ? 0 : pw.part < pw.parts ? kSteps * pw.part / pw.parts : kSteps;
  const int s1 = !p.ring_split        ? kSteps
                 : pw.part < pw.parts ? kSteps * (pw.part + 1) / pw.parts
                                      : kSteps;
  if (s1 == s0) ntc = 0;
  float acc[4][4];
  slice::zero(acc);
  // ring_w1: W2's rows overlay W1's columns; those wholly within W1's rows of the chunks every
  // warp is done with are asked for with the next chunk's copies (unless ring_w2_after).
  const int w1_chunk_bytes = p.ring_k * p.ld_w1 * int(sizeof(T));
  const int w2_row_bytes = p.ld_w2 * int(sizeof(T));
  int w2_asked = 0;
  // Worked out once, not a chunk: the thread's copies of x's chunk (the walk), the chunk order's
  // start, and the warp's ldmatrix lane addresses in slot 0 and W1's chunk 0 (a slot is
  // ring_stage_bytes on, a resident chunk of W1 w1_chunk_bytes); the slots as running indices.
  using Mma = slice::WarpMma<T, 4>;
  const auto xw = ring_x_walk<kThr, T>(p);
  const int start = ring_start(p);
  const unsigned slot_bytes = unsigned(p.ring_stage_bytes), b_step = 16u * p.ld_w1 * sizeof(T);
  const unsigned a0 = Mma::a_lane(ring_x<T>(p, smem, 0) + mt * 16 * p.ld_xr, p.ld_xr, 16 * s0);
  const unsigned b0 = Mma::b_lane(ring_w1<T>(p, smem, 0, 0) + nt0 * 8, p.ld_w1, 16 * s0);
  int take = 0, fill = p.ring_stages - 1;  // the slots of chunk i and of chunk i + stages - 1
  for (int i = 0; i < p.ring_chunks; ++i) {
    slice::wait_pending<kSliceRingMaxStages - 2>(p.ring_stages - 2);  // chunk i is in
    __syncthreads();  // ... every thread's part of it; every warp done with chunk i - 1's slot
    if (i == 0) first_in();
    if (p.ring_w1 && !p.ring_w2_after) {
      const int free_rows = min(p.kp, i * w1_chunk_bytes / w2_row_bytes);
      ring_w2_rows<kThr, false>(a, smem, w2_asked, free_rows, j0, valid);
      w2_asked = max(w2_asked, free_rows);
    }
    ring_stage<kThr>(a, smem, xw, i + p.ring_stages - 1, fill, start, j0, valid);
    if (ntc > 0) {
      const unsigned b = p.ring_w1 ? b0 + unsigned(ring_chunk(p, i, start) * w1_chunk_bytes)
                                   : b0 + take * slot_bytes;
      if (ntc == 4) {  // every tile (32 units: the plan's slice)
        Mma::run_all_at(acc, a0 + take * slot_bytes, b, b_step, s1 - s0);
      } else {
        Mma::run_at(acc, ntc, a0 + take * slot_bytes, b, b_step, 0, 16 * (s1 - s0));
      }
    }
    take = take + 1 == p.ring_stages ? 0 : take + 1;
    fill = fill + 1 == p.ring_stages ? 0 : fill + 1;
  }
  // h's rows past the tokens and columns past the slice stay zero (ring_issue).
  const T* b1s = reinterpret_cast<const T*>(smem + p.off_bias);
  const auto to_h = [&](int row, int col, float s) {
    const float v = col < valid ? gelu_tanh_fast(s + Elem<T>::to_float(b1s[col])) : 0.0f;
    hs[row * p.ld_h + col] = Elem<T>::from_float(v);
  };
  if (p.ring_split) {  // the parts meet over W1's columns (every warp done with them first)
    slice::reduce_parts<4, kW>(acc, pw, p.mtc, tiles, reinterpret_cast<float*>(smem + p.off_red),
                               to_h, p.m);
  } else {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      if (nt >= ntc) break;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = mt * 16 + g + 8 * (e >> 1), col = (nt0 + nt) * 8 + 2 * t + (e & 1);
        if (row < p.m) to_h(row, col, acc[nt][e]);
      }
    }
    __syncthreads();  // h written; every warp done with W1
  }
  if (p.ring_w1) {  // the rest of W2's rows (all of them with ring_w2_after)
    ring_w2_rows<kThr>(a, smem, w2_asked, p.kp, j0, valid);
    tc::async_commit();
  }
}

}  // namespace fl::hidden_slice
