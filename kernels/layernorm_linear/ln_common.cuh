// What the LayerNorm-Linear's level-2 kernels (ln_tile.cu, ln_cluster.cu, ln_panel.cu) share with
// the lesson (kernels/layernorm_linear/layernorm_linear.cu): their arguments, the token counts the
// level table switches at, the phases they record, the row helpers that normalize x in shared
// memory, and their launchers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/device_common.cuh"
#include "kernels/gemm_common.cuh"
#include "kernels/layernorm_linear/ln_fold.h"
#include "kernels/level_table.h"
#include "kernels/phases.h"
#include "kernels/status.h"
#include "kernels/tensor_gemm.cuh"

namespace fl::layernorm_linear {

constexpr int kLnClusterRows = 256;  // the most tokens the cluster kernel takes
constexpr int kLnClusterPick = 96;   // the most it is picked for: beyond, the wgmma kernel wins

template <typename T>
struct LnArgs {
  const T *x, *gamma, *beta, *w, *bias;
  T* y;
  int64_t m;
  int k, n;
  PhaseSink phases;  // stamps on when set: ln_cluster_phases(), ln_panel_phases() or
                     // ln_tile_phases()
  // ln_mma_tiles only (its launch is Unsupported without them): an M x C scratch for xn, and
  // ln_mma_tiles_counter_bytes(m, n) of counters (and its split tiles' sums), zeroed once when
  // allocated (every launch leaves them at zero).
  T* xn = nullptr;
  unsigned* counters = nullptr;
  // ln_mma_folded only (Unsupported without them): gamma and beta folded into the weights when
  // they are set up (ln_fold.h's fold_ln_weights): W' (C x 3C), u and b' (3C, fp32).
  const T* w_fold = nullptr;
  const float *u_fold = nullptr, *b_fold = nullptr;
};

// The phases each block of the cluster, panel and tile kernels records, in the order of their
// `phase` index (kernels/phases.h).
enum ClusterPhase : unsigned { kClusterIn, kClusterStats, kClusterNormalize, kClusterMultiply };
enum PanelPhase : unsigned { kPanelIn, kPanelNormalize, kPanelMultiply, kPanelStore };
enum TilePhase : unsigned { kTileStatistics, kTileMainLoop, kTileStore };
enum RowsPhase : unsigned { kRowsIn, kRowsNormalize, kRowsMultiply };
inline const std::vector<std::string>& ln_cluster_phases() {
  static const std::vector<std::string> names = {"x, gamma and beta in", "row statistics",
                                                 "normalize rows, W slice in",
                                                 "multiplies and partial sums in the cluster"};
  return names;
}
inline const std::vector<std::string>& ln_tile_phases() {
  static const std::vector<std::string> names = {
      "first tiles asked for; row statistics, gamma and beta in",
      "K loop: x tiles normalized as they land, multiplies", "bias and stores of y"};
  return names;
}
inline const std::vector<std::string>& ln_rows_phases() {
  static const std::vector<std::string> names = {
      "x rows, gamma and beta in", "row statistics and normalize, once",
      "column tiles: W streamed past the rows, multiplies, bias and stores"};
  return names;
}
// ln_mma_tiles' records: one a ticket, in the slot of its ticket (a split tile's parts: one
// each); a tile's wait_ns is how long it waited for its row block's items.
enum TilesPhase : unsigned { kTilesItem, kTilesTile };
inline const std::vector<std::string>& ln_tiles_phases() {
  static const std::vector<std::string> names = {
      "row item: 8 or 16 rows of x normalized into xn (L2)",
      "tile (or a part of its K): W asked for, waits for its rows of xn, then xn W (+ b)"};
  return names;
}
inline const std::vector<std::string>& ln_panel_phases() {
  static const std::vector<std::string> names = {"x, gamma and beta in",
                                                 "statistics and normalize, W slice in",
                                                 "multiplies", "sums across warps and y"};
  return names;
}

// Normalizes 16 bytes of x in registers, (x - mean) rstd gamma + beta, rounded to T as level
// 0's xn.
template <typename T>
__device__ __forceinline__ void normalize_vec(Vec16<T>& v, float2 mean_rstd, const Vec16<T>& g,
                                              const Vec16<T>& b) {
  constexpr int E = tc::kVec<T>;
  const float rstd = mean_rstd.y, shift = -mean_rstd.x * rstd;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const float xn = fmaf(Elem<T>::to_float(v.v[e]), rstd, shift);
    v.v[e] = Elem<T>::from_float(fmaf(xn, Elem<T>::to_float(g.v[e]), Elem<T>::to_float(b.v[e])));
  }
}
// The same on 16 bytes of x in shared memory, in place; gamma and beta come 16 bytes at a time
// from shared memory too.
template <typename T>
__device__ __forceinline__ void normalize_chunk(T* x, float2 mean_rstd, const T* gamma,
                                                const T* beta) {
  Vec16<T> v = *reinterpret_cast<Vec16<T>*>(x);
  normalize_vec(v, mean_rstd, *reinterpret_cast<const Vec16<T>*>(gamma),
                *reinterpret_cast<const Vec16<T>*>(beta));
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

// The row statistics of the tile kernels (ln_tile.cu, ln_mma.cu), in their prologue.
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

// Merges the Moments of lanes kFirst, kFirst / 2, ..., 1 apart (a butterfly over the shuffles),
// so that every lane of each group of 2 * kFirst holds the group's Moments.
template <int kFirst>
__device__ __forceinline__ Moments merge_lanes(Moments mo) {
#pragma unroll
  for (int offset = kFirst; offset > 0; offset >>= 1) {
    const Moments other{__shfl_xor_sync(0xffffffffu, mo.n, offset),
                        __shfl_xor_sync(0xffffffffu, mo.mean, offset),
                        __shfl_xor_sync(0xffffffffu, mo.m2, offset)};
    if (mo.n == 0) {
      mo = other;
    } else {
      mo.merge(other);
    }
  }
  return mo;
}

template <typename T, int kRows, bool kVectorized>
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
    mo = merge_lanes<16>(mo);
    if (lane == 0) {
      const bool valid = m0 + r0 + r < m;
      const float inv = valid ? rsqrtf(fmaxf(mo.m2 / k, 0.0f) + float(gemm::kLayerNormEps)) : 0.0f;
      mean[r0 + r] = valid ? mo.mean : 0.0f;
      rstd[r0 + r] = inv;
    }
  }
}

