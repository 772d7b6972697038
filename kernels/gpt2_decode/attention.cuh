// Decode attention, one head over one split of the positions (flash-decoding): t query rows
// against s + t keys, so the work is reading the cache, 2 x (s + t) x 64 bf16 per head and
// layer, once. The positions are cut into splits so that every SM reads a share of the cache;
// each split writes its partial softmax sums and the projection's prologue (combine_heads in
// device.cuh) merges them. The fused level launches this as one kernel per block (grid head x
// split); the megakernel runs it as its attention task.
//
// One pass (attend_split): a warp takes keys warp, warp + 8, ... eight at a time, a lane per two
// dims: the eight dot products of a token are reduced across the warp side by side (every lane
// ends with all eight scores), then the warp's running max and sum (online softmax, as flash
// attention does) rescale its running P V, kept per lane in shared memory; one barrier, then the
// eight warps' (max, sum, o) merged into the split's. The three-pass form (an option of the
// megakernel, the form before): scores into shared memory, the softmax's max and sum a warp per
// token, then P V, with a barrier between each. K and V are read with ld.global.cg: the step's
// own keys were written by other blocks of the same launch. The one-pass form predicates each
// of a batch's sixteen loads (key_pair_predicated) so all are in flight before the first is
// used; the branched form (key_pair) stays as the option's other side. In the megakernel a
// split's first keys (as many as its 80 KB buffer holds: 320) come from its copy in shared
// memory and any past them from global memory, in the same predicated loads.
#pragma once

#include "kernels/gpt2_decode/device.cuh"
#include "kernels/gpt2_decode/split_rows.cuh"

namespace fl {
namespace gpt2 {

// q, then the scores (three passes) or each warp's o, max and sum (one pass).
constexpr int kAttentionSmemFloats =
    kMaxTokens * kHeadDim + (kMaxTokens * kPositionsStride > kWarps * kMaxTokens * (kHeadDim + 2)
                                 ? kMaxTokens * kPositionsStride
                                 : kWarps * kMaxTokens * (kHeadDim + 2));

// With qkv words, the new positions' keys and values (split_rows.cuh's await_qkv) follow.
static_assert(kAttentionSmemFloats + kMaxTokens * kHeadDim <= kActFloats, "room for them");

// The keys [first, end) of a split, and how many of them are in the cache already (below s):
// those the megakernel copies into shared memory while the task waits for its queries.
struct SplitKeys {
  int first, end, cached;
};
__device__ inline SplitKeys split_keys_of(const DecodeArgs& a, int split) {
  const int positions = a.positions(), len = split_keys(positions, a.splits);
  const int first = min(positions, split * len), end = min(positions, first + len);
  return {first, end, max(0, min(end, a.cache) - first)};
}

// Key p's two dims of this lane (keys below in_smem from the megakernel's copy in shared memory,
// the others from global memory; zero past the split).
__device__ __forceinline__ float2 key_pair(const unsigned* smem_rows, const unsigned* rows, int p,
                                           int p0, int p1, int in_smem, int lane) {
  return p >= p1       ? make_float2(0.f, 0.f)
         : p < in_smem ? unpack2(smem_rows[(p - p0) * (kHeadDim / 2) + lane])
                       : unpack2(ld_cg(rows + p * (kHeadDim / 2) + lane));
}

// The same without a branch (DecodeArgs::branch_free_keys, the lesson's form): both loads
// predicated, ld.shared from the copy (smem_rows: its shared-memory address) for keys below
// in_smem, ld.global.cg for the others, neither past the split (0: a zero pair), so a batch's
// sixteen loads issue back to back and each use waits only for its own load.
__device__ __forceinline__ unsigned ld_shared_if(unsigned address, bool load) {
  unsigned v;
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.u32 p, %2, 0;\n mov.u32 %0, 0;\n"
      " @p ld.shared.u32 %0, [%1];\n}"
      : "=r"(v)
      : "r"(address), "r"(unsigned(load)));
  return v;
}
__device__ __forceinline__ unsigned ld_cg_if(const unsigned* p, bool load) {
  unsigned v;
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.u32 p, %2, 0;\n mov.u32 %0, 0;\n"
      " @p ld.global.cg.u32 %0, [%1];\n}"
      : "=r"(v)
      : "l"(p), "r"(unsigned(load)));
  return v;
}
// With qkv words, keys from fresh_from on (the step's new positions) come from shared memory
// too, from fresh_rows at p - fresh_from (fresh_from = p1: none). The shared addresses come as
// each source's address of position 0 for this lane (key_base: copy at p0, fresh at fresh_from;
// unsigned wrap-around), so a key's is one select and one multiply-add.
__device__ __forceinline__ unsigned key_base(unsigned rows, int first, int lane) {
  return rows + 4u * unsigned(lane) - 4u * unsigned(first) * (kHeadDim / 2);
}
__device__ __forceinline__ float2 key_pair_predicated(unsigned smem_base, const unsigned* rows,
                                                      int p, int p1, int in_smem, int lane,
                                                      unsigned fresh_base, int fresh_from) {
  const bool copied = p < in_smem, fresh = p >= fresh_from;
  const unsigned at = (copied ? smem_base : fresh_base) + 4u * (kHeadDim / 2) * unsigned(p);
  const unsigned s = ld_shared_if(at, (copied || fresh) && p < p1);
  const unsigned g = ld_cg_if(rows + p * (kHeadDim / 2) + lane, !copied && !fresh && p < p1);
  return unpack2(s | g);  // at most one of them loaded
}

