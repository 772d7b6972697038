// Lesson 6, layernorm_linear: y = LN(x) W + b, x of tokens x C, W of C x 3C, b of 3C (GPT-2's
// ln_1 followed by the attention block's QKV projection, c_attn).
//
// The ladder: unfused is three kernels (layernorm writes xn = LN(x), lesson 4's one-kernel
// LayerNorm; a cuBLASLt GEMM writes t = xn W; add_bias writes y = t + b: xn and t round-trip
// through HBM); level 1 is the LayerNorm and then one cuBLASLt GEMM with the bias epilogue (t
// never exists); level 2 is one kernel of ours on tensor cores (kernels/tensor_gemm.cuh): the
// rows' mean and 1/std are computed on chip, x is normalized as it lands in shared memory (the
// GEMM's prologue) and the bias is added as y is stored (the epilogue): xn never exists, and
// there is one launch instead of two. Three data paths for level 2, by token count, each
// explained where it is written:
//   up to 16 tokens:  the panel kernel (a block owns a column slice and all of K);
//   17 to 96 tokens:  on Hopper (bf16) the cluster kernel (a cluster of blocks splits K and
//                     adds its partial sums in distributed shared memory), elsewhere the panel
//                     kernel (up to 256 tokens);
//   more tokens:      on Hopper built for sm_90a (bf16) the wgmma kernel (a 64-row x panel
//                     normalized once in shared memory, W streamed past it by TMA:
//                     kernels/ln_gemm_wgmma.cu), elsewhere the tile kernel (BM x BN output
//                     tiles, K streamed through a ring).
// At a few tokens the GEMM streams W (3.5 MB at C = 768 in bf16) and what counts is how many SMs
// pull it at once and how few steps follow its arrival; at many tokens it is the tensor cores'
// arithmetic. The level table below has every launch's bytes.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>

#include "kernels/bias_ops.cuh"
#include "kernels/blas.h"
#include "kernels/catalog.h"
#include "kernels/cluster.cuh"
#include "kernels/device_buffer.h"
#include "kernels/gemm_common.cuh"
#include "kernels/layernorm_linear.h"
#include "kernels/layernorm_rows.cuh"
#include "kernels/level_table.h"
#include "kernels/ln_gemm_wgmma.h"
#include "kernels/phases.cuh"
#include "kernels/tensor_gemm.cuh"
#include "kernels/workspace.cuh"

namespace fl {
namespace {

// ---- level 2, the tile kernel: LayerNorm in the GEMM's prologue, bias in its epilogue ------
// One kernel on our tensor-core core (kernels/tensor_gemm.cuh). A block owns a BM x BN tile of y:
//   1. prologue: the warps compute the mean and 1/std of the block's BM rows of x (all rows'
//      loads in flight at once; per-lane moments merged with Chan's formula), into shared memory,
//      while the first K-tiles are already on their way;
//   2. main loop: cp.async brings x and W tiles into the shared-memory ring; as an x tile lands,
//      each thread normalizes the chunks it copied, in place, (x - mean) * rstd * gamma + beta,
//      rounded to the lesson's precision as level 0's xn would be; then the warps multiply;
//   3. epilogue: y = acc + b, one rounding, stored straight from the accumulators.
// xn never exists in HBM. The price: each block reads its x rows once more for the statistics
// (from L2: the main loop reads the same rows), N / BN times over the whole GEMM.
// Tiles, by token count, where the tile kernel runs (at few tokens only where the panel and
// cluster kernels cannot: shapes whose rows are not 16-byte multiples, or fp32 panels too large
// for shared memory):
//   up to 16 tokens: 16 x 32 with 2 multiplying warps of 8, 128-byte K-tiles, 8 stages (28 KB of
//                    W in flight per block, 72 blocks at C = 768);
//   fewer 128 x 128 tiles than SMs: 64 x 32 with 4 multiplying warps of 8, 128-byte K-tiles,
//                    6 stages;
//   otherwise:       128 x 128 with 8 warps (64 x 32 each), 64-byte K-tiles, 4 stages.
using LnGemmTiny = tc::TileConfig<16, 32, 1, 2, 8, 128, 256>;
using LnGemmSmall = tc::TileConfig<64, 32, 2, 2, 6, 128, 256>;
using LnGemmBig = tc::TileConfig<128, 128, 2, 4, 4>;

// Mean and 1/std of `rows` rows of x from m0, a warp per kRows rows: every load of every row is
// issued before any is summed (a warp walking its rows one by one would wait for one DRAM round
// trip per row). Each lane keeps, per row, a count, a mean and a sum of squared deviations of the
// values it saw (shifted by its first value, so nothing cancels), and the lanes are merged with
// Chan's formula for combining variances.
struct Moments {
  float n = 0, mean = 0, m2 = 0;
  __device__ void merge(const Moments& o) {
    const float total = n + o.n;
    if (o.n == 0) return;
    const float delta = o.mean - mean, w = o.n / total;
    mean += delta * w;
    m2 += o.m2 + delta * delta * n * w;
    n = total;
  }
};

template <typename T, int kThreads, int kRows, bool kVectorized>
__device__ void row_statistics(const T* x, int64_t m, int k, int64_t m0, float* mean, float* rstd) {
  constexpr int E = kVectorized ? tc::kVec<T> : 1;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r0 = warp * kRows;
  float n[kRows] = {}, shift[kRows] = {}, sum[kRows] = {}, sq[kRows] = {};
  for (int c = lane * E; c < k; c += 32 * E) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (m0 + r0 + r >= m) continue;
      const T* p = x + (m0 + r0 + r) * k + c;
      float v[E];
      if constexpr (kVectorized) {
        const Vec16<T> chunk = load16(p);
#pragma unroll
        for (int e = 0; e < E; ++e) v[e] = Elem<T>::to_float(chunk.v[e]);
      } else {
        v[0] = Elem<T>::to_float(*p);
      }
      if (n[r] == 0) shift[r] = v[0];
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const float d = v[e] - shift[r];
        sum[r] += d;
        sq[r] += d * d;
      }
      n[r] += E;
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    Moments mo;
    if (n[r] > 0) mo = Moments{n[r], shift[r] + sum[r] / n[r], sq[r] - sum[r] * sum[r] / n[r]};
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      Moments other{__shfl_xor_sync(0xffffffffu, mo.n, offset),
                    __shfl_xor_sync(0xffffffffu, mo.mean, offset),
                    __shfl_xor_sync(0xffffffffu, mo.m2, offset)};
      if (mo.n == 0) {
        mo = other;
      } else {
        mo.merge(other);
      }
    }
    if (lane == 0) {
      const bool valid = m0 + r0 + r < m;
      const float inv = valid ? rsqrtf(fmaxf(mo.m2 / k, 0.0f) + float(gemm::kLayerNormEps)) : 0.0f;
      mean[r0 + r] = valid ? mo.mean : 0.0f;
      rstd[r0 + r] = inv;
    }
  }
}

