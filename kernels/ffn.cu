// Lesson 8, ffn: y = GELU_tanh(x W1 + b1) W2 + b2, x of tokens x C, W1 of C x 4C, W2 of 4C x C
// (a transformer's whole MLP: widen to H = 4C, activate, project back).
//
// The ladder: unfused is five kernels (GEMM, bias, GELU, GEMM, bias): the 4C-wide tensor makes
// three round trips through HBM (t = x W1, u = t + b1, h = GELU(u)), then s = h W2 one; level 1
// is two cuBLASLt GEMMs with fused epilogues (GELU+bias, then bias): h is written once and read
// once; level 2 is one kernel of ours on tensor cores. Four data paths: on sm_90a builds in bf16
// at up to 64 tokens the small-token kernel (kernels/ffn_small.cu: each block computes 32 hidden
// units of h into L2, a grid barrier, then clusters of 8 split W2 and add their partial sums in
// distributed shared memory); on sm_90 otherwise at up to 64 tokens clusters of 8 blocks share h
// through distributed shared memory and add their shares with atomics (ffn_cluster_kernel,
// below); on sm_90a builds from kFfnWgmmaFrom tokens in bf16, wgmma tiles of both GEMMs with h
// through a ring buffer (kernels/ffn_wgmma.cu); elsewhere each block owns a slice of h and the
// shares are summed after a grid barrier (ffn_fused_kernel, below). The level table below has
// every launch's bytes.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernels/bias_ops.cuh"
#include "kernels/blas.h"
#include "kernels/catalog.h"
#include "kernels/cluster.cuh"
#include "kernels/device_buffer.h"
#include "kernels/ffn_small.h"
#include "kernels/ffn_wgmma.h"
#include "kernels/gemm_common.cuh"
#include "kernels/level_table.h"
#include "kernels/phases.cuh"
#include "kernels/tensor_gemm.cuh"
#include "kernels/workspace.cuh"