// The keys `range` of one head: every warp's running max, sum and P V left in smem (q, then
// acc, wm and wl below) for merge_warps. cached_kv: null, or the range's cached keys then values
// in shared memory (SplitKeys::cached rows of 64 each), copied there by the megakernel before
// the task's inputs were ready. after_inputs() runs once, by every thread, when the queries are
// in shared memory.
template <class AfterInputs = NoHook>
__device__ void attend_keys(const DecodeArgs& a, int layer, int head, const SplitKeys& range,
                            float* smem, const bf16* cached_kv, const AfterInputs& after_inputs) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int t = a.tokens, positions = a.positions();
  const int p0 = range.first, p1 = range.end;
  const int in_smem = cached_kv == nullptr ? p0 : p0 + range.cached;
  const unsigned* smem_keys = reinterpret_cast<const unsigned*>(cached_kv);
  const unsigned* smem_values = smem_keys + range.cached * (kHeadDim / 2);
  float* q = smem;                                                            // [16][64]
  float2* acc = reinterpret_cast<float2*>(smem + kMaxTokens * kHeadDim);      // [warp][16][32]
  float* wm = smem + kMaxTokens * kHeadDim + kWarps * kMaxTokens * kHeadDim;  // [warp][16]
  float* wl = wm + kWarps * kMaxTokens;                                       // [warp][16]
  // With qkv words (one pass, branch-free keys): the new positions' keys, then values, [2][16][64]
  bf16* fresh = reinterpret_cast<bf16*>(wl + kWarps * kMaxTokens);
  const bool words = a.qkv_words != nullptr;
  if (words) {
    await_qkv(a, layer, head, p0, p1, q, fresh);
  } else {
    for (int i = threadIdx.x; i < t * kHeadDim; i += kThreads)
      q[i] = ld_cg(a.q + (i / kHeadDim) * kC + head * kHeadDim + i % kHeadDim);
  }
  for (int j = 0; j < t; ++j) acc[(warp * kMaxTokens + j) * 32 + lane] = make_float2(0.f, 0.f);
  if (lane < t) wm[warp * kMaxTokens + lane] = -INFINITY, wl[warp * kMaxTokens + lane] = 0.f;
  __syncthreads();
  probe_mark(a, kProbeInputs);
  after_inputs();

  const int64_t base = (int64_t(layer) * kHeads + head) * positions * kHeadDim;
  const unsigned* keys = reinterpret_cast<const unsigned*>(a.k_cache + base);
  const unsigned* values = reinterpret_cast<const unsigned*>(a.v_cache + base);
  // The copy's shared-memory addresses (not read where there is none: in_smem is p0 then).
  const unsigned smem_k = static_cast<unsigned>(__cvta_generic_to_shared(smem_keys));
  const unsigned smem_v = static_cast<unsigned>(__cvta_generic_to_shared(smem_values));
  const unsigned fresh_k = static_cast<unsigned>(__cvta_generic_to_shared(fresh));
  const unsigned fresh_v = fresh_k + kMaxTokens * kHeadDim * 2;
  const int fresh_from = words ? a.cache : p1;  // keys from here on in `fresh`
  const unsigned k_base = key_base(smem_k, p0, lane), v_base = key_base(smem_v, p0, lane);
  const unsigned fk_base = key_base(fresh_k, fresh_from, lane);
  const unsigned fv_base = key_base(fresh_v, fresh_from, lane);
  constexpr int kBatch = 8;
  for (int start = p0 + warp; start < p1; start += kBatch * kWarps) {
    float2 k[kBatch], v[kBatch];  // all sixteen loads in flight before the first is used
    if (a.branch_free_keys) {
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int p = start + u * kWarps;
        k[u] = key_pair_predicated(k_base, keys, p, p1, in_smem, lane, fk_base, fresh_from);
        v[u] = key_pair_predicated(v_base, values, p, p1, in_smem, lane, fv_base, fresh_from);
      }
    } else {
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        k[u] = key_pair(smem_keys, keys, start + u * kWarps, p0, p1, in_smem, lane);
        v[u] = key_pair(smem_values, values, start + u * kWarps, p0, p1, in_smem, lane);
      }
    }
    for (int j = 0; j < t; ++j) {
      const float qx = q[j * kHeadDim + 2 * lane], qy = q[j * kHeadDim + 2 * lane + 1];
      float s[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) s[u] = qx * k[u].x + qy * k[u].y;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int u = 0; u < kBatch; ++u) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
      float batch_max = -INFINITY;
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int p = start + u * kWarps;
        if (p >= p1 || p > a.cache + j) s[u] = -INFINITY;  // past the split, or a later token
        batch_max = fmaxf(batch_max, s[u]);
      }
      const int at = warp * kMaxTokens + j;
      const float m_old = wm[at], m_new = fmaxf(m_old, batch_max);
      if (m_new == -INFINITY) continue;  // no key of this token yet (the same in every lane)
      const float scale = __expf(m_old - m_new);  // 0 for the first keys
      float l = wl[at] * scale;
      float2 o = acc[at * 32 + lane];
      o.x *= scale, o.y *= scale;
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const float e = __expf(s[u] - m_new);  // 0 for a masked key
        l += e;
        o.x += e * v[u].x;
        o.y += e * v[u].y;
      }
      acc[at * 32 + lane] = o;
      __syncwarp();  // every lane has read the running max and sum
      if (lane == 0) wm[at] = m_new, wl[at] = l;
      __syncwarp();
    }
  }
  __syncthreads();
  probe_mark(a, kProbeCompute);
}

