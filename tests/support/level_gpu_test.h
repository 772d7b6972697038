// What a lesson's own GPU test shares (attention_gpu_test.cpp, attention_residual_layernorm_
// gpu_test.cpp): a fixture per precision that finds the lesson, skips a precision the GPU lacks,
// and runs one level on a workspace with its outputs poisoned first; FL_TEST_LEVELS; and the
// relative L2 error the gpt2_decode tests compare outputs by.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "app/measure/live_backend.h"
#include "kernels/catalog.h"

namespace fl {

// ||a - ref|| / ||ref|| (L2 norms), infinite where a holds a value that is not finite.
inline double relative_l2_error(const std::vector<double>& a, const std::vector<double>& ref) {
  double e = 0, r = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    e += (a[i] - ref[i]) * (a[i] - ref[i]);
    r += ref[i] * ref[i];
  }
  return std::sqrt(e / r);
}

// FL_TEST_LEVELS ("2" or "0,2"), as in lessons_gpu_test.cpp: under racecheck only our own
// kernels' level runs (cuBLASLt's bf16 kernels stop that sanitizer itself).
inline bool level_selected(int level) {
  const char* list = std::getenv("FL_TEST_LEVELS");
  return list == nullptr || *list == '\0' || std::strchr(list, '0' + level) != nullptr;
}

class LevelGpuTest : public ::testing::TestWithParam<Precision> {
 protected:
  explicit LevelGpuTest(const char* lesson_id) : lesson_id_(lesson_id) {}
  void SetUp() override {
    const DeviceFacts device = query_device();
    if (!device.usable) GTEST_FAIL() << "gpu test without a GPU: " << device.unusable_reason;
    const std::string why =
        precision_unsupported_reason(GetParam(), device.cc_major, device.cc_minor);
    if (!why.empty()) GTEST_SKIP() << why;
    lesson_ = find_lesson(lesson_id_);
    ASSERT_NE(lesson_, nullptr);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  // Poisons the outputs, runs every launch of `level`, returns the workspace's check.
  CheckResult run_level(Workspace& ws, int level) {
    EXPECT_TRUE(ws.poison_outputs(stream_).ok());
    for (size_t k = 0; k < lesson_->info().levels[level].launches.size(); ++k) {
      const Status st = ws.launch(level, static_cast<int>(k), stream_);
      EXPECT_TRUE(st.ok()) << st.message();
    }
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    CheckResult gpu;
    EXPECT_TRUE(ws.check(stream_, &gpu).ok());
    return gpu;
  }

  const char* lesson_id_;
  const Lesson* lesson_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace fl
