#include "app/gui/widgets.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "app/measure/replay_backend.h"
#include "model/sizes.h"
#include "viz/text.h"

namespace fl::gui {

void help_marker(const char* text) {
  ImGui::SameLine();
  ImGui::TextDisabled("(?)");
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32.0f);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

void section_title(const char* text, const char* help) {
  ImGui::TextColored(ImVec4(0.55f, 0.78f, 1.0f, 1.0f), "%s", text);
  help_marker(help);
  ImGui::Separator();
}

namespace {

// Headings are larger than the body text and drawn brighter; emphasis has a colour of its own.
float font_scale(BlockKind kind) {
  return kind == BlockKind::heading1 ? 1.3f : kind == BlockKind::heading2 ? 1.12f : 1.0f;
}
ImU32 text_color(BlockKind kind, bool emphasis) {
  if (emphasis) return IM_COL32(140, 200, 255, 255);
  return kind == BlockKind::paragraph ? IM_COL32(214, 214, 214, 255) : IM_COL32(255, 255, 255, 255);
}

}  // namespace

void help_marker(const LessonText& text, const std::string& after, const std::string& before) {
  ImGui::SameLine();
  ImGui::TextDisabled("(?)");
  if (!ImGui::IsItemHovered()) return;
  ImGui::BeginTooltip();
  const float width = ImGui::GetFontSize() * 32.0f;
  if (!text.note.empty()) draw_text_note(text.note, width);
  std::vector<TextBlock> blocks;
  const auto paragraph = [&](const std::string& words) {
    if (words.empty()) return;
    TextBlock block;
    block.spans.push_back({words, false});
    blocks.push_back(std::move(block));
  };
  paragraph(before);
  blocks.insert(blocks.end(), text.blocks.begin(), text.blocks.end());
  paragraph(after);
  draw_text_blocks(blocks, width);
  ImGui::EndTooltip();
}

void section_title(const char* text, const LessonText& help, const std::string& after,
                   const std::string& before) {
  ImGui::TextColored(ImVec4(0.55f, 0.78f, 1.0f, 1.0f), "%s", text);
  help_marker(help, after, before);
  ImGui::Separator();
}

void section_title_with(const char* text, const LessonText& help,
                        const std::function<void()>& controls) {
  ImGui::TextColored(ImVec4(0.55f, 0.78f, 1.0f, 1.0f), "%s", text);
  help_marker(help);
  ImGui::SameLine(0, ImGui::GetFontSize() * 1.5f);
  controls();
  ImGui::Separator();
}

void draw_text_note(const std::string& note, float wrap_x) {
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.72f, 0.35f, 1.0f));
  ImGui::PushTextWrapPos(wrap_x);
  ImGui::TextUnformatted(note.c_str());
  ImGui::PopTextWrapPos();
  ImGui::PopStyleColor();
  ImGui::Spacing();
}

std::vector<TextLine> draw_text_blocks(const std::vector<TextBlock>& blocks, float width,
                                       std::vector<bool>* visible) {
  ImFont* font = ImGui::GetFont();
  const float base = ImGui::GetFontSize();
  const MeasureText measure = [&](const std::string& s, BlockKind kind, bool) {
    return font
        ->CalcTextSizeA(base * font_scale(kind), FLT_MAX, 0.0f, s.c_str(), s.c_str() + s.size())
        .x;
  };
  const std::vector<TextLine> lines = wrap_text(blocks, width, measure);
  if (visible) visible->assign(lines.size(), false);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 clip_min = dl->GetClipRectMin(), clip_max = dl->GetClipRectMax();
  for (size_t i = 0; i < lines.size(); ++i) {
    const TextLine& line = lines[i];
    const float size = base * font_scale(line.kind);
    if (line.first_of_block && i > 0) ImGui::Dummy(ImVec2(0, base * 0.45f));  // between blocks
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    for (const LineRun& run : line.runs) {
      dl->AddText(font, size, ImVec2(pos.x + run.x, pos.y), text_color(line.kind, run.emphasis),
                  run.text.c_str(), run.text.c_str() + run.text.size());
    }
    ImGui::Dummy(ImVec2(width, size + ImGui::GetStyle().ItemSpacing.y * 0.5f));
    if (visible) (*visible)[i] = pos.y >= clip_min.y - 0.5f && pos.y + size <= clip_max.y + 0.5f;
  }
  return lines;
}

