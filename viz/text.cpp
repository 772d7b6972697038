// The views' text helper (text.h).
#include "viz/text.h"

#include <algorithm>
#include <cstdio>

namespace fl::viz {
namespace {

bool g_recording = false;
std::vector<TextRect> g_rects;

float font_size_of(const TextOptions& o) {
  return o.font_size > 0 ? o.font_size : ImGui::GetFontSize();
}

float width_of(const std::string& s, float font_size) {
  if (s.empty()) return 0;
  return ImGui::GetFont()->CalcTextSizeA(font_size, 1e30f, 0.0f, s.c_str()).x;
}

// Code-point boundaries, so a cut never splits "µ".
size_t previous_boundary(const std::string& s, size_t end) {
  if (end == 0) return 0;
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

void remember(const TextRect& r) {
  if (g_recording && r.max.x > r.min.x) g_rects.push_back(r);
}

TextRect draw_one(ImDrawList* dl, ImVec2 pos, ImU32 color, const std::string& text,
                  const TextOptions& o, float fs) {
  TextRect r;
  r.clip_min = dl->GetClipRectMin();
  r.clip_max = dl->GetClipRectMax();
  r.min = r.max = pos;
  if (text.empty()) return r;
  if (pos.y < r.clip_min.y - 0.5f || pos.y + fs > r.clip_max.y + 0.5f) return r;  // no room
  if (pos.x < r.clip_min.x) pos.x = r.clip_min.x;
  float room = r.clip_max.x - pos.x;
  if (o.max_width > 0) room = std::min(room, o.max_width);
  std::string shown = text;
  float w = width_of(text, fs);
  if (w > room) {
    shown = ellipsize(text, room, fs);
    if (shown.empty()) return r;
    w = width_of(shown, fs);
  }
  dl->AddText(ImGui::GetFont(), fs, pos, color, shown.c_str());
  r.min = pos;
  r.max = ImVec2(pos.x + w, pos.y + fs);
  r.text = shown;
  if (shown != text && ImGui::IsMouseHoveringRect(r.min, r.max, false)) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 35);
    ImGui::TextUnformatted(text.c_str());
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
  if (o.record) remember(r);
  return r;
}

}  // namespace

std::string ellipsize(const std::string& text, float width, float font_size) {
  const float fs = font_size > 0 ? font_size : ImGui::GetFontSize();
  if (width_of(text, fs) <= width) return text;
  const std::string dots = "...";
  size_t end = text.size();
  while (end > 0) {
    end = previous_boundary(text, end);
    std::string candidate = text.substr(0, end);
    while (!candidate.empty() && candidate.back() == ' ') candidate.pop_back();
    if (candidate.empty()) break;
    // Never end on a digit: "3..." for 3033 GB/s reads as another number. The cut goes before
    // the number instead.
    const char last = candidate.back();
    if ((last >= '0' && last <= '9') || last == '.' || last == ',') continue;
    if (width_of(candidate + dots, fs) <= width) return candidate + dots;
  }
  return "";
}

TextRect draw_text(ImDrawList* dl, ImVec2 pos, ImU32 color, const std::string& text,
                   const TextOptions& options) {
  return draw_one(dl, pos, color, text, options, font_size_of(options));
}

TextRect draw_text_lines(ImDrawList* dl, ImVec2 pos, ImU32 color, const std::string& text,
                         const TextOptions& options) {
  const float fs = font_size_of(options);
  TextRect all;
  all.min = all.max = pos;
  size_t start = 0;
  float y = pos.y;
  bool first = true;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    const TextRect r =
        draw_one(dl, ImVec2(pos.x, y), color, text.substr(start, nl - start), options, fs);
    if (r.max.x > r.min.x) {
      if (first) all = r;
      all.min = ImVec2(std::min(all.min.x, r.min.x), std::min(all.min.y, r.min.y));
      all.max = ImVec2(std::max(all.max.x, r.max.x), std::max(all.max.y, r.max.y));
      first = false;
    }
    y += fs;
    start = nl + 1;
  }
  return all;
}

void set_text_recording(bool on) {
  g_recording = on;
}
bool text_recording() {
  return g_recording;
}
void record_text(const TextRect& rect) {
  if (g_recording) g_rects.push_back(rect);
}
const std::vector<TextRect>& recorded_text() {
  return g_rects;
}
void clear_recorded_text() {
  g_rects.clear();
}

std::vector<std::string> text_problems(const std::vector<TextRect>& rects, float slack) {
  std::vector<std::string> out;
  char buf[512];
  for (size_t i = 0; i < rects.size(); ++i) {
    const TextRect& a = rects[i];
    if (a.min.x < a.clip_min.x - slack || a.min.y < a.clip_min.y - slack ||
        a.max.x > a.clip_max.x + slack || a.max.y > a.clip_max.y + slack) {
      std::snprintf(buf, sizeof(buf),
                    "'%s' (%.0f,%.0f)-(%.0f,%.0f) crosses its clip rect (%.0f,%.0f)-(%.0f,%.0f)",
                    a.text.c_str(), a.min.x, a.min.y, a.max.x, a.max.y, a.clip_min.x, a.clip_min.y,
                    a.clip_max.x, a.clip_max.y);
      out.push_back(buf);
    }
    for (size_t j = i + 1; j < rects.size(); ++j) {
      const TextRect& b = rects[j];
      const bool overlap = a.min.x < b.max.x - slack && b.min.x < a.max.x - slack &&
                           a.min.y < b.max.y - slack && b.min.y < a.max.y - slack;
      if (overlap) {
        std::snprintf(buf, sizeof(buf),
                      "'%s' (%.0f,%.0f)-(%.0f,%.0f) overlaps '%s' (%.0f,%.0f)-(%.0f,%.0f)",
                      a.text.c_str(), a.min.x, a.min.y, a.max.x, a.max.y, b.text.c_str(), b.min.x,
                      b.min.y, b.max.x, b.max.y);
        out.push_back(buf);
      }
    }
  }
  return out;
}

}  // namespace fl::viz
