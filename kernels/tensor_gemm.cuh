// Our small GEMM core, shared by the fused rungs of the GEMM lessons (6 layernorm_linear, 8 ffn)
// and written to be read. It computes a block's tile of C = A B with A (tokens x K) and
// B (K x N, the weights) row-major, accumulating in fp32.
//
// Data path, one block tile (BM x BN) over the whole K:
//
//   HBM/L2 --cp.async 16 B--> shared memory ring (kStages tiles of A: BM x BK, B: BK x BN)
//          --ldmatrix--> registers (fragments) --mma.sync m16n8k16--> fp32 accumulators
//
//   * cp.async copies global memory straight into shared memory without passing through
//     registers, so the next kStages-1 K-tiles are in flight while the warps multiply the
//     current one (a multi-stage, "double-buffered and then some" pipeline).
//   * Each warp owns a WM x WN piece of the tile: (WM/16) x (WN/8) mma tiles of 16 x 8.
//     ldmatrix loads a 16 x 16 A fragment or two 16 x 8 B fragments (.trans, because B is
//     K-major in memory while mma wants it "column-major") in one instruction.
//   * Rows of shared memory are padded by 16 bytes, so the 8 row addresses of an ldmatrix fall
//     in 8 different 4-bank groups (no bank conflicts; a swizzle would save the padding).
//
// Precisions:
//   bf16 on sm_80+: mma.sync bf16 x bf16 -> fp32 on the tensor cores.
//   fp32:           the same tiles and fragment layout, multiplied on the CUDA cores (fp32 FMA):
//                   the lessons' fp32 results stay fp32-exact (no TF32 rounding). A warp
//                   tile's step is then an outer product per k: 2 MT + 2 NT shared loads feed
//                   4 MT NT FMAs.
//   below sm_80:    cp.async becomes a plain 16-byte copy (same pipeline order, no overlap);
//                   bf16 is not offered there (Precision's rules), so its mma is not compiled.
//
// Shapes: any M, N, K. When K and N are multiples of 16 bytes' worth of elements (and the
// pointers are 16-byte aligned) the loads are 16-byte cp.async; otherwise (odd C in the tests)
// a slower element-wise loader fills the same shared-memory tiles, zero-padded.
//
// Budget, the default LayerNorm-Linear tile (BM = BN = 128, BK = 32 bf16): per K-tile a block
// moves (128 + 128) x 32 x 2 B = 16 KiB into shared memory and does 2 x 128 x 128 x 32 = 1 MFLOP,
// 64 FLOP per byte of shared-memory fill; the whole GEMM reads A N/BN times and B M/BM times
// (mostly from L2).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/device_common.cuh"

