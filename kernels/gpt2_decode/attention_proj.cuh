// proj by head, the megakernel's proj stage (MegakernelOptions::head_proj, the lesson's form):
// proj is linear in the heads, so it is cut along its input, a task per (head, part): the
// head's splits combined (its 64 outputs a token, from the partial sums of its splits only),
// times the head's 64 columns of Wproj for kProjRows outputs (24 KB), added into the residual
// x and the next residual x_mlp with red.add (project_head), whose starting values (x + bproj,
// x + bproj + bout) the layer's qkv tasks wrote (ops.cuh's ResidualInit). A task waits only for
// its own head's splits, and reads 9 x 66 floats at a cache of 512 where a row slice of proj
// reads all 108 splits' (29 KB, ~2 us of its inputs); 48 tasks a layer, 24 KB each.
//
// The megakernel's attention and proj as one stage (MegakernelOptions::fused_proj, where a
// head's cached keys and values fit a block's two weight buffers). Against the split form
// (attention splits, then a proj stage that combines every split's sums): a task takes a whole
// head, every key, so its softmax is complete in the block and nothing is combined across
// blocks; proj being linear in the heads, the task then multiplies its head's 64 outputs by its
// part of Wproj (the 64 columns of the head, kProjRows rows; Wproj regrouped once as
// [layer][head][part][64][kProjRows], so the part is one contiguous 24 KB run) and adds the
// product into the residual x and the next residual x_mlp with red.add, as the MLP's down
// product does. The residuals' starting values (x + bproj, x + bproj + bout) are written by the
// layer's qkv tasks (ops.cuh's ResidualInit). A layer is three stages instead of four.
//
// Per task at cache 512, t = 1: 2 x 513 x 128 B = 131 KB of keys and values and 24 KB of Wproj,
// copied into shared memory while the block waits (it holds no qkv task of the layer: the task
// list deals them to other blocks), 66 KFLOP of attention and 25 KFLOP of proj; kProjParts = 4
// tasks repeat a head's softmax (48 tasks a layer) so that each adds only 192 outputs.
#pragma once

#include "kernels/gpt2_decode/attention.cuh"
#include "kernels/gpt2_decode/counters.cuh"
#include "kernels/gpt2_decode/ops.cuh"

