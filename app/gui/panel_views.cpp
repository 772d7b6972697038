// The big panel: the views of the current lesson, one tab each (kViewTabs): the data flow, the
// speedup-vs-size plot, bandwidth, the timeline of the fusion slider's level, its memory chart
// (bytes moved, measured vs textbook) and the roofline.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "app/gui/lesson_text.h"
#include "app/gui/panels.h"
#include "app/gui/widgets.h"
#include "kernels/gpt2_decode/model.h"
#include "viz/bandwidth_view.h"
#include "viz/flow_view.h"
#include "viz/memory_chart.h"
#include "viz/plot.h"
#include "viz/roofline_view.h"
#include "viz/svg.h"
#include "viz/text.h"
#include "viz/phase_timeline.h"
#include "viz/timeline_view.h"

namespace fl::gui {
namespace {

const Measurement* level_in(const std::vector<Measurement>& ms, int level) {
  for (const auto& m : ms) {
    if (m.level == level) return &m;
  }
  return nullptr;
}

// Brings the tab named by lab.requested_view forward once (--view, a script's `view` command).
ImGuiTabItemFlags first_frame_select(const Lab& lab, const char* view) {
  if (lab.requested_view != view) return 0;
  lab.requested_view.clear();
  return ImGuiTabItemFlags_SetSelected;
}

// FUSIONLAB_TEXT_RECTS=PATH (the UI overlap test, tests/ui/text_overlap_check.cpp): every text
// rectangle the views draw (viz/text.h) and every cell of the measurement tables is recorded, and
// the second settled frame of each
// (lesson, level, size, view, window size) is appended to PATH: a "frame" line naming them,
// then one "rect" line per text (drawn box, clip box, the text). Settled: nothing is being
// measured or swept, so the frame shows the finished measurement.
class TextRectsFile {
 public:
  TextRectsFile() {
    const char* path = std::getenv("FUSIONLAB_TEXT_RECTS");
    if (path && *path) path_ = path;
    viz::set_text_recording(!path_.empty());
  }
  // The panels drawn before the views in a frame (the measurement table) record their cells
  // too, so the record is cleared after each frame's end, not at the views' start.
  // Once a frame, after both panes of two views: `second` names the second pane's view then.
  void end_frame(const Lab& lab, const std::string& second) {
    if (path_.empty()) return;
    write_frame(lab, second);
    viz::clear_recorded_text();
    viz::clear_recorded_plots();
  }
  void write_frame(const Lab& lab, const std::string& second) {
    const EngineStatus& st = lab.status();
    const bool settled = st.state == EngineState::ready && !lab.change_pending() &&
                         !lab.waiting_for_result() && !lab.sweeping() && !st.busy &&
                         !lab.current().empty();
    if (!settled) return;
    const ImVec2 display = ImGui::GetIO().DisplaySize;
    char key[256];
    std::snprintf(key, sizeof(key), "lesson=%s view=%s level=%d size=%lld display=%.0fx%.0f",
                  lab.lesson().info().id.c_str(),
                  (second.empty() ? lab.front_view : lab.front_view + "+" + second).c_str(),
                  lab.shown_level(), static_cast<long long>(lab.size()), display.x, display.y);
    // The second settled frame of a key: ImGui's fixed-fit table columns take their width from
    // the frame before, so the first frame after a change may draw a cell wider than its column
    // for one frame (16 ms, not what the learner sees).
    if (key != settled_key_) {
      settled_key_ = key;
      return;
    }
    if (key == last_key_) return;
    last_key_ = key;
    std::FILE* f = std::fopen(path_.c_str(), "a");
    if (!f) {
      std::fprintf(stderr, "fusionlab: cannot append the text rectangles to %s\n", path_.c_str());
      path_.clear();
      return;
    }
    std::fprintf(f, "frame %s\n", key);
    for (const viz::TextRect& r : viz::recorded_text()) {
      std::string text = r.text;
      for (char& c : text) {
        if (c == '\n' || c == '\r') c = ' ';
      }
      std::fprintf(f, "rect %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %s\n", r.min.x, r.min.y,
                   r.max.x, r.max.y, r.clip_min.x, r.clip_min.y, r.clip_max.x, r.clip_max.y,
                   text.c_str());
    }
    // Each plot: its frame, labelled ticks per axis and how much data its legend hides.
    for (const viz::PlotFit& p : viz::recorded_plots()) {
      std::fprintf(f, "plot %s %.2f %.2f %.2f %.2f %.2f %d %d %d %d\n", p.id.c_str(), p.font_size,
                   p.frame_min.x, p.frame_min.y, p.frame_max.x, p.frame_max.y, p.x_labels,
                   p.y_labels, p.legend_over_data, p.legend_outside ? 1 : 0);
    }
    std::fclose(f);
  }

