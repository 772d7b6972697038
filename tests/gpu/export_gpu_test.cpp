// A trace exported from a live run: measured on the GPU (both phases), exported with
// chrome_trace_json, and checked by the same validity check the CPU tests use on recordings
// (tests/unit/trace_check.h): format, time axis, and numbers equal to the session's.
#include <gtest/gtest.h>

#include "app/measure/export.h"
#include "app/measure/live_backend.h"
#include "tests/unit/trace_check.h"

namespace fl {
namespace {

TEST(ExportLive, TraceOfALiveRunPassesTheValidityCheck) {
  LiveOptions options;
  options.min_repetitions = 5;
  options.target_seconds = 0.02;
  std::unique_ptr<LiveBackend> backend;
  const Status created = LiveBackend::create(options, &backend);
  ASSERT_TRUE(created.ok()) << created.message();
  Session session;
  session.app_version = "test";
  session.backend = "live";
  session.device = backend->device();
  // An elementwise chain, a row-wise one and a GEMM chain (cuBLASLt kernels), both cache modes.
  const MeasureRequest requests[] = {
      {"gelu_scale", int64_t(1) << 22, {}, Precision::fp32, CacheMode::cold},
      {"residual_layernorm", 4099, {}, Precision::bf16, CacheMode::warm},
      {"linear_gelu", 257, {}, Precision::fp32, CacheMode::cold},
  };
  for (const MeasureRequest& request : requests) {
    std::vector<Measurement> ms;
    Status st = backend->measure(request, nullptr, &ms);
    ASSERT_TRUE(st.ok()) << st.message();
    st = backend->measure_counters(request, nullptr, &ms);
    ASSERT_TRUE(st.ok()) << st.message();
    for (Measurement& m : ms) {
      EXPECT_FALSE(m.records.empty()) << m.lesson << " level " << m.level;
      session.measurements.push_back(std::move(m));
    }
  }
  const std::string trace = chrome_trace_json(session);
  const std::vector<std::string> problems = check_chrome_trace(trace, session);
  EXPECT_TRUE(problems.empty()) << join_problems(problems);
  EXPECT_GT(trace.size(), 1000u);
}

}  // namespace
}  // namespace fl
