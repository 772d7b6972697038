// The CUPTI Range Profiler (see cupti_counters.h). The call sequence follows NVIDIA's
// range_profiling sample and shared/notes/CUPTI.md §2.5: host side (chip name, counter
// availability, config image, pass count), then target side (enable on the context, counter data
// image, set config, start / launches / stop per pass, decode, evaluate).
#include "app/measure/cupti_counters.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <cmath>

#include "app/measure/cupti_check.h"
#include "app/measure/gpu_faults.h"
#include "kernels/cuda_check.h"

namespace fl {

const char* const kCountersNotPermitted =
    "GPU performance counters are restricted to administrators on this system "
    "(ERR_NVGPUCTRPERM), so DRAM and L2 bytes are not measured (timings are): run as root, or "
    "set the nvidia driver option NVreg_RestrictProfilingToAdminUsers=0 and reboot.";

namespace {

// A CUPTI parameter struct: zeroed (pPriv and every optional field null), with the size of the
// struct as this build's header declares it, as CUPTI requires.
template <typename T>
T params(size_t struct_size) {
  T p{};
  p.structSize = struct_size;
  return p;
}
#define FL_CUPTI_PARAMS(type) params<type>(type##_STRUCT_SIZE)

const char* const kCountersBusy =
    "Another profiler is using the GPU's performance counters, so DRAM and L2 bytes are not "
    "measured (timings are).";

// The counter data image's ranges (kernels): a pass profiles at most kWindowRanges of them (a
// drain's included), well inside it. Longer chains are counted a window of whole launches at a
// time, a pass each (a GPT-2 decode step run op by op is 205 kernels; on an H100 one pass of 206
// auto ranges decoded only 128 of them).
constexpr size_t kMaxRanges = 64;
constexpr int kWindowRanges = RangeCounters::kMaxKernelsPerLaunch + 1;

const char* kMetricNames[] = {"dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum"};
constexpr size_t kMetricCount = sizeof(kMetricNames) / sizeof(kMetricNames[0]);

// The context the CUDA runtime made current, through the driver entry point the runtime
// exposes: linking libcuda for cuCtxGetCurrent would stop `fusionlab` starting without a driver.
Status current_context(CUcontext* ctx) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  FL_CUDA_TRY(
      cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
    return Status::Error("the CUDA driver offers no cuCtxGetCurrent");
  }
  using GetCurrent = CUresult (*)(CUcontext*);
  const CUresult r = reinterpret_cast<GetCurrent>(fn)(ctx);
  if (r != CUDA_SUCCESS || *ctx == nullptr) {
    return Status::Error("no CUDA context is current (cuCtxGetCurrent returned " +
                         std::to_string(static_cast<int>(r)) + ")");
  }
  return Status::Ok();
}

std::string support_problem(const CUpti_Profiler_DeviceSupported_Params& p) {
  auto bad = [](CUpti_Profiler_Support_Level level) {
    return level != CUPTI_PROFILER_CONFIGURATION_SUPPORTED;
  };
  if (bad(p.architecture)) return "this GPU's architecture";
  if (bad(p.vGpu)) return "this virtual GPU (vGPU)";
  if (bad(p.confidentialCompute)) return "confidential computing mode";
  if (bad(p.cmp)) return "this mining processor (CMP)";
  if (bad(p.wsl)) return "WSL";
  if (bad(p.sli)) return "SLI";
  return "this GPU configuration";
}

}  // namespace

const char* to_string(CounterReplay replay) {
  return replay == CounterReplay::user ? "user" : "kernel";
}

bool parse_counter_replay(const std::string& text, CounterReplay* out) {
  if (text == "user")
    *out = CounterReplay::user;
  else if (text == "kernel")
    *out = CounterReplay::kernel;
  else
    return false;
  return true;
}

struct RangeCounters::Impl {
  CUcontext ctx = nullptr;
  CUpti_Profiler_Host_Object* host = nullptr;
  CUpti_RangeProfiler_Object* profiler = nullptr;
  std::vector<uint8_t> config_image;
  std::vector<uint8_t> counter_data;
  std::vector<const char*> metrics{kMetricNames, kMetricNames + kMetricCount};
};

