// The LayerNorm-Linear's level 2 on any GPU at any shape (the level table's last row: it runs
// where nothing else can, fp32 at many tokens included): ln_gemm_bias_kernel, the tile kernel.
//
// What changes against level 1 (lesson 4's LayerNorm kernel, then a cuBLASLt GEMM with the bias
// epilogue): one kernel on our tensor-core core (kernels/tensor_gemm.cuh); the LayerNorm moves
// into the GEMM's prologue, so xn never exists in HBM. A block owns a BM x BN tile of y:
//   1. prologue: the warps compute the mean and 1/std of the block's BM rows of x (all rows'
//      loads in flight at once; per-lane moments merged with Chan's formula), into shared memory,
//      while the first K-tiles are already on their way;
//   2. main loop: cp.async brings x and W tiles into the shared-memory ring; as an x tile lands,
//      each thread normalizes the chunks it copied, in place, (x - mean) * rstd * gamma + beta,
//      rounded to the lesson's precision as level 0's xn would be; then the warps multiply;
//   3. epilogue: y = acc + b, one rounding, stored straight from the accumulators.
// Tiles, by token count:
//   up to 16 tokens: 16 x 32 with 2 multiplying warps of 8, 128-byte K-tiles, 8 stages (28 KB of
//                    W in flight per block, 72 blocks at C = 768);
//   fewer 128 x 128 tiles than SMs: 64 x 32 with 4 multiplying warps of 8, 128-byte K-tiles,
//                    6 stages;
//   otherwise:       128 x 128 with 8 warps (64 x 32 each), 64-byte K-tiles, 4 stages.
// Budget: HBM moves x, W and y once (xn's 2 x M x C x b saved: 50 MB in bf16 at 16K tokens). The
// price: each block reads its x rows once more for the statistics (from L2: the main loop reads
// the same rows), N / BN times over the whole GEMM: 18 x 25 MB of L2 reads at 16K tokens.
#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cuda_check.h"
#include "kernels/gemm_common.cuh"
#include "kernels/layernorm_linear/ln_common.cuh"
#include "kernels/phases.cuh"
#include "kernels/tensor_gemm.cuh"

namespace fl::layernorm_linear {
namespace {

using LnGemmTiny = tc::TileConfig<16, 32, 1, 2, 8, 128, 256>;
using LnGemmSmall = tc::TileConfig<64, 32, 2, 2, 6, 128, 256>;
using LnGemmBig = tc::TileConfig<128, 128, 2, 4, 4>;

template <typename T, class Cfg, bool kVectorized>
__global__ void __launch_bounds__(Cfg::kThreads)
    ln_gemm_bias_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                        const T* __restrict__ beta, const T* __restrict__ w,
                        const T* __restrict__ bias, T* __restrict__ y, int64_t m, int k, int n,
                        PhaseSink phases) {
  PhaseMarks<kTileStore + 1> marks(phases);
  extern __shared__ __align__(16) unsigned char smem[];
  T* ring = reinterpret_cast<T*>(smem);
  float* s_mean = reinterpret_cast<float*>(smem + tc::ring_bytes<T, Cfg>());
  float* s_rstd = s_mean + Cfg::kBM;
  float* s_gamma = s_rstd + Cfg::kBM;  // k of each, as fp32: the normalization reads them
  const int k_padded = (k + tc::kBK<T, Cfg> - 1) / tc::kBK<T, Cfg> * tc::kBK<T, Cfg>;
  float* s_beta = s_gamma + k_padded;  // from shared memory, never from HBM inside the loop
  const int64_t m0 = int64_t(blockIdx.y) * Cfg::kBM, n0 = int64_t(blockIdx.x) * Cfg::kBN;

  // Normalizes, in place, the 16-byte chunks of a landed x tile that this thread copied:
  // one 16-byte shared load and store per chunk, gamma and beta read as fp32 from shared memory.
  auto normalize = [&](T* tile, int ld, int64_t k0) {
    constexpr int E = tc::kVec<T>, kChunksPerRow = tc::kBK<T, Cfg> / E;
#pragma unroll
    for (int i = threadIdx.x; i < Cfg::kBM * kChunksPerRow; i += Cfg::kThreads) {
      const int r = i / kChunksPerRow, c = (i % kChunksPerRow) * E;
      const float rstd = s_rstd[r], shift = -s_mean[r] * rstd;  // xn = x rstd - mean rstd
      Vec16<T>* p = reinterpret_cast<Vec16<T>*>(tile + r * ld + c);
      Vec16<T> v = *p;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int64_t kk = k0 + c + e;  // gamma and beta are zero past k: so is the result
        const float xn = fmaf(Elem<T>::to_float(v.v[e]), rstd, shift);
        v.v[e] = Elem<T>::from_float(fmaf(xn, s_gamma[kk], s_beta[kk]));
      }
      *p = v;
    }
  };
  // The statistics (and gamma, beta) load while the first K-tiles are already in flight.
  auto statistics = [&]() {
    for (int i = threadIdx.x; i < k_padded; i += Cfg::kThreads) {
      s_gamma[i] = i < k ? Elem<T>::to_float(gamma[i]) : 0.0f;
      s_beta[i] = i < k ? Elem<T>::to_float(beta[i]) : 0.0f;
    }
    row_statistics<T, Cfg::kBM / (Cfg::kThreads / 32), kVectorized>(x, m, k, m0, s_mean, s_rstd);
    __syncthreads();
    marks.mark(kTileStatistics);
  };

