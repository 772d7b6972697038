// Whose GPU was it (model/gpu_conditions.h, app/measure/gpu_watch.h): a fake NVML reading through
// the recorder the live backend uses, the throttle and shared marks with their sentence, and the
// clocks' round trip through a session, the CSV and the trace.
#include "model/gpu_conditions.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "app/measure/export.h"
#include "app/measure/gpu_watch.h"
#include "model/session_json.h"

namespace fl {
namespace {

// A fake NVML: hands out the readings it was given, in turn, the last one again at the end.
class FakeNvml final : public GpuWatch {
 public:
  explicit FakeNvml(std::vector<GpuSample> readings) : readings_(std::move(readings)) {}
  bool sample(GpuSample* out, bool /*processes*/) override {
    ++calls;
    if (readings_.empty()) return false;
    *out = readings_[std::min(next_++, readings_.size() - 1)];
    return true;
  }
  int calls = 0;

 private:
  std::vector<GpuSample> readings_;
  size_t next_ = 0;
};

GpuSample reading(int sm, int mem, uint64_t reasons, int others = 0) {
  GpuSample s;
  s.sm_clock_mhz = sm;
  s.memory_clock_mhz = mem;
  s.sm_clock_max_mhz = 1980;
  s.throttle_reasons = reasons;
  s.other_processes = others;
  return s;
}

Session one_measurement_session(const GpuConditions& gpu) {
  Session s;
  s.app_version = "0.1.0";
  s.created_utc = "2026-11-26T05:00:00Z";
  s.backend = "live";
  s.device.usable = true;
  s.device.name = "NVIDIA H100 80GB HBM3";
  s.device.cc_major = 9;
  s.device.sm_count = 132;
  s.device.l2_bytes = 50 << 20;
  s.device.memory_bytes = int64_t(80) << 30;
  s.device.driver_version = 13000;
  s.device.runtime_version = 13000;
  Measurement m;
  m.lesson = "gelu_scale";
  m.size = 1 << 20;
  m.level = 0;
  m.level_name = "unfused";
  m.timing_method = "cupti_activity";
  m.repetitions = 50;
  m.chain_time_us = {10, 9, 12, 9.5, 10.5, 50};
  m.check = {1e-8, 1e-7, 0, 1e-5, true};
  LaunchResult l;
  l.textbook = {"gelu", 4 << 20, 4 << 20, 1e6};
  l.time_us = m.chain_time_us;
  m.launches.push_back(l);
  m.gpu = gpu;
  s.measurements.push_back(m);
  return s;
}

TEST(GpuConditions, AFakeNvmlReadingOfAPowerCapMarksTheMeasurementThrottled) {
  FakeNvml nvml({reading(1980, 2619, kThrottleGpuIdle), reading(1755, 2619, kThrottleSwPowerCap),
                 reading(1980, 2619, 0)});
  GpuConditions c;
  ConditionsRecorder recorder(&nvml, 0.0);  // every tick samples
  recorder.begin(&c);
  recorder.tick();
  recorder.end();
  EXPECT_EQ(nvml.calls, 3);
  ASSERT_TRUE(c.sampled);
  EXPECT_EQ(c.samples, 3);
  EXPECT_EQ(c.sm_clock_mhz, 1755) << "the lowest SM clock seen";
  EXPECT_EQ(c.memory_clock_mhz, 2619);
  EXPECT_EQ(c.sm_clock_max_mhz, 1980);
  EXPECT_TRUE(c.throttled());
  EXPECT_FALSE(c.shared());
  EXPECT_EQ(conditions_mark(c), "throttled");
  EXPECT_EQ(throttle_reason_names(c.throttle_reasons), "sw_power_cap")
      << "idle is not a reason that slows a measurement, and is not kept";
  const std::string sentence = conditions_sentence(c);
  EXPECT_NE(sentence.find("1755 MHz of 1980"), std::string::npos) << sentence;
  EXPECT_NE(sentence.find("power cap"), std::string::npos) << sentence;
}

TEST(GpuConditions, IdleApplicationClocksAndSyncBoostAreNotThrottling) {
  GpuConditions c;
  c.add(reading(
      1980, 2619,
      kThrottleGpuIdle | kThrottleApplicationClocks | kThrottleSyncBoost | kThrottleDisplayClock));
  EXPECT_TRUE(c.sampled);
  EXPECT_FALSE(c.throttled());
  EXPECT_FALSE(c.disturbed());
  EXPECT_EQ(conditions_mark(c), "");
  EXPECT_EQ(conditions_sentence(c), "");
}

TEST(GpuConditions, AnotherProcessMarksItShared) {
  FakeNvml nvml({reading(1980, 2619, 0, 0), reading(1980, 2619, 0, 2), reading(1980, 2619, 0, 1)});
  GpuConditions c;
  ConditionsRecorder recorder(&nvml, 0.0);
  recorder.begin(&c);
  recorder.tick();
  recorder.end();
  EXPECT_TRUE(c.shared());
  EXPECT_EQ(c.other_processes, 2) << "the most seen at once";
  EXPECT_EQ(conditions_mark(c), "shared");
  EXPECT_NE(conditions_sentence(c).find("2 other processes had work on this GPU"),
            std::string::npos)
      << conditions_sentence(c);
}

TEST(GpuConditions, TheRecorderSamplesBetweenBatchesAtMostEverySoOften) {
  FakeNvml nvml({reading(1980, 2619, 0)});
  GpuConditions c;
  ConditionsRecorder recorder(&nvml, 3600.0);
  recorder.begin(&c);
  for (int i = 0; i < 100; ++i) recorder.tick();  // none is due
  recorder.end();
  EXPECT_EQ(nvml.calls, 2) << "once at the start and once at the end";
  ConditionsRecorder none(nullptr, 0.0);  // no NVML: nothing known, nothing marked
  GpuConditions unknown;
  none.begin(&unknown);
  none.tick();
  none.end();
  EXPECT_FALSE(unknown.sampled);
  EXPECT_FALSE(unknown.disturbed());
}

TEST(GpuConditions, AFailedReadingLeavesTheConditionsUnknown) {
  FakeNvml nvml({});
  GpuConditions c;
  ConditionsRecorder recorder(&nvml, 0.0);
  recorder.begin(&c);
  recorder.end();
  EXPECT_FALSE(c.sampled);
}

TEST(GpuConditions, TheClocksMakeTheSessionRoundTrip) {
  GpuConditions c;
  c.add(reading(1410, 1593, kThrottleSwPowerCap | kThrottleHwThermal, 1));
  const Session s = one_measurement_session(c);
  const std::string text = session_to_json(s);
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["measurements"][0]["gpu_throttle"], "sw_power_cap,hw_thermal");
  Session back;
  ASSERT_TRUE(session_from_json(text, &back).ok());
  const GpuConditions& b = back.measurements.at(0).gpu;
  EXPECT_TRUE(b.sampled);
  EXPECT_EQ(b.sm_clock_mhz, 1410);
  EXPECT_EQ(b.memory_clock_mhz, 1593);
  EXPECT_EQ(b.sm_clock_max_mhz, 1980);
  EXPECT_EQ(b.throttle_reasons, kThrottleSwPowerCap | kThrottleHwThermal);
  EXPECT_EQ(b.other_processes, 1);
  EXPECT_EQ(session_to_json(back), text) << "written back identically";
}

TEST(GpuConditions, ASessionWithoutThemLoadsUnknownAndWritesNone) {
  const Session s = one_measurement_session(GpuConditions());
  const std::string text = session_to_json(s);
  EXPECT_EQ(text.find("gpu_sm_clock_mhz"), std::string::npos);
  Session back;
  ASSERT_TRUE(session_from_json(text, &back).ok());
  EXPECT_FALSE(back.measurements.at(0).gpu.sampled);
}

TEST(GpuConditions, AnUnknownThrottleReasonIsRefusedWithItsPath) {
  GpuConditions c;
  c.add(reading(1410, 1593, kThrottleSwPowerCap));
  std::string text = session_to_json(one_measurement_session(c));
  const std::string from = "\"sw_power_cap\"";
  text.replace(text.find(from), from.size(), "\"too_hot\"");
  Session back;
  const Status st = session_from_json(text, &back);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("measurements[0].gpu_throttle"), std::string::npos) << st.message();
}

