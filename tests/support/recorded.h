// Test support: measurements and sessions as a recording holds them, built in memory for tests
// that need results without a GPU (the replay backend, the window's state, the plots' series).
// Header only; needs nothing but the results model.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/results.h"

namespace fl::testing_support {

// One level of `lesson` at `size`, correct, timed with CUDA events over 100 repetitions, whose
// chain took `chain_us` (median). Level 0 is named "unfused", the others "fused". No launches:
// add them where a test reads per-launch numbers.
inline Measurement recorded_measurement(const std::string& lesson, int64_t size, int level,
                                        double chain_us, Precision precision = Precision::fp32,
                                        CacheMode cache = CacheMode::cold, int64_t inner = 0) {
  Measurement m;
  m.lesson = lesson;
  m.size = size;
  m.inner = inner;
  m.level = level;
  m.level_name = level == 0 ? "unfused" : "fused";
  m.precision = precision;
  m.cache = cache;
  m.timing_method = "cuda_events";
  m.repetitions = 100;
  m.chain_time_us.median = chain_us;
  m.check.passed = true;
  return m;
}

// The GPU the in-memory recordings were "made" on.
inline DeviceFacts recorded_h200() {
  DeviceFacts d;
  d.usable = true;
  d.name = "NVIDIA H200";
  d.cc_major = 9;
  d.sm_count = 132;
  d.l2_bytes = 60 << 20;
  return d;
}

// A live session recorded on recorded_h200() on 2026-11-21 holding `measurements`.
inline Session recorded_session(std::vector<Measurement> measurements) {
  Session s;
  s.created_utc = "2026-11-21T23:43:30Z";
  s.backend = "live";
  s.device = recorded_h200();
  s.measurements = std::move(measurements);
  return s;
}

// A phase timeline as the live engine keeps one (times from the first stamp): `blocks` blocks,
// block b on SM b % sms, each through every phase of `names` one after another (phase p of block
// b from b * 10 + p * 1000 ns, 900 ns long), so with blocks > sms two blocks overlap on an SM.
// The stamps cost 2%.
inline LaunchPhases sample_phases(int blocks, int sms, std::vector<std::string> names) {
  LaunchPhases p;
  p.names = std::move(names);
  for (int b = 0; b < blocks; ++b) {
    for (size_t ph = 0; ph < p.names.size(); ++ph) {
      PhaseRecord r;
      r.start_ns = static_cast<uint64_t>(b) * 10 + ph * 1000;
      r.end_ns = r.start_ns + 900;
      r.block = static_cast<uint32_t>(b);
      r.sm = static_cast<uint16_t>(b % sms);
      r.phase = static_cast<uint16_t>(ph);
      p.records.push_back(r);
    }
  }
  p.time_off_us = 10.0;
  p.time_on_us = 10.2;
  return p;
}

}  // namespace fl::testing_support
