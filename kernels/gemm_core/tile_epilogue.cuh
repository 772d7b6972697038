// The portable GEMM core's epilogues: what a block tile does with its accumulators, handed W
// adjacent columns of one row at a time (W = 2 from the mma tile, 4 from the fp32 tile): add the
// bias, optionally GELU, round once to the output's type and store the W values with one store
// (4 bytes of bf16 or 16 bytes of fp32). N must be a multiple of W (the callers' shape checks
// ask for multiples of 8), so a group is all inside the matrix or all outside.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/activations.cuh"
#include "kernels/device_common.cuh"

namespace fl::gemm_core {

// y = acc (the GEMM ladder's plain product).
template <typename T>
struct StoreTile {
  T* y;
  int64_t m, n;
  template <int W>
  __device__ __forceinline__ void operator()(int64_t row, int64_t col, float (&v)[W]) const {
    if (row >= m || col >= n) return;
    store_group(y + row * n + col, v);
  }
  template <int W>
  static __device__ __forceinline__ void store_group(T* p, const float (&v)[W]) {
    if constexpr (std::is_same_v<T, float> && W == 4) {
      *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16> && W == 2) {
      *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v[0], v[1]);
    } else {
#pragma unroll
      for (int e = 0; e < W; ++e) p[e] = Elem<T>::from_float(v[e]);
    }
  }
};

// y = act(acc + bias[col]); kGelu: GPT-2's tanh GELU (the FFN's up projection).
template <typename T, bool kGelu>
struct BiasStoreTile {
  T* y;
  const T* bias;
  int64_t m, n;
  template <int W>
  __device__ __forceinline__ void operator()(int64_t row, int64_t col, float (&v)[W]) const {
    if (row >= m || col >= n) return;
#pragma unroll
    for (int e = 0; e < W; ++e) {
      const float u = v[e] + Elem<T>::to_float(bias[col + e]);
      v[e] = kGelu ? gelu_tanh_fast(u) : u;
    }
    StoreTile<T>::store_group(y + row * n + col, v);
  }
};

}  // namespace fl::gemm_core
