// The hidden slice's ring form with h exchanged in groups of blocks (ex_group; plan
// ffn_slice_exchange in ffn_hidden_slice_plan.h, FL_FFN_SLICE's twentieth number): fewer,
// larger shares of y.
//
// Against a share a block (ring_direct's, ffn_hidden_slice_direct.cuh, then the down product on
// the block's own 32 units; the plan's at 33-48 tokens): there each of the 96 blocks at 64 tokens
// (C = 768) multiplies its own h (64 x 32) by its own W2 rows (32 x 768) into a whole 64 x 768
// share of y, so 96 shares, 9.4 MB of bf16, are written to L2 and read back by the sum, as many
// bytes as the weights (the phases at 64 tokens: down product 3.4 us, hand-over 1.1, sum 3.3). Here
// block b of group g = b / G (G = 8 consecutive blocks at C = 768) writes its h (64 x 32, 4 KB) to
// L2, meets its group's blocks at a count barrier (count_barrier.cuh, the group's own counter),
// reads the group's h (64 x 256, 32 KB from L2) and multiplies it by a tile of W2: the group's 256
// rows x y's columns [96 j, 96 j + 96), j = b mod G (48 KB, the same DRAM bytes as its 32 rows x
// 768). Its result is block j's part of share g, one of 12 shares (1.2 MB in all); after the grid
// barrier block b adds the 12 shares of y's 8-column tile b (sum_tiles, as before). Tiles at 64
// tokens, C = 768, 16 warps, 99 KiB: the up product as ring_direct's (x's fragments from L2 into
// registers, W1's 768 x 32 resident, 60 KB), h's parts over W1; then [the group's h 64 x 264 (33
// KB) | W2's tile 256 x 104 (53 KB) ending where h's own tile (unused here) and b1 begin]: the
// tile's rows 124-255 lie past W1 and the parts and are asked for with W1, rows 0-123 once the
// parts are added. Down product: warp w takes row tile w / 4 and 3 of the tile's 12 column tiles
// over K = 256 (16 k steps, 48 mma), stored as bf16 pairs into share g. Bytes a block: W1 48 KB +
// W2 48 KB from DRAM, x 96 KB and the group's h 32 KB from L2, h 4 KB and a 12 KB part of a share
// out, 12 KB of shares in for the sum; GPU-wide 3.1 MB of h reads and 1.2 MB of shares each way in
// place of 9.4 MB each way. Budget after the up product: h out and the group's barrier (~1 us), h's
// L2 round trip (~0.5-1 us), 48 mma a warp (~0.5 us), the grid barrier (~1 us), one batch of the
// sum's loads (~0.7 us): ~4-5 us where the shares' chain took ~8 us. The plan's on 16 warps at
// 49-64 tokens (on 8 warps at 33-48 each warp's down product is 64-128 mma: a share a block
// stays). Its own kernel: inlined into the plan's ring kernel it pushed that kernel's 16-warp form
// into more spills. The down product's index math runs between the block's arrival at the
// group's barrier and its wait (ffn_hidden_slice_exchange_down.cuh; FL_FFN_EX_DOWN=0 the general
// loop). docs/PERFORMANCE.md has each step measured.
// The plan at 49-64 tokens, C = 768, 16 warps (as an RTX card plans it in 99 KiB) runs a second
// instance with every field but m as constants (kFixed; ffn_hidden_slice_fixed.h's
// ffn_slice_fix_rtx64; FL_FFN_EX_FIXED=0: the general instance), whose copies go in another
// order so that DRAM serves W1's 4.7 MB (~1.6 us at ~3 TB/s) alone before W2's, which then come
// under the up product: x's first batch of loads is asked for first (ex_up,
// direct::load_batch_in), then b1 and W1; W2's tile rows past W1 (ex_w2_rows_fixed, compile-time
// offsets, no loops) and the tile's other rows into L2 (ex_w2_prefetch_fixed, 124 rows x 192
// bytes a block) once W1 is in, just after x's second batch of loads, so that batch leaves right
// after W1's barrier. Its launch has no prefetching blocks. Its up product is a warp's 6 groups of
// 32 (C = 768 in 24 groups, 4 parts of K) as two batches unrolled (direct::warp_product_two: no
// loop, no copies of a batch, loads without tests), and the parts meet in rows swizzled against
// bank conflicts (ex_reduce_parts: 2 shared wavefronts a 64-bit store, where reduce_parts'
// 128-byte rows take 8). docs/PERFORMANCE.md has the orders and forms measured, with the
// registers and instruction counts.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/activations.cuh"
#include "kernels/ffn/count_barrier.cuh"
#include "kernels/ffn/direct_x.cuh"
#include "kernels/ffn/ffn_hidden_slice_exchange_down.cuh"
#include "kernels/ffn/ffn_hidden_slice_fixed.h"
#include "kernels/ffn/ffn_hidden_slice_copies.cuh"
#include "kernels/ffn/ffn_hidden_slice_groups.cuh"
#include "kernels/ffn/ffn_hidden_slice_ring.cuh"
#include "kernels/ffn/ffn_hidden_slice_steps.cuh"
#include "kernels/gemm_core/weight_slice.cuh"
#include "kernels/phases.cuh"

