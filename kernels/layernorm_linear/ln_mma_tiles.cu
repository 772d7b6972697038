// The LayerNorm-Linear's level 2 at a few hundred to a few thousand tokens in bf16 on any GPU with
// mma.sync (sm_80+): ln_mma_tiles_kernel, x normalized once by the whole grid, then the GEMM
// core's tiles (kernels/gemm_core/mma_tile.cuh) over every SM.
//
// What changes against ln_panel.cu and ln_mma_rows.cu: there a block normalizes the rows it
// multiplies, so a row is normalized once per block that reads it: at 256 tokens ln_panel's 32
// column slices each normalize the same 64 rows (the normalization took about as long as the
// copies and the multiplies together), and ln_mma_rows' 128-row panels leave most SMs idle
// below a few thousand tokens. Here one persistent launch takes tickets (an atomic counter):
//   1. the first tickets are row items, two rows a warp of the block (8 or 16 rows; a warp
//      normalizes its two rows at once in registers: ln_row_pairs.cuh), written as bf16 into
//      xn, an M x C scratch that stays in L2; each item counts itself done in the counter of
//      its 64 rows (release);
//   2. the later tickets are output tiles, row block by row block: a tile waits until its row
//      block's items are done (acquire), runs the core's cp.async ring over xn and W
//      (cp.async.cg reads L2), and stores y = acc + b through shared memory as 16-byte rows
//      (tile_epilogue.cuh's staged_bias_store). Asking L2 for the tile's W columns before the
//      wait (a prefetch, FL_LN_PREFETCH; whole or shared among the row blocks) was no faster:
//      W's first K-tiles are on the tile's path either way, and the rest arrive in time.
// A tile waits only for items with smaller tickets, taken by blocks already running, so the
// wait always ends (no cooperative launch); the last block out leaves the counters at zero.
// xn exists, but only in L2 (~0.4 MB at 256 tokens): each row is normalized once for the whole
// grid instead of once per block, and the tiles are as small as it takes to fill the SMs.
// Tiles (K-tiles of 32 in 4 stages of 12 KiB unless said): while the tiles and row items are at
// most one block an SM (72 tiles and 16 items at 256 tokens, C = 768), 64 x 128 as 8 warps of 32
// x 32 (two warps a scheduler; the row item's and the mainloop's registers hold it at one block
// an SM) with W resident: a tile asks for all of its W columns (C x 128, 192 KiB at C = 768)
// into shared memory before it waits for its row block, and its ring then carries xn alone in
// K-tiles of 64 (gemm_core/resident_ring.cuh). Where W does not fit (sm_86, sm_89 and A100 at
// C = 768; `--choose-as` decides with the chosen GPU's shared memory) W is streamed with xn in
// 8 stages (96 KiB), and the ring's first 7 K-tiles of W (56 of the tile's 192 KiB) are asked
// for before the wait (gemm_core::prime_b_ahead), so they land while the items normalize. From
// three rounds of one-block slots (1K tokens), 8 warps in 8 stages; in between, 64 x 128 as 4
// warps of 32 x 64 (2 blocks an SM), W's first 3 K-tiles ahead. Block b takes ticket b first
// (a cooperative launch, so every item a tile waits for is taken; where each block has one
// ticket, no atomic at all): no round trip to L2 before its first copies. To measure against
// them (ln_tiles_forms.cuh numbers every form): the other tiles and rings; W resident, streamed
// or ahead (FL_LN_RESIDENT 2, 1, 3); tickets all from the counter (FL_LN_FIRST=0); each tile
// normalizing its own rows (FL_LN_NORM=2, ln_mma_tiles_local.cu); each tile in 2-8 parts of its
// K-tiles, whose fp32 sums meet in an L2 scratch by red.add and whose last part stores y
// (ln_tile_parts.cuh; the whole-tile kernels are built without it). The lessons' 128 x 128
// spills here beside the row item.
// Stamps (--phases): a record a ticket, ln_tiles_phases(). Budget at 256 tokens, C = 768: 0.9
// GFLOP, 1.5 us at mma.sync's ~600 TFLOP/s; HBM: x, W, y (0.4 + 3.5 + 1.2 MB) once, ~1.7 us at
// 3 TB/s; through L2 each 64 x 128 tile reads 96 KiB of xn and 192 KiB of W: 21 MB in all, ~7 us
// for one SM's 288 KiB at the ~40 KiB/us an SM gets when all pull at once; with W resident its
// 192 KiB come during the row items' ~5 us and 96 KiB after; streamed with W's first 7 K-tiles
// ahead, 56 KiB before and 232 after (~6 us). The normalization: 0.2 M elements,
// once, but on the path of every tile: x read cold from HBM, the release and the poll (a row
// item's whole chain) come before a tile's first multiply. After the wait a tile is a chain of
// K-tiles, each a barrier, fragment loads (32 KiB of ldmatrix a K-tile of 32 for the block) and
// 16 mma a warp: shared memory and the tensor pipe, one SM's worth, not HBM or L2, set its time.
// Shapes: any token count; C a multiple of 8 up to 1024, 3C a multiple of 8.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdlib>
#include <type_traits>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/gemm_core/mma_tile.cuh"
#include "kernels/gemm_core/resident_ring.cuh"
#include "kernels/gemm_core/ring.cuh"
#include "kernels/gemm_core/tile_epilogue.cuh"
#include "kernels/gemm_core/weight_slice.cuh"
#include "kernels/layernorm_linear/ln_common.cuh"
#include "kernels/layernorm_linear/ln_row_pairs.cuh"
#include "kernels/layernorm_linear/ln_tile_parts.cuh"
#include "kernels/layernorm_linear/ln_tiles_forms.cuh"
#include "kernels/lesson.h"
#include "kernels/phases.cuh"

