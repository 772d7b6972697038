// Lesson 9, attention, on the GPU beyond the catalog-wide tests (lessons_gpu_test.cpp, which run
// the lesson's own H = 12, B = 16384 / T at short lengths): every level at shapes the Lesson
// interface cannot ask for (head counts other than 12, odd lengths that are no multiple of any
// tile, T = 1, head sizes that are not 64 or 128), each compared with the CPU reference in
// double, outputs poisoned first and inputs fresh; then the lesson's own shapes at lengths the
// CPU reference is too slow for, checked by the GPU's fp64 check.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "kernels/attention/attention.h"
#include "kernels/catalog.h"
#include "tests/support/level_gpu_test.h"

namespace fl {
namespace {

struct AttentionShape {
  int64_t batch;
  int heads, length, dim;
};

class AttentionGpu : public LevelGpuTest {
 protected:
  AttentionGpu() : LevelGpuTest("attention") {}
  // Runs `level` on fresh inputs with poisoned outputs; returns the GPU check's result.
  CheckResult run(Workspace& ws, int level, uint64_t seed) {
    EXPECT_TRUE(ws.fill_inputs(seed, stream_).ok());
    return run_level(ws, level);
  }
};

TEST_P(AttentionGpu, EveryLevelMatchesTheCpuReferenceAtOddShapes) {
  const Precision p = GetParam();
  std::mt19937_64 rng(std::random_device{}());
  std::vector<AttentionShape> shapes = {
      {1, 1, 1, 64},     // one token: softmax over a single key
      {2, 3, 67, 64},    // a length that is no multiple of any tile
      {1, 5, 129, 128},  // one past two 64-row query tiles
      {3, 2, 200, 96},   // a head size the 128-wide tile pads
      {1, 7, 333, 128},
      {2, 1, 45, 5},  // a head size of no whole 16-byte vector: element-wise copies
  };
  for (int i = 0; i < 3; ++i) {
    const int dims[] = {64, 128, 1 + int(rng() % 128)};
    shapes.push_back(
        {1 + int64_t(rng() % 2), 1 + 2 * int(rng() % 8), (1 + int(rng() % 600)) | 1, dims[i]});
  }
  for (const AttentionShape& s : shapes) {
    std::unique_ptr<Workspace> ws;
    const Status made = attention::make_workspace(s.batch, s.heads, s.length, s.dim, p, &ws);
    ASSERT_TRUE(made.ok()) << made.message();
    for (int level = 0; level < lesson_->level_count(); ++level) {
      if (!level_selected(level)) continue;
      SCOPED_TRACE("B=" + std::to_string(s.batch) + " H=" + std::to_string(s.heads) +
                   " T=" + std::to_string(s.length) + " d=" + std::to_string(s.dim) + " level " +
                   std::to_string(level) + " " + to_string(p));
      const CheckResult gpu = run(*ws, level, rng());
      std::vector<HostTensor> inputs, outputs;
      ASSERT_TRUE(ws->download(stream_, &inputs, &outputs).ok());
      const std::vector<HostTensor> ref = lesson_->reference(inputs);
      ASSERT_EQ(ref.size(), 1u);
      ASSERT_EQ(outputs.size(), 1u);
      ASSERT_EQ(ref[0].values.size(), outputs[0].values.size());
      double err2 = 0, ref2 = 0;
      int64_t non_finite = 0;
      for (size_t i = 0; i < ref[0].values.size(); ++i) {
        const double out = outputs[0].values[i], want = ref[0].values[i];
        if (!std::isfinite(out)) {
          ++non_finite;
          continue;
        }
        err2 += (out - want) * (out - want);
        ref2 += want * want;
      }
      const double rel = relative_l2_error(err2, ref2, int64_t(ref[0].values.size()));
      EXPECT_EQ(non_finite, 0) << "outputs left unwritten (still poisoned)";
      EXPECT_LE(rel, lesson_->tolerance(p));
      EXPECT_TRUE(gpu.passed) << "GPU check: rel " << gpu.rel_l2_error;
      // Every row is checked at these sizes, so the GPU's fp64 check measures the same error.
      if (s.batch * s.heads * s.length <= 4096) {
        EXPECT_NEAR(gpu.rel_l2_error, rel, 1e-2 * rel + 1e-12);
      }
      std::printf("attention B=%lld H=%d T=%d d=%d level %d %s: rel %.3e\n",
                  static_cast<long long>(s.batch), s.heads, s.length, s.dim, level, to_string(p),
                  rel);
    }
  }
}

// The lesson's own shapes (B = 16384 / T, H = 12) at lengths that cross many K/V tiles, checked
// on the GPU (4096 sampled rows, the last one included; every output looked at for NaN).
TEST_P(AttentionGpu, EveryLevelAtLessonShapes) {
  const Precision p = GetParam();
  if (std::getenv("FL_TEST_MAX_FLOPS") != nullptr) GTEST_SKIP() << "not under compute-sanitizer";
  std::mt19937_64 rng(std::random_device{}());
  for (const Shape shape : {Shape{1999, 64}, Shape{4096, 128}, Shape{1024, 64}}) {
    std::unique_ptr<Workspace> ws;
    const Status made = lesson_->create_workspace(lesson_->resolve(shape), p, &ws);
    ASSERT_TRUE(made.ok()) << made.message();
    for (int level = 0; level < lesson_->level_count(); ++level) {
      SCOPED_TRACE("T=" + std::to_string(shape.size) + " d=" + std::to_string(shape.inner) +
                   " level " + std::to_string(level) + " " + to_string(p));
      const CheckResult gpu = run(*ws, level, rng());
      EXPECT_EQ(gpu.non_finite, 0);
      EXPECT_TRUE(gpu.passed) << "rel " << gpu.rel_l2_error << " (tolerance " << gpu.tolerance
                              << ")";
      std::printf("attention T=%lld d=%lld level %d %s: GPU check rel %.3e\n",
                  static_cast<long long>(shape.size), static_cast<long long>(shape.inner), level,
                  to_string(p), gpu.rel_l2_error);
    }
  }
}

TEST(AttentionShapes, BadShapesAreRefusedWithAMessage) {
  std::unique_ptr<Workspace> ws;
  const Status too_wide = attention::make_workspace(1, 1, 16, 129, Precision::fp32, &ws);
  EXPECT_FALSE(too_wide.ok());
  EXPECT_NE(too_wide.message().find("head size d from 1 to 128"), std::string::npos);
  const Lesson* lesson = find_lesson("attention");
  ASSERT_NE(lesson, nullptr);
  EXPECT_FALSE(lesson->create_workspace({16385, 64}, Precision::fp32, &ws).ok());
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionGpu,
                         ::testing::Values(Precision::fp32, Precision::bf16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace fl
