// The FFN's level 2 at many tokens on any GPU: ffn_tiles_kernel, the portable large-token rung,
// on the GEMM core's top tiles (kernels/gemm_core/: mma_tile.cuh in bf16 on sm_80+,
// sgemm_tile.cuh in fp32 on the CUDA cores from sm_70).
//
// What changes against ffn_split.cu (a block owns a slice of the hidden units for all tokens,
// its shares of y added in L2, a grid barrier): at many tokens h = GELU(x W1 + b1) no longer
// fits on chip (16K x 3072 x 2 B = 100 MB), and splitting the hidden units makes every block
// add a share of all of y. Here both GEMMs are ordinary 128 x 128 output tiles of one
// persistent launch, and h goes through L2 soon after it is made:
//   * up tiles (x rows r, W1 columns j, K = C): epilogue bias + GELU, rounded to T, into h;
//   * down tiles (h rows r, W2 columns j, K = 4C): epilogue bias, into y;
//   * blocks take tiles in ticket order (an atomic counter), row block by row block: the up
//     tiles of row block r + lag, then the down tiles of row block r, so the down tiles find
//     their rows of h in L2 (lag row blocks of h: ~8 MB at C = 768). A down tile waits for the
//     up tiles of its row block (a counter each, acquire/release); they all hold smaller
//     tickets, taken by blocks already running, so the wait always ends (no cooperative
//     launch needed). The last block out leaves the counters at zero.
//   * fp32: a down tile is 4x an up tile's work (K = 4C), so the last ones leave SMs idle for
//     up to one of them; they come cut over K in 2 parts (4 where down tiles are fewer than the
//     block slots, as at 1K tokens). Part 0 stores acc + b2 and counts itself done in its row
//     block's counter; part q waits for all part-(q - 1) tiles of its row block, then adds its
//     acc to y (read from L2): the same sum order every run. The tiles it waits for hold smaller
//     tickets, so the wait ends as the up tiles' does.
//     Napkin math at C = 768 on 132 SMs x 2 blocks (264 slots), in up-tile units (2 x 128 x
//     128 x 768 FLOP): a row block is 24 up tiles + 6 down tiles of 4 units = 48 units. At 16K
//     tokens (128 row blocks, 23 units a slot) whole down tiles leave a tail of up to 4 units
//     (~8% of the run), halves up to 2. At 1K tokens (8 row blocks, 192 units, one wave) the
//     critical path is an up tile then a down tile, 5 units; in quarters ~2 units + the adds.
//     Cost: each later part reads and writes its y tile once more (16K x 768 x 4 B = 50 MB a
//     part at 16K tokens: ~30 us from L2/HBM against ~4 ms of FMA).
// Tiles: in fp32 those of ln_mma.cu (128 x 128, 48 KiB of ring); in bf16 the GEMM core's
// 128 x 256 block (8 warps of 64 x 64, 3 stages, 72 KiB) from 8K tokens, below it 128 x 128 up
// tiles (4 warps, 64 KiB) and 64 x 128 down tiles (at 1K tokens and C = 768, 96 down tiles
// instead of 48 of 128 x 128, which fill only a third of an H100's SMs).
// Budget at 16K tokens, C = 768, bf16: 2 GEMMs of 2 x 16384 x 768 x 3072 = 77 GFLOP each,
// 0.62 ms at 250 TFLOP/s; HBM: x, the weights, y once (60 MB) and h, written back by L2 (100
// MB) and, where L2 has let it go, read again: 20-70 us at 3 TB/s. Level 1 writes and reads h.
// Shapes: any token count; C a multiple of 8 (whole 16-byte chunks).
#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/ffn/ffn_common.cuh"
#include "kernels/ffn/ffn_tiles.h"
#include "kernels/gemm_core/mma_tile.cuh"
#include "kernels/gemm_core/ring.cuh"
#include "kernels/gemm_core/sgemm_tile.cuh"
#include "kernels/gemm_core/tile_epilogue.cuh"
#include "kernels/phases.cuh"

