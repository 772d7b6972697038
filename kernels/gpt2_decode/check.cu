// The fp64 check of gpt2_decode on the GPU (what the live engine gates every level on): the
// decode step recomputed in double from the inputs, one plain kernel per op, then ||y - ref||.
// The step's own keys and values come from its own double q|k|v, not from the bf16 cache the
// kernels wrote, so the check measures the kernels' rounding too.
#include <cmath>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/gpt2_decode/launch.h"

namespace fl {
namespace gpt2 {
namespace {

__device__ double block_sum(double v, double* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  double r = 0;
  for (int w = 0; w < kWarps; ++w) r += red[w];
  return r;
}

__global__ void to_double_kernel(const float* in, double* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

// A block per row.
__global__ void ref_layernorm_kernel(const double* in, const bf16* g, const bf16* b, double* out) {
  __shared__ double red[kWarps];
  const double* row = in + int64_t(blockIdx.x) * kC;
  double s = 0;
  for (int c = threadIdx.x; c < kC; c += kThreads) s += row[c];
  const double mean = block_sum(s, red) / kC;
  double v = 0;
  for (int c = threadIdx.x; c < kC; c += kThreads) v += (row[c] - mean) * (row[c] - mean);
  const double rstd = 1.0 / sqrt(block_sum(v, red) / kC + kLnEps);
  for (int c = threadIdx.x; c < kC; c += kThreads)
    out[int64_t(blockIdx.x) * kC + c] =
        (row[c] - mean) * rstd * double(to_f(g[c])) + double(to_f(b[c]));
}

// out[j][n] = (resid ? resid[j][n] : 0) + act(in[j] . W[n] + bias[n]): a thread per output.
__global__ void ref_linear_kernel(const double* in, const bf16* w, const bf16* bias, int k, int n,
                                  int t, bool gelu_after, double* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= t * n) return;
  const int j = i / n, r = i % n;
  const bf16* row = w + int64_t(r) * k;
  double s = double(to_f(bias[r]));
  for (int c = 0; c < k; ++c) s += in[int64_t(j) * k + c] * double(to_f(row[c]));
  if (gelu_after) s = 0.5 * s * (1.0 + tanh(sqrt(2.0 / M_PI) * (s + 0.044715 * s * s * s)));
  out[i] = s;
}

__global__ void ref_add_kernel(double* x, const double* add, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += add[i];
}

// A block per (head, token): scores over the positions it sees, softmax, P V.
__global__ void ref_attention_kernel(DecodeArgs a, CheckScratch c, int layer) {
  __shared__ double red[kWarps];
  const int head = blockIdx.x, j = blockIdx.y, positions = a.positions(), seen = a.cache + j + 1;
  const double* q = c.qkv + int64_t(j) * 3 * kC + head * kHeadDim;
  const int64_t base = (int64_t(layer) * kHeads + head) * positions * kHeadDim;
  auto kv = [&](int which, int p, int d) {  // which 1: key, 2: value
    if (p >= a.cache)
      return c.qkv[int64_t(p - a.cache) * 3 * kC + which * kC + head * kHeadDim + d];
    return double(to_f((which == 1 ? a.k_cache : a.v_cache)[base + int64_t(p) * kHeadDim + d]));
  };
  double* sc = c.scores + (int64_t(j) * kHeads + head) * positions;
  double m = -INFINITY;
  for (int p = threadIdx.x; p < seen; p += kThreads) {
    double s = 0;
    for (int d = 0; d < kHeadDim; ++d) s += q[d] * kv(1, p, d);
    sc[p] = s / 8.0;
    m = fmax(m, sc[p]);
  }
  for (int o = 16; o > 0; o >>= 1) m = fmax(m, __shfl_xor_sync(0xffffffffu, m, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
  __syncthreads();
  for (int w = 0; w < kWarps; ++w) m = fmax(m, red[w]);
  double l = 0;
  for (int p = threadIdx.x; p < seen; p += kThreads) l += (sc[p] = exp(sc[p] - m));
  l = block_sum(l, red);
  __syncthreads();  // every thread's exp is stored
  if (threadIdx.x < kHeadDim) {
    double o = 0;
    for (int p = 0; p < seen; ++p) o += sc[p] * kv(2, p, threadIdx.x);
    c.att[int64_t(j) * kC + head * kHeadDim + threadIdx.x] = o / l;
  }
}

__global__ void compare_kernel(const float* y, const double* ref, int n, ErrorSums* sums) {
  ErrorPartial p;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p.add(y[i], ref[i]);
  block_accumulate(sums, p);
}

unsigned blocks_for(int total) {
  return static_cast<unsigned>((total + kThreads - 1) / kThreads);
}

}  // namespace

Status check_step(const DecodeArgs& a, const CheckScratch& c, ErrorSums* sums, cudaStream_t s) {
  const int t = a.tokens;
  to_double_kernel<<<blocks_for(t * kC), kThreads, 0, s>>>(a.x_in, c.x, t * kC);
  for (int layer = 0; layer < kLayers; ++layer) {
    const bf16* w = a.weights + int64_t(layer) * LayerLayout::size;
    ref_layernorm_kernel<<<t, kThreads, 0, s>>>(c.x, w + LayerLayout::ln1_g, w + LayerLayout::ln1_b,
                                                c.xn);
    ref_linear_kernel<<<blocks_for(t * 3 * kC), kThreads, 0, s>>>(
        c.xn, w + LayerLayout::w_qkv, w + LayerLayout::b_qkv, kC, 3 * kC, t, false, c.qkv);
    ref_attention_kernel<<<dim3(kHeads, t), kThreads, 0, s>>>(a, c, layer);
    ref_linear_kernel<<<blocks_for(t * kC), kThreads, 0, s>>>(
        c.att, w + LayerLayout::w_proj, w + LayerLayout::b_proj, kC, kC, t, false, c.xn);
    ref_add_kernel<<<blocks_for(t * kC), kThreads, 0, s>>>(c.x, c.xn, t * kC);
    ref_layernorm_kernel<<<t, kThreads, 0, s>>>(c.x, w + LayerLayout::ln2_g, w + LayerLayout::ln2_b,
                                                c.xn);
    ref_linear_kernel<<<blocks_for(t * kF), kThreads, 0, s>>>(
        c.xn, w + LayerLayout::w_fc, w + LayerLayout::b_fc, kC, kF, t, true, c.h);
    ref_linear_kernel<<<blocks_for(t * kC), kThreads, 0, s>>>(
        c.h, w + LayerLayout::w_out, w + LayerLayout::b_out, kF, kC, t, false, c.xn);
    ref_add_kernel<<<blocks_for(t * kC), kThreads, 0, s>>>(c.x, c.xn, t * kC);
    FL_CUDA_TRY(cudaGetLastError());
  }
  ref_layernorm_kernel<<<t, kThreads, 0, s>>>(c.x, a.weights + kFinalLnG,
                                              a.weights + kFinalLnG + kC, c.y);
  compare_kernel<<<blocks_for(t * kC), kThreads, 0, s>>>(a.y, c.y, t * kC, sums);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpt2
}  // namespace fl
