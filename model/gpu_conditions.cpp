#include "model/gpu_conditions.h"

#include <algorithm>
#include <sstream>

namespace fl {
namespace {

struct ReasonName {
  uint64_t bit;
  const char* name;   // sessions and CSV
  const char* words;  // the window and `bench`
};
constexpr ReasonName kReasonNames[] = {
    {kThrottleSwPowerCap, "sw_power_cap", "power cap"},
    {kThrottleHwSlowdown, "hw_slowdown", "hardware slowdown"},
    {kThrottleSwThermal, "sw_thermal", "thermal limit"},
    {kThrottleHwThermal, "hw_thermal", "thermal slowdown"},
    {kThrottleHwPowerBrake, "hw_power_brake", "power brake"},
};

std::string join(uint64_t reasons, bool words, const char* separator) {
  std::string out;
  for (const ReasonName& r : kReasonNames) {
    if ((reasons & r.bit) == 0) continue;
    if (!out.empty()) out += separator;
    out += words ? r.words : r.name;
  }
  return out;
}

}  // namespace

void GpuConditions::add(const GpuSample& s) {
  if (!sampled) {
    *this = GpuConditions();
    sampled = true;
    sm_clock_mhz = s.sm_clock_mhz;
    memory_clock_mhz = s.memory_clock_mhz;
  } else {
    sm_clock_mhz = std::min(sm_clock_mhz, s.sm_clock_mhz);
    memory_clock_mhz = std::min(memory_clock_mhz, s.memory_clock_mhz);
  }
  sm_clock_max_mhz = std::max(sm_clock_max_mhz, s.sm_clock_max_mhz);
  throttle_reasons |= s.throttle_reasons & kSlowingThrottleReasons;
  other_processes = std::max(other_processes, s.other_processes);
  ++samples;
}

std::string throttle_reason_names(uint64_t reasons) {
  return join(reasons & kSlowingThrottleReasons, false, ",");
}

bool parse_throttle_reasons(const std::string& text, uint64_t* out) {
  uint64_t reasons = 0;
  std::istringstream in(text);
  std::string name;
  while (std::getline(in, name, ',')) {
    const auto it = std::find_if(std::begin(kReasonNames), std::end(kReasonNames),
                                 [&](const ReasonName& r) { return name == r.name; });
    if (it == std::end(kReasonNames)) return false;
    reasons |= it->bit;
  }
  if (!text.empty() && text.back() == ',') return false;
  *out = reasons;
  return true;
}

std::string throttle_reason_words(uint64_t reasons) {
  return join(reasons & kSlowingThrottleReasons, true, ", ");
}

std::string conditions_mark(const GpuConditions& c) {
  if (c.shared() && c.throttled()) return "shared+throttled";
  if (c.shared()) return "shared";
  if (c.throttled()) return "throttled";
  return "";
}

std::string conditions_sentence(const GpuConditions& c) {
  const std::string clocks =
      "the SM clock fell to " + std::to_string(c.sm_clock_mhz) + " MHz" +
      (c.sm_clock_max_mhz > 0 ? " of " + std::to_string(c.sm_clock_max_mhz) : "") + " (" +
      throttle_reason_words(c.throttle_reasons) + ")";
  const std::string others = std::to_string(c.other_processes) + " other process" +
                             (c.other_processes == 1 ? "" : "es") + " had work on this GPU";
  if (c.shared() && c.throttled()) {
    return "While this was measured " + others + " and " + clocks +
           ", so these times may be slower than this GPU gives the kernels alone.";
  }
  if (c.shared()) {
    return "While this was measured " + others +
           ", so its kernels may have shared the SMs and memory and these times may be slower "
           "than this GPU gives the kernels alone.";
  }
  if (c.throttled()) {
    return "While this was measured " + clocks +
           ", so these times may be slower than this GPU gives at full clocks.";
  }
  return "";
}

}  // namespace fl
