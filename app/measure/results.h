// The results model (DESIGN.md §3): what one measurement of one fusion level found, and a
// session = device facts + measurements. One JSON schema (session_json.h) serves recordings,
// replay and `bench --out`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/lesson.h"

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

struct DeviceFacts {
  bool usable = false;
  std::string unusable_reason;  // one plain sentence when !usable
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t memory_bytes = 0;
  int driver_version = 0;   // e.g. 13000 for CUDA 13.0 driver API
  int runtime_version = 0;  // the CUDA runtime we were built with / loaded
  double roof_gbps = 0;     // copy bandwidth over 1 GiB, cold; 0 until measured
};

struct MeasureRequest {
  std::string lesson;
  int64_t size = 0;
  std::vector<int> levels;  // empty: every level of the lesson
  Precision precision = Precision::fp32;
  CacheMode cache = CacheMode::cold;
  int64_t inner = 0;        // row length for row-wise lessons; 0: the lesson's default
};

struct LaunchResult {
  LaunchTraffic textbook;     // kernel name, bytes it must move, FLOPs
  Stats time_us;              // per-launch duration over the repetitions
  double copy_gbps = 0;       // copy bandwidth moving textbook.bytes(), same cache mode
};

struct Measurement {
  std::string lesson;
  int64_t size = 0;
  int64_t inner = 0;  // row length (resolved), 0 for elementwise lessons
  int level = 0;
  std::string level_name;
  Precision precision = Precision::fp32;
  CacheMode cache = CacheMode::cold;
  std::string timing_method;  // "cuda_events" (CUPTI arrives with the engine issue)
  int repetitions = 0;
  std::vector<LaunchResult> launches;
  Stats chain_time_us;        // first launch start to last launch end, gaps included
  double chain_copy_gbps = 0; // copy bandwidth moving the chain's textbook bytes
  CheckResult check;

  int64_t textbook_bytes() const;
  // Achieved bandwidth on textbook bytes, from the median chain time.
  double achieved_gbps() const;
};

struct Session {
  static constexpr int kSchemaVersion = 1;
  std::string app_version;
  std::string created_utc;  // ISO 8601
  std::string backend;      // "live" or "recorded"
  DeviceFacts device;
  std::vector<Measurement> measurements;
};

// Speedup of `fused` over `unfused` from median chain times; 0 when either is missing/invalid.
double speedup(const Measurement& unfused, const Measurement& fused);

}  // namespace fl
