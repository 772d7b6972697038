// Lesson 9, attention, on the GPU beyond the catalog-wide tests (lessons_gpu_test.cpp, which run
// the lesson's own H = 12, B = 16384 / T at short lengths): every level at shapes the Lesson
// interface cannot ask for (head counts other than 12, odd lengths that are no multiple of any
// tile, T = 1, head sizes that are not 64 or 128), each compared with the CPU reference in
// double, outputs poisoned first and inputs fresh; then the lesson's own shapes at lengths the
// CPU reference is too slow for, checked by the GPU's fp64 check. Level 3 is the Hopper kernel
// where it can run (sm_90a build on compute capability 9.0, bf16, d = 64 or 128) and level 2's
// kernel elsewhere: the tests say which ran, so a fallback cannot pass for the Hopper kernel.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "app/measure/live_backend.h"
#include "kernels/attention/attention.h"
#include "kernels/blas.h"
#include "kernels/catalog.h"
#include "kernels/level_table.h"
#include "tests/support/level_gpu_test.h"

namespace fl {
namespace {

struct AttentionShape {
  int64_t batch;
  int heads, length, dim;
};

// The variant level 3 must have run at length T and head size d in precision p on this GPU and
// build: the wgmma kernel where the table prefers it (from T = 2K at d = 64, from 512 at d = 128),
// else what level 2 runs there.
std::string expected_top_variant(int64_t length, int dim, Precision p) {
  const GpuFacts gpu = current_gpu_facts();
  const bool hopper = gpu.cc_major == 9 && gpu.cc_minor == 0 && gpu.wgmma_build;
  if (hopper && p == Precision::bf16 && (dim == 64 || dim == 128) &&
      length >= (dim == 128 ? 512 : 2048)) {
    return "flash_wgmma";
  }
  return find_lesson("attention")->choose_variant(2, 0, {length, dim}, p, gpu).name;
}

class AttentionGpu : public LevelGpuTest {
 protected:
  AttentionGpu() : LevelGpuTest("attention") {}
  // Runs `level` on fresh inputs with poisoned outputs; returns the GPU check's result.
  CheckResult run(Workspace& ws, int level, uint64_t seed) {
    EXPECT_TRUE(ws.fill_inputs(seed, stream_).ok());
    return run_level(ws, level);
  }
  // The last run's output against the CPU reference in double; returns the relative error.
  // `rows` = B H T: at most 4096, the GPU's check saw every row and must agree.
  double expect_matches_reference(Workspace& ws, const CheckResult& gpu, Precision p,
                                  int64_t rows) {
    std::vector<HostTensor> inputs, outputs;
    EXPECT_TRUE(ws.download(stream_, &inputs, &outputs).ok());
    const std::vector<HostTensor> ref = lesson_->reference(inputs);
    if (ref.size() != 1u || outputs.size() != 1u ||
        ref[0].values.size() != outputs[0].values.size()) {
      ADD_FAILURE() << "the output and the reference differ in shape";
      return 1.0;
    }
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
    if (rows <= 4096) {
      EXPECT_NEAR(gpu.rel_l2_error, rel, 1e-2 * rel + 1e-12);
    }
    return rel;
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
      {2, 1, 45, 5},    // a head size of no whole 16-byte vector: element-wise copies
      {2, 4, 449, 64},  // past two 192-query blocks and three 128-key tiles of the Hopper kernel
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
      if (level == 3) EXPECT_EQ(ws->variant_ran(3, 0), expected_top_variant(s.length, s.dim, p));
      const double rel = expect_matches_reference(*ws, gpu, p, s.batch * s.heads * s.length);
      std::printf("attention B=%lld H=%d T=%d d=%d level %d %s: rel %.3e\n",
                  static_cast<long long>(s.batch), s.heads, s.length, s.dim, level, to_string(p),
                  rel);
    }
    // Level 3's Hopper kernel, forced at these lengths (short ones the table gives level 2): it
    // runs and matches too.
    if (level_selected(3) && expected_top_variant(2048, s.dim, p) == "flash_wgmma") {
      SCOPED_TRACE("flash_wgmma T=" + std::to_string(s.length) + " d=" + std::to_string(s.dim));
      ASSERT_TRUE(ws->force_variant("flash_attention", "flash_wgmma").ok());
      const CheckResult gpu = run(*ws, 3, rng());
      EXPECT_EQ(ws->variant_ran(3, 0), "flash_wgmma");
      const double rel = expect_matches_reference(*ws, gpu, p, s.batch * s.heads * s.length);
      std::printf("attention B=%lld H=%d T=%d d=%d level 3 flash_wgmma: rel %.3e\n",
                  static_cast<long long>(s.batch), s.heads, s.length, s.dim, rel);
      ASSERT_TRUE(ws->force_variant("flash_attention", "").ok());
    }
    // Level 2's variants (d <= 64, sm_90: the 128-key tiles in bf16, the register-tiled kernels
    // in fp32), each forced: it runs and matches too.
    if (s.dim > 64 || !level_selected(2) || current_gpu_facts().cc_major < 9) continue;
    const std::vector<const char*> variants = p == Precision::bf16
                                                  ? std::vector<const char*>{"flash_mma_keys128"}
                                                  : std::vector<const char*>{"flash_fp32_tiles"};
    for (const char* variant : variants) {
      SCOPED_TRACE(std::string(variant) + " T=" + std::to_string(s.length) +
                   " d=" + std::to_string(s.dim));
      ASSERT_TRUE(ws->force_variant("flash_attention", variant).ok());
      const CheckResult gpu = run(*ws, 2, rng());
      EXPECT_EQ(ws->variant_ran(2, 0), variant);
      const double rel = expect_matches_reference(*ws, gpu, p, s.batch * s.heads * s.length);
      std::printf("attention B=%lld H=%d T=%d d=%d level 2 %s: rel %.3e\n",
                  static_cast<long long>(s.batch), s.heads, s.length, s.dim, variant, rel);
    }
    ASSERT_TRUE(ws->force_variant("flash_attention", "").ok());
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
      if (level == 3) {
        EXPECT_EQ(ws->variant_ran(3, 0), expected_top_variant(shape.size, int(shape.inner), p));
      }
      EXPECT_EQ(gpu.non_finite, 0);
      EXPECT_TRUE(gpu.passed) << "rel " << gpu.rel_l2_error << " (tolerance " << gpu.tolerance
                              << ")";
      std::printf("attention T=%lld d=%lld level %d %s: GPU check rel %.3e\n",
                  static_cast<long long>(shape.size), static_cast<long long>(shape.inner), level,
                  to_string(p), gpu.rel_l2_error);
    }
  }
}