namespace fl::hidden_slice {

// The kernel's phases (ffn_hidden_slice.cu's, in its order): the marks the exchange sets.
enum ExchangePhase : unsigned { kExIssue, kExXW1In, kExUp, kExW2In, kExDown, kExHandOver, kExSum };

// h (m x 4C, bf16) in the scratch past the fp32-sized shares (ffn_slice_scratch_bytes_for).
template <typename T>
__device__ __forceinline__ T* ex_h(const SliceArgs<T>& a) {
  const FfnSlicePlan& p = a.p;
  return reinterpret_cast<T*>(reinterpret_cast<char*>(a.partial) +
                              sizeof(float) * size_t(p.m) * p.cp * p.blocks);
}

// W2's tile rows [r0, r1): W2[kh g + r, n0 .. n0 + nc) into the tile (row stride ld_w2x), no
// commit.
template <int kThr, typename T>
__device__ __forceinline__ void ex_w2_rows(const SliceArgs<T>& a, unsigned char* smem,
                                           const ExTile& t, int r0, int r1) {
  const FfnSlicePlan& p = a.p;
  if (r1 <= r0) return;
  T* w2s = reinterpret_cast<T*>(smem + p.off_w2x) + r0 * p.ld_w2x;
  const T* src = a.w2 + int64_t(t.kh * t.g + r0) * p.c + t.n0;
  slice::stage<kThr>(w2s, p.ld_w2x, src, p.c, r1 - r0, t.nc, r1 - r0, t.nc, true);
}

// ex_w2_rows for the fixed plan (ffn_slice_fix_rtx64: nc = 96 values, 12 16-byte chunks a row,
// C = 768, ld_w2x = 104), rows [kR0, kR1) as compile-time numbers: thread i < 504 takes chunk
// i mod 12 of rows kR0 + i / 12 + 42 k, unrolled, each copy its first one's addresses plus
// constants (no loop, no division past the first). ex_w2_prefetch_fixed: W2's tile rows [0,
// kRows) asked into L2 (no shared memory), one 128-byte line a thread (a row's 192 bytes start 0
// or 64 bytes past a line at C = 768 and a 128-byte aligned W2: two lines).
template <int kThr, int kR0, int kR1, typename T>
__device__ __forceinline__ void ex_w2_rows_fixed(const SliceArgs<T>& a, unsigned char* smem,
                                                 const ExTile& t) {
  constexpr int kE = 16 / int(sizeof(T)), kCh = 96 / kE, kStep = kThr / kCh, kRows = kR1 - kR0;
  const FfnSlicePlan& p = a.p;
  const int i = threadIdx.x, r = i / kCh, c = i - r * kCh;
  if (i >= kStep * kCh) return;
  T* dst = reinterpret_cast<T*>(smem + p.off_w2x) + (kR0 + r) * p.ld_w2x + c * kE;
  const T* src = a.w2 + int64_t(t.kh * t.g + kR0 + r) * p.c + t.n0 + c * kE;
#pragma unroll
  for (int k = 0; k * kStep < kRows; ++k) {
    if (r + k * kStep < kRows)
      tc::copy16_async(dst + k * kStep * p.ld_w2x, src + k * kStep * p.c, true);
  }
}
template <int kThr, int kRows, typename T>
__device__ __forceinline__ void ex_w2_prefetch_fixed(const SliceArgs<T>& a, const ExTile& t) {
  static_assert(2 * kRows <= kThr, "a line a thread");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int i = threadIdx.x;
  if (i < 2 * kRows) {
    const uintptr_t from =
        reinterpret_cast<uintptr_t>(a.w2 + int64_t(t.kh * t.g + (i >> 1)) * a.p.c + t.n0);
    const uintptr_t at = (i & 1) ? (from & ~uintptr_t(127)) + 128 : from;
    asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(at));
  }
#endif
}

