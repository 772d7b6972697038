// The portable GEMM core's bf16 block tile (sm_80+: cp.async, ldmatrix, mma.sync m16n8k16), the
// top rungs of the GEMM ladder (kernels/gemm_core/gemm_ladder.h lists them) and the tile under
// the large-token portable kernels (layernorm_linear/ln_mma.cu, ffn/ffn_tiles.cu).
//
// What changes against the rung before (tensor_gemm.cuh's block_mainloop: 128 x 128 tiles,
// 8 warps of 64 x 32, rows padded by 16 bytes, fragments loaded just before their mma):
//   1. swizzled shared memory: a 16-byte chunk's column is XORed with bits of its row, so the
//      8 rows one ldmatrix phase reads fall in 8 different bank groups without padding (rows of
//      an A tile are 64 bytes: chunk ^ ((row / 2) % 4); B rows are BN x 2 bytes: chunk ^ (row %
//      8));
//   2. warp tiles of 64 x 64 (kWarpsM x kWarpsN = 2 x 2, 128 threads): a k16 step loads 4 A and
//      4 B ldmatrix.x4 (4 KiB of shared memory for the warp) for 32 mma, where 64 x 32 loads
//      6 for 16: shared-memory reads per mma fall from 384 to 128 bytes;
//   3. fragments double-buffered in registers (kPrefetch): the next k16 step's ldmatrix are in
//      flight while this step's mma run; the ring's one barrier per K-tile comes before the
//      last step's mma, whose fragments are already in registers, so the stage can be refilled.
//
// Tile (the lessons' configuration, MmaTile<128, 128, 2, 2, 4, true>): BM x BN = 128 x 128,
// BK = 32 (64 bytes a row of A), 4 stages of 16 KiB = 64 KiB of shared memory, 128 threads,
// accumulators 4 x 8 x 4 = 128 fp32 registers a thread. Two blocks fit an SM of 228 KiB (H100)
// or 164 KiB (A100); one fits 100 KiB (sm_86, sm_89).
// Budget per K-tile and block: 16 KiB into shared memory, 2 x 128 x 128 x 32 = 1 MFLOP (64 FLOP
// per byte filled); ldmatrix reads 4 warps x 2 steps x 8 x 512 B = 32 KiB. At an H100's 128 B of
// shared memory a clock per SM that is 256 clocks, under the ~400 clocks the 256 mma of both
// resident blocks' k-tile take at mma.sync's rate (about 0.6 of wgmma's 4096 FLOP a clock).
// Shapes: any M; N and K multiples of 8 (whole 16-byte chunks, zero-filled past the edge) and
// 16-byte aligned rows: the callers' shape checks refuse the rest.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gemm_core/ring.cuh"
#include "kernels/tensor_gemm.cuh"

namespace fl::gemm_core {

template <int kBM_, int kBN_, int kWarpsM_, int kWarpsN_, int kStages_, bool kPrefetch_>
struct MmaTile {
  using T = __nv_bfloat16;
  static constexpr int kBM = kBM_, kBN = kBN_, kBK = 32, kStages = kStages_;
  static constexpr int kWarpsM = kWarpsM_, kWarpsN = kWarpsN_, kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr bool kPrefetch = kPrefetch_;
  static constexpr int kWM = kBM / kWarpsM, kWN = kBN / kWarpsN, kMT = kWM / 16, kNT = kWN / 8;
  static constexpr int kStageElems = kBM * kBK + kBK * kBN;
  static constexpr size_t kSmemBytes = sizeof(T) * size_t(kStages) * kStageElems;
  static constexpr int kMinBlocks = kThreads <= 128 ? 2 : 1;  // for __launch_bounds__
  static_assert(kBN % 64 == 0 && kNT % 2 == 0 && kWM % 16 == 0, "whole swizzle rows and tiles");
  using Acc = float[kMT][kNT][4];

