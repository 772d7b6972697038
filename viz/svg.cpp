// SVG export (svg.h): the plots' layouts written as SVG elements. Text is escaped; colours come
// from the palette, with the window's dark theme colours replaced by a white page.
#include "viz/svg.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "model/file_io.h"
#include "viz/memory_chart.h"
#include "viz/plot.h"
#include "viz/roofline_view.h"
#include "viz/view_util.h"

namespace fl::viz {
namespace {

// A page of width x height with an origin shift: every coordinate passed in is a screen one.
class Svg {
 public:
  Svg(ImVec2 min, ImVec2 max, float font_size) : o_(min), fs_(font_size) {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                  "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Arial, sans-serif\" "
                  "font-size=\"%.1f\">\n",
                  max.x - min.x, max.y - min.y, max.x - min.x, max.y - min.y, font_size * 0.9f);
    out_ = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    out_ += buf;
    rect(min, max, palette::svg_background, true);
  }
  void line(ImVec2 a, ImVec2 b, ImU32 c, float w, bool dashed = false, bool dotted = false) {
    char buf[320];
    std::snprintf(buf, sizeof(buf),
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke-width=\"%.1f\"%s ",
                  a.x - o_.x, a.y - o_.y, b.x - o_.x, b.y - o_.y, w,
                  dotted   ? " stroke-dasharray=\"3 4\""
                  : dashed ? " stroke-dasharray=\"9 6\""
                           : "");
    out_ += buf + paint("stroke", c) + "/>\n";
  }
  void polyline(const std::vector<ImVec2>& pts, ImU32 c, float w, bool dashed) {
    if (pts.size() < 2) return;
    std::string d;
    char buf[64];
    for (const ImVec2& p : pts) {
      std::snprintf(buf, sizeof(buf), "%.1f,%.1f ", p.x - o_.x, p.y - o_.y);
      d += buf;
    }
    std::snprintf(buf, sizeof(buf), "\" fill=\"none\" stroke-width=\"%.1f\"%s ", w,
                  dashed ? " stroke-dasharray=\"8 5\"" : "");
    out_ += "<polyline points=\"" + d + buf + paint("stroke", c) + "/>\n";
  }
  void polygon(const std::vector<ImVec2>& pts, ImU32 c) {
    std::string d;
    char buf[64];
    for (const ImVec2& p : pts) {
      std::snprintf(buf, sizeof(buf), "%.1f,%.1f ", p.x - o_.x, p.y - o_.y);
      d += buf;
    }
    out_ += "<polygon points=\"" + d + "\" " + paint("fill", c) + "/>\n";
  }
  void rect(ImVec2 a, ImVec2 b, ImU32 c, bool fill) {
    char buf[200];
    std::snprintf(buf, sizeof(buf), "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" %s",
                  a.x - o_.x, a.y - o_.y, std::max(b.x - a.x, 0.0f), std::max(b.y - a.y, 0.0f),
                  fill ? "" : "fill=\"none\" ");
    out_ += buf + paint(fill ? "fill" : "stroke", c) + "/>\n";
  }
  void circle(ImVec2 p, float r, ImU32 c, bool hollow) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" %s", p.x - o_.x,
                  p.y - o_.y, r, hollow ? "fill=\"white\" stroke-width=\"1.8\" " : "");
    out_ += buf + paint(hollow ? "stroke" : "fill", c) + "/>\n";
  }
  // Text with its top-left at p (as ImGui places it); anchor "start", "middle" or "end".
  void text(ImVec2 p, const std::string& s, ImU32 c, float size = 0, const char* anchor = "start") {
    if (s.empty()) return;
    const float fs = size > 0 ? size : fs_;
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.1f\" text-anchor=\"%s\" ", p.x - o_.x,
                  p.y - o_.y + fs * 0.8f, fs * 0.9f, anchor);
    out_ += buf + paint("fill", c) + ">" + escape(s) + "</text>\n";
  }
  std::string finish() { return out_ + "</svg>\n"; }

 private:
  static std::string paint(const char* what, ImU32 c) {
    char buf[96];
    const ImVec4 f = ImGui::ColorConvertU32ToFloat4(c);
    std::snprintf(buf, sizeof(buf), "%s=\"rgb(%d,%d,%d)\" %s-opacity=\"%.2f\" ", what,
                  static_cast<int>(f.x * 255 + 0.5f), static_cast<int>(f.y * 255 + 0.5f),
                  static_cast<int>(f.z * 255 + 0.5f), what, f.w);
    return buf;
  }
  static std::string escape(const std::string& s) {
    std::string out;
    for (char ch : s) {
      switch (ch) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        default:
          out += ch;
      }
    }
    return out;
  }
  ImVec2 o_;
  float fs_;
  std::string out_;
};

