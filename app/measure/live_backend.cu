// The live backend (see live_backend.h).
#include "app/measure/live_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>
#include <string>

#include "app/measure/cupti_tracer.h"
#include "app/measure/gpu_faults.h"
#include "kernels/blas.h"
#include "kernels/catalog.h"
#include "kernels/cuda_check.h"
#include "model/portable.h"

namespace fl {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMemoryMarginBytes = int64_t(256) << 20;  // left free for the driver & others
// Host time to issue one launch with its CUPTI correlation push/pop (measured ~3-5 us on the
// lent H100/H200 machines): the floor of a repetition's cost when kernels take microseconds.
constexpr double kLaunchIssueUs = 4.0;
constexpr int kBatch = 64;  // repetitions per batch: one synchronisation and CUPTI flush each
// A level's CUPTI timing is trusted when at least this share of its repetitions came back with
// a record for every launch; otherwise it is timed again with CUDA events.
constexpr double kMinRecordedShare = 0.5;

// Reads the buffer and writes nothing (unless the impossible happens), so no dirty lines stay
// behind in L2 for the next kernel to pay for.
__global__ void flush_read_kernel(const int4* __restrict__ data, int64_t count, int* sink) {
  int acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int4 v = data[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x5eed1e55)
    *sink = acc;  // the buffer is zeros: never true, but the compiler can't know
}

// The tuned copy: one 16-byte vector per thread, coalesced. `count` is in 16-byte vectors.
__global__ void __launch_bounds__(kThreads)
    copy16_kernel(const int4* __restrict__ src, int4* __restrict__ dst, int64_t count) {
  const int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (i < count) dst[i] = src[i];
}

std::string reason_no_gpu(cudaError_t err, int driver_version, int runtime_version) {
  switch (err) {
    case cudaErrorNoDevice:
      return no_device_message();
    case cudaErrorInsufficientDriver:
      return old_driver_message(driver_version, runtime_version);
    default:
      return std::string("The CUDA runtime could not start: ") + cudaGetErrorString(err) + ".";
  }
}

// Owns a set of CUDA events (timing enabled) and destroys them on every path out.
class EventPool {
 public:
  EventPool() = default;
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  ~EventPool() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  Status create(size_t count) {
    while (events_.size() < count) {
      cudaEvent_t e = nullptr;
      FL_CUDA_TRY(cudaEventCreate(&e));
      events_.push_back(e);
    }
    return Status::Ok();
  }
  cudaEvent_t operator[](size_t i) const { return events_[i]; }

 private:
  std::vector<cudaEvent_t> events_;
};

Status elapsed_us(cudaEvent_t start, cudaEvent_t stop, double* us) {
  float ms = 0;
  FL_CUDA_TRY(cudaEventElapsedTime(&ms, start, stop));
  *us = ms * 1e3;
  return Status::Ok();
}

}  // namespace

namespace {
// Diagnostic: with FL_TRACE_PHASES=1 in the environment, each stage of a measurement prints its
// wall time to stderr ("where do the milliseconds of a slider answer go").
bool trace_phases() {
  static const bool enabled = std::getenv("FL_TRACE_PHASES") != nullptr;
  return enabled;
}

// The fault switch's kernel (gpu_faults.h): `kernel-fault` launches it on an address no
// allocation owns, `launch` with a block too large to launch.
__global__ void fault_kernel(int* target) {
  if (threadIdx.x == 0) *target = 0x0bad;
}

// Ends a counter pass in a range of its own (cupti_counters.h): one warp, one store.
__global__ void drain_kernel(int* sink) {
  if (threadIdx.x == 0) *sink = 0;
}

struct PhaseTimer {
  explicit PhaseTimer(const char* name) : name_(name), t0_(std::chrono::steady_clock::now()) {}
  ~PhaseTimer() {
    static const bool enabled = std::getenv("FL_TRACE_PHASES") != nullptr;
    if (!enabled) return;
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
    std::fprintf(stderr, "[phase] %-22s %8.2f ms\n", name_, ms);
  }
  const char* name_;
  std::chrono::steady_clock::time_point t0_;
};
}  // namespace

LiveOptions interactive_live_options() {
  LiveOptions o;
  o.min_repetitions = 10;
  o.target_seconds = 0.01;
  return o;
}

DeviceFacts query_device() {
  DeviceFacts d;
  cudaRuntimeGetVersion(&d.runtime_version);
  cudaDriverGetVersion(&d.driver_version);  // 0 when no driver is installed
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  // The fault switch (gpu_faults.h) simulates the two ways a machine has no usable GPU.
  if (fault_active(FaultPoint::no_device)) err = cudaErrorNoDevice;
  if (fault_active(FaultPoint::old_driver)) {
    err = cudaErrorInsufficientDriver;
    d.driver_version = std::max(0, (d.runtime_version / 1000 - 1) * 1000);
  }
  if (err != cudaSuccess || count == 0) {
    d.unusable_reason = reason_no_gpu(err == cudaSuccess ? cudaErrorNoDevice : err,
                                      d.driver_version, d.runtime_version);
    cudaGetLastError();  // clear the sticky-free error so later queries start clean
    return d;
  }
  cudaDeviceProp prop{};
  const cudaError_t perr = cudaGetDeviceProperties(&prop, 0);
  if (perr != cudaSuccess) {
    d.unusable_reason = reason_no_gpu(perr, d.driver_version, d.runtime_version);
    return d;
  }
  d.usable = true;
  d.name = prop.name;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.sm_count = prop.multiProcessorCount;
  d.l2_bytes = prop.l2CacheSize;
  d.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  return d;
}

double device_memory_used_mib() {
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return static_cast<double>(total - free_bytes) / (1 << 20);
}

Status LiveBackend::create(const LiveOptions& options, std::unique_ptr<LiveBackend>* out) {
  std::unique_ptr<LiveBackend> backend(new LiveBackend());
  backend->options_ = options;
  backend->copy_refs_ = CopyReferenceCache(options.copy_references);
  FaultSwitch fault;
  FL_TRY(fault_switch_from_env(&fault));  // a mistyped test switch is an error, not no fault
  backend->device_ = query_device();
  if (!backend->device_.usable) return Status::Error(backend->device_.unusable_reason);
  FL_TRY(backend->init());
  *out = std::move(backend);
  return Status::Ok();
}