namespace fl {
namespace {

// ---- level 2: the fused FFN, split over the hidden dimension ------------------------------
// One kernel; h = GELU(x W1 + b1) never leaves the SM. Block (s, t) owns hidden units
// [s S, s S + S) and walks token chunks t, t + gridDim.y, ... of 64 tokens:
//   1. up:    h[64 x S] = GELU(x[chunk] W1[:, slice] + b1[slice]) on our GEMM core
//             (kernels/tensor_gemm.cuh): x and W1 tiles through a deep cp.async ring (128-byte
//             K-tiles, 6 stages: ~40 KB of weights in flight per SM), h kept in shared memory,
//             rounded to the lesson's precision as level 1's h would be;
//   2. down:  its share of y, h[64 x S] W2[slice, :], 64 output columns at a time from W2's
//             slice (loaded into shared memory once, with the first tiles of step 1, when it
//             fits), added to an fp32 accumulator in global memory with vector atomics (they
//             resolve in L2); blocks start at different columns so they do not all add to the
//             same addresses at once;
//   3. a grid-wide barrier (the launch is cooperative: every block is resident), then all blocks
//      together write y = acc + b2 in the lesson's precision and leave acc at zero for the next
//      run.
// Why split H: at 1-64 tokens an FFN is a weight-streaming problem (C x 4C x 2 weights, 9.4 MB
// in bf16 at C = 768, against 98 KB of x); H / S blocks stream disjoint slices of W1 and W2, so
// every SM pulls weights at once, and each weight is read from HBM exactly once. The price is the
// reduction: (H / S) x tokens x C fp32 additions into L2, which grows with the token count and
// is why cuBLASLt's two GEMMs win at large token counts (see the teaching text).
// Chunks of kTM = 64 tokens, or 16 at up to 16 tokens (the mma tiles are 16 rows: fewer padded
// rows to multiply). Warps: 2 x 2 at 64 tokens; 1 x S/16 at 16.
constexpr int kFfnColumns = 64;
constexpr int64_t kFfnClusterTokens = 64;  // the most tokens the cluster kernel takes
constexpr int64_t kFfnWgmmaFrom = 256;     // tokens: from here on the wgmma kernel (measured)
// At 16 tokens the ring is deep enough (12 stages at S = 32) that a block's whole W1 slice is in
// flight at once at C = 768.
template <int kTM, int kS>
struct FfnShape {
  static constexpr int kWarpsM = kTM == 64 ? 2 : 1, kWarpsN = kTM == 64 ? 2 : kS / 16;
  static constexpr int kStages = kTM == 64 ? 6 : (kS == 32 ? 12 : 8);
  static constexpr int kThreads = 256;  // 8 warps issue copies; kWarpsM x kWarpsN multiply
  using Up = tc::TileConfig<kTM, kS, kWarpsM, kWarpsN, kStages, 128, kThreads>;  // h = x W1
};

template <typename T>
struct FfnArgs {
  const T *x, *w1, *b1, *w2, *b2;
  T* y;
  float* acc;            // m x c fp32, all zero between runs (the atomic reduction)
  float* partial;        // slices x m x c fp32, or null: the plain-store reduction (one chunk only)
  size_t partial_bytes;  // its capacity (host side: the launcher uses it when the run fits)
  unsigned* barrier;     // [0] arrivals (zero between runs), [1] generation; [2 + r] the cluster
                         // kernel's count of clusters done with column range r (zero between runs)
  int64_t m;
  int c, hidden;
  PhaseSink phases;  // stamps on when set: ffn_split_phases() or ffn_cluster_phases()
};

// The phases each block records, in the order of their `phase` index (kernels/phases.h).
enum SplitPhase : unsigned { kSplitItems, kSplitBarrier, kSplitY };
enum ClusterPhase : unsigned { kClusterSetup, kClusterUp, kClusterDown, kClusterSums };
const std::vector<std::string>& ffn_split_phases() {
  static const std::vector<std::string> names = {"up-projection and partial sums into L2",
                                                 "grid barrier", "y = acc + b2"};
  return names;
}
const std::vector<std::string>& ffn_cluster_phases() {
  static const std::vector<std::string> names = {"setup and biases in",
                                                 "up-projection and h exchange in the cluster",
                                                 "down-projection", "partial sums and y"};
  return names;
}

__host__ __device__ inline int round_up(int v, int to) {
  return (v + to - 1) / to * to;
}

template <typename T, int kTM, int kS>
struct FfnSmem {
  static constexpr int ld_h = kS + tc::kPad<T>;
  __host__ __device__ static int ld_w2(bool resident, int c) {
    return (resident ? round_up(c, kFfnColumns) : kFfnColumns) + tc::kPad<T>;
  }
  static size_t bytes(bool resident, int c) {
    return tc::ring_bytes<T, typename FfnShape<kTM, kS>::Up>() +
           sizeof(T) * (size_t(kTM) * ld_h + size_t(kS) * ld_w2(resident, c));
  }
};

// Adds v0 to acc[0] and, when `second`, v1 to acc[1], in L2: one 8-byte vector atomic on sm_90
// when the pair is 8-byte aligned.
__device__ __forceinline__ void add_pair(float* acc, float v0, float v1, bool second,
                                         bool aligned) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (second && aligned) {
    atomicAdd(reinterpret_cast<float2*>(acc), make_float2(v0, v1));
    return;
  }
#endif
  atomicAdd(acc, v0);
  if (second) atomicAdd(acc + 1, v1);
}

// Loads and stores that go to L2, past this SM's L1 (which does not see other blocks' writes
// made in this kernel). Written as PTX: clang's CUDA headers (the sm_70 compile check) lack
// __ldcg/__stcg for these types.
__device__ __forceinline__ float load_l2(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ float4 load_l2(const float4* p) {
  float4 v;
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ void store_l2(float* p, float v) {
  asm volatile("st.global.cg.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}
__device__ __forceinline__ void store_l2(float4* p, float4 v) {
  asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z),
               "f"(v.w)
               : "memory");
}

// Every block of the grid waits here until all have arrived (they are all resident: the launch
// is cooperative). barrier[0] counts arrivals and is back at zero afterwards; barrier[1] is a
// generation number the last arrival advances, which the others watch.
__device__ inline void grid_barrier(unsigned* barrier, unsigned seen) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned* generation = barrier + 1;
    const unsigned blocks = gridDim.x * gridDim.y;
    __threadfence();  // this block's additions (ordered before by the barrier above) first
    if (atomicAdd(barrier, 1u) == blocks - 1) {
      barrier[0] = 0;
      __threadfence();
      atomicAdd(barrier + 1, 1u);
    } else {
      while (*generation == seen) __nanosleep(64);
    }
    __threadfence();
  }
  __syncthreads();
}

template <typename T, int kTM, int kS, bool kVectorized, bool kW2Resident>
__global__ void __launch_bounds__(FfnShape<kTM, kS>::kThreads) ffn_fused_kernel(FfnArgs<T> a) {
  using Up = typename FfnShape<kTM, kS>::Up;
  using Smem = FfnSmem<T, kTM, kS>;
  constexpr int kFfnThreads = Up::kThreads, kFfnTokens = kTM;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float s_b1[kS];
  T* ring = reinterpret_cast<T*>(smem);
  T* s_h = reinterpret_cast<T*>(smem + tc::ring_bytes<T, Up>());
  T* s_w2 = s_h + kFfnTokens * Smem::ld_h;
  const int ld_w2 = Smem::ld_w2(kW2Resident, a.c);
  const int64_t slices = (a.hidden + kS - 1) / kS;
  const int64_t chunks = (a.m + kFfnTokens - 1) / kFfnTokens;
  const int column_tiles = (a.c + kFfnColumns - 1) / kFfnColumns;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  constexpr int kWarps = kFfnThreads / 32, kRowTiles = kTM / 16;
  const bool pairs = a.c % 2 == 0;
  // The barrier's generation can only move once every block has arrived, so it is read now,
  // off the critical path; b2's lines are fetched into L2 for step 3.
  const unsigned generation =
      threadIdx.x == 0 ? *reinterpret_cast<volatile unsigned*>(a.barrier + 1) : 0;
  if (blockIdx.x == 0 && blockIdx.y == 0) {
    for (int i = threadIdx.x * 64; i < a.c; i += kFfnThreads * 64) {
      asm volatile("prefetch.global.L2 [%0];" ::"l"(a.b2 + i));
    }
  }

  PhaseMarks marks(a.phases);
  // Work items (hidden slice, token chunk), slice fastest; a grid of slices x chunks blocks when
  // it fits on the GPU, otherwise each block takes every gridDim-th item.
  const int64_t items = slices * chunks;
  const int64_t grid_blocks = int64_t(gridDim.x) * gridDim.y;
  int64_t loaded_slice = -1;
  for (int64_t item = int64_t(blockIdx.y) * gridDim.x + blockIdx.x; item < items;
       item += grid_blocks) {
    const int64_t slice = item % slices, chunk = item / slices;
    const int64_t j0 = slice * kS;  // this item's hidden units
    const int64_t units = min(int64_t(kS), a.hidden - j0);
    const int64_t m0 = chunk * kFfnTokens;
    // W2's slice joins the first commit group of step 1: it streams in with the first tiles.
    const bool new_slice = slice != loaded_slice;
    if (kW2Resident && new_slice) {
      tc::copy_tile<T, kFfnThreads, kVectorized>(s_w2, ld_w2, a.w2 + j0 * a.c, a.c, kS,
                                                 round_up(a.c, kFfnColumns), units, a.c);
    }
    // b1's slice is read while the first tiles are in flight.
    auto load_b1 = [&]() {
      if (!new_slice) return;
      for (int i = threadIdx.x; i < kS; i += kFfnThreads) {
        s_b1[i] = i < units ? Elem<T>::to_float(a.b1[j0 + i]) : 0.0f;
      }
    };
    loaded_slice = slice;
    // 1. up: h = GELU(x W1 + b1) for this chunk's tokens and this item's hidden units.
    float up[Up::kMT][Up::kNT][4] = {};
    tc::block_mainloop<T, Up, kVectorized>(up, ring, a.x, a.c, a.w1, a.hidden, a.m, a.hidden, a.c,
                                           m0, j0, tc::NoPrologue{}, load_b1);
    tc::for_each_pair<Up>(up, [&](int r, int col, float v0, float v1) {
      const float h0 = col < units ? gelu_tanh_fast(v0 + s_b1[col]) : 0.0f;
      const float h1 = col + 1 < units ? gelu_tanh_fast(v1 + s_b1[col + 1]) : 0.0f;
      s_h[r * Smem::ld_h + col] = Elem<T>::from_float(h0);
      s_h[r * Smem::ld_h + col + 1] = Elem<T>::from_float(h1);
    });
    __syncthreads();
    // 2. down: this slice's share of y, h W2[slice, :], in warp items of 16 tokens x 64
    //    columns spread over all the block's warps, starting at a column that differs between
    //    slices. Each share is stored to its own place in `partial` when the run is one chunk
    //    (no two blocks write the same address), otherwise added into `acc` with atomics.
    auto down = [&](int first_tile, int tiles, const T* w2_first) {
      for (int w_item = warp; w_item < kRowTiles * tiles; w_item += kWarps) {
        const int mt = w_item % kRowTiles, t = w_item / kRowTiles;
        const int tile = tiles == 1 ? first_tile : int((t + slice) % tiles);
        const int n0 = tile * kFfnColumns;
        float acc[1][8][4] = {};
        tc::warp_multiply<T, 1, 8>(acc, s_h + mt * 16 * Smem::ld_h, Smem::ld_h,
                                   w2_first + (tile - first_tile) * kFfnColumns, ld_w2, kS);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int64_t row = m0 + mt * 16 + (lane >> 2) + 8 * half;
            const int64_t n = n0 + nt * 8 + 2 * (lane & 3);
            const float v0 = acc[0][nt][2 * half], v1 = acc[0][nt][2 * half + 1];
            if (row >= a.m || n >= a.c) continue;
            if (a.partial != nullptr) {
              float* p = a.partial + (slice * a.m + row) * a.c + n;
              if (pairs && n + 1 < a.c) {
                *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
              } else {
                p[0] = v0;
                if (n + 1 < a.c) p[1] = v1;
              }
            } else {
              add_pair(a.acc + row * a.c + n, v0, v1, n + 1 < a.c, pairs);
            }
          }
        }
      }
    };
    if constexpr (kW2Resident) {
      down(0, column_tiles, s_w2);
    } else {
      for (int tile = 0; tile < column_tiles; ++tile) {  // W2's slice a tile at a time
        const int n0 = tile * kFfnColumns;
        tc::copy_tile<T, kFfnThreads, kVectorized>(s_w2, ld_w2, a.w2 + j0 * a.c + n0, a.c, kS,
                                                   kFfnColumns, units, a.c - n0);
        tc::async_commit();
        tc::async_wait<0>();
        __syncthreads();
        down(tile, 1, s_w2);
        __syncthreads();  // s_w2 is refilled next
      }
    }
    __syncthreads();  // s_h (and s_w2, s_b1 for a new slice) are rewritten by the next item
  }

  // 3. Every block's additions are in; all blocks write y = acc + b2 and zero acc, 4 at a time.
  marks.mark(kSplitItems);
  grid_barrier(a.barrier, generation);
  marks.mark(kSplitBarrier);
  const int64_t total = a.m * a.c;
  if (a.partial != nullptr) {
    // A block takes 128 consecutive outputs at a time: lane l owns outputs 4l .. 4l + 3 of them
    // (16-byte loads, coalesced across the warp), warp w sums slices w, w + 8, ..., and the 8
    // warps' sums meet in shared memory (the ring is free now).
    float* s_sum = reinterpret_cast<float*>(smem);  // kWarps x 128
    const bool vec4 = total % 4 == 0;
    for (int64_t e_block = (int64_t(blockIdx.y) * gridDim.x + blockIdx.x) * 128; e_block < total;
         e_block += grid_blocks * 128) {
      const int64_t e0 = e_block + 4 * lane;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (e0 < total) {
#pragma unroll 4
        for (int64_t sl = warp; sl < slices; sl += kWarps) {
          const float* p = a.partial + sl * total + e0;
          if (vec4) {
            const float4 q = load_l2(reinterpret_cast<const float4*>(p));
            v.x += q.x, v.y += q.y, v.z += q.z, v.w += q.w;
          } else {
            v.x += load_l2(p);
            if (e0 + 1 < total) v.y += load_l2(p + 1);
            if (e0 + 2 < total) v.z += load_l2(p + 2);
            if (e0 + 3 < total) v.w += load_l2(p + 3);
          }
        }
      }
      reinterpret_cast<float4*>(s_sum + warp * 128)[lane] = v;
      __syncthreads();
      if (threadIdx.x < 128 && e_block + threadIdx.x < total) {
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) sum += s_sum[w * 128 + threadIdx.x];
        const int64_t e = e_block + threadIdx.x;
        a.y[e] = Elem<T>::from_float(sum + Elem<T>::to_float(a.b2[e % a.c]));
      }
      __syncthreads();
    }
    marks.mark(kSplitY);
    return;
  }
  const int64_t thread = (int64_t(blockIdx.y) * gridDim.x + blockIdx.x) * kFfnThreads + threadIdx.x;
  const int64_t threads = int64_t(gridDim.x) * gridDim.y * kFfnThreads;
  for (int64_t i = thread * 4; i < total; i += threads * 4) {
    if (a.c % 4 == 0) {
      float4* p = reinterpret_cast<float4*>(a.acc + i);
      const float4 v = load_l2(p);
      const int64_t n = i % a.c;
      a.y[i] = Elem<T>::from_float(v.x + Elem<T>::to_float(a.b2[n]));
      a.y[i + 1] = Elem<T>::from_float(v.y + Elem<T>::to_float(a.b2[n + 1]));
      a.y[i + 2] = Elem<T>::from_float(v.z + Elem<T>::to_float(a.b2[n + 2]));
      a.y[i + 3] = Elem<T>::from_float(v.w + Elem<T>::to_float(a.b2[n + 3]));
      store_l2(p, make_float4(0.0f, 0.0f, 0.0f, 0.0f));
    } else {
      for (int64_t e = i; e < min(i + 4, total); ++e) {
        a.y[e] = Elem<T>::from_float(load_l2(a.acc + e) + Elem<T>::to_float(a.b2[e % a.c]));
        store_l2(a.acc + e, 0.0f);
      }
    }
  }
  marks.mark(kSplitY);
}

