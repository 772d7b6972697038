#include "model/results.h"

#include <algorithm>
#include <cmath>

namespace fl {

const char* to_string(CacheMode mode) {
  return mode == CacheMode::cold ? "cold" : "warm";
}

bool parse_cache_mode(const std::string& text, CacheMode* out) {
  if (text == "cold")
    *out = CacheMode::cold;
  else if (text == "warm")
    *out = CacheMode::warm;
  else
    return false;
  return true;
}

const char* to_string(CountersStatus status) {
  switch (status) {
    case CountersStatus::not_measured:
      return "not_measured";
    case CountersStatus::pending:
      return "pending";
    case CountersStatus::measured:
      return "measured";
    case CountersStatus::unavailable:
      return "unavailable";
    case CountersStatus::failed:
      return "failed";
  }
  return "not_measured";
}

bool parse_counters_status(const std::string& text, CountersStatus* out) {
  for (CountersStatus s :
       {CountersStatus::not_measured, CountersStatus::pending, CountersStatus::measured,
        CountersStatus::unavailable, CountersStatus::failed}) {
    if (text == to_string(s)) {
      *out = s;
      return true;
    }
  }
  return false;
}

namespace {
// Linear interpolation between closest ranks on sorted samples, q in [0, 1].
double quantile_sorted(const std::vector<double>& s, double q) {
  const double pos = q * (s.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}
}  // namespace

Stats summarize(std::vector<double> samples) {
  Stats st;
  if (samples.empty()) return st;
  std::sort(samples.begin(), samples.end());
  st.count = static_cast<int>(samples.size());
  st.min = samples.front();
  st.max = samples.back();
  st.median = quantile_sorted(samples, 0.5);
  st.p20 = quantile_sorted(samples, 0.2);
  st.p80 = quantile_sorted(samples, 0.8);
  return st;
}

int64_t Measurement::textbook_bytes() const {
  int64_t sum = 0;
  for (const auto& l : launches) sum += l.textbook.bytes();
  return sum;
}

std::optional<LaunchCounters> Measurement::counters_total() const {
  if (launches.empty()) return std::nullopt;
  LaunchCounters total;
  for (const auto& l : launches) {
    if (!l.counters) return std::nullopt;
    total.dram_read_bytes += l.counters->dram_read_bytes;
    total.dram_write_bytes += l.counters->dram_write_bytes;
    total.l2_bytes += l.counters->l2_bytes;
  }
  return total;
}

double Measurement::achieved_gbps() const {
  if (chain_time_us.median <= 0) return 0;
  return textbook_bytes() / (chain_time_us.median * 1e3);  // bytes/us -> GB/s is 1e-3
}

double speedup(const Measurement& unfused, const Measurement& fused) {
  if (unfused.chain_time_us.median <= 0 || fused.chain_time_us.median <= 0) return 0;
  if (!unfused.check.passed || !fused.check.passed) return 0;
  return unfused.chain_time_us.median / fused.chain_time_us.median;
}

}  // namespace fl