template <typename T, class Cfg, bool kVectorized>
__global__ void __launch_bounds__(Cfg::kThreads)
    ln_gemm_bias_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                        const T* __restrict__ beta, const T* __restrict__ w,
                        const T* __restrict__ bias, T* __restrict__ y, int64_t m, int k, int n) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* ring = reinterpret_cast<T*>(smem);
  float* s_mean = reinterpret_cast<float*>(smem + tc::ring_bytes<T, Cfg>());
  float* s_rstd = s_mean + Cfg::kBM;
  float* s_gamma = s_rstd + Cfg::kBM;  // k of each, as fp32: the normalization reads them
  const int k_padded = (k + tc::kBK<T, Cfg> - 1) / tc::kBK<T, Cfg> * tc::kBK<T, Cfg>;
  float* s_beta = s_gamma + k_padded;  // from shared memory, never from HBM inside the loop
  const int64_t m0 = int64_t(blockIdx.y) * Cfg::kBM, n0 = int64_t(blockIdx.x) * Cfg::kBN;

  // Normalizes, in place, the 16-byte chunks of a landed x tile that this thread copied:
  // one 16-byte shared load and store per chunk, gamma and beta read as fp32 from shared memory.
  auto normalize = [&](T* tile, int ld, int64_t k0) {
    constexpr int E = tc::kVec<T>, kChunksPerRow = tc::kBK<T, Cfg> / E;
#pragma unroll
    for (int i = threadIdx.x; i < Cfg::kBM * kChunksPerRow; i += Cfg::kThreads) {
      const int r = i / kChunksPerRow, c = (i % kChunksPerRow) * E;
      const float rstd = s_rstd[r], shift = -s_mean[r] * rstd;  // xn = x rstd - mean rstd
      Vec16<T>* p = reinterpret_cast<Vec16<T>*>(tile + r * ld + c);
      Vec16<T> v = *p;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int64_t kk = k0 + c + e;  // gamma and beta are zero past k: so is the result
        const float xn = fmaf(Elem<T>::to_float(v.v[e]), rstd, shift);
        v.v[e] = Elem<T>::from_float(fmaf(xn, s_gamma[kk], s_beta[kk]));
      }
      *p = v;
    }
  };
  // The statistics (and gamma, beta) load while the first K-tiles are already in flight.
  auto statistics = [&]() {
    for (int i = threadIdx.x; i < k_padded; i += Cfg::kThreads) {
      s_gamma[i] = i < k ? Elem<T>::to_float(gamma[i]) : 0.0f;
      s_beta[i] = i < k ? Elem<T>::to_float(beta[i]) : 0.0f;
    }
    row_statistics<T, Cfg::kThreads, Cfg::kBM / (Cfg::kThreads / 32), kVectorized>(x, m, k, m0,
                                                                                   s_mean, s_rstd);
    __syncthreads();
  };

  float acc[Cfg::kMT][Cfg::kNT][4] = {};
  tc::block_mainloop<T, Cfg, kVectorized>(acc, ring, x, k, w, n, m, n, k, m0, n0, normalize,
                                          statistics);
  const bool pairs = n % 2 == 0;
  tc::for_each_pair<Cfg>(acc, [&](int r, int c, float v0, float v1) {
    const int64_t row = m0 + r, col = n0 + c;
    if (row >= m || col >= n) return;
    v0 += Elem<T>::to_float(bias[col]);
    if (col + 1 < n) v1 += Elem<T>::to_float(bias[col + 1]);
    tc::store_pair(y, n, row, col, v0, v1, pairs);
  });
}

template <typename T, class Cfg, bool kVectorized>
Status launch_ln_gemm_config(const T* x, const T* gamma, const T* beta, const T* w, const T* bias,
                             T* y, int64_t m, int k, int n, cudaStream_t stream) {
  const int k_padded = (k + tc::kBK<T, Cfg> - 1) / tc::kBK<T, Cfg> * tc::kBK<T, Cfg>;
  const size_t smem =
      tc::ring_bytes<T, Cfg>() + (2 * Cfg::kBM + 2 * size_t(k_padded)) * sizeof(float);
  auto kernel = ln_gemm_bias_kernel<T, Cfg, kVectorized>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>((n + Cfg::kBN - 1) / Cfg::kBN),
                  static_cast<unsigned>((m + Cfg::kBM - 1) / Cfg::kBM));
  kernel<<<grid, Cfg::kThreads, smem, stream>>>(x, gamma, beta, w, bias, y, m, k, n);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// Normalizes 16 bytes of x in shared memory in place, (x - mean) rstd gamma + beta, rounded to
// T as level 0's xn; gamma and beta come 16 bytes at a time from shared memory too.
template <typename T>
__device__ __forceinline__ void normalize_chunk(T* x, float2 mean_rstd, const T* gamma,
                                                const T* beta) {
  constexpr int E = tc::kVec<T>;
  const float rstd = mean_rstd.y, shift = -mean_rstd.x * rstd;
  Vec16<T> v = *reinterpret_cast<Vec16<T>*>(x);
  const Vec16<T> g = *reinterpret_cast<const Vec16<T>*>(gamma);
  const Vec16<T> b = *reinterpret_cast<const Vec16<T>*>(beta);
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const float xn = fmaf(Elem<T>::to_float(v.v[e]), rstd, shift);
    v.v[e] = Elem<T>::from_float(fmaf(xn, Elem<T>::to_float(g.v[e]), Elem<T>::to_float(b.v[e])));
  }
  *reinterpret_cast<Vec16<T>*>(x) = v;
}

