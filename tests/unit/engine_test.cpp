// The engine's scheduling with a fake device: newest request wins, work in flight is cancelled,
// results come back without the caller waiting, and a missing GPU is reported, not fatal.
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
    out->push_back(m);
    return Status::Ok();
  }

 private:
  DeviceFacts device_;
  std::vector<int64_t>* started_;
  std::mutex* mutex_;
  int step_ms_, steps_;
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
  EXPECT_EQ(results.size(), 50u) << "every submitted request is answered, superseded ones as cancelled";
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
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(ms, 100.0) << "poll/status must not wait for the measurement (500 ms)";
}

}  // namespace
}  // namespace fl
