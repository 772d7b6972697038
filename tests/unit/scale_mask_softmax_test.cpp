// scale_mask_softmax on the CPU: the double reference (rows sum to 1, the causal mask gives
// exact zeros, odd row lengths, L = 1) and the textbook traffic model of every level.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/catalog.h"

namespace fl {
namespace {

const Lesson& lesson() {
  const Lesson* found = find_lesson("scale_mask_softmax");
  EXPECT_NE(found, nullptr);
  return *found;
}

// Scores uniform on [-14, 14] like the GPU's inputs, for `rows` rows of `length` keys.
std::vector<HostTensor> random_inputs(int64_t rows, int64_t length, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-14.0, 14.0);
  HostTensor s{"S", std::vector<double>(rows * length)};
  for (double& v : s.values) v = uniform(rng);
  return {s, HostTensor{"row_length", {double(length)}}};
}

// Row r is query q = r % L; keys j > q must be exactly 0, the rest positive and summing to 1.
void expect_causal_softmax_rows(const std::vector<double>& p, int64_t rows, int64_t length) {
  ASSERT_EQ(p.size(), size_t(rows * length));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t q = r % length;
    double sum = 0;
    for (int64_t j = 0; j < length; ++j) {
      const double v = p[r * length + j];
      if (j > q) {
        EXPECT_EQ(v, 0.0) << "row " << r << " key " << j << " is masked";
      } else {
        EXPECT_GT(v, 0.0) << "row " << r << " key " << j;
      }
      sum += v;
    }
    EXPECT_NEAR(sum, 1.0, 1e-12) << "row " << r;
  }
}

TEST(ScaleMaskSoftmax, ReferenceRowsSumToOneAndMaskedKeysAreExactlyZero) {
  const int64_t rows = 3 * 16, length = 16;  // three heads of a 16 x 16 score matrix
  const auto out = lesson().reference(random_inputs(rows, length, 1));
  ASSERT_EQ(out.size(), 1u);
  expect_causal_softmax_rows(out[0].values, rows, length);
}

TEST(ScaleMaskSoftmax, ReferenceHandlesOddRowLengthsAndLengthOne) {
  for (int64_t length : {int64_t(1), int64_t(3), int64_t(7), int64_t(781)}) {
    SCOPED_TRACE("L = " + std::to_string(length));
    const int64_t rows = length == 781 ? 37 : 2 * length + 1;  // partial last head on purpose
    const auto out = lesson().reference(random_inputs(rows, length, 2 + length));
    ASSERT_EQ(out.size(), 1u);
    expect_causal_softmax_rows(out[0].values, rows, length);
  }
}

TEST(ScaleMaskSoftmax, ReferenceMatchesHandComputedValues) {
  // L = 2: row 0 (q = 0) sees only key 0; row 1 (q = 1) sees keys 0 and 1 at s = 1/8.
  const std::vector<HostTensor> in = {{"S", {5.0, 100.0, 8.0, 0.0}}, {"row_length", {2.0}}};
  const auto p = lesson().reference(in)[0].values;
  EXPECT_DOUBLE_EQ(p[0], 1.0);
  EXPECT_EQ(p[1], 0.0);             // 100 is a future key: masked whatever its score
  const double e1 = std::exp(1.0);  // s * 8 - s * 0 = 1
  EXPECT_NEAR(p[2], e1 / (e1 + 1.0), 1e-15);
  EXPECT_NEAR(p[3], 1.0 / (e1 + 1.0), 1e-15);
}

TEST(ScaleMaskSoftmax, ReferenceIsShiftInvariantAndScalesTheScores) {
  // softmax(s (S + c)) = softmax(s S) for any c, and the scale s = 1/8 sharpens nothing extra:
  // a row of equal scores gives equal probabilities.
  const int64_t length = 5, rows = 5;
  auto in = random_inputs(rows, length, 9);
  auto shifted = in;
  for (double& v : shifted[0].values) v += 3.0;
  const auto a = lesson().reference(in)[0].values;
  const auto b = lesson().reference(shifted)[0].values;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-14) << i;
  const std::vector<HostTensor> flat = {{"S", std::vector<double>(25, 2.0)}, {"row_length", {5.0}}};
  const auto p = lesson().reference(flat)[0].values;
  EXPECT_NEAR(p[4 * 5 + 3], 0.2, 1e-15);  // last query: 5 equal keys
  EXPECT_NEAR(p[2 * 5 + 1], 1.0 / 3, 1e-15);
}

