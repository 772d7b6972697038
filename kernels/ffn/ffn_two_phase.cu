// The FFN's level 2 at 1-64 tokens on a GPU without clusters or TMA (bf16, sm_80+):
// ffn_two_phase_kernel, one launch in two phases with one grid barrier between them.
//
// What changes against ffn_hidden_slice.cu (a block owns a slice of the hidden units for both
// products, so every block adds a share of all of y: at 64 tokens 96 shares of 64 x 768, 9.4 MB
// through L2, as many bytes as the weights): here the down product is tiled on its own. Phase 1
// makes h = GELU(x W1 + b1) (64 x 3072 bf16 = 393 KB: L2 keeps it) in tiles of h's columns;
// after the barrier phase 2 cuts y = h W2 into column tiles x parts of K, so each value of y
// gets `splits` partial sums (8 at C = 768), not one a block. W2's tile does not depend on h:
// its copies are asked for before the barrier, under the wait.
// Tiles at C = 768 on 132 SMs, planned in an RTX 30/40 card's 99 KiB (128 blocks of 8 warps):
//   phase 1: up tile t: h[:, 24 t .. 24 t + 24) for all tokens (16 mtc rows, zero past them):
//            x's rows and W1's 24 columns through a ring of K chunks of 64 (12 chunks; a slot
//            is x's 16 mtc x 64 (rows padded to 72) and W1's 64 x 24: 5.3 KB at 16 tokens, 12
//            KB at 64; 12 slots at 1-16 tokens, 8 at 64: most of K in flight at once); warps:
//            mtc row tiles x (8 / mtc) column parts; bias + GELU, bf16 stores into h; each
//            thread's copies of a slot are a walk worked out once a launch
//            (gemm_core/stage_walk.cuh) and the slot a running index: no index division
//            between a chunk's barrier and its mma;
//   phase 2: down tile t: y[:, 48 ct .. 48 ct + 48) over h's columns [384 q, 384 q + 384)
//            (16 column tiles x 8 parts = 128 tiles): W2's 384 x 48 (36 KB, rows padded to 56:
//            43 KB) asked for before the barrier, h's 16 mtc x 384 (12-48 KB) from L2 after it,
//            both into shared memory over the ring; warps as in phase 1; the tile's fp32 partial
//            sum through shared memory into an fp32 accumulator in L2 (16-byte vector reds), the
//            column tile's last block adds b2, writes y and zeroes its accumulator and counter.
// Data path: x (L2 after the first block's read) and W1 (HBM) -> cp.async ring -> mma.sync ->
// h (global, L2-resident) -> barrier -> h's tile and W2's (HBM) -> cp.async -> mma.sync -> reds
// into the fp32 accumulator (L2) -> the last block's y.
// Byte budget at 64 tokens (bf16): HBM: the weights, 9.4 MB (3.1 us at 3 TB/s); L2 to the SMs:
// x 128 times (12.6 MB; 3 MB at 16 tokens), h written once and read once (393 KB each), the
// partial sums 8 x 64 x 768 x 4 B = 1.6 MB of reds. A block's phase 1 copies are 96 KB of x
// and 36 KB of W1, its phase 2 copies 36 KB of W2 and 48 KB of h. FLOPs: 0.6 GFLOP, 4.7 MFLOP a
// block, well under a microsecond of mma.sync.
// Direct up tiles (FfnTwoPhasePlan::direct, a tuning, off: FL_FFN_TWO_PHASE_DIRECT=1): no ring;
// W1's 24- or 32-column tile resident (over h's tile, asked for with W2's at the start) and each
// warp's x fragments straight into registers (direct_x.cuh), the parts of K over W1's tile.
// Measured faster than the ring at 33-64 tokens, all of it after phase 1 (W2's tile no longer
// asked for there), and still behind the hidden slice's direct form; 1-32 tokens not measured
// (docs/PERFORMANCE.md has the figures).
// It measured slower than the hidden slice at 1-16 tokens and about level with it at 64, so the
// level table prefers it nowhere (ffn_two_phase_plan.h's kTwoPhaseFrom); the figures, its
// phases and what the profiler showed are in docs/PERFORMANCE.md ("ffn_two_phase measured", "The
// rings' walks worked out once a launch").
// Shapes: 1-64 tokens; C a multiple of 8 (16-byte rows: whole chunks, zero-filled past the edges).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <string>

