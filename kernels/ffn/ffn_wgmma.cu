// The FFN's level 2 at hundreds to thousands of tokens on Hopper (sm_90a, bf16): y = GELU(x W1 +
// b1) W2 + b2 as one persistent kernel of streamed wgmma tiles (kernels/wgmma_gemm.cuh), h
// passed from the up tiles to the down tiles through a ring buffer in global memory.
//
// What changes against the small-token kernels (ffn_small.cu, ffn_split.cu): they split the
// hidden units across blocks, so every block holds a share of every output, and those shares
// grow with the tokens. At many tokens the FFN is two large GEMMs, not a weight stream, so this
// kernel is cut like a GEMM: output tiles of both GEMMs, each computed whole by one block. h
// then has to go one level out: a ring of kRing row blocks of 128 tokens x 4C (50 MB at C =
// 768), each read back by its down tiles soon after it was written, in the hope that L2 keeps
// it. What this rung saves is a launch and the gap between two GEMMs; the counters show that L2
// writes h back to HBM all the same (docs/PERFORMANCE.md, lesson 8).
//
//   x  --TMA--> up tile:   h[128 x 256] = GELU(x W1 + b1)  --st.global--> ring
//   h  --TMA--> down tile: y[128 x 256] = h W2 + b2        --st.global--> y (HBM)
//
//   * Tiles (kernels/ffn/ffn_schedule.h): row block rb (128 tokens) has U = 4C / 256 up tiles
//     (12 at C = 768, K = C) and D = C / 256 down tiles (3, K = 4C). The list interleaves them:
//     step s holds the up tiles of row block s and then the down tiles of row block s - kLag, so
//     a row block's down tiles come several waves of blocks after its up tiles (kLag x 15 = 600
//     tiles later, against 132 blocks at work at once). Persistent blocks, one per SM, take
//     every gridDim-th tile.
//   * Order between tiles, through two counters per row block in global memory: a down tile's
//     producer waits until up_done[rb] = U before its TMA reads h; an up tile waits until the
//     down tiles of the row block that last used its ring slot (rb - kRing) are done before h is
//     overwritten. A tile's consumers store, fence, meet at a named barrier, and one thread adds
//     1 with release semantics; waiters acquire. Every dependency is earlier in the list and the
//     launch is cooperative (all blocks resident), so the earliest unfinished tile can always
//     run: no deadlock. The last tile to pass a counter resets it, so the next run starts at 0.
//
// Budget at 16K tokens, C = 768: 2 x 2 M C 4C = 155 GFLOP (157 us at 989 TFLOP/s); HBM, textbook:
// x 25 MB + W1, W2 9.4 MB + y 25 MB = 60 MB (20 us at 3.06 TB/s); h: 100 MB written and read back
// by 3 down-tile columns (400 MB of L2 reads), and written back to HBM by L2 (another 100 MB,
// 33 us, if it all goes). At 1K tokens the critical path is one up tile and one down tile (K =
// 3072) on one SM: a split K for the down tiles is what would help there.
#include "kernels/ffn/ffn_wgmma.h"

#include <algorithm>
#include <cstdlib>

#include "kernels/activations.cuh"
#include "kernels/cuda_check.h"
#include "kernels/ffn/ffn_schedule.h"
#include "kernels/hopper.cuh"
#include "kernels/phases.cuh"
#include "kernels/wgmma_gemm.cuh"

