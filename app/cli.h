// The headless subcommands of `fusionlab` (DESIGN.md §3, command line). Each returns the process
// exit code and prints a one-line reason on stderr when it fails.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace fl {

// Exit statuses of every command (README "The command line", `fusionlab --help`).
constexpr int kExitOk = 0;       // success
constexpr int kExitFailure = 1;  // a runtime failure: a file, the GPU, a measurement
constexpr int kExitUsage = 2;  // a usage error: an unknown option, a bad value, a missing argument

struct BenchOptions {
  std::string lessons = "gelu_scale";  // comma-separated ids
  std::string sizes = "1K,1M,16M";
  std::string levels = "all";  // "all" or comma-separated level numbers
  std::string precision = "fp32";
  std::string cache = "cold";
  int min_repetitions = 50;
  double seconds_per_level = 0.2;
  std::string out_session;   // --out
  std::string out_csv;       // --csv
  bool no_counters = false;  // --no-counters: timing only, no CUPTI range profiler
  bool allow_tf32 = false;   // --allow-tf32: TF32 tensor cores for fp32 GEMMs (lessons 6-8)
  bool phases = false;       // --phases: record the kernels' phase timelines too
  std::string peers;         // --peers FILE: PyTorch's times (scripts/peers.py) under each table
  std::vector<std::string> variants;  // --variant LAUNCH=VARIANT: force a kernel variant
  std::string choose_as;  // --choose-as 8.6: the table chooses kernels as on that (older) GPU
  int64_t inner = 0;      // --inner: row length of row-wise lessons (attention: head size d)
  // Diagnostics (hidden options, for checking the measurement itself):
  bool compare_timers = false;  // --compare-timers: CUDA events around the CUPTI-timed launches
  std::string timer = "cupti";  // --timer cupti|events
  std::string counter_replay = "user";  // --counter-replay user|kernel
  bool fresh_profiler = false;          // --fresh-profiler: enable the range profiler per request
  bool trace_all_runtime_apis = false;  // --trace-all-runtime-apis
  bool no_gpu_watch = false;            // --no-gpu-watch: no NVML sampling around the levels
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
  // The soak (app/measure/soak.h, docs/RELIABILITY.md): > 0 drags every lesson, size, level,
  // precision and cache mode for this many minutes instead, sampling memory.
  double minutes = 0;
  double sample_seconds = 10;
  std::string soak_csv, soak_svg;   // the samples and their plot
  std::vector<std::string> replay;  // soak a recording instead of the GPU (tests, no GPU)
  std::string plot_csv;             // only draw --soak-svg from this soak CSV and exit
  // The soak in cycles: > 0 walks the grid (every lesson, precision, cache mode and
  // --sizes-per-lesson sizes, every level) this many times, sampling at each cycle's end.
  int cycles = 0;
  int sizes_per_lesson = 8;
  double max_minutes = 0;  // > 0: start no cycle that would end after this
};

// `fusionlab export-trace` and `fusionlab export-csv` (cli_export.cpp, docs/EXPORT.md): recorded
// sessions (files, or folders of .json files, as for --replay) to a Chrome trace or a CSV.
struct ExportOptions {
  std::vector<std::string> inputs;  // SESSION.json or folders
  std::string out;                  // -o; "-" is standard output
  std::string lesson;               // --lesson: only this lesson
  std::string size;                 // --size: only this size ("64M", "1000003")
  bool force = false;               // --force: replace an existing output
  std::string peers;                // export-csv --peers FILE: PyTorch peer rows follow
};
// Each adds its subcommand to `app`, bound to `options`, and returns it (main checks parsed()).
CLI::App* add_export_trace_command(CLI::App* app, ExportOptions* options);
CLI::App* add_export_csv_command(CLI::App* app, ExportOptions* options);
int run_export_trace(const ExportOptions& options);
int run_export_csv(const ExportOptions& options);

int run_lessons(bool json);
// `lessons --tasks gpt2_decode`: the megakernel's task list for a shape (kernels/gpt2_decode).
struct TaskListOptions {
  std::string lesson;
  int blocks = 132;  // an H100 SXM's SMs
  int tokens = 1;
  int cache = 512;
};
int run_task_list(const TaskListOptions& options);
int run_bench(const BenchOptions& options);
int run_latency(const LatencyOptions& options);
// The soak's outputs (cli_soak.cpp): --soak-csv and --soak-svg from `samples` (0, or the exit
// status after one line on stderr), and --plot-csv (draws an existing soak CSV into --soak-svg).
struct SoakSample;
int write_soak_outputs(const LatencyOptions& options, const std::vector<SoakSample>& samples,
                       const std::string& title);
int plot_soak_csv(const LatencyOptions& options);

std::string app_version();

}  // namespace fl
