// The data-flow animation: why fusion is faster, drawn as bytes travelling.
//
// Three places: HBM (global memory), the L2 cache and one SM (registers / shared memory), as
// labelled boxes with their capacities. Each launch of the fusion slider's level is a trip: a
// stream of tokens HBM -> L2 -> SM (its reads, blue) and SM -> L2 -> HBM (its writes, orange),
// running together for as long as the launch took (its measured median), launch after launch,
// with the measured gaps between launches, then looping. A band's thickness is proportional to
// the bytes it carries: on the HBM <-> L2 stretch the measured DRAM bytes when the counters have
// them (else the textbook bytes, and the view says "textbook bytes: counters off"), on the
// L2 <-> SM stretch the bytes the kernel itself must read or write. In an unfused chain each
// intermediate lands in HBM as a labelled tensor block and the next launch reads it back; in a
// fused kernel it stays in registers, listed inside the SM. Where the DRAM bytes fall well below
// the textbook (a size that fits in L2), the stream stops at L2. What stayed on chip is the
// counters' verdict (tensor_homes.h): a value the level table keeps on chip that the measured
// DRAM bytes show in HBM is drawn there, and the caption says so with the table's reason;
// without counters the view says it shows the design, not a measurement.
//
// Two steps, as for the plot widget (plot.h): layout_flow() computes every box, block, band,
// token and label for a time t as plain data (no ImGui context, so tests check it without
// pixels); draw_flow() draws that data and shows hover read-outs.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "model/results.h"
#include "kernels/lesson.h"
#include "viz/tensor_homes.h"
#include "viz/view_util.h"

namespace fl::viz {

enum class FlowPlace { hbm, l2, sm };
const char* place_title(FlowPlace place);  // "HBM (global memory)", "L2 cache", "SM"

// ---- [SECTION] input -------------------------------------------------------------------------

// A tensor the chain moves through memory.
struct FlowTensor {
  std::string name;           // "inputs", "gelu output", "output"
  double bytes = 0;           // its size by the textbook count
  bool intermediate = false;  // written by one launch, read back by a later one
  // Where the counters say it went (tensor_homes.h); absent (home_known false) for the chain's
  // inputs and output. A value the level table keeps on chip appears as a tensor only when the
  // counters saw it in HBM (`moved`): a block in HBM (or L2) with its measured bytes.
  bool home_known = false;
  TensorHome home = TensorHome::hbm;
  bool written_back = false;  // in L2 for its reader, yet written back to HBM
  bool moved = false;         // the level table keeps it on chip; the counters say otherwise
  std::string sentence;       // tensor_homes' sentence, for the hover read-out
};

// One launch: one trip.
struct FlowTrip {
  std::string kernel;
  std::string variant;  // the kernel variant that ran ("ffn_wgmma"); "" for a one-kernel launch
  // The bytes the HBM <-> L2 stretch carries: measured DRAM bytes when `measured`, else textbook.
  double read_bytes = 0, write_bytes = 0;
  double textbook_read_bytes = 0, textbook_write_bytes = 0;  // what the kernel must move
  bool measured = false;
  double median_us = 0;
  double gap_before_us = 0;          // the GPU idles this long before the launch starts
  std::vector<int> reads, writes;    // indices into FlowInput::tensors
  bool writes_intermediate = false;  // its output is read back by a later launch
  bool reads_stop_at_l2 = false;     // L2 served its reads: DRAM saw well under the textbook
  bool writes_stop_at_l2 = false;    // its writes stayed in L2
  // Shared memory / L1: the kernel stages rows or tiles there (LayerNorm and softmax rows, GEMM
  // tiles). From its CUPTI record's static + dynamic shared memory per block when recorded
  // (shared_bytes >= 0), else from what the kernel is (a row-wise or GEMM kernel).
  bool stages_in_shared = false;
  int64_t shared_bytes = -1;  // per block; -1: not recorded
};

// One launch on the two-lane time axis under the animation.
struct FlowLaneLaunch {
  std::string kernel;
  double start_us = 0, end_us = 0;
};

struct FlowInput {
  std::string level_name;     // "0 unfused"
  std::string level_summary;  // the lesson's sentence for the level, may be empty
  std::string variants;       // the variants that ran, "ffn_wgmma" (empty: none declared)
  std::string variant_what;   // the level table's sentence on the first of them
  std::vector<FlowTensor> tensors;
  std::vector<FlowTrip> trips;
  std::vector<std::string> on_chip;  // values a fused kernel keeps in registers ("gelu output")
  // The level table says they stay in registers (else in shared memory or L2: "kept on chip").
  bool on_chip_registers = true;
  std::vector<std::string> moved;  // values the table keeps on chip that the counters saw in HBM
  TensorHomes homes;               // where every tensor went, measured (or by design)
  double l2_bytes = 0;             // L2 capacity; 0: unknown
  double hbm_bytes = 0;            // device memory; 0: unknown
  int sm_count = 0;                // 0: unknown
  // 64K 32-bit registers per SM on every GPU from Volta (sm_70) to Hopper (sm_90).
  double sm_register_bytes = 256.0 * 1024;
  // Shared memory / L1 per SM that a kernel can use, from the compute capability (0: unknown):
  // 96 KiB on 7.0, 164 KiB on 8.0, 100 KiB on 8.6/8.9, 228 KiB on 9.0.
  double sm_shared_bytes = 0;
  std::string device_name;  // for the capacity sentence
  // Level 0 on the same time axis as this level (empty when this is level 0): two lanes.
  std::vector<FlowLaneLaunch> level0_lane;
  std::string level0_lane_label;  // "level 0 unfused: 254 µs"
  std::string lane_label;         // "level 1 fused: 124 µs"
  std::string hint;               // top-right corner ("click to pause"): the caption leaves room
  int level = 0, top_level = 1;   // the lanes take the levels' colours
  // Bytes drawn at the full band thickness; 0: the largest stretch of this input. Set it from
  // level 0 (and this level, where one of its launches moves more) so that moving the fusion
  // slider compares thicknesses on one scale.
  double volume_scale_bytes = 0;
  // GPU time that one run of the animation shows (level 0's chain time, so a faster level ends
  // its run visibly sooner and then waits); 0 or less than this chain: this chain's own time.
  double pace_reference_us = 0;
  std::string pace_reference_label;  // "level 0: 65.6 µs"

