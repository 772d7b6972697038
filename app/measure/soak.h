// The soak test (docs/RELIABILITY.md, "Bounded memory"): the engine driven for minutes
// by a scripted drag across every lesson, size, level, precision and cache mode, sampling the
// process's resident memory and the GPU's memory in use every few seconds into a CSV and a plot.
// `fusionlab latency --minutes M` runs it live; the window soak (scripts/window-soak.sh) writes
// the same CSV from outside the window's process, and `latency --plot-csv` draws it.
//
// Plain C++ (no CUDA): the GPU memory comes from a callback, so tests run it over a recording.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "app/measure/engine.h"
#include "app/measure/replay_backend.h"

namespace fl {

// One sample. gpu_used_mib < 0: not known (no GPU, a recording).
struct SoakSample {
  double elapsed_s = 0;
  int64_t rss_kib = 0;
  double gpu_used_mib = -1;
  int64_t results = 0;  // results so far (timing and counters), superseded ones not counted
  int64_t failed = 0;   // results so far that failed
  // The soak in cycles (`latency --cycles`) samples at each cycle's end, and more: -1 unknown.
  int cycle = -1;                                // 0: before the first cycle
  int64_t rss_anon_kib = -1, rss_file_kib = -1;  // RssAnon, RssFile (heap.h)
  int64_t heap_kib = -1;                         // heap in use (mallinfo2)
  double cupti_buffers_mib = -1;                 // CUPTI activity buffers not yet delivered back
};

// VmRSS of this process (/proc/self/status) in KiB; -1 when it cannot be read.
int64_t process_rss_kib();
// VmRSS of any process (/proc/PID/status); -1 when it cannot be read.
int64_t process_rss_kib(int pid);

// What the drag walks through: each lesson (or recorded series) in each precision and cache mode,
// sizes from `min_size` to `max_size` of its axis.
struct SoakSeries {
  std::string lesson;
  Precision precision = Precision::fp32;
  CacheMode cache = CacheMode::cold;
  int64_t min_size = 1, max_size = 1;
  std::vector<int64_t> sizes;  // a recording's sizes: the drag visits these; empty: any size
  std::vector<int> levels;     // empty: every level
  int64_t inner = 0;           // row length; 0: the lesson's default
};
// Every lesson of the catalog in fp32 and bf16, cold and warm, over its whole size axis (capped at
// `max_size` when > 0). `bf16_ok` false (a GPU below compute capability 8.0) leaves bf16 out.
std::vector<SoakSeries> catalog_soak_series(int64_t max_size, bool bf16_ok);
// The series a recording holds (replay).
std::vector<SoakSeries> recorded_soak_series(const RecordingSummary& summary);

struct SoakOptions {
  double minutes = 30;
  double sample_seconds = 10;
  double requests_per_second = 30;
  int steps_per_drag = 15;  // requests per drag; then the slider rests (counters run)
  int rest_ms = 1000;
  uint64_t seed = 12345;
};

struct SoakResult {
  std::vector<SoakSample> samples;
  std::vector<double> timing_ms;  // submit -> timing result, requests not superseded
  int64_t results = 0, failed = 0, superseded = 0;
  std::vector<std::string> first_failures;  // the first few messages, for the report
};

// Drives `engine` (ready) through `series` for options.minutes, sampling every
// options.sample_seconds (and once at the start and at the end). `gpu_used_mib` returns the GPU
// memory in use or < 0. `on_sample` (may be empty) sees each sample as it is taken.
SoakResult run_soak(Engine* engine, const std::vector<SoakSeries>& series,
                    const SoakOptions& options, const std::function<double()>& gpu_used_mib,
                    const std::function<void(const SoakSample&)>& on_sample);

// ---- the soak in cycles ----------------------------------------------------------------------

// One cycle's grid: for each series, `sizes_per_series` sizes (a recording's: spread over its
// recorded sizes, first and last included; otherwise log-spaced over min..max), every level.
std::vector<MeasureRequest> cycle_requests(const std::vector<SoakSeries>& series,
                                           int sizes_per_series);

struct CycleOptions {
  int cycles = 6;
  double max_minutes = 0;      // > 0: start no cycle that would end later (by the longest one)
  int answer_timeout_s = 120;  // one request's answers (timing, then counters) at most
};
struct CycleProbes {
  std::function<double()> gpu_used_mib;       // may be empty
  std::function<double()> cupti_buffers_mib;  // may be empty
};

// Submits every request of the grid in turn, each once its previous one is fully answered (the
// counter phase included), `cycles` times; samples at the start (cycle 0) and at each cycle's end.
SoakResult run_soak_cycles(Engine* engine, const std::vector<MeasureRequest>& grid,
                           const CycleOptions& options, const CycleProbes& probes,
                           const std::function<void(const SoakSample&)>& on_sample);

// What the cycles show, from the end of cycle 2 (the caches filled, every kernel loaded) to the
// last: resident memory and heap in use per cycle, GPU memory's change; the bound is 1 MiB of
// resident memory a cycle and no GPU memory.
struct CycleSummary {
  int cycles = 0;
  double rss_from_mib = 0, rss_to_mib = 0, rss_per_cycle_mib = 0;
  double heap_per_cycle_mib = 0;
  double gpu_from_mib = -1, gpu_to_mib = -1;
  int64_t results = 0, failed = 0;
  bool within_bound = false;  // >= 3 cycles and both bounds held
};
constexpr double kCycleRssBoundMib = 1.0;
CycleSummary summarize_cycles(const std::vector<SoakSample>& samples);
std::string cycle_report(const CycleSummary& s);

// The figures a soak is judged by: resident memory after the first minute (the first sample at or
// after 60 s, else the first) against the end, in percent; GPU memory min and max.
struct SoakSummary {
  double rss_first_minute_mib = 0, rss_end_mib = 0, rss_change_percent = 0;
  double rss_max_mib = 0;
  double gpu_min_mib = -1, gpu_max_mib = -1;  // < 0: not sampled
  int64_t results = 0, failed = 0;
  double minutes = 0;
};
SoakSummary summarize_soak(const std::vector<SoakSample>& samples);
// Three lines for the terminal.
std::string soak_report(const SoakSummary& s);

// The CSV: a header `elapsed_s,rss_kib,gpu_used_mib,results,failed`, one row per sample (an
// unknown GPU memory is an empty cell); samples of a soak in cycles have
// `cycle,elapsed_s,rss_kib,rss_anon_kib,rss_file_kib,heap_kib,gpu_used_mib,cupti_buffers_mib,
// results,failed` (kCycleCsvHeader). Both are read back.
std::string soak_csv(const std::vector<SoakSample>& samples);
// Reads that CSV back (the window soak's too); one line naming what is wrong otherwise.
Status parse_soak_csv(const std::string& text, std::vector<SoakSample>* out);
// The plot: resident memory (MiB) over minutes, with the +-2% band around the first minute's,
// and GPU memory in use in a second panel when sampled. `title` goes on top.
std::string soak_svg(const std::vector<SoakSample>& samples, const std::string& title);

}  // namespace fl
