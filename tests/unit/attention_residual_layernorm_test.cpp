// attention_residual_layernorm on the CPU: the double reference (a projection of zero leaves
// h = x; values that are one constant per head make the attention output that constant) and the
// textbook traffic of every level.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/catalog.h"

namespace fl {
namespace {

const Lesson& lesson() {
  const Lesson* found = find_lesson("attention_residual_layernorm");
  EXPECT_NE(found, nullptr);
  return *found;
}

// C = 12 (12 heads of d = 1), T = 3, two sequences: x, then the parameters. W_qkv = 0 makes
// q, k, v their biases; W_proj = `proj` (C x C).
std::vector<HostTensor> inputs(const std::vector<double>& b_qkv, const std::vector<double>& proj) {
  const int c = 12, tokens = 6;
  std::vector<double> x(tokens * c);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7 * double(i)) + 0.3;
  return {{"x", x},
          {"ln1_gamma", std::vector<double>(c, 1.0)},
          {"ln1_beta", std::vector<double>(c, 0.0)},
          {"W_qkv", std::vector<double>(c * 3 * c, 0.0)},
          {"b_qkv", b_qkv},
          {"W_proj", proj},
          {"b_proj", std::vector<double>(c, 0.0)},
          {"ln2_gamma", std::vector<double>(c, 2.0)},
          {"ln2_beta", std::vector<double>(c, 0.5)},
          {"dims", {3, 12}}};
}

TEST(AttentionSublayer, ReferenceAddsTheProjectedValuesAndNormalizes) {
  const int c = 12;
  std::vector<double> b_qkv(3 * c);
  for (int i = 0; i < 3 * c; ++i) b_qkv[i] = 0.1 * i - 1.0;  // v of head j is b_qkv[2C + j]
  std::vector<double> identity(c * c, 0.0);
  for (int i = 0; i < c; ++i) identity[i * c + i] = 1.0;
  const std::vector<HostTensor> in = inputs(b_qkv, identity);
  const auto out = lesson().reference(in);
  ASSERT_EQ(out.size(), 2u);
  const std::vector<double>& h = out[0].values;
  const std::vector<double>& y = out[1].values;
  ASSERT_EQ(h.size(), 72u);
  for (int m = 0; m < 6; ++m) {
    double mean = 0, var = 0;
    for (int j = 0; j < c; ++j) {
      // Every key of a head holds the same value, so its softmax mix is that value.
      EXPECT_NEAR(h[m * c + j], in[0].values[m * c + j] + b_qkv[2 * c + j], 1e-12);
      mean += (y[m * c + j] - 0.5) / 2.0 / c;  // back through gamma = 2, beta = 0.5
    }
    for (int j = 0; j < c; ++j) var += std::pow((y[m * c + j] - 0.5) / 2.0 - mean, 2) / c;
    EXPECT_NEAR(mean, 0.0, 1e-12);
    EXPECT_NEAR(var, 1.0, 1e-3);  // 1 less LayerNorm's epsilon over the row's variance
  }
  // A zero projection leaves the residual stream alone.
  const auto zero = lesson().reference(inputs(b_qkv, std::vector<double>(c * c, 0.0)));
  for (int i = 0; i < 72; ++i) EXPECT_DOUBLE_EQ(zero[0].values[i], in[0].values[i]);
}

// 16,384 tokens at C = 768, bf16, T = 512: one tokens x C tensor A = 16384 C b, one T x T tensor
// S = 16384 H T b, the weights 4 C^2 b, the biases, gammas and betas 8 C b in each level.
TEST(AttentionSublayer, TextbookTraffic) {
  const int64_t t = 512, c = 768, b = 2;
  const int64_t a = 16384 * c * b, s = 16384 * 12 * t * b, weights = 4 * c * c * b;
  const auto eager = lesson().traffic(0, {t, c}, Precision::bf16);
  const auto epilogues = lesson().traffic(1, {t, c}, Precision::bf16);
  const auto fused = lesson().traffic(2, {t, c}, Precision::bf16);
  ASSERT_EQ(eager.size(), 14u);
  ASSERT_EQ(epilogues.size(), 10u);
  ASSERT_EQ(fused.size(), 4u);
  // Eager: S crosses HBM 8 times (as lesson 9's level 0); the activations 33 times (qkv and
  // its product are 3 A each).
  EXPECT_EQ(total_bytes(eager), 8 * s + 33 * a + weights + 8 * c * b);
  EXPECT_EQ(total_bytes(epilogues), 4 * s + 25 * a + weights + 8 * c * b);
  // Fused: x read, qkv written and read, a written and read, r written and read, x again, h
  // and y written.
  EXPECT_EQ(total_bytes(fused), 14 * a + weights + 8 * c * b);
  // The attention core's FLOPs: 2 B H T^2 d = 2 (16384) T C, for each full-square GEMM and for
  // the flash kernel's two causal halves.
  EXPECT_EQ(fused[1].kernel, "flash_attention");
  EXPECT_DOUBLE_EQ(fused[1].flops, 2.0 * 16384 * t * c);
  EXPECT_EQ(eager[4].kernel, "qk_gemm");
  EXPECT_DOUBLE_EQ(eager[4].flops, fused[1].flops);
  // The Linear layers: 2 M N K each, the same at every level.
  EXPECT_DOUBLE_EQ(eager[1].flops, 2.0 * 16384 * 3 * c * c);
  EXPECT_DOUBLE_EQ(fused[2].flops, 2.0 * 16384 * c * c + 16384.0 * c);
}

// Refused before any device work: a hidden size that 12 heads do not divide, a length of 0.
TEST(AttentionSublayer, BadShapesAreRefusedWithAMessage) {
  std::unique_ptr<Workspace> ws;
  const Status odd = lesson().create_workspace({16, 100}, Precision::fp32, &ws);
  EXPECT_FALSE(odd.ok());
  EXPECT_NE(odd.message().find("multiple of 12"), std::string::npos) << odd.message();
  const Status empty = lesson().create_workspace({0, 768}, Precision::fp32, &ws);
  EXPECT_FALSE(empty.ok());
  EXPECT_NE(empty.message().find("sequence length T from 1"), std::string::npos);
  EXPECT_EQ(ws, nullptr);
}

}  // namespace
}  // namespace fl
