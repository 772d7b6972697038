// Every lesson in the catalog, on the GPU: every fusion level, fp32 and bf16, at random sizes
// including odd ones (not multiples of the 4- or 8-element vector, nor of a 256-thread block;
// odd row lengths for row-wise lessons), fresh random inputs, outputs poisoned first. Each
// result is compared with the lesson's CPU reference in double, and the GPU's own fp64 check
// (what the live engine gates on) must agree with that comparison.
//
// Tolerances are the lessons' own (Lesson::tolerance), relative L2 error vs the double
// reference: fp32 1e-5 for elementwise lessons, bf16 1e-2 (8 significant bits per output).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

#include "app/measure/live_backend.h"
#include "kernels/catalog.h"

namespace fl {
namespace {

struct Compared {
  double rel_l2 = 0;
  int64_t non_finite = 0;
};

// FL_TEST_LEVELS ("2" or "0,2") limits which fusion levels the tests run; unset runs them all.
// scripts/gpu-check.sh sets it under racecheck, where cuBLASLt's bf16 kernels stop the sanitizer
// itself ("failed to handle a hardware exception"), so only our kernels' levels are run there.
bool level_selected(int level) {
  const char* list = std::getenv("FL_TEST_LEVELS");
  if (list == nullptr || *list == '\0') return true;
  for (const char* p = list; *p != '\0';) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p) return false;  // malformed: run nothing rather than guess
    if (v == level) return true;
    p = (*end == ',') ? end + 1 : end;
  }
  return false;
}

Compared compare_with_cpu(const Lesson& lesson, Workspace& ws, cudaStream_t stream) {
  std::vector<HostTensor> inputs, outputs;
  const Status st = ws.download(stream, &inputs, &outputs);
  EXPECT_TRUE(st.ok()) << st.message();
  const std::vector<HostTensor> ref = lesson.reference(inputs);
  EXPECT_EQ(ref.size(), outputs.size());
  Compared c;
  double err2 = 0, ref2 = 0;
  int64_t count = 0;
  for (size_t t = 0; t < ref.size() && t < outputs.size(); ++t) {
    EXPECT_EQ(ref[t].values.size(), outputs[t].values.size()) << ref[t].name;
    for (size_t i = 0; i < ref[t].values.size() && i < outputs[t].values.size(); ++i) {
      const double out = outputs[t].values[i];
      if (!std::isfinite(out)) {
        ++c.non_finite;
        continue;
      }
      const double d = out - ref[t].values[i];
      err2 += d * d;
      ref2 += ref[t].values[i] * ref[t].values[i];
      ++count;
    }
  }
  c.rel_l2 = relative_l2_error(err2, ref2, count, lesson.rms_floor());
  return c;
}

// Random test shapes: a few tiny and odd ones, then random odd ones; the total element count is
// capped so the CPU reference stays quick. Row-wise lessons also get odd row lengths.
std::vector<Shape> test_shapes(const Lesson& lesson, std::mt19937_64& rng) {
  const SizeAxis& axis = lesson.info().size_axis;
  const bool rowwise = axis.inner_default > 0;
  const int64_t max_elements = int64_t(3) << 20;
  std::vector<Shape> shapes;
  auto add = [&](int64_t size, int64_t inner) {
    size = std::clamp<int64_t>(size, std::max<int64_t>(axis.min, 1), axis.max);
    if (rowwise) inner = std::clamp<int64_t>(inner, 1, axis.inner_max > 0 ? axis.inner_max : inner);
    // FL_TEST_MAX_INNER caps the row length (scripts/gpu-check.sh does under racecheck, which
    // instruments every shared-memory access of the GEMM lessons' long rows).
    if (rowwise && std::getenv("FL_TEST_MAX_INNER") != nullptr) {
      inner = std::min<int64_t>(inner,
                                std::max<int64_t>(1, std::atoll(std::getenv("FL_TEST_MAX_INNER"))));
    }
    // GEMM lessons: the CPU reference costs the GEMM's flops in double, so their rows are capped
    // at ~4e8 flops per shape (at least 3 rows; at C = 781 that leaves 41 to 109 rows, so the
    // teaching GEMM's 64-row tiles are crossed). Their GPU check compares every row up to 4096,
    // as the CPU reference here does.
    const auto launches =
        lesson.traffic(0, lesson.resolve({1, rowwise ? inner : 0}), Precision::fp32);
    double flops_per_row = 0;
    for (const LaunchTraffic& t : launches) flops_per_row += t.flops;
    if (flops_per_row > 1e5) {
      // FL_TEST_MAX_FLOPS lowers the cap (scripts/gpu-check.sh does under compute-sanitizer).
      static const double cap =
          std::getenv("FL_TEST_MAX_FLOPS") ? std::atof(std::getenv("FL_TEST_MAX_FLOPS")) : 4e8;
      size = std::min<int64_t>(size,
                               std::max<int64_t>(3, static_cast<int64_t>(cap / flops_per_row)) | 1);
    }
    // The GEMM lessons' GPU check compares every row up to 4096 (gemm::kCheckedRows) and samples
    // beyond; the CPU reference compares all, so their shapes stay within 4096 rows (a short row,
    // C = 5, escapes the flops cap above).
    if (axis.unit == "tokens") size = std::min<int64_t>(size, 4095);
    shapes.push_back(lesson.resolve({size, rowwise ? inner : 0}));
  };
  if (rowwise) {
    const int64_t c = axis.inner_default;
    add(1, c);
    add(3, 1);
    add(7, 781);  // Triton's tutorial shape 1823 x 781
    add(1823, 781);
    add(257, c);
    add(37, c);  // the LayerNorm-Linear's cluster kernel (17-256 tokens), also under the sanitizers
    // Long rows: split over hundreds of threads, with block-wide reductions.
    const int64_t longest = axis.inner_max > 0 ? axis.inner_max : 16384;
    add(3, std::min<int64_t>(8193, longest));
    add(2, longest);
    add(int64_t(rng() % 2000) | 1, c);
    for (int i = 0; i < 3; ++i) {
      const int64_t inner =
          int64_t(rng() % std::min<int64_t>(4097, axis.inner_max > 0 ? axis.inner_max : 4097)) | 1;
      add(int64_t(rng() % std::max<int64_t>(1, max_elements / inner)) | 1, inner);
    }
  } else {
    for (int64_t n : {int64_t(1), int64_t(3), int64_t(7), int64_t(257), int64_t(1000003)})
      add(n, 0);
    for (int i = 0; i < 4; ++i) add(int64_t(rng() % max_elements) | 1, 0);
  }
  return shapes;
}

