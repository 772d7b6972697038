// The data-flow animation: HBM (global memory), L2 and an SM (registers / shared memory) drawn
// as places, and each launch of the fusion slider's level as a trip: bytes flow HBM -> L2 -> SM
// (the reads), then SM -> L2 -> HBM (the writes), with a band as thick as the bytes moved
// (measured DRAM bytes when the counters have them, else the textbook bytes, said so) and a pace
// set by the launch's measured median time; launch after launch, looping. In an unfused chain the
// intermediate each launch writes lands in HBM and the next launch reads it back; in the fused
// kernel it stays in the SM's registers. When the counters show the data never reached DRAM
// (an L2-resident size), the trip stops at L2.
// The layout (places, the trip in flight, volumes, labels) is computed as data for a time t, then
// drawn, so tests check it without pixels.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "app/measure/results.h"

namespace fl::viz {

struct FlowTrip {
  std::string kernel;
  double read_bytes = 0, write_bytes = 0;  // measured DRAM bytes, or textbook when !measured
  double textbook_bytes = 0;               // read + written by the textbook count
  double duration_us = 0;                  // median
  bool measured = false;
  bool stays_in_l2 = false;      // DRAM saw well under half the textbook bytes: L2 served them
  bool writes_intermediate = false;  // its output is read back by the next launch
};

struct FlowInput {
  std::string level_name;
  std::vector<FlowTrip> trips;
  double l2_bytes = 0;  // capacity, for the L2 box's label
};

FlowInput flow_input(const Measurement& m, int64_t l2_bytes);

enum class FlowPlace { hbm, l2, sm };

struct FlowLayout {
  ImVec2 place_min[3], place_max[3];  // indexed by FlowPlace
  int trip = -1;            // the launch in flight at time t
  bool writing = false;     // its second half: SM -> HBM
  float progress = 0;       // 0..1 along the current half-trip
  ImVec2 token;             // where the band's head is
  float band = 0;           // its thickness in pixels, proportional to the bytes of this half
  FlowPlace turn_at = FlowPlace::hbm;  // where the half-trip ends (hbm, or l2 when it stays there)
  std::vector<std::string> hbm_tensors;  // what sits in HBM so far this loop ("t (intermediate)")
  std::string sm_note;                   // "GELU(x) stays in registers" for a fused kernel
  double loop_seconds = 0;
};

// `t` in seconds since the animation started; the chain loops every ~3 s whatever its real
// duration (the pace between launches follows their measured times).
FlowLayout layout_flow(const FlowInput& input, double t, ImVec2 min, ImVec2 max, float max_band);
void draw_flow(const char* id, const FlowInput& input, double t, float height);

}  // namespace fl::viz
