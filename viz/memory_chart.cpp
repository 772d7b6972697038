// The memory chart (memory_chart.h).
//
// [SECTION] input: MemoryInput from the shown level and level 0
// [SECTION] layout: axis, grouped bars, legend, headline and badge as plain data
// [SECTION] hover read-outs
// [SECTION] drawing and the widget
#include "viz/memory_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "viz/plot.h"  // nice_linear_step
#include "viz/svg.h"

namespace fl::viz {

const char* label(MemoryBar kind) {
  switch (kind) {
    case MemoryBar::textbook:
      return "textbook";
    case MemoryBar::dram:
      return "DRAM (measured)";
    case MemoryBar::l2:
      return "L2 (measured)";
  }
  return "";
}

// ---- [SECTION] input -------------------------------------------------------------------------

namespace {

std::string why_no_counters(const Measurement& m) {
  if (!m.counters_note.empty()) return m.counters_note;
  switch (m.counters_status) {
    case CountersStatus::pending:
      return "the counters are being read";
    case CountersStatus::unavailable:
      return "this system cannot read the counters";
    case CountersStatus::failed:
      return "reading the counters failed";
    case CountersStatus::not_measured:
    case CountersStatus::measured:
      break;
  }
  return "counters off";
}

}  // namespace

double tallest_memory_bar(const Measurement& m) {
  double top = 0, tb = 0, dram = 0, l2 = 0;
  bool all_counters = !m.launches.empty();
  for (const LaunchResult& l : m.launches) {
    const double t = static_cast<double>(l.textbook.bytes_read + l.textbook.bytes_written);
    tb += t;
    top = std::max(top, t);
    if (l.counters) {
      const double d =
          static_cast<double>(l.counters->dram_read_bytes + l.counters->dram_write_bytes);
      dram += d;
      l2 += static_cast<double>(l.counters->l2_bytes);
      top = std::max({top, d, static_cast<double>(l.counters->l2_bytes)});
    } else {
      all_counters = false;
    }
  }
  top = std::max(top, tb);
  if (all_counters) top = std::max({top, dram, l2});
  return top;
}

// Every level's peak device memory at the shown size (the shown level's alone without
// `all_levels`), in level order.
std::vector<MemoryInput::LevelPeak> level_peaks(const Measurement& shown,
                                                const std::vector<Measurement>* all_levels) {
  std::vector<MemoryInput::LevelPeak> peaks;
  auto add = [&](const Measurement& m) {
    if (m.peak_device_bytes <= 0) return;
    for (const auto& p : peaks)
      if (p.level == m.level) return;
    peaks.push_back({m.level, m.level_name, static_cast<double>(m.peak_device_bytes)});
  };
  if (all_levels) {
    for (const Measurement& m : *all_levels)
      if (m.size == shown.size && m.lesson == shown.lesson && m.inner == shown.inner) add(m);
  }
  add(shown);
  std::sort(peaks.begin(), peaks.end(),
            [](const auto& a, const auto& b) { return a.level < b.level; });
  return peaks;
}

MemoryInput memory_input(const Measurement& shown, const Measurement& level0,
                         const std::vector<Measurement>* all_levels) {
  MemoryInput in;
  if (all_levels) {
    for (const Measurement& m : *all_levels) {
      if (m.size == shown.size && m.lesson == shown.lesson) {
        in.axis_bytes = std::max(in.axis_bytes, tallest_memory_bar(m));
      }
    }
  }
  in.peaks = level_peaks(shown, all_levels);
  in.peak_bytes = static_cast<double>(shown.peak_device_bytes);
  in.level_name = std::to_string(shown.level) + " " + shown.level_name;
  MemoryGroup total;
  total.kernel = "total";
  total.measured = !shown.launches.empty();
  for (const LaunchResult& l : shown.launches) {
    MemoryGroup g;
    g.kernel = l.textbook.kernel;
    g.textbook_read = static_cast<double>(l.textbook.bytes_read);
    g.textbook_write = static_cast<double>(l.textbook.bytes_written);
    if (l.counters) {
      g.measured = true;
      g.dram_read = static_cast<double>(l.counters->dram_read_bytes);
      g.dram_write = static_cast<double>(l.counters->dram_write_bytes);
      g.l2 = static_cast<double>(l.counters->l2_bytes);
    }
    total.measured = total.measured && g.measured;
    total.textbook_read += g.textbook_read;
    total.textbook_write += g.textbook_write;
    total.dram_read += g.dram_read;
    total.dram_write += g.dram_write;
    total.l2 += g.l2;
    in.groups.push_back(g);
  }
  in.groups.push_back(total);
  in.counters = total.measured;
  if (!in.counters) in.counters_note = why_no_counters(shown);
  in.baseline = &shown == &level0 || shown.level == level0.level;
  in.where = tensor_homes(shown, nullptr, &level0).headline;
  in.level0_textbook_bytes = static_cast<double>(level0.textbook_bytes());
  in.saved_textbook_bytes = in.level0_textbook_bytes - static_cast<double>(shown.textbook_bytes());
  const auto d0 = level0.counters_total(), d = shown.counters_total();
  if (d0 && d) {
    in.saved_dram_known = true;
    in.saved_dram_bytes = static_cast<double>(d0->dram_read_bytes + d0->dram_write_bytes) -
                          static_cast<double>(d->dram_read_bytes + d->dram_write_bytes);
  }
  in.check = shown.check;
  in.checked = shown.check.passed || shown.check.tolerance > 0;
  return in;
}

// ---- [SECTION] layout ------------------------------------------------------------------------

namespace {

const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
// Textbook bars: the hue of their direction, lighter than the measured DRAM bars.
constexpr float kTextbookAlpha = 0.45f;

std::string in_unit(double bytes, double unit_bytes, const char* unit) {
  const double v = bytes / unit_bytes;
  char buf[40];
  std::snprintf(buf, sizeof(buf), v >= 10 || v == 0 ? "%.0f %s" : "%.1f %s", v, unit);
  return buf;
}

// Screen y of `bytes` on the chart's axis (frame and axis_max_bytes set).
float memory_y(const MemoryLayout& L, double bytes) {
  return L.frame_max.y -
         static_cast<float>(bytes / L.axis_max_bytes) * (L.frame_max.y - L.frame_min.y);
}

std::string short_error(double e) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1e", e);
  return buf;
}

}  // namespace

