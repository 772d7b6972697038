#include "app/measure/export.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "model/file_io.h"
#include "model/session_json.h"
#include "model/sizes.h"
#include "kernels/catalog.h"

#if FUSIONLAB_HAVE_ZLIB
#include <zlib.h>
#endif

namespace fl {
namespace {

using json = nlohmann::json;

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The CUDA driver API version as CUDA writes it: 13000 -> "13.0", 12060 -> "12.6".
std::string driver_text(int version) {
  if (version <= 0) return "";
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

// ---- trace layout ---------------------------------------------------------------------------
// One process per measured run, a point (lesson, size, row length, precision, cache), in the order
// the session first measures it; in it one thread per fusion level. A measurement is a slice on
// its level's thread, its kernels nested inside it (named by the operation, the kernel's full
// name in args); each level's DRAM bytes are a counter track of the process. Every level of a
// run starts at 0, so level 0 and the fused level line up one above the other; repeated
// measurements of one level follow each other with a gap.
// A launch's phase timeline (LaunchPhases) adds one thread per SM to its run's process ("SM 17 ·
// level 2"), a row more for each further block that overlapped on that SM (phase_lanes), with
// the phases as slices from the kernel's start.
// pids start at 1; a level's thread's tid is pid * 100000 + 1 + level, an SM thread's pid * 100000
// + 1000 + its number in the run, so no tid equals its pid (Perfetto would label that thread
// "main thread") and no two processes share a tid.
constexpr int64_t kTidsPerProcess = 100000;
constexpr int64_t kFirstLaneTid = 1000;
int64_t tid_of(int pid, int level) {
  return pid * kTidsPerProcess + 1 + std::clamp(level, 0, static_cast<int>(kFirstLaneTid) - 2);
}

// Gap between consecutive measurements on one thread: a fifth of the measurement, at least
// 10 µs, so it stays visible whether the viewer is zoomed on 3 µs chains or 3 ms ones.
constexpr int64_t kMinGapNs = 10000;
int64_t gap_after(int64_t span_ns) {
  return std::max(kMinGapNs, span_ns / 5);
}

const char* const kRebasedNote =
    "one process per measured run (lesson, size, precision, cache), one thread per fusion level; "
    "every level of a run starts at 0 so the levels line up, and repeated measurements of a level "
    "follow each other with a gap; within a measurement, kernel times and the gaps between "
    "kernels are as recorded (cupti_start_ns holds each kernel's original CUPTI timestamp)";
// The same, short, on every measurement slice (the long form is in the trace's otherData).
const char* const kRebasedArg =
    "moved to start with the other levels of its run; times within it as recorded";

// Trace timestamps are microseconds; we keep nanoseconds as integers and convert once, so the
// double printed is the shortest one for an exact nanosecond count (1234.567, not 1234.5670001).
double us(int64_t ns) {
  return static_cast<double>(ns) / 1000.0;
}
int64_t ns_from_us(double microseconds) {
  return std::llround(microseconds * 1000.0);
}

// One kernel slice of a measurement, in nanoseconds from the measurement's first kernel.
struct Slice {
  int64_t start_ns = 0, dur_ns = 0;
  int launch = 0;
  int record = -1;  // index into Measurement::records; -1 when synthesized
};

// The slices of one measurement: its records rebased to the earliest start, or, without records,
// its launches back to back for their median times (as the timeline view draws them).
std::vector<Slice> lay_out(const Measurement& m) {
  std::vector<Slice> slices;
  if (!m.records.empty()) {
    uint64_t base = m.records.front().start_ns;
    for (const KernelRecord& r : m.records) base = std::min(base, r.start_ns);
    for (size_t i = 0; i < m.records.size(); ++i) {
      const KernelRecord& r = m.records[i];
      Slice s;
      s.start_ns = static_cast<int64_t>(r.start_ns - base);
      s.dur_ns = r.end_ns > r.start_ns ? static_cast<int64_t>(r.end_ns - r.start_ns) : 0;
      s.launch = r.launch;
      s.record = static_cast<int>(i);
      slices.push_back(s);
    }
    return slices;
  }
  int64_t at = 0;
  for (size_t k = 0; k < m.launches.size(); ++k) {
    const int64_t dur = ns_from_us(m.launches[k].time_us.median);
    if (dur <= 0) continue;  // a failed check carries no times: nothing to draw
    Slice s;
    s.start_ns = at;
    s.dur_ns = dur;
    s.launch = static_cast<int>(k);
    slices.push_back(s);
    at += dur;
  }
  return slices;
}

int64_t span_of(const std::vector<Slice>& slices) {
  int64_t end = 0;
  for (const Slice& s : slices) end = std::max(end, s.start_ns + s.dur_ns);
  return end;
}

bool same_point(const Measurement& a, const Measurement& b) {
  return a.lesson == b.lesson && a.size == b.size && a.inner == b.inner &&
         a.precision == b.precision && a.cache == b.cache;
}

// The level-0 measurement that measurement `i`'s speedup is taken against: the nearest one
// before it at the same lesson, size, row length, precision and cache (bench and the engine
// measure level 0 first), else the first one after it; -1 when the session has none.
int speedup_baseline(const Session& session, size_t i) {
  const auto& all = session.measurements;
  for (size_t j = i + 1; j-- > 0;) {
    if (all[j].level == 0 && same_point(all[j], all[i])) return static_cast<int>(j);
  }
  for (size_t j = i + 1; j < all.size(); ++j) {
    if (all[j].level == 0 && same_point(all[j], all[i])) return static_cast<int>(j);
  }
  return -1;
}

// What identifies a measurement, on its slice and on each of its kernels.
void add_point_args(const Measurement& m, size_t index, json* args) {
  (*args)["measurement"] = index;
  (*args)["lesson"] = m.lesson;
  (*args)["size"] = m.size;
  (*args)["inner"] = m.inner;
  (*args)["level"] = m.level;
  (*args)["level_name"] = m.level_name;
  (*args)["precision"] = to_string(m.precision);
  (*args)["cache"] = to_string(m.cache);
}

json measurement_args(const Session& session, size_t index, const std::vector<Slice>& slices,
                      int baseline) {
  const Measurement& m = session.measurements[index];
  json args = json::object();
  add_point_args(m, index, &args);
  if (const Lesson* lesson = find_lesson(m.lesson))
    args["size_unit"] = lesson->info().size_axis.unit;
  args["timing_method"] = m.timing_method;
  args["repetitions"] = m.repetitions;
  args["chain_time_median_us"] = m.chain_time_us.median;
  args["chain_time_p20_us"] = m.chain_time_us.p20;
  args["chain_time_p80_us"] = m.chain_time_us.p80;
  args["chain_copy_gbps"] = m.chain_copy_gbps;
  args["achieved_gbps"] = m.achieved_gbps();
  args["textbook_bytes"] = m.textbook_bytes();
  args["check_passed"] = m.check.passed;
  args["rel_l2_error"] = m.check.rel_l2_error;
  if (m.gpu.sampled) {
    args["gpu_sm_clock_mhz"] = m.gpu.sm_clock_mhz;
    args["gpu_memory_clock_mhz"] = m.gpu.memory_clock_mhz;
    args["gpu_throttle"] = throttle_reason_names(m.gpu.throttle_reasons);
    args["gpu_other_processes"] = m.gpu.other_processes;
    if (m.gpu.disturbed()) args["gpu_disturbed"] = conditions_sentence(m.gpu);
  }
  args["counters_status"] = to_string(m.counters_status);
  if (!m.counters_note.empty()) args["counters_note"] = m.counters_note;
  if (const auto total = m.counters_total()) {
    args["dram_read_bytes"] = total->dram_read_bytes;
    args["dram_write_bytes"] = total->dram_write_bytes;
    args["l2_bytes"] = total->l2_bytes;
  }
  if (baseline >= 0) {
    args["speedup_baseline_measurement"] = baseline;
    args["speedup_vs_level0"] = speedup(session.measurements[baseline], m);
  }
  args["kernels"] = slices.size();
  args["synthesized"] = m.records.empty();
  if (m.records.empty()) {
    args["synthesized_from"] = "median launch times, back to back (no CUPTI records stored)";
  } else {
    uint64_t base = m.records.front().start_ns;
    for (const KernelRecord& r : m.records) base = std::min(base, r.start_ns);
    args["cupti_start_ns"] = std::to_string(base);  // a string: it exceeds 2^53
  }
  args["rebased"] = kRebasedArg;
  return args;
}

json kernel_args(const Measurement& m, size_t index, const Slice& s) {
  json args = json::object();
  add_point_args(m, index, &args);
  args["launch"] = s.launch;
  const LaunchResult* launch = s.launch >= 0 && s.launch < static_cast<int>(m.launches.size())
                                   ? &m.launches[s.launch]
                                   : nullptr;
  if (launch != nullptr) {
    args["op"] = launch->textbook.kernel;
    if (!launch->variant.empty()) args["variant"] = launch->variant;
    args["textbook_bytes_read"] = launch->textbook.bytes_read;
    args["textbook_bytes_written"] = launch->textbook.bytes_written;
    args["textbook_flops"] = launch->textbook.flops;
    args["launch_time_median_us"] = launch->time_us.median;
    if (launch->counters) {
      args["dram_read_bytes"] = launch->counters->dram_read_bytes;
      args["dram_write_bytes"] = launch->counters->dram_write_bytes;
      args["l2_bytes"] = launch->counters->l2_bytes;
    }
  }
  if (s.record >= 0) {
    const KernelRecord& r = m.records[s.record];
    args["kernel"] = r.kernel;
    args["record"] = s.record;
    args["stream"] = r.stream_id;
    args["correlation_id"] = r.correlation_id;
    args["grid"] = r.grid;
    args["block"] = r.block;
    args["registers_per_thread"] = r.registers_per_thread;
    args["static_shared_bytes"] = r.static_shared_bytes;
    args["dynamic_shared_bytes"] = r.dynamic_shared_bytes;
    args["cupti_start_ns"] = std::to_string(r.start_ns);
    args["synthesized"] = false;
  } else {
    args["kernel"] = launch != nullptr ? launch->textbook.kernel : std::string();
    args["synthesized"] = true;
  }
  return args;
}

json metadata(const char* name, int pid, int64_t tid, json args) {
  return {{"name", name}, {"ph", "M"}, {"pid", pid},
          {"tid", tid},   {"ts", 0},   {"args", std::move(args)}};
}

json counter(const std::string& name, int pid, int64_t ts_ns, json args) {
  return {{"name", name}, {"ph", "C"}, {"pid", pid}, {"ts", us(ts_ns)}, {"args", std::move(args)}};
}

// "gelu_scale · 64M elements · fp32 · cold L2": a run's process name.
std::string run_title(const Measurement& m) {
  const Lesson* lesson = find_lesson(m.lesson);
  std::string size = format_size(m.size);
  if (lesson != nullptr && !lesson->info().size_axis.unit.empty())
    size += " " + lesson->info().size_axis.unit;
  if (m.inner > 0) size += " × " + std::to_string(m.inner);
  return m.lesson + " · " + size + " · " + to_string(m.precision) + " · " + to_string(m.cache) +
         " L2";
}

std::string level_title(int level, const std::string& level_name) {
  return "level " + std::to_string(level) + (level_name.empty() ? "" : " · " + level_name);
}

// A number with at most `decimals` decimals, trailing zeros dropped ("2.74", "12.3", "5").
std::string short_number(double value, int decimals) {
  if (!std::isfinite(value)) return "";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  std::string text = buf;
  if (text.find('.') != std::string::npos) {
    while (!text.empty() && text.back() == '0') text.pop_back();
    if (!text.empty() && text.back() == '.') text.pop_back();
  }
  if (text == "-0") text = "0";
  return text;
}

// A measurement's slice: "fused · 4.88 µs · 1.08x vs level 0".
std::string measurement_slice_name(const Measurement& m, double speedup_vs_level0,
                                   bool has_baseline) {
  std::string name = m.level_name.empty() ? "level " + std::to_string(m.level) : m.level_name;
  if (m.chain_time_us.median > 0) name += " · " + short_number(m.chain_time_us.median, 2) + " µs";
  if (!m.check.passed) name += " · WRONG RESULT";
  if (has_baseline && m.level != 0 && speedup_vs_level0 > 0) {
    name += " · " + short_number(speedup_vs_level0, 2) + "x vs level 0";
  }
  return name;
}

std::string gpu_title(const Session& s) {
  std::string title = s.device.name.empty() ? std::string("GPU") : s.device.name;
  title += " (compute capability " + std::to_string(s.device.cc_major) + "." +
           std::to_string(s.device.cc_minor) + ", " + (s.backend.empty() ? "live" : s.backend);
  // When the measurements were made (a session saved from a replay keeps the recording's dates).
  const std::string measured = provenance_text(s.measurements);
  if (!measured.empty()) {
    title += ", measured " + measured;
  } else if (!s.created_utc.empty()) {
    title += ", " + s.created_utc;
  }
  return title + ")";
}

// ---- CSV ------------------------------------------------------------------------------------

// Rounded to what the measurement resolves, trailing zeros dropped: times to the nanosecond
// (3 decimals of µs), bandwidths to 0.01 GB/s, ratios to 0.001, percentages to 0.1 (no
// 2.7840000000000003). A value that is not finite is an empty cell.
std::string fixed(double value, int decimals) {
  return short_number(value, decimals);
}
// Three significant digits, for relative errors (1.23e-07).
std::string significant(double value) {
  if (!std::isfinite(value)) return "";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3g", value);
  return buf;
}

// RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled. A text cell that
// a spreadsheet would run as a formula (a leading =, +, -, @, tab or carriage return) gets a
// leading apostrophe first, so it shows as text. Kernel and level names are ours today, but a
// recording may come from a newer build or a hand-edited file.
std::string csv_text(const std::string& text) {
  std::string cell = text;
  if (!cell.empty() && std::string("=+-@\t\r").find(cell.front()) != std::string::npos)
    cell = "'" + cell;
  if (cell.find_first_of(",\"\r\n") == std::string::npos) return cell;
  std::string out = "\"";
  for (char c : cell) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string optional_count(const std::optional<LaunchCounters>& c, int64_t LaunchCounters::*field) {
  return c ? std::to_string((*c).*field) : std::string();
}

std::string csv_row(const Session& session, size_t index, size_t k) {
  const Measurement& m = session.measurements[index];
  const LaunchResult& l = m.launches[k];
  const double gbps = l.time_us.median > 0 ? l.textbook.bytes() / (l.time_us.median * 1e3) : 0;
  const Lesson* lesson = find_lesson(m.lesson);
  const int baseline = speedup_baseline(session, index);
  const double vs_level0 = baseline >= 0 ? speedup(session.measurements[baseline], m) : 0;
  const std::vector<std::string> fields = {
      csv_text(m.lesson),
      std::to_string(m.size),
      lesson != nullptr ? lesson->info().size_axis.unit : std::string(),
      std::to_string(m.inner),
      to_string(m.precision),
      to_string(m.cache),
      std::to_string(m.level),
      csv_text(m.level_name),
      std::to_string(k),
      csv_text(l.textbook.kernel),
      csv_text(l.variant),
      fixed(l.time_us.median, 3),
      fixed(l.time_us.p20, 3),
      fixed(l.time_us.p80, 3),
      std::to_string(l.textbook.bytes_read),
      std::to_string(l.textbook.bytes_written),
      fixed(l.textbook.flops, 0),
      fixed(gbps, 2),
      fixed(l.copy_gbps, 2),
      fixed(m.chain_time_us.median, 3),
      fixed(m.chain_time_us.p20, 3),
      fixed(m.chain_time_us.p80, 3),
      std::to_string(m.repetitions),
      significant(m.check.rel_l2_error),
      m.check.passed ? "yes" : "no",
      csv_text(m.timing_method),
      to_string(m.counters_status),
      optional_count(l.counters, &LaunchCounters::dram_read_bytes),
      optional_count(l.counters, &LaunchCounters::dram_write_bytes),
      optional_count(l.counters, &LaunchCounters::l2_bytes),
      l.event_time_us.count > 0 ? fixed(l.event_time_us.median, 3) : std::string(),
      // Then the chain's speedup over level 0 at the same point (empty without a
      // level 0 or when a check failed), this launch's % of copy bandwidth, and where and when.
      baseline >= 0 && vs_level0 > 0 ? fixed(vs_level0, 3) : std::string(),
      l.copy_gbps > 0 && gbps > 0 ? fixed(100.0 * gbps / l.copy_gbps, 1) : std::string(),
      // The measurement's own GPU and driver (a session saved from a replay keeps the
      // recording's), then when and how it was measured (docs/EXPORT.md).
      csv_text(m.provenance.gpu.empty() ? session.device.name : m.provenance.gpu),
      driver_text(m.provenance.driver_version > 0 ? m.provenance.driver_version
                                                  : session.device.driver_version),
      csv_text(session.created_utc),
      // The GPU's conditions around the repetitions (model/gpu_conditions.h); empty: not known.
      m.gpu.sampled ? std::to_string(m.gpu.sm_clock_mhz) : std::string(),
      m.gpu.sampled ? std::to_string(m.gpu.memory_clock_mhz) : std::string(),
      m.gpu.sampled ? csv_text(throttle_reason_names(m.gpu.throttle_reasons)) : std::string(),
      m.gpu.sampled ? std::to_string(m.gpu.other_processes) : std::string(),
      conditions_mark(m.gpu),
      csv_text(m.provenance.measured_utc),
      csv_text(m.provenance.source),
  };
  std::string row;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) row += ',';
    row += fields[i];
  }
  return row;
}

}  // namespace

// ---- trace ----------------------------------------------------------------------------------

std::string trace_op_name(const std::string& textbook_kernel) {
  static const std::string kFused = "_fused";
  if (textbook_kernel.size() > kFused.size() && ends_with(textbook_kernel, kFused)) {
    std::string ops = textbook_kernel.substr(0, textbook_kernel.size() - kFused.size());
    std::string out = "fused ";
    for (char c : ops) {
      if (c == '_')
        out += "·";
      else
        out += c;
    }
    return out;
  }
  return textbook_kernel;
}

namespace {

// A run (a point: lesson, size, precision, cache) of the trace: its process, and where each
// level's next slice starts.
struct TraceRun {
  int pid = 0;
  std::map<int, int64_t> cursor;  // level -> next start, ns
  std::map<int, std::string> level_names;
  // (level, SM, slot) -> the SM thread's tid: phase lanes of the run's phase timelines.
  std::map<std::tuple<int, int, int>, int64_t> lanes;
  int64_t lane_tid(int level, const PhaseLane& lane) {
    const auto key = std::make_tuple(level, static_cast<int>(lane.sm), lane.slot);
    const auto found = lanes.find(key);
    if (found != lanes.end()) return found->second;
    const int64_t tid = pid * kTidsPerProcess + kFirstLaneTid + static_cast<int64_t>(lanes.size());
    lanes.emplace(key, tid);
    return tid;
  }
};
using TraceRuns = std::vector<std::pair<const Measurement*, TraceRun>>;
// Events with their time in integer nanoseconds beside them, so the final ordering compares
// exact numbers.
using TimedEvents = std::vector<std::pair<int64_t, json>>;

// The run of `m`, in order of first measurement.
TraceRun& run_of(const Measurement& m, TraceRuns* runs) {
  for (auto& [first, run] : *runs) {
    if (same_point(*first, m)) return run;
  }
  TraceRun run;
  run.pid = static_cast<int>(runs->size()) + 1;
  runs->emplace_back(&m, std::move(run));
  return runs->back().second;
}

// The phase slices of launch `s.launch` of measurement i, from its kernel slice's start, each on
// its SM's thread.
void add_phase_events(const Measurement& m, size_t i, const Slice& s, int64_t start, TraceRun* run,
                      TimedEvents* timed) {
  const LaunchPhases& phases = *m.launches[s.launch].phases;
  const std::vector<PhaseLane> lanes = phase_lanes(phases);
  for (size_t k = 0; k < phases.records.size(); ++k) {
    const PhaseRecord& r = phases.records[k];
    json args = json::object();
    add_point_args(m, i, &args);
    args["launch"] = s.launch;
    args["phase_record"] = k;
    args["phase"] = phases.names[r.phase];
    args["block"] = r.block;
    args["sm"] = r.sm;
    args["arg"] = r.arg;
    args["wait_us"] = us(r.wait_ns);
    args["from_launch_start_us"] = us(static_cast<int64_t>(r.start_ns));
    const int64_t ts = start + static_cast<int64_t>(r.start_ns);
    timed->emplace_back(ts, json{{"name", phases.names[r.phase]},
                                 {"cat", "phase"},
                                 {"ph", "X"},
                                 {"ts", us(ts)},
                                 {"dur", us(static_cast<int64_t>(r.end_ns - r.start_ns))},
                                 {"pid", run->pid},
                                 {"tid", run->lane_tid(m.level, lanes[k])},
                                 {"args", std::move(args)}});
  }
}

// Measurement i's slice on its level's track, its kernels inside it, and their DRAM counters;
// the track's cursor moves past it.
void add_measurement_events(const Session& session, size_t i, TraceRuns* runs, TimedEvents* timed) {
  const Measurement& m = session.measurements[i];
  TraceRun& run = run_of(m, runs);
  const int pid = run.pid;
  const int64_t tid = tid_of(pid, m.level);
  run.level_names.emplace(m.level, m.level_name);
  int64_t& cursor = run.cursor[m.level];
  const std::vector<Slice> slices = lay_out(m);
  const int64_t span = span_of(slices);
  const int baseline = speedup_baseline(session, i);
  const double vs_level0 = baseline >= 0 ? speedup(session.measurements[baseline], m) : 0;

  json args = measurement_args(session, i, slices, baseline);
  args["gap_after_us"] = us(gap_after(span));
  timed->emplace_back(cursor, json{{"name", measurement_slice_name(m, vs_level0, baseline >= 0)},
                                   {"cat", "measurement"},
                                   {"ph", "X"},
                                   {"ts", us(cursor)},
                                   {"dur", us(span)},
                                   {"pid", pid},
                                   {"tid", tid},
                                   {"args", std::move(args)}});
  const std::string dram_track = "DRAM bytes · level " + std::to_string(m.level);
  std::vector<bool> phases_drawn(m.launches.size(), false);
  for (const Slice& s : slices) {
    const int64_t start = cursor + s.start_ns;
    // A launch's phases start with its first kernel (one launch may run several kernels).
    if (s.launch >= 0 && s.launch < static_cast<int>(m.launches.size()) &&
        m.launches[s.launch].phases && !phases_drawn[s.launch]) {
      phases_drawn[s.launch] = true;
      add_phase_events(m, i, s, start, &run, timed);
    }
    const std::string op = m.launches[s.launch].textbook.kernel;
    timed->emplace_back(start, json{{"name", trace_op_name(op)},
                                    {"cat", s.record >= 0 ? "kernel" : "kernel,synthesized"},
                                    {"ph", "X"},
                                    {"ts", us(start)},
                                    {"dur", us(s.dur_ns)},
                                    {"pid", pid},
                                    {"tid", tid},
                                    {"args", kernel_args(m, i, s)}});
    // DRAM bytes of the kernel running now: its counters from its start, 0 from its end (the
    // end is emitted before a next kernel starting at the same instant, and the sort is stable).
    const std::optional<LaunchCounters>& c = m.launches[s.launch].counters;
    if (c) {
      timed->emplace_back(start,
                          counter(dram_track, pid, start,
                                  {{"read", c->dram_read_bytes}, {"write", c->dram_write_bytes}}));
      timed->emplace_back(start + s.dur_ns,
                          counter(dram_track, pid, start + s.dur_ns, {{"read", 0}, {"write", 0}}));
    }
  }
  cursor += span + gap_after(span);
}

// The names and order of the processes (runs) and threads (levels).
std::vector<json> trace_metadata(const Session& session, const TraceRuns& runs) {
  std::vector<json> meta;
  const std::string gpu = session.device.name.empty() ? std::string("GPU") : session.device.name;
  for (const auto& [first, run] : runs) {
    meta.push_back(metadata("process_name", run.pid, 0, {{"name", run_title(*first)}}));
    meta.push_back(metadata("process_labels", run.pid, 0, {{"labels", gpu}}));
    meta.push_back(metadata("process_sort_index", run.pid, 0, {{"sort_index", run.pid}}));
    for (const auto& [level, name] : run.level_names) {
      const int64_t tid = tid_of(run.pid, level);
      meta.push_back(metadata("thread_name", run.pid, tid, {{"name", level_title(level, name)}}));
      meta.push_back(metadata("thread_sort_index", run.pid, tid, {{"sort_index", level}}));
    }
    for (const auto& [key, tid] : run.lanes) {
      const auto& [level, sm, slot] = key;
      std::string name = "SM " + std::to_string(sm) + " · level " + std::to_string(level);
      if (slot > 0) name += " · block row " + std::to_string(slot + 1);
      meta.push_back(metadata("thread_name", run.pid, tid, {{"name", name}}));
      meta.push_back(metadata(
          "thread_sort_index", run.pid, tid,
          {{"sort_index", kFirstLaneTid + level * 100000 + sm * 16 + std::min(slot, 15)}}));
    }
  }
  return meta;
}

}  // namespace

// The peers of the session's lessons, for the trace's otherData.
json peers_other_data(const Session& session, const PeerFile& peers) {
  json series = json::array();
  for (const PeerSeries& s : peers.series) {
    const bool in_session = std::any_of(
        session.measurements.begin(), session.measurements.end(),
        [&](const Measurement& m) { return m.lesson == s.lesson && m.precision == s.precision; });
    if (!in_session) continue;
    json points = json::array();
    for (const PeerPoint& p : s.points) {
      points.push_back({{"size", p.size}, {"median_us", p.median_us}, {"passed", p.passed}});
    }
    series.push_back({{"lesson", s.lesson},
                      {"precision", to_string(s.precision)},
                      {"peer", s.label},
                      {"points", std::move(points)}});
  }
  return {{"recorded_on", peers.recorded_on()},
          {"torch", peers.torch_version},
          {"cache", "cold"},
          {"series", std::move(series)}};
}

std::string chrome_trace_json(const Session& session, const PeerFile* peers) {
  TraceRuns runs;
  TimedEvents timed;
  for (size_t i = 0; i < session.measurements.size(); ++i) {
    add_measurement_events(session, i, &runs, &timed);
  }
  // Metadata first, then the events in time order.
  std::vector<json> meta = trace_metadata(session, runs);
  std::stable_sort(timed.begin(), timed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  json events = json::array();
  for (json& e : meta) events.push_back(std::move(e));
  for (auto& [ts, e] : timed) events.push_back(std::move(e));

  json other = {{"generator", "Fusion Lab"},
                {"app_version", session.app_version},
                {"session_created_utc", session.created_utc},
                {"measured", provenance_text(session.measurements)},
                {"session_backend", session.backend},
                {"gpu", session.device.name},
                {"gpu_title", gpu_title(session)},
                {"driver", driver_text(session.device.driver_version)},
                {"runs", runs.size()},
                {"measurements", session.measurements.size()},
                {"timeline", kRebasedNote}};
  if (peers != nullptr) other["pytorch_peers"] = peers_other_data(session, *peers);
  const json trace = {{"traceEvents", std::move(events)},
                      {"displayTimeUnit", "ns"},
                      {"otherData", std::move(other)}};
  // Compact, and never throwing on a kernel name that is not valid UTF-8.
  return trace.dump(-1, ' ', false, json::error_handler_t::replace);
}

Status trace_bytes(const Session& session, bool gzip, std::string* out, const PeerFile* peers) {
  std::string text = chrome_trace_json(session, peers);
  if (!gzip) {
    *out = std::move(text);
    return Status::Ok();
  }
  return gzip_compress(text, out);
}

Status export_trace(const Session& session, const std::string& path, TraceOptions options) {
  std::string bytes;
  FL_TRY(trace_bytes(session, options.gzip || ends_with(path, ".gz"), &bytes, options.peers)
             .with_context("cannot write " + shorten_for_message(path, kShownPathChars)));
  return write_file_atomically(path, bytes, options.write);
}

// ---- gzip -----------------------------------------------------------------------------------

#if FUSIONLAB_HAVE_ZLIB
bool trace_gzip_available() {
  return true;
}

Status gzip_compress(const std::string& data, std::string* out) {
  z_stream z{};
  // 15 + 16: a gzip header and trailer rather than a raw zlib stream, so `gunzip` and Perfetto
  // open it.
  if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return Status::Error("zlib could not start compressing");
  }
  std::string result(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(result.data());
  z.avail_out = static_cast<uInt>(result.size());
  const int rc = deflate(&z, Z_FINISH);
  const uLong produced = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return Status::Error("zlib could not compress the trace");
  result.resize(produced);
  *out = std::move(result);
  return Status::Ok();
}

Status gzip_decompress(const std::string& data, std::string* out) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) return Status::Error("zlib could not start decompressing");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string result;
  char buffer[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof(buffer);
    rc = inflate(&z, Z_NO_FLUSH);
    result.append(buffer, sizeof(buffer) - z.avail_out);
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;  // input ended before the stream did
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) return Status::Error("not a complete gzip stream");
  *out = std::move(result);
  return Status::Ok();
}
#else
bool trace_gzip_available() {
  return false;
}