namespace fl {
namespace {

using bf16 = __nv_bfloat16;
namespace wg = wgmma_gemm;

constexpr int kLag = 40;   // steps between a row block's up tiles and its down tiles
constexpr int kRing = 64;  // row blocks of h in the ring (> lag: a slot is reused after use)

struct FfnWgmmaArgs {
  const bf16 *b1, *b2;
  bf16 *h, *y;                    // h: the ring, kRing x 128 rows of `hidden`
  unsigned *up_done, *down_done;  // per row block
  int64_t m;
  int c, hidden, row_blocks;
  int lag, ring;     // kLag and kRing
  PhaseSink phases;  // ffn_wgmma_phases(), one record per tile; stamps on when set
};

using ffn_schedule::Tile;
using ffn_schedule::tile_at;

__device__ inline void wait_count(const unsigned* counter, unsigned target) {
  while (hopper::load_acquire(counter) < target) __nanosleep(64);
}

// The producer thread: each tile's dependency, then its slots.
__device__ void produce(const wg::Ring& ring, const FfnWgmmaArgs& a, const CUtensorMap* x_map,
                        const CUtensorMap* w1_map, const CUtensorMap* h_map,
                        const CUtensorMap* w2_map) {
  const int up = (a.hidden + wg::kBN - 1) / wg::kBN, down = (a.c + wg::kBN - 1) / wg::kBN;
  const int tiles = a.row_blocks * (up + down);
  const int k_up = (a.c + wg::kBK - 1) / wg::kBK, k_down = (a.hidden + wg::kBK - 1) / wg::kBK;
  wg::Cursor at;
  for (int p = blockIdx.x; p < tiles; p += gridDim.x) {
    const Tile t = tile_at(p, a.row_blocks, up, down, a.lag);
    if (t.down) {
      wait_count(&a.up_done[t.rb], up);  // all of the row block's h is in the ring
      hopper::fence_async_global();      // ... and visible to TMA's reads
      wg::produce_tile(ring, at, h_map, w2_map, t.rb % a.ring * wg::kBM, t.nt * wg::kBN, k_down);
    } else {
      wg::produce_tile(ring, at, x_map, w1_map, t.rb * wg::kBM, t.nt * wg::kBN, k_up);
    }
  }
}

// A tile's epilogue (kernels/wgmma_gemm.cuh): y = acc + b2 (down), or h = GELU(acc + b1) into
// the ring's slot, rounded to bf16 as level 1's h is (up). Consumer warpgroup `group` holds rows
// [64 group, 64 group + 64) of the tile and all its 256 columns.
__device__ void store_tile(const Tile& t, const float (&acc)[128], const __nv_bfloat162 (&bias)[32],
                           int group, const FfnWgmmaArgs& a, int down) {
  const int col0 = t.nt * wg::kBN;
  if (t.down) {
    const int64_t row0 = int64_t(t.rb) * wg::kBM + 64 * group;
    wg::store_tile(acc, bias, a.y + row0 * a.c + col0, a.c, a.m - row0, a.c - col0,
                   [](float v) { return v; });
    return;
  }
  if (t.rb >= a.ring) wait_count(&a.down_done[t.rb - a.ring], down);  // the slot's last reader
  const int64_t ring_row0 = int64_t(t.rb % a.ring) * wg::kBM + 64 * group;
  wg::store_tile(acc, bias, a.h + ring_row0 * a.hidden + col0, a.hidden, 64, a.hidden - col0,
                 [](float v) { return gelu_tanh_fast(v); });
}

// After a tile's stores: every consumer thread fences, they meet, and one thread counts the tile
// with release semantics; the last tile past a counter resets it for the next run.
__device__ void publish(const Tile& t, const FfnWgmmaArgs& a, int up, int down) {
  __threadfence();
  hopper::fence_async_global();
  hopper::sync_threads(1, wg::kConsumerThreads);
  if (threadIdx.x != 0) return;
  if (t.down) {
    if (hopper::add_release(&a.down_done[t.rb], 1) == unsigned(down - 1)) {
      atomicExch(&a.up_done[t.rb], 0u);  // every down tile of rb is past its wait
      if (t.rb + a.ring >= a.row_blocks) atomicExch(&a.down_done[t.rb], 0u);  // no reader left
    }
  } else if (hopper::add_release(&a.up_done[t.rb], 1) == unsigned(up - 1) && t.rb >= a.ring) {
    atomicExch(&a.down_done[t.rb - a.ring], 0u);  // every up tile of rb is past its wait
  }
}

// Whether thread 0 stamps tile p: stamps on and the tile's record within the sink.
__device__ __forceinline__ bool stamps(const PhaseSink& sink, int p) {
  return sink.records != nullptr && threadIdx.x == 0 && unsigned(p) < sink.capacity;
}

__global__ void __launch_bounds__(wg::kThreads, 1)
    ffn_wgmma_kernel(const __grid_constant__ CUtensorMap x_map,
                     const __grid_constant__ CUtensorMap w1_map,
                     const __grid_constant__ CUtensorMap h_map,
                     const __grid_constant__ CUtensorMap w2_map, FfnWgmmaArgs a) {
#ifdef FL_SM90A_DEVICE
  extern __shared__ unsigned char shared_raw[];
  const wg::Ring ring = wg::make_ring(shared_raw);
  if (wg::is_producer()) {
    wg::producer_registers();
    if (threadIdx.x == wg::kConsumerThreads) produce(ring, a, &x_map, &w1_map, &h_map, &w2_map);
    return;
  }
  wg::consumer_registers();
  const int up = (a.hidden + wg::kBN - 1) / wg::kBN, down = (a.c + wg::kBN - 1) / wg::kBN;
  const int tiles = a.row_blocks * (up + down);
  const int k_up = (a.c + wg::kBK - 1) / wg::kBK, k_down = (a.hidden + wg::kBK - 1) / wg::kBK;
  const int group = threadIdx.x / 128;  // the consumer warpgroup
  wg::Cursor at;
  for (int p = blockIdx.x; p < tiles; p += gridDim.x) {
    const Tile t = tile_at(p, a.row_blocks, up, down, a.lag);
    // Stamps (thread 0): the tile's start goes straight into its record, the rest once the tile
    // is published. Nothing of it stays in registers across the tile, and no wait is added: the
    // consumers run at the register limit, and a stamp that kept a value or waited on the ring
    // here made the compiler spill.
    if (stamps(a.phases, p)) a.phases.records[p].start_ns = phase_clock();
    float acc[128];
    __nv_bfloat162 bias[32];  // the tile's b1 or b2, loaded ahead of its multiplies
    wg::load_bias(t.down ? a.b2 : a.b1, t.down ? a.c : a.hidden, t.nt * wg::kBN, bias);
    wg::consume_tile(ring, at, acc, t.down ? k_down : k_up, group);
    store_tile(t, acc, bias, group, a, down);
    publish(t, a, up, down);
    if (stamps(a.phases, p)) {
      const uint64_t started = a.phases.records[p].start_ns;
      phase_record_at(a.phases, static_cast<unsigned>(p), t.down ? 1 : 0, started, phase_clock(),
                      static_cast<uint32_t>(p));
    }
  }
#endif
}

}  // namespace

int64_t ffn_wgmma_ring_rows(int64_t m) {
  return std::min<int64_t>(kRing, (m + wg::kBM - 1) / wg::kBM) * wg::kBM;
}

int64_t ffn_wgmma_counters(int64_t m) {
  return 2 * ((m + wg::kBM - 1) / wg::kBM);
}

Status try_ffn_wgmma(const FfnWgmmaBuffers& b, int64_t m, int c, int hidden, int sms,
                     cudaStream_t stream, bool* launched) {
  *launched = false;
  if (!kWgmmaBuild || m < 1 || c % 8 != 0 || hidden % 8 != 0 || !b.h_ring || !b.counters) {
    return Status::Ok();
  }
  for (const void* p : {static_cast<const void*>(b.x), static_cast<const void*>(b.w1),
                        static_cast<const void*>(b.w2), static_cast<const void*>(b.h_ring),
                        static_cast<const void*>(b.y)}) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return Status::Ok();
  }
  bool sm90 = false;
  int device = 0, optin = 0, cooperative = 0;
  FL_TRY(hopper::current_device(&sm90, &optin));
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  if (!sm90 || !cooperative || wg::kSharedBytes > size_t(optin)) {
    return Status::Ok();
  }
  const int64_t row_blocks = (m + wg::kBM - 1) / wg::kBM;
  const int64_t tiles =
      row_blocks * ((hidden + wg::kBN - 1) / wg::kBN + (c + wg::kBN - 1) / wg::kBN);
  if (tiles > (int64_t(1) << 30)) return Status::Ok();