namespace fl::layernorm_linear {
namespace {

using T = __nv_bfloat16;
constexpr int kCountRows = 64;        // a counter per 64 rows of x (ln_mma_tiles_counter_bytes)
constexpr int64_t kSplitRows = 1024;  // up to here the counters hold the split tiles' sums

// The counters (unsigned words): [0] the ticket, [1] blocks out, a counter per 64 rows, an
// arrival counter per tile (as many as 32 x 64 tiles would be: every form's fit), then, up to
// kSplitRows tokens, the split tiles' fp32 sums (16-byte aligned; 64-row by 256-column tiles
// cover every form's) and two fp32 sums a row of each tile (ln_mma_folded's parts: its rows'
// moments; 64-column tiles cover every form's).
struct Scratch {
  int64_t arrive, parts, floats, rows_at, row_floats;
  Scratch(int64_t m, int64_t n) {
    const int64_t rows = (m + kCountRows - 1) / kCountRows;
    arrive = 2 + rows;
    parts = (arrive + (m + 31) / 32 * ((n + 63) / 64) + 3) / 4 * 4;
    floats = m <= kSplitRows ? rows * kCountRows * ((n + 255) / 256 * 256) : 0;
    rows_at = parts + floats;
    row_floats = m <= kSplitRows ? rows * kCountRows * ((n + 63) / 64) * 2 : 0;
  }
  size_t bytes() const { return size_t(rows_at + row_floats) * 4; }
};

// Tickets [0, items) are row items, then tiles row block by row block; with splits > 1 a tile
// is `splits` tickets, each a part of its K-tiles whose sums meet in `parts` (fp32, a tile's
// BM x BN at tile x BM x BN; arrive: a counter a tile).
// share: the W prefetch, 0 none, s >= 1 each tile of s consecutive row blocks asks for its
// part (row block % s) of the K rows, so a column tile's W is asked for once (s = 1: whole).
// first: 1 or 2 where block b's first ticket is b (no atomic before its first copies; the launch
// is cooperative, so every block is resident and a tile's items are always taken), the counter
// then handing out tickets from gridDim.x on (with 1, none asked for where every block has one
// ticket); 0 every ticket from the counter.
struct TicketOrder {
  int items, tiles_n, tiles, splits, share, first;
  unsigned* arrive;
  float* parts;
};

// A row item: two rows a warp of the block.
template <class Tile>
constexpr int kItemRows = Tile::kThreads / 16;

// Row item t: rows R t .. R t + R - 1 of x normalized into xn (R = kItemRows).
template <class Tile>
__device__ __forceinline__ void normalize_item(const LnArgs<T>& a, int t) {
  constexpr int kRows = kItemRows<Tile>;
  const int64_t row0 = int64_t(t) * kRows;
  const int live = static_cast<int>(min(int64_t(kRows), a.m - row0));
  normalize_row_pairs<kRows / 2>(a.x + row0 * a.k, a.k, a.xn + row0 * a.k, a.k, a.k, a.gamma,
                                 a.beta, 0, kRows, live);
}

// How a tile's W columns come (LnTilesShape::resident 1-3): streamed with xn through the ring;
// all resident in shared memory, asked for before the wait; streamed, with the ring's first S-1
// K-tiles of W asked for before the wait (gemm_core::prime_b_ahead).
enum WayOfW : int { kStreamed = 0, kResident = 1, kAhead = 2 };

// kSplit: the tiles come in parts of K (o.splits > 1); the whole-tile kernel carries none of it.
template <class Tile, int kMinBlocks, bool kSplit, int kW>
__global__ void __launch_bounds__(Tile::kThreads, kMinBlocks)
    ln_mma_tiles_kernel(LnArgs<T> a, TicketOrder o) {
  const int splits = kSplit ? o.splits : 1;
  constexpr int kRows = kItemRows<Tile>;
  static_assert(kCountRows % Tile::kBM == 0 && Tile::kBM % kRows == 0, "items and counters");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int s_ticket;
  __shared__ uint64_t s_started, s_waited;  // thread 0's stamps of this ticket
  T* ring = reinterpret_cast<T*>(smem);
  const bool stamps = a.phases.records != nullptr;
  unsigned* done = a.counters + 2;
  const gemm_core::NoHook none;
  int first = o.first ? static_cast<int>(blockIdx.x) : -1;
  // first 1 with a ticket a block: none left after it, so no atomic round trip to learn that.
  const bool one = o.first == 1 && o.items + o.tiles <= static_cast<int>(gridDim.x);
  for (;;) {
    int t = first;
    first = -1;
    if (t < 0) {
      if (one) break;
      if (threadIdx.x == 0)
        s_ticket = static_cast<int>(atomicAdd(a.counters, 1u)) + (o.first ? int(gridDim.x) : 0);
      __syncthreads();
      t = s_ticket;
      __syncthreads();  // the ring and s_ticket are free again
    }
    if (t >= o.items + o.tiles) break;
    if (stamps && threadIdx.x == 0) s_started = phase_clock(), s_waited = 0;
    if (t < o.items) {  // 1. a row item: 8 or 16 rows of x into xn
      normalize_item<Tile>(a, t);
      __threadfence();  // this thread's xn before the row block's counter (release)
      __syncthreads();
      if (threadIdx.x == 0) {
        atomicAdd(done + int64_t(t) * kRows / kCountRows, 1u);
        if (stamps) phase_record_at(a.phases, unsigned(t), kTilesItem, s_started, phase_clock());
      }
      continue;
    }
    // 2. a tile (or part q of one: K-tiles [kts q / splits, kts (q + 1) / splits)): W's columns
    // asked for, the row block's items waited for, then the core.
    const int u = t - o.items, per_rb = o.tiles_n * splits, rb = u / per_rb;
    const int q = u % per_rb / o.tiles_n, cb = u % o.tiles_n;
    const int64_t m0 = int64_t(rb) * Tile::kBM, n0 = int64_t(cb) * Tile::kBN;
    const int64_t kts = (a.k + Tile::kBK - 1) / Tile::kBK;
    const int64_t k0 = kts * q / splits * Tile::kBK;
    const int64_t k1 = min(int64_t(a.k), kts * (q + 1) / splits * Tile::kBK);
    T* w_res = ring + Tile::kStages * Tile::kBM * Tile::kBK;  // kResident: past the A ring
    if constexpr (kW == kResident) {  // W's rows k0 .. k1 - 1 of the tile's columns
      gemm_core::load_b_resident<Tile>(w_res, a.w + k0 * a.n, a.n, a.n, k1 - k0, n0);
    } else if constexpr (kW == kAhead) {  // the ring's first K-tiles of them
      gemm_core::prime_b_ahead<Tile>(ring, a.w + k0 * a.n, a.n, a.n, k1 - k0, n0);
    }
    if (o.share > 0) {
      const int64_t p0 = k0 + (k1 - k0) * (rb % o.share) / o.share;
      const int64_t p1 = k0 + (k1 - k0) * (rb % o.share + 1) / o.share;
      gemm_core::prefetch_b_l2<Tile>(a.w + p0 * a.n, a.n, int(p1 - p0), n0, a.n);
    }
    if (threadIdx.x == 0) {  // the items of the 64 counted rows that hold this tile's
      const int64_t cb = m0 / kCountRows, rows = min(int64_t(kCountRows), a.m - cb * kCountRows);
      const unsigned need = static_cast<unsigned>((rows + kRows - 1) / kRows);
      while (load_acquire(done + cb) < need) __nanosleep(64);
      if (stamps) s_waited = phase_clock() - s_started;
    }
    __syncthreads();  // xn's rows are in; cp.async.cg reads them from L2
    typename Tile::Acc acc;
    Tile::zero(acc);
    if constexpr (kW == kResident) {
      gemm_core::resident_mainloop<Tile>(acc, ring, w_res, a.xn + k0, a.k, a.m, k1 - k0, m0);
    } else {
      gemm_core::ring_mainloop<Tile, kW == kAhead>(acc, ring, a.xn + k0, a.k, a.w + k0 * a.n, a.n,
                                                   a.m, a.n, k1 - k0, m0, n0, none, none);
    }
    Tile::reduce_groups(acc, reinterpret_cast<float*>(smem));  // two K groups: into group 0's
    const int64_t tile = int64_t(rb) * o.tiles_n + cb;
    if (!kSplit ||
        add_part<Tile>(acc, o.parts + tile * Tile::kBM * Tile::kBN, o.arrive + tile, splits)) {
      gemm_core::staged_bias_store<Tile, false>(acc, ring, a.bias, a.y, a.m, a.n, m0, n0);
    }
    if (stamps && threadIdx.x == 0) {  // thread 0's view of the tile, its stores issued
      phase_record_at(a.phases, unsigned(t), kTilesTile, s_started, phase_clock(), unsigned(rb),
                      uint32_t(s_waited));
    }
  }
  if (threadIdx.x == 0 && atomicAdd(a.counters + 1, 1u) == gridDim.x - 1) {
    a.counters[0] = 0;  // every block has taken its last ticket and finished its tiles
    a.counters[1] = 0;
    const int rows = static_cast<int>((a.m + kCountRows - 1) / kCountRows);
    for (int r = 0; r < rows; ++r) done[r] = 0;
  }
}

// The environment variable `name` as an int, or `fallback` where it is not set.
int env_or(const char* name, int fallback) {
  const char* env = std::getenv(name);
  return env != nullptr ? std::atoi(env) : fallback;
}

// Shared memory of the resident form: the A ring and the largest part's W rows, at least the
// ring's own size (the staged outputs and the K groups' sums go through it).
template <class Tile>
size_t resident_bytes(int64_t k, int splits) {
  const int64_t kts = (k + Tile::kBK - 1) / Tile::kBK, part = (kts + splits - 1) / splits;
  return std::max(gemm_core::resident_smem_bytes<Tile>(part * Tile::kBK), size_t(Tile::kSmemBytes));
}

// splits: 1 or 0 (the kept rule) whole tiles, 2-8 forced (FL_LN_SPLITS) where the scratch has room
// for the sums (up to 1024 tokens).
template <class Tile, int kMinBlocks, bool kSplit, int kW>
Status launch_tiles_as(const LnArgs<T>& a, int per_sm_cap, int splits, cudaStream_t stream) {
  const size_t smem =
      kW == kResident ? resident_bytes<Tile>(a.k, splits) : size_t(Tile::kSmemBytes);
  auto kernel = ln_mma_tiles_kernel<Tile, kMinBlocks, kSplit, kW>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int device = 0, sms = 0, per_sm = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Tile::kThreads, smem));
  if (per_sm < 1) return Status::Unsupported("its tile does not fit this GPU's shared memory");
  if (per_sm_cap > 0) per_sm = std::min(per_sm, per_sm_cap);
  const int64_t items = (a.m + kItemRows<Tile> - 1) / kItemRows<Tile>;
  const int64_t row_blocks = (a.m + Tile::kBM - 1) / Tile::kBM;
  const int tiles_n = (a.n + Tile::kBN - 1) / Tile::kBN;
  if (items + row_blocks * tiles_n * 4 > (int64_t(1) << 30))
    return Status::Unsupported("too many tokens");
  const Scratch sc(a.m, a.n);
  const int64_t tiles = row_blocks * tiles_n;
  // Measurements only: FL_LN_PREFETCH 1 has every tile ask L2 for its whole W before its wait
  // (the form before), s > 1 shares each column tile's W among s row blocks; 0, the kept rule,
  // asks for none (measured as fast at 256 tokens and faster at 512 and 1023).
  const int share = int(std::min<int64_t>(env_or("FL_LN_PREFETCH", 0), row_blocks));
  // The kept rule: block b's first ticket is b where the GPU launches cooperatively.
  // Measurements: FL_LN_FIRST 0 every ticket from the counter, 2 without the one-ticket exit.
  int cooperative = 0;
  FL_CUDA_TRY(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  const int first_asked = env_or("FL_LN_FIRST", 1);
  const int first = cooperative && (first_asked == 1 || first_asked == 2) ? first_asked : 0;
  const TicketOrder o{int(items),
                      tiles_n,
                      int(tiles * splits),
                      splits,
                      std::max(share, 0),
                      first,
                      a.counters + sc.arrive,
                      reinterpret_cast<float*>(a.counters + sc.parts)};
  const int blocks = int(std::min<int64_t>(o.items + o.tiles, int64_t(sms) * per_sm));
  if (first) {
    LnArgs<T> args = a;
    TicketOrder order = o;
    void* params[] = {&args, &order};
    FL_CUDA_TRY(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), dim3(blocks),
                                            dim3(Tile::kThreads), params, smem, stream));
  } else {
    kernel<<<blocks, Tile::kThreads, smem, stream>>>(a, o);
  }
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}
// run(std::integral_constant<int, way>{}) for a WayOfW.
template <class Run>
Status with_way(int way, const Run& run) {
  if (way == kResident) return run(std::integral_constant<int, kResident>{});
  if (way == kAhead) return run(std::integral_constant<int, kAhead>{});
  return run(std::integral_constant<int, kStreamed>{});
}

