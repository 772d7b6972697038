// The results model (DESIGN.md §3): what one measurement of one fusion level found, and a
// session = device facts + measurements. One JSON schema (session_json.h) serves recordings,
// replay and `bench --out`.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/lesson.h"
#include "model/gpu_conditions.h"

namespace fl {

enum class CacheMode { cold, warm };
const char* to_string(CacheMode mode);
bool parse_cache_mode(const std::string& text, CacheMode* out);

// Summary of repeated samples (microseconds, or whatever unit the samples carry).
struct Stats {
  double median = 0, min = 0, max = 0, p20 = 0, p80 = 0;
  int count = 0;
};
Stats summarize(std::vector<double> samples);

// Copy bandwidth measured in this run for one byte count and cache mode: the reference that
// every "% of copy" is judged against (faster of cudaMemcpy D2D and a 16-byte-vector copy).
struct CopyBandwidth {
  int64_t bytes = 0;  // bytes moved: read + written
  CacheMode cache = CacheMode::cold;
  double gbps = 0;
};

struct DeviceFacts {
  bool usable = false;
  std::string unusable_reason;  // one plain sentence when !usable
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t memory_bytes = 0;
  int driver_version = 0;                     // e.g. 13000 for CUDA 13.0 driver API
  int runtime_version = 0;                    // the CUDA runtime we were built with / loaded
  double roof_gbps = 0;                       // copy bandwidth over 1 GiB, cold; 0 until measured
  std::vector<CopyBandwidth> copy_bandwidth;  // every byte count measured so far, sorted
};

struct MeasureRequest {
  std::string lesson;
  int64_t size = 0;
  std::vector<int> levels;  // empty: every level of the lesson
  Precision precision = Precision::fp32;
  CacheMode cache = CacheMode::cold;
  int64_t inner = 0;  // row length for row-wise lessons; 0: the lesson's default
  // Kernel variants forced instead of the level table's choice: launch name -> variant
  // (`bench --variant ffn_fused=ffn_split`; kernels/level_table.h).
  std::map<std::string, std::string> variants;
  // The level table chooses its kernel variants as it would on a GPU of this compute capability
  // (x 10, e.g. 86) without the sm_90a kernels, not as on this one: the portable kernels that an
  // older GPU runs, measured on this one (`bench --choose-as 8.6`). 0: this GPU's own choice.
  int choose_as_cc = 0;
  // Phase timelines: after the timing phase, an extra pass with the kernels' phase stamps on
  // (kernels/phases.h) records each launch's phases and their cost. Off by default.
  bool phases = false;
};

// The bytes one launch moved as the GPU's own counters saw them (CUPTI range profiler, one run
// of the chain in the measurement's cache mode).
struct LaunchCounters {
  int64_t dram_read_bytes = 0;   // dram__bytes_read.sum
  int64_t dram_write_bytes = 0;  // dram__bytes_write.sum
  int64_t l2_bytes = 0;          // lts__t_bytes.sum: every byte requested from L2
};

// A launch's phase timeline (kernels/phases.h): what its kernel declared and recorded in one run
// with stamps on, and what the stamps cost.
struct LaunchPhases {
  // Bounds the engine keeps and the session reader enforces: records of one launch (the device
  // buffer holds this many; more are counted in `lost`), declared phase names.
  static constexpr size_t kMaxRecords = size_t(1) << 16;
  static constexpr size_t kMaxNames = 64;
  std::vector<std::string> names;  // a record's `phase` indexes these
  // One run's records, start_ns and end_ns counted from the earliest start (the launch's first
  // stamp), so they read as "ns since the launch started".
  std::vector<PhaseRecord> records;
  int64_t lost = 0;        // records the kernel made past the buffer's capacity (not kept)
  double time_off_us = 0;  // median launch time with stamps off, timed in the same pass
  double time_on_us = 0;   // the same with stamps on: the stamps' overhead is the difference
  // time_on / time_off - 1; 0 when either is unknown.
  double overhead() const {
    return time_off_us > 0 && time_on_us > 0 ? time_on_us / time_off_us - 1 : 0;
  }
};

struct LaunchResult {
  LaunchTraffic textbook;  // kernel name, bytes it must move, FLOPs
  // The kernel variant that ran ("ffn_cluster"; kernels/level_table.h); "" for a launch that has
  // one kernel. Read from older sessions' kernel records where they name a variant's kernel.
  std::string variant;
  Stats time_us;           // per-launch duration over the repetitions
  double copy_gbps = 0;    // copy bandwidth moving textbook.bytes(), same cache mode
  std::optional<LaunchCounters> counters;  // absent: not measured (yet, or not on this system)
  // Diagnostic only (`bench --compare-timers`): CUDA events around the same launches that
  // CUPTI timed. count == 0 when not taken. Not saved in sessions.
  Stats event_time_us;
  // Present when the measurement was asked for phases and this launch's kernel recorded some.
  std::optional<LaunchPhases> phases;
};

// One kernel execution as CUPTI's activity API recorded it. Timestamps are CUPTI's
// (CPU-normalised nanoseconds); the relative ones count from the first record of the repetition.
struct KernelRecord {
  int launch = 0;      // index into Measurement::launches
  std::string kernel;  // demangled short name ("gelu_kernel<float>")
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  int64_t start_rel_ns = 0;
  int64_t end_rel_ns = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;
  std::array<int, 3> grid{{0, 0, 0}};
  std::array<int, 3> block{{0, 0, 0}};
  int registers_per_thread = 0;
  int static_shared_bytes = 0;
  int dynamic_shared_bytes = 0;
};

// Where and when one measurement was made. It travels with the measurement through replay and
// re-saving, so a session saved from a replay still names the GPU, driver, date and build that
// measured it (docs/SESSION_FORMAT.md, "Provenance"). Empty: not known yet (a file without it
// gets its session's facts when loaded: fill_provenance).
struct Provenance {
  std::string gpu;           // "NVIDIA H100 80GB HBM3"
  int driver_version = 0;    // as DeviceFacts::driver_version
  std::string measured_utc;  // ISO 8601
  std::string app_version;   // the fusionlab that measured it
  // "live": measured by this program on this machine; else the recording it was replayed from
  // ("h100-2026-11-27/gemm_bf16_cold.json"), or "recorded" when that is not known.
  std::string source;
  bool known() const { return !gpu.empty() || !measured_utc.empty(); }
  std::string date() const { return measured_utc.substr(0, 10); }  // "2026-11-23"
};

// Where the DRAM/L2 counters of a measurement stand.
enum class CountersStatus {
  not_measured,  // not asked for (bench --no-counters), or the output check failed
  pending,       // the counter phase follows (the engine posts a second result)
  measured,      // every launch has counters
  unavailable,   // this system cannot measure them; counters_note says why and what to do
  failed,        // the counter phase ran into an error; counters_note has it
};
const char* to_string(CountersStatus status);
bool parse_counters_status(const std::string& text, CountersStatus* out);

struct Measurement {
  std::string lesson;
  int64_t size = 0;
  int64_t inner = 0;  // row length (resolved), 0 for elementwise lessons
  int level = 0;
  std::string level_name;
  Precision precision = Precision::fp32;
  CacheMode cache = CacheMode::cold;
  // "cupti_activity": kernel records of CUPTI's activity API; "cuda_events": CUDA events around
  // each launch (when CUPTI cannot be used, e.g. another profiler holds it).
  std::string timing_method;
  int repetitions = 0;
  std::vector<LaunchResult> launches;
  Stats chain_time_us;         // first launch start to last launch end, gaps included
  double chain_copy_gbps = 0;  // copy bandwidth moving the chain's textbook bytes
  CheckResult check;
  // One repetition's kernel records as CUPTI gave them (the repetition whose chain time is
  // closest to the median): the timeline and the trace export draw these. Empty with events.
  std::vector<KernelRecord> records;
  CountersStatus counters_status = CountersStatus::not_measured;
  std::string counters_note;  // one sentence when unavailable or failed
  Stats event_chain_time_us;  // diagnostic, like LaunchResult::event_time_us
  Provenance provenance;      // its GPU, driver, date, app version and source
  // Non-zero when its kernels were chosen as on a GPU of this compute capability (x 10) rather
  // than the measuring GPU's own (MeasureRequest::choose_as_cc): a portable-kernels series.
  int chosen_as_cc = 0;
  // Device memory the level's launches held, in bytes (Workspace::level_device_bytes: the
  // buffers they read or write as allocated, cuBLASLt's workspace where they call it); 0: not
  // known (a lesson that does not say, or a session written before it was recorded).
  int64_t peak_device_bytes = 0;
  // Clocks, throttling and other processes on the GPU around the timed repetitions (NVML);
  // sampled == false when not known.
  GpuConditions gpu;

