// The engine's scheduling with a fake device: newest request wins, work in flight is cancelled,
// results come back without the caller waiting, and a missing GPU is reported, not fatal. The
// counter phase: only after the request has rested, abandoned for a newer request, cached, and
// replaced by one plain sentence where counters are not permitted.
#include "app/measure/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace fl {
namespace {

// Measures by sleeping in small steps, honouring cancellation like the live backend does
// between repetitions. Records every request it started.
class FakeBackend final : public MeasureBackend {
 public:
  explicit FakeBackend(std::vector<int64_t>* started, std::mutex* mutex, int step_ms = 5,
                       int steps = 40)
      : started_(started), mutex_(mutex), step_ms_(step_ms), steps_(steps) {
    device_.usable = true;
    device_.name = "Fake GPU";
  }
  const DeviceFacts& device() const override { return device_; }
  const char* kind() const override { return "fake"; }
  Status measure(const MeasureRequest& request, const CancelCheck& cancelled,
                 std::vector<Measurement>* out) override {
    {
      std::lock_guard<std::mutex> lock(*mutex_);
      started_->push_back(request.size);
    }
    if (request.size == 13) return Status::Error("size 13 is unlucky");
    for (int i = 0; i < steps_; ++i) {
      if (cancelled()) return Status::Ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(step_ms_));
    }
    Measurement m;
    m.lesson = request.lesson;
    m.size = request.size;
    m.level = 0;
    m.check.passed = true;
    m.launches.resize(2);
    out->push_back(m);
    return Status::Ok();
  }

 protected:
  DeviceFacts device_;
  std::vector<int64_t>* started_;
  std::mutex* mutex_;
  int step_ms_, steps_;
};

// A fake whose counters work: the counter phase takes `launch_ms` per launch (two launches),
// checks cancellation between launches like the range profiler code does, and fills DRAM read
// bytes = size. Counts the phases it started and finished.
class CountingBackend final : public MeasureBackend {
 public:
  explicit CountingBackend(int launch_ms = 20) : launch_ms_(launch_ms) {
    device_.usable = true;
    device_.name = "Fake GPU with counters";
  }
  const DeviceFacts& device() const override { return device_; }
  const char* kind() const override { return "fake"; }
  Status measure(const MeasureRequest& request, const CancelCheck&,
                 std::vector<Measurement>* out) override {
    Measurement m;
    m.lesson = request.lesson;
    m.size = request.size;
    m.level = 0;
    m.precision = request.precision;
    m.cache = request.cache;
    m.check.passed = true;
    m.launches.resize(2);
    out->push_back(m);
    return Status::Ok();
  }
  Status measure_counters(const MeasureRequest& request, const CancelCheck& cancelled,
                          std::vector<Measurement>* ms) override {
    ++started;
    last_started_size = request.size;
    for (Measurement& m : *ms) {
      if (m.counters_status == CountersStatus::measured) continue;
      for (auto& l : m.launches) {
        if (cancelled()) {
          ++abandoned;
          return Status::Ok();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(launch_ms_));
        l.counters = LaunchCounters{m.size, 2 * m.size, 3 * m.size};
      }
      m.counters_status = CountersStatus::measured;
    }
    ++finished;
    return Status::Ok();
  }
  bool counters_available() const override { return true; }

  std::atomic<int> started{0}, finished{0}, abandoned{0};
  std::atomic<int64_t> last_started_size{0};

 private:
  DeviceFacts device_;
  int launch_ms_;
};

