// Lesson 6's portable small-token rung: y = LN(x) W + b in one launch for 1 to 256 tokens on
// any GPU with cp.async (sm_80+; fp32 also on sm_70, with plain copies). No clusters, no TMA,
// no grid barrier, no partial sums.
//
// What changes against the panel kernel (layernorm_linear.cu: a block owns a column slice and
// all of K and walks K through a short cp.async ring): here the launch is cut into token chunks
// (16, 32 or 64 rows) x column slices sized so that the grid fills every SM once, and each block
// asks for its whole slice of W and its chunk of x at once (kernels/gemm_core/weight_slice.cuh):
//   1. x's rows and W's columns [n0, n0 + 8 nt) all in flight before any arithmetic;
//   2. x lands first: the warps normalize its rows in shared memory (one row a warp, sum and
//      sum of squares in one pass, then the normalized row rounded to the lesson's precision as
//      level 1's xn is) while W is still arriving;
//   3. the chunk times the slice, K split among the warps, y = sum + b written once.
// The plan (launch_typed) picks the chunk and the slice width that move the fewest bytes per
// block, counting a second wave as twice the bytes.
//
// Budget at C = 768, bf16: W = 3.5 MB from HBM (1.2 us at 3 TB/s). At 1-16 tokens: 96 blocks
// of 24 columns, 37 KB of W each, x a few KB. At 256 tokens: 4 chunks of 64 rows x 32 slices of
// 72 columns, 98 KB of x and 110 KB of W per block from L2 (27 MB in all; W from HBM once),
// 0.9 GFLOP on mma.sync.
#include "kernels/layernorm_linear/ln_linear_stream.h"
#include "kernels/layernorm_linear/ln_linear_stream_plan.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/gemm_core/weight_slice.cuh"
#include "kernels/layernorm_rows.cuh"