// The up product's warp (ring_direct's): its row tile, its K groups [q0, q1) and its lanes' rows
// of x.
struct ExUp {
  slice::PanelWarp pw;
  int q0, q1;
  direct::XLane l;
};
template <int kW, typename T>
__device__ __forceinline__ ExUp ex_up(const SliceArgs<T>& a) {
  const FfnSlicePlan& p = a.p;
  ExUp u;
  u.pw = slice::panel_warp<kW>(p.mtc);
  const int groups = (p.c + direct::kGroupK - 1) / direct::kGroupK;
  u.q0 = u.pw.part < u.pw.parts ? groups * u.pw.part / u.pw.parts : 0;
  u.q1 = u.pw.part < u.pw.parts ? groups * (u.pw.part + 1) / u.pw.parts : 0;
  u.l = direct::x_lane(a.x, p.c, p.m, u.pw.mt);
  return u;
}

// The up product's parts meet (slice::reduce_parts with 4 column tiles: rows of 32 floats, one
// part after another in red), each row's 16 float2 slots XOR-swizzled by (row & 3) << 2: a warp's
// 64-bit stores (rows g, g + 8, slots t of a column tile) fall on distinct banks in each half-warp,
// 2 wavefronts a store where 128-byte rows put the 8 rows g on the same banks (8). Then epi(row,
// col, sum) for the first row_count rows; ends with the block synchronized.
template <int kW, class Epilogue>
__device__ __forceinline__ void ex_reduce_parts(const float (&acc)[4][4], slice::PanelWarp pw,
                                                int mtc, float* red, const Epilogue& epi,
                                                int row_count) {
  constexpr int kCols = 32;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, rows = 16 * mtc;
  const auto at = [](int row, int slot) { return row * kCols + 2 * (slot ^ ((row & 3) << 2)); };
  __syncthreads();  // every warp is done with W1: red overlays it
  if (pw.part < pw.parts) {
    float* mine = red + pw.part * rows * kCols;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int row = pw.mt * 16 + g + 8 * e;
        *reinterpret_cast<float2*>(mine + at(row, 4 * nt + t)) =
            make_float2(acc[nt][2 * e], acc[nt][2 * e + 1]);
      }
    }
  }
  __syncthreads();
  const int used = min(rows, row_count) * kCols;
  for (int e = threadIdx.x; e < used; e += 32 * kW) {
    const int row = e / kCols, col = e % kCols, from = at(row, col >> 1) + (col & 1);
    float s = 0.0f;
    for (int q = 0; q < pw.parts; ++q) s += red[q * rows * kCols + from];
    epi(row, col, s);
  }
  __syncthreads();
}

// The group's share: warp w takes jobs w, w + kW, ... of (row tile, cpj column tiles) over the
// group's K, stored as bf16 pairs into share g (tile by tile: share_at), rows past the tokens
// left out (their rows of h were never copied: what they hold only reaches those rows).
template <int kW, typename T>
__device__ __forceinline__ void ex_down(const SliceArgs<T>& a, const T* hx, const T* w2x,
                                        const ExTile& t) {
  using S = __nv_bfloat16;
  const FfnSlicePlan& p = a.p;
  const ExJobs s = ex_jobs<kW>(p, t);
  const int nct = s.nct, cpj = s.cpj, col_jobs = s.col_jobs;
  const int lane = threadIdx.x & 31, gr = lane >> 2, tc2 = 2 * (lane & 3);
  S* shares = reinterpret_cast<S*>(a.partial);
  for (int job = threadIdx.x >> 5; job < p.mtc * col_jobs; job += kW) {
    const int mt = job / col_jobs, ct0 = (job % col_jobs) * cpj, tiles = min(cpj, nct - ct0);
    float acc[4][4];
    slice::zero(acc);
    slice::WarpMma<T, 4>::run(acc, tiles, hx + mt * 16 * p.ld_hx, p.ld_hx, w2x + ct0 * 8, p.ld_w2x,
                              0, t.kh);
    const int row = mt * 16 + gr;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      if (nt >= tiles) break;
      const int col = t.n0 + (ct0 + nt) * 8 + tc2;
      if (row < p.m) {
        *reinterpret_cast<__nv_bfloat162*>(shares + share_at<S>(p, t.g, row, col)) =
            __floats2bfloat162_rn(acc[nt][0], acc[nt][1]);
      }
      if (row + 8 < p.m) {
        *reinterpret_cast<__nv_bfloat162*>(shares + share_at<S>(p, t.g, row + 8, col)) =
            __floats2bfloat162_rn(acc[nt][2], acc[nt][3]);
      }
    }
  }
}

