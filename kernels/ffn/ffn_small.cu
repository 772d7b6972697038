// The FFN's level 2 at 1-64 tokens on Hopper (sm_90a, bf16): y = GELU(x W1 + b1) W2 + b2 in one
// launch that keeps every SM streaming weights from its first microsecond.
//
// What changes against the cluster kernel (ffn_cluster.cu): there every block still asks for
// its weights through cp.async, a few rows at a time, and the shares of y meet through L2
// atomics and a last-cluster pass. Here one thread per block asks TMA for every weight byte the
// block will need at once (W1's slice, then W2's piece), h goes through L2 after a single grid
// barrier, and the partial sums of y meet in distributed shared memory, counted on mbarriers: no
// atomics, no second pass, nothing to reset.
//
//   1. up (split over the hidden units): block b owns hidden units [32 b, 32 b + 32): it
//      multiplies x (all C inputs) by W1's 32 columns, adds b1, applies GELU and stores its
//      slice of h, rounded to bf16 as level 1's h is, to a scratch buffer (M x 4C: 6 KB a token,
//      it stays in L2);
//   2. a grid barrier (every block is resident: the launcher checks), after which all of h is
//      in L2;
//   3. down (split over K inside a cluster, over the columns across clusters): cluster q owns
//      output columns [64 q, 64 q + 64), block r of it hidden rows [r 4C / 8, (r + 1) 4C / 8):
//      it reads its piece of h back by TMA and multiplies it by W2's 4C / 8 x 64 piece;
//   4. the cluster's 8 partial sums meet in distributed shared memory: block r owns 8 of the 64
//      columns, receives every block's partials of them (16-byte st.async stores into its shared
//      memory, counted in bytes on its own mbarrier: no cluster barrier), adds them and b2 and
//      writes y.
// Data path: TMA copies of W1's slice (256 x 32 boxes, 64-byte rows) and of W2's piece (128 x 64
// boxes) into shared memory, completing on mbarriers; W2's copies are issued once W1's have
// landed (step 1 needs W1 first) and arrive while steps 1 and 2 run. x (kTM x 64 boxes) is the
// same for every block: block r of a cluster asks for boxes r, r + 8, ... once, multicast by TMA
// into all 8. The boxes land swizzled (kernels/hopper.cuh), and the warps read them with
// ldmatrix at the swizzled addresses (no bank conflicts) and multiply with mma.sync m16n8k16.
// Budget at C = 768 (12 clusters of 8 = 96 blocks): each block receives 48 KB of W1 and 48 KB of
// W2, plus x (1.5 KB a token, from L2 after the first block). Weights at copy bandwidth: 3.1 us;
// what follows them is one grid barrier (~1-1.5 us), an L2 read of h (0.8-48 KB a block) and the
// exchange of partial sums (1-2.5 us): a prediction of ~5-7 us against level 1's two launches.
// docs/PERFORMANCE.md (lesson 8) has what was measured, the phase timeline and what was tried.
#include "kernels/ffn/ffn_small.h"

#include <cuda.h>

#include <cstdlib>
#include <string>

#include "kernels/activations.cuh"
#include "kernels/cluster.cuh"
#include "kernels/cuda_check.h"
#include "kernels/ffn/ffn_small_math.cuh"
#include "kernels/hopper.cuh"
#include "kernels/phases.cuh"
#include "kernels/tensor_gemm.cuh"