namespace fl::tc {

// ---- the tile shapes ------------------------------------------------------------------------
// kBM x kBN per block, kWarpsM x kWarpsN warps multiplying, a K-tile of kKBytes per row (64:
// 32 bf16 or 16 fp32; 128 for weight-streaming kernels that want more bytes in flight), kStages
// K-tiles in flight, kThreads threads per block. A block may have more threads than multiplying
// warps: small tiles (a few tokens) still want many threads issuing copies and normalizing, and
// the extra warps sit out the multiply (they would only add padded rows).
template <int kBM_, int kBN_, int kWarpsM_, int kWarpsN_, int kStages_, int kKBytes_ = 64,
          int kThreads_ = 32 * (kWarpsM_ * kWarpsN_)>
struct TileConfig {
  static constexpr int kBM = kBM_, kBN = kBN_, kWarpsM = kWarpsM_, kWarpsN = kWarpsN_;
  static constexpr int kStages = kStages_, kKBytes = kKBytes_;
  static constexpr int kThreads = kThreads_, kMmaWarps = kWarpsM * kWarpsN;
  static_assert(kThreads >= 32 * kMmaWarps && kThreads % 32 == 0,
                "every multiplying warp is in the block");
  static constexpr int kWM = kBM / kWarpsM, kWN = kBN / kWarpsN;  // one warp's piece
  static constexpr int kMT = kWM / 16, kNT = kWN / 8;             // its mma tiles
  static_assert(kWM % 16 == 0 && kWN % 16 == 0, "a warp's piece is whole 16 x 16 tiles");
};

// Elements in 16 bytes (one cp.async), the K-tile, and the padding of a shared-memory row.
template <typename T>
constexpr int kVec = 16 / sizeof(T);
template <typename T, class Cfg>
constexpr int kBK = Cfg::kKBytes / sizeof(T);
template <typename T>
constexpr int kPad = kVec<T>;

// Shared memory of one pipeline stage, in elements.
template <typename T, class Cfg>
constexpr int stage_elems() {
  constexpr int a = Cfg::kBM * (kBK<T, Cfg> + kPad<T>);
  constexpr int b = kBK<T, Cfg> * (Cfg::kBN + kPad<T>);
  return a + b;
}
template <typename T, class Cfg>
constexpr size_t ring_bytes() {
  return sizeof(T) * size_t(Cfg::kStages) * stage_elems<T, Cfg>();
}

// ---- cp.async, with a plain copy where the GPU has none ------------------------------------
__device__ __forceinline__ void copy16_async(void* smem, const void* gmem, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = valid ? 16 : 0;  // 0: no global read, the 16 bytes are zero-filled
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(bytes));
#else
  *static_cast<uint4*>(smem) = valid ? *static_cast<const uint4*>(gmem) : make_uint4(0, 0, 0, 0);
#endif
}
__device__ __forceinline__ void async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Waits until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// ---- copying a tile from global into shared memory -----------------------------------------
// A rows x cols tile starting at g (row stride ld_g elements) into s (row stride ld_s), with
// element (r, c) valid only when r < rows_valid and c < cols_valid; the rest is zero. Work is
// split in 16-byte chunks, chunk i to thread i % threads: the thread that copies a chunk is the
// one that may post-process it (the LayerNorm prologue), with no barrier in between.
// kVectorized: cols_valid, ld_g and g are multiples of 16 bytes (a chunk is all in or all out).
template <typename T, int kThreads, bool kVectorized>
__device__ __forceinline__ void copy_tile(T* s, int ld_s, const T* g, int64_t ld_g, int rows,
                                          int cols, int64_t rows_valid, int64_t cols_valid) {
  constexpr int E = kVec<T>;
  const int chunks_per_row = cols / E;
  for (int i = threadIdx.x; i < rows * chunks_per_row; i += kThreads) {
    const int r = i / chunks_per_row, c = (i % chunks_per_row) * E;
    T* dst = s + r * ld_s + c;
    const T* src = g + r * ld_g + c;
    if constexpr (kVectorized) {
      const bool valid = r < rows_valid && c < cols_valid;
      copy16_async(dst, valid ? src : g, valid);
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        dst[e] = r < rows_valid && c + e < cols_valid ? src[e] : Elem<T>::from_float(0.0f);
      }
    }
  }
}

// ---- one warp's k16 step: acc[MT][NT] += A (16 MT x 16) B (16 x 8 NT) ------------------------
// Accumulator layout (mma.sync's): lane = 4 g + t holds rows g and g + 8, columns 2t and 2t + 1
// of each 16 x 8 tile: acc[mt][nt][0..1] row g, acc[mt][nt][2..3] row g + 8.
// `a` points at the warp's first row at the step's first k (row stride lda); `b` at the step's
// first k row and the warp's first column (row stride ldb).
template <typename T, int MT, int NT>
struct WarpStep;

