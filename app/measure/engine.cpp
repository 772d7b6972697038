#include "app/measure/engine.h"

#include <tuple>

#include "app/measure/heap.h"
#include "model/caps.h"

namespace fl {

std::string describe(const MeasureRequest& r) {
  return r.lesson + ", " + std::to_string(r.size) + ", " + to_string(r.precision) + ", " +
         to_string(r.cache) + " L2";
}

const char* to_string(EnginePhase phase) {
  return phase == EnginePhase::timing ? "timing" : "counters";
}

bool Engine::CounterKey::operator<(const CounterKey& o) const {
  return std::tie(lesson, size, inner, level, precision, cache) <
         std::tie(o.lesson, o.size, o.inner, o.level, o.precision, o.cache);
}

Engine::CounterKey Engine::key_of(const Measurement& m) {
  return {m.lesson, m.size, m.inner, m.level, m.precision, m.cache};
}

Engine::Engine(BackendFactory factory, EngineOptions options) : options_(options) {
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
      dropped.id = pending_->id;
      dropped.request = pending_->request;
      dropped.cancelled = true;
      push_done_locked(std::move(dropped));
    }
    pending_ = Job{id, request, Clock::now()};
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

void Engine::fill_from_cache(std::vector<Measurement>* ms) const {
  for (Measurement& m : *ms) {
    if (m.counters_status == CountersStatus::measured || !m.check.passed) continue;
    const auto it = counter_cache_.find(key_of(m));
    if (it == counter_cache_.end() || it->second.size() != m.launches.size()) continue;
    for (size_t k = 0; k < m.launches.size(); ++k) m.launches[k].counters = it->second[k];
    m.counters_status = CountersStatus::measured;
    m.counters_note.clear();
  }
}

void Engine::store_in_cache(const std::vector<Measurement>& ms) {
  for (const Measurement& m : ms) {
    if (m.counters_status != CountersStatus::measured) continue;
    std::vector<LaunchCounters> values;
    for (const LaunchResult& l : m.launches) {
      if (l.counters) values.push_back(*l.counters);
    }
    if (values.size() != m.launches.size()) continue;
    // Cap: options_.counter_cache_entries (4096 by default); cleared when full.
    if (counter_cache_.size() >= options_.counter_cache_entries) counter_cache_.clear();
    counter_cache_[key_of(m)] = std::move(values);
  }
}

// Cap: kMaxUnpolledResults (caps.h). A caller that stops polling loses the oldest results, not
// the process's memory.
void Engine::push_done_locked(EngineResult result) {
  done_.push_back(std::move(result));
  while (done_.size() > kMaxUnpolledResults) done_.pop_front();
}

void Engine::post(EngineResult result, bool still_busy) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    push_done_locked(std::move(result));
    if (!still_busy) set_idle_locked();
  }
  idle_.notify_all();
}

void Engine::set_idle_locked() {
  status_.busy = false;
  status_.busy_with.clear();
  running_id_ = 0;
}

// With mutex_ held: what the backend says about itself now. A backend that can never measure
// again (lost_reason, e.g. the GPU fell off the bus) makes the engine unavailable with its
// sentence before the result that found out is posted; the worker then lets it go (run()).
void Engine::refresh_notes_locked(const MeasureBackend* backend) {
  if (!backend) return;
  status_.device = backend->device();
  status_.timing_note = backend->timing_note();
  status_.counters_note = backend->counters_note();
  status_.gpu_watch = backend->gpu_watch();
  status_.gpu_watch_note = backend->gpu_watch_note();
  const std::string lost = backend->lost_reason();
  if (!lost.empty()) {
    status_.state = EngineState::unavailable;
    status_.unavailable_reason = lost;
  }
}

std::unique_ptr<MeasureBackend> Engine::start_backend(BackendFactory factory) {
  std::unique_ptr<MeasureBackend> backend;
  const Status created = factory(&backend);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (created.ok() && backend) {
      status_.state = EngineState::ready;
      status_.backend_kind = backend->kind();
      refresh_notes_locked(backend.get());
    } else {
      status_.state = EngineState::unavailable;
      status_.unavailable_reason = created.ok() ? "no backend" : created.message();
    }
  }
  idle_.notify_all();
  return backend;
}

