// The hidden-slice FFN's (kernels/ffn/ffn_hidden_slice.cu) copies of its resident forms: a
// block's slices of the operands asked for into shared memory (x's rows, W1's columns and b1's
// slice as one commit group, W2's rows as another), the rows never copied zeroed, and W2's zero
// rows where they overlay x; the prefetching blocks' requests (a tuning); W1 packed (the setup's
// copy, and which of W1's layouts a launch reads). The ring form's copies are in
// ffn_hidden_slice_ring.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "kernels/ffn/ffn_hidden_slice.h"

#include "kernels/ffn/ffn_hidden_slice_steps.cuh"
#include "kernels/gemm_core/stage_walk.cuh"
#include "kernels/gemm_core/weight_slice.cuh"

namespace fl::hidden_slice {

// slice::stage()'s arguments; on the vector path the thread's offsets stepped by constants
// (slice::stage_stepped, the plan's) unless the plan asks for stage() (stepped_copies off); each
// thread one column where a whole row of chunks fits the block (fixed_column, the plan's).
// kStepped false: stage() only, for the copies inside the ring's chunk loop (a second path
// there doubles the loop's code, 938 -> 1,721 SASS instructions, for forms the plan leaves off).
template <int kThr, bool kStepped = true, typename T>
__device__ __forceinline__ void copy_rows(const FfnSlicePlan& p, T* s, int lds, const T* g,
                                          int64_t ldg, int rows, int cols, int rows_valid,
                                          int cols_valid, bool vec) {
  if (kStepped && vec && p.stepped_copies) {
    slice::stage_stepped<kThr>(s, lds, g, ldg, rows, cols, rows_valid, cols_valid, p.fixed_column);
  } else {
    slice::stage<kThr>(s, lds, g, ldg, rows, cols, rows_valid, cols_valid, vec);
  }
}

// W1's lines of the block's slice asked into L2 (prefetch.global.L2, no data back to the SM)
// before its copies, so that the copies asked for last find them there (w1_l2_ahead, a tuning:
// one 64-byte piece of each of W1's C rows, 3 a thread at 8 warps; measured 0.3-0.5 us slower at
// 16 tokens: docs/PERFORMANCE.md).
template <int kThr, typename T>
__device__ __forceinline__ void w1_into_l2(const SliceArgs<T>& a, int j0) {
  const FfnSlicePlan& p = a.p;
  if (!p.w1_l2_ahead || a.w1p != nullptr) return;
  for (int r = threadIdx.x; r < p.c; r += kThr) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a.w1 + int64_t(r) * p.h + j0));
  }
}

// W1's rows [k0, k0 + rows) of the block's slice (rows past rows_valid zero) into dst: from the
// packed copy where there is one (the block's rows one contiguous run, `units` values a row: a
// warp's 16-byte copies cover 512 contiguous bytes, 4 lines), else from W1's columns (a 64-byte
// piece of each row, 6 KB apart at C = 768). No commit.
template <int kThr, bool kStepped = true, typename T>
__device__ __forceinline__ void stage_w1_rows(const SliceArgs<T>& a, T* dst, int k0, int rows,
                                              int rows_valid, int j0, int valid) {
  const FfnSlicePlan& p = a.p;
  if (a.w1p != nullptr) {
    const T* src = a.w1p + (int64_t(blockIdx.x) * p.c + k0) * p.units;
    copy_rows<kThr, kStepped>(p, dst, p.ld_w1, src, p.units, rows, p.units, rows_valid, p.units,
                              true);
  } else {
    copy_rows<kThr, kStepped>(p, dst, p.ld_w1, a.w1 + int64_t(k0) * p.h + j0, p.h, rows, p.units,
                              rows_valid, valid, a.w1_vec);
  }
}

// W2's rows of the slice (and its zero rows up to kp, but where they overlay x: w2_pad_over_x).
template <int kThr, typename T>
__device__ __forceinline__ void stage_w2(const SliceArgs<T>& a, T* w2s, int j0, int valid) {
  const FfnSlicePlan& p = a.p;
  const int rows = p.w2_pad_over_x ? p.units : p.kp;
  copy_rows<kThr>(p, w2s, p.ld_w2, a.w2 + int64_t(j0) * p.c, p.c, rows, p.cp, valid, p.c, a.w2_vec);
  tc::async_commit();
}