  bool measured() const;  // every trip has measured DRAM bytes
};

// From a measurement of one level. `lesson` (may be null) names the level and what a fused
// kernel keeps on chip; `device` gives the capacities; `level0` (may be null) sets the common
// volume scale and pace so that every level of a size is drawn to one scale.
//
// Tensors: the first launch reads "inputs"; every launch's output but the last is an
// intermediate ("gelu output") that the next launch reads; the last writes "output".
// Whether bytes stop at L2: with counters, a direction whose DRAM bytes are under half the
// textbook bytes. Without counters, the reads of an intermediate (or, in warm mode, of the
// inputs) whose size is under the L2 capacity; writes go on to HBM, as the H200's counters show
// they do even at L2-resident sizes (L2 writes dirty lines back).
FlowInput flow_input(const Measurement& m, const Lesson* lesson, const DeviceFacts& device,
                     const Measurement* level0 = nullptr);
// The same with only the L2 capacity known (no lesson, no common scale).
FlowInput flow_input(const Measurement& m, int64_t l2_bytes);

// The hook for measured bytes: true and the DRAM bytes a launch read and wrote when its
// counters were measured (CUPTI range profiler), false otherwise.
bool measured_dram_bytes(const LaunchResult& launch, double* read_bytes, double* write_bytes);

// ---- [SECTION] time --------------------------------------------------------------------------

// The animation's clock, the view's only state: seconds since the animation (re)started, in the
// app's time base (ImGui::GetTime() or the frame's clock), paused or running.
struct FlowClock {
  double started_s = 0;
  double paused_elapsed_s = -1;  // >= 0 while paused: the time shown

