#include "viz/memory_chart.h"

#include <algorithm>
#include <cstdio>

#include "app/measure/sizes.h"

namespace fl::viz {

const char* label(MemoryBar kind) {
  switch (kind) {
    case MemoryBar::textbook_read: return "textbook read";
    case MemoryBar::textbook_write: return "textbook write";
    case MemoryBar::dram_read: return "DRAM read (measured)";
    case MemoryBar::dram_write: return "DRAM write (measured)";
    case MemoryBar::l2: return "L2 (measured)";
  }
  return "";
}

namespace {

double textbook_total(const Measurement& m) { return static_cast<double>(m.textbook_bytes()); }

// DRAM read + write of every launch, or < 0 when any launch lacks counters.
double dram_total(const Measurement& m) {
  double sum = 0;
  for (const auto& l : m.launches) {
    if (!l.counters) return -1;
    sum += static_cast<double>(l.counters->dram_read_bytes + l.counters->dram_write_bytes);
  }
  return sum;
}

const ImU32 kColors[kMemoryBarKinds] = {IM_COL32(120, 140, 170, 255), IM_COL32(90, 105, 130, 255),
                                        IM_COL32(66, 150, 250, 255), IM_COL32(240, 150, 40, 255),
                                        IM_COL32(90, 200, 120, 255)};

}  // namespace

MemoryInput memory_input(const Measurement& shown, const Measurement& level0) {
  MemoryInput in;
  in.check = shown.check;
  MemoryRow total;
  total.kernel = "total";
  total.measured = !shown.launches.empty();
  for (const LaunchResult& l : shown.launches) {
    MemoryRow row;
    row.kernel = l.textbook.kernel;
    row.bytes[0] = static_cast<double>(l.textbook.bytes_read);
    row.bytes[1] = static_cast<double>(l.textbook.bytes_written);
    if (l.counters) {
      row.measured = true;
      row.bytes[2] = static_cast<double>(l.counters->dram_read_bytes);
      row.bytes[3] = static_cast<double>(l.counters->dram_write_bytes);
      row.bytes[4] = static_cast<double>(l.counters->l2_bytes);
    }
    total.measured = total.measured && row.measured;
    for (int k = 0; k < kMemoryBarKinds; ++k) total.bytes[k] += row.bytes[k];
    in.rows.push_back(row);
  }
  in.rows.push_back(total);
  in.counters = total.measured;
  in.saved_textbook_bytes = textbook_total(level0) - textbook_total(shown);
  const double d0 = dram_total(level0), d = dram_total(shown);
  in.saved_dram_bytes = d0 >= 0 && d >= 0 ? d0 - d : -1;
  return in;
}

MemoryLayout layout_memory(const MemoryInput& input, ImVec2 min, ImVec2 max, float label_width) {
  MemoryLayout out;
  const int kinds = input.counters ? kMemoryBarKinds : 2;  // without counters: textbook only
  for (const MemoryRow& r : input.rows) {
    for (int k = 0; k < kinds; ++k) out.scale_bytes = std::max(out.scale_bytes, r.bytes[k]);
  }
  if (input.rows.empty() || out.scale_bytes <= 0) return out;
  const float row_h = (max.y - min.y) / static_cast<float>(input.rows.size());
  const float bar_h = std::max(1.0f, (row_h - 4) / kinds);
  const float x0 = min.x + label_width, width = max.x - x0;
  for (size_t i = 0; i < input.rows.size(); ++i) {
    const float top = min.y + row_h * static_cast<float>(i) + 2;
    out.row_y.push_back(top);
    for (int k = 0; k < kinds; ++k) {
      MemoryBarRect b;
      b.row = static_cast<int>(i);
      b.kind = static_cast<MemoryBar>(k);
      b.min = ImVec2(x0, top + bar_h * k);
      b.max = ImVec2(x0 + static_cast<float>(input.rows[i].bytes[k] / out.scale_bytes) * width,
                     top + bar_h * (k + 1) - 1);
      out.bars.push_back(b);
    }
  }
  return out;
}

void draw_memory_chart(const char* id, const MemoryInput& input, float height) {
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float width = std::max(ImGui::GetContentRegionAvail().x, 80.0f);
  const float fs = ImGui::GetFontSize();
  // The headline: bytes fusion saves, and the correctness badge.
  char headline[160];
  if (input.saved_textbook_bytes > 0) {
    std::snprintf(headline, sizeof(headline), "Fusion saves %s of traffic (textbook)",
                  format_bytes(input.saved_textbook_bytes).c_str());
  } else {
    std::snprintf(headline, sizeof(headline), "Level 0: nothing saved yet");
  }
  ImGui::TextUnformatted(headline);
  if (input.saved_dram_bytes >= 0) {
    ImGui::SameLine();
    ImGui::TextDisabled("| measured in DRAM: %s", format_bytes(input.saved_dram_bytes).c_str());
  }
  ImGui::SameLine();
  if (input.check.passed) {
    ImGui::TextColored(ImVec4(0.45f, 0.85f, 0.5f, 1), "| output correct (rel. error %.1e)", input.check.rel_l2_error);
  } else {
    ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "| output WRONG: no speedup shown");
  }
  // Legend.
  const int kinds = input.counters ? kMemoryBarKinds : 2;
  for (int k = 0; k < kinds; ++k) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + fs * 0.25f), ImVec2(p.x + fs * 0.6f, p.y + fs * 0.85f), kColors[k]);
    ImGui::Dummy(ImVec2(fs * 0.7f, fs));
    ImGui::SameLine();
    ImGui::TextUnformatted(label(static_cast<MemoryBar>(k)));
    if (k + 1 < kinds) ImGui::SameLine();
  }
  if (!input.counters) {
    ImGui::SameLine();
    ImGui::TextDisabled("(textbook bytes only: counters off or not yet measured)");
  }
  const ImVec2 top = ImGui::GetCursorScreenPos();
  const float chart_h = std::max(height - (top.y - origin.y), fs * 2);
  ImGui::InvisibleButton(id, ImVec2(width, chart_h));
  const float label_w = fs * 9;
  const MemoryLayout layout =
      layout_memory(input, top, ImVec2(top.x + width - fs * 5, top.y + chart_h), label_w);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (size_t i = 0; i < layout.row_y.size(); ++i) {
    dl->AddText(ImVec2(top.x, layout.row_y[i]), ImGui::GetColorU32(ImGuiCol_Text), input.rows[i].kernel.c_str());
  }
  int hovered = -1;
  for (size_t i = 0; i < layout.bars.size(); ++i) {
    const MemoryBarRect& b = layout.bars[i];
    dl->AddRectFilled(b.min, ImVec2(std::max(b.max.x, b.min.x + 1), b.max.y), kColors[static_cast<int>(b.kind)]);
    if (ImGui::IsItemHovered() && ImGui::IsMouseHoveringRect(b.min, ImVec2(b.min.x + width, b.max.y))) hovered = static_cast<int>(i);
  }
  if (hovered >= 0) {
    const MemoryBarRect& b = layout.bars[hovered];
    ImGui::BeginTooltip();
    ImGui::Text("%s, %s: %s", input.rows[b.row].kernel.c_str(), label(b.kind),
                format_bytes(input.rows[b.row].bytes[static_cast<int>(b.kind)]).c_str());
    ImGui::EndTooltip();
  }
}

}  // namespace fl::viz
