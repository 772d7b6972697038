// The portable small-token kernels' plans (kernels/ffn/ffn_stream_plan.h,
// kernels/ffn/ffn_hidden_slice_plan.h, kernels/layernorm_linear/ln_linear_stream_plan.h), checked
// on the CPU for the GPUs a learner may have: every hidden unit in one up slice and every W2
// element in one down tile (FFN), every output in one block (LayerNorm-Linear), the FFN's grid
// within one block per SM (its blocks wait on each other), shared-memory regions inside the GPU's
// limit and apart, and the shapes the lessons default to (C = 768) planned where the shared memory
// allows.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kernels/catalog.h"
#include "kernels/ffn/ffn_hidden_slice_fixed.h"
#include "kernels/ffn/ffn_hidden_slice_plan.h"
#include "kernels/ffn/ffn_stream_plan.h"
#include "kernels/layernorm_linear/ln_linear_stream_plan.h"
#include "kernels/level_table.h"

namespace fl {
namespace {

struct Gpu {
  const char* name;
  int sms, smem_optin;
};

// SM counts and the opt-in shared memory per block of each compute capability.
const Gpu kGpus[] = {{"H100 sm_90", 132, 232448},    {"A100 sm_80", 108, 166912},
                     {"RTX 3090 sm_86", 82, 101376}, {"RTX 4090 sm_89", 128, 101376},
                     {"V100 sm_70", 80, 98304},      {"T4-sized", 40, 65536}};

void check_ffn(const FfnPlan& p, const Gpu& g, int64_t m, int64_t c, int e) {
  EXPECT_LE(p.blocks, g.sms);
  EXPECT_GE(16 * p.mtc, m);
  EXPECT_LE(p.nt, kFfnUpMaxNT);
  // Up slices: [8 nt b, 8 nt (b + 1)) for b < blocks cover the 4C hidden units once (the last
  // group's spare blocks, past 4C, take none); every group has some.
  EXPECT_EQ(p.blocks, p.groups * p.spg);
  EXPECT_GE(int64_t(p.blocks) * 8 * p.nt, 4 * c);
  EXPECT_LT(int64_t(p.groups - 1) * p.spg * 8 * p.nt, 4 * c);
  EXPECT_EQ(p.kw, p.spg * 8 * p.nt);
  // Column ranges cover C once, each a block of every group (range b % spg of group b / spg).
  EXPECT_EQ(p.nw % 8, 0);
  EXPECT_LE(p.nw / 8, kFfnDownMaxNT);
  EXPECT_GE(int64_t(p.ranges) * p.nw, c);
  EXPECT_LT(int64_t(p.ranges - 1) * p.nw, c);
  EXPECT_LE(p.ranges, p.spg);
  EXPECT_LE(p.groups, kFfnMaxGroups);
  EXPECT_LE(p.spg, kFfnMaxGroups);
  EXPECT_TRUE(p.warps == 8 || p.warps == 16);
  // Every hidden unit lands in exactly one group's K range.
  std::set<int> units;
  for (int b = 0; b < p.blocks; ++b) {
    const int group = b / p.spg;
    for (int j = b * 8 * p.nt; j < (b + 1) * 8 * p.nt && j < 4 * c; ++j) {
      EXPECT_TRUE(units.insert(j).second);
      EXPECT_GE(j, group * p.kw);
      EXPECT_LT(j, (group + 1) * p.kw);
    }
  }
  EXPECT_EQ(int64_t(units.size()), 4 * c);
  // Shared memory: the regions apart, in 16-byte steps, within the limit with the static 64.
  const size_t w2 = size_t(e) * p.kwk * p.ld_w2, down = size_t(e) * 16 * p.mtc * p.ld_h;
  const size_t up_end = p.off_w1 + size_t(e) * p.ck * p.ld_w1;
  if (p.w2_late) {
    EXPECT_EQ(p.off_x, 0u);
    EXPECT_GE(p.off_w2, down);
    EXPECT_LE(p.off_w2 + w2, p.off_bias);
  } else {
    EXPECT_GE(p.off_x, w2);
    EXPECT_LE(p.off_x + down, p.off_bias);
  }
  EXPECT_LE(up_end, p.off_bias);
  EXPECT_LE(p.off_x + slice::red_bytes(std::max(p.nt, p.nw / 8), p.warps), p.off_bias);
  for (size_t off : {p.off_w2, p.off_x, p.off_w1, p.off_bias}) EXPECT_EQ(off % 16, 0u);
  EXPECT_LE(p.smem + 64, size_t(g.smem_optin));
}

TEST(StreamPlan, FfnCutsEveryHiddenUnitAndColumnOnceWithinEachGpu) {
  for (const Gpu& g : kGpus) {
    for (int e : {2, 4}) {
      for (int64_t m : {1, 7, 16, 33, 64}) {
        for (int64_t c : {40, 97, 255, 768, 1025}) {
          SCOPED_TRACE(std::string(g.name) + " bytes " + std::to_string(e) + " tokens " +
                       std::to_string(m) + " C " + std::to_string(c));
          for (int groups : {0, 1, 2, 4, 8}) {
            for (int warps : {8, 16}) {
              FfnPlan p;
              if (ffn_choose_plan(m, c, e, g.sms, g.smem_optin, &p, groups, 0, warps)) {
                check_ffn(p, g, m, c, e);
              }
            }
          }
        }
      }
    }
  }
}

TEST(StreamPlan, FfnPlansGpt2SmallWhereTheWeightsFitOnChip) {
  FfnPlan p;
  // H100: bf16 at 1-64 tokens (up to 16 tokens 24 hidden units a block on 128 blocks, 8 groups
  // x 16 ranges of 48 columns, 8 warps; from 17 32 units on 96 blocks, 8 groups x 12 ranges of
  // 64, 16 warps), fp32 up to 32.
  for (int64_t m : {1, 16, 64}) EXPECT_TRUE(ffn_choose_plan(m, 768, 2, 132, 232448, &p)) << m;
  ASSERT_TRUE(ffn_choose_plan(16, 768, 2, 132, 232448, &p));
  EXPECT_EQ(p.blocks, 128);
  EXPECT_EQ(p.groups, 8);
  EXPECT_EQ(p.ranges, 16);
  EXPECT_EQ(p.warps, 8);
  ASSERT_TRUE(ffn_choose_plan(64, 768, 2, 132, 232448, &p));
  EXPECT_EQ(p.blocks, 96);
  EXPECT_EQ(p.groups, 8);
  EXPECT_EQ(p.ranges, 12);
  EXPECT_EQ(p.warps, 16);
  // One group where it fits: every block reads all of h, 96 ranges of 8 columns.
  ASSERT_TRUE(ffn_choose_plan(1, 768, 2, 132, 232448, &p, 1));
  EXPECT_EQ(p.groups, 1);
  EXPECT_EQ(p.ranges, 96);
  EXPECT_FALSE(p.w2_late);
  EXPECT_TRUE(ffn_choose_plan(16, 768, 4, 132, 232448, &p));
  EXPECT_TRUE(ffn_choose_plan(32, 768, 4, 132, 232448, &p));
  EXPECT_FALSE(ffn_choose_plan(64, 768, 4, 132, 232448, &p));
  // A100 bf16 up to 16 tokens; an RTX card at 1 token, W2 asked for after the up job.
  EXPECT_TRUE(ffn_choose_plan(16, 768, 2, 108, 166912, &p));
  ASSERT_TRUE(ffn_choose_plan(1, 768, 2, 82, 101376, &p));
  EXPECT_TRUE(p.w2_late);
}

void check_slice(const FfnSlicePlan& p, const Gpu& g, int64_t m, int64_t c, int e) {
  EXPECT_LE(p.blocks, g.sms);  // the blocks wait for each other at the barrier
  // W2's prefetching blocks take the SMs left, one each: the ring form's; elsewhere a tuning.
  EXPECT_EQ(p.prefetch_blocks, p.x_ring ? g.sms - p.blocks : 0);
  EXPECT_EQ(p.blocks + ffn_slice_prefetch_blocks(p, g.sms), g.sms);
  EXPECT_GE(16 * p.mtc, m);
  EXPECT_LT(16 * (p.mtc - 1), m);
  EXPECT_EQ(p.units % 8, 0);
  EXPECT_LE(p.units, kSliceMaxUnits);
  // Hidden units [units b, units (b + 1)) for b < blocks: each of the 4C exactly once.
  EXPECT_GE(int64_t(p.blocks) * p.units, 4 * c);
  EXPECT_LT(int64_t(p.blocks - 1) * p.units, 4 * c);
  // y's 8-column tiles: every column of C in one, the tiles spread over the blocks.
  EXPECT_GE(p.cp, c);
  EXPECT_EQ(p.cp % kSliceTileCols, 0);
  // Shared memory: x and W1 (and, late, W2; and the partial sums) inside the region before h;
  // W2 before it otherwise; h, then b1; 16-byte steps, within the limit with the static 64.
  const size_t w2 = size_t(e) * p.kp * p.ld_w2;
  if (p.x_ring) {
    // The ring form: bf16, at most 32 units (a warp's tiles in one accumulator set), 2-4 slots
    // of x's 16 mtc rows and W1's rows of ring_k of K between W2's rows and h; the chunks cover
    // K (padded to the k step).
    EXPECT_EQ(e, 2);
    EXPECT_LE(p.units, 32);
    EXPECT_FALSE(p.w2_during_up);
    EXPECT_GE(p.ring_stages, 2);
    EXPECT_LE(p.ring_stages, kSliceRingMaxStages);
    EXPECT_EQ(p.ring_k % 16, 0);
    EXPECT_GE(int64_t(p.ring_chunks) * p.ring_k, p.ck);
    EXPECT_LT(int64_t(p.ring_chunks - 1) * p.ring_k, p.ck);
    EXPECT_GE(p.ld_xr, p.ring_k);
    EXPECT_EQ(p.ring_x_bytes, size_t(e) * 16 * p.mtc * p.ld_xr);
    EXPECT_EQ(p.ring_stage_bytes % 16, 0u);
    EXPECT_EQ(p.off_w2, 0u);
    EXPECT_GE(p.off_x, w2);
    EXPECT_LE(p.off_x + p.ring_stages * p.ring_stage_bytes, p.off_h);
    if (p.ring_w1) {  // W1 resident (to the last chunk's end), W2's rows late over it
      EXPECT_TRUE(p.w2_late);
      EXPECT_TRUE(p.ring_w2_after);
      EXPECT_EQ(p.ring_stage_bytes, p.ring_x_bytes);
      EXPECT_EQ(p.off_w1, 0u);
      EXPECT_GE(p.off_x, size_t(e) * p.ring_chunks * p.ring_k * p.ld_w1);
    } else {  // W1's rows in the slots after x's, W2's rows resident
      EXPECT_FALSE(p.w2_late);
      EXPECT_EQ(p.ring_stage_bytes, p.ring_x_bytes + size_t(e) * p.ring_k * p.ld_w1);
      EXPECT_EQ(p.off_w1, p.off_x + p.ring_x_bytes);
    }
  } else {
    const size_t up_end = p.off_w1 + size_t(e) * p.ck * p.ld_w1;
    EXPECT_LE(up_end, p.off_h);
  }
  if (p.x_rows > 0) {  // fp32's exact rows: the products' rows (a power of 2 >= m), W2 late
    EXPECT_EQ(e, 4);
    EXPECT_LE(m, kSliceFasterTo);  // beyond 8 tokens in passes of 8 rows
    EXPECT_GE(p.x_rows, std::min<int64_t>(m, kSliceRowsTo));
    EXPECT_LT(p.x_rows, 2 * std::min<int64_t>(m, kSliceRowsTo));
    EXPECT_LE(p.x_rows, kSliceRowsTo);
    EXPECT_EQ(p.x_rows & (p.x_rows - 1), 0);
    EXPECT_TRUE(p.w2_late);
    EXPECT_FALSE(p.x_ring);
    EXPECT_EQ(p.off_w1, p.off_x + size_t(e) * p.x_rows * p.ld_x);
    EXPECT_GE(p.ld_w1, p.units);
    EXPECT_EQ(p.ld_w1 % 4, 0);
  }
  EXPECT_TRUE(p.warps == 8 || (p.warps == 16 && e == 2)) << p.warps;
  EXPECT_LE(p.off_red + slice::red_bytes(p.units / 8, p.warps), p.off_h);
  EXPECT_LE(p.off_red + 16 * size_t(32 * p.warps), p.off_h);
  if (!p.w2_during_up && !p.ring_w1) EXPECT_EQ(p.off_red, p.off_x);
  if (p.ring_w1) EXPECT_EQ(p.off_red, 0u);  // over W1 (the ring form has no partial sums)
  // The shares: bf16 in bf16 from 9 tokens and with 16 warps, fp32 otherwise.
  EXPECT_EQ(p.share_bytes, e == 2 && (m >= kSliceBf16SharesFrom || p.warps == 16) ? 2 : 4);
  if (p.x_ring) {
    EXPECT_FALSE(p.w2_pad_over_x);
  } else if (p.w2_late) {
    EXPECT_EQ(p.off_w2, p.off_x);
    EXPECT_LE(p.off_w2 + w2, p.off_h);
    EXPECT_FALSE(p.w2_pad_over_x);
    if (p.w2_during_up) {  // the partial sums after W2's rows, within the region before h
      EXPECT_TRUE(e == 2 && p.units == 32 && p.warps == 8);
      EXPECT_GE(p.off_red, p.off_w2 + w2);
      EXPECT_LE(p.off_red + slice::red_bytes(p.units / 8, p.warps), p.off_h);
      EXPECT_EQ(p.off_red % 16, 0u);
    }
  } else if (p.w2_pad_over_x) {
    // W2's rows of the slice before x; its zero rows (to the k step) within x's and W1's region.
    EXPECT_GT(p.kp, p.units);
    EXPECT_EQ(p.off_w2, 0u);
    EXPECT_EQ(p.off_x, size_t(e) * p.units * p.ld_w2);
    EXPECT_LE(p.off_w2 + w2, p.off_h);
  } else {
    EXPECT_EQ(p.off_w2, 0u);
    EXPECT_GE(p.off_x, w2);
  }
  EXPECT_LE(p.off_h + size_t(e) * 16 * p.mtc * p.ld_h, p.off_bias);
  for (size_t off : {p.off_w2, p.off_x, p.off_w1, p.off_h, p.off_bias}) EXPECT_EQ(off % 16, 0u);
  EXPECT_LE(p.smem + 64, size_t(g.smem_optin));
  EXPECT_GE(ffn_slice_scratch_bytes_for(p), 256 + 4 * size_t(m) * p.cp * p.blocks);
}

TEST(StreamPlan, HiddenSliceCutsEveryHiddenUnitOnceWithinEachGpu) {
  for (const Gpu& g : kGpus) {
    for (int e : {2, 4}) {
      for (int64_t m : {1, 2, 7, 16, 33, 64}) {
        for (int64_t c : {40, 97, 255, 768, 1025}) {
          SCOPED_TRACE(std::string(g.name) + " bytes " + std::to_string(e) + " tokens " +
                       std::to_string(m) + " C " + std::to_string(c));
          for (int warps : {0, 8, 16}) {
            FfnSlicePlan p;
            const bool ok =
                ffn_slice_choose_plan(m, c, e, g.sms, g.smem_optin, &p, 0, false, warps);
            if (warps == 16 && e == 4) {
              EXPECT_FALSE(ok);  // 16 warps: bf16 only
            }
            if (ok) check_slice(p, g, m, c, e);
          }
        }
      }
    }
  }
}

TEST(StreamPlan, HiddenSlicePlansGpt2SmallWhereBothSlicesFit) {
  FfnSlicePlan p;
  // H100: bf16 at 1-64 tokens, 32 hidden units a block on 96 blocks (64-byte rows of W1; 24
  // units would fill 128 SMs), both slices at once; fp32 keeps the fewest units, 24.
  // 8 warps up to 48 tokens, 16 from 49; fp32 shares up to 8 tokens, bf16 from 9.
  for (int64_t m : {1, 8, 9, 16, 48, 49, 64}) {
    ASSERT_TRUE(ffn_slice_choose_plan(m, 768, 2, 132, 232448, &p)) << m;
    EXPECT_EQ(p.units, 32);
    EXPECT_EQ(p.blocks, 96);
    EXPECT_FALSE(p.w2_late) << m;
    EXPECT_EQ(p.warps, m >= 49 ? 16 : 8) << m;
    EXPECT_EQ(p.share_bytes, m >= 9 ? 2 : 4) << m;
  }
  ASSERT_TRUE(ffn_slice_choose_plan(1, 768, 4, 132, 232448, &p));
  EXPECT_EQ(p.units, 24);
  EXPECT_EQ(p.warps, 8);  // fp32: 8 warps (the 16-warp form is bf16 only)
  EXPECT_FALSE(ffn_slice_choose_plan(1, 768, 4, 132, 232448, &p, 0, false, 16));
  EXPECT_FALSE(ffn_slice_choose_plan(1, 768, 2, 132, 232448, &p, 0, false, 12));
  // Where rounding up to 32 would leave too many SMs idle (C = 96: 384 units), the fewest.
  ASSERT_TRUE(ffn_slice_choose_plan(1, 96, 2, 132, 232448, &p));
  EXPECT_EQ(p.units, 8);
  // fp32 in 99 KiB (an RTX card on 132 SMs): x's exact rows (1, 2, 4 or 8; from 9 tokens two
  // passes of 8, the 16-row tiles' x being 49 KB) and W1's rows unpadded, W2 late over them, at
  // 1-16 tokens; nothing at 17.
  for (int64_t m : {1, 2, 3, 5, 8, 9, 16}) {
    ASSERT_TRUE(ffn_slice_choose_plan(m, 768, 4, 132, 101376, &p)) << m;
    check_slice(p, {"RTX", 132, 101376}, m, 768, 4);
    EXPECT_EQ(p.x_rows, m == 1 ? 1 : m == 2 ? 2 : m == 3 ? 4 : 8) << m;
    EXPECT_EQ(p.ld_w1, 24);
    EXPECT_TRUE(p.w2_late);
    EXPECT_EQ(p.units, 24);
  }
  EXPECT_FALSE(ffn_slice_choose_plan(17, 768, 4, 132, 101376, &p));
  // ... where the 16-row form fits, it (the H100's and an A100's plans have no exact rows).
  ASSERT_TRUE(ffn_slice_choose_plan(1, 768, 4, 132, 166912, &p));
  EXPECT_EQ(p.x_rows, 0);
  // fp32 on an H100: both slices at once up to 16 tokens, W2 late at 17-32, nothing beyond.
  ASSERT_TRUE(ffn_slice_choose_plan(16, 768, 4, 132, 232448, &p));
  EXPECT_FALSE(p.w2_late);
  ASSERT_TRUE(ffn_slice_choose_plan(17, 768, 4, 132, 232448, &p));
  EXPECT_TRUE(p.w2_late);
  EXPECT_FALSE(ffn_slice_choose_plan(33, 768, 4, 132, 232448, &p));
  // An RTX card (99 KB a block): bf16 up to 16 tokens; on 82 SMs (40 units a block) W2 after
  // the up product; on 128 32 units, W2 under the up product, and 24 units with W2 late to 32.
  ASSERT_TRUE(ffn_slice_choose_plan(16, 768, 2, 82, 101376, &p));
  EXPECT_TRUE(p.w2_late);
  EXPECT_FALSE(ffn_slice_choose_plan(17, 768, 2, 82, 101376, &p));
  ASSERT_TRUE(ffn_slice_choose_plan(16, 768, 2, 128, 101376, &p));
  EXPECT_TRUE(p.w2_late);
  EXPECT_TRUE(p.w2_during_up);
  EXPECT_EQ(p.units, 32);
  ASSERT_TRUE(ffn_slice_choose_plan(32, 768, 2, 128, 101376, &p));
  EXPECT_TRUE(p.w2_late);
  EXPECT_FALSE(p.w2_during_up);  // 24 units
  // 24 units asked for on 132 SMs: both at once with W2's zero rows over x (measured beside 32).
  ASSERT_TRUE(ffn_slice_choose_plan(1, 768, 2, 132, 101376, &p, 24));
  EXPECT_FALSE(p.w2_late);
  EXPECT_TRUE(p.w2_pad_over_x);
  // Units a block given: no fewer than one block per SM allows, a multiple of 8.
  EXPECT_TRUE(ffn_slice_choose_plan(1, 768, 2, 132, 232448, &p, 32));
  EXPECT_EQ(p.blocks, 96);
  EXPECT_FALSE(ffn_slice_choose_plan(1, 768, 2, 132, 232448, &p, 16));
  EXPECT_FALSE(ffn_slice_choose_plan(1, 768, 2, 132, 232448, &p, 28));
}

// At 64 bf16 tokens in an RTX 30/40 card's 99 KiB a block (as `bench --choose-as 8.6` plans on
// 132 SMs, and an RTX 4090's 128): x's 64 rows (96 KB with padding) leave no resident form
// inside the limit, W2 early or late, 8 or 16 warps; the ring form fits with 3 slots of 64 of K
// (12 chunks), 32 units a block, W2's rows resident; 17-32 tokens keep their resident plans.
TEST(StreamPlan, HiddenSliceRingFitsAnRtxCardAt64Tokens) {
  for (int sms : {132, 128}) {
    SCOPED_TRACE(std::to_string(sms) + " SMs");
    for (int warps : {8, 16}) {
      for (bool late : {false, true}) {
        const FfnSlicePlan r = ffn_slice_plan_for(64, 768, 2, 32, late, warps);
        EXPECT_GT(r.smem + 64, 101376u) << warps << " warps, late " << late;
      }
    }
    FfnSlicePlan p;
    ASSERT_TRUE(ffn_slice_choose_plan(64, 768, 2, sms, 101376, &p));
    check_slice(p, {"RTX", sms, 101376}, 64, 768, 2);
    EXPECT_TRUE(p.x_ring);
    EXPECT_TRUE(p.ring_w1);  // W1 resident (60 KB), W2's rows over it after the up product
    EXPECT_EQ(p.units, 32);
    EXPECT_EQ(p.blocks, 96);
    EXPECT_EQ(p.warps, 16);
    EXPECT_EQ(p.ring_stages, 3);
    EXPECT_EQ(p.ring_chunks, 12);
    EXPECT_EQ(p.share_bytes, 2);
    EXPECT_FALSE(p.ring_stagger);  // every block in K's order (staggered measured slower)
    // K split among warps; its parts (16 warps x 16 rows x 32 columns of fp32: 32 KB) meet over
    // W1's columns, before the slots.
    EXPECT_TRUE(p.ring_split);
    EXPECT_EQ(p.off_red, 0u);
    EXPECT_LE(slice::red_bytes(p.units / 8, p.warps), p.off_x);
    EXPECT_LE(p.smem + 64, 101376u);
    // W1's rows in the slots instead (W2's rows resident): 3 slots of 14 KB.
    ASSERT_TRUE(ffn_slice_choose_plan(64, 768, 2, sms, 101376, &p, 0, false, 0, true, 0, true));
    check_slice(p, {"RTX", sms, 101376}, 64, 768, 2);
    EXPECT_FALSE(p.ring_w1);
    EXPECT_EQ(p.ring_stages, 3);
    ASSERT_TRUE(ffn_slice_choose_plan(32, 768, 2, sms, 101376, &p));
    EXPECT_FALSE(p.x_ring);
    // Asked for, the ring also plans where the resident forms fit (8 warps, 2 slots).
    ASSERT_TRUE(ffn_slice_choose_plan(16, 768, 2, sms, 101376, &p, 0, false, 8, true, 2));
    EXPECT_TRUE(p.x_ring);
    EXPECT_EQ(p.ring_stages, 2);
    EXPECT_EQ(p.warps, 8);
    // fp32 has no ring form.
    EXPECT_FALSE(ffn_slice_choose_plan(64, 768, 4, sms, 101376, &p));
    EXPECT_FALSE(ffn_slice_choose_plan(16, 768, 4, sms, 232448, &p, 0, false, 8, true));
  }
  // An RTX 3090's 82 SMs need 40 units a block: beyond the ring's 32, so no plan at 64.
  FfnSlicePlan p;
  EXPECT_FALSE(ffn_slice_choose_plan(64, 768, 2, 82, 101376, &p));
}

// The FFN's plans at C = 768 on 132 SMs for the opt-in limits of an RTX 30/40 card (99 KiB a
// block), an A100 (163) and an H100 (227): which fit, with W2 asked for late or not, and the
// hidden slice's units a block and warps.
struct FitCase {
  int kib, e;
  int64_t m;
  bool slice;       // the hidden slice's plan fits
  bool slice_late;  // ... with W2's rows asked for after the up product's operands are in
  int units, warps;
  bool during;        // ... under the up product, its operands in registers (w2_during_up)
  bool stream;        // ffn_stream's plan fits
  bool ring = false;  // the hidden slice's plan is the ring form (x and W1 in K chunks)
};
const FitCase kFits[] = {
    // 99 KiB: bf16 up to 16 tokens, the hidden slice's 32 units a block with W2 asked for
    // under the up product (24 units with both at once and W2's zero rows over x measured
    // slower), ffn_stream's with W2 late; at 64 (x's 64 rows alone are 97 KB) the hidden
    // slice's ring form (W1 resident, W2 late over it), 16 warps, ffn_stream's
    // nowhere; fp32 (W1's and W2's slices 147 KB) at 1-8 tokens with x's exact rows and W1's
    // rows unpadded, W2 late over them (x_rows; two passes of 8 rows from 9), nowhere beyond.
    {99, 2, 1, true, true, 32, 8, true, true},
    {99, 2, 16, true, true, 32, 8, true, true},
    {99, 2, 64, true, true, 32, 16, false, false, true},
    {99, 4, 1, true, true, 24, 8, false, false},
    {99, 4, 8, true, true, 24, 8, false, false},
    {99, 4, 16, true, true, 24, 8, false, false},
    {99, 4, 64, false, false, 0, 0, false, false},
    // 163 KiB: bf16 at every count (W2 late at 64, 16 warps: too many k steps a warp to hold
    // in registers), fp32 up to 16 with W2 late.
    {163, 2, 1, true, false, 32, 8, false, true},
    {163, 2, 16, true, false, 32, 8, false, true},
    {163, 2, 64, true, true, 32, 16, false, true},
    {163, 4, 1, true, true, 24, 8, false, true},
    {163, 4, 16, true, true, 24, 8, false, true},
    {163, 4, 64, false, false, 0, 0, false, false},
    // 227 KiB: both slices at once.
    {227, 2, 1, true, false, 32, 8, false, true},
    {227, 2, 16, true, false, 32, 8, false, true},
    {227, 2, 64, true, false, 32, 16, false, true},
    {227, 4, 1, true, false, 24, 8, false, true},
    {227, 4, 16, true, false, 24, 8, false, true},
    {227, 4, 64, false, false, 0, 0, false, false},
};

// The sum of y by groups (ffn_hidden_slice_groups.cuh) needs bf16 shares, 8 or 16 warps, 8 to
// 128 blocks and room for the warps' sums: an RTX card's plans at 16 tokens (resident, W2 under
// the up product: the plan's sum there) and 64 (the ring: a tuning) have it; at 1 token the shares
// are fp32, and fp32 never has it.
TEST(StreamPlan, TheSumByGroupsFitsTheRtxCardsBf16PlansFrom9Tokens) {
  for (int sms : {132, 128}) {
    SCOPED_TRACE(std::to_string(sms) + " SMs");
    FfnSlicePlan p;
    ASSERT_TRUE(ffn_slice_choose_plan(16, 768, 2, sms, 101376, &p));
    EXPECT_TRUE(p.w2_during_up);
    EXPECT_EQ(p.share_bytes, 2);
    EXPECT_TRUE(ffn_slice_groups_fit(p));
    ASSERT_TRUE(ffn_slice_choose_plan(64, 768, 2, sms, 101376, &p));
    EXPECT_TRUE(p.x_ring);
    EXPECT_TRUE(ffn_slice_groups_fit(p));
    ASSERT_TRUE(ffn_slice_choose_plan(1, 768, 2, sms, 101376, &p));
    EXPECT_EQ(p.share_bytes, 4);
    EXPECT_FALSE(ffn_slice_groups_fit(p));
    ASSERT_TRUE(ffn_slice_choose_plan(16, 768, 4, sms, 101376, &p));
    EXPECT_FALSE(ffn_slice_groups_fit(p));
    // Too few blocks for 8 groups.
    ASSERT_TRUE(ffn_slice_choose_plan(16, 768, 2, sms, 101376, &p));
    p.blocks = kSliceGroups - 1;
    EXPECT_FALSE(ffn_slice_groups_fit(p));
  }
}

// h exchanged in groups (ffn_slice_exchange) in an RTX card's ring form: at 33-64 tokens and C =
// 768 groups of 8 (12 shares), the group's h and W2's tile within the room before h's own tile,
// clear of each other, the tile's rows past W1 and the up product's parts asked for with W1;
// groups of 4 where 8 does not fit (C = 896); none where the blocks are not a multiple of 2 or the
// shares are fp32; the scratch holds h past the shares.
TEST(StreamPlan, TheExchangeFitsAnRtxCardsRingForm) {
  for (int64_t m : {33, 47, 64}) {
    SCOPED_TRACE(std::to_string(m) + " tokens");
    FfnSlicePlan p;
    ASSERT_TRUE(ffn_slice_choose_plan(m, 768, 2, 132, 101376, &p));
    ASSERT_TRUE(p.x_ring && p.ring_direct && ffn_slice_ring_direct_fits(p));
    ASSERT_TRUE(ffn_slice_exchange(&p));
    EXPECT_EQ(p.ex_group, 8);
    EXPECT_EQ(p.blocks / p.ex_group, 12);
    const size_t hx = 2 * size_t(16) * p.mtc * p.ld_hx, row = 2 * size_t(p.ld_w2x);
    EXPECT_LE(hx, p.off_w2x);
    EXPECT_LE(p.off_w2x + row * 256, p.off_h);
    EXPECT_EQ(p.off_w2x % 16, 0u);
    const size_t w1 = 2 * size_t(p.ring_chunks) * p.ring_k * p.ld_w1;
    EXPECT_GE(p.off_w2x + row * p.ex_from, w1);
    EXPECT_LT(p.off_w2x + row * (p.ex_from - 1), w1);
    EXPECT_GE(ffn_slice_scratch_bytes_for(p),
              256 + 4 * size_t(m) * p.cp * p.blocks + 2 * size_t(m) * p.h);
  }
  FfnSlicePlan p;
  ASSERT_TRUE(ffn_slice_choose_plan(64, 896, 2, 132, 101376, &p));
  p.ring_direct = ffn_slice_ring_direct_fits(p);
  ASSERT_TRUE(ffn_slice_exchange(&p));
  EXPECT_EQ(p.ex_group, 4);
  ASSERT_TRUE(ffn_slice_choose_plan(64, 200, 2, 132, 232448, &p, 32, false, 16, true));
  p.ring_direct = ffn_slice_ring_direct_fits(p);
  EXPECT_EQ(p.blocks, 25);
  EXPECT_FALSE(ffn_slice_exchange(&p));
  ASSERT_TRUE(ffn_slice_choose_plan(64, 768, 2, 132, 101376, &p));
  p.share_bytes = 4;
  EXPECT_FALSE(ffn_slice_exchange(&p));
  ASSERT_TRUE(ffn_slice_choose_plan(16, 768, 2, 132, 101376, &p));  // the resident form
  EXPECT_FALSE(ffn_slice_exchange(&p));
}

// The fixed kernel's constants (ffn_hidden_slice_fixed.h) are an RTX card's bf16 plan at 9-16
// tokens and C = 768 as the launch makes it (W1 first and the sum by groups, as make_plan sets
// them where W2 comes under the up product) on 132 SMs, field for field; not at 1 or 17 tokens,
// at C = 776 or in fp32.
TEST(StreamPlan, TheFixedKernelIsTheRtxCardsPlanAt9To16Tokens) {
  const auto launch_plan = [](int64_t m, int64_t c, int e, FfnSlicePlan* p) {
    if (!ffn_slice_choose_plan(m, c, e, 132, 101376, p)) return false;
    p->w1_first = kSliceW1First && p->w2_during_up;
    p->group_sum =
        kSliceGroupSum && p->w2_during_up && m <= kSliceFasterTo && ffn_slice_groups_fit(*p);
    return true;
  };
  FfnSlicePlan p;
  for (int m : {9, 12, 16}) {
    ASSERT_TRUE(launch_plan(m, 768, 2, &p));
    EXPECT_TRUE(ffn_slice_fixed_fits(p)) << m << " tokens";
  }
  ASSERT_TRUE(launch_plan(1, 768, 2, &p));
  EXPECT_FALSE(ffn_slice_fixed_fits(p));
  if (launch_plan(17, 768, 2, &p)) EXPECT_FALSE(ffn_slice_fixed_fits(p));
  if (launch_plan(16, 776, 2, &p)) EXPECT_FALSE(ffn_slice_fixed_fits(p));
  if (launch_plan(16, 768, 4, &p)) EXPECT_FALSE(ffn_slice_fixed_fits(p));
}

// The exchange's fixed kernel's constants (ffn_hidden_slice_fixed.h's ffn_slice_fix_rtx64) are an
// RTX card's bf16 plan at 49-64 tokens and C = 768 as make_plan makes it (ring_direct where it
// fits, the exchange on 16 warps) on 132 SMs in 99 KiB, field for field; not at 48 tokens, at
// C = 832 (the exchange too, other constants), with x's loads two batches deep, or in fp32.
TEST(StreamPlan, TheExchangeFixedKernelIsTheRtxCardsPlanAt49To64Tokens) {
  const auto launch_plan = [](int64_t m, int64_t c, int e, FfnSlicePlan* p) {
    if (!ffn_slice_choose_plan(m, c, e, 132, 101376, p)) return false;
    p->ring_direct = p->ring_direct && ffn_slice_ring_direct_fits(*p);
    p->w1_first = kSliceW1First && p->w2_during_up;
    p->group_sum = kSliceGroupSumRing && p->x_ring && ffn_slice_groups_fit(*p);
    if (kSliceExchange && p->warps == 16 && ffn_slice_exchange(p)) p->group_sum = false;
    return true;
  };
  FfnSlicePlan p;
  for (int m : {49, 57, 63, 64}) {
    ASSERT_TRUE(launch_plan(m, 768, 2, &p));
    EXPECT_EQ(p.ex_group, 8) << m << " tokens";
    EXPECT_TRUE(ffn_slice_ex_fixed_fits(p)) << m << " tokens";
    EXPECT_FALSE(ffn_slice_fixed_fits(p)) << m << " tokens";
  }
  ASSERT_TRUE(launch_plan(64, 768, 2, &p));
  p.direct_deep = !p.direct_deep;
  EXPECT_FALSE(ffn_slice_ex_fixed_fits(p));
  if (launch_plan(48, 768, 2, &p)) EXPECT_FALSE(ffn_slice_ex_fixed_fits(p));
  if (launch_plan(16, 768, 2, &p)) EXPECT_FALSE(ffn_slice_ex_fixed_fits(p));
  if (launch_plan(64, 832, 2, &p)) EXPECT_FALSE(ffn_slice_ex_fixed_fits(p));
  if (launch_plan(64, 576, 2, &p)) EXPECT_FALSE(ffn_slice_ex_fixed_fits(p));
  if (launch_plan(64, 768, 4, &p)) EXPECT_FALSE(ffn_slice_ex_fixed_fits(p));
}

TEST(StreamPlan, FfnPlansSizeThemselvesToEachGpusSharedMemory) {
  for (const FitCase& f : kFits) {
    SCOPED_TRACE(std::to_string(f.kib) + " KiB, " + std::to_string(f.e) + " bytes, " +
                 std::to_string(f.m) + " tokens");
    const Gpu g{"132 SMs", 132, f.kib * 1024};
    FfnSlicePlan s;
    ASSERT_EQ(ffn_slice_choose_plan(f.m, 768, f.e, g.sms, g.smem_optin, &s), f.slice);
    if (f.slice) {
      check_slice(s, g, f.m, 768, f.e);
      EXPECT_EQ(s.w2_late, f.slice_late);
      EXPECT_EQ(s.units, f.units);
      EXPECT_EQ(s.warps, f.warps);
      EXPECT_EQ(s.w2_during_up, f.during);
      EXPECT_FALSE(s.w2_pad_over_x);
      EXPECT_EQ(s.x_ring, f.ring);
    }
    FfnPlan p;
    ASSERT_EQ(ffn_choose_plan(f.m, 768, f.e, g.sms, g.smem_optin, &p), f.stream);
    if (f.stream) check_ffn(p, g, f.m, 768, f.e);
  }
}

// The variant choice (the lesson panel's, and the level table's at launch) asks the same plans:
// a GPU that chooses as compute capability 8.6 (the portable kernels preferred) with 99, 163 or
// 227 KiB a block takes the hidden slice where its plan fits (it is first in the table),
// ffn_stream where only that one's fits, else the split kernel; a variant whose plan does not
// fit says so.
TEST(StreamPlan, TheFfnVariantChoiceAsksThePlansWhetherTheyFit) {
  const Lesson* ffn = find_lesson("ffn");
  ASSERT_NE(ffn, nullptr);
  for (const FitCase& f : kFits) {
    const Precision p = f.e == 2 ? Precision::bf16 : Precision::fp32;
    SCOPED_TRACE(std::to_string(f.kib) + " KiB, " + to_string(p) + ", " + std::to_string(f.m) +
                 " tokens");
    const GpuFacts gpu{8, 6, 132, false, f.kib * 1024};
    const VariantChoice c = ffn->choose_variant(2, 0, {f.m, 0}, p, gpu);
    const char* want = f.slice ? "ffn_hidden_slice" : f.stream ? "ffn_stream" : "ffn_split";
    EXPECT_EQ(c.name, want) << c.reason;
    const Where where{{f.m, 768, f.e}, p, gpu};
    for (const VariantInfo& v : ffn->info().levels[2].variants) {
      if (v.name != "ffn_hidden_slice" && v.name != "ffn_stream") continue;
      const bool fits = v.name == "ffn_stream" ? f.stream : f.slice;
      if (!v.range.precisions.empty() && f.e == 4) continue;  // the bf16-only row
      EXPECT_EQ(variant_cannot_run(v, where),
                fits ? std::string()
                     : "its plan does not fit one block an SM in " + std::to_string(f.kib) +
                           " KiB of shared memory a block at " + std::to_string(f.m) + " x 768")
          << v.name;
    }
    EXPECT_EQ(shared_plan_cannot_fit("ffn_hidden_slice", where).empty(), f.slice);
    EXPECT_EQ(shared_plan_cannot_fit("ffn_stream", where).empty(), f.stream);
  }
  // Without a limit of its own the GPU's compute capability gives it: 99 KiB on sm_86, where
  // 64 bf16 tokens take the hidden slice's ring form and 64 fp32 tokens the split kernel.
  const VariantChoice rtx = ffn->choose_variant(2, 0, {64, 0}, Precision::bf16, {8, 6, 132, false});
  EXPECT_EQ(rtx.name, "ffn_hidden_slice") << rtx.reason;
  const VariantChoice rtx32 =
      ffn->choose_variant(2, 0, {64, 0}, Precision::fp32, {8, 6, 132, false});
  EXPECT_EQ(rtx32.name, "ffn_split") << rtx32.reason;
  // An unknown GPU (no SMs: the replay-only build without a recording's device) is not refused.
  EXPECT_EQ(shared_plan_cannot_fit("ffn_hidden_slice", Where{{64, 768, 4}, Precision::fp32, {}}),
            "");
}

TEST(StreamPlan, LayerNormLinearCutsEveryOutputOnceWithinEachGpu) {
  for (const Gpu& g : kGpus) {
    for (int e : {2, 4}) {
      for (int64_t m : {1, 9, 64, 200, 256}) {
        for (int64_t c : {97, 768, 1023}) {
          SCOPED_TRACE(std::string(g.name) + " bytes " + std::to_string(e) + " tokens " +
                       std::to_string(m) + " C " + std::to_string(c));
          const int64_t n = 3 * c;
          LnPlan p;
          if (!ln_choose_plan(m, c, n, e, g.sms, g.smem_optin, &p)) continue;
          const int chunks = int((m + 16 * p.mtc - 1) / (16 * p.mtc));
          EXPECT_EQ(p.blocks, p.slices * chunks);
          EXPECT_GE(int64_t(p.slices) * 8 * p.nt, n);
          EXPECT_LT(int64_t(p.slices - 1) * 8 * p.nt, n);
          EXPECT_LE(p.nt, kLnStreamMaxNT);
          EXPECT_GE(p.off_params, p.off_w + size_t(e) * p.ck * p.ld_w);
          EXPECT_GE(p.off_params, slice::red_bytes(p.nt));
          EXPECT_LE(p.smem, size_t(g.smem_optin));
        }
      }
    }
  }
}

TEST(StreamPlan, LayerNormLinearPlansGpt2SmallUpTo256Tokens) {
  LnPlan p;
  for (int e : {2, 4}) {
    for (int64_t m : {1, 16, 64, 256}) {
      EXPECT_TRUE(ln_choose_plan(m, 768, 3 * 768, e, 132, 232448, &p)) << e << " " << m;
      if (e == 2) EXPECT_LE(p.blocks, 132) << m;  // one wave
    }
  }
  // 256 tokens, bf16: 4 chunks of 64 rows x 32 slices of 72 columns.
  ASSERT_TRUE(ln_choose_plan(256, 768, 3 * 768, 2, 132, 232448, &p));
  EXPECT_EQ(p.mtc, 4);
  EXPECT_EQ(p.nt, 9);
  EXPECT_EQ(p.blocks, 128);
}

}  // namespace
}  // namespace fl
