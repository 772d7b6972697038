// The current measurement: per level chain time, achieved bandwidth, share of copy bandwidth and
// the correctness check; then the launches of the level the switch shows.
#include <cstdio>
#include <string>

#include "app/gui/backend_choice.h"
#include "app/gui/panels.h"
#include "app/gui/widgets.h"
#include "model/sizes.h"
#include "viz/byte_explain.h"
#include "viz/text.h"

namespace fl::gui {
namespace {

const ImVec4 kGood(0.35f, 0.85f, 0.45f, 1.0f);
const ImVec4 kBad(1.0f, 0.4f, 0.35f, 1.0f);

// For the UI text-fit test (FUSIONLAB_TEXT_RECTS): the item just drawn and where it had to stay.
// A table that scrolls sideways in a panel that scrolls down cuts nothing (the learner scrolls),
// so nothing bounds its cells but their own text (a shortened number still fails the test);
// otherwise the visible clip rect does. What the panel has scrolled out of view is not recorded.
void record_item(const std::string& text, bool scrolls) {
  // A cell scrolled (even partly) out of a short panel is not what the learner reads: ImGui
  // may not have measured its column yet.
  if (!viz::text_recording() || !ImGui::IsItemVisible()) return;
  if (ImGui::GetItemRectMin().y < ImGui::GetWindowDrawList()->GetClipRectMin().y ||
      ImGui::GetItemRectMax().y > ImGui::GetWindowDrawList()->GetClipRectMax().y) {
    return;
  }
  viz::TextRect r;
  r.min = ImGui::GetItemRectMin();
  r.max = ImGui::GetItemRectMax();
  r.clip_min = ImGui::GetWindowDrawList()->GetClipRectMin();
  r.clip_max = ImGui::GetWindowDrawList()->GetClipRectMax();
  if (scrolls) r.clip_min = ImVec2(-1e9f, -1e9f), r.clip_max = ImVec2(1e9f, 1e9f);
  r.text = text;
  viz::record_text(r);
}

// Every cell of the measurement tables: its text whole. The tables are fixed-fit and scroll
// sideways when the panel is narrower than their columns, so a number is never cut.
void cell(const std::string& text) {
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(text.c_str());
  record_item(text, true);
}

// The tables' flags: columns as wide as their text, a sideways scroll bar when they do not fit.
constexpr ImGuiTableFlags kTableFlags = ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollX;

// The outer size of a scrolling table of `rows` rows (header included): its rows and room for
// the horizontal scroll bar, so it takes no more of the panel's height than it needs.
ImVec2 table_size(int rows) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const float row = ImGui::GetTextLineHeight() + 2 * style.CellPadding.y;
  return ImVec2(0.0f, rows * row + style.ScrollbarSize + 2 * style.CellPadding.y);
}

void check_badge(const CheckResult& check) {
  ImGui::TableNextColumn();
  if (check.passed) {
    ImGui::TextColored(kGood, "correct");
  } else {
    ImGui::TextColored(kBad, "WRONG");
  }
  record_item(check.passed ? "correct" : "WRONG", true);
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::Text("relative L2 error %.2e (tolerance %.1e), max |error| %.2e, non-finite %lld",
                check.rel_l2_error, check.tolerance, check.max_abs_error,
                static_cast<long long>(check.non_finite));
    ImGui::EndTooltip();
  }
  char error[32];
  std::snprintf(error, sizeof(error), "%.1e", check.rel_l2_error);
  cell(error);
}

const Measurement* level_of(const std::vector<Measurement>& ms, int level) {
  for (const auto& m : ms) {
    if (m.level == level) return &m;
  }
  return nullptr;
}

const ImVec4 kRecorded(0.55f, 0.78f, 1.0f, 1.0f);

// What was measured: in replay which recorded size answered, then the lesson, tensor, cache
// mode, repetitions and timer.
void draw_what_was_measured(const Lab& lab, const Measurement& first) {
  if (const ReplayNotice* replay = lab.replay()) {
    // Which recorded size answered: the slider stops at recorded sizes, so normally the one shown.
    std::string where = "Recorded on " + replay->recording.device.name + " on " +
                        replay->recording.date_text() + " at " + size_text(first.size) + " " +
                        lab.lesson().info().size_axis.unit;
    if (first.size != lab.last_request().size) {
      where +=
          ", the recorded size nearest the " + size_text(lab.last_request().size) + " asked for";
    }
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(kRecorded, "%s; replayed as measured, nothing runs here.", where.c_str());
    ImGui::PopTextWrapPos();
  }
  ImGui::PushTextWrapPos(0.0f);
  ImGui::Text("%s at %s, %s L2, median of %d repetitions, timed with %s", first.lesson.c_str(),
              tensor_text(lab.lesson(), first.size, first.precision).c_str(),
              to_string(first.cache), first.repetitions, first.timing_method.c_str());
  ImGui::PopTextWrapPos();
}

