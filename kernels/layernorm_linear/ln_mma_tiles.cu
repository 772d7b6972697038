// The LayerNorm-Linear's level 2 at a few hundred to a few thousand tokens in bf16 on any GPU with
// mma.sync (sm_80+): ln_mma_tiles_kernel, x normalized once by the whole grid, then the GEMM
// core's tiles (kernels/gemm_core/mma_tile.cuh) over every SM.
//
// What changes against ln_panel.cu and ln_mma_rows.cu: there a block normalizes the rows it
// multiplies, so a row is normalized once per block that reads it: at 256 tokens ln_panel's 32
// column slices each normalize the same 64 rows (the normalization took about as long as the
// copies and the multiplies together), and ln_mma_rows' 128-row panels leave most SMs idle
// below a few thousand tokens. Here one persistent launch takes tickets (an atomic counter):
//   1. the first tickets are row items of 8 rows (a warp normalizes two rows at a time in
//      registers: ln_row_pairs.cuh), written as bf16 into xn, an M x C scratch that stays in
//      L2; each item counts itself done in its row block's counter (release);
//   2. the later tickets are output tiles, row block by row block: a tile asks L2 for its W
//      columns (prefetch: they do not wait for anything), waits until its row block's items
//      are done (acquire), runs the core's cp.async ring over xn and W (cp.async.cg reads L2),
//      and stores y = acc + b through shared memory as 16-byte rows
//      (tile_epilogue.cuh's staged_bias_store).
// A tile waits only for items with smaller tickets, taken by blocks already running, so the
// wait always ends (no cooperative launch); the last block out leaves the counters at zero.
// xn exists, but only in L2 (~0.4 MB at 256 tokens): each row is normalized once for the whole
// grid instead of once per block, and the tiles are as small as it takes to fill the SMs.
// Tiles: 64 x 128 (4 warps of 32 x 64, K-tiles of 32 in 4 stages of 12 KiB: 72 tiles at 256
// tokens and C = 768, 2 blocks an SM), or 64 x 64 (warps of 32 x 32, 144 tiles) to measure
// against it; the lessons' 128 x 128 spills here (its 128 accumulators beside the row item's
// registers). Stamps (--phases): a record a ticket, ln_tiles_phases().
// Budget at 256 tokens, C = 768: 0.9 GFLOP, 1.5 us at mma.sync's ~600 TFLOP/s; HBM: x, W, y
// (0.4 + 3.5 + 1.2 MB) once, ~1.7 us at 3 TB/s; through L2 each 64 x 128 tile reads 96 KiB of
// xn and 192 KiB of W: 21 MB in all, ~4 us at ~5 TB/s, ~7 us for one SM's 288 KiB at the ~40
// KiB/us an SM gets when all pull at once. The normalization: 0.2 M elements, once.
// Shapes: any token count; C a multiple of 8 up to 1024, 3C a multiple of 8.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdlib>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/gemm_core/mma_tile.cuh"
#include "kernels/gemm_core/ring.cuh"
#include "kernels/gemm_core/tile_epilogue.cuh"
#include "kernels/layernorm_linear/ln_common.cuh"
#include "kernels/layernorm_linear/ln_row_pairs.cuh"
#include "kernels/phases.cuh"

