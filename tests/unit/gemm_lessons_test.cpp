// The GEMM lessons' CPU-side pieces (6 layernorm_linear, 7 linear_gelu, 8 ffn): catalog order,
// the references on small-integer inputs (every product and sum exact in double, so the
// expected values are exact), textbook traffic and FLOPs, and the shapes they refuse.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "kernels/catalog.h"

namespace fl {
namespace {

const Lesson& lesson(const std::string& id) {
  const Lesson* found = find_lesson(id);
  EXPECT_NE(found, nullptr) << id << " is not in the catalog";
  if (found == nullptr) std::abort();
  return *found;
}

double gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

TEST(GemmLessons, FollowTheRowWiseLessonsInCurriculumOrder) {
  const auto& all = lessons();
  std::vector<std::string> ids;
  for (const Lesson* l : all) ids.push_back(l->info().id);
  const auto at = [&](const std::string& id) {
    return std::find(ids.begin(), ids.end(), id) - ids.begin();
  };
  EXPECT_EQ(at("layernorm_linear"), at("scale_mask_softmax") + 1);
  EXPECT_EQ(at("linear_gelu"), at("layernorm_linear") + 1);
  EXPECT_EQ(at("ffn"), at("linear_gelu") + 1);
  for (const char* id : {"layernorm_linear", "linear_gelu", "ffn"}) {
    const LessonInfo& info = lesson(id).info();
    EXPECT_EQ(info.size_axis.unit, "tokens") << id;
    EXPECT_EQ(info.size_axis.default_size, 16384) << id;
    EXPECT_EQ(info.size_axis.inner_default, 768) << id;
    EXPECT_EQ(info.precisions.size(), 2u) << id;
    EXPECT_EQ(info.levels.size(), 3u) << id;
  }
}

// x = [[1, 2], [-1, 3]] (2 tokens, C = 2), W (2 x 8) and b small integers: y = x W + b exactly.
TEST(GemmLessons, LinearGeluReferenceIsGeluOfTheExactProduct) {
  const std::vector<double> x = {1, 2, -1, 3};
  std::vector<double> w(2 * 8), b(8);
  for (int c = 0; c < 8; ++c) {
    w[c] = c - 3;      // row 0
    w[8 + c] = 2 - c;  // row 1
    b[c] = (c % 3) - 1;
  }
  const auto y = lesson("linear_gelu").reference({{"x", x}, {"W", w}, {"b", b}});
  ASSERT_EQ(y.size(), 1u);
  ASSERT_EQ(y[0].values.size(), 16u);
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 8; ++c) {
      const double exact = x[r * 2] * w[c] + x[r * 2 + 1] * w[8 + c] + b[c];
      EXPECT_EQ(y[0].values[r * 8 + c], gelu(exact)) << "row " << r << " column " << c;
    }
  }
}

// The FFN is linear_gelu's output times W2 plus b2: C = 1, H = 4.
TEST(GemmLessons, FfnReferenceComposesTwoLinearLayers) {
  const std::vector<double> x = {2, -1, 0};  // 3 tokens
  const std::vector<double> w1 = {1, -2, 3, 0}, b1 = {0, 1, -1, 2};
  const std::vector<double> w2 = {1, 2, -1, 1}, b2 = {5};
  const auto y =
      lesson("ffn").reference({{"x", x}, {"W1", w1}, {"b1", b1}, {"W2", w2}, {"b2", b2}});
  ASSERT_EQ(y[0].values.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    double expected = b2[0];
    for (int j = 0; j < 4; ++j) expected += gelu(x[r] * w1[j] + b1[j]) * w2[j];
    EXPECT_DOUBLE_EQ(y[0].values[r], expected) << "token " << r;
  }
}