  // Element offsets of 16-byte chunk `chunk` of row `row` in an A tile (BM x 32) and a B tile
  // (32 x BN), swizzled.
  static __device__ __forceinline__ int a_at(int row, int chunk) {
    return row * kBK + ((chunk ^ ((row >> 1) & 3)) << 3);
  }
  static __device__ __forceinline__ int b_at(int row, int chunk) {
    return row * kBN + ((chunk ^ (row & 7)) << 3);
  }

  // The 16-byte chunks of an A tile (row, chunk) and of a B tile this thread copies; the hook
  // later runs on the same A chunks, in the same thread (no barrier needed in between).
  static constexpr int kAChunks = kBM * 4 / kThreads, kBChunks = kBK * (kBN / 8) / kThreads;
  static_assert(kBM * 4 % kThreads == 0 && kBK * (kBN / 8) % kThreads == 0, "whole chunks");
  static __device__ __forceinline__ void load_stage(T* stage, const T* a, int64_t lda, const T* b,
                                                    int64_t ldb, int64_t m, int64_t n, int64_t k,
                                                    int64_t m0, int64_t n0, int kt) {
    const int64_t k0 = int64_t(kt) * kBK;
#pragma unroll
    for (int j = 0; j < kAChunks; ++j) {
      const int i = threadIdx.x + j * kThreads, r = i >> 2, c = i & 3;
      const bool ok = m0 + r < m && k0 + c * 8 < k;
      tc::copy16_async(stage + a_at(r, c), ok ? a + (m0 + r) * lda + k0 + c * 8 : a, ok);
    }
    load_b<kBK>(stage + kBM * kBK, b, ldb, n, k, k0, n0);
  }
  // Rows k0 .. k0 + kRows - 1 of B, columns n0 .. n0 + BN - 1, into a B tile at sb (zero past k
  // and n). ln_mma_rows.cu streams B alone through its ring in tiles of kRows rows.
  template <int kRows>
  static __device__ __forceinline__ void load_b(T* sb, const T* b, int64_t ldb, int64_t n,
                                                int64_t k, int64_t k0, int64_t n0) {
    constexpr int kPerRow = kBN / 8, kChunks = kRows * kPerRow / kThreads;
    static_assert(kRows * kPerRow % kThreads == 0, "whole chunks");
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int i = threadIdx.x + j * kThreads, r = i / kPerRow, c = i % kPerRow;
      const bool ok = k0 + r < k && n0 + c * 8 < n;
      tc::copy16_async(sb + b_at(r, c), ok ? b + (k0 + r) * ldb + n0 + c * 8 : b, ok);
    }
  }
  // Runs hook(chunk, row, k) on this thread's chunks of A in `stage` (landed: its own wait).
  template <class Hook>
  static __device__ __forceinline__ void visit_a(T* stage, int kt, const Hook& hook) {
#pragma unroll
    for (int j = 0; j < kAChunks; ++j) {
      const int i = threadIdx.x + j * kThreads, r = i >> 2, c = i & 3;
      hook(stage + a_at(r, c), r, int64_t(kt) * kBK + c * 8);
    }
  }

  struct FragSet {
    unsigned a[kMT][4], b[kNT][2];
  };
  // The A fragments of the warp's 64 rows from wm for the k16 step whose first 16-byte chunk
  // column is `chunk0`: at(row, chunk) is where chunk `chunk` of row `row` lies (a_at in a stage;
  // ln_mma_rows.cu's resident panel of x lays its rows out otherwise).
  template <class At>
  static __device__ __forceinline__ void load_a_frags(unsigned (&a)[kMT][4], const At& at, int wm,
                                                      int chunk0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {  // rows lane % 16, k chunk chunk0 + lane / 16
      const T* p = at(wm + mt * 16 + (lane & 15), chunk0 + (lane >> 4));
      const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(a[mt][0]), "=r"(a[mt][1]), "=r"(a[mt][2]), "=r"(a[mt][3])
                   : "r"(addr));
    }
#endif
  }
  // The B fragments of the warp's 64 columns from wn, k16 step `ks` of the B tile at sb.
  static __device__ __forceinline__ void load_b_frags(unsigned (&b)[kNT][2], const T* sb, int wn,
                                                      int ks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int nt = 0; nt < kNT; nt += 2) {  // k rows lane % 8 (+8), n chunks of tiles nt, nt + 1
      const int r = ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
      const T* p = sb + b_at(r, (wn >> 3) + nt + (lane >> 4));
      const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(b[nt][0]), "=r"(b[nt][1]), "=r"(b[nt + 1][0]), "=r"(b[nt + 1][1])
                   : "r"(addr));
    }
