// Device-side helpers shared by the lessons: element types, 16-byte vector access, random
// inputs, poisoning, and the fp64 error reduction behind every correctness check.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/lesson.h"

namespace fl {

// ---- element types -------------------------------------------------------------------------

template <typename T>
struct Elem;

template <>
struct Elem<float> {
  __host__ __device__ static float to_float(float v) { return v; }
  __host__ __device__ static float from_float(float v) { return v; }
};

template <>
struct Elem<__nv_bfloat16> {
  __host__ __device__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __host__ __device__ static __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};

// ---- 16-byte vectors -----------------------------------------------------------------------
// Each thread moves 16 bytes per access (LDG.128 / STG.128): 4 floats or 8 bf16.

template <typename T>
struct alignas(16) Vec16 {
  static constexpr int kCount = 16 / sizeof(T);
  T v[kCount];
};

template <typename T>
__device__ __forceinline__ Vec16<T> load16(const T* p) {
  Vec16<T> out;
  *reinterpret_cast<int4*>(&out) = *reinterpret_cast<const int4*>(p);
  return out;
}

template <typename T>
__device__ __forceinline__ void store16(T* p, const Vec16<T>& v) {
  *reinterpret_cast<int4*>(p) = *reinterpret_cast<const int4*>(&v);
}

// Four floats added into global memory where other blocks add theirs (one vector red on sm_90).
__device__ __forceinline__ void red_add4(float* p, const float (&v)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v[0]), "f"(v[1]),
               "f"(v[2]), "f"(v[3])
               : "memory");
#else
  for (int i = 0; i < 4; ++i) atomicAdd(p + i, v[i]);
#endif
}

// ---- flags between blocks ------------------------------------------------------------------
// An acquire load of a counter another block bumped with a release (sm_70+: ld.acquire.gpu, so
// what that block wrote before the bump is visible after it; older GPUs: a volatile load). The
// sm_90a kernels use hopper::load_acquire.
__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
#else
  v = *reinterpret_cast<const volatile unsigned*>(p);
#endif
  return v;
}

// ---- 16-byte stores that stay one instruction ---------------------------------------------
// A plain 16-byte store (store16 above, or an int4 assignment) of values computed in the loop
// was split by the compiler into four 4-byte stores for the first vector of each unrolled
// group of scale_mask_softmax's row kernels (PTX: st.global.f32 x 4 at [p-4], [p], [p+4],
// [p+8]), which quadruples the store instructions of that vector. One st.global.v4 in inline
// PTX (what the __stwb intrinsic does) cannot be split; the pointer is a global-memory address,
// as __stwb assumes.

__device__ __forceinline__ int element_bits(float v) {
  return __float_as_int(v);
}
__device__ __forceinline__ int element_bits(__nv_bfloat16 v) {
  return __bfloat16_as_ushort(v);
}

__device__ __forceinline__ int4 pack16(const float (&v)[4]) {
  return make_int4(element_bits(v[0]), element_bits(v[1]), element_bits(v[2]), element_bits(v[3]));
}
__device__ __forceinline__ int4 pack16(const __nv_bfloat16 (&v)[8]) {
  auto pair = [](__nv_bfloat16 lo, __nv_bfloat16 hi) {
    return element_bits(lo) | (element_bits(hi) << 16);
  };
  return make_int4(pair(v[0], v[1]), pair(v[2], v[3]), pair(v[4], v[5]), pair(v[6], v[7]));
}

// The matching load. The store's "memory" clobber keeps the compiler from proving that a
// __restrict__ input is read-only, so the read-only (LDG.CONSTANT) path is asked for explicitly.
template <typename T>
__device__ __forceinline__ Vec16<T> load16_ro(const T* p) {
  Vec16<T> out;
  *reinterpret_cast<int4*>(&out) = __ldg(reinterpret_cast<const int4*>(p));
  return out;
}

template <typename T>
__device__ __forceinline__ void store16_packed(T* p, const T (&v)[Vec16<T>::kCount]) {
  const int4 bits = pack16(v);
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(bits.x), "r"(bits.y),
               "r"(bits.z), "r"(bits.w)
               : "memory");
}

