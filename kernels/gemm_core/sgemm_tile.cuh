// The portable GEMM core's fp32 block tiles on the CUDA cores (no TF32: the lessons' fp32
// results stay fp32): the fp32 rungs of the GEMM ladder and the fp32 tile of the large-token
// portable kernels (layernorm_linear/ln_mma.cu, ffn/ffn_tiles.cu). Every GPU from sm_70 (below
// sm_80 the ring's cp.async becomes a plain copy: same order, no overlap).
//
// Both tiles: BM x BN = 128 x 128, 256 threads, a thread owns 8 x 8 outputs (64 accumulators)
// as two 4 x 4 blocks along M 32 rows apart and two along N 16 columns apart; 8 warps as 2 x 4
// of 64 x 32, a warp's 32 threads as 8 x 4 of 8 x 8, so a warp's shared loads are broadcasts
// of contiguous bytes. B's K-tile is row-major (BK x 128), a thread's 8 columns two 16-byte
// loads. What differs is how A reaches the FMAs.
//
// SgemmTile (rung fp32_warptile), against the rung before (tensor_gemm.cuh's fp32 path: the
// mma fragment layout with FMAs, 2 MT + 2 NT 4-byte shared loads for 4 MT NT FMAs), in the
// order of siboehm's SGEMM_CUDA steps: register blocking (8 x 8), vector loads, warp tiling.
// A stays k-contiguous as cp.async lands it (rows of BK = 16, 16-byte chunks swizzled chunk ^
// ((row / 4) % 4)), so a thread reads 4 k of each of its 8 rows with one 16-byte load: 8 loads
// of A and 8 of B per 4 k feed 256 FMAs, but the 8 A vectors (32 registers) stay live beside 64
// accumulators, and under the 128-register cap of two 256-thread blocks an SM ptxas spills.
//
// SgemmTileT (rungs fp32_transposed_a and fp32_bk8_4stage, the lessons' tile): A transposed in
// shared memory, as SGEMM_CUDA's later kernels keep it. cp.async still lands A k-contiguous (it
// cannot transpose); right after its copies land, each thread moves its own chunks into a
// k-major copy (BK x 128) of the stage, which is also where the LayerNorm prologue's hook sees
// them. Then a thread's 8 rows for one k are two 16-byte loads, like B's columns: per k 4 loads
// feed 64 FMAs, and only 16 fragment registers are live beside the accumulators (no spills
// under the 128-register cap).
//   stage: A as landed (128 x BK, chunks swizzled chunk ^ ((row / (32 / BK)) % (BK / 4)) so that
//          8 consecutive rows' same chunk fall in different banks), B (BK x 128), A^T (BK x 128);
//   thread -> chunks of A: 32 consecutive rows of one chunk column a warp, so a warp's
//          transposed 4-byte stores are 32 consecutive floats (no bank conflicts);
//   the lessons' tile: BK = 8, 4 stages of 12 KiB = 48 KiB a block (BK = 16 in 2 stages is the
//          same bytes and ran slower: the longer K-tile waits on its barrier with less in
//          flight), two blocks an SM even on sm_86 / sm_89 (100 KiB) and sm_70 (96 KiB).
// Budget per K-tile of 8 and block: 8 KiB from L2 into shared memory for 2 x 128 x 128 x 8 =
// 0.26 MFLOP (32 FLOP per byte); 131072 FMAs, 1024 clocks of an SM's 128 FP32 lanes; shared
// reads per warp and k four 16-byte loads whose 32 lanes touch 128 (A) or 64 (B) distinct
// bytes, one wavefront each: 8 warps x 8 k x 4 = 256 wavefronts against 1024 FMA clocks; the
// transpose adds one 16-byte load and 4 stores a thread. Peak fp32 on an H100 SXM (132 SMs,
// 1.98 GHz): 67 TFLOP/s.
// Shapes: any M; N and K multiples of 4 (whole 16-byte chunks), 16-byte aligned rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gemm_core/ring.cuh"
#include "kernels/tensor_gemm.cuh"

