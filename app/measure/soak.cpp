// The soak test (soak.h).
#include "app/measure/soak.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "app/measure/choices.h"
#include "app/measure/heap.h"
#include "model/caps.h"
#include "model/file_io.h"
#include "kernels/catalog.h"

namespace fl {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int64_t rss_from_status_file(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    long long kib = -1;
    if (std::sscanf(line.c_str() + 6, "%lld", &kib) == 1) return kib;
  }
  return -1;
}

}  // namespace

int64_t process_rss_kib() {
  return rss_from_status_file("/proc/self/status");
}
int64_t process_rss_kib(int pid) {
  return rss_from_status_file("/proc/" + std::to_string(pid) + "/status");
}

std::vector<SoakSeries> catalog_soak_series(int64_t max_size, bool bf16_ok) {
  std::vector<SoakSeries> out;
  for (const Lesson* lesson : lessons()) {
    const SizeAxis& axis = lesson->info().size_axis;
    for (Precision p : {Precision::fp32, Precision::bf16}) {
      if (p == Precision::bf16 && !bf16_ok) continue;
      for (CacheMode c : {CacheMode::cold, CacheMode::warm}) {
        SoakSeries s;
        s.lesson = lesson->info().id;
        s.precision = p;
        s.cache = c;
        s.min_size = std::max<int64_t>(1, axis.min);
        s.max_size = max_size > 0 ? std::min(axis.max, max_size) : axis.max;
        s.max_size = std::max(s.min_size, s.max_size);
        out.push_back(s);
      }
    }
  }
  return out;
}

std::vector<SoakSeries> recorded_soak_series(const RecordingSummary& summary) {
  std::vector<SoakSeries> out;
  for (const RecordedSeries& r : summary.series) {
    if (r.sizes.empty()) continue;
    SoakSeries s;
    s.lesson = r.lesson;
    s.precision = r.precision;
    s.cache = r.cache;
    s.min_size = r.sizes.front();
    s.max_size = r.sizes.back();
    s.sizes = r.sizes;
    s.levels = r.levels;
    s.inner = r.inner;
    out.push_back(s);
  }
  return out;
}

namespace {

// The drag through one engine: visits each series in turn, `steps_per_drag` requests at the
// rate as a random walk in log size, then a rest; keeps the answers' counts and latencies.
class SoakDrag {
 public:
  SoakDrag(Engine* engine, const SoakOptions& o) : engine_(*engine), o_(o), rng_(o.seed) {}

  void drag(const SoakSeries& s, const std::function<void()>& tick) {
    const double lo = std::log2(static_cast<double>(s.min_size));
    const double hi = std::log2(static_cast<double>(s.max_size));
    double position = std::uniform_real_distribution<double>(lo, hi)(rng_);
    const double period_s = 1.0 / o_.requests_per_second;
    for (int step = 0; step < o_.steps_per_drag; ++step) {
      position =
          std::clamp(position + std::uniform_real_distribution<double>(-0.7, 0.7)(rng_), lo, hi);
      submit(s, static_cast<int64_t>(std::llround(std::exp2(position))));
      pump_for(period_s, tick);
    }
    pump_for(o_.rest_ms / 1000.0, tick);
  }

  void finish(const std::function<void()>& tick) {
    for (int i = 0; i < 100 && !engine_.wait_idle(100); ++i) tick();
    drain();
  }

  SoakResult& result() { return result_; }

 private:
  void submit(const SoakSeries& s, int64_t size) {
    MeasureRequest r;
    r.lesson = s.lesson;
    r.precision = s.precision;
    r.cache = s.cache;
    r.levels = s.levels;
    r.inner = s.inner;
    r.size = size;
    if (!s.sizes.empty()) {  // a recording: the recorded size nearest on a log scale
      r.size = *std::min_element(s.sizes.begin(), s.sizes.end(), [&](int64_t a, int64_t b) {
        return std::abs(std::log2(double(a) / size)) < std::abs(std::log2(double(b) / size));
      });
    }
    submitted_[engine_.submit(r)] = Clock::now();
  }

