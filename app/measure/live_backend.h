// The live backend: runs lesson kernels on GPU 0, times them and counts their bytes.
//
// Timing phase (measure): CUPTI activity records, one per kernel, each tied to its (repetition,
// launch) by an external correlation id pushed around the launch. A launch's time is its
// record's end - start; the chain's is the last launch's end - the first launch's start, so it
// includes the gaps between launches, which is what fusion removes at small sizes. When CUPTI
// cannot be used (another profiler holds it) CUDA events around every launch take over.
//
// Counter phase (measure_counters): the CUPTI Range Profiler runs the chain once more (once per
// pass), one auto range per kernel, for DRAM bytes read and written and L2 bytes.
//
// Cold cache: before every repetition (and before every counter pass), a read-only pass over a
// buffer of at least 2x L2 evicts the lesson's data. A flush that writes would leave dirty
// lines that the next kernel pays for. The flush kernel is never timed or profiled.
#pragma once

#include <map>
#include <memory>
#include <utility>

#include "app/measure/backend.h"
#include "model/caps.h"
#include "app/measure/choices.h"
#include "app/measure/cupti_counters.h"
#include "app/measure/gpu_faults.h"
#include "kernels/device_buffer.h"
#include "kernels/lesson.h"

namespace fl {

struct LiveOptions {
  int min_repetitions = 20;
  int max_repetitions = 2000;
  double target_seconds = 0.2;  // time budget per level; repetitions adapt to it
  uint64_t seed = 0;            // 0: a fresh seed per measurement
  Timer timer = Timer::cupti;   // events: time with CUDA events (bench --timer events)
  bool counters = true;         // false: no counter phase, the profiler is never set up
  bool compare_timers = false;  // diagnostic: CUDA events around the CUPTI-timed launches too
  CounterReplay counter_replay = CounterReplay::user;
  // The range profiler is enabled once, when the backend starts (~0.2 s), and stays enabled:
  // a counter phase then costs ~25 ms per level. false: enabled for each request's counter
  // phase and disabled after it (a diagnostic: `bench --fresh-profiler`).
  bool keep_profiler_enabled = true;
  // The kernel that ends every counter pass in a range of its own (cupti_counters.h): "flush"
  // (the read-only L2 sweep: the chain's lines still dirty in L2 reach DRAM inside the pass,
  // and those writes are added to the chain's last launch), "noop" (one empty block, counted
  // nowhere) or "none". The environment variable FL_COUNTER_DRAIN overrides it (a diagnostic).
  std::string counter_drain = "flush";
  // Diagnostic: CUPTI traces every runtime call, not just the launches (the first backend of a
  // process decides).
  bool trace_all_runtime_apis = false;
  // Copy-bandwidth references kept (caps.h, kMaxCopyReferences); tests set a small one.
  size_t copy_references = kMaxCopyReferences;
  // Sample the GPU's clocks, throttle reasons and other processes through NVML before, between
  // (at most every watch_every_s) and after the timed repetitions (Measurement::gpu).
  bool watch_gpu = true;
  double watch_every_s = 0.1;
};

// What the window measures with while a slider moves: enough repetitions for a stable median of
// these microsecond kernels, few enough that a result is back within a few frames (`fusionlab
// latency` measures how fast). `bench` uses more repetitions.
LiveOptions interactive_live_options();

class KernelTracer;

class LiveBackend final : public MeasureBackend {
 public:
  // Fails with one plain sentence when no usable GPU is present (no driver, no device).
  static Status create(const LiveOptions& options, std::unique_ptr<LiveBackend>* out);
  ~LiveBackend() override;

  const DeviceFacts& device() const override { return device_; }
  const char* kind() const override { return "live"; }
  Status measure(const MeasureRequest& request, const CancelCheck& cancelled,
                 std::vector<Measurement>* out) override;
  Status measure_counters(const MeasureRequest& request, const CancelCheck& cancelled,
                          std::vector<Measurement>* measurements) override;
  bool counters_available() const override { return counters_ != nullptr; }
  std::string counters_note() const override { return counters_note_; }
  std::string timing_note() const override { return timing_note_; }
  std::string lost_reason() const override { return lost_reason_; }
  std::shared_ptr<GpuWatch> gpu_watch() const override { return watch_; }
  std::string gpu_watch_note() const override { return watch_note_; }
  // Turns the sampling around the repetitions off and on again (its overhead, measured in one
  // run: tests/gpu/gpu_watch_gpu_test.cpp).
  void set_gpu_watch_sampling(bool on) {
    watching_ = ConditionsRecorder(on ? watch_.get() : nullptr, options_.watch_every_s);
  }

  // "cupti_activity" or "cuda_events": how measure() times launches.
  const char* timing_method() const {
    return tracer_ != nullptr ? "cupti_activity" : "cuda_events";
  }
  // The counter profiler's pass count and chip ("GH100"), 0 / empty without counters.
  int counter_passes() const { return counters_ != nullptr ? counters_->passes() : 0; }
  std::string counter_chip() const {
    return counters_ != nullptr ? counters_->chip() : std::string();
  }
  // Repetitions whose kernel records were matched by launch order because CUPTI delivered no
  // external correlation records (0 when every record carried our id). Diagnostic.
  int64_t order_matched_repetitions() const { return order_matched_; }

