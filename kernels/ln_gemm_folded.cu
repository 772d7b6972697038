// LayerNorm-Linear's level 2 at thousands of tokens on Hopper (sm_90a): y = LN(x) W + b as one
// streamed wgmma GEMM (kernels/wgmma_gemm.cuh), with the LayerNorm folded into it.
//
// The fold. LN(x) W + b, written out for row x (mean mu, 1/std r) and column n:
//
//   y[n] = sum_k ((x[k] - mu) r gamma[k] + beta[k]) W[k][n] + b[n]
//        = r (sum_k x[k] W'[k][n]  -  mu s[n])  +  b'[n]
//
//   with W'[k][n] = gamma[k] W[k][n],  s[n] = sum_k W'[k][n],  b'[n] = sum_k beta[k] W[k][n] + b[n].
//
// W', s and b' depend on the weights alone: they are made once, when the weights are loaded
// (fold_layernorm_weights, the workspace's fill), as inference engines fold a LayerNorm's gamma
// and beta into the next layer. Per call, the kernel is then a plain GEMM on the raw x:
//
//   x  (HBM) --TMA 128 x 64 boxes-->  ring  --wgmma--> acc = x W'  (fp32 registers)
//   W' (L2)  --TMA 64 x 64 boxes--->        \--> while each x box sits in the ring, its rows'
//                                                sums and squares (the statistics: a prologue
//                                                spread over the K loop, read-only)
//   epilogue: y = r (acc - mu s) + b', rounded to bf16 once, stored from the registers.
//
//   * Tiles of 128 rows x 256 columns, 4 slots of 48 KB (wgmma_gemm.cuh); persistent blocks,
//     one per SM, walk the tiles row block by row block.
//   * Statistics: consumer thread t of warpgroup c owns half of tile row 64 c + t / 2: four of
//     the eight 16-byte chunks of that row in every x box (no bank conflicts: a quarter-warp
//     reads 4 rows' chunks, the swizzle spreads them). It sums x - shift and its square (shift:
//     the thread's first element, so a row far from 0 does not cancel), the two halves merge
//     with Chan's formula, and the epilogue's lanes fetch their rows' mean and 1/std by shuffle
//     (the rows a warp's accumulators hold are the rows the same warp measured).
//   * Why fold instead of normalizing each x box in shared memory as it lands: that was
//     measured (docs/PERFORMANCE.md, "streamed"): a warpgroup barrier and four shared-memory
//     round trips per slot between TMA and wgmma made it slower than the panel kernel. Folded,
//     nothing stands between a slot's arrival and its multiply.
//   * Precision: x W' is exact products summed in fp32; W' is rounded to bf16 once (as xn is in
//     the unfused chain); acc - mu s cancels only as much as the row's mean exceeds its spread.
//
// Budget at 16K tokens, C = 768 (K = 768, N = 2304): 2 M N K = 58 GFLOP (59 us at 989 TFLOP/s);
// HBM: x 25 MB + W' 3.5 MB + y 75 MB = 104 MB (34 us at 3.06 TB/s); L2 -> SM: each of the 9 tile
// columns reads x once and each of the 128 row blocks reads W' once: 226 + 453 = 679 MB.
#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/gemm_common.cuh"
#include "kernels/hopper.cuh"
#include "kernels/ln_gemm_wgmma.h"
#include "kernels/wgmma_gemm.cuh"