  int64_t textbook_bytes() const;
  // Sum of every launch's counters; absent unless every launch has them.
  std::optional<LaunchCounters> counters_total() const;
  // Achieved bandwidth on textbook bytes, from the median chain time.
  double achieved_gbps() const;
};

struct Session {
  static constexpr int kSchemaVersion = 3;        // written (3: launches name their variant and may
                                                  // carry phase timelines)
  static constexpr int kOldestSchemaVersion = 1;  // still read (no counters, no records)
  std::string app_version;
  std::string created_utc;  // ISO 8601
  std::string backend;      // "live" or "recorded"
  DeviceFacts device;
  std::vector<Measurement> measurements;
};

// Every measurement of `s` without a provenance gets its session's facts: the device's name and
// driver, created_utc, app_version, and "live" (or "recorded" when the session was saved from a
// replay: a file of an older build that did not keep the recording's own facts).
void fill_provenance(Session* s);
// Whose measurements these are, as one line: "NVIDIA H100 80GB HBM3, 2026-11-23", "... 2026-11-21
// to 2026-11-23", or, where they mix GPUs or sources, "mixed: NVIDIA H100 80GB HBM3 2026-11-23
// (12), NVIDIA H200 2026-11-26 live (3)". Empty for no known provenance.
std::string provenance_text(const std::vector<Measurement>& measurements);
// Makes a launch's phase records as sessions keep them: times counted from the earliest start,
// sorted by SM then start; records with a phase index past LaunchPhases::kMaxNames or ending
// before they start are dropped and counted in `lost`; a phase recorded but not declared is
// named "phase N".
void normalize_phase_records(LaunchPhases* phases);

// Where each of a launch's phase records is drawn: its SM and, when blocks overlapped on that SM
// (several resident at once), which of the SM's rows ("slot") its block takes. A block keeps one
// slot for all its phases; slots are handed out first come (by the block's first start), each to
// the lowest slot free by then. The timeline's lanes and the trace's SM threads both use it.
struct PhaseLane {
  uint16_t sm = 0;
  int slot = 0;
};
std::vector<PhaseLane> phase_lanes(const LaunchPhases& phases);

// Speedup of `fused` over `unfused` from median chain times; 0 when either is missing/invalid.
double speedup(const Measurement& unfused, const Measurement& fused);

}  // namespace fl
