// The four matrix ops of a GPT-2 block (qkv, proj, fc, out) as linear_slice sees them (device.cuh):
// each names its matrix, its prologue (how activations reach shared memory: LayerNorm, the
// attention splits combined, a copy) and its epilogue (bias, GELU, residual, the cache append).
// The fused kernels (fused.cu) run them a block per eight rows; the megakernel's tasks
// (megakernel.cu) a slice per task, with their small parameters in shared memory; mlp_down is
// the megakernel MLP task's second half.
#pragma once

#include "kernels/device_common.cuh"
#include "kernels/gpt2_decode/device.cuh"
#include "kernels/gpt2_decode/split_rows.cuh"

namespace fl {
namespace gpt2 {

// Where a product finds its small parameters: in the weights (global memory) by default; the
// megakernel copies them into shared memory with the task's weights, while it waits.
struct SmallParams {
  const bf16* gamma = nullptr;  // LayerNorm's gamma, then beta (C each)
  const bf16* bias = nullptr;   // bias rows [first, first + count)
  const bf16* bias2 = nullptr;  // proj: b_out rows [first, first + count)
  int first = 0;
};

// ---- the four matrix ops of a block -----------------------------------------------------------
// Each names its matrix (weights), its input length K and output rows N, its prologue and its
// epilogue; the fused kernels and the megakernel's tasks run them through linear_slice.

// A product's bias for output row n, and its LayerNorm's gamma (beta follows at + C).
__device__ __forceinline__ float bias_of(const DecodeArgs& a, int layer, const SmallParams& p,
                                         int64_t at, int n) {
  return to_f(p.bias != nullptr ? p.bias[n - p.first] : layer_weights(a, layer)[at + n]);
}
__device__ __forceinline__ const bf16* gamma_of(const DecodeArgs& a, int layer,
                                                const SmallParams& p, int64_t at) {
  return p.gamma != nullptr ? p.gamma : layer_weights(a, layer) + at;
}

// The residuals' starting values a proj-by-head or fused-proj qkv task writes (model.h's
// kInitsResidual) for columns [c0, c1): x = x_in + bproj (proj's tasks add into it) and the
// layer's x_mlp = x + bout (proj's and the MLP's tasks add into it). bias: bproj's columns, then
// at kMaxSliceRows / 2 bout's (the task's small parameters, in shared memory). Token j's column
// n from its raw value v, stored after the task's product: from inside the LayerNorm prologue
// the stores made each bias read after them wait, and every qkv task's inputs took longer.
struct ResidualInit {
  DecodeArgs a;
  int layer, c0, c1;
  const bf16* bias;
  __device__ void store(int j, int n, float v) const {
    const float bp = to_f(bias[n - c0]), bo = to_f(bias[kMaxSliceRows / 2 + n - c0]);
    a.x[j * kC + n] = v + bp;
    x_mlp_of(a, layer)[spread_at(a, j * kC + n)] = v + bp + bo;
  }
};
// The columns a qkv task of rows [first, first + count) initializes (even bounds).
__host__ __device__ __forceinline__ int init_column(int row) {
  return 2 * (row / 6);
}

struct QkvOp {  // q, k, v = LN1(x) Wqkv + bqkv; k and v appended to the cache
  static constexpr int kK = kC, kN = 3 * kC;
  DecodeArgs a;
  int layer;
  SmallParams p{};
  int init_rows = 0;  // a proj-by-head or fused-proj step's qkv slice: its rows (ResidualInit)
  // The raw values of its starting values' columns, kept by the prologue in shared memory
  // (keep[(n - c0) * t + j]) for store_starts() after the product; null: loaded again there
  // (where the slice's sums leave no room).
  float* keep = nullptr;
  __device__ ResidualInit init() const {
    return {a, layer, init_column(p.first), init_column(p.first + init_rows), p.bias2};
  }
  // Entry k of those raw values (column c0 + k / t, token k % t), from global memory.
  __device__ float raw_of(const ResidualInit& i, int k) const {
    return ld_cg(residual_in(a, layer) + spread_index((k % a.tokens) * kC + i.c0 + k / a.tokens,
                                                      residual_spread_in(a, layer)));
  }
  __device__ const bf16* weights() const { return layer_weights(a, layer) + LayerLayout::w_qkv; }
  __device__ void prologue(int j0, int tc, float* act) const {
    const bf16* g = gamma_of(a, layer, p, LayerLayout::ln1_g);
    if (init_rows > 0 && keep != nullptr) {  // the last warp's loads beside LayerNorm's rows'
      const ResidualInit i = init();
      for (int k = kThreads - 1 - threadIdx.x; k < (i.c1 - i.c0) * a.tokens; k += kThreads)
        keep[k] = raw_of(i, k);
    }
    layernorm_rows(residual_in(a, layer), g, g + kC, j0, tc, act, residual_copies_in(a, layer),
                   residual_stride(a), residual_spread_in(a, layer));
  }
  // The starting values (init_rows > 0), a thread per (column, token), after the epilogues.
  __device__ void store_starts() const {
    const ResidualInit i = init();
    for (int k = threadIdx.x; k < (i.c1 - i.c0) * a.tokens; k += kThreads)
      i.store(k % a.tokens, i.c0 + k / a.tokens, keep != nullptr ? keep[k] : raw_of(i, k));
  }
  // (With qkv words each value goes out as a flagged word too: split_rows.cuh.)
  __device__ void epilogue(int j, int n, float sum) const {
    const float v = sum + bias_of(a, layer, p, LayerLayout::b_qkv, n);
    if (n < kC) {
      a.q[j * kC + n] = v * 0.125f;  // 1 / sqrt(64)
      if (a.qkv_words != nullptr) publish_qkv(a, layer, j, n, v * 0.125f);
      return;
    }
    const int c = n % kC, head = c / kHeadDim, d = c % kHeadDim;
    bf16* cache = n < 2 * kC ? a.k_cache : a.v_cache;
    const int64_t at = (int64_t(layer) * kHeads + head) * a.positions() + a.cache + j;
    const bf16 b = __float2bfloat16_rn(v);
    cache[at * kHeadDim + d] = b;
    if (a.qkv_words != nullptr) publish_qkv(a, layer, j, n, __bfloat162float(b));
  }
};

// Attention's output for token rows [j0, j0 + tc): each head's splits combined (the split with
// the largest max sets the scale; a split that saw no key has sum 0 and adds nothing). Lane p
// holds split p's max and sum (at most 32 splits), so every load of an item is issued at once.
__device__ inline void combine_heads(const DecodeArgs& a, int j0, int tc, float* act) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int item = warp; item < tc * kHeads; item += kWarps) {
    const int jj = item / kHeads, head = item % kHeads;
    const float* part = a.partials + (int64_t(j0 + jj) * kHeads + head) * a.splits * kPartStride;
    float mp = -INFINITY, lp = 0.f;
    if (lane < a.splits) {
      mp = ld_cg(part + lane * kPartStride + 64);
      lp = ld_cg(part + lane * kPartStride + 65);
    }
    const float m = warp_max(mp);
    const float wp = lp > 0.f ? __expf(mp - m) : 0.f;
    const float l = warp_sum(wp * lp);
    float2 o = make_float2(0.f, 0.f);
#pragma unroll 4
    for (int p = 0; p < a.splits; ++p) {
      const float2 op = ld_cg(reinterpret_cast<const float2*>(part + p * kPartStride) + lane);
      const float w = __shfl_sync(0xffffffffu, wp, p);
      o.x += w * op.x;
      o.y += w * op.y;
    }
    act[jj * kC + head * kHeadDim + 2 * lane] = o.x / l;
    act[jj * kC + head * kHeadDim + 2 * lane + 1] = o.y / l;
  }
}