bool log_size_slider(const char* id, int64_t* size, int64_t min, int64_t max, bool* released,
                     const std::vector<int64_t>& stops) {
  const float lo = static_cast<float>(std::log2(static_cast<double>(min)));
  const float hi = static_cast<float>(std::log2(static_cast<double>(max)));
  float octaves = static_cast<float>(std::log2(static_cast<double>(*size)));
  const std::string label = size_text(*size);
  const bool moved = ImGui::SliderFloat(id, &octaves, lo, hi, "", ImGuiSliderFlags_NoInput);
  *released = ImGui::IsItemDeactivatedAfterEdit();
  slider_value_text(label, hi > lo ? (octaves - lo) / (hi - lo) : 0.0f,
                    ImGui::GetStyle().GrabMinSize);
  if (!stops.empty() && hi > lo) {
    // Ticks where the grab's centre sits at each stop (the geometry of ImGui 1.86's float slider:
    // 2 px padding, a grab GrabMinSize wide).
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    const float grab = ImGui::GetStyle().GrabMinSize, padding = 2.0f;
    const float usable = (b.x - a.x) - padding * 2 - grab;
    const float tick = std::max(3.0f, ImGui::GetFontSize() * 0.22f);
    const ImU32 color = ImGui::GetColorU32(ImGuiCol_Text, 0.55f);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int64_t s : stops) {
      const float t = (static_cast<float>(std::log2(static_cast<double>(s))) - lo) / (hi - lo);
      const float x = std::round(a.x + padding + grab * 0.5f + std::clamp(t, 0.0f, 1.0f) * usable);
      dl->AddLine(ImVec2(x, b.y - tick), ImVec2(x, b.y), color, 1.5f);
      dl->AddLine(ImVec2(x, a.y), ImVec2(x, a.y + tick), color, 1.5f);
    }
  }
  if (!moved) return false;
  int64_t value = 0;
  if (!stops.empty()) {
    value = nearest_recorded_size(stops, std::llround(std::exp2(std::clamp(octaves, lo, hi))));
  } else {
    // Quarter octaves: fine enough to trace the curve, coarse enough that each stop is distinct.
    const double snapped = std::round(std::clamp(octaves, lo, hi) * 4.0) / 4.0;
    value = std::clamp<int64_t>(std::llround(std::exp2(snapped)), min, max);
  }
  if (value == *size) return false;
  *size = value;
  return true;
}

void record_widget_label(const std::string& label, LabelPlace place) {
  if (!viz::text_recording() || !ImGui::IsItemVisible()) return;
  const std::string shown = label.substr(0, label.find("##"));
  if (shown.empty()) return;
  const ImGuiStyle& style = ImGui::GetStyle();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
  const ImVec2 clip_min = dl->GetClipRectMin(), clip_max = dl->GetClipRectMax();
  // A panel that scrolls down cuts nothing off its top or bottom (the learner scrolls).
  if (ImGui::GetScrollMaxY() > 0 && (a.y < clip_min.y || b.y > clip_max.y)) return;
  const float w = ImGui::CalcTextSize(shown.c_str()).x, fs = ImGui::GetFontSize();
  viz::TextRect r;
  r.text = shown;
  r.clip_min = clip_min;
  r.clip_max = clip_max;
  const float y = std::max(a.y, 0.5f * (a.y + b.y - fs));
  if (place == LabelPlace::in_frame) {
    const float lo = a.x + style.FramePadding.x, hi = b.x - style.FramePadding.x;
    const float x = std::max(lo, 0.5f * (lo + hi - w));  // centred, else from the left
    r.min = ImVec2(x, y);
    r.max = ImVec2(x + w, y + fs);
    r.clip_min.x = std::max(r.clip_min.x, lo - 0.5f);
    r.clip_max.x = std::min(r.clip_max.x, hi + 0.5f);
  } else if (place == LabelPlace::from_left) {
    // A selectable's rectangle reaches half an item spacing left of its text (ImGui 1.86).
    const float x = a.x + std::floor(style.ItemSpacing.x * 0.5f);
    r.min = ImVec2(x, y);
    r.max = ImVec2(x + w, y + fs);
  } else {
    r.min = ImVec2(b.x - w, y);
    r.max = ImVec2(b.x, y + fs);
  }
  viz::record_text(r);
}

void slider_value_text(const std::string& text, float t, float grab_w,
                       const std::string& short_text) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
  const float padding = 2.0f, usable = (b.x - a.x) - padding * 2 - grab_w;
  const float grab_min = a.x + padding + std::clamp(t, 0.0f, 1.0f) * usable;
  const float grab_max = grab_min + grab_w;
  // The larger side of the frame beside the handle.
  const float left_w = grab_min - a.x, right_w = b.x - grab_max;
  const bool left = left_w >= right_w;
  const float lo = left ? a.x + style.FramePadding.x : grab_max + style.FramePadding.x;
  const float hi = left ? grab_min - style.FramePadding.x : b.x - style.FramePadding.x;
  const float room = std::max(0.0f, hi - lo);
  const bool short_fits =
      !short_text.empty() && ImGui::CalcTextSize(short_text.c_str()).x <= room;
  const std::string shown = ImGui::CalcTextSize(text.c_str()).x <= room ? text
                            : short_fits                                  ? short_text
                                                                          : fit_text(text, room);
  const float w = ImGui::CalcTextSize(shown.c_str()).x;
  const ImVec2 pos(std::max(lo, 0.5f * (lo + hi - w)), a.y + style.FramePadding.y);
  ImGui::GetWindowDrawList()->AddText(pos, ImGui::GetColorU32(ImGuiCol_Text), shown.c_str());
  if (shown != text && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", text.c_str());
  if (viz::text_recording() && !shown.empty()) {
    viz::TextRect r;
    r.min = pos;
    r.max = ImVec2(pos.x + w, pos.y + ImGui::GetFontSize());
    r.clip_min = ImVec2(lo - 0.5f, a.y);
    r.clip_max = ImVec2(hi + 0.5f, b.y);
    r.text = shown;
    viz::record_text(r);
  }
}

