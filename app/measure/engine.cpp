#include "app/measure/engine.h"

#include <chrono>

namespace fl {

std::string describe(const MeasureRequest& r) {
  return r.lesson + ", " + std::to_string(r.size) + ", " + to_string(r.precision) + ", " +
         to_string(r.cache) + " L2";
}

Engine::Engine(BackendFactory factory) {
  worker_ = std::thread([this, f = std::move(factory)]() mutable { run(std::move(f)); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    newest_id_ = UINT64_MAX;  // cancels the request in flight
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

uint64_t Engine::submit(const MeasureRequest& request) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = next_id_++;
    if (pending_) {  // never started: report it as superseded so the caller can account for it
      EngineResult dropped;
      dropped.id = pending_->first;
      dropped.request = pending_->second;
      dropped.cancelled = true;
      done_.push_back(std::move(dropped));
    }
    pending_ = std::make_pair(id, request);
    newest_id_ = id;
  }
  wake_.notify_all();
  return id;
}

std::vector<EngineResult> Engine::poll() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<EngineResult> out(std::make_move_iterator(done_.begin()),
                                std::make_move_iterator(done_.end()));
  done_.clear();
  return out;
}

EngineStatus Engine::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

bool Engine::wait_idle(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  return idle_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] {
    return status_.state != EngineState::starting && !pending_ && !status_.busy;
  });
}

void Engine::run(BackendFactory factory) {
  std::unique_ptr<MeasureBackend> backend;
  const Status created = factory(&backend);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (created.ok() && backend) {
      status_.state = EngineState::ready;
      status_.backend_kind = backend->kind();
      status_.device = backend->device();
    } else {
      status_.state = EngineState::unavailable;
      status_.unavailable_reason = created.ok() ? "no backend" : created.message();
    }
  }
  idle_.notify_all();

  while (true) {
    std::pair<uint64_t, MeasureRequest> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || pending_.has_value(); });
      if (stopping_) break;
      job = std::move(*pending_);
      pending_.reset();
      status_.busy = true;
      status_.busy_with = describe(job.second);
      running_id_ = job.first;
    }

    EngineResult result;
    result.id = job.first;
    result.request = job.second;
    if (!backend) {
      result.status = Status::Error(status_.unavailable_reason);
    } else {
      const uint64_t my_id = job.first;
      auto cancelled = [this, my_id] { return newest_id_.load() != my_id; };
      result.status = backend->measure(job.second, cancelled, &result.measurements);
      result.cancelled = cancelled();
    }

    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (backend) status_.device = backend->device();
      status_.busy = false;
      status_.busy_with.clear();
      running_id_ = 0;
      done_.push_back(std::move(result));
    }
    idle_.notify_all();
  }
  backend.reset();  // destroyed on the thread that created it
}

}  // namespace fl