// Normalizes `rows` rows of `cols` (a multiple of 16 bytes) in shared memory in place, 16 bytes
// a thread at a time; stats[r] is row r's (mean, rstd), gamma and beta the columns' T values.
template <typename T, int kThreads>
__device__ __forceinline__ void normalize_rows(T* xs, int ld, int rows, int cols,
                                               const float2* stats, const T* gamma, const T* beta) {
  constexpr int E = tc::kVec<T>;
  const int chunks = cols / E;
  for (int i = threadIdx.x; i < rows * chunks; i += kThreads) {
    const int r = i / chunks, c = (i % chunks) * E;
    normalize_chunk(xs + r * ld + c, stats[r], gamma + c, beta + c);
  }
}

// The sum over a row in shared memory of (x - mean), or of (x - mean)^2 with `squares`, by
// kLanes consecutive lanes of a warp (lane `sub` of them reads 16-byte chunks sub, sub + kLanes,
// ... of `chunks`); every lane of the group gets the total. All lanes of the warp must call it.
template <typename T, int kLanes>
__device__ __forceinline__ float row_moment(const T* row, int chunks, int sub, float mean,
                                            bool squares) {
  constexpr int E = tc::kVec<T>;
  float acc = 0.0f;
  for (int c = sub; c < chunks; c += kLanes) {
    const Vec16<T> v = *reinterpret_cast<const Vec16<T>*>(row + c * E);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float d = Elem<T>::to_float(v.v[e]) - mean;
      acc += squares ? d * d : d;
    }
  }
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  return acc;
}

// ---- level 2 on Hopper at up to 256 tokens: a cluster splits K -------------------------------
// At a few tokens y = LN(x) W + b is a weight-streaming problem (W is C x 3C: 3.5 MB in bf16 at
// C = 768, against 1.5 KB of x per token), and the tile kernel above leaves most SMs idle or
// streams W in short pieces. On sm_90 a thread block cluster (`size` = 8 or 4 blocks on one GPC,
// kernels/cluster.cuh) splits the GEMM's K = C instead: cluster q owns `width` output columns
// [q width, q width + width) and block r of it the inputs [r C / size, (r + 1) C / size):
//   1. copy:   x[:, r's inputs] (all M rows) and W[r's inputs, q's columns] (rows of width x 2
//              bytes, all in flight at once) into shared memory; gamma, beta and b meanwhile;
//   2. moments: as x lands, each row's mean and sum of squared deviations over r's inputs,
//              sent to every block of the cluster (DSMEM stores); after a cluster barrier each
//              block merges the `size` partial moments (Chan's formula: equal counts) into the
//              row's mean and 1/std over all C inputs;
//   3. normalize r's slice of x in place, (x - mean) rstd gamma + beta, rounded as level 0's xn;
//   4. multiply: x_slice[M x C/size] W_slice[C/size x width] on tensor cores, 64 rows at a time,
//      a partial sum over r's inputs; block p of the cluster owns `width / size` of the columns,
//      and each block sends p the partials of p's columns; after a cluster barrier p adds the
//      `size` partials and b and stores y.
// Every weight is read from HBM once, by ~112 SMs at once; x, the statistics and the partial
// sums never leave the chip; no atomics, no grid barrier. 2 cluster barriers per 64 rows (plus
// one between chunks, before the partials' buffer is reused).
constexpr int kLnChunk = 64;         // rows of partial sums exchanged at a time
constexpr int kLnClusterRows = 256;  // the most tokens the cluster kernel takes
constexpr int kLnClusterPick = 96;   // the most it is picked for: beyond, the wgmma kernel wins

template <typename T>
struct LnArgs {
  const T *x, *gamma, *beta, *w, *bias;
  T* y;
  int64_t m;
  int k, n;
  PhaseSink phases;  // stamps on when set: ln_cluster_phases() or ln_panel_phases()
};

// The phases each block of the cluster and panel kernels records, in the order of their `phase`
// index (kernels/phases.h).
enum ClusterPhase : unsigned { kClusterIn, kClusterStats, kClusterNormalize, kClusterMultiply };
enum PanelPhase : unsigned { kPanelIn, kPanelNormalize, kPanelMultiply, kPanelStore };
const std::vector<std::string>& ln_cluster_phases() {
  static const std::vector<std::string> names = {"x, gamma and beta in", "row statistics",
                                                 "normalize rows, W slice in",
                                                 "multiplies and partial sums in the cluster"};
  return names;
}
const std::vector<std::string>& ln_panel_phases() {
  static const std::vector<std::string> names = {"x, gamma and beta in",
                                                 "statistics and normalize, W slice in",
                                                 "multiplies", "sums across warps and y"};
  return names;
}

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