// LN of [1, 2, 3] is [-1, 0, 1] * sqrt(3/2) / sqrt(1 + 1.5e-5); with gamma 1, beta 0 and
// W = identity-like (C x 3C), y repeats those values plus the bias.
TEST(GemmLessons, LayerNormLinearReferenceNormalizesThenProjects) {
  const std::vector<double> x = {1, 2, 3, 10, 10, 10};  // 2 tokens, C = 3; the second is flat
  const std::vector<double> gamma = {1, 1, 1}, beta = {0, 0, 0};
  std::vector<double> w(3 * 9, 0.0), b(9);
  for (int j = 0; j < 3; ++j) w[j * 9 + j] = 1;  // columns 0..2 copy the normalized token
  for (int c = 0; c < 9; ++c) b[c] = c;
  const auto y = lesson("layernorm_linear")
                     .reference({{"x", x}, {"gamma", gamma}, {"beta", beta}, {"W", w}, {"b", b}});
  ASSERT_EQ(y[0].values.size(), 18u);
  const double s = 1.0 / std::sqrt(2.0 / 3.0 + 1e-5);  // variance of [1, 2, 3] is 2/3
  EXPECT_NEAR(y[0].values[0], -s + 0, 1e-15);
  EXPECT_NEAR(y[0].values[1], 0 + 1, 1e-15);
  EXPECT_NEAR(y[0].values[2], s + 2, 1e-15);
  for (int c = 3; c < 9; ++c) EXPECT_EQ(y[0].values[c], c) << "only the bias";
  for (int c = 0; c < 9; ++c) EXPECT_EQ(y[0].values[9 + c], c) << "a flat token normalizes to 0";
}

TEST(GemmLessons, TextbookTrafficAndFlopsAtTheDefaultShape) {
  const int64_t m = 16384, c = 768;
  const auto lg = lesson("linear_gelu").traffic(0, {m, c}, Precision::fp32);
  ASSERT_EQ(lg.size(), 3u);
  EXPECT_EQ(lg[0].bytes_read, (m * c + c * 4 * c) * 4);
  EXPECT_EQ(lg[0].bytes_written, m * 4 * c * 4);
  EXPECT_DOUBLE_EQ(lg[0].flops, 2.0 * m * c * 4 * c);
  const auto epi = lesson("linear_gelu").traffic(2, {m, c}, Precision::bf16);
  ASSERT_EQ(epi.size(), 1u);
  EXPECT_EQ(epi[0].bytes_written, m * 4 * c * 2) << "only y is written";
  // The FFN's unfused chain moves the 4C-wide tensor six times; the on-chip kernel never.
  const auto f0 = lesson("ffn").traffic(0, {m, c}, Precision::fp32);
  const auto f2 = lesson("ffn").traffic(2, {m, c}, Precision::fp32);
  ASSERT_EQ(f0.size(), 5u);
  ASSERT_EQ(f2.size(), 1u);
  EXPECT_GT(total_bytes(f0) - total_bytes(f2), 6 * m * 4 * c * 4 - 1);
  double flops0 = 0;
  for (const auto& t : f0) flops0 += t.flops;
  EXPECT_NEAR(f2[0].flops / flops0, 1.0, 1e-9) << "the same arithmetic, fused";
}

TEST(GemmLessons, RefuseShapesTheyCannotHold) {
  std::unique_ptr<Workspace> ws;
  for (const char* id : {"layernorm_linear", "linear_gelu", "ffn"}) {
    const Status too_many = lesson(id).create_workspace({70000, 768}, Precision::fp32, &ws);
    EXPECT_FALSE(too_many.ok()) << id;
    EXPECT_NE(too_many.message().find("65536 tokens"), std::string::npos) << too_many.message();
    const Status too_wide = lesson(id).create_workspace({16, 4096}, Precision::fp32, &ws);
    EXPECT_FALSE(too_wide.ok()) << id;
    EXPECT_NE(too_wide.message().find("2048"), std::string::npos) << too_wide.message();
  }
}

}  // namespace
}  // namespace fl