const char* const kNoZlib =
    "this build has no zlib, so it cannot write .gz files (install zlib1g-dev and rebuild, or "
    "export plain .json)";
Status gzip_compress(const std::string&, std::string*) {
  return Status::Error(kNoZlib);
}
Status gzip_decompress(const std::string&, std::string*) {
  return Status::Error(kNoZlib);
}
#endif

// ---- CSV ------------------------------------------------------------------------------------

std::string measurements_csv_header() {
  return "lesson,size,size_unit,inner,precision,cache,level,level_name,launch,kernel,variant,"
         "launch_time_median_us,launch_time_p20_us,launch_time_p80_us,"
         "textbook_bytes_read,textbook_bytes_written,textbook_flops,launch_gbps,copy_gbps,"
         "chain_time_median_us,chain_time_p20_us,chain_time_p80_us,repetitions,rel_l2_error,"
         "correct,timing_method,counters_status,dram_read_bytes,dram_write_bytes,l2_bytes,"
         "event_time_median_us,speedup_vs_level0,launch_pct_of_copy,gpu,driver_cuda,"
         "session_created_utc,gpu_sm_clock_mhz,gpu_memory_clock_mhz,gpu_throttle,"
         "gpu_other_processes,gpu_disturbed,measured_utc,source";
}