#include "kernels/activations.cuh"
#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/ffn/count_barrier.cuh"
#include "kernels/ffn/direct_x.cuh"
#include "kernels/ffn/ffn_two_phase.h"
#include "kernels/gemm_core/stage_walk.cuh"
#include "kernels/gemm_core/weight_slice.cuh"
#include "kernels/phases.cuh"

namespace fl {
namespace two_phase {
namespace {

using T = __nv_bfloat16;
constexpr int kThr = 32 * kTwoPhaseWarps;

struct Args {
  FfnTwoPhasePlan p;
  const T *x, *w1, *b1, *w2, *b2;
  T *y, *h;
  unsigned* counters;  // [0] the grid barrier, [4 + ct] column tile ct's finished parts
  float* acc;          // m x C: the partial sums of y
  PhaseSink phases;
};

// ffn_two_phase_phases(), in order.
enum Phase : unsigned { kUp, kBarrier, kTilesIn, kDown, kReds, kY, kPhaseCount };
using Marks = PhaseMarks<kPhaseCount>;

using WarpPart = FfnTwoPhaseWarp;
__device__ __forceinline__ WarpPart warp_part(int mtc, int nt) {
  return ffn_two_phase_warp(int(threadIdx.x >> 5), mtc, nt);
}

// The thread's 16-byte chunks of a slot (x's 16 mtc rows x ring_k, W1's ring_k rows x up_cols),
// worked out once a launch (gemm_core/stage_walk.cuh): at most 64 rows x 8 chunks each.
constexpr int kWalkMax = (64 * 8 + kThr - 1) / kThr;
static_assert(kTwoPhaseRingK == 64 && kTwoPhaseMaxUpCols <= 64 && kTwoPhaseMaxTokens <= 64,
              "a slot's walk covers 64 rows of 8 chunks");
struct SlotWalk {
  slice::Walk<kWalkMax> x, w1;
};

// The i-th chunk a block asks for: K chunk (i + rot) % chunks (rot: the block's number where
// the ring is rotated, a tuning; else 0) into slot `slot` (a running index: i % stages):
// x's 16 mtc rows of that K range, then W1's rows of it (the tile's columns); one commit group
// (past the last chunk an empty one, so every thread counts alike).
__device__ __forceinline__ void ring_stage(const Args& a, unsigned char* smem, const SlotWalk& w,
                                           int i, int slot, int j0, int rot) {
  const FfnTwoPhasePlan& p = a.p;
  if (i < p.chunks) {
    T* xs = reinterpret_cast<T*>(smem + size_t(slot) * p.stage_bytes);
    T* w1s = reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(xs) + p.x_bytes);
    const int kc = i + rot < p.chunks ? i + rot : i + rot - p.chunks;
    const int k0 = kc * p.ring_k, kv = min(p.ring_k, p.c - k0);
    slice::stage_at(w.x, xs, a.x + k0, p.m, kv);
    slice::stage_at(w.w1, w1s, a.w1 + int64_t(k0) * p.h + j0, kv, min(p.up_cols, p.h - j0));
  }
  tc::async_commit();
}

// Phase 1: h[:, j0 .. j0 + up_cols) = GELU(x W1 + b1), the chunks multiplied as they land.
// Ends with every warp done with the ring (the block synchronized); h's stores issued.
__device__ __forceinline__ void up_tile(const Args& a, unsigned char* smem, int j0) {
  const FfnTwoPhasePlan& p = a.p;
  const WarpPart w = warp_part(p.mtc, p.up_cols / 8);
  float acc[4][4];
  slice::zero(acc);
  const int rot = p.rotate ? int(blockIdx.x) % p.chunks : 0;
  const SlotWalk walk{slice::walk<kThr, kWalkMax, T>(p.ld_x, p.c, 16 * p.mtc, p.ring_k),
                      slice::walk<kThr, kWalkMax, T>(p.ld_w1, p.h, p.ring_k, p.up_cols)};
  for (int i = 0; i + 1 < p.stages; ++i) ring_stage(a, smem, walk, i, i, j0, rot);
  // The warp's ldmatrix lane addresses in slot 0, worked out once (a slot is stage_bytes on).
  using Mma = slice::WarpMma<T, 4>;
  const T* xs0 = reinterpret_cast<const T*>(smem);
  const T* w1s0 = reinterpret_cast<const T*>(smem + p.x_bytes);
  const unsigned a0 = Mma::a_lane(xs0 + w.mt * 16 * p.ld_x, p.ld_x, 0);
  const unsigned b0 = Mma::b_lane(w1s0 + w.nt0 * 8, p.ld_w1, 0);
  const unsigned slot_bytes = unsigned(p.stage_bytes), b_step = 16u * p.ld_w1 * sizeof(T);
  int take = 0, fill = p.stages - 1;  // the slots of chunk i and of chunk i + stages - 1
  for (int i = 0; i < p.chunks; ++i) {
    slice::wait_pending<kTwoPhaseMaxStages - 2>(p.stages - 2);  // chunk i is in
    __syncthreads();  // ... every thread's part of it; every warp done with chunk i - 1's slot
    ring_stage(a, smem, walk, i + p.stages - 1, fill, j0, rot);
    if (w.ntc > 0) {
      Mma::run_at(acc, w.ntc, a0 + take * slot_bytes, b0 + take * slot_bytes, b_step, 0,
                  kTwoPhaseRingK);
    }
    take = take + 1 == p.stages ? 0 : take + 1;
    fill = fill + 1 == p.stages ? 0 : fill + 1;
  }
  tc::async_wait<0>();  // the empty groups
  __syncthreads();      // every warp done with the ring: phase 2's tiles go over it
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  // Constant indices (the loop unrolled, its tail a break): acc stays in registers.
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    const int col = j0 + (w.nt0 + nt) * 8 + 2 * t;  // even, and h is a multiple of 32 wide
    if (nt >= w.ntc || col >= p.h) break;
    const float b0 = __bfloat162float(a.b1[col]), b1 = __bfloat162float(a.b1[col + 1]);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = w.mt * 16 + g + 8 * half;
      if (row >= p.m) continue;
      const __nv_bfloat162 v = __floats2bfloat162_rn(gelu_tanh_fast(acc[nt][2 * half] + b0),
                                                     gelu_tanh_fast(acc[nt][2 * half + 1] + b1));
      *reinterpret_cast<__nv_bfloat162*>(a.h + int64_t(row) * p.h + col) = v;
    }
  }
}

