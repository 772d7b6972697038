// The CUPTI activity tracer (see cupti_tracer.h).
#include "app/measure/cupti_tracer.h"

#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <unordered_map>

#include "model/caps.h"
#include "app/measure/cupti_check.h"
#include "app/measure/gpu_faults.h"

namespace fl {
namespace {

// CUDA 13 delivers CUpti_ActivityKernel10 for kernel kinds, 12.x CUpti_ActivityKernel9; the
// fields we read are a common prefix of both (shared/notes/CUPTI.md §1).
#if CUPTI_API_VERSION >= 130000
using KernelActivity = CUpti_ActivityKernel10;
#else
using KernelActivity = CUpti_ActivityKernel9;
#endif

constexpr size_t kBufferBytes = size_t(4) << 20;  // CUPTI asks for 1-10 MB, 8-byte aligned
constexpr CUpti_ExternalCorrelationKind kOurKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

const char* const kAnotherProfiler =
    "Another profiler (Nsight Systems, Nsight Compute or a debugger) is using CUPTI, so kernels "
    "are timed with CUDA events instead of CUPTI activity records; the profiler's own overhead "
    "slows every launch, so times are longer than without it.";

// Shared with CUPTI's buffer callbacks, which may run on CUPTI's own thread. Never destroyed:
// CUPTI may still deliver a buffer while static destructors run at exit.
struct TracerState {
  std::mutex mutex;
  std::vector<TracedKernel> kernels;                   // delivered, ids resolved on demand
  std::unordered_map<uint32_t, uint64_t> external_of;  // CUPTI correlation id -> our id
  // One per distinct kernel name: bounded by the kernels this build contains (and cuBLASLt's).
  std::unordered_map<std::string, std::string> short_names;
  std::string callback_error;  // the first error met inside a callback
  TracerStats stats;
  std::atomic<uint64_t> next_id{1};
};

TracerState& state() {
  static TracerState* s = new TracerState;
  return *s;
}

// Activity buffers handed to CUPTI and not yet given back (the soak's accounting).
std::atomic<int64_t> buffers_held{0};

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  if (*buffer != nullptr) ++buffers_held;
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                               size_t /*size*/, size_t valid_size) {
  TracerState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  CUpti_Activity* record = nullptr;
  while (true) {
    const CUptiResult r = cuptiActivityGetNextRecord(buffer, valid_size, &record);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // the end of the buffer
    if (r != CUPTI_SUCCESS) {
      if (s.callback_error.empty()) {
        s.callback_error = "cuptiActivityGetNextRecord failed: " + cupti_result_text(r);
      }
      break;
    }
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const KernelActivity*>(record);
      TracedKernel t;
      t.correlation_id = k->correlationId;
      t.stream_id = k->streamId;
      t.start_ns = k->start;
      t.end_ns = k->end;
      t.grid[0] = k->gridX, t.grid[1] = k->gridY, t.grid[2] = k->gridZ;
      t.block[0] = k->blockX, t.block[1] = k->blockY, t.block[2] = k->blockZ;
      t.registers_per_thread = k->registersPerThread;
      t.static_shared_bytes = k->staticSharedMemory;
      t.dynamic_shared_bytes = k->dynamicSharedMemory;
      if (k->name != nullptr) {
        auto it = s.short_names.find(k->name);
        if (it == s.short_names.end()) {
          it = s.short_names.emplace(k->name, short_kernel_name(k->name)).first;
        }
        t.name = it->second;
      }
      // Cap: kMaxHeldKernelRecords (caps.h). Measurements take theirs after every batch; what
      // nobody takes (the profiler's replays, work between requests) must not pile up.
      keep_recent_half(&s.kernels, kMaxHeldKernelRecords);
      s.kernels.push_back(std::move(t));
      ++s.stats.kernel_records;
    } else if (record->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      // Cap: as for kernels; entries are erased when their ids are taken, so this is a backstop.
      if (s.external_of.size() >= kMaxHeldKernelRecords) s.external_of.clear();
      if (e->externalKind == kOurKind) s.external_of[e->correlationId] = e->externalId;
      ++s.stats.external_correlation_records;
    } else if (record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ||
               record->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
      ++s.stats.api_records;  // only their correlation id matters, and the kernel record has it
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS) {
    s.stats.dropped_records += dropped;
  }
  std::free(buffer);
  --buffers_held;
}

// Resolves the external id of every delivered kernel whose correlation record has arrived.
void resolve_locked(TracerState& s) {
  for (TracedKernel& k : s.kernels) {
    if (k.external_id != 0) continue;
    const auto it = s.external_of.find(k.correlation_id);
    if (it != s.external_of.end()) k.external_id = it->second;
  }
}

void CUPTIAPI probe_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// Enables one activity kind, naming the degraded mode when another profiler owns CUPTI.
Status enable_kind(CUpti_ActivityKind kind, const char* what) {
  // The fault switch (gpu_faults.h): Nsight Compute attached answers with NOT_COMPATIBLE.
  const CUptiResult r =
      fault_active(FaultPoint::cupti_busy) ? CUPTI_ERROR_NOT_COMPATIBLE : cuptiActivityEnable(kind);
  if (r == CUPTI_SUCCESS) return Status::Ok();
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED || r == CUPTI_ERROR_NOT_COMPATIBLE) {
    return Status::Error(kAnotherProfiler);
  }
  return Status::Error(std::string("CUPTI activity tracing could not start (enabling ") + what +
                       ": " + cupti_result_text(r) +
                       "), so kernels are timed with CUDA events instead.");
}

}  // namespace