// One PyTorch peer at one size, in the measurement columns (launch columns and counters empty).
static std::string peer_csv_row(const Session& session, const PeerFile& peers, const PeerSeries& s,
                                const PeerPoint& p) {
  const Lesson* lesson = find_lesson(s.lesson);
  double level0 = 0;  // ours at this point, when the session has it
  for (const Measurement& m : session.measurements) {
    if (m.lesson == s.lesson && m.size == p.size && m.precision == s.precision &&
        m.cache == CacheMode::cold && m.level == 0 && m.check.passed) {
      level0 = m.chain_time_us.median;
    }
  }
  const std::vector<std::string> fields = {
      csv_text(s.lesson),
      std::to_string(p.size),
      lesson != nullptr ? lesson->info().size_axis.unit : std::string(),
      std::to_string(p.inner),
      to_string(s.precision),
      "cold",
      "peer",
      csv_text(s.label),
      "",
      "",
      "",  // variant
      "",
      "",
      "",
      "",
      "",
      "",
      "",
      "",  // launch_gbps, copy_gbps: a peer has no launches of ours
      fixed(p.median_us, 3),
      fixed(p.p20_us, 3),
      fixed(p.p80_us, 3),
      std::to_string(p.count),
      significant(p.rel_l2_error),
      p.passed ? "yes" : "no",
      csv_text(peers.timing),
      "not_measured",
      "",
      "",
      "",
      "",
      level0 > 0 && p.median_us > 0 ? fixed(level0 / p.median_us, 3) : std::string(),
      "",
      csv_text(peers.device_name),
      csv_text(peers.driver),
      csv_text(peers.created_utc),
      "",
      "",
      "",
      "",
      "",
      csv_text(peers.created_utc),
      "peer file"};
  std::string row;
  for (size_t i = 0; i < fields.size(); ++i) row += (i ? "," : "") + fields[i];
  return row;
}

std::string measurements_csv(const Session& session, const PeerFile* peers) {
  std::string csv = measurements_csv_header() + "\n";
  for (size_t i = 0; i < session.measurements.size(); ++i) {
    for (size_t k = 0; k < session.measurements[i].launches.size(); ++k)
      csv += csv_row(session, i, k) + "\n";
  }
  if (peers == nullptr) return csv;
  for (const PeerSeries& s : peers->series) {
    const bool in_session = std::any_of(
        session.measurements.begin(), session.measurements.end(),
        [&](const Measurement& m) { return m.lesson == s.lesson && m.precision == s.precision; });
    if (!in_session) continue;
    for (const PeerPoint& p : s.points) csv += peer_csv_row(session, *peers, s, p) + "\n";
  }
  return csv;
}

Status export_csv(const Session& session, const std::string& path, const WriteOptions& options,
                  const PeerFile* peers) {
  return write_file_atomically(path, measurements_csv(session, peers), options);
}

}  // namespace fl