namespace fl::layernorm_linear {
namespace {

using T = __nv_bfloat16;
constexpr int kItemRows = 8;  // a row item: 4 warps x 2 rows

// Tickets [0, items) are row items, then tiles row block by row block.
struct TicketOrder {
  int items, tiles_n, tiles;
};

// Asks L2 for rows 0 .. k - 1 of W's columns n0 .. n0 + kBN - 1 (128-byte lines).
template <class Tile>
__device__ __forceinline__ void prefetch_w(const T* w, int64_t n, int k, int64_t n0) {
  constexpr int kLines = Tile::kBN * 2 / 128;
  for (int i = threadIdx.x; i < k * kLines; i += Tile::kThreads) {
    const int r = i / kLines, l = i % kLines;
    if (n0 + l * 64 < n) asm volatile("prefetch.global.L2 [%0];" ::"l"(w + r * n + n0 + l * 64));
  }
}

// Row item t: rows 8 t .. 8 t + 7 of x normalized into xn.
__device__ __forceinline__ void normalize_item(const LnArgs<T>& a, int t) {
  const int64_t row0 = int64_t(t) * kItemRows;
  const int live = static_cast<int>(min(int64_t(kItemRows), a.m - row0));
  normalize_row_pairs<kItemRows / 2>(a.x + row0 * a.k, a.k, a.xn + row0 * a.k, a.k, a.k, a.gamma,
                                     a.beta, 0, kItemRows, live);
}

template <class Tile>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocks)
    ln_mma_tiles_kernel(LnArgs<T> a, TicketOrder o) {
  static_assert(Tile::kThreads == 32 * kItemRows / 2 && Tile::kBM % kItemRows == 0, "items");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int s_ticket;
  __shared__ uint64_t s_started, s_waited;  // thread 0's stamps of this ticket
  T* ring = reinterpret_cast<T*>(smem);
  const bool stamps = a.phases.records != nullptr;
  unsigned* done = a.counters + 2;
  const gemm_core::NoHook none;
  for (;;) {
    if (threadIdx.x == 0) s_ticket = static_cast<int>(atomicAdd(a.counters, 1u));
    __syncthreads();
    const int t = s_ticket;
    __syncthreads();  // the ring and s_ticket are free again
    if (t >= o.items + o.tiles) break;
    if (stamps && threadIdx.x == 0) s_started = phase_clock(), s_waited = 0;
    if (t < o.items) {  // 1. a row item: 8 rows of x into xn
      normalize_item(a, t);
      __threadfence();  // this thread's xn before the row block's counter (release)
      __syncthreads();
      if (threadIdx.x == 0) {
        atomicAdd(done + int64_t(t) * kItemRows / Tile::kBM, 1u);
        if (stamps) phase_record_at(a.phases, unsigned(t), kTilesItem, s_started, phase_clock());
      }
      continue;
    }
    // 2. a tile: W's columns asked for, the row block's items waited for, then the core.
    const int u = t - o.items, rb = u / o.tiles_n;
    const int64_t m0 = int64_t(rb) * Tile::kBM, n0 = int64_t(u % o.tiles_n) * Tile::kBN;
    prefetch_w<Tile>(a.w, a.n, a.k, n0);
    if (threadIdx.x == 0) {
      const int64_t rows = min(int64_t(Tile::kBM), a.m - m0);
      const unsigned need = static_cast<unsigned>((rows + kItemRows - 1) / kItemRows);
      while (load_acquire(done + rb) < need) __nanosleep(64);
      if (stamps) s_waited = phase_clock() - s_started;
    }
    __syncthreads();  // xn's rows are in; cp.async.cg reads them from L2
    typename Tile::Acc acc;
    Tile::zero(acc);
    gemm_core::ring_mainloop<Tile>(acc, ring, a.xn, a.k, a.w, a.n, a.m, a.n, a.k, m0, n0, none,
                                   none);
    gemm_core::staged_bias_store<Tile, false>(acc, ring, a.bias, a.y, a.m, a.n, m0, n0);
    if (stamps && threadIdx.x == 0) {  // thread 0's view of the tile, its stores issued
      phase_record_at(a.phases, unsigned(t), kTilesTile, s_started, phase_clock(), unsigned(rb),
                      uint32_t(s_waited));
    }
  }
  if (threadIdx.x == 0 && atomicAdd(a.counters + 1, 1u) == gridDim.x - 1) {
    a.counters[0] = 0;  // every block has taken its last ticket and finished its tiles
    a.counters[1] = 0;
    const int rows = static_cast<int>((a.m + Tile::kBM - 1) / Tile::kBM);
    for (int r = 0; r < rows; ++r) done[r] = 0;
  }
}

template <class Tile>
Status launch_tiles(const LnArgs<T>& a, int per_sm_cap, cudaStream_t stream) {
  const size_t smem = Tile::kSmemBytes;
  auto kernel = ln_mma_tiles_kernel<Tile>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int device = 0, sms = 0, per_sm = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Tile::kThreads, smem));
  if (per_sm < 1) return Status::Unsupported("its tile does not fit this GPU's shared memory");
  if (per_sm_cap > 0) per_sm = std::min(per_sm, per_sm_cap);
  const int64_t items = (a.m + kItemRows - 1) / kItemRows;
  const int64_t row_blocks = (a.m + Tile::kBM - 1) / Tile::kBM;
  const int tiles_n = (a.n + Tile::kBN - 1) / Tile::kBN;
  if (items + row_blocks * tiles_n > (int64_t(1) << 30))
    return Status::Unsupported("too many tokens");
  const TicketOrder o{int(items), tiles_n, int(row_blocks * tiles_n)};
  const int blocks = int(std::min<int64_t>(o.items + o.tiles, int64_t(sms) * per_sm));
  kernel<<<blocks, Tile::kThreads, smem, stream>>>(a, o);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

using Tile64 = gemm_core::MmaTile<64, 64, 2, 2, 4, true>;
using Tile64x128 = gemm_core::MmaTile<64, 128, 2, 2, 4, true>;

}  // namespace

size_t ln_mma_tiles_counter_bytes(int64_t m) {
  static_assert(Tile64x128::kBM == Tile64::kBM, "row blocks of 64");
  return size_t(2 + (m + Tile64::kBM - 1) / Tile64::kBM) * sizeof(unsigned);
}

Status launch_ln_mma_tiles(const LnArgs<__nv_bfloat16>& a, LnTilesShape shape,
                           cudaStream_t stream) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (a.xn == nullptr || a.counters == nullptr) {
    return Status::Unsupported("it needs a scratch for xn and its counters");
  }
  if (a.k % 8 != 0 || a.k > 8 * 32 * kLaneChunks || a.n % 8 != 0 || !aligned(a.x) ||
      !aligned(a.w) || !aligned(a.gamma) || !aligned(a.beta) || !aligned(a.y) || !aligned(a.xn)) {
    return Status::Unsupported("C is not a multiple of 8 up to 1024");
  }
  int device = 0, major = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 8) return Status::Unsupported("bf16 mma.sync needs compute capability 8.0");
  int tile = shape.tile;
  // Measurements only: FL_LN_TILES (1-2) forces a tile where the shape leaves the choice.
  if (const char* env = std::getenv("FL_LN_TILES"); tile == 0 && env != nullptr)
    tile = std::atoi(env);
  if (tile == 0) tile = 2;
  switch (tile) {
    case 1:
      return launch_tiles<Tile64>(a, shape.per_sm, stream);
    case 2:
      return launch_tiles<Tile64x128>(a, shape.per_sm, stream);
    default:
      return Status::Unsupported("no such tile (1-2)");
  }
}

}  // namespace fl::layernorm_linear