// The block's kBM rows' mean and 1/std, all rows at once (the tile kernels' prologue: ln_mma.cu,
// ln_mma_tiles_local.cu): kThreads / kBM adjacent lanes a row
// (2 in fp32's 256 threads, 1 in bf16's 128), each lane every kLanes-th 16-byte chunk of its
// row, kBatch loads in flight before any is summed (a row of C = 768 fp32 costs 12 round trips
// to L2, not one a chunk), sums shifted by the lane's first value so nothing cancels, the lanes
// merged with Chan's formula (Moments, above). kBatch: the loads a lane has in flight.
template <typename T, int kBM, int kThreads, int kBatch = 16>
__device__ void block_statistics(const T* x, int64_t m, int k, int64_t m0, float* s_mean,
                                 float* s_rstd) {
  constexpr int E = tc::kVec<T>, kLanes = kThreads / kBM;
  static_assert(kLanes * kBM == kThreads && 32 % kLanes == 0, "whole rows a warp");
  const int sub = threadIdx.x % kLanes, row = threadIdx.x / kLanes;
  const bool valid = m0 + row < m;
  const int chunks = valid ? k / E : 0;
  const T* xr = x + (valid ? (m0 + row) * int64_t(k) : 0);
  float n = 0.0f, shift = 0.0f, sum = 0.0f, sq = 0.0f;
  for (int c0 = sub; c0 < chunks; c0 += kLanes * kBatch) {
    Vec16<T> v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (c0 + kLanes * u < chunks) v[u] = load16(xr + (c0 + kLanes * u) * E);
    }
    if (c0 == sub) shift = Elem<T>::to_float(v[0].v[0]);
    float batch_sum = 0.0f, batch_sq = 0.0f;  // summed per batch first: shorter rounding chains
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (c0 + kLanes * u >= chunks) break;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const float d = Elem<T>::to_float(v[u].v[e]) - shift;
        batch_sum += d;
        batch_sq = fmaf(d, d, batch_sq);
      }
      n += E;
    }
    sum += batch_sum;
    sq += batch_sq;
  }
  Moments mo;
  if (n > 0) mo = Moments{n, shift + sum / n, sq - sum * sum / n};
  mo = merge_lanes<kLanes / 2>(mo);
  if (sub == 0) {
    s_mean[row] = valid ? mo.mean : 0.0f;
    s_rstd[row] = valid ? rsqrtf(fmaxf(mo.m2 / k, 0.0f) + float(gemm::kLayerNormEps)) : 0.0f;
  }
}

