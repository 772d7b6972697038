// GPU faults on a real GPU (docs/RELIABILITY.md, "GPU faults"): the test-only fault
// switch FL_FAULT (app/measure/gpu_faults.h) makes the live backend fail at each point, and each
// test checks the one sentence the learner reads and that the engine goes on answering.
//
// Each test needs its own process with FL_FAULT set (CUPTI's set-up is once per process):
// tests/CMakeLists.txt registers gpu_fault_<point> for each, label gpu. Run by hand:
//   FL_FAULT=kernel-fault build/tests/fusionlab_gpu_tests --gtest_filter=GpuFault.KernelFault
// Without FL_FAULT (or with another point) each test skips.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <chrono>
#include <string>

#include "app/measure/engine.h"
#include "app/measure/gpu_faults.h"
#include "app/measure/live_backend.h"

namespace fl {
namespace {

// Skips the test unless FL_FAULT names `point`.
#define REQUIRE_FAULT(point)                                                         \
  do {                                                                               \
    if (!fault_active(point))                                                        \
      GTEST_SKIP() << "run with FL_FAULT=" << to_string(point) << " (ctest -L gpu)"; \
  } while (0)

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

LiveOptions quick_options() {
  LiveOptions o;
  o.min_repetitions = 5;
  o.target_seconds = 0.02;
  return o;
}

std::unique_ptr<LiveBackend> make_backend() {
  std::unique_ptr<LiveBackend> backend;
  const Status st = LiveBackend::create(quick_options(), &backend);
  EXPECT_TRUE(st.ok()) << st.message();
  return backend;
}

std::unique_ptr<Engine> make_engine() {
  auto engine = std::make_unique<Engine>([](std::unique_ptr<MeasureBackend>* out) {
    std::unique_ptr<LiveBackend> live;
    FL_TRY(LiveBackend::create(quick_options(), &live));
    *out = std::move(live);
    return Status::Ok();
  });
  EXPECT_TRUE(engine->wait_idle(120000));
  return engine;
}

MeasureRequest request(const std::string& lesson, int64_t size) {
  return {lesson, size, {}, Precision::fp32, CacheMode::cold};
}

// The timing result of `r` (the counters result, if any, follows it).
EngineResult answer(Engine& engine, const MeasureRequest& r) {
  const uint64_t id = engine.submit(r);
  EXPECT_TRUE(engine.wait_idle(120000)) << "the engine still answers";
  for (EngineResult& result : engine.poll()) {
    if (result.id == id && result.phase == EnginePhase::timing) return result;
  }
  ADD_FAILURE() << "no timing result for request " << id;
  return EngineResult();
}

void expect_measured(const EngineResult& r, size_t levels) {
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.measurements.size(), levels);
  for (const Measurement& m : r.measurements) {
    EXPECT_TRUE(m.check.passed) << m.lesson << " level " << m.level;
    EXPECT_GT(m.chain_time_us.median, 0);
  }
}

TEST(GpuFault, Alloc) {
  REQUIRE_FAULT(FaultPoint::alloc);  // FL_FAULT=alloc:1
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  std::vector<Measurement> ms;
  const Status st = backend->measure(request("gelu_scale", 1 << 20), nullptr, &ms);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(has(st.message(), "gelu_scale level 1 ran out of GPU memory at 1M elements"))
      << st.message();
  EXPECT_TRUE(has(st.message(), "(the other levels were measured).")) << st.message();
  ASSERT_EQ(ms.size(), 1u) << "level 0 was measured";
  EXPECT_EQ(ms[0].level, 0);
  EXPECT_TRUE(ms[0].check.passed);
  ms.clear();
  EXPECT_TRUE(backend->measure(request("gelu_scale", 1 << 20), nullptr, &ms).ok());
  EXPECT_EQ(ms.size(), 2u);
}

TEST(GpuFault, Launch) {
  REQUIRE_FAULT(FaultPoint::launch);
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  std::vector<Measurement> ms;
  const Status st = backend->measure(request("gelu_scale", 1 << 20), nullptr, &ms);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(has(st.message(), "gelu_scale level 0 could not be measured")) << st.message();
  // The driver names an impossible launch configuration cudaErrorInvalidConfiguration or (on
  // the H100 machine, driver 580) cudaErrorInvalidValue: either way one of the invalid ones.
  EXPECT_TRUE(has(st.message(), "cudaErrorInvalid")) << st.message();
  EXPECT_FALSE(has(st.message(), ".cu:")) << "no source locations: " << st.message();
  EXPECT_TRUE(backend->lost_reason().empty());
  ms.clear();
  const Status again = backend->measure(request("gelu_scale", 1 << 20), nullptr, &ms);
  EXPECT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(ms.size(), 2u);
}

// The one the issue names: an illegal address loses the CUDA context. The engine's backend
// resets the GPU and the app goes on measuring, GEMM lessons (cuBLASLt) included; or, where the
// reset itself fails (on the H100 machine, 2026-11-23: cudaSetDevice after cudaDeviceReset
// returned cudaErrorDevicesUnavailable), the engine says in one sentence that Fusion Lab must be
// restarted and goes on answering every request at once with that sentence.
TEST(GpuFault, KernelFault) {
  REQUIRE_FAULT(FaultPoint::kernel_fault);
  auto engine = make_engine();
  ASSERT_EQ(engine->status().state, EngineState::ready) << engine->status().unavailable_reason;
  const EngineResult fault = answer(*engine, request("gelu_scale", 1 << 20));
  ASSERT_FALSE(fault.status.ok());
  EXPECT_TRUE(has(fault.status.message(),
                  "a kernel of gelu_scale level 0 faulted on the GPU "
                  "(cudaErrorIllegalAddress)"))
      << fault.status.message();
  EXPECT_EQ(fault.status.message().find('\n'), std::string::npos) << "one sentence, one line";
  if (has(fault.status.message(), "restart Fusion Lab")) {
    EXPECT_EQ(engine->status().state, EngineState::unavailable);
    const auto t0 = std::chrono::steady_clock::now();
    const EngineResult later = answer(*engine, request("linear_gelu", 64));
    EXPECT_FALSE(later.status.ok());
    EXPECT_TRUE(has(later.status.message(), "restart Fusion Lab")) << later.status.message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5))
        << "an unusable GPU is answered at once, not waited on";
    return;
  }
  EXPECT_TRUE(has(fault.status.message(), "Fusion Lab reset the GPU and measures again"))
      << fault.status.message();
  const EngineStatus st = engine->status();
  EXPECT_EQ(st.state, EngineState::ready);
  // Counters are off from now on (where they were permitted at all, this note says why).
  EXPECT_FALSE(st.counters_note.empty());
  expect_measured(answer(*engine, request("gelu_scale", 1 << 20)), 2);
  expect_measured(answer(*engine, request("gelu_scale", 4097)), 2);
  const EngineResult gemm = answer(*engine, request("linear_gelu", 64));
  ASSERT_TRUE(gemm.status.ok()) << gemm.status.message();
  for (const Measurement& m : gemm.measurements) EXPECT_TRUE(m.check.passed) << m.level;
}

