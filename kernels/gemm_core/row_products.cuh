// Exact-row fp32 products for the weight-slice kernels at a few tokens (1 to kRowsMax), on the
// CUDA cores. What changes against weight_slice.cuh's WarpMma<float>: there a warp computes a
// 16-row tile in the mma register layout, so at one token 15 of every 16 FMAs multiply a zero
// row of x (or h) and every weight element is read once per 16 rows; here a lane owns weight
// columns and multiplies only the m real rows, each weight element read from shared memory once
// and each activation a broadcast.
//
//   up_part():   acc[r][i] += A[r, lo..hi) B[lo..hi, lane + 32 i] for r < m: a warp's share of
//                K (its part of the split), columns lane and lane + 32 (up to 64 columns).
//   up_reduce(): the warps' parts meet in shared memory (kWarps x m x cols floats, overlaying
//                the operands after a block barrier); epi(row, col, sum) once for each.
//   down_rows(): out[r, 4 q..4 q + 4) = sum_j H[r, j] W[j, 4 q..) for r < m, a thread a 16-byte
//                column group of W's rows (float4 loads), j over all of K (no split, no
//                reduction), stored as float4.
// Budget at one token, C = 768, 24 columns of W1 a block: the up product is 768 x 24 FMAs a
// block (72 a thread, ~100 instructions a lane with the loads) against WarpMma's 16 x 768 x 24;
// the down product 24 x 768 (one float4 of W2 and one broadcast of h per FMA quad) against
// 16 x 24 x 768: well under 0.5 us of issue each, where the 16-row tiles take ~1.5 us each.
#pragma once

#include <cuda_runtime.h>

#include "kernels/device_common.cuh"
#include "kernels/gemm_core/slice_plan.h"

namespace fl::slice {

constexpr int kRowsMax = 8;  // tokens at most for the exact-row products

// Warp w's share of [0, K) when K is split into kWarps parts (any K, no step).
__device__ __forceinline__ void warp_part(int k, int* lo, int* hi) {
  const int w = threadIdx.x >> 5;
  *lo = k * w / kWarps;
  *hi = k * (w + 1) / kWarps;
}

// acc[r][i] += A[r, lo..hi) B[lo..hi, lane + 32 i] for r < m, columns below cols (<= 64).
__device__ __forceinline__ void up_part(float (&acc)[kRowsMax][2], int m, int cols,
                                        const float* a, int lda, const float* b, int ldb, int lo,
                                        int hi) {
  const int lane = threadIdx.x & 31;
  const bool second = lane + 32 < cols;
  const float* bk = b + lane;
#pragma unroll 2
  for (int k = lo; k < hi; ++k) {
    const float w0 = bk[k * ldb];
    const float w1 = second ? bk[k * ldb + 32] : 0.0f;
#pragma unroll
    for (int r = 0; r < kRowsMax; ++r) {
      if (r >= m) break;
      const float x = a[r * lda + k];
      acc[r][0] = fmaf(x, w0, acc[r][0]);
      acc[r][1] = fmaf(x, w1, acc[r][1]);
    }
  }
}

// The warps' parts meet in red (kWarps x m x cols floats; it may overlay the operands: the
// block syncs before writing it), then epi(row, col, sum) for every row < m and col < cols.
// Ends with the block synchronized after the epilogue.
template <class Epilogue>
__device__ __forceinline__ void up_reduce(const float (&acc)[kRowsMax][2], int m, int cols,
                                          float* red, const Epilogue& epi) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kRowsMax; ++r) {
    if (r >= m) break;
    float* mine = red + (warp * m + r) * cols;
    if (lane < cols) mine[lane] = acc[r][0];
    if (lane + 32 < cols) mine[lane + 32] = acc[r][1];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < m * cols; e += kThreads) {
    float s = 0.0f;
    for (int p = 0; p < kWarps; ++p) s += red[p * m * cols + e];
    epi(e / cols, e % cols, s);
  }
  __syncthreads();
}

// out[r, 4 q..4 q + 4) (row stride ldo) = sum over j < k of h[r, j] w[j, 4 q..) for r < m and
// 4 q < n (n, lds and ldo multiples of 4; w 16-byte aligned rows).
__device__ __forceinline__ void down_rows(int m, int k, int n, const float* h, int ldh,
                                          const float* w, int ldw, float* out, int ldo) {
  for (int q = threadIdx.x; 4 * q < n; q += kThreads) {
    float4 acc[kRowsMax];
#pragma unroll
    for (int r = 0; r < kRowsMax; ++r) acc[r] = make_float4(0.f, 0.f, 0.f, 0.f);
    const float* wq = w + 4 * q;
#pragma unroll 4
    for (int j = 0; j < k; ++j) {
      const float4 v = *reinterpret_cast<const float4*>(wq + j * ldw);
#pragma unroll
      for (int r = 0; r < kRowsMax; ++r) {
        if (r >= m) break;
        const float s = h[r * ldh + j];
        acc[r].x = fmaf(s, v.x, acc[r].x);
        acc[r].y = fmaf(s, v.y, acc[r].y);
        acc[r].z = fmaf(s, v.z, acc[r].z);
        acc[r].w = fmaf(s, v.w, acc[r].w);
      }
    }
#pragma unroll
    for (int r = 0; r < kRowsMax; ++r) {
      if (r >= m) break;
      *reinterpret_cast<float4*>(out + r * ldo + 4 * q) = acc[r];
    }
  }
}

}  // namespace fl::slice