// resident: 2 W resident where it fits this GPU's shared memory, 1 streamed, 3 streamed with the
// ring's first K-tiles of W asked for before the wait; 0 the kept rule: resident while every
// ticket has its own SM (one block an SM), where it fits, else 3.
template <class Tile, int kMinBlocks>
Status launch_tiles(const LnArgs<T>& a, int per_sm_cap, int splits, int resident,
                    const LnTilesGpu& gpu, cudaStream_t stream) {
  // 0 (the kept rule) and 1: whole tiles; parts of K only where the scratch holds their sums.
  if (splits < 2 || splits > 8 || Scratch(a.m, a.n).floats == 0) splits = 1;
  const int optin = gpu.optin, sms = gpu.sms;
  const int64_t tickets =
      (a.m + kItemRows<Tile> - 1) / kItemRows<Tile> +
      (a.m + Tile::kBM - 1) / Tile::kBM * ((a.n + Tile::kBN - 1) / Tile::kBN) * splits;
  const bool fits = resident_bytes<Tile>(a.k, splits) + 64 <= size_t(optin);
  const bool on = fits && (resident == 2 || (resident == 0 && tickets <= sms));
  const int way = on ? kResident : resident == 1 ? kStreamed : kAhead;
  return with_way(way, [&](auto w) {
    constexpr int kW = decltype(w)::value;
    return splits > 1 ? launch_tiles_as<Tile, kMinBlocks, true, kW>(a, per_sm_cap, splits, stream)
                      : launch_tiles_as<Tile, kMinBlocks, false, kW>(a, per_sm_cap, 1, stream);
  });
}

}  // namespace