// The max, sum and o of the keys attend_keys saw, from the warps': each warp's scaled to the
// largest max; out(j, l2, o, m, l) takes token j's dims 2 l2 and 2 l2 + 1 (and the max and sum).
template <class Out>
__device__ void merge_warps(const DecodeArgs& a, const float* smem, const Out& out) {
  const float2* acc = reinterpret_cast<const float2*>(smem + kMaxTokens * kHeadDim);
  const float* wm = smem + kMaxTokens * kHeadDim + kWarps * kMaxTokens * kHeadDim;
  const float* wl = wm + kWarps * kMaxTokens;
  for (int i = threadIdx.x; i < a.tokens * 32; i += kThreads) {
    const int j = i / 32, l2 = i % 32;
    float m = -INFINITY, l = 0.f;
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, wm[w * kMaxTokens + j]);
    float2 o = make_float2(0.f, 0.f);
    for (int w = 0; m != -INFINITY && w < kWarps; ++w) {
      const float mw = wm[w * kMaxTokens + j];
      const float f = mw == -INFINITY ? 0.f : __expf(mw - m);
      const float2 ow = acc[(w * kMaxTokens + j) * 32 + l2];
      o.x += f * ow.x;
      o.y += f * ow.y;
      l += f * wl[w * kMaxTokens + j];
    }
    out(j, l2, o, m, l);
  }
}

