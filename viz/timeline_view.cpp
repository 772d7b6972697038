// The timeline (timeline_view.h).
//
// [SECTION] input: TimelineInput from a Measurement (records, else medians)
// [SECTION] layout: bars, gaps, ticks and labels as plain data
// [SECTION] hover read-outs
// [SECTION] drawing and the widget
#include "viz/timeline_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/catalog.h"

namespace fl::viz {

// ---- [SECTION] input -------------------------------------------------------------------------

TimelineInput timeline_input(const Measurement& m) {
  TimelineInput in;
  const size_t n = m.launches.size();
  in.level = m.level;
  if (const Lesson* lesson = find_lesson(m.lesson)) in.top_level = lesson->level_count() - 1;
  in.title = "level " + std::to_string(m.level) + " " + m.level_name + ": " + std::to_string(n) +
             (n == 1 ? " launch" : " launches");
  const auto fill_from_launch = [&](TimelineLaunch* l, int k) {
    if (k < 0 || static_cast<size_t>(k) >= n) return;
    const LaunchResult& r = m.launches[k];
    l->launch = k;
    l->kernel = r.textbook.kernel;
    l->variant = r.variant;
    l->textbook_bytes = r.textbook.bytes();
    if (r.counters) l->dram_bytes = r.counters->dram_read_bytes + r.counters->dram_write_bytes;
  };

  if (!m.records.empty()) {
    in.from_records = true;
    // Relative times as the engine stored them; older recordings may carry only absolute ones.
    const bool has_relative = std::any_of(m.records.begin(), m.records.end(),
                                          [](const KernelRecord& r) { return r.end_rel_ns > 0; });
    uint64_t first = UINT64_MAX;
    std::vector<int> records_of(n, 0);  // a CUDA graph's one launch holds all its kernels
    for (const KernelRecord& r : m.records) {
      first = std::min(first, r.start_ns);
      if (r.launch >= 0 && static_cast<size_t>(r.launch) < n) ++records_of[r.launch];
    }
    for (const KernelRecord& r : m.records) {
      TimelineLaunch l;
      fill_from_launch(&l, r.launch);
      // One launch, many kernels: each bar names its own kernel, not the launch's step.
      const bool one_of_many =
          r.launch >= 0 && static_cast<size_t>(r.launch) < n && records_of[r.launch] > 1;
      if (l.kernel.empty() || one_of_many) l.kernel = r.kernel;
      l.cupti_name = r.kernel;
      l.start_ns = has_relative ? r.start_rel_ns : static_cast<int64_t>(r.start_ns - first);
      l.end_ns = has_relative ? r.end_rel_ns : static_cast<int64_t>(r.end_ns - first);
      l.grid = r.grid;
      l.block = r.block;
      l.registers = r.registers_per_thread;
      l.shared_bytes = r.static_shared_bytes + r.dynamic_shared_bytes;
      in.launches.push_back(l);
    }
    std::stable_sort(
        in.launches.begin(), in.launches.end(),
        [](const TimelineLaunch& a, const TimelineLaunch& b) { return a.start_ns < b.start_ns; });
    // The axis starts at the first launch, whatever the records' origin.
    const int64_t origin = in.launches.front().start_ns;
    for (auto& l : in.launches) {
      l.start_ns -= origin;
      l.end_ns -= origin;
    }
    return in;
  }
  int64_t t = 0;
  for (size_t k = 0; k < n; ++k) {
    TimelineLaunch l;
    fill_from_launch(&l, static_cast<int>(k));
    l.start_ns = t;
    l.end_ns =
        t + static_cast<int64_t>(std::llround(std::max(m.launches[k].time_us.median, 0.0) * 1e3));
    t = l.end_ns;
    in.launches.push_back(l);
  }
  return in;
}

// ---- [SECTION] layout ------------------------------------------------------------------------

namespace {

// A bar's kernel name: inside the bar, centred, when it fits; else above the bars, if it does
// not run into the previous label (whose right edge is *last_label_end).
void label_bar(const std::string& kernel, float max_x, const ViewStyle& style,
               float* last_label_end, TimelineBar* bar) {
  const float fs = style.font_size;
  const float bar_w = bar->max.x - bar->min.x;
  const float name_w = style.text_width(kernel);
  if (name_w + fs * 0.6f <= bar_w) {
    bar->label = kernel;
    bar->label_pos =
        v2(0.5f * (bar->min.x + bar->max.x) - 0.5f * name_w, 0.5f * (bar->min.y + bar->max.y - fs));
    return;
  }
  bar->label_inside = false;
  const float x = std::max(bar->min.x, *last_label_end + fs * 0.5f);
  const std::string name = fit_text(kernel, max_x - x, style);
  if (!name.empty() && x < max_x) {
    bar->label = name;
    bar->label_pos = v2(x, bar->min.y - style.line());
    *last_label_end = x + style.text_width(name);
  }
}

// Gap labels under the bars, centred on their gap, each clear of the one before.
void place_gap_labels(float min_x, float max_x, const ViewStyle& style, TimelineLayout* L) {
  const float fs = style.font_size;
  float last_gap_end = -1e30f;
  for (auto& g : L->gaps) {
    const float w = style.text_width(g.label);
    const float x = std::clamp(0.5f * (g.x0 + g.x1) - 0.5f * w, min_x, max_x - w);
    g.label_pos = v2(x, L->frame_max.y + fs * 0.1f);
    g.label_visible = x >= last_gap_end + fs * 0.5f;
    if (g.label_visible) last_gap_end = x + w;
  }
}

}  // namespace

// The line above the bars: how many, how busy, how much gap. Kernels that overlap (programmatic
// dependent launch starts one before the one before it ends) sum to more than the span: the line
// says so rather than add busy and gaps up to a wrong total.
static std::string timeline_summary(const TimelineInput& input, double busy_us, double gaps_us,
                                    double span_us) {
  char buf[160];
  const double overlap_us = busy_us + gaps_us - span_us;
  // A CUDA graph is one launch of many kernels: the bars are kernels then.
  std::vector<int> launch_ids;
  for (const TimelineLaunch& l : input.launches) launch_ids.push_back(l.launch);
  std::sort(launch_ids.begin(), launch_ids.end());
  const bool graph = std::unique(launch_ids.begin(), launch_ids.end()) - launch_ids.begin() <
                     static_cast<std::ptrdiff_t>(input.launches.size());
  const size_t bars = input.launches.size();
  const char* noun =
      graph ? (bars == 1 ? "kernel" : "kernels") : (bars == 1 ? "launch" : "launches");
  if (input.from_records && overlap_us > 0.01 * span_us) {
    std::snprintf(buf, sizeof(buf), "%zu %s overlapping: %s of kernel time in %s", bars, noun,
                  format_us(busy_us).c_str(), format_us(span_us).c_str());
  } else if (input.from_records) {
    std::snprintf(buf, sizeof(buf), "%zu %s: %s busy + %s of gaps = %s", bars, noun,
                  format_us(busy_us).c_str(), format_us(gaps_us).c_str(),
                  format_us(span_us).c_str());
  } else {
    std::snprintf(buf, sizeof(buf), "%zu launch%s, medians back to back: %s", input.launches.size(),
                  input.launches.size() == 1 ? "" : "es", format_us(span_us).c_str());
  }
  return buf;
}

TimelineLayout layout_timeline(const TimelineInput& input, ImVec2 min, ImVec2 max,
                               const ViewStyle& style) {
  TimelineLayout L;
  const float fs = style.font_size, line = style.line();
  L.font_size = fs;
  L.axis_title = "time since the first launch starts (\xC2\xB5s)";
  if (!input.from_records && !input.launches.empty()) L.note = "from medians (no raw records)";
  // Rows, top to bottom: summary and note; kernel labels that do not fit in their bar; the bars;
  // gap labels; tick labels; the axis title.
  L.summary_pos = min;
  const float bars_top = min.y + line * 2.1f;
  // A short strip (two views at once) leaves the axis title out: the ticks carry the unit.
  const bool titled = max.y - min.y >= fs * kTimelineTitledFonts - 0.5f;
  if (!titled) L.axis_title.clear();
  const float axis_title_h = titled ? line : 0.0f, tick_h = line, gap_label_h = line;
  L.frame_min = v2(min.x + fs * 0.5f, bars_top);
  L.frame_max = v2(max.x - fs * 0.5f,
                   std::max(bars_top + fs * 1.5f, max.y - axis_title_h - tick_h - gap_label_h));
  L.axis_title_pos =
      v2(0.5f * (L.frame_min.x + L.frame_max.x) - 0.5f * style.text_width(L.axis_title),
         max.y - axis_title_h);
  L.note_pos = v2(max.x - style.text_width(L.note), min.y);
  if (input.launches.empty()) return L;

  int64_t end_ns = 0, busy_ns = 0;
  for (const auto& l : input.launches) {
    end_ns = std::max(end_ns, l.end_ns);
    busy_ns += std::max<int64_t>(l.end_ns - l.start_ns, 0);
  }
  L.span_us = end_ns * 1e-3;
  if (L.span_us <= 0) return L;
  const float width = L.frame_max.x - L.frame_min.x;
  const auto x_of = [&](double us) {
    return L.frame_min.x + static_cast<float>(us / L.span_us) * width;
  };
  const float bar_top = L.frame_min.y + fs * 0.2f, bar_bottom = L.frame_max.y - fs * 0.2f;
  float last_label_end = -1e30f;  // right edge of the last label drawn above the bars
  double gaps_us = 0;
  for (size_t i = 0; i < input.launches.size(); ++i) {
    const TimelineLaunch& l = input.launches[i];
    TimelineBar bar;
    bar.launch = static_cast<int>(i);
    bar.min = v2(x_of(l.start_us()), bar_top);
    bar.max = v2(std::max(x_of(l.end_us()), bar.min.x + 1.0f), bar_bottom);
    label_bar(l.variant.empty() ? l.kernel : l.kernel + " [" + l.variant + "]", max.x, style,
              &last_label_end, &bar);
    L.bars.push_back(bar);
    if (input.from_records && i > 0) {
      const double gap = l.start_us() - input.launches[i - 1].end_us();
      if (gap > 0) {
        gaps_us += gap;
        TimelineGap g;
        g.x0 = x_of(input.launches[i - 1].end_us());
        g.x1 = x_of(l.start_us());
        g.us = gap;
        g.after = static_cast<int>(i - 1);
        g.label = "gap " + format_us(gap);
        L.gaps.push_back(g);
      }
    }
  }
  place_gap_labels(min.x, max.x, style, &L);
  const double step =
      time_tick_step(L.span_us, std::clamp(static_cast<int>(width / (fs * 6)), 2, 8));
  for (double t = 0; t <= L.span_us * (1 + 1e-9); t += step) {
    L.ticks.push_back({x_of(t), t, time_tick_label(t)});
  }
  L.summary = timeline_summary(input, busy_ns * 1e-3, gaps_us, L.span_us);
  return L;
}

int timeline_hit(const TimelineLayout& layout, ImVec2 p) {
  for (const TimelineBar& b : layout.bars) {
    if (inside(p, b.min, b.max)) return b.launch;
  }
  return -1;
}

int timeline_gap_hit(const TimelineLayout& layout, ImVec2 p) {
  const float slack = 3.0f;
  for (size_t i = 0; i < layout.gaps.size(); ++i) {
    const TimelineGap& g = layout.gaps[i];
    if (p.x >= g.x0 - slack && p.x <= g.x1 + slack && p.y >= layout.frame_min.y &&
        p.y <= layout.frame_max.y + layout.font_size * 1.3f) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// ---- [SECTION] hover read-outs ---------------------------------------------------------------

std::string timeline_readout(const TimelineInput& input, int launch) {
  if (launch < 0 || launch >= static_cast<int>(input.launches.size())) return "";
  const TimelineLaunch& l = input.launches[launch];
  std::string out = l.kernel;
  if (!l.variant.empty()) out += ", variant " + l.variant;
  if (!l.cupti_name.empty() && l.cupti_name != l.kernel) out += "  (" + l.cupti_name + ")";
  char buf[200];
  std::snprintf(buf, sizeof(buf), "\nlaunch %d of %zu: %s, from %s to %s%s", launch + 1,
                input.launches.size(), format_us(l.duration_us()).c_str(),
                format_us(l.start_us()).c_str(), format_us(l.end_us()).c_str(),
                input.from_records ? "" : " (median)");
  out += buf;
  if (l.has_launch_config()) {
    std::snprintf(buf, sizeof(buf), "\ngrid %d x %d x %d, block %d x %d x %d", l.grid[0], l.grid[1],
                  l.grid[2], l.block[0], l.block[1], l.block[2]);
    out += buf;
    std::snprintf(buf, sizeof(buf), "\n%d registers per thread, %s shared memory per block",
                  l.registers, format_byte_count(l.shared_bytes).c_str());
    out += buf;
  }
  out += "\ntextbook bytes: " + format_byte_count(static_cast<double>(l.textbook_bytes));
  if (l.dram_bytes >= 0) {
    out += "\nDRAM bytes (measured): " + format_byte_count(static_cast<double>(l.dram_bytes));
  }
  return out;
}

std::string timeline_gap_readout(const TimelineInput& input, const TimelineGap& gap) {
  const int a = gap.after, b = gap.after + 1;
  if (a < 0 || b >= static_cast<int>(input.launches.size())) return "";
  return "gap: the GPU idles " + format_us(gap.us) + " between " + input.launches[a].kernel +
         " and " + input.launches[b].kernel +
         "\n(launch overhead and the wait for the previous kernel to drain; fusing removes it)";
}

// ---- [SECTION] drawing and the widget --------------------------------------------------------

void draw_timeline_layout(ImDrawList* dl, const TimelineInput& input, const TimelineLayout& L,
                          int hovered_launch, int hovered_gap) {
  const float fs = L.font_size;
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const ImU32 grid = with_alpha(text, 0.12f), axis = with_alpha(text, 0.5f);
  dl->AddRectFilled(L.frame_min, L.frame_max, ImGui::GetColorU32(ImGuiCol_FrameBg));
  if (input.launches.empty()) {
    draw_text(dl, v2(L.frame_min.x + fs * 0.5f, L.frame_min.y + fs * 0.3f), dim,
              "No launches to show yet.");
    return;
  }
  // The note right-aligned on the summary's row; the summary shortens to leave it room.
  TextOptions summary;
  if (!L.note.empty()) {
    const TextRect note = draw_text(dl, L.note_pos, palette::warning, L.note);
    summary.max_width = std::max(note.min.x - fs - L.summary_pos.x, fs);
  }
  draw_text(dl, L.summary_pos, text, L.summary, summary);
  float last_tick_end = -1e30f;
  for (const auto& t : L.ticks) {
    dl->AddLine(v2(t.x, L.frame_min.y), v2(t.x, L.frame_max.y), grid);
    dl->AddLine(v2(t.x, L.frame_max.y), v2(t.x, L.frame_max.y + fs * 0.3f), axis);
    const float w = ImGui::CalcTextSize(t.label.c_str()).x;
    const float x =
        std::clamp(t.x - 0.5f * w, L.frame_min.x - fs * 0.5f, L.frame_max.x + fs * 0.5f - w);
    if (x < last_tick_end + fs * 0.3f) continue;
    last_tick_end = x + w;
    draw_text(dl, v2(x, L.frame_max.y + fs * 1.3f), dim, t.label);
  }
  draw_text(dl, L.axis_title_pos, dim, L.axis_title);
  dl->AddRect(L.frame_min, L.frame_max, axis, 0.0f, 0, stroke(1.0f));
  // The level's colour, every other launch lighter, so neighbours stay apart.
  const ImU32 level_color = palette::level_color(input.level, input.top_level);
  const ImU32 shades[2] = {level_color, with_alpha(level_color, 0.7f)};
  for (const TimelineBar& b : L.bars) {
    dl->AddRectFilled(b.min, b.max, shades[b.launch % 2], 2.0f);
    if (b.launch == hovered_launch) dl->AddRect(b.min, b.max, text, 2.0f, 0, stroke(2.0f));
    if (!b.label.empty()) {
      TextOptions o;
      if (b.label_inside) o.max_width = b.max.x - b.label_pos.x;
      draw_text(dl, b.label_pos, b.label_inside ? palette::text_on_bar : text, b.label, o);
    }
  }
  for (size_t i = 0; i < L.gaps.size(); ++i) {
    const TimelineGap& g = L.gaps[i];
    // A bracket under the gap, wide enough to see however short the gap is.
    const float y = L.frame_max.y - fs * 0.1f, cx = 0.5f * (g.x0 + g.x1);
    const float x0 = std::min(g.x0, cx - 2), x1 = std::max(g.x1, cx + 2);
    const ImU32 c = static_cast<int>(i) == hovered_gap ? text : palette::reference;
    dl->AddRectFilled(v2(x0, L.frame_min.y + fs * 0.2f), v2(x1, L.frame_max.y - fs * 0.2f),
                      with_alpha(palette::reference, 0.25f));
    dl->AddLine(v2(x0, y), v2(x1, y), c, stroke(2.0f));
    if (g.label_visible) draw_text(dl, g.label_pos, c, g.label);
  }
}

int draw_timeline(const char* id, const TimelineInput& input, float height) {
  const ViewStyle style = ViewStyle::current();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  if (height <= 0) height = avail.y;
  height = std::max(height, style.font_size * kTimelineMinFonts);
  const float width = std::max(avail.x, style.font_size * 12);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, ImVec2(width, height));
  const bool hovered = ImGui::IsItemHovered();
  const TimelineLayout layout = layout_timeline(input, p0, v2(p0.x + width, p0.y + height), style);
  int launch = -1, gap = -1;
  if (hovered) {
    launch = timeline_hit(layout, ImGui::GetIO().MousePos);
    if (launch < 0) gap = timeline_gap_hit(layout, ImGui::GetIO().MousePos);
  }
  draw_timeline_layout(ImGui::GetWindowDrawList(), input, layout, launch, gap);
  const std::string readout = launch >= 0 ? timeline_readout(input, launch)
                              : gap >= 0  ? timeline_gap_readout(input, layout.gaps[gap])
                                          : std::string();
  if (!readout.empty()) {
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(readout.c_str());
    ImGui::EndTooltip();
  }
  return launch;
}

}  // namespace fl::viz
