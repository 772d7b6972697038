// The memory chart: for each launch of a level, the bytes it had to move by the textbook count
// (read / written) beside what the GPU's counters measured in DRAM (read / written) and in L2,
// plus the bytes fusion saves against level 0 as one big number. Layout as data first, then
// drawn, so tests check the bars without pixels.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "app/measure/results.h"

namespace fl::viz {

enum class MemoryBar { textbook_read, textbook_write, dram_read, dram_write, l2 };
constexpr int kMemoryBarKinds = 5;
const char* label(MemoryBar kind);

struct MemoryRow {
  std::string kernel;                      // "total" for the last row
  double bytes[kMemoryBarKinds] = {0, 0, 0, 0, 0};
  bool measured = false;                   // counters present for this row
};

struct MemoryInput {
  std::vector<MemoryRow> rows;  // one per launch, then the total
  double saved_textbook_bytes = 0;  // level 0 total - this level's total (textbook)
  double saved_dram_bytes = -1;     // the same from the counters; < 0 when not measured
  bool counters = false;            // every launch measured
  CheckResult check;
};

// `level0` may be the same measurement as `shown` (then nothing is saved).
MemoryInput memory_input(const Measurement& shown, const Measurement& level0);

struct MemoryBarRect {
  int row = 0;
  MemoryBar kind = MemoryBar::textbook_read;
  ImVec2 min, max;
};
struct MemoryLayout {
  std::vector<MemoryBarRect> bars;
  std::vector<float> row_y;  // label baseline per row
  double scale_bytes = 0;    // bytes at full width
};

MemoryLayout layout_memory(const MemoryInput& input, ImVec2 min, ImVec2 max, float label_width);
void draw_memory_chart(const char* id, const MemoryInput& input, float height);

}  // namespace fl::viz