  float acc[Cfg::kMT][Cfg::kNT][4] = {};
  tc::block_mainloop<T, Cfg, kVectorized>(acc, ring, x, k, w, n, m, n, k, m0, n0, normalize,
                                          statistics);
  marks.mark(kTileMainLoop);
  const bool pairs = n % 2 == 0;
  tc::for_each_pair<Cfg>(acc, [&](int r, int c, float v0, float v1) {
    const int64_t row = m0 + r, col = n0 + c;
    if (row >= m || col >= n) return;
    v0 += Elem<T>::to_float(bias[col]);
    if (col + 1 < n) v1 += Elem<T>::to_float(bias[col + 1]);
    tc::store_pair(y, n, row, col, v0, v1, pairs);
  });
  marks.mark(kTileStore);
}

template <typename T, class Cfg, bool kVectorized>
Status launch_ln_gemm_config(const LnArgs<T>& a, cudaStream_t stream) {
  const int64_t m = a.m;
  const int k = a.k, n = a.n;
  const int k_padded = (k + tc::kBK<T, Cfg> - 1) / tc::kBK<T, Cfg> * tc::kBK<T, Cfg>;
  const size_t smem =
      tc::ring_bytes<T, Cfg>() + (2 * Cfg::kBM + 2 * size_t(k_padded)) * sizeof(float);
  auto kernel = ln_gemm_bias_kernel<T, Cfg, kVectorized>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>((n + Cfg::kBN - 1) / Cfg::kBN),
                  static_cast<unsigned>((m + Cfg::kBM - 1) / Cfg::kBM));
  kernel<<<grid, Cfg::kThreads, smem, stream>>>(a.x, a.gamma, a.beta, a.w, a.bias, a.y, m, k, n,
                                                a.phases);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

// The tile kernel on any GPU: 16 x 32 tiles at up to 16 tokens, 64 x 32 where 128 x 128 tiles
// would leave SMs idle, else 128 x 128.
template <typename T>
Status launch_ln_tile(const LnArgs<T>& a, cudaStream_t stream) {
  int device = 0, sms = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const bool vec = tc::vector_ok<T>(a.x, a.k) && tc::vector_ok<T>(a.w, a.n);
  auto go = [&](auto config) -> Status {
    using Cfg = decltype(config);
    return vec ? launch_ln_gemm_config<T, Cfg, true>(a, stream)
               : launch_ln_gemm_config<T, Cfg, false>(a, stream);
  };
  if (a.m <= 16) return go(LnGemmTiny{});
  if (((a.m + 127) / 128) * ((a.n + 127) / 128) < sms) return go(LnGemmSmall{});
  return go(LnGemmBig{});
}

template Status launch_ln_tile<float>(const LnArgs<float>&, cudaStream_t);
template Status launch_ln_tile<__nv_bfloat16>(const LnArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace fl::layernorm_linear