namespace {

// The device memory the shown level held, against level 0's, and every level's at this size
// ("levels 0 to 3: 3.1 GiB, 3.1 GiB, 96.0 MiB, 96.0 MiB"): short, for the narrow side column.
std::vector<std::string> peak_sentences(const MemoryInput& in) {
  std::vector<std::string> out;
  if (in.peak_bytes > 0) {
    std::string s = "peak device memory: " + format_byte_count(in.peak_bytes);
    if (!in.peaks.empty() && in.peaks.front().level == 0 && !in.baseline)
      s += " (level 0: " + format_byte_count(in.peaks.front().bytes) + ")";
    out.push_back(s);
  }
  if (in.peaks.size() > 1) {
    const auto& p = in.peaks;
    const bool runs = p.back().level - p.front().level + 1 == static_cast<int>(p.size());
    std::string levels = "levels " + std::to_string(p.front().level);
    for (size_t i = 1; i < p.size() && !runs; ++i) levels += ", " + std::to_string(p[i].level);
    if (runs) levels += " to " + std::to_string(p.back().level);
    std::string bytes;
    for (const auto& level : p)
      bytes += (bytes.empty() ? "" : ", ") + format_byte_count(level.bytes);
    out.push_back(levels + ": " + bytes);
  }
  return out;
}

// The headline column on the right: what fusion saves (or level 0's bytes), the big number and
// its sentences. Returns the y below them.
float layout_headline(const MemoryInput& in, float side_w, ImVec2 min, const ViewStyle& style,
                      MemoryLayout* L) {
  const float fs = style.font_size, line = style.line();
  float y = min.y;
  L->saved_title_pos = v2(L->side_min.x, y);
  y += line;
  L->saved_value_pos = v2(L->side_min.x, y);
  y += L->big_font_size * 1.1f;
  L->saved_detail_pos = v2(L->side_min.x, y);
  std::vector<std::string> sentences;
  if (in.baseline) {
    L->saved_title = "level 0 moves (textbook)";
    L->saved_bytes = in.level0_textbook_bytes;
    L->saved_value = format_byte_count(L->saved_bytes);
    sentences.push_back("the unfused baseline: move the fusion slider to see what fusion saves");
  } else {
    L->saved_title = "saved by fusion (textbook)";
    L->saved_bytes = in.saved_textbook_bytes;
    L->saved_value = format_byte_count(L->saved_bytes);
    const double share = in.level0_textbook_bytes > 0
                             ? 100.0 * in.saved_textbook_bytes / in.level0_textbook_bytes
                             : 0.0;
    char buf[200];
    std::snprintf(buf, sizeof(buf), "level 0 moves %s,",
                  format_byte_count(in.level0_textbook_bytes).c_str());
    sentences.push_back(buf);
    std::snprintf(buf, sizeof(buf), "level %s moves %s (%.0f%% less)", in.level_name.c_str(),
                  format_byte_count(in.level0_textbook_bytes - in.saved_textbook_bytes).c_str(),
                  share);
    sentences.push_back(buf);
    if (in.saved_dram_known) {
      sentences.push_back("measured in DRAM: " + format_byte_count(in.saved_dram_bytes) + " less");
    }
  }
  if (!in.where.empty()) sentences.push_back(in.where);
  for (auto& sentence : peak_sentences(in)) sentences.push_back(std::move(sentence));
  const float side_text_w = side_w - fs * 0.5f;
  for (const auto& sentence : sentences) {
    for (auto& l : wrap_text(sentence, side_text_w, style)) L->saved_detail.push_back(l);
  }
  return y + L->saved_detail.size() * line + fs * 0.5f;
}

// The correctness badge at `y` in the headline column, as wide as its longest line.
void layout_badge(const MemoryInput& in, float y, float side_w, const ViewStyle& style,
                  MemoryLayout* L) {
  const float fs = style.font_size;
  if (!in.checked) {
    L->badge = "output not checked";
  } else if (in.check.passed) {
    L->badge = "output correct\nrel. error " + short_error(in.check.rel_l2_error) +
               (in.check.tolerance > 0 ? " (tol. " + short_error(in.check.tolerance) + ")" : "");
  } else {
    L->badge = "output WRONG: no speedup\nrel. error " + short_error(in.check.rel_l2_error) +
               (in.check.tolerance > 0 ? " > tol. " + short_error(in.check.tolerance) : "");
  }
  L->badge_ok = in.checked && in.check.passed;
  float badge_w = 0;
  int badge_lines = 1;
  size_t start = 0;
  for (size_t i = 0; i <= L->badge.size(); ++i) {
    if (i == L->badge.size() || L->badge[i] == '\n') {
      badge_w = std::max(badge_w, style.text_width(L->badge.substr(start, i - start)));
      if (i < L->badge.size()) ++badge_lines;
      start = i + 1;
    }
  }
  L->badge_min = v2(L->side_min.x, y);
  L->badge_max =
      v2(L->side_min.x + std::min(badge_w + fs, side_w), y + badge_lines * fs * 1.2f + fs * 0.6f);
}

// The legend on top of the chart, flowing into rows between chart_min_x and chart_max_x, then
// the note on missing counters. Returns the y below it.
float layout_legend(const MemoryInput& in, float chart_min_x, float chart_max_x, float top,
                    const ViewStyle& style, MemoryLayout* L) {
  const float fs = style.font_size, line = style.line();
  std::vector<MemoryLegendEntry> entries = {{"textbook read | write",
                                             with_alpha(palette::reads, kTextbookAlpha),
                                             with_alpha(palette::writes, kTextbookAlpha),
                                             {}}};
  if (in.counters) {
    entries.push_back({"DRAM read | write (measured)", palette::reads, palette::writes, {}});
    entries.push_back({"L2 requests (measured)", palette::l2, palette::l2, {}});
  }
  float lx = chart_min_x, ly = top;
  for (auto& e : entries) {
    const float w = fs * 1.6f + style.text_width(e.label) + fs;
    if (lx > chart_min_x && lx + w > chart_max_x) {
      lx = chart_min_x;
      ly += line;
    }
    e.pos = v2(lx, ly);
    lx += w;
    L->legend.push_back(e);
  }
  if (!in.counters) {
    L->counters_note = "no DRAM / L2 bars: " + in.counters_note;
    const float w = style.text_width(L->counters_note);
    if (lx > chart_min_x && lx + w > chart_max_x) {
      lx = chart_min_x;
      ly += line;
    }
    L->counters_note = fit_text(L->counters_note, chart_max_x - lx, style);
    L->counters_note_pos = v2(lx, ly);
  }
  return ly + line + fs * 0.3f;
}

// The tallest bar of any group (and of the other levels at this size: one axis for all).
double tallest_bar(const MemoryInput& in) {
  double top = 0;
  for (const auto& g : in.groups) {
    top = std::max(top, g.textbook_read + g.textbook_write);
    if (in.counters) top = std::max({top, g.dram_read + g.dram_write, g.l2});
  }
  return std::max(top, in.axis_bytes);
}

// The axis and the frame below `frame_top`: a unit that keeps the numbers short, 1-2-5 steps.
// Returns the unit's size in bytes.
double layout_axis(double top, float chart_min_x, float chart_max_x, float frame_top, ImVec2 max,
                   const ViewStyle& style, MemoryLayout* L) {
  const float fs = style.font_size, line = style.line();
  int u = 0;
  while (u < 4 && top >= 1024.0 * std::pow(1024.0, u)) ++u;
  const double unit_bytes = std::pow(1024.0, u);
  L->unit = kUnits[u];
  // Headroom above the tallest bar for its value label.
  double lo = 0, hi = top > 0 ? top * 1.12 / unit_bytes : 1;
  const float frame_bottom = std::max(frame_top + fs * 3, max.y - line * 1.1f);
  const int max_ticks =
      std::clamp(static_cast<int>((frame_bottom - frame_top) / (fs * 1.6f)), 2, 6);
  const double step = nice_linear_step(&lo, &hi, max_ticks);
  L->axis_max_bytes = hi * unit_bytes;
  float widest = 0;
  std::vector<std::string> tick_labels;
  for (double v = 0; v <= hi * (1 + 1e-9); v += step) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%g %s", v, L->unit.c_str());
    tick_labels.push_back(buf);
    widest = std::max(widest, style.text_width(buf));
  }
  L->frame_min = v2(chart_min_x + widest + fs * 0.6f, frame_top);
  L->frame_max = v2(std::max(L->frame_min.x + fs * 4, chart_max_x), frame_bottom);
  for (size_t i = 0; i < tick_labels.size(); ++i) {
    L->y_ticks.push_back({memory_y(*L, i * step * unit_bytes), tick_labels[i]});
  }
  return unit_bytes;
}

