// The plot widget's layout (plot.h): axis ranges, ticks, screen positions and hover picking,
// computed as plain data. Nothing here needs an ImGui context, so tests run it headless.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "viz/plot.h"

namespace fl::viz {
namespace {

ImVec2 vec(float x, float y) {
  return ImVec2(x, y);
}

double log_in_base(double x, double base) {
  return std::log(x) / std::log(base);
}

using TextWidth = std::function<float(const std::string&)>;

// The style's text measure, or char_width per character.
TextWidth text_width_of(const PlotStyle& style) {
  if (style.text_width) return style.text_width;
  const float cw = style.char_width > 0 ? style.char_width : 0.6f * style.font_size;
  return [cw](const std::string& text) { return cw * static_cast<float>(text.size()); };
}

std::string default_format(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}

// The axis range spans at least a factor `base` so a single size still gets a readable axis.
void sanitize_log_range(double* lo, double* hi, double base) {
  if (!(*lo > 0)) *lo = 1;
  if (!(*hi > *lo)) *hi = *lo * base;
}

// How much of the plotted data a box covers: every point inside counts 4, and every sample of
// the lines joining points (8 per segment) and of the reference line counts 1.
int data_covered(const PlotLayout& L, ImVec2 lo, ImVec2 hi, bool with_reference = true) {
  const auto inside = [&](ImVec2 p) {
    return p.x >= lo.x && p.x <= hi.x && p.y >= lo.y && p.y <= hi.y;
  };
  int covered = 0;
  for (const auto& s : L.series) {
    for (size_t i = 0; i < s.screen.size(); ++i) {
      if (inside(s.screen[i])) covered += 4;
      if (i + 1 == s.screen.size()) continue;
      for (int k = 1; k < 8; ++k) {
        const float t = k / 8.0f;
        const ImVec2 a = s.screen[i], b = s.screen[i + 1];
        if (inside(vec(a.x + (b.x - a.x) * t, a.y + (b.y - a.y) * t))) ++covered;
      }
    }
  }
  if (with_reference) {
    for (const auto& line : L.lines) {
      for (int k = 0; k <= 32; ++k) {
        const float x = L.frame_min.x + (L.frame_max.x - L.frame_min.x) * k / 32.0f;
        if (inside(vec(x, line.y))) ++covered;
      }
    }
  }
  return covered;
}

// The legend's rows in drawing order: the series that have a legend label (each followed by its
// band's row when it shades one), then the reference lines.
void build_legend(PlotLayout* L, const PlotSpec& spec) {
  L->legend.clear();
  for (size_t i = 0; i < L->series.size(); ++i) {
    const auto& s = L->series[i];
    if (s.legend_label.empty()) continue;
    L->legend.push_back({PlotLegendEntry::series, s.legend_label, static_cast<int>(i)});
    if (s.band && !s.data.empty() && i < spec.series.size() && !spec.series[i].band_label.empty()) {
      L->legend.push_back({PlotLegendEntry::band, spec.series[i].band_label, static_cast<int>(i)});
    }
  }
  for (size_t i = 0; i < L->lines.size(); ++i) {
    if (!L->lines[i].label.empty()) {
      L->legend.push_back({PlotLegendEntry::line, L->lines[i].label, static_cast<int>(i)});
    }
  }
}

std::vector<std::string> legend_labels(const PlotLayout& L) {
  std::vector<std::string> labels;
  for (const auto& e : L.legend) labels.push_back(e.label);
  return labels;
}

// The legend's box from the labels' widths, in the corner that hides least of the series, then
// least of the reference line.
// Returns how much of the series (data_covered without the reference line) that box still
// hides: 0 when a corner is free. Covering a stretch of the flat reference line hides nothing
// the legend does not say, so that alone does not send the legend out of the frame.
int place_legend(PlotLayout* L, const TextWidth& text_width) {
  const float fs = L->font_size, pad = fs * 0.4f, swatch = fs * 1.8f, margin = fs * 0.5f;
  const std::vector<std::string> labels = legend_labels(*L);
  float longest = 0;
  for (const auto& label : labels) longest = std::max(longest, text_width(label));
  const int rows = static_cast<int>(labels.size());
  const float w = pad * 3 + swatch + longest;
  const float h = pad * 2 + L->legend_row_height * static_cast<float>(rows);
  int best = 0, best_covered = std::numeric_limits<int>::max();
  for (int corner = 0; corner < 4; ++corner) {
    const bool right = corner <= 1, bottom = corner == 0 || corner == 3;
    const ImVec2 anchor = vec(right ? L->frame_max.x - margin : L->frame_min.x + margin,
                              bottom ? L->frame_max.y - margin : L->frame_min.y + margin);
    const ImVec2 lo = vec(right ? anchor.x - w : anchor.x, bottom ? anchor.y - h : anchor.y);
    const ImVec2 hi = vec(lo.x + w, lo.y + h);
    // Hiding series data weighs more than any stretch of the reference line (33 samples).
    const int series = data_covered(*L, lo, hi, false);
    const int covered = rows == 0 ? 0 : series * 64 + (data_covered(*L, lo, hi) - series);
    if (covered < best_covered) {
      best = corner;
      best_covered = covered;
      L->legend_anchor = anchor;
      L->legend_min = lo;
      L->legend_max = hi;
    }
  }
  L->legend_corner = best;
  return rows == 0 ? 0 : data_covered(*L, L->legend_min, L->legend_max, false);
}

// One entry's width in the strip above the frame: swatch, gap, text (estimated), space after.
float strip_entry_width(const std::string& label, float fs, const TextWidth& text_width) {
  return fs * 1.8f + fs * 0.4f + text_width(label) + fs * 1.0f;
}

// The rows the legend's entries take when they flow left to right across `width`.
int strip_rows(const std::vector<std::string>& labels, float width, float fs,
               const TextWidth& text_width) {
  int rows = labels.empty() ? 0 : 1;
  float x = 0;
  for (const auto& label : labels) {
    const float w = strip_entry_width(label, fs, text_width);
    if (x > 0 && x + w > width) {
      ++rows;
      x = 0;
    }
    x += w;
  }
  return rows;
}

}  // namespace

// ---- [SECTION] layout -----------------------------------------------------------------------

float PlotLayout::x_to_screen(double x) const {
  const double l0 = log_in_base(x_min, log_base), l1 = log_in_base(x_max, log_base);
  const double t = (log_in_base(std::max(x, 1e-300), log_base) - l0) / (l1 - l0);
  return static_cast<float>(frame_min.x + t * (frame_max.x - frame_min.x));
}

float PlotLayout::y_to_screen(double y) const {
  const double t = y_log ? (std::log10(std::max(y, 1e-300)) - std::log10(y_min)) /
                               (std::log10(y_max) - std::log10(y_min))
                         : (y - y_min) / (y_max - y_min);
  return static_cast<float>(frame_max.y - t * (frame_max.y - frame_min.y));
}

std::string PlotLayout::format_x(double x) const {
  return x_format ? x_format(x) : default_format(x);
}

std::string PlotLayout::format_y(double y, int decimals) const {
  char buf[48];
  if (y_log) {
    std::snprintf(buf, sizeof(buf), "%g%s", y, y_suffix.c_str());
    return buf;
  }
  std::snprintf(buf, sizeof(buf), "%.*f%s", decimals, y, y_suffix.c_str());
  return buf;
}

double nice_linear_step(double* lo, double* hi, int max_ticks) {
  max_ticks = std::max(max_ticks, 2);
  if (!(*hi > *lo)) *hi = *lo + 1;
  const double raw = (*hi - *lo) / (max_ticks - 1);
  double decade = std::pow(10.0, std::floor(std::log10(raw)));
  // The smallest 1/2/5 x 10^k step whose widened range needs at most max_ticks ticks.
  for (int guard = 0; guard < 12; ++guard, decade *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double step = m * decade;
      const double a = std::floor(*lo / step + 1e-9), b = std::ceil(*hi / step - 1e-9);
      if (b - a + 1 <= max_ticks) {
        *lo = a * step;
        *hi = b * step;
        return step;
      }
    }
  }
  return *hi - *lo;  // unreachable for finite input
}