size_t ln_mma_tiles_counter_bytes(int64_t m, int64_t n) {
  return Scratch(m, n).bytes();
}

LnPartsScratch ln_parts_scratch(unsigned* counters, int64_t m, int64_t n) {
  const Scratch sc(m, n);
  if (counters == nullptr || sc.floats == 0) return {};
  return {counters + sc.arrive, reinterpret_cast<float*>(counters + sc.parts),
          reinterpret_cast<float*>(counters + sc.rows_at)};
}

Status ln_tiles_gpu(int k, int n, std::initializer_list<const void*> rows, LnTilesGpu* gpu) {
  for (const void* p : rows) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      return Status::Unsupported("C is not a multiple of 8 up to 1024");
  }
  if (k % 8 != 0 || k > 8 * 32 * kLaneChunks || n % 8 != 0)
    return Status::Unsupported("C is not a multiple of 8 up to 1024");
  int device = 0, major = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&gpu->sms, cudaDevAttrMultiProcessorCount, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (major < 8) return Status::Unsupported("bf16 mma.sync needs compute capability 8.0");
  gpu->optin = planned_shared_optin(optin);
  return Status::Ok();
}

Status launch_ln_mma_tiles(const LnArgs<__nv_bfloat16>& a, LnTilesShape shape,
                           cudaStream_t stream) {
  if (a.xn == nullptr || a.counters == nullptr) {
    return Status::Unsupported("it needs a scratch for xn and its counters");
  }
  LnTilesGpu gpu;
  FL_TRY(ln_tiles_gpu(a.k, a.n, {a.x, a.w, a.gamma, a.beta, a.y, a.xn}, &gpu));
  // Measurements only: FL_LN_NORM (1 row items, 2 in each tile), FL_LN_TILES (1-10),
  // FL_LN_SPLITS (1-8) and FL_LN_RESIDENT (1 W streamed, 2 resident, 3 W's first K-tiles ahead
  // of the wait) force a form where the shape leaves the choice.
  const auto forced = [](int given, const char* name) {
    const char* env = std::getenv(name);
    return given == 0 && env != nullptr ? std::atoi(env) : given;
  };
  const int normalize = forced(shape.normalize, "FL_LN_NORM");
  int tile = forced(shape.tile, "FL_LN_TILES");
  if (normalize == 2) return launch_ln_mma_tiles_local(a, tile, stream);
  const int splits = forced(shape.splits, "FL_LN_SPLITS");
  const int resident = forced(shape.resident, "FL_LN_RESIDENT");
  if (tile == 0) {
    // While the tiles and row items are one block an SM: 8 warps a 64 x 128 tile, with K-tiles
    // of 64 where its W columns fit in shared memory (resident: launch_tiles' rule), else of 32
    // in 8 stages with W's first 7 asked for before the wait (4 stages where 96 KiB do not fit);
    // from three rounds of one-block slots on, 8 warps in 8 stages; 4 warps in between.
    const int64_t tickets = (a.m + 63) / 64 * ((a.n + 127) / 128) + (a.m + 15) / 16;
    const bool fits = resident_bytes<LnResidentTile>(a.k, 1) + 64 <= size_t(gpu.optin);
    const bool deep = LnDeepTile::kSmemBytes + 64 <= size_t(gpu.optin);  // 96 KiB: sm_86's 99 fit
    const int streamed = resident != 1 && deep ? 7 : 3;
    tile = tickets <= gpu.sms      ? (resident != 1 && fits ? 9 : streamed)
           : tickets > 2 * gpu.sms ? 7
                                   : 2;
  }
  return with_tiles_form(tile, [&](auto form) {
    using Form = decltype(form);
    return launch_tiles<typename Form::Tile, Form::kMinBlocks>(a, shape.per_sm, splits, resident,
                                                               gpu, stream);
  });
}

}  // namespace fl::layernorm_linear
