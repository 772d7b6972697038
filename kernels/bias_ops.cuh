// Bias-broadcast kernels, shared by bias_gelu (lesson 3) and the GEMM lessons (6-8):
// out = op(x + bias[column]) over a flat rows x C tensor, 16 bytes per access. The design notes
// (alignment for any C, the column without a division) are beside the kernels below.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/activations.cuh"
#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/level_table.h"

namespace fl {

// rows x C at most: keeps the flat index, and ColumnOf's quotient, exact in 32 bits.
constexpr int64_t kMaxBiasElements = int64_t(1) << 28;

// GELU is gelu_tanh_fast (activations.cuh): the IEEE-exact form costs ~30 instructions per
// element, and at bf16's 2 bytes per element that made the fused kernel instruction-bound on an
// H200 (68% of copy bandwidth, 61% for an odd C); the fast form keeps every level memory-bound.
struct AddBiasOp {
  __device__ float operator()(float x, float b) const { return x + b; }
};
struct BiasGeluOp {
  __device__ float operator()(float x, float b) const { return gelu_tanh_fast(x + b); }
};

// e % C without a division instruction (the GPU has none: a 32-bit `%` is ~20 instructions).
// With p = floor(log2 C), s = 31 + p and m = ceil(2^s / C) (at most 2^31), the quotient is
// (e * m) >> s: the rounding in m adds e * (m C - 2^s) / (C 2^s) < e / 2^31 to e / C, which
// cannot reach the next integer while e <= 2^30. The flat index stays below 2^28 (kMaxElements).
struct ColumnOf {
  uint32_t c, m, s;
  static ColumnOf make(uint32_t c) {
    const uint32_t p = 31 - __builtin_clz(c);
    const uint32_t s = 31 + p;
    return {c, static_cast<uint32_t>(((uint64_t(1) << s) + c - 1) / c), s};
  }
  __device__ uint32_t operator()(uint32_t e) const {
    const uint32_t row = static_cast<uint32_t>((uint64_t(e) * m) >> s);
    return e - row * c;
  }
};

// out[e] = op(x[e], bias[e % C]) over the flat rows x C tensor, for both add_bias and the fused
// kernel. One 16-byte vector of x per thread; the threads past the last full vector take one
// tail element each. kBiasVectors (C a multiple of the vector width): the vector's bias entries
// are one aligned 16-byte load. Otherwise one load per element, wrapping at the row's end (that
// also covers C smaller than a vector). One column computation per thread (ColumnOf).
template <typename T, bool kBiasVectors, typename Op>
__global__ void __launch_bounds__(kElementwiseThreads)
    bias_op_kernel(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ out,
                   int64_t n, ColumnOf column_of, Op op) {
  constexpr int kVec = Vec16<T>::kCount;
  const int64_t full_vecs = n / kVec;
  const int64_t i = blockIdx.x * int64_t(kElementwiseThreads) + threadIdx.x;
  if (i < full_vecs) {
    Vec16<T> v = load16(x + i * kVec);
    uint32_t col = column_of(static_cast<uint32_t>(i * kVec));
    if constexpr (kBiasVectors) {
      const Vec16<T> b = load16(bias + col);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        v.v[k] = Elem<T>::from_float(op(Elem<T>::to_float(v.v[k]), Elem<T>::to_float(b.v[k])));
      }
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        v.v[k] = Elem<T>::from_float(op(Elem<T>::to_float(v.v[k]), Elem<T>::to_float(bias[col])));
        col = col + 1 == column_of.c ? 0 : col + 1;
      }
    }
    store16(out + i * kVec, v);
  } else {
    const int64_t tail = full_vecs * kVec + (i - full_vecs);
    if (tail < n) {
      const uint32_t col = column_of(static_cast<uint32_t>(tail));
      out[tail] = Elem<T>::from_float(op(Elem<T>::to_float(x[tail]), Elem<T>::to_float(bias[col])));
    }
  }
}

template <typename T, typename Op>
Status launch_bias_op(const T* x, const T* bias, T* out, int64_t n, int64_t c, Op op,
                      cudaStream_t stream) {
  if (n > kMaxBiasElements || c < 1) {
    return Status::Error("the bias kernels take 1 <= C and rows x C <= 2^28 elements");
  }
  const unsigned blocks = vector_and_tail_blocks<T>(n);
  if (blocks == 0) return Status::Ok();
  const ColumnOf column_of = ColumnOf::make(static_cast<uint32_t>(c));
  if (c % Vec16<T>::kCount == 0) {
    bias_op_kernel<T, true, Op>
        <<<blocks, kElementwiseThreads, 0, stream>>>(x, bias, out, n, column_of, op);
  } else {
    bias_op_kernel<T, false, Op>
        <<<blocks, kElementwiseThreads, 0, stream>>>(x, bias, out, n, column_of, op);
  }
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// ---- textbook traffic ----------------------------------------------------------------------
// Of the bias kernels and GELU over s rows of `width` elements (Dims: s rows, b bytes per
// element), as the level tables of bias_gelu and of the GEMM lessons count them. The `width`
// bias values are read once per launch: the later rows find them in L1/L2. FLOPs per element:
// the add 1; GELU_tanh 8 (x^3 and the polynomial ~7, tanh counted as 1).
constexpr double kAddFlops = 1.0, kGeluFlops = 8.0;

// out = op(x + bias): x read and out written once, the bias read once.
inline Textbook bias_op_textbook(const Dims& d, int64_t width, double flops_per_element) {
  const int64_t tensor = d.s * width * d.b;
  return {tensor + width * d.b, tensor, flops_per_element * double(d.s * width)};
}

// out = GELU(x), elementwise.
inline Textbook gelu_textbook(const Dims& d, int64_t width) {
  const int64_t tensor = d.s * width * d.b;
  return {tensor, tensor, kGeluFlops * double(d.s * width)};
}

}  // namespace fl
