// `fusionlab bench`: measures lessons headless on the live GPU and prints the tutorial's table:
// per size, the time of every fusion level, the speedup of the top level over level 0, the
// byte-ratio limit of that speedup, achieved GB/s and % of copy bandwidth, and the error; then
// per launch the time, GB/s and the DRAM / L2 bytes the GPU's counters saw next to the textbook
// bytes. Both phases run for every size: timing (CUPTI activity records), then counters (CUPTI
// range profiler) unless --no-counters.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "app/cli.h"
#include "app/measure/choices.h"
#include "app/measure/cupti_tracer.h"
#include "app/measure/export.h"
#include "model/file_io.h"
#include "app/measure/live_backend.h"
#include "model/peers.h"
#include "model/portable.h"
#include "model/session_json.h"
#include "model/sizes.h"
#include "kernels/blas.h"
#include "kernels/catalog.h"

namespace fl {
namespace {

// A mistake on the command line (exit 2), found before any GPU or file work.
int usage(const std::string& message) {
  std::fprintf(stderr, "fusionlab bench: %s\n", message.c_str());
  return kExitUsage;
}
// A failure while running (exit 1): no GPU, a measurement or a file that could not be written.
int fail(const std::string& message) {
  std::fprintf(stderr, "fusionlab bench: %s\n", message.c_str());
  return kExitFailure;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

double percent(double part, double whole) {
  return whole > 0 ? 100.0 * part / whole : 0;
}
// Signed difference of `measured` from `reference`, in percent.
double deviation(double measured, double reference) {
  return reference > 0 ? 100.0 * (measured - reference) / reference : 0;
}
double megabytes(double bytes) {
  return bytes * 1e-6;
}

// ---- the options, checked before any GPU or file work --------------------------------------

// What `bench` runs, from its options: every name parsed and every value checked.
struct BenchPlan {
  std::vector<const Lesson*> lessons;
  std::vector<int64_t> sizes;
  std::vector<int> levels;  // empty: every level of each lesson
  Precision precision = Precision::fp32;
  CacheMode cache = CacheMode::cold;
  int64_t inner = 0;  // 0: each lesson's default row length
  Timer timer = Timer::cupti;
  CounterReplay replay = CounterReplay::user;
  std::map<std::string, std::string> variants;  // --variant: launch -> forced variant
  int choose_as_cc = 0;                         // --choose-as: compute capability x 10; 0: none
  bool phases = false;                          // --phases
};

// --variant LAUNCH=VARIANT: a launch of a chosen lesson that has that variant. Whether it can
// run on this GPU is judged when it runs (one line, the measurement fails).
Status parse_variants(const std::vector<std::string>& items, const std::vector<const Lesson*>& ls,
                      std::map<std::string, std::string>* out) {
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      return Status::Error("--variant takes LAUNCH=VARIANT, e.g. ffn_fused=ffn_split; got '" +
                           shorten_for_message(item) + "'");
    }
    const std::string launch = item.substr(0, eq), variant = item.substr(eq + 1);
    bool found = false;
    std::string known;
    for (const Lesson* lesson : ls) {
      for (const FusionLevel& level : lesson->info().levels) {
        for (const VariantInfo& v : level.variants) {
          if (v.launch != launch) continue;
          found = found || v.name == variant;
          known += (known.empty() ? "" : ", ") + v.name;
        }
      }
    }
    if (!found) {
      return Status::Error("--variant: " +
                           (known.empty()
                                ? "no launch '" + shorten_for_message(launch) +
                                      "' of the chosen lessons has kernel variants"
                                : launch + " has no variant '" + shorten_for_message(variant) +
                                      "' (it has " + known + ")"));
    }
    (*out)[launch] = variant;
  }
  return Status::Ok();
}

Status parse_lessons(const std::string& list, std::vector<const Lesson*>* out) {
  std::vector<std::string> ids = split(list);
  if (list == "all") {
    ids.clear();
    for (const Lesson* lesson : lessons()) ids.push_back(lesson->info().id);
  }
  for (const std::string& id : ids) {
    const Lesson* lesson = find_lesson(id);
    if (lesson == nullptr) {
      return Status::Error("unknown lesson '" + shorten_for_message(id) +
                           "' (see `fusionlab lessons`)");
    }
    out->push_back(lesson);
  }
  if (out->empty()) return Status::Error("no lesson given");
  return Status::Ok();
}

// Every chosen lesson has the levels and takes the sizes asked for.
Status check_levels_and_sizes(const BenchPlan& plan) {
  for (const Lesson* lesson : plan.lessons) {
    const LessonInfo& info = lesson->info();
    for (int level : plan.levels) {
      if (level >= lesson->level_count()) {
        return Status::Error(info.id + " has levels 0.." +
                             std::to_string(lesson->level_count() - 1) + ", got " +
                             std::to_string(level));
      }
    }
    for (int64_t n : plan.sizes) FL_TRY(check_lesson_size(info, n));
  }
  return Status::Ok();
}

// --reps and --seconds within what a measurement can use: the repetitions the timing phase
// computes from --seconds stay well inside an int (live_backend.cu), and NaN is refused.
constexpr int kMaxRepetitions = 100000;
constexpr double kMaxSecondsPerLevel = 60;

Status check_repetitions(const BenchOptions& o) {
  if (o.min_repetitions < 1 || o.min_repetitions > kMaxRepetitions) {
    return Status::Error("--reps is 1.." + std::to_string(kMaxRepetitions) + " repetitions, got " +
                         std::to_string(o.min_repetitions));
  }
  if (!(o.seconds_per_level >= 0 && o.seconds_per_level <= kMaxSecondsPerLevel)) {
    char got[32];
    std::snprintf(got, sizeof(got), "%g", o.seconds_per_level);
    return Status::Error("--seconds is 0.." + std::to_string(int(kMaxSecondsPerLevel)) +
                         " seconds per level, got " + got);
  }
  return Status::Ok();
}

// A usage error (exit 2) names the first bad option, in the order the options were checked
// before (lessons, sizes, precision, cache, levels, levels against the lessons, timer, replay,
// repetitions and seconds).
Status plan_bench(const BenchOptions& o, BenchPlan* plan) {
  FL_TRY(parse_lessons(o.lessons, &plan->lessons));
  FL_TRY(parse_size_list(o.sizes, &plan->sizes));
  if (!parse_precision(o.precision, &plan->precision)) {
    return Status::Error(not_a_choice("--precision", kPrecisionChoices, &o.precision));
  }
  if (!parse_cache_mode(o.cache, &plan->cache)) {
    return Status::Error(not_a_choice("--cache", kCacheChoices, &o.cache));
  }
  FL_TRY(parse_level_list(o.levels, &plan->levels));
  plan->phases = o.phases;
  if (o.inner < 0) return Status::Error("--inner is a row length >= 1, or 0 for the default");
  plan->inner = o.inner;
  FL_TRY(check_levels_and_sizes(*plan));
  FL_TRY(parse_variants(o.variants, plan->lessons, &plan->variants));
  if (!o.choose_as.empty()) FL_TRY(parse_choose_as(o.choose_as, &plan->choose_as_cc));
  if (!parse_timer(o.timer, &plan->timer)) {
    return Status::Error(not_a_choice("--timer", kTimerChoices, &o.timer));
  }
  if (!parse_counter_replay(o.counter_replay, &plan->replay)) {
    return Status::Error(not_a_choice("--counter-replay", "user or kernel", &o.counter_replay));
  }
  return check_repetitions(o);
}

// ---- the outputs ---------------------------------------------------------------------------

// Where the session and the CSV go. "-" is standard output (one of them at most); the table then
// goes to standard error, and data_fd keeps the real standard output for the data.
struct BenchOutputs {
  bool session_to_stdout = false, csv_to_stdout = false;
  int data_fd = -1;
};

// Checked before minutes of measuring: a file must be a regular one in a writable folder. An
// existing file is replaced, as before: bench re-measures into the same names. Returns the exit
// status of a failure, or kExitOk.
int prepare_outputs(const BenchOptions& o, BenchOutputs* out) {
  out->session_to_stdout = is_stdout_name(o.out_session);
  out->csv_to_stdout = is_stdout_name(o.out_csv);
  if (out->session_to_stdout && out->csv_to_stdout) {
    return usage("--out - and --csv - cannot both go to standard output");
  }
  for (const std::string* path : {&o.out_session, &o.out_csv}) {
    if (path->empty() || is_stdout_name(*path)) continue;
    if (Status st = check_output_file(*path, /*replace_existing=*/true); !st.ok())
      return fail(st.message());
  }
  if (out->session_to_stdout || out->csv_to_stdout) {
    std::fflush(stdout);
    out->data_fd = ::dup(STDOUT_FILENO);
    if (out->data_fd < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      return fail(std::string("cannot set up standard output: ") + std::strerror(errno));
    }
  }
  return kExitOk;
}

// Data for "-" goes to the real standard output (saved in data_fd; fd 1 is stderr by now).
Status write_to_data_fd(const BenchOutputs& out, const std::string& bytes) {
  std::fflush(stdout);
  if (::dup2(out.data_fd, STDOUT_FILENO) < 0) {
    return Status::Error(std::string("cannot write to standard output: ") + std::strerror(errno));
  }
  const Status st = write_to_stdout(bytes);
  ::dup2(STDERR_FILENO, STDOUT_FILENO);
  return st;
}

// One output: `text` to the real standard output when `to_stdout`, else `save` to `path`; then a
// line on stderr saying where it went.
int write_output(const BenchOutputs& out, bool to_stdout, const std::string& path, const char* what,
                 const std::function<std::string()>& text, const std::function<Status()>& save) {
  const Status st = to_stdout ? write_to_data_fd(out, text()) : save();
  if (!st.ok()) return fail(st.message());
  std::fprintf(stderr, "wrote %s\n",
               to_stdout ? (std::string("the ") + what + " to standard output").c_str()
                         : shorten_for_message(path, kShownPathChars).c_str());
  return kExitOk;
}

int write_outputs(const Session& session, const BenchOptions& o, const BenchOutputs& out) {
  if (!o.out_session.empty()) {
    const int code = write_output(
        out, out.session_to_stdout, o.out_session, "session",
        [&] { return session_to_json(session); },
        [&] { return save_session(session, o.out_session); });
    if (code != kExitOk) return code;
  }
  if (!o.out_csv.empty()) {
    return write_output(
        out, out.csv_to_stdout, o.out_csv, "CSV", [&] { return measurements_csv(session); },
        [&] { return export_csv(session, o.out_csv); });
  }
  return kExitOk;
}

// ---- the backend ---------------------------------------------------------------------------

LiveOptions live_options(const BenchOptions& o, const BenchPlan& plan) {
  LiveOptions live;
  live.min_repetitions = std::max(1, o.min_repetitions);
  live.target_seconds = o.seconds_per_level;
  live.timer = plan.timer;
  live.counters = !o.no_counters;
  live.compare_timers = o.compare_timers;
  live.counter_replay = plan.replay;
  live.keep_profiler_enabled = !o.fresh_profiler;
  live.trace_all_runtime_apis = o.trace_all_runtime_apis;
  live.watch_gpu = !o.no_gpu_watch;
  return live;
}

// The GPU, the roof and how the run times and counts: the table's preamble.
void print_setup(LiveBackend& backend, const BenchOptions& o, const BenchPlan& plan) {
  const DeviceFacts& d = backend.device();
  std::printf(
      "GPU: %s, compute capability %d.%d, %d SMs, %s L2, %s memory, driver %d.%d, "
      "CUDA runtime %d.%d\n",
      d.name.c_str(), d.cc_major, d.cc_minor, d.sm_count, format_bytes(d.l2_bytes).c_str(),
      format_bytes(d.memory_bytes).c_str(), d.driver_version / 1000, (d.driver_version % 1000) / 10,
      d.runtime_version / 1000, (d.runtime_version % 1000) / 10);
  std::printf("roof: copy bandwidth over 1 GiB, cold L2: %.0f GB/s (bytes read + written)\n",
              d.roof_gbps);
  if (std::string(backend.timing_method()) == "cupti_activity") {
    std::printf(
        "timing: CUPTI activity records; a launch is its kernel's end - start, a chain the "
        "first launch's start to the last one's end\n");
  } else {
    std::printf("timing: CUDA events around every launch%s%s\n",
                backend.timing_note().empty() ? "" : ": ", backend.timing_note().c_str());
  }
  if (backend.gpu_watch() != nullptr) {
    std::printf(
        "gpu watch: NVML clocks, throttle reasons and other processes sampled around each "
        "level's repetitions; a level marked shared or throttled may be slower than this GPU "
        "gives its kernels alone\n");
  } else {
    std::printf("gpu watch: off (%s)\n", backend.gpu_watch_note().c_str());
  }
  if (backend.counters_available()) {
    std::printf(
        "counters: CUPTI range profiler on %s, %d pass%s, one auto range per kernel, %s "
        "replay, run after the timing in the same cache mode\n",
        backend.counter_chip().c_str(), backend.counter_passes(),
        backend.counter_passes() == 1 ? "" : "es", to_string(plan.replay));
  } else if (o.no_counters) {
    std::printf("counters: off (--no-counters)\n");
  } else {
    std::printf("counters: %s\n", backend.counters_note().c_str());
  }
}

// ---- one lesson: measuring -----------------------------------------------------------------

// What one lesson's run needs to know besides the plan.
struct LessonRun {
  const Lesson* lesson = nullptr;
  std::vector<int> levels;  // the levels measured, never empty
  bool cupti_timing = false;
  bool counters = false;
};

// One size of one lesson: every level's measurement (timing, then counters).
struct SizeResult {
  int64_t size = 0;
  Status status;
  std::vector<Measurement> measurements;
  double counter_ms = -1;  // wall time of the counter phase; -1 when it did not run
};

SizeResult measure_size(LiveBackend& backend, const LessonRun& run, const BenchPlan& plan,
                        int64_t n) {
  SizeResult result;
  result.size = n;
  MeasureRequest request;
  request.lesson = run.lesson->info().id;
  request.size = n;
  request.levels = run.levels;
  request.precision = plan.precision;
  request.cache = plan.cache;
  request.variants = plan.variants;
  request.choose_as_cc = plan.choose_as_cc;
  request.phases = plan.phases;
  request.inner = plan.inner;
  result.status = backend.measure(request, nullptr, &result.measurements);
  if (result.status.ok() && run.counters) {
    const auto t0 = std::chrono::steady_clock::now();
    result.status = backend.measure_counters(request, nullptr, &result.measurements);
    result.counter_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  return result;
}

// ---- one lesson: printing ------------------------------------------------------------------

void print_lesson_header(const LessonRun& run, const BenchPlan& plan, int min_repetitions) {
  const LessonInfo& info = run.lesson->info();
  std::printf("\n%s: %s   %s, %s L2, median of >= %d repetitions, timed with %s\n", info.id.c_str(),
              info.formula.c_str(), to_string(plan.precision), to_string(plan.cache),
              min_repetitions, run.cupti_timing ? "CUPTI activity records" : "CUDA events");
  if (plan.choose_as_cc > 0) {
    std::printf("kernels chosen as on compute capability %s (the portable kernels), run here\n",
                cc_words(plan.choose_as_cc).c_str());
  }
  if (info.size_axis.inner_default > 0) {
    std::printf("size = %s, each row %s = %lld\n", info.size_axis.unit.c_str(),
                info.size_axis.inner_name.c_str(),
                static_cast<long long>(plan.inner > 0 ? plan.inner : info.size_axis.inner_default));
  }
  std::printf("%10s %12s", "size", "tensor");
  for (int l : run.levels) std::printf(" %11s", (info.levels[l].name + " us").c_str());
  std::printf(" %8s %7s %10s %7s %11s\n", "speedup", "limit", "top GB/s", "% copy", "max rel err");
}

// One size's row: every level's time, the top level's speedup over the first, its byte-ratio
// limit, GB/s and % of copy, and the worst error. Returns whether every level was correct.
bool print_size_row(const LessonRun& run, const BenchPlan& plan, const SizeResult& r) {
  const Shape shape = run.lesson->resolve(Shape(r.size, plan.inner));
  const double elements = double(shape.size) * (shape.inner > 0 ? shape.inner : 1);
  std::printf("%10s %12s", format_size(r.size).c_str(),
              format_bytes(elements * bytes_per_element(plan.precision)).c_str());
  double worst_error = 0;
  bool all_correct = true;
  std::string disturbed;  // the worst mark of any level at this size
  for (const Measurement& m : r.measurements) {
    if (conditions_mark(m.gpu).size() > disturbed.size()) disturbed = conditions_mark(m.gpu);
    if (m.check.passed)
      std::printf(" %11.2f", m.chain_time_us.median);
    else
      std::printf(" %11s", "WRONG");
    worst_error = std::max(worst_error, m.check.rel_l2_error);
    all_correct = all_correct && m.check.passed;
  }
  const Measurement& first = r.measurements.front();
  const Measurement& top = r.measurements.back();
  const double limit =
      top.textbook_bytes() > 0 ? double(first.textbook_bytes()) / double(top.textbook_bytes()) : 0;
  std::printf(" %7.2fx %6.2fx %10.0f %6.1f%% %11.2e%s%s%s\n", speedup(first, top), limit,
              top.achieved_gbps(), percent(top.achieved_gbps(), top.chain_copy_gbps), worst_error,
              all_correct ? "" : "  FAILED CHECK", disturbed.empty() ? "" : "  GPU ",
              disturbed.c_str());
  return all_correct;
}

void print_launch(const Measurement& m, const LaunchResult& l) {
  const double gbps = l.time_us.median > 0 ? l.textbook.bytes() / (l.time_us.median * 1e3) : 0;
  std::printf("  %10s  level %d %-18s %10.2f us %8.0f GB/s %6.1f%%  (p20-p80 %.2f-%.2f us)",
              format_size(m.size).c_str(), m.level, l.textbook.kernel.c_str(), l.time_us.median,
              gbps, percent(gbps, l.copy_gbps), l.time_us.p20, l.time_us.p80);
  if (!l.variant.empty()) std::printf("  ran %s", l.variant.c_str());
  if (l.event_time_us.count > 0) {
    std::printf("  events %.2f us (CUPTI %+.1f%%)", l.event_time_us.median,
                deviation(l.time_us.median, l.event_time_us.median));
  }
  if (l.counters) {
    std::printf("  DRAM rd %.2f wr %.2f MB, L2 %.2f MB; textbook rd %.2f wr %.2f MB",
                megabytes(l.counters->dram_read_bytes), megabytes(l.counters->dram_write_bytes),
                megabytes(l.counters->l2_bytes), megabytes(l.textbook.bytes_read),
                megabytes(l.textbook.bytes_written));
  }
  std::printf("\n");
}

// A launch's phase timeline (--phases): its records, the stamps' cost, and each phase's median
// length over the blocks.
void print_phases(const Measurement& m, const LaunchResult& l) {
  const LaunchPhases& p = *l.phases;
  std::set<uint32_t> blocks;
  std::set<uint16_t> sms;
  std::vector<std::vector<double>> lengths(p.names.size()), waits(p.names.size());
  std::vector<uint64_t> first(p.names.size(), UINT64_MAX), last(p.names.size(), 0);
  uint64_t t0 = UINT64_MAX;
  for (const PhaseRecord& r : p.records) {
    blocks.insert(r.block);
    sms.insert(r.sm);
    t0 = std::min(t0, r.start_ns);
    if (r.phase >= lengths.size()) continue;
    lengths[r.phase].push_back((r.end_ns - r.start_ns) * 1e-3);
    waits[r.phase].push_back(r.wait_ns * 1e-3);
    first[r.phase] = std::min(first[r.phase], r.start_ns);
    last[r.phase] = std::max(last[r.phase], r.end_ns);
  }
  const std::string lost = p.lost > 0 ? ", " + std::to_string(p.lost) + " lost" : "";
  std::printf(
      "  %10s  level %d %-18s phases: %zu records, %zu blocks on %zu SMs%s; stamps on "
      "%.2f us, off %.2f us (%+.1f%%)\n",
      format_size(m.size).c_str(), m.level, l.textbook.kernel.c_str(), p.records.size(),
      blocks.size(), sms.size(), lost.c_str(), p.time_on_us, p.time_off_us, p.overhead() * 100);
  std::printf("  %10s  %-26s median over blocks:", "", "");
  for (size_t i = 0; i < p.names.size(); ++i) {
    if (lengths[i].empty()) continue;
    std::printf(" %s %.2f us;", p.names[i].c_str(), summarize(lengths[i]).median);
  }
  std::printf("\n");
  // When each phase ran, from the first record's start, and its median wait for inputs.
  std::printf("  %10s  %-26s spans:", "", "");
  for (size_t i = 0; i < p.names.size(); ++i) {
    if (lengths[i].empty()) continue;
    std::printf(" %zu: %.2f-%.2f us, wait %.2f;", i, (first[i] - t0) * 1e-3, (last[i] - t0) * 1e-3,
                summarize(waits[i]).median);
  }
  std::printf("\n");
}

// Device memory each level held (Measurement::peak_device_bytes), a row per size; nothing when
// the lesson does not say.
void print_peaks(const LessonRun& run, const std::vector<Measurement>& details) {
  if (std::none_of(details.begin(), details.end(),
                   [](const Measurement& m) { return m.peak_device_bytes > 0; }))
    return;
  const LessonInfo& info = run.lesson->info();
  std::printf(
      "  peak device memory per level: the buffers its launches read or write, as allocated, "
      "and cuBLASLt's workspace where it runs\n");
  std::printf("  %10s", "size");
  for (int l : run.levels) std::printf(" %14s", info.levels[l].name.c_str());
  std::printf("\n");
  for (size_t i = 0; i < details.size();) {
    const int64_t size = details[i].size;
    std::printf("  %10s", format_size(size).c_str());
    for (int l : run.levels) {
      const auto m = std::find_if(details.begin() + i, details.end(), [&](const Measurement& x) {
        return x.size == size && x.level == l;
      });
      const bool known = m != details.end() && m->peak_device_bytes > 0;
      std::printf(" %14s",
                  known ? format_bytes(static_cast<double>(m->peak_device_bytes)).c_str() : "-");
    }
    std::printf("\n");
    while (i < details.size() && details[i].size == size) ++i;
  }
}

// Per launch: time, GB/s, % of copy and the counted bytes; then the chain's bytes.
void print_launches(const std::vector<Measurement>& details, bool counters) {
  std::printf(
      "  per launch: median us, GB/s on textbook bytes, %% of copy bandwidth moving the same "
      "bytes%s\n",
      counters ? "; DRAM read / write and L2 bytes from the counters, next to the "
                 "textbook bytes (MB = 10^6 bytes)"
               : "");
  for (const Measurement& m : details) {
    for (const LaunchResult& l : m.launches) {
      print_launch(m, l);
      if (l.phases) print_phases(m, l);
    }
    if (const auto total = m.counters_total()) {
      const double dram = double(total->dram_read_bytes) + double(total->dram_write_bytes);
      std::printf(
          "  %10s  level %d chain: DRAM rd+wr %.2f MB vs textbook %.2f MB (%+.1f%%), L2 %.2f MB\n",
          format_size(m.size).c_str(), m.level, megabytes(dram), megabytes(m.textbook_bytes()),
          deviation(dram, m.textbook_bytes()), megabytes(total->l2_bytes));
    } else if (m.counters_status != CountersStatus::not_measured && !m.counters_note.empty()) {
      std::printf("  %10s  level %d counters %s: %s\n", format_size(m.size).c_str(), m.level,
                  to_string(m.counters_status), m.counters_note.c_str());
    }
  }
}

// Levels that fell back from CUPTI to events, launches matched by order, CUPTI's own counts
// (--compare-timers) and the counter phases' wall times.
void print_notes(LiveBackend& backend, const LessonRun& run, const BenchOptions& o,
                 const std::vector<Measurement>& details,
                 const std::vector<std::pair<int64_t, double>>& counter_ms) {
  for (const Measurement& m : details) {
    if (m.gpu.disturbed()) {
      std::printf("  %10s  level %d GPU %s: %s\n", format_size(m.size).c_str(), m.level,
                  conditions_mark(m.gpu).c_str(), conditions_sentence(m.gpu).c_str());
    }
    if (run.cupti_timing && m.check.passed && m.timing_method != "cupti_activity") {
      std::printf("  %10s  level %d was timed with %s: %s\n", format_size(m.size).c_str(), m.level,
                  m.timing_method.c_str(), backend.timing_note().c_str());
    }
  }
  if (backend.order_matched_repetitions() > 0) {
    std::printf(
        "  note: %lld repetitions' kernel records were matched to launches by order "
        "(CUPTI delivered no external correlation records)\n",
        static_cast<long long>(backend.order_matched_repetitions()));
  }
  if (o.compare_timers && run.cupti_timing) {
    KernelTracer* tracer = nullptr;
    if (KernelTracer::instance(&tracer).ok()) {
      const TracerStats t = tracer->stats();
      std::printf(
          "  CUPTI so far: %llu kernel, %llu API and %llu external correlation records, "
          "%llu dropped; %llu runtime calls could not be untraced\n",
          static_cast<unsigned long long>(t.kernel_records),
          static_cast<unsigned long long>(t.api_records),
          static_cast<unsigned long long>(t.external_correlation_records),
          static_cast<unsigned long long>(t.dropped_records),
          static_cast<unsigned long long>(t.apis_left_traced));
    }
  }
  if (!counter_ms.empty()) {
    std::printf("  counter phase (every level, wall time):");
    for (const auto& [n, ms] : counter_ms) std::printf(" %s %.0f ms", format_size(n).c_str(), ms);
    std::printf("\n");
  }
}

// --compare-timers: the measurement's own fidelity, CUPTI durations against CUDA events on the
// same launches, and counted DRAM bytes against the textbook bytes.
void print_fidelity(CacheMode cache, const std::vector<Measurement>& details) {
  std::printf("  fidelity (%s):\n", to_string(cache));
  std::printf("  %10s %5s %-18s %10s %10s %7s %8s %8s %11s\n", "size", "level", "kernel",
              "cupti us", "events us", "diff", "rd/tb", "wr/tb", "chain rd+wr");
  for (const Measurement& m : details) {
    const auto total = m.counters_total();
    for (size_t k = 0; k < m.launches.size(); ++k) {
      const LaunchResult& l = m.launches[k];
      char events[32] = "-", diff[32] = "-", rd[32] = "-", wr[32] = "-", chain[32] = "";
      if (l.event_time_us.count > 0) {
        std::snprintf(events, sizeof(events), "%.2f", l.event_time_us.median);
        std::snprintf(diff, sizeof(diff), "%+.1f%%",
                      deviation(l.time_us.median, l.event_time_us.median));
      }
      if (l.counters && l.textbook.bytes_read > 0) {
        std::snprintf(rd, sizeof(rd), "%+.1f%%",
                      deviation(l.counters->dram_read_bytes, l.textbook.bytes_read));
      }
      if (l.counters && l.textbook.bytes_written > 0) {
        std::snprintf(wr, sizeof(wr), "%+.1f%%",
                      deviation(l.counters->dram_write_bytes, l.textbook.bytes_written));
      }
      if (k + 1 == m.launches.size() && total) {
        std::snprintf(chain, sizeof(chain), "%+.1f%%",
                      deviation(double(total->dram_read_bytes) + double(total->dram_write_bytes),
                                m.textbook_bytes()));
      }
      std::printf("  %10s %5d %-18s %10.2f %10s %7s %8s %8s %11s\n", format_size(m.size).c_str(),
                  m.level, l.textbook.kernel.c_str(), l.time_us.median, events, diff, rd, wr,
                  chain);
    }
  }
}

// Under a lesson's table, with --peers: PyTorch's median at each size the peer file has, and
// how our top level compares with torch.compile (its time over ours: above 1.00x we are faster).
void print_peers(const LessonRun& run, const BenchPlan& plan, const PeerFile& peers,
                 const std::vector<std::pair<int64_t, double>>& tops) {
  const auto series = peers.find(run.lesson->info().id, plan.precision);
  if (series.empty()) return;
  std::printf("versus PyTorch (%s, PyTorch %s, cold L2%s)\n", peers.recorded_on().c_str(),
              peers.torch_version.c_str(),
              plan.cache == CacheMode::cold ? "" : "; these rows are warm L2");
  std::printf("%10s %11s", "size", "ours top us");
  const PeerSeries* compile = nullptr;
  for (const PeerSeries* s : series) {
    std::printf(" %14s", (s->peer + " us").c_str());
    if (s->peer == "compile") compile = s;
  }
  std::printf(" %11s\n", compile ? "vs compile" : "");
  for (const auto& [size, ours] : tops) {
    std::printf("%10s %11.2f", format_size(size).c_str(), ours);
    for (const PeerSeries* s : series) {
      const double t = peer_median_at(*s, size);
      if (t > 0)
        std::printf(" %14.2f", t);
      else
        std::printf(" %14s", "-");
    }
    const double c = compile ? peer_median_at(*compile, size) : 0;
    if (c > 0 && ours > 0)
      std::printf(" %10.2fx\n", c / ours);
    else
      std::printf(" %11s\n", "-");
  }
}

// ---- the bench loop ------------------------------------------------------------------------

// Measures every size of one lesson, printing its table as the rows arrive, then the per-launch
// details. The measurements join the session; returns how many sizes failed or were wrong.
int bench_lesson(LiveBackend& backend, const LessonRun& run, const BenchPlan& plan,
                 const BenchOptions& o, const PeerFile* peers, Session* session) {
  print_lesson_header(run, plan, std::max(1, o.min_repetitions));
  int failures = 0;
  std::vector<Measurement> details;
  std::vector<std::pair<int64_t, double>> counter_ms;  // size, wall time of its counter phase
  std::vector<std::pair<int64_t, double>> tops;        // size, the top level's median
  for (int64_t n : plan.sizes) {
    std::fprintf(stderr, "  %s %s...\n", run.lesson->info().id.c_str(), format_size(n).c_str());
    SizeResult r = measure_size(backend, run, plan, n);
    if (r.counter_ms >= 0) counter_ms.emplace_back(n, r.counter_ms);
    if (!r.status.ok()) {
      std::printf("%10s  error: %s\n", format_size(n).c_str(), r.status.message().c_str());
      ++failures;
      continue;
    }
    if (!print_size_row(run, plan, r)) ++failures;
    const Measurement& top = r.measurements.back();
    if (top.check.passed) tops.emplace_back(n, top.chain_time_us.median);
    for (Measurement& m : r.measurements) {
      details.push_back(m);
      session->measurements.push_back(std::move(m));
    }
  }
  if (peers != nullptr) print_peers(run, plan, *peers, tops);
  print_peaks(run, details);
  print_launches(details, run.counters);
  print_notes(backend, run, o, details, counter_ms);
  if (o.compare_timers) print_fidelity(plan.cache, details);
  return failures;
}

}  // namespace

int run_bench(const BenchOptions& o) {
  BenchPlan plan;
  if (Status st = plan_bench(o, &plan); !st.ok()) return usage(st.message());
  BenchOutputs outputs;
  if (const int code = prepare_outputs(o, &outputs); code != kExitOk) return code;
  PeerFile peers;  // read before any GPU work: a bad file is refused at once
  if (!o.peers.empty()) {
    if (Status st = load_peer_file(o.peers, &peers); !st.ok()) return fail(st.message());
  }

  // Before any workspace plans its GEMMs: the math mode is fixed per plan.
  blas::set_allow_tf32(o.allow_tf32);
  std::unique_ptr<LiveBackend> backend;
  if (Status st = LiveBackend::create(live_options(o, plan), &backend); !st.ok()) {
    return fail(st.message() + " `bench` measures on a live GPU, so it cannot run here.");
  }
  std::fprintf(stderr, "measuring the copy roof (1 GiB, cold L2)...\n");
  if (Status st = backend->measure_roof(); !st.ok()) return fail(st.message());
  print_setup(*backend, o, plan);

  Session session;
  session.app_version = app_version();
  session.created_utc = utc_now_iso8601();
  session.backend = "live";
  // How the run times and counts, as the preamble said (a later failure of the counters is
  // reported per measurement).
  const bool cupti_timing = std::string(backend->timing_method()) == "cupti_activity";
  const bool counters = backend->counters_available();
  int failures = 0;
  for (const Lesson* lesson : plan.lessons) {
    LessonRun run;
    run.lesson = lesson;
    run.levels = plan.levels;
    if (run.levels.empty()) {
      for (int l = 0; l < lesson->level_count(); ++l) run.levels.push_back(l);
    }
    run.cupti_timing = cupti_timing;
    run.counters = counters;
    failures += bench_lesson(*backend, run, plan, o, o.peers.empty() ? nullptr : &peers, &session);
  }
  session.device = backend->device();

  if (const int code = write_outputs(session, o, outputs); code != kExitOk) return code;
  if (failures > 0) {
    std::fprintf(stderr, "fusionlab bench: %d measurement(s) failed or gave wrong results\n",
                 failures);
    return 1;
  }
  return 0;
}

void add_bench_measure_options(CLI::App* bench, BenchOptions* o) {
  bench->add_option("--inner", o->inner,
                    "Row length of row-wise lessons (attention: the head size d); 0: the default");
  bench->add_flag("--no-counters", o->no_counters,
                  "Timing only: skip the DRAM/L2 counter phase (CUPTI range profiler)");
  // Diagnostics of the measurement itself, hidden from --help.
  bench
      ->add_flag("--compare-timers", o->compare_timers,
                 "Also time the CUPTI-timed launches with CUDA events and print both")
      ->group("");
  bench->add_option("--timer", o->timer, "cupti (default) or events")->group("");
  bench->add_option("--counter-replay", o->counter_replay, "user (default) or kernel")->group("");
  bench->add_flag("--phases", o->phases,
                  "Also record the kernels' phase timelines (an extra run with per-block stamps "
                  "on) and their cost; --out keeps them");
  bench->add_flag("--allow-tf32", o->allow_tf32,
                  "fp32 GEMMs (lessons 6-8) may use TF32 tensor cores (10-bit mantissas); off by "
                  "default so fp32 means fp32");
  bench
      ->add_flag("--fresh-profiler", o->fresh_profiler,
                 "Enable the range profiler for each counter phase instead of once")
      ->group("");
  bench
      ->add_flag("--trace-all-runtime-apis", o->trace_all_runtime_apis,
                 "CUPTI traces every CUDA runtime call, not only the launches")
      ->group("");
  bench
      ->add_flag("--no-gpu-watch", o->no_gpu_watch,
                 "Do not sample the GPU's clocks and other processes (NVML) around the levels")
      ->group("");
}

}  // namespace fl