// ---- level 2 on Hopper at up to 64 tokens: clusters share h, L2 atomics add the shares ------
// The kernel above sums 4C / S shares of y per output, one per hidden slice, and needs a grid
// barrier to do it; at 64 tokens that reduction costs more than the weights. And each of its
// blocks reads W1 as S-wide columns, 64-byte pieces of rows that are 6 KB long, which keeps few
// bytes in flight per request. On sm_90 a thread block cluster (`size` = 8 or 4 blocks on one
// GPC) can write its blocks' shared memory (distributed shared memory, DSMEM), so a cluster
// works as one large block. Cluster q owns U = size x width hidden units (width = 4C / blocks,
// 28 at C = 768 with 112 blocks); block r of it:
//   1. up:     x[:, r's C / size inputs] W1[those rows, the cluster's U units], a partial sum
//              over r's inputs, from W1 rows U x 2 bytes long (448 B, not 64), all in flight at
//              once. W2's rows for the cluster's units and r's C / size output columns stream
//              in meanwhile;
//   2. reduce: each block sends every other block the partials of that block's `width` units
//              (stores into its shared memory: posted, no round trip); after a cluster barrier
//              block r adds the `size` partials of its units, adds b1, applies GELU;
//   3. share:  ... and sends the resulting h to every block of the cluster; after a second
//              barrier every block holds h for all U units (M x U). h never left the chip;
//   4. down:   h[M x U] W2[cluster's units, r's columns], added into an fp32 accumulator with
//              16-byte atomics in L2: each output takes (blocks / size) additions, 14 at
//              C = 768, not 4C / S = 96;
//   5. the last cluster to finish a column range (a counter per range: no grid barrier, no
//      cooperative launch) writes y = acc + b2 there and leaves acc and its counter at zero.
// Each weight is read from HBM once, every SM streams weights from the first cycle, and W1 and
// W2 arrive in long rows.
constexpr int kMaxClusterBlocks = 8;  // the largest portable cluster; the plan picks 8 or 4
constexpr int kClusterUnits = 256;    // U, the up tile's width: a cluster's hidden units, at most
constexpr int kMaxClusterColumns = 256;  // a block's share of the C columns, at most
constexpr int kMaxClusterInputs = 128;   // a block's share of the C inputs (the up GEMM's K)
constexpr int kMaxClusterWidth = 32;     // a block's own hidden units (steps 2-3), at most