namespace {

// The y range of the data (with its bands) and the reference lines; lo > hi when there is none.
void data_y_range(const PlotSpec& spec, double* lo, double* hi) {
  *lo = std::numeric_limits<double>::infinity();
  *hi = -*lo;
  const auto take = [&](double v) {
    if (!std::isfinite(v)) return;
    *lo = std::min(*lo, v);
    *hi = std::max(*hi, v);
  };
  for (const auto& s : spec.series) {
    for (const auto& p : s.points) {
      if (!std::isfinite(p.y)) continue;
      take(p.y);
      if (s.band && p.lo < p.hi) {
        take(p.lo);
        take(p.hi);
      }
    }
  }
  if (spec.reference.enabled) take(spec.reference.y);
  for (const auto& line : spec.more_lines) {
    if (line.enabled) take(line.y);
  }
}

// The y axis between `top` and `bottom`: log when asked (or automatic over more than a decade),
// else linear with 1-2-5 steps (and zero when asked). Sets y_log, y_min, y_max and y_decimals;
// returns the labelled values.
std::vector<double> y_axis(const PlotSpec& spec, float top, float bottom, float fs, PlotLayout* L) {
  double lo = 0, hi = 0;
  data_y_range(spec, &lo, &hi);
  L->y_log =
      spec.y_auto && lo > 0 && hi >= lo &&
      (spec.y_scale == PlotYScale::log || (spec.y_scale == PlotYScale::automatic && hi > 10 * lo));
  std::vector<double> y_values;  // the labelled ticks
  // At least three labelled values: two say nothing about the scale between them.
  const int max_y_ticks = std::clamp(static_cast<int>((bottom - top) / (fs * 1.5f)), 3, 10);
  if (L->y_log) {
    // Whole decades around the data; 2 and 5 between them while the decades are few.
    const int d0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
    const int d1 = static_cast<int>(std::ceil(std::log10(hi * 1.15) - 1e-9));
    lo = std::pow(10.0, d0);
    hi = std::pow(10.0, std::max(d1, d0 + 1));
    const int decades = static_cast<int>(std::lround(std::log10(hi / lo)));
    const bool fine = decades * 3 + 1 <= max_y_ticks || decades < 2;
    // Every `every`-th decade labelled, so that three labels at least show.
    const int every = std::clamp((decades + max_y_ticks - 2) / std::max(max_y_ticks - 1, 1), 1,
                                 std::max(1, decades / 2));
    for (int d = d0; d <= d0 + decades; ++d) {
      if ((d - d0) % every == 0) y_values.push_back(std::pow(10.0, d));
      if (fine && d < d0 + decades) {
        y_values.push_back(2 * std::pow(10.0, d));
        y_values.push_back(5 * std::pow(10.0, d));
      }
    }
    std::sort(y_values.begin(), y_values.end());
    L->y_decimals = 0;
  } else {
    if (spec.y_auto) {
      if (!(hi >= lo)) {  // nothing to show yet: a unit range
        lo = 0;
        hi = 1;
      }
      if (spec.y_include_zero) lo = std::min(lo, 0.0);
      hi += (hi > lo ? hi - lo : 1.0) * 0.1;
    } else {
      lo = spec.y_min;
      hi = spec.y_max;
    }
    double range_lo = lo, range_hi = hi;
    double y_step = nice_linear_step(&range_lo, &range_hi, max_y_ticks);
    if (std::lround((range_hi - range_lo) / y_step) + 1 < 3) {  // 0x and 5x: one finer step
      range_lo = lo;
      range_hi = hi;
      y_step = nice_linear_step(&range_lo, &range_hi, max_y_ticks + 1);
    }
    lo = range_lo;
    hi = range_hi;
    L->y_decimals =
        y_step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(y_step) - 1e-9)));
    const int y_count = static_cast<int>(std::lround((hi - lo) / y_step)) + 1;
    for (int i = 0; i < y_count; ++i) y_values.push_back(lo + i * y_step);
  }
  L->y_min = lo;
  L->y_max = hi;
  return y_values;
}