  void pump_for(double seconds, const std::function<void()>& tick) {
    const Clock::time_point end =
        Clock::now() + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
    while (Clock::now() < end) {
      drain();
      tick();
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  }

  void drain() {
    const Clock::time_point now = Clock::now();
    for (const EngineResult& r : engine_.poll()) {
      const auto it = submitted_.find(r.id);
      const bool last_answer = r.cancelled || !r.status.ok() || r.phase == EnginePhase::counters;
      if (r.cancelled) {
        ++result_.superseded;
      } else {
        ++result_.results;
        if (!r.status.ok()) {
          ++result_.failed;
          if (result_.first_failures.size() < 5)
            result_.first_failures.push_back(r.status.message());
        } else if (r.phase == EnginePhase::timing && it != submitted_.end()) {
          result_.timing_ms.push_back(seconds_between(it->second, now) * 1e3);
        }
      }
      // Ids of requests answered for good are forgotten, so the soak itself stays bounded. The
      // one worker answers in order: its answer to r.id means every older request is done (an
      // abandoned counter phase posts nothing). A superseded request that never started is
      // answered at the newer submit, possibly before the one in flight, so it says nothing
      // about older ones.
      const bool counters_follow =
          r.phase == EnginePhase::timing && r.status.ok() && !r.cancelled &&
          std::any_of(r.measurements.begin(), r.measurements.end(), [](const Measurement& m) {
            return m.counters_status == CountersStatus::pending;
          });
      if (!r.cancelled) submitted_.erase(submitted_.begin(), submitted_.lower_bound(r.id));
      if (last_answer || !counters_follow) submitted_.erase(r.id);
    }
    keep_recent_half(&result_.timing_ms, kMaxTimingSamples);
  }

  // Latency samples kept for the report (a 30-minute soak at 30 requests/s answers ~50000).
  static constexpr size_t kMaxTimingSamples = size_t(1) << 17;

  Engine& engine_;
  SoakOptions o_;
  std::mt19937_64 rng_;
  std::map<uint64_t, Clock::time_point> submitted_;
  SoakResult result_;
};

}  // namespace

SoakResult run_soak(Engine* engine, const std::vector<SoakSeries>& series,
                    const SoakOptions& options, const std::function<double()>& gpu_used_mib,
                    const std::function<void(const SoakSample&)>& on_sample) {
  SoakDrag drag(engine, options);
  const Clock::time_point start = Clock::now();
  const double end_s = options.minutes * 60;
  double next_sample_s = 0;
  auto take_sample = [&](double elapsed) {
    SoakSample s;
    s.elapsed_s = elapsed;
    s.rss_kib = process_rss_kib();
    const ResidentParts parts = resident_parts();  // printed, not in this soak's CSV
    s.rss_anon_kib = parts.anon_kib;
    s.rss_file_kib = parts.file_kib;
    const HeapStats heap = heap_stats();
    s.heap_kib = heap.in_use_bytes >= 0 ? heap.in_use_bytes / 1024 : -1;
    s.gpu_used_mib = gpu_used_mib ? gpu_used_mib() : -1;
    s.results = drag.result().results;
    s.failed = drag.result().failed;
    drag.result().samples.push_back(s);
    if (on_sample) on_sample(s);
  };
  auto tick = [&] {
    const double elapsed = seconds_between(start, Clock::now());
    if (elapsed >= next_sample_s && elapsed < end_s) {
      take_sample(elapsed);
      next_sample_s += options.sample_seconds;
    }
  };
  for (size_t i = 0; !series.empty() && seconds_between(start, Clock::now()) < end_s; ++i) {
    drag.drag(series[i % series.size()], tick);
  }
  drag.finish(tick);
  take_sample(seconds_between(start, Clock::now()));
  return std::move(drag.result());
}

// ---- the soak in cycles ----------------------------------------------------------------------

std::vector<MeasureRequest> cycle_requests(const std::vector<SoakSeries>& series,
                                           int sizes_per_series) {
  const int k = std::max(1, sizes_per_series);
  std::vector<MeasureRequest> out;
  for (const SoakSeries& s : series) {
    std::vector<int64_t> sizes;
    if (!s.sizes.empty()) {
      const size_t n = s.sizes.size(), want = std::min<size_t>(n, static_cast<size_t>(k));
      for (size_t i = 0; i < want; ++i)
        sizes.push_back(s.sizes[want == 1 ? 0 : i * (n - 1) / (want - 1)]);
    } else {
      const double lo = std::log2(static_cast<double>(s.min_size));
      const double hi = std::log2(static_cast<double>(s.max_size));
      for (int i = 0; i < k; ++i) {
        const double at = k == 1 ? lo : lo + (hi - lo) * i / (k - 1);
        sizes.push_back(std::clamp<int64_t>(std::llround(std::exp2(at)), s.min_size, s.max_size));
      }
    }
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    for (int64_t size : sizes) {
      MeasureRequest r;
      r.lesson = s.lesson;
      r.precision = s.precision;
      r.cache = s.cache;
      r.levels = s.levels;
      r.inner = s.inner;
      r.size = size;
      out.push_back(r);
    }
  }
  return out;
}

namespace {

// Submits `request` and takes its answers until the last one (the timing result when no counter
// phase follows, else the counters result), or `timeout_s` passes.
void answer_fully(Engine& engine, const MeasureRequest& request, int timeout_s,
                  SoakResult* result) {
  const Clock::time_point submitted = Clock::now();
  const uint64_t id = engine.submit(request);
  const Clock::time_point deadline = submitted + std::chrono::seconds(timeout_s);
  while (Clock::now() < deadline) {
    for (const EngineResult& r : engine.poll()) {
      if (r.id != id) continue;
      if (r.cancelled) {
        ++result->superseded;
        return;
      }
      ++result->results;
      if (!r.status.ok()) {
        ++result->failed;
        if (result->first_failures.size() < 5) result->first_failures.push_back(r.status.message());
        return;
      }
      if (r.phase == EnginePhase::counters) return;
      result->timing_ms.push_back(seconds_between(submitted, Clock::now()) * 1e3);
      keep_recent_half(&result->timing_ms, size_t(1) << 17);
      const bool counters_follow = std::any_of(
          r.measurements.begin(), r.measurements.end(),
          [](const Measurement& m) { return m.counters_status == CountersStatus::pending; });
      if (!counters_follow) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ++result->failed;
  if (result->first_failures.size() < 5) {
    result->first_failures.push_back(request.lesson + " at " + std::to_string(request.size) +
                                     " was not answered within " + std::to_string(timeout_s) +
                                     " s");
  }
}

}  // namespace

SoakResult run_soak_cycles(Engine* engine, const std::vector<MeasureRequest>& grid,
                           const CycleOptions& options, const CycleProbes& probes,
                           const std::function<void(const SoakSample&)>& on_sample) {
  SoakResult result;
  const Clock::time_point start = Clock::now();
  auto take_sample = [&](int cycle) {
    SoakSample s;
    s.cycle = cycle;
    s.elapsed_s = seconds_between(start, Clock::now());
    s.rss_kib = process_rss_kib();
    const ResidentParts parts = resident_parts();
    s.rss_anon_kib = parts.anon_kib;
    s.rss_file_kib = parts.file_kib;
    const HeapStats heap = heap_stats();
    s.heap_kib = heap.in_use_bytes >= 0 ? heap.in_use_bytes / 1024 : -1;
    s.gpu_used_mib = probes.gpu_used_mib ? probes.gpu_used_mib() : -1;
    s.cupti_buffers_mib = probes.cupti_buffers_mib ? probes.cupti_buffers_mib() : -1;
    s.results = result.results;
    s.failed = result.failed;
    result.samples.push_back(s);
    if (on_sample) on_sample(s);
  };
  take_sample(0);
  double longest_cycle_s = 0;
  for (int cycle = 1; cycle <= options.cycles; ++cycle) {
    const double now_s = seconds_between(start, Clock::now());
    if (options.max_minutes > 0 && cycle > 1 && now_s + longest_cycle_s > options.max_minutes * 60)
      break;
    for (const MeasureRequest& r : grid)
      answer_fully(*engine, r, options.answer_timeout_s, &result);
    engine->wait_idle(10000);
    longest_cycle_s = std::max(longest_cycle_s, seconds_between(start, Clock::now()) - now_s);
    take_sample(cycle);
  }
  return result;
}

CycleSummary summarize_cycles(const std::vector<SoakSample>& samples) {
  CycleSummary s;
  const SoakSample* from = nullptr;
  const SoakSample* to = nullptr;
  for (const SoakSample& x : samples) {
    if (x.cycle == 2) from = &x;
    if (x.cycle >= 0 && (to == nullptr || x.cycle > to->cycle)) to = &x;
  }
  if (to == nullptr) return s;
  s.cycles = to->cycle;
  s.results = to->results;
  s.failed = to->failed;
  if (from == nullptr || to->cycle <= 2) return s;
  const double span = to->cycle - 2;
  s.rss_from_mib = from->rss_kib / 1024.0;
  s.rss_to_mib = to->rss_kib / 1024.0;
  s.rss_per_cycle_mib = (s.rss_to_mib - s.rss_from_mib) / span;
  if (from->heap_kib >= 0 && to->heap_kib >= 0)
    s.heap_per_cycle_mib = (to->heap_kib - from->heap_kib) / 1024.0 / span;
  s.gpu_from_mib = from->gpu_used_mib;
  s.gpu_to_mib = to->gpu_used_mib;
  const bool gpu_ok = s.gpu_from_mib < 0 || s.gpu_to_mib <= s.gpu_from_mib;
  s.within_bound = s.cycles >= 3 && s.rss_per_cycle_mib <= kCycleRssBoundMib && gpu_ok;
  return s;
}

std::string cycle_report(const CycleSummary& s) {
  char buf[512];
  std::string out;
  if (s.cycles < 3) {
    std::snprintf(buf, sizeof(buf),
                  "soak: %d cycles; at least 3 are needed to judge growth after cycle 2\n",
                  s.cycles);
    return buf;
  }
  std::snprintf(buf, sizeof(buf),
                "soak: %d cycles; resident memory %.1f MiB at the end of cycle 2, %.1f MiB at the "
                "end (%+.3f MiB a cycle; bound %.1f), heap in use %+.3f MiB a cycle\n",
                s.cycles, s.rss_from_mib, s.rss_to_mib, s.rss_per_cycle_mib, kCycleRssBoundMib,
                s.heap_per_cycle_mib);
  out += buf;
  if (s.gpu_from_mib >= 0) {
    std::snprintf(buf, sizeof(buf),
                  "soak: GPU memory in use %.1f MiB at the end of cycle 2, %.1f MiB at the end\n",
                  s.gpu_from_mib, s.gpu_to_mib);
    out += buf;
  }
  std::snprintf(buf, sizeof(buf), "soak: %lld results, %lld failed; %s\n",
                static_cast<long long>(s.results), static_cast<long long>(s.failed),
                s.within_bound ? "memory within the bound" : "MEMORY GREW PAST THE BOUND");
  return out + buf;
}

SoakSummary summarize_soak(const std::vector<SoakSample>& samples) {
  SoakSummary s;
  if (samples.empty()) return s;
  const SoakSample* first_minute = &samples.front();
  for (const SoakSample& x : samples) {
    if (x.elapsed_s >= 60) {
      first_minute = &x;
      break;
    }
  }
  s.rss_first_minute_mib = first_minute->rss_kib / 1024.0;
  s.rss_end_mib = samples.back().rss_kib / 1024.0;
  s.rss_change_percent =
      s.rss_first_minute_mib > 0
          ? 100.0 * (s.rss_end_mib - s.rss_first_minute_mib) / s.rss_first_minute_mib
          : 0;
  for (const SoakSample& x : samples) {
    s.rss_max_mib = std::max(s.rss_max_mib, x.rss_kib / 1024.0);
    if (x.gpu_used_mib < 0) continue;
    s.gpu_min_mib = s.gpu_min_mib < 0 ? x.gpu_used_mib : std::min(s.gpu_min_mib, x.gpu_used_mib);
    s.gpu_max_mib = std::max(s.gpu_max_mib, x.gpu_used_mib);
  }
  s.results = samples.back().results;
  s.failed = samples.back().failed;
  s.minutes = samples.back().elapsed_s / 60;
  return s;
}

std::string soak_report(const SoakSummary& s) {
  char buf[512];
  std::string out;
  std::snprintf(buf, sizeof(buf),
                "soak: %.1f min; resident memory after minute 1 %.1f MiB, at the end %.1f MiB "
                "(%+.2f%%), largest %.1f MiB\n",
                s.minutes, s.rss_first_minute_mib, s.rss_end_mib, s.rss_change_percent,
                s.rss_max_mib);
  out += buf;
  if (s.gpu_min_mib >= 0) {
    std::snprintf(buf, sizeof(buf), "soak: GPU memory in use min %.0f MiB, max %.0f MiB\n",
                  s.gpu_min_mib, s.gpu_max_mib);
  } else {
    std::snprintf(buf, sizeof(buf), "soak: GPU memory not sampled (no GPU)\n");
  }
  out += buf;
  std::snprintf(buf, sizeof(buf), "soak: %lld results, %lld failed\n",
                static_cast<long long>(s.results), static_cast<long long>(s.failed));
  return out + buf;
}

namespace {

constexpr const char* kCycleCsvHeader =
    "cycle,elapsed_s,rss_kib,rss_anon_kib,rss_file_kib,heap_kib,gpu_used_mib,cupti_buffers_mib,"
    "results,failed";

std::string cycle_csv(const std::vector<SoakSample>& samples) {
  std::string out = std::string(kCycleCsvHeader) + "\n";
  auto cell = [](double v, const char* format) {
    char buf[48] = "";
    if (v >= 0) std::snprintf(buf, sizeof(buf), format, v);
    return std::string(buf);
  };
  for (const SoakSample& s : samples) {
    out += std::to_string(s.cycle) + "," + cell(s.elapsed_s, "%.1f") + "," +
           std::to_string(s.rss_kib) + "," + cell(double(s.rss_anon_kib), "%.0f") + "," +
           cell(double(s.rss_file_kib), "%.0f") + "," + cell(double(s.heap_kib), "%.0f") + "," +
           cell(s.gpu_used_mib, "%.1f") + "," + cell(s.cupti_buffers_mib, "%.1f") + "," +
           std::to_string(s.results) + "," + std::to_string(s.failed) + "\n";
  }
  return out;
}

}  // namespace

std::string soak_csv(const std::vector<SoakSample>& samples) {
  if (!samples.empty() && samples.front().cycle >= 0) return cycle_csv(samples);
  std::string out = "elapsed_s,rss_kib,gpu_used_mib,results,failed\n";
  char buf[160];
  for (const SoakSample& s : samples) {
    char gpu[32] = "";
    if (s.gpu_used_mib >= 0) std::snprintf(gpu, sizeof(gpu), "%.1f", s.gpu_used_mib);
    std::snprintf(buf, sizeof(buf), "%.1f,%lld,%s,%lld,%lld\n", s.elapsed_s,
                  static_cast<long long>(s.rss_kib), gpu, static_cast<long long>(s.results),
                  static_cast<long long>(s.failed));
    out += buf;
  }
  return out;
}

namespace {

bool parse_number(const std::string& cell, double* out) {
  if (cell.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(cell.c_str(), &end);
  return end == cell.c_str() + cell.size() && std::isfinite(*out);
}

std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

}  // namespace

namespace {

// The rows of a soak in cycles (kCycleCsvHeader); an empty cell is an unknown value.
Status parse_cycle_rows(std::istringstream& in, std::vector<SoakSample>* out) {
  std::string line;
  for (int row = 2; std::getline(in, line); ++row) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::vector<std::string> c = split_commas(line);
    double v[10] = {0, 0, 0, -1, -1, -1, -1, -1, 0, 0};
    bool ok = c.size() == 10;
    for (size_t i = 0; ok && i < 10; ++i) {
      if (c[i].empty() && i >= 3 && i <= 7) continue;
      ok = parse_number(c[i], &v[i]) && v[i] >= 0;
    }
    if (!ok) {
      return Status::Error("line " + std::to_string(row) + " is not ten numbers: '" +
                           shorten_for_message(line) + "'");
    }
    SoakSample s;
    s.cycle = static_cast<int>(v[0]);
    s.elapsed_s = v[1];
    s.rss_kib = static_cast<int64_t>(v[2]);
    s.rss_anon_kib = static_cast<int64_t>(v[3]);
    s.rss_file_kib = static_cast<int64_t>(v[4]);
    s.heap_kib = static_cast<int64_t>(v[5]);
    s.gpu_used_mib = v[6];
    s.cupti_buffers_mib = v[7];
    s.results = static_cast<int64_t>(v[8]);
    s.failed = static_cast<int64_t>(v[9]);
    out->push_back(s);
  }
  if (out->empty()) return Status::Error("no samples after the header");
  return Status::Ok();
}

}  // namespace

Status parse_soak_csv(const std::string& text, std::vector<SoakSample>* out) {
  std::istringstream in(text);
  std::string line;
  if (std::getline(in, line) && line.rfind(kCycleCsvHeader, 0) == 0) {
    out->clear();
    return parse_cycle_rows(in, out);
  }
  in.clear();
  in.str(text);
  if (!std::getline(in, line) || line.rfind("elapsed_s,rss_kib,gpu_used_mib,results,failed", 0))
    return Status::Error("the first line is not elapsed_s,rss_kib,gpu_used_mib,results,failed");
  out->clear();
  for (int row = 2; std::getline(in, line); ++row) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::vector<std::string> c = split_commas(line);
    double v[5] = {0, 0, -1, 0, 0};
    bool ok = c.size() == 5;
    for (size_t i = 0; ok && i < 5; ++i) {
      if (i == 2 && c[i].empty()) continue;  // GPU memory not sampled
      ok = parse_number(c[i], &v[i]) && v[i] >= 0;
    }
    if (!ok) {
      return Status::Error("line " + std::to_string(row) + " is not five numbers: '" +
                           shorten_for_message(line) + "'");
    }
    SoakSample s;
    s.elapsed_s = v[0];
    s.rss_kib = static_cast<int64_t>(v[1]);
    s.gpu_used_mib = v[2];
    s.results = static_cast<int64_t>(v[3]);
    s.failed = static_cast<int64_t>(v[4]);
    out->push_back(s);
  }
  if (out->empty()) return Status::Error("no samples after the header");
  return Status::Ok();
}

namespace {

// A tick step of 1, 2 or 5 times a power of ten giving about `count` ticks over `span`.
double nice_step(double span, int count) {
  if (!(span > 0)) return 1;
  const double raw = span / count;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

std::string fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), format, a, b, c, d);
  return buf;
}

// One panel of the soak plot: `values` over minutes, in a box at (x0, y0) of w x h pixels.
struct Panel {
  std::string title, color;
  std::vector<std::pair<double, double>> points;  // (minutes, value)
  double band_center = -1;                        // > 0: a +-2% band around it
  // The value axis fits the points from this minute on (the start-up climb would flatten the
  // rest); earlier points outside it are drawn at the edge.
  double fit_from = 0;
  std::vector<std::pair<double, double>> limit;  // a dashed line (the cycles' growth bound)
};

std::string panel_svg(const Panel& p, double x0, double y0, double w, double h, double x_max) {
  double lo = p.points.back().second, hi = lo;
  for (const auto& pt : p.points) {
    if (pt.first >= p.fit_from) lo = std::min(lo, pt.second), hi = std::max(hi, pt.second);
  }
  if (p.band_center > 0)
    lo = std::min(lo, p.band_center * 0.97), hi = std::max(hi, p.band_center * 1.03);
  for (const auto& pt : p.limit) lo = std::min(lo, pt.second), hi = std::max(hi, pt.second);
  if (hi - lo < 1e-9) lo -= 1, hi += 1;
  const double step = nice_step(hi - lo, 5);
  lo = std::floor(lo / step) * step;
  hi = std::ceil(hi / step) * step;
  auto X = [&](double m) { return x0 + w * (x_max > 0 ? m / x_max : 0); };
  auto Y = [&](double v) { return y0 + h - h * (std::clamp(v, lo, hi) - lo) / (hi - lo); };
  std::string out =
      fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
          "stroke=\"#999\"/>\n",
          x0, y0, w, h);
  out += "<text x=\"" + fmt("%.1f", x0) + "\" y=\"" + fmt("%.1f", y0 - 8) +
         "\" font-weight=\"bold\">" + p.title + "</text>\n";
  for (double v = lo; v <= hi + step / 2; v += step) {
    out += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0,
               Y(v), x0 + w, Y(v));
    out += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", x0 - 6, Y(v) + 4, v);
  }
  const double xstep = nice_step(x_max, 8);
  for (double m = 0; m <= x_max + xstep / 2; m += xstep) {
    out += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", X(m),
               y0, X(m), y0 + h);
    out +=
        fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", X(m), y0 + h + 16, m);
  }
  if (p.band_center > 0) {
    out +=
        fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#009E73\" "
            "fill-opacity=\"0.12\"/>\n",
            x0, Y(p.band_center * 1.02), w, Y(p.band_center * 0.98) - Y(p.band_center * 1.02));
    out +=
        fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#009E73\" "
            "stroke-dasharray=\"6 4\"/>\n",
            x0, Y(p.band_center), x0 + w, Y(p.band_center));
  }
  if (!p.limit.empty()) {
    out += "<polyline fill=\"none\" stroke=\"#009E73\" stroke-dasharray=\"6 4\" points=\"";
    for (const auto& pt : p.limit) out += fmt("%.1f,%.1f ", X(pt.first), Y(pt.second));
    out += "\"/>\n";
  }
  out += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" + p.color + "\" points=\"";
  for (const auto& pt : p.points) out += fmt("%.1f,%.1f ", X(pt.first), Y(pt.second));
  out += "\"/>\n";
  return out;
}

}  // namespace

