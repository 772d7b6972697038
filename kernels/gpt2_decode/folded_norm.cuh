// The one-token megakernel's qkv and MLP products with their LayerNorm folded into the dot
// products (kOneTokenFoldNorm; megakernel.cu, run_task.cuh). The form it replaces: warp 0 loads
// the residual row, reduces its mean, then its variance (two five-level butterflies one after
// the other), writes the normalized row to shared memory, and only after the block's barrier do
// the eight warps start their products. Here the statistics ride along with the products:
//   y_n = rstd * (sum_k W_nk g_k x_k - mean * sum_k W_nk g_k) + sum_k W_nk b_k + bias_n,
// with the model's own W, gamma (g) and beta (b) in shared memory as before (nothing folded on
// the host). While warp 0's loads of the raw row are on their way from L2, every warp holds its
// rows of W in registers and reduces sum W g and sum W b (W's and LayerNorm's bytes are in shared
// memory by then). After the barrier each warp reads the raw row, sums x and x^2 with its own
// products (mean and E[x^2] - mean^2: one butterfly for the rows and both statistics), and
// writes the normalized sums for the epilogues.
// Tiles and data path: a warp's rows of W (at most kRows a pass, 8 bf16 a lane a step, K / 256
// steps) in registers; the row of C floats in shared memory (3 KB, read by every warp); gamma and
// beta read twice from shared memory (before and after the barrier). Per task at 24 rows:
// 36 KB of W and 3 KB of gamma and beta from shared memory, 3 KB of the residual from L2 (one
// warp); 3 x 2 x 24 x 768 FLOP (the two constant sums and the product), against 24 x 768 x 2
// before; the critical path after the row lands loses two butterflies and the normalization.
#pragma once

#include "kernels/gpt2_decode/device.cuh"