namespace fl::gemm_core {

// What both fp32 tiles share: 256 threads, a thread's 8 x 8 outputs, the epilogue's walk, B's
// K-tile copy.
template <int kBK_>
struct SgemmThreads {
  using T = float;
  static constexpr int kBM = 128, kBN = 128, kBK = kBK_, kThreads = 256;
  static constexpr int kWarpsN = 4, kWM = 64, kWN = 32;
  static constexpr bool kPrefetch = false;
  static constexpr int kBChunks = kBK * (kBN / 4) / kThreads;
  using Acc = float[8][8];
  struct Frags {};

  // A thread's rows (i = 0..7) and first columns (h = 0, 1) within the block tile.
  static __device__ __forceinline__ int row_of(int i) {
    const int warp = threadIdx.x >> 5, ty = (threadIdx.x & 31) >> 2;
    return (warp / kWarpsN) * kWM + (i >> 2) * 32 + ty * 4 + (i & 3);
  }
  static __device__ __forceinline__ int col_of(int h) {
    const int warp = threadIdx.x >> 5, tx = threadIdx.x & 3;
    return (warp % kWarpsN) * kWN + h * 16 + tx * 4;
  }

  // B's K-tile kt (rows k0 .., columns n0 .. n0 + 127) into sb, row-major, zeros past K and N.
  static __device__ __forceinline__ void load_b(T* sb, const T* b, int64_t ldb, int64_t n,
                                                int64_t k, int64_t n0, int64_t k0) {
    constexpr int kPerRow = kBN / 4;
#pragma unroll
    for (int j = 0; j < kBChunks; ++j) {
      const int i = threadIdx.x + j * kThreads, r = i / kPerRow, c = i % kPerRow;
      const bool ok = k0 + r < k && n0 + c * 4 < n;
      tc::copy16_async(sb + r * kBN + c * 4, ok ? b + (k0 + r) * ldb + n0 + c * 4 : b, ok);
    }
  }

  static __device__ __forceinline__ void zero(Acc& acc) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
  }
  static __device__ __forceinline__ void begin(Frags&, const T*) {}

  // acc[i][j] += a[i] b[j]: one k of the thread's 8 x 8 block.
  static __device__ __forceinline__ void outer(Acc& acc, const float (&a)[8], const float (&b)[8]) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
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

// A k-contiguous in shared memory (rung fp32_warptile).
template <int kStages_>
struct SgemmTile : SgemmThreads<16> {
  static constexpr int kStages = kStages_;
  static constexpr int kStageElems = kBM * kBK + kBK * kBN;
  static constexpr size_t kSmemBytes = sizeof(T) * size_t(kStages) * kStageElems;
  static constexpr int kMinBlocks = 2;
  static constexpr int kAChunks = kBM * 4 / kThreads;

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
    load_b(stage + kBM * kBK, b, ldb, n, k, n0, k0);
  }
  template <class Hook>
  static __device__ __forceinline__ void visit_a(T* stage, int kt, const Hook& hook) {
#pragma unroll
    for (int j = 0; j < kAChunks; ++j) {
      const int i = threadIdx.x + j * kThreads, r = i >> 2, c = i & 3;
      hook(stage + a_at(r, c), r, int64_t(kt) * kBK + c * 4);
    }
  }

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
        float av[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          av[i] = kk == 0 ? a4[i].x : kk == 1 ? a4[i].y : kk == 2 ? a4[i].z : a4[i].w;
        }
        outer(acc, av, bv);
      }
    }
  }
};