// The same combine with every load of an item in flight at once (the megakernel's option
// MegakernelOptions::batched_combine): a half-warp per (token, head) item, lane i holding dims
// 4i..4i+3 of o (16-byte loads) and the max and sum of splits i and i + 16, so the maxima, the
// sums and the partial o of kBatch splits are asked for together: one round trip to L2 where
// combine_heads takes one for the maxima, then one per four splits of o. The same sums in the
// same order as combine_heads (its butterfly's first step adds lanes i and i + 16 too).
// Heads [head0, head0 + heads) only, where one head is combined alone (the megakernel's head
// combine, into global memory: act may be any rows of C floats).
template <int kBatch = 16>
__device__ inline void combine_heads_batched(const DecodeArgs& a, int j0, int tc, float* act,
                                             int head0 = 0, int heads = kHeads) {
  const int hl = threadIdx.x & 15, half = threadIdx.x >> 4, splits = a.splits;
  constexpr int kHalves = kThreads / 16;
  const int items = tc * heads;
  for (int base = 0; base < items; base += kHalves) {  // the same trip count in every lane
    const int item = base + half;
    const bool on = item < items;
    const int jj = on ? item / heads : 0, head = head0 + item % heads;
    const float* part = a.partials + (int64_t(j0 + jj) * kHeads + head) * splits * kPartStride;
    float ms[2] = {-INFINITY, -INFINITY}, ls[2] = {0.f, 0.f};
    float4 o[kBatch];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int p = hl + 16 * u;
      if (on && p < splits) {
        ms[u] = ld_cg(part + p * kPartStride + 64);
        ls[u] = ld_cg(part + p * kPartStride + 65);
      }
    }
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    float m = -INFINITY, w[2] = {0.f, 0.f}, l = 0.f;
    for (int b = 0; b < splits; b += kBatch) {
#pragma unroll
      for (int p = 0; p < kBatch; ++p)
        o[p] = on && b + p < splits
                   ? ld_cg(reinterpret_cast<const float4*>(part + (b + p) * kPartStride) + hl)
                   : make_float4(0.f, 0.f, 0.f, 0.f);
      if (b == 0) {  // the weights, while the first batch of o is in flight
        m = fmaxf(ms[0], ms[1]);
        for (int s = 8; s > 0; s >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, s, 16));
#pragma unroll
        for (int u = 0; u < 2; ++u) w[u] = ls[u] > 0.f ? __expf(ms[u] - m) : 0.f;
        l = w[0] * ls[0] + w[1] * ls[1];
        for (int s = 8; s > 0; s >>= 1) l += __shfl_xor_sync(0xffffffffu, l, s, 16);
      }
#pragma unroll
      for (int p = 0; p < kBatch; ++p) {
        const int split = b + p;
        if (split >= splits) break;
        const float wp = __shfl_sync(0xffffffffu, split < 16 ? w[0] : w[1], split & 15, 16);
        acc.x += wp * o[p].x;
        acc.y += wp * o[p].y;
        acc.z += wp * o[p].z;
        acc.w += wp * o[p].w;
      }
    }
    if (on)
      reinterpret_cast<float4*>(act + jj * kC + head * kHeadDim)[hl] =
          make_float4(acc.x / l, acc.y / l, acc.z / l, acc.w / l);
  }
}

