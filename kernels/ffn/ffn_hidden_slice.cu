// Lesson 8's portable small-token rung, split over the hidden units: the whole FFN, y =
// GELU(x W1 + b1) W2 + b2, in one launch for 1 to 64 tokens on any GPU with cp.async (sm_80+;
// fp32 also on sm_70, with plain copies). No clusters, no TMA.
//
// What changes against ffn_stream.cu: there a block's up slice and its down tile are different
// hidden units, so h goes from block to block through L2 behind per-group counters: a chain of
// dependent steps (h out, counter, h in) after the weights land. Here block b owns hidden units
// [U b, U (b + 1)) for BOTH products, W1's U columns and W2's U rows, and asks for both slices
// (and b1's) before any arithmetic: nothing passes between blocks until each has its share of y:
//   1. h[:, slice] = GELU(x W1[:, slice] + b1), x and W1's columns in shared memory (x's rows
//      past the tokens zeroed, not copied), h kept in shared memory, rounded to the lesson's
//      precision as level 1's h is;
//   2. y_b = h[:, slice] W2[slice, :] on the rows that landed meanwhile: a full m x C share;
//   3. the shares meet in L2: each block stores its share (in bf16 from 9 tokens bf16 values,
//      rounded as level 1's h is, tile by tile: an 8-column tile's rows one after another, so
//      that a store instruction writes 128 contiguous bytes and the sum's lanes read consecutive
//      rows; else fp32, row by row), a grid barrier (every block is resident: a cooperative launch;
//      one counter and one atomic a block, the last block goes on at once), and block b adds the
//      shares of y's columns [8 b, 8 b + 8) (16-byte loads: a row's 8 columns in bf16, 4 in fp32; a
//      warp's lanes split the shares and meet by shuffles: a fixed order, the same result every
//      run) and writes them + b2 (b2 of the block's first tile loaded before the copies are asked
//      for). In an RTX card's plan at 9-16 bf16 tokens (w2_during_up) by 8 groups of blocks
//      instead, each with its own count, warp w of every block waiting only for group w's
//      (ffn_hidden_slice_groups.cuh).
// The down product and the shares' stores are in ffn_hidden_slice_down.cuh, the copies in
// ffn_hidden_slice_copies.cuh, the ring form in ffn_hidden_slice_ring.cuh. The 9-16-token RTX
// plan at C = 768 runs a second instance whose steering fields are constants
// (ffn_hidden_slice_fixed.h: its hot path one stretch of code; FL_FFN_SLICE_FIXED=0 runs the
// plan's kernel there).
// While the copies are in flight (the SM is otherwise idle for microseconds), each thread works
// out everything that depends only on its block's, warp's and lane's numbers and the shape
// (ffn_hidden_slice_steps.cuh: the up product's K range and ldmatrix addresses, its first down
// job with its ldmatrix addresses and store offsets, its item of y in the sum, with the
// divisions and 64-bit products behind them) and pins it in registers, so that the chain from
// the last byte to the barrier and on to y is only loads, mma, stores and the sum's adds.
// Tiles at C = 768 on 132 SMs, 8 warps (in bf16 from 49 tokens 16, each product's parts of K
// and the down product's columns over twice the warps, 48 columns a job): U = 32 in bf16 (96
// blocks: W1's rows of a slice are 64-byte requests on 64-byte boundaries, and 96 shares), U =
// 24 in fp32 (128 blocks);
// With less shared memory (the plan takes the GPU's, or the chosen GPU's under `bench
// --choose-as`): on an RTX card's 99 KiB, bf16 at 1-16 tokens keeps 32 units (86 KB of x and W1)
// and asks for W2's rows (50 KB) into them once each warp holds its up operands in registers
// (w2_during_up: 6 k steps, 72 registers a lane), so W2's copy runs under the up product, not
// after it, and asks for W1's columns (48 KB from DRAM) before x's rows (24 KB, L2 hits after
// the first block's: w1_first);
// elsewhere W2 after the up product (w2_late), or 24 units with W2's zero rows over x
// (w2_pad_over_x); at 33-64 tokens, where x's rows no longer fit beside the slices, x through a
// ring of K chunks (ffn_hidden_slice_ring.cuh), and from 49 tokens (16 warps) h exchanged in
// groups of 8 blocks, 12 shares of y instead of 96 (ffn_hidden_slice_exchange.cuh: its own kernel,
// and at C = 768 a copy of it with the plan's fields as constants, ffn_hidden_slice_fixed.h).
// fp32 at C = 768 needs 147 KB of weights a block:
// A100 and up; in 99 KiB at 1-16 tokens x's exact rows (two passes from 9) and W1's unpadded
// (77-98 KB), W2 late.
// W1 packed (FL_FFN_W1_PACKED=1; ffn_slice_pack_w1, laid out when the weights are set up): the
// copies read block s's slice as one contiguous run (4 whole lines a warp's copies) instead of
// a piece of each of W1's rows; left off (docs/PERFORMANCE.md has what it measured).
// mma.sync m16n8k16 in bf16, CUDA-core fp32 in the same fragments (gemm_core/weight_slice.cuh)
// from 9 tokens; at 1-8 fp32 tokens exact rows (gemm_core/row_products.cuh: no 16-row tile; in
// 99 KiB at 9-16 in two passes of 8 rows over the resident W1: ffn_hidden_slice_rows.cuh).
// Budget at C = 768, fp32: 18.9 MB (6.2 us at 3 TB/s), 147 KB a block (~9 us at the copy
// probe's ~16 GB/s a block: docs/PERFORMANCE.md), then 768 x 24 FMAs a product a block at one
// token. bf16: 9.4 MB (3.1 us), 96 KB a block (~5 us).
// After the last byte: the up product (6 k-steps x 4 column tiles a warp at one token), the
// reduction of 8 K parts and GELU (32 values at one token), the down product (2 k-steps x 12
// tiles a warp; both products on WarpMma::run_all_at where every tile is present, since with 2
// warps a scheduler each warp's executed instructions, not the mma, are the time), the share's
// store, the barrier (one acq_rel atomic, then a poll until the last block's) and the sum (96 loads
// an item, 16 in flight a lane): well under 1 us of issue, a few L2 round trips. The shares are
// 96 x m x C values written and read once, the cost that grows with tokens: in bf16 2 B each
// (0.15 MB at 1 token, 2.4 MB at 16, 9.4 MB at 64; fp32's 4 B, twice that: their measured share of
// the time is in docs/PERFORMANCE.md), in fp32 128 x m x C x 4 B. Predicted at 1 token: bf16 ~5 us
// of copies + ~3 us of chain + the launch, ~9 us; fp32 ~9 + ~3 + the launch, ~13 us.
#include "kernels/ffn/ffn_hidden_slice.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/activations.cuh"
#include "kernels/cuda_check.h"
#include "kernels/ffn/count_barrier.cuh"
#include "kernels/ffn/ffn_hidden_slice_copies.cuh"
#include "kernels/ffn/ffn_hidden_slice_direct.cuh"
#include "kernels/ffn/ffn_hidden_slice_fixed.h"
#include "kernels/ffn/ffn_hidden_slice_down.cuh"
#include "kernels/ffn/ffn_hidden_slice_exchange.cuh"
#include "kernels/ffn/ffn_hidden_slice_groups.cuh"
#include "kernels/ffn/ffn_hidden_slice_ring.cuh"
#include "kernels/ffn/ffn_hidden_slice_rows.cuh"
#include "kernels/ffn/ffn_hidden_slice_steps.cuh"
#include "kernels/gemm_core/row_products.cuh"
#include "kernels/gemm_core/weight_slice.cuh"
#include "kernels/phases.cuh"