bool Engine::next_job(Job* job) {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait(lock, [this] { return stopping_ || pending_.has_value(); });
  if (stopping_) return false;
  *job = std::move(*pending_);
  pending_.reset();
  status_.busy = true;
  status_.busy_with = describe(job->request);
  running_id_ = job->id;
  return true;
}

bool Engine::timing_phase(MeasureBackend* backend, const Job& job, const CancelCheck& cancelled,
                          std::vector<Measurement>* to_count) {
  EngineResult result;
  result.id = job.id;
  result.phase = EnginePhase::timing;
  result.request = job.request;
  bool counters_follow = false;
  if (!backend) {
    result.status = Status::Error(status_.unavailable_reason);
  } else {
    result.status = backend->measure(job.request, cancelled, &result.measurements);
    result.cancelled = cancelled();
    if (result.status.ok() && !result.cancelled) {
      fill_from_cache(&result.measurements);
      const bool can_count = backend->counters_available();
      const std::string note = backend->counters_note();
      for (Measurement& m : result.measurements) {
        if (m.counters_status == CountersStatus::measured || !m.check.passed) continue;
        if (can_count) {
          m.counters_status = CountersStatus::pending;
          counters_follow = true;
        } else if (!note.empty()) {  // a degraded mode the learner should read about
          m.counters_status = CountersStatus::unavailable;
          m.counters_note = note;
        }
      }
    }
  }
  if (counters_follow) *to_count = result.measurements;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    refresh_notes_locked(backend);
    if (counters_follow) status_.busy_with = "DRAM/L2 counters: " + describe(job.request);
  }
  post(std::move(result), /*still_busy=*/counters_follow);
  return counters_follow;
}

bool Engine::rest_before_counters(const Job& job) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto deadline = job.submitted + std::chrono::milliseconds(options_.counter_rest_ms);
  wake_.wait_until(lock, deadline, [this] { return stopping_ || pending_.has_value(); });
  if (!stopping_ && !pending_.has_value()) return true;
  // A newer request: these counters are not wanted.
  set_idle_locked();
  lock.unlock();
  idle_.notify_all();
  return false;
}

void Engine::counter_phase(MeasureBackend& backend, const Job& job, const CancelCheck& cancelled,
                           std::vector<Measurement> measurements) {
  const Status st = backend.measure_counters(job.request, cancelled, &measurements);
  store_in_cache(measurements);  // levels finished before a cancel still count next time
  if (cancelled()) {             // abandoned for a newer request: nothing to post
    {
      std::lock_guard<std::mutex> lock(mutex_);
      refresh_notes_locked(&backend);
      set_idle_locked();
    }
    idle_.notify_all();
    return;
  }
  for (Measurement& m : measurements) {
    if (m.counters_status != CountersStatus::pending) continue;
    // Timing stays valid when counting fails: say why in the measurement, not as an error.
    m.counters_status = st.ok() ? CountersStatus::not_measured : CountersStatus::failed;
    m.counters_note = st.ok() ? "The counter phase left this level unmeasured."
                              : "The counter phase failed: " + st.message();
  }
  EngineResult counted;
  counted.id = job.id;
  counted.phase = EnginePhase::counters;
  counted.request = job.request;
  counted.measurements = std::move(measurements);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    refresh_notes_locked(&backend);
  }
  post(std::move(counted), false);
}

void Engine::run(BackendFactory factory) {
  std::unique_ptr<MeasureBackend> backend = start_backend(std::move(factory));
  Job job;
  while (next_job(&job)) {
    const uint64_t my_id = job.id;
    auto cancelled = [this, my_id] { return newest_id_.load() != my_id; };
    std::vector<Measurement> to_count;
    // The counter phase starts only once the slider has been still for a while.
    const bool counters_follow = timing_phase(backend.get(), job, cancelled, &to_count);
    if (counters_follow && rest_before_counters(job))
      counter_phase(*backend, job, cancelled, std::move(to_count));
    // Lost for good: every later request is answered with the reason (timing_phase).
    if (backend && !backend->lost_reason().empty()) backend.reset();
    // Freed memory of this thread's arena goes back to the system (heap.h).
    release_free_heap_if_due();
  }
  backend.reset();  // destroyed on the thread that created it
}

}  // namespace fl