// The up GEMM's tiles: kTM tokens x 256 units, all 8 warps multiplying, the block's whole K
// (at most 128 inputs) in shared memory at once.
template <int kTM>
using ClusterUp =
    tc::TileConfig<kTM, kClusterUnits, kTM == 64 ? 2 : 1, kTM == 64 ? 4 : 8, 1, 128, 256>;

// The cluster kernel's shapes: `size` blocks per cluster, `width` hidden units per block (a
// multiple of 4), `inputs` of the C inputs and `cols` of the C outputs per block; its shared
// memory: the up tiles, the partials received (size x kTM x width fp32), the cluster's h and
// the W2 piece.
template <typename T, int kTM>
struct ClusterPlan {
  using Up = ClusterUp<kTM>;
  int size = 0, width = 0, inputs = 0, cols = 0, clusters = 0;
  __host__ __device__ int units() const { return size * width; }
  __host__ __device__ int ld_all() const { return units() + tc::kPad<T>; }
  __host__ __device__ int ld_w2() const { return cols + tc::kPad<T>; }
  __host__ __device__ static size_t recv_offset() {
    return tc::resident_bytes<T, Up, kMaxClusterInputs>();
  }
  __host__ __device__ size_t all_offset() const {
    return recv_offset() + sizeof(float) * size_t(size) * kTM * width;
  }
  __host__ __device__ size_t w2_offset() const { return all_offset() + sizeof(T) * kTM * ld_all(); }
  __host__ __device__ size_t bytes() const {
    return w2_offset() + sizeof(T) * size_t(units()) * ld_w2();
  }
};