  auto kernel = ffn_wgmma_kernel;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(wg::kSharedBytes)));
  int per_sm = 0;
  FL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, wg::kThreads,
                                                            wg::kSharedBytes));
  if (per_sm < 1) return Status::Ok();
  CUtensorMap x_map, w1_map, h_map, w2_map;
  FL_TRY(hopper::make_tensor_map_2d(&x_map, b.x, m, c, wg::kBM, wg::kBK));
  FL_TRY(hopper::make_tensor_map_2d(&w1_map, b.w1, c, hidden, wg::kBK, wg::kBoxN));
  FL_TRY(hopper::make_tensor_map_2d(&h_map, b.h_ring, ffn_wgmma_ring_rows(m), hidden, wg::kBM,
                                    wg::kBK));
  FL_TRY(hopper::make_tensor_map_2d(&w2_map, b.w2, hidden, c, wg::kBK, wg::kBoxN));
  FfnWgmmaArgs args{b.b1,       b.b2,
                    b.h_ring,   b.y,
                    b.counters, b.counters + row_blocks,
                    m,          c,
                    hidden,     static_cast<int>(row_blocks),
                    kLag,       kRing,
                    b.phases};
  // Cooperative: every block is resident, which the tiles' waits on each other need.
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(tiles, int64_t(per_sm) * sms));
  void* params[] = {&x_map, &w1_map, &h_map, &w2_map, &args};
  FL_CUDA_TRY(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), dim3(grid),
                                          dim3(wg::kThreads), params, wg::kSharedBytes, stream));
  *launched = true;
  return Status::Ok();
}

}  // namespace fl