std::string short_kernel_name(const char* mangled) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = (status == 0 && demangled != nullptr) ? demangled : mangled;
  std::free(demangled);
  // "(anonymous namespace)::" is the one parenthesis that is not a parameter list.
  const std::string anonymous = "(anonymous namespace)::";
  for (size_t at; (at = name.find(anonymous)) != std::string::npos;)
    name.erase(at, anonymous.size());
  // Cut the parameter list: the first '(' outside template arguments.
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<')
      ++depth;
    else if (name[i] == '>')
      --depth;
    else if (name[i] == '(' && depth == 0 && i > 0) {
      name.resize(i);
      break;
    }
  }
  // Drop the return type (templates carry one: "void gelu<float>") and the namespaces: keep
  // what follows the last ' ' or "::" outside template arguments.
  depth = 0;
  size_t keep_from = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<')
      ++depth;
    else if (name[i] == '>')
      --depth;
    else if (depth == 0 && name[i] == ' ')
      keep_from = i + 1;
    else if (depth == 0 && name[i] == ':' && i + 1 < name.size() && name[i + 1] == ':') {
      keep_from = i + 2;
      ++i;
    }
  }
  name.erase(0, keep_from);
  return name.empty() ? std::string(mangled) : name;
}

Status KernelTracer::instance(KernelTracer** out, TracedApis apis) {
  static KernelTracer* tracer = nullptr;
  static Status started = [apis] {
    KernelTracer* t = new KernelTracer();
    const Status st = t->start(apis);
    if (st.ok())
      tracer = t;
    else
      delete t;
    return st;
  }();
  *out = tracer;
  return started;
}