template <typename T, int kTM, bool kVectorized>
__global__ void __launch_bounds__(256) ffn_cluster_kernel(FfnArgs<T> a, ClusterPlan<T, kTM> plan) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Plan = ClusterPlan<T, kTM>;
  using Up = typename Plan::Up;
  constexpr int kThreads = Up::kThreads, kWarps = kThreads / 32;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ bool s_last;
  __shared__ float s_b1[kMaxClusterWidth], s_b2[kMaxClusterColumns];  // r's b1 and b2
  T* tiles = reinterpret_cast<T*>(smem);
  float* recv = reinterpret_cast<float*>(smem + Plan::recv_offset());  // [size][kTM][width]
  T* h_all = reinterpret_cast<T*>(smem + plan.all_offset());
  T* w2s = reinterpret_cast<T*>(smem + plan.w2_offset());
  const unsigned rank = cluster::rank(), q = cluster::index();
  const int width = plan.width, units_all = plan.units();
  const int64_t j_cluster = int64_t(q) * units_all;      // the cluster's hidden units
  const int64_t j0 = j_cluster + int64_t(rank) * width;  // this block's (steps 2-3)
  const int64_t units = max(int64_t(0), min(int64_t(width), a.hidden - j0));
  const int64_t k0 = int64_t(rank) * plan.inputs;  // this block's inputs (step 1)
  const int64_t inputs = max(int64_t(0), min(int64_t(plan.inputs), int64_t(a.c) - k0));
  const int64_t c0 = int64_t(rank) * plan.cols;  // this block's outputs (step 4)
  const int64_t cols = max(int64_t(0), min(int64_t(plan.cols), int64_t(a.c) - c0));
  // Rows of tokens: `rows` in the mma tiles, `live` of them real; steps 2-3 move only live rows
  // (the padded rows' results are never stored).
  const int rows = static_cast<int>(min(int64_t(kTM), (a.m + 15) / 16 * 16));
  const int live = static_cast<int>(min(int64_t(kTM), a.m));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  cluster::arrive_started();
  PhaseMarks marks(a.phases);

  // 1. up: the partial sum over this block's inputs, with W2's piece, b1 and b2 loaded while
  //    the tiles are in flight (the biases into registers: waited for only after the GEMM).
  float b_regs[2];
  static_assert(kMaxClusterWidth + kMaxClusterColumns <= 2 * kThreads, "2 bias values a thread");
  auto after_issue = [&]() {
    tc::copy_tile<T, kThreads, kVectorized>(w2s, plan.ld_w2(), a.w2 + j_cluster * a.c + c0, a.c,
                                            units_all, plan.cols, a.hidden - j_cluster, cols);
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int i = threadIdx.x + k * kThreads;
      const int n = i - kMaxClusterWidth;
      b_regs[k] = i < kMaxClusterWidth ? (i < units ? Elem<T>::to_float(a.b1[j0 + i]) : 0.0f)
                                       : (n < cols ? Elem<T>::to_float(a.b2[c0 + n]) : 0.0f);
    }
  };
  float up[Up::kMT][Up::kNT][4] = {};
  tc::block_multiply_resident<T, Up, kMaxClusterInputs, kVectorized>(
      up, tiles, a.x + k0, a.c, a.w1 + k0 * a.hidden, a.hidden, a.m,
      min(int64_t(a.hidden), j_cluster + units_all), inputs, 0, j_cluster, after_issue);
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i < kMaxClusterWidth)
      s_b1[i] = b_regs[k];
    else if (i < kMaxClusterWidth + kMaxClusterColumns)
      s_b2[i - kMaxClusterWidth] = b_regs[k];
  }
  marks.mark(kClusterSetup);

  // 2. reduce: unit `col` of the cluster belongs to block col / width; each pair of partials
  //    goes to that block's recv[rank] (pairs never straddle two blocks: width is even).
  cluster::wait_started();
  {
    // Each lane sends 4 adjacent units of one row with one 16-byte store (tc::lane_quad; width
    // is a multiple of 4: the 4 never straddle two blocks).
    const int wm = (warp / Up::kWarpsN) * Up::kWM, wn = (warp % Up::kWarpsN) * Up::kWN;
#pragma unroll
    for (int mt = 0; mt < Up::kMT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < Up::kNT; ++nt) {
        const tc::LaneQuad q = tc::lane_quad(up[mt][nt], lane);
        const int r = wm + mt * 16 + q.row, col = wn + nt * 8 + q.col;
        if (warp >= Up::kMmaWarps || r >= live || col >= units_all) continue;
        const int p = col / width, u = col - p * width;
        cluster::store_peer(recv + (int64_t(rank) * kTM + r) * width + u, p, q.bits());
      }
    }
  }
  cluster::sync();
  // 3. share: h = GELU(sum + b1) for this block's units, 4 at a time, sent to every block's h_all
  //    at columns [rank width, rank width + width).
  const int quads = width / 4;
  for (int i = threadIdx.x; i < live * quads; i += kThreads) {
    const int r = i / quads, u = (i % quads) * 4;
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int p = 0; p < plan.size; ++p) {
      const float4 v = *reinterpret_cast<const float4*>(recv + (int64_t(p) * kTM + r) * width + u);
      sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
    }
    const float s4[4] = {sum.x, sum.y, sum.z, sum.w};
    union {
      T h[4];
      uint2 bits[sizeof(T) / 2];
    } out;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      out.h[e] = Elem<T>::from_float(u + e < units ? gelu_tanh_fast(s4[e] + s_b1[u + e]) : 0.0f);
    }
    T* at = h_all + r * plan.ld_all() + rank * width + u;
    for (int p = 0; p < plan.size; ++p) {
#pragma unroll
      for (int half = 0; half < int(sizeof(T)) / 2; ++half) {
        cluster::store_peer(reinterpret_cast<unsigned char*>(at) + 8 * half, p, out.bits[half]);
      }
    }
  }
  tc::async_wait<0>();  // W2's piece (this thread's copies)
  cluster::sync();      // h_all is complete; no block touches another's shared memory after this
  marks.mark(kClusterUp);

  // 4. down: a warp takes 16 columns for all the tokens (1-4 mma row tiles: independent mma
  //    chains) over the cluster's units. Each lane adds 4 adjacent columns of one row with one
  //    16-byte atomic (tc::lane_quad: half the L2 operations).
  const int row_tiles = rows / 16, col_tiles = (static_cast<int>(cols) + 15) / 16;
  const bool quad_ok = a.c % 4 == 0;
  auto down = [&](int nt16, auto mt_tag) {
    constexpr int MT = decltype(mt_tag)::value;
    float acc[MT][2][4] = {};
    tc::warp_multiply<T, MT, 2>(acc, h_all, plan.ld_all(), w2s + nt16 * 16, plan.ld_w2(),
                                units_all);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const tc::LaneQuad q = tc::lane_quad(acc[mt][nt], lane);
        const int64_t row = mt * 16 + q.row, n = c0 + nt16 * 16 + nt * 8 + q.col;
        if (row >= a.m || n >= c0 + cols) continue;
        float* out = a.acc + row * a.c + n;
        if (quad_ok && n + 3 < c0 + cols) {
          atomicAdd(reinterpret_cast<float4*>(out), make_float4(q.v[0], q.v[1], q.v[2], q.v[3]));
        } else {
          for (int e = 0; e < 4 && n + e < c0 + cols; ++e) atomicAdd(out + e, q.v[e]);
        }
      }
    }
  };
  for (int nt16 = warp; nt16 < col_tiles; nt16 += kWarps) {
    switch (row_tiles) {
      case 1:
        down(nt16, std::integral_constant<int, 1>{});
        break;
      case 2:
        down(nt16, std::integral_constant<int, 2>{});
        break;
      case 3:
        down(nt16, std::integral_constant<int, 3>{});
        break;
      default:
        down(nt16, std::integral_constant<int, 4>{});
        break;
    }
  }
  marks.mark(kClusterDown);

  // 5. The last of the clusters to add into this column range writes y there.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();  // this block's additions before its ticket
    const unsigned ticket = atomicAdd(a.barrier + 2 + rank, 1u);
    s_last = ticket == plan.clusters - 1;
    if (s_last) {
      a.barrier[2 + rank] = 0;
      __threadfence();  // every cluster's additions (before their tickets) before the reads
    }
  }
  __syncthreads();
  if (s_last) {
    // Warp w takes rows w, w + 8, ..., lane l columns l, l + 32, ...: all of a thread's loads
    // (up to 8 x 8) are issued before any of its stores, so the L2 round trips overlap.
    constexpr int kRows = kTM / kWarps, kCols = kMaxClusterColumns / 32;
    float v[kRows][kCols];
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) {
#pragma unroll
      for (int cc = 0; cc < kCols; ++cc) {
        const int row = warp + rr * kWarps, col = lane + cc * 32;
        v[rr][cc] = row < a.m && col < cols ? load_l2(a.acc + row * a.c + c0 + col) : 0.0f;
      }
    }
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) {
#pragma unroll
      for (int cc = 0; cc < kCols; ++cc) {
        const int row = warp + rr * kWarps, col = lane + cc * 32;
        if (row >= a.m || col >= cols) continue;
        a.y[row * a.c + c0 + col] = Elem<T>::from_float(v[rr][cc] + s_b2[col]);
        store_l2(a.acc + row * a.c + c0 + col, 0.0f);
      }
    }
  }
  marks.mark(kClusterSums);
#else
  __trap();  // clusters need compute capability 9.0; the launcher never picks this kernel below
#endif
}

template <typename T, int kTM, int kS, bool kVectorized, bool kW2Resident>
Status launch_ffn_config(FfnArgs<T> a, int sms, cudaStream_t stream) {
  constexpr int kFfnThreads = FfnShape<kTM, kS>::kThreads, kFfnTokens = kTM;
  const size_t smem = FfnSmem<T, kTM, kS>::bytes(kW2Resident, a.c);
  auto kernel = ffn_fused_kernel<T, kTM, kS, kVectorized, kW2Resident>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(smem)));
  int per_sm = 0;
  FL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kFfnThreads, smem));
  const int64_t slices = (a.hidden + kS - 1) / kS;
  const int64_t chunks = (a.m + kFfnTokens - 1) / kFfnTokens;
  const int64_t resident = int64_t(per_sm) * sms;
  if (resident < 1) return Status::Error("ffn: the fused kernel does not fit on this GPU");
  // One block per (slice, chunk) item when they all fit on the GPU at once (they must: the
  // launch is cooperative); otherwise as many as fit, each taking every gridDim-th item.
  const int64_t bx = std::min<int64_t>(slices, resident);
  const int64_t by = std::min<int64_t>(chunks, std::max<int64_t>(1, resident / bx));
  const dim3 grid(static_cast<unsigned>(bx), static_cast<unsigned>(by));
  // Plain stores of each slice's share when the run is one chunk and the shares fit.
  if (chunks != 1 || size_t(slices) * a.m * a.c * sizeof(float) > a.partial_bytes)
    a.partial = nullptr;
  void* args[] = {&a};
  FL_CUDA_TRY(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), grid,
                                          dim3(kFfnThreads), args, smem, stream));
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// The cluster kernel's plan: the most blocks that can all be resident at once (one per SM:
// they hold 100-220 KB of shared memory), so that every SM streams weights from the start; the
// narrowest width (a multiple of 4 units, U = size x width at most 256) gives the most. Clusters of
// 8 where that ties with 4 (fewer shares per output).
// *ok is false when nothing fits (shared memory, C over 8 x 256, GPCs that hold no cluster).
template <typename T, int kTM, bool kVectorized>
Status plan_cluster(const FfnArgs<T>& a, int sms, int optin, ClusterPlan<T, kTM>* plan, bool* ok) {
  *ok = false;
  const void* kernel = reinterpret_cast<const void*>(ffn_cluster_kernel<T, kTM, kVectorized>);
  for (int size : {8, 4}) {
    ClusterPlan<T, kTM> p;
    p.size = size;
    p.cols = round_up((a.c + size - 1) / size, 16);
    p.inputs = round_up((a.c + size - 1) / size, 8);
    const int most = sms / size * size;
    if (most < size || p.cols > kMaxClusterColumns || p.inputs > kMaxClusterInputs) continue;
    for (p.width = round_up((a.hidden + most - 1) / most, 4);
         p.width <= kMaxClusterWidth && p.width * size <= kClusterUnits; p.width += 4) {
      if (p.bytes() > size_t(optin)) continue;
      p.clusters = (a.hidden + p.units() - 1) / p.units();
      bool fit = false;
      FL_TRY(cluster::all_resident(
          kernel, cluster::Launch(p.clusters, p.size, ClusterUp<kTM>::kThreads, p.bytes()), &fit));
      if (!fit) continue;
      if (!*ok || p.clusters * p.size > plan->clusters * plan->size) *plan = p;
      *ok = true;
      break;
    }
  }
  return Status::Ok();
}