const ImU32 kText = palette::svg_text, kGrid = palette::svg_grid, kAxis = palette::svg_axis;

std::function<std::string()> g_source;

}  // namespace

std::string plot_svg(const PlotLayout& L) {
  Svg svg(L.canvas_min, L.canvas_max, L.font_size);
  const float fs = L.font_size;
  for (const auto& t : L.y_ticks) {
    svg.line(v2(L.frame_min.x, t.pos), v2(L.frame_max.x, t.pos), kGrid, 1);
    svg.text(v2(L.frame_min.x - fs * 0.35f, t.pos - fs * 0.5f), t.label, kText, 0, "end");
  }
  for (const auto& t : L.x_ticks) {
    if (t.major) svg.line(v2(t.pos, L.frame_min.y), v2(t.pos, L.frame_max.y), kGrid, 1);
    if (!t.label.empty())
      svg.text(v2(t.pos, L.frame_max.y + fs * 0.3f), t.label, kText, 0, "middle");
  }
  svg.rect(L.frame_min, L.frame_max, kAxis, false);
  svg.text(L.x_title_pos, L.x_title, kText, 0, "middle");
  svg.text(L.y_title_pos, L.y_title, kText);
  for (const auto& line : L.lines) {
    svg.line(v2(L.frame_min.x, line.y), v2(L.frame_max.x, line.y), line.color, 2, !line.dotted,
             line.dotted);
  }
  for (const auto& s : L.series) {
    if (!s.band || s.band_lo.empty()) continue;
    std::vector<ImVec2> poly(s.band_lo.begin(), s.band_lo.end());
    poly.insert(poly.end(), s.band_hi.rbegin(), s.band_hi.rend());
    svg.polygon(poly, (s.color & 0x00FFFFFFu) | (0x50u << 24));
  }
  for (const auto& s : L.series) {
    svg.polyline(s.screen, s.color, s.line_thickness, s.dashed);
    for (const auto& p : s.screen) svg.circle(p, s.marker_radius, s.color, s.hollow_markers);
  }
  // The legend as rows in the top-left of the frame (slides have room; the window's placement
  // avoided the data, so take its position when it was inside).
  const float row = L.legend_row_height > 0 ? L.legend_row_height : fs * 1.35f;
  ImVec2 at = L.legend_outside || L.legend.empty()
                  ? v2(L.frame_min.x + fs * 0.5f, L.frame_min.y + fs * 0.4f)
                  : v2(L.legend_min.x + fs * 0.4f, L.legend_min.y + fs * 0.4f);
  if (L.legend_outside && !L.legend_entries.empty()) at = L.legend_entries.front();
  for (size_t i = 0; i < L.legend.size(); ++i) {
    const PlotLegendEntry& e = L.legend[i];
    const ImVec2 p = L.legend_outside && i < L.legend_entries.size() ? L.legend_entries[i]
                                                                     : v2(at.x, at.y + i * row);
    const float cy = p.y + row * 0.5f;
    if (e.kind == PlotLegendEntry::line) {
      const auto& line = L.lines[e.index];
      svg.line(v2(p.x, cy), v2(p.x + fs * 1.8f, cy), line.color, 2, !line.dotted, line.dotted);
    } else if (e.kind == PlotLegendEntry::band) {
      svg.rect(v2(p.x, cy - fs * 0.35f), v2(p.x + fs * 1.8f, cy + fs * 0.35f),
               (L.series[e.index].color & 0x00FFFFFFu) | (0x50u << 24), true);
    } else {
      const auto& s = L.series[e.index];
      svg.polyline({v2(p.x, cy), v2(p.x + fs * 1.8f, cy)}, s.color, s.line_thickness, s.dashed);
      svg.circle(v2(p.x + fs * 0.9f, cy), s.marker_radius, s.color, s.hollow_markers);
    }
    svg.text(v2(p.x + fs * 2.2f, cy - fs * 0.5f), e.label, kText);
  }
  if (!L.note.empty()) svg.text(v2(L.note_anchor.x, L.note_anchor.y - fs), L.note, kText);
  return svg.finish();
}