template <int MT, int NT>
struct WarpStep<__nv_bfloat16, MT, NT> {
  static __device__ __forceinline__ void run(float (&acc)[MT][NT][4], const __nv_bfloat16* a,
                                             int lda, const __nv_bfloat16* b, int ldb) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int lane = threadIdx.x & 31;
    unsigned af[MT][4], bfr[NT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {  // 16 x 16 of A: lanes 0-15 rows at k 0, 16-31 at k 8
      const __nv_bfloat16* p = a + (mt * 16 + (lane & 15)) * lda + (lane >> 4) * 8;
      const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(af[mt][0]), "=r"(af[mt][1]), "=r"(af[mt][2]), "=r"(af[mt][3])
                   : "r"(addr));
    }
#pragma unroll
    for (int nt = 0; nt < NT; nt += 2) {  // 16 k x 16 n of B, transposed: two 16 x 8 tiles
      const __nv_bfloat16* p =
          b + ((lane & 7) + ((lane >> 3) & 1) * 8) * ldb + nt * 8 + (lane >> 4) * 8;
      const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(bfr[nt][0]), "=r"(bfr[nt][1]), "=r"(bfr[nt + 1][0]), "=r"(bfr[nt + 1][1])
                   : "r"(addr));
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        float* c = acc[mt][nt];
        asm(  // not volatile: a pure register operation the compiler may interleave with loads
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(af[mt][0]), "r"(af[mt][1]), "r"(af[mt][2]), "r"(af[mt][3]), "r"(bfr[nt][0]),
              "r"(bfr[nt][1]));
      }
    }
#else
    __trap();  // bf16 needs compute capability 8.0 (the lessons do not offer it below)
#endif
  }
  static_assert(NT % 2 == 0, "B fragments come in pairs of 16 x 8 tiles");
};

template <int MT, int NT>
struct WarpStep<float, MT, NT> {
  static __device__ __forceinline__ void run(float (&acc)[MT][NT][4], const float* a, int lda,
                                             const float* b, int ldb) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll 4
    for (int k = 0; k < 16; ++k) {
      float av[MT][2], bv[NT][2];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        av[mt][0] = a[(mt * 16 + g) * lda + k];
        av[mt][1] = a[(mt * 16 + g + 8) * lda + k];
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        bv[nt][0] = b[k * ldb + nt * 8 + 2 * t];
        bv[nt][1] = b[k * ldb + nt * 8 + 2 * t + 1];
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          acc[mt][nt][0] = fmaf(av[mt][0], bv[nt][0], acc[mt][nt][0]);
          acc[mt][nt][1] = fmaf(av[mt][0], bv[nt][1], acc[mt][nt][1]);
          acc[mt][nt][2] = fmaf(av[mt][1], bv[nt][0], acc[mt][nt][2]);
          acc[mt][nt][3] = fmaf(av[mt][1], bv[nt][1], acc[mt][nt][3]);
        }
      }
    }
  }
};

// A warp's multiply over `k_elems` of shared A and B (a multiple of 16).
template <typename T, int MT, int NT>
__device__ __forceinline__ void warp_multiply(float (&acc)[MT][NT][4], const T* a, int lda,
                                              const T* b, int ldb, int k_elems) {
  for (int k = 0; k < k_elems; k += 16) WarpStep<T, MT, NT>::run(acc, a + k, lda, b + k * ldb, ldb);
}

// ---- the block's main loop ------------------------------------------------------------------
// Accumulates the block tile at (m0, n0) of A (m x k, lda) times B (k x n, ldb) into each warp's
// acc. `ring` is the shared-memory ring of ring_bytes<T, Cfg>(). After a K-tile of A lands, and
// before any warp reads it, on_a_tile(a_tile, ld, k0) runs in every thread over the chunks that
// thread copied (see copy_tile): the hook for a prologue such as LayerNorm's. Ends with a barrier,
// so the ring may be refilled at once.
// after_prime() runs once in every thread while the first K-tiles are in flight (work that can
// overlap their latency, such as the LayerNorm statistics).
struct NoPrologue {
  template <typename T>
  __device__ void operator()(T*, int, int64_t) const {}
  __device__ void operator()() const {}
};

template <typename T, class Cfg, bool kVectorized, class Prologue = NoPrologue,
          class AfterPrime = NoPrologue>
