// The LayerNorm-Linear's level 2 on Hopper (sm_90, bf16) at a few tens of tokens:
// ln_gemm_cluster_kernel. It takes up to kLnClusterRows = 256 tokens; the level table picks it at
// 17 to kLnClusterPick = 96 (below, the panel kernel; beyond, the wgmma kernel).
//
// What changes against the panel kernel (ln_panel.cu): at a few tokens y = LN(x) W + b is a
// weight-streaming problem (W is C x 3C: 3.5 MB in bf16 at C = 768, against 1.5 KB of x per
// token), and a block that owns whole columns of W over all of K leaves SMs idle once the rows
// grow (N / bn blocks per row chunk of 64). On sm_90 a thread block cluster (`size` = 4 or 8
// blocks on one GPC, kernels/cluster.cuh) splits the GEMM's K = C instead, so that ~112 SMs
// stream W at once at any token count: cluster q owns `width` output columns [q width,
// q width + width) and block r of it the inputs [r C / size, (r + 1) C / size):
//   1. copy:    x[:, r's inputs] (all M rows) and W[r's inputs, q's columns] (rows of width x 2
//               bytes, all in flight at once) into shared memory; gamma and beta meanwhile;
//   2. moments: as x lands, each row's mean and sum of squared deviations over r's inputs,
//               sent to every block of the cluster (DSMEM stores); after a cluster barrier each
//               block merges the `size` partial moments (Chan's formula: equal counts) into the
//               row's mean and 1/std over all C inputs;
//   3. normalize r's slice of x in place, (x - mean) rstd gamma + beta, rounded as level 0's xn;
//   4. multiply: x_slice[M x C/size] W_slice[C/size x width] on tensor cores, 64 rows at a time,
//      a partial sum over r's inputs; block p of the cluster owns `width / size` of the columns,
//      and each block sends p the partials of p's columns; after a cluster barrier p adds the
//      `size` partials and b and stores y.
// Tiles: warp tiles of 16 columns x up to 64 rows (1-4 mma row tiles); 512 threads; clusters of
// 4 above 16 tokens (half the partial sums of 8), of 8 below.
// Budget at C = 768, bf16, 64 tokens: W, 3.5 MB, read from HBM once by ~112 SMs (1.2 us at 3
// TB/s); x, the statistics and the partial sums never leave the chip (size x 64 x width fp32 of
// DSMEM stores per cluster and chunk); no atomics, no grid barrier; 2 cluster barriers per 64
// rows (plus one between chunks, before the partials' buffer is reused).
#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cluster.cuh"
#include "kernels/cuda_check.h"
#include "kernels/gemm_common.cuh"
#include "kernels/layernorm_linear/ln_common.cuh"
#include "kernels/phases.cuh"
#include "kernels/tensor_gemm.cuh"