struct ProjOp {  // x = x + Attention Wproj + bproj (the megakernel: and x_mlp = x + b_out)
  static constexpr int kK = kC, kN = kC;
  DecodeArgs a;
  int layer;
  SmallParams p{};
  // The megakernel's batched form (MegakernelOptions::batched_combine): the slice's `rows` of
  // residual are loaded with the combine's partial sums and kept in shared memory at
  // `residual` ([row * t + token]), so the epilogue waits on no load.
  float* residual = nullptr;
  int rows = 0;
  bool combined = false;  // the heads were combined by attention's last splits: read a.att
  // This slice's residual from its copies (x_mlp's: residual_copies_in), loaded together.
  __device__ float residual_of(int j, int n) const {
    const float* src =
        residual_in(a, layer) + spread_index(j * kC + n, residual_spread_in(a, layer));
    float v[kMaxResidualCopies];
    const int copies = residual_copies_in(a, layer);
    if (copies == 1) return ld_cg(src);  // levels 0-3, block 0
#pragma unroll
    for (int c = 0; c < kMaxResidualCopies; ++c)
      v[c] = c < copies ? ld_cg(src + c * residual_stride(a)) : 0.f;
    float sum = v[0];
#pragma unroll
    for (int c = 1; c < kMaxResidualCopies; ++c) sum += v[c];
    return sum;
  }
  __device__ const bf16* weights() const {
    return layer_weights(a, layer) + LayerLayout::w_proj;
  }
  static_assert(chunk_tokens<kC>() >= kMaxTokens, "every token of proj in one chunk");
  __device__ void prologue(int j0, int tc, float* act) const {
    if (residual == nullptr && !combined) {
      combine_heads(a, j0, tc, act);
      return;
    }
    constexpr int kPerThread = kMaxSliceRows * kMaxTokens / kThreads;
    float r[kPerThread];
#pragma unroll
    for (int u = 0; u < kPerThread; ++u) {  // asked for before the combine's loads
      const int i = threadIdx.x + u * kThreads;
      r[u] =
          residual != nullptr && i < rows * tc ? residual_of(j0 + i % tc, p.first + i / tc) : 0.f;
    }
    if (combined) {  // the heads' outputs (t rows of C), every load in flight at once
      constexpr int kRowQuads = kC / 4, kMost = kMaxTokens * kRowQuads / kThreads;
      const float4* src = reinterpret_cast<const float4*>(a.att + int64_t(j0) * kC);
      float4 v[kMost];
#pragma unroll
      for (int u = 0; u < kMost; ++u) {
        const int i = threadIdx.x + u * kThreads;
        if (i < tc * kRowQuads) v[u] = ld_cg(src + i);
      }
#pragma unroll
      for (int u = 0; u < kMost; ++u) {
        const int i = threadIdx.x + u * kThreads;
        if (i < tc * kRowQuads) reinterpret_cast<float4*>(act)[i] = v[u];
      }
    } else {
      combine_heads_batched(a, j0, tc, act);
    }
    if (residual == nullptr) return;
#pragma unroll
    for (int u = 0; u < kPerThread; ++u)
      if (threadIdx.x + u * kThreads < rows * tc) residual[threadIdx.x + u * kThreads] = r[u];
  }
  __device__ void epilogue(int j, int n, float sum) const {
    const float b = bias_of(a, layer, p, LayerLayout::b_proj, n);
    const float in =
        residual != nullptr ? residual[(n - p.first) * a.tokens + j] : residual_of(j, n);
    const float x = in + sum + b;
    a.x[j * kC + n] = x;
    if (a.x_mlp != nullptr) {
      const float b_out =
          to_f(p.bias2 != nullptr ? p.bias2[n - p.first]
                                  : layer_weights(a, layer)[LayerLayout::b_out + n]);
      a.x_mlp[spread_at(a, j * kC + n)] = x + b_out;
      for (int c = 1; c < a.residual_copies; ++c)
        a.x_mlp[c * residual_stride(a) + spread_at(a, j * kC + n)] = 0.f;
    }
  }
};