struct Case {
  const Lesson* lesson;
  Precision precision;
};

class LessonGpu : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    device_ = query_device();
    if (!device_.usable) GTEST_FAIL() << "gpu test without a GPU: " << device_.unusable_reason;
    const std::string why =
        precision_unsupported_reason(GetParam().precision, device_.cc_major, device_.cc_minor);
    if (!why.empty()) GTEST_SKIP() << why;
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  Status run_level(Workspace& ws, const Lesson& lesson, int level) {
    for (size_t k = 0; k < lesson.info().levels[level].launches.size(); ++k) {
      FL_TRY(ws.launch(level, static_cast<int>(k), stream_));
    }
    return Status::Ok();
  }
  DeviceFacts device_;
  cudaStream_t stream_ = nullptr;
};

TEST_P(LessonGpu, EveryLevelMatchesTheReferenceAtRandomOddSizes) {
  const Lesson& lesson = *GetParam().lesson;
  const Precision p = GetParam().precision;
  // A lesson whose smallest run already costs the CPU reference over 1e10 FLOPs in double (the
  // attention sublayer: every run holds ~16,384 tokens through two Linear layers) is compared
  // with it by its own GPU test, at batch sizes the Lesson interface cannot ask for.
  double smallest = 0;
  for (const LaunchTraffic& t :
       lesson.traffic(0, lesson.resolve({lesson.info().size_axis.min, 0}), Precision::fp32)) {
    smallest += t.flops;
  }
  if (smallest > 1e10) GTEST_SKIP() << "too large for the CPU reference; its own test covers it";
  std::mt19937_64 rng(std::random_device{}());
  for (const Shape& shape : test_shapes(lesson, rng)) {
    std::unique_ptr<Workspace> ws;
    const Status created = lesson.create_workspace(shape, p, &ws);
    ASSERT_TRUE(created.ok()) << created.message();
    for (int level = 0; level < lesson.level_count(); ++level) {
      if (!level_selected(level)) continue;
      SCOPED_TRACE(lesson.info().id + " size=" + std::to_string(shape.size) +
                   " inner=" + std::to_string(shape.inner) + " level=" + std::to_string(level) +
                   " " + to_string(p));
      ASSERT_TRUE(ws->fill_inputs(rng(), stream_).ok());
      ASSERT_TRUE(ws->poison_outputs(stream_).ok());
      const Status ran = run_level(*ws, lesson, level);
      ASSERT_TRUE(ran.ok()) << ran.message();
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);

      CheckResult gpu;
      ASSERT_TRUE(ws->check(stream_, &gpu).ok());
      const Compared cpu = compare_with_cpu(lesson, *ws, stream_);
      EXPECT_EQ(cpu.non_finite, 0) << "outputs left unwritten (still poisoned)";
      EXPECT_LE(cpu.rel_l2, lesson.tolerance(p));
      EXPECT_TRUE(gpu.passed) << "GPU check: rel " << gpu.rel_l2_error << ", non-finite "
                              << gpu.non_finite;
      // The GPU's fp64 reference must measure the same error the CPU reference does.
      EXPECT_NEAR(gpu.rel_l2_error, cpu.rel_l2, 1e-2 * cpu.rel_l2 + 1e-12);
    }
  }
}