// A fake on a system where counters are restricted to administrators.
class NoCountersBackend final : public MeasureBackend {
 public:
  static constexpr const char* kNote =
      "GPU performance counters are restricted to administrators on this system "
      "(ERR_NVGPUCTRPERM), so DRAM and L2 bytes are not measured (timings are): run as root, or "
      "set the nvidia driver option NVreg_RestrictProfilingToAdminUsers=0 and reboot.";
  NoCountersBackend() { device_.usable = true; }
  const DeviceFacts& device() const override { return device_; }
  const char* kind() const override { return "fake"; }
  Status measure(const MeasureRequest& request, const CancelCheck&,
                 std::vector<Measurement>* out) override {
    Measurement m;
    m.lesson = request.lesson;
    m.size = request.size;
    m.check.passed = true;
    m.launches.resize(1);
    m.chain_time_us.median = 12.5;
    out->push_back(m);
    return Status::Ok();
  }
  Status measure_counters(const MeasureRequest&, const CancelCheck&,
                          std::vector<Measurement>*) override {
    ++called;
    return Status::Error("must not be called");
  }
  std::string counters_note() const override { return kNote; }
  std::atomic<int> called{0};

 private:
  DeviceFacts device_;
};

MeasureRequest request_of(int64_t size) {
  MeasureRequest r;
  r.lesson = "gelu_scale";
  r.size = size;
  return r;
}

std::vector<EngineResult> drain(Engine& engine) {
  EXPECT_TRUE(engine.wait_idle(10000));
  return engine.poll();
}

TEST(Engine, ReportsAnUnavailableBackendAndStillAnswers) {
  Engine engine([](std::unique_ptr<MeasureBackend>*) {
    return Status::Error("No NVIDIA GPU was found on this machine.");
  });
  ASSERT_TRUE(engine.wait_idle(5000));
  const EngineStatus st = engine.status();
  EXPECT_EQ(st.state, EngineState::unavailable);
  EXPECT_EQ(st.unavailable_reason, "No NVIDIA GPU was found on this machine.");
  engine.submit(request_of(1024));
  const auto results = drain(engine);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].status.ok());
}

TEST(Engine, DraggedSliderCoalescesToTheNewestRequest) {
  std::vector<int64_t> started;
  std::mutex mutex;
  Engine engine([&](std::unique_ptr<MeasureBackend>* out) {
    *out = std::make_unique<FakeBackend>(&started, &mutex);
    return Status::Ok();
  });
  ASSERT_TRUE(engine.wait_idle(5000));
  EXPECT_EQ(engine.status().state, EngineState::ready);
  EXPECT_EQ(engine.status().device.name, "Fake GPU");

  // A drag: many sizes in quick succession. The first may start; the rest replace each other.
  for (int64_t size = 1; size <= 50; ++size) engine.submit(request_of(size * 1000));
  const auto results = drain(engine);

  int completed = 0;
  for (const auto& r : results) {
    if (!r.cancelled) {
      ++completed;
      EXPECT_EQ(r.request.size, 50000) << "only the newest request may complete";
      ASSERT_EQ(r.measurements.size(), 1u);
    }
  }
  EXPECT_EQ(completed, 1);
  EXPECT_EQ(results.size(), 50u)
      << "every submitted request is answered, superseded ones as cancelled";
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_LE(started.size(), 3u) << "superseded requests must not run";
  EXPECT_EQ(started.back(), 50000);
}

TEST(Engine, InFlightWorkIsCancelledByANewRequest) {
  std::vector<int64_t> started;
  std::mutex mutex;
  Engine engine([&](std::unique_ptr<MeasureBackend>* out) {
    *out = std::make_unique<FakeBackend>(&started, &mutex, /*step_ms=*/10, /*steps=*/500);
    return Status::Ok();
  });
  ASSERT_TRUE(engine.wait_idle(5000));
  const auto t0 = std::chrono::steady_clock::now();
  engine.submit(request_of(1));
  while (engine.status().busy == false) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  engine.submit(request_of(2));  // would also take 5 s, and is itself replaced by a failing one
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  engine.submit(request_of(13));  // fails fast
  const auto results = drain(engine);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 3.0);
  ASSERT_GE(results.size(), 2u);
  EXPECT_EQ(results.front().request.size, 1);
  EXPECT_TRUE(results.front().cancelled);
  EXPECT_EQ(results.back().request.size, 13);
  EXPECT_FALSE(results.back().status.ok());
  EXPECT_EQ(results.back().status.message(), "size 13 is unlucky");
}

