// Phase timelines (phase_timeline.h).
//
// [SECTION] input: one PhaseTimelineInput per launch with phases
// [SECTION] layout: lanes, boxes, ticks, legend as plain data
// [SECTION] hover read-out
// [SECTION] drawing and the widget
#include "viz/phase_timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <utility>

namespace fl::viz {

// ---- [SECTION] input -------------------------------------------------------------------------

std::vector<PhaseTimelineInput> phase_timeline_inputs(const Measurement& m) {
  std::vector<PhaseTimelineInput> out;
  for (size_t k = 0; k < m.launches.size(); ++k) {
    const LaunchResult& l = m.launches[k];
    if (!l.phases) continue;
    PhaseTimelineInput in;
    in.kernel = l.textbook.kernel;
    in.launch = static_cast<int>(k);
    in.phases = *l.phases;
    in.lanes = phase_lanes(in.phases);
    in.tasks = std::any_of(in.phases.records.begin(), in.phases.records.end(),
                           [](const PhaseRecord& r) { return r.arg != 0 || r.wait_ns != 0; });
    out.push_back(std::move(in));
  }
  return out;
}

// ---- [SECTION] layout ------------------------------------------------------------------------

namespace {

// Phases are short: two decimals below 10 µs ("0.85 µs"), as the other views above.
std::string phase_us(double us) {
  if (us >= 10) return format_us(us);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f \xC2\xB5s", us);
  return buf;
}

std::string percent_text(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%+.1f%%", fraction * 100);
  return buf;
}

// The title and the stamps' cost, above the legend.
void layout_heading(const PhaseTimelineInput& input, ImVec2 min, ImVec2 max, const ViewStyle& style,
                    PhaseTimelineLayout* L) {
  const LaunchPhases& p = input.phases;
  std::set<uint32_t> blocks;
  std::set<uint16_t> sms;
  for (const PhaseRecord& r : p.records) {
    blocks.insert(r.block);
    sms.insert(r.sm);
  }
  char buf[200];
  std::snprintf(buf, sizeof(buf), "%s: %zu block%s on %zu SM%s, %zu phase record%s",
                input.kernel.c_str(), blocks.size(), blocks.size() == 1 ? "" : "s", sms.size(),
                sms.size() == 1 ? "" : "s", p.records.size(), p.records.size() == 1 ? "" : "s");
  L->title = buf;
  if (p.time_off_us > 0 && p.time_on_us > 0) {
    L->cost = "stamps on " + format_us(p.time_on_us) + ", off " + format_us(p.time_off_us) + " (" +
              percent_text(p.overhead()) + ")";
  }
  if (p.records.empty()) {
    L->note = "no phase records: the kernel recorded none in this run";
  } else if (p.lost > 0) {
    L->note = std::to_string(p.lost) + " records lost (the buffer was full): lanes are incomplete";
  }
  L->title_pos = min;
  L->cost_pos = v2(max.x - style.text_width(L->cost), min.y);
}

// The legend: a swatch and the name of each declared phase, wrapping onto more rows; returns
// the y below it.
float layout_legend(const PhaseTimelineInput& input, ImVec2 min, float max_x,
                    const ViewStyle& style, PhaseTimelineLayout* L) {
  const float fs = style.font_size, line = style.line();
  float x = min.x, y = min.y;
  for (size_t i = 0; i < input.phases.names.size(); ++i) {
    PhaseLegendItem item;
    item.phase = static_cast<int>(i);
    item.label = fit_text(input.phases.names[i], max_x - min.x - fs * 1.5f, style);
    const float w = fs * 1.2f + style.text_width(item.label);
    if (x > min.x && x + w > max_x) {
      x = min.x;
      y += line;
    }
    item.swatch_min = v2(x, y + fs * 0.2f);
    item.swatch_max = v2(x + fs * 0.8f, y + fs * 1.0f);
    item.text_pos = v2(x + fs * 1.1f, y);
    L->legend.push_back(item);
    x += w + fs;
  }
  return y + line * 1.1f;
}

}  // namespace

PhaseTimelineLayout layout_phase_timeline(const PhaseTimelineInput& input, ImVec2 min, ImVec2 max,
                                          const ViewStyle& style) {
  PhaseTimelineLayout L;
  const float fs = style.font_size, line = style.line();
  L.font_size = fs;
  L.axis_title = "time since the launch's first stamp (\xC2\xB5s)";
  layout_heading(input, min, max, style, &L);
  const float lanes_top = layout_legend(
      input, v2(min.x, min.y + line * (L.note.empty() ? 1.1f : 2.1f)), max.x, style, &L);
  L.note_pos = v2(min.x, min.y + line);
  const float label_w = style.text_width("SM 000") + fs * 0.5f;
  L.frame_min = v2(min.x + label_w, lanes_top);
  L.frame_max = v2(max.x - fs * 0.5f, std::max(lanes_top + fs * 2, max.y - line * 2));
  L.axis_title_pos = v2(
      0.5f * (L.frame_min.x + L.frame_max.x) - 0.5f * style.text_width(L.axis_title), max.y - line);
  const std::vector<PhaseRecord>& records = input.phases.records;
  if (records.empty() || input.lanes.size() != records.size()) return L;

  // Lanes: one row per (SM, slot), SMs in order.
  std::vector<std::pair<int, int>> keys;
  for (const PhaseLane& lane : input.lanes) keys.emplace_back(lane.sm, lane.slot);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  const float row_h = (L.frame_max.y - L.frame_min.y) / static_cast<float>(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const float y0 = L.frame_min.y + row_h * static_cast<float>(i);
    L.rows.push_back({keys[i].first, keys[i].second, y0, y0 + row_h});
  }
  // SM numbers left of their lanes, as many as fit without touching.
  const size_t every = std::max<size_t>(1, static_cast<size_t>(std::ceil(line / row_h)));
  for (size_t i = 0; i < L.rows.size(); i += every) {
    const ImVec2 pos = v2(min.x, std::min(L.rows[i].y0, L.frame_max.y - fs));
    // The last, moved up to stay inside the lanes, may come too close to the one before.
    if (!L.sm_labels.empty() && pos.y - L.sm_labels.back().pos.y < line) continue;
    L.sm_labels.push_back({"SM " + std::to_string(L.rows[i].sm), pos});
  }

  uint64_t end_ns = 0;
  for (const PhaseRecord& r : records) end_ns = std::max(end_ns, r.end_ns);
  L.span_us = std::max(end_ns * 1e-3, 1e-3);
  const float width = L.frame_max.x - L.frame_min.x;
  const auto x_of = [&](double us) {
    return L.frame_min.x + static_cast<float>(us / L.span_us) * width;
  };
  const float gap = row_h >= 4 ? 1.0f : 0.0f;  // thin lanes touch; thicker ones keep a seam
  for (size_t k = 0; k < records.size(); ++k) {
    const auto row =
        std::lower_bound(keys.begin(), keys.end(),
                         std::make_pair<int, int>(input.lanes[k].sm, int(input.lanes[k].slot)));
    const PhaseLaneRow& lane = L.rows[static_cast<size_t>(row - keys.begin())];
    PhaseBox box;
    box.record = static_cast<int>(k);
    box.phase = records[k].phase;
    box.min = v2(x_of(records[k].start_ns * 1e-3), lane.y0);
    box.max = v2(std::max(x_of(records[k].end_ns * 1e-3), box.min.x + 1.0f), lane.y1 - gap);
    L.boxes.push_back(box);
  }
  const double step =
      time_tick_step(L.span_us, std::clamp(static_cast<int>(width / (fs * 6)), 2, 8));
  for (double t = 0; t <= L.span_us * (1 + 1e-9); t += step) {
    L.ticks.push_back({x_of(t), t, time_tick_label(t)});
  }
  return L;
}

int phase_timeline_hit(const PhaseTimelineLayout& layout, ImVec2 p) {
  // Thin boxes: the nearest box in the lane under the pointer, within a few px.
  int best = -1;
  float best_d = 4.0f;
  for (size_t i = 0; i < layout.boxes.size(); ++i) {
    const PhaseBox& b = layout.boxes[i];
    if (p.y < b.min.y || p.y > b.max.y + 1.0f) continue;
    const float d = p.x < b.min.x ? b.min.x - p.x : p.x > b.max.x ? p.x - b.max.x : 0.0f;
    if (d < best_d || (d == 0 && best_d == 0)) {
      best_d = d;
      best = static_cast<int>(i);
    }
  }
  return best;
}

// ---- [SECTION] hover read-out ----------------------------------------------------------------

std::string phase_readout(const PhaseTimelineInput& input, int record) {
  const auto& records = input.phases.records;
  if (record < 0 || record >= static_cast<int>(records.size())) return "";
  const PhaseRecord& r = records[record];
  const std::string name = r.phase < input.phases.names.size() ? input.phases.names[r.phase] : "?";
  char buf[240];
  std::snprintf(buf, sizeof(buf), "%s\nblock %u on SM %u\n%s to %s: %s", name.c_str(), r.block,
                static_cast<unsigned>(r.sm), phase_us(r.start_ns * 1e-3).c_str(),
                phase_us(r.end_ns * 1e-3).c_str(),
                phase_us((r.end_ns - r.start_ns) * 1e-3).c_str());
  std::string out = buf;
  if (input.tasks) {
    const std::string named = input.task_name ? input.task_name(r.arg) : std::string();
    std::snprintf(buf, sizeof(buf), "\ntask %u%s%s%s, waited %s for its inputs", r.arg,
                  named.empty() ? "" : " (", named.c_str(), named.empty() ? "" : ")",
                  phase_us(r.wait_ns * 1e-3).c_str());
    out += buf;
  }
  return out + "\n(" + input.kernel + ", times from the launch's first stamp)";
}

// ---- [SECTION] drawing and the widget --------------------------------------------------------

void draw_phase_timeline_layout(ImDrawList* dl, const PhaseTimelineLayout& L, int hovered_box) {
  const float fs = L.font_size;
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const ImU32 grid = with_alpha(text, 0.12f), axis = with_alpha(text, 0.5f);
  TextOptions title;
  if (!L.cost.empty()) {
    const TextRect cost = draw_text(dl, L.cost_pos, dim, L.cost);
    title.max_width = std::max(cost.min.x - fs - L.title_pos.x, fs);
  }
  draw_text(dl, L.title_pos, text, L.title, title);
  if (!L.note.empty()) draw_text(dl, L.note_pos, palette::warning, L.note);
  for (const PhaseLegendItem& item : L.legend) {
    dl->AddRectFilled(item.swatch_min, item.swatch_max, palette::phase_color(item.phase), 2.0f);
    draw_text(dl, item.text_pos, text, item.label);
  }
  dl->AddRectFilled(L.frame_min, L.frame_max, ImGui::GetColorU32(ImGuiCol_FrameBg));
  float last_tick_end = -1e30f;
  for (const PhaseTick& t : L.ticks) {
    dl->AddLine(v2(t.x, L.frame_min.y), v2(t.x, L.frame_max.y), grid);
    const float w = ImGui::CalcTextSize(t.label.c_str()).x;
    const float x =
        std::clamp(t.x - 0.5f * w, L.frame_min.x - fs * 0.5f, L.frame_max.x + fs * 0.5f - w);
    if (x < last_tick_end + fs * 0.3f) continue;
    last_tick_end = x + w;
    draw_text(dl, v2(x, L.frame_max.y + fs * 0.2f), dim, t.label);
  }
  if (!L.ticks.empty()) draw_text(dl, L.axis_title_pos, dim, L.axis_title);
  for (const PhaseAxisLabel& label : L.sm_labels) draw_text(dl, label.pos, dim, label.label);
  for (const PhaseBox& b : L.boxes) dl->AddRectFilled(b.min, b.max, palette::phase_color(b.phase));
  if (hovered_box >= 0 && hovered_box < static_cast<int>(L.boxes.size())) {
    const PhaseBox& b = L.boxes[hovered_box];
    dl->AddRect(v2(b.min.x - 1, b.min.y - 1), v2(b.max.x + 1, b.max.y + 1), text, 0.0f, 0,
                stroke(2.0f));
  }
  dl->AddRect(L.frame_min, L.frame_max, axis, 0.0f, 0, stroke(1.0f));
}

void draw_phase_timeline(const char* id, const PhaseTimelineInput& input, float height) {
  const ViewStyle style = ViewStyle::current();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  height = std::max(height, style.font_size * 10);
  const float width = std::max(avail.x, style.font_size * 12);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, ImVec2(width, height));
  const bool hovered = ImGui::IsItemHovered();
  const PhaseTimelineLayout layout =
      layout_phase_timeline(input, p0, v2(p0.x + width, p0.y + height), style);
  const int box = hovered ? phase_timeline_hit(layout, ImGui::GetIO().MousePos) : -1;
  draw_phase_timeline_layout(ImGui::GetWindowDrawList(), layout, box);
  if (box >= 0) {
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(phase_readout(input, layout.boxes[box].record).c_str());
    ImGui::EndTooltip();
  }
}

}  // namespace fl::viz
