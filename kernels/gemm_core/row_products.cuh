// Exact-row fp32 products for the weight-slice kernels at a few tokens (1 to kRowsMax), on the
// CUDA cores. What changes against weight_slice.cuh's WarpMma<float>: there a warp computes a
// 16-row tile in the mma register layout, so at one token 15 of every 16 FMAs multiply a zero
// row of x (or h) and every weight element is read once per 16 rows; here a lane owns weight
// columns and multiplies only the m real rows, each weight element read from shared memory once
// and each activation a broadcast.
//
//   up_part():   acc[r][i] += A[r, part] B[part, lane + 32 i] for r < m: a warp's part of K
//                (K split into kWarps parts), columns lane and lane + 32 (up to 64 columns).
//   up_reduce(): the warps' parts meet in shared memory (kWarps x m x cols floats, overlaying
//                the operands after a block barrier); epi(row, col, sum) once for each.
//   down_rows(): out[r, 4 q..4 q + 4) = sum_j H[r, j] W[j, 4 q..) for r < m, a thread a 16-byte
//                column group of W's rows (float4 loads), j over all of K (no split, no
//                reduction), stored as float4.
// The row count is a template (1, 2, 4 or 8 rows, the operands' rows past m zero), so that all
// of a step's loads issue before its FMAs.
// Budget at one token, C = 768, 24 columns of W1 a block: the up product is 768 x 24 FMAs a
// block (96 a lane: lanes past the 24 columns repeat the last; ~220 instructions a lane with
// the loads) against WarpMma's 16 x 768 x 24;
// the down product 24 x 768 (one float4 of W2 and one broadcast of h per FMA quad) against
// 16 x 24 x 768: a sixteenth of the tiles' FMAs at one token.
#pragma once

#include <cuda_runtime.h>

#include "kernels/device_common.cuh"
#include "kernels/gemm_core/slice_plan.h"

namespace fl::slice {

constexpr int kRowsMax = 8;  // tokens at most for the exact-row products

// Every operand load of a step is issued before its FMAs: at one or two warps a scheduler a load
// waited on before the next is issued costs its whole latency (~30 cycles) per weight element.
// R: rows computed, a power of 2 >= m (the operands' rows past m are zero in shared memory).

// acc[r][i] += A[r, lo..hi) B[lo..hi, col_i] for r < R, steps of 4 k (float4 of A's row).
template <int R, bool kTwo>
__device__ __forceinline__ void up_steps(float (&acc)[kRowsMax][2], const float* a, int lda,
                                         const float* b0, const float* b1, int ldb, int lo,
                                         int hi) {
#pragma unroll 2
  for (int k = lo; k < hi; k += 4) {
    float4 x[R];
    float w0[4], w1[4];
#pragma unroll
    for (int r = 0; r < R; ++r) x[r] = *reinterpret_cast<const float4*>(a + r * lda + k);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      w0[e] = b0[(k + e) * ldb];
      w1[e] = kTwo ? b1[(k + e) * ldb] : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float xr[4] = {x[r].x, x[r].y, x[r].z, x[r].w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc[r][0] = fmaf(xr[e], w0[e], acc[r][0]);
        if (kTwo) acc[r][1] = fmaf(xr[e], w1[e], acc[r][1]);
      }
    }
  }
}

// Warp w's share of K in [k0, k1) (multiples of 4), split into kWarps parts: acc[r][i] +=
// A[r, part] B[part, lane + 32 i] for r < m, columns below cols (<= 64; lanes past them repeat
// the last column, whose sums are not stored). A has at least R(m) rows, zero past m.
__device__ __forceinline__ void up_part(float (&acc)[kRowsMax][2], int m, int cols, const float* a,
                                        int lda, const float* b, int ldb, int k0, int k1) {
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, steps = (k1 - k0) / 4;
  const int lo = k0 + steps * w / kWarps * 4, hi = k0 + steps * (w + 1) / kWarps * 4;
  const float* b0 = b + min(lane, cols - 1);
  const float* b1 = b + min(lane + 32, cols - 1);
  const bool two = cols > 32;
  if (m == 1) {
    two ? up_steps<1, true>(acc, a, lda, b0, b1, ldb, lo, hi)
        : up_steps<1, false>(acc, a, lda, b0, b1, ldb, lo, hi);
  } else if (m == 2) {
    two ? up_steps<2, true>(acc, a, lda, b0, b1, ldb, lo, hi)
        : up_steps<2, false>(acc, a, lda, b0, b1, ldb, lo, hi);
  } else if (m <= 4) {
    two ? up_steps<4, true>(acc, a, lda, b0, b1, ldb, lo, hi)
        : up_steps<4, false>(acc, a, lda, b0, b1, ldb, lo, hi);
  } else {
    two ? up_steps<8, true>(acc, a, lda, b0, b1, ldb, lo, hi)
        : up_steps<8, false>(acc, a, lda, b0, b1, ldb, lo, hi);
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
// 4 q < n; R rows of h computed (zero past m), 4 j a step (k, n, ldh, ldw, ldo multiples of 4).
template <int R>
__device__ __forceinline__ void down_steps(int m, int k, int n, const float* h, int ldh,
                                           const float* w, int ldw, float* out, int ldo) {
  for (int q = threadIdx.x; 4 * q < n; q += kThreads) {
    float4 acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = make_float4(0.f, 0.f, 0.f, 0.f);
    const float* wq = w + 4 * q;
#pragma unroll 2
    for (int j = 0; j < k; j += 4) {
      float4 hv[R], v[4];
#pragma unroll
      for (int r = 0; r < R; ++r) hv[r] = *reinterpret_cast<const float4*>(h + r * ldh + j);
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = *reinterpret_cast<const float4*>(wq + (j + e) * ldw);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float hr[4] = {hv[r].x, hv[r].y, hv[r].z, hv[r].w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          acc[r].x = fmaf(hr[e], v[e].x, acc[r].x);
          acc[r].y = fmaf(hr[e], v[e].y, acc[r].y);
          acc[r].z = fmaf(hr[e], v[e].z, acc[r].z);
          acc[r].w = fmaf(hr[e], v[e].w, acc[r].w);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r < m) *reinterpret_cast<float4*>(out + r * ldo + 4 * q) = acc[r];
    }
  }
}

__device__ __forceinline__ void down_rows(int m, int k, int n, const float* h, int ldh,
                                          const float* w, int ldw, float* out, int ldo) {
  if (m == 1) {
    down_steps<1>(m, k, n, h, ldh, w, ldw, out, ldo);
  } else if (m == 2) {
    down_steps<2>(m, k, n, h, ldh, w, ldw, out, ldo);
  } else if (m <= 4) {
    down_steps<4>(m, k, n, h, ldh, w, ldw, out, ldo);
  } else {
    down_steps<8>(m, k, n, h, ldh, w, ldw, out, ldo);
  }
}

}  // namespace fl::slice
