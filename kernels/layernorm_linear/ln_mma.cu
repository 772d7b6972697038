// The LayerNorm-Linear's level 2 at many tokens on any GPU: ln_gemm_mma_kernel, the portable
// large-token rung, on the GEMM core's top tiles (kernels/gemm_core/: mma_tile.cuh in bf16 on
// sm_80+, sgemm_tile.cuh in fp32 on the CUDA cores from sm_70).
//
// What changes against ln_tile.cu (the same three steps: statistics, normalize as x lands, bias
// in the epilogue): the block tile under it. ln_tile.cu runs tensor_gemm.cuh's tile (padded rows,
// 8 warps of 64 x 32, fragments loaded just before their mma; in fp32 the mma fragment layout
// with single-float loads); here the ladder's top rungs (kernels/gemm_core/gemm_ladder.h):
// swizzled shared memory, 4 warps of 64 x 64 and register double-buffered fragments in bf16;
// 8 x 8 register blocks with 16-byte loads in fp32.
//   1. prologue: the block's 128 rows' mean and 1/std from x (L2: the blocks of one row block
//      run side by side, blockIdx.x along N), gamma and beta into shared memory, while the first
//      K-tiles are already in flight. Recomputed by each of the N / 128 blocks of a row block:
//      no second launch, no exchange between blocks;
//   2. main loop: each landed 16-byte chunk of x normalized in place by the thread that copied
//      it (ln_common.cuh's normalize_chunk: rounded to T as level 0's xn), then the multiply;
//   3. epilogue: y = acc + b, one rounding, 4-byte (bf16 pairs) or 16-byte (fp32) stores.
// Tiles: 128 x 128, 4 stages of BK = 32 bf16 (64 KiB) or 3 of BK = 16 fp32 (48 KiB), plus
// mean, 1/std (1 KiB) and gamma, beta (4 C bytes in bf16).
// Budget at 16K tokens, C = 768, bf16: 2 x 16384 x 768 x 2304 = 58 GFLOP, 0.23 ms at 250
// TFLOP/s; HBM moves x (25 MB), W (3.5 MB) and y (75 MB) once: 35 us at 3 TB/s. The statistics
// re-read x from L2 18 times (450 MB; ~45 us of L2 bandwidth if nothing overlapped it).
// Shapes: any token count; C a multiple of 8 (whole 16-byte chunks): the table refuses others.
// Why the level table offers it in fp32 only: in bf16 the tile's multiply got cheap enough that
// the normalization became the work. Each of a row block's N / 128 blocks normalizes the same
// 128 x C of x again (18 times at C = 768): 8 instructions or so per element on the ALU pipe,
// issued by the same 4 warps that issue the mma, against 1/16 of an instruction per element-
// column of the product. Nsight Compute showed the bf16 kernel issue-bound on integer and
// conversion work at 8 warps an SM, the tensor cores mostly idle, and ln_tile (8 warps a block
// sharing the normalization) ahead (docs/PERFORMANCE.md). In fp32 the CUDA cores' product is
// 16x the work per element, and the normalization hides behind it. What would fix bf16: x
// normalized once per row block (a panel of rows resident in shared memory with W streamed
// past it, as ln_wgmma.cu does with TMA, and ln_mma_rows.cu on mma.sync), or gamma and beta
// folded into W and the bias.
#include <cuda_bf16.h>

#include <type_traits>

#include "kernels/cuda_check.h"
#include "kernels/gemm_core/mma_tile.cuh"
#include "kernels/gemm_core/ring.cuh"
#include "kernels/gemm_core/sgemm_tile.cuh"
#include "kernels/gemm_core/tile_epilogue.cuh"
#include "kernels/layernorm_linear/ln_common.cuh"

namespace fl::layernorm_linear {
namespace {

template <typename T>
using LnTile = std::conditional_t<std::is_same_v<T, float>, gemm_core::LessonSgemmTile,
                                  gemm_core::LessonMmaTile>;

template <class Tile>
int padded_k(int k) {
  return (k + Tile::kBK - 1) / Tile::kBK * Tile::kBK;
}

template <class Tile>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocks)
    ln_gemm_mma_kernel(const typename Tile::T* __restrict__ x,
                       const typename Tile::T* __restrict__ gamma,
                       const typename Tile::T* __restrict__ beta,
                       const typename Tile::T* __restrict__ w,
                       const typename Tile::T* __restrict__ bias, typename Tile::T* __restrict__ y,
                       int64_t m, int k, int n, int k_padded) {
  using T = typename Tile::T;
  extern __shared__ __align__(16) unsigned char smem[];
  T* ring = reinterpret_cast<T*>(smem);
  float* s_mean = reinterpret_cast<float*>(smem + Tile::kSmemBytes);
  float* s_rstd = s_mean + Tile::kBM;
  T* s_gamma = reinterpret_cast<T*>(s_rstd + Tile::kBM);  // k_padded each, zero past k
  T* s_beta = s_gamma + k_padded;
  const int64_t m0 = int64_t(blockIdx.y) * Tile::kBM, n0 = int64_t(blockIdx.x) * Tile::kBN;

  auto statistics = [&]() {
    for (int i = threadIdx.x; i < k_padded; i += Tile::kThreads) {
      s_gamma[i] = i < k ? gamma[i] : Elem<T>::from_float(0.0f);
      s_beta[i] = i < k ? beta[i] : Elem<T>::from_float(0.0f);
    }
    constexpr int kRows = 16, kPerCall = kRows * (Tile::kThreads / 32);
#pragma unroll
    for (int r0 = 0; r0 < Tile::kBM; r0 += kPerCall) {
      row_statistics<T, kRows, true>(x, m, k, m0 + r0, s_mean + r0, s_rstd + r0);
    }
    __syncthreads();
  };
  auto normalize = [&](T* chunk, int row, int64_t kk) {
    normalize_chunk(chunk, make_float2(s_mean[row], s_rstd[row]), s_gamma + kk, s_beta + kk);
  };
  typename Tile::Acc acc;
  Tile::zero(acc);
  gemm_core::ring_mainloop<Tile>(acc, ring, x, k, w, n, m, n, k, m0, n0, normalize, statistics);
  Tile::store(acc, m0, n0, gemm_core::BiasStoreTile<T, false>{y, bias, m, n});
}

}  // namespace

template <typename T>
Status launch_ln_mma(const LnArgs<T>& a, cudaStream_t stream) {
  using Tile = LnTile<T>;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (a.k % 8 != 0 || a.n % 8 != 0 || !aligned(a.x) || !aligned(a.w) || !aligned(a.y)) {
    return Status::Unsupported("C is not a multiple of 8");
  }
  const int k_padded = padded_k<Tile>(a.k);
  const size_t smem = Tile::kSmemBytes + 2 * Tile::kBM * sizeof(float) + 2 * k_padded * sizeof(T);
  int device = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (smem > size_t(optin))
    return Status::Unsupported("its tile does not fit this GPU's shared memory");
  auto kernel = ln_gemm_mma_kernel<Tile>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const dim3 grid(unsigned((a.n + Tile::kBN - 1) / Tile::kBN),
                  unsigned((a.m + Tile::kBM - 1) / Tile::kBM));
  kernel<<<grid, Tile::kThreads, smem, stream>>>(a.x, a.gamma, a.beta, a.w, a.bias, a.y, a.m, a.k,
                                                 a.n, k_padded);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

template Status launch_ln_mma<float>(const LnArgs<float>&, cudaStream_t);
template Status launch_ln_mma<__nv_bfloat16>(const LnArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace fl::layernorm_linear