  // Copy bandwidth (GB/s, bytes read + written) of the faster of cudaMemcpy device-to-device and
  // a 16-byte-vector copy kernel, moving `bytes_moved` bytes in total. Cached per (bytes, mode),
  // at most options.copy_references of them (the oldest forgotten first).
  Status copy_bandwidth(int64_t bytes_moved, CacheMode cache, double* gbps);
  // The device's roof: copy bandwidth over 1 GiB, cold. Stored in device().roof_gbps.
  Status measure_roof();

  // Largest size of `lesson` (at row length `inner`, 0 = default) that fits in free device
  // memory next to our own buffers.
  int64_t largest_fitting_size(const Lesson& lesson, Precision p, int64_t inner = 0) const;

 private:
  LiveBackend() = default;
  Status init();
  // A throwaway profiled pass right after the profiler is enabled (see the .cu file).
  Status counters_warm_up();
  Status flush_l2();
  Status measure_level(const Lesson& lesson, const MeasureRequest& request, int level,
                       const CancelCheck& cancelled, Measurement* m);
  // The repetitions of the timing phase, timed by `timer` (Timer::cupti needs tracer_); CUDA
  // events time the same launches too with options_.compare_timers. Returns Ok with
  // *records_missing when CUPTI did not deliver a record for every launch.
  Status time_repetitions(const MeasureRequest& request, int level, int launches, int reps,
                          Timer timer, const CancelCheck& cancelled, Measurement* m,
                          bool* records_missing);
  // The counter phase of one level `m` of `measurements`: every pass of its chain under the
  // range profiler. *stop when the phase ends here (cancelled, or the counters turned out to be
  // unavailable: then every measurement says so).
  Status count_level(const MeasureRequest& request, const std::string& drain_kind,
                     const CancelCheck& cancelled, std::vector<Measurement>* measurements,
                     Measurement* m, bool* stop);
  // The pass with phase stamps on (request.phases): each launch whose kernel records phases
  // gets its LaunchResult::phases.
  Status measure_phases(CacheMode cache, int level, Measurement* m);
  void mark_counters_unavailable(std::vector<Measurement>* measurements) const;
  // Every launch's and the chain's copy-bandwidth reference ("% of copy"), in `cache` mode.
  void add_copy_references(CacheMode cache, Measurement* m);
  // A failed request (gpu_faults.h): its one sentence; a lost context is reset (reset_device) or
  // the backend is lost for good (lost_reason_).
  Status fail_request(FailureKind kind, const std::string& where, const Status& st);
  bool reset_device(std::string* why_not);
  // The test-only fault switch's points (FL_FAULT, gpu_faults.h): at the start of a level, and
  // between batches of repetitions.
  Status injected_fault(int level);
  Status injected_mid_measurement_fault(int level);
  Status validate(const MeasureRequest& request, const Lesson** lesson,
                  std::vector<int>* levels) const;
  Status ensure_workspace(const Lesson& lesson, Shape shape, Precision p);
  // Median time (us) of `body` over repetitions, flushing L2 before each one when cold.
  template <typename Body>
  Status time_median(CacheMode cache, int repetitions, Body body, double* median_us);
  // The same with CUPTI kernel records (one kernel launch per repetition in `body`).
  template <typename Body>
  Status time_median_cupti(CacheMode cache, int repetitions, Body body, double* median_us);

  LiveOptions options_;
  DeviceFacts device_;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer flush_buffer_, flush_sink_;
  DeviceBuffer phase_records_, phase_count_;  // the phase sink's buffer, made at first use
  CopyReferenceCache copy_refs_;
  uint64_t seed_counter_ = 0;
  double flush_us_ = 0;                // median time of one cold-L2 flush, measured at start
  KernelTracer* tracer_ = nullptr;     // null: CUDA events
  RangeCounters* counters_ = nullptr;  // null: no counter phase (counters_note_ says why)
  std::string timing_note_, counters_note_;
  // The GPU watch (null when none) and what samples it around the timed repetitions.
  std::shared_ptr<GpuWatch> watch_;
  std::string watch_note_;
  ConditionsRecorder watching_;
  std::string lost_reason_;             // non-empty: the GPU cannot be used again (restart)
  bool simulated_device_lost_ = false;  // FL_FAULT=device-lost fired: every call "fails"
  int64_t order_matched_ = 0;

  // The workspace of the last (lesson, size, precision): moving the fusion slider reuses it.
  std::unique_ptr<Workspace> workspace_;
  std::string workspace_lesson_;
  Shape workspace_shape_;
  Precision workspace_precision_ = Precision::fp32;
};

// Device facts without creating a context-owning backend (used by `fusionlab --version`-like
// queries and the UI's "no GPU" banner). Never fails: an unusable device has usable=false.
DeviceFacts query_device();

// Device memory in use on GPU 0 (cudaMemGetInfo: total - free), in MiB: every process's, which on
// the lent machine is ours. -1 when it cannot be read. The soak samples it.
double device_memory_used_mib();

}  // namespace fl