#endif
  }
  // The fragments of k16 step `ks` (0 or 1) of the warp's 64 x 64 piece of `stage`.
  static __device__ __forceinline__ void load_frags(FragSet& f, const T* stage, int wm, int wn,
                                                    int ks) {
    load_a_frags(
        f.a, [stage](int r, int c) { return stage + a_at(r, c); }, wm, ks * 2);
    load_b_frags(f.b, stage + kBM * kBK, wn, ks);
  }
  static __device__ __forceinline__ void mma_all(Acc& acc, const FragSet& f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        float* c = acc[mt][nt];
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(f.a[mt][0]), "r"(f.a[mt][1]), "r"(f.a[mt][2]), "r"(f.a[mt][3]), "r"(f.b[nt][0]),
              "r"(f.b[nt][1]));
      }
    }
#else
    __trap();  // bf16 needs compute capability 8.0 (the lessons do not offer it below)
#endif
  }

  static __device__ __forceinline__ void zero(Acc& acc) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
  }

  // The warp's piece of the block tile.
  static __device__ __forceinline__ int warp_m() {
    return ((threadIdx.x >> 5) / kWarpsN) * kWM;
  }
  static __device__ __forceinline__ int warp_n() {
    return ((threadIdx.x >> 5) % kWarpsN) * kWN;
  }

  // For ring.cuh's main loop. With kPrefetch, f[0] holds this K-tile's first step on entry and
  // the next K-tile's first step on exit; the barrier for the next K-tile (landed_next) comes
  // after the last ldmatrix of this one and before its last mma.
  struct Frags {
    FragSet f[2];
  };
  static __device__ __forceinline__ void begin(Frags& fr, const T* stage) {
    load_frags(fr.f[0], stage, warp_m(), warp_n(), 0);
  }
  template <class Landed>
  static __device__ __forceinline__ void compute(Acc& acc, Frags& fr, const T* stage, const T* next,
                                                 bool has_next, const Landed& landed_next) {
    const int wm = warp_m(), wn = warp_n();
    if constexpr (kPrefetch) {
      load_frags(fr.f[1], stage, wm, wn, 1);
      mma_all(acc, fr.f[0]);
      landed_next();
      if (has_next) load_frags(fr.f[0], next, wm, wn, 0);
      mma_all(acc, fr.f[1]);
    } else {
      load_frags(fr.f[0], stage, wm, wn, 0);
      mma_all(acc, fr.f[0]);
      load_frags(fr.f[1], stage, wm, wn, 1);
      mma_all(acc, fr.f[1]);
    }
  }

  // Hands the accumulators to epi(row, col, float (&)[2]) as pairs of adjacent columns (row and
  // col absolute; col even).
  template <class Epi>
  static __device__ __forceinline__ void store(Acc& acc, int64_t m0, int64_t n0, const Epi& epi) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t r0 = m0 + (warp / kWarpsN) * kWM + (lane >> 2);
    const int64_t c0 = n0 + (warp % kWarpsN) * kWN + 2 * (lane & 3);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        float lo[2] = {acc[mt][nt][0], acc[mt][nt][1]}, hi[2] = {acc[mt][nt][2], acc[mt][nt][3]};
        epi(r0 + mt * 16, c0 + nt * 8, lo);
        epi(r0 + mt * 16 + 8, c0 + nt * 8, hi);
      }
    }
  }
};

// The configuration the lessons run (the ladder's top bf16 rung).
using LessonMmaTile = MmaTile<128, 128, 2, 2, 4, true>;

}  // namespace fl::gemm_core
