// Small helpers the views share: ImVec2 arithmetic (ImGui 1.86 defines its operators only inside
// imgui_internal.h), text metrics that
// layouts use without an ImGui context, and number formats that always carry a unit.
#pragma once

#include <imgui.h>

#include "viz/palette.h"
#include "viz/text.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace fl::viz {

// ---- [SECTION] ImVec2 arithmetic -------------------------------------------------------------

inline ImVec2 v2(float x, float y) {
  return ImVec2(x, y);
}
inline ImVec2 add(ImVec2 a, ImVec2 b) {
  return ImVec2(a.x + b.x, a.y + b.y);
}
inline ImVec2 sub(ImVec2 a, ImVec2 b) {
  return ImVec2(a.x - b.x, a.y - b.y);
}
inline ImVec2 scaled(ImVec2 a, float s) {
  return ImVec2(a.x * s, a.y * s);
}
inline ImVec2 lerp(ImVec2 a, ImVec2 b, float t) {
  return ImVec2(a.x + (b.x - a.x) * t, a.y + (b.y - a.y) * t);
}
inline ImVec2 middle(ImVec2 min, ImVec2 max) {
  return ImVec2(0.5f * (min.x + max.x), 0.5f * (min.y + max.y));
}
inline bool inside(ImVec2 p, ImVec2 min, ImVec2 max) {
  return p.x >= min.x && p.x <= max.x && p.y >= min.y && p.y <= max.y;
}

// ---- [SECTION] what a view needs (two views at once) -------------------------------------------
// A view notes the screen y its content needs to reach (a plot: a frame of kPlotMinFrameFonts
// lines under its legend; the flow view: every tensor block), and the window reads it, as pixels
// from the top of the panel the view is drawn in, its padding included, after drawing the pane
// (take_view_need): a pane of two views gets that height when there is room.
// Whether the window wants the notes this frame (two views one above the other); a view whose
// need costs work to find (the flow view's) skips it otherwise.
inline bool& view_need_asked() {
  static bool asked = false;
  return asked;
}
inline float& view_need_slot() {
  static float need = 0;
  return need;
}
inline void note_view_need(float bottom_y) {
  if (ImGui::GetCurrentContext() == nullptr) return;
  // The views stop one item spacing short of the panel's padding (view_height()).
  const ImGuiStyle& style = ImGui::GetStyle();
  const float need = bottom_y - ImGui::GetWindowPos().y + style.WindowPadding.y + style.ItemSpacing.y;
  view_need_slot() = std::max(view_need_slot(), need);
}
inline float take_view_need() {
  const float need = view_need_slot();
  view_need_slot() = 0;
  return need;
}

// ---- [SECTION] strokes ------------------------------------------------------------------------
// A line width given in pixels at the base font size (16 px), scaled with the font: on a HiDPI
// monitor or with --scale 2 the font doubles, and so do the lines, so plots keep their weight.
inline float stroke(float px) {
  const float scale = ImGui::GetCurrentContext() != nullptr ? ImGui::GetFontSize() / 16.0f : 1.0f;
  return px * std::max(1.0f, scale);
}

// ---- [SECTION] colours -----------------------------------------------------------------------
// Every colour has a role in viz/palette.h (the Okabe-Ito colour language); none is defined here.

inline ImU32 with_alpha(ImU32 color, float alpha) {
  ImVec4 c = ImGui::ColorConvertU32ToFloat4(color);  // needs no ImGui context
  c.w *= alpha;
  return ImGui::ColorConvertFloat4ToU32(c);
}

// A dashed straight line (reference and limit lines: the palette's neutral grey, dashed).
inline void dashed_line(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 color, float thickness,
                        float dash = 9.0f, float gap = 6.0f) {
  const float len = std::hypot(b.x - a.x, b.y - a.y);
  if (len <= 0) return;
  for (float t = 0; t < len; t += dash + gap) {
    const float e = std::min(t + dash, len);
    dl->AddLine(lerp(a, b, t / len), lerp(a, b, e / len), color, thickness);
  }
}

// ---- [SECTION] text metrics ------------------------------------------------------------------
// Layouts run without an ImGui context (tests), so they estimate text widths from the font size;
// the widgets pass the real figures from the current font.
struct ViewStyle {
  float font_size = 16.0f;
  float char_width = 0.0f;  // 0: 0.6 * font_size, a fair average for DejaVu Sans

