// Kernel timing with CUPTI's activity API (the timing phase of DESIGN.md §3).
//
// CUPTI writes one record per kernel execution (start, end, stream, grid, block, registers,
// shared memory) into buffers we hand it, and returns them when flushed. We push an external
// correlation id around each of our launches, so every kernel record maps back to (repetition,
// launch) without guessing from the order.
//
// CUPTI's activity callbacks are process-wide, so there is one tracer per process. It is
// enabled once and never disabled: disabling CONCURRENT_KERNEL could deadlock before CUDA 13.0
// Update 1 (shared/notes/CUPTI.md §1). Records of kernels we did not tag (copies, checks) are
// dropped when they arrive. One thread measures at a time (the engine's worker, or bench).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/status.h"

namespace fl {

// One kernel as CUPTI recorded it, plus the external id we pushed around its launch.
struct TracedKernel {
  uint64_t external_id = 0;  // 0: launched with no id pushed (not ours to time)
  uint32_t correlation_id = 0;
  uint32_t stream_id = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  int grid[3] = {0, 0, 0};
  int block[3] = {0, 0, 0};
  int registers_per_thread = 0;
  int static_shared_bytes = 0;
  int dynamic_shared_bytes = 0;
  std::string name;  // demangled short name
};

// Which CUDA API calls CUPTI traces. External correlation records are written only for traced
// API calls, so at least the launches must be. `all_runtime` (a diagnostic) traces every runtime
// and driver call, which costs a little more CPU time per call.
enum class TracedApis { launches, all_runtime };

// What CUPTI has delivered since the process started (diagnostics).
struct TracerStats {
  uint64_t kernel_records = 0;
  uint64_t api_records = 0;
  uint64_t external_correlation_records = 0;
  uint64_t dropped_records = 0;
  uint64_t apis_left_traced = 0;  // runtime calls CUPTI would not stop tracing
  // Held now (caps.h, kMaxHeldKernelRecords): kernel records not yet taken, correlation ids.
  uint64_t held_kernels = 0, held_ids = 0;
};

class KernelTracer {
 public:
  // The process's tracer, started on first use (the first call's `apis` decides). When CUPTI
  // cannot trace (another profiler such as Nsight holds it, or CUPTI failed to start) every call
  // returns the same failure, whose message is one plain sentence for the learner.
  static Status instance(KernelTracer** out, TracedApis apis = TracedApis::launches);

  // A block of `count` fresh external ids; returns the first. Ids never repeat in a process.
  uint64_t reserve_ids(uint64_t count);
  // Tags every launch this thread enqueues until pop() with `id`.
  Status push(uint64_t id);
  Status pop();

  // Asks CUPTI for every buffer whose records are complete (the caller synchronised the GPU
  // first). `forced` also returns buffers with incomplete records.
  Status flush(bool forced);
  // How many records delivered so far carry an id in [first_id, last_id].
  size_t count(uint64_t first_id, uint64_t last_id);
  // Moves out the records delivered so far whose id is in [first_id, last_id] and, in
  // `untagged` when not null, those that carry no id (kept for matching by launch order if
  // CUPTI ever delivers no correlation records). Drops everything else older than last_id.
  void take(uint64_t first_id, uint64_t last_id, std::vector<TracedKernel>* tagged,
            std::vector<TracedKernel>* untagged);
  // Forgets every record delivered so far (stale work before a measurement).
  void discard_all();
  TracerStats stats() const;

 private:
  KernelTracer() = default;
  Status start(TracedApis apis);
};

// Bytes of CUPTI activity buffers handed out and not yet delivered back (each 4 MiB).
int64_t cupti_buffer_bytes_held();

// "void fl::(anonymous namespace)::gelu_kernel<float>(float const*, float*, long)" ->
// "gelu_kernel<float>": the demangled name without return type, namespaces and parameters.
std::string short_kernel_name(const char* mangled);

}  // namespace fl
