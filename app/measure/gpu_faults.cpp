// GPU faults (gpu_faults.h).
#include "app/measure/gpu_faults.h"

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <set>

#include "model/file_io.h"
#include "model/sizes.h"

namespace fl {
namespace {

struct PointName {
  FaultPoint point;
  const char* name;
};
constexpr PointName kPoints[] = {
    {FaultPoint::alloc, "alloc"},
    {FaultPoint::launch, "launch"},
    {FaultPoint::kernel_fault, "kernel-fault"},
    {FaultPoint::sync, "sync"},
    {FaultPoint::device_lost, "device-lost"},
    {FaultPoint::cupti_subscribe, "cupti-subscribe"},
    {FaultPoint::cupti_busy, "cupti-busy"},
    {FaultPoint::no_device, "no-device"},
    {FaultPoint::old_driver, "old-driver"},
};

std::mutex& fired_mutex() {
  static std::mutex m;
  return m;
}
std::set<FaultPoint>& fired() {
  static std::set<FaultPoint> s;
  return s;
}

// Errors after which the CUDA context cannot be used again until it is reset (CUDA runtime API,
// "cudaError": "the process must be terminated and relaunched", or the context destroyed).
constexpr const char* kContextLost[] = {
    "cudaErrorIllegalAddress",      "cudaErrorLaunchFailure",
    "cudaErrorLaunchTimeout",       "cudaErrorHardwareStackError",
    "cudaErrorIllegalInstruction",  "cudaErrorMisalignedAddress",
    "cudaErrorInvalidAddressSpace", "cudaErrorInvalidPc",
    "cudaErrorECCUncorrectable",    "cudaErrorAssert",
    "cudaErrorTensorMemoryLeak",    "cudaErrorContextIsDestroyed",
};
// Errors that say the GPU itself is gone.
constexpr const char* kDeviceLost[] = {
    "cudaErrorDevicesUnavailable",  "cudaErrorNoDevice", "cudaErrorDeviceUninitialized",
    "cudaErrorSystemNotReady",      "cudaErrorUnknown",  "cudaErrorDeviceNotLicensed",
    "cudaErrorInitializationError",
};

}  // namespace

const char* to_string(FaultPoint point) {
  for (const PointName& p : kPoints) {
    if (p.point == point) return p.name;
  }
  return "none";
}

std::string fault_point_names() {
  std::string out;
  for (const PointName& p : kPoints) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

Status parse_fault_switch(const std::string& text, FaultSwitch* out) {
  *out = FaultSwitch();
  if (text.empty()) return Status::Ok();
  const size_t colon = text.find(':');
  const std::string name = text.substr(0, colon);
  bool known = false;
  for (const PointName& p : kPoints) {
    if (name == p.name) out->point = p.point, known = true;
  }
  if (!known) {
    return Status::Error("FL_FAULT='" + shorten_for_message(text) +
                         "' is not a fault point; the test-only fault switch takes one of " +
                         fault_point_names() + ", optionally with :LEVEL");
  }
  if (colon != std::string::npos) {
    const std::string level = text.substr(colon + 1);
    const bool digits = !level.empty() && level.size() <= 2 &&
                        std::isdigit(static_cast<unsigned char>(level[0])) &&
                        (level.size() == 1 || std::isdigit(static_cast<unsigned char>(level[1])));
    if (!digits) {
      return Status::Error("FL_FAULT='" + shorten_for_message(text) +
                           "': the level after ':' is a number from 0 to 99");
    }
    out->level = std::atoi(level.c_str());
  }
  return Status::Ok();
}

Status fault_switch_from_env(FaultSwitch* out) {
  const char* env = std::getenv("FL_FAULT");
  return parse_fault_switch(env != nullptr ? env : "", out);
}

bool fault_active(FaultPoint point) {
  FaultSwitch sw;
  return fault_switch_from_env(&sw).ok() && sw.point == point && point != FaultPoint::none;
}

bool fault_fires(FaultPoint point, int level) {
  FaultSwitch sw;
  if (!fault_switch_from_env(&sw).ok() || sw.point != point) return false;
  if (sw.level >= 0 && level >= 0 && sw.level != level) return false;
  std::lock_guard<std::mutex> lock(fired_mutex());
  return fired().insert(point).second;
}

void reset_fault_switch_for_tests() {
  std::lock_guard<std::mutex> lock(fired_mutex());
  fired().clear();
}

std::string cuda_error_name_in(const std::string& message) {
  const size_t at = message.find("cudaError");
  if (at == std::string::npos) return "";
  size_t end = at;
  while (end < message.size() && std::isalnum(static_cast<unsigned char>(message[end]))) ++end;
  return message.substr(at, end - at);
}

FailureKind classify_failure(const std::string& message) {
  const std::string name = cuda_error_name_in(message);
  if (name.empty()) return FailureKind::other;
  if (name == "cudaErrorMemoryAllocation") return FailureKind::out_of_memory;
  for (const char* n : kContextLost) {
    if (name == n) return FailureKind::context_lost;
  }
  for (const char* n : kDeviceLost) {
    if (name == n) return FailureKind::device_lost;
  }
  return FailureKind::other;
}

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string level_out_of_memory_message(const std::string& lesson, int level, int64_t size,
                                        int64_t fits, const std::string& unit) {
  const std::string head = lesson + " level " + std::to_string(level) +
                           " ran out of GPU memory at " + format_size(size) + " " + unit +
                           " and was not measured; ";
  const std::string tail = " (the other levels were measured).";
  if (fits <= 0) return head + "no size of it fits in the GPU memory free now" + tail;
  if (fits >= size) {
    return head +
           "the memory free now should hold it, so another program may have been using "
           "the GPU's memory" +
           tail;
  }
  return head + "the largest size that fits now is " + format_size(fits) + " " + unit + tail;
}

std::string context_lost_message(const std::string& where, const std::string& error_name,
                                 bool recovered, const std::string& why_not) {
  const std::string what =
      error_name == "cudaErrorLaunchTimeout"
          ? "a kernel of " + where + " ran too long and was stopped by the watchdog"
          : "a kernel of " + where + " faulted on the GPU";
  const std::string head =
      "The GPU failed: " + what + " (" + error_name + "), which makes its CUDA context unusable; ";
  if (recovered) {
    return head +
           "Fusion Lab reset the GPU and measures again (the DRAM and L2 counters stay "
           "off until it is restarted).";
  }
  return head + "resetting the GPU failed too (" + why_not + "), so restart Fusion Lab.";
}

std::string device_lost_message(const std::string& where, const std::string& error_name) {
  return "The GPU stopped answering while measuring " + where + " (" + error_name +
         "): it may have fallen off the bus or been reset; check it with nvidia-smi and restart "
         "Fusion Lab.";
}

std::string old_driver_message(int driver_version, int runtime_version) {
  if (driver_version <= 0) {
    return "No NVIDIA driver is installed (this build's CUDA " +
           cuda_version_text(runtime_version) + " runtime needs one).";
  }
  return "The NVIDIA driver supports CUDA " + cuda_version_text(driver_version) +
         ", older than the CUDA " + cuda_version_text(runtime_version) +
         " runtime this build uses: install a driver for CUDA " +
         cuda_version_text(runtime_version) + " or later.";
}

std::string no_device_message() {
  return "No NVIDIA GPU was found on this machine.";
}

std::string without_source_locations(std::string message) {
  // " at <path>:<line>" as cuda_status writes it, wherever it occurs.
  for (size_t at = message.find(" at /"); at != std::string::npos; at = message.find(" at /", at)) {
    size_t end = at + 4;
    while (end < message.size() && message[end] != ' ' && message[end] != ')' &&
           message[end] != ';') {
      ++end;
    }
    const size_t colon = message.rfind(':', end);
    const bool has_line = colon != std::string::npos && colon > at && colon + 1 < end &&
                          std::isdigit(static_cast<unsigned char>(message[colon + 1]));
    if (has_line)
      message.erase(at, end - at);
    else
      at = end;
  }
  return message;
}

std::string request_failed_message(const std::string& where, const std::string& detail) {
  std::string d = without_source_locations(detail);
  if (!d.empty() && d.back() != '.') d += '.';
  return where + " could not be measured: " + d;
}

std::string counters_off_after_reset_note() {
  return "DRAM and L2 counters are off until Fusion Lab is restarted: the GPU was reset after a "
         "kernel fault (timings are measured).";
}

}  // namespace fl
