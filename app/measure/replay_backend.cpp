#include "app/measure/replay_backend.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "model/session_json.h"
#include "model/sizes.h"
#include "kernels/catalog.h"

namespace fl {
namespace {

// "a", "a and b", "a, b and c".
std::string join_words(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " and " : ", ";
    out += items[i];
  }
  return out;
}

std::string combo_text(Precision p, CacheMode c) {
  return std::string(to_string(p)) + "/" + to_string(c);
}

// What the lesson calls its row length, for messages ("hidden size C"); "row length" for a
// lesson this build does not know.
std::string inner_name(const std::string& lesson) {
  const Lesson* known = find_lesson(lesson);
  if (known && !known->info().size_axis.inner_name.empty())
    return known->info().size_axis.inner_name;
  return "row length";
}

// Two devices are one GPU for replay when the facts that shape a measurement agree. Memory size
// is left out on purpose: it moves with ECC settings on the same board.
bool same_gpu(const DeviceFacts& a, const DeviceFacts& b) {
  return a.name == b.name && a.cc_major == b.cc_major && a.cc_minor == b.cc_minor &&
         a.sm_count == b.sm_count && a.l2_bytes == b.l2_bytes;
}

std::string gpu_configuration(const DeviceFacts& d) {
  return std::to_string(d.sm_count) + " SMs, " + format_bytes(static_cast<double>(d.l2_bytes)) +
         " L2, compute capability " + std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
}

std::string mixed_gpus_message(const std::string& first_origin, const DeviceFacts& first,
                               const std::string& origin, const DeviceFacts& other) {
  if (first.name != other.name) {
    return first_origin + " was recorded on " + first.name + " but " + origin + " on " +
           other.name + ": replay the recordings of one GPU at a time.";
  }
  return first_origin + " and " + origin + " were recorded on two different " + first.name +
         " configurations (" + gpu_configuration(first) + " vs " + gpu_configuration(other) +
         "): replay the recordings of one GPU at a time.";
}

std::string levels_text(const std::vector<int>& levels) {
  std::vector<std::string> words;
  for (int l : levels) words.push_back(std::to_string(l));
  return (levels.size() == 1 ? "level " : "levels ") + join_words(words);
}

}  // namespace

// ---- RecordingSummary -----------------------------------------------------------------------

std::string RecordingSummary::date_text() const {
  const std::string first = first_utc.substr(0, 10), last = last_utc.substr(0, 10);
  if (first.empty()) return "an unknown date";
  return first == last ? first : first + " to " + last;
}

bool RecordingSummary::has_lesson(const std::string& lesson) const {
  return std::any_of(series.begin(), series.end(),
                     [&](const RecordedSeries& s) { return s.lesson == lesson; });
}

const RecordedSeries* RecordingSummary::find(const std::string& lesson, Precision precision,
                                             CacheMode cache, int64_t inner) const {
  std::vector<const RecordedSeries*> candidates;
  for (const auto& s : series) {
    if (s.lesson == lesson && s.precision == precision && s.cache == cache) {
      candidates.push_back(&s);
    }
  }
  if (inner == 0) {
    // The lesson's default row length, as the live backend resolves it. A lesson this build does
    // not know: the row length it was recorded with, if there is only one.
    if (const Lesson* known = find_lesson(lesson)) {
      inner = known->resolve(Shape(1)).inner;
    } else if (candidates.size() == 1) {
      return candidates.front();
    }
  }
  for (const RecordedSeries* s : candidates) {
    if (s->inner == inner) return s;
  }
  return nullptr;
}

int64_t nearest_recorded_size(const std::vector<int64_t>& sizes, int64_t size) {
  int64_t best = 0;
  double best_distance = 0;
  const double target = std::log(static_cast<double>(std::max<int64_t>(size, 1)));
  for (int64_t s : sizes) {
    const double d = std::fabs(std::log(static_cast<double>(s)) - target);
    if (best == 0 || d < best_distance || (d == best_distance && s < best)) {
      best = s;
      best_distance = d;
    }
  }
  return best;
}

