// The window's state and its link to the measurement engine: what the learner chose, what was
// measured, and when to ask for a new measurement. Panels read and change it; only update()
// talks to the engine, once per frame, and never waits on it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/gui/replay_notice.h"
#include "model/caps.h"
#include "model/journal.h"
#include "app/measure/engine.h"
#include "model/results.h"
#include "kernels/lesson.h"

namespace fl::gui {

// How long the size slider must rest before its value is measured (DESIGN.md: only the newest
// request matters while a slider is dragged).
constexpr double kSettleSeconds = 0.25;

// A second recording drawn over this one's plots (File > Compare with..., a script's `compare`):
// another GPU, another day, another precision or cache mode. Read-only; never measured.
struct Comparison {
  RecordingSummary summary;               // its GPU, dates, files and series
  std::vector<Measurement> measurements;  // every recorded point, as replay would serve it
};

// Which of the comparison's series the plots overlay for the current lesson: the same precision
// and cache mode when it has them, else the same precision, else the same cache mode, else its
// first. `label` names the GPU, the recording's date and the series: "NVIDIA H200, 2026-11-22
// (fp32, warm L2)".
struct ComparedSeries {
  bool found = false;
  Precision precision = Precision::fp32;
  CacheMode cache = CacheMode::cold;
  std::string label;
};

// The precision a lesson opens at until the learner chooses one: bf16 for the lessons told on
// tensor cores (the GEMMs, attention, the decode step), where the lesson has bf16 kernels; fp32
// for the memory-bound ones, whose story does not change with the precision.
Precision opening_precision(const LessonInfo& info);

class Lab {
 public:
  // The engine's worker calls `factory` to make its backend (live, a recording, or a fake in
  // tests). A factory that may choose a recording posts a notice on `replay_board`.
  explicit Lab(Engine::BackendFactory factory,
               std::shared_ptr<const ReplayBoard> replay_board = nullptr);

  // Once per frame: takes finished results, refreshes the engine status, and submits the size
  // once the slider has settled. `now` is in seconds on any steady clock.
  void update(double now);

  // Controls call these.
  void select_lesson(int index, double now);
  bool select_lesson(const std::string& id, double now);  // false when no lesson has that id
  // While dragging: measured once it settles. In replay, snaps to the nearest recorded size.
  void set_size(int64_t size, double now);
  void release_size(double now);  // slider released: measure now
  // "Sweep sizes": measures a grid of sizes one after another (the recorded sizes when
  // replaying), filling the speedup curve. Any control the learner touches cancels it.
  void start_sweep();
  void cancel_sweep() {
    sweep_queue_.clear();
    sweep_active_ = false;
    sweep_deferred_ = false;
  }
  bool sweeping() const { return sweep_active_; }
  double sweep_progress() const {
    return sweep_total_ > 0
               ? 1.0 - double(sweep_queue_.size() + (in_flight_id_ != 0 ? 1 : 0)) / sweep_total_
               : 0;
  }
  void set_precision(Precision p, double now);  // measured at once
  // The learner's own choice (a click, a script's `precision`, the remembered setting): from then
  // on a new lesson keeps it instead of opening at its own precision (opening_precision).
  void choose_precision(Precision p, double now);
  bool precision_chosen() const { return precision_chosen_; }
  void set_cache(CacheMode mode, double now);   // measured at once

  // Whether the window should keep redrawing at full rate (something is changing).
  bool animating() const;
  // A view that animates (the data-flow view) says so each frame it is drawn.
  void note_animating_view() const { animating_view_ = true; }

  const Lesson& lesson() const;
  int lesson_index() const { return lesson_index_; }
  int64_t size() const { return size_; }
  int top_level() const { return lesson().level_count() - 1; }
  // The fusion slider: the level whose launches are detailed and whose speedup over level 0 is
  // plotted. Every level is always measured; a new lesson starts at its top level.
  int shown_level() const {
    return fusion_level_ < 0 ? top_level() : std::min(fusion_level_, top_level());
  }
  void set_shown_level(int level) { fusion_level_ = level; }

  const EngineStatus& status() const { return status_; }

  // Replay: the recording served and why, once the engine is ready on it; nullptr when live.
  const ReplayNotice* replay() const { return replay_ ? &*replay_ : nullptr; }
  // In replay, the recorded sizes of the current lesson, precision and cache mode (ascending;
  // empty when that series is not recorded). Empty when live.
  const std::vector<int64_t>& recorded_sizes() const { return recorded_sizes_; }
  // In replay, whether (lesson, precision, cache) is recorded; always true when live.
  bool recorded(const std::string& lesson, Precision p, CacheMode c) const;
  bool waiting_for_result() const { return in_flight_id_ != 0; }
  bool change_pending() const { return change_pending_; }
  // The newest request submitted (meaningful once requests_submitted() > 0).
  const MeasureRequest& last_request() const { return last_request_; }
  int requests_submitted() const { return requests_submitted_; }
  // Every measurement so far, oldest first, one per point; at most history_cap() (the oldest
  // measured are dropped first; caps.h, kMaxHistoryMeasurements).
  const std::vector<Measurement>& history() const { return history_; }
  size_t history_cap() const { return history_cap_; }
  void set_history_cap(size_t cap) { history_cap_ = cap < 16 ? 16 : cap; }  // tests
  // The newest complete result (all levels of one size); empty until one arrives.
  const std::vector<Measurement>& current() const { return current_; }
  const std::string& last_error() const { return last_error_; }
  int results_received() const { return results_received_; }
  int requests_finished() const { return requests_finished_; }

