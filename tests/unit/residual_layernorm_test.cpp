// residual_layernorm (lesson 4) on the CPU: the double reference at known values, the traffic
// model of every level, the size axis, and odd row lengths.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "kernels/catalog.h"

namespace fl {
namespace {

const Lesson& lesson() {
  const Lesson* found = find_lesson("residual_layernorm");
  EXPECT_NE(found, nullptr) << "residual_layernorm is not in the catalog";
  return *found;
}

// Inputs in the order download() gives them: x, r (rows x C), gamma, beta (C).
std::vector<HostTensor> inputs(std::vector<double> x, std::vector<double> r,
                               std::vector<double> gamma, std::vector<double> beta) {
  return {{"x", std::move(x)},
          {"r", std::move(r)},
          {"gamma", std::move(gamma)},
          {"beta", std::move(beta)}};
}

constexpr double kEps = 1e-5;

TEST(ResidualLayerNorm, ReferenceAtKnownValues) {
  // Two rows of C = 4. Row 0: h = (1, 2, 3, 4), mean 2.5, biased variance 1.25.
  // Row 1: h = x + r = (2, 2, 2, 2) + (0, 0, 0, 4) = (2, 2, 2, 6), mean 3, variance 3.
  const auto out = lesson().reference(inputs({1, 2, 3, 4, 2, 2, 2, 2},  //
                                             {0, 0, 0, 0, 0, 0, 0, 4},  //
                                             {1, 1, 2, 2}, {0, 0, 0.5, -0.5}));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].name, "y");
  EXPECT_EQ(out[1].name, "h");
  const auto& y = out[0].values;
  const auto& h = out[1].values;
  ASSERT_EQ(y.size(), 8u);
  ASSERT_EQ(h.size(), 8u);
  EXPECT_DOUBLE_EQ(h[5], 2.0);
  EXPECT_DOUBLE_EQ(h[7], 6.0);
  const double s0 = 1.0 / std::sqrt(1.25 + kEps);
  EXPECT_NEAR(y[0], -1.5 * s0 * 1 + 0, 1e-15);
  EXPECT_NEAR(y[1], -0.5 * s0 * 1 + 0, 1e-15);
  EXPECT_NEAR(y[2], 0.5 * s0 * 2 + 0.5, 1e-15);
  EXPECT_NEAR(y[3], 1.5 * s0 * 2 - 0.5, 1e-15);
  const double s1 = 1.0 / std::sqrt(3.0 + kEps);
  EXPECT_NEAR(y[4], -1.0 * s1, 1e-15);
  EXPECT_NEAR(y[7], 3.0 * s1 * 2 - 0.5, 1e-15);
}

TEST(ResidualLayerNorm, RowLengthOneHasZeroVarianceAndGivesBeta) {
  // C = 1: each row is its own mean, the variance is 0, so y = beta whatever h is.
  const auto out = lesson().reference(inputs({3, -7, 0.25}, {1, 2, 0}, {5}, {0.75}));
  ASSERT_EQ(out[0].values.size(), 3u);
  for (double y : out[0].values) EXPECT_DOUBLE_EQ(y, 0.75);
  EXPECT_DOUBLE_EQ(out[1].values[0], 4.0);
  EXPECT_DOUBLE_EQ(out[1].values[1], -5.0);
}

TEST(ResidualLayerNorm, OddRowLengthNormalisesEachRowOnItsOwn) {
  // 3 rows of C = 781 (Triton's tutorial width): with gamma = 1 and beta = 0 every row of y has
  // mean 0 and mean square var / (var + eps), whatever the row's offset and scale.
  const int64_t rows = 3, c = 781;
  std::vector<double> x(rows * c), r(rows * c);
  for (int64_t i = 0; i < rows * c; ++i) {
    const int64_t row = i / c, j = i % c;
    x[i] = 10.0 * double(row) + std::sin(0.37 * double(j));  // a different offset per row
    r[i] = (row + 1) * std::cos(1.3 * double(j) + 0.1);      // and a different spread
  }
  const auto out =
      lesson().reference(inputs(x, r, std::vector<double>(c, 1.0), std::vector<double>(c, 0.0)));
  const auto& y = out[0].values;
  const auto& h = out[1].values;
  for (int64_t row = 0; row < rows; ++row) {
    double hsum = 0, hsq = 0, ysum = 0, ysq = 0;
    for (int64_t j = 0; j < c; ++j) hsum += h[row * c + j];
    const double mean = hsum / c;
    for (int64_t j = 0; j < c; ++j) {
      const int64_t i = row * c + j;
      EXPECT_DOUBLE_EQ(h[i], x[i] + r[i]);
      hsq += (h[i] - mean) * (h[i] - mean);
      ysum += y[i];
      ysq += y[i] * y[i];
    }
    const double var = hsq / c;
    EXPECT_NEAR(ysum / c, 0.0, 1e-12) << "row " << row;
    EXPECT_NEAR(ysq / c, var / (var + kEps), 1e-12) << "row " << row;
  }
}

