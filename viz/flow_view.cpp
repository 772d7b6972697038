// The data-flow animation (flow_view.h).
//
// [SECTION] input: FlowInput from a Measurement (+ Lesson, device facts, level 0)
// [SECTION] layout: boxes, blocks, bands and tokens for a time t, as plain data
// [SECTION] hover: hit test and read-outs
// [SECTION] drawing and the widget
#include "viz/flow_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

namespace fl::viz {

const char* place_title(FlowPlace place) {
  switch (place) {
    case FlowPlace::hbm:
      return "HBM (global memory)";
    case FlowPlace::l2:
      return "L2 cache";
    case FlowPlace::sm:
      return "SM";
  }
  return "";
}

bool FlowInput::measured() const {
  if (trips.empty()) return false;
  for (const auto& t : trips) {
    if (!t.measured) return false;
  }
  return true;
}

// ---- [SECTION] input -------------------------------------------------------------------------

bool measured_dram_bytes(const LaunchResult& launch, double* read_bytes, double* write_bytes) {
  if (!launch.counters) return false;
  *read_bytes = static_cast<double>(launch.counters->dram_read_bytes);
  *write_bytes = static_cast<double>(launch.counters->dram_write_bytes);
  return true;
}

namespace {

// DRAM saw under this share of the textbook bytes: L2 served the rest.
constexpr double kL2ServedShare = 0.5;

std::string intermediate_name(const std::string& kernel) {
  return kernel + " output";
}

FlowTensor flow_tensor(const std::string& name, double bytes, bool intermediate) {
  FlowTensor t;
  t.name = name;
  t.bytes = bytes;
  t.intermediate = intermediate;
  return t;
}

// The gap before each launch, so that the launches' medians and the gaps add up to the measured
// chain median (the recorded-measurement table's figure): one run's gaps from the raw records
// where every launch has one, scaled to fill the chain time beyond the medians; else that time
// spread evenly between the launches. Without a chain median the records' gaps as they are.
std::vector<double> launch_gaps_us(const Measurement& m) {
  const size_t n = m.launches.size();
  std::vector<double> gaps(n, 0.0);
  if (n < 2) return gaps;
  std::vector<const KernelRecord*> by_launch(n, nullptr);
  for (const KernelRecord& r : m.records) {
    if (r.launch >= 0 && static_cast<size_t>(r.launch) < n) by_launch[r.launch] = &r;
  }
  const bool all = std::all_of(by_launch.begin(), by_launch.end(),
                               [](const KernelRecord* r) { return r != nullptr; });
  double recorded = 0;
  if (all) {
    for (size_t k = 1; k < n; ++k) {
      gaps[k] = std::max(0.0, (by_launch[k]->start_rel_ns - by_launch[k - 1]->end_rel_ns) * 1e-3);
      recorded += gaps[k];
    }
    if (!(m.chain_time_us.median > 0)) return gaps;
  }
  double medians = 0;
  for (const auto& l : m.launches) medians += std::max(l.time_us.median, 0.0);
  const double spare = std::max(m.chain_time_us.median - medians, 0.0);
  for (size_t k = 1; k < n; ++k) {
    gaps[k] = recorded > 0 ? gaps[k] * spare / recorded : spare / static_cast<double>(n - 1);
  }
  return gaps;
}

}  // namespace

namespace {

// Shared memory per SM a kernel can use, by compute capability (CUDA programming guide).
double shared_bytes_per_sm(int cc_major, int cc_minor) {
  const int cc = cc_major * 10 + cc_minor;
  if (cc <= 0) return 0;
  if (cc == 70 || cc == 72) return 96.0 * 1024;
  if (cc == 75) return 64.0 * 1024;
  if (cc == 80 || cc == 87) return 164.0 * 1024;
  if (cc == 86 || cc == 89) return 100.0 * 1024;
  if (cc >= 90 && cc < 100) return 228.0 * 1024;
  if (cc >= 100 && cc < 120) return 228.0 * 1024;
  if (cc >= 120) return 100.0 * 1024;
  return 48.0 * 1024;
}

// Kernels that stage rows or tiles in shared memory / L1 by what they are, for measurements
// without CUPTI records: row-wise reductions (LayerNorm, softmax) and GEMMs.
bool stages_rows_or_tiles(const std::string& kernel) {
  for (const char* part :
       {"layernorm", "mean_var", "normalize", "softmax", "row_", "exp_sum", "gemm", "ffn", "ln_"}) {
    if (kernel.find(part) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

namespace {

// Launch k of `m` as a trip: the tensor before it in, the one after it out; its bytes measured
// (and whether L2 served them) when the counters were on, else the textbook's with L2 guessed.
FlowTrip flow_trip(const Measurement& m, size_t k, const std::vector<double>& gaps,
                   const FlowInput& in) {
  const size_t n = m.launches.size();
  const LaunchResult& l = m.launches[k];
  FlowTrip trip;
  trip.kernel = l.textbook.kernel;
  trip.variant = l.variant;
  trip.textbook_read_bytes = static_cast<double>(l.textbook.bytes_read);
  trip.textbook_write_bytes = static_cast<double>(l.textbook.bytes_written);
  trip.median_us = l.time_us.median;
  trip.gap_before_us = gaps[k];
  trip.reads = {static_cast<int>(k)};       // the inputs, or the previous launch's output
  trip.writes = {static_cast<int>(k) + 1};  // its intermediate, or the output
  trip.writes_intermediate = k + 1 < n;
  for (const KernelRecord& r : m.records) {
    if (r.launch == static_cast<int>(k)) {
      trip.shared_bytes = static_cast<int64_t>(r.static_shared_bytes) + r.dynamic_shared_bytes;
    }
  }
  trip.stages_in_shared =
      trip.shared_bytes >= 0 ? trip.shared_bytes > 0 : stages_rows_or_tiles(trip.kernel);
  trip.measured = measured_dram_bytes(l, &trip.read_bytes, &trip.write_bytes);
  if (trip.measured) {
    trip.reads_stop_at_l2 =
        trip.textbook_read_bytes > 0 && trip.read_bytes < kL2ServedShare * trip.textbook_read_bytes;
    trip.writes_stop_at_l2 = trip.textbook_write_bytes > 0 &&
                             trip.write_bytes < kL2ServedShare * trip.textbook_write_bytes;
  } else {
    trip.read_bytes = trip.textbook_read_bytes;
    trip.write_bytes = trip.textbook_write_bytes;
    // Counters off: an intermediate the previous launch just wrote is still in L2 when it
    // fits; the inputs are there only in warm mode (cold mode evicts them before each run).
    const double read_tensor = in.tensors[k].bytes;
    const bool fits = in.l2_bytes > 0 && read_tensor > 0 && read_tensor < in.l2_bytes;
    trip.reads_stop_at_l2 = fits && (k > 0 || m.cache == CacheMode::warm);
  }
  return trip;
}

// What a fused level keeps on chip, from the level table (kept_by_design, viz/tensor_homes.h):
// the flow view's words when the homes gave none.
std::vector<std::string> kept_on_chip(const Measurement& m, const Lesson* lesson,
                                      const Measurement* level0) {
  const std::vector<LaunchTraffic> l0 = level0_traffic(m, lesson, level0);
  std::vector<std::string> on_chip;
  const std::vector<bool> kept = kept_by_design(m, l0);
  for (size_t k = 0; k < kept.size(); ++k) {
    if (kept[k]) on_chip.push_back(intermediate_name(l0[k].kernel));
  }
  if (on_chip.empty() && m.launches.size() == 1 && l0.empty()) {
    on_chip.push_back("every intermediate");
  }
  return on_chip;
}

// The kernel variants that ran (the caption names them) and what the first does differently.
void name_variants(const Measurement& m, const Lesson* lesson, FlowInput* in) {
  for (const LaunchResult& l : m.launches) {
    if (l.variant.empty() || in->variants.find(l.variant) != std::string::npos) continue;
    in->variants += (in->variants.empty() ? "" : ", ") + l.variant;
    if (!in->variant_what.empty() || !lesson || m.level < 0 || m.level >= lesson->level_count())
      continue;
    for (const VariantInfo& v : lesson->info().levels[m.level].variants) {
      if (v.name == l.variant) in->variant_what = v.name + ": " + v.what;
    }
  }
}

// The counters' verdicts onto the tensors: each intermediate's home, the values kept on chip,
// and each value the table keeps on chip that went through HBM as a tensor of its own, written
// and read by the launch that holds it.
void place_by_homes(FlowInput* in) {
  for (const TensorPlace& t : in->homes.tensors) {
    if (t.intermediate) {
      const size_t i = static_cast<size_t>(t.launch) + 1;  // the tensor after its writer
      if (i >= in->tensors.size()) continue;
      FlowTensor& f = in->tensors[i];
      f.home_known = true;
      f.home = t.measured;
      f.written_back = t.written_back;
      f.sentence = t.sentence;
      continue;
    }
    if (!t.moved()) {
      in->on_chip.push_back(t.name);
      continue;
    }
    in->moved.push_back(t.name);
    FlowTensor f = flow_tensor(t.name, t.bytes, true);
    f.home_known = true;
    f.home = t.measured;
    f.written_back = t.written_back;
    f.moved = true;
    f.sentence = t.sentence;
    const int index = static_cast<int>(in->tensors.size());
    in->tensors.push_back(f);
    if (t.launch >= 0 && static_cast<size_t>(t.launch) < in->trips.size()) {
      in->trips[t.launch].writes.push_back(index);
      in->trips[t.launch].reads.push_back(index);
    }
  }
}

// The largest stretch of one launch of `m`: measured DRAM bytes where counted, else textbook.
double largest_stretch(const Measurement& m) {
  double largest = 0;
  for (const auto& l : m.launches) {
    double r = 0, w = 0;
    if (!measured_dram_bytes(l, &r, &w)) {
      r = static_cast<double>(l.textbook.bytes_read);
      w = static_cast<double>(l.textbook.bytes_written);
    }
    largest = std::max({largest, r, w, static_cast<double>(l.textbook.bytes_read),
                        static_cast<double>(l.textbook.bytes_written)});
  }
  return largest;
}

// One scale for every level of this size: level 0's largest stretch sets the thickness (or this
// level's, where one launch moves more: a megakernel reads every layer's weights in one launch,
// forty times level 0's largest, and its band must still fit the boxes), and level 0's chain
// time (its lane's length, the measured chain median) sets the pace; at another level, level 0's
// lane on the same axis.
void pace_by_level0(const Measurement& m, const Measurement& level0, FlowInput* in) {
  in->volume_scale_bytes = std::max(largest_stretch(level0), largest_stretch(m));
  const std::vector<double> gaps0 = launch_gaps_us(level0);
  std::vector<FlowLaneLaunch> lane;
  double cursor = 0;
  for (size_t k = 0; k < level0.launches.size(); ++k) {
    cursor += std::max(gaps0[k], 0.0);
    const double start = cursor;
    cursor += std::max(level0.launches[k].time_us.median, 0.0);
    lane.push_back({level0.launches[k].textbook.kernel, start, cursor});
  }
  in->pace_reference_us = cursor;
  if (level0.level == m.level) return;
  const std::string quoted = format_us(cursor);
  in->pace_reference_label = "level " + std::to_string(level0.level) + ": " + quoted;
  in->level0_lane = std::move(lane);
  in->level0_lane_label = "level 0 " + level0.level_name + ": " + quoted;
}

}  // namespace

// Whether the level's own account of what stays on chip (the level table's on_chip) puts it in
// registers only. A level that names shared memory or L2 there (the FFN's h, the decode
// megakernel's activations read by the next task from L2) keeps its values "on chip": the
// counters say only that they never reached HBM.
static bool on_chip_in_registers(const Measurement& m, const Lesson* lesson) {
  if (!lesson || m.level < 0 || m.level >= lesson->level_count()) return true;
  const std::string& said = lesson->info().levels[m.level].on_chip;
  return said.find("shared") == std::string::npos && said.find("L2") == std::string::npos &&
         said.find("on chip") == std::string::npos;
}

FlowInput flow_input(const Measurement& m, const Lesson* lesson, const DeviceFacts& device,
                     const Measurement* level0) {
  FlowInput in;
  in.sm_shared_bytes = shared_bytes_per_sm(device.cc_major, device.cc_minor);
  in.device_name = device.name;
  std::string level_name = m.level_name;
  if (lesson && m.level >= 0 && m.level < lesson->level_count()) {
    const FusionLevel& level = lesson->info().levels[m.level];
    if (level_name.empty()) level_name = level.name;
    in.level_summary = level.summary;
  }
  in.level_name = std::to_string(m.level) + " " + level_name;
  in.level = m.level;
  if (lesson) in.top_level = lesson->level_count() - 1;
  in.l2_bytes = static_cast<double>(device.l2_bytes);
  in.hbm_bytes = static_cast<double>(device.memory_bytes);
  in.sm_count = device.sm_count;

  const size_t n = m.launches.size();
  if (n == 0) return in;
  // Tensors: the inputs, one intermediate per launch but the last, the output.
  in.tensors.push_back(
      flow_tensor("inputs", static_cast<double>(m.launches[0].textbook.bytes_read), false));
  for (size_t k = 0; k + 1 < n; ++k) {
    in.tensors.push_back(flow_tensor(intermediate_name(m.launches[k].textbook.kernel),
                                     static_cast<double>(m.launches[k].textbook.bytes_written),
                                     true));
  }
  in.tensors.push_back(
      flow_tensor("output", static_cast<double>(m.launches[n - 1].textbook.bytes_written), false));
  const std::vector<double> gaps = launch_gaps_us(m);
  for (size_t k = 0; k < n; ++k) in.trips.push_back(flow_trip(m, k, gaps, in));
  in.homes = tensor_homes(m, lesson, level0);
  name_variants(m, lesson, &in);
  place_by_homes(&in);
  if (m.level > 0 && in.on_chip.empty() && in.moved.empty()) {
    in.on_chip = kept_on_chip(m, lesson, level0);
  }
  in.on_chip_registers = on_chip_in_registers(m, lesson);
  if (level0 && !level0->launches.empty()) pace_by_level0(m, *level0, &in);
  double chain = 0;
  for (const auto& t : in.trips)
    chain += std::max(t.gap_before_us, 0.0) + std::max(t.median_us, 0.0);
  in.lane_label = "level " + in.level_name + ": " + format_us(chain);
  return in;
}

FlowInput flow_input(const Measurement& m, int64_t l2_bytes) {
  DeviceFacts device;
  device.l2_bytes = l2_bytes;
  return flow_input(m, nullptr, device, nullptr);
}

// ---- [SECTION] layout ------------------------------------------------------------------------

namespace {

// Where each trip sits on the chain's GPU-time axis (gaps included).
struct Timing {
  std::vector<double> start_us, end_us;
  double chain_us = 0;
};

Timing chain_timing(const FlowInput& in) {
  Timing t;
  double cursor = 0;
  for (const auto& trip : in.trips) {
    cursor += std::max(trip.gap_before_us, 0.0);
    t.start_us.push_back(cursor);
    cursor += std::max(trip.median_us, 0.0);
    t.end_us.push_back(cursor);
  }
  t.chain_us = cursor;
  return t;
}

// Token centres every `spacing` px from `from` to `to`, shifted by `offset` px (the motion).
std::vector<ImVec2> tokens_along(ImVec2 from, ImVec2 to, float spacing, float offset) {
  std::vector<ImVec2> out;
  const float len = std::hypot(to.x - from.x, to.y - from.y);
  if (len <= 0 || spacing <= 0) return out;
  for (float d = std::fmod(std::max(offset, 0.0f), spacing); d <= len; d += spacing) {
    out.push_back(lerp(from, to, d / len));
  }
  return out;
}

// Tokens cross a stretch at this pace whatever the bytes: the bytes show in the thickness and
// the launch's duration in how long the stream runs.
constexpr float kTokenSpeedFontSizesPerSecond = 8.0f;
// A stretch carrying less than this share of the scale's bytes is not drawn: it carries
// (almost) nothing, e.g. DRAM reads that L2 served. Thinner stretches that are drawn get 2 px.
constexpr double kVisibleShare = 0.01;

int writer_of(const FlowInput& in, int tensor) {
  for (size_t k = 0; k < in.trips.size(); ++k) {
    for (int w : in.trips[k].writes) {
      if (w == tensor) return static_cast<int>(k);
    }
  }
  return -1;
}

std::vector<int> readers_of(const FlowInput& in, int tensor) {
  std::vector<int> out;
  for (size_t k = 0; k < in.trips.size(); ++k) {
    for (int r : in.trips[k].reads) {
      if (r == tensor) out.push_back(static_cast<int>(k));
    }
  }
  return out;
}

// The capacity sentence: every SM's registers and shared memory, against the tensor.
std::string capacity_sentence(const FlowInput& in) {
  const double per_sm = in.sm_register_bytes + in.sm_shared_bytes;
  const double on_chip = per_sm * in.sm_count;
  const double tensor = in.tensors.empty() ? 0 : in.tensors[0].bytes;
  std::string c =
      "on chip: " + std::to_string(in.sm_count) + " SMs x (" +
      format_byte_count(in.sm_register_bytes) + " registers" +
      (in.sm_shared_bytes > 0 ? " + " + format_byte_count(in.sm_shared_bytes) + " shared memory"
                              : std::string()) +
      ") = " + format_byte_count(on_chip);
  if (tensor > 0) {
    c += ", against " + format_byte_count(tensor) + " of inputs: " +
         (tensor > on_chip ? "they stream through, a row or tile at a time"
                           : "small enough to fit on chip");
  }
  return c;
}

// The geometry the phases of layout_flow share: the canvas, the boxes' inner rows and the bands'
// heights.
struct FlowGeometry {
  float fs = 0, line = 0, pad = 0;
  float W = 0;                    // the canvas's width (at least ten font sizes)
  float top = 0, bottom = 0;      // of the three boxes
  bool two_lanes = false;         // level 0's lane of the pacing strip is drawn
  float max_band = 0;             // the thickest band
  float blocks_top = 0;           // the first row of tensor blocks
  float read_y = 0, write_y = 0;  // the bands' centres
  float lanes_top = 0;            // above the bands (and their labels)
  bool lane_labels = false;       // a label row above each band
  int rows = 0;                   // tensor blocks that fit in a box
};

// The clock of the animation: where in the chain the GPU time `t` falls, on one scale for every
// level of the size.
struct FlowClockState {
  Timing timing;
  double reference = 1;  // GPU time of one strip (the slowest level's chain)
  double shown_us = 0;   // GPU time shown, at most the chain's
  int next = -1;         // the launch a gap leads to
  double scale = 0;      // bytes of the thickest band
};

// Text rows: caption (and the hint, top-right), status and the on-chip capacity on top; the two
// lanes (level 0 above this level) and the clock at the bottom. Sets g's canvas rows.
void layout_text_rows_and_strip(const FlowInput& in, ImVec2 cmin, ImVec2 cmax,
                                const ViewStyle& style, FlowGeometry* g, FlowLayout* L) {
  const float fs = g->fs, line = g->line, W = g->W;
  L->caption_pos = cmin;
  L->status_pos = v2(cmin.x, cmin.y + line);
  L->capacity_pos = v2(cmin.x, cmin.y + 2 * line);
  L->time_label_pos = v2(cmin.x, cmax.y - fs * 1.15f);
  g->two_lanes = !in.level0_lane.empty();
  // A tall view gets the capacity row and lanes tall enough for kernel names; a short one keeps
  // its height for the boxes (the SM box's read-out still gives the capacity).
  const bool tall = cmax.y - cmin.y >= fs * 20;
  // Short: two thin lanes in the levels' colours, unlabelled (the clock's line names level 0).
  const float lane_h = tall ? fs * 1.2f : fs * 0.45f, lane_gap = tall ? fs * 0.25f : fs * 0.15f;
  L->lane_label = tall ? in.lane_label : "";
  L->level0_lane_label = g->two_lanes && tall ? in.level0_lane_label : "";
  L->lane_label_w = !tall ? 0.0f
                          : std::min(std::max(style.text_width(L->lane_label),
                                              style.text_width(L->level0_lane_label)) +
                                         fs * 0.6f,
                                     W * 0.3f);
  L->strip_max = v2(cmin.x + W, L->time_label_pos.y - fs * 0.25f);
  L->strip_min = v2(cmin.x + L->lane_label_w, L->strip_max.y - lane_h);
  // Level 0's lane is kept free even at level 0, so the boxes (and the band thicknesses) are
  // the same size at every level of a size.
  L->level0_strip_max = v2(cmin.x + W, L->strip_min.y - lane_gap);
  L->level0_strip_min = v2(L->strip_min.x, L->level0_strip_max.y - lane_h);
  L->lane_label_pos =
      v2(cmin.x, std::min(L->strip_min.y + (lane_h - fs) * 0.5f, L->strip_max.y + 2 - fs));
  L->level0_lane_label_pos = v2(cmin.x, L->lane_label_pos.y - lane_h - lane_gap);
  const float lanes_top_y =
      tall ? std::min(L->level0_strip_min.y, L->level0_lane_label_pos.y) : L->level0_strip_min.y;
  // A tall view with a measured tensor against the design gives the table's reason a row.
  const int text_rows = tall ? (L->where_reason.empty() ? 3 : 4) : 2;
  g->top = cmin.y + text_rows * line + fs * 0.2f;
  g->bottom = std::max(g->top + fs * 5, lanes_top_y - fs * 0.45f);
  if (!in.hint.empty()) L->hint_pos = v2(cmin.x + W - style.text_width(in.hint), cmin.y);
  if (in.sm_count > 0 && tall) L->capacity = fit_text(capacity_sentence(in), W, style);
}

// The places, HBM | L2 | SM, with room between them for the bands; each box's title and
// capacity on one header line, or two when they do not fit side by side. Returns the header
// lines of the HBM and L2 boxes (*sm_header_lines: the SM box's).
int layout_boxes(const FlowInput& in, ImVec2 cmin, const FlowGeometry& g, const ViewStyle& style,
                 int* sm_header_lines, FlowLayout* L) {
  const float xs[3][2] = {{0.0f, 0.33f}, {0.42f, 0.63f}, {0.72f, 1.0f}};
  for (int i = 0; i < 3; ++i) {
    FlowBox& b = L->boxes[i];
    b.place = static_cast<FlowPlace>(i);
    b.min = v2(cmin.x + xs[i][0] * g.W, g.top);
    b.max = v2(cmin.x + xs[i][1] * g.W, g.bottom);
    b.title = place_title(b.place);
  }
  L->boxes[0].capacity = in.hbm_bytes > 0 ? format_byte_count(in.hbm_bytes) : "";
  L->boxes[1].capacity = in.l2_bytes > 0 ? format_byte_count(in.l2_bytes) : "size unknown";
  L->boxes[2].capacity = format_byte_count(in.sm_register_bytes) + " registers";
  int header_lines = 1;
  *sm_header_lines = 1;
  for (auto& b : L->boxes) {
    const float inner = b.max.x - b.min.x - 2 * g.pad;
    b.title_pos = v2(b.min.x + g.pad, b.min.y + g.pad);
    if (style.text_width(b.title) + g.fs + style.text_width(b.capacity) <= inner) {
      b.capacity_pos = v2(b.max.x - g.pad - style.text_width(b.capacity), b.title_pos.y);
    } else {
      b.title = fit_text(b.title, inner, style);
      b.capacity = fit_text(b.capacity, inner, style);
      b.capacity_pos = v2(b.title_pos.x, b.title_pos.y + g.line);
      (b.place == FlowPlace::sm ? *sm_header_lines : header_lines) = 2;
    }
  }
  return header_lines;
}

// The bands run in the lower part of the boxes, reads above writes; a label row above each band
// where the boxes are tall enough to hold every tensor block as well. The SM box lists what
// stays on chip (a fused level), or that nothing does (an unfused chain), and shows shared
// memory when a launch stages data there.
void layout_rows_and_sm_box(const FlowInput& in, int header_lines, int sm_header_lines,
                            const ViewStyle& style, FlowGeometry* g, FlowLayout* L) {
  const float fs = g->fs, line = g->line, pad = g->pad, top = g->top, bottom = g->bottom;
  const float box_h = bottom - top;
  g->max_band = std::clamp(box_h * 0.1f, 3.0f, fs);
  g->blocks_top = top + pad + header_lines * line;
  g->write_y = bottom - pad - g->max_band * 0.5f;
  g->read_y = g->write_y - g->max_band - fs * 0.5f;
  g->lanes_top = g->read_y - g->max_band * 0.5f - fs * 0.3f;
  const float labelled_read_y = g->write_y - g->max_band - fs * 1.35f;
  const float labelled_lanes_top = labelled_read_y - g->max_band * 0.5f - fs * 1.15f;
  L->on_chip_pos = v2(L->boxes[2].min.x + pad, top + pad + sm_header_lines * line);
  const float sm_text_w = L->boxes[2].max.x - L->boxes[2].min.x - 2 * pad;
  const bool measured = in.homes.measured;
  if (!in.on_chip.empty()) {  // says whose verdict it is where the box is wide enough
    const std::string where = in.on_chip_registers ? "kept in registers" : "kept on chip";
    const std::string whose = where + (measured ? " (measured):" : " (design):");
    L->on_chip_lines.push_back(style.text_width(whose) <= sm_text_w ? whose : where + ":");
  }
  for (const std::string& value : in.on_chip) {
    L->on_chip_lines.push_back(fit_text(value, sm_text_w - fs * 0.5f, style));
  }
  if (!in.moved.empty()) {
    L->moved_lines.push_back(fit_text("not kept here (measured):", sm_text_w, style));
    for (const std::string& value : in.moved) {
      L->moved_lines.push_back(fit_text(value + ": in HBM", sm_text_w - fs * 0.5f, style));
    }
  }
  if (in.on_chip.empty() && in.moved.empty() && in.trips.size() > 1) {
    L->sm_note_lines = wrap_text("nothing stays here between launches", sm_text_w, style);
  }
  const bool any_shared = std::any_of(in.trips.begin(), in.trips.end(),
                                      [](const FlowTrip& t) { return t.stages_in_shared; });
  const float sm_lines = static_cast<float>(L->on_chip_lines.size() + L->sm_note_lines.size() +
                                            L->moved_lines.size()) +
                         (any_shared ? 1.3f : 0.0f);
  // Label rows only where every tensor block and the SM's lines still fit.
  g->lane_labels =
      (labelled_lanes_top - g->blocks_top) / line >= static_cast<float>(in.tensors.size()) &&
      (labelled_lanes_top - L->on_chip_pos.y) / line >= sm_lines;
  if (g->lane_labels) {
    g->read_y = labelled_read_y;
    g->lanes_top = labelled_lanes_top;
  }
  g->rows = std::max(0, static_cast<int>((g->lanes_top - g->blocks_top) / line));
  const size_t sm_rows =
      static_cast<size_t>(std::max(0.0f, (g->lanes_top - L->on_chip_pos.y) / line));
  if (L->on_chip_lines.size() > sm_rows) L->on_chip_lines.resize(sm_rows);
  if (L->sm_note_lines.size() > sm_rows) L->sm_note_lines.resize(sm_rows);
  const size_t rows_left = sm_rows - std::min(sm_rows, L->on_chip_lines.size());
  if (L->moved_lines.size() > rows_left) L->moved_lines.resize(rows_left);
  // Shared memory / L1 as a block in the SM box, under the lines above, when a launch of this
  // level stages rows or tiles there.
  if (any_shared) {
    const float y = L->on_chip_pos.y +
                    static_cast<float>(L->on_chip_lines.size() + L->sm_note_lines.size() +
                                       L->moved_lines.size()) *
                        line +
                    fs * 0.2f;
    if (y + fs * 1.2f <= g->lanes_top - fs * 0.1f) {
      L->shared_visible = true;
      L->shared_min = v2(L->boxes[2].min.x + pad, y);
      L->shared_max = v2(L->boxes[2].max.x - pad, y + fs * 1.2f);
    }
  }
}

// The pace: one run of the slowest level (the reference) takes kFlowRunSeconds. Finds the trip
// (or the gap) at time `t` and how far along it is; sets the one scale of every band.
FlowClockState pace(const FlowInput& in, double t, FlowLayout* L) {
  FlowClockState c;
  c.timing = chain_timing(in);
  const Timing& timing = c.timing;
  L->chain_us = timing.chain_us;
  c.reference = std::max(in.pace_reference_us, timing.chain_us);
  if (!(c.reference > 0)) c.reference = 1;  // medians of zero: a still picture of the first launch
  L->seconds_per_us = kFlowRunSeconds / c.reference;
  const double in_loop = std::fmod(std::max(t, 0.0), L->loop_seconds);
  L->gpu_us = in_loop / L->seconds_per_us;
  L->done = L->gpu_us >= timing.chain_us && timing.chain_us > 0;
  if (!L->done) {
    for (size_t k = 0; k < in.trips.size(); ++k) {
      if (L->gpu_us < timing.start_us[k]) {
        L->in_gap = true;
        c.next = static_cast<int>(k);
        break;
      }
      if (L->gpu_us < timing.end_us[k] || k + 1 == in.trips.size()) {
        L->trip = static_cast<int>(k);
        const double len = timing.end_us[k] - timing.start_us[k];
        L->progress =
            len > 0
                ? static_cast<float>(std::clamp((L->gpu_us - timing.start_us[k]) / len, 0.0, 1.0))
                : 0.0f;
        break;
      }
    }
  }
  c.shown_us = std::min(L->gpu_us, timing.chain_us);
  // Volumes: one scale for every trip (and, through volume_scale_bytes, every level).
  c.scale = in.volume_scale_bytes;
  if (!(c.scale > 0)) {
    for (const auto& trip : in.trips) {
      c.scale = std::max({c.scale, trip.read_bytes, trip.write_bytes, trip.textbook_read_bytes,
                          trip.textbook_write_bytes});
    }
  }
  return c;
}

float band_thickness(double bytes, const FlowClockState& c, const FlowGeometry& g) {
  return c.scale > 0 ? static_cast<float>(bytes / c.scale) * g.max_band : 0.0f;
}

// Every tensor where it is at this time (HBM, L2 or both), filled as far as it has been written;
// per_box[0] HBM's, per_box[1] L2's.
void place_tensors(const FlowInput& in, const FlowClockState& c, const FlowLayout& L,
                   std::vector<FlowBlock> (&per_box)[2]) {
  for (size_t i = 0; i < in.tensors.size(); ++i) {
    const FlowTensor& tensor = in.tensors[i];
    const int writer = writer_of(in, static_cast<int>(i));
    float fill = 1;
    if (writer >= 0) {
      if (L.gpu_us < c.timing.start_us[writer]) continue;  // not written yet in this run
      const double len = c.timing.end_us[writer] - c.timing.start_us[writer];
      fill = L.done || len <= 0 ? 1.0f
                                : static_cast<float>(std::clamp(
                                      (L.gpu_us - c.timing.start_us[writer]) / len, 0.0, 1.0));
    }
    const std::vector<int> readers = readers_of(in, static_cast<int>(i));
    FlowBlock b;
    b.tensor = static_cast<int>(i);
    b.fill = fill;
    b.intermediate = tensor.intermediate;
    b.being_written = writer >= 0 && writer == L.trip;
    b.being_read = std::find(readers.begin(), readers.end(), L.trip) != readers.end();
    bool written_to_l2 = writer >= 0 && in.trips[writer].writes_stop_at_l2;
    bool read_from_l2 = std::any_of(readers.begin(), readers.end(),
                                    [&](int r) { return in.trips[r].reads_stop_at_l2; });
    if (tensor.home_known) {  // the counters' verdict (tensor_homes.h), or the design's
      read_from_l2 = tensor.home == TensorHome::l2;
      written_to_l2 = read_from_l2 && !tensor.written_back;
    }
    if (!written_to_l2) {
      b.place = FlowPlace::hbm;
      per_box[0].push_back(b);
    }
    if (written_to_l2 || read_from_l2) {  // it sits in L2 (too) and is read from there
      b.place = FlowPlace::l2;
      per_box[1].push_back(b);
    }
  }
}

// A box's blocks, one row each from blocks_top; when there are more than fit, the newest (they
// tell what the chain is doing now) under a row that says how many are hidden.
void layout_blocks(const FlowInput& in, int box, std::vector<FlowBlock> list, const FlowGeometry& g,
                   const ViewStyle& style, FlowLayout* L) {
  const float fs = g.fs, pad = g.pad;
  FlowBox& B = L->boxes[box];
  const size_t fit = static_cast<size_t>(g.rows);
  size_t first_row = 0;
  if (list.size() > fit) {
    const size_t shown = fit > 0 ? fit - 1 : 0;  // the first row says how many are hidden
    B.hidden_blocks = static_cast<int>(list.size() - shown);
    list.erase(list.begin(), list.end() - static_cast<std::ptrdiff_t>(shown));
    if (fit > 0) {
      const int n = B.hidden_blocks;
      B.more_label = "+" + std::to_string(n) + (n == 1 ? " earlier tensor" : " earlier tensors");
      B.more_pos = v2(B.min.x + pad, g.blocks_top);
      first_row = 1;
    }
  }
  const float inner_w = B.max.x - B.min.x - 2 * pad;
  for (size_t r = 0; r < list.size(); ++r) {
    FlowBlock& b = list[r];
    const FlowTensor& tensor = in.tensors[b.tensor];
    b.min = v2(B.min.x + pad, g.blocks_top + (r + first_row) * g.line);
    b.max = v2(B.max.x - pad, g.blocks_top + (r + first_row) * g.line + fs * 1.15f);
    const std::string base = tensor.name + " " + format_byte_count(tensor.bytes);
    const std::string full = tensor.moved          ? base + " (measured: not on chip)"
                             : tensor.intermediate ? base + " (intermediate)"
                                                   : base;
    // The longest of these that fits: the name is never cut for the sake of the size.
    const float label_w = inner_w - fs * 0.6f;
    b.label = style.text_width(full) <= label_w   ? full
              : style.text_width(base) <= label_w ? base
                                                  : fit_text(tensor.name, label_w, style);
    L->blocks.push_back(b);
  }
}

// The running trip's bands (read, then write), each a DRAM stretch (HBM | L2) and an on-chip one
// (L2 | SM), with tokens moving along them and the bytes (or "L2 hit") above.
void layout_bands(const FlowInput& in, const FlowClockState& c, const FlowGeometry& g,
                  const ViewStyle& style, FlowLayout* L) {
  if (L->trip < 0) return;
  const float fs = g.fs, pad = g.pad;
  const FlowTrip& trip = in.trips[L->trip];
  const float hbm_x = L->boxes[0].max.x - pad;
  const float l2_x = middle(L->boxes[1].min, L->boxes[1].max).x;
  const float sm_x = L->boxes[2].min.x + pad;
  const float elapsed_s =
      static_cast<float>((L->gpu_us - c.timing.start_us[L->trip]) * L->seconds_per_us);
  const float offset = elapsed_s * kTokenSpeedFontSizesPerSecond * fs;
  const float gap_mid = 0.5f * (L->boxes[0].max.x + L->boxes[1].min.x);
  const float gap_w = L->boxes[1].min.x - L->boxes[0].max.x;
  for (int dir = 0; dir < 2; ++dir) {
    FlowLane lane;
    lane.write = dir == 1;
    const float y = lane.write ? g.write_y : g.read_y;
    lane.stops_at_l2 = lane.write ? trip.writes_stop_at_l2 : trip.reads_stop_at_l2;
    lane.dram.bytes = lane.write ? trip.write_bytes : trip.read_bytes;
    lane.chip.bytes = lane.write ? trip.textbook_write_bytes : trip.textbook_read_bytes;
    lane.dram.thickness = band_thickness(lane.dram.bytes, c, g);
    lane.chip.thickness = band_thickness(lane.chip.bytes, c, g);
    if (lane.write) {
      lane.chip.from = v2(sm_x, y);
      lane.chip.to = v2(l2_x, y);
      lane.dram.from = v2(l2_x, y);
      lane.dram.to = v2(hbm_x, y);
    } else {
      lane.dram.from = v2(hbm_x, y);
      lane.dram.to = v2(l2_x, y);
      lane.chip.from = v2(l2_x, y);
      lane.chip.to = v2(sm_x, y);
    }
    for (FlowSegment* seg : {&lane.dram, &lane.chip}) {
      seg->visible = c.scale > 0 && seg->bytes >= kVisibleShare * c.scale;
      if (!seg->visible) continue;
      const float spacing = std::max(seg->thickness * 2.2f, fs * 1.2f);
      seg->tokens = tokens_along(seg->from, seg->to, spacing, offset);
    }
    lane.label = lane.stops_at_l2 ? "L2 hit" : format_byte_count(lane.dram.bytes);
    const float label_w = style.text_width(lane.label);
    lane.label_pos = v2(gap_mid - label_w * 0.5f, y - g.max_band * 0.5f - fs * 1.1f);
    lane.label_visible = g.lane_labels && label_w <= gap_w + fs * 1.5f;
    L->lanes.push_back(lane);
  }
}

// Words: what happens now (a launch, a gap, or done), and the clock.
void layout_words(const FlowInput& in, const FlowClockState& c, const FlowGeometry& g,
                  const ViewStyle& style, FlowLayout* L) {
  const Timing& timing = c.timing;
  const bool slower_reference = c.reference > timing.chain_us * 1.001;
  char buf[320];
  if (L->trip >= 0) {
    const FlowTrip& trip = in.trips[L->trip];
    const std::string reads = trip.reads_stop_at_l2
                                  ? format_byte_count(trip.textbook_read_bytes) +
                                        " from L2 (DRAM " + format_byte_count(trip.read_bytes) + ")"
                                  : format_byte_count(trip.read_bytes) + " from HBM";
    const std::string writes = trip.writes_stop_at_l2
                                   ? format_byte_count(trip.textbook_write_bytes) +
                                         " to L2 (DRAM " + format_byte_count(trip.write_bytes) + ")"
                                   : format_byte_count(trip.write_bytes) + " to HBM";
    const std::string kernel =
        trip.variant.empty() ? trip.kernel : trip.kernel + " (" + trip.variant + ")";
    std::snprintf(buf, sizeof(buf), "launch %d of %zu, %s: reads %s, writes %s; %s (median)%s",
                  L->trip + 1, in.trips.size(), kernel.c_str(), reads.c_str(), writes.c_str(),
                  format_us(trip.median_us).c_str(),
                  trip.stages_in_shared ? "; stages data in shared memory" : "");
  } else if (L->in_gap) {
    std::snprintf(buf, sizeof(buf), "between launches %d and %d: the GPU idles %s", c.next,
                  c.next + 1, format_us(in.trips[c.next].gap_before_us).c_str());
  } else {
    std::snprintf(buf, sizeof(buf), "done: %zu launch%s in %s%s%s", in.trips.size(),
                  in.trips.size() == 1 ? "" : "es", format_us(timing.chain_us).c_str(),
                  slower_reference && !in.pace_reference_label.empty() ? "; " : "",
                  slower_reference ? in.pace_reference_label.c_str() : "");
  }
  L->status = fit_text(buf, g.W, style);
  L->time_label = "GPU time " + format_us(c.shown_us) + " of " + format_us(timing.chain_us);
  if (slower_reference && !in.pace_reference_label.empty()) {
    L->time_label += " (strip: " + in.pace_reference_label + ")";
  }
}

// The pacing strip: the chain on one GPU-time axis for every level of this size. Level 0's lane
// on the same axis: its own width when it is slower, so it shows the time fusion saves as the
// empty end of this level's lane.
void layout_strip(const FlowInput& in, const FlowClockState& c, const FlowGeometry& g,
                  FlowLayout* L) {
  const float strip_w = L->strip_max.x - L->strip_min.x;
  const auto strip_x = [&](double us) {
    return L->strip_min.x + static_cast<float>(us / c.reference) * strip_w;
  };
  for (size_t k = 0; k < in.trips.size(); ++k) {
    L->strip.push_back(
        {strip_x(c.timing.start_us[k]), strip_x(c.timing.end_us[k]), static_cast<int>(k)});
    L->strip_names.push_back(in.trips[k].kernel);
  }
  L->strip_cursor_x = strip_x(c.shown_us);
  if (!g.two_lanes) return;
  const float w0 = L->level0_strip_max.x - L->level0_strip_min.x;
  const auto x = [&](double us) {
    return L->level0_strip_min.x + static_cast<float>(us / c.reference) * w0;
  };
  for (size_t k = 0; k < in.level0_lane.size(); ++k) {
    L->level0_strip.push_back(
        {x(in.level0_lane[k].start_us), x(in.level0_lane[k].end_us), static_cast<int>(k)});
    L->level0_strip_names.push_back(in.level0_lane[k].kernel);
  }
}

// The shared memory block's words: what stages there now, else its capacity.
void layout_shared_label(const FlowInput& in, const ViewStyle& style, FlowLayout* L) {
  if (!L->shared_visible) return;
  const float w = L->shared_max.x - L->shared_min.x - style.font_size * 0.5f;
  const std::string cap = in.sm_shared_bytes > 0 ? " " + format_byte_count(in.sm_shared_bytes) : "";
  if (L->trip >= 0 && in.trips[L->trip].stages_in_shared) {
    const FlowTrip& trip = in.trips[L->trip];
    L->shared_active = true;
    std::string what = "shared memory / L1: " + trip.kernel + " stages data here";
    if (trip.shared_bytes > 0)
      what += " (" + format_byte_count(static_cast<double>(trip.shared_bytes)) + " per block)";
    L->shared_label = fit_text(what, w, style);
  } else {
    L->shared_label = fit_text("shared memory / L1" + cap, w, style);
  }
}

// The sentence of the first tensor the counters moved, and for a value the table keeps on chip
// the table's reason: the full text (for the hover read-out) and whether the reason takes a row.
void where_note_text(const FlowInput& in, FlowLayout* L) {
  for (const TensorPlace& t : in.homes.tensors) {
    if (!t.moved()) continue;
    L->where_note_full = t.sentence;
    if (!t.intermediate && !in.homes.design_reason.empty()) {
      L->where_reason = "the level table keeps it on chip: \"" + in.homes.design_reason + "\"";
      L->where_note_full +=
          ".\nThe level table keeps it on chip: \"" + in.homes.design_reason + "\"";
      if (!in.variant_what.empty())
        L->where_note_full += "\nThe kernel that ran, " + in.variant_what;
    }
    break;
  }
}

// The note in the capacity row's place and the reason below it (tall views only).
void layout_where_note(const FlowGeometry& g, const ViewStyle& style, FlowLayout* L) {
  if (L->where_note_full.empty() || L->capacity.empty()) {  // no row for it
    L->where_reason.clear();
    return;
  }
  const size_t cut = L->where_note_full.find('\n');
  L->where_note = fit_text(L->where_note_full.substr(0, cut), g.W, style);
  if (!L->where_reason.empty()) {
    L->where_reason = fit_text(L->where_reason, g.W, style);
    L->where_reason_pos = v2(L->capacity_pos.x, L->capacity_pos.y + g.line);
  }
  L->capacity.clear();  // the SM box's read-out still gives the capacity
}

}  // namespace

FlowLayout layout_flow(const FlowInput& in, double t, ImVec2 cmin, ImVec2 cmax,
                       const ViewStyle& style) {
  FlowLayout L;
  FlowGeometry g;
  g.fs = style.font_size;
  g.line = style.line();
  g.pad = g.fs * 0.4f;
  g.W = std::max(cmax.x - cmin.x, g.fs * 10);
  L.canvas_min = cmin;
  L.canvas_max = cmax;
  L.font_size = g.fs;
  where_note_text(in, &L);
  layout_text_rows_and_strip(in, cmin, cmax, style, &g, &L);
  int sm_header_lines = 1;
  const int header_lines = layout_boxes(in, cmin, g, style, &sm_header_lines, &L);
  layout_rows_and_sm_box(in, header_lines, sm_header_lines, style, &g, &L);

  const bool measured = in.measured();
  L.bytes_note = measured ? "band width: measured DRAM bytes (CUPTI counters)"
                          : "counters off: the design (textbook bytes), not a measurement";
  L.bytes_note_textbook = !measured;
  L.bytes_note_pos = v2(cmin.x + g.W - style.text_width(L.bytes_note), L.time_label_pos.y);
  const float hint_room = in.hint.empty() ? 0.0f : style.text_width(in.hint) + g.fs;
  const std::string summary = measured_summary(in.level_summary, in.homes);
  const std::string ran = in.variants.empty() ? "" : " (ran " + in.variants + ")";
  L.caption = fit_text("Level " + in.level_name + ran + (summary.empty() ? "" : ": " + summary),
                       g.W - hint_room, style);
  layout_where_note(g, style, &L);
  if (in.trips.empty()) {
    L.status = "No measurement yet.";
    return L;
  }

  const FlowClockState c = pace(in, t, &L);
  for (const auto& trip : in.trips) {
    L.trip_volume.push_back(band_thickness(trip.read_bytes, c, g) +
                            band_thickness(trip.write_bytes, c, g));
  }
  std::vector<FlowBlock> per_box[2];  // HBM, L2
  place_tensors(in, c, L, per_box);
  for (int box = 0; box < 2; ++box) layout_blocks(in, box, std::move(per_box[box]), g, style, &L);
  layout_bands(in, c, g, style, &L);
  layout_words(in, c, g, style, &L);
  layout_strip(in, c, g, &L);
  layout_shared_label(in, style, &L);
  return L;
}

// ---- [SECTION] hover -------------------------------------------------------------------------

FlowHit flow_hit(const FlowLayout& L, ImVec2 p) {
  FlowHit hit;
  const float slack = L.font_size * 0.3f;
  const float note_rows = L.where_reason.empty() ? 1.0f : 2.0f;
  if (!L.where_note.empty() && p.y >= L.capacity_pos.y &&
      p.y < L.capacity_pos.y + L.font_size * 1.2f * note_rows && p.x >= L.canvas_min.x &&
      p.x <= L.canvas_max.x) {
    hit.where_note = true;
    return hit;
  }
  for (size_t i = 0; i < L.lanes.size(); ++i) {
    for (const FlowSegment* seg : {&L.lanes[i].dram, &L.lanes[i].chip}) {
      const float half = std::max(seg->thickness * 0.5f, 3.0f) + slack;
      const float x0 = std::min(seg->from.x, seg->to.x), x1 = std::max(seg->from.x, seg->to.x);
      if (p.x >= x0 && p.x <= x1 && std::fabs(p.y - seg->from.y) <= half) {
        hit.lane = static_cast<int>(i);
        return hit;
      }
    }
  }
  for (size_t i = 0; i < L.blocks.size(); ++i) {
    if (inside(p, L.blocks[i].min, L.blocks[i].max)) {
      hit.block = static_cast<int>(i);
      hit.box = static_cast<int>(L.blocks[i].place);
      return hit;
    }
  }
  for (int i = 0; i < 3; ++i) {
    if (inside(p, L.boxes[i].min, L.boxes[i].max)) hit.box = i;
  }
  return hit;
}

namespace {

using AddLine = std::function<void(const std::string&)>;

void block_readout(const FlowInput& in, const FlowBlock& b, const AddLine& add_line) {
  const FlowTensor& t = in.tensors[b.tensor];
  add_line(t.name + ": " + format_byte_count(t.bytes));
  const int writer = writer_of(in, b.tensor);
  const std::vector<int> readers = readers_of(in, b.tensor);
  if (t.intermediate && writer >= 0 && !readers.empty()) {
    add_line("intermediate: " + in.trips[writer].kernel + " writes it, " +
             in.trips[readers.front()].kernel + " reads it back");
  } else if (writer < 0) {
    add_line("an input of the chain");
  } else {
    add_line("the chain's result");
  }
  add_line(b.place == FlowPlace::hbm ? "in HBM: every byte of it costs a DRAM transfer each way"
                                     : "in L2: read from here, it costs no DRAM transfer");
  if (!t.sentence.empty()) add_line(t.sentence);
  if (t.moved && !in.homes.design_reason.empty()) {
    add_line("The level table keeps it on chip: \"" + in.homes.design_reason + "\"");
  }
}

void sm_readout(const FlowInput& in, const AddLine& add_line) {
  add_line("SM" +
           (in.sm_count > 0 ? " (one of " + std::to_string(in.sm_count) + ")" : std::string()) +
           ": " + format_byte_count(in.sm_register_bytes) + " of registers (64K x 32 bit)" +
           (in.sm_shared_bytes > 0
                ? " and " + format_byte_count(in.sm_shared_bytes) + " of shared memory / L1"
                : std::string(" plus shared memory")));
  if (in.sm_count > 0) {
    add_line("All " + std::to_string(in.sm_count) + " SMs together hold " +
             format_byte_count((in.sm_register_bytes + in.sm_shared_bytes) * in.sm_count) +
             " on chip; a tensor larger than that streams through, a row or tile at a time.");
  }
  const auto joined = [](const std::vector<std::string>& values) {
    std::string out;
    for (const auto& v : values) out += (out.empty() ? "" : ", ") + v;
    return out;
  };
  if (!in.on_chip.empty()) {
    add_line("This fused kernel keeps " + joined(in.on_chip) + " here: it never goes to memory" +
             (in.homes.measured ? " (the counters agree)." : " (the design: counters off)."));
  }
  if (!in.moved.empty()) {
    add_line("The level table keeps " + joined(in.moved) +
             " here too, but the measured DRAM bytes show it in memory.");
  }
  if (in.on_chip.empty() && in.moved.empty() && in.trips.size() > 1) {
    add_line("Unfused, each launch starts from memory: nothing stays here between launches.");
  }
}

}  // namespace

std::string flow_readout(const FlowInput& in, const FlowLayout& L, const FlowHit& hit) {
  std::string out;
  const AddLine add_line = [&](const std::string& s) { out += (out.empty() ? "" : "\n") + s; };
  if (hit.where_note) return L.where_note_full;
  if (hit.lane >= 0 && L.trip >= 0 && hit.lane < static_cast<int>(L.lanes.size())) {
    const FlowTrip& trip = in.trips[L.trip];
    const FlowLane& lane = L.lanes[hit.lane];
    const char* verb = lane.write ? "writes" : "reads";
    add_line(trip.kernel + " (launch " + std::to_string(L.trip + 1) + " of " +
             std::to_string(in.trips.size()) + "), " + format_us(trip.median_us) + " median");
    add_line(std::string(verb) + " " + format_byte_count(lane.chip.bytes) +
             " by the textbook count");
    add_line(trip.measured ? "DRAM " + std::string(verb) + " " +
                                 format_byte_count(lane.dram.bytes) + " (measured, CUPTI)"
                           : "DRAM bytes: counters off, the band shows textbook bytes");
    if (lane.stops_at_l2) {
      add_line(lane.write ? "the written bytes stayed in L2: DRAM saw under half of them"
                          : "L2 served these reads: DRAM saw under half of the bytes");
    }
    return out;
  }
  if (hit.block >= 0 && hit.block < static_cast<int>(L.blocks.size())) {
    block_readout(in, L.blocks[hit.block], add_line);
    return out;
  }
  if (hit.box == static_cast<int>(FlowPlace::hbm)) {
    add_line("HBM (global memory)" +
             (in.hbm_bytes > 0 ? ": " + format_byte_count(in.hbm_bytes) : std::string()));
    add_line("Tensors live here between launches; every byte to or from it uses DRAM bandwidth.");
  } else if (hit.box == static_cast<int>(FlowPlace::l2)) {
    add_line("L2 cache" +
             (in.l2_bytes > 0 ? ": " + format_byte_count(in.l2_bytes) : std::string()) +
             ", shared by all SMs");
    add_line(
        "Every byte passes through it; a tensor that fits can be read back from here "
        "without a DRAM transfer.");
  } else if (hit.box == static_cast<int>(FlowPlace::sm)) {
    sm_readout(in, add_line);
  }
  return out;
}

// ---- [SECTION] drawing and the widget --------------------------------------------------------

namespace {

void draw_segment(ImDrawList* dl, const FlowSegment& seg, ImU32 color, float fs) {
  if (!seg.visible) return;
  const float th = std::max(seg.thickness, 2.0f);
  dl->AddLine(seg.from, seg.to, with_alpha(color, 0.30f), th);
  const float half_w = std::max(th * 0.55f, fs * 0.22f), half_h = th * 0.5f;
  for (const ImVec2& c : seg.tokens) {
    dl->AddRectFilled(v2(c.x - half_w, c.y - half_h), v2(c.x + half_w, c.y + half_h), color,
                      std::min(half_h, 3.0f));
  }
  // An arrowhead where the bytes arrive.
  const float dir = seg.to.x >= seg.from.x ? 1.0f : -1.0f;
  const float ah = std::max(th * 0.5f + 3, fs * 0.35f);
  dl->AddTriangleFilled(v2(seg.to.x + dir * ah, seg.to.y),
                        v2(seg.to.x - dir * ah * 0.2f, seg.to.y - ah),
                        v2(seg.to.x - dir * ah * 0.2f, seg.to.y + ah), color);
}

// The three places with their titles, and each tensor block in them.
void draw_boxes_and_blocks(ImDrawList* dl, const FlowLayout& L, const FlowHit& hover) {
  const float fs = L.font_size;
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const ImU32 outline = with_alpha(text, 0.25f);
  const ImU32 fills[3] = {palette::hbm_fill, palette::l2_fill, palette::sm_fill};
  for (int i = 0; i < 3; ++i) {
    const FlowBox& b = L.boxes[i];
    dl->AddRectFilled(b.min, b.max, fills[i], 6.0f);
    dl->AddRect(b.min, b.max, hover.box == i && hover.block < 0 ? with_alpha(text, 0.7f) : outline,
                6.0f, 0, hover.box == i && hover.block < 0 ? 2.0f : 1.0f);
    dl->PushClipRect(b.min, b.max, true);
    draw_text(dl, b.title_pos, text, b.title);
    if (!b.capacity.empty()) draw_text(dl, b.capacity_pos, dim, b.capacity);
    if (!b.more_label.empty()) draw_text(dl, b.more_pos, dim, b.more_label);
    dl->PopClipRect();
  }

  for (size_t i = 0; i < L.blocks.size(); ++i) {
    const FlowBlock& b = L.blocks[i];
    // Intermediates in the colour of writes (a launch wrote them), inputs and outputs neutral.
    const ImU32 tone = b.intermediate ? palette::writes : palette::reference;
    dl->AddRectFilled(b.min, b.max, with_alpha(tone, 0.16f), 3.0f);
    if (b.fill > 0) {
      dl->AddRectFilled(b.min, v2(b.min.x + (b.max.x - b.min.x) * b.fill, b.max.y),
                        with_alpha(tone, 0.45f), 3.0f);
    }
    ImU32 border = with_alpha(tone, 0.8f);
    float border_w = 1.0f;
    if (b.being_written) border = palette::writes, border_w = 2.0f;
    if (b.being_read) border = palette::reads, border_w = 2.0f;
    if (hover.block == static_cast<int>(i)) border = text, border_w = 2.0f;
    dl->AddRect(b.min, b.max, border, 3.0f, 0, border_w);
    TextOptions o;
    o.max_width = b.max.x - b.min.x - fs * 0.4f;
    draw_text(dl, v2(b.min.x + fs * 0.3f, b.min.y + (b.max.y - b.min.y - fs) * 0.5f), text, b.label,
              o);
  }
}

// The SM box's lines (what stays on chip, or that nothing does) and shared memory.
void draw_sm_contents(ImDrawList* dl, const FlowLayout& L) {
  const float fs = L.font_size;
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  float y = L.on_chip_pos.y;
  const TextOptions sm_text = [&] {
    TextOptions o;
    o.max_width = L.boxes[2].max.x - L.on_chip_pos.x - fs * 0.3f;
    return o;
  }();
  if (!L.on_chip_lines.empty()) {  // a block of its own: the value lives here, in registers
    const ImVec2 a = v2(L.on_chip_pos.x - fs * 0.2f, y - fs * 0.1f);
    const ImVec2 b = v2(L.boxes[2].max.x - fs * 0.2f, y + L.on_chip_lines.size() * fs * 1.25f);
    dl->AddRectFilled(a, b, with_alpha(palette::on_chip, 0.15f), 3.0f);
    dl->AddRect(a, b, with_alpha(palette::on_chip, 0.8f), 3.0f);
  }
  for (const auto& l : L.on_chip_lines) {
    draw_text(dl, v2(L.on_chip_pos.x, y), palette::on_chip, l, sm_text);
    y += fs * 1.25f;
  }
  for (const auto& l : L.sm_note_lines) {
    draw_text(dl, v2(L.on_chip_pos.x, y), dim, l, sm_text);
    y += fs * 1.25f;
  }
  for (const auto& l : L.moved_lines) {
    draw_text(dl, v2(L.on_chip_pos.x, y), palette::warning, l, sm_text);
    y += fs * 1.25f;
  }
  if (L.shared_visible) {
    dl->AddRectFilled(L.shared_min, L.shared_max,
                      with_alpha(palette::shared_memory, L.shared_active ? 0.30f : 0.10f), 3.0f);
    dl->AddRect(L.shared_min, L.shared_max,
                with_alpha(palette::shared_memory, L.shared_active ? 0.9f : 0.4f), 3.0f, 0,
                L.shared_active ? 2.0f : 1.0f);
    TextOptions o;
    o.max_width = L.shared_max.x - L.shared_min.x - fs * 0.4f;
    draw_text(dl, v2(L.shared_min.x + fs * 0.25f, L.shared_min.y + fs * 0.1f),
              L.shared_active ? text : dim, L.shared_label, o);
  }
}

// The running trip's bands, their labels, and the hovered one outlined.
void draw_bands(ImDrawList* dl, const FlowLayout& L, const FlowHit& hover) {
  const float fs = L.font_size;
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  for (size_t i = 0; i < L.lanes.size(); ++i) {
    const FlowLane& lane = L.lanes[i];
    const ImU32 color = lane.write ? palette::writes : palette::reads;
    draw_segment(dl, lane.dram, color, fs);
    draw_segment(dl, lane.chip, color, fs);
    if (lane.label_visible) {
      draw_text(dl, lane.label_pos, lane.stops_at_l2 ? palette::l2 : color, lane.label);
    }
    if (hover.lane == static_cast<int>(i)) {
      const float th = std::max({lane.dram.thickness, lane.chip.thickness, 2.0f});
      const float x0 =
          std::min({lane.dram.from.x, lane.dram.to.x, lane.chip.from.x, lane.chip.to.x});
      const float x1 =
          std::max({lane.dram.from.x, lane.dram.to.x, lane.chip.from.x, lane.chip.to.x});
      dl->AddRect(v2(x0 - 2, lane.chip.from.y - th * 0.5f - 3),
                  v2(x1 + 2, lane.chip.from.y + th * 0.5f + 3), text, 3.0f);
    }
  }
}

// The two lanes: level 0 above, this level below, on one GPU-time axis, and the clock's cursor.
void draw_pacing_strip(ImDrawList* dl, const FlowInput& in, const FlowLayout& L) {
  const float fs = L.font_size;
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const auto draw_lane = [&](ImVec2 lo, ImVec2 hi, const std::vector<FlowStripSegment>& segs,
                             const std::vector<std::string>& names, ImU32 color, int running,
                             const std::string& label, ImVec2 label_pos) {
    if (segs.empty()) return;
    dl->AddRectFilled(lo, hi, with_alpha(text, 0.08f), 2.0f);
    for (size_t k = 0; k < segs.size(); ++k) {
      const auto& s = segs[k];
      const ImU32 c = running < 0 || s.trip == running ? color : with_alpha(color, 0.55f);
      const float x1 = std::max(s.x1, s.x0 + 1.0f);
      dl->AddRectFilled(v2(s.x0, lo.y), v2(x1, hi.y), c, 2.0f);
      if (k < names.size() && x1 - s.x0 > fs * 2 && hi.y - lo.y >= fs) {
        TextOptions o;
        o.max_width = x1 - s.x0 - fs * 0.4f;
        draw_text(dl, v2(s.x0 + fs * 0.2f, lo.y + (hi.y - lo.y - fs) * 0.5f), palette::text_on_bar,
                  names[k], o);
      }
    }
    TextOptions o;
    o.max_width = L.lane_label_w - fs * 0.5f;
    draw_text(dl, label_pos, dim, label, o);
  };
  if (!L.strip.empty()) {
    draw_lane(L.level0_strip_min, L.level0_strip_max, L.level0_strip, L.level0_strip_names,
              palette::level0, -1, L.level0_lane_label, L.level0_lane_label_pos);
    draw_lane(L.strip_min, L.strip_max, L.strip, L.strip_names,
              palette::level_color(in.level, in.top_level), L.trip, L.lane_label, L.lane_label_pos);
    const float top = L.level0_strip.empty() ? L.strip_min.y : L.level0_strip_min.y;
    dl->AddLine(v2(L.strip_cursor_x, top - 3), v2(L.strip_cursor_x, L.strip_max.y + 3), text,
                stroke(2.0f));
  }
}

}  // namespace

void draw_flow_layout(ImDrawList* dl, const FlowInput& in, const FlowLayout& L,
                      const FlowHit& hover) {
  const float fs = L.font_size;
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  if (!in.hint.empty()) draw_text(dl, L.hint_pos, dim, in.hint);
  draw_text(dl, L.caption_pos, text, L.caption);
  draw_text(dl, L.status_pos, text, L.status);
  if (!L.capacity.empty()) draw_text(dl, L.capacity_pos, dim, L.capacity);
  if (!L.where_note.empty()) {
    draw_text(dl, L.capacity_pos, hover.where_note ? text : palette::warning, L.where_note);
    if (!L.where_reason.empty()) draw_text(dl, L.where_reason_pos, dim, L.where_reason);
  }
  draw_boxes_and_blocks(dl, L, hover);
  draw_sm_contents(dl, L);
  draw_bands(dl, L, hover);
  draw_pacing_strip(dl, in, L);
  float note_x = L.canvas_max.x;
  if (!in.trips.empty()) {
    const float w = ImGui::CalcTextSize(L.bytes_note.c_str()).x;
    const TextRect r = draw_text(
        dl,
        v2(std::max(L.canvas_max.x - w, L.canvas_min.x + (L.canvas_max.x - L.canvas_min.x) * 0.5f),
           L.bytes_note_pos.y),
        L.bytes_note_textbook ? palette::warning : dim, L.bytes_note);
    note_x = r.max.x > r.min.x ? r.min.x : note_x;
  }
  if (!L.strip.empty()) {
    TextOptions o;
    o.max_width = note_x - fs - L.time_label_pos.x;
    draw_text(dl, L.time_label_pos, dim, L.time_label, o);
  }
}

namespace {

// Whether every tensor block and every line of the SM box is shown.
bool flow_complete(const FlowInput& in, const FlowLayout& L) {
  for (const FlowBox& b : L.boxes) {
    if (b.hidden_blocks > 0) return false;
  }
  const size_t on_chip = in.on_chip.empty() ? 0 : in.on_chip.size() + 1;
  const size_t moved = in.moved.empty() ? 0 : in.moved.size() + 1;
  return L.on_chip_lines.size() >= on_chip && L.moved_lines.size() >= moved;
}

// The least height (to a quarter line) at which the flow view shows every tensor and SM line at
// `width`, at most 40 lines; the end of the run, when every tensor has been written.
float flow_needed_height(const FlowInput& in, double t, ImVec2 p0, float width,
                         const ViewStyle& style) {
  const float fs = style.font_size;
  const double end = layout_flow(in, t, p0, v2(p0.x + width, p0.y + fs * 11), style).loop_seconds;
  const auto complete = [&](float h) {
    return flow_complete(in, layout_flow(in, end * 0.999, p0, v2(p0.x + width, p0.y + h), style));
  };
  float lo = fs * 11, hi = fs * 40;
  if (complete(lo)) return lo;
  if (!complete(hi)) return hi;
  while (hi - lo > fs * 0.25f) {
    const float mid = 0.5f * (lo + hi);
    (complete(mid) ? hi : lo) = mid;
  }
  return hi;
}

FlowResult flow_widget(const char* id, const FlowInput& input, double t, float height,
                       bool* clicked) {
  const ViewStyle style = ViewStyle::current();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  if (height <= 0) height = avail.y;
  height = std::max(height, style.font_size * 11);  // InvisibleButton asserts on a zero size
  const float width = std::max(avail.x, style.font_size * 24);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, ImVec2(width, height));
  *clicked = ImGui::IsItemClicked();
  const bool hovered = ImGui::IsItemHovered();
  const FlowLayout layout = layout_flow(input, t, p0, v2(p0.x + width, p0.y + height), style);
  if (view_need_asked()) note_view_need(p0.y + flow_needed_height(input, t, p0, width, style));
  FlowResult result;
  result.animating = !input.trips.empty();
  if (hovered) result.hover = flow_hit(layout, ImGui::GetIO().MousePos);
  draw_flow_layout(ImGui::GetWindowDrawList(), input, layout, result.hover);
  if (result.hover.valid()) {
    const std::string readout = flow_readout(input, layout, result.hover);
    if (!readout.empty()) {
      ImGui::BeginTooltip();
      ImGui::PushTextWrapPos(style.font_size * 30);
      ImGui::TextUnformatted(readout.c_str());
      ImGui::PopTextWrapPos();
      ImGui::EndTooltip();
    }
  }
  return result;
}

}  // namespace

FlowResult draw_flow(const char* id, const FlowInput& input, double t, float height) {
  bool clicked = false;
  return flow_widget(id, input, t, height, &clicked);
}

FlowResult draw_flow(const char* id, const FlowInput& input, FlowClock* clock, double now_s,
                     float height) {
  bool clicked = false;
  FlowInput with_hint = input;
  with_hint.hint = clock->paused() ? "paused: click to resume" : "click to pause";
  FlowResult result = flow_widget(id, with_hint, clock->elapsed(now_s), height, &clicked);
  if (clicked) clock->toggle_pause(now_s);
  result.animating = result.animating && !clock->paused();
  return result;
}

}  // namespace fl::viz