// One split: its keys, then its max, sum and o into the partial sums. cached_kv: null, or the
// split's first `copied` keys, then as many values, in shared memory (the megakernel's copy; a
// grid split's keys past it come from global memory). after_keys() runs once, by every thread,
// when no thread reads cached_kv any more.
template <class AfterInputs = NoHook, class AfterKeys = NoHook>
__device__ void attend_split(const DecodeArgs& a, int layer, int head, int split, float* smem,
                             const bf16* cached_kv = nullptr, int copied = 0,
                             const AfterInputs& after_inputs = NoHook{},
                             const AfterKeys& after_keys = NoHook{}) {
  SplitKeys range = split_keys_of(a, split);
  range.cached = cached_kv == nullptr ? 0 : copied;
  attend_keys(a, layer, head, range, smem, cached_kv, after_inputs);
  after_keys();
  float* part = a.partials + int64_t(head) * a.splits * kPartStride;
  merge_warps(a, smem, [&](int j, int l2, float2 o, float m, float l) {
    if (a.rows != nullptr) {  // flagged words instead (split_rows.cuh)
      publish_word(a, layer, head, j, split, 2 * l2, o.x);
      publish_word(a, layer, head, j, split, 2 * l2 + 1, o.y);
      if (l2 == 0) publish_word(a, layer, head, j, split, kHeadDim, m);
      if (l2 == 0) publish_word(a, layer, head, j, split, kHeadDim + 1, l);
      return;
    }
    float* mine = part + (int64_t(j) * kHeads * a.splits + split) * kPartStride;
    mine[2 * l2] = o.x;
    mine[2 * l2 + 1] = o.y;
    if (l2 == 0) mine[64] = m, mine[65] = l;
  });
}

// The three-pass form's softmax, a warp per token: each of the t tokens' rows of `keys` scores
// becomes exp(score - max) in place, and the row's max and sum go to the split's partial.
__device__ __forceinline__ void softmax_split_scores(const DecodeArgs& a, int split, int t,
                                                     float* scores, int keys, float* part) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int j = warp; j < t; j += kWarps) {
    float* row = scores + j * kPositionsStride;
    float m = -INFINITY;
    for (int p = lane; p < keys; p += 32) m = fmaxf(m, row[p]);
    m = warp_max(m);
    float l = 0;
    for (int p = lane; p < keys; p += 32) {
      const float e = m == -INFINITY ? 0.f : __expf(row[p] - m);
      row[p] = e;
      l += e;
    }
    l = warp_sum(l);
    float* mine = part + (int64_t(j) * kHeads * a.splits + split) * kPartStride;
    if (lane == 0) {
      mine[64] = m;
      mine[65] = l;
    }
  }
}