// Levels 2 and 3 measured by the live engine with phases asked for, at T = 1000 (odd: a ragged
// last query tile) and both head sizes: every block of the grid CUPTI saw leaves one record of
// every declared phase, in order, and the kernel CUPTI named is the variant the level ran.
TEST(AttentionPhases, FlashKernelsRecordEveryPhaseOfEveryBlock) {
  if (current_gpu_facts().cc_major < 8) GTEST_SKIP() << "bf16 needs compute capability 8.0";
  LiveOptions options;
  options.min_repetitions = 3;
  options.target_seconds = 0.01;
  options.counters = false;
  std::unique_ptr<LiveBackend> backend;
  ASSERT_TRUE(LiveBackend::create(options, &backend).ok());
  const Lesson* lesson = find_lesson("attention");
  ASSERT_NE(lesson, nullptr);
  for (const int64_t dim : {64, 128}) {
    for (const int level : {2, 3}) {
      SCOPED_TRACE("d=" + std::to_string(dim) + " level " + std::to_string(level));
      MeasureRequest r{"attention", 1000, {level}, Precision::bf16, CacheMode::cold};
      r.inner = dim;
      r.phases = true;
      std::vector<Measurement> ms;
      const Status st = backend->measure(r, nullptr, &ms);
      ASSERT_TRUE(st.ok()) << st.message();
      ASSERT_EQ(ms.size(), 1u);
      const Measurement& m = ms[0];
      ASSERT_TRUE(m.check.passed) << m.check.rel_l2_error;
      ASSERT_EQ(m.launches.size(), 1u);
      const std::string ran = m.launches[0].variant;
      if (level == 3) EXPECT_EQ(ran, expected_top_variant(1000, int(dim), Precision::bf16));
      for (const KernelRecord& k : m.records) {
        if (level == 3) {
          EXPECT_EQ(
              variant_of_kernel(lesson->info().levels[3].variants, "flash_attention", k.kernel),
              ran)
              << "CUPTI named " << k.kernel;
        }
      }
      ASSERT_TRUE(m.launches[0].phases) << "the flash kernel recorded no phases";
      const LaunchPhases& p = *m.launches[0].phases;
      EXPECT_EQ(p.lost, 0);
      ASSERT_GE(p.names.size(), 3u);
      std::map<uint32_t, std::vector<PhaseRecord>> by_block;
      for (const PhaseRecord& rec : p.records) by_block[rec.block].push_back(rec);
      size_t blocks = by_block.size();
      if (!m.records.empty()) {
        const auto& g = m.records[0].grid;
        blocks = size_t(g[0]) * g[1] * g[2];
      }
      EXPECT_EQ(by_block.size(), blocks);
      for (auto& [block, recs] : by_block) {
        ASSERT_EQ(recs.size(), p.names.size()) << "block " << block;
        std::sort(recs.begin(), recs.end(),
                  [](const PhaseRecord& a, const PhaseRecord& b) { return a.phase < b.phase; });
        for (size_t i = 0; i < recs.size(); ++i) {
          EXPECT_EQ(recs[i].phase, i);
          EXPECT_LE(recs[i].start_ns, recs[i].end_ns);
          if (i > 0) EXPECT_EQ(recs[i].start_ns, recs[i - 1].end_ns);
        }
      }
      std::printf("attention d=%lld level %d (%s): %zu blocks, phases on %.1f us, off %.1f us\n",
                  static_cast<long long>(dim), level, ran.c_str(), by_block.size(), p.time_on_us,
                  p.time_off_us);
    }
  }
}

