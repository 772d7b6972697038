#include "viz/timeline_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/measure/sizes.h"

namespace fl::viz {
namespace {

std::string dims(const std::array<int, 3>& d) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
}

// A 1-2-5 step giving about `target` ticks over `span`.
double nice_step(double span, int target) {
  const double raw = span / std::max(target, 1);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * p) return m * p;
  }
  return 10 * p;
}

std::string us_label(double us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), us < 10 ? "%.1f us" : "%.0f us", us);
  return buf;
}

}  // namespace

TimelineInput timeline_input(const Measurement& m) {
  TimelineInput in;
  in.title = "level " + std::to_string(m.level) + " " + m.level_name + ": " +
             std::to_string(m.launches.size()) + (m.launches.size() == 1 ? " launch" : " launches");
  if (!m.records.empty()) {
    in.from_records = true;
    for (const KernelRecord& r : m.records) {
      TimelineLaunch l;
      l.kernel = r.launch >= 0 && r.launch < static_cast<int>(m.launches.size())
                     ? m.launches[r.launch].textbook.kernel
                     : r.kernel;
      l.start_us = r.start_rel_ns * 1e-3;
      l.end_us = r.end_rel_ns * 1e-3;
      l.grid = dims(r.grid);
      l.block = dims(r.block);
      l.registers = r.registers_per_thread;
      if (r.launch >= 0 && r.launch < static_cast<int>(m.launches.size())) {
        l.textbook_bytes = m.launches[r.launch].textbook.bytes();
      }
      in.launches.push_back(l);
    }
    std::sort(in.launches.begin(), in.launches.end(),
              [](const TimelineLaunch& a, const TimelineLaunch& b) { return a.start_us < b.start_us; });
    return in;
  }
  double t = 0;
  for (const LaunchResult& r : m.launches) {
    TimelineLaunch l;
    l.kernel = r.textbook.kernel;
    l.start_us = t;
    l.end_us = t + r.time_us.median;
    l.textbook_bytes = r.textbook.bytes();
    t = l.end_us;
    in.launches.push_back(l);
  }
  return in;
}

TimelineLayout layout_timeline(const TimelineInput& input, ImVec2 min, ImVec2 max) {
  TimelineLayout out;
  if (input.launches.empty()) return out;
  for (const auto& l : input.launches) out.span_us = std::max(out.span_us, l.end_us);
  if (out.span_us <= 0) return out;
  const float width = max.x - min.x;
  auto x_of = [&](double us) { return min.x + static_cast<float>(us / out.span_us) * width; };
  const float bar_top = min.y + (max.y - min.y) * 0.15f, bar_bottom = max.y - (max.y - min.y) * 0.35f;
  for (size_t i = 0; i < input.launches.size(); ++i) {
    const TimelineLaunch& l = input.launches[i];
    TimelineBar bar;
    bar.min = ImVec2(x_of(l.start_us), bar_top);
    bar.max = ImVec2(std::max(x_of(l.end_us), bar.min.x + 1.0f), bar_bottom);  // at least 1 px
    bar.launch = static_cast<int>(i);
    out.bars.push_back(bar);
    if (input.from_records && i > 0) {
      const double gap = l.start_us - input.launches[i - 1].end_us;
      if (gap > 0) out.gaps.push_back({x_of(input.launches[i - 1].end_us), x_of(l.start_us), gap});
    }
  }
  const double step = nice_step(out.span_us, 6);
  for (double t = 0; t <= out.span_us * 1.0001; t += step) out.ticks.push_back({x_of(t), us_label(t)});
  return out;
}

int timeline_hit(const TimelineLayout& layout, ImVec2 p) {
  for (const TimelineBar& b : layout.bars) {
    if (p.x >= b.min.x && p.x <= b.max.x && p.y >= b.min.y && p.y <= b.max.y) return b.launch;
  }
  return -1;
}

void draw_timeline(const char* id, const TimelineInput& input, float height) {
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float width = std::max(ImGui::GetContentRegionAvail().x, 50.0f);
  ImGui::InvisibleButton(id, ImVec2(width, height));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 min(origin.x + 4, origin.y), max(origin.x + width - 4, origin.y + height);
  dl->AddRectFilled(origin, ImVec2(origin.x + width, origin.y + height), IM_COL32(22, 32, 52, 255));
  const TimelineLayout layout = layout_timeline(input, min, max);
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  static const ImU32 kColors[] = {IM_COL32(66, 150, 250, 255), IM_COL32(240, 150, 40, 255),
                                  IM_COL32(90, 200, 120, 255), IM_COL32(200, 100, 200, 255),
                                  IM_COL32(230, 90, 90, 255)};
  for (const TimelineBar& b : layout.bars) {
    dl->AddRectFilled(b.min, b.max, kColors[b.launch % 5]);
    const std::string& name = input.launches[b.launch].kernel;
    const ImVec2 size = ImGui::CalcTextSize(name.c_str());
    if (b.max.x - b.min.x > size.x + 6) {
      dl->AddText(ImVec2(b.min.x + 3, (b.min.y + b.max.y - size.y) / 2), IM_COL32(10, 10, 10, 255),
                  name.c_str());
    }
  }
  for (const TimelineGap& g : layout.gaps) {
    const float y = layout.bars.empty() ? min.y : layout.bars[0].max.y + 2;
    dl->AddLine(ImVec2(g.x0, y), ImVec2(g.x1, y), text);
    char buf[32];
    std::snprintf(buf, sizeof(buf), "gap %.1f us", g.us);
    if (g.x1 - g.x0 > ImGui::CalcTextSize(buf).x) dl->AddText(ImVec2(g.x0 + 2, y + 1), dim, buf);
  }
  for (const TimelineTick& t : layout.ticks) {
    dl->AddLine(ImVec2(t.x, max.y - ImGui::GetFontSize() - 3), ImVec2(t.x, max.y - ImGui::GetFontSize()), dim);
    dl->AddText(ImVec2(std::min(t.x, max.x - ImGui::CalcTextSize(t.label.c_str()).x), max.y - ImGui::GetFontSize()),
                dim, t.label.c_str());
  }
  if (!input.from_records && !input.launches.empty()) {
    dl->AddText(ImVec2(min.x + 2, min.y), dim, "from median durations, back to back (no raw records)");
  }
  if (ImGui::IsItemHovered()) {
    const int hit = timeline_hit(layout, ImGui::GetIO().MousePos);
    if (hit >= 0) {
      const TimelineLaunch& l = input.launches[hit];
      ImGui::BeginTooltip();
      ImGui::Text("%s", l.kernel.c_str());
      ImGui::Text("%.2f us (%.2f .. %.2f us)", l.end_us - l.start_us, l.start_us, l.end_us);
      if (!l.grid.empty()) ImGui::Text("grid %s, block %s, %d registers", l.grid.c_str(), l.block.c_str(), l.registers);
      ImGui::Text("textbook bytes: %s", format_bytes(static_cast<double>(l.textbook_bytes)).c_str());
      ImGui::EndTooltip();
    }
  }
}

}  // namespace fl::viz
