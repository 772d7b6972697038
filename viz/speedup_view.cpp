#include "viz/speedup_view.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "model/sizes.h"

namespace fl::viz {
namespace {

bool same_point(const Measurement& a, const Measurement& b) {
  return a.lesson == b.lesson && a.size == b.size && a.precision == b.precision &&
         a.cache == b.cache;
}

std::vector<PlotPoint> to_plot_points(const std::vector<SpeedupPoint>& points) {
  std::vector<PlotPoint> out;
  for (const auto& p : points)
    out.push_back({static_cast<double>(p.size), p.speedup, p.lo, p.hi, p.disturbed});
  return out;
}

}  // namespace

std::vector<SpeedupPoint> speedup_series(const std::vector<Measurement>& measurements,
                                         const std::string& lesson, Precision precision,
                                         CacheMode cache, int level) {
  // Per size: level 0 and the chosen level (or the highest level seen).
  struct Pair {
    const Measurement* unfused = nullptr;
    const Measurement* top = nullptr;
  };
  std::map<int64_t, Pair> by_size;
  for (const auto& m : measurements) {
    if (m.lesson != lesson || m.precision != precision || m.cache != cache) continue;
    Pair& p = by_size[m.size];
    if (m.level == 0) p.unfused = &m;
    if (level >= 0 ? m.level == level : (m.level > 0 && (!p.top || m.level > p.top->level))) {
      p.top = &m;
    }
  }
  std::vector<SpeedupPoint> out;
  for (const auto& [size, pair] : by_size) {
    if (!pair.unfused || !pair.top) continue;
    const double s = speedup(*pair.unfused, *pair.top);
    if (s <= 0) continue;
    SpeedupPoint p{size, s};
    p.disturbed = pair.unfused->gpu.disturbed() || pair.top->gpu.disturbed();
    const Stats &a = pair.unfused->chain_time_us, &b = pair.top->chain_time_us;
    if (a.p20 > 0 && b.p20 > 0) {
      p.lo = a.p20 / b.p80;
      p.hi = a.p80 / b.p20;
    }
    out.push_back(p);
  }
  return out;
}

void merge_measurements(std::vector<Measurement>* history, const std::vector<Measurement>& fresh) {
  for (const auto& m : fresh) {
    history->erase(std::remove_if(history->begin(), history->end(),
                                  [&](const Measurement& old) { return same_point(old, m); }),
                   history->end());
  }
  history->insert(history->end(), fresh.begin(), fresh.end());
}

double byte_ratio_limit(const Lesson& lesson, int64_t size, Precision precision, int level) {
  if (lesson.level_count() < 2) return 0;
  if (level < 0 || level >= lesson.level_count()) level = lesson.level_count() - 1;
  const Shape shape = lesson.resolve(Shape(size));  // row-wise lessons: their default row length
  const int64_t unfused = total_bytes(lesson.traffic(0, shape, precision));
  const int64_t fused = total_bytes(lesson.traffic(level, shape, precision));
  return fused > 0 ? static_cast<double>(unfused) / fused : 0;
}

std::string crossover_text(const std::vector<SpeedupPoint>& points, const std::string& unit) {
  for (size_t i = 0; i + 1 < points.size(); ++i) {
    const double a = points[i].speedup - 1.0, b = points[i + 1].speedup - 1.0;
    if ((a > 0 && b < 0) || (a < 0 && b > 0)) {
      return "crosses 1x between " + format_size(points[i].size) + " and " +
             format_size(points[i + 1].size) + " " + unit;
    }
  }
  return {};
}

// The series drawn under the measured curve: the published reference, compared recordings,
// and PyTorch's peers.
static void add_series_under_measured(const SpeedupView& view, PlotSpec* spec_out) {
  PlotSpec& spec = *spec_out;
  if (!view.reference.empty()) {
    PlotSeries ref;
    ref.label = view.reference_label;
    ref.points = to_plot_points(view.reference);
    ref.color = palette::reference;
    ref.line_thickness = 1.5f;
    ref.hollow_markers = true;
    spec.series.push_back(std::move(ref));
  }
  // Compared recordings under the measured curve, dashed, each its own shade.
  for (size_t i = 0; i < view.overlays.size(); ++i) {
    PlotSeries over;
    over.label = view.overlays[i].label;
    over.points = to_plot_points(view.overlays[i].points);
    over.color = i == 0 ? palette::compared : palette::compared_second;
    over.line_thickness = 2.0f;
    over.marker_radius = 3.5f;
    over.dashed = true;
    spec.series.push_back(std::move(over));
  }
  // PyTorch peers: reference series, thin, hollow markers, torch.compile solid and lightest.
  for (size_t i = 0; i < view.peers.size(); ++i) {
    PlotSeries peer;
    peer.label = view.peers[i].label;
    peer.points = to_plot_points(view.peers[i].points);
    peer.color = palette::peers[i < 3 ? i : 2];
    peer.line_thickness = 1.5f;
    peer.marker_radius = 3.0f;
    peer.hollow_markers = true;
    peer.dashed = i > 0;
    spec.series.push_back(std::move(peer));
  }
}

PlotSpec speedup_plot_spec(const SpeedupView& view) {
  PlotSpec spec;
  spec.x_title = "tensor size (" + view.size_unit + ", log scale)";
  spec.y_title = "speedup over level 0 (level 0 time / this level's time)";
  spec.x_unit = view.size_unit;
  spec.x_min = static_cast<double>(view.size_min);
  spec.x_max = static_cast<double>(view.size_max);
  spec.log_base = 2;
  spec.x_format = [](double x) { return format_size(static_cast<int64_t>(x + 0.5)); };
  spec.y_suffix = "x";
  spec.note = view.note;

  add_series_under_measured(view, &spec);
  PlotSeries measured;
  measured.label = view.measured_label;
  measured.legend_label = view.measured_legend;
  measured.points = to_plot_points(view.measured);
  measured.color = palette::level_color(view.level, view.top_level);
  measured.line_thickness = 2.5f;
  measured.band = true;  // p20-p80 of the repetitions
  measured.marker_radius = 4.5f;
  spec.series.push_back(std::move(measured));
  // The portable kernels: what an older GPU runs at this level, in the level's colour, dashed;
  // after the measured curve, so the legend names it after the curve it is read against.
  if (!view.portable.points.empty()) {
    PlotSeries portable;
    portable.label = view.portable.label;
    portable.legend_label = view.portable_legend;
    portable.points = to_plot_points(view.portable.points);
    portable.color = palette::level_color(view.level, view.top_level);
    portable.line_thickness = 2.0f;
    portable.marker_radius = 3.5f;
    portable.hollow_markers = true;
    portable.dashed = true;
    spec.series.push_back(std::move(portable));
  }

  if (view.byte_ratio_limit > 0) {
    char label[64];
    std::snprintf(label, sizeof(label), "byte-ratio limit %.1fx", view.byte_ratio_limit);
    spec.reference.enabled = true;
    spec.reference.y = view.byte_ratio_limit;
    spec.reference.label = label;
    spec.reference.color = palette::reference;
  }
  // The 1x line: above it the level is faster than level 0, below it slower.
  PlotReferenceLine unity;
  unity.enabled = true;
  unity.y = 1.0;
  unity.label = "1x: as fast as level 0";
  unity.color = palette::reference_dim;
  unity.dotted = true;
  spec.more_lines.push_back(unity);
  if (view.current_size > 0) {
    spec.marker.enabled = true;
    spec.marker.x = static_cast<double>(view.current_size);
    spec.marker.label = format_size(view.current_size);
  }
  return spec;
}

PlotHover draw_speedup_view(const char* id, const SpeedupView& view, ImVec2 size) {
  return plot_widget(id, speedup_plot_spec(view), size);
}

}  // namespace fl::viz