TEST(Engine, PollNeverBlocksWhileTheWorkerIsBusy) {
  std::vector<int64_t> started;
  std::mutex mutex;
  Engine engine([&](std::unique_ptr<MeasureBackend>* out) {
    *out = std::make_unique<FakeBackend>(&started, &mutex, /*step_ms=*/10, /*steps=*/50);
    return Status::Ok();
  });
  ASSERT_TRUE(engine.wait_idle(5000));
  engine.submit(request_of(7));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {
    (void)engine.poll();
    (void)engine.status();
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(ms, 100.0) << "poll/status must not wait for the measurement (500 ms)";
}

// Polls until `count` results arrived or `timeout_ms` passed; returns them with arrival times.
struct Arrived {
  EngineResult result;
  double ms;  // since `t0`
};
std::vector<Arrived> collect(Engine& engine, size_t count, std::chrono::steady_clock::time_point t0,
                             int timeout_ms = 5000) {
  std::vector<Arrived> out;
  while (out.size() < count) {
    for (EngineResult& r : engine.poll()) {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      out.push_back({std::move(r), ms});
    }
    const double waited =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (waited > timeout_ms) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return out;
}

TEST(EngineCounters, ArriveOnlyAfterTheRequestHasRested) {
  CountingBackend* fake = nullptr;
  Engine engine([&](std::unique_ptr<MeasureBackend>* out) {
    auto b = std::make_unique<CountingBackend>();
    fake = b.get();
    *out = std::move(b);
    return Status::Ok();
  });
  ASSERT_TRUE(engine.wait_idle(5000));
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t id = engine.submit(request_of(4096));
  const auto got = collect(engine, 2, t0);
  ASSERT_EQ(got.size(), 2u);

  const EngineResult& timing = got[0].result;
  EXPECT_EQ(timing.id, id);
  EXPECT_EQ(timing.phase, EnginePhase::timing);
  EXPECT_LT(got[0].ms, 200) << "timing must not wait for the rest period";
  ASSERT_EQ(timing.measurements.size(), 1u);
  EXPECT_EQ(timing.measurements[0].counters_status, CountersStatus::pending);
  EXPECT_FALSE(timing.measurements[0].launches[0].counters.has_value());

  const EngineResult& counted = got[1].result;
  EXPECT_EQ(counted.id, id) << "the counters result answers the same request";
  EXPECT_EQ(counted.phase, EnginePhase::counters);
  EXPECT_FALSE(counted.cancelled);
  EXPECT_TRUE(counted.status.ok());
  EXPECT_GE(got[1].ms, 250) << "counters start only after the request rested 250 ms";
  ASSERT_EQ(counted.measurements.size(), 1u);
  const Measurement& m = counted.measurements[0];
  EXPECT_EQ(m.counters_status, CountersStatus::measured);
  ASSERT_TRUE(m.launches[1].counters.has_value());
  EXPECT_EQ(m.launches[1].counters->dram_read_bytes, 4096);
  EXPECT_EQ(m.size, 4096) << "the full measurement comes back, timing included";
  EXPECT_TRUE(engine.wait_idle(2000));
  EXPECT_EQ(fake->finished.load(), 1);
}

TEST(EngineCounters, ANewerRequestCancelsTheRestAndTheCounterPhase) {
  CountingBackend* fake = nullptr;
  Engine engine([&](std::unique_ptr<MeasureBackend>* out) {
    auto b = std::make_unique<CountingBackend>(/*launch_ms=*/100);
    fake = b.get();
    *out = std::move(b);
    return Status::Ok();
  });
  ASSERT_TRUE(engine.wait_idle(5000));
  const auto t0 = std::chrono::steady_clock::now();
  // A drag: each request is replaced well inside its rest period, so none may count.
  for (int i = 1; i <= 5; ++i) {
    engine.submit(request_of(i));
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  }
  EXPECT_EQ(fake->started.load(), 0) << "no counter phase while the slider moves";
  // The last request rests and its counter phase starts; a newer one arrives mid-phase.
  const uint64_t resting = engine.submit(request_of(6));
  while (fake->started.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(fake->last_started_size.load(), 6);
  const uint64_t newest = engine.submit(request_of(7));
  ASSERT_TRUE(engine.wait_idle(5000));
  const auto got = collect(engine, 100, t0, /*timeout_ms=*/0);
  EXPECT_EQ(fake->abandoned.load(), 1) << "the counter phase stops between launches";
  int counters_results = 0;
  for (const Arrived& a : got) {
    if (a.result.phase != EnginePhase::counters) continue;
    ++counters_results;
    EXPECT_EQ(a.result.id, newest) << "only the newest request's counters are posted";
    EXPECT_NE(a.result.id, resting);
  }
  EXPECT_EQ(counters_results, 1);
  EXPECT_EQ(fake->finished.load(), 1);
}

TEST(EngineCounters, CachedCountersAreNotMeasuredAgain) {
  CountingBackend* fake = nullptr;
  Engine engine([&](std::unique_ptr<MeasureBackend>* out) {
    auto b = std::make_unique<CountingBackend>();
    fake = b.get();
    *out = std::move(b);
    return Status::Ok();
  });
  ASSERT_TRUE(engine.wait_idle(5000));
  engine.submit(request_of(1000));
  ASSERT_EQ(drain(engine).size(), 2u);
  ASSERT_EQ(fake->started.load(), 1);

  const auto t0 = std::chrono::steady_clock::now();
  engine.submit(request_of(1000));  // the same lesson, size, level, precision and cache mode
  const auto again = drain(engine);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(again.size(), 1u) << "no counter phase follows when every level is cached";
  EXPECT_EQ(again[0].phase, EnginePhase::timing);
  const Measurement& m = again[0].measurements[0];
  EXPECT_EQ(m.counters_status, CountersStatus::measured);
  ASSERT_TRUE(m.launches[0].counters.has_value());
  EXPECT_EQ(m.launches[0].counters->l2_bytes, 3000);
  EXPECT_EQ(fake->started.load(), 1) << "the counters were not measured again";
  EXPECT_LT(ms, 200) << "cached counters need no rest period";

  engine.submit(request_of(2000));  // another size is measured
  ASSERT_EQ(drain(engine).size(), 2u);
  EXPECT_EQ(fake->started.load(), 2);
  MeasureRequest warm = request_of(1000);
  warm.cache = CacheMode::warm;  // another cache mode is another key
  engine.submit(warm);
  ASSERT_EQ(drain(engine).size(), 2u);
  EXPECT_EQ(fake->started.load(), 3);
}

TEST(EngineCounters, NotPermittedGivesTimingWithTheNote) {
  NoCountersBackend* fake = nullptr;
  Engine engine([&](std::unique_ptr<MeasureBackend>* out) {
    auto b = std::make_unique<NoCountersBackend>();
    fake = b.get();
    *out = std::move(b);
    return Status::Ok();
  });
  ASSERT_TRUE(engine.wait_idle(5000));
  EXPECT_EQ(engine.status().counters_note, NoCountersBackend::kNote);
  EXPECT_TRUE(engine.status().timing_note.empty());
  engine.submit(request_of(1000));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // past any rest period
  const auto results = drain(engine);
  ASSERT_EQ(results.size(), 1u) << "timing only: no counter phase";
  EXPECT_TRUE(results[0].status.ok());
  EXPECT_EQ(results[0].phase, EnginePhase::timing);
  ASSERT_EQ(results[0].measurements.size(), 1u);
  const Measurement& m = results[0].measurements[0];
  EXPECT_DOUBLE_EQ(m.chain_time_us.median, 12.5) << "timings still arrive";
  EXPECT_EQ(m.counters_status, CountersStatus::unavailable);
  EXPECT_EQ(m.counters_note, NoCountersBackend::kNote);
  EXPECT_NE(m.counters_note.find("NVreg_RestrictProfilingToAdminUsers=0"), std::string::npos)
      << "the note says how to enable counters";
  EXPECT_EQ(m.counters_note.find('\n'), std::string::npos);
  EXPECT_EQ(fake->called.load(), 0);
}

TEST(EngineCounters, BackendsWithoutCountersKeepTheirOwn) {
  // The existing fake has no counter phase and no note (like a recording, whose counters come
  // with it): results pass through untouched and no second result follows.
  std::vector<int64_t> started;
  std::mutex mutex;
  Engine engine([&](std::unique_ptr<MeasureBackend>* out) {
    *out = std::make_unique<FakeBackend>(&started, &mutex, 1, 1);
    return Status::Ok();
  });
  ASSERT_TRUE(engine.wait_idle(5000));
  engine.submit(request_of(5));
  const auto results = drain(engine);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].measurements[0].counters_status, CountersStatus::not_measured);
  EXPECT_TRUE(results[0].measurements[0].counters_note.empty());
}

// GPU faults as the engine sees them (gpu_faults.h): a backend whose GPU is gone for good, and a
// request whose level ran out of memory while the other levels were measured.
class FaultyBackend final : public MeasureBackend {
 public:
  explicit FaultyBackend(std::atomic<int>* calls) : calls_(calls) { device_.usable = true; }
  const DeviceFacts& device() const override { return device_; }
  const char* kind() const override { return "fake"; }
  std::string lost_reason() const override { return lost_; }
  Status measure(const MeasureRequest& request, const CancelCheck&,
                 std::vector<Measurement>* out) override {
    ++*calls_;
    Measurement m;
    m.lesson = request.lesson;
    m.size = request.size;
    m.check.passed = true;
    m.launches.resize(2);
    if (request.size == 666) {  // the GPU falls off the bus mid-measurement
      lost_ = "The GPU stopped answering while measuring gelu_scale level 0 (test).";
      return Status::Error(lost_);
    }
    out->push_back(m);  // level 0 measured
    if (request.size == 777) return Status::Error("gelu_scale level 1 ran out of GPU memory.");
    m.level = 1;
    out->push_back(m);
    return Status::Ok();
  }

 private:
  DeviceFacts device_;
  std::atomic<int>* calls_;
  std::string lost_;
};

TEST(EngineFaults, ALostGpuMakesTheEngineUnavailableAndItStillAnswers) {
  std::atomic<int> calls{0};
  Engine engine([&calls](std::unique_ptr<MeasureBackend>* out) {
    *out = std::make_unique<FaultyBackend>(&calls);
    return Status::Ok();
  });
  engine.submit(request_of(1024));
  auto results = drain(engine);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].status.ok());
  engine.submit(request_of(666));
  results = drain(engine);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(results[0].status.message().find("stopped answering"), std::string::npos);
  EngineStatus st = engine.status();
  EXPECT_EQ(st.state, EngineState::unavailable);
  EXPECT_EQ(st.unavailable_reason, results[0].status.message());
  // Later requests are answered at once with the reason; the backend is not asked again.
  for (int i = 0; i < 3; ++i) {
    const uint64_t id = engine.submit(request_of(2048 + i));
    results = drain(engine);
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].id, id);
    EXPECT_EQ(results[0].status.message(), st.unavailable_reason);
  }
  EXPECT_EQ(calls.load(), 2);
}

TEST(EngineFaults, ARefusedLevelComesWithTheLevelsThatWereMeasured) {
  std::atomic<int> calls{0};
  Engine engine([&calls](std::unique_ptr<MeasureBackend>* out) {
    *out = std::make_unique<FaultyBackend>(&calls);
    return Status::Ok();
  });
  engine.submit(request_of(777));
  auto results = drain(engine);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].status.ok());
  EXPECT_NE(results[0].status.message().find("ran out of GPU memory"), std::string::npos);
  ASSERT_EQ(results[0].measurements.size(), 1u);
  EXPECT_EQ(results[0].measurements[0].level, 0);
  EXPECT_EQ(engine.status().state, EngineState::ready) << "a refused level loses nothing else";
  engine.submit(request_of(1024));
  results = drain(engine);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].status.ok());
  EXPECT_EQ(results[0].measurements.size(), 2u);
}

}  // namespace
}  // namespace fl