__device__ __forceinline__ void block_mainloop(float (&acc)[Cfg::kMT][Cfg::kNT][4], T* ring,
                                               const T* a, int64_t lda, const T* b, int64_t ldb,
                                               int64_t m, int64_t n, int64_t k, int64_t m0,
                                               int64_t n0, const Prologue& prologue = {},
                                               const AfterPrime& after_prime = {}) {
  constexpr int BK = kBK<T, Cfg>, lda_s = BK + kPad<T>, ldb_s = Cfg::kBN + kPad<T>;
  constexpr int S = Cfg::kStages;
  const int k_tiles = static_cast<int>((k + BK - 1) / BK);
  auto a_tile = [&](int stage) { return ring + stage * stage_elems<T, Cfg>(); };
  auto b_tile = [&](int stage) { return a_tile(stage) + Cfg::kBM * lda_s; };
  auto load = [&](int kt) {
    const int stage = kt % S;
    const int64_t k0 = int64_t(kt) * BK;
    copy_tile<T, Cfg::kThreads, kVectorized>(a_tile(stage), lda_s, a + m0 * lda + k0, lda, Cfg::kBM,
                                             BK, m - m0, k - k0);
    copy_tile<T, Cfg::kThreads, kVectorized>(b_tile(stage), ldb_s, b + k0 * ldb + n0, ldb, BK,
                                             Cfg::kBN, k - k0, n - n0);
  };

  // Prime the pipeline: K-tiles 0 .. S-2 in flight (one commit group each, empty ones too, so
  // the group count stays the same every iteration). Deep rings are primed in a loop that is
  // not unrolled: eleven copies of the copy code made the few-token kernels stall on fetching
  // their own instructions (Nsight Compute's top stall was "no instruction"); the 4-stage ring
  // of the large tiles is unrolled (measured 1.5x faster at 16K tokens on an H100).
  if constexpr (S <= 4) {
#pragma unroll
    for (int kt = 0; kt < S - 1; ++kt) {
      if (kt < k_tiles) load(kt);
      async_commit();
    }
  } else {
#pragma unroll 1
    for (int kt = 0; kt < S - 1; ++kt) {
      if (kt < k_tiles) load(kt);
      async_commit();
    }
  }
  after_prime();
  const int warp = threadIdx.x >> 5;
  const int wm = (warp / Cfg::kWarpsN) * Cfg::kWM, wn = (warp % Cfg::kWarpsN) * Cfg::kWN;
  for (int kt = 0; kt < k_tiles; ++kt) {
    async_wait<S - 2>();  // this thread's copies of K-tile kt have landed
    prologue(a_tile(kt % S), lda_s, int64_t(kt) * BK);
    __syncthreads();  // everyone's copies are visible; everyone is done with K-tile kt-1
    if (kt + S - 1 < k_tiles) load(kt + S - 1);  // into the stage K-tile kt-1 used
    async_commit();
    if (warp < Cfg::kMmaWarps) {
      warp_multiply<T, Cfg::kMT, Cfg::kNT>(acc, a_tile(kt % S) + wm * lda_s, lda_s,
                                           b_tile(kt % S) + wn, ldb_s, BK);
    }
  }
  async_wait<0>();
  __syncthreads();
}

// ---- a block tile whose whole K fits in shared memory at once --------------------------------
// For short K ranges (a block's share of a split-K GEMM at a few tokens): A (BM x kMaxK) and B
// (kMaxK x BN) are copied with one commit group, so every byte is in flight at once; no ring.
// after_issue() runs while they fly; copies it issues form a second commit group, which the
// caller waits for later (async_wait<0>()). Ends with a barrier.
template <typename T, class Cfg, int kMaxK>
constexpr size_t resident_bytes() {
  constexpr size_t a = size_t(Cfg::kBM) * (kMaxK + kPad<T>);
  constexpr size_t b = size_t(kMaxK) * (Cfg::kBN + kPad<T>);
  return sizeof(T) * (a + b);
}

