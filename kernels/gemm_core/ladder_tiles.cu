// The GEMM ladder's tiled rungs (kernels/gemm_core/gemm_ladder.h): one kernel template runs a
// block tile of the core (mma_tile.cuh, sgemm_tile.cuh) over a grid of output tiles, and the
// rung before them, tensor_gemm.cuh's block tile, runs as it does in the older fused kernels.
// C = A B with nothing fused, so each rung's TFLOP/s is the tile's own. Each rung's header (the
// tile files) says what it adds and its napkin budget.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda_check.h"
#include "kernels/gemm_core/gemm_ladder.h"
#include "kernels/gemm_core/mma_tile.cuh"
#include "kernels/gemm_core/sgemm_tile.cuh"
#include "kernels/gemm_core/tile_epilogue.cuh"
#include "kernels/tensor_gemm.cuh"

namespace fl::gemm_core {
namespace {

// A rung of the core: block (x, y) computes the BM x BN tile at row y BM, column x BN.
template <class Tile>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocks)
    gemm_ladder_kernel(const typename Tile::T* __restrict__ a,
                       const typename Tile::T* __restrict__ b, typename Tile::T* __restrict__ c,
                       int64_t m, int64_t n, int64_t k) {
  using T = typename Tile::T;
  extern __shared__ __align__(16) unsigned char smem[];
  typename Tile::Acc acc;
  Tile::zero(acc);
  const int64_t m0 = int64_t(blockIdx.y) * Tile::kBM, n0 = int64_t(blockIdx.x) * Tile::kBN;
  ring_mainloop<Tile>(acc, reinterpret_cast<T*>(smem), a, k, b, n, m, n, k, m0, n0, NoHook{},
                      NoHook{});
  Tile::store(acc, m0, n0, StoreTile<T>{c, m, n});
}

// The rung before the core: tensor_gemm.cuh's block tile (padded rows, 8 warps of 64 x 32).
using PaddedConfig = tc::TileConfig<128, 128, 2, 4, 4>;
template <typename T>
__global__ void __launch_bounds__(PaddedConfig::kThreads)
    gemm_padded_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c,
                       int64_t m, int64_t n, int64_t k) {
  using Cfg = PaddedConfig;
  extern __shared__ __align__(16) unsigned char smem[];
  float acc[Cfg::kMT][Cfg::kNT][4] = {};
  const int64_t m0 = int64_t(blockIdx.y) * Cfg::kBM, n0 = int64_t(blockIdx.x) * Cfg::kBN;
  tc::block_mainloop<T, Cfg, true>(acc, reinterpret_cast<T*>(smem), a, k, b, n, m, n, k, m0, n0);
  tc::for_each_pair<Cfg>(acc, [&](int r, int col, float v0, float v1) {
    if (m0 + r < m && n0 + col < n) tc::store_pair(c, n, m0 + r, n0 + col, v0, v1, true);
  });
}

template <typename T>
Status launch_padded(const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k,
                     cudaStream_t stream) {
  const size_t smem = tc::ring_bytes<T, PaddedConfig>();
  auto kernel = gemm_padded_kernel<T>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const dim3 grid(unsigned((n + 127) / 128), unsigned((m + 127) / 128));
  kernel<<<grid, PaddedConfig::kThreads, smem, stream>>>(
      static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(c), m, n, k);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

template <class Tile>
Status launch_tile(const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k,
                   cudaStream_t stream) {
  using T = typename Tile::T;
  auto kernel = gemm_ladder_kernel<Tile>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(Tile::kSmemBytes)));
  const dim3 grid(unsigned((n + Tile::kBN - 1) / Tile::kBN),
                  unsigned((m + Tile::kBM - 1) / Tile::kBM));
  kernel<<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(
      static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(c), m, n, k);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

using Launcher = Status (*)(const void*, const void*, void*, int64_t, int64_t, int64_t,
                            cudaStream_t);
struct RungEntry {
  LadderRung rung;
  Launcher launch;
};
const std::vector<RungEntry>& entries() {
  const Precision bf16 = Precision::bf16, fp32 = Precision::fp32;
  static const std::vector<RungEntry> list = {
      {{"mma_naive", "mma.sync with fragments loaded from global memory", bf16}, launch_mma_naive},
      {{"ring_padded", "shared-memory tiles, 4-stage cp.async ring, padded rows, ldmatrix", bf16},
       launch_padded<__nv_bfloat16>},
      {{"swizzled", "XOR-swizzled shared memory instead of padding", bf16},
       launch_tile<MmaTile<128, 128, 2, 4, 4, false>>},
      {{"warp_64x64", "4 warps of 64 x 64: half the ldmatrix bytes per mma", bf16},
       launch_tile<MmaTile<128, 128, 2, 2, 4, false>>},
      {{"prefetched", "fragments double-buffered in registers (the lessons' tile)", bf16},
       launch_tile<LessonMmaTile>},
      {{"block_128x256", "8 warps of 64 x 64 in a 128 x 256 block, 3 stages", bf16},
       launch_tile<MmaTile<128, 256, 2, 4, 3, true>>},
      {{"fp32_mma_layout", "fp32 FMAs in the mma fragment layout (tensor_gemm.cuh)", fp32},
       launch_padded<float>},
      {{"fp32_warptile", "8 x 8 a thread, 16-byte loads, warp tiles", fp32},
       launch_tile<SgemmTile<3>>},
      {{"fp32_warptile_4stage", "the same with 4 stages", fp32}, launch_tile<SgemmTile<4>>},
      {{"fp32_transposed_a", "A transposed in shared memory: 4 loads per 64 FMAs, BK 16, 2 stages",
        fp32},
       launch_tile<SgemmTileT<16, 2>>},
      {{"fp32_bk8_4stage", "K-tiles of 8 in 4 stages (the lessons' fp32 tile)", fp32},
       launch_tile<LessonSgemmTile>},
  };
  return list;
}

}  // namespace

const std::vector<LadderRung>& gemm_ladder() {
  static const std::vector<LadderRung> rungs = [] {
    std::vector<LadderRung> out;
    for (const RungEntry& e : entries()) out.push_back(e.rung);
    return out;
  }();
  return rungs;
}

Status launch_ladder_rung(size_t rung, const void* a, const void* b, void* c, int64_t m, int64_t n,
                          int64_t k, cudaStream_t stream) {
  if (rung >= entries().size()) return Status::Error("no such rung of the GEMM ladder");
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (n % 8 != 0 || k % 8 != 0 || !aligned(a) || !aligned(b) || !aligned(c)) {
    return Status::Unsupported(entries()[rung].rung.name +
                               " takes N and K multiples of 8 and 16-byte aligned matrices");
  }
  return entries()[rung].launch(a, b, c, m, n, k, stream);
}

}  // namespace fl::gemm_core