namespace fl {
namespace gpt2 {

// One head's share of proj: o (t x 64 floats in shared memory, the head's attention outputs)
// times wp (the head's 64 columns of Wproj for outputs [part * kProjRows, +kProjRows), as
// [64][kProjRows] in shared memory), added into the residual x and the next residual x_mlp
// with red.add. work: room for the partial sums (48 KB).
__device__ inline void project_head(const DecodeArgs& a, int layer, int part, const bf16* wp,
                                    const float* o, float* work) {
  const int t = a.tokens;
  // Thread g * 48 + q: outputs 4q..4q+3 of the part over rows 16g..16g+15 of the head's 64
  // (8-byte loads, consecutive threads on consecutive words), its sums into work[g][j][192].
  constexpr int kQuads = kProjRows / 4, kGroups = 4, kRowsPerGroup = kHeadDim / kGroups;
  static_assert(kGroups * kMaxTokens * kProjRows <= kActFloats, "the partial sums fit");
  const int q = threadIdx.x % kQuads, g = threadIdx.x / kQuads;
  if (g < kGroups) {
    float acc[kMaxTokens][4];
#pragma unroll
    for (int j = 0; j < kMaxTokens; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
#pragma unroll 4
    for (int d = g * kRowsPerGroup; d < (g + 1) * kRowsPerGroup; ++d) {
      const uint2 w = *reinterpret_cast<const uint2*>(wp + d * kProjRows + 4 * q);
      const float2 w01 = unpack2(w.x), w23 = unpack2(w.y);
#pragma unroll
      for (int j = 0; j < kMaxTokens; ++j) {
        if (j >= t) break;
        const float ov = o[j * kHeadDim + d];
        acc[j][0] += w01.x * ov, acc[j][1] += w01.y * ov;
        acc[j][2] += w23.x * ov, acc[j][3] += w23.y * ov;
      }
    }
#pragma unroll
    for (int j = 0; j < kMaxTokens; ++j) {
      if (j >= t) break;
      reinterpret_cast<float4*>(work + (g * kMaxTokens + j) * kProjRows)[q] =
          make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
    }
  }
  __syncthreads();
  probe_mark(a, kProbeCompute);
  float* x_next = x_mlp_of(a, layer);
  for (int i = threadIdx.x; i < t * kQuads; i += kThreads) {
    const int j = i / kQuads, qq = i % kQuads;
    float sum[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int gg = 0; gg < kGroups; ++gg) {
      const float4 v =
          reinterpret_cast<const float4*>(work + (gg * kMaxTokens + j) * kProjRows)[qq];
      sum[0] += v.x, sum[1] += v.y, sum[2] += v.z, sum[3] += v.w;
    }
    const int n = part * kProjRows + 4 * qq;
    red_add4(a.x + j * kC + n, sum);
    red_add4(x_next + spread_at(a, j * kC + n), sum);
  }
}

// A fused task's attention (kProjects): its whole head, every key, into o (t x 64 floats, the
// sums' room), for project_head. kv: the head's cached keys then values in shared memory
// (null: all from global memory); work: the attention's room (48 KB). after_inputs() as
// attend_keys; after_attention() runs once, by every thread, when no thread reads kv any more
// (the megakernel starts the next task's copies there).
template <class AfterInputs, class AfterAttention>
__device__ void attend_head(const DecodeArgs& a, int layer, int head, const bf16* kv, float* work,
                            float* o, const AfterInputs& after_inputs,
                            const AfterAttention& after_attention) {
  const SplitKeys range{0, a.positions(), kv != nullptr ? a.cache : 0};
  attend_keys(a, layer, head, range, work, kv, after_inputs);
  after_attention();
  merge_warps(a, work, [&](int j, int l2, float2 v, float, float l) {
    o[j * kHeadDim + 2 * l2] = v.x / l;  // every token sees key 0: l > 0
    o[j * kHeadDim + 2 * l2 + 1] = v.y / l;
  });
  __syncthreads();
}

// A proj-by-head task's inputs (kHeadProj): its head's splits combined into o (t x 64 floats,
// the sums' room), for project_head. after_inputs() as linear_slice's.
template <class AfterInputs>
__device__ void combine_head(const DecodeArgs& a, int head, float* work, float* o,
                             const AfterInputs& after_inputs) {
  combine_heads_batched(a, 0, a.tokens, work, head, 1);  // at work[j * C + head * 64]
  __syncthreads();
  for (int i = threadIdx.x; i < a.tokens * kHeadDim; i += kThreads)
    o[i] = work[(i / kHeadDim) * kC + head * kHeadDim + i % kHeadDim];
  __syncthreads();
  probe_mark(a, kProbeInputs);
  after_inputs();
}

// The megakernel's head combines (kCombinesHead, an option), after an attention task's partial
// sums are written: its
// head's ticket (thread 0); the head's last split combines the head's splits into its 64 outputs
// (a.att) and is the only one to count. Whether this task counts.
__device__ inline bool combine_if_last(const DecodeArgs& a, const DecodeTask& task, int head,
                                       unsigned* counters) {
  __shared__ unsigned ticket;
  __syncthreads();  // the block's partial sums are written
  if (threadIdx.x == 0) ticket = acq_rel_add(counters + task.done_counter + 1 + head, 1u);
  __syncthreads();
  if (ticket != unsigned(a.splits - 1)) return false;
  combine_heads_batched(a, 0, a.tokens, a.att, head, 1);
  return true;
}

}  // namespace gpt2
}  // namespace fl
