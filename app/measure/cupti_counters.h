// DRAM and L2 bytes per launch with the CUPTI Range Profiler (the counter phase of DESIGN.md §3):
// `dram__bytes_read.sum`, `dram__bytes_write.sum`, `lts__t_bytes.sum`, one auto range per
// kernel. Works with CUDA 12.6 Update 2+ and 13.x (cupti_range_profiler.h +
// cupti_profiler_host.h; the legacy cuptiProfiler* session API is not used).
//
// Profiling serialises the context after every kernel and may replay kernels, so counters are
// taken in their own run of the chain, never in a timed one. There is one profiler per process
// (device 0's primary context). Everything that does not touch the GPU (chip, counter
// availability, config image, pass count) is set up once, ahead of the first request, together
// with a trial enable that finds missing permissions early. The live backend then enables the
// profiler on the context once, when it starts, and leaves it enabled (enabling costs ~0.2 s; a
// counter phase with it enabled costs ~25 ms per level on an H200). Timing is unaffected: chain
// times with and without it enabled agree within 0.3% (docs/PERFORMANCE.md).
//
// Dirty lines: a kernel's last writes may still sit in L2 when its range ends; they reach DRAM
// when later traffic evicts them, and are counted there. So every pass ends with a `drain`
// kernel in a range of its own: the read-only L2 sweep, during which the chain's leftover dirty
// lines are written back. The live backend adds the drain's DRAM writes to the chain's last
// launch, which keeps chain totals at >= L2 sizes within ~0.2% of the textbook on an H200 (without
// it, a later level of a request came up 5% to 20% short: the profiler used to be enabled per
// level for that reason, at ~0.2 s each).
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

#include "model/results.h"
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
  // The most kernels one launch may run to be counted (a pass's ranges are whole launches): a
  // cuBLASLt call runs one or two, a CUDA graph may run dozens; the caller leaves those out.
  static constexpr int kMaxKernelsPerLaunch = 15;

  // The process's profiler for device 0, set up on first use (the CUDA context must be current).
  // When counters cannot be measured here it returns null and *unavailable_note says why in one
  // plain sentence, and what to do (e.g. counters restricted to administrators). Later calls
  // give the same answer.
  static RangeCounters* instance(std::string* unavailable_note);

  // Runs launch(0) .. launch(launches - 1), each kernel its own range, once per pass; a chain
  // longer than one pass takes (16 ranges) is counted a window of launches at a time, each
  // window a run of the chain from its start, profiled from the window's first launch on.
  // prepare() runs before every pass, outside profiling (cold: flush L2; warm: a warm-up run),
  // and must leave the GPU idle. Checks `cancelled` before every launch: then returns Ok with
  // *was_cancelled = true and no counters.
  // drain(), when given, launches one more kernel at the end of every pass, in a range of its
  // own whose counters go to *drain_out (may be null), not to any launch: it closes the last
  // launch's range the way a following kernel would (see the note on keeping the profiler
  // enabled above).
  // `keep_enabled` leaves the profiler enabled on the context afterwards (saves the enable at
  // the next phase); disable() ends it.
  // kernels_per_launch: how many kernels each launch runs (a cuBLASLt call may run two, e.g. a
  // split-K GEMM and its reduction); their ranges are summed into the launch's counters. Empty
  // means one kernel per launch.
  Status measure(int launches, const std::vector<int>& kernels_per_launch,
                 const std::function<Status()>& prepare, const std::function<Status(int)>& launch,
                 const std::function<Status()>& drain, const std::function<bool()>& cancelled,
                 CounterReplay replay, bool keep_enabled, std::vector<LaunchCounters>* out,
                 LaunchCounters* drain_out, bool* was_cancelled);
  // Enables the profiler on the context now (it stays enabled until disable()), so that the
  // first counter phase does not pay for it; no-op when it is enabled.
  Status enable();
  // Ends a profiler left enabled by measure(keep_enabled = true); no-op when none is.
  Status disable();

  // Passes the three metrics need on this GPU (queried at start; 1 on H100).
  int passes() const { return passes_; }
  const std::string& chip() const { return chip_; }
  // Set when the profiler found at run time that it may not measure (e.g. permissions checked
  // only when profiling starts): one sentence for the learner. Empty while usable.
  const std::string& unavailable_note() const { return unavailable_note_; }
  // The context it profiles was lost (a kernel fault, the device reset): stop profiling it and
  // say `why` from now on (unavailable_note), for this backend and every later one.
  void retire(const std::string& why);

 private:
  RangeCounters() = default;
  Status start();
  Status start_on_device();  // everything after the support query
  Status run_passes(int launches, const std::vector<int>& kernels_per_launch,
                    const std::function<Status()>& prepare,
                    const std::function<Status(int)>& launch, const std::function<Status()>& drain,
                    const std::function<bool()>& cancelled, CounterReplay replay,
                    std::vector<LaunchCounters>* out, LaunchCounters* drain_out,
                    bool* was_cancelled);
  // The steps of run_passes: the counter data image and the auto-range configuration; every
  // pass of the chain (stopping early on `cancelled`); the counted bytes of each range summed
  // per launch (`owner`: the launch of each kernel's range; the drain's range comes after them).
  Status configure_passes(CounterReplay replay);
  Status profile_passes(int begin, int end, const std::function<Status()>& prepare,
                        const std::function<Status(int)>& launch,
                        const std::function<Status()>& drain,
                        const std::function<bool()>& cancelled, bool* was_cancelled);
  // One window's ranges added to *out (owner: the launch of each of its kernels' ranges).
  Status evaluate_ranges(const std::vector<int>& owner, int ranges,
                         std::vector<LaunchCounters>* out, LaunchCounters* drain_out);
  Status stop_range(bool* all_passes);
  Status decode_ranges(size_t* dropped);
  // Checks a CUPTI result; a code that means "counters cannot be measured here" also sets
  // unavailable_note_.
  Status check(int result, const char* call);

  struct Impl;
  Impl* impl_ = nullptr;  // CUPTI objects and images; lives as long as the process
  int passes_ = 0;
  std::string chip_;
  std::string unavailable_note_;
};

// The windows a chain is counted in: runs of whole launches [begin, end) of `kernels` kernels,
// at most RangeCounters::kMaxKernelsPerLaunch of them (a pass's 16 ranges with the drain), a
// launch of more on its own (RangeCounters::measure refuses those). Empty kernels_per_launch
// means one kernel per launch.
struct CounterWindow {
  int begin, end, kernels;
};
std::vector<CounterWindow> counter_windows(const std::vector<int>& kernels_per_launch,
                                           int launches);

// The sentence shown when counters are restricted to administrators (ERR_NVGPUCTRPERM).
extern const char* const kCountersNotPermitted;

}  // namespace fl