TEST(ScaleMaskSoftmax, TrafficModelPerLevel) {
  const Lesson& l = lesson();
  ASSERT_EQ(l.level_count(), 3);
  const int64_t rows = 1001, length = 781;  // odd on purpose
  const int64_t n = rows * length, stat = 4 * rows;
  for (Precision p : {Precision::fp32, Precision::bf16}) {
    SCOPED_TRACE(to_string(p));
    const int64_t t = n * bytes_per_element(p);
    const auto unfused = l.traffic(0, {rows, length}, p);
    ASSERT_EQ(unfused.size(), 5u);
    EXPECT_EQ(unfused[0].bytes_read, t);  // scale: S in, S1 out
    EXPECT_EQ(unfused[0].bytes_written, t);
    EXPECT_EQ(unfused[1].bytes(), 2 * t);  // mask: S1 in, S2 out
    EXPECT_EQ(unfused[2].bytes_read, t);   // row max: S2 in, one fp32 per row out
    EXPECT_EQ(unfused[2].bytes_written, stat);
    EXPECT_EQ(unfused[3].bytes_read, t + stat);  // exp-sum: S2 and the max in, e and the sum out
    EXPECT_EQ(unfused[3].bytes_written, t + stat);
    EXPECT_EQ(unfused[4].bytes_read, t + stat);  // divide: e and the sum in, P out
    EXPECT_EQ(unfused[4].bytes_written, t);
    EXPECT_EQ(total_bytes(unfused), 9 * t + 16 * rows);

    const auto eager = l.traffic(1, {rows, length}, p);
    ASSERT_EQ(eager.size(), 3u);
    EXPECT_EQ(eager[2].kernel, "softmax");
    EXPECT_EQ(total_bytes(eager), 6 * t);

    const auto fused = l.traffic(2, {rows, length}, p);
    ASSERT_EQ(fused.size(), 1u);
    EXPECT_EQ(fused[0].bytes_read, t);
    EXPECT_EQ(fused[0].bytes_written, t);
    // The same arithmetic in every level: only the bytes change.
    double flops0 = 0;
    for (const auto& k : unfused) flops0 += k.flops;
    EXPECT_DOUBLE_EQ(flops0, fused[0].flops);
  }
}

TEST(ScaleMaskSoftmax, ByteRatioLimitAtTheDefaultShape) {
  const Lesson& l = lesson();
  const SizeAxis& axis = l.info().size_axis;
  EXPECT_EQ(axis.unit, "rows");
  EXPECT_EQ(axis.default_size, 32 * 12 * 512);  // batch 32 x 12 heads x 512 queries
  EXPECT_EQ(axis.inner_default, 512);
  EXPECT_LE(axis.max * axis.inner_default, int64_t(1) << 28);
  // Shape{rows} resolves to L = 512: 4.5x plus the 16 bytes per row of max and sum.
  const double ratio = double(total_bytes(l.traffic(0, axis.default_size, Precision::fp32))) /
                       double(total_bytes(l.traffic(2, axis.default_size, Precision::fp32)));
  EXPECT_NEAR(ratio, 4.5 + 16.0 / (2 * 512 * 4), 1e-12);
  EXPECT_EQ(total_bytes(l.traffic(2, axis.default_size, Precision::fp32)),
            int64_t(2) * 32 * 12 * 512 * 512 * 4);  // 805,306,368 bytes
  const double eager_ratio = double(total_bytes(l.traffic(1, axis.default_size, Precision::bf16))) /
                             double(total_bytes(l.traffic(2, axis.default_size, Precision::bf16)));
  EXPECT_DOUBLE_EQ(eager_ratio, 3.0);
}

TEST(ScaleMaskSoftmax, WorkspaceBytesAndRefusals) {
  const Lesson& l = lesson();
  // S, S1, S2, e, P and two fp32 values per row (plus a few bytes for the check).
  const int64_t bytes = l.workspace_bytes({1000, 512}, Precision::bf16);
  EXPECT_GE(bytes, 5 * 1000 * 512 * 2 + 8 * 1000);
  EXPECT_LT(bytes, 5 * 1000 * 512 * 2 + 8 * 1000 + 4096);
  // Too-long rows and too many scores are refused with a reason, before touching the GPU.
  std::unique_ptr<Workspace> ws;
  const Status too_long = l.create_workspace({4, 8193}, Precision::fp32, &ws);
  EXPECT_FALSE(too_long.ok());
  EXPECT_NE(too_long.message().find("8192"), std::string::npos) << too_long.message();
  const Status too_many = l.create_workspace({int64_t(1) << 20, 8192}, Precision::fp32, &ws);
  EXPECT_FALSE(too_many.ok());
  EXPECT_NE(too_many.message().find("32768 rows"), std::string::npos) << too_many.message();
  EXPECT_FALSE(l.create_workspace({0, 512}, Precision::fp32, &ws).ok());
}

}  // namespace
}  // namespace fl