namespace {

// A recording file as a measurement's source names it: its folder and name
// ("h100-2026-11-27/gemm_bf16_cold.json"), not a path of this machine.
std::string recording_name(const std::string& origin) {
  const std::filesystem::path p(origin);
  const std::string folder = p.parent_path().filename().string();
  return folder.empty() ? p.filename().string() : folder + "/" + p.filename().string();
}

}  // namespace

// ---- ReplayBackend --------------------------------------------------------------------------

Status ReplayBackend::create(std::vector<Source> sources, std::unique_ptr<ReplayBackend>* out) {
  if (sources.empty()) return Status::Error("no recording was given to replay");
  std::unique_ptr<ReplayBackend> backend(new ReplayBackend());
  RecordingSummary& summary = backend->summary_;
  summary.device = sources.front().session.device;
  summary.device.usable = true;
  summary.device.unusable_reason.clear();

  for (Source& source : sources) {
    const Session& session = source.session;
    if (!same_gpu(sources.front().session.device, session.device)) {
      return Status::Error(mixed_gpus_message(
          sources.front().origin, sources.front().session.device, source.origin, session.device));
    }
    summary.origins.push_back(source.origin);
    // The dates are the measurements' own (a session saved from a replay keeps the recording's),
    // and a measurement made live by the program that saved this file now comes from it.
    for (Measurement& m : source.session.measurements) {
      if (m.provenance.source == "live") m.provenance.source = recording_name(source.origin);
      const std::string& utc =
          m.provenance.measured_utc.empty() ? session.created_utc : m.provenance.measured_utc;
      if (utc.empty()) continue;
      if (summary.first_utc.empty() || utc < summary.first_utc) summary.first_utc = utc;
      if (utc > summary.last_utc) summary.last_utc = utc;
    }
    // A later source replaces an earlier one's measurements at the same point; within one
    // source every measurement of a point is kept, in order (a loaded file holds one per level:
    // the loader refuses repeats).
    std::map<PointKey, std::vector<Measurement>> fresh;
    for (Measurement& m : source.session.measurements) {
      PointKey key{m.lesson, m.precision, m.cache, m.inner, m.size};
      fresh[key].push_back(std::move(m));
    }
    for (auto& [key, ms] : fresh) backend->points_[key] = std::move(ms);
  }
  if (backend->points_.empty()) {
    return Status::Error(join_words(summary.origins) + ": no measurements to replay");
  }

  // The series, from the merged points (std::map keeps them sorted).
  using SeriesKey = std::tuple<std::string, Precision, CacheMode, int64_t>;
  std::map<SeriesKey, std::pair<std::set<int64_t>, std::set<int>>> series;
  for (const auto& [key, ms] : backend->points_) {
    const auto& [lesson, precision, cache, inner, size] = key;
    auto& entry = series[SeriesKey{lesson, precision, cache, inner}];
    entry.first.insert(size);
    for (const Measurement& m : ms) entry.second.insert(m.level);
  }
  for (const auto& [key, entry] : series) {
    RecordedSeries s;
    std::tie(s.lesson, s.precision, s.cache, s.inner) = key;
    s.sizes.assign(entry.first.begin(), entry.first.end());
    s.levels.assign(entry.second.begin(), entry.second.end());
    summary.series.push_back(std::move(s));
  }
  backend->reading_ = ReadingGuard(backend->summary_.origins);
  *out = std::move(backend);
  return Status::Ok();
}

std::vector<int64_t> ReplayBackend::recorded_sizes(const std::string& lesson, Precision precision,
                                                   CacheMode cache, int64_t inner) const {
  const RecordedSeries* s = summary_.find(lesson, precision, cache, inner);
  return s ? s->sizes : std::vector<int64_t>();
}