TEST_P(LessonGpu, TheCheckCatchesUnwrittenOutputs) {
  const Lesson& lesson = *GetParam().lesson;
  const Shape shape = lesson.resolve({std::max<int64_t>(lesson.info().size_axis.min, 37), 0});
  std::unique_ptr<Workspace> ws;
  ASSERT_TRUE(lesson.create_workspace(shape, GetParam().precision, &ws).ok());
  ASSERT_TRUE(ws->fill_inputs(42, stream_).ok());
  ASSERT_TRUE(ws->poison_outputs(stream_).ok());
  // Nothing launched: every output is still NaN, and the gate must say so.
  CheckResult gpu;
  ASSERT_TRUE(ws->check(stream_, &gpu).ok());
  EXPECT_FALSE(gpu.passed);
  EXPECT_GT(gpu.non_finite, 0);
}

// The GEMM lessons' own kernels (the top level) at shapes the CPU reference is too slow for:
// thousands of tokens cross the large-tile path of the LayerNorm-prologue GEMM and make every
// block of the fused FFN walk several token chunks. The GPU's fp64 check compares every row
// (up to 4096) of each. Each shape runs twice with fresh inputs and outputs poisoned again: the
// fused FFN keeps reduction state between runs (an fp32 accumulator and counters it leaves at
// zero), so a second run is where leftover state would show.
TEST_P(LessonGpu, TopLevelAtLargeShapesTwice) {
  const Lesson& lesson = *GetParam().lesson;
  const Precision p = GetParam().precision;
  const auto per_row = lesson.traffic(0, lesson.resolve({1, 0}), Precision::fp32);
  double flops_per_row = 0;
  for (const LaunchTraffic& t : per_row) flops_per_row += t.flops;
  if (flops_per_row < 1e5 || lesson.info().size_axis.unit != "tokens" ||
      std::getenv("FL_TEST_MAX_FLOPS") != nullptr) {
    GTEST_SKIP() << "only the GEMM lessons, and not under compute-sanitizer";
  }
  const int top = lesson.level_count() - 1;
  std::mt19937_64 rng(std::random_device{}());
  const int64_t random_rows =
      1025 + int64_t(rng() % 3000) * 2;  // odd, 1025..7023 -> capped at 4096 checked
  // 1, 16, 31, 64, 33 and 3 tokens at C = 768, 768, 768, 768, 800 and 96: the fused FFN's
  // small-token kernel (Hopper, bf16, up to 64 tokens, C a multiple of 32), with one, two and four
  // 16-row tiles, a last cluster with half its 64 columns (C = 800: its blocks copy x unshared) and
  // a block's 48 hidden rows inside one box (C = 96); its grid barrier's count is never reset, so
  // the second run must find the next multiple of the grid size. 13 tokens at C = 781: the
  // cluster kernel, whose accumulator and per-column-range counters must also come back clean
  // (and the split-hidden kernel's, elsewhere). 255, 97 and 5 tokens
  // at C = 768, 1024, 640: the LayerNorm-Linear's cluster kernel (Hopper, bf16, up to 256
  // tokens, C a multiple of 64), in 4, 2 and 1 chunks of 64 rows, partly filled. 4096, 16385,
  // 2047 and 301 tokens: the LayerNorm-Linear's wgmma kernel (Hopper, bf16, C a multiple of 8 up
  // to 768): its last 128-row block holds 1 and 127 rows, C = 520 ends K in half a ring slot and
  // N = 1560 in a partial 128-column tile, C = 64 is a single K-block.
  for (const Shape shape :
       {Shape{4096, 768}, Shape{random_rows, 1000}, Shape{1999, 777}, Shape{130, 2048},
        Shape{64, 768}, Shape{13, 781}, Shape{255, 768}, Shape{97, 1024}, Shape{5, 640},
        Shape{16385, 768}, Shape{2047, 520}, Shape{301, 64}, Shape{1, 768}, Shape{16, 768},
        Shape{31, 768}, Shape{33, 800}, Shape{3, 96}}) {
    std::unique_ptr<Workspace> ws;
    const Status created = lesson.create_workspace(lesson.resolve(shape), p, &ws);
    ASSERT_TRUE(created.ok()) << created.message();
    for (int run = 0; run < 2; ++run) {
      SCOPED_TRACE(lesson.info().id + " size=" + std::to_string(shape.size) +
                   " inner=" + std::to_string(shape.inner) + " run " + std::to_string(run) + " " +
                   to_string(p));
      ASSERT_TRUE(ws->fill_inputs(rng(), stream_).ok());
      ASSERT_TRUE(ws->poison_outputs(stream_).ok());
      const Status ran = run_level(*ws, lesson, top);
      ASSERT_TRUE(ran.ok()) << ran.message();
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      CheckResult gpu;
      ASSERT_TRUE(ws->check(stream_, &gpu).ok());
      EXPECT_EQ(gpu.non_finite, 0);
      EXPECT_TRUE(gpu.passed) << "rel " << gpu.rel_l2_error << " (tolerance " << gpu.tolerance
                              << ")";
    }
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const Lesson* lesson : lessons()) {
    for (Precision p : lesson->info().precisions) cases.push_back({lesson, p});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Catalog, LessonGpu, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) {
                           return info.param.lesson->info().id + "_" +
                                  to_string(info.param.precision);
                         });

}  // namespace
}  // namespace fl