  // ---- sessions and recordings (the File menu and scripts) ----
  // Switches to replaying the recording at `paths` (files or folders of one GPU, as --replay).
  // Loads and checks them on this thread first: on failure nothing changes and the message is
  // one line naming the file. On success the old engine stops (work in flight is cancelled), the
  // history starts empty and the window replays the new recording, saying `why`.
  Status open_recording(const std::vector<std::string>& paths, const std::string& why, double now);
  // Overlays the recording at `paths` on the speedup and bandwidth plots; replaces any earlier
  // comparison. On failure the earlier comparison stays.
  Status compare_with(const std::vector<std::string>& paths);
  void stop_comparing() { comparison_.reset(); }
  const Comparison* comparison() const { return comparison_ ? &*comparison_ : nullptr; }
  ComparedSeries compared_series() const;
  // The current session: the engine's device facts and every measurement so far (one per point;
  // a newer run at a point replaced the older), ready for save_session().
  Session session_snapshot() const;
  Session session_snapshot_head() const;  // the same without the measurements
  // The crash journal (model/journal.h): every result is appended and written in batches from
  // update(); null: none. Not owned.
  void set_journal(Journal* journal) { journal_ = journal; }
  // Measurements reopened from a crashed window's journal join the history (and this window's
  // journal), as if measured here; a later measurement at a point replaces them.
  // `recovered` gives the device and app version they are journalled with.
  void restore(const Session& recovered);
  // The current sweep: the measurements of the current lesson, precision and cache mode, by size
  // then level (what Export CSV / Export trace write).
  std::vector<Measurement> sweep_measurements() const;
  // Counts engine switches (open_recording), so the window can announce a new recording once.
  int backend_generation() const { return backend_generation_; }

  // The Timeline view's "phases" box (a script's `phases on|off`, `--phases`): live, every
  // request then asks for the kernels' phase timelines too (a pass with stamps on); a recording
  // shows the ones it holds. The views draw with a const Lab, so the box's change is taken up by
  // the next update().
  bool phases() const { return phases_; }
  void set_phases(bool on) const {
    if (on == phases_) return;
    phases_ = on;
    phases_changed_ = true;
  }

  Precision precision() const { return precision_; }
  CacheMode cache() const { return cache_; }
  std::string note;  // one extra line shown under the status (e.g. the screenshot timeout)
  // The views panel's tab to bring forward at the next frame (--view, a script's `view`);
  // the panel clears it once done.
  mutable std::string requested_view = "speedup";
  // The views panel's tab in front at the last frame ("speedup", "flow", ...), for screenshot
  // names and captions; the panel sets it.
  mutable std::string front_view = "speedup";
  // Space (app/gui/shortcuts.h): the data-flow view toggles its animation's pause when it is
  // drawn this frame; the window clears it after each frame.
  mutable bool flow_pause_toggle = false;

 private:
  void submit();

  void change_now(double now);

  mutable bool phases_ = false;
  mutable bool phases_changed_ = false;
  int fusion_level_ = -1;                // -1: the lesson's top level
  mutable bool animating_view_ = false;  // set while drawing, read by the next wait
  std::vector<int64_t> sweep_queue_;     // sizes still to measure, next first
  int sweep_total_ = 0;
  bool sweep_active_ = false;
  bool sweep_deferred_ =
      false;  // asked for before the engine was ready: starts once it is  // Replay: refreshes
              // recorded_sizes_ and moves size_ onto the nearest recorded size.
  void snap_to_recording();
  // Replay, once: if the lesson / precision / cache chosen is not recorded, picks one that is.
  void start_replay(ReplayNotice notice);

  std::optional<Comparison> comparison_;
  Journal* journal_ = nullptr;
  int backend_generation_ = 0;
  Precision precision_ = Precision::fp32;
  bool precision_chosen_ = false;
  CacheMode cache_ = CacheMode::cold;
  std::unique_ptr<Engine> engine_;
  std::shared_ptr<const ReplayBoard> replay_board_;
  std::optional<ReplayNotice> replay_;
  std::vector<int64_t> recorded_sizes_;
  EngineStatus status_;
  int lesson_index_ = 0;
  int64_t size_ = 0;
  bool change_pending_ = false;
  double last_change_ = 0;
  uint64_t in_flight_id_ = 0;  // the newest submitted request, until its result arrives
  // Replaying, the recorded sizes of the lesson, precision and cache mode not yet in the history
  // are asked for one after another whenever nothing else is (fill_recorded_curve), so the whole
  // recorded curve is drawn without a sweep; such a result joins the history only (the slider
  // and the measurement panel stay where they are).
  uint64_t fill_id_ = 0;
  void fill_recorded_curve();
  MeasureRequest last_request_;
  int requests_submitted_ = 0;
  std::vector<Measurement> history_;
  size_t history_cap_ = kMaxHistoryMeasurements;
  std::vector<Measurement> current_;
  std::string last_error_;
  int results_received_ = 0;
  int requests_finished_ = 0;  // results, errors included, of the newest request
};

}  // namespace fl::gui
