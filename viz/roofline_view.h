// The roofline: arithmetic intensity (FLOP per textbook byte, log x) against achieved GFLOP/s
// (log y), one point per fusion level, under the measured bandwidth roof (the device's copy
// bandwidth: GFLOP/s = intensity x GB/s, a diagonal) and, when known, a compute roof (flat).
// Memory-bound levels sit on the roof's slope; fusing raises a level's intensity (same FLOPs,
// fewer bytes), so its point moves right and, when it is memory-bound, up by the same factor.
// Two steps, as for the plot widget: layout_roofline() computes axes, roofs, points and labels as
// plain data (no ImGui context: tests need no pixels); draw_roofline() draws them.
#pragma once

#include <imgui.h>

#include <string>
#include <utility>
#include <vector>

#include "model/results.h"
#include "viz/view_util.h"

namespace fl::viz {

// ---- [SECTION] input -------------------------------------------------------------------------

struct RooflinePoint {
  std::string label;  // "0 unfused"
  int level = 0;
  double flops = 0;      // textbook FLOPs of the whole level
  double bytes = 0;      // textbook bytes of the whole level
  double time_us = 0;    // median chain time
  double intensity = 0;  // FLOP / byte
  double gflops = 0;     // achieved: flops / time
};

struct RooflineInput {
  std::vector<RooflinePoint> points;
  double roof_gbps = 0;             // bandwidth roof; 0: none drawn (not measured yet)
  double compute_roof_gflops = 0;   // compute roof; 0: unknown, only the bandwidth roof
  std::string compute_roof_source;  // "datasheet, NVIDIA H200, fp32" or "measured: cuBLASLt GEMM"
  int highlighted = -1;             // index of the fusion slider's level
  int top_level = 1;                // the lesson's top level: the points' colours
};

// One point per measurement with a time and a passed check (no point for a wrong kernel).
RooflineInput roofline_input(const std::vector<Measurement>& levels, double roof_gbps,
                             int shown_level, double compute_roof_gflops = 0);

// The compute roof for `precision` on the GPU named `gpu_name`: the fastest cuBLASLt GEMM launch
// measured in `session` in that precision (level 0 of the GEMM lessons: "gemm", "gemm_up", ...)
// when there is one, else the GPU's datasheet peak (dense; fp32 on CUDA cores without TF32, bf16
// on tensor cores), else 0. `source` says which ("measured: cuBLASLt GEMM" / "datasheet").
double compute_roof_gflops(const std::string& gpu_name, Precision precision,
                           const std::vector<Measurement>& session, std::string* source);
// The datasheet peak alone (GFLOP/s), 0 for a GPU not in the table.
double datasheet_peak_gflops(const std::string& gpu_name, Precision precision);

// ---- [SECTION] layout ------------------------------------------------------------------------

struct RooflineLayout {
  float font_size = 16;
  ImVec2 frame_min, frame_max;                        // the plot area
  double x_min = 0, x_max = 0, y_min = 0, y_max = 0;  // data ranges (powers of 10)
  std::vector<ImVec2> points;                         // screen positions, same order as input
  std::vector<std::string> point_labels;              // "0 unfused: 0.56 FLOP/B, 2250 GFLOP/s"
  std::vector<ImVec2> point_label_pos;                // top-left, clear of one another
  bool roof_visible = false;
  ImVec2 roof_from, roof_to;  // the bandwidth roof's visible segment (up to the ridge)
  std::string roof_label;     // "bandwidth roof 4315 GB/s (measured copy)"
  ImVec2 roof_label_pos;
  bool compute_visible = false;
  ImVec2 compute_from, compute_to;  // the flat compute roof, from the ridge on
  std::string compute_label;
  ImVec2 compute_label_pos;
  std::string note;  // "compute roof unknown: only the bandwidth roof is drawn"
  ImVec2 note_pos;
  std::vector<std::pair<float, std::string>> x_ticks, y_ticks;  // screen x / y, label
  std::string x_title, y_title;
  ImVec2 x_title_pos, y_title_pos;

  float x_to_screen(double intensity) const;
  float y_to_screen(double gflops) const;
};

RooflineLayout layout_roofline(const RooflineInput& input, ImVec2 min, ImVec2 max,
                               const ViewStyle& style = ViewStyle());
// The point nearest `p` within `max_distance` px, or -1.
int roofline_hit(const RooflineLayout& layout, ImVec2 p, float max_distance);
std::string roofline_readout(const RooflineInput& input, int point);

// ---- [SECTION] drawing -----------------------------------------------------------------------

void draw_roofline_layout(ImDrawList* draw_list, const RooflineInput& input,
                          const RooflineLayout& layout, int hovered_point);
// Canvas widget at the cursor: full width, `height` px tall (<= 0: the space left); tooltips on
// hover. Returns the hovered point or -1.
int draw_roofline(const char* id, const RooflineInput& input, float height);

}  // namespace fl::viz