namespace fl::viz {

std::vector<SpeedupOverlay> peer_speedup_series(const std::vector<Measurement>& measurements,
                                                const PeerFile& peers, const std::string& lesson,
                                                Precision precision, CacheMode cache,
                                                const std::string& label_suffix) {
  std::vector<SpeedupOverlay> out;
  if (cache != CacheMode::cold) return out;
  std::vector<std::pair<int64_t, double>> level0;  // size, our level 0's median
  for (const Measurement& m : measurements) {
    if (m.lesson == lesson && m.precision == precision && m.cache == cache && m.level == 0 &&
        m.check.passed && m.chain_time_us.median > 0) {
      level0.emplace_back(m.size, m.chain_time_us.median);
    }
  }
  std::sort(level0.begin(), level0.end());
  const std::vector<const PeerSeries*> series = compile_first(peers.find(lesson, precision));
  for (const PeerSeries* s : series) {
    SpeedupOverlay overlay;
    overlay.label = s->label + label_suffix;
    for (const auto& [size, ours] : level0) {
      for (const PeerPoint& p : s->points) {
        if (p.size != size || !p.passed || p.median_us <= 0) continue;
        SpeedupPoint point;
        point.size = size;
        point.speedup = ours / p.median_us;
        point.lo = p.p80_us > 0 ? ours / p.p80_us : point.speedup;
        point.hi = p.p20_us > 0 ? ours / p.p20_us : point.speedup;
        overlay.points.push_back(point);
      }
    }
    if (!overlay.points.empty()) out.push_back(std::move(overlay));
  }
  return out;
}

}  // namespace fl::viz