// x ticks at integer powers of the base. Every `step`-th power is labelled, with step the
// smallest of 1, 2, 5, 10, ... that keeps labels apart, so 2^10, 2^20 (1K, 1M) always show.
void x_ticks(float fs, float cw, PlotLayout* L) {
  const int e0 = static_cast<int>(std::ceil(log_in_base(L->x_min, L->log_base) - 1e-9));
  const int e1 = static_cast<int>(std::floor(log_in_base(L->x_max, L->log_base) + 1e-9));
  size_t widest_x = 1;
  for (int e = e0; e <= e1; ++e) {
    widest_x = std::max(widest_x, L->format_x(std::pow(L->log_base, e)).size());
  }
  const double px_per_power =
      (L->frame_max.x - L->frame_min.x) /
      (log_in_base(L->x_max, L->log_base) - log_in_base(L->x_min, L->log_base));
  int step = 1;
  for (int candidate : {1, 2, 5, 10, 20, 50, 100}) {
    step = candidate;
    if (candidate * px_per_power >= widest_x * cw + fs) break;
  }
  for (int e = e0; e <= e1; ++e) {
    const double v = std::pow(L->log_base, e);
    const bool major = ((e % step) + step) % step == 0;
    if (!major && px_per_power < 4) continue;  // minor ticks only where they stay apart
    L->x_ticks.push_back({L->x_to_screen(v), v, major ? L->format_x(v) : std::string(), major});
  }
}