namespace fl {
namespace {

using bf16 = __nv_bfloat16;
using namespace ffn_small_math;  // at_128, at_64, mma_step and the vector helpers

constexpr int kSize = 8;  // blocks a cluster
constexpr int kThreads = 256, kWarps = 8;
constexpr int kUnits = 32;             // a block's hidden units in step 1 (W1's box: 64-byte rows)
constexpr int kCols = 64;              // a cluster's output columns in step 3 (W2's box: 128 bytes)
constexpr int kOwned = kCols / kSize;  // the columns each block of a cluster sums and writes (8)
constexpr int kW1BoxRows = 256, kW2BoxRows = 128;  // W1: 256 x 32 boxes, W2: 128 x 64 boxes
constexpr int kBoxBytes = 16384;                   // either weight box
constexpr int kChunkCols = 64;                     // x's and h's boxes: kTM rows x 64 columns
constexpr int kRedLd = kUnits + 8;                 // step 1's per-warp partial sums: row stride
// The phases each block records (ffn_small_phases() names them, in this order).
enum Phase : unsigned { kSetup, kXW1In, kUpProjection, kGridBarrier, kHW2In, kDown };

// Warps in step 3, a 16-row tile each: at kTM = 16, 4 column groups of 16 x 2 halves of K; at
// 32, 2 row tiles x 2 column groups of 32 x 2 halves; at 64, 4 row tiles x 2 column groups of 32
// over all of K. Halves of K double the partial sums sent to the cluster (step 4): at 64 tokens
// that cost more than the longer mma chains (docs/PERFORMANCE.md, lesson 8: the exchange, not
// the multiply, is what grows with the tokens).
template <int kTM>
struct DownWarps {
  static constexpr int kM = kTM / 16, kK = kTM == 64 ? 1 : 2, kN = kWarps / kM / kK;
  static constexpr int kNT = kCols / kN / 8;  // 8-column mma tiles a warp
};

__host__ __device__ constexpr int round1024(int v) {
  return (v + 1023) / 1024 * 1024;
}
__host__ __device__ constexpr int larger(int a, int b) {
  return a > b ? a : b;
}

// Shared memory, byte offsets from the 1024-aligned base (the swizzle's period): `region` holds
// x's boxes in step 1, then the warps' partial sums, then h's boxes in step 3; W1's and W2's
// boxes; the partials received from the cluster (kSize x kK slots x kTM rows x 8 fp32); the
// four mbarriers (x + W1, W2, h, the partials received).
template <int kTM>
struct Layout {
  int w1 = 0, w2 = 0, recv = 0, bars = 0, total = 0;
  __host__ __device__ Layout(int c, int kb) {
    const int x_bytes = (c + kChunkCols - 1) / kChunkCols * kTM * 128;
    const int sums_bytes = kWarps * kTM * kRedLd * 4;
    const int h_bytes = (kb + kChunkCols - 1) / kChunkCols * kTM * 128;
    w1 = round1024(larger(larger(x_bytes, sums_bytes), h_bytes));
    w2 = w1 + (c + kW1BoxRows - 1) / kW1BoxRows * kBoxBytes;
    recv = w2 + (kb + kW2BoxRows - 1) / kW2BoxRows * kBoxBytes;
    bars = recv + kSize * DownWarps<kTM>::kK * kTM * kOwned * 4;
    total = bars + 4 * 8 + 1024;  // + the barriers, + the slack to align the base
  }
};

struct SmallArgs {
  const bf16 *b1, *b2;
  bf16 *h, *y;
  unsigned long long* arrivals;  // the grid barrier's count: + gridDim.x every run, never reset
  PhaseSink phases;              // ffn_small_phases(), stamps on when set
  int m, c, hidden, kb;          // kb: a block's hidden rows in step 3 (4C / 8)
};

// Step 1 for a block that owns units [unit0, unit0 + 32): h's slice into global memory.
template <int kTM>
__device__ void up_slice(unsigned char* smem, const Layout<kTM>& lay, const SmallArgs& a,
                         const bf16* s_b1, int unit0) {
  constexpr int MT = kTM / 16;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const uint32_t x0 = hopper::smem_address(smem), w1 = hopper::smem_address(smem + lay.w1);
  auto x_at = [&](int row, int kc) { return at_128(x0 + (kc >> 3) * kTM * 128, row, kc & 7); };
  auto w1_at = [&](int k, int chunk) {
    return at_64(w1 + (k / kW1BoxRows) * kBoxBytes, k % kW1BoxRows, chunk);
  };
  float acc[MT][4][4] = {};
  const int steps = (a.c + 15) / 16;
#pragma unroll 2
  for (int s = warp; s < steps; s += kWarps) mma_step<MT, 4>(acc, s * 16, 0, 0, x_at, w1_at);
  tc::async_wait<0>();  // b1's copies (the threads that issued them)
  __syncthreads();      // every warp is done with x: the region takes the partial sums
  float* sums = reinterpret_cast<float*>(smem) + warp * kTM * kRedLd;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int row = mt * 16 + (lane >> 2), col = nt * 8 + 2 * (lane & 3);
      *reinterpret_cast<float2*>(sums + row * kRedLd + col) =
          make_float2(acc[mt][nt][0], acc[mt][nt][1]);
      *reinterpret_cast<float2*>(sums + (row + 8) * kRedLd + col) =
          make_float2(acc[mt][nt][2], acc[mt][nt][3]);
    }
  }
  __syncthreads();
  // The 8 warps' sums, + b1, GELU, bf16: 4 units (8 bytes of h) a thread at a time.
  const float* all = reinterpret_cast<const float*>(smem);
  for (int i = threadIdx.x; i < a.m * (kUnits / 4); i += kThreads) {
    const int row = i / (kUnits / 4), u = (i % (kUnits / 4)) * 4;
    if (unit0 + u >= a.hidden) continue;
    const float4 sum = sum_quads(all + row * kRedLd + u, kWarps, kTM * kRedLd);
    const float4 b = load_bf16x4(s_b1 + u);
    store_bf16x4(a.h + int64_t(row) * a.hidden + unit0 + u,
                 make_float4(gelu_tanh_fast(sum.x + b.x), gelu_tanh_fast(sum.y + b.y),
                             gelu_tanh_fast(sum.z + b.z), gelu_tanh_fast(sum.w + b.w)));
  }
}

