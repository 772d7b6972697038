// Level 0 of gpt2_decode: every op of a block its own launch, the way an eager framework runs a
// decode step. Per block: LayerNorm, the q|k|v product, its bias, appending k and v to the
// cache, attention as scores -> softmax -> P V (the scores round-trip through HBM), the
// projection, its bias, the residual add, LayerNorm, the MLP's up product, bias, GELU, down
// product, bias and residual add: 17 launches, 12 blocks, then LN_f (205 in all).
//
// Napkin math (t = 1, s = 512): the step must read 170 MB of weights and 2 x 12 x 512 x 768 x 2
// B = 18.9 MB of cache. The per-op chain adds only kilobytes of activation traffic; what it
// costs is 205 launches at a few microseconds each, and products that each fill the GPU for a
// moment and then drain: every launch boundary is a bubble with no weight in flight.
#include "kernels/cuda_check.h"
#include "kernels/gpt2_decode/launch.h"

namespace fl {
namespace gpt2 {
namespace {

__global__ void __launch_bounds__(kThreads)
    layernorm_kernel(const float* src, const bf16* g, const bf16* b, float* dst, int t) {
  grid_dependency_wait();
  layernorm_rows(src, g, b, 0, t, dst);
}

// out = in W^T for a K x N matrix stored [N][K]: eight rows a block, one a warp.
template <int K>
struct PlainOp {
  static constexpr int kK = K;
  DecodeArgs a;
  const float* in;
  float* out;
  int n;
  __device__ void prologue(int j0, int tc, float* act) const {
    for (int i = threadIdx.x; i < tc * K; i += kThreads) act[i] = ld_cg(in + int64_t(j0) * K + i);
  }
  __device__ void epilogue(int j, int row, float sum) const { out[int64_t(j) * n + row] = sum; }
};

template <int K>
__global__ void __launch_bounds__(kThreads) gemv_kernel(PlainOp<K> op, const bf16* W) {
  __shared__ __align__(16) float act[kActFloats];
  __shared__ float sums[kStaticSums ? kWarps * chunk_tokens<K>() : 1];
  const int first = blockIdx.x * kWarps;
  linear_slice<PlainOp<K>, kStaticSums>(op, W + int64_t(first) * K, first,
                                        min(kWarps, op.n - first), act, sums);
}

__global__ void add_bias_kernel(float* buf, const bf16* bias, int n, int total) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total) buf[i] += to_f(bias[i % n]);
}

__global__ void gelu_kernel(float* buf, int total) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total) buf[i] = gelu(buf[i]);
}

__global__ void residual_kernel(float* x, const float* src, const float* add, int total) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total) x[i] = src[i] + add[i];
}

__global__ void kv_append_kernel(DecodeArgs a, int layer) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;  // over t x 2C
  if (i >= a.tokens * 2 * kC) return;
  const int j = i / (2 * kC), n = i % (2 * kC), c = n % kC;
  bf16* cache = n < kC ? a.k_cache : a.v_cache;
  const int64_t at = (int64_t(layer) * kHeads + c / kHeadDim) * a.positions() + a.cache + j;
  cache[at * kHeadDim + c % kHeadDim] = __float2bfloat16_rn(a.qkv[int64_t(j) * 3 * kC + kC + n]);
}

// scores[j][head][p] = q . k_p / 8, -inf where p > s + j: a block per (head, token).
__global__ void __launch_bounds__(kThreads) scores_kernel(DecodeArgs a, int layer) {
  const int head = blockIdx.x, j = blockIdx.y, positions = a.positions();
  __shared__ float q[kHeadDim];
  if (threadIdx.x < kHeadDim)
    q[threadIdx.x] = a.qkv[int64_t(j) * 3 * kC + head * kHeadDim + threadIdx.x];
  __syncthreads();
  const bf16* keys = a.k_cache + (int64_t(layer) * kHeads + head) * positions * kHeadDim;
  float* out = a.scores + (int64_t(j) * kHeads + head) * positions;
  for (int p = threadIdx.x; p < positions; p += kThreads) {
    const int4* k = reinterpret_cast<const int4*>(keys + int64_t(p) * kHeadDim);
    float s = 0;
#pragma unroll
    for (int v = 0; v < kHeadDim / 8; ++v) {
      const int4 w = k[v];
      const float2 k0 = unpack2(w.x), k1 = unpack2(w.y), k2 = unpack2(w.z), k3 = unpack2(w.w);
      const float* qq = q + v * 8;
      s += qq[0] * k0.x + qq[1] * k0.y + qq[2] * k1.x + qq[3] * k1.y + qq[4] * k2.x + qq[5] * k2.y +
           qq[6] * k3.x + qq[7] * k3.y;
    }
    out[p] = p <= a.cache + j ? s * 0.125f : -INFINITY;
  }
}

__device__ float block_reduce(float v, bool is_max, float* red) {
  v = is_max ? warp_max(v) : warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < kWarps; ++w) r = is_max ? fmaxf(r, red[w]) : r + red[w];
  return r;
}

__global__ void __launch_bounds__(kThreads) softmax_kernel(DecodeArgs a) {
  __shared__ float red[kWarps];
  const int positions = a.positions();
  float* row = a.scores + (int64_t(blockIdx.y) * kHeads + blockIdx.x) * positions;
  float m = -INFINITY;
  for (int p = threadIdx.x; p < positions; p += kThreads) m = fmaxf(m, row[p]);
  m = block_reduce(m, true, red);
  float l = 0;
  for (int p = threadIdx.x; p < positions; p += kThreads) l += __expf(row[p] - m);
  l = block_reduce(l, false, red);
  for (int p = threadIdx.x; p < positions; p += kThreads) row[p] = __expf(row[p] - m) / l;
}