namespace fl {
namespace {

using slice::kThreads;
using slice::kWarps;

template <typename T>
struct LnStreamArgs {
  LnPlan p;
  const T *x, *gamma, *beta, *w, *bias;
  T* y;
  bool x_vec, w_vec;
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Step 2: the chunk's rows normalized in place, one row a warp: sum and sum of squares in one
// pass, then the normalized row; gamma and beta from shared memory (fp32). 16 bytes a lane and
// step where C is a multiple of 16 bytes, element by element otherwise.
template <typename T>
__device__ __forceinline__ void normalize_rows(const LnStreamArgs<T>& a, T* xs, int rows,
                                               const float* gamma, const float* beta) {
  constexpr int E = slice::kChunk<T>;
  const int c = a.p.c, lane = threadIdx.x & 31;
  const bool vec = c % E == 0;
  for (int r = threadIdx.x >> 5; r < rows; r += kWarps) {
    T* row = xs + r * a.p.ld_x;
    float sum = 0.0f, sq = 0.0f;
    if (vec) {
      for (int q = lane; q < c / E; q += 32) {
        const Vec16<T> v = load16(row + q * E);
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const float f = Elem<T>::to_float(v.v[e]);
          sum += f;
          sq = fmaf(f, f, sq);
        }
      }
    } else {
      for (int i = lane; i < c; i += 32) {
        const float f = Elem<T>::to_float(row[i]);
        sum += f;
        sq = fmaf(f, f, sq);
      }
    }
    const float mean = warp_sum(sum) / float(c);
    const float var = fmaxf(warp_sum(sq) / float(c) - mean * mean, 0.0f);
    const float rstd = rsqrtf(var + float(layernorm_rows::kEps));
    if (vec) {
      for (int q = lane; q < c / E; q += 32) {
        Vec16<T> v = load16(row + q * E);
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const int i = q * E + e;
          v.v[e] = Elem<T>::from_float(
              fmaf((Elem<T>::to_float(v.v[e]) - mean) * rstd, gamma[i], beta[i]));
        }
        store16(row + q * E, v);
      }
    } else {
      for (int i = lane; i < c; i += 32) {
        const float v = (Elem<T>::to_float(row[i]) - mean) * rstd;
        row[i] = Elem<T>::from_float(fmaf(v, gamma[i], beta[i]));
      }
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) ln_stream_kernel(LnStreamArgs<T> a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const LnPlan& p = a.p;
  T* xs = reinterpret_cast<T*>(smem);
  T* ws = reinterpret_cast<T*>(smem + p.off_w);
  const int chunk = blockIdx.x / p.slices, sl = blockIdx.x % p.slices;
  const int row0 = chunk * 16 * p.mtc, rows = min(16 * p.mtc, p.m - row0);
  const int n0 = sl * 8 * p.nt, cols = min(8 * p.nt, p.n - n0);
  slice::stage(xs, p.ld_x, a.x + int64_t(row0) * p.c, p.c, 16 * p.mtc, p.ck, rows, p.c, a.x_vec);
  tc::async_commit();
  slice::stage(ws, p.ld_w, a.w + n0, p.n, p.ck, 8 * p.nt, p.c, cols, a.w_vec);
  tc::async_commit();
  float* gamma = reinterpret_cast<float*>(smem + p.off_params);
  float* beta = gamma + p.c;
  float* bias = beta + p.c;
  for (int i = threadIdx.x; i < 2 * p.c + 8 * p.nt; i += kThreads) {
    const T* src = i < p.c       ? a.gamma + i
                   : i < 2 * p.c ? a.beta + i - p.c
                                 : a.bias + n0 + i - 2 * p.c;
    gamma[i] = i < 2 * p.c || i - 2 * p.c < cols ? Elem<T>::to_float(*src) : 0.0f;
  }
  tc::async_wait<1>();  // x
  __syncthreads();
  normalize_rows(a, xs, rows, gamma, beta);
  tc::async_wait<0>();  // W
  __syncthreads();
  slice::block_product<T, kLnStreamMaxNT>(
      xs, p.ld_x, ws, p.ld_w, p.ck, p.mtc, p.nt, reinterpret_cast<float*>(smem),
      [&](int r, int col, float s) {
        if (r < rows && col < cols) {
          a.y[int64_t(row0 + r) * p.n + n0 + col] = Elem<T>::from_float(s + bias[col]);
        }
      });
}

template <typename T>
Status make_plan(int64_t m, int64_t c, int64_t n, LnPlan* out) {
  int device = 0, sms = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (ln_choose_plan(m, c, n, int(sizeof(T)), sms, optin, out)) return Status::Ok();
  return Status::Unsupported("the portable LayerNorm-Linear at C = " + std::to_string(c) +
                             " needs more shared memory per block than this GPU offers (" +
                             std::to_string(optin) + " bytes)");
}

template <typename T>
Status launch_typed(const LnStreamBuffers& b, int64_t m, int64_t c, int64_t n,
                    cudaStream_t stream) {
  LnStreamArgs<T> a{};
  FL_TRY(make_plan<T>(m, c, n, &a.p));
  constexpr int E = slice::kChunk<T>;
  auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  a.x = static_cast<const T*>(b.x);
  a.gamma = static_cast<const T*>(b.gamma);
  a.beta = static_cast<const T*>(b.beta);
  a.w = static_cast<const T*>(b.w);
  a.bias = static_cast<const T*>(b.bias);
  a.y = static_cast<T*>(b.y);
  a.x_vec = c % E == 0 && aligned(b.x);
  a.w_vec = n % E == 0 && aligned(b.w);
  const auto kernel = ln_stream_kernel<T>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(a.p.smem)));
  kernel<<<a.p.blocks, kThreads, a.p.smem, stream>>>(a);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

Status ln_stream_supported(Precision p, int64_t m, int64_t c) {
  if (m < 1 || m > kLnStreamMaxTokens) {
    return Status::Unsupported("the portable small-token LayerNorm-Linear takes 1 to " +
                               std::to_string(kLnStreamMaxTokens) + " tokens, got " +
                               std::to_string(m));
  }
  if (c < 1) return Status::Error("the portable LayerNorm-Linear needs C >= 1");
  int device = 0, major = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (p == Precision::bf16 && major < 8) {
    return Status::Unsupported(
        "the portable LayerNorm-Linear's bf16 path needs compute capability 8.0 (mma.sync)");
  }
  LnPlan plan;
  return p == Precision::bf16 ? make_plan<__nv_bfloat16>(m, c, 3 * c, &plan)
                              : make_plan<float>(m, c, 3 * c, &plan);
}

Status ln_stream_scratch_bytes(Precision, int64_t, int64_t, int64_t, size_t* bytes) {
  *bytes = 0;  // nothing kept between blocks
  return Status::Ok();
}

Status launch_ln_stream(Precision p, const LnStreamBuffers& b, int64_t m, int64_t c, int64_t n,
                        cudaStream_t stream) {
  FL_TRY(ln_stream_supported(p, m, c));
  return p == Precision::bf16 ? launch_typed<__nv_bfloat16>(b, m, c, n, stream)
                              : launch_typed<float>(b, m, c, n, stream);
}

}  // namespace fl
