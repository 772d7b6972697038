// The memory chart: where the bytes of one fusion level went. Per launch and in total, grouped
// bars of the bytes the kernel must move by the textbook count (read | write), the DRAM bytes the
// GPU's counters measured (read | write) and the bytes requested from L2 (measured), on an axis
// in KiB / MiB / GiB; beside them, the bytes fusion saves as one big number (level 0's total
// minus this level's) and the correctness badge (no speedup counts for a wrong kernel).
// Two steps, as for the plot widget: layout_memory() computes bars, ticks, labels and the
// headline as plain data (no ImGui context: tests need no pixels); draw_memory_chart() draws.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "model/results.h"
#include "viz/tensor_homes.h"
#include "viz/view_util.h"

namespace fl::viz {

// ---- [SECTION] input -------------------------------------------------------------------------

// One group of bars: a launch, or the level's total.
struct MemoryGroup {
  std::string kernel;  // "gelu", or "total"
  double textbook_read = 0, textbook_write = 0;
  bool measured = false;  // the counters below are present
  double dram_read = 0, dram_write = 0, l2 = 0;
};

struct MemoryInput {
  std::string level_name;            // "1 fused"
  std::vector<MemoryGroup> groups;   // one per launch, then the total
  bool counters = false;             // every launch has measured counters
  std::string counters_note;         // why not, when the results model says
  bool baseline = false;             // the shown level is level 0: nothing to save
  double level0_textbook_bytes = 0;  // level 0's total
  double saved_textbook_bytes = 0;   // level 0's total - this level's total (textbook)
  double saved_dram_bytes = 0;       // the same from the counters, when saved_dram_known
  bool saved_dram_known = false;
  bool checked = false;  // a correctness figure exists
  CheckResult check;
  // The y axis's top for every level at this size (the tallest bar of any of them), so moving
  // the fusion slider shows the saving as bars shrinking; 0: this level's own tallest bar.
  double axis_bytes = 0;
  // Where the tensors went by the counters, when that differs from the level table
  // (tensor_homes.h): "measured: gelu output went through HBM (...)"; empty when they agree.
  std::string where;
  // Device memory each level held at this size (Measurement::peak_device_bytes), in level
  // order, and the shown level's; empty / 0 where no measurement says (lessons that do not
  // report it, older recordings).
  struct LevelPeak {
    int level = 0;
    std::string name;  // "eager"
    double bytes = 0;
  };
  std::vector<LevelPeak> peaks;
  double peak_bytes = 0;

  const MemoryGroup& total() const { return groups.back(); }
};

// `level0` may be the same measurement as `shown` (then nothing is saved). `all_levels` (may be
// null): every level measured at this size, for the shared byte axis and the peak memory list.
MemoryInput memory_input(const Measurement& shown, const Measurement& level0,
                         const std::vector<Measurement>* all_levels = nullptr);
// The tallest bar `m` draws (textbook, DRAM or L2; per launch or in total), in bytes.
double tallest_memory_bar(const Measurement& m);

// ---- [SECTION] layout ------------------------------------------------------------------------

enum class MemoryBar { textbook, dram, l2 };
const char* label(MemoryBar kind);  // "textbook", "DRAM (measured)", "L2 (measured)"

struct MemoryBarRect {
  int group = 0;
  MemoryBar kind = MemoryBar::textbook;
  ImVec2 min, max;          // the whole bar; textbook and DRAM bars stack read (bottom) + write
  float split_y = 0;        // where read meets write (== max.y for the L2 bar)
  double bytes = 0;         // the bar's height in bytes: read + write, or L2
  std::string value_label;  // "128 MiB"
  ImVec2 value_pos;
  bool value_visible = false;  // fits above the bar without touching its neighbours
};

struct MemoryLegendEntry {
  std::string label;
  ImU32 color_a = 0, color_b = 0;  // a two-tone swatch: read | write
  ImVec2 pos;                      // swatch top-left
};

struct MemoryLayout {
  float font_size = 16;
  ImVec2 frame_min, frame_max;                         // the bar chart's plot area
  double axis_max_bytes = 0;                           // top of the y axis
  std::string unit;                                    // "MiB"
  std::vector<std::pair<float, std::string>> y_ticks;  // screen y, "256 MiB"
  std::vector<MemoryBarRect> bars;
  std::vector<std::pair<ImVec2, std::string>> group_labels;  // top-left, kernel name
  std::vector<MemoryLegendEntry> legend;
  std::string counters_note;  // "DRAM and L2 bars need the counters: ..."
  ImVec2 counters_note_pos;

  // The headline column.
  ImVec2 side_min, side_max;
  std::string saved_title;                // "saved by fusion (textbook bytes)"
  std::string saved_value;                // "512.0 MiB" (the big number)
  double saved_bytes = 0;                 // the big number's value
  std::vector<std::string> saved_detail;  // wrapped lines under it
  ImVec2 saved_title_pos, saved_value_pos, saved_detail_pos;
  float big_font_size = 32;
  std::string badge;  // "correct: rel. error 3.6e-08 (tolerance 1e-05)"
  bool badge_ok = false;
  ImVec2 badge_min, badge_max;
};

MemoryLayout layout_memory(const MemoryInput& input, ImVec2 min, ImVec2 max,
                           const ViewStyle& style = ViewStyle());
// Index into layout.bars under `point`, or -1.
int memory_hit(const MemoryLayout& layout, ImVec2 point);
std::string memory_readout(const MemoryInput& input, const MemoryBarRect& bar);

// ---- [SECTION] drawing -----------------------------------------------------------------------

void draw_memory_layout(ImDrawList* draw_list, const MemoryInput& input, const MemoryLayout& layout,
                        int hovered_bar);
// Canvas widget at the cursor: full width, `height` px tall (<= 0: the space left); tooltips on
// hover. Returns the hovered bar or -1.
int draw_memory_chart(const char* id, const MemoryInput& input, float height);

}  // namespace fl::viz
