// GPU faults (docs/RELIABILITY.md, "GPU faults"): what the live backend says and does
// when the GPU fails it, and the test-only fault switch that makes it fail on purpose.
//
// The fault switch: the environment variable FL_FAULT=POINT[:LEVEL] makes the live backend fail
// at POINT (once per process, at the first chance; LEVEL narrows `alloc`, `launch`,
// `kernel-fault` and `sync` to that fusion level). It is read when a backend is created and at
// each chance, so tests set it per process (ctest ENVIRONMENT). The points:
//   alloc            a level's device memory cannot be allocated (a real cudaMalloc larger than
//                    the GPU): that level is refused, naming the largest size that fits; the
//                    other levels are measured
//   launch           a kernel launch is refused (a real launch with an invalid block size)
//   kernel-fault     a kernel writes to an illegal address (a real one: the CUDA context is lost)
//   sync             waiting for the GPU reports a kernel stopped by the watchdog
//                    (cudaErrorLaunchTimeout, simulated; handled as a lost context)
//   device-lost      the GPU stops answering mid-measurement (cudaErrorDevicesUnavailable,
//                    simulated, and every later CUDA call fails the same way)
//   cupti-subscribe  another profiler holds CUPTI's subscriber (Nsight Systems; simulated)
//   cupti-busy       another profiler holds the GPU's profiling (Nsight Compute; simulated)
//   no-device        no GPU is found (simulated cudaErrorNoDevice)
//   old-driver       the driver is older than this build's runtime (simulated
//                    cudaErrorInsufficientDriver, the driver one CUDA major version behind)
//
// Plain C++ (no CUDA): the messages and the classification of errors are tested on the CPU.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/status.h"

namespace fl {

enum class FaultPoint {
  none,
  alloc,
  launch,
  kernel_fault,
  sync,
  device_lost,
  cupti_subscribe,
  cupti_busy,
  no_device,
  old_driver,
};
const char* to_string(FaultPoint point);
// "alloc, launch, kernel-fault, ...": for the message about a bad FL_FAULT.
std::string fault_point_names();

struct FaultSwitch {
  FaultPoint point = FaultPoint::none;
  int level = -1;  // -1: any level
};
// Parses "POINT" or "POINT:LEVEL" ("" is none); one line naming the accepted points otherwise.
Status parse_fault_switch(const std::string& text, FaultSwitch* out);
// The environment's FL_FAULT, parsed (a bad value is an error, so a typo is not silently no fault).
Status fault_switch_from_env(FaultSwitch* out);

// Whether FL_FAULT names `point` (the states: no-device, old-driver, cupti-subscribe,
// cupti-busy hold for the whole process).
bool fault_active(FaultPoint point);
// Whether the switch fires now at `point` (for `level`, -1 where levels do not apply): true once
// per process and point, at the first chance. Thread-safe.
bool fault_fires(FaultPoint point, int level = -1);
// Forgets which points have fired (tests that set FL_FAULT themselves).
void reset_fault_switch_for_tests();

// How a failed measurement is handled, from the CUDA error its message names (every CUDA failure
// message carries the error's name, kernels/cuda_check.h).
enum class FailureKind {
  other,          // the request failed, the context is fine: say so, measure the next one
  out_of_memory,  // cudaErrorMemoryAllocation: this level is refused, the other levels run
  context_lost,   // an error that poisons the CUDA context (illegal address, launch failure,
                  // watchdog timeout, ...): reset the GPU and set up again, or ask for a restart
  device_lost,    // the GPU is gone (fell off the bus, reset by someone else): ask for a restart
};
FailureKind classify_failure(const std::string& message);
// The CUDA error's name in `message` ("cudaErrorIllegalAddress"), or empty.
std::string cuda_error_name_in(const std::string& message);

// ---- the messages (one sentence each) ---------------------------------------------------------

// "gelu_scale level 1 ran out of GPU memory at 64M elements and was not measured; the largest
// size that fits now is 16M elements (the other levels were measured)."
std::string level_out_of_memory_message(const std::string& lesson, int level, int64_t size,
                                        int64_t fits, const std::string& unit);
// A kernel fault: what happened, and whether the GPU was reset and set up again (`recovered`), or
// could not be (`why_not`), in which case the app must restart.
std::string context_lost_message(const std::string& where, const std::string& error_name,
                                 bool recovered, const std::string& why_not);
// The GPU stopped answering: restart (after checking it with nvidia-smi).
std::string device_lost_message(const std::string& where, const std::string& error_name);
// The driver is older than this build's runtime. Versions as CUDA reports them (12020 = 12.2);
// driver 0: no driver installed.
std::string old_driver_message(int driver_version, int runtime_version);
// No GPU found.
std::string no_device_message();
// A failure that leaves the context usable, for a request: "gelu_scale level 1 could not be
// measured: a kernel launch was refused (cudaErrorInvalidConfiguration: ...)."
// `detail` loses the source locations (" at /path/file.cu:12") that CUDA failures carry.
std::string request_failed_message(const std::string& where, const std::string& detail);
std::string without_source_locations(std::string message);
// The counters are off for the rest of the process after the GPU was reset.
std::string counters_off_after_reset_note();

// "12.2" from 12020.
std::string cuda_version_text(int version);

}  // namespace fl
