// `fusionlab latency`: how fast the live engine answers a dragged slider, measured through the
// engine's own API (what the window uses), with the window's interactive settings.
//
// A scripted drag submits gelu_scale requests at a fixed rate over sizes up to --max-size, then
// rests; this repeats --drags times. Reported, in milliseconds:
//   - the very first request (module loading, first allocations, the profiler's first enable),
//   - timing latency: submit -> timing result, for every request that was not superseded,
//   - counter latency: the last submit of a drag (the slider comes to rest) -> counters result.
//
// With --minutes M it is the soak instead (app/measure/soak.h, docs/RELIABILITY.md): every
// lesson, size, level, precision and cache mode for M minutes, resident and GPU memory sampled
// into --soak-csv and plotted into --soak-svg; --replay soaks a recording (no GPU needed).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <thread>

#include "app/cli.h"
#include "app/measure/choices.h"
#include "app/measure/cupti_tracer.h"
#include "app/measure/engine.h"
#include "model/file_io.h"
#include "app/measure/live_backend.h"
#include "model/sizes.h"
#include "app/measure/soak.h"
#include "kernels/catalog.h"

namespace fl {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

// A mistake on the command line: exit 2, before the GPU is touched.
int usage(const std::string& message) {
  std::fprintf(stderr, "fusionlab latency: %s\n", message.c_str());
  return kExitUsage;
}
// A failure while running (no GPU, the engine): exit 1.
int fail(const std::string& message) {
  std::fprintf(stderr, "fusionlab latency: %s\n", message.c_str());
  return kExitFailure;
}

void print_stats(const char* what, std::vector<double> v) {
  if (v.empty()) {
    std::printf("  %-34s no samples\n", what);
    return;
  }
  const Stats s = summarize(v);
  std::sort(v.begin(), v.end());
  const double p95 = v[std::min(v.size() - 1, static_cast<size_t>(std::ceil(0.95 * v.size())) - 1)];
  std::printf("  %-34s n=%3d  median %7.1f ms  p95 %7.1f ms  max %7.1f ms\n", what, s.count,
              s.median, p95, s.max);
}

// The options, checked before the GPU is touched; the usage error's message, or empty.
std::string check_options(const LatencyOptions& o, int64_t* max_size) {
  if (Status st = parse_size(o.max_size, max_size); !st.ok()) return "--max-size: " + st.message();
  if (const Lesson* gelu = find_lesson("gelu_scale");
      gelu != nullptr && *max_size > gelu->info().size_axis.max) {
    return "--max-size is at most " + format_size(gelu->info().size_axis.max) +
           " (gelu_scale's largest size)";
  }
  if (!(o.requests_per_second >= 1 && o.requests_per_second <= 1000))
    return "--rate is 1..1000 requests per second";
  if (o.drags < 1 || o.drags > 10000 || o.requests_per_drag < 1 || o.requests_per_drag > 10000) {
    return "--drags and --steps are 1..10000";
  }
  if (o.rest_ms < 0 || o.rest_ms > 600000) return "--rest-ms is 0..600000";
  return "";
}

// The scripted drags through one engine, and what its answers took.
class LatencyRun {
 public:
  explicit LatencyRun(Engine* engine) : engine_(*engine) {}

  // The very first request, alone; then the drags: a random walk in log size, `rate` requests
  // per second, then a rest.
  void run(const LatencyOptions& o, int64_t max_size) {
    first_id_ = submit(int64_t(1) << 20);
    pump_for(3000);
    std::mt19937_64 rng(12345);
    const double lo = std::log2(1024.0), hi = std::log2(static_cast<double>(max_size));
    double position = (lo + hi) / 2;
    const double period_ms = 1000.0 / o.requests_per_second;
    for (int d = 0; d < o.drags; ++d) {
      uint64_t last = 0;
      for (int s = 0; s < o.requests_per_drag; ++s) {
        position =
            std::clamp(position + std::uniform_real_distribution<double>(-0.7, 0.7)(rng), lo, hi);
        last = submit(static_cast<int64_t>(std::llround(std::exp2(position))));
        pump_for(period_ms);
      }
      rest_started_[last] = submitted_[last];
      pump_for(o.rest_ms);
    }
    engine_.wait_idle(10000);
    drain(Clock::now());
  }