// The up product's operands: b1's slice, x's rows and W1's columns of the block's slice (W1's
// first with w1_first), one commit group.
template <int kThr, typename T>
__device__ __forceinline__ void stage_xw1(const SliceArgs<T>& a, T* xs, T* w1s, T* b1s, int j0,
                                          int valid) {
  const FfnSlicePlan& p = a.p;
  constexpr int E = slice::kChunk<T>;
  w1_into_l2<kThr>(a, j0);
  slice::stage<kThr>(b1s, 0, a.b1 + j0, 0, 1, p.units, 1, valid, a.b1_vec && valid % E == 0);
  const int xr = p.x_rows > 0 ? min(p.m, p.x_rows) : p.m;  // exact rows: the first pass's
  if (p.w1_first) stage_w1_rows<kThr>(a, w1s, 0, p.ck, p.c, j0, valid);
  copy_rows<kThr>(p, xs, p.ld_x, a.x, p.c, xr, p.ck, xr, p.c, a.x_vec);
  if (!p.w1_first) stage_w1_rows<kThr>(a, w1s, 0, p.ck, p.c, j0, valid);
  tc::async_commit();
}

// The rows of x's tiles (or exact rows: x_rows) past the tokens are zero (they are not copied) and
// so are h's padding columns, which meet W2's zero rows (rows of both are whole 16-byte chunks).
template <int kThr, typename T>
__device__ __forceinline__ void zero_padding(const FfnSlicePlan& p, T* xs, T* hs) {
  uint4* zx = reinterpret_cast<uint4*>(xs + p.m * p.ld_x);
  uint4* zh = reinterpret_cast<uint4*>(hs);
  const int x_rows = p.x_rows > 0 ? p.x_rows : 16 * p.mtc;
  const int nx = max(0, x_rows - p.m) * p.ld_x * int(sizeof(T)) / 16;
  const int n = nx + 16 * p.mtc * p.ld_h * int(sizeof(T)) / 16;
  for (int i = threadIdx.x; i < n; i += kThr)
    (i < nx ? zx[i] : zh[i - nx]) = make_uint4(0, 0, 0, 0);
}

// W2's zero rows units..kp-1 where they overlay x (w2_pad_over_x), once every warp is done with
// x and the up product's partial sums over it: the down product's last k step reads them (times
// h's zero columns; zero, not whatever x's bytes would be as bf16, which may be Inf or NaN).
template <int kThr, typename T>
__device__ __forceinline__ void zero_w2_pad(const FfnSlicePlan& p, T* w2s) {
  if (!p.w2_pad_over_x) return;
  __syncthreads();
  uint4* z = reinterpret_cast<uint4*>(w2s + p.units * p.ld_w2);
  const int n = (p.kp - p.units) * p.ld_w2 * int(sizeof(T)) / 16;
  for (int i = threadIdx.x; i < n; i += kThr) z[i] = make_uint4(0, 0, 0, 0);
}

// A block past the plan's (prefetch_blocks of them, on SMs the slices leave idle): its share of
// W2's 128-byte lines asked for into L2 (prefetch, kept with evict_last where sm_80 has it), so
// that the slices' own copies of W2, asked for later, hit L2. No shared memory, no barrier.
template <int kThr, typename T>
__device__ __forceinline__ void prefetch_w2(const SliceArgs<T>& a) {
  const FfnSlicePlan& p = a.p;
  const int64_t lines = (int64_t(p.h) * p.c * int64_t(sizeof(T)) + 127) / 128;
  const int pb = blockIdx.x - p.blocks, n = p.prefetch_blocks;
  const char* base = reinterpret_cast<const char*>(a.w2);
  for (int64_t l = lines * pb / n + threadIdx.x; l < lines * (pb + 1) / n; l += kThr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(base + l * 128));
#else
    asm volatile("prefetch.global.L2 [%0];" ::"l"(base + l * 128));
#endif
  }
}

// W1 packed for the plan's slices: block s's C rows of `units` values (zero past 4C) from s C
// units on. A one-time copy when the weights are set up.
template <typename T>
__global__ void pack_w1_kernel(const T* w1, T* out, int c, int h, int units, int blocks) {
  const int64_t n = int64_t(blocks) * c * units;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int u = int(i % units);
    const int64_t r = i / units;
    const int k = int(r % c), col = int(r / c) * units + u;
    out[i] = col < h ? w1[int64_t(k) * h + col] : Elem<T>::from_float(0.0f);
  }
}

// The packed W1 a launch of plan p reads: b's where the switch is on and it was packed for p's
// slice width (else W1's columns, said once).
template <typename T>
const T* packed_w1_for(const FfnSliceBuffers& b, const FfnSlicePlan& p) {
  if (!ffn_slice_w1_packed() || b.w1_packed == nullptr) return nullptr;
  if (b.w1_packed_units == p.units && reinterpret_cast<uintptr_t>(b.w1_packed) % 16 == 0) {
    return static_cast<const T*>(b.w1_packed);
  }
  static bool said = false;
  if (!said) {
    std::fprintf(stderr, "hidden slice: W1 packed for %d units, the plan takes %d: W1's columns\n",
                 b.w1_packed_units, p.units);
    said = true;
  }
  return nullptr;
}

}  // namespace fl::hidden_slice