namespace fl::layernorm_linear {
namespace {

constexpr int kLnChunk = 64;  // rows of partial sums exchanged at a time

// The cluster kernel's shapes: `size` blocks per cluster, `inputs` = C / size per block (a
// multiple of 16), `own` output columns summed by each block (a multiple of 4: the partials
// travel as 16-byte stores of 4 columns), width = size x own; `rows`
// = M rounded up to 16 (mma tiles). Shared memory: x's slice (rows x inputs), W's slice
// (inputs x width), the partial moments received (size x rows float2), each row's mean and
// 1/std, gamma and beta of the slice, and the partials received (size x 64 x own fp32).
template <typename T>
struct LnClusterPlan {
  int size = 0, inputs = 0, own = 0, clusters = 0, rows = 0, threads = 256;
  __host__ __device__ int width() const { return size * own; }
  __host__ __device__ int ld_x() const { return inputs + tc::kPad<T>; }
  __host__ __device__ int ld_w() const { return width() + tc::kPad<T>; }
  __host__ __device__ size_t w_offset() const { return sizeof(T) * size_t(rows) * ld_x(); }
  __host__ __device__ static size_t align16(size_t b) { return (b + 15) / 16 * 16; }
  __host__ __device__ size_t moments_offset() const {
    return align16(w_offset() + sizeof(T) * size_t(inputs) * ld_w());
  }
  __host__ __device__ size_t stats_offset() const {
    return moments_offset() + sizeof(float2) * size_t(size) * rows;
  }
  __host__ __device__ size_t affine_offset() const {
    return stats_offset() + sizeof(float2) * rows;
  }
  __host__ __device__ size_t recv_offset() const {
    return align16(affine_offset() + 2 * sizeof(T) * size_t(inputs));
  }
  __host__ __device__ size_t bytes() const {
    return recv_offset() + sizeof(float) * size_t(size) * kLnChunk * own;
  }
};

// Step 2: the moments of each live row over this block's inputs, 4 lanes per row (8 rows per warp
// at once): the mean, then the sum of squared deviations from it (two passes over shared memory,
// 16 bytes at a time: nothing cancels). The row's first lane sends them to every block of the
// cluster's moments[rank].
template <typename T, int kThreads>
__device__ __forceinline__ void send_moments(const T* xs, float2* moments,
                                             const LnClusterPlan<T>& plan, unsigned rank,
                                             int live) {
  constexpr int E = tc::kVec<T>, kLanes = 4;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int chunks = plan.inputs / E, sub = lane % kLanes, size = plan.size;
  for (int r0 = warp * (32 / kLanes); r0 < live; r0 += kThreads / kLanes) {
    const int r = r0 + lane / kLanes;
    const bool valid = r < live;
    const T* row = xs + r * plan.ld_x();
    const float mean =
        row_moment<T, kLanes>(row, valid ? chunks : 0, sub, 0.0f, false) / plan.inputs;
    const float m2 = row_moment<T, kLanes>(row, valid ? chunks : 0, sub, mean, true);
    if (valid && sub == 0) {
      // Starting at the next block: no block is everyone's first destination.
      for (int i = 0; i < size; ++i) {
        const unsigned p = (rank + 1 + i) % size;
        cluster::store_peer(moments + rank * plan.rows + r, p,
                            make_uint2(__float_as_uint(mean), __float_as_uint(m2)));
      }
    }
  }
}

// Step 2, after the cluster barrier: each row's mean and 1/std over all K = k inputs, by Chan's
// formula with `size` equal counts n = inputs: mean = the means' mean, M2 = sum of M2s +
// n sum (mean_p - mean)^2.
template <typename T, int kThreads>
__device__ __forceinline__ void merge_moments(const float2* moments, float2* stats,
                                              const LnClusterPlan<T>& plan, int live, int k) {
  const int size = plan.size, rows = plan.rows;
  for (int r = threadIdx.x; r < live; r += kThreads) {
    float mean = 0.0f;
    for (int p = 0; p < size; ++p) mean += moments[p * rows + r].x;
    mean /= size;
    float m2 = 0.0f;
    for (int p = 0; p < size; ++p) {
      const float2 mo = moments[p * rows + r];
      m2 += mo.y + plan.inputs * (mo.x - mean) * (mo.x - mean);
    }
    stats[r] = make_float2(mean, rsqrtf(fmaxf(m2 / k, 0.0f) + float(gemm::kLayerNormEps)));
  }
}

// Step 4 for the chunk of rows from chunk0: a warp takes a 16-column tile for all the chunk's
// rows (1-4 mma row tiles: independent mma chains), then sends each row's partials to the
// column's owner (block col / own): each lane holds 4 adjacent columns of one row
// (tc::lane_quad), one 16-byte store. Block r starts at the columns of the blocks after it, so
// that at any moment the blocks send to different owners (all starting at owner 0 made each
// owner a hot spot in turn).
template <typename T, int kThreads>
__device__ __forceinline__ void multiply_and_send(const T* xs, const T* ws, float* recv,
                                                  const LnClusterPlan<T>& plan, unsigned rank,
                                                  int chunk0, int live) {
  constexpr int kWarps = kThreads / 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int own = plan.own, ld_x = plan.ld_x(), col_tiles = plan.width() / 16;
  const int row_tiles = min(kLnChunk, plan.rows - chunk0) / 16;
  const int start = (rank + 1) * col_tiles / plan.size;
  for (int item = warp; item < col_tiles; item += kWarps) {
    const int nt16 = (item + start) % col_tiles;
    auto tile = [&](auto mt_tag) {
      constexpr int MT = decltype(mt_tag)::value;
      float acc[MT][2][4] = {};
      tc::warp_multiply<T, MT, 2>(acc, xs + chunk0 * ld_x, ld_x, ws + nt16 * 16, plan.ld_w(),
                                  plan.inputs);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const tc::LaneQuad q = tc::lane_quad(acc[mt][nt], lane);
          const int col = nt16 * 16 + nt * 8 + q.col;
          const int r = mt * 16 + q.row;  // within the chunk
          const int p = col / own, u = col - p * own;
          if (chunk0 + r >= live) continue;
          cluster::store_peer(recv + (int64_t(rank) * kLnChunk + r) * own + u, p, q.bits());
        }
      }
    };
    switch (row_tiles) {
      case 1:
        tile(std::integral_constant<int, 1>{});
        break;
      case 2:
        tile(std::integral_constant<int, 2>{});
        break;
      case 3:
        tile(std::integral_constant<int, 3>{});
        break;
      default:
        tile(std::integral_constant<int, 4>{});
        break;
    }
  }
}