TEST(GpuFault, Sync) {
  REQUIRE_FAULT(FaultPoint::sync);
  auto engine = make_engine();
  const EngineResult fault = answer(*engine, request("gelu_scale", 1 << 20));
  ASSERT_FALSE(fault.status.ok());
  EXPECT_TRUE(has(fault.status.message(),
                  "ran too long and was stopped by the watchdog "
                  "(cudaErrorLaunchTimeout)"))
      << fault.status.message();
  EXPECT_TRUE(has(fault.status.message(), "Fusion Lab reset the GPU")) << fault.status.message();
  expect_measured(answer(*engine, request("gelu_scale", 1 << 20)), 2);
}

TEST(GpuFault, DeviceLost) {
  REQUIRE_FAULT(FaultPoint::device_lost);
  auto engine = make_engine();
  const EngineResult lost = answer(*engine, request("gelu_scale", 1 << 20));
  ASSERT_FALSE(lost.status.ok());
  EXPECT_EQ(lost.status.message(),
            device_lost_message("gelu_scale level 0", "cudaErrorDevicesUnavailable"));
  const EngineStatus st = engine->status();
  EXPECT_EQ(st.state, EngineState::unavailable);
  EXPECT_EQ(st.unavailable_reason, lost.status.message());
  // Still answering, at once, with the same sentence.
  const EngineResult later = answer(*engine, request("gelu_scale", 4096));
  EXPECT_EQ(later.status.message(), lost.status.message());
}

void expect_profiler_held(const char* which) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  EXPECT_TRUE(has(backend->timing_note(),
                  "Another profiler (Nsight Systems, Nsight Compute or a debugger) is using "
                  "CUPTI, so kernels are timed with CUDA events"))
      << which << ": " << backend->timing_note();
  EXPECT_EQ(std::string(backend->timing_method()), "cuda_events");
  EXPECT_FALSE(backend->counters_available());
  EXPECT_TRUE(
      has(backend->counters_note(), "Another profiler is using the GPU's performance counters"))
      << which << ": " << backend->counters_note();
  std::vector<Measurement> ms;
  const Status st = backend->measure(request("gelu_scale", 1 << 20), nullptr, &ms);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(ms.size(), 2u);
  for (const Measurement& m : ms) {
    EXPECT_EQ(m.timing_method, "cuda_events");
    EXPECT_GT(m.chain_time_us.median, 0);
  }
}

TEST(GpuFault, CuptiSubscribe) {
  REQUIRE_FAULT(FaultPoint::cupti_subscribe);  // as Nsight Systems
  expect_profiler_held("Nsight Systems");
}

TEST(GpuFault, CuptiBusy) {
  REQUIRE_FAULT(FaultPoint::cupti_busy);  // as Nsight Compute
  expect_profiler_held("Nsight Compute");
}

TEST(GpuFault, NoDevice) {
  REQUIRE_FAULT(FaultPoint::no_device);
  auto engine = make_engine();
  EXPECT_EQ(engine->status().state, EngineState::unavailable);
  EXPECT_EQ(engine->status().unavailable_reason, no_device_message());
}

TEST(GpuFault, OldDriver) {
  REQUIRE_FAULT(FaultPoint::old_driver);
  auto engine = make_engine();
  EXPECT_EQ(engine->status().state, EngineState::unavailable);
  const DeviceFacts d = query_device();
  EXPECT_EQ(engine->status().unavailable_reason,
            old_driver_message(d.driver_version, d.runtime_version));
  EXPECT_TRUE(has(engine->status().unavailable_reason, "older than the CUDA"));
}

}  // namespace
}  // namespace fl