TEST(GpuConditions, TheCsvAndTheTraceCarryThem) {
  GpuConditions c;
  c.add(reading(1755, 2619, kThrottleSwPowerCap, 1));
  const Session s = one_measurement_session(c);
  const std::string csv = measurements_csv(s);
  EXPECT_NE(csv.find(",gpu_sm_clock_mhz,gpu_memory_clock_mhz,gpu_throttle,gpu_other_processes,"
                     "gpu_disturbed,"),
            std::string::npos);
  EXPECT_NE(csv.find(",1755,2619,sw_power_cap,1,shared+throttled,"), std::string::npos) << csv;
  const nlohmann::json trace = nlohmann::json::parse(chrome_trace_json(s));
  int marked = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (!e.contains("args") || !e["args"].contains("gpu_sm_clock_mhz")) continue;
    EXPECT_EQ(e["args"]["gpu_sm_clock_mhz"], 1755);
    EXPECT_EQ(e["args"]["gpu_throttle"], "sw_power_cap");
    EXPECT_EQ(e["args"]["gpu_disturbed"].get<std::string>().rfind("While this was measured", 0),
              0u);
    ++marked;
  }
  EXPECT_GE(marked, 1) << "the measurement's slice carries the GPU's conditions";
}

TEST(GpuWatch, OffWhenAskedAndSaysWhy) {
  setenv("FL_GPU_WATCH", "off", 1);
  std::string why;
  EXPECT_EQ(open_nvml_watch("0000:00:00.0", &why), nullptr);
  EXPECT_NE(why.find("FL_GPU_WATCH=off"), std::string::npos) << why;
  unsetenv("FL_GPU_WATCH");
  // Without the driver (CI) NVML is not there; with one, no GPU has this bus id. Either way: no
  // watch and one sentence, never a crash.
  std::string why_not;
  EXPECT_EQ(open_nvml_watch("0000:FF:1F.7", &why_not), nullptr);
  EXPECT_FALSE(why_not.empty());
}

}  // namespace
}  // namespace fl