// One series in screen space: its points sorted by x (only those a log x axis can show), and its
// band clamped to the y range.
PlotSeriesLayout series_layout(const PlotSeries& s, const PlotLayout& L) {
  PlotSeriesLayout S;
  S.label = s.label;
  S.color = s.color;
  S.line_thickness = s.line_thickness;
  S.marker_radius = s.marker_radius;
  S.hollow_markers = s.hollow_markers;
  S.dashed = s.dashed;
  S.legend_label = !s.in_legend ? std::string() : s.legend_label.empty() ? s.label : s.legend_label;
  for (const auto& p : s.points) {
    if (p.x > 0 && std::isfinite(p.y)) S.data.push_back(p);
  }
  std::sort(S.data.begin(), S.data.end(),
            [](const PlotPoint& a, const PlotPoint& b) { return a.x < b.x; });
  for (const auto& p : S.data) S.screen.push_back(vec(L.x_to_screen(p.x), L.y_to_screen(p.y)));
  S.band = s.band;
  if (s.band) {
    for (const auto& p : S.data) {
      const double lo = p.lo < p.hi ? p.lo : p.y, hi = p.lo < p.hi ? p.hi : p.y;
      S.band_lo.push_back(vec(L.x_to_screen(p.x), L.y_to_screen(std::max(lo, L.y_min))));
      S.band_hi.push_back(vec(L.x_to_screen(p.x), L.y_to_screen(std::min(hi, L.y_max))));
    }
  }
  return S;
}

// The reference line, the other horizontal lines and the vertical marker, where in range.
void lines_and_marker(const PlotSpec& spec, PlotLayout* L) {
  if (spec.reference.enabled && spec.reference.y >= L->y_min && spec.reference.y <= L->y_max) {
    L->reference_visible = true;
    L->reference_y = L->y_to_screen(spec.reference.y);
    L->reference_label = spec.reference.label;
    L->reference_color = spec.reference.color;
    L->lines.push_back({L->reference_y, spec.reference.y, spec.reference.label,
                        spec.reference.color, spec.reference.dotted});
  }
  for (const auto& line : spec.more_lines) {
    if (!line.enabled || line.y < L->y_min || line.y > L->y_max) continue;
    L->lines.push_back({L->y_to_screen(line.y), line.y, line.label, line.color, line.dotted});
  }
  if (spec.marker.enabled && spec.marker.x >= L->x_min && spec.marker.x <= L->x_max) {
    L->marker_visible = true;
    L->marker_x = L->x_to_screen(spec.marker.x);
    L->marker_label = spec.marker.label;
    L->marker_color = spec.marker.color;
  }
}

