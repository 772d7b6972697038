// ln_mma_tiles' form that normalizes in each tile (bf16, sm_80+): ln_mma_tiles_kernel without
// row items, xn or counters. Each block is one output tile and normalizes its own rows of x as
// they land in its ring, as ln_mma.cu's tiles do, on ln_mma_tiles' small tiles
// (ln_tiles_forms.cuh).
//
// What changes against ln_mma_tiles.cu's row items: there a tile waits, before its first
// multiply, for a chain that starts when the launch does: x read cold from HBM by the row items,
// normalized, xn written to L2, a release, the tile's poll; and only then does the tile's ring
// start to fill. Here nothing waits for another block:
//   1. prologue, while the ring's first K-tiles of x and W are in flight (cp.async, asked for
//      first): gamma and beta into shared memory (cp.async, one commit group before the ring's),
//      the rest of the tile's W columns asked into L2 (prefetch), then the tile's 64 rows' mean
//      and 1/std from x, every load of a lane in flight at once (ln_common.cuh's
//      block_statistics); x's rows are then in L2 for the ring;
//   2. main loop: the core's cp.async ring over x and W; each landed 16-byte chunk of x
//      normalized in place by the thread that copied it (normalize_chunk, rounded to bf16 as
//      level 0's xn), then the multiply;
//   3. epilogue: y = acc + b staged through the ring as 16-byte rows (staged_bias_store).
// The price: each of a row block's N / BN tiles computes the same rows' statistics and
// normalizes the same x again (18 times at C = 768): 64 x C more reads of x from L2 a tile (1/3
// more bytes than its ring's 64 x C of x and C x 128 of W), and ~5 instructions an element of
// x a tile on the ALU, against 32 mma instructions a 64 x 128 x 32 K-tile.
// Budget at 256 tokens, C = 768 (72 tiles of 64 x 128, one an SM): 0.9 GFLOP, 1.5 us at
// mma.sync's ~600 TFLOP/s; HBM: x, W, y once (0.4 + 3.5 + 1.2 MB), ~1.7 us at 3 TB/s; through L2
// each tile reads 96 KiB of x for its statistics, 96 KiB of x and 192 KiB of W in its ring: 27
// MB in all. On the path of every tile: one cold round trip for the statistics (with the ring's
// first K-tiles and gamma, beta beside it), then 24 K-tiles.
// Off in the table (FL_LN_NORM=2 runs it): the statistics' cold read of x costs a tile about
// what the row items' chain costs it, and normalizing on the warps that issue the mma, behind the
// ring's barriers, lengthens every main loop (docs/PERFORMANCE.md).
// Shapes: any token count; C and 3C multiples of 8 (launch_ln_mma_tiles checks them).
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/gemm_core/mma_tile.cuh"
#include "kernels/gemm_core/ring.cuh"
#include "kernels/gemm_core/tile_epilogue.cuh"
#include "kernels/layernorm_linear/ln_common.cuh"
#include "kernels/layernorm_linear/ln_tiles_forms.cuh"
#include "kernels/phases.cuh"

namespace fl::layernorm_linear {
namespace {

using T = __nv_bfloat16;
constexpr int kStatsBatch = 24;  // loads in flight a lane: a row of C = 768 in one trip (8 warps)

// Shared memory past the ring: the rows' mean and 1/std (kBM floats each), then gamma and beta
// (k_padded each, zero past C).
template <class Tile>
size_t local_smem_bytes(int k_padded) {
  return Tile::kSmemBytes + 2 * Tile::kBM * sizeof(float) + 2 * size_t(k_padded) * sizeof(T);
}

// Block b: row block b / tiles_n, column tile b % tiles_n (a row block's tiles side by side, so
// its rows of x are read from HBM once and from L2 by the rest). Its one record (--phases):
// phase kTilesTile, arg its row block, wait_ns the prologue (until the statistics are in).
template <class Tile, int kMinBlocks>
__global__ void __launch_bounds__(Tile::kThreads, kMinBlocks)
    ln_mma_tiles_kernel(LnArgs<T> a, int tiles_n, int k_padded) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* ring = reinterpret_cast<T*>(smem);
  float* s_mean = reinterpret_cast<float*>(smem + Tile::kSmemBytes);
  float* s_rstd = s_mean + Tile::kBM;
  T* s_gamma = reinterpret_cast<T*>(s_rstd + Tile::kBM);
  T* s_beta = s_gamma + k_padded;
  const bool stamps = a.phases.records != nullptr;
  const uint64_t started = stamps ? phase_clock() : 0;
  uint64_t ready = started;
  const int rb = static_cast<int>(blockIdx.x) / tiles_n,
            cb = static_cast<int>(blockIdx.x) % tiles_n;
  const int64_t m0 = int64_t(rb) * Tile::kBM, n0 = int64_t(cb) * Tile::kBN;

