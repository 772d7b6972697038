// The measurement engine: one worker thread owns the backend (and so the CUDA context). The UI
// submits requests and polls for results each frame; it never waits on the GPU.
//
// While a slider is dragged only the newest request matters: submit() replaces any request that
// has not started, and asks the one in flight to stop at its next safe point.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/measure/backend.h"

namespace fl {

struct EngineResult {
  uint64_t id = 0;  // submit()'s return value
  MeasureRequest request;
  Status status;    // failed: status.message() is one sentence for the UI
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
};

class Engine {
 public:
  using BackendFactory = std::function<Status(std::unique_ptr<MeasureBackend>*)>;

  // Starts the worker, which calls `factory` on its own thread.
  explicit Engine(BackendFactory factory);
  ~Engine();  // cancels work in flight and joins the worker
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues `request`, replacing any queued one, and cancels the one in flight. Returns its id.
  uint64_t submit(const MeasureRequest& request);
  // Results finished since the last call, oldest first. Never blocks on the GPU.
  std::vector<EngineResult> poll();
  EngineStatus status() const;
  // Blocks until the engine is idle with nothing queued, or `timeout_ms` passes (tests, CLI).
  bool wait_idle(int timeout_ms);

 private:
  void run(BackendFactory factory);

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::optional<std::pair<uint64_t, MeasureRequest>> pending_;
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
