#include "viz/bandwidth_view.h"

#include <algorithm>
#include <map>

#include "model/sizes.h"
#include "kernels/catalog.h"
#include "viz/palette.h"

namespace fl::viz {

std::vector<PlotSeries> bandwidth_series(const std::vector<Measurement>& history,
                                         const std::string& lesson, Precision precision,
                                         CacheMode cache) {
  std::map<int, PlotSeries> by_level;
  std::map<int64_t, double> copy;  // per size: the top level's copy reference
  int top = -1;
  for (const Measurement& m : history) {
    if (m.lesson != lesson || m.precision != precision || m.cache != cache) continue;
    if (!m.check.passed || m.chain_time_us.median <= 0) continue;
    PlotSeries& s = by_level[m.level];
    s.label = "level " + std::to_string(m.level) + " " + m.level_name;
    s.points.push_back({static_cast<double>(m.size), m.achieved_gbps()});
    if (m.level >= top) {
      top = m.level;
      if (m.chain_copy_gbps > 0) copy[m.size] = m.chain_copy_gbps;
    }
  }
  const Lesson* info = find_lesson(lesson);
  if (info) top = info->level_count() - 1;
  std::vector<PlotSeries> out;
  for (auto& [level, s] : by_level) {
    s.color = palette::level_color(level, top);
    out.push_back(std::move(s));
  }
  if (!copy.empty()) {
    PlotSeries c;
    c.label = "copy moving the fused level's bytes";
    for (const auto& [size, gbps] : copy) c.points.push_back({static_cast<double>(size), gbps});
    c.color = palette::reference;
    c.hollow_markers = true;
    c.line_thickness = 1.5f;
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<PlotSeries> bandwidth_overlay_series(const std::vector<Measurement>& history,
                                                 const std::string& lesson, Precision precision,
                                                 CacheMode cache, const std::string& source) {
  std::vector<PlotSeries> out;
  for (PlotSeries& s : bandwidth_series(history, lesson, precision, cache)) {
    if (s.hollow_markers) continue;  // the copy reference: the plot keeps its own
    // Every compared series in the compared recording's colour, dashed; the read-out names
    // its level.
    s.color = palette::compared;
    s.dashed = true;
    s.line_thickness = 1.8f;
    s.marker_radius = 3.5f;
    s.label += ", " + source;
    s.in_legend = out.empty();
    if (s.in_legend) s.legend_label = "dashed: " + source;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<PlotSeries> bandwidth_peer_series(const std::vector<Measurement>& history,
                                              const PeerFile& peers, const std::string& lesson,
                                              Precision precision, CacheMode cache,
                                              const std::string& suffix) {
  std::vector<PlotSeries> out;
  if (cache != CacheMode::cold) return out;
  const Lesson* info = find_lesson(lesson);
  if (!info) return out;
  const int top = info->level_count() - 1;
  std::map<int64_t, int64_t> bytes;  // per size: the top level's textbook bytes
  for (const Measurement& m : history) {
    if (m.lesson == lesson && m.precision == precision && m.cache == cache && m.level == top) {
      bytes[m.size] = m.textbook_bytes();
    }
  }
  const std::vector<const PeerSeries*> series = compile_first(peers.find(lesson, precision));
  for (size_t i = 0; i < series.size(); ++i) {
    PlotSeries s;
    s.label = series[i]->label + suffix;
    for (const PeerPoint& p : series[i]->points) {
      const auto found = bytes.find(p.size);
      if (found == bytes.end() || !p.passed || p.median_us <= 0) continue;
      s.points.push_back(
          {static_cast<double>(p.size), double(found->second) / (p.median_us * 1e3)});
    }
    if (s.points.empty()) continue;
    s.color = palette::peers[i < 3 ? i : 2];
    s.hollow_markers = true;
    s.dashed = i > 0;
    s.line_thickness = 1.5f;
    s.marker_radius = 3.0f;
    out.push_back(std::move(s));
  }
  return out;
}

PlotSpec bandwidth_plot_spec(const std::vector<PlotSeries>& series, const std::string& size_unit,
                             int64_t size_min, int64_t size_max) {
  PlotSpec spec;
  spec.x_title = "tensor size (" + size_unit + ", log scale)";
  spec.y_title = "achieved GB/s on textbook bytes (median chain time)";
  spec.x_unit = size_unit;
  spec.x_min = static_cast<double>(size_min);
  spec.x_max = static_cast<double>(size_max);
  spec.log_base = 2;
  spec.x_format = [](double x) { return format_size(static_cast<int64_t>(x + 0.5)); };
  spec.y_suffix = " GB/s";
  spec.series = series;
  if (series.empty()) spec.note = "No measurement yet.";
  return spec;
}

}  // namespace fl::viz
