// gelu_scale on the GPU: every level, fp32 and bf16, at random sizes including odd ones (not
// multiples of the 4- or 8-element vector, nor of the 256-thread block), fresh random inputs,
// outputs poisoned first. Each result is compared with the CPU reference in double, and the
// GPU's own fp64 check (what the live engine uses) must agree with that comparison.
//
// Tolerances (relative L2 error vs the double reference), from the lesson: fp32 1e-5 (tanhf is
// within a few ulp, typical error ~1e-7), bf16 1e-2 (output rounding to 8 significant bits).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "app/measure/live_backend.h"
#include "kernels/catalog.h"

namespace fl {
namespace {

struct Compared {
  double rel_l2 = 0;
  int64_t non_finite = 0;
};

Compared compare_with_cpu(const Lesson& lesson, Workspace& ws, cudaStream_t stream) {
  std::vector<HostTensor> inputs, outputs;
  const Status st = ws.download(stream, &inputs, &outputs);
  EXPECT_TRUE(st.ok()) << st.message();
  const std::vector<HostTensor> ref = lesson.reference(inputs);
  Compared c;
  double err2 = 0, ref2 = 0;
  for (size_t t = 0; t < ref.size(); ++t) {
    for (size_t i = 0; i < ref[t].values.size(); ++i) {
      const double out = outputs[t].values[i];
      if (!std::isfinite(out)) {
        ++c.non_finite;
        continue;
      }
      err2 += (out - ref[t].values[i]) * (out - ref[t].values[i]);
      ref2 += ref[t].values[i] * ref[t].values[i];
    }
  }
  c.rel_l2 = std::sqrt(err2 / ref2);
  return c;
}

class GeluScaleGpu : public ::testing::TestWithParam<Precision> {
 protected:
  void SetUp() override {
    device_ = query_device();
    if (!device_.usable) GTEST_FAIL() << "gpu test without a GPU: " << device_.unusable_reason;
    const std::string why = precision_unsupported_reason(GetParam(), device_.cc_major, device_.cc_minor);
    if (!why.empty()) GTEST_SKIP() << why;
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  DeviceFacts device_;
  cudaStream_t stream_ = nullptr;
};

TEST_P(GeluScaleGpu, EveryLevelMatchesTheReferenceAtRandomOddSizes) {
  const Lesson& lesson = *find_lesson("gelu_scale");
  const Precision p = GetParam();
  std::mt19937_64 rng(std::random_device{}());
  std::vector<int64_t> sizes = {1, 3, 7, 257, 1000003, (int64_t(16) << 20) + 5};
  for (int i = 0; i < 4; ++i) sizes.push_back(int64_t(rng() % 3000000) | 1);  // random, odd
  for (int64_t n : sizes) {
    std::unique_ptr<Workspace> ws;
    ASSERT_TRUE(lesson.create_workspace(n, p, &ws).ok()) << n;
    for (int level = 0; level < lesson.level_count(); ++level) {
      SCOPED_TRACE("n=" + std::to_string(n) + " level=" + std::to_string(level) + " " + to_string(p));
      ASSERT_TRUE(ws->fill_inputs(rng(), stream_).ok());
      ASSERT_TRUE(ws->poison_outputs(stream_).ok());
      for (size_t k = 0; k < lesson.info().levels[level].launches.size(); ++k) {
        const Status st = ws->launch(level, static_cast<int>(k), stream_);
        ASSERT_TRUE(st.ok()) << st.message();
      }
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);

      CheckResult gpu;
      ASSERT_TRUE(ws->check(stream_, &gpu).ok());
      const Compared cpu = compare_with_cpu(lesson, *ws, stream_);
      EXPECT_EQ(cpu.non_finite, 0) << "outputs left unwritten (still poisoned)";
      EXPECT_LE(cpu.rel_l2, lesson.tolerance(p));
      EXPECT_TRUE(gpu.passed) << "GPU check: rel " << gpu.rel_l2_error << ", non-finite " << gpu.non_finite;
      // The GPU's fp64 reference must measure the same error the CPU reference does.
      EXPECT_NEAR(gpu.rel_l2_error, cpu.rel_l2, 1e-3 * cpu.rel_l2 + 1e-12);
    }
  }
}

TEST_P(GeluScaleGpu, TheCheckCatchesUnwrittenOutputs) {
  const Lesson& lesson = *find_lesson("gelu_scale");
  std::unique_ptr<Workspace> ws;
  ASSERT_TRUE(lesson.create_workspace(4099, GetParam(), &ws).ok());
  ASSERT_TRUE(ws->fill_inputs(42, stream_).ok());
  ASSERT_TRUE(ws->poison_outputs(stream_).ok());
  // Level 0's first launch writes only the intermediate: y stays poisoned.
  ASSERT_TRUE(ws->launch(0, 0, stream_).ok());
  CheckResult gpu;
  ASSERT_TRUE(ws->check(stream_, &gpu).ok());
  EXPECT_FALSE(gpu.passed);
  EXPECT_EQ(gpu.non_finite, 4099);
}

INSTANTIATE_TEST_SUITE_P(Precisions, GeluScaleGpu, ::testing::Values(Precision::fp32, Precision::bf16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace fl