// Whether the GPU was the measurement's alone (model/gpu_conditions.h): the clocks it ran at and,
// when another process had work on it or its clocks were held down, what that means.
void draw_gpu_conditions(const std::vector<Measurement>& ms) {
  const Measurement* disturbed = nullptr;
  const Measurement* sampled = nullptr;
  for (const Measurement& m : ms) {
    if (m.gpu.sampled && sampled == nullptr) sampled = &m;
    if (m.gpu.disturbed() && disturbed == nullptr) disturbed = &m;
  }
  if (disturbed != nullptr) {
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(ImVec4(1.0f, 0.72f, 0.3f, 1.0f), "GPU %s (level %d): %s",
                       conditions_mark(disturbed->gpu).c_str(), disturbed->level,
                       conditions_sentence(disturbed->gpu).c_str());
    ImGui::PopTextWrapPos();
  } else if (sampled != nullptr) {
    ImGui::TextDisabled(
        "GPU clocks during the repetitions: SM >= %d MHz, memory >= %d MHz; no "
        "other process, not throttled",
        sampled->gpu.sm_clock_mhz, sampled->gpu.memory_clock_mhz);
  }
}

// Under the levels: PyTorch on the same formula at this size (the peer file, cold L2 only), its
// bandwidth on the top level's textbook bytes and its speedup over our level 0 in the first cell.
void draw_peer_rows(const Lab& lab, const std::vector<Measurement>& ms) {
  const PeerFile* peers = window_peers();
  const Measurement* unfused = level_of(ms, 0);
  if (!window_peers_shown() || ms.empty() || ms.front().cache != CacheMode::cold) return;
  const Measurement& top = ms.back();
  const std::string note = peers_recorded_note(*peers, lab);
  for (const PeerSeries* s : peers->find(ms.front().lesson, ms.front().precision)) {
    for (const PeerPoint& p : s->points) {
      if (p.size != ms.front().size || p.median_us <= 0) continue;
      ImGui::TableNextRow();
      // The name with the speedup over our level 0, in full: the column widens to fit it.
      std::string name = s->label;
      if (unfused && unfused->chain_time_us.median > 0) {
        name += " (" + fixed(unfused->chain_time_us.median / p.median_us, 2) + "x)";
      }
      cell(name + note);
      cell("-");
      cell(fixed(p.median_us, 1) + " µs");
      const double gbps = static_cast<double>(top.textbook_bytes()) / (p.median_us * 1e3);
      cell(fixed(gbps, 0) + " GB/s");
      cell(top.chain_copy_gbps > 0 ? fixed(100.0 * gbps / top.chain_copy_gbps, 0) + " %"
                                   : std::string("n/a"));
      CheckResult check;
      check.passed = p.passed;
      check.rel_l2_error = p.rel_l2_error;
      check_badge(check);
    }
  }
}

// One row per level; the fusion slider's level is the highlighted row (its launches are listed
// below).
void draw_levels_table(const Lab& lab, const std::vector<Measurement>& ms) {
  const ImGuiTableFlags flags = kTableFlags | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerH;
  int rows = 1 + static_cast<int>(ms.size());
  if (window_peers_shown() && !ms.empty()) {
    for (const PeerSeries* s : window_peers()->find(ms.front().lesson, ms.front().precision)) {
      for (const PeerPoint& p : s->points) rows += p.size == ms.front().size ? 1 : 0;
    }
  }
  if (!ImGui::BeginTable("##levels", 7, flags, table_size(rows))) return;
  ImGui::TableSetupColumn("level");
  ImGui::TableSetupColumn("kernels");
  ImGui::TableSetupColumn(lab.replay() ? "chain time (recorded)" : "chain time");
  ImGui::TableSetupColumn("achieved");
  ImGui::TableSetupColumn("% of copy");
  ImGui::TableSetupColumn("check");
  ImGui::TableSetupColumn("rel. L2 error");
  ImGui::TableHeadersRow();
  for (const auto& m : ms) {
    ImGui::TableNextRow();
    if (m.level == lab.shown_level()) {
      ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg1, ImGui::GetColorU32(ImGuiCol_Header));
    }
    cell(std::to_string(m.level) + " " + m.level_name);
    cell(std::to_string(m.launches.size()));
    cell(fixed(m.chain_time_us.median, 1) + " µs");
    cell(fixed(m.achieved_gbps(), 0) + " GB/s");
    cell(m.chain_copy_gbps > 0 ? fixed(100.0 * m.achieved_gbps() / m.chain_copy_gbps, 0) + " %"
                               : std::string("n/a"));
    check_badge(m.check);
  }
  draw_peer_rows(lab, ms);
  ImGui::EndTable();
}

// The fusion slider's level (or the top one) against level 0.
void draw_speedup_line(const Lab& lab, const std::vector<Measurement>& ms) {
  const int shown = lab.shown_level();
  const Measurement* unfused = level_of(ms, 0);
  const int compared = shown > 0 ? shown : lab.top_level();  // the fusion slider's level
  const Measurement* fused = level_of(ms, compared);
  if (!unfused || !fused) return;
  const double s = speedup(*unfused, *fused);
  if (s > 0) {
    ImGui::Text("Level %d (%s) is %.2fx as fast as level 0 (%s) %s.", compared,
                fused->level_name.c_str(), s, unfused->level_name.c_str(),
                lab.replay() ? "in this recording" : "here");
  } else {
    ImGui::TextColored(kBad, "No speedup shown: a level failed its correctness check.");
  }
}

