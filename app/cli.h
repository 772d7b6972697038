// The headless subcommands of `fusionlab` (DESIGN.md §3, command line). Each returns the process
// exit code and prints a one-line reason on stderr when it fails.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace fl {

struct BenchOptions {
  std::string lessons = "gelu_scale";  // comma-separated ids
  std::string sizes = "1K,1M,16M";
  std::string levels = "all";          // "all" or comma-separated level numbers
  std::string precision = "fp32";
  std::string cache = "cold";
  int min_repetitions = 50;
  double seconds_per_level = 0.2;
  std::string out_session;  // --out
  std::string out_csv;      // --csv
  bool no_counters = false;     // --no-counters: timing only, no CUPTI range profiler
  // Diagnostics (hidden options, for checking the measurement itself):
  bool compare_timers = false;  // --compare-timers: CUDA events around the CUPTI-timed launches
  std::string timer = "cupti";  // --timer cupti|events
  std::string counter_replay = "user";  // --counter-replay user|kernel
  bool keep_profiler_enabled = false;   // --keep-profiler-enabled
  bool trace_all_runtime_apis = false;  // --trace-all-runtime-apis
};

// Adds the counter and timer options (--no-counters and the hidden diagnostics) to the
// `bench` subcommand; main() calls it next to the other bench options.
void add_bench_measure_options(CLI::App* bench, BenchOptions* options);

// `fusionlab latency`: a scripted drag through the engine (see cli_latency.cpp).
struct LatencyOptions {
  double requests_per_second = 30;
  int drags = 12;
  int requests_per_drag = 15;
  int rest_ms = 1000;
  std::string max_size = "16M";
};

int run_lessons(bool json);
int run_bench(const BenchOptions& options);
int run_latency(const LatencyOptions& options);

std::string app_version();

}  // namespace fl
