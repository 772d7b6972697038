// DRAM and L2 bytes per launch with the CUPTI Range Profiler (the counter phase of DESIGN.md §3):
// `dram__bytes_read.sum`, `dram__bytes_write.sum`, `lts__t_bytes.sum`, one auto range per
// kernel. Works with CUDA 12.6 Update 2+ and 13.x (cupti_range_profiler.h +
// cupti_profiler_host.h; the legacy cuptiProfiler* session API is not used).
//
// Profiling serialises the context after every kernel and may replay kernels, so counters are
// taken in their own run of the chain, never in a timed one. There is one profiler per process
// (device 0's primary context). Everything that does not touch the GPU (chip, counter
// availability, config image, pass count) is set up once, ahead of the first request, together
// with a trial enable that finds missing permissions early. The profiler object itself is
// enabled on the context for each counter phase (one level) and disabled after it. Measured on
// an H200 with CUDA 13.0 (docs/PERFORMANCE.md): left enabled between phases, the profiler
// counted only part of a later phase's last kernel's writes (its dirty L2 lines were not
// written back within its range: fused gelu_scale chain -4.8% at 64M, -19.5% at 16M), while
// enabling it per phase kept every cold chain at >= 4x L2 within +0.6% of the textbook bytes.
// The price is ~0.2 s per level. Kernel activity records stayed intact either way.
//
// What the counters see of the cache: within a pass, a kernel reads what the previous kernel
// left in L2 (the unfused chain's second kernel reads its intermediate from L2 at L2-resident
// sizes), and each kernel's writes are counted as written. The first kernel of a pass reads its
// inputs from DRAM even in warm mode, so warm counters at L2-resident sizes overstate DRAM reads
// against the warm timed repetitions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "app/measure/results.h"
#include "kernels/status.h"

namespace fl {

enum class CounterReplay {
  // Auto range + user replay: every pass re-runs the whole chain after the same preparation
  // (cold: the L2 flush), so each pass sees the cache state that the timing phase sees. Our
  // chains are pure functions of their inputs, which is all user replay needs.
  user,
  // Auto range + kernel replay: CUPTI replays each kernel itself, saving and restoring memory.
  kernel,
};
const char* to_string(CounterReplay replay);
bool parse_counter_replay(const std::string& text, CounterReplay* out);

class RangeCounters {
 public:
  // The process's profiler for device 0, set up on first use (the CUDA context must be current).
  // When counters cannot be measured here it returns null and *unavailable_note says why in one
  // plain sentence, and what to do (e.g. counters restricted to administrators). Later calls
  // give the same answer.
  static RangeCounters* instance(std::string* unavailable_note);

  // Runs launch(0) .. launch(launches - 1), each kernel its own range, once per pass.
  // prepare() runs before every pass, outside profiling (cold: flush L2; warm: a warm-up run),
  // and must leave the GPU idle. Checks `cancelled` before every launch: then returns Ok with
  // *was_cancelled = true and no counters.
  // `keep_enabled` leaves the profiler enabled on the context afterwards (saves the enable at
  // the next phase; a diagnostic, see above).
  Status measure(int launches, const std::function<Status()>& prepare,
                 const std::function<Status(int)>& launch, const std::function<bool()>& cancelled,
                 CounterReplay replay, bool keep_enabled, std::vector<LaunchCounters>* out,
                 bool* was_cancelled);

  // Passes the three metrics need on this GPU (queried at start; 1 on H100).
  int passes() const { return passes_; }
  const std::string& chip() const { return chip_; }
  // Set when the profiler found at run time that it may not measure (e.g. permissions checked
  // only when profiling starts): one sentence for the learner. Empty while usable.
  const std::string& unavailable_note() const { return unavailable_note_; }

 private:
  RangeCounters() = default;
  Status start();
  Status start_on_device();  // everything after the support query
  Status enable();   // creates the profiler object on the context, if not there yet
  Status disable();  // destroys it, if there
  Status run_passes(int launches, const std::function<Status()>& prepare,
                    const std::function<Status(int)>& launch,
                    const std::function<bool()>& cancelled, CounterReplay replay,
                    std::vector<LaunchCounters>* out, bool* was_cancelled);
  // Checks a CUPTI result; a code that means "counters cannot be measured here" also sets
  // unavailable_note_.
  Status check(int result, const char* call);

  struct Impl;
  Impl* impl_ = nullptr;  // CUPTI objects and images; lives as long as the process
  int passes_ = 0;
  std::string chip_;
  std::string unavailable_note_;
};

// The sentence shown when counters are restricted to administrators (ERR_NVGPUCTRPERM).
extern const char* const kCountersNotPermitted;

}  // namespace fl