namespace fl {
namespace {

using bf16 = __nv_bfloat16;
namespace wg = wgmma_gemm;

// W'[k][n] = bf16(gamma[k] W[k][n]); s[n] = sum_k W'[k][n]; b'[n] = sum_k beta[k] W[k][n] + b[n].
// A thread per column, down K (coalesced across the warp's columns). Runs once per weights.
__global__ void fold_kernel(const bf16* __restrict__ gamma, const bf16* __restrict__ beta,
                            const bf16* __restrict__ w, const bf16* __restrict__ bias,
                            bf16* __restrict__ w_folded, float* __restrict__ colsum,
                            float* __restrict__ bias_folded, int k, int n) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= n) return;
  float s = 0.0f, b = 0.0f;
  for (int i = 0; i < k; ++i) {
    const float wv = __bfloat162float(w[int64_t(i) * n + col]);
    const bf16 folded = __float2bfloat16_rn(__bfloat162float(gamma[i]) * wv);
    w_folded[int64_t(i) * n + col] = folded;
    s += __bfloat162float(folded);
    b = fmaf(__bfloat162float(beta[i]), wv, b);
  }
  colsum[col] = s;
  bias_folded[col] = b + __bfloat162float(bias[col]);
}

struct FoldedArgs {
  const float *colsum, *bias;  // s and b' (n each)
  bf16* y;
  int64_t m;
  int k, n;
};

// One thread's share of a row's statistics: `count` elements, summed as x - shift.
struct RowShare {
  float shift = 0.0f, sum = 0.0f, squares = 0.0f;
  int count = 0;

  // The thread's four chunks of its row in the x box of K step ks (box row r of the tile).
  __device__ void add(const unsigned char* box, int r, int half, int ks, int k) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j = 4 * half + i;                  // chunk j: elements 8 j .. 8 j + 7 of the box
      if (ks * wg::kBK + 8 * j >= k) continue;    // past K: TMA's zeros, not the row's
      const uint4 raw = *reinterpret_cast<const uint4*>(box + r * 128 + ((j ^ (r % 8)) << 4));
      const bf16* e = reinterpret_cast<const bf16*>(&raw);
      if (count == 0) shift = __bfloat162float(e[0]);
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const float d = __bfloat162float(e[q]) - shift;
        sum += d;
        squares = fmaf(d, d, squares);
      }
      count += 8;
    }
  }
};

// The row's mean and 1/std from the two halves (this lane's and lane ^ 1's), Chan's formula.
__device__ __forceinline__ float2 row_statistics(const RowShare& s, int k) {
  const float n1 = static_cast<float>(s.count);
  const float mean1 = s.count ? s.shift + s.sum / n1 : 0.0f;
  const float m2_1 = s.count ? s.squares - s.sum * s.sum / n1 : 0.0f;
  const float n2 = __shfl_xor_sync(0xffffffffu, n1, 1);
  const float mean2 = __shfl_xor_sync(0xffffffffu, mean1, 1);
  const float m2_2 = __shfl_xor_sync(0xffffffffu, m2_1, 1);
  const float n = fmaxf(n1 + n2, 1.0f), delta = mean2 - mean1;
  const float mean = mean1 + delta * n2 / n;
  const float m2 = m2_1 + m2_2 + delta * delta * n1 * n2 / n;
  return make_float2(mean,
                     rsqrtf(fmaxf(m2, 0.0f) / k + static_cast<float>(gemm::kLayerNormEps)));
}