template <typename T, int kThreads>
__global__ void __launch_bounds__(kThreads)
    ln_gemm_cluster_kernel(LnArgs<T> a, LnClusterPlan<T> plan) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kWarps = kThreads / 32;
  extern __shared__ __align__(16) unsigned char smem[];
  T* xs = reinterpret_cast<T*>(smem);
  T* ws = reinterpret_cast<T*>(smem + plan.w_offset());
  float2* moments = reinterpret_cast<float2*>(smem + plan.moments_offset());  // [size][rows]
  float2* stats = reinterpret_cast<float2*>(smem + plan.stats_offset());      // (mean, rstd)
  T* gamma_s = reinterpret_cast<T*>(smem + plan.affine_offset());  // r's slice of gamma, beta
  T* beta_s = gamma_s + plan.inputs;
  float* recv = reinterpret_cast<float*>(smem + plan.recv_offset());  // [size][64][own]
  const unsigned rank = cluster::rank(), q = cluster::index();
  const int size = plan.size, inputs = plan.inputs, own = plan.own, width = plan.width();
  const int ld_x = plan.ld_x(), ld_w = plan.ld_w();
  const int64_t k0 = int64_t(rank) * inputs, n0 = int64_t(q) * width;
  const int rows = plan.rows, live = static_cast<int>(min(int64_t(rows), a.m));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  cluster::arrive_started();
  PhaseMarks marks(a.phases);

  // 1. copy: x's slice first (its own commit group: the moments wait only for it), then W's.
  tc::copy_tile<T, kThreads, true>(xs, ld_x, a.x + k0, a.k, rows, inputs, a.m, inputs);
  tc::async_commit();
  tc::copy_tile<T, kThreads, true>(ws, ld_w, a.w + k0 * a.n + n0, a.n, inputs, width, inputs,
                                   a.n - n0);
  tc::async_commit();
  for (int i = threadIdx.x; i < inputs; i += kThreads) {
    gamma_s[i] = a.gamma[k0 + i], beta_s[i] = a.beta[k0 + i];
  }
  // This block's own columns' bias, in registers until step 4 (each thread sums fixed columns).
  const int64_t own0 = n0 + int64_t(rank) * own;
  tc::async_wait<1>();
  __syncthreads();
  marks.mark(kClusterIn);

  // 2. moments over r's inputs, 4 lanes per row (8 rows per warp at once): the mean, then the
  //    sum of squared deviations from it (two passes over shared memory, 16 bytes at a time:
  //    nothing cancels). The row's first lane sends them to every block of the cluster.
  cluster::wait_started();
  {
    constexpr int E = tc::kVec<T>, kLanes = 4;
    const int chunks = inputs / E, sub = lane % kLanes;
    for (int r0 = warp * (32 / kLanes); r0 < live; r0 += kThreads / kLanes) {
      const int r = r0 + lane / kLanes;
      const bool valid = r < live;
      const T* row = xs + r * ld_x;
      const float mean = row_moment<T, kLanes>(row, valid ? chunks : 0, sub, 0.0f, false) / inputs;
      const float m2 = row_moment<T, kLanes>(row, valid ? chunks : 0, sub, mean, true);
      if (valid && sub == 0) {
        // Starting at the next block: no block is everyone's first destination.
        for (int i = 0; i < size; ++i) {
          const unsigned p = (rank + 1 + i) % size;
          cluster::store_peer(moments + rank * rows + r, p,
                              make_uint2(__float_as_uint(mean), __float_as_uint(m2)));
        }
      }
    }
  }
  cluster::sync();
  // Chan's formula with `size` equal counts n = inputs: mean = the means' mean,
  // M2 = sum of M2s + n sum (mean_p - mean)^2.
  for (int r = threadIdx.x; r < live; r += kThreads) {
    float mean = 0.0f;
    for (int p = 0; p < size; ++p) mean += moments[p * rows + r].x;
    mean /= size;
    float m2 = 0.0f;
    for (int p = 0; p < size; ++p) {
      const float2 mo = moments[p * rows + r];
      m2 += mo.y + inputs * (mo.x - mean) * (mo.x - mean);
    }
    stats[r] = make_float2(mean, rsqrtf(fmaxf(m2 / a.k, 0.0f) + float(gemm::kLayerNormEps)));
  }
  __syncthreads();
  marks.mark(kClusterStats);

  // 3. normalize the live rows of the slice in place.
  normalize_rows<T, kThreads>(xs, ld_x, live, inputs, stats, gamma_s, beta_s);
  tc::async_wait<0>();  // W's slice (this thread's copies)
  __syncthreads();
  marks.mark(kClusterNormalize);

  // 4. multiply and reduce, 64 rows at a time.
  const int col_tiles = width / 16;
  for (int c0 = 0; c0 < rows; c0 += kLnChunk) {
    const int row_tiles = min(kLnChunk, rows - c0) / 16;
    // Block r starts at the columns of the blocks after it, so that at any moment the blocks
    // send to different owners (all starting at owner 0 made each owner a hot spot in turn).
    const int start = (rank + 1) * col_tiles / size;
    // A warp takes a 16-column tile for all the chunk's rows (1-4 mma row tiles: independent
    // mma chains), then sends each row's partials to the column's owner.
    for (int item = warp; item < col_tiles; item += kWarps) {
      const int nt16 = (item + start) % col_tiles;
      auto multiply_and_send = [&](auto mt_tag) {
        constexpr int MT = decltype(mt_tag)::value;
        float acc[MT][2][4] = {};
        tc::warp_multiply<T, MT, 2>(acc, xs + c0 * ld_x, ld_x, ws + nt16 * 16, ld_w, inputs);
        // Each lane holds 4 adjacent columns of one row (tc::lane_quad): one 16-byte store.
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            const tc::LaneQuad q = tc::lane_quad(acc[mt][nt], lane);
            const int col = nt16 * 16 + nt * 8 + q.col;
            const int r = mt * 16 + q.row;  // within the chunk
            const int p = col / own, u = col - p * own;
            if (c0 + r >= live) continue;
            cluster::store_peer(recv + (int64_t(rank) * kLnChunk + r) * own + u, p, q.bits());
          }
        }
      };
      switch (row_tiles) {
        case 1:
          multiply_and_send(std::integral_constant<int, 1>{});
          break;
        case 2:
          multiply_and_send(std::integral_constant<int, 2>{});
          break;
        case 3:
          multiply_and_send(std::integral_constant<int, 3>{});
          break;
        default:
          multiply_and_send(std::integral_constant<int, 4>{});
          break;
      }
    }
    cluster::sync();
    const int quads = own / 4, chunk_live = min(kLnChunk, live - c0);
    for (int i = threadIdx.x; i < chunk_live * quads; i += kThreads) {
      const int r = i / quads, u = (i % quads) * 4;
      float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int p = 0; p < size; ++p) {
        const float4 v =
            *reinterpret_cast<const float4*>(recv + (int64_t(p) * kLnChunk + r) * own + u);
        sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
      }
      const int64_t col = own0 + u, row = c0 + r;
      float s4[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (col + e < a.n) s4[e] += Elem<T>::to_float(a.bias[col + e]);
      }
      tc::store_pair(a.y, a.n, row, col, s4[0], s4[1], a.n % 2 == 0);
      tc::store_pair(a.y, a.n, row, col + 2, s4[2], s4[3], a.n % 2 == 0);
    }
    if (c0 + kLnChunk < rows) cluster::sync();  // every block is done reading recv
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

// ---- level 2 at up to 256 tokens, any GPU: a block owns a column slice and the whole K ------
// The panel kernel: block (j, i) computes y[64 i .. 64 i + 64, j bn .. j bn + bn) over all of
// K = C, with no split of K and so no exchange between blocks:
//   1. copy:      the row chunk's whole x panel (64 x C) and W's column slice (C x bn: the block's
//                 share of the weights, read from HBM once in all) into shared memory, all in
//                 flight at once; gamma and beta meanwhile;
//   2. moments:   as x lands, each row's mean and 1/std (a warp per row, two passes over shared
//                 memory), then the panel normalized in place, rounded as level 0's xn;
//   3. multiply:  when W lands: warp items of 16 rows x 16 columns, each item's K split over
//                 as many warps as the block has to spare (16 warps, 1 to 8 items), the
//                 splits' partial sums added through shared memory, b added, y stored.
// The price of not splitting K: every block of a row chunk reads its x panel (from L2) and
// normalizes it, (N / bn) times in all. The phases are few and block-local: at a few tokens the
// kernel's time is the weights' arrival plus a few hundred cycles.
constexpr int kPanelRows = 64;      // rows per block (the row chunk)
constexpr int kPanelThreads = 512;  // 16 warps