// The grouped bars of each launch (and the total): textbook (read | write), DRAM (read | write)
// and L2, with their value labels and the groups' kernel names.
void layout_bars(const MemoryInput& in, double unit_bytes, const ViewStyle& style,
                 MemoryLayout* L) {
  const float fs = style.font_size;
  const int groups = static_cast<int>(in.groups.size());
  const int kinds = in.counters ? 3 : 1;
  const float group_w = (L->frame_max.x - L->frame_min.x) / groups;
  const float bar_gap = std::max(2.0f, group_w * 0.04f);
  const float bar_w = std::min((group_w * 0.8f - bar_gap * (kinds - 1)) / kinds, fs * 4);
  const float content_w = bar_w * kinds + bar_gap * (kinds - 1);
  for (int gi = 0; gi < groups; ++gi) {
    const MemoryGroup& g = in.groups[gi];
    const float gx = L->frame_min.x + gi * group_w;
    const float x0 = gx + 0.5f * (group_w - content_w);
    for (int k = 0; k < kinds; ++k) {
      MemoryBarRect b;
      b.group = gi;
      b.kind = static_cast<MemoryBar>(k);
      const double read = b.kind == MemoryBar::textbook ? g.textbook_read
                          : b.kind == MemoryBar::dram   ? g.dram_read
                                                        : g.l2;
      const double write = b.kind == MemoryBar::textbook ? g.textbook_write
                           : b.kind == MemoryBar::dram   ? g.dram_write
                                                         : 0.0;
      b.bytes = read + write;
      const float bx = x0 + k * (bar_w + bar_gap);
      b.min = v2(bx, memory_y(*L, b.bytes));
      b.max = v2(bx + bar_w, L->frame_max.y);
      b.split_y = memory_y(*L, read);
      b.value_label = in_unit(b.bytes, unit_bytes, L->unit.c_str());
      const float vw = style.text_width(b.value_label);
      b.value_pos = v2(bx + 0.5f * (bar_w - vw), b.min.y - fs * 1.1f);
      b.value_visible = vw <= bar_w + bar_gap * 0.8f && b.value_pos.y >= L->frame_min.y + 1;
      L->bars.push_back(b);
    }
    const std::string name = fit_text(g.kernel, group_w - fs * 0.3f, style);
    L->group_labels.push_back(
        {v2(gx + 0.5f * (group_w - style.text_width(name)), L->frame_max.y + fs * 0.15f), name});
  }
}

}  // namespace

