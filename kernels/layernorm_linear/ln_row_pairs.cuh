// LayerNorm of whole rows in registers, two rows a warp at a time: what ln_mma_rows.cu does to
// its resident panel in shared memory and ln_mma_tiles.cu to x in global memory (into xn).
// A lane holds its 16-byte chunks (lane, lane + 32, ...) of both rows beside its chunks of gamma
// and beta, so each row is read once and written once and the two rows' shuffle reductions
// overlap: the mean, then the squared deviations from it (exact in fp32), then (x - mean) rstd
// gamma + beta rounded to bf16 as level 0's xn. The sums run in row_moment's order (a lane's
// chunks in turn, then the xor tree): the same statistics bit for bit as the two-pass form.
#pragma once

#include <cuda_bf16.h>

#include "kernels/device_common.cuh"
#include "kernels/gemm_common.cuh"
#include "kernels/layernorm_linear/ln_common.cuh"

namespace fl::layernorm_linear {

constexpr int kLaneChunks = 4;  // C up to 1024 (32 lanes x 4 chunks of 8); wider rows: two passes

// Rows r0, r0 + 1 (warp 0), r0 + 2, r0 + 3 (warp 1), ... below r1 of src (row stride ld_src)
// normalized into dst (ld_dst; dst may be src: in place); kWarps warps take turns. Rows at or
// past `live` are neither read nor written (zeros in the sums, harmless).
template <int kWarps, typename T>
__device__ __forceinline__ void normalize_row_pairs(const T* src, int ld_src, T* dst, int ld_dst,
                                                    int k, const T* gamma, const T* beta, int r0,
                                                    int r1, int live) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, chunks = k / 8;
  Vec16<T> g[kLaneChunks], b[kLaneChunks];
#pragma unroll
  for (int j = 0; j < kLaneChunks; ++j) {
    const int c = lane + 32 * j;
    if (c < chunks) g[j] = load16(gamma + c * 8), b[j] = load16(beta + c * 8);
  }
  for (int r = r0 + 2 * warp; r < r1; r += 2 * kWarps) {
    Vec16<T> v[2][kLaneChunks];
    float mean[2] = {0.0f, 0.0f}, var[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < kLaneChunks; ++j) {
        const int c = lane + 32 * j;
        if (c >= chunks) continue;
        if (r + i < live) {
          v[i][j] = load16(src + (r + i) * ld_src + c * 8);
        } else {
          *reinterpret_cast<int4*>(&v[i][j]) = make_int4(0, 0, 0, 0);
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) mean[i] += Elem<T>::to_float(v[i][j].v[e]) - 0.0f;
      }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int i = 0; i < 2; ++i) mean[i] += __shfl_xor_sync(0xffffffffu, mean[i], o);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      mean[i] /= k;
#pragma unroll
      for (int j = 0; j < kLaneChunks; ++j) {
        if (lane + 32 * j >= chunks) continue;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float d = Elem<T>::to_float(v[i][j].v[e]) - mean[i];
          var[i] += d * d;
        }
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int i = 0; i < 2; ++i) var[i] += __shfl_xor_sync(0xffffffffu, var[i], o);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if (r + i >= live) continue;
      const float2 stats = make_float2(mean[i], rsqrtf(var[i] / k + float(gemm::kLayerNormEps)));
#pragma unroll
      for (int j = 0; j < kLaneChunks; ++j) {
        const int c = lane + 32 * j;
        if (c >= chunks) continue;
        normalize_vec(v[i][j], stats, g[j], b[j]);
        store16(dst + (r + i) * ld_dst + c * 8, v[i][j]);
      }
    }
  }
}

}  // namespace fl::layernorm_linear