namespace fl {
namespace {

// The ticket order: lag row blocks of up tiles first, then groups of (the up tiles of row block
// lag + j, the down tiles of row block j), then the last lag row blocks' down tiles. The last
// `tail` row blocks' down tiles come in halves of their width (2 downs narrow tiles each, bf16),
// so the last tickets are short and the blocks finish closer together.
struct TileOrder {
  int rows, ups, downs, lag;  // row blocks, up and down tiles per row block, row blocks ahead
  int tail = 0;               // the last row blocks whose down tiles are narrow
  __host__ __device__ int total() const { return rows * (ups + downs) + tail * downs; }
  __device__ void decode(int t, bool* up, int* rb, int* col, bool* narrow) const {
    const int ahead = lag * ups, first_narrow = rows - tail;  // row block of the first narrow
    // Groups j < wide_groups have downs wide tiles, the rest of the steady groups 2 downs.
    const int wide_groups = max(0, min(rows - lag, first_narrow));
    const int wide = wide_groups * (ups + downs);
    const int steady = wide + (rows - lag - wide_groups) * (ups + 2 * downs);
    *narrow = false;
    if (t < ahead) {
      *up = true, *rb = t / ups, *col = t % ups;
    } else if (t - ahead < steady) {
      const int v = t - ahead;
      const int group = v < wide ? ups + downs : ups + 2 * downs;
      const int j = v < wide ? v / group : wide_groups + (v - wide) / group;
      const int r = v < wide ? v % group : (v - wide) % group;
      *up = r < ups;
      *rb = *up ? lag + j : j;
      *col = *up ? r : r - ups;
      *narrow = !*up && j >= first_narrow;
    } else {
      const int u = t - ahead - steady, last = rows - lag;  // down tiles of row blocks last ..
      const int wide_rbs = max(0, first_narrow - last), wide_tail = wide_rbs * downs;
      *up = false;
      if (u < wide_tail) {
        *rb = last + u / downs, *col = u % downs;
      } else {
        *rb = last + wide_rbs + (u - wide_tail) / (2 * downs), *col = (u - wide_tail) % (2 * downs);
        *narrow = true;
      }
    }
  }
};

template <typename T>
struct FfnTilesParams {
  const T *x, *w1, *b1, *w2, *b2;
  T *y, *h;
  unsigned* counters;  // [0] next ticket, [1] blocks done, [2 ..] up tiles done per row block
  PhaseSink phases;
  int64_t m;
  int c, hidden;
  int splits;  // fp32: parts of K = 4C each down tile is cut into (1, 2 or 4)
};

// y += acc, 4 columns at a time: a later part of a split down tile (fp32; the bias came with the
// first part). y is read from L2 (ffn::load_l2): another SM wrote it.
struct AddStoreTile {
  float* y;
  int64_t m, n;
  __device__ __forceinline__ void operator()(int64_t row, int64_t col, float (&v)[4]) const {
    if (row >= m || col >= n) return;
    float4* p = reinterpret_cast<float4*>(y + row * n + col);
    const float4 old = ffn::load_l2(p);
    *p = make_float4(old.x + v[0], old.y + v[1], old.z + v[2], old.w + v[3]);
  }
};

// Thread 0 waits until the row block's counter reaches `target`, then the block goes on.
__device__ __forceinline__ void wait_for(const unsigned* counter, unsigned target) {
  if (threadIdx.x == 0) {
    while (load_acquire(counter) < target) __nanosleep(256);
  }
  __syncthreads();
}

// Up tiles of Up (kBM = 128: a row block), down tiles of Down (128 or 64 rows: a row block or
// half of one; the same thread count). kStaged (bf16): the tiles' outputs go through the ring
// as 16-byte rows (tile_epilogue.cuh's staged_bias_store), else 4-byte pairs straight from
// the registers.
// A bf16 down tile of D: h's rows m0.., W2's columns n0.., y = acc + b2.
template <class D, bool kStaged, typename T>
__device__ __forceinline__ void down_tile(const FfnTilesParams<T>& p, T* ring, int64_t m0,
                                          int64_t n0) {
  const gemm_core::NoHook none;
  typename D::Acc acc;
  D::zero(acc);
  gemm_core::ring_mainloop<D>(acc, ring, p.h, p.hidden, p.w2, p.c, p.m, p.c, p.hidden, m0, n0, none,
                              none);
  if constexpr (kStaged) {
    gemm_core::staged_bias_store<D, false>(acc, ring, p.b2, p.y, p.m, p.c, m0, n0);
  } else {
    D::store(acc, m0, n0, gemm_core::BiasStoreTile<T, false>{p.y, p.b2, p.m, p.c});
  }
}

// Narrow: the tail's down tiles (128 rows, half of Down's width; bf16 only).
template <class Up, class Down, bool kStaged, class Narrow>
__global__ void __launch_bounds__(Up::kThreads, Up::kMinBlocks)
    ffn_tiles_kernel(FfnTilesParams<typename Up::T> p, TileOrder order) {
  using T = typename Up::T;
  static_assert(Up::kThreads == Down::kThreads && Up::kBM == 128 && 128 % Down::kBM == 0, "");
  static_assert(Narrow::kThreads == Up::kThreads && Narrow::kBM == 128, "narrow down tiles");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int s_ticket;
  __shared__ uint64_t s_started, s_waited;
  T* ring = reinterpret_cast<T*>(smem);
  unsigned* done = p.counters + 2;
  const gemm_core::NoHook none;
  const int down_cols = (p.c + Down::kBN - 1) / Down::kBN;
  for (;;) {
    if (threadIdx.x == 0) s_ticket = static_cast<int>(atomicAdd(p.counters, 1u));
    __syncthreads();
    const int t = s_ticket;
    __syncthreads();
    if (t >= order.total()) break;
    bool up, narrow;
    int rb, col;
    order.decode(t, &up, &rb, &col, &narrow);
    // Thread 0's stamps of this tile, in shared memory: no registers held across the main loop.
    if ((p.phases.records != nullptr) && threadIdx.x == 0) s_started = phase_clock(), s_waited = 0;
    if (up) {
      const int64_t m0 = int64_t(rb) * Up::kBM, n0 = int64_t(col) * Up::kBN;
      typename Up::Acc acc;
      Up::zero(acc);
      gemm_core::ring_mainloop<Up>(acc, ring, p.x, p.c, p.w1, p.hidden, p.m, p.hidden, p.c, m0, n0,
                                   none, none);
      if constexpr (kStaged && std::is_same_v<T, __nv_bfloat16>) {
        gemm_core::staged_bias_store<Up, true>(acc, ring, p.b1, p.h, p.m, p.hidden, m0, n0);
      } else {
        Up::store(acc, m0, n0, gemm_core::BiasStoreTile<T, true>{p.h, p.b1, p.m, p.hidden});
      }
      __threadfence();  // this thread's h before the row block's counter (release)
      __syncthreads();
      if (threadIdx.x == 0) atomicAdd(done + rb, 1u);
    } else if constexpr (std::is_same_v<T, float>) {
      // Down tiles come part by part (order.downs / splits tiles each): part q covers K from
      // q hidden / splits; part 0 stores acc + b2, part q > 0 waits for every part-(q - 1) tile
      // of its row block, then adds.
      const int per_part = order.downs / p.splits, part = col / per_part;
      wait_for(done + rb, unsigned(order.ups));  // h's rows are in; cp.async.cg reads L2
      if ((p.phases.records != nullptr) && threadIdx.x == 0) s_waited = phase_clock() - s_started;
      const int64_t m0 = int64_t(rb) * Up::kBM, n0 = int64_t(col % per_part) * Down::kBN;
      const int64_t k0 = int64_t(part) * (p.hidden / p.splits);
      typename Down::Acc acc;
      Down::zero(acc);
      gemm_core::ring_mainloop<Down>(acc, ring, p.h + k0, p.hidden, p.w2 + k0 * p.c, p.c, p.m, p.c,
                                     p.hidden / p.splits, m0, n0, none, none);
      if (part > 0) {
        wait_for(done + rb, unsigned(order.ups + part * per_part));
        Down::store(acc, m0, n0, AddStoreTile{p.y, p.m, p.c});
      } else {
        Down::store(acc, m0, n0, gemm_core::BiasStoreTile<T, false>{p.y, p.b2, p.m, p.c});
      }
      if (p.splits > 1) {
        __threadfence();  // this thread's y before the row block's counter (release)
        __syncthreads();
        if (threadIdx.x == 0) atomicAdd(done + rb, 1u);
      }
    } else {
      if (threadIdx.x == 0) {
        while (load_acquire(done + rb) < unsigned(order.ups)) __nanosleep(256);
        if ((p.phases.records != nullptr)) s_waited = phase_clock() - s_started;
      }
      __syncthreads();  // h's rows are in; cp.async.cg reads them from L2
      if (narrow) {
        down_tile<Narrow, kStaged>(p, ring, int64_t(rb) * Up::kBM, int64_t(col) * Narrow::kBN);
      } else {
        const int64_t m0 = int64_t(rb) * Up::kBM + (col / down_cols) * Down::kBM;
        down_tile<Down, kStaged>(p, ring, m0, int64_t(col % down_cols) * Down::kBN);
      }
    }
    if ((p.phases.records != nullptr) &&
        threadIdx.x == 0) {  // thread 0's view of the tile, its stores issued
      phase_record_at(p.phases, unsigned(t), up ? kFfnTileUp : kFfnTileDown, s_started,
                      phase_clock(), unsigned(rb), uint32_t(s_waited));
    }
  }
  if (threadIdx.x == 0 && atomicAdd(p.counters + 1, 1u) == gridDim.x - 1) {
    p.counters[0] = 0;  // every block has taken its last ticket and finished its tiles
    p.counters[1] = 0;
    for (int r = 0; r < order.rows; ++r) done[r] = 0;
  }
}

template <class Up, class Down = Up, bool kStaged = false, class Narrow = Up>
Status launch_typed(const FfnTilesBuffers& b, int64_t m, int64_t c, cudaStream_t stream,
                    bool split = false, bool narrow_tail = false) {
  using T = typename Up::T;
  const int hidden = static_cast<int>(4 * c);
  FfnTilesParams<T> p{static_cast<const T*>(b.x),
                      static_cast<const T*>(b.w1),
                      static_cast<const T*>(b.b1),
                      static_cast<const T*>(b.w2),
                      static_cast<const T*>(b.b2),
                      static_cast<T*>(b.y),
                      static_cast<T*>(b.h),
                      b.counters,
                      b.phases,
                      m,
                      static_cast<int>(c),
                      hidden,
                      1};
  const size_t smem = std::max(Up::kSmemBytes, Down::kSmemBytes);
  auto kernel = ffn_tiles_kernel<Up, Down, kStaged, Narrow>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int device = 0, sms = 0, per_sm = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Up::kThreads, smem));
  if (per_sm < 1) return Status::Unsupported("its tile does not fit this GPU's shared memory");
  TileOrder order{static_cast<int>((m + Up::kBM - 1) / Up::kBM), (hidden + Up::kBN - 1) / Up::kBN,
                  static_cast<int>((c + Down::kBN - 1) / Down::kBN) * (Up::kBM / Down::kBM), 1};
  if (split) {
    // Down tiles are 4x an up tile's work: in halves the last ones leave a shorter tail; in
    // quarters where the down tiles are fewer than the block slots (every part's K a multiple
    // of 16: hidden = 4 C, C a multiple of 8).
    p.splits = int64_t(order.rows) * order.downs * 2 < int64_t(sms) * per_sm ? 4 : 2;
    order.downs *= p.splits;
  }
  const int blocks = std::min(order.total(), sms * per_sm);
  // Enough row blocks ahead that the first wave of blocks is busy with up tiles while the first
  // down tiles wait; at most all of them.
  order.lag = std::min(order.rows, blocks / (order.ups + order.downs) + 1);
  // Narrow tail: enough row blocks that their down tiles (2 downs narrow ones each) are about
  // one narrow tile for every block slot.
  if (narrow_tail)
    order.tail = std::min(order.rows, (blocks + 2 * order.downs - 1) / (2 * order.downs));
  kernel<<<blocks, Up::kThreads, smem, stream>>>(p, order);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// The tiles: 128 x 128 (4 warps of 64 x 64, 4 stages), 128 x 256 (8 warps, 3 stages: the
// ladder's block_128x256 rung; its last row blocks' down tiles as 128 x 128 of 8 warps of
// 64 x 32) and 128 x 128 up tiles with 64 x 128 down tiles (4 warps of
// 32 x 64: twice the down tiles where they are too few to fill the SMs). 128 x 256 stages its
// outputs through shared memory; the 4-warp tiles store from the registers (staged, each
// thread's bias of 8 column pairs held across the stores pushed them past 255 registers on
// sm_80: spills).
using Tile128 = gemm_core::LessonMmaTile;
using Tile256 = gemm_core::MmaTile<128, 256, 2, 4, 3, true>;
using Down64 = gemm_core::MmaTile<64, 128, 2, 2, 4, true>;
using Narrow128 = gemm_core::MmaTile<128, 128, 2, 4, 3, true>;  // 8 warps of 64 x 32

}  // namespace

