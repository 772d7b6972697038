// What the LayerNorm-Linear's level-2 kernels (ln_tile.cu, ln_cluster.cu, ln_panel.cu) share with
// the lesson (kernels/layernorm_linear/layernorm_linear.cu): their arguments, the token counts the
// level table switches at, the phases they record, the row helpers that normalize x in shared
// memory, and their launchers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/device_common.cuh"
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
};

// The phases each block of the cluster, panel and tile kernels records, in the order of their
// `phase` index (kernels/phases.h).
enum ClusterPhase : unsigned { kClusterIn, kClusterStats, kClusterNormalize, kClusterMultiply };
enum PanelPhase : unsigned { kPanelIn, kPanelNormalize, kPanelMultiply, kPanelStore };
enum TilePhase : unsigned { kTileStatistics, kTileMainLoop, kTileStore };
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
inline const std::vector<std::string>& ln_panel_phases() {
  static const std::vector<std::string> names = {"x, gamma and beta in",
                                                 "statistics and normalize, W slice in",
                                                 "multiplies", "sums across warps and y"};
  return names;
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

// Level 2's kernels where they can run here, else Status::Unsupported: the tile kernel
// (ln_tile.cu, any GPU and shape), the cluster kernel (ln_cluster.cu, sm_90, bf16) and the panel
// kernel (ln_panel.cu).
template <typename T>
Status launch_ln_tile(const LnArgs<T>& a, cudaStream_t stream);
template <typename T>
Status launch_ln_cluster(const LnArgs<T>& a, cudaStream_t stream);
template <typename T>
Status launch_ln_panel(const LnArgs<T>& a, cudaStream_t stream);
// The panel kernel's shape check for the level table: C a multiple of 16, and the narrowest
// panel (16 columns) within an sm_90 block's 227 KB of shared memory (in fp32 at C = 768 only
// up to 16 tokens). A smaller GPU's limit is found when the launcher plans (Unsupported).
std::string panel_shape_check(const Dims& d);

}  // namespace fl::layernorm_linear