template <typename T, class Cfg, int kMaxK, bool kVectorized, class AfterIssue = NoPrologue>
__device__ __forceinline__ void block_multiply_resident(
    float (&acc)[Cfg::kMT][Cfg::kNT][4], T* tiles, const T* a, int64_t lda, const T* b, int64_t ldb,
    int64_t m, int64_t n, int64_t k, int64_t m0, int64_t n0, const AfterIssue& after_issue = {}) {
  constexpr int lda_s = kMaxK + kPad<T>, ldb_s = Cfg::kBN + kPad<T>;
  T* s_a = tiles;
  T* s_b = tiles + Cfg::kBM * lda_s;
  copy_tile<T, Cfg::kThreads, kVectorized>(s_a, lda_s, a + m0 * lda, lda, Cfg::kBM, kMaxK, m - m0,
                                           k);
  copy_tile<T, Cfg::kThreads, kVectorized>(s_b, ldb_s, b + n0, ldb, kMaxK, Cfg::kBN, k, n - n0);
  async_commit();
  after_issue();
  async_commit();
  async_wait<1>();  // this thread's A and B copies (not after_issue's)
  __syncthreads();
  const int warp = threadIdx.x >> 5;
  if (warp < Cfg::kMmaWarps) {
    const int wm = (warp / Cfg::kWarpsN) * Cfg::kWM, wn = (warp % Cfg::kWarpsN) * Cfg::kWN;
    const int k16 = static_cast<int>((k + 15) / 16 * 16);  // zero-filled beyond k
    warp_multiply<T, Cfg::kMT, Cfg::kNT>(acc, s_a + wm * lda_s, lda_s, s_b + wn, ldb_s, k16);
  }
  __syncthreads();
}

// The mma leaves a lane 2 adjacent columns of 2 rows of a 16 x 8 tile (for_each_pair below);
// lanes 2t and 2t + 1 swap halves so that each holds 4 adjacent columns of one row, for one
// 16-byte store or atomic: the even lane row lane / 4, the odd lane row lane / 4 + 8, columns
// `col` .. `col` + 3 of the tile. Every lane of the warp must call it (it shuffles).
struct LaneQuad {
  float v[4];
  int row, col;  // within the 16 x 8 tile
  __device__ uint4 bits() const {
    return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]),
                      __float_as_uint(v[3]));
  }
};
__device__ __forceinline__ LaneQuad lane_quad(const float (&c)[4], int lane) {
  const bool even = (lane & 1) == 0;
  const float s0 = __shfl_xor_sync(0xffffffffu, even ? c[2] : c[0], 1);
  const float s1 = __shfl_xor_sync(0xffffffffu, even ? c[3] : c[1], 1);
  LaneQuad q;
  q.v[0] = even ? c[0] : s0;
  q.v[1] = even ? c[1] : s1;
  q.v[2] = even ? s0 : c[2];
  q.v[3] = even ? s1 : c[3];
  q.row = (lane >> 2) + (even ? 0 : 8);
  q.col = 4 * ((lane & 3) >> 1);
  return q;
}

// Calls f(row, col, v0, v1) for each pair of horizontally adjacent accumulators a thread holds
// (row and col relative to the block tile; col even). Threads outside the multiplying warps hold
// none.
template <class Cfg, class F>
__device__ __forceinline__ void for_each_pair(const float (&acc)[Cfg::kMT][Cfg::kNT][4], F f) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp >= Cfg::kMmaWarps) return;
  const int wm = (warp / Cfg::kWarpsN) * Cfg::kWM, wn = (warp % Cfg::kWarpsN) * Cfg::kWN;
#pragma unroll
  for (int mt = 0; mt < Cfg::kMT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < Cfg::kNT; ++nt) {
      const int row = wm + mt * 16 + (lane >> 2), col = wn + nt * 8 + 2 * (lane & 3);
      f(row, col, acc[mt][nt][0], acc[mt][nt][1]);
      f(row + 8, col, acc[mt][nt][2], acc[mt][nt][3]);
    }
  }
}

// Stores a pair (v0, v1) at y[row][col], y[row][col + 1] (columns beyond n skipped).
template <typename T>
__device__ __forceinline__ void store_pair(T* y, int64_t n, int64_t row, int64_t col, float v0,
                                           float v1, bool pair_aligned) {
  T* p = y + row * n + col;
  if (pair_aligned && col + 1 < n) {
    if constexpr (std::is_same<T, float>::value) {
      *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
    } else {
      *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v0, v1);
    }
    return;
  }
  if (col < n) p[0] = Elem<T>::from_float(v0);
  if (col + 1 < n) p[1] = Elem<T>::from_float(v1);
}

// Whether a matrix of row length `cols` at `p` can take 16-byte copies.
template <typename T>
inline bool vector_ok(const void* p, int64_t cols) {
  return cols % kVec<T> == 0 && reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace fl::tc