namespace {

std::string svg_text(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '<')
      out += "&lt;";
    else if (ch == '>')
      out += "&gt;";
    else if (ch == '&')
      out += "&amp;";
    else if (static_cast<unsigned char>(ch) >= 0x20)
      out += ch;
  }
  return out;
}

// The soak in cycles: resident memory with the bound from cycle 2 on (1 MiB a cycle), heap in
// use, GPU memory, each over the cycle number.
std::string cycles_svg(const std::vector<SoakSample>& samples, const std::string& title) {
  const CycleSummary sum = summarize_cycles(samples);
  Panel rss{"Resident memory (MiB); dashed: +1 MiB a cycle from the end of cycle 2",
            "#0072B2",
            {},
            -1,
            0,
            {}};
  Panel heap{"Heap in use (MiB, mallinfo2)", "#CC79A7", {}, -1, 0, {}};
  Panel gpu{"GPU memory in use (MiB)", "#D55E00", {}, -1, 0, {}};
  double x_max = 0;
  for (const SoakSample& s : samples) {
    rss.points.push_back({double(s.cycle), s.rss_kib / 1024.0});
    if (s.heap_kib >= 0) heap.points.push_back({double(s.cycle), s.heap_kib / 1024.0});
    if (s.gpu_used_mib >= 0) gpu.points.push_back({double(s.cycle), s.gpu_used_mib});
    x_max = std::max(x_max, double(s.cycle));
  }
  if (sum.cycles >= 3) {
    rss.limit = {{2.0, sum.rss_from_mib},
                 {double(sum.cycles), sum.rss_from_mib + kCycleRssBoundMib * (sum.cycles - 2)}};
  }
  // The axes fit cycle 1 on: cycle 0 is before the first kernel was loaded.
  rss.fit_from = heap.fit_from = gpu.fit_from = 1;
  std::vector<const Panel*> panels = {&rss};
  if (!heap.points.empty()) panels.push_back(&heap);
  if (!gpu.points.empty()) panels.push_back(&gpu);
  const double w = 900, panel_h = 220, left = 80, top = 70;
  const double height = top + panels.size() * (panel_h + 70) + 10;
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out +=
      fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Arial, sans-serif\" "
          "font-size=\"13\">\n",
          left + w + 30, height, left + w + 30, height);
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out += "<text x=\"" + fmt("%.0f", left) + "\" y=\"24\" font-size=\"16\" font-weight=\"bold\">" +
         svg_text(title) + "</text>\n";
  out += "<text x=\"" + fmt("%.0f", left) + "\" y=\"44\">" +
         fmt("end of cycle 2 to cycle %.0f: resident %+.3f MiB a cycle, heap %+.3f MiB a cycle; ",
             sum.cycles, sum.rss_per_cycle_mib, sum.heap_per_cycle_mib) +
         fmt("%.0f results, %.0f failed", double(sum.results), double(sum.failed)) + "</text>\n";
  for (size_t i = 0; i < panels.size(); ++i) {
    const double y = top + i * (panel_h + 70);
    if (!panels[i]->points.empty()) out += panel_svg(*panels[i], left, y, w, panel_h, x_max);
    out += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">cycle</text>\n", left + w / 2,
               y + panel_h + 36);
  }
  return out + "</svg>\n";
}

}  // namespace