template <typename T>
struct PanelPlan {
  int bn = 0, rows = 0, k = 0;  // columns per block, rows per block (M rounded to 16, <= 64), K
  __host__ __device__ int ld_x() const { return k + tc::kPad<T>; }
  __host__ __device__ int ld_w() const { return bn + tc::kPad<T>; }
  __host__ __device__ size_t w_offset() const { return sizeof(T) * size_t(rows) * ld_x(); }
  __host__ __device__ size_t stats_offset() const {
    return (w_offset() + sizeof(T) * size_t(k) * ld_w() + 15) / 16 * 16;
  }
  __host__ __device__ size_t affine_offset() const {
    return stats_offset() + sizeof(float2) * rows;
  }
  __host__ __device__ size_t red_offset() const {
    return (affine_offset() + 2 * sizeof(T) * size_t(k) + 15) / 16 * 16;
  }
  __host__ __device__ size_t bytes() const {
    return red_offset() + sizeof(float) * size_t(kPanelThreads) * 8;  // 8 accumulators a lane
  }
};

// The panel kernel's shape check for the level table: C a multiple of 16, and the narrowest
// panel (16 columns) within an sm_90 block's 227 KB of shared memory (in fp32 at C = 768 only
// up to 16 tokens). A smaller GPU's limit is found when the launcher plans (Unsupported).
inline std::string panel_shape_check(const Dims& d) {
  if (d.i % 16 != 0) return "C is not a multiple of 16";
  auto bytes = [&](auto tag) {
    PanelPlan<decltype(tag)> p;
    p.bn = 16;
    p.k = static_cast<int>(d.i);
    p.rows = static_cast<int>(std::min<int64_t>(kPanelRows, (d.s + 15) / 16 * 16));
    return p.bytes();
  };
  const size_t need = d.b == 4 ? bytes(float{}) : bytes(__nv_bfloat16{});
  return need <= 227 * 1024 ? "" : "its x panel does not fit in 227 KB of shared memory";
}

template <typename T>
__global__ void __launch_bounds__(kPanelThreads)
    ln_gemm_panel_kernel(LnArgs<T> a, PanelPlan<T> plan) {
  constexpr int kThreads = kPanelThreads, kWarps = kThreads / 32;
  extern __shared__ __align__(16) unsigned char smem[];
  T* xs = reinterpret_cast<T*>(smem);
  T* ws = reinterpret_cast<T*>(smem + plan.w_offset());
  float2* stats = reinterpret_cast<float2*>(smem + plan.stats_offset());  // (mean, rstd)
  // gamma and beta as T, read 16 bytes (one chunk's worth) at a time: as float2 per element the
  // lanes of a warp, 8 elements apart, hit 2 banks (16-way conflicts; measured 3x slower).
  T* gamma_s = reinterpret_cast<T*>(smem + plan.affine_offset());
  T* beta_s = gamma_s + plan.k;
  float* red = reinterpret_cast<float*>(smem + plan.red_offset());  // [warp][lane][8]
  const int k = plan.k, bn = plan.bn, ld_x = plan.ld_x(), ld_w = plan.ld_w();
  const int64_t n0 = int64_t(blockIdx.x) * bn, m0 = int64_t(blockIdx.y) * kPanelRows;
  const int rows = min(plan.rows, static_cast<int>((a.m - m0 + 15) / 16 * 16));
  const int live = static_cast<int>(min(int64_t(rows), a.m - m0));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  PhaseMarks marks(a.phases);

  // 1. copy: x's panel first (its own commit group), then W's slice.
  tc::copy_tile<T, kThreads, true>(xs, ld_x, a.x + m0 * k, k, rows, k, a.m - m0, k);
  tc::async_commit();
  tc::copy_tile<T, kThreads, true>(ws, ld_w, a.w + n0, a.n, k, bn, k, a.n - n0);
  tc::async_commit();
  for (int i = threadIdx.x; i < k; i += kThreads) gamma_s[i] = a.gamma[i], beta_s[i] = a.beta[i];
  tc::async_wait<1>();
  __syncthreads();
  marks.mark(kPanelIn);

  // 2. moments, a warp per row, 16 bytes a lane at a time; then normalize in place.
  constexpr int E = tc::kVec<T>;
  const int chunks = k / E;
  for (int r = warp; r < live; r += kWarps) {
    const float mean = row_moment<T, 32>(xs + r * ld_x, chunks, lane, 0.0f, false) / k;
    const float m2 = row_moment<T, 32>(xs + r * ld_x, chunks, lane, mean, true);
    if (lane == 0)
      stats[r] = make_float2(mean, rsqrtf(fmaxf(m2 / k, 0.0f) + float(gemm::kLayerNormEps)));
  }
  __syncthreads();
  normalize_rows<T, kThreads>(xs, ld_x, live, k, stats, gamma_s, beta_s);
  tc::async_wait<0>();  // W's slice (this thread's copies)
  __syncthreads();
  marks.mark(kPanelNormalize);

  // 3. multiply: warp w takes item w % items and K split w / items of `splits`.
  const int col_tiles = bn / 16, items = (rows / 16) * col_tiles;
  const int splits = max(1, kWarps / items), k16 = k / 16;
  const int per_split = (k16 + splits - 1) / splits;
  float acc[1][2][4] = {};
  const int item = warp % items, split = warp / items;
  const int mt = item / col_tiles, nt16 = item % col_tiles;
  if (split < splits) {
    const int kb = split * per_split * 16, ke = min(k, (split + 1) * per_split * 16);
    if (ke > kb) {
      tc::warp_multiply<T, 1, 2>(acc, xs + mt * 16 * ld_x + kb, ld_x, ws + kb * ld_w + nt16 * 16,
                                 ld_w, ke - kb);
    }
  }
  float* mine = red + (warp * 32 + lane) * 8;
#pragma unroll
  for (int e = 0; e < 8; ++e) mine[e] = acc[0][e / 4][e % 4];
  __syncthreads();
  marks.mark(kPanelMultiply);
  if (warp < items) {
    float sum[8] = {};
    for (int s = 0; s < splits; ++s) {
      const float* part = red + ((s * items + warp) * 32 + lane) * 8;
#pragma unroll
      for (int e = 0; e < 8; ++e) sum[e] += part[e];
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const int64_t col = n0 + nt16 * 16 + nt * 8 + 2 * (lane & 3);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int64_t row = m0 + mt * 16 + (lane >> 2) + 8 * half;
        if (row - m0 >= live || col >= a.n) continue;
        float v0 = sum[nt * 4 + 2 * half] + Elem<T>::to_float(a.bias[col]);
        float v1 = sum[nt * 4 + 2 * half + 1];
        if (col + 1 < a.n) v1 += Elem<T>::to_float(a.bias[col + 1]);
        tc::store_pair(a.y, a.n, row, col, v0, v1, a.n % 2 == 0);
      }
    }
  }
  marks.mark(kPanelStore);
}

