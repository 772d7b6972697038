// Measurements for the views' tests, made from the lessons' own traffic models (no GPU): the
// textbook bytes and FLOPs are the lesson's; times, counters and records are set by each test.
#pragma once

#include <string>

#include "model/results.h"
#include "kernels/catalog.h"

namespace fl::viz::testing {

constexpr int64_t kMiB = int64_t(1) << 20;

// The H200 of the shipped recording: 60 MiB of L2.
inline DeviceFacts h200() {
  DeviceFacts d;
  d.usable = true;
  d.name = "NVIDIA H200";
  d.sm_count = 132;
  d.l2_bytes = 60 * kMiB;
  d.memory_bytes = int64_t(143) << 30;
  d.roof_gbps = 4315;
  return d;
}

// One level of `lesson_id` at `size`, fp32, every launch `us_each` µs, no gaps, a passed check.
inline Measurement lesson_level(const std::string& lesson_id, int64_t size, int level,
                                double us_each, CacheMode cache = CacheMode::cold) {
  const Lesson* lesson = find_lesson(lesson_id);
  Measurement m;
  m.lesson = lesson_id;
  m.size = size;
  m.level = level;
  m.cache = cache;
  m.level_name = lesson ? lesson->info().levels[level].name : "";
  if (!lesson) return m;
  for (const LaunchTraffic& t : lesson->traffic(level, Shape(size), Precision::fp32)) {
    LaunchResult l;
    l.textbook = t;
    l.time_us.median = us_each;
    m.launches.push_back(l);
  }
  m.chain_time_us.median = us_each * static_cast<double>(m.launches.size());
  m.check.passed = true;
  m.check.rel_l2_error = 3.6e-8;
  m.check.tolerance = 1e-5;
  return m;
}

// Counters that saw exactly the textbook bytes times `dram_share`, and L2 requests of 1.5x.
inline void add_counters(Measurement* m, double dram_share) {
  for (auto& l : m->launches) {
    l.counters = LaunchCounters{static_cast<int64_t>(l.textbook.bytes_read * dram_share),
                                static_cast<int64_t>(l.textbook.bytes_written * dram_share),
                                static_cast<int64_t>(l.textbook.bytes() * 1.5)};
  }
  m->counters_status = CountersStatus::measured;
}

// Raw records: launches back to back with `gap_us` between them.
inline void add_records(Measurement* m, double gap_us) {
  int64_t t = 0;
  m->records.clear();
  for (size_t k = 0; k < m->launches.size(); ++k) {
    KernelRecord r;
    r.launch = static_cast<int>(k);
    r.kernel = "elementwise_kernel<float, " + m->launches[k].textbook.kernel + ">";
    r.start_rel_ns = t;
    r.end_rel_ns = t + static_cast<int64_t>(m->launches[k].time_us.median * 1e3);
    r.start_ns = 1000000 + static_cast<uint64_t>(r.start_rel_ns);
    r.end_ns = 1000000 + static_cast<uint64_t>(r.end_rel_ns);
    r.grid = {{65536, 1, 1}};
    r.block = {{256, 1, 1}};
    r.registers_per_thread = 19;
    r.static_shared_bytes = 0;
    r.dynamic_shared_bytes = 1024;
    m->records.push_back(r);
    t = r.end_rel_ns + static_cast<int64_t>(gap_us * 1e3);
  }
  m->chain_time_us.median = t * 1e-3 - gap_us;
  m->timing_method = "cupti_activity";
}

}  // namespace fl::viz::testing
