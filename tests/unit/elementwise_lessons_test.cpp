// The elementwise lessons' CPU-side pieces (relu_scale, bias_gelu; gelu_scale has its own in
// lessons_test.cpp): curriculum order, references at known values, textbook traffic, shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>

#include "kernels/catalog.h"

namespace fl {
namespace {

// GELU_tanh at +-1, from the formula in 40-digit arithmetic (mpmath), rounded to double.
constexpr double kGeluOne = 0.8411919906082767;
constexpr double kGeluMinusOne = -0.1588080093917233;

const Lesson& lesson(const std::string& id) {
  const Lesson* found = find_lesson(id);
  EXPECT_NE(found, nullptr) << id << " is not in the catalog";
  if (found == nullptr) std::abort();
  return *found;
}

int position(const std::string& id) {
  const auto& all = lessons();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i]->info().id == id) return static_cast<int>(i);
  }
  return -1;
}

TEST(ElementwiseLessons, AreInCurriculumOrder) {
  ASSERT_GE(position("relu_scale"), 0);
  EXPECT_EQ(position("relu_scale"), 0) << "relu_scale is lesson 1";
  EXPECT_EQ(position("gelu_scale"), position("relu_scale") + 1);
  EXPECT_EQ(position("bias_gelu"), position("gelu_scale") + 1);
}

TEST(ElementwiseLessons, OfferBothPrecisionsAndTighterFp32Tolerances) {
  for (const char* id : {"relu_scale", "gelu_scale", "bias_gelu"}) {
    const Lesson& l = lesson(id);
    ASSERT_EQ(l.info().precisions.size(), 2u) << id;
    EXPECT_EQ(l.info().precisions[0], Precision::fp32);
    EXPECT_EQ(l.info().precisions[1], Precision::bf16);
    EXPECT_GT(l.tolerance(Precision::fp32), 0.0);
    EXPECT_LT(l.tolerance(Precision::fp32), l.tolerance(Precision::bf16)) << id;
    EXPECT_LE(l.tolerance(Precision::bf16), 1e-2) << id;
  }
}

// ---- relu_scale ----------------------------------------------------------------------------