// The panel plan: the narrowest column slice (bn, a multiple of 16) whose blocks fit one to an SM
// (so every SM streams its share of W from the start), at most 16 items of 16 x 16 per block.
// *ok is false when nothing fits.
template <typename T>
Status plan_ln_panel(const LnArgs<T>& a, int sms, int optin, PanelPlan<T>* plan, bool* ok) {
  *ok = false;
  const int64_t chunks = (a.m + kPanelRows - 1) / kPanelRows;
  PanelPlan<T> p;
  p.k = a.k;
  p.rows = static_cast<int>(std::min<int64_t>(kPanelRows, (a.m + 15) / 16 * 16));
  for (p.bn = 16; p.bn <= 64; p.bn += 16) {
    if (p.bytes() > size_t(optin) || (p.rows / 16) * (p.bn / 16) > kPanelThreads / 32) continue;
    const void* kernel = reinterpret_cast<const void*>(ln_gemm_panel_kernel<T>);
    FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(p.bytes())));
    int per_sm = 0;
    FL_CUDA_TRY(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kPanelThreads, p.bytes()));
    if (per_sm < 1) continue;
    *plan = p;
    *ok = true;
    // One block per SM (a second block on an SM halves its share of the bandwidth: measured
    // 8.5 us at bn = 16 against 7.2 at 32, 4 tokens).
    if (chunks * ((a.n + p.bn - 1) / p.bn) <= sms) break;
  }
  return Status::Ok();
}

template <typename T>
Status try_ln_panel(const LnArgs<T>& a, int sms, cudaStream_t stream, bool* launched) {
  *launched = false;
  if (a.m > kLnClusterRows || a.k % 16 != 0 || !tc::vector_ok<T>(a.x, a.k) ||
      !tc::vector_ok<T>(a.w, a.n)) {
    return Status::Ok();
  }
  int device = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  PanelPlan<T> plan;
  FL_TRY(plan_ln_panel(a, sms, optin, &plan, launched));
  if (!*launched) return Status::Ok();
  const dim3 grid(static_cast<unsigned>((a.n + plan.bn - 1) / plan.bn),
                  static_cast<unsigned>((a.m + kPanelRows - 1) / kPanelRows));
  ln_gemm_panel_kernel<T><<<grid, kPanelThreads, plan.bytes(), stream>>>(a, plan);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// The tile kernel on any GPU: 16 x 32 tiles at up to 16 tokens, 64 x 32 where 128 x 128 tiles
// would leave SMs idle, else 128 x 128.
template <typename T>
Status launch_ln_tile(const LnArgs<T>& a, cudaStream_t stream) {
  int device = 0, sms = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const bool vec = tc::vector_ok<T>(a.x, a.k) && tc::vector_ok<T>(a.w, a.n);
  auto go = [&](auto config) -> Status {
    using Cfg = decltype(config);
    if (vec) {
      return launch_ln_gemm_config<T, Cfg, true>(a.x, a.gamma, a.beta, a.w, a.bias, a.y, a.m, a.k,
                                                 a.n, stream);
    }
    return launch_ln_gemm_config<T, Cfg, false>(a.x, a.gamma, a.beta, a.w, a.bias, a.y, a.m, a.k,
                                                a.n, stream);
  };
  if (a.m <= 16) return go(LnGemmTiny{});
  if (((a.m + 127) / 128) * ((a.n + 127) / 128) < sms) return go(LnGemmSmall{});
  return go(LnGemmBig{});
}

// The panel, cluster and wgmma kernels when they can run here, else Status::Unsupported.
template <typename T>
Status launch_ln_panel(const LnArgs<T>& a, cudaStream_t stream) {
  int device = 0, sms = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  bool launched = false;
  FL_TRY(try_ln_panel(a, sms, stream, &launched));
  return launched ? Status::Ok()
                  : Status::Unsupported("its panel does not fit in this GPU's shared memory");
}
template <typename T>
Status launch_ln_cluster(const LnArgs<T>& a, cudaStream_t stream) {
  int device = 0, sms = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  bool launched = false;
  FL_TRY(try_ln_cluster(a, sms, stream, &launched));
  return launched ? Status::Ok() : Status::Unsupported("no cluster plan fits on this GPU");
}
template <typename T>
Status launch_ln_wgmma(const LnArgs<T>& a, cudaStream_t stream) {
  bool launched = false;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    int device = 0, sms = 0;
    FL_CUDA_TRY(cudaGetDevice(&device));
    FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    FL_TRY(try_ln_gemm_wgmma(a.x, a.gamma, a.beta, a.w, a.bias, a.y, a.m, a.k, a.n, sms, stream,
                             &launched, a.phases));
  }
  return launched ? Status::Ok() : Status::Unsupported("its tiles do not fit on this GPU");
}

// The one Linear layer, C -> 3C; in the epilogue level, cuBLASLt's bias epilogue.
constexpr LinearSpec kLinear{1, 3, blas::Epilogue::bias, "gemm", "add_bias", "gemm_bias"};

// Device buffers for one shape and element type: x, gamma, beta, the Linear layer (W, b and the
// cuBLASLt plans), the unfused chain's xn and t, and y.
template <typename T>
class LayerNormLinearWorkspace final : public LevelWorkspace<LayerNormLinearWorkspace<T>> {
 public:
  LayerNormLinearWorkspace(int64_t m, int64_t c, double tolerance)
      : m_(m),
        k_(c),
        n_(3 * c),
        tolerance_(tolerance),
        linear_(m, c, kLinear, {&xn_, &t_, &y_, &y_}) {
    this->set_where({m, c, int64_t(sizeof(T))}, precision_of<T>(), "tokens");
  }

