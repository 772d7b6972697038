// Bounded memory: every cache and history the long-running app keeps stays at its cap
// however many results go through it (model/caps.h, docs/RELIABILITY.md).
#include "model/caps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "app/measure/engine.h"

namespace fl {
namespace {

TEST(CopyReferenceCache, StaysAtItsCapAndForgetsTheOldestFirst) {
  CopyReferenceCache cache(8);
  std::vector<CopyBandwidth> list;
  // A drag: every size a new byte count, in both cache modes.
  for (int64_t i = 1; i <= 5000; ++i) {
    const CacheMode mode = i % 2 ? CacheMode::cold : CacheMode::warm;
    cache.add(i * 16, mode, 1000.0 + i, &list);
    ASSERT_LE(cache.size(), 8u);
    ASSERT_EQ(list.size(), cache.size()) << "the device facts' list follows the cache";
  }
  EXPECT_EQ(cache.size(), 8u);
  double gbps = 0;
  EXPECT_FALSE(cache.find(16, CacheMode::cold, &gbps)) << "the oldest is forgotten";
  ASSERT_TRUE(cache.find(5000 * 16, CacheMode::warm, &gbps));
  EXPECT_DOUBLE_EQ(gbps, 6000.0);
  // The list stays sorted (cold before warm, then by bytes) and holds the newest eight.
  EXPECT_TRUE(std::is_sorted(list.begin(), list.end(), [](const auto& a, const auto& b) {
    return a.cache != b.cache ? a.cache < b.cache : a.bytes < b.bytes;
  }));
  for (const CopyBandwidth& c : list) EXPECT_GT(c.bytes, 2 * 16 * (5000 - 8));
}

TEST(CopyReferenceCache, MeasuringAgainReplacesInsteadOfAdding) {
  CopyReferenceCache cache(4);
  std::vector<CopyBandwidth> list;
  for (int round = 0; round < 100; ++round) cache.add(1 << 20, CacheMode::cold, round, &list);
  EXPECT_EQ(cache.size(), 1u);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].bytes, int64_t(2) << 20);
  EXPECT_DOUBLE_EQ(list[0].gbps, 99.0);
}

TEST(CopyReferenceCache, TheDefaultCapIsTheDocumentedOne) {
  EXPECT_EQ(CopyReferenceCache().cap(), kMaxCopyReferences);
}

Measurement point(int64_t size, int level) {
  Measurement m;
  m.lesson = "gelu_scale";
  m.size = size;
  m.level = level;
  return m;
}

TEST(TrimOldest, KeepsTheNewestUpToTheCap) {
  std::vector<Measurement> history;
  for (int64_t s = 1; s <= 10000; ++s) {
    history.push_back(point(s, 0));
    history.push_back(point(s, 1));
    trim_oldest(&history, 100);
    ASSERT_LE(history.size(), 100u);
  }
  EXPECT_EQ(history.front().size, 10000 - 49);
  EXPECT_EQ(history.back().size, 10000);
  EXPECT_EQ(history.back().level, 1);
}

TEST(KeepRecentHalf, BoundsARunningWindow) {
  std::vector<double> samples;
  for (int i = 0; i < 100000; ++i) {
    keep_recent_half(&samples, 1000);
    samples.push_back(i);
    ASSERT_LE(samples.size(), 1000u);
  }
  EXPECT_EQ(samples.back(), 99999.0);
  EXPECT_GE(samples.size(), 500u);
}

// Answers at once with one two-launch measurement.
class InstantBackend final : public MeasureBackend {
 public:
  InstantBackend() { device_.usable = true; }
  const DeviceFacts& device() const override { return device_; }
  const char* kind() const override { return "fake"; }
  Status measure(const MeasureRequest& request, const CancelCheck&,
                 std::vector<Measurement>* out) override {
    Measurement m = point(request.size, 0);
    m.check.passed = true;
    m.launches.resize(2);
    out->push_back(m);
    return Status::Ok();
  }

 private:
  DeviceFacts device_;
};

TEST(EngineCaps, ResultsNobodyPollsStayAtTheCap) {
  Engine engine([](std::unique_ptr<MeasureBackend>* out) {
    *out = std::make_unique<InstantBackend>();
    return Status::Ok();
  });
  ASSERT_TRUE(engine.wait_idle(10000));
  const int64_t requests = static_cast<int64_t>(kMaxUnpolledResults) + 500;
  for (int64_t i = 1; i <= requests; ++i) {
    MeasureRequest r;
    r.lesson = "gelu_scale";
    r.size = i;
    engine.submit(r);
    ASSERT_TRUE(engine.wait_idle(10000));
  }
  const std::vector<EngineResult> results = engine.poll();
  ASSERT_EQ(results.size(), kMaxUnpolledResults);
  EXPECT_EQ(results.back().request.size, requests) << "the newest result is kept";
  EXPECT_TRUE(engine.poll().empty());
}

}  // namespace
}  // namespace fl