  bool paused() const { return paused_elapsed_s >= 0; }
  double elapsed(double now_s) const { return paused() ? paused_elapsed_s : now_s - started_s; }
  void restart(double now_s) {
    started_s = now_s;
    if (paused()) paused_elapsed_s = 0;
  }
  void toggle_pause(double now_s) {
    if (paused()) {
      started_s = now_s - paused_elapsed_s;
      paused_elapsed_s = -1;
    } else {
      paused_elapsed_s = now_s - started_s;
    }
  }
};

// One run of the chain takes this long on screen (for the slowest level); a pause follows.
constexpr double kFlowRunSeconds = 3.0;
constexpr double kFlowHoldSeconds = 1.0;

// ---- [SECTION] layout ------------------------------------------------------------------------

struct FlowBox {
  FlowPlace place = FlowPlace::hbm;
  ImVec2 min, max;
  std::string title;               // "HBM (global memory)"
  std::string capacity;            // "139.8 GiB", "60.0 MiB", "256.0 KiB registers"
  ImVec2 title_pos, capacity_pos;  // one line when both fit, else two
  int hidden_blocks = 0;           // older tensor blocks that did not fit in the box
  std::string more_label;  // "+2 earlier tensors" in the first block row when some are hidden
  ImVec2 more_pos;
};

// A tensor where it sits now: a labelled block, filled as far as it has been written.
struct FlowBlock {
  int tensor = 0;  // index into FlowInput::tensors
  FlowPlace place = FlowPlace::hbm;
  ImVec2 min, max;
  std::string label;  // "gelu output 64.0 MiB (intermediate)", shortened to fit
  float fill = 1;     // 0..1: written so far
  bool intermediate = false;
  bool being_read = false, being_written = false;
};

// One stretch of a band: HBM <-> L2 (DRAM bytes) or L2 <-> SM (the kernel's own bytes).
struct FlowSegment {
  ImVec2 from, to;      // the direction the bytes travel
  float thickness = 0;  // px, proportional to `bytes` (not clamped: may be < 1)
  double bytes = 0;
  bool visible = false;        // carries at least 1% of the scale's bytes (drawn >= 2 px)
  std::vector<ImVec2> tokens;  // the moving tokens' centres, when visible
};

struct FlowLane {
  bool write = false;          // false: reads (towards the SM); true: writes (away from it)
  bool stops_at_l2 = false;    // the HBM stretch carries (almost) nothing
  FlowSegment dram;            // HBM <-> L2
  FlowSegment chip;            // L2 <-> SM
  std::string label;           // "64.0 MiB" (the DRAM stretch) or "L2 hit"
  ImVec2 label_pos;            // top-left
  bool label_visible = false;  // only where the boxes leave a row for it above the band
};

struct FlowStripSegment {  // one launch on the pacing strip
  float x0 = 0, x1 = 0;
  int trip = 0;
};

struct FlowLayout {
  ImVec2 canvas_min, canvas_max;
  float font_size = 16;
  FlowBox boxes[3];  // indexed by FlowPlace
  std::vector<FlowBlock> blocks;
  std::vector<std::string> on_chip_lines;  // in the SM box, green: "kept in registers:", values
  std::vector<std::string> sm_note_lines;  // when nothing stays on chip
  std::vector<std::string> moved_lines;    // "not kept (measured):", values, in warning colour
  ImVec2 on_chip_pos;                      // top-left of the first line of either

  // What happens at time t. trip >= 0: that launch is running, `progress` of the way through.
  int trip = -1;
  float progress = 0;
  bool in_gap = false;          // between two launches: nothing moves
  bool done = false;            // the chain has finished this run; the loop waits, then restarts
  std::vector<FlowLane> lanes;  // the running trip's reads and writes
  double gpu_us = 0;            // GPU time shown now, from the chain's start
  double chain_us = 0;          // this chain: launches' medians plus the gaps
  double seconds_per_us = 0;    // the animation's pace: screen seconds per GPU microsecond
  double loop_seconds = kFlowRunSeconds + kFlowHoldSeconds;

