// Level 4's cluster step (kernels/gpt2_decode/cluster_step.cu, the variants "clusters" and
// "clusters_long", chosen at one token where they run) against the fp64 CPU reference: odd cache
// lengths, lengths whose keys outgrow a block's buffer (streamed through it in passes), the
// slider's largest, and one random; each step run three times on poisoned outputs (the kernel
// zeroes its own counts and sums for the next launch) and again on fresh inputs, then the other
// kernel asked for by name (clusters_long where the keys fit; clusters past them, which must say
// it cannot). FL_DECODE_SMALL=1 (what compute-sanitizer runs): one length (37, or N with
// FL_DECODE_SMALL=N), the table's choice, two runs.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "app/measure/live_backend.h"
#include "kernels/catalog.h"
#include "kernels/gpt2_decode/hooks.h"
#include "tests/support/level_gpu_test.h"

namespace fl {
namespace {

double rel(const std::vector<double>& a, const std::vector<double>& ref) {
  return relative_l2_error(a, ref);
}

class Gpt2ClusterStep : public ::testing::Test {
 protected:
  void SetUp() override {
    const DeviceFacts device = query_device();
    if (!device.usable) GTEST_FAIL() << "gpu test without a GPU: " << device.unusable_reason;
    lesson_ = find_lesson("gpt2_decode");
    ASSERT_NE(lesson_, nullptr);
    int clusters = 0;
    ASSERT_TRUE(gpt2::megakernel_cluster_count(&clusters).ok());
    if (clusters == 0) GTEST_SKIP() << "the cluster step needs sm_90a and 12 clusters of 8";
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  // Level 4 on poisoned outputs: its y, and whether the GPU's fp64 check passed.
  std::vector<double> step(Workspace& ws, const std::string& variant) {
    EXPECT_TRUE(ws.poison_outputs(stream_).ok());
    for (size_t k = 0; k < lesson_->info().levels[4].launches.size(); ++k)
      EXPECT_TRUE(ws.launch(4, static_cast<int>(k), stream_).ok());
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(ws.variant_ran(4, 0), variant);
    CheckResult gpu;
    EXPECT_TRUE(ws.check(stream_, &gpu).ok());
    EXPECT_TRUE(gpu.passed) << "GPU check: rel " << gpu.rel_l2_error;
    EXPECT_EQ(gpu.non_finite, 0);
    std::vector<HostTensor> out;
    EXPECT_TRUE(ws.download_outputs(stream_, &out).ok());
    return out.at(0).values;
  }
  std::vector<double> reference(Workspace& ws) {
    std::vector<HostTensor> in, out;
    EXPECT_TRUE(ws.download(stream_, &in, &out).ok());
    return lesson_->reference(in).at(0).values;
  }
  const Lesson* lesson_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

TEST_F(Gpt2ClusterStep, MatchesTheCpuReference) {
  const char* small_env = std::getenv("FL_DECODE_SMALL");
  const bool small = small_env != nullptr;
  std::mt19937_64 rng(std::random_device{}());
  // (FL_DECODE_SMALL=N, N > 16: that cache instead of 37, e.g. one whose keys outgrow the buffer)
  std::vector<int64_t> caches = {small && std::atoll(small_env) > 16 ? std::atoll(small_env) : 37};
  if (!small) {
    for (int64_t c : {16, 515, 2047, 3001, 8192}) caches.push_back(c);
    caches.push_back(int64_t(16 + rng() % 8176) | 1);
  }
  const double tolerance = lesson_->tolerance(Precision::bf16);
  for (int64_t cache : caches) {
    SCOPED_TRACE("cache " + std::to_string(cache));
    std::unique_ptr<Workspace> ws;
    ASSERT_TRUE(lesson_->create_workspace(Shape{cache, 1}, Precision::bf16, &ws).ok());
    // The table's choice (on an H100 a block's 256 keys at 2K fit its buffer of 266).
    const bool fits = cache <= 2048;
    const std::string chosen = fits ? "clusters" : "clusters_long";
    for (uint64_t seed : {rng(), rng()}) {
      ASSERT_TRUE(ws->fill_inputs(seed, stream_).ok());
      const std::vector<double> ref = reference(*ws);
      for (int run = 0; run < (small ? 2 : 3); ++run) {
        const double e = rel(step(*ws, chosen), ref);
        EXPECT_LE(e, tolerance) << "run " << run;
        std::printf("%s cache %lld run %d: rel error %.3g\n", chosen.c_str(), (long long)cache, run,
                    e);
      }
      if (small) break;
    }
    if (small) continue;
    // The other kernel by name: with the key passes where none runs, or without them where the
    // keys do not fit (an error that says so, nothing launched).
    if (fits) {
      ASSERT_TRUE(ws->force_variant("megakernel", "clusters_long").ok());
      const std::vector<double> ref = reference(*ws);
      for (int run = 0; run < 2; ++run)
        EXPECT_LE(rel(step(*ws, "clusters_long"), ref), tolerance) << "clusters_long " << run;
    } else if ((cache + 7) / 8 > 266) {
      ASSERT_TRUE(ws->force_variant("megakernel", "clusters").ok());
      const Status st = ws->launch(4, 0, stream_);
      EXPECT_FALSE(st.ok());
      EXPECT_NE(st.message().find("outgrow its head buffer"), std::string::npos) << st.message();
    }
  }
  if (small) return;
  // Other copies of the sums (FL_CLUSTER_A_COPIES and FL_CLUSTER_M_COPIES, a measurement:
  // A's 4, M's 1, then M's 8), then back to the step's own.
  setenv("FL_CLUSTER_A_COPIES", "4", 1);
  setenv("FL_CLUSTER_M_COPIES", "1", 1);
  std::unique_ptr<Workspace> ws;
  ASSERT_TRUE(lesson_->create_workspace(Shape{515, 1}, Precision::bf16, &ws).ok());
  ASSERT_TRUE(ws->fill_inputs(rng(), stream_).ok());
  const std::vector<double> ref = reference(*ws);
  for (int run = 0; run < 2; ++run)
    EXPECT_LE(rel(step(*ws, "clusters"), ref), tolerance) << "other copies";
  setenv("FL_CLUSTER_M_COPIES", "8", 1);  // (the most M's room holds)
  for (int run = 0; run < 2; ++run) EXPECT_LE(rel(step(*ws, "clusters"), ref), tolerance) << "M 8";
  unsetenv("FL_CLUSTER_A_COPIES");
  unsetenv("FL_CLUSTER_M_COPIES");
  for (int run = 0; run < 2; ++run)
    EXPECT_LE(rel(step(*ws, "clusters"), ref), tolerance) << "copies after";
  // Fewer clusters than fit (FL_CLUSTER_CLUSTERS): 13, and 12, where no block is left without a
  // head task and the final norm's block zeroes every layer's sums; then all again.
  for (const char* n : {"13", "12"}) {
    setenv("FL_CLUSTER_CLUSTERS", n, 1);
    for (int run = 0; run < 2; ++run)
      EXPECT_LE(rel(step(*ws, "clusters"), ref), tolerance) << n << " clusters";
  }
  unsetenv("FL_CLUSTER_CLUSTERS");
  for (int run = 0; run < 2; ++run)
    EXPECT_LE(rel(step(*ws, "clusters"), ref), tolerance) << "all clusters";
}

}  // namespace
}  // namespace fl