namespace {

// The refusals of a request the recording cannot answer, each one sentence saying what it holds.
Status lesson_not_recorded(const RecordingSummary& summary, const std::string& lesson) {
  std::vector<std::string> lessons;
  for (const auto& s : summary.series) {
    if (std::find(lessons.begin(), lessons.end(), s.lesson) == lessons.end()) {
      lessons.push_back(s.lesson);
    }
  }
  return Status::Error(lesson + " is not in this recording, which holds " + join_words(lessons) +
                       " only.");
}

// Not recorded in this precision and cache mode, or not at this row length: say which.
Status series_not_recorded(const RecordingSummary& summary, const MeasureRequest& request) {
  const std::string& lesson = request.lesson;
  const Lesson* known = find_lesson(lesson);
  const int64_t inner = request.inner != 0 ? request.inner
                        : known            ? known->resolve(Shape(1)).inner
                                           : 0;
  std::vector<std::string> combos, inners;
  for (const auto& s : summary.series) {
    if (s.lesson != lesson) continue;
    const std::string inner_text = std::to_string(s.inner);
    if (std::find(inners.begin(), inners.end(), inner_text) == inners.end()) {
      inners.push_back(inner_text);
    }
    if (s.inner == inner || (request.inner == 0 && !known)) {
      combos.push_back(combo_text(s.precision, s.cache));
    }
  }
  if (combos.empty()) {
    return Status::Error(lesson + " with " + inner_name(lesson) + " " + std::to_string(inner) +
                         " is not in this recording: it is recorded with " + inner_name(lesson) +
                         " " + join_words(inners) + " only.");
  }
  return Status::Error(lesson + " in " + combo_text(request.precision, request.cache) +
                       " is not in this recording: it is recorded in " + join_words(combos) +
                       " only.");
}

// No recorded size holds every wanted level: some were never recorded, or never together.
Status levels_not_recorded(const RecordedSeries& series, const std::set<int>& wanted) {
  const std::string combo = combo_text(series.precision, series.cache);
  std::vector<int> missing;
  for (int level : wanted) {
    if (!std::binary_search(series.levels.begin(), series.levels.end(), level)) {
      missing.push_back(level);
    }
  }
  if (!missing.empty()) {
    return Status::Error(series.lesson + " " + levels_text(missing) +
                         " is not in this recording: " + combo + " holds " +
                         levels_text(series.levels) + " only.");
  }
  return Status::Error(series.lesson + " " + levels_text({wanted.begin(), wanted.end()}) +
                       " were never recorded together at one size in " + combo + ".");
}

}  // namespace

Status ReplayBackend::measure(const MeasureRequest& request, const CancelCheck& cancelled,
                              std::vector<Measurement>* out) {
  const auto stop = [&] { return cancelled && cancelled(); };
  if (stop()) return Status::Ok();
  const std::string& lesson = request.lesson;
  if (request.size <= 0) {
    return Status::Error("size must be positive, got " + std::to_string(request.size) + ".");
  }
  if (!summary_.has_lesson(lesson)) return lesson_not_recorded(summary_, lesson);

  const RecordedSeries* series =
      summary_.find(lesson, request.precision, request.cache, request.inner);
  if (!series) return series_not_recorded(summary_, request);

  // The recorded sizes at which every requested level was measured.
  const std::set<int> wanted(request.levels.begin(), request.levels.end());
  std::vector<int64_t> candidates;
  for (int64_t size : series->sizes) {
    const auto it = points_.find(
        PointKey{series->lesson, series->precision, series->cache, series->inner, size});
    std::set<int> present;
    for (const Measurement& m : it->second) present.insert(m.level);
    if (std::includes(present.begin(), present.end(), wanted.begin(), wanted.end())) {
      candidates.push_back(size);
    }
  }
  if (candidates.empty()) return levels_not_recorded(*series, wanted);

  const int64_t size = nearest_recorded_size(candidates, request.size);
  const auto& recorded =
      points_.at(PointKey{series->lesson, series->precision, series->cache, series->inner, size});
  std::vector<const Measurement*> picked;
  for (const Measurement& m : recorded) {
    if (wanted.empty() || wanted.count(m.level)) picked.push_back(&m);
  }
  std::stable_sort(picked.begin(), picked.end(),
                   [](const Measurement* a, const Measurement* b) { return a->level < b->level; });
  for (const Measurement* m : picked) {
    if (stop()) return Status::Ok();
    out->push_back(*m);
  }
  return Status::Ok();
}

