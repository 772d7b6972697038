// The FFN's level 2 on Hopper (sm_90) at up to 64 tokens: ffn_cluster_kernel.
//
// What changes against the split kernel (ffn_split.cu): that kernel sums 4C / S shares of y per
// output, one per hidden slice, and needs a grid barrier to do it; at 64 tokens that reduction
// costs more than the weights. And each of its blocks reads W1 as S-wide columns, 64-byte pieces
// of rows that are 6 KB long, which keeps few bytes in flight per request. On sm_90 a thread
// block cluster (`size` = 8 or 4 blocks on one GPC) can write its blocks' shared memory
// (distributed shared memory, DSMEM), so a cluster works as one large block. Cluster q owns
// U = size x width hidden units (width = 4C / blocks, 28 at C = 768 with 112 blocks); block r:
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
//              16-byte atomics in L2;
//   5. the last cluster to finish a column range (a counter per range: no grid barrier, no
//      cooperative launch) writes y = acc + b2 there and leaves acc and its counter at zero.
// Tiles: the up GEMM's kTM (16 or 64) tokens x U (<= 256) units with the block's whole K (<= 128
// inputs) resident in shared memory; the down GEMM in warp tiles of 16 columns x all tokens.
// Budget at C = 768, bf16, 112 blocks (14 clusters of 8): the weights as before, 9.4 MB read
// once, every SM streaming from the first cycle; each output now takes blocks / size = 14
// additions, not 4C / S = 96: 0.7 MB of fp32 partial sums into L2 at 16 tokens instead of 4.7.
#include <cuda_bf16.h>

#include <type_traits>

#include "kernels/activations.cuh"
#include "kernels/cluster.cuh"
#include "kernels/cuda_check.h"
#include "kernels/ffn/ffn_common.cuh"
#include "kernels/phases.cuh"
#include "kernels/tensor_gemm.cuh"

namespace fl::ffn {
namespace {

constexpr int kClusterUnits = 256;  // U, the up tile's width: a cluster's hidden units, at most
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

// Step 2: unit `col` of the cluster belongs to block col / width; each lane sends 4 adjacent
// units of one row with one 16-byte store (tc::lane_quad; width is a multiple of 4: the 4 never
// straddle two blocks) into that block's recv[rank].
template <typename T, int kTM>
__device__ __forceinline__ void send_partials(
    const float (&up)[ClusterUp<kTM>::kMT][ClusterUp<kTM>::kNT][4], float* recv,
    const ClusterPlan<T, kTM>& plan, unsigned rank, int live) {
  using Up = ClusterUp<kTM>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int width = plan.width, units_all = plan.units();
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

// Step 3: h = GELU(sum + b1) for this block's `units` units, 4 at a time, sent to every block's
// h_all at columns [rank width, rank width + width).
template <typename T, int kTM>
__device__ __forceinline__ void share_h(const float* recv, T* h_all, const float* s_b1,
                                        const ClusterPlan<T, kTM>& plan, unsigned rank, int live,
                                        int units) {
  constexpr int kThreads = ClusterUp<kTM>::kThreads;
  const int width = plan.width;
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
}

// Step 4: a warp takes 16 columns for all the tokens (1-4 mma row tiles: independent mma
// chains) over the cluster's units. Each lane adds 4 adjacent columns of one row with one
// 16-byte atomic (tc::lane_quad: half the L2 operations).
template <typename T, int kTM>
__device__ __forceinline__ void down_into_acc(const FfnArgs<T>& a, const T* h_all, const T* w2s,
                                              const ClusterPlan<T, kTM>& plan, int64_t c0, int cols,
                                              int rows) {
  constexpr int kWarps = ClusterUp<kTM>::kThreads / 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int units_all = plan.units();
  const int row_tiles = rows / 16, col_tiles = (cols + 15) / 16;
  [[maybe_unused]] const bool quad_ok = a.c % 4 == 0;
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
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // 16-byte atomics: sm_90 (the kernel's GPUs)
        if (quad_ok && n + 3 < c0 + cols) {
          atomicAdd(reinterpret_cast<float4*>(out), make_float4(q.v[0], q.v[1], q.v[2], q.v[3]));
          continue;
        }
#endif
        for (int e = 0; e < 4 && n + e < c0 + cols; ++e) atomicAdd(out + e, q.v[e]);
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
}

// Step 5, in the last cluster to add into this block's column range: y = acc + b2 there, acc
// left at zero. Warp w takes rows w, w + 8, ..., lane l columns l, l + 32, ...: all of a
// thread's loads (up to 8 x 8) are issued before any of its stores, so the L2 round trips
// overlap.
template <typename T, int kTM>
__device__ __forceinline__ void write_y(const FfnArgs<T>& a, int64_t c0, int cols,
                                        const float* s_b2) {
  constexpr int kWarps = ClusterUp<kTM>::kThreads / 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
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

template <typename T, int kTM, bool kVectorized>
__global__ void __launch_bounds__(256) ffn_cluster_kernel(FfnArgs<T> a, ClusterPlan<T, kTM> plan) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Plan = ClusterPlan<T, kTM>;
  using Up = typename Plan::Up;
  constexpr int kThreads = Up::kThreads;
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
  cluster::arrive_started();
  PhaseMarks<kClusterSums + 1> marks(a.phases);

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

  // 2. reduce: each block's partials of a unit go to the unit's block.
  cluster::wait_started();
  send_partials<T, kTM>(up, recv, plan, rank, live);
  cluster::sync();
  // 3. share: h = GELU(sum + b1) for this block's units, sent to every block of the cluster.
  share_h<T, kTM>(recv, h_all, s_b1, plan, rank, live, static_cast<int>(units));
  tc::async_wait<0>();  // W2's piece (this thread's copies)
  cluster::sync();      // h_all is complete; no block touches another's shared memory after this
  marks.mark(kClusterUp);

  // 4. down: h W2 for this block's columns, added into acc in L2.
  down_into_acc<T, kTM>(a, h_all, w2s, plan, c0, static_cast<int>(cols), rows);
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
  if (s_last) write_y<T, kTM>(a, c0, static_cast<int>(cols), s_b2);
  marks.mark(kClusterSums);
#else
  __trap();  // clusters need compute capability 9.0; the launcher never picks this kernel below
#endif
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
}  // namespace

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

template Status run_ffn_cluster<__nv_bfloat16>(const FfnArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace fl::ffn
