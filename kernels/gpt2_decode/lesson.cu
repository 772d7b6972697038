// Lesson 11, gpt2_decode: one decode step of GPT-2 small (model.h) for 1-16 new tokens against a
// KV cache of s positions (the size slider, 16 to 8K), bf16 weights and cache.
//
// The ladder, and what each rung removes:
//   0 per-op        17 launches a block (per_op.cu), 205 in all: every op's output goes to
//                   HBM and the GPU drains and refills at each of the 205 boundaries
//   1 fused         5 launches a block (fused.cu), 61 in all: LayerNorm in the products'
//                   prologues, bias / GELU / residual / cache append in their epilogues,
//                   attention one kernel
//   2 graph         level 1 captured once as a CUDA graph and replayed: the launch calls go,
//                   the drain and refill at each kernel boundary stay
//   3 graph + PDL   the graph with programmatic dependent launch (sm_90+; elsewhere it runs as
//                   level 2): each kernel loads its weights while the previous one drains
//   4 megakernel    one persistent launch (megakernel.cu): a block per SM runs a host-built
//                   task list, waits on counters in global memory, and prefetches the next
//                   task's weights while it waits
// The bytes every level must move are the same ~170 MB of weights plus 2 x 12 x s x 768 x 2 B of
// cache; the levels differ in how much of the time the weight stream is running. At t = 1, s =
// 512 that is 189 MB, ~63 us at 3 TB/s, against 205 launches of a few microseconds each.
//
// The workspace (buffers, weights, task list, graphs, check) is workspace.cuh, the level table
// levels.cu; this file is the lesson: its size axis, refusals, CPU reference and hooks.
#include <memory>
#include <string>

#include "kernels/catalog.h"
#include "kernels/gpt2_decode/workspace.cuh"

namespace fl {
namespace gpt2 {

// ---- the lesson -------------------------------------------------------------------------------
namespace {

class Gpt2Decode final : public LevelLesson<DecodeWorkspace> {
 public:
  Gpt2Decode()
      : LevelLesson("gpt2_decode", "GPT-2 decode step",
                    "y = LN_f(Block_12(...Block_1(x))), each Block: x += Attn(LN1 x; KV cache) "
                    "Wproj; x += GELU(LN2 x Wfc) Wout;  C = 768, 12 heads, bf16",
                    SizeAxis{"cached tokens", 16, kMaxCache, 512, "new tokens", 1, kMaxTokens},
                    {Precision::bf16}) {}

  int64_t workspace_bytes(Shape shape, Precision) const override {
    shape = resolve(shape);
    const int64_t t = shape.inner, positions = shape.size + shape.inner;
    return kWeightElements * 2 + int64_t(kLayers) * kF * kC * 2 +
           2 * int64_t(kLayers) * kHeads * positions * kHeadDim * 2 +
           t * (8 * kC + 3 * kC + kF + kHeads * positions) * 4 + t * kHeads * 64 * kPartStride * 4 +
           CheckScratch::bytes(int(t), int(shape.size));
  }

  Status create_workspace(Shape shape, Precision p,
                          std::unique_ptr<Workspace>* out) const override {
    shape = resolve(shape);
    if (p != Precision::bf16) return Status::Error("gpt2_decode runs in bf16 only");
    if (shape.size < 1 || shape.size > kMaxCache) {
      return Status::Error("gpt2_decode: the cache holds 1 to " + std::to_string(kMaxCache) +
                           " tokens (asked for " + std::to_string(shape.size) + ")");
    }
    if (shape.inner < 1 || shape.inner > kMaxTokens) {
      return Status::Error("gpt2_decode: a step takes 1 to " + std::to_string(kMaxTokens) +
                           " new tokens (asked for " + std::to_string(shape.inner) + ")");
    }
    auto ws = std::make_unique<DecodeWorkspace>(int(shape.size), int(shape.inner));
    FL_TRY(ws->allocate());
    *out = std::move(ws);
    return Status::Ok();
  }

  // inputs: x (t x C), weights, k_cache, v_cache.
  std::vector<HostTensor> reference(const std::vector<HostTensor>& in) const override {
    const int t = static_cast<int>(in.at(0).values.size() / kC);
    const int64_t per_layer = int64_t(kLayers) * kHeads * kHeadDim;
    const int cache = static_cast<int>(in.at(2).values.size() / per_layer) - t;
    return {
        {"y", reference_step(in[0].values, in[1].values, in[2].values, in[3].values, t, cache)}};
  }