size_t ffn_tiles_counter_bytes(int64_t m) {
  return size_t(2 + (m + 127) / 128) * sizeof(unsigned);
}

FfnTilesShape ffn_tiles_shape(int64_t m) {
  return m >= kFfnTilesWideFrom ? FfnTilesShape::k128x256 : FfnTilesShape::k128x128_down64;
}

Status launch_ffn_tiles(Precision p, const FfnTilesBuffers& b, int64_t m, int64_t c,
                        cudaStream_t stream, FfnTilesShape shape) {
  const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  if (c % 8 != 0 || !aligned(b.x) || !aligned(b.w1) || !aligned(b.w2) || !aligned(b.h)) {
    return Status::Unsupported("C is not a multiple of 8");
  }
  static_assert(
      Tile128::kBM == 128 && Tile256::kBM == 128 && gemm_core::LessonSgemmTile::kBM == 128,
      "ffn_tiles_counter_bytes counts row blocks of 128");
  if (p != Precision::bf16) {
    return launch_typed<gemm_core::LessonSgemmTile>(b, m, c, stream,
                                                    shape != FfnTilesShape::k128x128);
  }
  if (shape == FfnTilesShape::automatic) shape = ffn_tiles_shape(m);
  switch (shape) {
    case FfnTilesShape::k128x256:
      return launch_typed<Tile256, Tile256, true, Narrow128>(b, m, c, stream, false, true);
    case FfnTilesShape::k128x256_direct:
      return launch_typed<Tile256, Tile256, false>(b, m, c, stream);
    case FfnTilesShape::k128x256_staged:
      return launch_typed<Tile256, Tile256, true>(b, m, c, stream);
    case FfnTilesShape::k128x256_tail:
      return launch_typed<Tile256, Tile256, false, Narrow128>(b, m, c, stream, false, true);
    case FfnTilesShape::k128x128_down64:
      return launch_typed<Tile128, Down64, false>(b, m, c, stream);
    default:
      return launch_typed<Tile128, Tile128, false>(b, m, c, stream);
  }
}

}  // namespace fl
