// proj's shares handed to the MLP as flagged words (MegakernelOptions::proj_shares, one token
// only; beside proj reading rows and attention reading qkv words): no count between proj and the
// MLP. Each proj-by-head task, instead of adding its 192 outputs into the residuals (red.add,
// then a count whose release waits for its block's copies in flight, then the MLP's poll),
// writes them as its head's share: slot `head` of a.shares, [slot][pair], a word a pair of
// columns (kShareSlots x 384 words, 39 KB). The layer's qkv tasks write the residual's starting
// value (x + bproj) into slot 12 the same way. An MLP task loads all 13 slots (4992 words, one
// L2 round trip, every load in flight at once) until each word carries its layer's flag, adds
// the twelve shares in head order (its LayerNorm's row is start + shares), and adds the shares'
// sum for its own sixth of the columns (first / 4 .. (first + count) / 4: the MLP's slices split
// the 768 columns between them) into the next residual, which proj no longer adds into. Its
// thread 0 waits for the qkv count meanwhile (the next residual's starting value, written by the
// qkv tasks, is what it adds into); the barrier after its loads orders that wait before the adds.
//
// A word: layer + 1 in bits 63-60, column 2p's float in bits 59-30 and column 2p + 1's in bits
// 29-0, each without its two lowest mantissa bits (relative error under 2^-21), so one relaxed
// 64-bit store (single-copy atomic) carries both values and the flag. Every word is rewritten
// every layer: a layer's words are overwritten only after every MLP task of the layer before has
// released its count (the next qkv and proj wait for it), and a stale flag is never the awaited
// one (layer + 1 in 1..12; the buffer starts zeroed).
//
// Bytes an MLP task loads: 13 x 384 words of 8 bytes (39 KB) from L2, against 3 KB of the
// residual when proj adds into it; 128 tasks a layer, 5 MB of L2 reads. Measured slower or even
// and left off (docs/PERFORMANCE.md has the figures).
#pragma once

#include "kernels/gpt2_decode/device.cuh"
#include "kernels/gpt2_decode/split_rows.cuh"

namespace fl {
namespace gpt2 {

constexpr int kShareSlots = kHeads + 1;  // the twelve heads' shares, then the starting value
constexpr int kSharePairs = kC / 2;
static_assert(kLayers < 16, "a layer's flag fits four bits");

// Columns 2 * pair and 2 * pair + 1 of slot `slot`, with layer's flag.
__device__ __forceinline__ void publish_share(const DecodeArgs& a, int layer, int slot, int pair,
                                              float v0, float v1) {
  const unsigned long long w = (static_cast<unsigned long long>(layer + 1) << 60) |
                               (static_cast<unsigned long long>(__float_as_uint(v0) >> 2) << 30) |
                               (__float_as_uint(v1) >> 2);
  st_relaxed(a.shares + slot * kSharePairs + pair, w);
}
__device__ __forceinline__ float share_high(unsigned long long w) {
  return __uint_as_float(unsigned((w >> 30) & 0x3fffffffull) << 2);
}
__device__ __forceinline__ float share_low(unsigned long long w) {
  return __uint_as_float(unsigned(w & 0x3fffffffull) << 2);
}

__device__ __forceinline__ void ld_relaxed2(const unsigned long long* p, unsigned long long& lo,
                                            unsigned long long& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];"
               : "=l"(lo), "=l"(hi)
               : "l"(p)
               : "memory");
#else
  lo = ld_relaxed(p), hi = ld_relaxed(p + 1);
#endif
}

// The sentinels first (MegakernelOptions::proj_shares 2): loaders 0-47 each spin on one word
// of one proj task's share (its last pair) until it carries the layer's flag, then the block
// meets; so the block spins on 48 words, not on every one of the 4992 while proj still runs. A
// sentinel orders nothing (relaxed stores): the loads after it still check every word.
__device__ inline void await_sentinels(const DecodeArgs& a, unsigned flag, int li) {
  constexpr int kTasks = kHeads * kProjParts, kTaskPairs = kProjRows / 2;
  if (li >= 0 && li < kTasks) {
    const unsigned long long* w =
        a.shares + (li / kProjParts) * kSharePairs + (li % kProjParts + 1) * kTaskPairs - 1;
    while (unsigned(ld_relaxed(w) >> 60) != flag) {
    }
  }
  __syncthreads();
}

// The same row with 16-byte loads (proj_shares 2): loader q < 192 takes columns 4q..4q+3 of
// every slot, 13 loads of two words, and loads a pair again while either of its words is stale.
__device__ inline void load_share_quads(const DecodeArgs& a, unsigned flag, int li, float* x,
                                        float* proj) {
  constexpr int kQuads = kC / 4;
  if (li < 0 || li >= kQuads) return;
  unsigned long long w[kShareSlots][2];
#pragma unroll
  for (int s = 0; s < kShareSlots; ++s)
    ld_relaxed2(a.shares + s * kSharePairs + 2 * li, w[s][0], w[s][1]);
  bool stale = false;
  do {
    stale = false;
#pragma unroll
    for (int s = 0; s < kShareSlots; ++s)
      if (unsigned(w[s][0] >> 60) != flag || unsigned(w[s][1] >> 60) != flag) {
        ld_relaxed2(a.shares + s * kSharePairs + 2 * li, w[s][0], w[s][1]);
        stale = true;
      }
  } while (stale);
  float sum[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int s = 0; s < kHeads; ++s) {
    sum[0] += share_high(w[s][0]), sum[1] += share_low(w[s][0]);
    sum[2] += share_high(w[s][1]), sum[3] += share_low(w[s][1]);
  }
  const float start[4] = {share_high(w[kHeads][0]), share_low(w[kHeads][0]),
                          share_high(w[kHeads][1]), share_low(w[kHeads][1])};
#pragma unroll
  for (int c = 0; c < 4; ++c) proj[4 * li + c] = sum[c], x[4 * li + c] = start[c] + sum[c];
}

