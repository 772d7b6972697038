// Lesson 10, attention_residual_layernorm, on the GPU. The catalog-wide tests cannot compare it
// with the CPU reference (every run of the Lesson interface holds ~16,384 tokens, two Linear
// layers of fp64 work on the host per level), so here: every level at batch sizes the interface
// cannot ask for (odd lengths that are no multiple of any tile, T = 1, head sizes other than
// 64), fresh inputs, outputs poisoned first, h and y compared with the CPU reference in double;
// then the lesson's own shapes, checked by the workspace's check.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "kernels/attention_residual_layernorm/sublayer.h"
#include "kernels/catalog.h"
#include "tests/support/level_gpu_test.h"

namespace fl {
namespace {

struct SublayerShape {
  int64_t batch;
  int length;
  int64_t c;
};

class SublayerGpu : public LevelGpuTest {
 protected:
  SublayerGpu() : LevelGpuTest("attention_residual_layernorm") {}
};

TEST_P(SublayerGpu, EveryLevelMatchesTheCpuReferenceAtOddShapes) {
  const Precision p = GetParam();
  std::mt19937_64 rng(std::random_device{}());
  std::vector<SublayerShape> shapes = {
      {1, 1, 768},   // one token: attention over a single key
      {2, 67, 768},  // a length that is no multiple of any tile
      {1, 33, 96},   // d = 8
  };
  // Under compute-sanitizer (FL_TEST_MAX_FLOPS set) the three above; otherwise more and longer.
  if (std::getenv("FL_TEST_MAX_FLOPS") == nullptr) {
    shapes.push_back({1, 129, 768});   // one past a 128-row query tile
    shapes.push_back({3, 45, 384});    // d = 32
    shapes.push_back({1, 200, 1020});  // d = 85: no whole 16-byte vector, padded head
    for (int i = 0; i < 2; ++i) {
      shapes.push_back({1 + int64_t(rng() % 2), (1 + int(rng() % 240)) | 1, 768});
    }
  }
  for (const SublayerShape& s : shapes) {
    std::unique_ptr<Workspace> ws;
    const Status made = sublayer::make_workspace(s.batch, s.length, s.c, p, &ws);
    ASSERT_TRUE(made.ok()) << made.message();
    // Fresh inputs per shape; the reference once, every level against it.
    ASSERT_TRUE(ws->fill_inputs(rng(), stream_).ok());
    std::vector<HostTensor> inputs, unused;
    ASSERT_TRUE(ws->download(stream_, &inputs, &unused).ok());
    const std::vector<HostTensor> ref = lesson_->reference(inputs);
    ASSERT_EQ(ref.size(), 2u);
    for (int level = 0; level < lesson_->level_count(); ++level) {
      if (!level_selected(level)) continue;
      SCOPED_TRACE("B=" + std::to_string(s.batch) + " T=" + std::to_string(s.length) + " C=" +
                   std::to_string(s.c) + " level " + std::to_string(level) + " " + to_string(p));
      const CheckResult gpu = run_level(*ws, level);
      std::vector<HostTensor> in, outputs;
      ASSERT_TRUE(ws->download(stream_, &in, &outputs).ok());
      ASSERT_EQ(outputs.size(), 2u);
      double err2 = 0, ref2 = 0;
      int64_t non_finite = 0, count = 0;
      for (size_t t = 0; t < 2; ++t) {
        ASSERT_EQ(ref[t].values.size(), outputs[t].values.size());
        for (size_t i = 0; i < ref[t].values.size(); ++i) {
          const double out = outputs[t].values[i], want = ref[t].values[i];
          if (!std::isfinite(out)) {
            ++non_finite;
            continue;
          }
          err2 += (out - want) * (out - want);
          ref2 += want * want;
          ++count;
        }
      }
      const double rel = relative_l2_error(err2, ref2, count);
      EXPECT_EQ(non_finite, 0) << "outputs left unwritten (still poisoned)";
      EXPECT_LE(rel, lesson_->tolerance(p));
      EXPECT_TRUE(gpu.passed) << "check: rel " << gpu.rel_l2_error << ", non-finite "
                              << gpu.non_finite;
      std::printf(
          "attention_residual_layernorm B=%lld T=%d C=%lld level %d %s: rel %.3e "
          "(check %.3e)\n",
          static_cast<long long>(s.batch), s.length, static_cast<long long>(s.c), level,
          to_string(p), rel, gpu.rel_l2_error);
    }
  }
}

// The lesson's own shapes (B = 16384 / T), each level on fresh inputs, checked by the workspace's
// check (the leading tokens of the first and last sequence, in fp64).
TEST_P(SublayerGpu, EveryLevelAtLessonShapes) {
  const Precision p = GetParam();
  if (std::getenv("FL_TEST_MAX_FLOPS") != nullptr) GTEST_SKIP() << "not under compute-sanitizer";
  std::mt19937_64 rng(std::random_device{}());
  for (const Shape shape : {Shape{1999, 768}, Shape{512, 768}, Shape{1, 768}}) {
    std::unique_ptr<Workspace> ws;
    const Status made = lesson_->create_workspace(lesson_->resolve(shape), p, &ws);
    ASSERT_TRUE(made.ok()) << made.message();
    for (int level = 0; level < lesson_->level_count(); ++level) {
      SCOPED_TRACE("T=" + std::to_string(shape.size) + " level " + std::to_string(level) + " " +
                   to_string(p));
      ASSERT_TRUE(ws->fill_inputs(rng(), stream_).ok());
      const CheckResult gpu = run_level(*ws, level);
      EXPECT_EQ(gpu.non_finite, 0);
      EXPECT_TRUE(gpu.passed) << "rel " << gpu.rel_l2_error << " (tolerance " << gpu.tolerance
                              << ")";
      std::printf("attention_residual_layernorm T=%lld level %d %s: check rel %.3e\n",
                  static_cast<long long>(shape.size), level, to_string(p), gpu.rel_l2_error);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AttentionSublayer, SublayerGpu,
                         ::testing::Values(Precision::fp32, Precision::bf16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace fl