// The layout with `strip` pixels kept free above the frame and `column` pixels right of it (for
// a legend outside it).
PlotLayout layout_with_strip(const PlotSpec& spec, ImVec2 canvas_min, ImVec2 canvas_max,
                             const PlotStyle& style, float strip, int* legend_covered,
                             float column = 0) {
  PlotLayout L;
  const float fs = style.font_size;
  const float cw = style.char_width > 0 ? style.char_width : 0.6f * fs;
  L.font_size = fs;
  L.canvas_min = canvas_min;
  L.canvas_max = canvas_max;
  L.x_title = spec.x_title;
  L.y_title = spec.y_title;
  L.x_unit = spec.x_unit;
  L.y_suffix = spec.y_suffix;
  L.note = spec.note;
  L.x_format = spec.x_format;
  L.log_base = spec.log_base > 1 ? spec.log_base : 10;
  L.x_min = spec.x_min;
  L.x_max = spec.x_max;
  sanitize_log_range(&L.x_min, &L.x_max, L.log_base);

  // Vertical margins are fixed: the y title above, tick labels and the x title below.
  const float top = canvas_min.y + fs * 1.6f + strip;
  const float bottom = canvas_max.y - fs * 2.9f;
  const std::vector<double> y_values = y_axis(spec, top, bottom, fs, &L);

  // Left margin from the widest y label; right margin leaves room for half an x label.
  float widest_y = cw;
  std::vector<std::string> y_labels;
  const TextWidth measure = text_width_of(style);
  for (double v : y_values) {
    y_labels.push_back(L.format_y(v, L.y_decimals));
    widest_y = std::max(widest_y, measure(y_labels.back()));
  }
  L.frame_min = vec(canvas_min.x + widest_y + fs * 0.8f, top);
  L.frame_max = vec(std::max(L.frame_min.x + 1, canvas_max.x - fs * 1.6f - column),
                   std::max(top + 1, bottom));
  for (size_t i = 0; i < y_values.size(); ++i) {
    L.y_ticks.push_back({L.y_to_screen(y_values[i]), y_values[i], y_labels[i], true});
  }
  x_ticks(fs, cw, &L);
  for (const auto& s : spec.series) L.series.push_back(series_layout(s, L));
  lines_and_marker(spec, &L);
  build_legend(&L, spec);  // the series' and the lines' labels

  L.x_title_pos = vec(0.5f * (L.frame_min.x + L.frame_max.x), L.frame_max.y + fs * 1.45f);
  L.y_title_pos = vec(canvas_min.x, canvas_min.y);
  L.legend_row_height = fs * 1.35f;
  *legend_covered = place_legend(&L, text_width_of(style));
  // The note sits bottom-left, clear of the legend (bottom-right): speedups rarely go near 0.
  L.note_anchor = vec(L.frame_min.x + fs * 0.6f, L.frame_max.y - fs * 0.5f);
  L.note_wrap = (L.frame_max.x - L.frame_min.x) * 0.45f;
  return L;
}

}  // namespace

