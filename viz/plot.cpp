// The plot widget's drawing (plot.h): reads a PlotLayout and draws it on an ImDrawList; decides
// nothing about where things go. plot_widget() is the Canvas pattern around layout and drawing.
#include "viz/plot.h"

#include "viz/svg.h"
#include "viz/view_util.h"

#include <algorithm>
#include <cmath>

namespace fl::viz {
namespace {

ImVec2 vec(float x, float y) {
  return ImVec2(x, y);
}

}  // namespace

// ---- [SECTION] drawing ----------------------------------------------------------------------

namespace {

ImU32 band_shade(ImU32 color) {
  return (color & 0x00FFFFFFu) | (0x50u << 24);
}

void dashed_hline(ImDrawList* dl, float x0, float x1, float y, ImU32 color, float thickness,
                  bool dotted = false) {
  const float dash = dotted ? 3 : 9, gap = dotted ? 4 : 6;
  for (float x = x0; x < x1; x += dash + gap) {
    dl->AddLine(vec(x, y), vec(std::min(x + dash, x1), y), color, stroke(thickness));
  }
}

// A polyline drawn as dashes of equal length, continuing across its corners.
void dashed_polyline(ImDrawList* dl, const std::vector<ImVec2>& pts, ImU32 color, float thickness) {
  const float dash = 8, gap = 5;
  float phase = 0;  // distance into the current dash + gap period
  for (size_t i = 0; i + 1 < pts.size(); ++i) {
    const ImVec2 a = pts[i], b = pts[i + 1];
    const float dx = b.x - a.x, dy = b.y - a.y;
    const float len = std::sqrt(dx * dx + dy * dy);
    float t = 0;
    while (t < len) {
      const float left = phase < dash ? dash - phase : dash + gap - phase;
      const float step = std::min(left, len - t);
      if (phase < dash) {
        dl->AddLine(vec(a.x + dx * t / len, a.y + dy * t / len),
                    vec(a.x + dx * (t + step) / len, a.y + dy * (t + step) / len), color,
                    stroke(thickness));
      }
      t += step;
      phase += step;
      if (phase >= dash + gap) phase = 0;
    }
  }
}

void draw_marker(ImDrawList* dl, ImVec2 p, float r, ImU32 color, bool hollow, ImU32 fill) {
  if (hollow) {
    dl->AddCircleFilled(p, r, fill);
    dl->AddCircle(p, r, color, 0, stroke(1.8f));
  } else {
    dl->AddCircleFilled(p, r, color);
  }
}

void draw_swatch(ImDrawList* dl, const PlotLayout& L, const PlotLegendEntry& e, float sx0,
                 float sx1, float cy, ImU32 bg) {
  const float fs = L.font_size;
  if (e.kind == PlotLegendEntry::line) {
    const PlotLineLayout& line = L.lines[e.index];
    dashed_hline(dl, sx0, sx1, cy, line.color, 2.0f, line.dotted);
    return;
  }
  const PlotSeriesLayout& s = L.series[e.index];
  if (e.kind == PlotLegendEntry::band) {
    dl->AddRectFilled(vec(sx0, cy - fs * 0.35f), vec(sx1, cy + fs * 0.35f), band_shade(s.color));
    return;
  }
  if (s.dashed) {
    dashed_polyline(dl, {vec(sx0, cy), vec(sx1, cy)}, s.color, s.line_thickness);
  } else {
    dl->AddLine(vec(sx0, cy), vec(sx1, cy), s.color, stroke(s.line_thickness));
  }
  draw_marker(dl, vec(0.5f * (sx0 + sx1), cy), s.marker_radius, s.color, s.hollow_markers, bg);
}

// The legend's box inside the frame, measured with the current font (zero size: outside/none).
void legend_box(const PlotLayout& L, ImVec2* box_min, ImVec2* box_max) {
  *box_min = *box_max = L.frame_min;
  if (L.legend.empty() || L.legend_outside) return;
  const float fs = L.font_size, pad = fs * 0.4f, swatch = fs * 1.8f;
  float text_w = 0;
  for (const auto& e : L.legend) text_w = std::max(text_w, ImGui::CalcTextSize(e.label.c_str()).x);
  const float frame_w = L.frame_max.x - L.frame_min.x - fs;
  const float box_w = std::min(pad * 3 + swatch + text_w, frame_w);
  const float box_h = pad * 2 + L.legend.size() * L.legend_row_height;
  const bool right = L.legend_corner <= 1, bottom = L.legend_corner == 0 || L.legend_corner == 3;
  *box_min = vec(right ? L.legend_anchor.x - box_w : L.legend_anchor.x,
                 bottom ? L.legend_anchor.y - box_h : L.legend_anchor.y);
  *box_max = vec(box_min->x + box_w, box_min->y + box_h);
}

void draw_legend(ImDrawList* dl, const PlotLayout& L, ImU32 text, ImU32 bg, ImU32 border) {
  if (L.legend.empty()) return;
  const float fs = L.font_size, pad = fs * 0.4f, swatch = fs * 1.8f;
  const auto draw_entry = [&](const PlotLegendEntry& e, float left, float cy, float right) {
    draw_swatch(dl, L, e, left, left + swatch, cy, bg);
    TextOptions o;
    o.max_width = right - (left + swatch + pad);
    draw_text(dl, vec(left + swatch + pad, cy - fs * 0.5f), text, e.label, o);
  };
  if (L.legend_outside) {  // entries in the strip above the frame, placed by the layout
    for (size_t i = 0; i < L.legend.size() && i < L.legend_entries.size(); ++i) {
      const float right =
          i + 1 < L.legend_entries.size() && L.legend_entries[i + 1].y == L.legend_entries[i].y
              ? L.legend_entries[i + 1].x - fs * 0.5f
              : L.canvas_max.x;
      draw_entry(L.legend[i], L.legend_entries[i].x,
                 L.legend_entries[i].y + L.legend_row_height * 0.5f, right);
    }
    return;
  }
  ImVec2 box_min, box_max;
  legend_box(L, &box_min, &box_max);
  dl->AddRectFilled(box_min, box_max, bg, 4.0f);
  dl->AddRect(box_min, box_max, border, 4.0f);
  for (size_t i = 0; i < L.legend.size(); ++i) {
    const float row_top = box_min.y + pad + i * L.legend_row_height;
    draw_entry(L.legend[i], box_min.x + pad, row_top + L.legend_row_height * 0.5f, box_max.x - pad);
  }
}

// Grid, tick marks and labels, the frame and the axis titles; a tick label that would touch the
// one before it is left out.
void draw_axes(ImDrawList* dl, const PlotLayout& L) {
  const float fs = L.font_size;
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 grid = with_alpha(ImGui::GetColorU32(ImGuiCol_Text), 0.12f);
  const ImU32 axis = with_alpha(ImGui::GetColorU32(ImGuiCol_Text), 0.5f);
  float last_y_label = 1e30f;
  for (const auto& t : L.y_ticks) {
    dl->AddLine(vec(L.frame_min.x, t.pos), vec(L.frame_max.x, t.pos), grid, stroke(1.0f));
    const ImVec2 size = ImGui::CalcTextSize(t.label.c_str());
    // Centred on its tick, but never below the frame's bottom (the x labels are there).
    const float y = std::min(t.pos - size.y * 0.5f, L.frame_max.y + fs * 0.25f - size.y);
    if (y + size.y > last_y_label) continue;
    last_y_label = y;
    draw_text(dl, vec(L.frame_min.x - fs * 0.35f - size.x, y), text, t.label);
  }
  float last_x_label = -1e30f;
  for (const auto& t : L.x_ticks) {
    if (t.major)
      dl->AddLine(vec(t.pos, L.frame_min.y), vec(t.pos, L.frame_max.y), grid, stroke(1.0f));
    dl->AddLine(vec(t.pos, L.frame_max.y),
                vec(t.pos, L.frame_max.y + (t.major ? fs * 0.35f : fs * 0.2f)), axis);
    if (t.label.empty()) continue;
    const ImVec2 size = ImGui::CalcTextSize(t.label.c_str());
    // Centred on its tick, but never left of the frame (the y labels are there).
    const float x =
        std::clamp(t.pos - size.x * 0.5f, L.frame_min.x - fs * 0.2f, L.canvas_max.x - size.x);
    if (x < last_x_label + fs * 0.3f) continue;
    last_x_label = x + size.x;
    draw_text(dl, vec(x, L.frame_max.y + fs * 0.3f), text, t.label);
  }
  dl->AddRect(L.frame_min, L.frame_max, axis, 0.0f, 0, stroke(1.0f));
  const ImU32 text_dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  if (!L.x_title.empty()) {
    const float w =
        std::min(ImGui::CalcTextSize(L.x_title.c_str()).x, L.canvas_max.x - L.canvas_min.x);
    draw_text(dl, vec(std::max(L.canvas_min.x, L.x_title_pos.x - w * 0.5f), L.x_title_pos.y),
              text_dim, L.x_title);
  }
  if (!L.y_title.empty()) draw_text(dl, L.y_title_pos, text_dim, L.y_title);
}

// The reference lines, the marker, the series (bands under every line) and the hovered point,
// clipped to the frame grown by the largest marker so markers on its edges stay whole.
void draw_series(ImDrawList* dl, const PlotLayout& L, const PlotHover& hover) {
  const ImU32 frame_bg = ImGui::GetColorU32(ImGuiCol_FrameBg);
  float max_radius = 0;
  for (const auto& s : L.series) max_radius = std::max(max_radius, s.marker_radius + 2);
  dl->PushClipRect(vec(L.frame_min.x - max_radius, L.frame_min.y - max_radius),
                   vec(L.frame_max.x + max_radius, L.frame_max.y + max_radius), true);
  for (const auto& line : L.lines) {
    dashed_hline(dl, L.frame_min.x, L.frame_max.x, line.y, line.color, 2.0f, line.dotted);
  }
  if (L.marker_visible) {
    dl->AddLine(vec(L.marker_x, L.frame_min.y), vec(L.marker_x, L.frame_max.y), L.marker_color,
                1.5f);
  }
  for (const auto& s : L.series) {  // bands first, under every line
    if (!s.band) continue;
    const ImU32 shade = band_shade(s.color);
    for (size_t i = 0; i + 1 < s.band_lo.size(); ++i) {
      dl->AddQuadFilled(s.band_lo[i], s.band_lo[i + 1], s.band_hi[i + 1], s.band_hi[i], shade);
    }
    for (size_t i = 0; i < s.band_lo.size(); ++i) {  // a whisker shows a lone point's spread
      dl->AddLine(s.band_lo[i], s.band_hi[i], shade, stroke(3.0f));
    }
  }
  for (const auto& s : L.series) {
    if (s.screen.size() >= 2 && s.dashed) {
      dashed_polyline(dl, s.screen, s.color, s.line_thickness);
    } else if (s.screen.size() >= 2) {
      dl->AddPolyline(s.screen.data(), static_cast<int>(s.screen.size()), s.color, 0,
                      stroke(s.line_thickness));
    }
    for (size_t i = 0; i < s.screen.size(); ++i) {
      draw_marker(dl, s.screen[i], s.marker_radius, s.color, s.hollow_markers, frame_bg);
      if (i < s.data.size() && s.data[i].disturbed)
        dl->AddCircle(s.screen[i], s.marker_radius + 3, palette::disturbed, 0, stroke(2.0f));
    }
  }
  if (hover.valid()) {
    const auto& s = L.series[hover.series];
    dl->AddCircle(s.screen[hover.index], s.marker_radius + 4, ImGui::GetColorU32(ImGuiCol_Text), 0,
                  stroke(2.0f));
  }
  dl->PopClipRect();
}

// Text inside the frame (clipped to it): the marker's label and the note.
void draw_frame_text(ImDrawList* dl, const PlotLayout& L) {
  const float fs = L.font_size;
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  if (L.marker_visible && !L.marker_label.empty()) {
    // At the top of the frame beside the marker, else at the bottom, else not at all: never
    // on the legend.
    const ImVec2 size = ImGui::CalcTextSize(L.marker_label.c_str());
    const bool left = L.marker_x + fs * 0.3f + size.x > L.frame_max.x;
    const float x = left ? L.marker_x - fs * 0.3f - size.x : L.marker_x + fs * 0.3f;
    ImVec2 box_min, box_max;
    legend_box(L, &box_min, &box_max);
    for (float y : {L.frame_min.y + fs * 0.2f, L.frame_max.y - fs * 1.2f}) {
      const bool hits =
          x < box_max.x && box_min.x < x + size.x && y < box_max.y && box_min.y < y + size.y;
      if (hits) continue;
      draw_text(dl, vec(x, y), text, L.marker_label);
      break;
    }
  }
  if (!L.note.empty()) {
    const ViewStyle style = ViewStyle::current();
    const std::vector<std::string> lines = wrap_text(L.note, L.note_wrap, style);
    float y = L.note_anchor.y - lines.size() * fs * 1.2f;
    for (const auto& l : lines) {
      draw_text(dl, vec(L.note_anchor.x, y), text, l);
      y += fs * 1.2f;
    }
  }
}

}  // namespace

void draw_plot(ImDrawList* dl, const PlotLayout& L, const PlotHover& hover) {
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 axis = with_alpha(ImGui::GetColorU32(ImGuiCol_Text), 0.5f);
  const ImU32 window_bg = with_alpha(ImGui::GetColorU32(ImGuiCol_WindowBg), 0.92f);
  dl->AddRectFilled(L.frame_min, L.frame_max, ImGui::GetColorU32(ImGuiCol_FrameBg));
  draw_axes(dl, L);
  draw_series(dl, L, hover);
  dl->PushClipRect(L.frame_min, L.frame_max, true);
  draw_frame_text(dl, L);
  if (!L.legend_outside) draw_legend(dl, L, text, window_bg, with_alpha(axis, 0.6f));
  dl->PopClipRect();
  if (L.legend_outside) draw_legend(dl, L, text, window_bg, with_alpha(axis, 0.6f));
}

// ---- [SECTION] widget -----------------------------------------------------------------------

namespace {
std::vector<PlotFit>& plots_recorded() {
  static std::vector<PlotFit> plots;
  return plots;
}
}  // namespace

const std::vector<PlotFit>& recorded_plots() {
  return plots_recorded();
}
void record_plot(const PlotFit& fit) {
  if (text_recording()) plots_recorded().push_back(fit);
}
void clear_recorded_plots() {
  plots_recorded().clear();
}

PlotFit plot_fit(const char* id, const PlotLayout& L) {
  PlotFit fit;
  fit.id = id;
  fit.font_size = L.font_size;
  fit.frame_min = L.frame_min;
  fit.frame_max = L.frame_max;
  for (const PlotTick& t : L.x_ticks) fit.x_labels += t.label.empty() ? 0 : 1;
  for (const PlotTick& t : L.y_ticks) fit.y_labels += t.label.empty() ? 0 : 1;
  fit.legend_over_data = legend_over_data(L);
  fit.legend_outside = L.legend_outside;
  return fit;
}

PlotHover plot_widget(const char* id, const PlotSpec& spec, ImVec2 size) {
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  if (size.x <= 0) size.x = avail.x;
  if (size.y <= 0) size.y = avail.y;
  const float fs = ImGui::GetFontSize();
  size.x = std::max(size.x, fs * 12);  // InvisibleButton asserts on a zero size
  size.y = std::max(size.y, fs * 8);

  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, size);
  PlotStyle style;
  style.font_size = fs;
  style.char_width = ImGui::CalcTextSize("0123456789").x / 10;
  style.text_width = [](const std::string& text) { return ImGui::CalcTextSize(text.c_str()).x; };
  const PlotLayout layout = layout_plot(spec, p0, vec(p0.x + size.x, p0.y + size.y), style);
  PlotHover hover;
  if (ImGui::IsItemHovered()) hover = pick_nearest(layout, ImGui::GetIO().MousePos, fs * 2.5f);
  draw_plot(ImGui::GetWindowDrawList(), layout, hover);
  record_plot(plot_fit(id, layout));
  note_view_need(p0.y + plot_needed_height(layout, style));
  set_svg_source([layout] { return plot_svg(layout); });
  if (hover.valid()) {
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(hover_readout(layout, hover).c_str());
    ImGui::EndTooltip();
  }
  return hover;
}

}  // namespace fl::viz