  static const LevelTable<LayerNormLinearWorkspace>& levels();  // the ladder, below
  // Level 2's kernels, below.
  static std::vector<VariantRow<LayerNormLinearWorkspace>> fused_variants();

  Status allocate() {
    FL_TRY(allocate_elements<T>({{&x_, m_ * k_},
                                 {&gamma_, k_},
                                 {&beta_, k_},
                                 {&xn_, m_ * k_},
                                 {&t_, m_ * n_},
                                 {&y_, m_ * n_}}));
    FL_TRY(sums_.allocate(sizeof(ErrorSums)));
    return linear_.allocate();
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    // x off-centre (a residual stream's mean is not 0), so the normalization matters.
    FL_TRY(fill_uniform(x_.as<T>(), m_ * k_, seed, -1.0f, 3.0f, stream));
    FL_TRY(fill_uniform(gamma_.as<T>(), k_, mix64(seed ^ 0x6A77ull), gemm::kGammaLo, gemm::kGammaHi,
                        stream));
    FL_TRY(fill_uniform(beta_.as<T>(), k_, mix64(seed ^ 0xBE7Aull), gemm::kBetaLo, gemm::kBetaHi,
                        stream));
    return linear_.fill(seed, 0, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    return poison_elements<T>({{&xn_, m_ * k_}, {&t_, m_ * n_}, {&y_, m_ * n_}}, stream);
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    const gemm::CheckArgs<T> a{x_.as<T>(),        gamma_.as<T>(), beta_.as<T>(),
                               linear_.weights(), linear_.bias(), nullptr,
                               nullptr,           y_.as<T>(),     m_,
                               int(k_),           int(n_),        0};
    return check_gemm_rows<T, true, false, false>(a, sums_, tolerance_, stream, result);
  }

  // Inputs x (M x C), gamma, beta (C), W (C x 3C), b (3C); output y.
  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    return download_io<T>({{"x", x_.as<T>(), m_ * k_},
                           {"gamma", gamma_.as<T>(), k_},
                           {"beta", beta_.as<T>(), k_},
                           linear_.weights_tensor("W"),
                           linear_.bias_tensor("b")},
                          {{"y", y_.as<T>(), m_ * n_}}, stream, inputs, outputs);
  }

 private:
  // Lesson 4's one-kernel LayerNorm, xn = LN(x): the row kernels read their input through `h`.
  Status layernorm(cudaStream_t stream) {
    using layernorm_rows::RowArgs;
    using layernorm_rows::RowStep;
    const RowArgs<T> a{
        nullptr, nullptr, gamma_.as<T>(),      beta_.as<T>(), x_.as<T>(), xn_.as<T>(), nullptr,
        nullptr, m_,      static_cast<int>(k_)};
    return layernorm_rows::launch_rows<T, RowStep::kLayerNorm>(a, stream);
  }

  // Level 2's arguments: x, gamma, beta, W, b and y of this workspace.
  LnArgs<T> fused_args() const {
    return {x_.as<T>(),
            gamma_.as<T>(),
            beta_.as<T>(),
            linear_.weights(),
            linear_.bias(),
            y_.as<T>(),
            m_,
            static_cast<int>(k_),
            static_cast<int>(n_),
            this->phase_sink()};
  }
  // Runs one of level 2's kernels and names the phases it records (kernels/phases.h).
  template <typename Launch>
  Status fused(Launch launch, const std::vector<std::string>* phases, cudaStream_t stream) {
    FL_TRY(launch(fused_args(), stream));
    if (phases != nullptr) this->declare_phases(*phases);
    return Status::Ok();
  }

  int64_t m_, k_, n_;
  double tolerance_;
  DeviceBuffer x_, gamma_, beta_, xn_, t_, y_, sums_;
  LinearLayer<T> linear_;
};

// ---- level 2's kernels ----------------------------------------------------------------------
// In the table's order: the first that can run and prefers the token count runs, else the last
// that can run (kernels/level_table.h). The tile kernel runs everywhere.
template <typename T>
std::vector<VariantRow<LayerNormLinearWorkspace<T>>> LayerNormLinearWorkspace<T>::fused_variants() {
  using Ws = LayerNormLinearWorkspace;
  const std::vector<Precision> bf16{Precision::bf16};
  return {
      {"ln_cluster",
       "a cluster of 4 (or 8) blocks splits C: partial row moments and partial products meet in "
       "distributed shared memory; W is streamed by every SM at once",
       "ln_gemm_cluster_kernel",
       {90, 0, false, bf16, kLnClusterRows, 17, kLnClusterPick},
       [](Ws& w, cudaStream_t s) { return w.fused(launch_ln_cluster<T>, &ln_cluster_phases(), s); },
       [](const Dims& d) { return d.i % 64 == 0 ? "" : "C is not a multiple of 64"; },
       ln_cluster_phases()},
      {"ln_wgmma",
       "a 64-row panel of x normalized once in shared memory, W streamed past it by TMA into "
       "wgmma tiles (128 columns below 4K tokens, 256 from there)",
       "ln_gemm_wgmma_kernel",
       {90, 90, true, bf16, 0, kLnClusterPick + 1, 0},
       [](Ws& w, cudaStream_t s) {
         return w.fused(launch_ln_wgmma<T>, &ln_gemm_wgmma_phases(), s);
       },
       [](const Dims& d) {
         return d.i % 8 == 0 && d.i <= 768 ? "" : "C is not a multiple of 8 up to 768";
       },
       ln_gemm_wgmma_phases()},
      {"ln_panel",
       "a block owns a slice of W's columns and the whole of C: its 64-row x panel is normalized "
       "in shared memory, no split of K, no exchange between blocks",
       "ln_gemm_panel_kernel",
       {0, 0, false, {}, kLnClusterRows, 1, kLnClusterRows},
       [](Ws& w, cudaStream_t s) { return w.fused(launch_ln_panel<T>, &ln_panel_phases(), s); },
       panel_shape_check,
       ln_panel_phases()},
      {"ln_tile",
       "BM x BN output tiles, K streamed through a cp.async ring; each x tile normalized as it "
       "lands (any GPU, any shape)",
       "ln_gemm_bias_kernel",
       {},
       [](Ws& w, cudaStream_t s) { return w.fused(launch_ln_tile<T>, nullptr, s); }},
  };
}