PlotLayout layout_plot(const PlotSpec& spec, ImVec2 canvas_min, ImVec2 canvas_max,
                       const PlotStyle& style) {
  int covered = 0;
  PlotLayout L = layout_with_strip(spec, canvas_min, canvas_max, style, 0, &covered);
  if (covered == 0) return L;
  // Every corner hides data (a short plot, a crowded one): the legend leaves the plot area. Its
  // entries flow in rows across a strip above the frame while the frame keeps kPlotMinFrameFonts lines of
  // height (kPlotMinFrameFonts); else they stand in a column beside it while the frame
  // keeps half the width; else in the strip all the same: a smaller plot, but no data hidden.
  const float fs = style.font_size;
  const TextWidth text_width = text_width_of(style);
  const std::vector<std::string> labels = legend_labels(L);
  const float width = L.frame_max.x - L.frame_min.x;
  const int rows = strip_rows(labels, width, fs, text_width);
  const float strip = rows * L.legend_row_height;
  const float frame_h = L.frame_max.y - L.frame_min.y;
  const float min_frame_h = fs * kPlotMinFrameFonts;
  float longest = 0;
  for (const auto& label : labels) longest = std::max(longest, text_width(label));
  const float column = std::min(fs * 2.6f + longest, (canvas_max.x - canvas_min.x) * 0.45f);
  const float rows_h = static_cast<float>(labels.size()) * L.legend_row_height;
  const bool beside = frame_h - strip < min_frame_h && rows_h <= frame_h &&
                      width - column >= (canvas_max.x - canvas_min.x) * 0.5f;
  if (beside) {
    PlotLayout out = layout_with_strip(spec, canvas_min, canvas_max, style, 0, &covered, column);
    out.legend_outside = true;
    out.legend_beside = true;
    const float x = out.frame_max.x + fs * 1.6f;
    for (size_t i = 0; i < labels.size(); ++i) {
      out.legend_entries.push_back(vec(x, out.frame_min.y + i * out.legend_row_height));
    }
    out.legend_min = vec(x, out.frame_min.y);
    out.legend_max = vec(canvas_max.x, out.frame_min.y + rows_h);
    return out;
  }
  PlotLayout out = layout_with_strip(spec, canvas_min, canvas_max, style, strip, &covered);
  out.legend_outside = true;
  float x = 0, y = canvas_min.y + fs * 1.5f;
  for (const auto& label : labels) {
    const float w = strip_entry_width(label, fs, text_width);
    if (x > 0 && x + w > width) {
      x = 0;
      y += out.legend_row_height;
    }
    out.legend_entries.push_back(vec(out.frame_min.x + x, y));
    x += w;
  }
  out.legend_min = vec(out.frame_min.x, canvas_min.y + fs * 1.5f);
  out.legend_max = vec(out.frame_max.x, y + out.legend_row_height);
  return out;
}

float plot_needed_height(const PlotLayout& L, const PlotStyle& style) {
  const float fs = style.font_size;
  const int rows = L.legend.empty() ? 0
                                    : strip_rows(legend_labels(L), L.frame_max.x - L.frame_min.x,
                                                 fs, text_width_of(style));
  const float strip = rows > 0 ? rows * fs * 1.35f : 0.0f;
  return fs * 1.6f + strip + fs * kPlotMinFrameFonts + fs * 2.9f;
}

int legend_over_data(const PlotLayout& L) {
  if (L.legend.empty() || L.legend_outside) return 0;
  return data_covered(L, L.legend_min, L.legend_max, false);
}

// ---- [SECTION] hover ------------------------------------------------------------------------

PlotHover pick_nearest(const PlotLayout& layout, ImVec2 mouse, float max_distance) {
  PlotHover best;
  if (mouse.x < layout.frame_min.x || mouse.x > layout.frame_max.x ||
      mouse.y < layout.frame_min.y || mouse.y > layout.frame_max.y) {
    return best;
  }
  float best_d2 = max_distance * max_distance;
  for (size_t s = 0; s < layout.series.size(); ++s) {
    const auto& pts = layout.series[s].screen;
    for (size_t i = 0; i < pts.size(); ++i) {
      const float dx = pts[i].x - mouse.x, dy = pts[i].y - mouse.y;
      const float d2 = dx * dx + dy * dy;
      if (d2 <= best_d2) {
        best_d2 = d2;
        best.series = static_cast<int>(s);
        best.index = static_cast<int>(i);
      }
    }
  }
  return best;
}

std::string hover_readout(const PlotLayout& layout, const PlotHover& hover) {
  if (!hover.valid()) return "";
  const auto& s = layout.series[hover.series];
  const PlotPoint& p = s.data[hover.index];
  std::string text = s.label.empty() ? std::string() : s.label + ": ";
  text += layout.format_x(p.x);
  if (!layout.x_unit.empty()) text += " " + layout.x_unit;
  text += ", " + layout.format_y(p.y, 2);
  if (p.disturbed)
    text +=
        " (measured while the GPU was shared or throttled: it may be slower than the GPU "
        "alone gives)";
  return text;
}

}  // namespace fl::viz
