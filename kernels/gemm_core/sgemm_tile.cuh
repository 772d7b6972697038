// The portable GEMM core's fp32 block tile on the CUDA cores (no TF32: the lessons' fp32 results
// stay fp32), the fp32 rung of the GEMM ladder and the fp32 tile of the large-token portable
// kernels (layernorm_linear/ln_mma.cu, ffn/ffn_tiles.cu). Every GPU from sm_70 (below sm_80 the
// ring's cp.async becomes a plain copy: same order, no overlap).
//
// What changes against the rung before (tensor_gemm.cuh's fp32 path: the mma fragment layout
// multiplied with FMAs, a thread's 2 x 2 of each 16 x 8 tile read as single floats, 2 MT + 2 NT
// 4-byte shared loads for 4 MT NT FMAs), in the order of siboehm's SGEMM_CUDA steps:
//   1. register blocking: a thread owns 8 x 8 outputs (64 accumulators) as two 4 x 4 blocks
//      along M 32 rows apart and two along N 16 columns apart, so a warp's loads are broadcasts
//      or contiguous;
//   2. vector loads: A stays k-contiguous in shared memory (cp.async cannot transpose), so a
//      thread reads 4 k of one row with one 16-byte load; B's 4 columns are one 16-byte load.
//      Per 4 k: 8 loads of A and 8 of B feed 256 FMAs (16 FMAs a load; the rung before: 1);
//   3. warp tiling: 8 warps as 2 x 4 of 64 x 32, a warp's 32 threads as 8 x 4 of 8 x 8; A's
//      16-byte chunks swizzled (chunk ^ ((row / 4) % 4)) so the two rows a quarter-warp reads
//      fall in different banks.
// Tile: BM x BN = 128 x 128, BK = 16 (64 bytes a row of A), 3 stages of 16 KiB = 48 KiB, 256
// threads. Budget per K-tile and block: 16 KiB into shared memory for 2 x 128 x 128 x 16 =
// 0.5 MFLOP (32 FLOP per byte filled); shared reads 256 threads x 64 x 16 B = 256 KiB, 2048
// clocks at 128 B a clock against 1024 clocks of FMA at 128 lanes a clock: with two blocks an
// SM the FMA pipes, not shared memory, are the limit only because loads and FMAs overlap across
// warps (SGEMM_CUDA's warp-tiled step reached ~90% of cuBLAS the same way).
// Shapes: any M; N and K multiples of 4 (whole 16-byte chunks), 16-byte aligned rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gemm_core/ring.cuh"
#include "kernels/tensor_gemm.cuh"

namespace fl::gemm_core {

template <int kStages_>
struct SgemmTile {
  using T = float;
  static constexpr int kBM = 128, kBN = 128, kBK = 16, kStages = kStages_, kThreads = 256;
  static constexpr int kWarpsN = 4, kWM = 64, kWN = 32;
  static constexpr bool kPrefetch = false;
  static constexpr int kStageElems = kBM * kBK + kBK * kBN;
  static constexpr size_t kSmemBytes = sizeof(T) * size_t(kStages) * kStageElems;
  static constexpr int kMinBlocks = 2;
  static constexpr int kAChunks = kBM * 4 / kThreads, kBChunks = kBK * (kBN / 4) / kThreads;
  using Acc = float[8][8];
  struct Frags {};

  // Element offset of 16-byte chunk `chunk` (4 k) of row `row` in an A tile (BM x 16).
  static __device__ __forceinline__ int a_at(int row, int chunk) {
    return row * kBK + ((chunk ^ ((row >> 2) & 3)) << 2);
  }
  static __device__ __forceinline__ void load_stage(T* stage, const T* a, int64_t lda, const T* b,
                                                    int64_t ldb, int64_t m, int64_t n, int64_t k,
                                                    int64_t m0, int64_t n0, int kt) {
    const int64_t k0 = int64_t(kt) * kBK;
#pragma unroll
    for (int j = 0; j < kAChunks; ++j) {
      const int i = threadIdx.x + j * kThreads, r = i >> 2, c = i & 3;
      const bool ok = m0 + r < m && k0 + c * 4 < k;
      tc::copy16_async(stage + a_at(r, c), ok ? a + (m0 + r) * lda + k0 + c * 4 : a, ok);
    }
    T* sb = stage + kBM * kBK;
    constexpr int kPerRow = kBN / 4;
#pragma unroll
    for (int j = 0; j < kBChunks; ++j) {
      const int i = threadIdx.x + j * kThreads, r = i / kPerRow, c = i % kPerRow;
      const bool ok = k0 + r < k && n0 + c * 4 < n;
      tc::copy16_async(sb + r * kBN + c * 4, ok ? b + (k0 + r) * ldb + n0 + c * 4 : b, ok);
    }
  }
  template <class Hook>
  static __device__ __forceinline__ void visit_a(T* stage, int kt, const Hook& hook) {
#pragma unroll
    for (int j = 0; j < kAChunks; ++j) {
      const int i = threadIdx.x + j * kThreads, r = i >> 2, c = i & 3;
      hook(stage + a_at(r, c), r, int64_t(kt) * kBK + c * 4);
    }
  }

  // A thread's rows (i = 0..7) and first columns (h = 0, 1) within the block tile.
  static __device__ __forceinline__ int row_of(int i) {
    const int warp = threadIdx.x >> 5, ty = (threadIdx.x & 31) >> 2;
    return (warp / kWarpsN) * kWM + (i >> 2) * 32 + ty * 4 + (i & 3);
  }
  static __device__ __forceinline__ int col_of(int h) {
    const int warp = threadIdx.x >> 5, tx = threadIdx.x & 3;
    return (warp % kWarpsN) * kWN + h * 16 + tx * 4;
  }

  static __device__ __forceinline__ void zero(Acc& acc) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
  }
  static __device__ __forceinline__ void begin(Frags&, const T*) {}

  template <class Landed>
  static __device__ __forceinline__ void compute(Acc& acc, Frags&, const T* stage, const T*, bool,
                                                 const Landed&) {
    const T* sb = stage + kBM * kBK;
    const int c0 = col_of(0);
#pragma unroll
    for (int kq = 0; kq < kBK / 4; ++kq) {
      float4 a4[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        a4[i] = *reinterpret_cast<const float4*>(stage + a_at(row_of(i), kq));
      }
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const float* brow = sb + (kq * 4 + kk) * kBN + c0;
        const float4 b0 = *reinterpret_cast<const float4*>(brow);
        const float4 b1 = *reinterpret_cast<const float4*>(brow + 16);
        const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float av = kk == 0 ? a4[i].x : kk == 1 ? a4[i].y : kk == 2 ? a4[i].z : a4[i].w;
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av, bv[j], acc[i][j]);
        }
      }
    }
  }

  // Hands the accumulators to epi(row, col, float (&)[4]), 4 adjacent columns at a time.
  template <class Epi>
  static __device__ __forceinline__ void store(Acc& acc, int64_t m0, int64_t n0, const Epi& epi) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float v[4] = {acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]};
        epi(m0 + row_of(i), n0 + col_of(h), v);
      }
    }
  }
};

// The configuration the lessons run (the ladder's top fp32 rung).
using LessonSgemmTile = SgemmTile<3>;

}  // namespace fl::gemm_core
