#include "app/measure/results.h"

#include <algorithm>
#include <cmath>

namespace fl {

const char* to_string(CacheMode mode) { return mode == CacheMode::cold ? "cold" : "warm"; }

bool parse_cache_mode(const std::string& text, CacheMode* out) {
  if (text == "cold") *out = CacheMode::cold;
  else if (text == "warm") *out = CacheMode::warm;
  else return false;
  return true;
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