// The MLP task's LayerNorm row, from the words: x (C floats, shared memory) = start + the twelve
// shares, proj (C floats, shared memory) = the shares' sum. Warps 1-7 load; thread 0 waits for
// `counter` (or nothing, null); with sentinels (proj_shares 2) the loaders spin on 48 words
// first, then load 16 bytes at a time. Ends with a barrier.
__device__ inline void await_shares(const DecodeArgs& a, int layer, float* x, float* proj,
                                    const unsigned* counter, unsigned target) {
  constexpr int kPerLoader = 2;  // pairs a loading thread takes (2 x 224 >= 384)
  static_assert(kPerLoader * kLoaders >= kSharePairs, "one pass");
  const unsigned flag = unsigned(layer + 1);
  if (counter != nullptr && threadIdx.x == 0) wait_count(counter, target, false);
  const int li = int(threadIdx.x) - 32;
  if (a.shares_sentinels) {
    await_sentinels(a, flag, li);
    load_share_quads(a, flag, li, x, proj);
  } else if (li >= 0) {
    unsigned long long w[kPerLoader][kShareSlots];
#pragma unroll
    for (int k = 0; k < kPerLoader; ++k)
#pragma unroll
      for (int s = 0; s < kShareSlots; ++s) {
        const int p = li + k * kLoaders;
        w[k][s] = p < kSharePairs ? ld_relaxed(a.shares + s * kSharePairs + p)
                                  : static_cast<unsigned long long>(flag) << 60;
      }
    bool stale = false;
    do {  // every stale word loaded again, together
      stale = false;
#pragma unroll
      for (int k = 0; k < kPerLoader; ++k)
#pragma unroll
        for (int s = 0; s < kShareSlots; ++s)
          if (unsigned(w[k][s] >> 60) != flag) {
            w[k][s] = ld_relaxed(a.shares + s * kSharePairs + li + k * kLoaders);
            stale = true;
          }
    } while (stale);
#pragma unroll
    for (int k = 0; k < kPerLoader; ++k) {
      const int p = li + k * kLoaders;
      if (p >= kSharePairs) break;
      float s0 = 0.f, s1 = 0.f;
#pragma unroll
      for (int s = 0; s < kHeads; ++s) s0 += share_high(w[k][s]), s1 += share_low(w[k][s]);
      proj[2 * p] = s0, proj[2 * p + 1] = s1;
      x[2 * p] = share_high(w[k][kHeads]) + s0, x[2 * p + 1] = share_low(w[k][kHeads]) + s1;
    }
  }
  __syncthreads();
}

// LayerNorm of one row in shared memory (src, C floats) into dst, by warp 0 (layernorm_rows'
// sums in its order: six float4 a lane, two passes).
__device__ inline void layernorm_shared_row(const float* src, const bf16* g, const bf16* b,
                                            float* dst) {
  const int lane = threadIdx.x & 31;
  if (threadIdx.x >= 32) return;
  float4 v[6];
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < 6; ++i) {
    v[i] = reinterpret_cast<const float4*>(src)[lane + 32 * i];
    sum += v[i].x + v[i].y + v[i].z + v[i].w;
  }
  const float mean = warp_sum(sum) * (1.0f / kC);
  float var = 0.f;
#pragma unroll
  for (int i = 0; i < 6; ++i) {
    const float dx = v[i].x - mean, dy = v[i].y - mean, dz = v[i].z - mean, dw = v[i].w - mean;
    var += dx * dx + dy * dy + dz * dz + dw * dw;
  }
  const float rstd = rsqrtf(warp_sum(var) * (1.0f / kC) + float(kLnEps));
#pragma unroll
  for (int i = 0; i < 6; ++i) {
    const uint2 gv = reinterpret_cast<const uint2*>(g)[lane + 32 * i];
    const uint2 bv = reinterpret_cast<const uint2*>(b)[lane + 32 * i];
    const float2 g01 = unpack2(gv.x), g23 = unpack2(gv.y), b01 = unpack2(bv.x), b23 = unpack2(bv.y);
    float4 out;
    out.x = (v[i].x - mean) * rstd * g01.x + b01.x;
    out.y = (v[i].y - mean) * rstd * g01.y + b01.y;
    out.z = (v[i].z - mean) * rstd * g23.x + b23.x;
    out.w = (v[i].w - mean) * rstd * g23.y + b23.y;
    reinterpret_cast<float4*>(dst)[lane + 32 * i] = out;
  }
}

// The MLP task's prologue with proj's shares (t = 1): act[0, C) its LayerNorm's row; act's
// next 2C floats hold x and the shares' sum. The task of MLP rows [first, first + count) adds
// the sum's columns [first / 4, (first + count) / 4) into layer's next residual (warps 1-7,
// while warp 0 normalizes).
__device__ inline void shares_prologue(const DecodeArgs& a, int layer, const bf16* g, int first,
                                       int count, float* act, const unsigned* counter,
                                       unsigned target) {
  static_assert(kF == 4 * kC, "an MLP slice's columns: its rows / 4");
  float* x = act + kC;
  float* proj = act + 2 * kC;
  await_shares(a, layer, x, proj, counter, target);
  layernorm_shared_row(x, g, g + kC, act);
  float* x_next = x_mlp_of(a, layer);
  for (int n = first / 4 + int(threadIdx.x) - 32; threadIdx.x >= 32 && n < (first + count) / 4;
       n += kThreads - 32)
    atomicAdd(x_next + spread_at(a, n), proj[n]);
}

}  // namespace gpt2
}  // namespace fl