// Step 2: every block adds 1 to a 64-bit count that is never reset and waits until it reaches
// `target`, the next multiple of the grid size (the count was a multiple of it when this run
// started, and each block adds 1 once a run: thread 0 reads it at the start, see the kernel).
// So there is no last block to reset it, and the add needs no answer: a reduction with release
// semantics, then acquire loads. The block's h stores come first (the barrier orders them before
// thread 0's release), and are fenced for TMA's reads.
__device__ void grid_barrier(const SmallArgs& a, unsigned long long target) {
  hopper::fence_async_global();
  __syncthreads();
  if (threadIdx.x != 0) return;
  hopper::red_release(a.arrivals, 1ull);
  while (hopper::load_acquire(a.arrivals) < target) __nanosleep(20);
  hopper::fence_async_global();  // TMA reads h next
}

// Step 3 and 4: this block's partial sums of the cluster's 64 columns over its hidden rows, sent
// to the blocks that own them by st.async (each counts its bytes on the owner's mbarrier
// `received`); once its own have all arrived, y for this block's 8 columns. No cluster barrier:
// a block waits only for the bytes it reads.
template <int kTM>
__device__ void down_and_reduce(unsigned char* smem, const Layout<kTM>& lay, const SmallArgs& a,
                                const bf16* s_b2, int col0, unsigned rank, uint64_t* received) {
  using W = DownWarps<kTM>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wm = warp % W::kM, wn = warp / W::kM % W::kN, wk = warp / (W::kM * W::kN);
  const uint32_t h0 = hopper::smem_address(smem), w2 = hopper::smem_address(smem + lay.w2);
  auto h_at = [&](int row, int kc) { return at_128(h0 + (kc >> 3) * kTM * 128, row, kc & 7); };
  auto w2_at = [&](int k, int chunk) {
    return at_128(w2 + (k / kW2BoxRows) * kBoxBytes, k % kW2BoxRows, chunk);
  };
  float acc[1][W::kNT][4] = {};
  const int n0 = wn * W::kNT * 8;
#pragma unroll 4
  for (int s = wk; s < a.kb / 16; s += W::kK) {
    mma_step<1, W::kNT>(acc, s * 16, wm * 16, n0 / 8, h_at, w2_at);
  }
  float* recv = reinterpret_cast<float*>(smem + lay.recv);  // [kSize x kK][kTM][kOwned]
  const int slot = int(rank) * W::kK + wk;
#pragma unroll
  for (int nt = 0; nt < W::kNT; ++nt) {
    const tc::LaneQuad q = tc::lane_quad(acc[0][nt], lane);  // 4 adjacent columns of one row
    const int row = wm * 16 + q.row;
    if (row >= a.m) continue;
    const unsigned owner = unsigned(n0 / 8 + nt);  // 8-column tile nt belongs to one block
    cluster::store_async_peer(recv + (slot * kTM + row) * kOwned + q.col, owner, q.bits(),
                              received);
  }
  hopper::wait(received, 0);
  for (int i = threadIdx.x; i < a.m * 2; i += kThreads) {
    const int row = i / 2, half = (i % 2) * 4;
    const int col = col0 + int(rank) * kOwned + half;
    if (col >= a.c) continue;  // c is a multiple of 32: the 4 columns are all in or all out
    const float4 sum = sum_quads(recv + row * kOwned + half, kSize * W::kK, kTM * kOwned);
    const float4 b = load_bf16x4(s_b2 + half);
    store_bf16x4(a.y + int64_t(row) * a.c + col,
                 make_float4(sum.x + b.x, sum.y + b.y, sum.z + b.z, sum.w + b.w));
  }
}