namespace fl {
namespace gpt2 {

// Eight bf16 (16 bytes, 8-byte aligned) at p as floats.
__device__ __forceinline__ void load8_bf16(const bf16* p, float (&f)[8]) {
  const uint2 lo = reinterpret_cast<const uint2*>(p)[0], hi = reinterpret_cast<const uint2*>(p)[1];
  const float2 a = unpack2(lo.x), b = unpack2(lo.y), c = unpack2(hi.x), d = unpack2(hi.y);
  f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y, f[4] = c.x, f[5] = c.y, f[6] = d.x, f[7] = d.y;
}

// Eight weights of a row (one int4 of WeightRow) as floats.
__device__ __forceinline__ void unpack8(const int4& w, float (&f)[8]) {
  const float2 a = unpack2(w.x), b = unpack2(w.y), c = unpack2(w.z), d = unpack2(w.w);
  f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y, f[4] = c.x, f[5] = c.y, f[6] = d.x, f[7] = d.y;
}

// A warp's pass of rows r0, r0 + 8, ...: W into registers, and sum W g and sum W b of each row
// (every lane holds the warp's sums).
template <int kRows, int K>
__device__ __forceinline__ void folded_rows(const bf16* W, int r0, int count, const bf16* g,
                                            WeightRow<K> (&row)[kRows], float (&gw)[kRows],
                                            float (&bw)[kRows]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const int r = r0 + i * kWarps;
    if (r < count) {
      row[i].load(W + int64_t(r) * K, lane);
    } else {
#pragma unroll
      for (int v = 0; v < WeightRow<K>::kSteps; ++v) row[i].w[v] = make_int4(0, 0, 0, 0);
    }
    gw[i] = bw[i] = 0.f;
  }
#pragma unroll
  for (int v = 0; v < WeightRow<K>::kSteps; ++v) {
    float gf[8], bf[8];
    load8_bf16(g + (v * 32 + lane) * 8, gf);
    load8_bf16(g + kC + (v * 32 + lane) * 8, bf);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      float wf[8];
      unpack8(row[i].w[v], wf);
#pragma unroll
      for (int e = 0; e < 8; ++e) gw[i] += wf[e] * gf[e], bw[i] += wf[e] * bf[e];
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      gw[i] += __shfl_xor_sync(0xffffffffu, gw[i], o);
      bw[i] += __shfl_xor_sync(0xffffffffu, bw[i], o);
    }
}

// The slice's rows [first, first + count) for one token: Op (QkvOp, FcOp) names the raw row
// (raw_row(), raw_spread()) and LayerNorm's gamma (gamma_ptr(); beta at + C); its epilogues run
// a thread per sum as linear_slice's. act: the raw row (C floats) stays there for the caller.
template <int kRows, class Op, class AfterInputs, class AfterWeights>
__device__ __forceinline__ void linear_slice_folded(const Op& op, const bf16* W, int first,
                                                    int count, float* act, float* sums,
                                                    const AfterInputs& after_inputs,
                                                    const AfterWeights& after_weights) {
  constexpr int K = Op::kK, kSteps = WeightRow<K>::kSteps;
  static_assert(K == kC, "LayerNorm's row is the product's input");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const bf16* g = op.gamma_ptr();
  float4 x[2 * kSteps];  // warp 0: the raw row, a 32-byte sector a lane a step
  if (warp == 0) {
    const float* src = op.raw_row();
    const int spread = op.raw_spread();
#pragma unroll
    for (int v = 0; v < kSteps; ++v) {
      const float4* p =
          reinterpret_cast<const float4*>(src + spread_index((v * 32 + lane) * 8, spread));
      x[2 * v] = ld_cg(p);
      x[2 * v + 1] = ld_cg(p + 1);
    }
  }
  WeightRow<K> row[kRows];
  float gw[kRows], bw[kRows];
  folded_rows<kRows, K>(W, warp, count, g, row, gw, bw);  // (while the row is on its way)
  if (warp == 0) {
#pragma unroll
    for (int v = 0; v < kSteps; ++v) {
      reinterpret_cast<float4*>(act + (v * 32 + lane) * 8)[0] = x[2 * v];
      reinterpret_cast<float4*>(act + (v * 32 + lane) * 8)[1] = x[2 * v + 1];
    }
  }
  __syncthreads();
  probe_mark(op.a, kProbeInputs);
  after_inputs();
  for (int r0 = warp; r0 < count; r0 += kRows * kWarps) {
    if (r0 != warp) folded_rows<kRows, K>(W, r0, count, g, row, gw, bw);
    float s[kRows + 2] = {};  // the rows' sums of W g x, then sum x and sum x^2
#pragma unroll
    for (int v = 0; v < kSteps; ++v) {
      float gf[8], xf[8];
      load8_bf16(g + (v * 32 + lane) * 8, gf);
      const float4 a0 = *reinterpret_cast<const float4*>(act + (v * 32 + lane) * 8);
      const float4 a1 = *reinterpret_cast<const float4*>(act + (v * 32 + lane) * 8 + 4);
      xf[0] = a0.x, xf[1] = a0.y, xf[2] = a0.z, xf[3] = a0.w;
      xf[4] = a1.x, xf[5] = a1.y, xf[6] = a1.z, xf[7] = a1.w;
#pragma unroll
      for (int e = 0; e < 8; ++e) s[kRows] += xf[e], s[kRows + 1] += xf[e] * xf[e];
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        float wf[8];
        unpack8(row[i].w[v], wf);
#pragma unroll
        for (int e = 0; e < 8; ++e) s[i] += wf[e] * (gf[e] * xf[e]);
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int i = 0; i < kRows + 2; ++i) s[i] += __shfl_xor_sync(0xffffffffu, s[i], o);
    const float mean = s[kRows] * (1.0f / kC);
    const float var = fmaxf(s[kRows + 1] * (1.0f / kC) - mean * mean, 0.f);
    const float rstd = rsqrtf(var + float(kLnEps));
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int r = r0 + i * kWarps;
      if (lane == 0 && r < count) sums[r] = rstd * (s[i] - mean * gw[i]) + bw[i];
    }
  }
  __syncthreads();
  probe_mark(op.a, kProbeCompute);
  after_weights();
  finish_rows(op, 0, 1, first, count, sums);
}

}  // namespace gpt2
}  // namespace fl