MemoryLayout layout_memory(const MemoryInput& in, ImVec2 min, ImVec2 max, const ViewStyle& style) {
  MemoryLayout L;
  const float fs = style.font_size;
  L.font_size = fs;
  L.big_font_size = fs * 2.0f;
  const float W = std::max(max.x - min.x, fs * 20);
  const float side_w = std::clamp(W * 0.3f, fs * 12, fs * 20);
  L.side_min = v2(min.x + W - side_w, min.y);
  L.side_max = v2(min.x + W, max.y);
  const float below_headline = layout_headline(in, side_w, min, style, &L);
  layout_badge(in, below_headline, side_w, style, &L);

  const float chart_min_x = min.x, chart_max_x = L.side_min.x - fs * 1.2f;
  const float legend_bottom = layout_legend(in, chart_min_x, chart_max_x, min.y, style, &L);
  const double top = tallest_bar(in);
  const double unit_bytes =
      layout_axis(top, chart_min_x, chart_max_x, legend_bottom, max, style, &L);
  if (in.groups.empty() || top <= 0) return L;
  layout_bars(in, unit_bytes, style, &L);
  return L;
}

int memory_hit(const MemoryLayout& layout, ImVec2 p) {
  for (size_t i = 0; i < layout.bars.size(); ++i) {
    const MemoryBarRect& b = layout.bars[i];
    // The whole column above the bar counts, so short bars are easy to hover.
    if (p.x >= b.min.x && p.x <= b.max.x && p.y >= layout.frame_min.y && p.y <= b.max.y) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// ---- [SECTION] hover read-outs ---------------------------------------------------------------

std::string memory_readout(const MemoryInput& in, const MemoryBarRect& bar) {
  if (bar.group < 0 || bar.group >= static_cast<int>(in.groups.size())) return "";
  const MemoryGroup& g = in.groups[bar.group];
  const double textbook = g.textbook_read + g.textbook_write;
  std::string out = g.kernel + ", " + label(bar.kind) + ":\n";
  char buf[240];
  if (bar.kind == MemoryBar::textbook) {
    std::snprintf(buf, sizeof(buf),
                  "read %s + write %s = %s\nthe fewest bytes the kernel must move",
                  format_byte_count(g.textbook_read).c_str(),
                  format_byte_count(g.textbook_write).c_str(), format_byte_count(textbook).c_str());
  } else if (bar.kind == MemoryBar::dram) {
    const double dram = g.dram_read + g.dram_write;
    std::snprintf(buf, sizeof(buf), "read %s + write %s = %s\n%.0f%% of the textbook bytes",
                  format_byte_count(g.dram_read).c_str(), format_byte_count(g.dram_write).c_str(),
                  format_byte_count(dram).c_str(), textbook > 0 ? 100.0 * dram / textbook : 0.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%s requested from L2 (hits and misses, reads and writes)",
                  format_byte_count(g.l2).c_str());
  }
  return out + buf;
}

// ---- [SECTION] drawing and the widget --------------------------------------------------------

void draw_memory_layout(ImDrawList* dl, const MemoryInput& in, const MemoryLayout& L,
                        int hovered_bar) {
  const float fs = L.font_size;
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const ImU32 grid = with_alpha(text, 0.12f), axis = with_alpha(text, 0.5f);

  for (const auto& e : L.legend) {
    const float h = fs * 0.8f, top = e.pos.y + fs * 0.15f;
    dl->AddRectFilled(v2(e.pos.x, top), v2(e.pos.x + fs * 0.6f, top + h), e.color_a);
    dl->AddRectFilled(v2(e.pos.x + fs * 0.6f, top), v2(e.pos.x + fs * 1.2f, top + h), e.color_b);
    draw_text(dl, v2(e.pos.x + fs * 1.6f, e.pos.y), text, e.label);
  }
  if (!L.counters_note.empty())
    draw_text(dl, L.counters_note_pos, palette::warning, L.counters_note);

  dl->AddRectFilled(L.frame_min, L.frame_max, ImGui::GetColorU32(ImGuiCol_FrameBg));
  for (const auto& [ty, tl] : L.y_ticks) {
    dl->AddLine(v2(L.frame_min.x, ty), v2(L.frame_max.x, ty), grid);
    const ImVec2 size = ImGui::CalcTextSize(tl.c_str());
    draw_text(dl, v2(L.frame_min.x - fs * 0.35f - size.x, ty - size.y * 0.5f), dim, tl);
  }
  dl->AddRect(L.frame_min, L.frame_max, axis, 0.0f, 0, stroke(1.0f));
  if (in.groups.size() > 1) {  // the total stands apart from the launches
    const float x = L.frame_min.x + (L.frame_max.x - L.frame_min.x) * (in.groups.size() - 1) /
                                        static_cast<float>(in.groups.size());
    for (float yy = L.frame_min.y; yy < L.frame_max.y; yy += 10) {
      dl->AddLine(v2(x, yy), v2(x, std::min(yy + 5, L.frame_max.y)), axis);
    }
  }
  for (size_t i = 0; i < L.bars.size(); ++i) {
    const MemoryBarRect& b = L.bars[i];
    const ImVec2 top_left = v2(b.min.x, std::min(b.min.y, b.max.y - 1));
    if (b.kind == MemoryBar::l2) {
      dl->AddRectFilled(top_left, b.max, palette::l2);
    } else {
      const bool dram = b.kind == MemoryBar::dram;
      const float a = dram ? 1.0f : kTextbookAlpha;
      dl->AddRectFilled(v2(b.min.x, b.split_y), b.max, with_alpha(palette::reads, a));
      dl->AddRectFilled(top_left, v2(b.max.x, b.split_y), with_alpha(palette::writes, a));
    }
    if (static_cast<int>(i) == hovered_bar) dl->AddRect(top_left, b.max, text, 0, 0, stroke(2.0f));
    if (b.value_visible) draw_text(dl, b.value_pos, dim, b.value_label);
  }
  for (const auto& [pos, name] : L.group_labels) draw_text(dl, pos, text, name);

  // The headline: the big number and the badge.
  draw_text(dl, L.saved_title_pos, dim, L.saved_title);
  TextOptions big;
  big.font_size = L.big_font_size;
  draw_text(dl, L.saved_value_pos, !in.baseline && L.saved_bytes > 0 ? palette::level_top : text,
            L.saved_value, big);
  float y = L.saved_detail_pos.y;
  for (const auto& l : L.saved_detail) {
    draw_text(dl, v2(L.saved_detail_pos.x, y), text, l);
    y += fs * 1.25f;
  }
  const ImU32 badge_color = L.badge_ok ? palette::correct : in.checked ? palette::wrong : dim;
  dl->AddRectFilled(L.badge_min, L.badge_max, with_alpha(badge_color, 0.18f), 5.0f);
  dl->AddRect(L.badge_min, L.badge_max, badge_color, 5.0f, 0, stroke(1.5f));
  TextOptions badge;
  badge.max_width = L.badge_max.x - L.badge_min.x - fs * 0.6f;
  draw_text_lines(dl, v2(L.badge_min.x + fs * 0.5f, L.badge_min.y + fs * 0.3f), text, L.badge,
                  badge);
}

int draw_memory_chart(const char* id, const MemoryInput& input, float height) {
  const ViewStyle style = ViewStyle::current();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  if (height <= 0) height = avail.y;
  height = std::max(height, style.font_size * 10);
  const float width = std::max(avail.x, style.font_size * 24);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, ImVec2(width, height));
  const bool hovered = ImGui::IsItemHovered();
  const MemoryLayout layout = layout_memory(input, p0, v2(p0.x + width, p0.y + height), style);
  const int bar = hovered ? memory_hit(layout, ImGui::GetIO().MousePos) : -1;
  draw_memory_layout(ImGui::GetWindowDrawList(), input, layout, bar);
  const ImVec2 p1 = v2(p0.x + width, p0.y + height);
  set_svg_source([input, layout, p0, p1] { return memory_svg(input, layout, p0, p1); });
  if (bar >= 0) {
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(memory_readout(input, layout.bars[bar]).c_str());
    ImGui::EndTooltip();
  }
  return bar;
}

}  // namespace fl::viz
