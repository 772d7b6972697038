// The FFN's level 2 on any GPU (the level table's last row: it runs where nothing else can):
// ffn_fused_kernel, split over the hidden dimension.
//
// What changes against level 1 (two cuBLASLt GEMMs): one kernel, and h = GELU(x W1 + b1) never
// leaves the SM. At 1-64 tokens an FFN is a weight-streaming problem (2 x C x 4C weights, 9.4 MB
// in bf16 at C = 768, against 98 KB of x), so the work is cut where the weights are: H / S blocks
// stream disjoint slices of W1 and W2, every SM pulls weights at once, and each weight is read
// from HBM exactly once. The price is the reduction: each block holds a share of every output.
//
// Block (s, t) owns hidden units [s S, s S + S) and walks token chunks t, t + gridDim.y, ...:
//   1. up:    h[kTM x S] = GELU(x[chunk] W1[:, slice] + b1[slice]) on our GEMM core
//             (kernels/tensor_gemm.cuh): x and W1 tiles through a deep cp.async ring (128-byte
//             K-tiles, 6 stages: ~40 KB of weights in flight per SM), h kept in shared memory,
//             rounded to the lesson's precision as level 1's h would be;
//   2. down:  its share of y, h[kTM x S] W2[slice, :], 64 output columns at a time from W2's
//             slice (loaded into shared memory once, with the first tiles of step 1, when it
//             fits): stored to its own place when the run is one chunk, else added to an fp32
//             accumulator with vector atomics in L2 (blocks start at different columns so they
//             do not all add to the same addresses at once);
//   3. a grid-wide barrier (the launch is cooperative: every block is resident), then all blocks
//      together write y = sum + b2 in the lesson's precision (and leave acc at zero).
// Tiles: chunks of kTM = 64 tokens, or 16 at up to 16 tokens (the mma tiles are 16 rows: fewer
// padded rows); S = 32 hidden units at up to 16 tokens (12 ring stages: a block's whole W1 slice
// in flight at C = 768), 64 beyond; warps 2 x 2 at 64 tokens, 1 x S/16 at 16.
// Budget at C = 768, bf16: the weights, 9.4 MB, are 3.1 us at 3 TB/s whatever the token count;
// the shares of y are (4C / S) x M x C fp32 values: 4.7 MB at 16 tokens (S = 32), 9.4 MB at 64
// (S = 64), as many bytes through L2 as the weights, and growing with the tokens. That is what
// the cluster kernel (ffn_cluster.cu) cuts, and why cuBLASLt's two GEMMs win at many tokens.
#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "kernels/activations.cuh"
#include "kernels/cuda_check.h"
#include "kernels/ffn/ffn_common.cuh"
#include "kernels/phases.cuh"
#include "kernels/tensor_gemm.cuh"