// Phase 1 with direct up tiles (the plan's direct; direct_x.cuh): the same h tile, x's fragments
// loaded by each warp straight into registers, W1's tile resident (asked for with W2's tile as
// the block's first two commit groups). Warp w takes row tile w % mtc and part w / mtc of K's
// 32-wide groups over all the tile's columns; the parts meet over W1's tile
// (slice::reduce_parts), then bias + GELU into h. Ends with the block synchronized.
__device__ __forceinline__ void up_tile_direct(const Args& a, unsigned char* smem, int j0) {
  const FfnTwoPhasePlan& p = a.p;
  const slice::PanelWarp pw = slice::panel_warp<kTwoPhaseWarps>(p.mtc);
  const int groups = p.w1_rows / direct::kGroupK;
  const int q0 = pw.part < pw.parts ? groups * pw.part / pw.parts : 0;
  const int q1 = pw.part < pw.parts ? groups * (pw.part + 1) / pw.parts : 0;
  float acc[4][4];
  slice::zero(acc);
  const T* w1s = reinterpret_cast<const T*>(smem + p.off_h);
  const auto ready = [] {
    tc::async_wait<1>();  // W1's tile (W2's may still be landing)
    __syncthreads();
  };
  if (p.up_cols == 24) {
    direct::warp_product<3>(acc, a.x, p.c, p.m, pw.mt, q0, q1, w1s, p.ld_w1d, true, ready);
  } else {
    direct::warp_product<4>(acc, a.x, p.c, p.m, pw.mt, q0, q1, w1s, p.ld_w1d, true, ready);
  }
  const auto to_h = [&](int row, int col, float v) {
    const int at = j0 + col;
    if (at >= p.h) return;
    a.h[int64_t(row) * p.h + at] =
        __float2bfloat16_rn(gelu_tanh_fast(v + __bfloat162float(a.b1[at])));
  };
  slice::reduce_parts<4, kTwoPhaseWarps>(acc, pw, p.mtc, p.up_cols / 8,
                                         reinterpret_cast<float*>(smem + p.off_h), to_h, p.m);
}

