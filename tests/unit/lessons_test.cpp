// The catalog and the lessons' CPU-side pieces: references, traffic models, sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "kernels/catalog.h"

namespace fl {
namespace {

TEST(Catalog, EveryLessonIsWellFormed) {
  std::set<std::string> ids;
  for (const Lesson* lesson : lessons()) {
    const LessonInfo& info = lesson->info();
    EXPECT_TRUE(ids.insert(info.id).second) << "duplicate id " << info.id;
    EXPECT_EQ(find_lesson(info.id), lesson);
    EXPECT_GE(info.levels.size(), 2u) << info.id << " needs an unfused and a fused level";
    EXPECT_LE(info.size_axis.min, info.size_axis.default_size);
    EXPECT_LE(info.size_axis.default_size, info.size_axis.max);
    for (int level = 0; level < lesson->level_count(); ++level) {
      const auto traffic = lesson->traffic(level, info.size_axis.default_size, Precision::fp32);
      EXPECT_EQ(traffic.size(), info.levels[level].launches.size())
          << info.id << " level " << level;
      for (size_t k = 0; k < traffic.size(); ++k) {
        EXPECT_EQ(traffic[k].kernel, info.levels[level].launches[k]);
      }
    }
    // Fusing never adds bytes.
    const int top = lesson->level_count() - 1;
    EXPECT_LT(total_bytes(lesson->traffic(top, 1 << 20, Precision::fp32)),
              total_bytes(lesson->traffic(0, 1 << 20, Precision::fp32)));
  }
  EXPECT_EQ(find_lesson("no_such_lesson"), nullptr);
}

TEST(GeluScale, TextbookBytesGiveTheTwoXLimit) {
  const Lesson* lesson = find_lesson("gelu_scale");
  ASSERT_NE(lesson, nullptr);
  const int64_t n = 1000003;  // odd on purpose
  const auto unfused = lesson->traffic(0, n, Precision::fp32);
  const auto fused = lesson->traffic(1, n, Precision::fp32);
  ASSERT_EQ(unfused.size(), 2u);
  EXPECT_EQ(unfused[0].bytes_read, 4 * n);     // gelu reads x
  EXPECT_EQ(unfused[0].bytes_written, 4 * n);  // and writes t
  EXPECT_EQ(total_bytes(unfused), 16 * n);
  EXPECT_EQ(total_bytes(fused), 8 * n);
  EXPECT_EQ(total_bytes(lesson->traffic(1, n, Precision::bf16)), 4 * n);
}

TEST(GeluScale, ReferenceMatchesKnownValues) {
  const Lesson* lesson = find_lesson("gelu_scale");
  ASSERT_NE(lesson, nullptr);
  const std::vector<HostTensor> out = lesson->reference({{"x", {0.0, 1.0, -1.0, 10.0, -10.0}}});
  ASSERT_EQ(out.size(), 1u);
  const auto& y = out[0].values;
  // s = 0.5; GELU_tanh(1) = 0.8411919906082768, GELU_tanh(-1) = -0.15880800939172324.
  EXPECT_DOUBLE_EQ(y[0], 0.0);
  EXPECT_NEAR(y[1], 0.5 * 0.8411919906082768, 1e-15);
  EXPECT_NEAR(y[2], 0.5 * -0.15880800939172324, 1e-15);
  EXPECT_NEAR(y[3], 0.5 * 10.0, 1e-12);  // large x: GELU(x) -> x
  EXPECT_NEAR(y[4], 0.0, 1e-12);         // large negative x: GELU(x) -> 0
}

TEST(Precision, Bf16NeedsAmpere) {
  EXPECT_FALSE(precision_unsupported_reason(Precision::bf16, 7, 0).empty());
  EXPECT_TRUE(precision_unsupported_reason(Precision::bf16, 8, 0).empty());
  EXPECT_TRUE(precision_unsupported_reason(Precision::fp32, 7, 0).empty());
}

}  // namespace
}  // namespace fl

namespace fl {
namespace {

TEST(RelativeError, RelativeToTheReferenceWithAnAbsoluteFloor) {
  // Unit-scale data: ||e|| / ||ref||, the floor is invisible.
  EXPECT_NEAR(relative_l2_error(/*err2=*/1e-6, /*ref2=*/100.0, /*count=*/100), 1e-4, 1e-9);
  // One output that is nearly zero: the floor (RMS 1e-3) keeps a 1e-9 error from reading as 100%.
  EXPECT_LT(relative_l2_error(1e-18, 1e-18, 1), 1e-5);
  // A real error on such data is still caught.
  EXPECT_GT(relative_l2_error(1e-4, 1e-18, 1), 1.0);
  EXPECT_EQ(relative_l2_error(0, 0, 0), 0.0);
  // A lesson's own floor: three outputs of RMS 0.05 with errors of RMS 2e-3 read 4% against the
  // default floor, 0.57% against the GEMM lessons' 0.35 (sqrt(0.05^2 + 0.35^2) = 0.354).
  EXPECT_NEAR(relative_l2_error(3 * 4e-6, 3 * 2.5e-3, 3), 0.04, 1e-4);
  EXPECT_NEAR(relative_l2_error(3 * 4e-6, 3 * 2.5e-3, 3, 0.35), 2e-3 / std::sqrt(0.125), 1e-6);
}

}  // namespace
}  // namespace fl
