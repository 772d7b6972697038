// The big panel: three views of the current lesson, one tab each: the speedup-vs-size plot, the
// timeline of the fusion slider's level, and its memory chart (bytes moved, measured vs
// textbook, and what fusion saves).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "app/gui/panels.h"
#include "app/gui/widgets.h"
#include "viz/bandwidth_view.h"
#include "viz/flow_view.h"
#include "viz/memory_chart.h"
#include "viz/roofline_view.h"
#include "viz/svg.h"
#include "viz/text.h"
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
// rectangle the views draw (viz/text.h) is recorded, and the first settled frame of each
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
  void begin_frame() {
    if (!path_.empty()) viz::clear_recorded_text();
  }
  void end_frame(const Lab& lab) {
    if (path_.empty()) return;
    const EngineStatus& st = lab.status();
    const bool settled = st.state == EngineState::ready && !lab.change_pending() &&
                         !lab.waiting_for_result() && !lab.sweeping() && !st.busy &&
                         !lab.current().empty();
    if (!settled) return;
    const ImVec2 display = ImGui::GetIO().DisplaySize;
    char key[256];
    std::snprintf(key, sizeof(key), "lesson=%s view=%s level=%d size=%lld display=%.0fx%.0f",
                  lab.lesson().info().id.c_str(), lab.front_view.c_str(), lab.shown_level(),
                  static_cast<long long>(lab.size()), display.x, display.y);
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
      std::fprintf(f, "rect %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %s\n", r.min.x, r.min.y, r.max.x,
                   r.max.y, r.clip_min.x, r.clip_min.y, r.clip_max.x, r.clip_max.y, text.c_str());
    }
    std::fclose(f);
  }

 private:
  std::string path_;
  std::string last_key_;
};

TextRectsFile& text_rects_file() {
  static TextRectsFile file;
  return file;
}

void draw_views_tabs(const Lab& lab);

}  // namespace

void draw_views_panel(const Lab& lab) {
  viz::clear_svg_source();  // the front view sets it again if it is a plot (viz/svg.h)
  text_rects_file().begin_frame();
  draw_views_tabs(lab);
  text_rects_file().end_frame(lab);
}

