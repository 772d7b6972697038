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
// Every rung works its addresses out once: a thread's copies of a stage are rows r0 + j step of
// one chunk column (one swizzled offset, one global pointer, constants), a lane's ldmatrix
// offsets inside a stage are computed when its fragments are made (Frags), and the ring counts
// its stages instead of dividing K-tiles by their number. Recomputed per K-tile, the index
// arithmetic outnumbered the mma several times, and at two warps a scheduler its dependent
// chains, not shared memory, left the tensor pipe idle (docs/PERFORMANCE.md, section 8).
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

// kSpread (8 warps): the warps that share a 64-column slice sit on different schedulers (an SM
// gives warp w to scheduler w % 4), so two warps that wait for the same slice leave their
// schedulers' other warps to issue mma (ln_mma_rows.cu's per-slice barriers).
// kBK_: K-tiles of 32 (64-byte rows of A) or 64 (128-byte rows: half the barriers a K; measured
// no faster, so the ladder stays at 32).
// kGroups_ (1 or 2; with kPrefetch): groups of kWarpsM x kWarpsN warps that split each K-tile's
// k16 steps (group g the g-th half of them, so K-tiles of 64 for two groups) on the same block
// tile, each into its own accumulators; reduce_groups adds group 1's into group 0's through
// shared memory at the end, and only group 0 stores. Twice the warps on a tile that has too few
// (a tile alone on its SM, one warp a scheduler): each warp issues half the mma of a K-tile.
template <int kBM_, int kBN_, int kWarpsM_, int kWarpsN_, int kStages_, bool kPrefetch_,
          bool kSpread_ = false, int kBK_ = 32, int kGroups_ = 1>