// Step 4, after the cluster barrier: this block adds the `size` partials of its own columns
// (from own0), 4 at a time, adds b and stores the chunk's rows of y.
template <typename T, int kThreads>
__device__ __forceinline__ void sum_and_store(const LnArgs<T>& a, const float* recv,
                                              const LnClusterPlan<T>& plan, int64_t own0,
                                              int chunk0, int live) {
  const int own = plan.own, quads = own / 4, chunk_live = min(kLnChunk, live - chunk0);
  for (int i = threadIdx.x; i < chunk_live * quads; i += kThreads) {
    const int r = i / quads, u = (i % quads) * 4;
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int p = 0; p < plan.size; ++p) {
      const float4 v =
          *reinterpret_cast<const float4*>(recv + (int64_t(p) * kLnChunk + r) * own + u);
      sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
    }
    const int64_t col = own0 + u, row = chunk0 + r;
    float s4[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (col + e < a.n) s4[e] += Elem<T>::to_float(a.bias[col + e]);
    }
    tc::store_pair(a.y, a.n, row, col, s4[0], s4[1], a.n % 2 == 0);
    tc::store_pair(a.y, a.n, row, col + 2, s4[2], s4[3], a.n % 2 == 0);
  }
}

template <typename T, int kThreads>
__global__ void __launch_bounds__(kThreads)
    ln_gemm_cluster_kernel(LnArgs<T> a, LnClusterPlan<T> plan) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) unsigned char smem[];
  T* xs = reinterpret_cast<T*>(smem);
  T* ws = reinterpret_cast<T*>(smem + plan.w_offset());
  float2* moments = reinterpret_cast<float2*>(smem + plan.moments_offset());  // [size][rows]
  float2* stats = reinterpret_cast<float2*>(smem + plan.stats_offset());      // (mean, rstd)
  T* gamma_s = reinterpret_cast<T*>(smem + plan.affine_offset());  // r's slice of gamma, beta
  T* beta_s = gamma_s + plan.inputs;
  float* recv = reinterpret_cast<float*>(smem + plan.recv_offset());  // [size][64][own]
  const unsigned rank = cluster::rank(), q = cluster::index();
  const int inputs = plan.inputs, width = plan.width();
  const int ld_x = plan.ld_x(), ld_w = plan.ld_w();
  const int64_t k0 = int64_t(rank) * inputs, n0 = int64_t(q) * width;
  const int rows = plan.rows, live = static_cast<int>(min(int64_t(rows), a.m));
  cluster::arrive_started();
  PhaseMarks<kClusterMultiply + 1> marks(a.phases);

  // 1. copy: x's slice first (its own commit group: the moments wait only for it), then W's.
  tc::copy_tile<T, kThreads, true>(xs, ld_x, a.x + k0, a.k, rows, inputs, a.m, inputs);
  tc::async_commit();
  tc::copy_tile<T, kThreads, true>(ws, ld_w, a.w + k0 * a.n + n0, a.n, inputs, width, inputs,
                                   a.n - n0);
  tc::async_commit();
  for (int i = threadIdx.x; i < inputs; i += kThreads) {
    gamma_s[i] = a.gamma[k0 + i], beta_s[i] = a.beta[k0 + i];
  }
  tc::async_wait<1>();
  __syncthreads();
  marks.mark(kClusterIn);

  // 2. moments over r's inputs, exchanged in the cluster and merged into each row's statistics.
  cluster::wait_started();
  send_moments<T, kThreads>(xs, moments, plan, rank, live);
  cluster::sync();
  merge_moments<T, kThreads>(moments, stats, plan, live, a.k);
  __syncthreads();
  marks.mark(kClusterStats);

  // 3. normalize the live rows of the slice in place.
  normalize_rows<T, kThreads>(xs, ld_x, live, inputs, stats, gamma_s, beta_s);
  tc::async_wait<0>();  // W's slice (this thread's copies)
  __syncthreads();
  marks.mark(kClusterNormalize);

  // 4. multiply and reduce, 64 rows at a time: the partial products over r's inputs go to the
  //    owners of their columns, which add them; this block owns columns [own0, own0 + own).
  const int64_t own0 = n0 + int64_t(rank) * plan.own;
  for (int chunk0 = 0; chunk0 < rows; chunk0 += kLnChunk) {
    multiply_and_send<T, kThreads>(xs, ws, recv, plan, rank, chunk0, live);
    cluster::sync();
    sum_and_store<T, kThreads>(a, recv, plan, own0, chunk0, live);
    if (chunk0 + kLnChunk < rows) cluster::sync();  // every block is done reading recv
  }
  marks.mark(kClusterMultiply);
