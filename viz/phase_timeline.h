// Phase timelines: what happened inside one launch, as its kernel recorded it (kernels/phases.h,
// LaunchPhases): one lane per SM (a row more where blocks overlapped on an SM), each block's
// phases as coloured boxes on a time axis that starts at the launch's first stamp. Hovering a box
// names the block, its SM, the phase and its times (and, for a persistent kernel's tasks, the
// task's argument and how long it waited for its inputs). The Timeline view shows it under the
// launches when its "phases" box is ticked.
// Two steps, as every view: layout_phase_timeline() computes lanes, boxes, ticks and the legend
// as plain data (no ImGui context: tests need no pixels); draw_phase_timeline() draws them.
#pragma once

#include <imgui.h>

#include <functional>
#include <string>
#include <vector>

#include "model/results.h"
#include "viz/view_util.h"

namespace fl::viz {

// ---- [SECTION] input -------------------------------------------------------------------------

struct PhaseTimelineInput {
  std::string kernel;  // the launch's name ("ffn_fused")
  int launch = -1;     // index into Measurement::launches
  LaunchPhases phases;
  std::vector<PhaseLane> lanes;  // phase_lanes(phases), one per record
  bool tasks = false;            // records carry arguments or waits (a persistent kernel's tasks)
  // Optional: what a task record's `arg` names ("layer 3 fc rows 48-71"), for the hover; the
  // caller that knows the kernel's task list sets it (viz reads no lesson's internals).
  std::function<std::string(uint32_t arg)> task_name;
};

// One input per launch of `m` that has a phase timeline, in launch order (empty: none has).
std::vector<PhaseTimelineInput> phase_timeline_inputs(const Measurement& m);

// ---- [SECTION] layout ------------------------------------------------------------------------

struct PhaseLaneRow {
  int sm = 0, slot = 0;
  float y0 = 0, y1 = 0;
};
struct PhaseBox {
  ImVec2 min, max;  // at least 1 px wide
  int record = 0;   // index into phases.records
  int phase = 0;
};
struct PhaseLegendItem {
  int phase = 0;
  std::string label;  // the phase's name
  ImVec2 swatch_min, swatch_max, text_pos;
};
struct PhaseAxisLabel {
  std::string label;  // "SM 0"
  ImVec2 pos;
};
struct PhaseTick {
  float x = 0;
  double us = 0;
  std::string label;
};
struct PhaseTimelineLayout {
  ImVec2 frame_min, frame_max;  // the lanes' area
  float font_size = 16;
  std::vector<PhaseLaneRow> rows;  // by SM, then slot
  std::vector<PhaseBox> boxes;
  std::vector<PhaseLegendItem> legend;
  std::vector<PhaseAxisLabel> sm_labels;  // some SMs' numbers left of their lanes
  std::vector<PhaseTick> ticks;
  double span_us = 0;      // the axis runs from 0 to this
  std::string title;       // "ffn_fused: 112 blocks on 112 SMs, 448 phase records"
  std::string cost;        // "stamps on 8.3 µs, off 8.0 µs (+3.8%)"
  std::string note;        // what is missing ("312 records lost: the buffer was full"), or ""
  std::string axis_title;  // "time since the launch's first stamp (µs)"
  ImVec2 title_pos, cost_pos, note_pos, axis_title_pos;
};

PhaseTimelineLayout layout_phase_timeline(const PhaseTimelineInput& input, ImVec2 min, ImVec2 max,
                                          const ViewStyle& style = ViewStyle());
// Index into layout.boxes of the box under `point` (its lane's full height), or -1.
int phase_timeline_hit(const PhaseTimelineLayout& layout, ImVec2 point);
// The hover read-out of record `record`: block, SM, phase, start, end and length in µs, and the
// task's argument and wait when the records carry them.
std::string phase_readout(const PhaseTimelineInput& input, int record);

// ---- [SECTION] drawing -----------------------------------------------------------------------

void draw_phase_timeline_layout(ImDrawList* draw_list, const PhaseTimelineLayout& layout,
                                int hovered_box);
// Canvas widget at the cursor: full width, `height` px tall; a tooltip on hover.
void draw_phase_timeline(const char* id, const PhaseTimelineInput& input, float height);

}  // namespace fl::viz
