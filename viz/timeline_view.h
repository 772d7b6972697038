// The timeline: the launches of one measurement on a time axis in microseconds. From CUPTI's raw
// records of one repetition when the measurement has them (real starts and ends, so the gaps
// between launches show), otherwise from the median durations laid back to back (and said so).
// The layout is computed as data first (bars, gaps, ticks), then drawn, so tests need no pixels.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "app/measure/results.h"

namespace fl::viz {

struct TimelineLaunch {
  std::string kernel;
  double start_us = 0, end_us = 0;  // relative to the first launch's start
  std::string grid, block;          // "2048x1x1"; empty when unknown (medians)
  int registers = 0;
  int64_t textbook_bytes = 0;
};

struct TimelineInput {
  std::vector<TimelineLaunch> launches;
  bool from_records = false;  // false: medians back to back, gaps unknown
  std::string title;          // "level 0 unfused: 2 launches"
};

// From a measurement: its raw records when present, else its per-launch medians.
TimelineInput timeline_input(const Measurement& m);

struct TimelineBar {
  ImVec2 min, max;  // screen rectangle
  int launch = 0;   // index into TimelineInput::launches
};
struct TimelineGap {
  float x0 = 0, x1 = 0;  // screen span between two launches
  double us = 0;
};
struct TimelineTick {
  float x = 0;
  std::string label;  // "10 us"
};
struct TimelineLayout {
  std::vector<TimelineBar> bars;
  std::vector<TimelineGap> gaps;  // only from records
  std::vector<TimelineTick> ticks;
  double span_us = 0;
};

TimelineLayout layout_timeline(const TimelineInput& input, ImVec2 min, ImVec2 max);
// Index of the launch under `point`, or -1.
int timeline_hit(const TimelineLayout& layout, ImVec2 point);

// Canvas widget: draws into the space available (height `height`), tooltips on hover.
void draw_timeline(const char* id, const TimelineInput& input, float height);

}  // namespace fl::viz
