// Partial sums that say when they have arrived, for the portable FFN kernels whose blocks hand
// each other fp32 sums through L2 (ffn_hidden_slice.cu): instead of a grid barrier (a fence, an
// atomic and a poll, three L2 round trips after the last block's stores), each 32-bit word is
// stored as its bitwise complement, and the buffer is all zero between launches. A reader polls
// the words it needs until none is zero, then clears them (stores zero) for the next launch.
//   * A stored word is never zero: ~bits is zero only for bits 0xffffffff, a NaN the GPU's
//     arithmetic never produces (its NaNs are 0x7fffffff), so +0.0 (0x00000000) stores as
//     0xffffffff and every finite, infinite or NaN sum arrives as some nonzero word.
//   * Each word is written once a launch by one block and read (and cleared) by one block;
//     32-bit accesses are single-copy atomic, so a nonzero word is the whole value: no fence or
//     ordering between words is needed. Relaxed gpu-scope loads and stores (PTX memory model)
//     keep the poll coherent with the writer; launches on one stream order a clear before the
//     next launch's stores.
//   * Every block must be resident (a cooperative launch), since readers wait on writers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace fl::ready {

__device__ __forceinline__ void store2(float* p, float a, float b) {
  asm volatile("st.relaxed.gpu.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(~__float_as_uint(a)),
               "r"(~__float_as_uint(b))
               : "memory");
}

__device__ __forceinline__ void store4(float* p, float4 v) {
  asm volatile("st.relaxed.gpu.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p),
               "r"(~__float_as_uint(v.x)), "r"(~__float_as_uint(v.y)), "r"(~__float_as_uint(v.z)),
               "r"(~__float_as_uint(v.w))
               : "memory");
}

__device__ __forceinline__ void store1(float* p, float v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(~__float_as_uint(v)) : "memory");
}

// One or four stored words as they are in L2 now (zero: not yet written).
__device__ __forceinline__ unsigned load1(const float* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint4 load4(const float* p) {
  uint4 v;
  asm volatile("ld.relaxed.gpu.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

__device__ __forceinline__ void clear1(float* p) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(0u) : "memory");
}

__device__ __forceinline__ void clear4(float* p) {
  asm volatile("st.relaxed.gpu.global.v4.u32 [%0], {%1, %1, %1, %1};" ::"l"(p), "r"(0u) : "memory");
}

// The words a load stands for when there is nothing to read: they decode to 0.0f.
__device__ __forceinline__ void absent(uint4* v) {
  *v = make_uint4(~0u, ~0u, ~0u, ~0u);
}
__device__ __forceinline__ void absent(unsigned* v) {
  *v = ~0u;
}

__device__ __forceinline__ bool arrived(uint4 v) {
  return v.x != 0u && v.y != 0u && v.z != 0u && v.w != 0u;
}
__device__ __forceinline__ bool arrived(unsigned v) {
  return v != 0u;
}
__device__ __forceinline__ uint4 load(const float* p, uint4) {
  return load4(p);
}
__device__ __forceinline__ unsigned load(const float* p, unsigned) {
  return load1(p);
}
__device__ __forceinline__ void clear(float* p, uint4) {
  clear4(p);
}
__device__ __forceinline__ void clear(float* p, unsigned) {
  clear1(p);
}

__device__ __forceinline__ float4 decode(uint4 v) {
  return make_float4(__uint_as_float(~v.x), __uint_as_float(~v.y), __uint_as_float(~v.z),
                     __uint_as_float(~v.w));
}
__device__ __forceinline__ float decode(unsigned v) {
  return __uint_as_float(~v);
}

// v[u] (uint4 or unsigned) holds the words at at(u) (or absent words, ~0u, where at(u) is
// null): reloads, together, those not yet arrived until all have, then clears the ones read.
// Every block is resident, so this ends; after about a second it traps (the launch fails with
// an error) rather than hang.
template <int N, class W, class At>
__device__ __forceinline__ void wait_and_clear(W (&v)[N], const At& at) {
  for (unsigned spins = 0;; ++spins) {
    bool all = true;
#pragma unroll
    for (int u = 0; u < N; ++u) all = all && arrived(v[u]);
    if (all) break;
    if (spins == (1u << 22)) __trap();
    __nanosleep(32);
#pragma unroll
    for (int u = 0; u < N; ++u) {
      if (!arrived(v[u])) v[u] = load(at(u), v[u]);
    }
  }
#pragma unroll
  for (int u = 0; u < N; ++u) {
    if (at(u) != nullptr) clear(at(u), v[u]);
  }
}

}  // namespace fl::ready