// The lines of W2's tile (rows k0.., columns n0..) asked for into L2, no shared memory.
__device__ __forceinline__ void prefetch_w2(const Args& a, int k0, int n0) {
  const FfnTwoPhasePlan& p = a.p;
  const int rows = min(p.down_k, p.h - k0), bytes = 2 * min(p.down_cols, p.c - n0);
  for (int i = threadIdx.x; i < 2 * rows; i += kThr) {
    const char* row = reinterpret_cast<const char*>(a.w2 + int64_t(k0 + i / 2) * p.c + n0);
    const char* at = row + (i % 2 == 0 ? 0 : bytes - 1);
    asm volatile("prefetch.global.L2 [%0];" ::"l"(at));
  }
}

// W2's tile (rows k0.., columns n0..; rows past 4C and columns past C zero) into shared memory
// at 0, no commit.
__device__ __forceinline__ void stage_w2_tile(const Args& a, unsigned char* smem, int k0, int n0) {
  const FfnTwoPhasePlan& p = a.p;
  slice::stage<kThr>(reinterpret_cast<T*>(smem), p.ld_w2, a.w2 + int64_t(k0) * p.c + n0, p.c,
                     p.down_k, p.down_cols, min(p.down_k, p.h - k0), min(p.down_cols, p.c - n0),
                     true);
}

// Phase 2's product: acc += h's tile x W2's tile, both in shared memory.
__device__ __forceinline__ void down_product(const FfnTwoPhasePlan& p, const unsigned char* smem,
                                             float (&acc)[4][4], const WarpPart& w) {
  if (w.ntc == 0) return;
  const T* w2s = reinterpret_cast<const T*>(smem);
  const T* hs = reinterpret_cast<const T*>(smem + p.off_h);
  slice::WarpMma<T, 4>::run(acc, w.ntc, hs + w.mt * 16 * p.ld_h, p.ld_h, w2s + w.nt0 * 8, p.ld_w2,
                            0, p.down_k);
}

// The tile's partial sums into y's fp32 accumulator (through shared memory, 16 bytes a red);
// the column tile's last block adds b2, writes y and leaves the accumulator and counter at zero.
__device__ __forceinline__ void add_partial(const Args& a, unsigned char* smem, float (&acc)[4][4],
                                            const WarpPart& w, int ct, int n0, Marks& marks) {
  const FfnTwoPhasePlan& p = a.p;
  __shared__ int s_last;
  float* part = reinterpret_cast<float*>(smem);
  __syncthreads();  // every warp done with W2's and h's tiles
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    if (nt >= w.ntc) break;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = w.mt * 16 + g + 8 * (e >> 1), col = (w.nt0 + nt) * 8 + 2 * t + (e & 1);
      part[row * p.ld_part + col] = acc[nt][e];
    }
  }
  __syncthreads();
  const int quads = p.down_cols / 4, cols = min(p.down_cols, p.c - n0);
  for (int i = threadIdx.x; i < p.m * quads; i += kThr) {
    const int row = i / quads, col = 4 * (i % quads);
    if (col >= cols) continue;
    const float* s = part + row * p.ld_part + col;
    const float v[4] = {s[0], s[1], s[2], s[3]};
    red_add4(a.acc + int64_t(row) * p.c + n0 + col, v);
  }
  __threadfence();  // this thread's reds before the column tile's counter
  __syncthreads();
  if (threadIdx.x == 0) s_last = atomicAdd(a.counters + 4 + ct, 1u) == unsigned(p.splits - 1);
  __syncthreads();
  marks.mark(kReds);
  if (!s_last) return;
  __threadfence();  // the other parts' reds, seen through their counter bumps
  for (int i = threadIdx.x; i < p.m * quads; i += kThr) {
    const int row = i / quads, col = 4 * (i % quads);
    if (col >= cols) continue;
    float* at = a.acc + int64_t(row) * p.c + n0 + col;
    const float4 v = slice::load_cg4(at);
    const T* b2 = a.b2 + n0 + col;
    const __nv_bfloat162 lo =
        __floats2bfloat162_rn(v.x + __bfloat162float(b2[0]), v.y + __bfloat162float(b2[1]));
    const __nv_bfloat162 hi =
        __floats2bfloat162_rn(v.z + __bfloat162float(b2[2]), v.w + __bfloat162float(b2[3]));
    __nv_bfloat162* out = reinterpret_cast<__nv_bfloat162*>(a.y + int64_t(row) * p.c + n0 + col);
    out[0] = lo, out[1] = hi;
    *reinterpret_cast<float4*>(at) = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  if (threadIdx.x == 0) a.counters[4 + ct] = 0;
  marks.mark(kY);
}