 private:
  std::string path_;
  std::string last_key_;
  std::string settled_key_;
};

TextRectsFile& text_rects_file() {
  static TextRectsFile file;
  return file;
}

void draw_views_tabs(const Lab& lab);

}  // namespace

void draw_views_panel(const Lab& lab) {
  viz::clear_svg_source();  // the front view sets it again if it is a plot (viz/svg.h)
  draw_views_tabs(lab);
}

void end_views_frame(const Lab& lab, const std::string& second_view) {
  text_rects_file().end_frame(lab, second_view);
}

namespace {

const Measurement* shown_level(const Lab& lab) {
  return level_in(lab.current(), lab.shown_level());
}

// What is left of the panel below the view's title, less one item spacing.
float view_height() {
  return ImGui::GetContentRegionAvail().y - ImGui::GetStyle().ItemSpacing.y;
}

void draw_flow_view(const Lab& lab) {
  const Measurement* shown = shown_level(lab);
  if (!shown) {
    ImGui::TextDisabled("No measurement yet.");
    return;
  }
  // One clock for the view: it restarts when the level or size changes, and a click pauses.
  static viz::FlowClock clock;
  static int clock_level = -1;
  static int64_t clock_size = -1;
  const double now = ImGui::GetTime();
  if (clock_level != shown->level || clock_size != shown->size) {
    clock.restart(now);
    clock_level = shown->level;
    clock_size = shown->size;
  }
  // Space pauses or resumes, as a click does (app/gui/shortcuts.h, Lab).
  if (lab.flow_pause_toggle) {
    clock.toggle_pause(now);
    lab.flow_pause_toggle = false;
  }
  const Measurement* level0 = level_in(lab.current(), 0);
  const auto result =
      viz::draw_flow("##flow", viz::flow_input(*shown, &lab.lesson(), lab.status().device, level0),
                     &clock, now, view_height());
  if (result.animating) lab.note_animating_view();
}

void draw_bandwidth_view(const Lab& lab) {
  const LessonInfo& info = lab.lesson().info();
  auto series = viz::bandwidth_series(lab.history(), info.id, lab.precision(), lab.cache());
  // A compared recording: its levels dashed and lighter, labelled with its GPU and date.
  if (const ComparedSeries compared = lab.compared_series(); compared.found) {
    const auto overlay =
        viz::bandwidth_overlay_series(lab.comparison()->measurements, info.id, compared.precision,
                                      compared.cache, compared.label);
    series.insert(series.begin(), overlay.begin(), overlay.end());  // under this one's lines
  } else if (lab.comparison()) {
    ImGui::TextDisabled("The compared recording holds no %s.", info.id.c_str());
  }
  // PyTorch peers on the fused level's bytes, when the speedup plot's box shows them.
  if (window_peers_shown()) {
    const auto peers =
        viz::bandwidth_peer_series(lab.history(), *window_peers(), info.id, lab.precision(),
                                   lab.cache(), peers_recorded_note(*window_peers(), lab));
    series.insert(series.end(), peers.begin(), peers.end());
  }
  viz::plot_widget(
      "##bandwidth",
      viz::bandwidth_plot_spec(series, info.size_axis.unit, info.size_axis.min, info.size_axis.max),
      ImVec2(0, view_height()));
}

// How many tasks a launch's records name: the largest `arg` plus one, or 0 (not known) where
// records were lost past the device buffer and the last tasks may be missing.
size_t recorded_task_count(const LaunchPhases& phases) {
  if (phases.lost != 0 || phases.records.empty()) return 0;
  uint32_t largest = 0;
  for (const PhaseRecord& r : phases.records) largest = std::max(largest, r.arg);
  return static_cast<size_t>(largest) + 1;
}

// The names of gpt2_decode's megakernel tasks for the hover: its task list rebuilt for the
// measured GPU and point (kernels/gpt2_decode/model.h), kept while the point stays the same;
// empty where this build's list is not the one the recording ran.
std::function<std::string(uint32_t)> megakernel_task_names(const Lab& lab, const Measurement& m,
                                                           size_t recorded_tasks) {
  static std::string key;
  static std::function<std::string(uint32_t)> names;
  const DeviceFacts d = lab.session_snapshot_head().device;
  const std::string now = std::to_string(d.sm_count) + "/" + std::to_string(d.cc_major) + "." +
                          std::to_string(d.cc_minor) + "/" + std::to_string(m.inner) + "/" +
                          std::to_string(m.size) + "/" + std::to_string(recorded_tasks);
  if (now != key) {
    key = now;
    names = gpt2::task_namer(d.sm_count, d.cc_major, d.cc_minor, static_cast<int>(m.inner),
                             static_cast<int>(m.size), recorded_tasks);
  }
  return names;
}

// The Timeline view with "phases" ticked: the launches in a short strip, then the phase lanes of
// each launch that has them, or why there are none.
void draw_phase_lanes(const Lab& lab, const Measurement& shown) {
  std::vector<viz::PhaseTimelineInput> inputs = viz::phase_timeline_inputs(shown);
  bool unnamed = false;  // a recording of another task list: its tasks go unnamed
  if (shown.lesson == "gpt2_decode") {
    for (viz::PhaseTimelineInput& input : inputs) {
      if (!input.tasks) continue;
      input.task_name = megakernel_task_names(lab, shown, recorded_task_count(input.phases));
      unnamed = unnamed || !input.task_name;
    }
  }
  const float fs = ImGui::GetFontSize();
  viz::draw_timeline("##timeline", viz::timeline_input(shown), fs * 8.0f);
  if (inputs.empty()) {
    ImGui::TextDisabled("%s",
                        lab.replay() != nullptr
                            ? "This recording holds no phase timelines for this point (record with "
                              "`fusionlab bench --phases`)."
                        : lab.waiting_for_result() ? "Measuring with phase stamps on..."
                                                   : "No kernel of this level declares phases.");
    return;
  }
  const float each = std::max(
      fs * 10.0f, ImGui::GetContentRegionAvail().y / static_cast<float>(inputs.size()) - fs * 0.5f);
  if (unnamed) {
    ImGui::TextDisabled("%s",
                        "Tasks are shown by number: this recording's task list is not the "
                        "one this build makes, so naming them would name the wrong ones.");
  }
  for (const viz::PhaseTimelineInput& input : inputs) {
    const std::string id = "##phases" + std::to_string(input.launch);
    viz::draw_phase_timeline(id.c_str(), input, each);
  }
}

void draw_timeline_view(const Lab& lab) {
  const Measurement* shown = shown_level(lab);
  if (!shown) {
    ImGui::TextDisabled("No measurement yet.");
    return;
  }
  ImGui::TextDisabled("level %d (%s): %zu launch%s, %s", shown->level, shown->level_name.c_str(),
                      shown->launches.size(), shown->launches.size() == 1 ? "" : "es",
                      shown->records.empty() ? "from median durations, back to back"
                                             : "one repetition's CUPTI records");
  // The "phases" box on the level's line when it fits (two views at once are short of height).
  const float box_w = ImGui::GetFrameHeight() + ImGui::CalcTextSize("phases (?)").x +
                      ImGui::GetStyle().ItemInnerSpacing.x + ImGui::GetStyle().ItemSpacing.x * 3;
  ImGui::SameLine();
  if (ImGui::GetContentRegionAvail().x < box_w) ImGui::NewLine();
  bool phases = lab.phases();
  if (ImGui::Checkbox("phases", &phases)) lab.set_phases(phases);
  record_widget_label("phases", LabelPlace::after_box);
  ImGui::SameLine();
  help_marker(
      "Inside each launch: the phases its kernel declares (weights in, cluster exchange, grid "
      "barrier, ...), stamped with the GPU's clock per block in an extra run, one lane per SM. "
      "The stamps cost a little time: the measured cost is shown beside them.");
  if (!lab.phases()) {
    // Two views at once: the pane needs the launches' strip at its least height (draw_timeline).
    viz::note_view_need(ImGui::GetCursorScreenPos().y +
                        ImGui::GetFontSize() * viz::kTimelineMinFonts);
    // Half the panel, or what is left up to the strip with its axis title (a short pane).
    const float avail = ImGui::GetContentRegionAvail().y;
    viz::draw_timeline(
        "##timeline", viz::timeline_input(*shown),
        std::min(avail, std::max(avail * 0.5f, ImGui::GetFontSize() * viz::kTimelineTitledFonts)));
    return;
  }
  draw_phase_lanes(lab, *shown);
}

void draw_memory_view(const Lab& lab) {
  const Measurement* shown = shown_level(lab);
  if (!shown) {
    ImGui::TextDisabled("No measurement yet.");
    return;
  }
  const Measurement* level0 = level_in(lab.current(), 0);
  viz::draw_memory_chart("##memory",
                         viz::memory_input(*shown, level0 ? *level0 : *shown, &lab.current()),
                         view_height());
}

void draw_roofline_view(const Lab& lab) {
  const double roof = lab.status().device.roof_gbps;
  std::string source;
  const double compute =
      viz::compute_roof_gflops(lab.status().device.name, lab.precision(), lab.history(), &source);
  viz::RooflineInput input = viz::roofline_input(lab.current(), roof, lab.shown_level(), compute);
  input.compute_roof_source = source;
  viz::draw_roofline("##roofline", input, view_height());
}

// The tabs, in the order of app/measure/choices.h's view_names() (a test keeps them equal). Each
// view's explanation, beside its title, is assets/lessons/views/<name>.md (app/gui/lesson_text.h).
struct ViewTab {
  const char* label;        // on the tab
  const char* short_label;  // on the tab when the full labels do not all fit (two views)
  const char* name;         // --view, scripts, the settings file
  const char* title;        // above the view
  void (*draw)(const Lab& lab);
  void (*title_line)(const Lab& lab);  // controls on the title's line (a line less), or null
};
constexpr ViewTab kViewTabs[] = {
    {"Data flow", "Flow", "flow", "Data flow", draw_flow_view, nullptr},
    {"Speedup vs size", "Speedup", "speedup", "Speedup vs tensor size", draw_speedup_panel,
     draw_speedup_title_line},
    {"Bandwidth", "Bandwidth", "bandwidth", "Achieved bandwidth vs size", draw_bandwidth_view,
     nullptr},
    {"Timeline", "Timeline", "timeline", "Timeline", draw_timeline_view, nullptr},
    {"Memory", "Memory", "memory", "Memory traffic", draw_memory_view, nullptr},
    {"Roofline", "Roofline", "roofline", "Roofline", draw_roofline_view, nullptr},
};

// Whether every tab's full label fits the panel's width (else the short ones are shown, so no
// label is cut: ImGui would shrink the tabs and clip their words).
bool full_tab_labels_fit() {
  const ImGuiStyle& style = ImGui::GetStyle();
  float width = 0;
  for (const ViewTab& tab : kViewTabs) {
    width += ImGui::CalcTextSize(tab.label).x + style.FramePadding.x * 2 + style.ItemInnerSpacing.x;
  }
  return width <= ImGui::GetContentRegionAvail().x;
}

void draw_views_tabs(const Lab& lab) {
  const bool full = full_tab_labels_fit();
  if (!ImGui::BeginTabBar("##views")) return;
  for (const ViewTab& tab : kViewTabs) {
    // The same id whichever label shows ("###"), so the tab in front stays in front.
    const std::string label = std::string(full ? tab.label : tab.short_label) + "###" + tab.name;
    const bool open =
        ImGui::BeginTabItem(label.c_str(), nullptr, first_frame_select(lab, tab.name));
    record_widget_label(full ? tab.label : tab.short_label, LabelPlace::in_frame);
    if (!open) continue;
    lab.front_view = tab.name;
    if (tab.title_line) {
      section_title_with(tab.title, lesson_text(view_text_id(tab.name)),
                         [&] { tab.title_line(lab); });
    } else {
      section_title(tab.title, lesson_text(view_text_id(tab.name)));
    }
    tab.draw(lab);
    ImGui::EndTabItem();
  }
  ImGui::EndTabBar();
}

}  // namespace

std::vector<std::string> views_panel_tabs() {
  std::vector<std::string> names;
  for (const ViewTab& tab : kViewTabs) names.push_back(tab.name);
  return names;
}

}  // namespace fl::gui