Status LiveBackend::init() {
  FL_CUDA_TRY(cudaSetDevice(0));
  FL_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  // At least 2x L2, rounded to 16 bytes; 3x leaves headroom for L2 policies we do not model.
  const int64_t flush_bytes = std::max<int64_t>(3 * device_.l2_bytes, int64_t(64) << 20) / 16 * 16;
  FL_TRY(flush_buffer_.allocate(flush_bytes));
  FL_CUDA_TRY(cudaMemset(flush_buffer_.get(), 0, flush_bytes));
  FL_TRY(flush_sink_.allocate(sizeof(int)));
  FL_CUDA_TRY(cudaDeviceSynchronize());
  // What one cold flush costs, so repetition budgets include it.
  FL_TRY(flush_l2());
  FL_TRY(time_median(
      CacheMode::warm, 5, [this] { return flush_l2(); }, &flush_us_));
  if (options_.watch_gpu) {
    char bus_id[32] = {};
    if (cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), 0) == cudaSuccess)
      watch_ = open_nvml_watch(bus_id, &watch_note_);
    cudaGetLastError();
    watching_ = ConditionsRecorder(watch_.get(), options_.watch_every_s);
  } else {
    watch_note_ = "not asked for";
  }
  std::random_device rd;
  seed_counter_ = options_.seed != 0 ? options_.seed : (uint64_t(rd()) << 32 | rd());

  // CUPTI, set up now so that the first request does not pay for it. Either part may be
  // unavailable; each then says why in one sentence and the backend measures without it.
  if (options_.timer == Timer::cupti) {
    KernelTracer* tracer = nullptr;
    const Status st = KernelTracer::instance(
        &tracer, options_.trace_all_runtime_apis ? TracedApis::all_runtime : TracedApis::launches);
    if (st.ok())
      tracer_ = tracer;
    else
      timing_note_ = st.message();
  }
  if (options_.counters) {
    counters_ = RangeCounters::instance(&counters_note_);
    if (counters_ != nullptr && !counters_->unavailable_note().empty()) {
      counters_note_ = counters_->unavailable_note();  // found out by an earlier backend
      counters_ = nullptr;
    }
    // Enabled now, ahead of the first request, so no counter phase pays the ~0.2 s.
    if (counters_ != nullptr && options_.keep_profiler_enabled) {
      const Status enabled = [&]() -> Status {
        FL_TRY(counters_->enable());
        return counters_warm_up();
      }();
      if (!enabled.ok()) {
        counters_note_ = !counters_->unavailable_note().empty()
                             ? counters_->unavailable_note()
                             : "DRAM and L2 counters could not start (" + enabled.message() +
                                   "), so they are not measured (timings are).";
        counters_ = nullptr;
      }
    }
  }
  return Status::Ok();
}

// One profiled pass whose counters are thrown away: an L2 sweep as the "chain", closed by the
// usual drain. On the H200 (2026-11-22) the first profiled pass after the profiler is enabled
// reported ~29 MB of DRAM writes more than its chain made, whatever the chain, size or level
// (every shipped recording made before this had ~29 MB of writes on its first measurement, a
// 1K-element level 0 whose textbook writes are 8 KB; enabling per request showed it on every
// request). Every later pass matched the textbook. Why is not known; this pass absorbs it
// (docs/PERFORMANCE.md, "Fidelity: CUPTI timing and DRAM/L2 counters").
Status LiveBackend::counters_warm_up() {
  std::vector<LaunchCounters> values;
  LaunchCounters drained;
  bool was_cancelled = false;
  auto prepare = [&]() -> Status {
    FL_TRY(flush_l2());
    FL_CUDA_TRY(cudaStreamSynchronize(stream_));
    return Status::Ok();
  };
  FL_TRY(counters_->measure(
      1, {}, prepare, [&](int) { return flush_l2(); }, [&] { return flush_l2(); }, nullptr,
      options_.counter_replay, /*keep_enabled=*/true, &values, &drained, &was_cancelled));
  if (trace_phases() && !values.empty()) {
    std::fprintf(stderr,
                 "[counters] warm-up pass: sweep dram wr %lld; drain wr %lld (thrown away)\n",
                 static_cast<long long>(values[0].dram_write_bytes),
                 static_cast<long long>(drained.dram_write_bytes));
  }
  return Status::Ok();
}

