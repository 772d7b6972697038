// The live backend and the engine on a real GPU: measurements come back checked and timed,
// impossible requests are refused with a sentence, and the engine recovers afterwards.
// These assert behaviour, not speed: figures belong to `fusionlab bench`.
#include "app/measure/live_backend.h"

#include <gtest/gtest.h>

#include "app/measure/engine.h"
#include "kernels/catalog.h"

namespace fl {
namespace {

std::unique_ptr<LiveBackend> make_backend() {
  LiveOptions options;
  options.min_repetitions = 5;
  options.target_seconds = 0.02;
  std::unique_ptr<LiveBackend> backend;
  const Status st = LiveBackend::create(options, &backend);
  EXPECT_TRUE(st.ok()) << st.message();
  return backend;
}

TEST(LiveBackend, MeasuresEveryLevelCheckedAndTimed) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  EXPECT_FALSE(backend->device().name.empty());
  EXPECT_GT(backend->device().sm_count, 0);
  for (CacheMode cache : {CacheMode::cold, CacheMode::warm}) {
    std::vector<Measurement> ms;
    const Status st =
        backend->measure({"gelu_scale", 1000003, {}, Precision::fp32, cache}, nullptr, &ms);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(ms.size(), 2u);
    for (const Measurement& m : ms) {
      EXPECT_TRUE(m.check.passed) << m.check.rel_l2_error;
      EXPECT_GE(m.repetitions, 5);
      EXPECT_GT(m.chain_time_us.min, 0);
      EXPECT_LE(m.chain_time_us.min, m.chain_time_us.median);
      EXPECT_LE(m.chain_time_us.median, m.chain_time_us.max);
      EXPECT_GT(m.chain_copy_gbps, 0);
      for (const LaunchResult& l : m.launches) EXPECT_GT(l.time_us.median, 0);
    }
    EXPECT_EQ(ms[0].launches.size(), 2u);
    EXPECT_EQ(ms[1].launches.size(), 1u);
  }
}

TEST(LiveBackend, RefusesImpossibleRequestsAndRecovers) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  std::vector<Measurement> ms;
  Status st = backend->measure(
      {"gelu_scale", int64_t(1) << 40, {}, Precision::fp32, CacheMode::cold}, nullptr, &ms);
  EXPECT_FALSE(st.ok());
  st = backend->measure({"gelu_scale", 1024, {7}, Precision::fp32, CacheMode::cold}, nullptr, &ms);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("levels"), std::string::npos) << st.message();
  st = backend->measure({"no_such_lesson", 1024, {}, Precision::fp32, CacheMode::cold}, nullptr,
                        &ms);
  EXPECT_FALSE(st.ok());
  st = backend->measure({"gelu_scale", 4097, {}, Precision::fp32, CacheMode::cold}, nullptr, &ms);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(ms.size(), 2u);
}

TEST(LiveBackend, LargestFittingSizeIsBelowDeviceMemory) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const Lesson& lesson = *find_lesson("gelu_scale");
  const int64_t fits = backend->largest_fitting_size(lesson, Precision::fp32);
  EXPECT_GT(fits, 0);
  EXPECT_LE(lesson.workspace_bytes(fits, Precision::fp32), backend->device().memory_bytes);
}

TEST(Engine, RunsALiveRequestOnItsWorkerThread) {
  Engine engine([](std::unique_ptr<MeasureBackend>* out) {
    std::unique_ptr<LiveBackend> live;
    LiveOptions options;
    options.min_repetitions = 5;
    options.target_seconds = 0.02;
    FL_TRY(LiveBackend::create(options, &live));
    *out = std::move(live);
    return Status::Ok();
  });
  ASSERT_TRUE(engine.wait_idle(60000));
  ASSERT_EQ(engine.status().state, EngineState::ready) << engine.status().unavailable_reason;
  engine.submit({"gelu_scale", 1 << 20, {}, Precision::fp32, CacheMode::cold});
  ASSERT_TRUE(engine.wait_idle(60000));
  const auto results = engine.poll();
  // The timing result, then (where counters can be measured) the counters result.
  ASSERT_EQ(results.size(), engine.status().counters_note.empty() ? 2u : 1u);
  ASSERT_TRUE(results[0].status.ok()) << results[0].status.message();
  EXPECT_EQ(results[0].phase, EnginePhase::timing);
  ASSERT_EQ(results[0].measurements.size(), 2u);
  EXPECT_GT(speedup(results[0].measurements[0], results[0].measurements[1]), 0);
}

}  // namespace
}  // namespace fl