  double tolerance(Precision) const override { return kTolerance; }
};

DecodeWorkspace* as_decode(const Workspace& ws) {
  return dynamic_cast<DecodeWorkspace*>(const_cast<Workspace*>(&ws));
}

}  // namespace

const DecodeTaskList* megakernel_tasks(const Workspace& ws, TaskListShape* shape) {
  DecodeWorkspace* d = as_decode(ws);
  if (d == nullptr) return nullptr;
  if (shape != nullptr) *shape = d->task_shape();
  return &d->task_list();
}

Status set_megakernel_phases(Workspace& ws, const PhaseSink& sink) {
  DecodeWorkspace* d = as_decode(ws);
  if (d == nullptr) return Status::Error("not a gpt2_decode workspace");
  FL_TRY(ws.force_variant("megakernel", "task_list"));  // (the task list's hook)
  d->set_phases(sink);
  return Status::Ok();
}

Status set_megakernel_probes(Workspace& ws, unsigned long long* probes) {
  DecodeWorkspace* d = as_decode(ws);
  if (d == nullptr) return Status::Error("not a gpt2_decode workspace");
  FL_TRY(ws.force_variant("megakernel", "task_list"));  // (the task list's hook)
  d->set_probes(probes);
  return Status::Ok();
}

Status set_megakernel_options(Workspace& ws, const MegakernelOptions& options) {
  DecodeWorkspace* d = as_decode(ws);
  if (d == nullptr) return Status::Error("not a gpt2_decode workspace");
  FL_TRY(ws.force_variant("megakernel", "task_list"));  // (the task list's hook)
  if (options.l2_ahead < 0 || options.l2_ahead > 16)
    return Status::Error("the megakernel prefetches 0 to 16 tasks ahead into L2");
  if (options.copies_after_wait < 0 || options.copies_after_wait > kAllTaskKinds)
    return Status::Error("copies_after_wait is a mask of the task kinds (0 to " +
                         std::to_string(kAllTaskKinds) + ")");
  if (options.min_split_keys < 1 || options.min_split_keys > kMaxSplitLength)
    return Status::Error("an attention split takes at least 1 to " +
                         std::to_string(kMaxSplitLength) + " keys");
  if (options.split_rounds < 1 || options.split_rounds > 4)
    return Status::Error("the attention splits fill 1 to 4 rounds of tasks");
  if (options.residual_copies < 1 || options.residual_copies > kMaxResidualCopies)
    return Status::Error("the megakernel keeps 1 to " + std::to_string(kMaxResidualCopies) +
                         " copies of the residual");
  if (options.qkv_rows < 0 || options.qkv_rows % 6 != 0 || options.qkv_rows > kMaxSliceRows)
    return Status::Error("a qkv slice takes a multiple of 6 rows up to " +
                         std::to_string(kMaxSliceRows) + " (0: one slice a block)");
  if (options.apart_qkv_rows < 0 || options.apart_qkv_rows % 6 != 0 ||
      options.apart_qkv_rows > kMaxSliceRows)
    return Status::Error("a qkv slice beside attention apart takes a multiple of 6 rows up to " +
                         std::to_string(kMaxSliceRows) + " (0: off)");
  // (x_mlp holds kMaxResidualCopies rows of t x C: two residuals spread 4 times at one token)
  static_assert(2 * 4 <= kMaxResidualCopies, "the residuals spread 4 times fit x_mlp");
  if (options.residual_spread != 1 && options.residual_spread != 2 && options.residual_spread != 4)
    return Status::Error("the residual is spread 1, 2 or 4 times");
  if (options.copy_thread < 0 || options.copy_thread >= kThreads)
    return Status::Error("the copies' thread is one of the block's " + std::to_string(kThreads));
  return d->set_options(options);
}

Status set_megakernel_blocks(Workspace& ws, int blocks) {
  DecodeWorkspace* d = as_decode(ws);
  if (d == nullptr) return Status::Error("not a gpt2_decode workspace");
  FL_TRY(ws.force_variant("megakernel", "task_list"));  // (the task list's hook)
  int buffer = 0, sms = 0;
  FL_TRY(megakernel_limits(&buffer, &sms));
  if (blocks < 1 || blocks > sms) {
    return Status::Error("the megakernel runs on 1 to " + std::to_string(sms) + " blocks");
  }
  return d->plan(blocks);
}

Status megakernel_cluster_count(int* clusters) {
  return cluster_step_clusters(clusters);
}

}  // namespace gpt2

using Gpt2DecodeLesson = gpt2::Gpt2Decode;
FL_DEFINE_LESSON(gpt2_decode, Gpt2DecodeLesson);

}  // namespace fl