template <int kTM>
__global__ void __launch_bounds__(kThreads, 1)
    ffn_small_kernel(const __grid_constant__ CUtensorMap x_map,
                     const __grid_constant__ CUtensorMap w1_map,
                     const __grid_constant__ CUtensorMap w2_map,
                     const __grid_constant__ CUtensorMap h_map, SmallArgs a) {
#ifdef FL_SM90A_DEVICE
  extern __shared__ unsigned char shared_raw[];
  __shared__ __align__(16) bf16 s_b1[kUnits], s_b2[kOwned];
  unsigned char* smem = hopper::align_1024(shared_raw);
  const Layout<kTM> lay(a.c, a.kb);
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + lay.bars);  // x + W1, W2, h, received
  const unsigned rank = cluster::rank(), q = cluster::index();
  const int unit0 = int(blockIdx.x) * kUnits, col0 = int(q) * kCols;
  const bool has_units = unit0 < a.hidden;
  PhaseMarks<kDown + 1> marks(a.phases);
  unsigned long long count = 0;  // the grid barrier's count, read by thread 0 (see below)
  const int w2_boxes = (a.kb + kW2BoxRows - 1) / kW2BoxRows;
  auto issue_w2 = [&]() {
    hopper::arrive_expect_bytes(&bars[1], w2_boxes * kBoxBytes);
    for (int b = 0; b < w2_boxes; ++b) {
      hopper::copy_box(smem + lay.w2 + b * kBoxBytes, &w2_map, col0,
                       int(rank) * a.kb + b * kW2BoxRows, &bars[1]);
    }
  };
  if (threadIdx.x == 0) {
    for (const CUtensorMap* map : {&w1_map, &x_map, &w2_map, &h_map}) hopper::prefetch_map(map);
    for (int i = 0; i < 4; ++i) hopper::barrier_init(&bars[i], 1);
    // The partials this block will receive: every block's (and K half's) 8 columns of m rows.
    hopper::arrive_expect_bytes(&bars[3], kSize * DownWarps<kTM>::kK * a.m * kOwned * 4);
    hopper::barrier_init_fence();  // a release at cluster scope: the arrival below publishes it
  }
  // Arrive now, wait once this block's own copies are on their way (below). Relaxed: a release
  // here would also wait for this thread's outstanding copies (docs/PERFORMANCE.md, lesson 8).
  cluster::arrive_started();
  // x is the same for every block: where every block of the cluster has hidden units, block r
  // asks for x's boxes r, r + 8, ... once from L2, multicast into all 8 (below, once their
  // barriers are initialised); elsewhere each block copies all of x.
  const int x_boxes = (a.c + kChunkCols - 1) / kChunkCols;
  const bool share_x = (int(q) + 1) * kSize * kUnits <= a.hidden;
  if (threadIdx.x == 0) {
    const int w1_boxes = (a.c + kW1BoxRows - 1) / kW1BoxRows;
    if (has_units) {
      hopper::arrive_expect_bytes(&bars[0], x_boxes * kTM * 128 + w1_boxes * kBoxBytes);
      for (int b = 0; b < w1_boxes; ++b) {
        hopper::copy_box(smem + lay.w1 + b * kBoxBytes, &w1_map, unit0, b * kW1BoxRows, &bars[0]);
      }
      for (int b = 0; !share_x && b < x_boxes; ++b) {
        hopper::copy_box(smem + b * kTM * 128, &x_map, b * kChunkCols, 0, &bars[0]);
      }
    }
    // W1's bytes first: step 1 needs them, step 3 W2's only after the grid barrier (issued
    // with W1's, they made step 1 wait: docs/PERFORMANCE.md, lesson 8, "Tried and dropped").
    if (!has_units) issue_w2();
    // The grid barrier's count as this run started, give or take other blocks' arrivals of this
    // run (only they, and this block's own, can follow it): the barrier waits for the next
    // multiple of the grid size. Read after the copies are on their way and used only at the
    // barrier (read first, with the target computed from it at once, it held the copies back).
    count = *reinterpret_cast<volatile unsigned long long*>(a.arrivals);
  }
  // The biases by cp.async, waited for just before their use (as plain loads they would stall
  // the block behind the weights' traffic): b1's 32 units (threads 0-3), b2's 8 columns (4).
  // hidden and c are multiples of 128 and 32: a 16-byte piece is all in or all out.
  if (threadIdx.x < 4) {
    const int u = unit0 + threadIdx.x * 8;
    tc::copy16_async(s_b1 + threadIdx.x * 8, a.b1 + (u < a.hidden ? u : 0), u < a.hidden);
  } else if (threadIdx.x == 4) {
    const int col = col0 + int(rank) * kOwned;
    tc::copy16_async(s_b2, a.b2 + (col < a.c ? col : 0), col < a.c);
  }
  tc::async_commit();
  // Every block of the cluster has initialised its barriers: the multicast may land, and so may
  // the partial sums of step 4.
  cluster::wait_started();
  if (share_x && threadIdx.x == 0) {
    for (int b = int(rank); b < x_boxes; b += kSize) {
      hopper::copy_box_multicast(smem + b * kTM * 128, &x_map, b * kChunkCols, 0, &bars[0],
                                 (1u << kSize) - 1);
    }
  }
  __syncthreads();  // the mbarriers are initialised
  marks.mark(kSetup);

  if (has_units) {
    hopper::wait(&bars[0], 0);
    if (threadIdx.x == 0) issue_w2();
  }
  marks.mark(kXW1In);
  if (has_units) up_slice<kTM>(smem, lay, a, s_b1, unit0);
  marks.mark(kUpProjection);
  hopper::fence_async_shared();  // the region's ordinary accesses before TMA overwrites it
  tc::async_wait<0>();           // b2's copy, seen by all after the grid barrier's __syncthreads
  grid_barrier(a, (count / gridDim.x + 1) * gridDim.x);
  marks.mark(kGridBarrier);
  if (threadIdx.x == 0) {
    const int h_boxes = (a.kb + kChunkCols - 1) / kChunkCols;
    hopper::arrive_expect_bytes(&bars[2], h_boxes * kTM * 128);
    for (int b = 0; b < h_boxes; ++b) {
      hopper::copy_box(smem + b * kTM * 128, &h_map, int(rank) * a.kb + b * kChunkCols, 0,
                       &bars[2]);
    }
  }
  hopper::wait(&bars[1], 0);
  hopper::wait(&bars[2], 0);
  marks.mark(kHW2In);
  down_and_reduce<kTM>(smem, lay, a, s_b2, col0, rank, &bars[3]);
  marks.mark(kDown);