// The launches of the fusion slider's level: time, textbook bytes, counted DRAM bytes, copy rate.
void draw_launches(const Lab& lab, const Measurement& detail) {
  const bool replay = lab.replay() != nullptr;
  ImGui::Spacing();
  text_fitted("Launches of level " + std::to_string(detail.level) + " (" + detail.level_name +
                  "), the highlighted row, chosen with the fusion slider:",
              0, true);
  // Whole cells; the table scrolls sideways when the panel is narrower.
  const int rows = static_cast<int>(detail.launches.size());
  if (ImGui::BeginTable("##launches", 5, kTableFlags, table_size(rows))) {
    for (const auto& l : detail.launches) {
      ImGui::TableNextRow();
      // The launch, and the level table's kernel variant that ran it (kernels/level_table.h).
      cell(l.variant.empty() ? l.textbook.kernel : l.textbook.kernel + " (" + l.variant + ")");
      cell(fixed(l.time_us.median, 1) + (replay ? " µs (recorded median)" : " µs (median)"));
      cell(format_bytes(static_cast<double>(l.textbook.bytes())) + " textbook");
      // What the GPU's own counters saw (CUPTI range profiler), next to the textbook count.
      if (l.counters) {
        cell("DRAM rd " + format_bytes(static_cast<double>(l.counters->dram_read_bytes)) + " wr " +
             format_bytes(static_cast<double>(l.counters->dram_write_bytes)));
      } else if (detail.counters_status == CountersStatus::unavailable ||
                 detail.counters_status == CountersStatus::failed) {
        cell("DRAM: no counters");
      } else {
        cell(replay ? "DRAM: not recorded" : "DRAM: counters pending");
      }
      cell(l.copy_gbps > 0 ? "copy: " + fixed(l.copy_gbps, 0) + " GB/s" : std::string());
    }
    ImGui::EndTable();
  }
  if (!detail.counters_note.empty()) ImGui::TextDisabled("%s", detail.counters_note.c_str());
}

// Where a launch's counted bytes differ from the textbook by more than the rule table's ratio,
// one line each saying why (assets/explain/byte_ratios.json, viz/byte_explain.h).
void draw_byte_explanations(const Lab& lab, const std::vector<Measurement>& ms,
                            const Measurement& detail) {
  static viz::ByteRules rules;
  static Status loaded = [] {
    const std::string assets = find_assets_folder();
    if (assets.empty()) return Status::Error("no assets folder: byte ratios are not explained");
    return viz::load_byte_rules(assets + "/explain/byte_ratios.json", &rules);
  }();
  if (!loaded.ok()) {
    ImGui::TextDisabled("%s", loaded.message().c_str());
    return;
  }
  viz::ByteFacts facts;
  facts.l2_capacity = static_cast<double>(lab.status().device.l2_bytes);
  facts.l2_floor = viz::l2_floor(lab.history());
  facts.lesson = &lab.lesson();
  facts.level0 = level_of(ms, 0);
  const std::vector<viz::ByteExplanation> lines = viz::explain_bytes(rules, detail, facts);
  if (lines.empty()) return;
  ImGui::PushTextWrapPos(0.0f);
  for (const viz::ByteExplanation& e : lines) {
    if (e.explained()) {
      ImGui::TextDisabled("%s", e.line().c_str());
    } else {
      ImGui::TextColored(ImVec4(1.0f, 0.72f, 0.3f, 1.0f), "%s", e.line().c_str());
    }
  }
  ImGui::PopTextWrapPos();
}

}  // namespace

void draw_measurement_panel(const Lab& lab) {
  const ReplayNotice* replay = lab.replay();
  if (replay) {
    const std::string recorded = std::string("Every number here was measured on ") +
                                 replay->recording.device.name + " on " +
                                 replay->recording.date_text() +
                                 " and is shown exactly as recorded; nothing runs on this machine.";
    section_title("Recorded measurement", lesson_text(panel_text_id("measurement")), "", recorded);
  } else {
    section_title("Current measurement", lesson_text(panel_text_id("measurement")));
  }

  const std::vector<Measurement>& ms = lab.current();
  if (ms.empty()) {
    const EngineState state = lab.status().state;
    ImGui::TextDisabled("%s", state == EngineState::unavailable
                                  ? "No measurement: there is no usable GPU."
                              : replay && !lab.last_error().empty()
                                  ? "Nothing recorded for this choice (see the controls)."
                                  : "No measurement yet.");
    return;
  }
  draw_what_was_measured(lab, ms.front());
  draw_gpu_conditions(ms);
  draw_levels_table(lab, ms);
  draw_speedup_line(lab, ms);
  if (const Measurement* detail = level_of(ms, lab.shown_level())) {
    draw_launches(lab, *detail);
    draw_byte_explanations(lab, ms, *detail);
  }
}

}  // namespace fl::gui
