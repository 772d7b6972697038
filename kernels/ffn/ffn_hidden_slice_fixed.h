// The hidden-slice FFN's (kernels/ffn/ffn_hidden_slice.cu) plan at 9-16 bf16 tokens as an RTX
// card plans it in 99 KiB at C = 768, as constants: 32 hidden units a block (96 blocks), 8 warps,
// bf16 shares, W2's rows asked for under the up product (w2_during_up), W1's columns before x's
// rows, the sum of y by 8 interleaved groups; x's rows a 16-row tile; no ring, no W2 rows early,
// no packed W1, no prefetching blocks, no exchange of h. A kernel instantiated with kFixed takes
// these fields from here instead of the launch's plan, so that the compiler drops the other forms'
// branches and folds C's tile counts: the hot path after W2 lands lies in fewer, closer runs of
// code (at a cold launch each run's first lines come from L2 or DRAM). The launch takes it only
// where the plan equals these constants field for field (ffn_slice_fixed_fits), so it computes
// what the plan's kernel computes, unless FL_FFN_SLICE_FIXED=0 (docs/PERFORMANCE.md has both
// measured).
#pragma once

#include "kernels/ffn/ffn_hidden_slice_plan.h"
#include "kernels/gemm_core/slice_plan.h"

namespace fl {

// The plan's fields the fixed kernel takes as constants (m, the offsets and smem stay the
// launch's: they do not steer branches).
FL_SLICE_HD inline void ffn_slice_fix_rtx16(FfnSlicePlan& p) {
  constexpr int kC = 768, kUnits = 32, kE = 2;
  p.c = kC, p.h = 4 * kC, p.mtc = 1;
  p.units = kUnits, p.blocks = 4 * kC / kUnits, p.warps = 8, p.share_bytes = 2;
  p.ck = kC, p.kp = kUnits, p.cp = kC;
  p.ld_x = slice::padded_ld(kC, kE), p.ld_w1 = slice::padded_ld(kUnits, kE);
  p.ld_w2 = slice::padded_ld(kC, kE), p.ld_h = slice::padded_ld(kUnits, kE);
  p.w2_late = true, p.w2_pad_over_x = false, p.w2_during_up = true;
  p.x_ring = false, p.ring_w1 = false, p.ring_w2_after = false, p.ring_stagger = false;
  p.ring_split = false, p.ring_direct = false, p.w2_early_from = 0;
  p.stepped_copies = true, p.fixed_column = true, p.w1_l2_ahead = false;
  p.w2_early_after_xw1 = false, p.w1_first = true;
  p.group_sum = true, p.group_contiguous = false, p.group_spin = false;
  p.x_rows = 0, p.prefetch_blocks = 0, p.ex_group = 0;
}

// Whether plans a and b agree in every field (the fixed kernels' test: a plan against its copy
// with the constants written over it).
inline bool ffn_slice_plans_equal(const FfnSlicePlan& a, const FfnSlicePlan& b) {
  const bool shape = a.m == b.m && a.c == b.c && a.h == b.h && a.mtc == b.mtc &&
                     a.units == b.units && a.blocks == b.blocks && a.warps == b.warps &&
                     a.share_bytes == b.share_bytes && a.ck == b.ck && a.kp == b.kp &&
                     a.cp == b.cp && a.ld_x == b.ld_x && a.ld_w1 == b.ld_w1 && a.ld_w2 == b.ld_w2 &&
                     a.ld_h == b.ld_h;
  const bool bytes =
      a.off_w2 == b.off_w2 && a.off_x == b.off_x && a.off_w1 == b.off_w1 && a.off_h == b.off_h &&
      a.off_bias == b.off_bias && a.smem == b.smem && a.off_red == b.off_red &&
      a.ring_k == b.ring_k && a.ring_stages == b.ring_stages && a.ring_chunks == b.ring_chunks &&
      a.ld_xr == b.ld_xr && a.ring_x_bytes == b.ring_x_bytes &&
      a.ring_stage_bytes == b.ring_stage_bytes && a.ex_group == b.ex_group && a.ld_hx == b.ld_hx &&
      a.ld_w2x == b.ld_w2x && a.ex_from == b.ex_from && a.off_w2x == b.off_w2x;
  const bool forms = a.w2_late == b.w2_late && a.w2_pad_over_x == b.w2_pad_over_x &&
                     a.w2_during_up == b.w2_during_up && a.x_ring == b.x_ring &&
                     a.ring_w1 == b.ring_w1 && a.ring_w2_after == b.ring_w2_after &&
                     a.ring_stagger == b.ring_stagger && a.ring_walk == b.ring_walk &&
                     a.ring_split == b.ring_split && a.ring_direct == b.ring_direct &&
                     a.direct_deep == b.direct_deep && a.w2_early_from == b.w2_early_from &&
                     a.stepped_copies == b.stepped_copies && a.fixed_column == b.fixed_column &&
                     a.sum_apart_ahead == b.sum_apart_ahead &&
                     a.barrier_acq_rel == b.barrier_acq_rel && a.w1_l2_ahead == b.w1_l2_ahead &&
                     a.w2_early_after_xw1 == b.w2_early_after_xw1 && a.w1_first == b.w1_first &&
                     a.group_sum == b.group_sum && a.group_contiguous == b.group_contiguous &&
                     a.group_spin == b.group_spin && a.x_rows == b.x_rows &&
                     a.prefetch_blocks == b.prefetch_blocks;
  return shape && bytes && forms;
}

// Whether plan p is the one ffn_slice_fix_rtx16 writes (every field it sets equal), with m at
// 9-16 tokens (one row tile, bf16 shares).
inline bool ffn_slice_fixed_fits(const FfnSlicePlan& p) {
  FfnSlicePlan q = p;
  ffn_slice_fix_rtx16(q);
  return p.m >= kSliceBf16SharesFrom && p.m <= 16 && ffn_slice_plans_equal(p, q);
}

// The exchange's plan (ffn_hidden_slice_exchange.cuh) at 49-64 bf16 tokens as an RTX card plans
// it in 99 KiB at C = 768, as constants: 32 hidden units a block (96 blocks), 16 warps, four row
// tiles, bf16 shares; x's fragments from L2 into registers (ring_direct) with W1's 768 x 32
// resident (ring_w1, the ring's 12 chunks of 64 rows, split parts), W2's whole rows after the up
// product; h exchanged in groups of 8 (the group's h 64 x 264 at 0, W2's tile 256 x 104 at
// 35,840 bytes: its rows 124-255 lie past W1; ffn_hidden_slice_exchange.cuh says in which order the
// fixed instance asks for them). A kernel instantiated with kFixed takes
// every field but m and prefetch_blocks from here (the offsets and smem too: they fold into the
// address math), so that the compiler drops the other forms' branches and folds C's counts; its
// launch has no prefetching blocks (the kernel's blocks ask L2 for W2 once their W1 is in).
// The launch takes it only where the plan equals these constants field for field
// (ffn_slice_ex_fixed_fits), unless FL_FFN_EX_FIXED=0 (docs/PERFORMANCE.md has both measured).
FL_SLICE_HD inline void ffn_slice_fix_rtx64(FfnSlicePlan& p) {
  constexpr int kC = 768, kUnits = 32, kE = 2;
  p.c = kC, p.h = 4 * kC, p.mtc = 4;
  p.units = kUnits, p.blocks = 4 * kC / kUnits, p.warps = 16, p.share_bytes = 2;
  p.ck = kC, p.kp = kUnits, p.cp = kC;
  p.ld_x = slice::padded_ld(kC, kE), p.ld_w1 = slice::padded_ld(kUnits, kE);
  p.ld_w2 = slice::padded_ld(kC, kE), p.ld_h = slice::padded_ld(kUnits, kE);
  p.w2_late = true, p.w2_pad_over_x = false, p.w2_during_up = false;
  p.off_w2 = 0, p.off_x = 61440, p.off_w1 = 0, p.off_h = 89088, p.off_bias = 94208;
  p.smem = 94336, p.off_red = 0;
  p.x_ring = true, p.ring_w1 = true, p.ring_w2_after = true, p.ring_stagger = false;
  p.ring_walk = true, p.ring_split = true, p.ring_direct = true, p.direct_deep = false;
  p.w2_early_from = 0, p.stepped_copies = true, p.fixed_column = true;
  p.sum_apart_ahead = true, p.barrier_acq_rel = true, p.w1_l2_ahead = false;
  p.w2_early_after_xw1 = false, p.w1_first = false;
  p.group_sum = false, p.group_contiguous = false, p.group_spin = false, p.x_rows = 0;
  p.ring_k = 64, p.ring_stages = 3, p.ring_chunks = 12, p.ld_xr = 72;
  p.ring_x_bytes = 9216, p.ring_stage_bytes = 9216;
  p.ex_group = 8, p.ld_hx = 264, p.ld_w2x = 104, p.ex_from = 124, p.off_w2x = 35840;
}

// Whether plan p is the one ffn_slice_fix_rtx64 writes (every field it sets equal), at 49-64
// tokens (four row tiles).
inline bool ffn_slice_ex_fixed_fits(const FfnSlicePlan& p) {
  FfnSlicePlan q = p;
  ffn_slice_fix_rtx64(q);
  return p.m >= 49 && p.m <= 64 && ffn_slice_plans_equal(p, q);
}

// A fixed kernel's launch arguments as the launch found them (every vector flag on, W1 unpacked,
// 16-row tiles): constants for the compiler too.
template <typename Args>
FL_SLICE_HD inline void ffn_slice_fix_args(Args& a) {
  a.x_vec = a.w1_vec = a.w2_vec = a.b1_vec = a.y_vec = true;
  a.w1p = nullptr, a.rows = false;
}

}  // namespace fl