std::string fit_text(const std::string& text, float width) {
  if (ImGui::CalcTextSize(text.c_str()).x <= width) return text;
  ImFont* font = ImGui::GetFont();
  const bool has_ellipsis = font && font->FindGlyphNoFallback(0x2026) != nullptr;
  const std::string ellipsis = has_ellipsis ? "\u2026" : "...";
  // Character starts (UTF-8), then the longest prefix that fits with the ellipsis.
  std::vector<size_t> starts;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) starts.push_back(i);
  }
  size_t lo = 0, hi = starts.size();  // number of characters kept
  while (lo < hi) {
    const size_t mid = (lo + hi + 1) / 2;
    const std::string candidate = text.substr(0, mid < starts.size() ? starts[mid] : text.size());
    if (ImGui::CalcTextSize((candidate + ellipsis).c_str()).x <= width) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  std::string kept = text.substr(0, lo < starts.size() ? starts[lo] : text.size());
  // Never end on a digit ("3..." for 3033 GB/s reads as another number): cut before the number.
  while (!kept.empty() && (kept.back() == ' ' || (kept.back() >= '0' && kept.back() <= '9') ||
                           kept.back() == '.' || kept.back() == ',')) {
    kept.pop_back();
  }
  return kept + ellipsis;
}

void text_fitted(const std::string& text, float width, bool disabled, ImU32 color) {
  // What is left of the window's line (not of a table cell: a fixed-fit column sizes itself to
  // its text, so fitting to the cell would shrink it to nothing).
  if (width <= 0) {
    width = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x -
            ImGui::GetCursorScreenPos().x;
  }
  const std::string shown = fit_text(text, std::max(0.0f, width));
  if (color != 0) ImGui::PushStyleColor(ImGuiCol_Text, color);
  if (disabled)
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextUnformatted(shown.c_str());
  if (disabled) ImGui::PopStyleColor();
  if (color != 0) ImGui::PopStyleColor();
  if (shown != text && ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32.0f);
    ImGui::TextUnformatted(text.c_str());
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

void spinner(float radius, ImU32 color) {
  const ImVec2 pos = ImGui::GetCursorScreenPos();
  const float h = ImGui::GetTextLineHeight();
  ImGui::Dummy(ImVec2(radius * 2 + 2, h));
  const ImVec2 center(pos.x + radius + 1, pos.y + h * 0.5f);
  const float start = static_cast<float>(ImGui::GetTime()) * 6.0f;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->PathArcTo(center, radius, start, start + 4.2f, 24);
  dl->PathStroke(color, 0, std::max(2.0f, radius * 0.3f));
}

void banner(const char* id, const std::string& text, ImVec4 background, ImVec4 border) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const float width = ImGui::GetContentRegionAvail().x;
  const float wrap = width - style.WindowPadding.x * 2;
  const float height =
      ImGui::CalcTextSize(text.c_str(), nullptr, false, wrap).y + style.WindowPadding.y * 2;
  ImGui::PushStyleColor(ImGuiCol_ChildBg, background);
  ImGui::PushStyleColor(ImGuiCol_Border, border);
  ImGui::BeginChild(id, ImVec2(width, height), true, ImGuiWindowFlags_NoScrollbar);
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextUnformatted(text.c_str());
  ImGui::PopTextWrapPos();
  ImGui::EndChild();
  ImGui::PopStyleColor(2);
}

std::string size_text(int64_t elements) {
  const std::string exact = format_size(elements);
  if (exact.find_first_not_of("0123456789") != std::string::npos || elements < 10000) return exact;
  std::string grouped;  // thousands separators for non-round sizes
  for (size_t i = 0; i < exact.size(); ++i) {
    if (i > 0 && (exact.size() - i) % 3 == 0) grouped += ',';
    grouped += exact[i];
  }
  return grouped;
}

std::string version_text(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  return buf;
}

}  // namespace fl::gui

namespace fl::gui {

std::string tensor_text(const Lesson& lesson, int64_t size, Precision precision) {
  const SizeAxis& axis = lesson.info().size_axis;
  const Shape shape = lesson.resolve(Shape(size));
  std::string text = size_text(size) + " " + axis.unit;
  int64_t elements = size;
  if (shape.inner > 0) {
    text += " x " + size_text(shape.inner);
    elements *= shape.inner;
  }
  return text + " = " + format_bytes(static_cast<double>(elements) * bytes_per_element(precision)) +
         " of " + to_string(precision);
}

}  // namespace fl::gui