LiveBackend::~LiveBackend() {
  workspace_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status LiveBackend::flush_l2() {
  const int64_t count = static_cast<int64_t>(flush_buffer_.bytes() / 16);
  flush_read_kernel<<<device_.sm_count * 8, 512, 0, stream_>>>(flush_buffer_.as<int4>(), count,
                                                               flush_sink_.as<int>());
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

template <typename Body>
Status LiveBackend::time_median(CacheMode cache, int repetitions, Body body, double* median_us) {
  EventPool events;
  FL_TRY(events.create(2));
  std::vector<double> samples;
  for (int r = 0; r < repetitions; ++r) {
    if (cache == CacheMode::cold) FL_TRY(flush_l2());
    FL_CUDA_TRY(cudaEventRecord(events[0], stream_));
    FL_TRY(body());
    FL_CUDA_TRY(cudaEventRecord(events[1], stream_));
    FL_CUDA_TRY(cudaEventSynchronize(events[1]));
    double us = 0;
    FL_TRY(elapsed_us(events[0], events[1], &us));
    samples.push_back(us);
  }
  *median_us = summarize(samples).median;
  return Status::Ok();
}

template <typename Body>
Status LiveBackend::time_median_cupti(CacheMode cache, int repetitions, Body body,
                                      double* median_us) {
  FL_CUDA_TRY(cudaStreamSynchronize(stream_));
  FL_TRY(tracer_->flush(false));
  tracer_->discard_all();
  const uint64_t first = tracer_->reserve_ids(repetitions);
  for (int r = 0; r < repetitions; ++r) {
    if (cache == CacheMode::cold) FL_TRY(flush_l2());  // untagged: not ours to time
    FL_TRY(tracer_->push(first + r));
    const Status launched = body();
    const Status popped = tracer_->pop();
    FL_TRY(launched);
    FL_TRY(popped);
  }
  FL_CUDA_TRY(cudaStreamSynchronize(stream_));
  const uint64_t last = first + repetitions - 1;
  FL_TRY(tracer_->flush(false));
  if (tracer_->count(first, last) < static_cast<size_t>(repetitions)) FL_TRY(tracer_->flush(true));
  std::vector<TracedKernel> tagged, untagged;
  tracer_->take(first, last, &tagged, &untagged);
  if (tagged.empty()) return time_median(cache, repetitions, body, median_us);  // no records
  std::vector<double> samples;
  for (const TracedKernel& k : tagged) samples.push_back((k.end_ns - k.start_ns) * 1e-3);
  *median_us = summarize(samples).median;
  return Status::Ok();
}

Status LiveBackend::copy_bandwidth(int64_t bytes_moved, CacheMode cache, double* gbps) {
  const int64_t half = std::max<int64_t>(16, bytes_moved / 2 / 16 * 16);  // bytes per side
  if (copy_refs_.find(half, cache, gbps)) return Status::Ok();
  DeviceBuffer src, dst;
  FL_TRY(src.allocate(half).with_context("copy-bandwidth buffers"));
  FL_TRY(dst.allocate(half).with_context("copy-bandwidth buffers"));
  FL_CUDA_TRY(cudaMemsetAsync(src.get(), 1, half, stream_));
  const int64_t vecs = half / 16;
  const unsigned blocks = static_cast<unsigned>((vecs + kThreads - 1) / kThreads);
  auto memcpy_body = [&]() -> Status {
    FL_CUDA_TRY(cudaMemcpyAsync(dst.get(), src.get(), half, cudaMemcpyDeviceToDevice, stream_));
    return Status::Ok();
  };
  auto kernel_body = [&]() -> Status {
    copy16_kernel<<<blocks, kThreads, 0, stream_>>>(src.as<int4>(), dst.as<int4>(), vecs);
    FL_CUDA_TRY(cudaGetLastError());
    return Status::Ok();
  };
  // Warm up both, then time each the same way.
  FL_TRY(memcpy_body());
  FL_TRY(kernel_body());
  const int reps = std::max(10, options_.min_repetitions);
  double memcpy_us = 0, kernel_us = 0;
  FL_TRY(time_median(cache, reps, memcpy_body, &memcpy_us));
  if (tracer_ != nullptr) {
    // The lessons' kernels are timed by CUPTI (kernel start to end); the copy kernel must be
    // too, or every "% of copy" would compare GPU time with GPU time plus launch latency.
    // (cudaMemcpy stays event-timed, which only makes it the slower candidate.)
    FL_TRY(time_median_cupti(cache, reps, kernel_body, &kernel_us));
  } else {
    FL_TRY(time_median(cache, reps, kernel_body, &kernel_us));
  }
  const double best_us = std::min(memcpy_us, kernel_us);
  *gbps = best_us > 0 ? 2.0 * half / (best_us * 1e3) : 0;
  copy_refs_.add(half, cache, *gbps, &device_.copy_bandwidth);
  return Status::Ok();
}

Status LiveBackend::measure_roof() {
  double gbps = 0;
  FL_TRY(
      copy_bandwidth(int64_t(2) << 30, CacheMode::cold, &gbps).with_context("measuring the roof"));
  device_.roof_gbps = gbps;
  return Status::Ok();
}

int64_t LiveBackend::largest_fitting_size(const Lesson& lesson, Precision p, int64_t inner) const {
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return 0;
  int64_t budget = static_cast<int64_t>(free_bytes) - kMemoryMarginBytes;
  if (workspace_) {
    if (const Lesson* held = find_lesson(workspace_lesson_)) {
      budget += held->workspace_bytes(workspace_shape_, workspace_precision_);
    }
  }
  const SizeAxis& axis = lesson.info().size_axis;
  int64_t lo = 0, hi = axis.max;
  while (lo < hi) {  // largest size whose workspace fits the budget
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (lesson.workspace_bytes(lesson.resolve({mid, inner}), p) <= budget)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

Status LiveBackend::ensure_workspace(const Lesson& lesson, Shape shape, Precision p) {
  if (workspace_ && workspace_lesson_ == lesson.info().id && workspace_shape_.size == shape.size &&
      workspace_shape_.inner == shape.inner && workspace_precision_ == p) {
    return Status::Ok();
  }
  const int64_t fits = largest_fitting_size(lesson, p, shape.inner);
  workspace_.reset();
  const int64_t needed = lesson.workspace_bytes(shape, p);
  if (shape.size > fits) {
    return Status::Error(lesson.info().id + " at " + std::to_string(shape.size) + " " +
                         lesson.info().size_axis.unit + " needs " + std::to_string(needed >> 20) +
                         " MiB of GPU memory; the largest size that fits now is " +
                         std::to_string(fits) + " " + lesson.info().size_axis.unit + ".");
  }
  const Status created = lesson.create_workspace(shape, p, &workspace_);
  if (!created.ok()) {
    workspace_.reset();
    if (classify_failure(created.message()) != FailureKind::out_of_memory) return created;
    // Another program took the memory between the check above and the allocation.
    cudaGetLastError();
    return Status::Error(lesson.info().id + " at " + std::to_string(shape.size) + " " +
                         lesson.info().size_axis.unit + " needs " + std::to_string(needed >> 20) +
                         " MiB of GPU memory, more than is free now; the largest size that fits "
                         "now is " +
                         std::to_string(largest_fitting_size(lesson, p, shape.inner)) + " " +
                         lesson.info().size_axis.unit + ".");
  }
  workspace_lesson_ = lesson.info().id;
  workspace_shape_ = shape;
  workspace_precision_ = p;
  return Status::Ok();
}

Status LiveBackend::validate(const MeasureRequest& request, const Lesson** out_lesson,
                             std::vector<int>* out_levels) const {
  const Lesson* lesson = find_lesson(request.lesson);
  if (lesson == nullptr) return Status::Error("unknown lesson '" + request.lesson + "'");
  const SizeAxis& axis = lesson->info().size_axis;
  if (request.size < 1 || request.size > axis.max) {
    return Status::Error(request.lesson + " takes sizes from 1 to " + std::to_string(axis.max) +
                         " " + axis.unit + "; got " + std::to_string(request.size) + ".");
  }
  const std::string unsupported =
      precision_unsupported_reason(request.precision, device_.cc_major, device_.cc_minor);
  if (!unsupported.empty()) return Status::Error(unsupported);
  const std::string chosen_as =
      choose_as_refusal(request.choose_as_cc, device_.cc_major * 10 + device_.cc_minor);
  if (!chosen_as.empty()) return Status::Error(chosen_as);

  std::vector<int> levels = request.levels;
  if (levels.empty()) {
    for (int l = 0; l < lesson->level_count(); ++l) levels.push_back(l);
  }
  for (int level : levels) {
    if (level < 0 || level >= lesson->level_count()) {
      return Status::Error(request.lesson + " has levels 0.." +
                           std::to_string(lesson->level_count() - 1) + "; got " +
                           std::to_string(level) + ".");
    }
  }
  if (request.inner < 0 || (axis.inner_max > 0 && request.inner > axis.inner_max)) {
    return Status::Error(request.lesson + " takes a " + axis.inner_name + " up to " +
                         std::to_string(axis.inner_max) + "; got " + std::to_string(request.inner) +
                         ".");
  }
  *out_lesson = lesson;
  *out_levels = std::move(levels);
  return Status::Ok();
}

Status LiveBackend::measure(const MeasureRequest& request, const CancelCheck& cancelled,
                            std::vector<Measurement>* out) {
  if (!lost_reason_.empty()) return Status::Error(lost_reason_);
  const Lesson* lesson = nullptr;
  std::vector<int> levels;
  FL_TRY(validate(request, &lesson, &levels));
  const Shape shape = lesson->resolve({request.size, request.inner});
  {
    PhaseTimer t("ensure_workspace");
    const Status made = ensure_workspace(*lesson, shape, request.precision);
    if (!made.ok()) {
      const FailureKind kind = classify_failure(made.message());
      if (kind == FailureKind::context_lost || kind == FailureKind::device_lost)
        return fail_request(kind, request.lesson, made);
      cudaGetLastError();
      return made;
    }
  }
  // The variants this request forces, and the table's choice for every other launch.
  for (const FusionLevel& level : lesson->info().levels) {
    for (const VariantInfo& v : level.variants) {
      const auto forced = request.variants.find(v.launch);
      FL_TRY(workspace_->force_variant(
          v.launch, forced == request.variants.end() ? std::string() : forced->second));
    }
  }
  workspace_->choose_as(request.choose_as_cc);
  PhaseTimer whole("measure (all levels)");
  std::string refused;  // levels that ran out of memory: the others are still measured
  for (int level : levels) {
    if (cancelled && cancelled()) return Status::Ok();
    Measurement m;
    const Status st = measure_level(*lesson, request, level, cancelled, &m);
    if (st.ok()) {
      out->push_back(std::move(m));
      continue;
    }
    const std::string where = request.lesson + " level " + std::to_string(level);
    const FailureKind kind =
        simulated_device_lost_ ? FailureKind::device_lost : classify_failure(st.message());
    if (kind == FailureKind::out_of_memory) {
      cudaGetLastError();  // not sticky: the workspace and the context are fine
      refused += (refused.empty() ? "" : " ") +
                 level_out_of_memory_message(
                     request.lesson, level, shape.size,
                     largest_fitting_size(*lesson, request.precision, request.inner),
                     lesson->info().size_axis.unit);
      continue;
    }
    return fail_request(kind, where, st);
  }
  if (!refused.empty()) return Status::Error(refused);
  return Status::Ok();
}

// A failed request, by what its CUDA error means (gpu_faults.h): one sentence for the learner;
// a lost context is reset and set up again on this (the engine's) thread, or, when that fails
// or the GPU itself is gone, lost_reason() says to restart.
Status LiveBackend::fail_request(FailureKind kind, const std::string& where, const Status& st) {
  // A CUDA error may leave the workspace unusable: drop it so the next request starts clean.
  workspace_.reset();
  const std::string error = simulated_device_lost_ ? std::string("cudaErrorDevicesUnavailable")
                                                   : cuda_error_name_in(st.message());
  if (kind == FailureKind::device_lost) {
    lost_reason_ = device_lost_message(where, error);
    return Status::Error(lost_reason_);
  }
  if (kind == FailureKind::context_lost) {
    std::string why_not;
    const bool recovered = reset_device(&why_not);
    const std::string message = context_lost_message(where, error, recovered, why_not);
    if (!recovered) lost_reason_ = message;
    return Status::Error(message);
  }
  cudaGetLastError();
  return Status::Error(request_failed_message(where, st.message()));
}

// After a kernel fault: everything made on the lost context is let go (CUPTI's range profiler
// belongs to it, so counters stay off), the device is reset and set up again as at start.
bool LiveBackend::reset_device(std::string* why_not) {
  workspace_.reset();
  if (tracer_ != nullptr) {
    (void)tracer_->flush(true);  // records of the lost context: not wanted
    tracer_->discard_all();
  }
  if (counters_ != nullptr) counters_->retire(counters_off_after_reset_note());
  counters_ = nullptr;
  counters_note_ = counters_off_after_reset_note();
  blas::forget_device_state();
  flush_buffer_.reset();
  flush_sink_.reset();
  phase_records_.reset();
  phase_count_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  stream_ = nullptr;
  const cudaError_t reset = cudaDeviceReset();
  if (reset != cudaSuccess) {
    *why_not = std::string("cudaDeviceReset: ") + cudaGetErrorName(reset);
    return false;
  }
  const Status again = init();
  if (!again.ok()) {
    *why_not = without_source_locations(again.message());
    return false;
  }
  return true;
}

// The fault switch's points inside a level's measurement (gpu_faults.h), each through the same
// calls and checks as the real failure would go.
Status LiveBackend::injected_fault(int level) {
  if (fault_fires(FaultPoint::alloc, level)) {
    DeviceBuffer too_large;  // more than the GPU has: cudaMalloc refuses it for real
    FL_TRY(too_large.allocate(static_cast<size_t>(device_.memory_bytes) * 4 + (size_t(1) << 30)));
  }
  if (fault_fires(FaultPoint::launch, level)) {
    fault_kernel<<<1, 4096, 0, stream_>>>(flush_sink_.as<int>());  // 4096 threads: refused
    FL_CUDA_TRY(cudaGetLastError());
  }
  if (fault_fires(FaultPoint::kernel_fault, level)) {
    fault_kernel<<<1, 32, 0, stream_>>>(reinterpret_cast<int*>(uintptr_t(8)));
    FL_CUDA_TRY(cudaGetLastError());
    FL_CUDA_TRY(cudaStreamSynchronize(stream_));  // cudaErrorIllegalAddress, for real
  }
  return Status::Ok();
}

// The points that strike between batches of repetitions: mid-measurement.
Status LiveBackend::injected_mid_measurement_fault(int level) {
  if (fault_fires(FaultPoint::sync, level)) {
    FL_CUDA_TRY(cudaErrorLaunchTimeout);  // as cudaStreamSynchronize reports the watchdog
  }
  if (fault_fires(FaultPoint::device_lost, level)) simulated_device_lost_ = true;
  if (simulated_device_lost_) FL_CUDA_TRY(cudaErrorDevicesUnavailable);
  return Status::Ok();
}

// Enqueues launch k of `level` and names, in *m, the kernel variant it ran.
static Status launch_named(Workspace& ws, int level, int k, cudaStream_t stream, Measurement* m) {
  FL_TRY(ws.launch(level, k, stream));
  m->launches[k].variant = ws.variant_ran(level, k);
  return Status::Ok();
}

Status LiveBackend::measure_level(const Lesson& lesson, const MeasureRequest& request, int level,
                                  const CancelCheck& cancelled, Measurement* m) {
  const FusionLevel& fl = lesson.info().levels[level];
  const int launches = static_cast<int>(fl.launches.size());
  const Shape shape = lesson.resolve({request.size, request.inner});
  const std::vector<LaunchTraffic> traffic = lesson.traffic(level, shape, request.precision);
  m->lesson = request.lesson;
  m->size = shape.size;
  m->inner = shape.inner;
  m->level = level;
  m->level_name = fl.name;
  m->precision = request.precision;
  m->cache = request.cache;
  m->timing_method = timing_method();
  m->chosen_as_cc = request.choose_as_cc;
  m->launches.resize(launches);
  for (int k = 0; k < launches; ++k) m->launches[k].textbook = traffic[k];

  FL_TRY(injected_fault(level));
  Workspace& ws = *workspace_;
  auto run_chain = [&]() -> Status {
    for (int k = 0; k < launches; ++k) FL_TRY(launch_named(ws, level, k, stream_, m));
    return Status::Ok();
  };

  // Correctness gate: fresh inputs, poisoned outputs, one run, compare with the fp64 reference.
  {
    PhaseTimer t("correctness gate");
    FL_TRY(ws.fill_inputs(++seed_counter_, stream_));
    FL_TRY(ws.poison_outputs(stream_));
    FL_TRY(run_chain());
    FL_TRY(ws.check(stream_, &m->check));
    m->peak_device_bytes = ws.level_device_bytes(level);  // after the run: cuBLASLt's is made
  }
  if (!m->check.passed)
    return Status::Ok();  // published without a time: no speedup for a wrong kernel

  // Warm up, then estimate one repetition to size the run.
  FL_TRY(run_chain());
  double estimate_us = 0;
  {
    PhaseTimer t("estimate");
    FL_TRY(time_median(request.cache, 3, run_chain, &estimate_us));
  }
  // The budget pays for whole repetitions: the chain, the cold flush before it, and the host's
  // cost of issuing the launches (which bounds a repetition of microsecond kernels).
  const bool cold = request.cache == CacheMode::cold;
  const double issue_us = kLaunchIssueUs * (launches + (cold ? 1 : 0));
  const double rep_us = std::max(estimate_us + (cold ? flush_us_ : 0.0), issue_us);
  int reps = static_cast<int>(options_.target_seconds * 1e6 / std::max(rep_us, 1.0));
  reps = std::clamp(reps, options_.min_repetitions, options_.max_repetitions);

  bool records_missing = false;
  PhaseTimer timed("timed repetitions");
  FL_TRY(time_repetitions(request, level, launches, reps,
                          tracer_ != nullptr ? Timer::cupti : Timer::events, cancelled, m,
                          &records_missing));
  if (records_missing) {
    // CUPTI returned too few kernel records to trust: time this level with events instead.
    timing_note_ = "CUPTI returned no kernel records for some launches, so " + request.lesson +
                   " was timed with CUDA events.";
    m->timing_method = "cuda_events";
    m->records.clear();
    for (auto& l : m->launches) l.event_time_us = Stats();
    m->event_chain_time_us = Stats();
    FL_TRY(time_repetitions(request, level, launches, reps, Timer::events, cancelled, m,
                            &records_missing));
  }

  if (request.phases) {
    PhaseTimer t("phase stamps");
    FL_TRY(measure_phases(request.cache, level, m));
  }

  add_copy_references(request.cache, m);
  return Status::Ok();
}

// The roofline reference for every launch and the chain, in the same cache mode.
void LiveBackend::add_copy_references(CacheMode cache, Measurement* m) {
  PhaseTimer copies("copy bandwidth refs");
  for (auto& launch : m->launches) {
    if (!copy_bandwidth(launch.textbook.bytes(), cache, &launch.copy_gbps).ok()) {
      launch.copy_gbps = 0;  // the copy's buffers may not fit next to the workspace: no reference
    }
  }
  if (!copy_bandwidth(m->textbook_bytes(), cache, &m->chain_copy_gbps).ok()) {
    m->chain_copy_gbps = 0;
  }
  cudaGetLastError();  // an allocation refused above must not poison the next request
}

// The pass with phase stamps on (kernels/phases.h), after the timing phase. Each launch runs once
// with a sink to find out whether its kernel records phases; for those that do, the launch alone
// is timed with stamps off and on in alternating rounds (the same timer as the timing phase, the
// same cache mode: the difference is the stamps' cost), then one more run's records are kept.
// The sink is taken back from the workspace on every path out.
Status LiveBackend::measure_phases(CacheMode cache, int level, Measurement* m) {
  Workspace& ws = *workspace_;
  if (phase_records_.get() == nullptr) {
    FL_TRY(phase_records_.allocate(LaunchPhases::kMaxRecords * sizeof(PhaseRecord)));
    FL_TRY(phase_count_.allocate(sizeof(unsigned)));
  }
  PhaseSink sink;
  sink.records = phase_records_.as<PhaseRecord>();
  sink.count = phase_count_.as<unsigned>();
  sink.capacity = static_cast<unsigned>(LaunchPhases::kMaxRecords);
  struct SinkOff {
    Workspace& ws;
    ~SinkOff() { ws.set_phase_sink(PhaseSink()); }
  } sink_off{ws};
  const auto zero_count = [&]() -> Status {
    FL_CUDA_TRY(cudaMemsetAsync(phase_count_.get(), 0, sizeof(unsigned), stream_));
    return Status::Ok();
  };
  const auto read_count = [&](unsigned* count) -> Status {
    FL_CUDA_TRY(cudaMemcpyAsync(count, phase_count_.get(), sizeof(unsigned), cudaMemcpyDeviceToHost,
                                stream_));
    FL_CUDA_TRY(cudaStreamSynchronize(stream_));
    return Status::Ok();
  };
  constexpr int kRounds = 3, kRepsPerRound = 15;
  for (int k = 0; k < static_cast<int>(m->launches.size()); ++k) {
    // Does this launch's kernel record phases?
    ws.set_phase_sink(sink);
    FL_TRY(zero_count());
    FL_TRY(ws.launch(level, k, stream_));
    unsigned count = 0;
    FL_TRY(read_count(&count));
    LaunchPhases phases;
    phases.names = ws.declared_phases();
    if (count == 0 && phases.names.empty()) continue;

    // Stamps off and on, alternating rounds; the medians of the rounds' medians.
    std::vector<double> off_us, on_us;
    for (int round = 0; round < kRounds; ++round) {
      for (const bool on : {false, true}) {
        ws.set_phase_sink(on ? sink : PhaseSink());
        const auto body = [&]() -> Status {
          if (on) FL_TRY(zero_count());
          return ws.launch(level, k, stream_);
        };
        double us = 0;
        if (tracer_ != nullptr)
          FL_TRY(time_median_cupti(cache, kRepsPerRound, body, &us));
        else
          FL_TRY(time_median(cache, kRepsPerRound, body, &us));
        (on ? on_us : off_us).push_back(us);
      }
    }
    phases.time_off_us = summarize(off_us).median;
    phases.time_on_us = summarize(on_us).median;

    // One more run with stamps on: its records are the ones kept.
    ws.set_phase_sink(sink);
    if (cache == CacheMode::cold) FL_TRY(flush_l2());
    FL_TRY(zero_count());
    FL_TRY(ws.launch(level, k, stream_));
    FL_TRY(read_count(&count));
    const size_t kept = std::min<size_t>(count, LaunchPhases::kMaxRecords);
    phases.lost = static_cast<int64_t>(count - kept);
    phases.records.resize(kept);
    if (kept > 0) {
      FL_CUDA_TRY(cudaMemcpy(phases.records.data(), phase_records_.get(),
                             kept * sizeof(PhaseRecord), cudaMemcpyDeviceToHost));
    }
    normalize_phase_records(&phases);
    m->launches[k].phases = std::move(phases);
  }
  return Status::Ok();
}

namespace {

// The kernels of one repetition, each with the launch (slot) it belongs to, by start time.
using RepetitionKernels = std::vector<std::pair<int, TracedKernel>>;

// The timing phase of one level (LiveBackend::time_repetitions), in batches of kBatch
// repetitions: launches a batch (the cold flush first when cold), then collects its CUDA events
// and its CUPTI kernel records into per-launch and per-chain samples; at the end it picks the
// repetition whose records the measurement keeps.
class RepetitionTiming {
 public:
  // `tracer` null: no CUPTI records; `events`: CUDA events around every launch too.
  // Repetitions whose records had to be numbered by launch order are added to *order_matched.
  RepetitionTiming(KernelTracer* tracer, bool events, cudaStream_t stream, Workspace& ws, int level,
                   int launches, bool cold, std::function<Status()> flush_l2,
                   int64_t* order_matched)
      : tracer_(tracer),
        use_events_(events),
        stream_(stream),
        ws_(ws),
        level_(level),
        launches_(launches),
        cold_(cold),
        flush_l2_(std::move(flush_l2)),
        order_matched_(order_matched),
        // External ids: repetition r of a batch owns ids first + r * stride + slot, where slot 0
        // is the cold flush (tagged so that it is recognised and skipped) and slot k + 1 is
        // launch k.
        stride_(static_cast<uint64_t>(launches) + 1),
        cupti_launch_us_(launches),
        event_launch_us_(launches) {}

  Status start() {
    if (use_events_) FL_TRY(events_.create((launches_ + 1) * kBatch));
    if (tracer_ != nullptr) {
      // Records of earlier work (the correctness gate, the estimate) must not join the first batch.
      FL_CUDA_TRY(cudaStreamSynchronize(stream_));
      FL_TRY(tracer_->flush(false));
      tracer_->discard_all();
    }
    return Status::Ok();
  }

  // Runs `batch` repetitions and collects what they recorded.
  Status run_batch(int batch) {
    const uint64_t first = tracer_ != nullptr ? tracer_->reserve_ids(stride_ * batch) : 0;
    FL_TRY(launch_batch(batch, first));
    if (use_events_) FL_TRY(collect_events(batch));
    if (tracer_ != nullptr) FL_TRY(collect_cupti_records(batch, first));
    return Status::Ok();
  }

  // Whether CUPTI delivered too few complete repetitions to trust (then the level is timed again
  // with events).
  bool records_missing() const {
    if (tracer_ == nullptr) return false;
    const size_t attempted = cupti_chain_us_.size() + incomplete_;
    return attempted > 0 && cupti_chain_us_.size() < kMinRecordedShare * attempted;
  }

  // The medians into `m`: CUPTI's when it timed, else the events'; with both, the events' too
  // (the diagnostic comparison of the same launches). Then the representative repetition's
  // records.
  void summarize_into(Measurement* m) const {
    const bool cupti = tracer_ != nullptr;
    const std::vector<double>& chain = cupti ? cupti_chain_us_ : event_chain_us_;
    const auto& per_launch = cupti ? cupti_launch_us_ : event_launch_us_;
    m->repetitions = static_cast<int>(chain.size());
    m->chain_time_us = summarize(chain);
    for (int k = 0; k < launches_; ++k) m->launches[k].time_us = summarize(per_launch[k]);
    if (cupti && use_events_) {
      for (int k = 0; k < launches_; ++k)
        m->launches[k].event_time_us = summarize(event_launch_us_[k]);
      m->event_chain_time_us = summarize(event_chain_us_);
    }
    m->records.clear();
    if (cupti && !chain.empty())
      keep_records(rep_kernels_[representative(m->chain_time_us.median)], m);
  }

 private:
  // Launches enqueued by `launch` carry external id `id` when CUPTI times them.
  Status tagged(uint64_t id, const std::function<Status()>& launch) {
    if (tracer_ == nullptr) return launch();
    FL_TRY(tracer_->push(id));
    const Status launched = launch();
    const Status popped = tracer_->pop();
    FL_TRY(launched);
    return popped;
  }

  Status launch_batch(int batch, uint64_t first) {
    for (int r = 0; r < batch; ++r) {
      const size_t e0 = static_cast<size_t>(r) * (launches_ + 1);
      const uint64_t rep_id = first + stride_ * r;
      if (cold_) FL_TRY(tagged(rep_id, flush_l2_));
      if (use_events_) FL_CUDA_TRY(cudaEventRecord(events_[e0], stream_));
      for (int k = 0; k < launches_; ++k) {
        FL_TRY(tagged(rep_id + 1 + k, [&] { return ws_.launch(level_, k, stream_); }));
        if (use_events_) FL_CUDA_TRY(cudaEventRecord(events_[e0 + k + 1], stream_));
      }
    }
    FL_CUDA_TRY(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }

  Status collect_events(int batch) {
    for (int r = 0; r < batch; ++r) {
      const size_t e0 = static_cast<size_t>(r) * (launches_ + 1);
      double us = 0;
      for (int k = 0; k < launches_; ++k) {
        FL_TRY(elapsed_us(events_[e0 + k], events_[e0 + k + 1], &us));
        event_launch_us_[k].push_back(us);
      }
      FL_TRY(elapsed_us(events_[e0], events_[e0 + launches_], &us));
      event_chain_us_.push_back(us);
    }
    return Status::Ok();
  }

  // This batch's kernel records, by repetition. After the synchronisation every record is
  // complete, so the default flush delivers them; a forced flush is the fallback if CUPTI held
  // any back.
  Status collect_cupti_records(int batch, uint64_t first) {
    const uint64_t last = first + stride_ * batch - 1;
    const size_t per_rep = launches_ + (cold_ ? 1 : 0);
    const size_t expected = static_cast<size_t>(batch) * per_rep;
    PhaseTimer flush_timer("cupti flush");
    FL_TRY(tracer_->flush(false));
    if (tracer_->count(first, last) < expected) {
      PhaseTimer forced("cupti forced flush");
      FL_TRY(tracer_->flush(true));
    }
    std::vector<TracedKernel> kernels, untagged;
    tracer_->take(first, last, &kernels, &untagged);
    if (kernels.empty() && untagged.size() == expected) {
      number_by_launch_order(first, per_rep, &untagged);
      kernels = std::move(untagged);
      *order_matched_ += batch;
    }
    std::vector<RepetitionKernels> by_rep(batch);
    for (TracedKernel& k : kernels) {
      const uint64_t offset = k.external_id - first;
      const int slot = static_cast<int>(offset % stride_);
      if (slot == 0) continue;  // the cold flush: neither timed nor kept
      by_rep[static_cast<int>(offset / stride_)].emplace_back(slot - 1, std::move(k));
    }
    for (RepetitionKernels& ks : by_rep) add_repetition(std::move(ks));
    return Status::Ok();
  }

  // No external correlation records arrived (CUPTI traced no launch API): one stream, one
  // thread, so the batch's kernels ran in launch order. Number them that way.
  void number_by_launch_order(uint64_t first, size_t per_rep,
                              std::vector<TracedKernel>* kernels) const {
    std::sort(kernels->begin(), kernels->end(),
              [](const TracedKernel& a, const TracedKernel& b) { return a.start_ns < b.start_ns; });
    for (size_t i = 0; i < kernels->size(); ++i) {
      const uint64_t slot = (i % per_rep) + (cold_ ? 0 : 1);
      (*kernels)[i].external_id = first + stride_ * (i / per_rep) + slot;
    }
  }

  // One repetition's samples, when CUPTI recorded every one of its launches completely.
  void add_repetition(RepetitionKernels ks) {
    std::vector<uint64_t> start(launches_, UINT64_MAX), end(launches_, 0);
    for (const auto& [launch, k] : ks) {
      if (k.start_ns == 0 || k.end_ns < k.start_ns) continue;  // incomplete record
      start[launch] = std::min(start[launch], k.start_ns);
      end[launch] = std::max(end[launch], k.end_ns);
    }
    if (std::find(end.begin(), end.end(), uint64_t(0)) != end.end()) {
      ++incomplete_;
      return;
    }
    for (int k = 0; k < launches_; ++k) cupti_launch_us_[k].push_back((end[k] - start[k]) * 1e-3);
    const uint64_t chain_start = *std::min_element(start.begin(), start.end());
    const uint64_t chain_end = *std::max_element(end.begin(), end.end());
    cupti_chain_us_.push_back((chain_end - chain_start) * 1e-3);
    std::sort(ks.begin(), ks.end(),
              [](const auto& a, const auto& b) { return a.second.start_ns < b.second.start_ns; });
    rep_kernels_.push_back(std::move(ks));
  }

  // The repetition whose chain time is closest to the median.
  size_t representative(double median) const {
    size_t best = 0;
    for (size_t i = 1; i < cupti_chain_us_.size(); ++i) {
      if (std::abs(cupti_chain_us_[i] - median) < std::abs(cupti_chain_us_[best] - median))
        best = i;
    }
    return best;
  }

  static void keep_records(const RepetitionKernels& ks, Measurement* m) {
    const uint64_t t0 = ks.front().second.start_ns;
    for (const auto& [launch, k] : ks) {
      KernelRecord rec;
      rec.launch = launch;
      rec.kernel = k.name;
      rec.start_ns = k.start_ns;
      rec.end_ns = k.end_ns;
      rec.start_rel_ns = static_cast<int64_t>(k.start_ns - t0);
      rec.end_rel_ns = static_cast<int64_t>(k.end_ns - t0);
      rec.stream_id = k.stream_id;
      rec.correlation_id = k.correlation_id;
      rec.grid = {{k.grid[0], k.grid[1], k.grid[2]}};
      rec.block = {{k.block[0], k.block[1], k.block[2]}};
      rec.registers_per_thread = k.registers_per_thread;
      rec.static_shared_bytes = k.static_shared_bytes;
      rec.dynamic_shared_bytes = k.dynamic_shared_bytes;
      m->records.push_back(std::move(rec));
    }
  }

  KernelTracer* tracer_;
  bool use_events_;
  cudaStream_t stream_;
  Workspace& ws_;
  int level_, launches_;
  bool cold_;
  std::function<Status()> flush_l2_;
  int64_t* order_matched_;
  uint64_t stride_;
  EventPool events_;
  std::vector<std::vector<double>> cupti_launch_us_, event_launch_us_;
  std::vector<double> cupti_chain_us_, event_chain_us_;
  std::vector<RepetitionKernels> rep_kernels_;  // every complete repetition's kernels
  int64_t incomplete_ = 0;
};

}  // namespace

Status LiveBackend::time_repetitions(const MeasureRequest& request, int level, int launches,
                                     int reps, Timer timer, const CancelCheck& cancelled,
                                     Measurement* m, bool* records_missing) {
  *records_missing = false;
  // Events time every launch when they are the timer, and beside CUPTI for --compare-timers.
  const bool cupti = timer == Timer::cupti;
  RepetitionTiming timing(
      cupti ? tracer_ : nullptr, !cupti || options_.compare_timers, stream_, *workspace_, level,
      launches, request.cache == CacheMode::cold, [this] { return flush_l2(); }, &order_matched_);
  FL_TRY(timing.start());
  watching_.begin(&m->gpu);  // the GPU's conditions around the repetitions (gpu_watch.h)
  for (int done = 0; done < reps; done += kBatch) {
    if (cancelled && cancelled()) break;
    FL_TRY(timing.run_batch(std::min(kBatch, reps - done)));
    watching_.tick();
    FL_TRY(injected_mid_measurement_fault(level));
  }
  watching_.end();
  if (timing.records_missing()) {
    *records_missing = true;
    return Status::Ok();
  }
  timing.summarize_into(m);
  return Status::Ok();
}

void LiveBackend::mark_counters_unavailable(std::vector<Measurement>* measurements) const {
  for (Measurement& m : *measurements) {
    if (m.counters_status == CountersStatus::measured) continue;
    m.counters_status = CountersStatus::unavailable;
    m.counters_note = counters_note_;
  }
}

namespace {

// Kernels per launch as the timing phase's records counted them (cuBLASLt may run two); empty
// (one each) without records.
std::vector<int> kernels_per_launch(const Measurement& m) {
  std::vector<int> counts;
  if (m.records.empty()) return counts;
  const int launches = static_cast<int>(m.launches.size());
  counts.assign(launches, 0);
  for (const KernelRecord& r : m.records) {
    if (r.launch >= 0 && r.launch < launches) ++counts[r.launch];
  }
  for (int& n : counts) n = std::max(n, 1);
  return counts;
}

// A launch of many kernels (a CUDA graph) is more than a pass of the range profiler counts
// (under user replay an H100 failed one with CUPTI_ERROR_UNKNOWN): such a level gets a note.
bool leave_uncounted(const std::vector<int>& per_launch, Measurement* m) {
  for (int n : per_launch) {
    if (n > RangeCounters::kMaxKernelsPerLaunch) {
      m->counters_status = CountersStatus::not_measured;
      m->counters_note = "Not measured: one launch of this level runs " + std::to_string(n) +
                         " kernels (a CUDA graph); the counter phase counts launches of at most " +
                         std::to_string(RangeCounters::kMaxKernelsPerLaunch) + " kernels.";
      return true;
    }
  }
  return false;
}

}  // namespace

Status LiveBackend::count_level(const MeasureRequest& request, const std::string& drain_kind,
                                const CancelCheck& cancelled,
                                std::vector<Measurement>* measurements, Measurement* m,
                                bool* stop) {
  Workspace& ws = *workspace_;
  const int level = m->level;
  const int launches = static_cast<int>(m->launches.size());
  // Before each pass, outside profiling: cold evicts L2 as before every timed repetition;
  // warm runs the chain once, as the repetition before a timed one did.
  auto prepare = [&]() -> Status {
    if (request.cache == CacheMode::cold) {
      FL_TRY(flush_l2());
    } else {
      for (int k = 0; k < launches; ++k) FL_TRY(ws.launch(level, k, stream_));
    }
    FL_CUDA_TRY(cudaStreamSynchronize(stream_));
    return Status::Ok();
  };
  auto launch = [&](int k) { return ws.launch(level, k, stream_); };
  std::function<Status()> drain;
  if (drain_kind == "noop") {
    drain = [&]() -> Status {
      drain_kernel<<<1, 32, 0, stream_>>>(flush_sink_.as<int>());
      FL_CUDA_TRY(cudaGetLastError());
      return Status::Ok();
    };
  } else if (drain_kind == "flush") {
    drain = [&] { return flush_l2(); };
  }
  const std::vector<int> per_launch = kernels_per_launch(*m);
  if (leave_uncounted(per_launch, m)) return Status::Ok();
  std::vector<LaunchCounters> values;
  LaunchCounters drained;
  bool was_cancelled = false;
  PhaseTimer counter_timer("counter phase (level)");
  // Enabled once for every level of the request (enabling costs ~0.2 s); disabled after them.
  const Status st = counters_->measure(launches, per_launch, prepare, launch, drain, cancelled,
                                       options_.counter_replay, /*keep_enabled=*/true, &values,
                                       &drained, &was_cancelled);
  if (trace_phases() && st.ok() && !was_cancelled) {
    int64_t rd = 0, wr = 0;
    for (const LaunchCounters& c : values) rd += c.dram_read_bytes, wr += c.dram_write_bytes;
    std::fprintf(
        stderr,
        "[counters] %s %lld level %d: chain dram rd %lld wr %lld; drain(%s) rd %lld wr %lld\n",
        request.lesson.c_str(), static_cast<long long>(request.size), level,
        static_cast<long long>(rd), static_cast<long long>(wr), drain_kind.c_str(),
        static_cast<long long>(drained.dram_read_bytes),
        static_cast<long long>(drained.dram_write_bytes));
  }
  if (!st.ok()) {
    if (!counters_->unavailable_note().empty()) {
      // Found out only now (permissions may be checked when profiling starts): timing only.
      counters_note_ = counters_->unavailable_note();
      counters_ = nullptr;
      mark_counters_unavailable(measurements);
      *stop = true;
      return Status::Ok();
    }
    m->counters_status = CountersStatus::failed;
    m->counters_note = "The counter phase failed: " + st.message();
    workspace_.reset();
    cudaGetLastError();
    return st.with_context(request.lesson + " level " + std::to_string(level) + " counters");
  }
  if (was_cancelled) {
    *stop = true;
    return Status::Ok();
  }
  // What the chain left dirty in L2 reached DRAM during the flush that closed the pass: those
  // are the chain's writes too, made by its last launch or earlier ones (docs/PERFORMANCE.md).
  if (drain_kind == "flush") values.back().dram_write_bytes += drained.dram_write_bytes;
  for (int k = 0; k < launches; ++k) m->launches[k].counters = values[k];
  m->counters_status = CountersStatus::measured;
  m->counters_note.clear();
  return Status::Ok();
}

Status LiveBackend::measure_counters(const MeasureRequest& request, const CancelCheck& cancelled,
                                     std::vector<Measurement>* measurements) {
  if (!lost_reason_.empty()) return Status::Error(lost_reason_);
  if (counters_ == nullptr) {
    mark_counters_unavailable(measurements);
    return Status::Ok();
  }
  const Lesson* lesson = nullptr;
  std::vector<int> levels;
  FL_TRY(validate(request, &lesson, &levels));
  const Shape shape = lesson->resolve({request.size, request.inner});
  const bool fresh = !(
      workspace_ && workspace_lesson_ == lesson->info().id && workspace_shape_.size == shape.size &&
      workspace_shape_.inner == shape.inner && workspace_precision_ == request.precision);
  FL_TRY(ensure_workspace(*lesson, shape, request.precision));
  if (fresh) FL_TRY(workspace_->fill_inputs(++seed_counter_, stream_));
  static const char* drain_env = std::getenv("FL_COUNTER_DRAIN");
  const std::string drain_kind = drain_env != nullptr ? drain_env : options_.counter_drain;
  // However the levels below end, the profiler is disabled after them unless it is to stay.
  struct DisableAtEnd {
    RangeCounters* counters;
    bool keep;
    ~DisableAtEnd() {
      if (counters != nullptr && !keep) (void)counters->disable();  // nothing left to report to
    }
  } disable_at_end{counters_, options_.keep_profiler_enabled};

  for (Measurement& m : *measurements) {
    if (m.counters_status == CountersStatus::measured) continue;
    const int level = m.level;
    if (m.lesson != request.lesson || level < 0 || level >= lesson->level_count() ||
        m.launches.size() != lesson->info().levels[level].launches.size()) {
      m.counters_status = CountersStatus::failed;
      m.counters_note =
          "This measurement does not belong to the request, so its counters were not measured.";
      continue;
    }
    if (!m.check.passed) {
      m.counters_status = CountersStatus::not_measured;
      m.counters_note = "Not measured: this level's output failed the correctness check.";
      continue;
    }
    if (cancelled && cancelled()) return Status::Ok();
    bool stop = false;
    const Status counted = count_level(request, drain_kind, cancelled, measurements, &m, &stop);
    if (!counted.ok()) {
      const FailureKind kind = classify_failure(counted.message());
      if (kind == FailureKind::context_lost || kind == FailureKind::device_lost)
        return fail_request(kind, request.lesson + " level " + std::to_string(m.level), counted);
      return counted;
    }
    if (stop) return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace fl