  float cw() const { return char_width > 0 ? char_width : 0.6f * font_size; }
  // Code points, not bytes: "µs" is two characters wide, not three.
  float text_width(const std::string& s) const {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return static_cast<float>(n) * cw();
  }
  float line() const { return font_size * 1.25f; }  // one text line with its spacing
  // The current ImGui font (needs a context: call only while drawing).
  static ViewStyle current() {
    ViewStyle s;
    s.font_size = ImGui::GetFontSize();
    s.char_width = ImGui::CalcTextSize("0123456789 abcdefghij").x / 21.0f;
    return s;
  }
};

// `text` cut to at most `width` px (estimated), ending in "..." when cut; "" when not even a
// few characters fit. Cuts between code points, never inside one.
inline std::string fit_text(const std::string& text, float width, const ViewStyle& style) {
  if (style.text_width(text) <= width) return text;
  const int keep = static_cast<int>(width / style.cw()) - 3;
  if (keep < 2) return "";
  std::string out;
  int chars = 0;
  for (char c : text) {
    const bool starts_code_point = (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    if (starts_code_point && chars == keep) break;
    chars += starts_code_point;
    out += c;
  }
  // Never end on a digit ("3..." for 3033 GB/s reads as another number): cut before the number.
  while (!out.empty() && (out.back() == ' ' || (out.back() >= '0' && out.back() <= '9') ||
                          out.back() == '.' || out.back() == ',')) {
    out.pop_back();
  }
  return out + "...";
}

// Words wrapped into lines of at most `width` px (estimated). A unit never starts a line: it
// stays with its number ("64.0 MiB", "30.5 µs"). A word longer than a line is cut.
inline std::vector<std::string> wrap_text(const std::string& text, float width,
                                          const ViewStyle& style) {
  static const char* const kUnits[] = {"B",  "KiB",  "MiB",     "GiB",    "TiB", "\xC2\xB5s",
                                       "ms", "GB/s", "GFLOP/s", "FLOP/B", "%"};
  const auto is_unit = [&](std::string w) {
    while (!w.empty() && std::string(",;.:)").find(w.back()) != std::string::npos) w.pop_back();
    for (const char* u : kUnits) {
      if (w == u) return true;
    }
    return false;
  };
  std::vector<std::string> chunks;  // words, each unit glued to the number before it
  std::string word;
  const auto end_word = [&]() {
    if (word.empty()) return;
    if (!chunks.empty() && is_unit(word))
      chunks.back() += " " + word;
    else
      chunks.push_back(word);
    word.clear();
  };
  for (char c : text) {
    if (c == ' ')
      end_word();
    else
      word += c;
  }
  end_word();
  std::vector<std::string> lines;
  std::string line;
  for (const std::string& chunk : chunks) {
    const std::string candidate = line.empty() ? chunk : line + " " + chunk;
    if (line.empty() || style.text_width(candidate) <= width) {
      line = candidate;
    } else {
      lines.push_back(fit_text(line, width, style));
      line = chunk;
    }
  }
  if (!line.empty()) lines.push_back(fit_text(line, width, style));
  return lines;
}

// ---- [SECTION] numbers with units ------------------------------------------------------------

// A 1-2-5 step giving about `target` ticks over `span` (a time axis's), and a tick's label.
inline double time_tick_step(double span, int target) {
  const double raw = span / std::max(target, 1);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * p * (1 + 1e-9)) return m * p;
  }
  return 10 * p;
}
inline std::string time_tick_label(double us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g \xC2\xB5s", us);
  return buf;
}

// "1.2 µs", "30.5 µs", "253 µs", "1.25 ms".
inline std::string format_us(double us) {
  char buf[32];
  if (us >= 1000) {
    std::snprintf(buf, sizeof(buf), "%.2f ms", us / 1000);
  } else if (us >= 100) {
    std::snprintf(buf, sizeof(buf), "%.0f \xC2\xB5s", us);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f \xC2\xB5s", us);
  }
  return buf;
}

// Binary units as the rest of the app writes them ("64.0 MiB"), with a sign for differences.
inline std::string format_byte_count(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  const char* sign = bytes < 0 ? "-" : "";
  double b = std::fabs(bytes);
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[40];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%s%.0f %s" : "%s%.1f %s", sign, b, units[u]);
  return buf;
}

}  // namespace fl::viz