// The whole launch after ring_issue (b1 and W1 asked for): W2's tile rows past W1 and the parts
// with them, the up product as ring_direct's with h to L2, W2's other rows, the group's barrier,
// the group's h, the down product into share g, the grid barrier and the sum of the shares.
// kAhead: the down product's index math between the block's arrival at the group's barrier and
// its wait, and its fast path where it applies (ffn_hidden_slice_exchange_down.cuh); else
// ex_down's general loop after h lands (the form measured before, FL_FFN_EX_DOWN=0).
// kFixed: x's first batch (x0, up) came with the launch's first instructions, and W2's tile rows
// past W1 are asked for once W1 is in, its other rows asked into L2 then (no prefetching blocks):
// DRAM serves W1 alone first. Else up and x0 are worked out here and the rows come with W1.
template <int kW, bool kAhead, bool kFixed, typename T, class Marks>
__device__ __forceinline__ void exchange_form(const SliceArgs<T>& a, unsigned char* smem,
                                              const Bias8<T>& b2_raw, ExUp up,
                                              direct::Rows (&x0)[direct::kBatch], Marks& marks) {
  using S = __nv_bfloat16;
  constexpr int kThr = 32 * kW;
  const FfnSlicePlan& p = a.p;
  const ExTile t = ex_tile(p);
  if constexpr (!kFixed) {
    ex_w2_rows<kThr>(a, smem, t, p.ex_from, t.kh);
    tc::async_commit();
  }
  SumLane sum = sum_lane<kThr, S>(a);
  pin(sum.item), pin(sum.part), pin(sum.split), pin(sum.loads), pin(sum.src), pin(sum.step);
  pin(sum.apart);
  marks.mark(kExIssue);
  float b2_first[8];
  // The up product (ring_direct's): x's fragments from L2, W1's columns resident.
  if constexpr (!kFixed) {
    up = ex_up<kW>(a);
    direct::load_batch(x0, up.l, up.q0, up.q1, p.c);
  }
  float acc[4][4];
  slice::zero(acc);
  const auto ready = [&] {
    tc::async_wait<0>();  // b1, W1 (else: and the tile's rows)
    __syncthreads();
    marks.mark(kExXW1In);
    bias8_floats(b2_raw, b2_first);
  };
  const auto between = [&] {  // kFixed: W2's asks after x's second batch of loads
    if constexpr (kFixed) {   // the plan's ex_from = 124, kh = 256
      ex_w2_rows_fixed<kThr, 124, 256>(a, smem, t);
      tc::async_commit();
      ex_w2_prefetch_fixed<kThr, 124>(a, t);
    }
  };
  const T* w1s = reinterpret_cast<const T*>(smem + p.off_w1);
  if constexpr (kFixed) {  // 6 groups a warp: two batches, unrolled
    direct::warp_product_two<4>(acc, up.l, x0, up.q0, w1s, p.ld_w1, ready, between);
  } else {
    direct::warp_product_from<4>(acc, up.l, x0, p.c, up.q0, up.q1, w1s, p.ld_w1, p.direct_deep,
                                 ready);
  }
  const T* b1s = reinterpret_cast<const T*>(smem + p.off_bias);
  T* h = ex_h(a) + int64_t(blockIdx.x) * p.units;  // the block's columns of h in L2
  const int valid = min(p.units, p.h - int(blockIdx.x) * p.units);
  const auto to_h = [&](int row, int col, float v) {
    if (col < valid) {
      h[int64_t(row) * p.h + col] =
          Elem<T>::from_float(gelu_tanh_fast(v + Elem<T>::to_float(b1s[col])));
    }
  };
  if constexpr (kFixed) {
    ex_reduce_parts<kW>(acc, up.pw, p.mtc, reinterpret_cast<float*>(smem), to_h, p.m);
  } else {
    slice::reduce_parts<4, kW>(acc, up.pw, p.mtc, 4, reinterpret_cast<float*>(smem), to_h, p.m);
  }
  marks.mark(kExUp);
  if constexpr (kFixed) {
    ex_w2_rows_fixed<kThr, 0, 124>(a, smem, t);
  } else {
    ex_w2_rows<kThr>(a, smem, t, 0, p.ex_from);  // over W1 and the parts
  }
  tc::async_commit();
  // The group's h is in L2 before any of its blocks reads it (the group's own counter).
  T* hx = reinterpret_cast<T*>(smem);
  const T* w2x = reinterpret_cast<const T*>(smem + p.off_w2x);
  unsigned* group = group_counter(a.counters, kSliceGroups + t.g);
  const CountTicket ticket = count_arrive(group, unsigned(p.ex_group), t.j == 0, true);
  ExDownAhead d{};
  ExHCopy<T> hc{};
  if constexpr (kAhead)
    d = ex_down_ahead<kW>(a, hx, w2x, t), hc = ex_h_copy_ahead<kThr>(p, ex_h(a), hx, t);
  count_wait(group, ticket, true);
  if (kAhead && hc.fast) {
    ex_h_copy(hc);
  } else {
    slice::stage<kThr>(hx, p.ld_hx, ex_h(a) + t.kh * t.g, p.h, p.m, t.kh, p.m, t.kh, true);
  }
  tc::async_commit();
  tc::async_wait<0>();
  __syncthreads();
  marks.mark(kExW2In);
  if (kAhead && d.fast) {
    ex_down_fast<T>(d);
  } else {
    ex_down<kW>(a, hx, w2x, t);
  }
  marks.mark(kExDown);
  // Every group's share written before any block adds them (count_barrier.cuh).
  count_barrier(a.counters, p.blocks, blockIdx.x == 0, p.barrier_acq_rel);
  marks.mark(kExHandOver);
  sum_tiles<S>(a, sum, b2_first);
  marks.mark(kExSum);
}