namespace fl::ffn {
namespace {

constexpr int kFfnColumns = 64;
// At 16 tokens the ring is deep enough (12 stages at S = 32) that a block's whole W1 slice is in
// flight at once at C = 768.
template <int kTM, int kS>
struct FfnShape {
  static constexpr int kWarpsM = kTM == 64 ? 2 : 1, kWarpsN = kTM == 64 ? 2 : kS / 16;
  static constexpr int kStages = kTM == 64 ? 6 : (kS == 32 ? 12 : 8);
  static constexpr int kThreads = 256;  // 8 warps issue copies; kWarpsM x kWarpsN multiply
  using Up = tc::TileConfig<kTM, kS, kWarpsM, kWarpsN, kStages, 128, kThreads>;  // h = x W1
};

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

// Step 2 for one warp's items: this slice's share of y, h[kTM x S] W2[slice, :], in warp items
// of 16 tokens x 64 columns spread over all the block's warps, starting at a column that differs
// between slices. Each share is stored to its own place in `partial` when the run is one chunk
// (no two blocks write the same address), otherwise added into `acc` with atomics.
template <typename T, int kTM, int kS>
__device__ __forceinline__ void down_share(const FfnArgs<T>& a, const T* s_h, const T* w2_first,
                                           int ld_w2, int first_tile, int tiles, int64_t slice,
                                           int64_t m0) {
  using Smem = FfnSmem<T, kTM, kS>;
  constexpr int kWarps = FfnShape<kTM, kS>::kThreads / 32, kRowTiles = kTM / 16;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const bool pairs = a.c % 2 == 0;
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
}

// Step 3 when the shares were stored (one chunk): a block takes 128 consecutive outputs at a
// time: lane l owns outputs 4l .. 4l + 3 of them (16-byte loads, coalesced across the warp), warp
// w sums slices w, w + 8, ..., and the 8 warps' sums meet in shared memory (s_sum: the ring,
// free now), then y = sum + b2.
template <typename T, int kThreads>
__device__ __forceinline__ void y_from_partials(const FfnArgs<T>& a, int64_t slices, float* s_sum) {
  constexpr int kWarps = kThreads / 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t total = a.m * a.c, grid_blocks = int64_t(gridDim.x) * gridDim.y;
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
}

// Step 3 after atomics: all blocks write y = acc + b2 and zero acc, 4 at a time.
template <typename T, int kThreads>
__device__ __forceinline__ void y_from_acc(const FfnArgs<T>& a) {
  const int64_t total = a.m * a.c;
  const int64_t thread = (int64_t(blockIdx.y) * gridDim.x + blockIdx.x) * kThreads + threadIdx.x;
  const int64_t threads = int64_t(gridDim.x) * gridDim.y * kThreads;
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
  // The barrier's generation can only move once every block has arrived, so it is read now,
  // off the critical path; b2's lines are fetched into L2 for step 3.
  const unsigned generation =
      threadIdx.x == 0 ? *reinterpret_cast<volatile unsigned*>(a.barrier + 1) : 0;
  if (blockIdx.x == 0 && blockIdx.y == 0) {
    for (int i = threadIdx.x * 64; i < a.c; i += kFfnThreads * 64) {
      asm volatile("prefetch.global.L2 [%0];" ::"l"(a.b2 + i));
    }
  }

  PhaseMarks<kSplitY + 1> marks(a.phases);
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
    // 2. down: this slice's share of y.
    if constexpr (kW2Resident) {
      down_share<T, kTM, kS>(a, s_h, s_w2, ld_w2, 0, column_tiles, slice, m0);
    } else {
      for (int tile = 0; tile < column_tiles; ++tile) {  // W2's slice a tile at a time
        const int n0 = tile * kFfnColumns;
        tc::copy_tile<T, kFfnThreads, kVectorized>(s_w2, ld_w2, a.w2 + j0 * a.c + n0, a.c, kS,
                                                   kFfnColumns, units, a.c - n0);
        tc::async_commit();
        tc::async_wait<0>();
        __syncthreads();
        down_share<T, kTM, kS>(a, s_h, s_w2, ld_w2, tile, 1, slice, m0);
        __syncthreads();  // s_w2 is refilled next
      }
    }
    __syncthreads();  // s_h (and s_w2, s_b1 for a new slice) are rewritten by the next item
  }

  // 3. Every block's shares are in; all blocks write y = acc + b2 (and zero acc).
  marks.mark(kSplitItems);
  grid_barrier(a.barrier, generation);
  marks.mark(kSplitBarrier);
  if (a.partial != nullptr) {
    y_from_partials<T, kFfnThreads>(a, slices, reinterpret_cast<float*>(smem));
  } else {
    y_from_acc<T, kFfnThreads>(a);
  }
  marks.mark(kSplitY);
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

}  // namespace

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

template Status run_ffn_split<float>(const FfnArgs<float>&, cudaStream_t);
template Status run_ffn_split<__nv_bfloat16>(const FfnArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace fl::ffn