TEST(ResidualLayerNorm, LevelsAndSizeAxis) {
  const LessonInfo& info = lesson().info();
  ASSERT_EQ(info.levels.size(), 3u);
  EXPECT_EQ(info.levels[0].launches, (std::vector<std::string>{"add", "mean_var", "normalize"}));
  EXPECT_EQ(info.levels[1].launches, (std::vector<std::string>{"add", "layernorm"}));
  EXPECT_EQ(info.levels[2].launches, (std::vector<std::string>{"residual_layernorm_fused"}));
  EXPECT_EQ(info.size_axis.unit, "rows");
  EXPECT_EQ(info.size_axis.min, 1);
  EXPECT_EQ(info.size_axis.default_size, 32 * 512);  // batch 32 x sequence 512
  EXPECT_EQ(info.size_axis.inner_default, 768);
  EXPECT_EQ(info.size_axis.inner_max, 16384);
  EXPECT_LE(info.size_axis.max * info.size_axis.inner_default, int64_t(1) << 28);
  EXPECT_GT((info.size_axis.max + 1) * info.size_axis.inner_default, int64_t(1) << 28);
  EXPECT_EQ(lesson().resolve({5, 0}).inner, 768);
  EXPECT_EQ(lesson().resolve({5, 781}).inner, 781);
}

TEST(ResidualLayerNorm, TrafficModelPerLevel) {
  const Shape shape{7, 781};  // odd rows and odd C on purpose
  const int64_t rows = 7, c = 781, n = rows * c;
  for (Precision p : {Precision::fp32, Precision::bf16}) {
    SCOPED_TRACE(to_string(p));
    const int64_t b = bytes_per_element(p);
    const auto l0 = lesson().traffic(0, shape, p);
    ASSERT_EQ(l0.size(), 3u);
    EXPECT_EQ(l0[0].bytes_read, 2 * n * b);    // add: x, r
    EXPECT_EQ(l0[0].bytes_written, n * b);     // h
    EXPECT_EQ(l0[1].bytes_read, n * b);        // mean_var: h
    EXPECT_EQ(l0[1].bytes_written, 8 * rows);  // mean and rstd, fp32 in both precisions
    EXPECT_EQ(l0[2].bytes_read, n * b + 8 * rows + 2 * c * b);  // h, mean, rstd, gamma, beta
    EXPECT_EQ(l0[2].bytes_written, n * b);                      // y
    EXPECT_EQ(total_bytes(l0), 6 * n * b + 16 * rows + 2 * c * b);

    const auto l1 = lesson().traffic(1, shape, p);
    ASSERT_EQ(l1.size(), 2u);
    EXPECT_EQ(l1[0].bytes(), 3 * n * b);
    EXPECT_EQ(l1[1].bytes_read, n * b + 2 * c * b);  // layernorm: h, gamma, beta
    EXPECT_EQ(l1[1].bytes_written, n * b);
    EXPECT_EQ(total_bytes(l1), 5 * n * b + 2 * c * b);

    const auto l2 = lesson().traffic(2, shape, p);
    ASSERT_EQ(l2.size(), 1u);
    EXPECT_EQ(l2[0].bytes_read, 2 * n * b + 2 * c * b);  // x, r, gamma, beta
    EXPECT_EQ(l2[0].bytes_written, 2 * n * b);           // h and y
    for (const auto& level : {l0, l1, l2}) {
      for (const auto& launch : level) EXPECT_GT(launch.flops, 0) << launch.kernel;
    }
  }
}

TEST(ResidualLayerNorm, ByteRatioLimitIsOneAndAHalf) {
  // Default shape (inner 0 resolves to C = 768): unfused / fused = 6N / 4N, plus the small
  // mean/rstd and gamma/beta terms.
  const Shape shape{16384, 0};
  const double unfused = double(total_bytes(lesson().traffic(0, shape, Precision::fp32)));
  const double split = double(total_bytes(lesson().traffic(1, shape, Precision::fp32)));
  const double fused = double(total_bytes(lesson().traffic(2, shape, Precision::fp32)));
  EXPECT_NEAR(unfused / fused, 1.5, 2e-3);
  EXPECT_NEAR(split / fused, 1.25, 1e-3);
  const int64_t n = int64_t(16384) * 768;
  EXPECT_EQ(total_bytes(lesson().traffic(2, shape, Precision::fp32)), 16 * n + 8 * 768);
  EXPECT_EQ(total_bytes(lesson().traffic(2, shape, Precision::bf16)), 8 * n + 4 * 768);
}

TEST(ResidualLayerNorm, WorkspaceBytesCountEveryBuffer) {
  // x, r, h, y (rows x C), gamma, beta (C), mean, rstd (rows, fp32), plus a small check buffer.
  const int64_t rows = 1000, c = 781;
  const int64_t fp32 = lesson().workspace_bytes({rows, c}, Precision::fp32);
  const int64_t at_least = 16 * rows * c + 8 * c + 8 * rows;
  EXPECT_GE(fp32, at_least);
  EXPECT_LT(fp32, at_least + 4096);
  EXPECT_LT(lesson().workspace_bytes({rows, c}, Precision::bf16), fp32);
}

TEST(ResidualLayerNorm, RefusesShapesOutsideItsLimitsWithAReason) {
  // Refused before any GPU memory is touched, so this runs without a GPU.
  std::unique_ptr<Workspace> ws;
  Status st = lesson().create_workspace({10, 16385}, Precision::fp32, &ws);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("16384"), std::string::npos) << st.message();
  st = lesson().create_workspace({(int64_t(1) << 28) / 4096 + 1, 4096}, Precision::fp32, &ws);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rows"), std::string::npos) << st.message();
  st = lesson().create_workspace({0, 768}, Precision::bf16, &ws);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(ws, nullptr);
}

}  // namespace
}  // namespace fl
