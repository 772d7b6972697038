// Lesson 5, level 0: the three row kernels of the unfused softmax, after the scale and mask
// kernels (smx_scale_mask.cuh): row_max writes each row's max m, exp_sum writes e = exp(S2 - m)
// and the row's sum d, divide writes P = e / d.
//
// Against the elementwise rung: these walk rows, not the flat tensor, a row group a row
// (smx_row_group.cuh), streaming the row through registers kVecsPerThread vectors at a time (any
// L, up to 8192). Nothing stays on chip between launches. Budget, n = rows * L scores of b bytes
// and 4-byte fp32 m and d a row: row_max reads n b and writes 4 rows; exp_sum reads n b + 4 rows
// and writes n b + 4 rows; divide reads n b + 4 rows and writes n b: 5 n b + 16 rows, which with
// scale and mask makes the unfused chain's 9 n b + 16 rows.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/device_common.cuh"
#include "kernels/row_split.cuh"
#include "kernels/scale_mask_softmax/smx_row_group.cuh"

namespace fl {
namespace {  // unnamed: smx_row_group.cuh says why

// ---- level 0: the three row kernels of the unfused softmax ---------------------------------
// Each thread of a row group strides over the row's vectors, kVecsPerThread at a time with all
// of their loads issued before any is used. A group whose row lies past the end (the last block
// may have spare groups) works on the last row and stores nothing: it must still reach the
// group's shuffles and barrier.

// m[row] = max_j S2[row, j].
template <typename T, int kRowThreads>
__global__ void __launch_bounds__(RowGroup<kRowThreads>::kBlockThreads)
    row_max_kernel(const T* __restrict__ in, float* __restrict__ row_max, int64_t rows,
                   int length) {
  using Group = RowGroup<kRowThreads>;
  constexpr int kVec = Vec16<T>::kCount;
  const int t = Group::thread();
  const bool active = Group::row() < rows;
  const int64_t row = active ? Group::row() : rows - 1;
  const T* src = in + row * length;
  const RowSlice<T> slice{split_row(src, length), t, kRowThreads};
  float m = -INFINITY;
  slice.for_each_single([&](int j) { m = fmaxf(m, Elem<T>::to_float(src[j])); });
  slice.template stream_packs<kVecsPerThread>(src, LoadReadOnly<T>{}, [&](int, const Vec16<T>& v) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) m = fmaxf(m, Elem<T>::to_float(v.v[k]));
  });
  m = Group::reduce(m, MaxOp{});
  if (active && t == 0) row_max[row] = m;
}

// e = exp(S2 - m[row]) and d[row] = sum_j e. The sum adds e as stored (rounded to T), so that
// the divide kernel's P sums to 1 up to its own rounding.
template <typename T, int kRowThreads>
__global__ void __launch_bounds__(RowGroup<kRowThreads>::kBlockThreads)
    exp_sum_kernel(const T* __restrict__ in, const float* __restrict__ row_max, T* __restrict__ e,
                   float* __restrict__ row_sum, int64_t rows, int length) {
  using Group = RowGroup<kRowThreads>;
  constexpr int kVec = Vec16<T>::kCount;
  const int t = Group::thread();
  const bool active = Group::row() < rows;
  const int64_t row = active ? Group::row() : rows - 1;
  const T* src = in + row * length;
  T* dst = e + row * length;
  const RowSlice<T> slice{split_row(src, length), t, kRowThreads};
  // exp(x - m) = exp2(x log2(e) - m log2(e)): one FFMA and one MUFU.EX2 per element.
  const float m_log2e = row_max[row] * kLog2e;
  auto exp_of = [&](T x) {
    return Elem<T>::from_float(exp2_fast(fmaf(Elem<T>::to_float(x), kLog2e, -m_log2e)));
  };
  float d = 0;
  slice.for_each_single([&](int j) {
    const T stored = exp_of(src[j]);
    if (active) dst[j] = stored;
    d += Elem<T>::to_float(stored);
  });
  slice.template stream_packs<kVecsPerThread>(src, LoadReadOnly<T>{}, [&](int col, Vec16<T>& v) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      v.v[k] = exp_of(v.v[k]);
      d += Elem<T>::to_float(v.v[k]);
    }
    if (active) store16_packed(dst + col, v.v);
  });
  d = Group::reduce(d, SumOp{});
  if (active && t == 0) row_sum[row] = d;
}

// P = e / d[row].
template <typename T, int kRowThreads>
__global__ void __launch_bounds__(RowGroup<kRowThreads>::kBlockThreads)
    divide_kernel(const T* __restrict__ e, const float* __restrict__ row_sum, T* __restrict__ p,
                  int64_t rows, int length) {
  using Group = RowGroup<kRowThreads>;
  constexpr int kVec = Vec16<T>::kCount;
  const int t = Group::thread();
  const int64_t row = Group::row();
  if (row >= rows) return;  // no shuffles or barriers below: a spare group may simply leave
  const T* src = e + row * length;
  T* dst = p + row * length;
  const RowSlice<T> slice{split_row(src, length), t, kRowThreads};
  const float inv = 1.0f / row_sum[row];
  auto divide = [&](T x) { return Elem<T>::from_float(Elem<T>::to_float(x) * inv); };
  slice.for_each_single([&](int j) { dst[j] = divide(src[j]); });
  slice.template stream_packs<kVecsPerThread>(src, LoadReadOnly<T>{}, [&](int col, Vec16<T>& v) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) v.v[k] = divide(v.v[k]);
    store16_packed(dst + col, v.v);
  });
}

}  // namespace
}  // namespace fl