// ---- the level table -----------------------------------------------------------------------
// M = s tokens, K = i = C, N = 3C, b bytes per element. LayerNorm reads x (M K) and gamma, beta
// (2 K) and writes M K, 8 flops per element; the Linear layer's launches count as its formulas
// say (gemm_common.cuh): the GEMM reads xn (M K) and W (K N) and writes M N, 2 M N K flops; the
// bias is read once (N), 1 flop per element of the product.
template <typename T>
const LevelTable<LayerNormLinearWorkspace<T>>& LayerNormLinearWorkspace<T>::levels() {
  using Ws = LayerNormLinearWorkspace;
  // Levels 0 and 1 start with the same LayerNorm.
  static const LaunchRow<Ws> layernorm = {
      "layernorm", [](Ws& w, cudaStream_t s) { return w.layernorm(s); },
      [](const Dims& d) {
        return Textbook{d.tensor_bytes() + 2 * d.i * d.b, d.tensor_bytes(), 8.0 * d.elements()};
      }};
  static const LinearRows<Ws> linear = linear_rows<Ws>(&Ws::linear_, kLinear);
  static const LevelTable<Ws> table = {
      {"unfused",
       "LayerNorm, cuBLASLt GEMM and bias as three kernels: xn and the product round-trip "
       "through HBM",
       "the LayerNorm's rows and the GEMM's tiles, each within its launch; xn and t go to HBM "
       "and back",
       {layernorm, linear.gemm, linear.add_bias}},
      {"epilogue",
       "LayerNorm, then one cuBLASLt GEMM with a bias epilogue",
       "the GEMM's tiles, and the product, biased in registers before its store; xn goes to "
       "HBM and back",
       {layernorm, linear.epilogue}},
      {"prologue",
       "one kernel on tensor cores: row statistics and LayerNorm in the GEMM's prologue, bias in "
       "its epilogue; xn never exists",
       "the rows' mean and 1/std, gamma and beta, and each x tile, normalized in shared memory "
       "as it lands",
       {{"ln_gemm_bias", nullptr,
         // The statistics re-read x from L2: not counted. What the epilogue level's GEMM
         // counts, plus gamma and beta (2 K) and the LayerNorm's flops.
         [](const Dims& d) {
           Textbook t = gemm_epilogue_textbook(d, kLinear);
           t.read += 2 * d.i * d.b;
           t.flops += 8.0 * d.s * d.i;
           return t;
         },
         fused_variants()}}},
  };
  return table;
}

// ---- the lesson ----------------------------------------------------------------------------

class LayerNormLinear final : public GemmLesson<LayerNormLinearWorkspace> {
 public:
  LayerNormLinear()
      : GemmLesson("layernorm_linear", "LayerNorm + Linear",
                   "y = LN(x) W + b,  x: tokens x C,  W: C x 3C,  b: 3C") {}

  // inputs: x (M x C), gamma (C), beta (C), W (C x 3C), b (3C).
  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const auto& gamma = inputs.at(1).values;
    const auto& beta = inputs.at(2).values;
    const LinearInputs linear(inputs, 3);
    const int64_t k = linear.k;
    std::vector<double> xn(k);
    auto row = [&](const double* x, double* y) {  // one row of y from one row of x
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += x[j];
      const double mean = sum / double(k);
      double sq = 0;
      for (int64_t j = 0; j < k; ++j) sq += (x[j] - mean) * (x[j] - mean);
      const double rstd = 1.0 / std::sqrt(sq / double(k) + gemm::kLayerNormEps);
      for (int64_t j = 0; j < k; ++j) xn[j] = (x[j] - mean) * rstd * gamma[j] + beta[j];
      linear.row(xn.data(), y);
    };
    return {reference_rows(inputs.at(0).values, k, linear.n, row)};
  }

 protected:
  // x and xn (M x C), gamma and beta (C), W (C x 3C), b (3C), and t, y (M x 3C).
  int64_t buffer_bytes(int64_t m, int64_t c, int64_t b) const override {
    const int64_t n = 3 * c;
    return (2 * m * c + 2 * c + c * n + n + 2 * m * n) * b;
  }
};

// Level 2's launch outside the workspace (other lessons reuse the fused LayerNorm-Linear): the
// level table's choice of kernel for these operands, the next one where a kernel finds it
// cannot run here.
template <typename T>
Status launch_ln_gemm_bias(const T* x, const T* gamma, const T* beta, const T* w, const T* bias,
                           T* y, int64_t m, int k, int n, cudaStream_t stream) {
  using Ws = LayerNormLinearWorkspace<T>;
  const LaunchRow<Ws>& row = Ws::levels().back().launches.at(0);
  const LnArgs<T> a{x, gamma, beta, w, bias, y, m, k, n, PhaseSink()};
  const Where where{{m, k, int64_t(sizeof(T))}, precision_of<T>(), current_gpu_facts()};
  const std::vector<VariantInfo> infos = variant_infos(row);
  std::vector<bool> skip(infos.size(), false);
  for (size_t tries = 0; tries < infos.size(); ++tries) {
    const VariantChoice c = choose_variant(infos, where, variant_checks(row), "tokens", skip);
    if (c.index < 0) break;
    const Status st = c.name == "ln_cluster" ? launch_ln_cluster(a, stream)
                      : c.name == "ln_wgmma" ? launch_ln_wgmma(a, stream)
                      : c.name == "ln_panel" ? launch_ln_panel(a, stream)
                                             : launch_ln_tile(a, stream);
    if (!st.unsupported()) return st.with_context(c.name);
    skip[c.index] = true;
  }
  return Status::Error("ln_gemm_bias: no kernel variant can run here");
}

}  // namespace

FL_DEFINE_LESSON(layernorm_linear, LayerNormLinear);

}  // namespace fl

namespace fl::layernorm_linear {

Status ln_gemm_bias(const float* x, const float* gamma, const float* beta, const float* w,
                    const float* bias, float* y, int64_t m, int k, int n, cudaStream_t stream) {
  return launch_ln_gemm_bias(x, gamma, beta, w, bias, y, m, k, n, stream);
}
Status ln_gemm_bias(const __nv_bfloat16* x, const __nv_bfloat16* gamma, const __nv_bfloat16* beta,
                    const __nv_bfloat16* w, const __nv_bfloat16* bias, __nv_bfloat16* y, int64_t m,
                    int k, int n, cudaStream_t stream) {
  return launch_ln_gemm_bias(x, gamma, beta, w, bias, y, m, k, n, stream);
}

}  // namespace fl::layernorm_linear
