// The hidden-slice FFN's (kernels/ffn/ffn_hidden_slice.cu) plan at 9-16 bf16 tokens as an RTX
// card plans it in 99 KiB at C = 768, as constants: 32 hidden units a block (96 blocks), 8 warps,
// bf16 shares, W2's rows asked for under the up product (w2_during_up), W1's columns before x's
// rows, the sum of y by 8 interleaved groups; x's rows a 16-row tile; no ring, no W2 rows early,
// no packed W1, no prefetching blocks, no exchange of h. A kernel instantiated with kFixed takes
// these fields from here instead of the launch's plan, so that the compiler drops the other forms'
// branches and folds C's tile counts: the hot path after W2 lands lies in fewer, closer runs of
// code (at a cold launch each run's first lines come from L2 or DRAM; docs/PERFORMANCE.md has the
// code-placement measurements of 2026-11-27 that suggest ~0.5 us there). The launch takes it only
// where the plan equals these constants field for field (ffn_slice_fixed_fits), so it computes
// what the plan's kernel computes, unless FL_FFN_SLICE_FIXED=0. Measured (NVIDIA H100 80GB HBM3,
// `--choose-as 8.6`, 2026-11-27 18:56 UTC, three rounds interleaved): 9.25-9.28 against
// 10.75-10.78 us at 9 tokens, 9.41 against 10.94-11.01 at 16; 1 token (the plan's kernel both
// ways) unchanged.
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

// Whether plan p is the one ffn_slice_fix_rtx16 writes (every field it sets equal), with m at
// 9-16 tokens (one row tile, bf16 shares).
inline bool ffn_slice_fixed_fits(const FfnSlicePlan& p) {
  FfnSlicePlan q = p;
  ffn_slice_fix_rtx16(q);
  return p.m >= kSliceBf16SharesFrom && p.m <= 16 && p.c == q.c && p.h == q.h && p.mtc == q.mtc &&
         p.units == q.units && p.blocks == q.blocks && p.warps == q.warps &&
         p.share_bytes == q.share_bytes && p.ck == q.ck && p.kp == q.kp && p.cp == q.cp &&
         p.ld_x == q.ld_x && p.ld_w1 == q.ld_w1 && p.ld_w2 == q.ld_w2 && p.ld_h == q.ld_h &&
         p.w2_late == q.w2_late && p.w2_pad_over_x == q.w2_pad_over_x &&
         p.w2_during_up == q.w2_during_up && p.x_ring == q.x_ring && p.ring_w1 == q.ring_w1 &&
         p.ring_w2_after == q.ring_w2_after && p.ring_stagger == q.ring_stagger &&
         p.ring_split == q.ring_split && p.ring_direct == q.ring_direct &&
         p.w2_early_from == q.w2_early_from && p.stepped_copies == q.stepped_copies &&
         p.fixed_column == q.fixed_column && p.w1_l2_ahead == q.w1_l2_ahead &&
         p.w2_early_after_xw1 == q.w2_early_after_xw1 && p.w1_first == q.w1_first &&
         p.group_sum == q.group_sum && p.group_contiguous == q.group_contiguous &&
         p.group_spin == q.group_spin && p.x_rows == q.x_rows &&
         p.prefetch_blocks == q.prefetch_blocks && p.ex_group == q.ex_group;
}

// The exchange's plan (ffn_hidden_slice_exchange.cuh) at 49-64 bf16 tokens as an RTX card plans
// it in 99 KiB at C = 768, as constants: 32 hidden units a block (96 blocks), 16 warps, four row
// tiles, bf16 shares; x's fragments from L2 into registers (ring_direct) with W1's 768 x 32
// resident (ring_w1, the ring's 12 chunks of 64 rows, split parts), W2's whole rows after the up
// product; h exchanged in groups of 8 (the group's h 64 x 264 at 0, W2's tile 256 x 104 at
// 35,840 bytes, its rows 124-255 asked for with W1). A kernel instantiated with kFixed takes
// every field but m and prefetch_blocks from here (the offsets and smem too: they fold into the
// address math), so that the compiler drops the other forms' branches and folds C's counts.
// The launch takes it only where the plan equals these constants field for field
// (ffn_slice_ex_fixed_fits), unless FL_FFN_EX_FIXED=0. Measured (NVIDIA H100 80GB HBM3,
// `--choose-as 8.6`, 2026-11-27 19:33 UTC, three rounds interleaved): 14.72-14.75 against
// 17.18-17.22 us at 64 tokens, 14.59-14.78 against 17.22-17.31 at 49; 1 and 16 tokens unchanged.
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
  const bool shape = p.m >= 49 && p.m <= 64 && p.c == q.c && p.h == q.h && p.mtc == q.mtc &&
                     p.units == q.units && p.blocks == q.blocks && p.warps == q.warps &&
                     p.share_bytes == q.share_bytes && p.ck == q.ck && p.kp == q.kp &&
                     p.cp == q.cp && p.ld_x == q.ld_x && p.ld_w1 == q.ld_w1 && p.ld_w2 == q.ld_w2 &&
                     p.ld_h == q.ld_h;
  const bool bytes =
      p.off_w2 == q.off_w2 && p.off_x == q.off_x && p.off_w1 == q.off_w1 && p.off_h == q.off_h &&
      p.off_bias == q.off_bias && p.smem == q.smem && p.off_red == q.off_red &&
      p.ring_k == q.ring_k && p.ring_stages == q.ring_stages && p.ring_chunks == q.ring_chunks &&
      p.ld_xr == q.ld_xr && p.ring_x_bytes == q.ring_x_bytes &&
      p.ring_stage_bytes == q.ring_stage_bytes && p.ex_group == q.ex_group && p.ld_hx == q.ld_hx &&
      p.ld_w2x == q.ld_w2x && p.ex_from == q.ex_from && p.off_w2x == q.off_w2x;
  const bool forms = p.w2_late == q.w2_late && p.w2_pad_over_x == q.w2_pad_over_x &&
                     p.w2_during_up == q.w2_during_up && p.x_ring == q.x_ring &&
                     p.ring_w1 == q.ring_w1 && p.ring_w2_after == q.ring_w2_after &&
                     p.ring_stagger == q.ring_stagger && p.ring_walk == q.ring_walk &&
                     p.ring_split == q.ring_split && p.ring_direct == q.ring_direct &&
                     p.direct_deep == q.direct_deep && p.w2_early_from == q.w2_early_from &&
                     p.stepped_copies == q.stepped_copies && p.fixed_column == q.fixed_column &&
                     p.sum_apart_ahead == q.sum_apart_ahead &&
                     p.barrier_acq_rel == q.barrier_acq_rel && p.w1_l2_ahead == q.w1_l2_ahead &&
                     p.w2_early_after_xw1 == q.w2_early_after_xw1 && p.w1_first == q.w1_first &&
                     p.group_sum == q.group_sum && p.group_contiguous == q.group_contiguous &&
                     p.group_spin == q.group_spin && p.x_rows == q.x_rows;
  return shape && bytes && forms;
}

}  // namespace fl
