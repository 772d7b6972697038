// The gpt2_decode launchers, one per kernel, shared by the lesson's level table (lesson.cu).
// Every launcher checks its launch (cudaGetLastError) and returns a Status.
#pragma once

#include <cuda_runtime.h>

#include "kernels/gpt2_decode/device.cuh"
#include "kernels/phases.h"
#include "kernels/status.h"

namespace fl {
namespace gpt2 {

// ---- level 0: every op its own launch (per_op.cu) ---------------------------------------------
enum class Norm { ln1, ln2, final_norm };
Status launch_layernorm(const DecodeArgs& a, int layer, Norm norm, cudaStream_t s,
                        bool pdl = false);
enum class Matrix { qkv, proj, fc, out };
Status launch_gemv(const DecodeArgs& a, int layer, Matrix m, cudaStream_t s);
Status launch_add_bias(const DecodeArgs& a, int layer, Matrix m, cudaStream_t s);
Status launch_gelu(const DecodeArgs& a, cudaStream_t s);
// x = (first ? x_in : x) + tmp: `first` for block 0's attention residual, whose x is the input.
Status launch_residual(const DecodeArgs& a, bool first, cudaStream_t s);
Status launch_kv_append(const DecodeArgs& a, int layer, cudaStream_t s);
Status launch_attention_scores(const DecodeArgs& a, int layer, cudaStream_t s);
Status launch_attention_softmax(const DecodeArgs& a, cudaStream_t s);
Status launch_attention_pv(const DecodeArgs& a, int layer, cudaStream_t s);

// ---- levels 1-3: the fused kernels (fused.cu); pdl launches them with programmatic dependent
// launch (cudaLaunchKernelEx), so each may start its weight loads while the previous one drains.
Status launch_fused(const DecodeArgs& a, int layer, Matrix m, cudaStream_t s, bool pdl);
Status launch_attention(const DecodeArgs& a, int layer, cudaStream_t s, bool pdl);
bool pdl_supported();  // sm_90 and newer

// ---- level 4: the megakernel (megakernel.cu) --------------------------------------------------
struct MegakernelPlan {
  const DecodeTask* tasks = nullptr;  // device copy of DecodeTaskList::tasks
  const int* block_begin = nullptr;   // device copy of DecodeTaskList::block_begin
  unsigned* counters = nullptr;       // counter_count + 1 of them, zero between launches
  int counter_count = 0;              // DecodeTaskList::counters
  int blocks = 0;
  int weight_buffer_bytes = 0;
  MegakernelOptions options;  // how the task's bytes move (megakernel_options.h)
  PhaseSink phases;           // one record per task when on
};
// Shared memory for one task's weights on this GPU (two are kept), and the blocks that fit.
Status megakernel_limits(int* weight_buffer_bytes, int* blocks);
Status launch_megakernel(const DecodeArgs& a, const MegakernelPlan& plan, cudaStream_t s);
// ---- level 4 at one token on sm_90: the step as clusters of 8 blocks (cluster_step.cu) -------
struct ClusterStepPlan {
  unsigned* counts = nullptr;  // kClusterStepCounts, zero between launches
  float* sums = nullptr;       // kClusterStepSums, zero between launches
  int clusters = 0;            // cluster_step_clusters' answer
  PhaseSink phases;            // a record a block a stage when on (model.h: cluster_record_arg)
  // Null, or kClusterStepStamps words a block: each layer's stage times (cluster_step.cu's
  // ClusterStamp; FL_DECODE_CLUSTER_STAMPS, a measurement).
  unsigned long long* stamps = nullptr;
};
constexpr int kClusterStepStamps = kLayers * 19;
constexpr int kClusterStepCounts = 2 * kLayers;
constexpr int64_t kClusterStepSums = int64_t(4 + 8) * kLayers * kC;  // (4 copies of A, 8 of M)
// The clusters of 8 the step runs on this GPU (all resident at once), 0 where it cannot run.
Status cluster_step_clusters(int* clusters);
// key_passes: the kernel whose keys past a block's head buffer stream through it in passes
// (clustered_step_long); without, the one for the caches whose keys fit (clustered_step), which
// returns Status::Unsupported where they do not.
Status launch_cluster_step(const DecodeArgs& a, const ClusterStepPlan& plan, bool key_passes,
                           cudaStream_t s);
// Every layer's Wout ([C][4C] in the weights) into w_out_t as [4C][C] (kLayers x 4C x C bf16),
// the layout the megakernel reads (once, when the weights are written).
Status launch_transpose_w_out(const bf16* weights, bf16* w_out_t, cudaStream_t s);
// Every layer's Wproj into w_proj_t as [layer][head][part][64][kProjRows] (kLayers x C x C
// bf16), the layout the fused attention tasks read (attention_proj.cuh).
Status launch_regroup_w_proj(const bf16* weights, bf16* w_proj_t, cudaStream_t s);

}  // namespace gpt2
}  // namespace fl

namespace fl {
struct ErrorSums;
namespace gpt2 {

// ---- the fp64 check on the GPU (check.cu): the step again in double, straight from the
// inputs (the cache below s, x_in, the weights), compared with y. Scratch in device memory:
struct CheckScratch {
  double* x;       // [t][C]
  double* xn;      // [t][C]
  double* qkv;     // [t][3C]
  double* att;     // [t][C]
  double* h;       // [t][4C]
  double* scores;  // [t][head][s + t]
  double* y;       // [t][C]
  static int64_t bytes(int tokens, int cache) {
    return int64_t(8) * tokens * (kC * 4 + 3 * kC + kF + kHeads * int64_t(cache + tokens));
  }
};
Status check_step(const DecodeArgs& a, const CheckScratch& c, ErrorSums* sums, cudaStream_t s);

}  // namespace gpt2
}  // namespace fl
