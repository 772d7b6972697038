// The measurement engine: one worker thread owns the backend (and so the CUDA context). The UI
// submits requests and polls for results each frame; it never waits on the GPU.
//
// While a slider is dragged only the newest request matters: submit() replaces any request that
// has not started, and asks the one in flight to stop at its next safe point.
//
// Every request is answered by a timing result (phase timing). When the backend can measure
// DRAM/L2 counters, the request then waits until it has rested (no newer submit for
// counter_rest_ms since it was submitted), runs the counter phase and posts a second result
// with the same id (phase counters) carrying the full measurements, timing and counters. A newer
// submit abandons the wait or the counter phase (between launches), and no counters result is
// posted for the old request. Counters are cached by (lesson, size, row length, level,
// precision, cache mode): a timing result whose every level is cached already carries its
// counters and no counter phase follows.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/measure/backend.h"

namespace fl {

enum class EnginePhase { timing, counters };
const char* to_string(EnginePhase phase);

struct EngineResult {
  uint64_t id = 0;  // submit()'s return value; a counters result repeats its timing result's id
  EnginePhase phase = EnginePhase::timing;
  MeasureRequest request;
  Status status;           // failed: status.message() is one sentence for the UI
  bool cancelled = false;  // superseded by a newer request; measurements may be partial
  std::vector<Measurement> measurements;
};

enum class EngineState { starting, ready, unavailable };

struct EngineStatus {
  EngineState state = EngineState::starting;
  std::string unavailable_reason;  // when state == unavailable
  std::string backend_kind;        // "live", "recorded"
  DeviceFacts device;
  bool busy = false;
  std::string busy_with;  // short description of the request in flight
  // Degraded modes, each one plain sentence (empty when all is well): timing by CUDA events
  // instead of CUPTI; counters unavailable (e.g. restricted to administrators, and how to allow).
  std::string timing_note;
  std::string counters_note;
  // The GPU's clocks and other processes, read at any time from any thread (null: none), and
  // why there is no watch on a live GPU.
  std::shared_ptr<GpuWatch> gpu_watch;
  std::string gpu_watch_note;
};

struct EngineOptions {
  int counter_rest_ms = 250;            // how long a request rests before its counter phase
  size_t counter_cache_entries = 4096;  // cached measurements' counters; cleared when full
};

class Engine {
 public:
  using BackendFactory = std::function<Status(std::unique_ptr<MeasureBackend>*)>;

  // Starts the worker, which calls `factory` on its own thread.
  explicit Engine(BackendFactory factory, EngineOptions options = EngineOptions());
  ~Engine();  // cancels work in flight and joins the worker
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues `request`, replacing any queued one, and cancels the one in flight. Returns its id.
  uint64_t submit(const MeasureRequest& request);
  // Results finished since the last call, oldest first. Never blocks on the GPU. At most
  // kMaxUnpolledResults (caps.h) wait: a caller that stops polling loses the oldest.
  std::vector<EngineResult> poll();
  EngineStatus status() const;
  // Blocks until the engine is idle with nothing queued, or `timeout_ms` passes (tests, CLI).
  // The rest before a counter phase and the phase itself count as busy.
  bool wait_idle(int timeout_ms);

 private:
  using Clock = std::chrono::steady_clock;
  struct Job {
    uint64_t id = 0;
    MeasureRequest request;
    Clock::time_point submitted;
  };
  struct CounterKey {
    std::string lesson;
    int64_t size, inner;
    int level;
    Precision precision;
    CacheMode cache;
    bool operator<(const CounterKey& o) const;
  };

  // The worker thread: the backend is made, then each newest job is timed, and counted once
  // the slider rests (each step below).
  void run(BackendFactory factory);
  std::unique_ptr<MeasureBackend> start_backend(BackendFactory factory);
  bool next_job(Job* job);  // false when the engine stops
  // Posts the timing result; true when a counter phase follows for *to_count.
  bool timing_phase(MeasureBackend* backend, const Job& job, const CancelCheck& cancelled,
                    std::vector<Measurement>* to_count);
  bool rest_before_counters(const Job& job);  // false when a newer request came
  void counter_phase(MeasureBackend& backend, const Job& job, const CancelCheck& cancelled,
                     std::vector<Measurement> measurements);
  void refresh_notes_locked(const MeasureBackend* backend);  // mutex_ held
  void post(EngineResult result, bool still_busy);
  void push_done_locked(EngineResult result);  // mutex_ held; keeps done_ within its cap
  void set_idle_locked();                      // mutex_ held
  // Counters from the cache into `ms`; the rest of the phase logic decides what is left to do.
  void fill_from_cache(std::vector<Measurement>* ms) const;
  void store_in_cache(const std::vector<Measurement>& ms);
  static CounterKey key_of(const Measurement& m);

  EngineOptions options_;
  std::map<CounterKey, std::vector<LaunchCounters>> counter_cache_;  // worker thread only

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::optional<Job> pending_;
  std::deque<EngineResult> done_;
  EngineStatus status_;
  uint64_t next_id_ = 1;
  uint64_t running_id_ = 0;
  std::atomic<uint64_t> newest_id_{0};
  bool stopping_ = false;
  std::thread worker_;
};

std::string describe(const MeasureRequest& request);

}  // namespace fl