Status RangeCounters::check(int result, const char* call) {
  const auto r = static_cast<CUptiResult>(result);
  if (r == CUPTI_SUCCESS) return Status::Ok();
  switch (r) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      unavailable_note_ = kCountersNotPermitted;
      return Status::Error(unavailable_note_);
    case CUPTI_ERROR_HARDWARE_BUSY:
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      unavailable_note_ = kCountersBusy;
      return Status::Error(unavailable_note_);
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
      unavailable_note_ = "CUPTI cannot profile this GPU here (" + cupti_result_text(r) +
                          "), so DRAM and L2 bytes are not measured (timings are).";
      return Status::Error(unavailable_note_);
    default:
      return Status::Error(std::string(call) + " failed: " + cupti_result_text(r));
  }
}

RangeCounters* RangeCounters::instance(std::string* unavailable_note) {
  static std::string note;
  static RangeCounters* counters = [] {
    auto* c = new RangeCounters();
    c->impl_ = new Impl();
    const Status st = c->start();
    if (st.ok()) return c;
    note = !c->unavailable_note_.empty() ? c->unavailable_note_
                                         : "DRAM and L2 counters could not start (" + st.message() +
                                               "), so they are not measured (timings are).";
    // Half-initialised CUPTI objects are left alone: tearing them down could fail the same way.
    return static_cast<RangeCounters*>(nullptr);
  }();
  *unavailable_note = note;
  return counters;
}

Status RangeCounters::start() {
  auto init = FL_CUPTI_PARAMS(CUpti_Profiler_Initialize_Params);
  // The fault switch (gpu_faults.h): Nsight Compute holds the counters (busy), or Nsight
  // Systems holds CUPTI's one subscriber.
  const CUptiResult initialized = fault_active(FaultPoint::cupti_busy) ? CUPTI_ERROR_HARDWARE_BUSY
                                  : fault_active(FaultPoint::cupti_subscribe)
                                      ? CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                                      : cuptiProfilerInitialize(&init);
  FL_TRY(check(initialized, "cuptiProfilerInitialize"));

  auto supported = FL_CUPTI_PARAMS(CUpti_Profiler_DeviceSupported_Params);
  supported.cuDevice = 0;
  supported.api = CUPTI_PROFILER_RANGE_PROFILING;
  FL_TRY(check(cuptiProfilerDeviceSupported(&supported), "cuptiProfilerDeviceSupported"));
  // Not refused here: the query can be pessimistic (e.g. about virtual machines). When setting
  // up fails below, this is the better explanation.
  std::string unsupported;
  if (supported.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
    unsupported = "CUPTI range profiling is not supported on " + support_problem(supported) +
                  ", so DRAM and L2 bytes are not measured (timings are).";
  }
  const Status rest = start_on_device();
  if (!rest.ok() && !unsupported.empty() && unavailable_note_.empty())
    unavailable_note_ = unsupported;
  return rest;
}