TEST(ReluScale, ReferenceMatchesKnownValues) {
  const std::vector<HostTensor> out =
      lesson("relu_scale").reference({{"x", {-2.0, -1e-30, 0.0, 1.5, 3.0, 1e30}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "y");
  const std::vector<double> want = {0.0, 0.0, 0.0, 0.75, 1.5, 0.5e30};  // s = 0.5
  ASSERT_EQ(out[0].values.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(out[0].values[i], want[i]) << i;
}

TEST(ReluScale, ReferenceKeepsNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<HostTensor> out = lesson("relu_scale").reference({{"x", {nan}}});
  EXPECT_TRUE(std::isnan(out[0].values[0])) << "relu(NaN) must not become a plausible 0";
}

TEST(ReluScale, TextbookBytesGiveTheTwoXLimit) {
  const Lesson& l = lesson("relu_scale");
  const int64_t n = 1000003;  // odd on purpose
  const auto unfused = l.traffic(0, n, Precision::fp32);
  const auto fused = l.traffic(1, n, Precision::fp32);
  ASSERT_EQ(unfused.size(), 2u);
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(unfused[0].kernel, "relu");
  EXPECT_EQ(unfused[1].kernel, "scale");
  EXPECT_EQ(fused[0].kernel, "relu_scale_fused");
  for (const auto& launch : unfused) {
    EXPECT_EQ(launch.bytes_read, 4 * n) << launch.kernel;
    EXPECT_EQ(launch.bytes_written, 4 * n) << launch.kernel;
  }
  EXPECT_EQ(total_bytes(unfused), 16 * n);
  EXPECT_EQ(total_bytes(fused), 8 * n);
  EXPECT_EQ(total_bytes(l.traffic(0, n, Precision::bf16)), 8 * n);
  EXPECT_EQ(total_bytes(l.traffic(1, n, Precision::bf16)), 4 * n);
  // Fusing moves no arithmetic away: the same flops, half the bytes.
  EXPECT_DOUBLE_EQ(unfused[0].flops + unfused[1].flops, fused[0].flops);
}

TEST(ReluScale, SizeAxisIsElements) {
  const SizeAxis& axis = lesson("relu_scale").info().size_axis;
  EXPECT_EQ(axis.unit, "elements");
  EXPECT_EQ(axis.min, 1024);
  EXPECT_EQ(axis.default_size, int64_t(1) << 24);
  EXPECT_EQ(axis.max, int64_t(1) << 28);
  EXPECT_EQ(axis.inner_default, 0) << "an elementwise lesson has no row length";
  EXPECT_EQ(lesson("relu_scale").workspace_bytes(1000, Precision::bf16), 3 * 1000 * 2);
}

TEST(ReluScale, RefusesAnEmptyTensorWithoutTouchingTheGpu) {
  std::unique_ptr<Workspace> ws;
  const Status st = lesson("relu_scale").create_workspace(0, Precision::fp32, &ws);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(ws, nullptr);
}

// ---- bias_gelu -----------------------------------------------------------------------------

TEST(BiasGelu, ReferenceAddsTheBiasPerColumnThenGelu) {
  // 2 rows x C = 3: x + b is 0, 1, -1 in the first row and 10, -10, 1 in the second.
  const std::vector<double> b = {0.5, -1.0, 2.0};
  const std::vector<double> x = {-0.5, 2.0, -3.0, 9.5, -9.0, -1.0};
  const std::vector<HostTensor> out = lesson("bias_gelu").reference({{"x", x}, {"b", b}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "y");
  const auto& y = out[0].values;
  ASSERT_EQ(y.size(), x.size());
  EXPECT_DOUBLE_EQ(y[0], 0.0);
  EXPECT_NEAR(y[1], kGeluOne, 1e-15);
  EXPECT_NEAR(y[2], kGeluMinusOne, 1e-15);
  EXPECT_NEAR(y[3], 10.0, 1e-12);  // GELU(x) -> x for large x
  EXPECT_NEAR(y[4], 0.0, 1e-12);   // and -> 0 for large negative x
  EXPECT_NEAR(y[5], kGeluOne, 1e-15);
}

TEST(BiasGelu, ReferenceWrapsTheBiasForAnOddC) {
  // C = 3 and a flat length that is not a whole number of 4- or 8-element vectors: element e
  // takes b[e % 3] whatever the vector layout is.
  const std::vector<double> b = {1.0, 0.0, -1.0};
  const std::vector<double> x(9, 0.0);
  const std::vector<HostTensor> out = lesson("bias_gelu").reference({{"x", x}, {"b", b}});
  ASSERT_EQ(out.size(), 1u);
  const std::vector<double>& y = out[0].values;
  ASSERT_EQ(y.size(), x.size());
  for (size_t e = 0; e < x.size(); ++e) {
    const double want = e % 3 == 0 ? kGeluOne : e % 3 == 1 ? 0.0 : kGeluMinusOne;
    EXPECT_NEAR(y[e], want, 1e-15) << "element " << e;
  }
}

TEST(BiasGelu, TextbookBytesCountTheBiasOncePerLaunch) {
  const Lesson& l = lesson("bias_gelu");
  const int64_t rows = 1823, c = 781;  // Triton's odd tutorial shape
  const int64_t n = rows * c;
  const auto unfused = l.traffic(0, {rows, c}, Precision::fp32);
  const auto fused = l.traffic(1, {rows, c}, Precision::fp32);
  ASSERT_EQ(unfused.size(), 2u);
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(unfused[0].kernel, "add_bias");
  EXPECT_EQ(unfused[0].bytes_read, 4 * (n + c));  // x and the bias, once
  EXPECT_EQ(unfused[0].bytes_written, 4 * n);     // t
  EXPECT_EQ(unfused[1].kernel, "gelu");
  EXPECT_EQ(unfused[1].bytes_read, 4 * n);     // t
  EXPECT_EQ(unfused[1].bytes_written, 4 * n);  // y
  EXPECT_EQ(fused[0].kernel, "bias_gelu_fused");
  EXPECT_EQ(fused[0].bytes_read, 4 * (n + c));
  EXPECT_EQ(fused[0].bytes_written, 4 * n);
  EXPECT_EQ(total_bytes(unfused), 4 * (4 * n + c));
  EXPECT_EQ(total_bytes(fused), 4 * (2 * n + c));
  EXPECT_EQ(total_bytes(l.traffic(0, {rows, c}, Precision::bf16)), 2 * (4 * n + c));
  EXPECT_EQ(total_bytes(l.traffic(1, {rows, c}, Precision::bf16)), 2 * (2 * n + c));
  EXPECT_DOUBLE_EQ(unfused[0].flops + unfused[1].flops, fused[0].flops);
  // The byte-ratio limit is (4n + C) / (2n + C): 2.0x to within 1/rows.
  const double limit = double(total_bytes(unfused)) / double(total_bytes(fused));
  EXPECT_LT(limit, 2.0);
  EXPECT_GT(limit, 2.0 - 1.0 / rows);
}

TEST(BiasGelu, ShapesAreRowsTimesHiddenSize) {
  const Lesson& l = lesson("bias_gelu");
  const SizeAxis& axis = l.info().size_axis;
  EXPECT_EQ(axis.unit, "rows");
  EXPECT_EQ(axis.default_size, 32 * 512);  // batch 32 x sequence 512
  EXPECT_EQ(axis.inner_default, 768);
  EXPECT_GE(axis.inner_max, 4097) << "the gpu tests draw odd C up to 4097";
  EXPECT_LE(axis.min, 1);
  // The largest row count keeps rows x C within 2^28 elements at the default C.
  EXPECT_LE(axis.max * axis.inner_default, int64_t(1) << 28);
  EXPECT_GT((axis.max + 1) * axis.inner_default, int64_t(1) << 28);
  // inner 0 means the default C, in the traffic model as everywhere.
  EXPECT_EQ(l.resolve({100, 0}).inner, 768);
  EXPECT_EQ(total_bytes(l.traffic(1, {100, 0}, Precision::fp32)),
            total_bytes(l.traffic(1, {100, 768}, Precision::fp32)));
  EXPECT_EQ(total_bytes(l.traffic(1, 100, Precision::fp32)), 4 * (2 * 100 * 768 + 768));
  // x, t, y and the bias.
  EXPECT_EQ(l.workspace_bytes({10, 781}, Precision::bf16), 2 * (3 * 10 * 781 + 781));
}

TEST(BiasGelu, RefusesShapesItCannotHoldWithoutTouchingTheGpu) {
  const Lesson& l = lesson("bias_gelu");
  std::unique_ptr<Workspace> ws;
  // rows x C beyond 2^28 elements: refused with the row limit for that C.
  Status st = l.create_workspace({l.info().size_axis.max, 16384}, Precision::fp32, &ws);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("16384 rows"), std::string::npos) << st.message();
  st = l.create_workspace({0, 768}, Precision::fp32, &ws);
  EXPECT_FALSE(st.ok());
  st = l.create_workspace({10, -3}, Precision::bf16, &ws);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(ws, nullptr);
}

}  // namespace
}  // namespace fl
