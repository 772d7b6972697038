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

// y = acc + bias[col] from an mma tile (mma_tile.cuh's MmaTile, bf16): the bias of this
// thread's columns (pairs c0 + 8 nt, c0 + 8 nt + 1) read once a column tile, where
// BiasStoreTile reads two values a stored pair; the same sums (acc + bias in fp32, rounded
// once). store_and_zero leaves the accumulators at zero for the next tile.
template <class Tile>
struct MmaColumnBias {
  float2 v[Tile::kNT];
  static __device__ __forceinline__ int64_t col0(int64_t n0) {
    return n0 + Tile::warp_n() + 2 * (threadIdx.x & 3);
  }
  __device__ __forceinline__ void load(const __nv_bfloat16* bias, int64_t n, int64_t n0) {
    const int64_t c0 = col0(n0);
#pragma unroll
    for (int nt = 0; nt < Tile::kNT; ++nt) {
      const int64_t c = c0 + nt * 8;  // even, n a multiple of 8: the pair is inside or outside
      v[nt] = c < n ? __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(bias + c))
                    : make_float2(0.0f, 0.0f);
    }
  }
  __device__ __forceinline__ void store_and_zero(typename Tile::Acc& acc, __nv_bfloat16* y,
                                                 int64_t m, int64_t n, int64_t m0,
                                                 int64_t n0) const {
    const int64_t r0 = m0 + Tile::warp_m() + (threadIdx.x & 31) / 4;
    const int64_t c0 = col0(n0);
#pragma unroll
    for (int mt = 0; mt < Tile::kMT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // rows lane / 4 and lane / 4 + 8 of the 16
        const int64_t r = r0 + mt * 16 + h * 8;
#pragma unroll
        for (int nt = 0; nt < Tile::kNT; ++nt) {
          const int64_t c = c0 + nt * 8;
          float* p = acc[mt][nt] + 2 * h;
          if (r < m && c < n) {
            *reinterpret_cast<__nv_bfloat162*>(y + r * n + c) =
                __floats2bfloat162_rn(p[0] + v[nt].x, p[1] + v[nt].y);
          }
          p[0] = p[1] = 0.0f;
        }
      }
    }
  }
};

// y = value(row, nt, acc pair) from an mma tile, staged through shared memory: each thread's
// pairs (row: the tile's row; nt: which of the thread's column pairs, MmaColumnBias::col0(n0) +
// 8 nt) go into a kBM x (kBN + 8) bf16 tile in `smem` (rows 16 bytes longer than kBN, so the 8
// rows of a warp's pair stores fall on 32 different banks), then every thread copies whole
// 16-byte chunks of it to y, a warp a row (512 contiguous bytes at kBN = 256): 16-byte coalesced
// stores instead of 4-byte ones that fill half of each 32-byte sector, and no global load between
// two stores. smem must be free (the ring after its last barrier) and hold kBM x (kBN + 8)
// elements; the caller's next barrier comes before the ring is refilled. A tile of two K groups
// stages group 0's (reduced) accumulators.
template <class Tile, class Value>
__device__ __forceinline__ void staged_store(const typename Tile::Acc& acc, __nv_bfloat16* smem,
                                             __nv_bfloat16* y, int64_t m, int64_t n, int64_t m0,
                                             int64_t n0, const Value& value) {
  constexpr int kLd = Tile::kBN + 8, kRowChunks = Tile::kBN / 8;
  static_assert(size_t(Tile::kBM) * kLd * 2 <= Tile::kSmemBytes, "the staged tile fits the ring");
  const int lane = threadIdx.x & 31;
  const int r0 = Tile::warp_m() + lane / 4, c0 = Tile::warp_n() + 2 * (lane & 3);
  if (Tile::group() == 0) {
#pragma unroll
    for (int mt = 0; mt < Tile::kMT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int nt = 0; nt < Tile::kNT; ++nt) {
          const int r = r0 + mt * 16 + h * 8;
          const float* p = acc[mt][nt] + 2 * h;
          const float2 u = value(r, nt, make_float2(p[0], p[1]));
          *reinterpret_cast<__nv_bfloat162*>(smem + r * kLd + c0 + nt * 8) =
              __floats2bfloat162_rn(u.x, u.y);
        }
      }
    }
  }
  __syncthreads();
#pragma unroll 4
  for (int i = threadIdx.x; i < Tile::kBM * kRowChunks; i += Tile::kThreads) {
    const int r = i / kRowChunks, c = i % kRowChunks;
    if (m0 + r < m && n0 + c * 8 < n) {
      *reinterpret_cast<uint4*>(y + (m0 + r) * n + n0 + c * 8) =
          *reinterpret_cast<const uint4*>(smem + r * kLd + c * 8);
    }
  }
}

// y = act(acc + bias[col]) from an mma tile, staged through shared memory (staged_store), the
// bias of this thread's columns read once (MmaColumnBias): the same values, rounded once, as
// BiasStoreTile.
template <class Tile, bool kGelu>
__device__ __forceinline__ void staged_bias_store(typename Tile::Acc& acc, __nv_bfloat16* smem,
                                                  const __nv_bfloat16* bias, __nv_bfloat16* y,
                                                  int64_t m, int64_t n, int64_t m0, int64_t n0) {
  MmaColumnBias<Tile> b;
  b.load(bias, n, n0);
  staged_store<Tile>(acc, smem, y, m, n, m0, n0, [&](int, int nt, float2 v) {
    float u0 = v.x + b.v[nt].x, u1 = v.y + b.v[nt].y;
    if (kGelu) u0 = gelu_tanh_fast(u0), u1 = gelu_tanh_fast(u1);
    return make_float2(u0, u1);
  });
}

}  // namespace fl::gemm_core