namespace {

void draw_views_tabs(const Lab& lab) {
  if (!ImGui::BeginTabBar("##views")) return;
  const Measurement* shown_first = level_in(lab.current(), lab.shown_level());
  if (ImGui::BeginTabItem("Data flow", nullptr, first_frame_select(lab, "flow"))) {
    lab.front_view = "flow";
    section_title("Data flow",
                  "Each launch of the fusion slider's level as a trip: bytes flow from HBM through "
                  "L2 into an SM (blue) and back (orange), as thick as the bytes moved (measured "
                  "DRAM bytes when counters are on) and as long as the launch took, launch after "
                  "launch. Unfused, each intermediate lands in HBM and is read back; fused, it "
                  "stays in registers. Sizes that fit in L2 stop there.");
    if (shown_first) {
      // One clock for the view: it restarts when the level or size changes, and a click pauses.
      static viz::FlowClock clock;
      static int clock_level = -1;
      static int64_t clock_size = -1;
      const double now = ImGui::GetTime();
      if (clock_level != shown_first->level || clock_size != shown_first->size) {
        clock.restart(now);
        clock_level = shown_first->level;
        clock_size = shown_first->size;
      }
      // Space pauses or resumes, as a click does (helper A: app/gui/shortcuts.h, Lab).
      if (lab.flow_pause_toggle) {
        clock.toggle_pause(now);
        lab.flow_pause_toggle = false;
      }
      const Measurement* level0 = level_in(lab.current(), 0);
      const auto result = viz::draw_flow(
          "##flow", viz::flow_input(*shown_first, &lab.lesson(), lab.status().device, level0), &clock,
          now, ImGui::GetContentRegionAvail().y - ImGui::GetStyle().ItemSpacing.y);
      if (result.animating) lab.note_animating_view();
    } else {
      ImGui::TextDisabled("No measurement yet.");
    }
    ImGui::EndTabItem();
  }
  if (ImGui::BeginTabItem("Speedup vs size", nullptr, first_frame_select(lab, "speedup"))) {
    lab.front_view = "speedup";
    draw_speedup_panel(lab);
    ImGui::EndTabItem();
  }
  if (ImGui::BeginTabItem("Bandwidth", nullptr, first_frame_select(lab, "bandwidth"))) {
    lab.front_view = "bandwidth";
    section_title("Achieved bandwidth vs size",
                  "Each level's GB/s on its textbook bytes (median chain time) at every measured "
                  "size, against a copy kernel moving the fused level's bytes. Large tensors run "
                  "every level near the copy curve: each is memory-bound, so fusion wins by "
                  "moving fewer bytes, not by moving them faster.");
    const LessonInfo& info = lab.lesson().info();
    auto series = viz::bandwidth_series(lab.history(), info.id, lab.precision(), lab.cache());
    // A compared recording: its levels dashed and lighter, labelled with its GPU and date.
    if (const ComparedSeries compared = lab.compared_series(); compared.found) {
      const auto overlay = viz::bandwidth_overlay_series(
          lab.comparison()->measurements, info.id, compared.precision, compared.cache,
          compared.label);
      series.insert(series.begin(), overlay.begin(), overlay.end());  // under this one's lines
    } else if (lab.comparison()) {
      ImGui::TextDisabled("The compared recording holds no %s.", info.id.c_str());
    }
    viz::plot_widget("##bandwidth",
                     viz::bandwidth_plot_spec(series, info.size_axis.unit, info.size_axis.min,
                                              info.size_axis.max),
                     ImVec2(0, ImGui::GetContentRegionAvail().y - ImGui::GetStyle().ItemSpacing.y));
    ImGui::EndTabItem();
  }
  const Measurement* shown = level_in(lab.current(), lab.shown_level());
  if (ImGui::BeginTabItem("Timeline", nullptr, first_frame_select(lab, "timeline"))) {
    lab.front_view = "timeline";
    section_title("Timeline",
                  "The launches of the fusion slider's level on a time axis in microseconds: one "
                  "repetition as CUPTI recorded it, so the gaps between launches are real. Fusion "
                  "removes launches, and with them their gaps. Hover a launch for its grid, block, "
                  "registers and bytes.");
    if (shown) {
      ImGui::TextDisabled("level %d (%s): %zu launch%s, %s", shown->level, shown->level_name.c_str(),
                          shown->launches.size(), shown->launches.size() == 1 ? "" : "es",
                          shown->records.empty() ? "from median durations, back to back"
                                                 : "one repetition's CUPTI records");
      viz::draw_timeline("##timeline", viz::timeline_input(*shown),
                         std::max(ImGui::GetFontSize() * 4.0f, ImGui::GetContentRegionAvail().y * 0.5f));
    } else {
      ImGui::TextDisabled("No measurement yet.");
    }
    ImGui::EndTabItem();
  }
  if (ImGui::BeginTabItem("Memory", nullptr, first_frame_select(lab, "memory"))) {
    lab.front_view = "memory";
    section_title("Memory traffic",
                  "Per launch of the fusion slider's level: the bytes it must read and write by "
                  "the textbook count, beside the DRAM bytes read and written and the L2 bytes "
                  "CUPTI's counters measured. In L2-resident sizes DRAM bytes fall below the "
                  "textbook: the data never left the chip.");
    const Measurement* level0 = level_in(lab.current(), 0);
    if (shown) {
      viz::draw_memory_chart("##memory",
                             viz::memory_input(*shown, level0 ? *level0 : *shown, &lab.current()),
                             ImGui::GetContentRegionAvail().y - ImGui::GetStyle().ItemSpacing.y);
    } else {
      ImGui::TextDisabled("No measurement yet.");
    }
    ImGui::EndTabItem();
  }
  if (ImGui::BeginTabItem("Roofline", nullptr, first_frame_select(lab, "roofline"))) {
    lab.front_view = "roofline";
    section_title("Roofline",
                  "Each level as a point: arithmetic intensity (FLOPs per textbook byte) against "
                  "the FLOP rate it achieved. The orange line is the measured copy bandwidth: a "
                  "memory-bound kernel cannot rise above it. Fusion keeps the FLOPs and drops "
                  "bytes, so the fused level sits further right, and higher on the same roof.");
    const double roof = lab.status().device.roof_gbps;
    std::string source;
    const double compute = viz::compute_roof_gflops(lab.status().device.name, lab.precision(),
                                                    lab.history(), &source);
    viz::RooflineInput input = viz::roofline_input(lab.current(), roof, lab.shown_level(), compute);
    input.compute_roof_source = source;
    viz::draw_roofline("##roofline", input,
                       ImGui::GetContentRegionAvail().y - ImGui::GetStyle().ItemSpacing.y);
    ImGui::EndTabItem();
  }
  ImGui::EndTabBar();
}

}  // namespace
}  // namespace fl::gui