std::string roofline_svg(const RooflineInput& in, const RooflineLayout& L, ImVec2 min, ImVec2 max) {
  Svg svg(min, max, L.font_size);
  const float fs = L.font_size;
  svg.text(L.y_title_pos, L.y_title, kText);
  for (const auto& [x, label] : L.x_ticks) {
    svg.line(v2(x, L.frame_min.y), v2(x, L.frame_max.y), kGrid, 1);
    svg.text(v2(x, L.frame_max.y + fs * 0.2f), label, kText, 0, "middle");
  }
  for (const auto& [y, label] : L.y_ticks) {
    svg.line(v2(L.frame_min.x, y), v2(L.frame_max.x, y), kGrid, 1);
    svg.text(v2(L.frame_min.x - fs * 0.3f, y - fs * 0.5f), label, kText, 0, "end");
  }
  svg.rect(L.frame_min, L.frame_max, kAxis, false);
  svg.text(L.x_title_pos, L.x_title, kText);
  if (L.roof_visible) {
    svg.line(L.roof_from, L.roof_to, palette::reference, 2.5f, true);
    svg.text(L.roof_label_pos, L.roof_label, palette::svg_axis);
  }
  if (L.compute_visible) {
    svg.line(L.compute_from, L.compute_to, palette::reference, 2.5f, true);
    svg.text(L.compute_label_pos, L.compute_label, palette::svg_axis);
  }
  if (!L.note.empty()) svg.text(L.note_pos, L.note, kText);
  for (size_t i = 0; i < L.points.size() && i < in.points.size(); ++i) {
    svg.circle(L.points[i], fs * 0.4f, palette::level_color(in.points[i].level, in.top_level),
               false);
    if (i < L.point_labels.size()) svg.text(L.point_label_pos[i], L.point_labels[i], kText);
  }
  return svg.finish();
}

std::string memory_svg(const MemoryInput& in, const MemoryLayout& L, ImVec2 min, ImVec2 max) {
  Svg svg(min, max, L.font_size);
  const float fs = L.font_size;
  for (const auto& e : L.legend) {
    const float top = e.pos.y + fs * 0.15f, h = fs * 0.8f;
    svg.rect(v2(e.pos.x, top), v2(e.pos.x + fs * 0.6f, top + h), e.color_a, true);
    svg.rect(v2(e.pos.x + fs * 0.6f, top), v2(e.pos.x + fs * 1.2f, top + h), e.color_b, true);
    svg.text(v2(e.pos.x + fs * 1.6f, e.pos.y), e.label, kText);
  }
  for (const auto& [y, label] : L.y_ticks) {
    svg.line(v2(L.frame_min.x, y), v2(L.frame_max.x, y), kGrid, 1);
    svg.text(v2(L.frame_min.x - fs * 0.35f, y - fs * 0.5f), label, kText, 0, "end");
  }
  svg.rect(L.frame_min, L.frame_max, kAxis, false);
  for (const MemoryBarRect& b : L.bars) {
    const ImVec2 top_left = v2(b.min.x, std::min(b.min.y, b.max.y - 1));
    if (b.kind == MemoryBar::l2) {
      svg.rect(top_left, b.max, palette::l2, true);
    } else {
      const float a = b.kind == MemoryBar::dram ? 1.0f : 0.45f;
      svg.rect(v2(b.min.x, b.split_y), b.max, with_alpha(palette::reads, a), true);
      svg.rect(top_left, v2(b.max.x, b.split_y), with_alpha(palette::writes, a), true);
    }
    if (b.value_visible) svg.text(b.value_pos, b.value_label, kText);
  }
  for (const auto& [pos, name] : L.group_labels) svg.text(pos, name, kText);
  svg.text(L.saved_title_pos, L.saved_title, kText);
  svg.text(L.saved_value_pos, L.saved_value,
           !in.baseline && L.saved_bytes > 0 ? palette::level_top : kText, L.big_font_size);
  float y = L.saved_detail_pos.y;
  for (const auto& l : L.saved_detail) {
    svg.text(v2(L.saved_detail_pos.x, y), l, kText);
    y += fs * 1.25f;
  }
  size_t start = 0;
  y = L.badge_min.y + fs * 0.3f;
  while (start <= L.badge.size()) {
    size_t nl = L.badge.find('\n', start);
    if (nl == std::string::npos) nl = L.badge.size();
    svg.text(v2(L.badge_min.x + fs * 0.5f, y), L.badge.substr(start, nl - start), kText);
    y += fs;
    start = nl + 1;
  }
  svg.rect(L.badge_min, L.badge_max, L.badge_ok ? palette::correct : palette::wrong, false);
  return svg.finish();
}

void set_svg_source(std::function<std::string()> source) {
  g_source = std::move(source);
}
void clear_svg_source() {
  g_source = nullptr;
}
bool has_svg_source() {
  return static_cast<bool>(g_source);
}
std::string current_svg() {
  return g_source ? g_source() : std::string();
}

bool write_file_atomic(const std::string& path, const std::string& text, std::string* error) {
  // The project's one atomic writer (model/file_io.h): an exclusive temporary beside the
  // target, flushed, renamed; symlinks written through, devices and folders refused.
  const Status st = write_file_atomically(path, text);
  if (!st.ok() && error) *error = st.message();
  return st.ok();
}

}  // namespace fl::viz
