#include "model/results.h"

#include <algorithm>
#include <map>
#include <utility>
#include <cmath>
#include <map>
#include <tuple>

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

void fill_provenance(Session* s) {
  for (Measurement& m : s->measurements) {
    if (m.provenance.known()) continue;
    m.provenance.gpu = s->device.name;
    m.provenance.driver_version = s->device.driver_version;
    m.provenance.measured_utc = s->created_utc;
    m.provenance.app_version = s->app_version;
    m.provenance.source = s->backend == "recorded" ? "recorded" : "live";
  }
}

std::string provenance_text(const std::vector<Measurement>& measurements) {
  // GPU -> (first date, last date, sources, count)
  struct Group {
    std::string first, last;
    std::vector<std::string> sources;
    int count = 0;
  };
  std::map<std::string, Group> by_gpu;
  std::vector<std::string> order;
  for (const Measurement& m : measurements) {
    if (!m.provenance.known()) continue;
    const std::string& gpu = m.provenance.gpu;
    if (!by_gpu.count(gpu)) order.push_back(gpu);
    Group& g = by_gpu[gpu];
    const std::string date = m.provenance.date();
    if (g.first.empty() || date < g.first) g.first = date;
    if (date > g.last) g.last = date;
    const bool live = m.provenance.source == "live";
    const std::string kind = live ? "live" : "recorded";
    if (std::find(g.sources.begin(), g.sources.end(), kind) == g.sources.end()) {
      g.sources.push_back(kind);
    }
    ++g.count;
  }
  const auto dates = [](const Group& g) {
    return g.first == g.last ? g.first : g.first + " to " + g.last;
  };
  if (order.empty()) return "";
  const Group& only = by_gpu[order.front()];
  if (order.size() == 1 && only.sources.size() == 1) {
    return (order.front().empty() ? std::string("unknown GPU") : order.front()) + ", " +
           dates(only);
  }
  std::string out = "mixed:";
  for (size_t i = 0; i < order.size(); ++i) {
    const Group& g = by_gpu[order[i]];
    std::string sources;
    for (const auto& src : g.sources) sources += (sources.empty() ? "" : "+") + src;
    out += std::string(i == 0 ? " " : ", ") + order[i] + " " + dates(g) + " " + sources + " (" +
           std::to_string(g.count) + ")";
  }
  return out;
}

void normalize_phase_records(LaunchPhases* phases) {
  std::vector<PhaseRecord>& records = phases->records;
  // A phase index past the names' bound names nothing the file could hold: counted as lost.
  const auto unnamed = std::remove_if(records.begin(), records.end(), [](const PhaseRecord& r) {
    return r.phase >= LaunchPhases::kMaxNames || r.end_ns < r.start_ns;
  });
  phases->lost += records.end() - unnamed;
  records.erase(unnamed, records.end());
  if (records.empty()) return;
  uint64_t first = UINT64_MAX;
  size_t phase_count = 0;
  for (const PhaseRecord& r : records) {
    first = std::min(first, r.start_ns);
    phase_count = std::max<size_t>(phase_count, r.phase + size_t(1));
  }
  for (PhaseRecord& r : records) {
    r.start_ns -= first;
    r.end_ns -= first;
  }
  while (phases->names.size() < phase_count)
    phases->names.push_back("phase " + std::to_string(phases->names.size()));
  if (phases->names.size() > LaunchPhases::kMaxNames) phases->names.resize(LaunchPhases::kMaxNames);
  std::stable_sort(records.begin(), records.end(), [](const PhaseRecord& a, const PhaseRecord& b) {
    return a.sm != b.sm ? a.sm < b.sm : a.start_ns < b.start_ns;
  });
}

std::vector<PhaseLane> phase_lanes(const LaunchPhases& phases) {
  const std::vector<PhaseRecord>& records = phases.records;
  // Each block's span on its SM ((sm, block) keys: a block runs on one SM).
  struct Span {
    uint64_t start = UINT64_MAX, end = 0;
    int slot = 0;
  };
  std::map<std::pair<uint16_t, uint32_t>, Span> blocks;
  for (const PhaseRecord& r : records) {
    Span& s = blocks[{r.sm, r.block}];
    s.start = std::min(s.start, r.start_ns);
    s.end = std::max(s.end, r.end_ns);
  }
  std::vector<std::pair<const std::pair<uint16_t, uint32_t>, Span>*> order;
  for (auto& b : blocks) order.push_back(&b);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return a->first.first != b->first.first ? a->first.first < b->first.first
                                            : a->second.start < b->second.start;
  });
  std::vector<uint64_t> slot_free;  // per slot of the current SM: when it is free again
  int sm = -1;
  for (auto* b : order) {
    if (b->first.first != sm) {
      sm = b->first.first;
      slot_free.clear();
    }
    size_t slot = 0;
    while (slot < slot_free.size() && slot_free[slot] > b->second.start) ++slot;
    if (slot == slot_free.size()) slot_free.push_back(0);
    slot_free[slot] = b->second.end;
    b->second.slot = static_cast<int>(slot);
  }
  std::vector<PhaseLane> lanes;
  lanes.reserve(records.size());
  for (const PhaseRecord& r : records) lanes.push_back({r.sm, blocks[{r.sm, r.block}].slot});
  return lanes;
}

}  // namespace fl