// A transposed in shared memory by the threads that copied it (rung fp32_transposed_a).
template <int kBK_, int kStages_, int kMinBlocks_ = 2>
struct SgemmTileT : SgemmThreads<kBK_> {
  using Base = SgemmThreads<kBK_>;
  using T = float;
  using Acc = typename Base::Acc;
  using Frags = typename Base::Frags;
  using Base::kBK;
  using Base::kBM;
  using Base::kBN;
  using Base::kThreads;
  static_assert(kBK_ == 8 || kBK_ == 16, "A rows of 2 or 4 chunks");
  static constexpr int kStages = kStages_, kMinBlocks = kMinBlocks_;
  static constexpr int kAElems = kBM * kBK, kBElems = kBK * kBN;
  static constexpr int kStageElems = 2 * kAElems + kBElems;  // A as landed, B, A^T
  static constexpr size_t kSmemBytes = sizeof(T) * size_t(kStages) * kStageElems;
  static constexpr int kRowChunks = kBK / 4, kAChunks = kBM * kRowChunks / kThreads;

  // Element offset of chunk `chunk` of row `row` of A as landed: 32 / BK rows share 128 bytes,
  // so the chunk index is XORed with the row's 128-byte line within a group of kRowChunks.
  static __device__ __forceinline__ int a_at(int row, int chunk) {
    return row * kBK + ((chunk ^ ((row / (32 / kBK)) % kRowChunks)) << 2);
  }
  // Thread's j-th chunk of A: row r (32 consecutive a warp), chunk column c.
  static __device__ __forceinline__ int a_row(int j) { return (threadIdx.x + j * kThreads) % kBM; }
  static __device__ __forceinline__ int a_chunk(int j) {
    return (threadIdx.x + j * kThreads) / kBM;
  }

  static __device__ __forceinline__ void load_stage(T* stage, const T* a, int64_t lda, const T* b,
                                                    int64_t ldb, int64_t m, int64_t n, int64_t k,
                                                    int64_t m0, int64_t n0, int kt) {
    const int64_t k0 = int64_t(kt) * kBK;
#pragma unroll
    for (int j = 0; j < kAChunks; ++j) {
      const int r = a_row(j), c = a_chunk(j);
      const bool ok = m0 + r < m && k0 + c * 4 < k;
      tc::copy16_async(stage + a_at(r, c), ok ? a + (m0 + r) * lda + k0 + c * 4 : a, ok);
    }
    Base::load_b(stage + kAElems, b, ldb, n, k, n0, k0);
  }
  // This thread's landed chunks of A: the hook (in place), then into A^T.
  template <class Hook>
  static __device__ __forceinline__ void visit_a(T* stage, int kt, const Hook& hook) {
    T* at = stage + kAElems + kBElems;
#pragma unroll
    for (int j = 0; j < kAChunks; ++j) {
      const int r = a_row(j), c = a_chunk(j);
      T* chunk = stage + a_at(r, c);
      hook(chunk, r, int64_t(kt) * kBK + c * 4);
      const float4 v = *reinterpret_cast<const float4*>(chunk);
      at[(4 * c + 0) * kBM + r] = v.x;
      at[(4 * c + 1) * kBM + r] = v.y;
      at[(4 * c + 2) * kBM + r] = v.z;
      at[(4 * c + 3) * kBM + r] = v.w;
    }
  }

  template <class Landed>
  static __device__ __forceinline__ void compute(Acc& acc, Frags&, const T* stage, const T*, bool,
                                                 const Landed&) {
    const T* sb = stage + kAElems;
    const T* at = sb + kBElems;
    const int r0 = Base::row_of(0), c0 = Base::col_of(0);
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      const float4 a0 = *reinterpret_cast<const float4*>(at + kk * kBM + r0);
      const float4 a1 = *reinterpret_cast<const float4*>(at + kk * kBM + r0 + 32);
      const float4 b0 = *reinterpret_cast<const float4*>(sb + kk * kBN + c0);
      const float4 b1 = *reinterpret_cast<const float4*>(sb + kk * kBN + c0 + 16);
      const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
      Base::outer(acc, av, bv);
    }
  }
};

// The configuration the lessons run (the ladder's top fp32 rung).
using LessonSgemmTile = SgemmTileT<8, 4>;

}  // namespace fl::gemm_core