struct FcOp {  // h = GELU(LN2(x) Wfc + bfc)
  static constexpr int kK = kC, kN = kF;
  DecodeArgs a;
  int layer;
  SmallParams p{};
  // The megakernel's MLP slice keeps its h in shared memory: h_slice[(n - p.first) * t + j].
  float* h_slice = nullptr;
  __device__ const bf16* weights() const { return layer_weights(a, layer) + LayerLayout::w_fc; }
  __device__ void prologue(int j0, int tc, float* act) const {
    const bf16* g = gamma_of(a, layer, p, LayerLayout::ln2_g);
    layernorm_rows(a.x, g, g + kC, j0, tc, act);
  }
  __device__ void epilogue(int j, int n, float sum) const {
    const float h = gelu(sum + bias_of(a, layer, p, LayerLayout::b_fc, n));
    if (h_slice != nullptr)
      h_slice[(n - p.first) * a.tokens + j] = h;
    else
      a.h[j * kF + n] = h;
  }
};

struct OutOp {  // x = x + h Wout + bout
  static constexpr int kK = kF, kN = kC;
  DecodeArgs a;
  int layer;
  __device__ const bf16* weights() const { return layer_weights(a, layer) + LayerLayout::w_out; }
  __device__ void prologue(int j0, int tc, float* act) const {
    const float4* src = reinterpret_cast<const float4*>(a.h + int64_t(j0) * kF);
    float4* dst = reinterpret_cast<float4*>(act);
    constexpr int kPerRow = kF / 4 / kThreads;  // 3 float4 a thread a token, loaded together
    for (int jj = 0; jj < tc; ++jj) {
      float4 v[kPerRow];
#pragma unroll
      for (int u = 0; u < kPerRow; ++u)
        v[u] = ld_cg(src + jj * (kF / 4) + u * kThreads + threadIdx.x);
#pragma unroll
      for (int u = 0; u < kPerRow; ++u) dst[jj * (kF / 4) + u * kThreads + threadIdx.x] = v[u];
    }
  }
  __device__ void epilogue(int j, int n, float sum) const {
    const float b = to_f(layer_weights(a, layer)[LayerLayout::b_out + n]);
    a.x[j * kC + n] = ld_cg(a.x + j * kC + n) + sum + b;
  }
};

// red_add4: kernels/device_common.cuh.

// The MLP task's second half: its `count` rows of h (h[r * t + j], shared memory) times the same
// rows of Wout transposed (w: row r's C outputs at w + r * C; shared memory, or global memory on
// grids too small for the slice to fit) added into x_mlp (or the copy of it at `out`). A thread
// per 4 outputs (8-byte loads, consecutive threads on consecutive words: no bank conflicts), a
// vector red per token.
__device__ __forceinline__ void mlp_down(const DecodeArgs& a, const bf16* w, int count,
                                         const float* h, float* out) {
  const int t = a.tokens;
  for (int q = threadIdx.x; q < kC / 4; q += kThreads) {
    float acc[kMaxTokens][4];
#pragma unroll
    for (int j = 0; j < kMaxTokens; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    for (int c = 0; c < count; c += 8) {
      float wf[8][4];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const uint2 v = *reinterpret_cast<const uint2*>(w + int64_t(c + e) * kC + 4 * q);
        const float2 w01 = unpack2(v.x), w23 = unpack2(v.y);
        wf[e][0] = w01.x, wf[e][1] = w01.y, wf[e][2] = w23.x, wf[e][3] = w23.y;
      }
#pragma unroll
      for (int j = 0; j < kMaxTokens; ++j) {
        if (j >= t) break;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float hv = h[(c + e) * t + j];
#pragma unroll
          for (int r = 0; r < 4; ++r) acc[j][r] += wf[e][r] * hv;
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kMaxTokens; ++j) {
      if (j >= t) break;
      red_add4(out + spread_at(a, j * kC + 4 * q), acc[j]);
    }
  }
}

}  // namespace gpt2
}  // namespace fl
