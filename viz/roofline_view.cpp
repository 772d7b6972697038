// The roofline (roofline_view.h).
//
// [SECTION] input: one point per correct, timed level
// [SECTION] layout: decades, roofs, points and labels as plain data
// [SECTION] hover read-outs
// [SECTION] drawing and the widget
#include "viz/roofline_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/catalog.h"
#include "viz/svg.h"

namespace fl::viz {

// ---- [SECTION] input -------------------------------------------------------------------------

RooflineInput roofline_input(const std::vector<Measurement>& levels, double roof_gbps,
                             int shown_level, double compute_roof_gflops) {
  RooflineInput in;
  in.roof_gbps = roof_gbps;
  in.compute_roof_gflops = compute_roof_gflops;
  if (!levels.empty()) {
    if (const Lesson* lesson = find_lesson(levels.front().lesson))
      in.top_level = lesson->level_count() - 1;
  }
  for (const Measurement& m : levels) {
    double flops = 0;
    for (const auto& l : m.launches) flops += l.textbook.flops;
    const double bytes = static_cast<double>(m.textbook_bytes());
    if (!m.check.passed || m.chain_time_us.median <= 0 || bytes <= 0 || flops <= 0) continue;
    RooflinePoint p;
    p.label = std::to_string(m.level) + " " + m.level_name;
    p.level = m.level;
    p.flops = flops;
    p.bytes = bytes;
    p.time_us = m.chain_time_us.median;
    p.intensity = flops / bytes;
    p.gflops = flops / (m.chain_time_us.median * 1e3);  // FLOP per µs / 1e3 = GFLOP/s
    if (m.level == shown_level) in.highlighted = static_cast<int>(in.points.size());
    in.points.push_back(p);
  }
  return in;
}

// ---- [SECTION] compute roof ------------------------------------------------------------------

double datasheet_peak_gflops(const std::string& gpu_name, Precision precision) {
  // Dense peaks from NVIDIA's data sheets, in TFLOP/s: fp32 on CUDA cores (no TF32, as the
  // lessons run cuBLASLt), bf16 on tensor cores with fp32 accumulation. 0: not supported.
  struct Row {
    const char* name_part;  // matched in the device name, first match wins
    double fp32, bf16;
  };
  static const Row table[] = {
      {"H200", 67.0, 989.4},    {"H100 PCIe", 51.2, 756.0}, {"H100 NVL", 60.0, 835.0},
      {"H100", 67.0, 989.4},    {"GH200", 67.0, 989.4},     {"A100", 19.5, 312.0},
      {"A30", 10.3, 165.0},     {"A10", 31.2, 125.0},       {"L40S", 91.6, 362.1},
      {"L40", 90.5, 181.0},     {"L4", 30.3, 121.0},        {"RTX 4090", 82.6, 165.2},
      {"RTX 3090", 35.6, 71.0}, {"V100", 15.7, 0.0},        {"T4", 8.1, 0.0},
  };
  for (const Row& r : table) {
    if (gpu_name.find(r.name_part) != std::string::npos) {
      return 1e3 * (precision == Precision::bf16 ? r.bf16 : r.fp32);
    }
  }
  return 0;
}

double compute_roof_gflops(const std::string& gpu_name, Precision precision,
                           const std::vector<Measurement>& session, std::string* source) {
  double measured = 0;
  for (const Measurement& m : session) {
    if (m.precision != precision || m.level != 0 || !m.check.passed) continue;
    for (const LaunchResult& l : m.launches) {
      if (l.textbook.kernel.rfind("gemm", 0) != 0 || l.time_us.median <= 0) continue;
      measured = std::max(measured, l.textbook.flops / (l.time_us.median * 1e3));
    }
  }
  const char* p = precision == Precision::bf16 ? "bf16" : "fp32";
  if (measured > 0) {
    if (source) *source = std::string("measured: cuBLASLt GEMM, ") + p;
    return measured;
  }
  const double sheet = datasheet_peak_gflops(gpu_name, precision);
  if (source) *source = sheet > 0 ? std::string("datasheet, ") + gpu_name + ", " + p : "";
  return sheet;
}

// ---- [SECTION] layout ------------------------------------------------------------------------

namespace {

std::string decade_label(int p) {
  char buf[32];
  if (p >= -3 && p <= 3)
    std::snprintf(buf, sizeof(buf), "%g", std::pow(10.0, p));
  else
    std::snprintf(buf, sizeof(buf), "1e%d", p);
  return buf;
}

bool overlaps(ImVec2 a_min, ImVec2 a_max, ImVec2 b_min, ImVec2 b_max) {
  return a_min.x < b_max.x && b_min.x < a_max.x && a_min.y < b_max.y && b_min.y < a_max.y;
}

}  // namespace

float RooflineLayout::x_to_screen(double x) const {
  return frame_min.x + static_cast<float>(std::log10(x / x_min) / std::log10(x_max / x_min)) *
                           (frame_max.x - frame_min.x);
}

float RooflineLayout::y_to_screen(double y) const {
  return frame_max.y - static_cast<float>(std::log10(y / y_min) / std::log10(y_max / y_min)) *
                           (frame_max.y - frame_min.y);
}

namespace {

// Ranges: whole decades around the data and the roof over it, one decade of margin.
void set_ranges(const RooflineInput& in, RooflineLayout* L) {
  double xlo = 1e300, xhi = 0, ylo = 1e300, yhi = 0;
  for (const auto& p : in.points) {
    xlo = std::min(xlo, p.intensity);
    xhi = std::max(xhi, p.intensity);
    ylo = std::min(ylo, p.gflops);
    yhi = std::max(yhi, p.gflops);
  }
  if (in.roof_gbps > 0) {
    double roof_at_xhi = xhi * in.roof_gbps;
    if (in.compute_roof_gflops > 0) roof_at_xhi = std::min(roof_at_xhi, in.compute_roof_gflops);
    yhi = std::max(yhi, roof_at_xhi);
  }
  if (in.compute_roof_gflops > 0) {
    yhi = std::max(yhi, in.compute_roof_gflops);
    // The ridge (where the roofs meet) is on the plot, so the learner sees the bend.
    if (in.roof_gbps > 0) xhi = std::max(xhi, in.compute_roof_gflops / in.roof_gbps);
  }
  L->x_min = std::pow(10.0, std::floor(std::log10(xlo)) - 1);
  L->x_max = std::pow(10.0, std::ceil(std::log10(xhi)) + 1);
  L->y_min = std::pow(10.0, std::floor(std::log10(ylo)) - 1);
  L->y_max = std::pow(10.0, std::ceil(std::log10(yhi)) + 1);
}

// The frame: y tick labels on the left, x tick labels and the title below.
void layout_frame_and_ticks(ImVec2 min, ImVec2 max, const ViewStyle& style, RooflineLayout* L) {
  const float fs = style.font_size, line = style.line();
  const int y0 = static_cast<int>(std::lround(std::log10(L->y_min)));
  const int y1 = static_cast<int>(std::lround(std::log10(L->y_max)));
  float widest = 0;
  for (int p = y0; p <= y1; ++p) widest = std::max(widest, style.text_width(decade_label(p)));
  L->frame_min = v2(min.x + widest + fs * 0.6f, min.y + line);
  // Room on the right for half the widest x label, so the last one is never cut ("10...").
  float widest_x = 0;
  for (int p = static_cast<int>(std::lround(std::log10(L->x_min)));
       std::pow(10.0, p) <= L->x_max * 1.0001; ++p) {
    widest_x = std::max(widest_x, style.text_width(decade_label(p)));
  }
  const float right = std::max(fs * 0.6f, widest_x * 0.5f + fs * 0.2f);
  L->frame_max = v2(std::max(L->frame_min.x + fs * 4, max.x - right),
                    std::max(min.y + line + fs * 4, max.y - line * 2.1f));
  L->x_title_pos =
      v2(0.5f * (L->frame_min.x + L->frame_max.x) - 0.5f * style.text_width(L->x_title),
         L->frame_max.y + line);
  for (int p = static_cast<int>(std::lround(std::log10(L->x_min)));
       std::pow(10.0, p) <= L->x_max * 1.0001; ++p) {
    L->x_ticks.push_back({L->x_to_screen(std::pow(10.0, p)), decade_label(p)});
  }
  for (int p = y0; p <= y1; ++p)
    L->y_ticks.push_back({L->y_to_screen(std::pow(10.0, p)), decade_label(p)});
}

// Roofs: the bandwidth diagonal up to the ridge (where it meets the compute roof), then flat.
void layout_roofs(const RooflineInput& in, const ViewStyle& style, RooflineLayout* L) {
  const float fs = style.font_size, line = style.line();
  if (in.roof_gbps > 0) {
    double x_end = std::min(L->x_max, L->y_max / in.roof_gbps);
    if (in.compute_roof_gflops > 0) x_end = std::min(x_end, in.compute_roof_gflops / in.roof_gbps);
    const double x_start = std::max(L->x_min, L->y_min / in.roof_gbps);
    if (x_end > x_start) {
      L->roof_visible = true;
      L->roof_from = v2(L->x_to_screen(x_start), L->y_to_screen(x_start * in.roof_gbps));
      L->roof_to = v2(L->x_to_screen(x_end), L->y_to_screen(x_end * in.roof_gbps));
      char buf[96];
      std::snprintf(buf, sizeof(buf), "bandwidth roof %.0f GB/s (measured copy)", in.roof_gbps);
      L->roof_label = buf;
      // Above the line, ending at a point 3/4 along it: no level can be above the roof, so
      // the label never covers a point, and the line rises to the right so it stays clear.
      const ImVec2 at = lerp(L->roof_from, L->roof_to, 0.75f);
      L->roof_label_pos = v2(std::max(at.x - fs * 0.3f - style.text_width(buf), L->frame_min.x + 2),
                             std::max(at.y - fs * 1.4f, L->frame_min.y + 2));
    }
  }
  if (in.compute_roof_gflops > 0) {
    const double ridge = in.roof_gbps > 0 ? in.compute_roof_gflops / in.roof_gbps : L->x_min;
    L->compute_visible = true;
    L->compute_from =
        v2(L->x_to_screen(std::max(ridge, L->x_min)), L->y_to_screen(in.compute_roof_gflops));
    L->compute_to = v2(L->frame_max.x, L->compute_from.y);
    char buf[96];
    std::snprintf(buf, sizeof(buf), "compute roof %.0f GFLOP/s (%s)", in.compute_roof_gflops,
                  in.compute_roof_source.empty() ? "datasheet" : in.compute_roof_source.c_str());
    L->compute_label = buf;
    L->compute_label_pos =
        v2(L->frame_max.x - style.text_width(buf) - fs * 0.3f, L->compute_from.y - line);
  }
}

// The roofs' labels must sit on neither each other nor a point (the learner reads the points
// first): the compute roof's label right-aligned above its line, else below it, else at its
// left end; the bandwidth roof's at places along the diagonal, then its short form, then none
// (the plot names both on hover too).
void keep_roof_labels_apart(const RooflineInput& in, const ViewStyle& style, RooflineLayout* L) {
  const float fs = style.font_size, r = fs * 0.5f;
  std::vector<std::pair<ImVec2, ImVec2>> markers;
  for (const auto& p : in.points) {
    const ImVec2 s = v2(L->x_to_screen(p.intensity), L->y_to_screen(p.gflops));
    markers.push_back({v2(s.x - r, s.y - r), v2(s.x + r, s.y + r)});
  }
  const auto on_a_marker = [&](ImVec2 a, ImVec2 b) {
    for (const auto& [m0, m1] : markers) {
      if (overlaps(a, b, m0, m1)) return true;
    }
    return false;
  };
  if (L->compute_visible) {
    // Right-aligned above the line, higher above it, below it; then from its left end; then the
    // short form the same ways; else no label.
    const float y = L->compute_from.y, up = y - style.line(), higher = up - fs * 0.6f;
    char short_label[64];
    std::snprintf(short_label, sizeof(short_label), "compute roof %.0f GFLOP/s",
                  in.compute_roof_gflops);
    bool placed = false;
    for (const std::string& text : {L->compute_label, std::string(short_label)}) {
      const float cw = style.text_width(text);
      const float right = L->frame_max.x - cw - fs * 0.3f, left = L->compute_from.x + fs * 0.3f;
      const ImVec2 candidates[] = {v2(right, up),   v2(right, higher), v2(right, y + fs * 0.3f),
                                   v2(left, up),    v2(left, higher),  v2(left, y + fs * 0.3f)};
      for (const ImVec2& c : candidates) {
        if (c.x < L->frame_min.x + 1 || c.x + cw > L->frame_max.x || c.y < L->frame_min.y + 1 ||
            c.y + fs > L->frame_max.y - 1) {
          continue;
        }
        if (on_a_marker(c, v2(c.x + cw, c.y + fs))) continue;
        L->compute_label = text;
        L->compute_label_pos = c;
        placed = true;
        break;
      }
      if (placed) break;
    }
    if (!placed) L->compute_label.clear();
  }
  if (!L->roof_visible) return;
  const float cw = L->compute_visible ? style.text_width(L->compute_label) : 0.0f;
  const ImVec2 c0 = L->compute_label_pos, c1 = v2(c0.x + cw, c0.y + fs);
  char short_label[64];
  std::snprintf(short_label, sizeof(short_label), "%.0f GB/s", in.roof_gbps);
  for (const std::string& text : {L->roof_label, std::string(short_label)}) {
    const float w = style.text_width(text);
    // Above and left of a place on the rising diagonal (clear of it), else below and right.
    std::vector<ImVec2> places;
    for (float f : {0.75f, 0.55f, 0.35f, 0.9f}) {
      const ImVec2 at = lerp(L->roof_from, L->roof_to, f);
      if (at.x - fs * 0.3f - w >= L->frame_min.x + 2 && at.y - fs * 1.4f >= L->frame_min.y + 2)
        places.push_back(v2(at.x - fs * 0.3f - w, at.y - fs * 1.4f));
    }
    for (float f : {0.2f, 0.4f, 0.6f}) {
      const ImVec2 at = lerp(L->roof_from, L->roof_to, f);
      places.push_back(v2(at.x + fs * 0.6f, at.y + fs * 0.2f));
    }
    for (const ImVec2& p : places) {
      const ImVec2 q = v2(p.x + w, p.y + fs);
      if ((L->compute_visible && overlaps(p, q, c0, c1)) || q.x > L->frame_max.x) continue;
      if (q.y > L->frame_max.y - 1 || on_a_marker(p, q)) continue;
      L->roof_label = text;
      L->roof_label_pos = p;
      return;
    }
  }
  L->roof_label.clear();
}

using Boxes = std::vector<std::pair<ImVec2, ImVec2>>;

// Where a point's label goes: the full text, else just the level's name, at the first place
// (right of the point, else below it, left of it, above it) inside the frame that no box in
// `taken` covers. Empty text when neither finds a free place (the read-out on hover still has
// everything); the chosen place joins `taken`.
std::pair<std::string, ImVec2> place_point_label(ImVec2 s, const std::string (&texts)[2],
                                                 const ViewStyle& style, const RooflineLayout& L,
                                                 Boxes* taken) {
  const float fs = style.font_size;
  for (const std::string& text : texts) {
    const float w = style.text_width(text);
    const ImVec2 candidates[] = {
        v2(s.x + fs * 0.6f, s.y - fs * 0.5f),     v2(s.x + fs * 0.6f, s.y + fs * 0.3f),
        v2(s.x - fs * 0.6f - w, s.y - fs * 0.5f), v2(s.x - fs * 0.6f - w, s.y + fs * 0.3f),
        v2(s.x + fs * 0.6f, s.y - fs * 1.4f),     v2(s.x - fs * 0.6f - w, s.y - fs * 1.4f),
        v2(s.x + fs * 0.6f, s.y + fs * 1.3f),     v2(s.x - fs * 0.6f - w, s.y + fs * 1.3f)};
    for (const ImVec2& c : candidates) {
      if (c.x < L.frame_min.x + 1 || c.x + w > L.frame_max.x - 1 || c.y < L.frame_min.y + 1 ||
          c.y + fs > L.frame_max.y - 1) {
        continue;
      }
      bool clear = true;
      for (const auto& [a, b] : *taken) {
        if (overlaps(c, v2(c.x + w, c.y + fs), a, b)) clear = false;
      }
      if (clear) {
        taken->push_back({c, v2(c.x + w, c.y + fs)});
        return {text, c};
      }
    }
  }
  return {"", s};
}

// Points, each labelled beside it, clear of the roofs' labels, the note, every marker and the
// labels before it.
void layout_points(const RooflineInput& in, const ViewStyle& style, RooflineLayout* L) {
  const float fs = style.font_size;
  Boxes taken;
  if (L->roof_visible) {
    const float w = style.text_width(L->roof_label);
    taken.push_back({L->roof_label_pos, v2(L->roof_label_pos.x + w, L->roof_label_pos.y + fs)});
  }
  if (L->compute_visible) {
    const float w = style.text_width(L->compute_label);
    taken.push_back(
        {L->compute_label_pos, v2(L->compute_label_pos.x + w, L->compute_label_pos.y + fs)});
  }
  if (!L->note.empty()) {
    taken.push_back(
        {L->note_pos, v2(L->note_pos.x + style.text_width(L->note), L->note_pos.y + fs)});
  }
  const float r = fs * 0.45f;  // the markers are taken too: no label covers a point
  for (const auto& p : in.points) {
    const ImVec2 s = v2(L->x_to_screen(p.intensity), L->y_to_screen(p.gflops));
    L->points.push_back(s);
    taken.push_back({v2(s.x - r, s.y - r), v2(s.x + r, s.y + r)});
  }
  for (size_t i = 0; i < in.points.size(); ++i) {
    const RooflinePoint& p = in.points[i];
    char buf[128];
    std::snprintf(buf, sizeof(buf), "%s: %.2f FLOP/B, %.0f GFLOP/s", p.label.c_str(), p.intensity,
                  p.gflops);
    const std::string texts[2] = {buf, p.label};
    const auto [text, pos] = place_point_label(L->points[i], texts, style, *L, &taken);
    L->point_labels.push_back(text);
    L->point_label_pos.push_back(pos);
  }
}

}  // namespace

RooflineLayout layout_roofline(const RooflineInput& in, ImVec2 min, ImVec2 max,
                               const ViewStyle& style) {
  RooflineLayout L;
  const float fs = style.font_size, line = style.line();
  L.font_size = fs;
  L.x_title = "arithmetic intensity (FLOP per textbook byte, log scale)";
  L.y_title = "achieved GFLOP/s (log scale)";
  L.y_title_pos = min;
  if (in.roof_gbps <= 0) {
    L.note = "bandwidth roof not measured yet";
  } else if (in.compute_roof_gflops <= 0) {
    L.note = "no datasheet peak for this GPU: only the bandwidth roof is drawn";
  }
  if (in.points.empty()) {
    L.frame_min = v2(min.x + fs * 4, min.y + line);
    L.frame_max = v2(max.x - fs, max.y - line * 2);
    return L;
  }
  set_ranges(in, &L);
  layout_frame_and_ticks(min, max, style, &L);
  layout_roofs(in, style, &L);
  L.note_pos = v2(L.frame_max.x - style.text_width(L.note) - fs * 0.4f, L.frame_max.y - line);
  keep_roof_labels_apart(in, style, &L);
  layout_points(in, style, &L);
  return L;
}

int roofline_hit(const RooflineLayout& layout, ImVec2 p, float max_distance) {
  int best = -1;
  float best_d2 = max_distance * max_distance;
  for (size_t i = 0; i < layout.points.size(); ++i) {
    const float dx = layout.points[i].x - p.x, dy = layout.points[i].y - p.y;
    if (dx * dx + dy * dy <= best_d2) {
      best_d2 = dx * dx + dy * dy;
      best = static_cast<int>(i);
    }
  }
  return best;
}

// ---- [SECTION] hover read-outs ---------------------------------------------------------------

std::string roofline_readout(const RooflineInput& in, int i) {
  if (i < 0 || i >= static_cast<int>(in.points.size())) return "";
  const RooflinePoint& p = in.points[i];
  char buf[400];
  const double gbps = p.bytes / (p.time_us * 1e3);
  std::snprintf(buf, sizeof(buf),
                "level %s\nintensity %.3f FLOP/byte = %.3g FLOP / %s (textbook)\n"
                "achieved %.0f GFLOP/s = %.3g FLOP in %s (median chain time)\n"
                "moving its textbook bytes at %.0f GB/s",
                p.label.c_str(), p.intensity, p.flops, format_byte_count(p.bytes).c_str(), p.gflops,
                p.flops, format_us(p.time_us).c_str(), gbps);
  std::string out = buf;
  if (in.roof_gbps > 0) {
    std::snprintf(buf, sizeof(buf), " (%.0f%% of the %.0f GB/s roof)", 100.0 * gbps / in.roof_gbps,
                  in.roof_gbps);
    out += buf;
  }
  return out;
}

// ---- [SECTION] drawing and the widget --------------------------------------------------------

void draw_roofline_layout(ImDrawList* dl, const RooflineInput& in, const RooflineLayout& L,
                          int hovered_point) {
  const float fs = L.font_size;
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const ImU32 grid = with_alpha(text, 0.12f), axis = with_alpha(text, 0.5f);
  dl->AddRectFilled(L.frame_min, L.frame_max, ImGui::GetColorU32(ImGuiCol_FrameBg));
  draw_text(dl, L.y_title_pos, dim, L.y_title);
  if (in.points.empty()) {
    dl->PushClipRect(L.frame_min, L.frame_max, true);
    draw_text(dl, v2(L.frame_min.x + fs, L.frame_min.y + fs), dim,
              "No measured level with a correct output yet.");
    dl->PopClipRect();
    dl->AddRect(L.frame_min, L.frame_max, axis, 0.0f, 0, stroke(1.0f));
    return;
  }
  float last_x = -1e30f;
  for (const auto& [x, label] : L.x_ticks) {
    dl->AddLine(v2(x, L.frame_min.y), v2(x, L.frame_max.y), grid);
    const float w = ImGui::CalcTextSize(label.c_str()).x;
    const float lx = std::max(x - w * 0.5f, L.frame_min.x - fs * 0.2f);  // clear of the y labels
    if (lx < last_x + fs * 0.3f) continue;
    last_x = lx + w;
    draw_text(dl, v2(lx, L.frame_max.y + fs * 0.2f), dim, label);
  }
  float last_y = 1e30f;
  for (const auto& [y, label] : L.y_ticks) {
    dl->AddLine(v2(L.frame_min.x, y), v2(L.frame_max.x, y), grid);
    // Centred on its tick, kept between the title row above and the x labels below.
    const float ly =
        std::clamp(y - fs * 0.5f, L.frame_min.y - fs * 0.2f, L.frame_max.y + fs * 0.15f - fs);
    if (ly + fs > last_y) continue;
    last_y = ly;
    const float w = ImGui::CalcTextSize(label.c_str()).x;
    draw_text(dl, v2(L.frame_min.x - w - fs * 0.3f, ly), dim, label);
  }
  dl->AddRect(L.frame_min, L.frame_max, axis, 0.0f, 0, stroke(1.0f));
  draw_text(dl, L.x_title_pos, dim, L.x_title);
  dl->PushClipRect(L.frame_min, L.frame_max, true);
  if (L.roof_visible) {
    dashed_line(dl, L.roof_from, L.roof_to, palette::reference, stroke(2.5f));
    draw_text(dl, L.roof_label_pos, palette::reference, L.roof_label);
  }
  if (L.compute_visible) {
    dashed_line(dl, L.compute_from, L.compute_to, palette::reference, stroke(2.5f));
    draw_text(dl, L.compute_label_pos, palette::reference, L.compute_label);
  }
  if (!L.note.empty()) draw_text(dl, L.note_pos, dim, L.note);
  for (size_t i = 0; i < L.points.size(); ++i) {
    const bool shown = static_cast<int>(i) == in.highlighted;
    const ImU32 c = palette::level_color(in.points[i].level, in.top_level);
    dl->AddCircleFilled(L.points[i], shown ? fs * 0.45f : fs * 0.32f, c);
    if (shown) dl->AddCircle(L.points[i], fs * 0.45f, text, 0, stroke(1.5f));
    if (static_cast<int>(i) == hovered_point)
      dl->AddCircle(L.points[i], fs * 0.6f, text, 0, stroke(2.0f));
    if (!L.point_labels[i].empty()) {
      draw_text(dl, L.point_label_pos[i], shown ? text : dim, L.point_labels[i]);
    }
  }
  dl->PopClipRect();
}

int draw_roofline(const char* id, const RooflineInput& input, float height) {
  const ViewStyle style = ViewStyle::current();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  if (height <= 0) height = avail.y;
  height = std::max(height, style.font_size * 10);
  const float width = std::max(avail.x, style.font_size * 20);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, ImVec2(width, height));
  const bool hovered = ImGui::IsItemHovered();
  const RooflineLayout layout = layout_roofline(input, p0, v2(p0.x + width, p0.y + height), style);
  const int point =
      hovered ? roofline_hit(layout, ImGui::GetIO().MousePos, style.font_size * 1.5f) : -1;
  draw_roofline_layout(ImGui::GetWindowDrawList(), input, layout, point);
  const ImVec2 p1 = v2(p0.x + width, p0.y + height);
  set_svg_source([input, layout, p0, p1] { return roofline_svg(input, layout, p0, p1); });
  if (point >= 0) {
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(roofline_readout(input, point).c_str());
    ImGui::EndTooltip();
  }
  return point;
}

}  // namespace fl::viz