__global__ void __launch_bounds__(kThr, 1) ffn_two_phase_kernel(Args a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const FfnTwoPhasePlan& p = a.p;
  Marks marks(a.phases);
  const FfnTwoPhaseTiles tiles = ffn_two_phase_tiles(p, int(blockIdx.x));
  const int ct = tiles.ct, n0 = tiles.n0, k0 = tiles.k0;
  if (p.prefetch_w2 && tiles.down) prefetch_w2(a, k0, n0);
  if (p.direct) {  // W1's tile over h's, then W2's tile: two commit groups, then the product
    const int j0 = tiles.up_col0;
    if (tiles.up) {
      slice::stage<kThr>(reinterpret_cast<T*>(smem + p.off_h), p.ld_w1d, a.w1 + j0, p.h, p.w1_rows,
                         p.up_cols, p.c, min(p.up_cols, p.h - j0), true);
    }
    tc::async_commit();
    if (tiles.down) stage_w2_tile(a, smem, k0, n0);
    tc::async_commit();
    if (tiles.up) up_tile_direct(a, smem, j0);
  } else if (tiles.up) {
    up_tile(a, smem, tiles.up_col0);
  }
  marks.mark(kUp);
  // W2's tile (rows past 4C and columns past C zero) under the barrier's wait.
  if (tiles.down && !p.direct) {
    stage_w2_tile(a, smem, k0, n0);
    tc::async_commit();
  }
  count_barrier(a.counters, gridDim.x, blockIdx.x == 0);  // every block's h is written
  marks.mark(kBarrier);
  if (!tiles.down) return;
  // h's tile from L2 (cp.async.cg): rows past the tokens and columns past 4C zero.
  slice::stage<kThr>(reinterpret_cast<T*>(smem + p.off_h), p.ld_h, a.h + k0, p.h, 16 * p.mtc,
                     p.down_k, p.m, min(p.down_k, p.h - k0), true);
  tc::async_commit();
  tc::async_wait<0>();
  __syncthreads();
  marks.mark(kTilesIn);
  const WarpPart w = warp_part(p.mtc, p.down_cols / 8);
  float acc[4][4];
  slice::zero(acc);
  down_product(p, smem, acc, w);
  marks.mark(kDown);  // thread 0's warp done (the others meet at add_partial's barrier)
  add_partial(a, smem, acc, w, ct, n0, marks);
}

FfnTwoPhaseTuning tuning_from_env(FfnTwoPhaseTuning t) {
  const char* env = std::getenv("FL_FFN_TWO_PHASE");
  if (env == nullptr || *env == '\0') return t;
  int v[4] = {t.stages, t.down_cols, t.prefetch, t.kib};
  std::sscanf(env, "%d,%d,%d,%d", &v[0], &v[1], &v[2], &v[3]);
  return {v[0], v[1], v[2], v[3], t.rotate, t.direct};
}

// FL_FFN_TWO_PHASE_ROTATE=1 or 2 (on, off) overrides the tuning's rotate; FL_FFN_TWO_PHASE_UP_COLS
// the plan's up_cols; FL_FFN_TWO_PHASE_DIRECT=1 or 2 (on, off) the direct up tiles.
int env_int(const char* name, int otherwise) {
  const char* env = std::getenv(name);
  return env == nullptr || *env == '\0' ? otherwise : std::atoi(env);
}

