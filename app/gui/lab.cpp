#include "app/gui/lab.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "app/gui/backend_choice.h"
#include "model/session_json.h"
#include "fusionlab_build_info.h"
#include "kernels/catalog.h"
#include "viz/speedup_view.h"

namespace fl::gui {

// The lesson the window opens on: the tutorial's headline.
constexpr const char* kFirstLesson = "gelu_scale";

Lab::Lab(Engine::BackendFactory factory, std::shared_ptr<const ReplayBoard> replay_board)
    : engine_(std::make_unique<Engine>(std::move(factory))),
      replay_board_(std::move(replay_board)) {
  for (int i = 0; i < static_cast<int>(lessons().size()); ++i) {
    if (lessons()[i]->info().id == kFirstLesson) lesson_index_ = i;
  }
  size_ = lesson().info().size_axis.default_size;
  status_ = engine_->status();
}

const Lesson& Lab::lesson() const {
  return *lessons()[lesson_index_];
}

Precision opening_precision(const LessonInfo& info) {
  static const char* const kTensorCoreLessons[] = {
      "layernorm_linear", "linear_gelu", "ffn", "attention", "attention_residual_layernorm",
      "gpt2_decode"};
  bool told_on_tensor_cores = false;
  for (const char* id : kTensorCoreLessons) told_on_tensor_cores |= info.id == id;
  const bool has_bf16 =
      std::find(info.precisions.begin(), info.precisions.end(), Precision::bf16) !=
      info.precisions.end();
  return told_on_tensor_cores && has_bf16 ? Precision::bf16 : Precision::fp32;
}

void Lab::select_lesson(int index, double now) {
  if (index == lesson_index_ || index < 0 || index >= static_cast<int>(lessons().size())) return;
  lesson_index_ = index;
  size_ = lesson().info().size_axis.default_size;
  if (!precision_chosen_) {
    // A recording without the lesson's own precision keeps the one in use (start_replay and
    // the precision radio buttons explain what there is); a live GPU without bf16 falls back
    // to fp32 in the controls, once the engine knows the device.
    const Precision opening = opening_precision(lesson().info());
    if (recorded(lesson().info().id, opening, cache_)) precision_ = opening;
  }
  fusion_level_ = -1;  // a new ladder starts fully fused
  snap_to_recording();
  change_now(now);
}

bool Lab::select_lesson(const std::string& id, double now) {
  const auto& all = lessons();
  for (int i = 0; i < static_cast<int>(all.size()); ++i) {
    if (all[i]->info().id == id) {
      select_lesson(i, now);
      return true;
    }
  }
  return false;
}

void Lab::set_size(int64_t size, double now) {
  cancel_sweep();
  if (replay_ && !recorded_sizes_.empty()) size = nearest_recorded_size(recorded_sizes_, size);
  if (size == size_) return;
  size_ = size;
  change_pending_ = true;
  last_change_ = now;
}

void Lab::release_size(double now) {
  if (change_pending_) last_change_ = now - kSettleSeconds;
}

void Lab::change_now(double now) {
  cancel_sweep();
  current_.clear();
  last_error_.clear();
  change_pending_ = true;
  last_change_ = now - kSettleSeconds;  // a click, not a drag: measure at once
}

void Lab::set_precision(Precision p, double now) {
  if (p == precision_) return;
  precision_ = p;
  snap_to_recording();
  change_now(now);
}

void Lab::choose_precision(Precision p, double now) {
  precision_chosen_ = true;
  set_precision(p, now);
}

void Lab::set_cache(CacheMode mode, double now) {
  if (mode == cache_) return;
  cache_ = mode;
  snap_to_recording();
  change_now(now);
}

bool Lab::recorded(const std::string& lesson_id, Precision p, CacheMode c) const {
  return !replay_ || replay_->recording.find(lesson_id, p, c) != nullptr;
}

void Lab::snap_to_recording() {
  if (!replay_) return;
  const RecordedSeries* series = replay_->recording.find(lesson().info().id, precision_, cache_);
  recorded_sizes_ = series ? series->sizes : std::vector<int64_t>();
  if (!recorded_sizes_.empty()) size_ = nearest_recorded_size(recorded_sizes_, size_);
}

void Lab::start_replay(ReplayNotice notice) {
  replay_ = std::move(notice);
  // Stay on the chosen lesson when the recording has it (in another precision or cache mode if
  // need be); otherwise the first recorded lesson in curriculum order.
  const auto& all = lessons();
  std::vector<int> order = {lesson_index_};
  for (int i = 0; i < static_cast<int>(all.size()); ++i) {
    if (i != lesson_index_) order.push_back(i);
  }
  const Precision other_precision =
      precision_ == Precision::fp32 ? Precision::bf16 : Precision::fp32;
  const CacheMode other_cache = cache_ == CacheMode::cold ? CacheMode::warm : CacheMode::cold;
  for (int index : order) {
    const std::string& id = all[index]->info().id;
    for (Precision p : {precision_, other_precision}) {
      for (CacheMode c : {cache_, other_cache}) {
        if (!replay_->recording.find(id, p, c)) continue;
        if (index != lesson_index_) {
          lesson_index_ = index;
          size_ = lesson().info().size_axis.default_size;
        }
        precision_ = p;
        cache_ = c;
        snap_to_recording();
        return;
      }
    }
  }
  snap_to_recording();  // nothing this build knows is recorded: every request says so
}

bool Lab::animating() const {
  if (animating_view_) {
    animating_view_ = false;  // the view sets it again in the frame it is drawn
    return true;
  }
  if (status_.state == EngineState::starting) return true;
  if (status_.state == EngineState::unavailable) return false;
  return status_.busy || change_pending_ || in_flight_id_ != 0;
}

void Lab::submit() {
  MeasureRequest request;
  request.lesson = lesson().info().id;
  request.size = size_;
  request.levels.clear();  // every level: the plot needs level 0 and the top level
  request.precision = precision_;
  request.cache = cache_;
  request.phases = phases_;
  in_flight_id_ = engine_->submit(request);
  fill_id_ = 0;  // a fill in flight is superseded
  last_request_ = request;
  ++requests_submitted_;
  change_pending_ = false;
}

void Lab::start_sweep() {
  // Before the engine is ready it is not yet known whether it replays (and which sizes are
  // recorded): the sweep starts once it is (update()).
  if (status_.state != EngineState::ready) {
    sweep_queue_.clear();
    sweep_deferred_ = true;
    sweep_active_ = true;
    return;
  }
  sweep_deferred_ = false;
  std::vector<int64_t> sizes = recorded_sizes_;
  if (sizes.empty()) {  // live: every power of 4 on the lesson's axis, and its ends
    const SizeAxis& axis = lesson().info().size_axis;
    for (int64_t n = std::max<int64_t>(axis.min, 1); n < axis.max; n *= 4) sizes.push_back(n);
    sizes.push_back(axis.max);
  }
  sweep_queue_ = sizes;
  sweep_total_ = static_cast<int>(sizes.size());
  sweep_active_ = true;
}

void Lab::update(double now) {
  for (EngineResult& result : engine_->poll()) {
    if (result.id == in_flight_id_) {
      in_flight_id_ = 0;
      ++requests_finished_;
    }
    if (result.cancelled) continue;  // superseded by a newer request: partial, not shown
    if (!result.status.ok()) {
      last_error_ = result.status.message();
      // A level refused (out of GPU memory) comes with the levels that were measured.
      if (result.measurements.empty()) continue;
    } else {
      last_error_.clear();
    }
    // A live measurement is stamped when it arrives; a replayed one keeps the recording's.
    const EngineStatus engine = engine_->status();
    const DeviceFacts& device = engine.device;
    for (Measurement& m : result.measurements) {
      if (m.provenance.known() || engine.backend_kind != "live") continue;
      m.provenance = {device.name, device.driver_version, utc_now_iso8601(), FUSIONLAB_VERSION,
                      "live"};
    }
    viz::merge_measurements(&history_, result.measurements);
    trim_oldest(&history_, history_cap_);  // cap: kMaxHistoryMeasurements (caps.h)
    if (journal_ != nullptr) journal_->append(session_snapshot_head(), result.measurements);
    // A result that finished just as the learner picked another lesson stays in the history;
    // a point filled in for the recorded curve only joins it.
    const bool fill = result.id == fill_id_;
    if (fill) fill_id_ = 0;
    if (result.request.lesson == lesson().info().id && !fill) {
      current_ = std::move(result.measurements);
    }
    ++results_received_;
  }
  status_ = engine_->status();
  if (journal_ != nullptr) journal_->flush(now);
  // Phases asked for while live: measure again with stamps (a recording has them or not).
  if (phases_changed_) {
    phases_changed_ = false;
    if (status_.backend_kind != "recorded" && phases_) change_now(now);
  }
  if (status_.state == EngineState::unavailable && sweep_deferred_) cancel_sweep();
  if (status_.state != EngineState::ready) return;
  // The factory posted its notice before the engine became ready.
  if (!replay_ && replay_board_ && status_.backend_kind == "recorded") {
    if (std::optional<ReplayNotice> notice = replay_board_->read())
      start_replay(std::move(*notice));
  }
  if (sweep_deferred_) start_sweep();
  // The first measurement needs no slider move: the default size as soon as the GPU is ready.
  if (requests_submitted_ == 0) {
    submit();
    return;
  }
  if (!sweep_queue_.empty() && in_flight_id_ == 0) {
    size_ = sweep_queue_.front();  // the slider follows the sweep
    sweep_queue_.erase(sweep_queue_.begin());
    submit();
    return;
  }
  if (sweep_queue_.empty() && in_flight_id_ == 0) sweep_active_ = false;
  if (change_pending_ && now - last_change_ >= kSettleSeconds) {
    submit();
    return;
  }
  if (!change_pending_ && in_flight_id_ == 0 && !current_.empty()) fill_recorded_curve();
}

void Lab::fill_recorded_curve() {
  if (!replay_ || status_.backend_kind != "recorded" || recorded_sizes_.empty()) return;
  const std::string& id = lesson().info().id;
  for (int64_t size : recorded_sizes_) {
    const bool have = std::any_of(history_.begin(), history_.end(), [&](const Measurement& m) {
      return m.lesson == id && m.size == size && m.precision == precision_ && m.cache == cache_;
    });
    if (have) continue;
    MeasureRequest request;
    request.lesson = id;
    request.size = size;
    request.precision = precision_;
    request.cache = cache_;
    request.phases = phases_;
    in_flight_id_ = fill_id_ = engine_->submit(request);
    ++requests_submitted_;
    return;
  }
}

Status Lab::open_recording(const std::vector<std::string>& paths, const std::string& why,
                           double now) {
  std::unique_ptr<ReplayBackend> backend;
  if (Status st = load_recording(paths, &backend); !st.ok()) return st;
  auto board = std::make_shared<ReplayBoard>();
  engine_.reset();  // cancels the old backend's work and joins its worker
  engine_ = std::make_unique<Engine>(recorded_backend(std::move(backend), why, board));
  replay_board_ = std::move(board);
  replay_.reset();
  recorded_sizes_.clear();
  cancel_sweep();
  history_.clear();
  current_.clear();
  last_error_.clear();
  change_pending_ = false;
  last_change_ = now;
  in_flight_id_ = 0;
  requests_submitted_ = 0;  // the new recording's first answer comes without a slider move
  results_received_ = 0;
  requests_finished_ = 0;
  status_ = engine_->status();
  ++backend_generation_;
  return Status::Ok();
}

Status Lab::compare_with(const std::vector<std::string>& paths) {
  std::unique_ptr<ReplayBackend> backend;
  if (Status st = load_recording(paths, &backend); !st.ok()) return st;
  Comparison c;
  c.summary = backend->summary();
  // Ask the recording for each of its points, exactly as the replay backend serves them.
  const CancelCheck never = [] { return false; };
  for (const RecordedSeries& series : c.summary.series) {
    for (int64_t size : series.sizes) {
      MeasureRequest request;
      request.lesson = series.lesson;
      request.size = size;
      request.levels = series.levels;
      request.precision = series.precision;
      request.cache = series.cache;
      request.inner = series.inner;
      std::vector<Measurement> ms;
      if (backend->measure(request, never, &ms).ok()) viz::merge_measurements(&c.measurements, ms);
    }
  }
  if (c.measurements.empty())
    return Status::Error("the recording to compare holds no measurements");
  comparison_ = std::move(c);
  return Status::Ok();
}

ComparedSeries Lab::compared_series() const {
  ComparedSeries out;
  if (!comparison_) return out;
  const std::string& id = lesson().info().id;
  const RecordedSeries* best = nullptr;
  int best_rank = 99;
  for (const RecordedSeries& s : comparison_->summary.series) {
    if (s.lesson != id) continue;
    const bool p = s.precision == precision_, c = s.cache == cache_;
    const int rank = p && c ? 0 : p ? 1 : c ? 2 : 3;
    if (rank < best_rank) {
      best = &s;
      best_rank = rank;
    }
  }
  if (!best) return out;
  out.found = true;
  out.precision = best->precision;
  out.cache = best->cache;
  out.label = comparison_->summary.device.name + ", " + comparison_->summary.date_text() + " (" +
              to_string(best->precision) + ", " + to_string(best->cache) + " L2)";
  return out;
}

void Lab::restore(const Session& recovered) {
  for (const Measurement& m : recovered.measurements) {
    history_.erase(std::remove_if(history_.begin(), history_.end(),
                                  [&](const Measurement& x) {
                                    return x.lesson == m.lesson && x.size == m.size &&
                                           x.inner == m.inner && x.level == m.level &&
                                           x.precision == m.precision && x.cache == m.cache;
                                  }),
                   history_.end());
    history_.push_back(m);
  }
  trim_oldest(&history_, history_cap_);
  if (journal_ != nullptr) journal_->append(recovered, recovered.measurements);
}

Session Lab::session_snapshot_head() const {
  Session s;
  s.app_version = FUSIONLAB_VERSION;
  s.created_utc = utc_now_iso8601();
  s.backend = status_.backend_kind.empty() ? "live" : status_.backend_kind;
  s.device = status_.device;
  return s;
}

Session Lab::session_snapshot() const {
  Session s;
  s.app_version = FUSIONLAB_VERSION;
  s.created_utc = utc_now_iso8601();
  s.backend = status_.backend_kind.empty() ? "live" : status_.backend_kind;
  s.device = status_.device;
  s.measurements = history_;
  return s;
}

std::vector<Measurement> Lab::sweep_measurements() const {
  std::vector<Measurement> out;
  for (const Measurement& m : history_) {
    if (m.lesson == lesson().info().id && m.precision == precision_ && m.cache == cache_) {
      out.push_back(m);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Measurement& a, const Measurement& b) {
    return a.size != b.size ? a.size < b.size : a.level < b.level;
  });
  return out;
}

}  // namespace fl::gui