template <typename T, int kTM, bool kVectorized>
Status launch_ffn_cluster(FfnArgs<T> a, const ClusterPlan<T, kTM>& plan, cudaStream_t stream) {
  auto kernel = ffn_cluster_kernel<T, kTM, kVectorized>;
  const cluster::Launch launch(plan.clusters, plan.size, ClusterUp<kTM>::kThreads, plan.bytes(),
                               stream);
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(plan.bytes())));
  FL_CUDA_TRY(cudaLaunchKernelEx(&launch.config, kernel, a, plan));
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// The cluster kernel (Hopper, up to 64 tokens) with the plan that fits; Status::Unsupported
// when none does (shared memory, C over 8 x 128 inputs, GPCs that hold no cluster).
template <typename T>
Status run_ffn_cluster(const FfnArgs<T>& a, cudaStream_t stream) {
  int device = 0, sms = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const bool vec =
      tc::vector_ok<T>(a.x, a.c) && tc::vector_ok<T>(a.w1, a.hidden) && tc::vector_ok<T>(a.w2, a.c);
  bool fits = false;
  auto go = [&](auto tm_tag, auto vec_tag) -> Status {
    constexpr int kTM = decltype(tm_tag)::value;
    constexpr bool kVec = decltype(vec_tag)::value;
    ClusterPlan<T, kTM> plan;
    FL_TRY((plan_cluster<T, kTM, kVec>(a, sms, optin, &plan, &fits)));
    return fits ? launch_ffn_cluster<T, kTM, kVec>(a, plan, stream) : Status::Ok();
  };
  using I16 = std::integral_constant<int, 16>;
  using I64 = std::integral_constant<int, 64>;
  using Yes = std::true_type;
  using No = std::false_type;
  if (a.m <= 16) {
    FL_TRY(vec ? go(I16{}, Yes{}) : go(I16{}, No{}));
  } else {
    FL_TRY(vec ? go(I64{}, Yes{}) : go(I64{}, No{}));
  }
  if (!fits) return Status::Unsupported("no cluster plan fits on this GPU at this shape");
  return Status::Ok();
}

// The split kernel, on any GPU with cooperative launches. It picks the slice width S: 32 hidden
// units at up to 16 tokens (more blocks stream the weights sooner and the reduction is small),
// 64 beyond, and 32 where 64 does not fit in shared memory; whether W2's slice stays in shared
// memory; and the loader.
template <typename T>
Status run_ffn_split(const FfnArgs<T>& a, cudaStream_t stream) {
  int device = 0, sms = 0, optin = 0, cooperative = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  const bool vec =
      tc::vector_ok<T>(a.x, a.c) && tc::vector_ok<T>(a.w1, a.hidden) && tc::vector_ok<T>(a.w2, a.c);
  if (!cooperative) return Status::Unsupported("this GPU has no cooperative launches");
  int slice = a.m <= 16 ? 32 : 64;
  auto go = [&](auto tm_tag, auto s_tag) -> Status {
    constexpr int kTM = decltype(tm_tag)::value, kS = decltype(s_tag)::value;
    using Smem = FfnSmem<T, kTM, kS>;
    const bool resident = Smem::bytes(true, a.c) <= size_t(optin);
    if (Smem::bytes(false, a.c) > size_t(optin)) {
      return Status::Unsupported("its tiles do not fit in this GPU's shared memory");
    }
    if (vec && resident) return launch_ffn_config<T, kTM, kS, true, true>(a, sms, stream);
    if (vec) return launch_ffn_config<T, kTM, kS, true, false>(a, sms, stream);
    if (resident) return launch_ffn_config<T, kTM, kS, false, true>(a, sms, stream);
    return launch_ffn_config<T, kTM, kS, false, false>(a, sms, stream);
  };
  using I16 = std::integral_constant<int, 16>;
  using I32 = std::integral_constant<int, 32>;
  using I64 = std::integral_constant<int, 64>;
  if (FfnSmem<T, 64, 64>::bytes(true, a.c) > size_t(optin)) slice = 32;
  if (a.m <= 16) return slice == 32 ? go(I16{}, I32{}) : go(I16{}, I64{});
  return slice == 32 ? go(I64{}, I32{}) : go(I64{}, I64{});
}

// The two Linear layers: up, C -> 4C, and down, 4C -> C; in the epilogues level, cuBLASLt's
// GELU+bias epilogue and its bias epilogue.
constexpr LinearSpec kUp{
    1, 4, blas::Epilogue::gelu_bias, "gemm_up", "add_bias_up", "gemm_up_bias_gelu"};
constexpr LinearSpec kDown{
    4, 1, blas::Epilogue::bias, "gemm_down", "add_bias_down", "gemm_down_bias"};

// Device buffers for one shape and element type: x, the two Linear layers (W1, b1, W2, b2 and
// their cuBLASLt plans), the unfused chain's t, u, h and s, y, and the fused level's reduction
// state.
template <typename T>
class FfnWorkspace final : public LevelWorkspace<FfnWorkspace<T>> {
 public:
  FfnWorkspace(int64_t m, int64_t c, double tolerance)
      : m_(m),
        c_(c),
        h_(4 * c),
        tolerance_(tolerance),
        up_(m, c, kUp, {&x_, &t_, &u_, &hid_}),
        down_(m, c, kDown, {&hid_, &s_, &y_, &y_}) {
    this->set_where({m, c, int64_t(sizeof(T))}, precision_of<T>(), "tokens");
  }