  for (int c = threadIdx.x; c < k_padded / 8; c += Tile::kThreads) {  // the oldest group
    const bool ok = c * 8 < a.k;
    tc::copy16_async(s_gamma + c * 8, ok ? a.gamma + c * 8 : a.gamma, ok);
    tc::copy16_async(s_beta + c * 8, ok ? a.beta + c * 8 : a.beta, ok);
  }
  tc::async_commit();
  auto prologue = [&]() {  // runs while the ring's first K-tiles fly
    constexpr int kPrimed = (Tile::kStages - 1) * Tile::kBK;
    if (a.k > kPrimed)
      gemm_core::prefetch_b_l2<Tile>(a.w + int64_t(kPrimed) * a.n, a.n, a.k - kPrimed, n0, a.n);
    block_statistics<T, Tile::kBM, Tile::kThreads, kStatsBatch>(a.x, a.m, a.k, m0, s_mean, s_rstd);
    tc::async_wait<Tile::kStages - 1>();  // gamma and beta: older than the ring's S - 1 groups
    __syncthreads();                      // every row's statistics, all of gamma and beta
    if (stamps) ready = phase_clock();
  };
  auto normalize = [&](T* chunk, int row, int64_t kk) {
    normalize_chunk(chunk, make_float2(s_mean[row], s_rstd[row]), s_gamma + kk, s_beta + kk);
  };
  typename Tile::Acc acc;
  Tile::zero(acc);
  gemm_core::ring_mainloop<Tile>(acc, ring, a.x, a.k, a.w, a.n, a.m, a.n, a.k, m0, n0, normalize,
                                 prologue);
  Tile::reduce_groups(acc, reinterpret_cast<float*>(smem));  // two K groups: into group 0's
  gemm_core::staged_bias_store<Tile, false>(acc, ring, a.bias, a.y, a.m, a.n, m0, n0);
  if (stamps && threadIdx.x == 0) {
    phase_record_at(a.phases, blockIdx.x, kTilesTile, started, phase_clock(), unsigned(rb),
                    uint32_t(ready - started));
  }
}

template <class Tile, int kMinBlocks>
Status launch_local(const LnArgs<T>& a, cudaStream_t stream) {
  const int k_padded = (a.k + Tile::kBK - 1) / Tile::kBK * Tile::kBK;
  const size_t smem = local_smem_bytes<Tile>(k_padded);
  int device = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (smem > size_t(optin))
    return Status::Unsupported("its tile does not fit this GPU's shared memory");
  auto kernel = ln_mma_tiles_kernel<Tile, kMinBlocks>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const int tiles_n = (a.n + Tile::kBN - 1) / Tile::kBN;
  const int64_t tiles = (a.m + Tile::kBM - 1) / Tile::kBM * tiles_n;
  if (tiles > (int64_t(1) << 31) - 1) return Status::Unsupported("too many tokens");
  kernel<<<unsigned(tiles), Tile::kThreads, smem, stream>>>(a, tiles_n, k_padded);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

Status launch_ln_mma_tiles_local(const LnArgs<__nv_bfloat16>& a, int tile, cudaStream_t stream) {
  if (tile == 0) {  // 8 warps a 64 x 128 tile while the tiles are one block an SM, else 4
    int device = 0, sms = 0;
    FL_CUDA_TRY(cudaGetDevice(&device));
    FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    tile = (a.m + 63) / 64 * ((a.n + 127) / 128) <= sms ? 3 : 2;
  }
  return with_tiles_form(tile, [&](auto form) {
    using Form = decltype(form);
    return launch_local<typename Form::Tile, Form::kMinBlocks>(a, stream);
  });
}

}  // namespace fl::layernorm_linear
