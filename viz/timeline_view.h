// The timeline: the launches of one measurement on a time axis in microseconds. From CUPTI's raw
// records of one repetition when the measurement has them (real starts and ends, so the gaps
// between launches show and are labelled), otherwise from the median durations laid back to
// back, and the view says so ("from medians (no raw records)"). Hovering a launch shows its
// name, grid and block, registers, shared memory, duration and bytes; hovering a gap, how long
// the GPU sat idle.
// Two steps, as for the plot widget: layout_timeline() computes bars, gaps, ticks and labels as
// plain data (no ImGui context: tests need no pixels); draw_timeline() draws them.
#pragma once

#include <imgui.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/results.h"
#include "viz/view_util.h"

namespace fl::viz {

// ---- [SECTION] input -------------------------------------------------------------------------

struct TimelineLaunch {
  std::string kernel;      // the lesson's launch name ("gelu")
  std::string cupti_name;  // as CUPTI named the kernel ("elementwise_kernel<float, ...>"), or ""
  std::string variant;     // the level table's kernel variant that ran ("ffn_small"), or ""
  int launch = -1;         // index into Measurement::launches, -1 when unknown
  int64_t start_ns = 0, end_ns = 0;                      // from the first launch's start
  std::array<int, 3> grid{{0, 0, 0}}, block{{0, 0, 0}};  // zeros: unknown (from medians)
  int registers = 0;                                     // per thread; 0: unknown
  int shared_bytes = 0;                                  // static + dynamic shared memory per block
  int64_t textbook_bytes = 0;
  int64_t dram_bytes = -1;  // measured read + write; -1: no counters

  double start_us() const { return start_ns * 1e-3; }
  double end_us() const { return end_ns * 1e-3; }
  double duration_us() const { return (end_ns - start_ns) * 1e-3; }
  bool has_launch_config() const { return grid[0] > 0 && block[0] > 0; }
};

struct TimelineInput {
  std::vector<TimelineLaunch> launches;  // in time order
  bool from_records = false;             // false: medians back to back, gaps unknown
  std::string title;                     // "level 0 unfused: 2 launches"
  int level = 0, top_level = 1;          // the bars take the level's colour
};

// From a measurement: its raw records when present, else its per-launch medians.
TimelineInput timeline_input(const Measurement& m);

// ---- [SECTION] layout ------------------------------------------------------------------------

// The least height of the strip, in font heights (draw_timeline): the summary, the bars, their
// gap labels and ticks; the axis title only where there is room for it.
constexpr float kTimelineMinFonts = 7.0f;
// The height from which the axis title shows too.
constexpr float kTimelineTitledFonts = 8.0f;

struct TimelineBar {
  ImVec2 min, max;           // screen rectangle (at least 1 px wide)
  int launch = 0;            // index into TimelineInput::launches
  std::string label;         // the kernel's name, shortened to fit, or "" when nothing fits
  ImVec2 label_pos;          // top-left
  bool label_inside = true;  // inside the bar; false: above it
};
struct TimelineGap {
  float x0 = 0, x1 = 0;  // screen span between two launches
  double us = 0;
  int after = 0;      // the launch it follows
  std::string label;  // "gap 1.2 µs"
  ImVec2 label_pos;
  bool label_visible = false;
};
struct TimelineTick {
  float x = 0;
  double us = 0;
  std::string label;  // "10 µs"
};
struct TimelineLayout {
  ImVec2 frame_min, frame_max;  // the plot area
  float font_size = 16;
  std::vector<TimelineBar> bars;
  std::vector<TimelineGap> gaps;  // only from records
  std::vector<TimelineTick> ticks;
  double span_us = 0;      // the axis runs from 0 to this
  std::string note;        // "from medians (no raw records)", or "" from records
  std::string axis_title;  // "time since the first launch (µs)"
  std::string summary;     // "2 launches, 63.4 µs busy + 1.2 µs of gaps = 65.6 µs"
  ImVec2 note_pos, axis_title_pos, summary_pos;
};

TimelineLayout layout_timeline(const TimelineInput& input, ImVec2 min, ImVec2 max,
                               const ViewStyle& style = ViewStyle());
// Index of the launch under `point`, or -1.
int timeline_hit(const TimelineLayout& layout, ImVec2 point);
// Index into layout.gaps of the gap under `point` (with a few px of slack), or -1.
int timeline_gap_hit(const TimelineLayout& layout, ImVec2 point);
// Hover read-outs, one fact per line.
std::string timeline_readout(const TimelineInput& input, int launch);
std::string timeline_gap_readout(const TimelineInput& input, const TimelineGap& gap);

// ---- [SECTION] drawing -----------------------------------------------------------------------

void draw_timeline_layout(ImDrawList* draw_list, const TimelineInput& input,
                          const TimelineLayout& layout, int hovered_launch, int hovered_gap);
// Canvas widget at the cursor: full width, `height` px tall (<= 0: the space left); tooltips on
// hover. Returns the hovered launch or -1.
int draw_timeline(const char* id, const TimelineInput& input, float height);

}  // namespace fl::viz