  static const LevelTable<FfnWorkspace>& levels();                // the ladder, below
  static std::vector<VariantRow<FfnWorkspace>> fused_variants();  // level 2's kernels, below

  Status allocate() {
    FL_TRY(allocate_elements<T>({{&x_, m_ * c_},
                                 {&t_, m_ * h_},
                                 {&u_, m_ * h_},
                                 {&hid_, m_ * h_},
                                 {&s_, m_ * c_},
                                 {&y_, m_ * c_}}));
    FL_TRY(sums_.allocate(sizeof(ErrorSums)));
    // The fused level's reduction state: zero now, and left zero by every run of it.
    FL_TRY(acc_.allocate(m_ * c_ * sizeof(float)));
    // Each hidden slice's share of y (slices of 32 units at most 4C / 32), at up to 64 tokens
    // and 32 MiB: the fused kernel adds the shares with plain stores and one pass, not atomics.
    const int64_t shares = (h_ + 31) / 32 * m_ * c_ * int64_t(sizeof(float));
    if (m_ <= 64) FL_TRY(partial_.allocate(std::min<int64_t>(shares, int64_t(32) << 20)));
    FL_TRY(counters_.allocate((2 + kMaxClusterBlocks) * sizeof(unsigned)));
    FL_TRY(arrivals_.allocate(sizeof(unsigned long long)));  // the small-token kernel's barrier
    FL_CUDA_TRY(cudaMemset(acc_.get(), 0, acc_.bytes()));
    FL_CUDA_TRY(cudaMemset(counters_.get(), 0, counters_.bytes()));
    FL_CUDA_TRY(cudaMemset(arrivals_.get(), 0, arrivals_.bytes()));
    if (kRings) {  // the wgmma kernel's h ring and counters
      FL_TRY(h_ring_.allocate(ffn_wgmma_ring_rows(m_) * h_ * sizeof(T)));
      FL_TRY(tile_counters_.allocate(ffn_wgmma_counters(m_) * sizeof(unsigned)));
      FL_CUDA_TRY(cudaMemset(tile_counters_.get(), 0, tile_counters_.bytes()));
    }
    FL_TRY(up_.allocate());
    return down_.allocate();
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    FL_TRY(fill_uniform(x_.as<T>(), m_ * c_, seed, gemm::kXLo, gemm::kXHi, stream));
    FL_TRY(up_.fill(seed, 0, stream));
    return down_.fill(seed, 1, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    return poison_elements<T>(
        {{&t_, m_ * h_}, {&u_, m_ * h_}, {&hid_, m_ * h_}, {&s_, m_ * c_}, {&y_, m_ * c_}}, stream);
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    const gemm::CheckArgs<T> a{x_.as<T>(), nullptr,         nullptr,      up_.weights(),
                               up_.bias(), down_.weights(), down_.bias(), y_.as<T>(),
                               m_,         int(c_),         int(h_),      int(c_)};
    return check_gemm_rows<T, false, true, true>(a, sums_, tolerance_, stream, result);
  }

  // Inputs x (M x C), W1 (C x 4C), b1 (4C), W2 (4C x C), b2 (C); output y.
  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    return download_io<T>({{"x", x_.as<T>(), m_ * c_},
                           up_.weights_tensor("W1"),
                           up_.bias_tensor("b1"),
                           down_.weights_tensor("W2"),
                           down_.bias_tensor("b2")},
                          {{"y", y_.as<T>(), m_ * c_}}, stream, inputs, outputs);
  }

 private:
  // Level 2's kernels (its variants, in the level table below) on this workspace's buffers.
  FfnArgs<T> fused_args() const {
    return {x_.as<T>(),
            up_.weights(),
            up_.bias(),
            down_.weights(),
            down_.bias(),
            y_.as<T>(),
            acc_.as<float>(),
            partial_.as<float>(),
            partial_.bytes(),
            counters_.as<unsigned>(),
            m_,
            static_cast<int>(c_),
            static_cast<int>(h_),
            this->phase_sink()};
  }
  // The cluster kernel in bf16 only: in fp32 its tiles and partial sums leave too little room
  // for all its clusters to be resident at the lesson's shapes.
  Status cluster(cudaStream_t stream) {
    if constexpr (std::is_same_v<T, float>) {
      (void)stream;
      return Status::Unsupported("runs in bf16 only");
    } else {
      FL_TRY(run_ffn_cluster(fused_args(), stream));
      this->declare_phases(ffn_cluster_phases());
      return Status::Ok();
    }
  }
  Status split(cudaStream_t stream) {
    FL_TRY(run_ffn_split(fused_args(), stream));
    this->declare_phases(ffn_split_phases());
    return Status::Ok();
  }
  // The small-token kernel (kernels/ffn_small.cu); h goes through the unfused chain's h buffer
  // (level 2 writes it before it reads it).
  Status small(cudaStream_t stream) {
    if constexpr (kRings) {
      const FfnSmallBuffers b{
          x_.as<T>(),        up_.weights(), up_.bias(),   down_.weights(),
          down_.bias(),      y_.as<T>(),    hid_.as<T>(), arrivals_.as<unsigned long long>(),
          this->phase_sink()};
      bool launched = false;
      FL_TRY(try_ffn_small(b, m_, static_cast<int>(c_), static_cast<int>(h_), stream, &launched));
      if (launched) {
        this->declare_phases(ffn_small_phases());
        return Status::Ok();
      }
    }
    return Status::Unsupported("its clusters do not all fit on this GPU at once");
  }
  // The wgmma kernel (kernels/ffn_wgmma.cu), h through the ring buffer.
  Status wgmma(cudaStream_t stream) {
    if constexpr (kRings) {
      int device = 0, sms = 0;
      FL_CUDA_TRY(cudaGetDevice(&device));
      FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
      const FfnWgmmaBuffers b{
          x_.as<T>(),   up_.weights(), up_.bias(),      down_.weights(),
          down_.bias(), y_.as<T>(),    h_ring_.as<T>(), tile_counters_.as<unsigned>()};
      bool launched = false;
      FL_TRY(
          try_ffn_wgmma(b, m_, static_cast<int>(c_), static_cast<int>(h_), sms, stream, &launched));
      if (launched) return Status::Ok();
    }
    return Status::Unsupported("its tiles do not fit on this GPU");
  }

  // Whether level 2 can take the wgmma kernel: bf16 on a build with the wgmma kernels.
  static constexpr bool kRings = std::is_same_v<T, __nv_bfloat16> && kWgmmaBuild;

  int64_t m_, c_, h_;
  double tolerance_;
  DeviceBuffer x_, t_, u_, hid_, s_, y_, sums_, acc_, partial_, counters_, arrivals_, h_ring_,
      tile_counters_;
  LinearLayer<T> up_, down_;
};