Status RangeCounters::start_on_device() {
  Impl& m = *impl_;

  auto chip = FL_CUPTI_PARAMS(CUpti_Device_GetChipName_Params);
  chip.deviceIndex = 0;
  FL_TRY(check(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName"));
  chip_ = chip.pChipName != nullptr ? chip.pChipName : "";

  FL_TRY(current_context(&m.ctx));
  // Counter availability: where restricted counters usually show up first.
  auto avail = FL_CUPTI_PARAMS(CUpti_Profiler_GetCounterAvailability_Params);
  avail.ctx = m.ctx;
  FL_TRY(check(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability"));
  std::vector<uint8_t> availability(avail.counterAvailabilityImageSize);
  avail.pCounterAvailabilityImage = availability.data();
  FL_TRY(check(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability"));

  // Host side: the config image that schedules our three metrics, and its pass count.
  auto host = FL_CUPTI_PARAMS(CUpti_Profiler_Host_Initialize_Params);
  host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  host.pChipName = chip_.c_str();
  host.pCounterAvailabilityImage = availability.data();
  FL_TRY(check(cuptiProfilerHostInitialize(&host), "cuptiProfilerHostInitialize"));
  m.host = host.pHostObject;

  auto add = FL_CUPTI_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
  add.pHostObject = m.host;
  add.ppMetricNames = m.metrics.data();
  add.numMetrics = m.metrics.size();
  FL_TRY(check(cuptiProfilerHostConfigAddMetrics(&add), "cuptiProfilerHostConfigAddMetrics"));
  auto size = FL_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
  size.pHostObject = m.host;
  FL_TRY(check(cuptiProfilerHostGetConfigImageSize(&size), "cuptiProfilerHostGetConfigImageSize"));
  m.config_image.resize(size.configImageSize);
  auto image = FL_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
  image.pHostObject = m.host;
  image.configImageSize = m.config_image.size();
  image.pConfigImage = m.config_image.data();
  FL_TRY(check(cuptiProfilerHostGetConfigImage(&image), "cuptiProfilerHostGetConfigImage"));
  auto passes = FL_CUPTI_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params);
  passes.configImageSize = m.config_image.size();
  passes.pConfigImage = m.config_image.data();
  FL_TRY(check(cuptiProfilerHostGetNumOfPasses(&passes), "cuptiProfilerHostGetNumOfPasses"));
  passes_ = static_cast<int>(passes.numOfPasses);

  // Target side, as a trial: enabling on our context is where missing permissions may show.
  FL_TRY(enable());
  FL_TRY(disable());
  return Status::Ok();
}

Status RangeCounters::enable() {
  Impl& m = *impl_;
  if (m.profiler != nullptr) return Status::Ok();
  auto enable = FL_CUPTI_PARAMS(CUpti_RangeProfiler_Enable_Params);
  enable.ctx = m.ctx;
  FL_TRY(check(cuptiRangeProfilerEnable(&enable), "cuptiRangeProfilerEnable"));
  m.profiler = enable.pRangeProfilerObject;
  // A counter data image for up to kMaxRanges kernels.
  auto data = FL_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params);
  data.pRangeProfilerObject = m.profiler;
  data.pMetricNames = m.metrics.data();
  data.numMetrics = m.metrics.size();
  data.maxNumOfRanges = kMaxRanges;
  data.maxNumRangeTreeNodes = kMaxRanges;
  FL_TRY(
      check(cuptiRangeProfilerGetCounterDataSize(&data), "cuptiRangeProfilerGetCounterDataSize"));
  m.counter_data.resize(data.counterDataSize);
  return Status::Ok();
}

void RangeCounters::retire(const std::string& why) {
  (void)disable();  // may fail on a lost context; the profiler object is forgotten either way
  unavailable_note_ = why;
}

Status RangeCounters::disable() {
  Impl& m = *impl_;
  if (m.profiler == nullptr) return Status::Ok();
  auto disable = FL_CUPTI_PARAMS(CUpti_RangeProfiler_Disable_Params);
  disable.pRangeProfilerObject = m.profiler;
  m.profiler = nullptr;  // gone whether or not CUPTI reports success
  FL_TRY(check(cuptiRangeProfilerDisable(&disable), "cuptiRangeProfilerDisable"));
  return Status::Ok();
}

Status RangeCounters::measure(int launches, const std::vector<int>& kernels_per_launch,
                              const std::function<Status()>& prepare,
                              const std::function<Status(int)>& launch,
                              const std::function<Status()>& drain,
                              const std::function<bool()>& cancelled, CounterReplay replay,
                              bool keep_enabled, std::vector<LaunchCounters>* out,
                              LaunchCounters* drain_out, bool* was_cancelled) {
  *was_cancelled = false;
  out->clear();
  if (!unavailable_note_.empty()) return Status::Error(unavailable_note_);
  FL_TRY(enable());
  const Status measured = run_passes(launches, kernels_per_launch, prepare, launch, drain,
                                     cancelled, replay, out, drain_out, was_cancelled);
  if (keep_enabled && measured.ok()) return measured;
  const Status disabled = disable();
  if (!measured.ok()) {
    return disabled.ok() ? measured
                         : Status::Error(measured.message() + "; then " + disabled.message());
  }
  return disabled;
}

Status RangeCounters::configure_passes(CounterReplay replay) {
  Impl& m = *impl_;
  auto init = FL_CUPTI_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params);
  init.pRangeProfilerObject = m.profiler;
  init.counterDataSize = m.counter_data.size();
  init.pCounterData = m.counter_data.data();
  FL_TRY(check(cuptiRangeProfilerCounterDataImageInitialize(&init),
               "cuptiRangeProfilerCounterDataImageInitialize"));

  auto config = FL_CUPTI_PARAMS(CUpti_RangeProfiler_SetConfig_Params);
  config.pRangeProfilerObject = m.profiler;
  config.configSize = m.config_image.size();
  config.pConfig = m.config_image.data();
  config.counterDataImageSize = m.counter_data.size();
  config.pCounterDataImage = m.counter_data.data();
  config.range = CUPTI_AutoRange;
  config.replayMode = replay == CounterReplay::user ? CUPTI_UserReplay : CUPTI_KernelReplay;
  config.maxRangesPerPass = kMaxRanges;
  config.numNestingLevels = 1;
  config.minNestingLevel = 1;
  config.passIndex = 0;
  config.targetNestingLevel = 1;
  return check(cuptiRangeProfilerSetConfig(&config), "cuptiRangeProfilerSetConfig");
}

Status RangeCounters::stop_range(bool* all_passes) {
  auto p = FL_CUPTI_PARAMS(CUpti_RangeProfiler_Stop_Params);
  p.pRangeProfilerObject = impl_->profiler;
  FL_TRY(check(cuptiRangeProfilerStop(&p), "cuptiRangeProfilerStop"));
  if (all_passes != nullptr) *all_passes = p.isAllPassSubmitted != 0;
  return Status::Ok();
}

Status RangeCounters::decode_ranges(size_t* dropped) {
  auto p = FL_CUPTI_PARAMS(CUpti_RangeProfiler_DecodeData_Params);
  p.pRangeProfilerObject = impl_->profiler;
  FL_TRY(check(cuptiRangeProfilerDecodeData(&p), "cuptiRangeProfilerDecodeData"));
  *dropped = p.numOfRangeDropped;
  return Status::Ok();
}

Status RangeCounters::profile_passes(int begin, int end, const std::function<Status()>& prepare,
                                     const std::function<Status(int)>& launch,
                                     const std::function<Status()>& drain,
                                     const std::function<bool()>& cancelled, bool* was_cancelled) {
  // A step that failed inside the profiled region: stop the range too, and say both.
  const auto stopped_after = [this](const Status& failed) {
    const Status stopped = stop_range(nullptr);
    return stopped.ok() ? failed : Status::Error(failed.message() + "; then " + stopped.message());
  };
  bool all_passes = false;
  for (int pass = 0; !all_passes; ++pass) {
    if (pass >= 32) return Status::Error("the range profiler did not finish after 32 passes");
    FL_TRY(prepare());  // outside the profiled region: the L2 flush is never a range
    // A later window: the launches before it run unprofiled, so it sees the cache they leave.
    for (int k = 0; k < begin; ++k) {
      if (cancelled && cancelled()) {
        *was_cancelled = true;
        return Status::Ok();
      }
      FL_TRY(launch(k));
    }
    if (begin > 0) FL_CUDA_TRY(cudaDeviceSynchronize());
    auto start = FL_CUPTI_PARAMS(CUpti_RangeProfiler_Start_Params);
    start.pRangeProfilerObject = impl_->profiler;
    FL_TRY(check(cuptiRangeProfilerStart(&start), "cuptiRangeProfilerStart"));
    for (int k = begin; k < end; ++k) {
      if (cancelled && cancelled()) {
        // A newer request: stop here and clear what the hardware collected so far.
        size_t dropped = 0;
        FL_TRY(stop_range(nullptr));
        FL_TRY(decode_ranges(&dropped));
        *was_cancelled = true;
        return Status::Ok();
      }
      if (const Status launched = launch(k); !launched.ok()) return stopped_after(launched);
    }
    if (drain) {
      if (const Status drained = drain(); !drained.ok()) return stopped_after(drained);
    }
    FL_TRY(stop_range(&all_passes));
  }
  size_t dropped = 0;
  FL_TRY(decode_ranges(&dropped));
  if (dropped > 0) {
    return Status::Error("the range profiler dropped " + std::to_string(dropped) + " ranges");
  }
  return Status::Ok();
}

Status RangeCounters::evaluate_ranges(const std::vector<int>& owner, int ranges,
                                      std::vector<LaunchCounters>* out, LaunchCounters* drain_out) {
  Impl& m = *impl_;
  auto info = FL_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params);
  info.pCounterDataImage = m.counter_data.data();
  info.counterDataImageSize = m.counter_data.size();
  FL_TRY(
      check(cuptiRangeProfilerGetCounterDataInfo(&info), "cuptiRangeProfilerGetCounterDataInfo"));
  if (info.numTotalRanges != static_cast<size_t>(ranges)) {
    return Status::Error("the range profiler saw " + std::to_string(info.numTotalRanges) +
                         " kernels where " + std::to_string(ranges) +
                         " were expected (one range per kernel, as the timing phase counted them)");
  }
  const int kernels = static_cast<int>(owner.size());
  for (int k = 0; k < ranges; ++k) {
    double values[kMetricCount] = {};
    auto eval = FL_CUPTI_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
    eval.pHostObject = m.host;
    eval.pCounterDataImage = m.counter_data.data();
    eval.counterDataImageSize = m.counter_data.size();
    eval.rangeIndex = static_cast<size_t>(k);  // auto ranges are numbered in launch order
    eval.ppMetricNames = m.metrics.data();
    eval.numMetrics = m.metrics.size();
    eval.pMetricValues = values;
    FL_TRY(
        check(cuptiProfilerHostEvaluateToGpuValues(&eval), "cuptiProfilerHostEvaluateToGpuValues"));
    LaunchCounters c;
    c.dram_read_bytes = std::llround(values[0]);
    c.dram_write_bytes = std::llround(values[1]);
    c.l2_bytes = std::llround(values[2]);
    if (k < kernels) {
      LaunchCounters& sum = (*out)[owner[k]];
      sum.dram_read_bytes += c.dram_read_bytes;
      sum.dram_write_bytes += c.dram_write_bytes;
      sum.l2_bytes += c.l2_bytes;
    } else if (drain_out != nullptr) {
      *drain_out = c;
    }
  }
  return Status::Ok();
}

Status RangeCounters::run_passes(int launches, const std::vector<int>& kernels_per_launch,
                                 const std::function<Status()>& prepare,
                                 const std::function<Status(int)>& launch,
                                 const std::function<Status()>& drain,
                                 const std::function<bool()>& cancelled, CounterReplay replay,
                                 std::vector<LaunchCounters>* out, LaunchCounters* drain_out,
                                 bool* was_cancelled) {
  // Which launch each range (kernel) belongs to, in launch order; the drain's range comes last.
  std::vector<int> owner;
  for (int k = 0; k < launches; ++k) {
    const int kernels = kernels_per_launch.empty() ? 1 : kernels_per_launch.at(k);
    for (int i = 0; i < kernels; ++i) owner.push_back(k);
  }
  if (launches < 1 ||
      (!kernels_per_launch.empty() && kernels_per_launch.size() != size_t(launches))) {
    return Status::Error("the counter phase takes 1 or more launches and a kernel count for each");
  }
  for (int k = 0; k < launches; ++k) {
    const int n = kernels_per_launch.empty() ? 1 : kernels_per_launch[k];
    if (n > kMaxKernelsPerLaunch) {
      return Status::Error("launch " + std::to_string(k) + " runs " + std::to_string(n) +
                           " kernels; the counter phase counts at most " +
                           std::to_string(kMaxKernelsPerLaunch) + " in one launch");
    }
  }
  // Each window is a pass of its own over the chain, profiled from its first launch on (a chain
  // of up to kMaxKernelsPerLaunch kernels is one window, as before). A window's drain's DRAM
  // writes go to its last launch, the last window's to drain_out as before.
  out->assign(launches, LaunchCounters{});
  int first_kernel = 0;
  for (const CounterWindow& w : counter_windows(kernels_per_launch, launches)) {
    const std::vector<int> window_owner(owner.begin() + first_kernel,
                                        owner.begin() + first_kernel + w.kernels);
    FL_TRY(configure_passes(replay));
    FL_TRY(profile_passes(w.begin, w.end, prepare, launch, drain, cancelled, was_cancelled));
    if (*was_cancelled) return Status::Ok();
    LaunchCounters drained;
    FL_TRY(evaluate_ranges(window_owner, w.kernels + (drain ? 1 : 0), out, &drained));
    if (w.end < launches)
      (*out)[w.end - 1].dram_write_bytes += drained.dram_write_bytes;
    else if (drain_out != nullptr)
      *drain_out = drained;
    first_kernel += w.kernels;
  }
  return Status::Ok();
}

std::vector<CounterWindow> counter_windows(const std::vector<int>& kernels_per_launch,
                                           int launches) {
  std::vector<CounterWindow> windows;
  for (int begin = 0; begin < launches;) {
    CounterWindow w{begin, begin, 0};
    while (w.end < launches) {
      const int n = kernels_per_launch.empty() ? 1 : kernels_per_launch[w.end];
      if (w.end > begin && w.kernels + n + 1 > kWindowRanges) break;
      w.kernels += n;
      ++w.end;
    }
    windows.push_back(w);
    begin = w.end;
  }
  return windows;
}

}  // namespace fl