// Blocks for a one-vector-per-thread elementwise launch over n elements (tail included).
inline unsigned elementwise_blocks(int64_t n, int elems_per_vec, int threads) {
  const int64_t vecs = (n + elems_per_vec - 1) / elems_per_vec;
  return static_cast<unsigned>((vecs + threads - 1) / threads);
}

// ---- random inputs and poison --------------------------------------------------------------

// A counter-based hash (splitmix64): the same (seed, index) gives the same value on any GPU.
__host__ __device__ inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [lo, hi), from the top 24 bits of the hash.
__host__ __device__ inline float uniform_at(uint64_t seed, int64_t i, float lo, float hi) {
  const uint64_t h = mix64(seed ^ mix64(static_cast<uint64_t>(i)));
  const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
  return lo + (hi - lo) * u;
}

template <typename T>
Status fill_uniform(T* data, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream);

template <typename T>
Status fill_nan(T* data, int64_t n, cudaStream_t stream);

// ---- fp64 error reduction ------------------------------------------------------------------

// Accumulators for ||out - ref||^2, ||ref||^2, max |out - ref| and non-finite outputs, kept in
// device memory and reduced with atomics (one per block).
struct ErrorSums {
  double err2;
  double ref2;
  unsigned long long max_abs_bits;  // bit pattern of a non-negative double: orders like the value
  unsigned long long non_finite;
  unsigned long long count;  // finite outputs compared
};

// One thread's running error over the elements it checked.
struct ErrorPartial {
  double err2 = 0, ref2 = 0, max_abs = 0;
  unsigned long long non_finite = 0, count = 0;
  __device__ void add(double out, double ref) {
    if (!isfinite(out)) {
      ++non_finite;
      return;
    }
    const double d = out - ref;
    err2 += d * d;
    ref2 += ref * ref;
    max_abs = fmax(max_abs, fabs(d));
    ++count;
  }
};

__device__ inline void warp_reduce(ErrorPartial& p) {
  for (int off = 16; off > 0; off >>= 1) {
    p.err2 += __shfl_down_sync(0xffffffffu, p.err2, off);
    p.ref2 += __shfl_down_sync(0xffffffffu, p.ref2, off);
    p.max_abs = fmax(p.max_abs, __shfl_down_sync(0xffffffffu, p.max_abs, off));
    p.non_finite += __shfl_down_sync(0xffffffffu, p.non_finite, off);
    p.count += __shfl_down_sync(0xffffffffu, p.count, off);
  }
}

// Adds every thread's partial into `sums`: one atomic per block and field. Every thread of the
// block must call it (it has a barrier); blockDim.x must be a multiple of 32, at most 1024.
__device__ inline void block_accumulate(ErrorSums* sums, ErrorPartial p) {
  // Raw storage: __shared__ variables may not have initialisers, and ErrorPartial has default
  // member values (nvcc ignores them silently; clang, which the sm_70 check uses, refuses).
  alignas(ErrorPartial) __shared__ unsigned char s_raw[32 * sizeof(ErrorPartial)];
  ErrorPartial* s_warp = reinterpret_cast<ErrorPartial*>(s_raw);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  warp_reduce(p);
  if (lane == 0) s_warp[warp] = p;
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x >> 5;
    p = lane < warps ? s_warp[lane] : ErrorPartial{};
    warp_reduce(p);
    if (lane == 0) {
      atomicAdd(&sums->err2, p.err2);
      atomicAdd(&sums->ref2, p.ref2);
      atomicMax(&sums->max_abs_bits,
                static_cast<unsigned long long>(__double_as_longlong(p.max_abs)));
      atomicAdd(&sums->non_finite, p.non_finite);
      atomicAdd(&sums->count, p.count);
    }
  }
}

// Turns the device sums (already copied to the host) into a CheckResult.
// `rms_floor`: relative_l2_error's.
CheckResult finish_check(const ErrorSums& sums, double tolerance,
                         double rms_floor = kDefaultRmsFloor);

}  // namespace fl
