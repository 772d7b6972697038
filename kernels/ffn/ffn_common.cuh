// What the FFN's level-2 kernels of ffn_split.cu and ffn_cluster.cu share with the lesson
// (kernels/ffn/ffn.cu): their arguments, the token counts the level table switches at, the
// phases they record, loads and stores that go to L2, and their launchers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/phases.h"
#include "kernels/status.h"

namespace fl::ffn {

constexpr int64_t kFfnClusterTokens = 64;  // the most tokens the cluster kernel takes
constexpr int64_t kFfnWgmmaFrom = 256;     // tokens: from here on the wgmma kernel (measured)
constexpr int kMaxClusterBlocks = 8;       // the largest portable cluster; the plan picks 8 or 4

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
inline const std::vector<std::string>& ffn_split_phases() {
  static const std::vector<std::string> names = {"up-projection and partial sums into L2",
                                                 "grid barrier", "y = acc + b2"};
  return names;
}
inline const std::vector<std::string>& ffn_cluster_phases() {
  static const std::vector<std::string> names = {"setup and biases in",
                                                 "up-projection and h exchange in the cluster",
                                                 "down-projection", "partial sums and y"};
  return names;
}

__host__ __device__ inline int round_up(int v, int to) {
  return (v + to - 1) / to * to;
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

// The split kernel (ffn_split.cu) on any GPU with cooperative launches, and the cluster kernel
// (ffn_cluster.cu, sm_90, bf16) with the plan that fits; each returns Status::Unsupported where
// it cannot run here.
template <typename T>
Status run_ffn_split(const FfnArgs<T>& a, cudaStream_t stream);
template <typename T>
Status run_ffn_cluster(const FfnArgs<T>& a, cudaStream_t stream);

}  // namespace fl::ffn