namespace fl {
namespace hidden_slice {
namespace {

enum Phase : unsigned { kIssue, kXW1In, kUp, kW2In, kDown, kHandOver, kSum, kPhaseCount };
static_assert(kSum == unsigned(kExSum) && kW2In == unsigned(kExW2In), "the exchange's phases");

// The up product once x and W1 are in (and W2's rows still landing, unless they come late):
// warp w of kW takes row tile w % mtc and part w / mtc of K, the parts meet in shared memory
// and h = GELU(. + b1) is rounded into h's slice. fp32 at a few tokens multiplies exact rows.
template <int kW, typename T, class AskW2>
__device__ __forceinline__ void up_product(const SliceArgs<T>& a, T* xs, const T* w1s, const T* b1s,
                                           T* hs, float* red, int valid, const Ahead& w,
                                           const AskW2& ask_w2) {
  const FfnSlicePlan& p = a.p;
  // h's rows past the tokens stay zero: their products are never stored.
  const auto to_h = [&](int row, int col, float s) {
    const float v = col < valid ? gelu_tanh_fast(s + Elem<T>::to_float(b1s[col])) : 0.0f;
    hs[row * p.ld_h + col] = Elem<T>::from_float(v);
  };
  if constexpr (std::is_same_v<T, float>) {
    if (a.rows) return up_rows<32 * kW>(a, xs, w1s, red, to_h);
  }
  if constexpr (sizeof(T) == 2) {
    if (p.units == 32) {  // the plan's slice in bf16 at C = 768: every tile, no per-tile tests
      float acc[4][4];
      slice::zero(acc);
      if (kW == 8 && p.w2_during_up) {  // the operands into registers, then W2 over x and W1
        if constexpr (kW == 8) {        // (16 warps have half the registers a lane)
          UpOperands ops;
          ops.load(w);
          __syncthreads();
          ask_w2();
          ops.run(acc, w.up_steps);
        }
      } else {
        slice::WarpMma<T, 4>::run_all_at(acc, w.up_a, w.up_b, w.up_b_step, w.up_steps);
      }
      return slice::reduce_parts<4, kW>(acc, w.up_warp, p.mtc, 4, red, to_h, p.m);
    }
  }
  slice::block_product<T, kSliceMaxUnits / 8, kW>(xs, p.ld_x, w1s, p.ld_w1, p.ck, p.mtc,
                                                  p.units / 8, red, to_h, p.m);
}

// kFixed (C = 768, 8 warps, one row tile): every down job has all its column tiles and a warp
// has one job, so that the per-tile path and the next jobs' loop drop out of the hot path.
template <bool kFixed>
__device__ __forceinline__ Ahead fixed_ahead(Ahead w) {
  if constexpr (kFixed) w.down.tiles = kSliceDownCols / 8, w.down_more = 0;
  return w;
}

// kFixed: the plan's steering fields and the launch's vector flags as constants
// (ffn_hidden_slice_fixed.h), where the launch found them equal (FL_FFN_SLICE_FIXED=1).
template <typename T, int kW, typename S, bool kRing, bool kFixed = false>
__global__ void __launch_bounds__(32 * kW, 1) ffn_hidden_slice_kernel(SliceArgs<T> a) {
  if constexpr (kFixed) {
    ffn_slice_fix_rtx16(a.p);
    ffn_slice_fix_args(a);
  }
  constexpr int kThr = 32 * kW;
  extern __shared__ __align__(16) unsigned char smem[];
  const FfnSlicePlan& p = a.p;
  if (blockIdx.x >= p.blocks) return prefetch_w2<kThr>(a);
  PhaseMarks<kPhaseCount> marks(a.phases);
  T* w2s = reinterpret_cast<T*>(smem + p.off_w2);
  T* xs = reinterpret_cast<T*>(smem + p.off_x);
  T* w1s = reinterpret_cast<T*>(smem + p.off_w1);
  T* hs = reinterpret_cast<T*>(smem + p.off_h);
  float* red = reinterpret_cast<float*>(smem + p.off_red);  // over x and W1 once used
  T* b1s = reinterpret_cast<T*>(smem + p.off_bias);
  const int j0 = blockIdx.x * p.units, valid = min(p.units, p.h - j0);
  // b2 of the block's first tile of y first (one broadcast load a value; its DRAM trip overlaps
  // the copies'); then every byte of x and W1 (W1's first with w1_first), then of W2's rows,
  // before any arithmetic (W2's after the up product where both do not fit: w2_late, into the
  // region x and W1 held; with w2_early_from, a tuning, its last rows past them sooner). The
  // ring form asks for its first chunks (with their shares of W2's rows) instead.
  const Bias8<T> b2_raw = load_bias8(a, blockIdx.x);
  if constexpr (kRing) {
    ring_issue<kThr>(a, smem, hs, j0, valid);
  } else {
    stage_xw1<kThr>(a, xs, w1s, b1s, j0, valid);
    if (!p.w2_late) stage_w2<kThr>(a, w2s, j0, valid);
    if (p.w2_late && p.w2_early_from > 0 && !p.w2_early_after_xw1) {  // W2's rows past x and W1
      ring_w2_rows<kThr>(a, smem, p.w2_early_from, p.kp, j0, valid);
      tc::async_commit();
    }
    zero_padding<kThr>(p, xs, hs);
  }
  const Ahead ahead = fixed_ahead<kFixed>(work_out_ahead<kW, S>(a, xs, w1s, hs, w2s));
  marks.mark(kIssue);
  float b2_first[8];
  const auto ask_w2 = [&] {
    if (p.w2_early_from > 0) {  // the rows over W1 (the rest came with x and W1)
      ring_w2_rows<kThr>(a, smem, 0, p.w2_early_from, j0, valid);
      return tc::async_commit();
    }
    stage_w2<kThr>(a, w2s, j0, valid);
  };
  if constexpr (kRing) {
    const auto first_in = [&] {
      marks.mark(kXW1In);
      bias8_floats(b2_raw, b2_first);
    };
    if (p.ring_direct) {  // x's fragments straight into registers (ffn_hidden_slice_direct.cuh)
      direct_up_product<kW>(a, smem, hs, j0, valid, first_in);
    } else {
      ring_up_product<kW>(a, smem, hs, j0, valid, first_in);
    }
  } else {
    if (p.w2_late && (p.w2_early_from == 0 || p.w2_early_after_xw1)) {
      tc::async_wait<0>();
    } else {
      tc::async_wait<1>();  // this thread's x and W1 are in (W2's group may still be landing)
    }
    if (p.w2_late && p.w2_early_from > 0 && p.w2_early_after_xw1) {  // clear of x and W1
      ring_w2_rows<kThr>(a, smem, p.w2_early_from, p.kp, j0, valid);
      tc::async_commit();
    }
    __syncthreads();
    marks.mark(kXW1In);
    bias8_floats(b2_raw, b2_first);
    up_product<kW>(a, xs, w1s, b1s, hs, red, valid, ahead, ask_w2);
  }
  marks.mark(kUp);
  if (p.w2_late && !p.w2_during_up && !kRing) ask_w2();  // the ring asks for its own
  zero_w2_pad<kThr>(p, w2s);
  tc::async_wait<0>();
  __syncthreads();
  marks.mark(kW2In);
  down_product<kW, S>(a, hs, w2s, ahead);
  marks.mark(kDown);
  if constexpr (sizeof(T) == 2 && sizeof(S) == 2) {
    if (p.group_sum) {  // no grid barrier: warp w waits for group w (ffn_hidden_slice_groups.cuh)
      unsigned* slot = reinterpret_cast<unsigned*>(smem + p.off_bias) + p.units / 2;  // past b1
      arrive_group(p, a.counters, slot);
      const unsigned old = *slot;
      marks.mark(kHandOver);
      group_sum_tiles(a, old, red, b2_first);
      marks.mark(kSum);
      return;
    }
  }
  // Every block's share written before any block goes on (count_barrier.cuh).
  count_barrier(a.counters, p.blocks, blockIdx.x == 0, p.barrier_acq_rel);
  marks.mark(kHandOver);
  sum_tiles<S>(a, ahead.sum, b2_first);
  marks.mark(kSum);
}

// FL_FFN_SLICE=warps[,shares[,units[,during[,ring[,slots[,w1[,prefetch[,stagger[,walk[,split[,copies[,sum[,bar[,direct[,w2early[,deep[,w1first[,groups[,exchange]]]]]]]]]]]]]]]]]]]
// (warps 8 or 16, share bytes 4 or 2, hidden units a block; 0 or nothing: the plan's; during 0: no
// w2_during_up; ring 1: the ring form, of `slots` slots; w1 1: W1's rows in its slots, 2: W2's
// rows each as soon as the W1 rows under it are done; prefetch 1: blocks prefetching W2, 2: none;
// stagger 1: the ring's blocks start at chunk b mod chunks, 2: all at chunk 0; walk 2: the ring's
// copies of x by stage() every chunk; split 1: the ring's K split among warps, 2: not; copies 2:
// the resident copies by stage(), 3: stepped, W1's lines asked into L2 first, 4: stepped with
// the column wrapping in x's and W2's rows; sum 2: the sum's shuffle offset divided out after
// the grid barrier; bar 2: the grid barrier's fences, as ffn_stream's, not an acq_rel atomic;
// direct 1: the ring form's x straight into registers, 2: through the ring; w2early 1 / 2: with
// direct, W2's rows that fit the unused slots asked for with W1, and with w2_during_up those
// past x and W1 asked for after them (w2_early_resident), or neither, 3: those once x and W1
// are in; deep 1 / 2: with direct,
// two batches of x's loads before W1's wait, or one; w1first 1 / 2: the resident copies ask for
// W1's columns before x's rows, or x's first; groups 1 / 2: the sum of y by groups, no grid
// barrier, where it fits, or not, 3: groups of consecutive blocks, 4: polls without a sleep;
// exchange 1 / 2: the ring form's h exchanged in groups of blocks, or not; 4 / 8: in groups of 4 /
// 8) replaces them in every launch whose tuning leaves them to the plan: how `fusionlab bench
// --phases` measures the forms.
FfnSliceTuning tuning_from_env(FfnSliceTuning t) {
  const char* env = std::getenv("FL_FFN_SLICE");
  if (env == nullptr || *env == '\0') return t;
  int v[20] = {0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  std::sscanf(env, "%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d", &v[0], &v[1],
              &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &v[12],
              &v[13], &v[14], &v[15], &v[16], &v[17], &v[18], &v[19]);
  if (t.warps == 0) t.warps = v[0];
  if (t.shares == 0) t.shares = v[1];
  if (t.units == 0) t.units = v[2];
  if (v[3] == 0) t.w2_during_up = false;
  if (v[4] == 1) t.x_ring = true;
  if (t.ring_stages == 0) t.ring_stages = v[5];
  if (t.ring_form == 0) t.ring_form = v[6];
  if (t.prefetch == 0) t.prefetch = v[7];
  if (t.stagger == 0) t.stagger = v[8];
  if (t.walk == 0) t.walk = v[9];
  if (t.split == 0) t.split = v[10];
  if (t.copies == 0) t.copies = v[11];
  if (t.sum == 0) t.sum = v[12];
  if (t.barrier == 0) t.barrier = v[13];
  if (t.direct == 0) t.direct = v[14];
  if (t.w2_early == 0) t.w2_early = v[15];
  if (t.deep == 0) t.deep = v[16];
  if (t.w1_first == 0) t.w1_first = v[17];
  if (t.groups == 0) t.groups = v[18];
  if (t.exchange == 0) t.exchange = v[19];
  return t;
}

// The exchange's down product with its index math worked out during the group's barrier
// (ffn_hidden_slice_exchange_down.cuh), or FL_FFN_EX_DOWN=0: the general loop after h lands, the
// form measured before (16 warps; 8 warps run the new form only).
bool ffn_slice_ex_down_ahead() {
  const char* env = std::getenv("FL_FFN_EX_DOWN");
  return env == nullptr || env[0] != '0';
}

// The plan on this GPU within `optin` bytes of shared memory a block (0: planned_shared_optin's
// share of this GPU's: a chosen older GPU's where a choice as one is in force).
template <typename T>
Status make_plan(int64_t m, int64_t c, FfnSliceTuning tuning, FfnSlicePlan* out, int optin = 0) {
  int device = 0, sms = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (optin == 0) {
    FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    optin = planned_shared_optin(optin);
  }
  if (tuning.warps != 0 && tuning.warps != 8 && (tuning.warps != 16 || sizeof(T) != 2)) {
    return Status::Error("the hidden-slice FFN takes 8 warps a block, or 16 in bf16");
  }
  if (tuning.shares != 0 && tuning.shares != 4 && (tuning.shares != 2 || sizeof(T) != 2)) {
    return Status::Error("the hidden-slice FFN's shares are fp32 (4 bytes), or bf16 (2) in bf16");
  }
  // fp32 shares asked for: 8 warps where the plan would take 16 (whose kernel has bf16 shares).
  const int warps = tuning.warps == 0 && tuning.shares == 4 ? 8 : tuning.warps;
  if (tuning.x_ring && sizeof(T) != 2) return Status::Error("the hidden slice's ring is bf16 only");
  if (ffn_slice_choose_plan(m, c, int(sizeof(T)), sms, optin, out, tuning.units, tuning.w2_late,
                            warps, tuning.x_ring, tuning.ring_stages, tuning.ring_form == 1)) {
    if (out->ring_w1 && tuning.ring_form == 2) out->ring_w2_after = false;
    if (tuning.stagger != 0) out->ring_stagger = out->x_ring && tuning.stagger == 1;
    if (tuning.walk == 2) out->ring_walk = false;
    if (tuning.copies == 2) out->stepped_copies = false;
    if (tuning.copies == 3) out->w1_l2_ahead = true;
    if (tuning.copies == 4) out->fixed_column = false;
    if (tuning.sum == 2) out->sum_apart_ahead = false;
    if (tuning.barrier == 2) out->barrier_acq_rel = false;
    if (tuning.split != 0) out->ring_split = out->x_ring && tuning.split == 1;
    if (tuning.direct != 0) out->ring_direct = tuning.direct == 1;
    // The split's parts meet over W1's columns after the ring: not where W2's rows land there
    // during it.
    if (out->ring_w1 && !out->ring_w2_after) out->ring_split = false;
    if (out->ring_w1 && !out->ring_w2_after) out->ring_stagger = false;  // W2 frees W1 from row 0
    out->ring_direct = out->ring_direct && ffn_slice_ring_direct_fits(*out);
    if (tuning.prefetch == 1) out->prefetch_blocks = ffn_slice_prefetch_blocks(*out, sms);
    if (tuning.prefetch == 2) out->prefetch_blocks = 0;
    if (tuning.shares != 0) out->share_bytes = tuning.shares;
    if (!tuning.w2_during_up) out->w2_during_up = false, out->off_red = out->off_x;
    const bool early = tuning.w2_early == 0 ? kSliceW2EarlyResident : tuning.w2_early == 1;
    if (early || tuning.w2_early == 3) {
      ffn_slice_w2_early_resident(out, size_t(optin) - 64);  // 64: static shared memory
      out->w2_early_after_xw1 = tuning.w2_early == 3;
    }
    // W1's columns before x's rows: the plan's where W2 comes under the up product (measured
    // there: docs/PERFORMANCE.md).
    out->w1_first =
        tuning.w1_first == 0 ? kSliceW1First && out->w2_during_up : tuning.w1_first == 1;
    // The sum by groups: the plan's where W2 comes under the up product at 9-16 tokens
    // (measured there), and in the ring form with kSliceGroupSumRing.
    const bool resident = kSliceGroupSum && out->w2_during_up && m <= kSliceFasterTo;
    const bool groups =
        tuning.groups == 0 ? resident || (kSliceGroupSumRing && out->x_ring) : tuning.groups != 2;
    out->group_sum = groups && ffn_slice_groups_fit(*out);
    out->group_contiguous = out->group_sum && tuning.groups == 3 && out->blocks % kSliceGroups == 0;
    out->group_spin = out->group_sum && tuning.groups == 4;
    // h exchanged in groups (ffn_hidden_slice_exchange.cuh) in place of a share a block: the
    // plan's on 16 warps (measured faster there at 64 tokens, slower on 8 at 33-48).
    const bool ex = tuning.exchange == 0 ? kSliceExchange && out->warps == 16 && tuning.groups == 0
                                         : tuning.exchange != 2;
    if (ex && ffn_slice_exchange(out, tuning.exchange > 2 ? tuning.exchange : 0)) {
      out->group_sum = false;
    }
    if (out->warps == 16 && out->share_bytes != 2) {
      return Status::Error("the 16-warp hidden slice has bf16 shares");
    }
    return Status::Ok();
  }
  return Status::Unsupported(
      "the hidden-slice FFN at " + std::to_string(m) + " tokens and C = " + std::to_string(c) +
      " does not fit one block per SM in " + std::to_string(optin) + " bytes of shared memory");
}

template <typename T>
Status pack_typed(const void* w1, int64_t m, int64_t c, void* packed, int* units,
                  cudaStream_t stream, FfnSliceTuning tuning) {
  FfnSlicePlan p;
  FL_TRY(make_plan<T>(m, c, tuning_from_env(tuning), &p));
  pack_w1_kernel<T><<<264, 256, 0, stream>>>(static_cast<const T*>(w1), static_cast<T*>(packed),
                                             p.c, p.h, p.units, p.blocks);
  FL_CUDA_TRY(cudaGetLastError());
  *units = p.units;
  return Status::Ok();
}

// The 9-16-token RTX plan's kernel with its fields as constants where the plan is that one
// (ffn_hidden_slice_fixed.h): on unless FL_FFN_SLICE_FIXED=0 (the A/B's switch).
bool fixed_wanted() {
  const char* env = std::getenv("FL_FFN_SLICE_FIXED");
  return env == nullptr || env[0] != '0';
}

// The exchange's 49-64-token RTX plan's kernel with its fields as constants where the plan is
// that one (ffn_hidden_slice_fixed.h's ffn_slice_fix_rtx64): on unless FL_FFN_EX_FIXED=0 (the
// A/B's switch).
bool ex_fixed_wanted() {
  const char* env = std::getenv("FL_FFN_EX_FIXED");
  return env == nullptr || env[0] != '0';
}

template <typename T>
Status launch_typed(const FfnSliceBuffers& b, int64_t m, int64_t c, FfnSliceTuning tuning,
                    cudaStream_t stream) {
  SliceArgs<T> a{};
  tuning = tuning_from_env(tuning);
  FL_TRY(make_plan<T>(m, c, tuning, &a.p));
  constexpr int E = slice::kChunk<T>;
  auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  a.x = static_cast<const T*>(b.x);
  a.w1 = static_cast<const T*>(b.w1);
  a.b1 = static_cast<const T*>(b.b1);
  a.w2 = static_cast<const T*>(b.w2);
  a.b2 = static_cast<const T*>(b.b2);
  a.y = static_cast<T*>(b.y);
  a.w1p = packed_w1_for<T>(b, a.p);
  char* scratch = static_cast<char*>(b.scratch);
  a.counters = reinterpret_cast<unsigned*>(scratch);
  a.partial = reinterpret_cast<float*>(scratch + kSliceScratchHead);  // after the groups' counters
  a.phases = b.phases;
  a.x_vec = c % E == 0 && aligned(b.x);
  a.w1_vec = (4 * c) % E == 0 && aligned(b.w1);
  a.w2_vec = c % E == 0 && aligned(b.w2);
  a.b1_vec = aligned(b.b1);
  a.y_vec = c % 8 == 0 && aligned(b.y);
  if (!a.x_vec) a.p.ring_direct = false, a.p.ex_group = 0;  // whole 16-byte pieces of x's rows
  if (!a.w2_vec) a.p.ex_group = 0;  // the exchange's W2 tiles by 16-byte copies
  const bool w2_early = tuning.w2_early != 2 && (kSliceW2Early || tuning.w2_early == 1);
  // The exchange with W2's early rows off: its whole tile once the up product is done.
  if (a.p.ex_group > 0 && tuning.w2_early == 2) a.p.ex_from = 32 * a.p.ex_group;
  if (a.p.ring_direct && a.p.ex_group == 0 && w2_early) {
    ffn_slice_w2_early(&a.p);
  }
  if (tuning.deep != 0) a.p.direct_deep = tuning.deep == 1;
  a.rows =
      sizeof(T) == 4 && (a.p.x_rows > 0 || m <= std::min<int64_t>(tuning.rows_to, slice::kRowsMax));
  if (!aligned(b.scratch)) return Status::Error("the FFN's scratch buffer is not 16-byte aligned");
  const int grid = a.p.blocks + a.p.prefetch_blocks;  // one block an SM at most
  if constexpr (sizeof(T) == 2) {
    using Bf16 = __nv_bfloat16;
    const auto go = [&](auto kernel, int warps) {
      return slice::launch_cooperative(kernel, a, grid, 32 * warps, a.p.smem, stream);
    };
    if (a.p.warps == 16 && a.p.share_bytes != 2) {
      return Status::Error("the 16-warp hidden slice has bf16 shares");
    }
    // h exchanged in groups: a kernel of its own (ffn_hidden_slice_exchange.cuh).
    if (a.p.ex_group > 0) {
      if (a.p.warps == 16 && !ffn_slice_ex_down_ahead()) {  // the form before (FL_FFN_EX_DOWN=0)
        return go(ffn_hidden_slice_exchange_kernel<T, 16, false>, 16);
      }
      if (a.p.warps == 16 && ex_fixed_wanted() && ffn_slice_ex_fixed_fits(a.p) && a.x_vec &&
          a.w1_vec && a.w2_vec && a.b1_vec && a.y_vec && a.w1p == nullptr && !a.rows) {
        a.p.prefetch_blocks = 0;  // W2 into L2 by the plan's blocks once their W1 is in
        return slice::launch_cooperative(ffn_hidden_slice_exchange_kernel<T, 16, true, true>, a,
                                         a.p.blocks, 32 * 16, a.p.smem, stream);
      }
      if (a.p.warps == 16) return go(ffn_hidden_slice_exchange_kernel<T, 16>, 16);
      return go(ffn_hidden_slice_exchange_kernel<T, 8>, 8);
    }
    if (a.p.x_ring) {
      if (a.p.warps == 16) return go(ffn_hidden_slice_kernel<T, 16, Bf16, true>, 16);
      if (a.p.share_bytes == 2) return go(ffn_hidden_slice_kernel<T, 8, Bf16, true>, 8);
      return go(ffn_hidden_slice_kernel<T, 8, float, true>, 8);
    }
    if (a.p.warps == 16) return go(ffn_hidden_slice_kernel<T, 16, Bf16, false>, 16);
    if (fixed_wanted() && ffn_slice_fixed_fits(a.p) && a.x_vec && a.w1_vec && a.w2_vec &&
        a.b1_vec && a.y_vec && a.w1p == nullptr && !a.rows) {
      return go(ffn_hidden_slice_kernel<T, 8, Bf16, false, true>, 8);
    }
    if (a.p.share_bytes == 2) return go(ffn_hidden_slice_kernel<T, 8, Bf16, false>, 8);
  }
  return slice::launch_cooperative(ffn_hidden_slice_kernel<T, 8, float, false>, a, grid, 32 * 8,
                                   a.p.smem, stream);
}

}  // namespace
}  // namespace hidden_slice

Status ffn_slice_supported(Precision p, int64_t m, int64_t c) {
  if (m < 1 || m > kSliceMaxTokens) {
    return Status::Unsupported("the hidden-slice FFN takes 1 to " +
                               std::to_string(kSliceMaxTokens) + " tokens, got " +
                               std::to_string(m));
  }
  if (c < 1) return Status::Error("the hidden-slice FFN needs C >= 1");
  FL_TRY(slice::cooperative_gpu_supported(p, "the hidden-slice FFN"));
  FfnSlicePlan plan;
  return p == Precision::bf16 ? hidden_slice::make_plan<__nv_bfloat16>(m, c, {}, &plan)
                              : hidden_slice::make_plan<float>(m, c, {}, &plan);
}

Status ffn_slice_scratch_bytes(Precision p, int64_t m, int64_t c, size_t* bytes,
                               FfnSliceTuning tuning) {
  FL_TRY(ffn_slice_supported(p, m, c));
  // Made before any choice as an older GPU, the buffer holds the plan for each opt-in limit
  // below this GPU's too (a smaller one may take more blocks, each a share of y), and
  // FL_FFN_SLICE's.
  tuning = hidden_slice::tuning_from_env(tuning);
  int device = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  *bytes = 0;
  for (int limit : plannable_shared_optins(optin)) {
    FfnSlicePlan plan;
    const Status st = p == Precision::bf16
                          ? hidden_slice::make_plan<__nv_bfloat16>(m, c, tuning, &plan, limit)
                          : hidden_slice::make_plan<float>(m, c, tuning, &plan, limit);
    if (st.ok()) *bytes = std::max(*bytes, ffn_slice_scratch_bytes_for(plan));
    if (!st.ok() && !st.unsupported()) return st;
  }
  if (*bytes == 0) return Status::Unsupported("the hidden-slice FFN has no plan here");
  return Status::Ok();
}

size_t ffn_slice_packed_w1_bytes(Precision p, int64_t c) {
  const size_t e = p == Precision::bf16 ? 2 : 4;
  return e * size_t(c) * size_t(4 * c + kSliceMaxUnits);
}

Status ffn_slice_pack_w1(Precision p, const void* w1, int64_t m, int64_t c, void* packed,
                         int* units, cudaStream_t stream, FfnSliceTuning tuning) {
  *units = 0;
  FL_TRY(ffn_slice_supported(p, m, c));
  return p == Precision::bf16
             ? hidden_slice::pack_typed<__nv_bfloat16>(w1, m, c, packed, units, stream, tuning)
             : hidden_slice::pack_typed<float>(w1, m, c, packed, units, stream, tuning);
}

bool ffn_slice_w1_packed() {
  const char* env = std::getenv("FL_FFN_W1_PACKED");
  if (env == nullptr || *env == '\0') return kSliceW1Packed;
  return env[0] == '1';
}

Status launch_ffn_slice(Precision p, const FfnSliceBuffers& b, int64_t m, int64_t c,
                        cudaStream_t stream, FfnSliceTuning tuning) {
  FL_TRY(ffn_slice_supported(p, m, c));
  return p == Precision::bf16 ? hidden_slice::launch_typed<__nv_bfloat16>(b, m, c, tuning, stream)
                              : hidden_slice::launch_typed<float>(b, m, c, tuning, stream);
}

}  // namespace fl