// ---- level 2's kernels ----------------------------------------------------------------------
// In the table's order: the first that can run and prefers the token count runs, else the last
// that can run (kernels/level_table.h). The split kernel runs everywhere.
template <typename T>
std::vector<VariantRow<FfnWorkspace<T>>> FfnWorkspace<T>::fused_variants() {
  using Ws = FfnWorkspace;
  const std::vector<Precision> bf16{Precision::bf16};
  return {
      {"ffn_small",
       "each block makes 32 hidden units of h into L2 (W1 by TMA), one grid barrier, then "
       "clusters of 8 split W2 and add their partial sums in distributed shared memory",
       "ffn_small_kernel",
       {90, 90, true, bf16, kFfnClusterTokens, 1, kFfnClusterTokens},
       [](Ws& w, cudaStream_t s) { return w.small(s); },
       [](const Dims& d) { return d.i % 32 == 0 ? "" : "C is not a multiple of 32"; },
       ffn_small_phases()},
      {"ffn_cluster",
       "clusters of 8 (or 4) blocks split C, exchange their partial sums of h in distributed "
       "shared memory, and add their shares of y with 16-byte atomics in L2",
       "ffn_cluster_kernel",
       {90, 0, false, bf16, kFfnClusterTokens, 1, kFfnClusterTokens},
       [](Ws& w, cudaStream_t s) { return w.cluster(s); },
       [](const Dims& d) { return d.i <= 1024 ? "" : "C is over 1024 (128 inputs a block)"; },
       ffn_cluster_phases()},
      {"ffn_wgmma",
       "persistent wgmma tiles of both GEMMs, fed by TMA; h goes through an L2-resident ring of "
       "row blocks, read back by the down tiles soon after it is written",
       "ffn_wgmma_kernel",
       {90, 90, true, bf16, 0, kFfnWgmmaFrom, 0},
       [](Ws& w, cudaStream_t s) { return w.wgmma(s); },
       [](const Dims& d) { return d.i % 8 == 0 ? "" : "C is not a multiple of 8"; }},
      {"ffn_split",
       "each block owns a slice of the 4C hidden units (h in shared memory) and adds its share "
       "of y in L2; a grid barrier, then all blocks write y (any GPU: a cooperative launch)",
       "ffn_fused_kernel",
       {},
       [](Ws& w, cudaStream_t s) { return w.split(s); },
       {},
       ffn_split_phases()},
  };
}

// ---- the level table -----------------------------------------------------------------------
// M = s tokens, C = i, H = 4C hidden units, b bytes per element. The two layers' launches count
// as the Linear layer's formulas say (gemm_common.cuh): a GEMM reads its input and its weights
// and writes its output, 2 M C H flops; a bias kernel reads its bias once; FLOPs per element:
// bias 1, GELU 8. The fused kernel reads x, both weights and both biases once and writes y once.
template <typename T>
const LevelTable<FfnWorkspace<T>>& FfnWorkspace<T>::levels() {
  using Ws = FfnWorkspace;
  static const LinearRows<Ws> up = linear_rows<Ws>(&Ws::up_, kUp);
  static const LinearRows<Ws> down = linear_rows<Ws>(&Ws::down_, kDown);
  static const LevelTable<Ws> table = {
      {"unfused",
       "GEMM, bias, GELU, GEMM, bias: the 4C-wide tensor makes three round trips through HBM",
       "each GEMM's tiles, within its launch; t, u, h and s go to HBM and back",
       {up.gemm, up.add_bias, up.gelu, down.gemm, down.add_bias}},
      {"epilogues",
       "two cuBLASLt GEMMs with fused epilogues: h written once, read once",
       "each GEMM's tiles, and its product, activated or biased in registers before its store; "
       "h goes to HBM and back once",
       {up.epilogue, down.epilogue}},
      {"fused",
       "one tensor-core kernel: below 256 tokens split over the 4C hidden units (each block makes "
       "a slice of h and, with its cluster, a share of y); from 256 tokens both GEMMs' tiles, h "
       "through a ring buffer",
       "each block's slice of h = GELU(x W1 + b1), left in L2 and read back after one barrier "
       "(Hopper) or kept in shared memory, the shares of y meeting in shared memory or L2; or, "
       "from 256 tokens, h's row blocks in a ring buffer, read back by the down tiles soon after "
       "they are written (L2 still writes them back to HBM: see the counters)",
       {{"ffn_fused", nullptr,
         [](const Dims& d) {
           const int64_t tokens = d.s * d.i * d.b, weights = d.i * 4 * d.i * d.b;  // x or y; W
           const double gemm = 2.0 * d.s * d.i * (4 * d.i), hidden = 1.0 * d.s * (4 * d.i);
           return Textbook{tokens + 2 * weights + 4 * d.i * d.b + d.i * d.b, tokens,
                           2 * gemm + kGeluFlops * hidden + hidden + 1.0 * d.s * d.i};
         },
         fused_variants()}}},
  };
  return table;
}

// ---- the lesson ----------------------------------------------------------------------------

class Ffn final : public GemmLesson<FfnWorkspace> {
 public:
  Ffn()
      : GemmLesson("ffn", "FFN (C -> 4C -> C)",
                   "y = GELU_tanh(x W1 + b1) W2 + b2,  W1: C x 4C,  W2: 4C x C") {}

  // inputs: x (M x C), W1 (C x 4C), b1 (4C), W2 (4C x C), b2 (C).
  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const LinearInputs up(inputs, 1), down(inputs, 3);
    std::vector<double> h(up.n);
    auto row = [&](const double* x, double* y) {  // one row of y from one row of x
      up.row(x, h.data());
      for (double& v : h) v = gelu_tanh_reference(v);
      down.row(h.data(), y);
    };
    return {reference_rows(inputs.at(0).values, up.k, down.n, row)};
  }

 protected:
  // x, s, y (M x C); W1, W2; b1, b2; t, u, h (M x H); the fused level's fp32 accumulator (M x C),
  // counters (40 + 8 bytes) and, at up to 64 tokens, the hidden slices' shares of y (at most 32
  // MiB).
  int64_t buffer_bytes(int64_t m, int64_t c, int64_t b) const override {
    const int64_t h = 4 * c;
    // bf16 on Hopper builds: the wgmma kernel's h ring and counters too.
    const int64_t ring =
        b == 2 && kWgmmaBuild ? ffn_wgmma_ring_rows(m) * h * b + ffn_wgmma_counters(m) * 4 : 0;
    return (3 * m * c + 2 * c * h + h + c + 3 * m * h) * b + m * c * 4 + 48 + ring +
           (m <= 64 ? std::min<int64_t>((h + 31) / 32 * m * c * 4, int64_t(32) << 20) : 0);
  }
};

}  // namespace

FL_DEFINE_LESSON(ffn, Ffn);

}  // namespace fl