std::string soak_svg(const std::vector<SoakSample>& samples, const std::string& title) {
  if (!samples.empty() && samples.front().cycle >= 0) return cycles_svg(samples, title);
  const SoakSummary sum = summarize_soak(samples);
  Panel rss{
      "Resident memory (MiB); band: +-2% of the value after minute 1", "#0072B2", {}, -1, 0, {}};
  Panel gpu{"GPU memory in use (MiB)", "#D55E00", {}, -1, 0, {}};
  double x_max = 0;
  for (const SoakSample& s : samples) {
    rss.points.push_back({s.elapsed_s / 60, s.rss_kib / 1024.0});
    if (s.gpu_used_mib >= 0) gpu.points.push_back({s.elapsed_s / 60, s.gpu_used_mib});
    x_max = std::max(x_max, s.elapsed_s / 60);
  }
  rss.band_center = sum.rss_first_minute_mib;
  // The axis fits minute 1 on (as the figures), or all but the first sample in a shorter run.
  if (samples.size() > 2) rss.fit_from = gpu.fit_from = std::min(1.0, samples[1].elapsed_s / 60);
  const bool with_gpu = !gpu.points.empty();
  const double w = 900, panel_h = 260, left = 80, top = 70;
  const double height = top + (with_gpu ? 2 : 1) * (panel_h + 70) + 10;
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out +=
      fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Arial, sans-serif\" "
          "font-size=\"13\">\n",
          left + w + 30, height, left + w + 30, height);
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::string safe_title;
  for (char ch : title) {
    if (ch == '<')
      safe_title += "&lt;";
    else if (ch == '>')
      safe_title += "&gt;";
    else if (ch == '&')
      safe_title += "&amp;";
    else if (static_cast<unsigned char>(ch) >= 0x20)
      safe_title += ch;
  }
  out += "<text x=\"" + fmt("%.0f", left) + "\" y=\"24\" font-size=\"16\" font-weight=\"bold\">" +
         safe_title + "</text>\n";
  out += "<text x=\"" + fmt("%.0f", left) + "\" y=\"44\">" +
         fmt("after minute 1: %.1f MiB; end: %.1f MiB (%+.2f%%); ", sum.rss_first_minute_mib,
             sum.rss_end_mib, sum.rss_change_percent) +
         fmt("%.0f results, %.0f failed", static_cast<double>(sum.results),
             static_cast<double>(sum.failed)) +
         "</text>\n";
  if (!rss.points.empty()) out += panel_svg(rss, left, top, w, panel_h, x_max);
  out += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">minutes</text>\n", left + w / 2,
             top + panel_h + 36);
  if (with_gpu) {
    const double y = top + panel_h + 70;
    out += panel_svg(gpu, left, y, w, panel_h, x_max);
    out += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">minutes</text>\n", left + w / 2,
               y + panel_h + 36);
  }
  return out + "</svg>\n";
}

}  // namespace fl