__global__ void __launch_bounds__(wg::kThreads, 1)
    ln_gemm_folded_kernel(const __grid_constant__ CUtensorMap x_map,
                          const __grid_constant__ CUtensorMap w_map, FoldedArgs a) {
#ifdef FL_SM90A_DEVICE
  extern __shared__ unsigned char shared_raw[];
  const wg::Ring ring = wg::make_ring(shared_raw);
  const int n_tiles = (a.n + wg::kBN - 1) / wg::kBN;
  const int tiles = static_cast<int>((a.m + wg::kBM - 1) / wg::kBM) * n_tiles;
  const int k_steps = (a.k + wg::kBK - 1) / wg::kBK;
  wg::Cursor at;

  if (wg::is_producer()) {
    wg::producer_registers();
    if (threadIdx.x != wg::kConsumerThreads) return;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      wg::produce_tile(ring, at, &x_map, &w_map, tile / n_tiles * wg::kBM,
                       tile % n_tiles * wg::kBN, k_steps);
    }
    return;
  }

  wg::consumer_registers();
  const int c = threadIdx.x / 128, t = threadIdx.x % 128, lane = threadIdx.x % 32;
  const int my_row = 64 * c + t / 2;  // the tile row whose statistics this thread takes
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t row0 = int64_t(tile / n_tiles) * wg::kBM;
    const int col0 = tile % n_tiles * wg::kBN;
    float acc[128];
    RowShare share;
    wg::consume_tile(ring, at, acc, k_steps, c, [&](const unsigned char* slot, int ks) {
      share.add(slot, my_row, t % 2, ks, a.k);
    });
    // Row q of the warp's 16 was measured by lanes 2 q and 2 q + 1; this lane's accumulators
    // hold rows lane / 4 and lane / 4 + 8.
    const float2 stats = row_statistics(share, a.k);
    float mean[2], rstd[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mean[h] = __shfl_sync(0xffffffffu, stats.x, 2 * (lane / 4) + 16 * h);
      rstd[h] = __shfl_sync(0xffffffffu, stats.y, 2 * (lane / 4) + 16 * h);
    }
    wg::for_each_pair(acc, c, [&](int h, int r, int col, float v0, float v1) {
      const int64_t row = row0 + r;
      if (row >= a.m || col0 + col >= a.n) return;  // n is even: col + 1 < n too
      const float2 s = *reinterpret_cast<const float2*>(a.colsum + col0 + col);
      const float2 b = *reinterpret_cast<const float2*>(a.bias + col0 + col);
      *reinterpret_cast<__nv_bfloat162*>(a.y + row * a.n + col0 + col) =
          __floats2bfloat162_rn(fmaf(rstd[h], fmaf(-mean[h], s.x, v0), b.x),
                                fmaf(rstd[h], fmaf(-mean[h], s.y, v1), b.y));
    });
  }
#endif
}

}  // namespace

Status fold_layernorm_weights(const __nv_bfloat16* gamma, const __nv_bfloat16* beta,
                              const __nv_bfloat16* w, const __nv_bfloat16* bias, int k, int n,
                              __nv_bfloat16* w_folded, float* colsum, float* bias_folded,
                              cudaStream_t stream) {
  fold_kernel<<<(n + 127) / 128, 128, 0, stream>>>(gamma, beta, w, bias, w_folded, colsum,
                                                   bias_folded, k, n);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

Status try_ln_gemm_folded(const __nv_bfloat16* x, const __nv_bfloat16* w_folded,
                          const float* colsum, const float* bias_folded, __nv_bfloat16* y,
                          int64_t m, int k, int n, int sms, cudaStream_t stream, bool* launched) {
  *launched = false;
  if (!ln_gemm_wgmma_built() || m < 1 || k % 8 != 0 || n % 8 != 0 || !w_folded) {
    return Status::Ok();
  }
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(w_folded) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(y) % 4 != 0) {
    return Status::Ok();
  }
  int device = 0, major = 0, minor = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (major != 9 || minor != 0 || wg::kSharedBytes > size_t(optin)) return Status::Ok();
  const int64_t tiles = (m + wg::kBM - 1) / wg::kBM * ((n + wg::kBN - 1) / wg::kBN);
  if (tiles > (int64_t(1) << 30)) return Status::Ok();

  CUtensorMap x_map, w_map;
  FL_TRY(hopper::make_tensor_map_2d(&x_map, x, m, k, wg::kBM, wg::kBK));
  FL_TRY(hopper::make_tensor_map_2d(&w_map, w_folded, k, n, wg::kBK, wg::kBoxN));
  FL_CUDA_TRY(cudaFuncSetAttribute(ln_gemm_folded_kernel,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(wg::kSharedBytes)));
  const FoldedArgs args{colsum, bias_folded, y, m, k, n};
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(tiles, sms));
  ln_gemm_folded_kernel<<<grid, wg::kThreads, wg::kSharedBytes, stream>>>(x_map, w_map, args);
  FL_CUDA_TRY(cudaGetLastError());
  *launched = true;
  return Status::Ok();
}

}  // namespace fl
