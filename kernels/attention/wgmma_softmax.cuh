// The online softmax of the Hopper flash kernel (flash_wgmma.cu) on wgmma's accumulator layout:
// thread (warp w of the warpgroup, lane 4 g + t) holds, of a 64 x 128 score tile, rows 16 w + g
// + 8 h and columns 8 j + 2 t + e in s[4 j + 2 h + e] (j < 16, h, e < 2). The algorithm is level
// 2's (flash_mma.cuh, online_softmax); only the layout differs.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "kernels/attention/attention_rows.cuh"  // exp2_approx

namespace fl::attention::wg {

// -inf for keys after the row's query or past T: the thread's rows are row + 8 h (row = the
// warpgroup's first query + 16 w + g), its keys key0 + 8 j + 2 t + e.
__device__ __forceinline__ void mask_tile(float (&s)[64], int key0, int row, int length) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int key = key0 + 8 * (i / 4) + 2 * t + i % 2;
    if (key > row + 8 * (i / 2 % 2) || key >= length) s[i] = -INFINITY;
  }
}

// The online softmax of a tile: new running max m and sum l of the thread's two rows, s turned
// into exp2(c (s - m)) in place, and the factor by which O must be rescaled.
__device__ __forceinline__ void softmax_tile(float (&s)[64], float (&m)[2], float (&l)[2],
                                             float (&rescale)[2], float c) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = m[h];
#pragma unroll
    for (int j = 0; j < 16; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // the 4 lanes of a row
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    rescale[h] = exp2_approx((m[h] - mx) * c);  // key 0 is in tile 0: mx is finite; 0 at first
    m[h] = mx;
    const float mc = mx * c;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[4 * j + 2 * h + e];
        x = exp2_approx(fmaf(x, c, -mc));
        sum += x;
      }
    }
    l[h] = l[h] * rescale[h] + sum;
  }
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// P as wgmma's A fragments (wgmma_rs.cuh), and O rescaled to the new running max.
template <int kD>
__device__ __forceinline__ void next_p(const float (&s)[64], uint32_t (&p)[32], float (&o)[kD / 2],
                                       const float (&rescale)[2]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) p[i] = pack_bf16x2(s[2 * i], s[2 * i + 1]);
#pragma unroll
  for (int i = 0; i < kD / 2; ++i) o[i] *= rescale[i / 2 % 2];
}

}  // namespace fl::attention::wg