// Level 2's kernels where they can run here, else Status::Unsupported: the tile kernel
// (ln_tile.cu, any GPU and shape), the cluster kernel (ln_cluster.cu, sm_90, bf16) and the panel
// kernel (ln_panel.cu).
template <typename T>
Status launch_ln_tile(const LnArgs<T>& a, cudaStream_t stream);
template <typename T>
Status launch_ln_cluster(const LnArgs<T>& a, cudaStream_t stream);
template <typename T>
Status launch_ln_panel(const LnArgs<T>& a, cudaStream_t stream);
// The portable large-token kernel on the GEMM core's top tiles (ln_mma.cu, any GPU; C a multiple
// of 8, else Unsupported). launch_ln_mma_groups caps the column tiles a block takes (0: the
// launcher's choice, as launch_ln_mma; 1 is there to be measured against it).
template <typename T>
Status launch_ln_mma_groups(const LnArgs<T>& a, int max_groups, cudaStream_t stream);
template <typename T>
Status launch_ln_mma(const LnArgs<T>& a, cudaStream_t stream) {
  return launch_ln_mma_groups(a, 0, stream);
}
// x normalized once per row block and kept in shared memory, W's column tiles streamed past it
// (ln_mma_rows.cu; bf16, sm_80+). The shape caps the rows a block keeps (the table runs the
// default; fewer rows are there to be measured against it); fp32 and shapes it cannot run are
// Unsupported.
constexpr int kLnRowsStats = 2, kLnRowsLoop = 4;  // LnRowsShape's kept forms
struct LnRowsShape {
  int max_rows = 128;  // 128, 64 or 32: fewer where shared memory is short
  // Row statistics and normalize (ln_mma_rows.cu's panel_in_and_normalize): 0 two passes over
  // the panel for the statistics and a third to normalize; 1 one pass, a row's chunks in
  // registers; 2 the same, the first half of the rows normalized while the second lands.
  int stats = kLnRowsStats;
  // The 128-row main loop (ln_mma_rows.cu's LoopForm), W in a 2-stage ring of 32 x 256: 0 one
  // block barrier a W tile; 1 a barrier of the two warps that read a column slice; 2 the same,
  // the bias read once a column tile; 3 the same, a slice's two warps on two schedulers; 4 the
  // same with every address worked out once (ln_rows_lean.cuh).
  int loop = kLnRowsLoop;
};
Status launch_ln_mma_rows(const LnArgs<__nv_bfloat16>& a, LnRowsShape shape, cudaStream_t stream);
template <typename T>
Status launch_ln_mma_rows(const LnArgs<T>& a, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return launch_ln_mma_rows(a, LnRowsShape{}, stream);
  } else {
    return Status::Unsupported("it runs in bf16 only");
  }
}
// ln_mma_tiles (ln_mma_tiles.cu; bf16, sm_80+): x normalized (by row items into a.xn, or by
// each tile for its own rows), then the GEMM core's tiles multiply it. tile: 0 the kept rule (9
// or 7 while the tiles, and row items, are one block an SM, else 2 or 7), 1-10 as
// ln_tiles_forms.cuh numbers them; per_sm: the most blocks an SM (0: as many as fit); splits: each
// tile's K cut in 1-8 parts whose fp32 sums meet in L2 (0: the kept rule); normalize: 0 the kept
// rule, 1 row items into xn, 2 each tile its own rows (no xn, no counters, no parts of K); resident
// (with row items): 0 the kept rule, 1 W streamed through the ring with x, 2 a tile's (or part's) W
// rows all in shared memory, asked for before its wait (where they fit), 3 streamed with the
// ring's first K-tiles of W asked for before the wait.
struct LnTilesShape {
  int tile = 0;
  int per_sm = 0;
  int splits = 0;
  int normalize = 0;
  int resident = 0;
};
constexpr int64_t kLnTilesPreferFrom = 129, kLnTilesPreferTo = 2048;  // where the table picks it
// ln_mma_tiles_counter_bytes (ln_fold.h): the bytes of its counters and split tiles' sums.
// Where tiles split in parts of K meet in that scratch (`counters`, zeroed, left zero by every
// launch): an arrival counter a tile, its fp32 sums (a tile's BM x BN at tile x BM x BN) and two
// fp32 sums a row of a tile (at 2 (tile x BM + row)); all null above 1024 tokens (no room).
struct LnPartsScratch {
  unsigned* arrive = nullptr;
  float* parts = nullptr;
  float* rows = nullptr;
};
LnPartsScratch ln_parts_scratch(unsigned* counters, int64_t m, int64_t n);
// The checks ln_mma_tiles and ln_mma_folded make before they plan: C (k) a multiple of 8 up to
// 1024, 3C (n) a multiple of 8, the row pointers 16-byte aligned, bf16 mma.sync (compute
// capability 8.0+); then the GPU's SMs and the shared memory a block's plan may take there
// (planned_shared_optin: the chosen GPU's where `bench --choose-as` names a smaller one).
struct LnTilesGpu {
  int sms = 0, optin = 0;
};
Status ln_tiles_gpu(int k, int n, std::initializer_list<const void*> rows, LnTilesGpu* gpu);
Status launch_ln_mma_tiles(const LnArgs<__nv_bfloat16>& a, LnTilesShape shape, cudaStream_t stream);
// Its form that normalizes in each tile (ln_mma_tiles_local.cu; tile as LnTilesShape's, 0 the
// kept rule there); launch_ln_mma_tiles has checked the shape and the GPU.
Status launch_ln_mma_tiles_local(const LnArgs<__nv_bfloat16>& a, int tile, cudaStream_t stream);
template <typename T>
Status launch_ln_mma_tiles(const LnArgs<T>& a, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return launch_ln_mma_tiles(a, LnTilesShape{}, stream);
  } else {
    return Status::Unsupported("it runs in bf16 only");
  }
}
// ln_mma_folded (ln_mma_folded.cu; bf16, sm_80+): LayerNorm in the epilogue of tiles that
// multiply raw x by the folded weights (a.w_fold, a.u_fold, a.b_fold; Unsupported without them).
// Where the table picks it (ahead of ln_mma_tiles, which it replaces there).
constexpr int64_t kLnFoldedPreferFrom = 129, kLnFoldedPreferTo = 4096;
Status launch_ln_mma_folded_bf16(const LnArgs<__nv_bfloat16>& a, cudaStream_t stream);
template <typename T>
Status launch_ln_mma_folded(const LnArgs<T>& a, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return launch_ln_mma_folded_bf16(a, stream);
  } else {
    return Status::Unsupported("it runs in bf16 only");
  }
}
// Where the table prefers ln_mma (fp32; below, ln_tile's smaller tiles fill the SMs) and
// ln_mma_rows (bf16; below, ln_mma_folded's and ln_mma_tiles' smaller tiles were faster).
constexpr int64_t kLnMmaFrom = 1024, kLnRowsFrom = 2049;
// The panel kernel's shape check for the level table: C a multiple of 16, and the narrowest
// panel (16 columns) within an sm_90 block's 227 KB of shared memory (in fp32 at C = 768 only
// up to 16 tokens). A smaller GPU's limit is found when the launcher plans (Unsupported).
std::string panel_shape_check(const Dims& d);

}  // namespace fl::layernorm_linear