struct MmaTile {
  using T = __nv_bfloat16;
  static constexpr int kBM = kBM_, kBN = kBN_, kBK = kBK_, kStages = kStages_;
  static constexpr int kRowChunks = kBK / 8, kSteps = kBK / 16;  // of A's rows; k16 steps
  static_assert(kBK == 32 || kBK == 64, "K-tiles of 32 or 64");
  static constexpr int kWarpsM = kWarpsM_, kWarpsN = kWarpsN_, kGroups = kGroups_;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN * kGroups;
  static constexpr int kGSteps = kSteps / kGroups;  // the k16 steps a group takes of a K-tile
  static_assert(kGroups == 1 || (kGroups == 2 && kPrefetch_ && !kSpread_), "groups: 1 or 2");
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
    if constexpr (kBK == 64) return row * kBK + ((chunk ^ (row & 7)) << 3);
    return row * kBK + ((chunk ^ ((row >> 1) & 3)) << 3);
  }
  static __device__ __forceinline__ int b_at(int row, int chunk) {
    return row * kBN + ((chunk ^ (row & 7)) << 3);
  }

  // The 16-byte chunks of an A tile (row, chunk) and of a B tile this thread copies; the hook
  // later runs on the same A chunks, in the same thread (no barrier needed in between).
  static constexpr int kAChunks = kBM * kRowChunks / kThreads;
  static_assert(kBM * kRowChunks % kThreads == 0 && kBK * (kBN / 8) % kThreads == 0, "whole");
  // A thread's chunks are rows r0 + j kRowStep of one chunk column: with kRowStep a multiple of
  // 8 they share the swizzle, so one address each for shared and global memory, plus constants.
  static constexpr int kARowStep = kThreads / kRowChunks;
  static __device__ __forceinline__ void load_stage(T* stage, const T* a, int64_t lda, const T* b,
                                                    int64_t ldb, int64_t m, int64_t n, int64_t k,
                                                    int64_t m0, int64_t n0, int kt) {
    load_a(stage, a, lda, m, k, m0, kt);
    load_b<kBK>(stage + kBM * kBK, b, ldb, n, k, int64_t(kt) * kBK, n0);
  }
  // K-tile kt of A's rows m0 .. m0 + BM - 1 into an A tile at sa (zero past m and k).
  static __device__ __forceinline__ void load_a(T* sa, const T* a, int64_t lda, int64_t m,
                                                int64_t k, int64_t m0, int kt) {
    const int64_t k0 = int64_t(kt) * kBK;
    const int r0 = threadIdx.x / kRowChunks, c = threadIdx.x % kRowChunks;
    const bool k_ok = k0 + c * 8 < k;
    const T* src = a + (m0 + r0) * lda + k0 + c * 8;
#pragma unroll
    for (int j = 0; j < kAChunks; ++j) {
      const int r = r0 + j * kARowStep;
      const bool ok = k_ok && m0 + r < m;
      T* dst = kARowStep % 8 == 0 ? sa + a_at(r0, c) + j * kARowStep * kBK : sa + a_at(r, c);
      tc::copy16_async(dst, ok ? src + j * kARowStep * lda : a, ok);
    }
  }
  // Rows k0 .. k0 + kRows - 1 of B, columns n0 .. n0 + BN - 1, into a B tile at sb (zero past k
  // and n). ln_mma_rows.cu streams B alone through its ring in tiles of kRows rows.
  template <int kRows>
  static __device__ __forceinline__ void load_b(T* sb, const T* b, int64_t ldb, int64_t n,
                                                int64_t k, int64_t k0, int64_t n0) {
    constexpr int kPerRow = kBN / 8, kChunks = kRows * kPerRow / kThreads;
    constexpr int kRowStep = kThreads / kPerRow;
    static_assert(kRows * kPerRow % kThreads == 0 && kThreads % kPerRow == 0, "whole chunks");
    const int r0 = threadIdx.x / kPerRow, c = threadIdx.x % kPerRow;
    const bool n_ok = n0 + c * 8 < n;
    const T* src = b + (k0 + r0) * ldb + n0 + c * 8;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int r = r0 + j * kRowStep;
      const bool ok = n_ok && k0 + r < k;
      T* dst = kRowStep % 8 == 0 ? sb + b_at(r0, c) + j * kRowStep * kBN : sb + b_at(r, c);
      tc::copy16_async(dst, ok ? src + j * kRowStep * ldb : b, ok);
    }
  }
  // Runs hook(chunk, row, k) on this thread's chunks of A in `stage` (landed: its own wait).
  template <class Hook>
  static __device__ __forceinline__ void visit_a(T* stage, int kt, const Hook& hook) {
#pragma unroll
    for (int j = 0; j < kAChunks; ++j) {
      const int i = threadIdx.x + j * kThreads, r = i / kRowChunks, c = i % kRowChunks;
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

  // The warp's place in the block tile: warp() / kWarpsN its row of warps, warp() % kWarpsN its
  // column slice. With kSpread, warps w and w + 1 swap bits: slice partners (w, w + 4) become
  // neighbours on two schedulers.
  static __device__ __forceinline__ int warp() {
    const int w = (threadIdx.x >> 5) % (kWarpsM * kWarpsN);
    if constexpr (kSpread_ && kWarpsM * kWarpsN == 8) {
      return (w & 2) | ((w & 1) << 2) | ((w >> 2) & 1);
    } else {
      return w;
    }
  }
  static __device__ __forceinline__ int group() {
    return kGroups == 1 ? 0 : int(threadIdx.x >> 5) / (kWarpsM * kWarpsN);
  }
  // With two groups: group 1's accumulators added into group 0's through `smem` (kBM x kBN
  // floats, free: the ring after its last barrier; a warp's values lane-interleaved, so no bank
  // conflicts), then a barrier; group 0 holds the tile's sums, group 1's are left as they were.
  static __device__ __forceinline__ void reduce_groups(Acc& acc, float* smem) {
    if constexpr (kGroups == 2) {
      static_assert(size_t(kBM) * kBN * 4 <= kSmemBytes, "the partial sums fit the ring");
      constexpr int kPer = kMT * kNT * 4;
      float* p = smem + warp() * kPer * 32 + (threadIdx.x & 31);
      float* flat = &acc[0][0][0];
      if (group() == 1) {
#pragma unroll
        for (int i = 0; i < kPer; ++i) p[i * 32] = flat[i];
      }
      __syncthreads();
      if (group() == 0) {
#pragma unroll
        for (int i = 0; i < kPer; ++i) flat[i] += p[i * 32];
      }
      __syncthreads();
    }
  }
  static __device__ __forceinline__ int warp_m() {
    return (warp() / kWarpsN) * kWM;
  }
  static __device__ __forceinline__ int warp_n() {
    return (warp() % kWarpsN) * kWN;
  }

  // For ring.cuh's main loop. With kPrefetch, f[0] holds this K-tile's first step on entry and
  // the next K-tile's first step on exit; the barrier for the next K-tile (landed_next) comes
  // after the last ldmatrix of this one and before its last mma. The lane's ldmatrix addresses
  // inside a stage are worked out once: A's for each k16 step (its 16-row tiles lie 16 rows
  // apart, the same swizzle), B's for each pair of 8-column tiles (k16 steps 16 rows apart).
  struct Frags {
    FragSet f[2];
    unsigned a_off[kGSteps], b_off[kNT / 2];  // bytes from the stage's start (the group's steps)
    __device__ Frags() {
      const int lane = threadIdx.x & 31, wm = warp_m(), wn = warp_n(), g0 = group() * kGSteps;
#pragma unroll
      for (int s = 0; s < kGSteps; ++s) {
        a_off[s] = 2u * a_at(wm + (lane & 15), 2 * (g0 + s) + (lane >> 4));
      }
      const int r = 16 * g0 + (lane & 7) + ((lane >> 3) & 1) * 8;  // 16 g0: the same swizzle
#pragma unroll
      for (int q = 0; q < kNT / 2; ++q) {
        b_off[q] = 2u * (kBM * kBK + b_at(r, (wn >> 3) + 2 * q + (lane >> 4)));
      }
    }
  };
  static __device__ __forceinline__ void ldsm(unsigned (&r)[4], unsigned addr, bool trans) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (trans) {
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                   : "r"(addr));
    } else {
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                   : "r"(addr));
    }
