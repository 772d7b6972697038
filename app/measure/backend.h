// A measurement backend: what the engine's worker thread drives. The live backend runs the
// lesson kernels on the GPU; tests use a fake; replay (a recording) arrives with the sessions
// work. A backend is created, used and destroyed on the engine's worker thread only, since the
// live one owns the CUDA context.
//
// A measurement has two phases (DESIGN.md §3). measure() is the timing phase: correctness
// gate, repetitions, per-launch and chain times. measure_counters() is the optional counter
// phase: DRAM and L2 bytes per launch from the GPU's performance counters, taken in a separate
// run of the chain because profiling serialises and replays kernels.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "app/measure/gpu_watch.h"
#include "model/results.h"
#include "kernels/status.h"

namespace fl {

// Returns true when the work in flight should be abandoned (a newer request arrived).
using CancelCheck = std::function<bool()>;

// Progress of a long measurement, 0..1, with a short phrase ("gelu_scale level 1").
using ProgressCallback = std::function<void(double fraction, const std::string& what)>;

class MeasureBackend {
 public:
  virtual ~MeasureBackend() = default;
  virtual const DeviceFacts& device() const = 0;
  // "live" or "recorded".
  virtual const char* kind() const = 0;
  // Measures every requested level; a refused or failed request is a Status with one sentence.
  // Returning early because `cancelled()` turned true gives Status::Ok() and partial results.
  virtual Status measure(const MeasureRequest& request, const CancelCheck& cancelled,
                         std::vector<Measurement>* out) = 0;

  // The counter phase for `measurements`, which measure() produced for `request`: fills each
  // launch's counters and the measurement's counters_status / counters_note. Measurements whose
  // counters are already measured are left alone. Returns Ok with some measurements unfilled
  // when `cancelled()` turns true (checked between launches). A backend that cannot measure
  // counters marks them unavailable with counters_note().
  virtual Status measure_counters(const MeasureRequest& request, const CancelCheck& cancelled,
                                  std::vector<Measurement>* measurements) {
    (void)request;
    (void)cancelled;
    for (Measurement& m : *measurements) {
      if (m.counters_status == CountersStatus::measured) continue;
      m.counters_status = CountersStatus::unavailable;
      m.counters_note = counters_note();
    }
    return Status::Ok();
  }
  // Whether measure_counters() can measure now. A live backend may turn this off at run time
  // (counters found to be restricted to administrators).
  virtual bool counters_available() const { return false; }
  // One plain sentence when counters are unavailable and the learner should know why (and how
  // to enable them); empty otherwise, e.g. for a recording, whose counters come with it.
  virtual std::string counters_note() const { return std::string(); }
  // One plain sentence when timing had to fall back from CUPTI activity records to CUDA events
  // (another profiler holds CUPTI); empty otherwise.
  virtual std::string timing_note() const { return std::string(); }
  // One plain sentence once the backend can never measure again (the GPU fell off the bus, or a
  // kernel fault left a context that could not be reset): the engine then reports it as
  // unavailable and answers every request with it. Empty while it works.
  virtual std::string lost_reason() const { return std::string(); }
  // The watch of the GPU's clocks and other processes (gpu_watch.h), shared with the window's GPU
  // panel; null when there is none (a recording, no NVML), with one sentence from
  // gpu_watch_note() where a live GPU has none.
  virtual std::shared_ptr<GpuWatch> gpu_watch() const { return nullptr; }
  virtual std::string gpu_watch_note() const { return std::string(); }
};

}  // namespace fl