// att[j][head * 64 + d] = sum_p P[p] v_p[d]: four groups of 64 threads split the positions.
__global__ void __launch_bounds__(kThreads) pv_kernel(DecodeArgs a, int layer) {
  __shared__ float part[kThreads];
  const int head = blockIdx.x, j = blockIdx.y, positions = a.positions();
  const int d = threadIdx.x % kHeadDim, group = threadIdx.x / kHeadDim;
  const bf16* values = a.v_cache + (int64_t(layer) * kHeads + head) * positions * kHeadDim;
  const float* prob = a.scores + (int64_t(j) * kHeads + head) * positions;
  float o = 0;
  for (int p = group; p < positions; p += kThreads / kHeadDim)
    o += prob[p] * to_f(values[int64_t(p) * kHeadDim + d]);
  part[threadIdx.x] = o;
  __syncthreads();
  if (group == 0) {
    for (int g = 1; g < kThreads / kHeadDim; ++g) o += part[g * kHeadDim + d];
    a.att[int64_t(j) * kC + head * kHeadDim + d] = o;
  }
}

unsigned blocks_for(int total) {
  return static_cast<unsigned>((total + kThreads - 1) / kThreads);
}

}  // namespace

Status launch_layernorm(const DecodeArgs& a, int layer, Norm norm, cudaStream_t s, bool pdl) {
  const bf16* w = a.weights + int64_t(layer) * LayerLayout::size;
  const float* src = norm == Norm::ln1 && layer == 0 ? a.x_in : a.x;
  const bf16* g = norm == Norm::final_norm ? a.weights + kFinalLnG
                  : norm == Norm::ln1      ? w + LayerLayout::ln1_g
                                           : w + LayerLayout::ln2_g;
  float* dst = norm == Norm::final_norm ? a.y : a.xn;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(kThreads);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  FL_CUDA_TRY(cudaLaunchKernelEx(&cfg, layernorm_kernel, src, g, g + kC, dst, a.tokens));
  return Status::Ok();
}

Status launch_gemv(const DecodeArgs& a, int layer, Matrix m, cudaStream_t s) {
  const bf16* w = a.weights + int64_t(layer) * LayerLayout::size;
  switch (m) {
    case Matrix::qkv:
      gemv_kernel<kC>
          <<<3 * kC / kWarps, kThreads, 0, s>>>({a, a.xn, a.qkv, 3 * kC}, w + LayerLayout::w_qkv);
      break;
    case Matrix::proj:
      gemv_kernel<kC>
          <<<kC / kWarps, kThreads, 0, s>>>({a, a.att, a.tmp, kC}, w + LayerLayout::w_proj);
      break;
    case Matrix::fc:
      gemv_kernel<kC><<<kF / kWarps, kThreads, 0, s>>>({a, a.xn, a.h, kF}, w + LayerLayout::w_fc);
      break;
    case Matrix::out:
      gemv_kernel<kF><<<kC / kWarps, kThreads, 0, s>>>({a, a.h, a.tmp, kC}, w + LayerLayout::w_out);
      break;
  }
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

Status launch_add_bias(const DecodeArgs& a, int layer, Matrix m, cudaStream_t s) {
  const bf16* w = a.weights + int64_t(layer) * LayerLayout::size;
  float* buf = m == Matrix::qkv ? a.qkv : m == Matrix::fc ? a.h : a.tmp;
  const int n = m == Matrix::qkv ? 3 * kC : m == Matrix::fc ? kF : kC;
  const bf16* bias = w + (m == Matrix::qkv    ? LayerLayout::b_qkv
                          : m == Matrix::proj ? LayerLayout::b_proj
                          : m == Matrix::fc   ? LayerLayout::b_fc
                                              : LayerLayout::b_out);
  add_bias_kernel<<<blocks_for(a.tokens * n), kThreads, 0, s>>>(buf, bias, n, a.tokens * n);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

Status launch_gelu(const DecodeArgs& a, cudaStream_t s) {
  gelu_kernel<<<blocks_for(a.tokens * kF), kThreads, 0, s>>>(a.h, a.tokens * kF);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

Status launch_residual(const DecodeArgs& a, bool first, cudaStream_t s) {
  residual_kernel<<<blocks_for(a.tokens * kC), kThreads, 0, s>>>(a.x, first ? a.x_in : a.x, a.tmp,
                                                                 a.tokens * kC);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

Status launch_kv_append(const DecodeArgs& a, int layer, cudaStream_t s) {
  kv_append_kernel<<<blocks_for(a.tokens * 2 * kC), kThreads, 0, s>>>(a, layer);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

Status launch_attention_scores(const DecodeArgs& a, int layer, cudaStream_t s) {
  scores_kernel<<<dim3(kHeads, a.tokens), kThreads, 0, s>>>(a, layer);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

Status launch_attention_softmax(const DecodeArgs& a, cudaStream_t s) {
  softmax_kernel<<<dim3(kHeads, a.tokens), kThreads, 0, s>>>(a);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

Status launch_attention_pv(const DecodeArgs& a, int layer, cudaStream_t s) {
  pv_kernel<<<dim3(kHeads, a.tokens), kThreads, 0, s>>>(a, layer);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpt2
}  // namespace fl