Status KernelTracer::start(TracedApis apis) {
  // Before CUDA 13.3 CUPTI allows one subscriber per process: when Nsight Systems, Nsight
  // Compute or cuda-gdb is attached, subscribing fails and so would our activity records.
  CUpti_SubscriberHandle probe = nullptr;
  // The fault switch (gpu_faults.h): Nsight Systems holding the one subscriber.
  const CUptiResult sub = fault_active(FaultPoint::cupti_subscribe)
                              ? CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                              : cuptiSubscribe(&probe, probe_callback, nullptr);
  if (sub == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) return Status::Error(kAnotherProfiler);
  if (sub != CUPTI_SUCCESS) {
    return Status::Error("CUPTI could not start (" + cupti_result_text(sub) +
                         "), so kernels are timed with CUDA events instead.");
  }
  FL_CUPTI_TRY(cuptiUnsubscribe(probe));

  FL_CUPTI_TRY(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  FL_TRY(enable_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernel records"));
  FL_TRY(enable_kind(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "external correlation"));
  // External correlation records are written for traced API calls, so the launch calls must be
  // traced: the RUNTIME kind (on H200 with CUDA 13.0, tracing only the launch calls with
  // cuptiActivityEnableRuntimeApi/DriverApi, without the kind, gave no correlation records).
  // With CUDA 13, every runtime call but the launches is then switched off again, as
  // cuptiActivityEnableRuntimeApi documents, to keep the per-call cost off cudaEventRecord,
  // cudaGetLastError and the rest.
  FL_TRY(enable_kind(CUPTI_ACTIVITY_KIND_RUNTIME, "runtime API records"));
#if CUPTI_API_VERSION >= 130001
  if (apis == TracedApis::launches) {
    const CUpti_CallbackId launches[] = {
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
        CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,  // what <<<...>>> calls in CUDA 13
        CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
        // A CUDA graph's kernels carry the external id of the graph launch (gpt2_decode's
        // graph levels); without it their records map to no launch.
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    };
    for (CUpti_CallbackId cbid = 1; cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++cbid) {
      if (std::find(std::begin(launches), std::end(launches), cbid) != std::end(launches)) continue;
      // A call CUPTI refuses to switch off (a retired id) only stays traced: it costs a little
      // CPU time per call, nothing in correctness. Counted for the diagnostics.
      if (cuptiActivityEnableRuntimeApi(cbid, 0) != CUPTI_SUCCESS) ++state().stats.apis_left_traced;
    }
  }
#endif
  // Libraries launch through the driver API too: cuBLASLt runs some of its kernels (e.g. a
  // split-K reduction) with cuLaunchKernel, and those kernels carry our external id only if
  // that call is traced. As above, only the launch calls stay on (with CUDA 13).
  FL_TRY(enable_kind(CUPTI_ACTIVITY_KIND_DRIVER, "driver API records"));
#if CUPTI_API_VERSION >= 130001
  if (apis == TracedApis::launches) {
    const CUpti_CallbackId driver_launches[] = {
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
        CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    };
    for (CUpti_CallbackId cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid) {
      if (std::find(std::begin(driver_launches), std::end(driver_launches), cbid) !=
          std::end(driver_launches)) {
        continue;
      }
      if (cuptiActivityEnableDriverApi(cbid, 0) != CUPTI_SUCCESS) ++state().stats.apis_left_traced;
    }
  }
#endif
  return Status::Ok();
}

uint64_t KernelTracer::reserve_ids(uint64_t count) {
  return state().next_id.fetch_add(count);
}

Status KernelTracer::push(uint64_t id) {
  FL_CUPTI_TRY(cuptiActivityPushExternalCorrelationId(kOurKind, id));
  return Status::Ok();
}

Status KernelTracer::pop() {
  uint64_t last = 0;
  FL_CUPTI_TRY(cuptiActivityPopExternalCorrelationId(kOurKind, &last));
  return Status::Ok();
}

Status KernelTracer::flush(bool forced) {
  FL_CUPTI_TRY(cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0));
  TracerState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.callback_error.empty()) {
    const std::string error = s.callback_error;
    s.callback_error.clear();
    return Status::Error(error);
  }
  return Status::Ok();
}

size_t KernelTracer::count(uint64_t first_id, uint64_t last_id) {
  TracerState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  resolve_locked(s);
  size_t n = 0;
  for (const TracedKernel& k : s.kernels)
    n += k.external_id >= first_id && k.external_id <= last_id;
  return n;
}

void KernelTracer::take(uint64_t first_id, uint64_t last_id, std::vector<TracedKernel>* tagged,
                        std::vector<TracedKernel>* untagged) {
  TracerState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  resolve_locked(s);
  std::vector<TracedKernel> keep;
  for (TracedKernel& k : s.kernels) {
    if (k.external_id > last_id)
      keep.push_back(std::move(k));  // a later block's
    else if (k.external_id >= first_id) {
      if (tagged != nullptr) tagged->push_back(std::move(k));
    } else if (k.external_id == 0 && untagged != nullptr) {
      untagged->push_back(std::move(k));
    }
  }
  s.kernels = std::move(keep);
  for (auto it = s.external_of.begin(); it != s.external_of.end();) {
    it = it->second <= last_id ? s.external_of.erase(it) : std::next(it);
  }
}

void KernelTracer::discard_all() {
  TracerState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.kernels.clear();
  s.external_of.clear();
}

int64_t cupti_buffer_bytes_held() {
  return buffers_held.load() * static_cast<int64_t>(kBufferBytes);
}

TracerStats KernelTracer::stats() const {
  TracerState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  TracerStats out = s.stats;
  out.held_kernels = s.kernels.size();
  out.held_ids = s.external_of.size();
  return out;
}

}  // namespace fl