  // Every trip's volume on one scale (thickness in px of its HBM stretches, read + write):
  // proportional to FlowTrip::read_bytes + write_bytes.
  std::vector<float> trip_volume;

  // The two lanes under the animation, on one GPU-time axis: level 0 (when this level is not
  // level 0) above this level, each launch a segment, with a cursor at gpu_us across both.
  ImVec2 strip_min, strip_max;  // this level's lane
  std::vector<FlowStripSegment> strip;
  ImVec2 level0_strip_min, level0_strip_max;  // level 0's lane (zero size: none)
  std::vector<FlowStripSegment> level0_strip;
  std::vector<std::string> level0_strip_names;  // a kernel name per level-0 segment
  std::vector<std::string> strip_names;
  std::string lane_label, level0_lane_label;
  ImVec2 lane_label_pos, level0_lane_label_pos;
  float lane_label_w = 0;
  float strip_cursor_x = 0;
  // The SM's shared memory / L1, drawn as a block in the SM box when a launch stages data there.
  bool shared_visible = false;
  ImVec2 shared_min, shared_max;
  std::string shared_label;    // "shared memory / L1 228.0 KiB: layernorm stages its rows"
  bool shared_active = false;  // the running launch stages data there now
  std::string capacity;        // "on chip: 132 SMs x (256 KiB registers + 228 KiB shared) = ..."
  ImVec2 capacity_pos;
  ImVec2 hint_pos;

  std::string caption;     // "Level 0 unfused: GELU and scale as two kernels; ..."
  std::string status;      // "launch 1 of 2, gelu: reads 64.0 MiB from HBM, writes ..."
  std::string time_label;  // "GPU time 12.3 µs of 30.3 µs (strip: level 0: 65.6 µs)"
  std::string bytes_note;  // "band width: measured DRAM bytes ..." or "counters off: ..."
  // Where a tensor went against the design, with the level table's reason (tall views, in the
  // capacity row's place); empty when the counters agree with the table.
  std::string where_note;
  std::string where_note_full;  // the same, uncut, for its hover read-out
  std::string where_reason;     // "the level table: ..." on the row below, cut to fit
  ImVec2 where_reason_pos;
  ImVec2 caption_pos, status_pos, time_label_pos, bytes_note_pos;
  bool bytes_note_textbook = false;  // drawn in the warning colour
};

// `t`: seconds since the animation started (FlowClock::elapsed, or any running clock).
FlowLayout layout_flow(const FlowInput& input, double t, ImVec2 canvas_min, ImVec2 canvas_max,
                       const ViewStyle& style = ViewStyle());

// What is under a point: a box, a block or a lane of the running trip.
struct FlowHit {
  int box = -1;             // FlowPlace as int
  int block = -1;           // index into FlowLayout::blocks
  int lane = -1;            // index into FlowLayout::lanes
  bool where_note = false;  // the row that says where a tensor went against the design
  bool valid() const { return box >= 0 || block >= 0 || lane >= 0 || where_note; }
};
FlowHit flow_hit(const FlowLayout& layout, ImVec2 point);
// The hover read-out for a hit, one fact per line; empty for no hit.
std::string flow_readout(const FlowInput& input, const FlowLayout& layout, const FlowHit& hit);

// ---- [SECTION] drawing -----------------------------------------------------------------------

void draw_flow_layout(ImDrawList* draw_list, const FlowInput& input, const FlowLayout& layout,
                      const FlowHit& hover);

struct FlowResult {
  bool animating = false;  // something moves: the app should keep drawing frames
  FlowHit hover;
};

// The Canvas pattern at the cursor, full width, `height` px tall (<= 0: the space left), at
// animation time `t` seconds. Hovering shows read-outs.
FlowResult draw_flow(const char* id, const FlowInput& input, double t, float height);
// The same with a clock: a click on the view pauses or resumes it.
FlowResult draw_flow(const char* id, const FlowInput& input, FlowClock* clock, double now_s,
                     float height);

}  // namespace fl::viz