// Peak device memory per level: the live engine records what each level holds (Q, K, V, O at
// every level; S and P, T x T per head, and cuBLASLt's workspace at levels 0 and 1 only), and
// cudaMemGetInfo around a workspace's allocation sees those bytes leave the free memory (plus at
// most the rounding of its allocations).
TEST(AttentionMemory, EachLevelRecordsTheDeviceMemoryItHolds) {
  if (current_gpu_facts().cc_major < 8) GTEST_SKIP() << "bf16 needs compute capability 8.0";
  const Lesson* lesson = find_lesson("attention");
  ASSERT_NE(lesson, nullptr);
  constexpr int64_t kLength = 1000, kDim = 64, kBatch = 16384 / kLength, kHeads = 12;
  const int64_t qkvo = 4 * kBatch * kHeads * kLength * kDim * 2;
  const int64_t scores = 2 * kBatch * kHeads * kLength * kLength * 2;
  {
    size_t free_before = 0, free_after = 0, total = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
    std::unique_ptr<Workspace> ws;
    ASSERT_TRUE(lesson->create_workspace({kLength, kDim}, Precision::bf16, &ws).ok());
    ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
    const int64_t taken = int64_t(free_before) - int64_t(free_after);
    EXPECT_GE(taken, qkvo + scores);
    EXPECT_LE(taken, qkvo + scores + (int64_t(64) << 20)) << "7 buffers, rounded up";
    EXPECT_EQ(ws->level_device_bytes(2), qkvo);
    EXPECT_EQ(ws->level_device_bytes(3), qkvo);
  }
  LiveOptions options;
  options.min_repetitions = 3;
  options.target_seconds = 0.01;
  options.counters = false;
  std::unique_ptr<LiveBackend> backend;
  ASSERT_TRUE(LiveBackend::create(options, &backend).ok());
  MeasureRequest r{"attention", kLength, {0, 1, 2, 3}, Precision::bf16, CacheMode::cold};
  r.inner = kDim;
  std::vector<Measurement> ms;
  const Status st = backend->measure(r, nullptr, &ms);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(ms.size(), 4u);
  const int64_t cublas = blas::workspace_bytes();
  EXPECT_GT(cublas, 0) << "levels 0 and 1 ran cuBLASLt";
  for (const Measurement& m : ms) {
    SCOPED_TRACE("level " + std::to_string(m.level));
    EXPECT_TRUE(m.check.passed);
    EXPECT_EQ(m.peak_device_bytes, m.level < 2 ? qkvo + scores + cublas : qkvo);
    std::printf("attention T=%lld d=%lld level %d: peak device memory %lld bytes\n",
                static_cast<long long>(kLength), static_cast<long long>(kDim), m.level,
                static_cast<long long>(m.peak_device_bytes));
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
