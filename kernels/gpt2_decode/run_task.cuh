// Step 3 of the megakernel's loop (megakernel.cu): one task's device function, by kind. The
// products read their slice from the task's shared-memory buffer (copied there while the block
// waited); attention reads its split's cached keys and values from it; proj by head combines its
// head's splits (their partial sums, or with proj_reads_rows their flagged rows as they land)
// and adds its share of proj into the residuals; the MLP adds its slice's share of h Wout into
// the next residual. Returns whether the task's count is to be released.
#pragma once

#include "kernels/gpt2_decode/attention_proj.cuh"
#include "kernels/gpt2_decode/copies.cuh"
#include "kernels/gpt2_decode/counters.cuh"
#include "kernels/gpt2_decode/last_proj.cuh"
#include "kernels/gpt2_decode/split_rows.cuh"

namespace fl {
namespace gpt2 {

// Step 3: the task's device function; the products read their slice from shared memory.
// after_inputs() runs once, by every thread, when the task's inputs are in shared memory.
// Whether the task's count is to be bumped (with head combines, only a head's last split's).
// A fused attention task (kProjects) holds both buffers (buffer is the first); after_attention()
// runs once, by every thread, when its keys and values are read.
// after_weights() runs once, by every thread, when a qkv, proj or split attention task has read
// its weights or keys (the early copies' point); not at all for the others.
// kOneToken (the one-token instance): every task has its kind's flags of the lesson's form.
// kRowsAtOnce: the qkv and MLP products' rows a warp at a time (0: linear_slice's choice).
template <bool kOneToken, int kRowsAtOnce, class AfterInputs, class AfterAttention,
          class AfterWeights>
__device__ __forceinline__ bool run_task(const DecodeArgs& a, const DecodeTask& task,
                                         const char* buffer, int buffer_bytes, float* work,
                                         float* sums, unsigned* counters,
                                         const MegakernelOptions& options,
                                         const AfterInputs& after_inputs,
                                         const AfterAttention& after_attention,
                                         const AfterWeights& after_weights) {
  const int layer = task.layer;
  const bf16* weights = reinterpret_cast<const bf16*>(buffer);
  const SmallParams p = extras_of(buffer, buffer_bytes, task);
  const bool wide = options.wide_rows;
  switch (static_cast<TaskKind>(task.kind)) {
    case TaskKind::qkv: {
      QkvOp op{a, layer, p, kOneToken || (task.flags & kInitsResidual) ? task.count : 0};
      // The starting values' raw values wait after the slice's sums (where they fit).
      const int kept =
          (init_column(task.first + op.init_rows) - init_column(task.first)) * a.tokens;
      if (kept > 0 && task.count * a.tokens + kept <= kSumsFloats)
        op.keep = sums + task.count * a.tokens;
      linear_slice<QkvOp, true, kRowsAtOnce>(op, weights, task.first, task.count, work, sums,
                                             after_inputs, wide, after_weights);
      if (op.init_rows > 0) op.store_starts();  // (after the epilogues: no barrier needed)
      break;
    }
    case TaskKind::attention: {
      const int copied = cached_split(a, task, buffer_bytes).cached;
      const bf16* kv = copied > 0 ? weights : nullptr;
      if (!kOneToken && (task.flags & kProjects)) {  // the whole head, then its part of proj
        attend_head(a, layer, task.first / kProjParts, kv, work, sums, after_inputs,
                    after_attention);
        break;
      }
      const int head = task.first / a.splits, split = task.first % a.splits;
      if (options.one_pass_attention)
        attend_split(a, layer, head, split, work, kv, copied, after_inputs, after_weights);
      else  // reads its cached keys from shared memory only where all of them are there
        attend_split_three_pass(a, layer, head, split, work,
                                copied == split_keys_of(a, split).cached ? kv : nullptr,
                                after_inputs);
      if (task.flags & kProjectsLast)  // its head's ticket; the last split adds proj
        return project_if_last(a, task, head, counters, work, sums, kOneToken && a.rows);
      if (a.rows != nullptr && (task.flags & kBumpsHead))  // proj reads its row: no count
        return false;
      if (!kOneToken && (task.flags & kCombinesHead))
        return combine_if_last(a, task, head, counters);
      break;
    }
    case TaskKind::proj: {
      if (kOneToken || (task.flags & kHeadProj)) {  // one head's share of every output (below)
        if (a.rows == nullptr) {
          combine_head(a, task.first / kProjParts, work, sums, after_inputs);
          break;
        }
        // (proj reads rows; with qkv words it waits for qkv's count here: megakernel.cu)
        const bool in_task = a.qkv_words != nullptr && task.wait_counter != kNoCounter;
        await_rows(a, layer, task.first / kProjParts, work, sums,
                   in_task ? counters + task.wait_counter : nullptr, task.wait_target);
        probe_mark(a, kProbeInputs);
        after_inputs();
        break;
      }
      // Batched: the residual slice waits in the activations' room after the t rows of C.
      const int t = a.tokens;
      const bool room = t * kC + task.count * t <= kActFloats;
      ProjOp op{a, layer, p};
      if (options.batched_combine && room) op.residual = work + t * kC, op.rows = task.count;
      op.combined = options.head_combine;
      linear_slice<ProjOp, true>(op, weights, task.first, task.count, work, sums, after_inputs,
                                 wide, after_weights);
      break;
    }
    case TaskKind::mlp: {
      linear_slice<FcOp, true, kRowsAtOnce>(FcOp{a, layer, p, sums}, weights, task.first,
                                            task.count, work, sums, after_inputs, wide);
      __syncthreads();  // the slice's h is in `sums`
      const bf16* w_out = mlp_wout_fits(task.count, buffer_bytes)
                              ? weights + task.count * kC
                              : a.w_out_t + (int64_t(layer) * kF + task.first) * kC;
      const int copy = (task.first / max(1, int(task.count))) % a.residual_copies;
      mlp_down(a, w_out, task.count, sums, x_mlp_of(a, layer) + copy * residual_stride(a));
      break;
    }
    case TaskKind::final_norm: {
      after_inputs();
      // With quick_tail its gamma and beta are in shared memory (copied while it waited).
      const bf16* g = options.quick_tail ? p.gamma : a.weights + kFinalLnG;
      layernorm_rows(x_mlp_of(a, kLayers - 1), g, g + kC, 0, a.tokens, a.y, a.residual_copies,
                     residual_stride(a), a.residual_spread);
      break;
    }
  }
  // A fused attention task's or a proj-by-head task's part of Wproj (in shared memory: the end
  // of both buffers, or its own) times its head's outputs (in `sums`), at one call site.
  const bool projects = kOneToken ? task.kind == uint8_t(TaskKind::proj)
                                  : (task.flags & (kProjects | kHeadProj)) != 0;
  if (projects) {
    const bf16* wp =
        !kOneToken && (task.flags & kProjects)
            ? reinterpret_cast<const bf16*>(buffer + 2 * buffer_bytes - kProjSliceBytes)
            : weights;
    project_head(a, layer, task.first % kProjParts, wp, sums, work);
  }
  return true;
}

}  // namespace gpt2
}  // namespace fl
