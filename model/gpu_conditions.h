// What the GPU was doing around one measurement besides our kernels: its SM and memory clocks,
// the reasons the driver gave for holding the clocks down, and how many other processes had
// work on it (docs/RELIABILITY.md, "Whose GPU was it"). The live backend samples them through
// NVML (app/measure/gpu_watch.h) before, between and after the timed batches; sessions, the CSV
// and trace exports, `bench` and the window show them. Plain C++: no NVML header needed here.
#pragma once

#include <cstdint>
#include <string>

namespace fl {

// NVML's clock event ("throttle") reasons, as its bit mask defines them.
enum ThrottleReason : uint64_t {
  kThrottleGpuIdle = 0x1,
  kThrottleApplicationClocks = 0x2,
  kThrottleSwPowerCap = 0x4,
  kThrottleHwSlowdown = 0x8,
  kThrottleSyncBoost = 0x10,
  kThrottleSwThermal = 0x20,
  kThrottleHwThermal = 0x40,
  kThrottleHwPowerBrake = 0x80,
  kThrottleDisplayClock = 0x100,
};
// The reasons that slow kernels down: power cap, thermal and hardware slowdowns. Idle, the
// application-clock setting, sync boost and the display clock say nothing about a measurement.
constexpr uint64_t kSlowingThrottleReasons = kThrottleSwPowerCap | kThrottleHwSlowdown |
                                             kThrottleSwThermal | kThrottleHwThermal |
                                             kThrottleHwPowerBrake;

// One reading of the GPU.
struct GpuSample {
  int sm_clock_mhz = 0;
  int memory_clock_mhz = 0;
  int sm_clock_max_mhz = 0;  // the most the SM clock can reach
  uint64_t throttle_reasons = 0;
  int other_processes = 0;  // processes other than this one with a context on the GPU
};

// Every sample taken during one measurement, folded: the lowest clocks, every reason seen, the
// most other processes seen at once.
struct GpuConditions {
  bool sampled = false;      // false: nothing known (no NVML, a recording made before it, a replay)
  int sm_clock_mhz = 0;      // lowest seen
  int memory_clock_mhz = 0;  // lowest seen
  int sm_clock_max_mhz = 0;
  uint64_t throttle_reasons = 0;  // every reason seen
  int other_processes = 0;        // most seen at once
  int samples = 0;                // not saved

  void add(const GpuSample& s);
  bool throttled() const { return sampled && (throttle_reasons & kSlowingThrottleReasons) != 0; }
  bool shared() const { return sampled && other_processes > 0; }
  bool disturbed() const { return throttled() || shared(); }
};

// "sw_power_cap,hw_thermal": the slowing reasons by name (empty when none), as sessions and the
// CSV store them; parse_throttle_reasons reads that back (false on an unknown name).
std::string throttle_reason_names(uint64_t reasons);
bool parse_throttle_reasons(const std::string& text, uint64_t* out);
// "power cap, thermal slowdown": the same for a learner.
std::string throttle_reason_words(uint64_t reasons);

// A short mark for tables ("shared", "throttled", "shared+throttled"; empty when undisturbed).
std::string conditions_mark(const GpuConditions& c);
// The one sentence on what the mark means for this measurement; empty when undisturbed.
std::string conditions_sentence(const GpuConditions& c);

}  // namespace fl