  // Returns the exit status: 1 when a request failed.
  int report(const LatencyOptions& o, int64_t max_size) const {
    std::printf("\n%d drags of %d requests at %.0f requests/s, sizes 1K..%s, rest %d ms\n", o.drags,
                o.requests_per_drag, o.requests_per_second, format_size(max_size).c_str(),
                o.rest_ms);
    std::printf("  %-34s timing %.1f ms, counters %.1f ms\n", "first request (1M, cold start)",
                first_timing_ms_, first_counters_ms_);
    print_stats("timing: submit -> result", timing_ms_);
    print_stats("counters: rest -> result", counters_ms_);
    std::printf("  superseded by a newer request: %d, failed: %d\n", superseded_, failed_);
    return failed_ == 0 ? 0 : 1;
  }

 private:
  uint64_t submit(int64_t size) {
    MeasureRequest request;
    request.lesson = "gelu_scale";
    request.size = size;
    const Clock::time_point t = Clock::now();
    const uint64_t id = engine_.submit(request);
    submitted_[id] = t;
    return id;
  }

  void pump_for(double ms) {
    const Clock::time_point end =
        Clock::now() + std::chrono::microseconds(static_cast<int64_t>(ms * 1e3));
    while (Clock::now() < end) {
      drain(Clock::now());
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  // Takes the engine's answers: timing latency from submit, counter latency from the rest.
  void drain(Clock::time_point now) {
    for (const EngineResult& r : engine_.poll()) {
      if (r.cancelled) {
        ++superseded_;
        continue;
      }
      if (!r.status.ok()) {
        ++failed_;
        std::fprintf(stderr, "  request %llu failed: %s\n", static_cast<unsigned long long>(r.id),
                     r.status.message().c_str());
        continue;
      }
      const auto it = submitted_.find(r.id);
      if (it == submitted_.end()) continue;
      const double ms = ms_since(it->second, now);
      if (r.phase == EnginePhase::timing) {
        if (r.id == first_id_)
          first_timing_ms_ = ms;
        else
          timing_ms_.push_back(ms);
      } else if (r.id == first_id_) {
        first_counters_ms_ = ms;
      } else if (const auto rest = rest_started_.find(r.id); rest != rest_started_.end()) {
        counters_ms_.push_back(ms_since(rest->second, now));
      }
    }
  }

  Engine& engine_;
  std::map<uint64_t, Clock::time_point> submitted_;
  std::map<uint64_t, Clock::time_point> rest_started_;  // last request of each drag
  std::vector<double> timing_ms_, counters_ms_;
  double first_timing_ms_ = -1, first_counters_ms_ = -1;
  int superseded_ = 0, failed_ = 0;
  uint64_t first_id_ = 0;
};

// ---- the soak ---------------------------------------------------------------------------------

// The soak's options, checked before the GPU is touched (outputs too); the usage error or empty.
std::string check_soak_options(const LatencyOptions& o) {
  if (!(o.minutes > 0 && o.minutes <= 24 * 60)) return "--minutes is more than 0, at most 1440";
  if (!(o.sample_seconds >= 0.1 && o.sample_seconds <= 3600))
    return "--sample-seconds is 0.1..3600";
  return "";
}

// The outputs, checked before the GPU is touched: one line naming the output, or empty.
std::string check_soak_outputs(const LatencyOptions& o) {
  for (const std::string& out : {o.soak_csv, o.soak_svg}) {
    if (out.empty()) continue;
    if (Status st = check_output_file(out, true); !st.ok()) return st.message();
  }
  return "";
}

std::string check_cycle_options(const LatencyOptions& o) {
  if (o.cycles < 1 || o.cycles > 10000) return "--cycles is 1..10000";
  if (o.sizes_per_lesson < 1 || o.sizes_per_lesson > 64) return "--sizes-per-lesson is 1..64";
  if (!(o.max_minutes >= 0 && o.max_minutes <= 24 * 60)) return "--max-minutes is 0..1440";
  return "";
}

// The soak in cycles (soak.h, run_soak_cycles) on `engine` (ready) over `series`.
int soak_cycles(const LatencyOptions& o, Engine& engine, const EngineStatus& status, bool live,
                const std::vector<SoakSeries>& series) {
  const std::vector<MeasureRequest> grid = cycle_requests(series, o.sizes_per_lesson);
  std::printf(
      "soak: %s (%s), %zu requests a cycle (%zu series x up to %d sizes, every level), "
      "%d cycles\n",
      status.device.name.c_str(), status.backend_kind.c_str(), grid.size(), series.size(),
      o.sizes_per_lesson, o.cycles);
  std::fflush(stdout);
  CycleOptions co;
  co.cycles = o.cycles;
  co.max_minutes = o.max_minutes;
  CycleProbes probes;
  if (live) {
    probes.gpu_used_mib = device_memory_used_mib;
    probes.cupti_buffers_mib = [] { return cupti_buffer_bytes_held() / double(1 << 20); };
  }
  char heading[256];
  std::snprintf(heading, sizeof(heading),
                "Soak in cycles: %s, %zu requests a cycle (every lesson, level, precision, cache "
                "mode)",
                status.device.name.c_str(), grid.size());
  std::vector<SoakSample> so_far;  // written after every cycle: a soak cut short keeps its data
  const SoakResult r = run_soak_cycles(&engine, grid, co, probes, [&](const SoakSample& s) {
    so_far.push_back(s);
    write_soak_outputs(o, so_far, heading);
    char gpu[32] = "-";
    if (s.gpu_used_mib >= 0) std::snprintf(gpu, sizeof(gpu), "%.1f", s.gpu_used_mib);
    KernelTracer* tracer = nullptr;
    if (live && KernelTracer::instance(&tracer).ok()) {
      const TracerStats t = tracer->stats();
      std::printf("  CUPTI: %llu kernel records and %llu correlation ids held\n",
                  static_cast<unsigned long long>(t.held_kernels),
                  static_cast<unsigned long long>(t.held_ids));
    }
    std::printf(
        "  cycle %3d %7.1f s  RSS %8.1f MiB (anon %.1f, file %.1f)  heap %7.1f MiB  GPU %8s MiB  "
        "CUPTI buffers %.0f MiB  results %lld  failed %lld\n",
        s.cycle, s.elapsed_s, s.rss_kib / 1024.0, s.rss_anon_kib / 1024.0, s.rss_file_kib / 1024.0,
        s.heap_kib / 1024.0, gpu, s.cupti_buffers_mib, static_cast<long long>(s.results),
        static_cast<long long>(s.failed));
    std::fflush(stdout);
  });
  for (const std::string& why : r.first_failures)
    std::fprintf(stderr, "  failed: %s\n", why.c_str());
  print_stats("timing: submit -> result", r.timing_ms);
  const CycleSummary sum = summarize_cycles(r.samples);
  std::printf("%s", cycle_report(sum).c_str());
  if (const int written = write_soak_outputs(o, r.samples, heading); written != 0) return written;
  return sum.failed == 0 && sum.within_bound ? 0 : 1;
}

int soak(const LatencyOptions& o) {
  if (const std::string why = o.cycles > 0 ? check_cycle_options(o) : check_soak_options(o);
      !why.empty())
    return usage(why);
  if (const std::string why = check_soak_outputs(o); !why.empty()) return fail(why);
  std::unique_ptr<ReplayBackend> recording;
  if (!o.replay.empty()) {
    if (Status st = load_recording(o.replay, &recording); !st.ok()) return fail(st.message());
  }
  const bool live = recording == nullptr;
  std::vector<SoakSeries> series =
      live ? std::vector<SoakSeries>() : recorded_soak_series(recording->summary());
  EngineOptions engine_options;
  // Cycles wait for each request's counter phase, so the rest before it is short.
  if (o.cycles > 0) engine_options.counter_rest_ms = 50;
  Engine engine(
      [&recording](std::unique_ptr<MeasureBackend>* out) {
        if (recording) {
          *out = std::move(recording);
          return Status::Ok();
        }
        std::unique_ptr<LiveBackend> backend;
        FL_TRY(LiveBackend::create(interactive_live_options(), &backend));
        *out = std::move(backend);
        return Status::Ok();
      },
      engine_options);
  if (!engine.wait_idle(120000)) return fail("the engine did not start within 2 minutes");
  const EngineStatus status = engine.status();
  if (status.state != EngineState::ready)
    return fail(status.unavailable_reason + " The soak needs a live GPU or --replay.");
  if (live) {
    const bool bf16_ok = precision_unsupported_reason(Precision::bf16, status.device.cc_major,
                                                      status.device.cc_minor)
                             .empty();
    series = catalog_soak_series(0, bf16_ok);
  }
  if (o.cycles > 0) return soak_cycles(o, engine, status, live, series);
  std::printf(
      "soak: %s (%s), %zu series (lesson, precision, cache), %.1f min, a sample every "
      "%.1f s\n",
      status.device.name.c_str(), status.backend_kind.c_str(), series.size(), o.minutes,
      o.sample_seconds);
  std::fflush(stdout);
  SoakOptions so;
  so.minutes = o.minutes;
  so.sample_seconds = o.sample_seconds;
  so.requests_per_second = o.requests_per_second;
  so.steps_per_drag = o.requests_per_drag;
  so.rest_ms = o.rest_ms;
  const SoakResult r = run_soak(
      &engine, series, so, live ? std::function<double()>(device_memory_used_mib) : nullptr,
      [](const SoakSample& s) {
        char gpu[32] = "-";
        if (s.gpu_used_mib >= 0) std::snprintf(gpu, sizeof(gpu), "%.1f", s.gpu_used_mib);
        std::printf(
            "  %7.1f s  RSS %8.1f MiB (anon %.1f, file %.1f)  heap %7.1f MiB  GPU %8s MiB  "
            "CUPTI buffers %.0f MiB  results %lld  failed %lld\n",
            s.elapsed_s, s.rss_kib / 1024.0, s.rss_anon_kib / 1024.0, s.rss_file_kib / 1024.0,
            s.heap_kib / 1024.0, gpu, cupti_buffer_bytes_held() / double(1 << 20),
            static_cast<long long>(s.results), static_cast<long long>(s.failed));
        std::fflush(stdout);
      });
  for (const std::string& why : r.first_failures)
    std::fprintf(stderr, "  failed: %s\n", why.c_str());
  print_stats("timing: submit -> result", r.timing_ms);
  std::printf("  superseded by a newer request: %lld\n", static_cast<long long>(r.superseded));
  const SoakSummary sum = summarize_soak(r.samples);
  std::printf("%s", soak_report(sum).c_str());
  char heading[256];
  std::snprintf(heading, sizeof(heading),
                "Soak: %s, %.1f min, every lesson, size, level, "
                "precision and cache mode",
                status.device.name.c_str(), o.minutes);
  if (const int written = write_soak_outputs(o, r.samples, heading); written != 0) return written;
  return sum.failed == 0 ? 0 : 1;
}

}  // namespace

int run_latency(const LatencyOptions& o) {
  if (!o.plot_csv.empty()) return plot_soak_csv(o);
  if (o.minutes > 0 || o.cycles > 0 || !o.replay.empty()) return soak(o);
  int64_t max_size = 0;
  if (const std::string why = check_options(o, &max_size); !why.empty()) return usage(why);
  Engine engine([](std::unique_ptr<MeasureBackend>* out) {
    std::unique_ptr<LiveBackend> live;
    FL_TRY(LiveBackend::create(interactive_live_options(), &live));
    *out = std::move(live);
    return Status::Ok();
  });
  if (!engine.wait_idle(120000)) return fail("the engine did not start within 2 minutes");
  const EngineStatus status = engine.status();
  if (status.state != EngineState::ready)
    return fail(status.unavailable_reason + " `latency` needs a live GPU.");
  std::printf(
      "GPU: %s; gelu_scale, fp32, cold L2, interactive settings (>= %d repetitions, ~%.0f ms per "
      "level)\n",
      status.device.name.c_str(), interactive_live_options().min_repetitions,
      interactive_live_options().target_seconds * 1e3);
  if (!status.timing_note.empty()) std::printf("timing: %s\n", status.timing_note.c_str());
  if (!status.counters_note.empty()) std::printf("counters: %s\n", status.counters_note.c_str());
  LatencyRun run(&engine);
  run.run(o, max_size);
  return run.report(o, max_size);
}

}  // namespace fl
