// Watching the GPU around a measurement (model/gpu_conditions.h): the SM and memory clocks, the
// throttle reasons, and the other processes on the device, read through NVML. libnvidia-ml is
// loaded at run time with dlopen, never linked: the replay-only build and machines without the
// driver start as before, and the measurement then simply carries no conditions.
//
// Plain C++ (no CUDA), in both builds; thread-safe (NVML is), so the engine's worker samples
// around measurements while the window's GPU panel reads the current clocks.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "model/gpu_conditions.h"

namespace fl {

class GpuWatch {
 public:
  virtual ~GpuWatch() = default;
  // One reading now; false when it failed (the GPU is gone, NVML stopped answering). Without
  // `processes` the other processes are not listed (other_processes stays 0): the clocks alone
  // cost a few NVML calls, the process lists more.
  virtual bool sample(GpuSample* out, bool processes = true) = 0;
};

// Samples a watch into one measurement's conditions: always when it begins and ends, in between
// (tick) at most every `every_s` seconds, since a reading costs the host tens of microseconds;
// the other processes at the beginning and the ticks, the clocks every time.
// The live backend begins it before the timed repetitions, ticks between batches (the stream is
// idle then) and ends it after them.
class ConditionsRecorder {
 public:
  ConditionsRecorder() = default;
  ConditionsRecorder(GpuWatch* watch, double every_s) : watch_(watch), every_s_(every_s) {}
  void begin(GpuConditions* into);
  void tick();
  void end();

 private:
  void sample(bool processes);
  GpuWatch* watch_ = nullptr;
  double every_s_ = 0.1;
  GpuConditions* into_ = nullptr;
  std::chrono::steady_clock::time_point last_;
};

// The NVML watch of the GPU with PCI bus id `pci_bus_id` ("0000:3B:00.0", as
// cudaDeviceGetPCIBusId writes it). Null, with one sentence in `why_not`, when NVML is not
// installed, does not start or does not know the device. FL_GPU_WATCH=off in the environment
// turns it off (why_not says so).
std::unique_ptr<GpuWatch> open_nvml_watch(const std::string& pci_bus_id, std::string* why_not);

}  // namespace fl