#endif
}

template <int kTM>
Status launch(const FfnSmallBuffers& b, int64_t m, int c, int hidden, int optin,
              cudaStream_t stream, bool* launched) {
  const int kb = hidden / kSize;
  const Layout<kTM> lay(c, kb);
  if (lay.total > optin) return Status::Ok();
  const int clusters = (c + kCols - 1) / kCols;
  if (clusters * kSize * kUnits < hidden) return Status::Ok();  // units left without a block
  auto kernel = ffn_small_kernel<kTM>;
  const cluster::Launch plan(clusters, kSize, kThreads, size_t(lay.total), stream);
  bool fit = false;  // the grid barrier needs every block resident (also sets the smem limit)
  FL_TRY(cluster::all_resident(reinterpret_cast<const void*>(kernel), plan, &fit));
  if (!fit) return Status::Ok();
  CUtensorMap x_map, w1_map, w2_map, h_map;
  FL_TRY(hopper::make_tensor_map_2d(&x_map, b.x, m, c, kTM, kChunkCols));
  FL_TRY(hopper::make_tensor_map_2d(&w1_map, b.w1, c, hidden, kW1BoxRows, kUnits, 64));
  FL_TRY(hopper::make_tensor_map_2d(&w2_map, b.w2, hidden, c, kW2BoxRows, kCols));
  FL_TRY(hopper::make_tensor_map_2d(&h_map, b.h, m, hidden, kTM, kChunkCols));
  SmallArgs args{b.b1, b.b2, b.h, b.y, b.arrivals, b.phases, int(m), c, hidden, kb};
  FL_CUDA_TRY(cudaLaunchKernelEx(&plan.config, kernel, x_map, w1_map, w2_map, h_map, args));
  FL_CUDA_TRY(cudaGetLastError());
  *launched = true;
  return Status::Ok();
}

}  // namespace

Status try_ffn_small(const FfnSmallBuffers& b, int64_t m, int c, int hidden, cudaStream_t stream,
                     bool* launched) {
  *launched = false;
  if (!kWgmmaBuild) return Status::Ok();
  if (m < 1 || m > 64 || c % 32 != 0 || hidden % (kSize * 16) != 0) return Status::Ok();
  for (const void* p : {static_cast<const void*>(b.x), static_cast<const void*>(b.w1),
                        static_cast<const void*>(b.w2), static_cast<const void*>(b.h),
                        static_cast<const void*>(b.y), static_cast<const void*>(b.b1),
                        static_cast<const void*>(b.b2)}) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return Status::Ok();
  }
  bool sm90 = false;
  int optin = 0;
  FL_TRY(hopper::current_device(&sm90, &optin));
  if (!sm90) return Status::Ok();
  if (m <= 16) return launch<16>(b, m, c, hidden, optin, stream, launched);
  if (m <= 32) return launch<32>(b, m, c, hidden, optin, stream, launched);
  return launch<64>(b, m, c, hidden, optin, stream, launched);
}

}  // namespace fl