Status make_plan(int64_t m, int64_t c, FfnTwoPhaseTuning tuning, FfnTwoPhasePlan* out) {
  int device = 0, sms = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  optin = planned_shared_optin(optin);
  if (tuning.kib > 0) optin = std::min(optin, tuning.kib * 1024);
  const int up_cols = env_int("FL_FFN_TWO_PHASE_UP_COLS", 0);
  const bool direct = tuning.direct == 0 ? kTwoPhaseDirect : tuning.direct == 1;
  // The direct up tiles where their plan fits, else the ring's.
  if (!(direct && ffn_two_phase_plan_for(m, c, sms, optin, out, tuning.stages, tuning.down_cols,
                                         up_cols, true)) &&
      !ffn_two_phase_plan_for(m, c, sms, optin, out, tuning.stages, tuning.down_cols, up_cols)) {
    return Status::Unsupported(
        "the two-phase FFN at " + std::to_string(m) + " tokens and C = " + std::to_string(c) +
        " has no plan of one block an SM in " + std::to_string(optin) + " bytes of shared memory");
  }
  out->prefetch_w2 = tuning.prefetch == 1;
  out->rotate = tuning.rotate == 1;  // off unless asked for
  return Status::Ok();
}

}  // namespace
}  // namespace two_phase

Status ffn_two_phase_supported(Precision p, int64_t m, int64_t c) {
  if (p != Precision::bf16) return Status::Unsupported("the two-phase FFN runs in bf16 only");
  if (m < 1 || m > kTwoPhaseMaxTokens) {
    return Status::Unsupported("the two-phase FFN takes 1 to 64 tokens, got " + std::to_string(m));
  }
  if (c % 8 != 0) return Status::Unsupported("the two-phase FFN needs C a multiple of 8");
  FL_TRY(slice::cooperative_gpu_supported(p, "the two-phase FFN"));
  FfnTwoPhasePlan plan;
  return two_phase::make_plan(m, c, {}, &plan);
}

Status ffn_two_phase_scratch_bytes(Precision p, int64_t m, int64_t c, size_t* bytes) {
  if (p != Precision::bf16 || m < 1 || m > kTwoPhaseMaxTokens || c < 8 || c % 8 != 0) {
    return Status::Unsupported("the two-phase FFN has no plan at this shape");
  }
  FfnTwoPhasePlan plan;
  plan.m = int(m), plan.c = int(c);
  *bytes = ffn_two_phase_scratch_bytes_for(plan);
  return Status::Ok();
}

Status launch_ffn_two_phase(Precision p, const FfnTwoPhaseBuffers& b, int64_t m, int64_t c,
                            cudaStream_t stream, FfnTwoPhaseTuning tuning) {
  using two_phase::T;
  FL_TRY(ffn_two_phase_supported(p, m, c));
  const char* env = std::getenv("FL_FFN_TWO_PHASE");
  if (env != nullptr && std::string(env) == "off") {  // the table's next choice measured instead
    return Status::Unsupported("the two-phase FFN is switched off (FL_FFN_TWO_PHASE=off)");
  }
  two_phase::Args a{};
  FfnTwoPhaseTuning t = two_phase::tuning_from_env(tuning);
  t.rotate = two_phase::env_int("FL_FFN_TWO_PHASE_ROTATE", t.rotate);
  if (t.direct == 0) t.direct = two_phase::env_int("FL_FFN_TWO_PHASE_DIRECT", 0);
  FL_TRY(two_phase::make_plan(m, c, t, &a.p));
  const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  for (const void* q : {b.x, b.w1, b.w2, static_cast<const void*>(b.y),
                        static_cast<const void*>(b.h), static_cast<const void*>(b.scratch)}) {
    if (!aligned(q)) return Status::Unsupported("the two-phase FFN needs 16-byte aligned buffers");
  }
  a.x = static_cast<const T*>(b.x);
  a.w1 = static_cast<const T*>(b.w1);
  a.b1 = static_cast<const T*>(b.b1);
  a.w2 = static_cast<const T*>(b.w2);
  a.b2 = static_cast<const T*>(b.b2);
  a.y = static_cast<T*>(b.y);
  a.h = static_cast<T*>(b.h);
  a.counters = static_cast<unsigned*>(b.scratch);
  a.acc = reinterpret_cast<float*>(static_cast<char*>(b.scratch) + kTwoPhaseCounterBytes);
  a.phases = b.phases;
  if (size_t(4 + a.p.col_tiles) * sizeof(unsigned) > kTwoPhaseCounterBytes) {
    return Status::Unsupported("the two-phase FFN has too many column tiles");
  }
  return slice::launch_cooperative(two_phase::ffn_two_phase_kernel, a, a.p.blocks, two_phase::kThr,
                                   a.p.smem, stream);
}

}  // namespace fl