// The launch (a kernel of its own, so that the other forms' kernels keep their registers): the
// blocks past the plan's prefetch W2 into L2 and leave; the others ask for b2's first tile, b1
// and W1 (ring_issue) and go on as exchange_form. kFixed (16 warps): the 49-64-token RTX plan's
// fields and the launch's vector flags as constants (ffn_hidden_slice_fixed.h's
// ffn_slice_fix_rtx64), where the launch found them equal (FL_FFN_EX_FIXED=0: never); its launch
// has no prefetching blocks, and x's first batch of loads comes first, before b2 and W1.
template <typename T, int kW, bool kAhead = true, bool kFixed = false>
__global__ void __launch_bounds__(32 * kW, 1) ffn_hidden_slice_exchange_kernel(SliceArgs<T> a) {
  if constexpr (kFixed) {
    ffn_slice_fix_rtx64(a.p);
    ffn_slice_fix_args(a);
  }
  constexpr int kThr = 32 * kW;
  extern __shared__ __align__(16) unsigned char smem[];
  const FfnSlicePlan& p = a.p;
  if (blockIdx.x >= p.blocks) {
    if constexpr (!kFixed) prefetch_w2<kThr>(a);
    return;
  }
  PhaseMarks<kExSum + 1> marks(a.phases);
  ExUp up{};
  direct::Rows x0[direct::kBatch];
  if constexpr (kFixed) {
    up = ex_up<kW>(a);
    direct::load_batch_in(x0, up.l, up.q0);  // C = 768: every group inside C
  }
  const Bias8<T> b2_raw = load_bias8(a, blockIdx.x);
  const int j0 = blockIdx.x * p.units;
  ring_issue<kThr>(a, smem, reinterpret_cast<T*>(smem + p.off_h), j0, min(p.units, p.h - j0));
  exchange_form<kW, kAhead, kFixed>(a, smem, b2_raw, up, x0, marks);
}

}  // namespace fl::hidden_slice