#else
  __trap();  // clusters need compute capability 9.0; the launcher never picks this kernel below
#endif
}

// The plan: for clusters of 4 then 8 (8 then 4 at up to 16 tokens), 512 threads, the narrowest
// `own` (most clusters) whose clusters are all resident at once, so that every one of them streams
// W from the start. *ok is false when nothing fits (C not a multiple of 16 x size, too little
// shared memory, GPCs that hold no cluster).
template <typename T>
const void* ln_cluster_kernel() {
  return reinterpret_cast<const void*>(ln_gemm_cluster_kernel<T, 512>);
}

template <typename T>
Status plan_ln_cluster(const LnArgs<T>& a, int sms, int optin, LnClusterPlan<T>* plan, bool* ok) {
  *ok = false;
  constexpr int block = 512;
  const void* kernel = ln_cluster_kernel<T>();
  // Clusters of 4 above 16 tokens (half the partial sums to exchange), 8 below
  // (docs/PERFORMANCE.md has the measurements).
  const int sizes[] = {a.m > 16 ? 4 : 8, a.m > 16 ? 8 : 4};
  for (int size : sizes) {
    LnClusterPlan<T> p;
    p.size = size;
    p.threads = block;
    p.inputs = a.k / size;
    p.rows = static_cast<int>((a.m + 15) / 16 * 16);
    if (a.k % (16 * size) != 0 || sms / size < 1) continue;
    // own: a multiple of 4 (16-byte partials), and width = size x own whole 16-column tiles.
    const int step = size == 8 ? 4 : size == 4 ? 4 : 8;
    int own = (a.n + (sms / size) * size - 1) / ((sms / size) * size);
    own = (own + step - 1) / step * step;
    for (p.own = own; p.width() <= 512; p.own += step) {
      if (p.bytes() > size_t(optin)) break;
      p.clusters = (a.n + p.width() - 1) / p.width();
      bool fit = false;
      FL_TRY(cluster::all_resident(
          kernel, cluster::Launch(p.clusters, p.size, p.threads, p.bytes()), &fit));
      if (!fit) continue;
      *plan = p;
      *ok = true;
      return Status::Ok();
    }
  }
  return Status::Ok();
}

// Hopper, bf16, up to 256 tokens, 16-byte rows: the cluster kernel when its plan fits
// (*launched says whether it ran).
template <typename T>
Status try_ln_cluster(const LnArgs<T>& a, int sms, cudaStream_t stream, bool* launched) {
  *launched = false;
  if (!std::is_same<T, __nv_bfloat16>::value || a.m > kLnClusterRows ||
      !tc::vector_ok<T>(a.x, a.k) || !tc::vector_ok<T>(a.w, a.n)) {
    return Status::Ok();
  }
  int device = 0, major = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 9) return Status::Ok();
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  LnClusterPlan<T> plan;
  FL_TRY(plan_ln_cluster(a, sms, optin, &plan, launched));
  if (!*launched) return Status::Ok();
  const void* kernel = ln_cluster_kernel<T>();
  const cluster::Launch launch(plan.clusters, plan.size, plan.threads, plan.bytes(), stream);
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(plan.bytes())));
  LnArgs<T> args = a;
  void* params[] = {&args, &plan};
  FL_CUDA_TRY(cudaLaunchKernelExC(&launch.config, kernel, params));
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

template <typename T>
Status launch_ln_cluster(const LnArgs<T>& a, cudaStream_t stream) {
  int device = 0, sms = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  bool launched = false;
  FL_TRY(try_ln_cluster(a, sms, stream, &launched));
  return launched ? Status::Ok() : Status::Unsupported("no cluster plan fits on this GPU");
}

template Status launch_ln_cluster<float>(const LnArgs<float>&, cudaStream_t);
template Status launch_ln_cluster<__nv_bfloat16>(const LnArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace fl::layernorm_linear