// The three-pass form (MegakernelOptions::one_pass_attention off): scores, softmax, P V.
template <class AfterInputs = NoHook>
__device__ void attend_split_three_pass(const DecodeArgs& a, int layer, int head, int split,
                                        float* smem, const bf16* cached_kv,
                                        const AfterInputs& after_inputs) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int t = a.tokens, positions = a.positions();
  const SplitKeys range = split_keys_of(a, split);
  const int p0 = range.first, p1 = range.end;
  const int in_smem = cached_kv == nullptr ? p0 : p0 + range.cached;  // keys below come from smem
  const unsigned* smem_keys = reinterpret_cast<const unsigned*>(cached_kv);
  const unsigned* smem_values = smem_keys + range.cached * (kHeadDim / 2);
  float* q = smem;                               // [16][64]
  float* scores = smem + kMaxTokens * kHeadDim;  // [16][kPositionsStride]
  for (int i = threadIdx.x; i < t * kHeadDim; i += kThreads)
    q[i] = ld_cg(a.q + (i / kHeadDim) * kC + head * kHeadDim + i % kHeadDim);
  __syncthreads();
  probe_mark(a, kProbeInputs);
  after_inputs();

  const int64_t base = (int64_t(layer) * kHeads + head) * positions * kHeadDim;
  const unsigned* keys = reinterpret_cast<const unsigned*>(a.k_cache + base);
  const unsigned* values = reinterpret_cast<const unsigned*>(a.v_cache + base);
  // A warp takes keys warp, warp + 8, ...: kBatch of them loaded before the first is used.
  constexpr int kBatch = 8;
  for (int start = p0 + warp; start < p1; start += kBatch * kWarps) {
    float2 k[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int p = start + u * kWarps;
      k[u] = p >= p1       ? make_float2(0.f, 0.f)
             : p < in_smem ? unpack2(smem_keys[(p - p0) * (kHeadDim / 2) + lane])
                           : unpack2(ld_cg(keys + p * (kHeadDim / 2) + lane));
    }
    // The batch's kBatch reductions side by side, one butterfly level at a time (warp_sum's
    // order, so the same sums), instead of one key's five dependent shuffles after another's.
    for (int j = 0; j < t; ++j) {
      const float qx = q[j * kHeadDim + 2 * lane], qy = q[j * kHeadDim + 2 * lane + 1];
      float s[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) s[u] = qx * k[u].x + qy * k[u].y;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int u = 0; u < kBatch; ++u) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int p = start + u * kWarps;
        if (lane == 0 && p < p1)
          scores[j * kPositionsStride + p - p0] = p <= a.cache + j ? s[u] : -INFINITY;
      }
    }
  }
  __syncthreads();

  float* part = a.partials + (int64_t(0) * kHeads + head) * a.splits * kPartStride;
  softmax_split_scores(a, split, t, scores, p1 - p0, part);
  __syncthreads();

  float2 acc[kMaxTokens];
#pragma unroll
  for (int j = 0; j < kMaxTokens; ++j) acc[j] = make_float2(0.f, 0.f);
  for (int start = p0 + warp; start < p1; start += kBatch * kWarps) {
    float2 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int p = start + u * kWarps;
      v[u] = p >= p1       ? make_float2(0.f, 0.f)
             : p < in_smem ? unpack2(smem_values[(p - p0) * (kHeadDim / 2) + lane])
                           : unpack2(ld_cg(values + p * (kHeadDim / 2) + lane));
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int p = start + u * kWarps;
      if (p >= p1) break;
#pragma unroll
      for (int j = 0; j < kMaxTokens; ++j) {
        if (j >= t) break;
        const float e = scores[j * kPositionsStride + p - p0];
        acc[j].x += e * v[u].x;
        acc[j].y += e * v[u].y;
      }
    }
  }
  __syncthreads();  // every warp is done with the scores: their room takes the warps' sums
  float2* sums = reinterpret_cast<float2*>(scores);  // [warp][16][32] float2 = 32 KB
#pragma unroll
  for (int j = 0; j < kMaxTokens; ++j) {
    if (j >= t) break;
    sums[(warp * kMaxTokens + j) * 32 + lane] = acc[j];
  }
  __syncthreads();
  probe_mark(a, kProbeCompute);
  for (int i = threadIdx.x; i < t * 32; i += kThreads) {
    const int j = i / 32, l2 = i % 32;
    float2 o = make_float2(0.f, 0.f);
    for (int w = 0; w < kWarps; ++w) {
      const float2 s = sums[(w * kMaxTokens + j) * 32 + l2];
      o.x += s.x;
      o.y += s.y;
    }
    float* mine = part + (int64_t(j) * kHeads * a.splits + split) * kPartStride;
    mine[2 * l2] = o.x;
    mine[2 * l2 + 1] = o.y;
  }
}

}  // namespace gpt2
}  // namespace fl