// ---- loading --------------------------------------------------------------------------------

namespace {

// What a file of `size` bytes adds to a recording's total: nothing when its size is unknown
// (`ec`) or over the cap of one file, which load_session refuses with its own message.
int64_t counted_size(uintmax_t size, const std::error_code& ec) {
  if (ec || size > static_cast<uintmax_t>(kMaxSessionFileBytes)) return 0;
  return static_cast<int64_t>(size);
}

// The session files of the folder `path` in name order (its *.json files but peers.json), within
// the caps on a recording's file count and bytes; `bytes` adds their sizes.
Status list_folder(const std::string& path, std::vector<std::string>* files, int64_t* bytes) {
  namespace fs = std::filesystem;
  const std::string shown = shorten_for_message(path, kShownPathChars);
  std::error_code ec;
  std::vector<std::string> found;
  int64_t total = 0;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    std::error_code entry_ec;
    // peers.json beside the sessions is the PyTorch peer file (docs/SESSION_FORMAT.md).
    if (entry.path().extension() != ".json" || entry.path().filename() == "peers.json" ||
        !entry.is_regular_file(entry_ec)) {
      continue;
    }
    found.push_back(entry.path().string());
    if (found.size() > kMaxRecordingFiles) {
      return Status::Error(shown + ": more than " + std::to_string(kMaxRecordingFiles) +
                           " session files, the limit for a folder of recordings");
    }
    total += counted_size(entry.file_size(entry_ec), entry_ec);
    if (total > kMaxRecordingBytes) {
      return Status::Error(shown + ": its session files add up to more than " +
                           size_limit_words(kMaxRecordingBytes) +
                           ", the limit for a folder of recordings");
    }
  }
  if (ec) return Status::Error(shown + ": cannot list the folder: " + ec.message());
  if (found.empty()) return Status::Error(shown + ": a folder with no .json session files");
  std::sort(found.begin(), found.end());
  files->insert(files->end(), found.begin(), found.end());
  *bytes += total;
  return Status::Ok();
}

}  // namespace

Status load_recording(const std::vector<std::string>& paths, std::unique_ptr<ReplayBackend>* out) {
  namespace fs = std::filesystem;
  if (paths.empty()) return Status::Error("no session file was given to replay");
  std::vector<std::string> files;
  int64_t bytes = 0;
  for (const std::string& path : paths) {
    if (path.empty()) return Status::Error("an empty session file name was given");
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (fs::is_directory(st)) {
      FL_TRY(list_folder(path, &files, &bytes));
    } else {
      // A missing file, a FIFO, a device (/dev/zero would never end) or an oversized file:
      // load_session's checks name the problem before anything is read.
      files.push_back(path);
      if (fs::is_regular_file(st)) bytes += counted_size(fs::file_size(path, ec), ec);
    }
    if (bytes > kMaxRecordingBytes) {
      return Status::Error("the session files given add up to " +
                           format_bytes(static_cast<double>(bytes)) + ", more than " +
                           size_limit_words(kMaxRecordingBytes) + ", the limit for one recording");
    }
  }
  std::vector<ReplayBackend::Source> sources;
  for (const std::string& file : files) {
    ReplayBackend::Source source;
    source.origin = file;
    FL_TRY(load_session(file, &source.session));
    sources.push_back(std::move(source));
  }
  return ReplayBackend::create(std::move(sources), out);
}

}  // namespace fl