#endif
  }
  // The group's k16 step `ks` of the warp's piece of the stage at `stage`, by fr's addresses.
  static __device__ __forceinline__ void load_frags(FragSet& f, const T* stage, const Frags& fr,
                                                    int ks) {
    const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(stage));
    load_frags_at(f, base, base, fr, ks);
  }
  // The same with A and B apart: a_base the A tile's shared address, b_base the B tile's less
  // kBM x kBK elements (Frags' B offsets count from a stage's start); resident_ring.cuh's B
  // stays in shared memory for the whole of K.
  static __device__ __forceinline__ void load_frags_at(FragSet& f, unsigned a_base, unsigned b_base,
                                                       const Frags& fr, int ks) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) ldsm(f.a[mt], a_base + fr.a_off[ks] + mt * 32 * kBK, false);
#pragma unroll
    for (int q = 0; q < kNT / 2; ++q) {
      unsigned r[4];
      ldsm(r, b_base + fr.b_off[q] + ks * 32 * kBN, true);
      f.b[2 * q][0] = r[0], f.b[2 * q][1] = r[1], f.b[2 * q + 1][0] = r[2],
              f.b[2 * q + 1][1] = r[3];
    }
  }
  static __device__ __forceinline__ void begin(Frags& fr, const T* stage) {
    load_frags(fr.f[0], stage, fr, 0);
  }
  template <class Landed>
  static __device__ __forceinline__ void compute(Acc& acc, Frags& fr, const T* stage, const T* next,
                                                 bool has_next, const Landed& landed_next) {
    static_assert(kGSteps % 2 == 0, "the last step's fragments in f[1]");
#pragma unroll
    for (int s = 0; s < kGSteps; ++s) {
      if constexpr (kPrefetch) {  // step s in f[s % 2]; step s + 1 (or the next K-tile's 0) flies
        if (s + 1 < kGSteps) {
          load_frags(fr.f[(s + 1) % 2], stage, fr, s + 1);
        } else {
          landed_next();
          if (has_next) load_frags(fr.f[0], next, fr, 0);
        }
        mma_all(acc, fr.f[s % 2]);
      } else {
        load_frags(fr.f[0], stage, fr, s);
        mma_all(acc, fr.f[0]);
      }
    }
  }

  // Hands the accumulators to epi(row, col, float (&)[2]) as pairs of adjacent columns (row and
  // col absolute; col even).
  template <class Epi>
  static __device__ __forceinline__ void store(Acc& acc, int64_t m0, int64_t n0, const Epi& epi) {
    const int lane = threadIdx.x & 31;
    const int64_t r0 = m0 + warp_m() + (lane >> 2), c0 = n0 + warp_n() + 2 * (lane & 3);
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
