// The replay backend: serves measurements recorded on a real GPU (session files, see
// docs/SESSION_FORMAT.md) exactly as they were measured, on machines with no GPU (CI, a laptop in
// a lecture hall) or when the learner asks for a recording.
//
// A request is answered with the recorded measurements of its (lesson, precision, cache mode,
// row length, levels) at the recorded size nearest the requested one on a log scale. Nothing is
// interpolated or invented: every number returned is a number from the file. What is not recorded
// is refused with one sentence that says what is.
//
// Unlike the live backend, a replay backend owns no CUDA context: it may be built on any thread
// (the window loads and checks the files before it opens) and then handed to the engine's worker.
// It never changes after create(), so reading it from several threads is safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "app/measure/backend.h"
#include "model/file_io.h"

namespace fl {

// One line of a recording: a lesson in one precision, cache mode and row length, and the sizes
// and levels measured for it.
struct RecordedSeries {
  std::string lesson;
  Precision precision = Precision::fp32;
  CacheMode cache = CacheMode::cold;
  int64_t inner = 0;           // row length as recorded (0 for elementwise lessons)
  std::vector<int64_t> sizes;  // ascending, distinct
  std::vector<int> levels;     // every level recorded at some size, ascending
};

// What a recording holds, for the window: the GPU it was made on, when, from which files, and
// its series (so the size slider can snap to recorded sizes).
struct RecordingSummary {
  DeviceFacts device;                  // the recording GPU (of the first file)
  std::string first_utc, last_utc;     // the files' created_utc, earliest and latest
  std::vector<std::string> origins;    // the files (or names) it was built from, in order
  std::vector<RecordedSeries> series;  // sorted by lesson, precision, cache, row length

  // "2026-11-21", or "2026-11-21 to 2026-11-23" when the files span several days.
  std::string date_text() const;
  // The series of `lesson` in `precision` and `cache` at row length `inner` (0: the lesson's
  // default, as in MeasureRequest); nullptr when none is recorded.
  const RecordedSeries* find(const std::string& lesson, Precision precision, CacheMode cache,
                             int64_t inner = 0) const;
  // Whether `lesson` appears in the recording at all.
  bool has_lesson(const std::string& lesson) const;
};

// The element of `sizes` nearest `size` on a log scale (a tie goes to the smaller one);
// 0 when `sizes` is empty. The window snaps its slider with this, so what the slider shows is
// what replay serves.
int64_t nearest_recorded_size(const std::vector<int64_t>& sizes, int64_t size);

class ReplayBackend final : public MeasureBackend {
 public:
  // A loaded session and where it came from (a file name, for messages).
  struct Source {
    std::string origin;
    Session session;
  };

  // Merges `sources`, which must come from one GPU (same name, compute capability, SM count and
  // L2 size): a mix is refused with one sentence naming two of the files. Where two sources hold
  // the same point (lesson, size, row length, precision, cache), the later one replaces the
  // earlier's measurements there. Refuses a recording with no measurements at all.
  static Status create(std::vector<Source> sources, std::unique_ptr<ReplayBackend>* out);

  const DeviceFacts& device() const override { return summary_.device; }
  const char* kind() const override { return "recorded"; }
  // Copies of the recorded measurements at the nearest recorded size, ordered by level (within a
  // level, in recorded order). Returns early, Ok and partial, once `cancelled()` turns true.
  Status measure(const MeasureRequest& request, const CancelCheck& cancelled,
                 std::vector<Measurement>* out) override;

  const RecordingSummary& summary() const { return summary_; }
  // Recorded sizes of (lesson, precision, cache) at row length `inner` (0: the lesson's
  // default), ascending; empty when that series is not recorded.
  std::vector<int64_t> recorded_sizes(const std::string& lesson, Precision precision,
                                      CacheMode cache, int64_t inner = 0) const;

 private:
  ReplayBackend() = default;

  // One recorded point: every measurement of it, all levels, in recorded order.
  using PointKey =
      std::tuple<std::string, Precision, CacheMode, int64_t /*inner*/, int64_t /*size*/>;
  std::map<PointKey, std::vector<Measurement>> points_;
  RecordingSummary summary_;
  // The files it was loaded from count as being read while it lives: no save or export of this
  // process replaces them (file_io.h).
  ReadingGuard reading_;
};

// Caps on one recording as a whole, checked from the files' sizes before any is read: a folder
// holds at most kMaxRecordingFiles session files, and a folder's files (or all the files given,
// named one by one) add up to at most kMaxRecordingBytes, the cap of one session file, so a
// folder loads within the memory bound of one file (docs/RELIABILITY.md).
constexpr size_t kMaxRecordingFiles = 1000;
constexpr int64_t kMaxRecordingBytes = kMaxSessionFileBytes;

// Loads session files and builds a replay backend from them. A path that is a folder stands for
// every *.json file in it, in name order. A missing, unreadable, malformed, truncated, oversized
// (over 256 MiB) or wrong-version file, a folder over the caps above, or a mix of GPUs, is
// refused with one line that names the file or folder and the problem.
Status load_recording(const std::vector<std::string>& paths, std::unique_ptr<ReplayBackend>* out);

}  // namespace fl
