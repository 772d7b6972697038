// The attention lessons' fp64 check on the GPU: O = softmax(mask(s Q K^T)) V recomputed in
// double for every query row, or for kCheckedRows of them spread evenly (the last row always)
// when that would take long (the workspace chooses), and every element of O looked at for NaN
// (poisoned outputs never written). One warp a row: three sweeps over the row's keys (max, sum,
// then P V in chunks of 32 keys, each lane owning up to 4 of the d <= 128 output columns). It runs
// once per measurement, untimed.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/device_common.cuh"

namespace fl::attention {

constexpr int64_t kCheckedRows = 4096;
constexpr int kCheckThreads = 256;

template <typename T>
__device__ double dot_row(const T* a, const T* b, int dim) {
  double s = 0;
  for (int c = 0; c < dim; ++c) s += double(Elem<T>::to_float(a[c])) * Elem<T>::to_float(b[c]);
  return s;
}

// q, k, v, o: heads x length x dim. Checked row n of `checked` is row n * rows / checked of the
// heads x length query rows (n = checked - 1 is moved to the very last row).
template <typename T>
__global__ void __launch_bounds__(kCheckThreads)
    attention_check_kernel(const T* __restrict__ q, const T* __restrict__ k,
                           const T* __restrict__ v, const T* __restrict__ o, int64_t heads,
                           int length, int dim, double scale, int64_t checked, ErrorSums* sums) {
  ErrorPartial partial;
  const int lane = threadIdx.x & 31;
  const int64_t rows = heads * length;
  const int64_t warp0 = (int64_t(blockIdx.x) * kCheckThreads + threadIdx.x) / 32;
  const int64_t warps = int64_t(gridDim.x) * kCheckThreads / 32;
  for (int64_t n = warp0; n < checked; n += warps) {
    const int64_t row = n == checked - 1 ? rows - 1 : n * rows / checked;
    const int64_t head = row / length;
    const int query = static_cast<int>(row % length);
    const T* q_row = q + row * dim;
    const T* k_head = k + head * length * dim;
    const T* v_head = v + head * length * dim;
    double m = -INFINITY;
    for (int j = lane; j <= query; j += 32)
      m = fmax(m, scale * dot_row(q_row, k_head + j * dim, dim));
    for (int off = 16; off > 0; off >>= 1) m = fmax(m, __shfl_xor_sync(0xffffffffu, m, off));
    double l = 0;
    for (int j = lane; j <= query; j += 32)
      l += exp(scale * dot_row(q_row, k_head + j * dim, dim) - m);
    for (int off = 16; off > 0; off >>= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
    double acc[4] = {0, 0, 0, 0};  // columns lane, lane + 32, lane + 64, lane + 96
    for (int j0 = 0; j0 <= query; j0 += 32) {
      const int j = j0 + lane;
      const double p = j <= query ? exp(scale * dot_row(q_row, k_head + j * dim, dim) - m) / l : 0;
      for (int jj = 0; jj < 32 && j0 + jj <= query; ++jj) {
        const double pj = __shfl_sync(0xffffffffu, p, jj);
        const T* v_row = v_head + int64_t(j0 + jj) * dim;
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int c = lane + 32 * u;
          if (c < dim) acc[u] += pj * Elem<T>::to_float(v_row[c]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int c = lane + 32 * u;
      if (c < dim) partial.add(Elem<T>::to_float(o[row * dim + c]), acc[u]);
    }
  }
  // Every element of O: a poisoned (never written) one is NaN. Counted apart from the error
  // sums' compared elements, so a checked NaN counts twice, which only matters as "not zero".
  const int64_t n_out = rows * dim;
  for (int64_t i = int64_t(blockIdx.x) * kCheckThreads + threadIdx.x; i < n_out;
       i += int64_t(gridDim.x) * kCheckThreads) {
    if (!isfinite(Elem<T>::to_float(o[i]))) ++partial.non_finite;
  }
  block_accumulate(sums, partial);
}

}  // namespace fl::attention
