// Proj in attention's last split (MegakernelOptions::last_split_proj, beside proj by head): the
// megakernel's attention and proj as one dependent stage without a head's softmax on one SM.
// Each split of a head writes its partial sums as before, then takes a ticket from its head's
// counter (an atom that returns the count, as stream-K and split-K fixups do); the split that
// takes the last ticket combines the head's splits (combine_head: 64 values a token) and adds
// them times the head's 64 columns of Wproj (all 768 outputs, 96 KB, one contiguous run of the
// regrouped Wproj) into the residual x and the next residual x_mlp with red.add, whose starting
// values (x + bproj, x + bproj + bout) the layer's qkv tasks wrote. It then bumps the layer's
// proj count once; the MLP's tasks wait for kHeads of them. No proj task, so a layer is three
// dependent stages: qkv, attention + proj, the MLP.
//
// Per head's last split at t = 1: the ticket's round trip, the combine's (splits x 66 floats),
// 96 KB of Wproj (24 16-byte loads a thread, all in flight at once; from L2 where every split
// asked for its share with kPrefetchesProj, else from DRAM: ~4 us at 1/132 of the roof), 98
// KFLOP, 768 x 2 red.adds. Against proj by head: the 48 proj tasks' polls, copies and releases
// gone, the 96 KB on one SM instead of four. With 3 the splits' sums come in one burst beside
// the ticket (split_rows.cuh).
#pragma once

#include "kernels/gpt2_decode/attention_proj.cuh"
#include "kernels/gpt2_decode/copies.cuh"
#include "kernels/gpt2_decode/counters.cuh"
#include "kernels/gpt2_decode/split_rows.cuh"

namespace fl {
namespace gpt2 {

constexpr int kLastGroups = 8;                      // groups of 8 of the head's 64 rows
constexpr int kOctets = kC / 8;                     // 8 outputs a 16-byte load
constexpr int kLastCombos = kLastGroups * kOctets;  // (group, octet) pairs
constexpr int kLastPerThread = kLastCombos / kThreads;
constexpr int kLastTokens = kActFloats / (kLastGroups * kC);  // tokens a pass of the sums
static_assert(kLastCombos % kThreads == 0 && kLastTokens >= 1, "the last split's layout");

// Thread c's pairs (c, c + 256, c + 512) of the head's Wproj columns: group g = pair / 96 (rows
// 8g..8g+7), octet n8 = pair % 96 (outputs 8 n8..8 n8+7), 8 rows of 16 bytes a pair.
__device__ __forceinline__ const bf16* pair_rows(const bf16* w, int k, int* g, int* n8) {
  const int c = threadIdx.x + k * kThreads;
  *g = c / kOctets, *n8 = c % kOctets;
  const int part = *n8 / (kProjRows / 8), o8 = *n8 % (kProjRows / 8);
  return w + (part * kHeadDim + *g * 8) * kProjRows + o8 * 8;
}
__device__ __forceinline__ void load_pair(const bf16* src, int4 (&wv)[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) wv[i] = *reinterpret_cast<const int4*>(src + i * kProjRows);
}
// A pair's 8 sums for one token (o_row: its 64 values) into work[jj][g][C].
__device__ __forceinline__ void sum_pair(const int4 (&wv)[8], const float* o_row, int g, int n8,
                                         int jj, float* work) {
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float ov = o_row[g * 8 + i];
    const unsigned u[4] = {unsigned(wv[i].x), unsigned(wv[i].y), unsigned(wv[i].z),
                           unsigned(wv[i].w)};
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const float2 w2 = unpack2(u[h]);
      acc[2 * h] += w2.x * ov, acc[2 * h + 1] += w2.y * ov;
    }
  }
  float4* dst = reinterpret_cast<float4*>(work + (jj * kLastGroups + g) * kC + n8 * 8);
  dst[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  dst[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
}
// Tokens [j0, j0 + tc)'s sums (work, after a barrier): the 8 groups added up, a thread per 4
// outputs, into x and x_mlp (red.add).
__device__ __forceinline__ void add_groups(const DecodeArgs& a, int layer, const float* work,
                                           int j0, int tc) {
  float* x_next = x_mlp_of(a, layer);
  for (int i = threadIdx.x; i < tc * (kC / 4); i += kThreads) {
    const int jj = i / (kC / 4), n = 4 * (i % (kC / 4));
    float sum[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int g = 0; g < kLastGroups; ++g) {
      const float4 v = *reinterpret_cast<const float4*>(work + (jj * kLastGroups + g) * kC + n);
      sum[0] += v.x, sum[1] += v.y, sum[2] += v.z, sum[3] += v.w;
    }
    const int j = j0 + jj;
    red_add4(a.x + j * kC + n, sum);
    red_add4(x_next + spread_at(a, j * kC + n), sum);
  }
}

// o (t x 64 floats in shared memory: the head's outputs) times the head's 64 columns of Wproj
// for every output, added into x and x_mlp (red.add): each pair's 8 rows (unrolled: the three
// pairs' 24 loads may all be in flight), its sums into work[token][g][C] (48 KB: two tokens a
// pass, the weights read again each pass), then the groups added up.
__device__ inline void project_whole_head(const DecodeArgs& a, int layer, int head, const float* o,
                                          float* work) {
  const bf16* w = head_proj_columns(a, layer, head);
  for (int j0 = 0; j0 < a.tokens; j0 += kLastTokens) {
    const int tc = min(kLastTokens, a.tokens - j0);
    if (j0 > 0) __syncthreads();  // the pass before's sums are read
#pragma unroll
    for (int k = 0; k < kLastPerThread; ++k) {
      int g, n8;
      int4 wv[8];
      load_pair(pair_rows(w, k, &g, &n8), wv);
      for (int jj = 0; jj < tc; ++jj) sum_pair(wv, o + (j0 + jj) * kHeadDim, g, n8, jj, work);
    }
    __syncthreads();
    probe_mark(a, kProbeCompute);
    add_groups(a, layer, work, j0, tc);
  }
}

// After an attention split's partial sums are written (kProjectsLast): its head's ticket
// (thread 0); the head's last split combines the head and adds its share of proj, and alone
// counts (count_done bumps the MLP's counter). Whether this task counts. burst_rows: the
// splits wrote flagged rows (a.rows; the one-token kernel's), read with the ticket.
__device__ inline bool project_if_last(const DecodeArgs& a, const DecodeTask& task, int head,
                                       unsigned* counters, float* work, float* o, bool burst_rows) {
  __shared__ unsigned ticket;
  __syncthreads();                   // the block's partial sums are written
  unsigned long long burst[kBurst];  // (last_split_proj 3: the rows loaded with the ticket)
  if (burst_rows) issue_burst(a, head, burst);
  if (threadIdx.x == 0) ticket = acq_rel_add(counters + task.done_counter + head, 1u);
  __syncthreads();
  if (ticket != unsigned(a.splits - 1)) return false;
  if (burst_rows)
    combine_rows(a, task.layer, head, burst, work, o);
  else
    combine_head(a, head, work, o, NoHook{});  // (its acquire saw every split's release)
  project_whole_head(a, task.layer, head, o, work);
  return true;
}

}  // namespace gpt2
}  // namespace fl
