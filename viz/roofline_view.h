// The roofline: arithmetic intensity (FLOP per byte of textbook traffic, log x) against achieved
// GFLOP/s (log y), one point per fusion level, under the measured bandwidth roof (the device's
// copy bandwidth: GFLOP/s = intensity x GB/s). Memory-bound levels sit on the roof's slope;
// fusing raises a level's intensity (same FLOPs, fewer bytes), so its point moves right and up.
// Layout as data first, then drawn.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "app/measure/results.h"

namespace fl::viz {

struct RooflinePoint {
  std::string label;  // "0 unfused"
  double intensity = 0;  // FLOP / byte
  double gflops = 0;     // achieved
};

struct RooflineInput {
  std::vector<RooflinePoint> points;
  double roof_gbps = 0;  // bandwidth roof; 0: none drawn
  int highlighted = -1;  // index of the fusion slider's level
};

// One point per measurement with a time and a passed check (no point for a wrong kernel).
RooflineInput roofline_input(const std::vector<Measurement>& levels, double roof_gbps,
                             int shown_level);

struct RooflineLayout {
  double x_min = 0, x_max = 0, y_min = 0, y_max = 0;  // data ranges (powers of 10)
  std::vector<ImVec2> points;                         // screen positions, same order as input
  ImVec2 roof_from, roof_to;                          // the bandwidth roof's visible segment
  std::vector<std::pair<float, std::string>> x_ticks, y_ticks;
};

RooflineLayout layout_roofline(const RooflineInput& input, ImVec2 min, ImVec2 max);
void draw_roofline(const char* id, const RooflineInput& input, float height);

}  // namespace fl::viz
