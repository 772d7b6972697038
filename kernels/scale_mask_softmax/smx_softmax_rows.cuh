// Lesson 5, levels 1 and 2: softmax with the whole row in registers. Level 1 (what PyTorch eager
// runs) reads S2 after the scale and mask kernels; level 2 (the fused kernel) reads S and scales
// and masks it as it arrives.
//
// Against level 0's three row kernels (smx_unfused_rows.cuh): the row is read from DRAM once and
// its max and sum come out of one online-softmax reduction (smx_row_group.cuh), so neither the
// exponentials nor the row statistics leave the chip. Against level 1, the fused kernel also
// drops the scale and mask launches. Rows of up to 512 threads x 4 vectors (L = 8192 fp32,
// 16384 bf16). Budget, n = rows * L scores of b bytes: the softmax reads n b and writes n b
// (level 1: 6 n b with scale and mask); the fused kernel reads n b and writes n b, and that is
// the whole level (2 n b).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/device_common.cuh"
#include "kernels/row_split.cuh"
#include "kernels/scale_mask_softmax/smx_row_group.cuh"

namespace fl {
namespace {  // unnamed: smx_row_group.cuh says why

// ---- levels 1 and 2: softmax with the row in registers -------------------------------------
// One row group holds its whole row: each thread up to kVecsPerThread 16-byte vectors plus one
// head and one tail scalar. Each thread summarizes its slice as (max, sum) in one sweep over
// registers, the group merges the summaries with the online rule (one reduction, not a max
// reduction followed by a sum reduction), and each thread rescales its exponentials by
// exp(its max - row max) / row sum and writes P. DRAM sees the row once in and once out.
//
// kScaleAndMask = false: level 1's softmax, reading S2 (scaled and masked already).
// kScaleAndMask = true:  level 2's fused kernel, reading S. Since s > 0, the max of s * S is s
// times the max of S, so the kernel keeps raw scores and folds s into the exponent:
// exp(s x - s m) = exp2((x - m) * s * log2(e)). Keys after the query are set to -inf on load;
// only the one vector that straddles the query looks at its keys one by one.
template <typename T, int kRowThreads, bool kScaleAndMask>
__global__ void __launch_bounds__(RowGroup<kRowThreads>::kBlockThreads)
    softmax_rows_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t rows, int length) {
  using Group = RowGroup<kRowThreads>;
  constexpr int kVec = Vec16<T>::kCount;
  constexpr float c = kScaleAndMask ? kScale * kLog2e : kLog2e;
  const int t = Group::thread();
  const bool active = Group::row() < rows;
  const int64_t row = active ? Group::row() : rows - 1;
  const T* src = in + row * length;
  T* dst = out + row * length;
  const RowSlice<T> slice{split_row(src, length), t, kRowThreads};
  // The query of this row (rows * L <= 2^28, so 32 bits suffice); level 1 masks nothing here.
  const int q = kScaleAndMask
                    ? static_cast<int>(static_cast<uint32_t>(row) % static_cast<uint32_t>(length))
                    : length;

  // Load the row: all loads are issued before any value is used.
  float x[kVecsPerThread][kVec];
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    if (slice.has_pack(k)) {
      const Vec16<T> raw = load16_ro(src + slice.pack_col(k));
#pragma unroll
      for (int e = 0; e < kVec; ++e) x[k][e] = Elem<T>::to_float(raw.v[e]);
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) x[k][e] = -INFINITY;
    }
  }
  const int head_j = slice.head_col(), tail_j = slice.tail_col();
  float x_head = slice.has_head() ? Elem<T>::to_float(src[head_j]) : -INFINITY;
  float x_tail = slice.has_tail() ? Elem<T>::to_float(src[tail_j]) : -INFINITY;
  if constexpr (kScaleAndMask) {
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int first = slice.pack_col(k);  // key of x[k][0]
      if (first + kVec - 1 > q) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) x[k][e] = first + e > q ? -INFINITY : x[k][e];
      }
    }
    if (head_j > q) x_head = -INFINITY;
    if (tail_j > q) x_tail = -INFINITY;
  }

  // This thread's summary (m, d). Masked or absent elements are -inf and give exp2(-inf) = 0;
  // a thread with nothing unmasked keeps m = -inf, d = 0.
  float m = fmaxf(x_head, x_tail);
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
#pragma unroll
    for (int e = 0; e < kVec; ++e) m = fmaxf(m, x[k][e]);
  }
  const float mc = m == -INFINITY ? 0.0f : m * c;
  float d = 0;
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      x[k][e] = exp2_fast(fmaf(x[k][e], c, -mc));
      d += x[k][e];
    }
  }
  const float e_head = exp2_fast(fmaf(x_head, c, -mc));
  const float e_tail = exp2_fast(fmaf(x_tail, c, -mc));
  d += e_head + e_tail;

  // The row's summary, then this thread's factor from its exponentials to probabilities.
  float row_m = m, row_d = d;
  row_merge_online<kRowThreads>(row_m, row_d, c);
  const float factor = row_m == -INFINITY ? 0.0f : exp2_fast((m - row_m) * c) / row_d;
  if (!active) return;

#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    if (slice.has_pack(k)) {
      T p[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) p[e] = Elem<T>::from_float(x[k][e] * factor);
      store16_packed(dst + slice.pack_col(k), p);
    }
  }
  if (slice.has_head()) dst[head_j] = Elem<T>::from_float(e_head * factor);
  if (slice.has_tail()) dst[tail_j] = Elem<T>::from_float(e_tail * factor);
}

}  // namespace
}  // namespace fl
