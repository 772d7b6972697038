// attention on the CPU: the double reference (one key gives V itself, equal scores average the
// values, the causal mask hides later keys) and the textbook traffic of every level.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/catalog.h"

namespace fl {
namespace {

const Lesson& lesson() {
  const Lesson* found = find_lesson("attention");
  EXPECT_NE(found, nullptr);
  return *found;
}

// One head of T = 3 keys, d = 2: q = 0 everywhere, so every visible key scores the same and
// query i's output is the mean of v over keys 0..i.
TEST(Attention, ReferenceAveragesTheVisibleValuesWhenScoresTie) {
  const std::vector<double> q(6, 0.0);
  const std::vector<double> k = {1, 2, -3, 4, 5, -6};
  const std::vector<double> v = {1, 10, 3, 30, 8, 80};
  const auto out = lesson().reference({{"q", q}, {"k", k}, {"v", v}, {"dims", {3, 2}}});
  ASSERT_EQ(out.size(), 1u);
  const std::vector<double>& o = out[0].values;
  ASSERT_EQ(o.size(), 6u);
  EXPECT_DOUBLE_EQ(o[0], 1.0);  // query 0 sees key 0 only
  EXPECT_DOUBLE_EQ(o[1], 10.0);
  EXPECT_DOUBLE_EQ(o[2], 2.0);  // keys 0 and 1
  EXPECT_DOUBLE_EQ(o[3], 20.0);
  EXPECT_NEAR(o[4], 4.0, 1e-12);  // keys 0, 1 and 2
  EXPECT_NEAR(o[5], 40.0, 1e-12);
}

// Two keys with scores s0, s1 (scaled by 1/sqrt(d)): the second query's output is the
// softmax-weighted mix; the first query ignores the later key whatever its score.
TEST(Attention, ReferenceWeighsByTheScaledSoftmax) {
  const std::vector<double> q = {0, 0, 0, 0, 1, 2, 3, 4};  // d = 4, T = 2
  const std::vector<double> k = {1, 0, 0, 0, 0, 0, 0, 9};
  const std::vector<double> v = {1, 0, 0, 0, 0, 1, 0, 0};
  const auto out = lesson().reference({{"q", q}, {"k", k}, {"v", v}, {"dims", {2, 4}}});
  const std::vector<double>& o = out[0].values;
  EXPECT_DOUBLE_EQ(o[0], 1.0);
  EXPECT_DOUBLE_EQ(o[1], 0.0);
  const double s0 = 1.0 / 2, s1 = 36.0 / 2;  // q.k / sqrt(4)
  const double p0 = 1 / (1 + std::exp(s1 - s0));
  EXPECT_NEAR(o[4], p0, 1e-15);
  EXPECT_NEAR(o[5], 1 - p0, 1e-12);
}

// 16,384 tokens of 12 heads: one T x T tensor is 16384 x 12 x T elements, one of Q, K, V, O is
// 16384 x 12 x d. Level 0 moves a score tensor 8 times (S written; scale, mask and softmax each
// read and write; P read), level 1 4 times, the flash level never.
TEST(Attention, TextbookTraffic) {
  const int64_t t = 1024, d = 64, b = 2;
  const int64_t score = 16384 * 12 * t * b, qkv = 16384 * 12 * d * b;
  const auto eager = lesson().traffic(0, {t, d}, Precision::bf16);
  const auto fused = lesson().traffic(1, {t, d}, Precision::bf16);
  const auto flash = lesson().traffic(2, {t, d}, Precision::bf16);
  ASSERT_EQ(eager.size(), 5u);
  ASSERT_EQ(fused.size(), 3u);
  ASSERT_EQ(flash.size(), 1u);
  EXPECT_EQ(total_bytes(eager), 8 * score + 4 * qkv);
  EXPECT_EQ(total_bytes(fused), 4 * score + 4 * qkv);
  EXPECT_EQ(total_bytes(flash), 4 * qkv);
  // Causal FLOPs 2 B H T^2 d: what the flash kernel does; each full-square GEMM does as much.
  EXPECT_DOUBLE_EQ(flash[0].flops, 2.0 * 16384 * 12 * t * d);
  EXPECT_DOUBLE_EQ(eager[0].flops, flash[0].flops);
  // The workspace counts Q, K, V, O only: S and P are allocated where they fit.
  EXPECT_EQ(lesson().workspace_bytes({t, d}, Precision::bf16), 4 * qkv + 40);
  // The Hopper level moves and computes what level 2 does: only the kernel differs.
  const auto hopper = lesson().traffic(3, {t, d}, Precision::bf16);
  ASSERT_EQ(hopper.size(), 1u);
  EXPECT_EQ(total_bytes(hopper), total_bytes(flash));
  EXPECT_DOUBLE_EQ(hopper[0].flops, flash[0].flops);
}

// Level 3 runs the wgmma kernel on an sm_90 GPU with a build that has it, in bf16, at d = 64 from
// T = 2K and at d = 128 from T = 512; anywhere else it runs what level 2 runs there, so it is
// never the slower one.
TEST(Attention, HopperLevelRunsItsKernelOnlyWhereItCan) {
  const GpuFacts h100{9, 0, 132, true}, h100_no_wgmma{9, 0, 132, false}, a100{8, 0, 108, true};
  auto chosen = [](int64_t t, int64_t d, Precision p, const GpuFacts& gpu) {
    return lesson().choose_variant(3, 0, {t, d}, p, gpu).name;
  };
  for (const int64_t t : {2048, 16384}) {
    EXPECT_EQ(chosen(t, 64, Precision::bf16, h100), "flash_wgmma");
    EXPECT_EQ(chosen(t, 128, Precision::bf16, h100), "flash_wgmma");
  }
  // At d = 128 the Hopper kernel is ahead from T = 512, below it level 2's kernel runs.
  for (const int64_t t : {512, 1024, 1536}) {
    EXPECT_EQ(chosen(t, 128, Precision::bf16, h100), "flash_wgmma") << t;
  }
  EXPECT_EQ(chosen(511, 128, Precision::bf16, h100), "flash_mma");
  EXPECT_EQ(chosen(1024, 128, Precision::fp32, h100), "flash_mma");
  EXPECT_EQ(chosen(1024, 128, Precision::bf16, h100_no_wgmma), "flash_mma");
  // At d = 64 (and any d below 128) level 2's kernels finish first below 2K: level 3 runs them.
  EXPECT_EQ(chosen(1, 64, Precision::bf16, h100), "flash_mma");
  EXPECT_EQ(chosen(2047, 64, Precision::bf16, h100), "flash_mma_keys128");
  EXPECT_EQ(chosen(1024, 64, Precision::bf16, h100), "flash_mma_keys128");
  EXPECT_EQ(chosen(1024, 96, Precision::bf16, h100), "flash_mma");
  EXPECT_EQ(chosen(1024, 64, Precision::fp32, h100), "flash_fp32_tiles");
  EXPECT_EQ(chosen(1024, 64, Precision::bf16, h100_no_wgmma), "flash_mma_keys128");
  EXPECT_EQ(chosen(1024, 64, Precision::bf16, a100), "flash_mma");
  for (const GpuFacts& gpu : {h100, h100_no_wgmma, a100}) {
    for (const Precision p : {Precision::fp32, Precision::bf16}) {
      for (const int64_t t : {1, 512, 1024, 16384}) {
        for (const int64_t d : {64, 128}) {
          if (gpu.wgmma_build && gpu.cc_major == 9 && p == Precision::bf16 &&
              t >= (d == 128 ? 512 : 2048))
            continue;
          EXPECT_EQ(chosen(t, d, p, gpu), lesson().choose_variant(2, 0, {t, d}, p, gpu).name)
              << t << " " << d << " " << to_string(p) << " " << gpu.cc_major;
        }
      }
    }
  }
}

// Level 2 runs its 128-key tiles on sm_90 in bf16 at d <= 64 from T = 1K (where they were
// measured faster); at 512, at d > 64, in fp32 and on GPUs with less shared memory an SM it runs
// the 64-key kernel.
TEST(Attention, FlashLevelTakesWideKeyTilesWhereTheyPay) {
  const GpuFacts h100{9, 0, 132, true}, a100{8, 0, 108, true}, ada{8, 9, 128, false};
  auto chosen = [](int64_t t, int64_t d, Precision p, const GpuFacts& gpu) {
    return lesson().choose_variant(2, 0, {t, d}, p, gpu).name;
  };
  for (const int64_t t : {1024, 1999, 16384}) {
    EXPECT_EQ(chosen(t, 64, Precision::bf16, h100), "flash_mma_keys128");
    EXPECT_EQ(chosen(t, 40, Precision::bf16, h100), "flash_mma_keys128");
  }
  EXPECT_EQ(chosen(512, 64, Precision::bf16, h100), "flash_mma");
  EXPECT_EQ(chosen(1, 64, Precision::bf16, h100), "flash_mma");
  EXPECT_EQ(chosen(4096, 65, Precision::bf16, h100), "flash_mma");
  EXPECT_EQ(chosen(4096, 128, Precision::bf16, h100), "flash_mma");
  EXPECT_EQ(chosen(4096, 64, Precision::bf16, a100), "flash_mma");
  EXPECT_EQ(chosen(4096, 64, Precision::bf16, ada), "flash_mma");
  const VariantChoice why = lesson().choose_variant(2, 0, {4096, 128}, Precision::bf16, h100);
  EXPECT_NE(why.reason.find("flash_mma"), std::string::npos) << why.reason;
}

// In fp32, level 2 runs the register-tiled kernel on sm_90 at d <= 64 at every length; at
// d > 64 and on GPUs with less shared memory a block the mma-layout kernel.
TEST(Attention, Fp32FlashTakesRegisterTilesWhereTheyFit) {
  const GpuFacts h100{9, 0, 132, true}, a100{8, 0, 108, true}, ada{8, 9, 128, false};
  auto chosen = [](int64_t t, int64_t d, Precision p, const GpuFacts& gpu) {
    return lesson().choose_variant(2, 0, {t, d}, p, gpu).name;
  };
  for (const int64_t t : {1, 512, 1999, 16384}) {
    EXPECT_EQ(chosen(t, 64, Precision::fp32, h100), "flash_fp32_tiles");
    EXPECT_EQ(chosen(t, 5, Precision::fp32, h100), "flash_fp32_tiles");
  }
  EXPECT_EQ(chosen(4096, 65, Precision::fp32, h100), "flash_mma");
  EXPECT_EQ(chosen(4096, 128, Precision::fp32, h100), "flash_mma");
  EXPECT_EQ(chosen(4096, 64, Precision::fp32, a100), "flash_mma");
  EXPECT_EQ(chosen(4096, 64, Precision::fp32, ada), "flash_mma");
}

}  // namespace
}  // namespace fl
