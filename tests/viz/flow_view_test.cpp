// The flow animation's computed content, checked without pixels: volumes follow the bytes, the
// intermediate lands in HBM only in the unfused chain, L2-resident data stops at L2, and launches
// take their turns by their measured times.
#include "viz/flow_view.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "tests/viz/viz_test_data.h"

namespace fl::viz {
namespace {

using testing::add_counters;
using testing::add_records;
using testing::h200;
using testing::kMiB;
using testing::lesson_level;

const ImVec2 kMin(0, 0), kMax(800, 260);
constexpr int64_t k16M = int64_t(1) << 24;  // 64 MiB of fp32: more than the H200's 60 MiB L2

const Lesson& gelu_scale() {
  return *find_lesson("gelu_scale");
}

double total_bytes(const FlowInput& in) {
  double v = 0;
  for (const auto& t : in.trips) v += t.read_bytes + t.write_bytes;
  return v;
}

float total_volume(const FlowLayout& l) {
  return std::accumulate(l.trip_volume.begin(), l.trip_volume.end(), 0.0f);
}

bool has_block(const FlowInput& in, const FlowLayout& l, const std::string& name, FlowPlace place) {
  return std::any_of(l.blocks.begin(), l.blocks.end(), [&](const FlowBlock& b) {
    return b.place == place && in.tensors[b.tensor].name == name;
  });
}

bool has_intermediate_in(const FlowLayout& l, FlowPlace place) {
  return std::any_of(l.blocks.begin(), l.blocks.end(),
                     [&](const FlowBlock& b) { return b.place == place && b.intermediate; });
}

TEST(Flow, UnfusedTripsCarryTwiceTheFusedVolumeForGeluScale) {
  const Measurement m0 = lesson_level("gelu_scale", k16M, 0, 30.0);
  const Measurement m1 = lesson_level("gelu_scale", k16M, 1, 30.0);
  const FlowInput unfused = flow_input(m0, &gelu_scale(), h200(), &m0);
  const FlowInput fused = flow_input(m1, &gelu_scale(), h200(), &m0);
  ASSERT_EQ(unfused.trips.size(), 2u);
  ASSERT_EQ(fused.trips.size(), 1u);
  EXPECT_FALSE(unfused.measured()) << "no counters: textbook bytes";
  EXPECT_DOUBLE_EQ(total_bytes(unfused), 4.0 * 64 * kMiB);  // x, t, t, y
  EXPECT_DOUBLE_EQ(total_bytes(unfused) / total_bytes(fused), 2.0);
  // Drawn on level 0's scale, the bands keep the ratio.
  const FlowLayout a = layout_flow(unfused, 1.0, kMin, kMax);
  const FlowLayout b = layout_flow(fused, 1.0, kMin, kMax);
  EXPECT_NEAR(total_volume(a) / total_volume(b), 2.0, 1e-5);
  EXPECT_NEAR(a.trip_volume[0], b.trip_volume[0], 1e-4) << "each trip moves x in and one out";
  EXPECT_EQ(a.bytes_note, "counters off: the design (textbook bytes), not a measurement");
  EXPECT_TRUE(a.bytes_note_textbook);
}

TEST(Flow, MeasuredDramBytesSetTheVolumesWhenTheCountersHaveThem) {
  Measurement m0 = lesson_level("gelu_scale", k16M, 0, 30.0);
  Measurement m1 = lesson_level("gelu_scale", k16M, 1, 30.0);
  add_counters(&m0, 1.05);  // DRAM saw 5% more than the textbook (dirty lines drain late)
  add_counters(&m1, 1.0);
  const FlowInput unfused = flow_input(m0, &gelu_scale(), h200(), &m0);
  const FlowInput fused = flow_input(m1, &gelu_scale(), h200(), &m0);
  ASSERT_TRUE(unfused.measured());
  EXPECT_DOUBLE_EQ(unfused.trips[0].read_bytes, static_cast<double>(int64_t(64 * kMiB * 1.05)));
  EXPECT_DOUBLE_EQ(unfused.trips[0].textbook_read_bytes, 64.0 * kMiB);
  EXPECT_NEAR(total_bytes(unfused) / total_bytes(fused), 2.1, 1e-6);
  const FlowLayout a = layout_flow(unfused, 1.0, kMin, kMax);
  const FlowLayout b = layout_flow(fused, 1.0, kMin, kMax);
  EXPECT_NEAR(total_volume(a) / total_volume(b), 2.1, 1e-4);
  EXPECT_EQ(a.bytes_note, "band width: measured DRAM bytes (CUPTI counters)");
  // The running trip's HBM stretch is as thick as the DRAM bytes, its SM stretch as the
  // kernel's own.
  ASSERT_EQ(a.lanes.size(), 2u);
  EXPECT_NEAR(a.lanes[0].dram.thickness / a.lanes[0].chip.thickness, 1.05, 1e-4);
}

TEST(Flow, ALaunchMovingMoreThanLevelZerosLargestStillFitsTheBoxes) {
  // A megakernel reads every layer's weights in one launch, forty times level 0's largest
  // launch: its band is drawn at the full thickness, not forty times it.
  Measurement m0 = lesson_level("gelu_scale", k16M, 0, 30.0);
  Measurement m1 = lesson_level("gelu_scale", k16M, 1, 30.0);
  add_counters(&m0, 1.0);
  add_counters(&m1, 40.0);
  const FlowLayout a = layout_flow(flow_input(m0, &gelu_scale(), h200(), &m0), 1.0, kMin, kMax);
  const FlowLayout b = layout_flow(flow_input(m1, &gelu_scale(), h200(), &m0), 1.0, kMin, kMax);
  ASSERT_FALSE(a.lanes.empty());
  ASSERT_FALSE(b.lanes.empty());
  EXPECT_NEAR(b.lanes[0].dram.thickness, a.lanes[0].dram.thickness, 1e-3f)
      << "both are the largest stretch of their scale";
  EXPECT_LT(b.lanes[0].dram.thickness, (kMax.y - kMin.y) * 0.2f);
}

TEST(Flow, TheIntermediateLandsInHbmOnlyWhenUnfusedAndStaysInRegistersWhenFused) {
  const Measurement m0 = lesson_level("gelu_scale", k16M, 0, 30.0);
  const Measurement m1 = lesson_level("gelu_scale", k16M, 1, 30.0);
  const FlowInput unfused = flow_input(m0, &gelu_scale(), h200(), &m0);
  const FlowInput fused = flow_input(m1, &gelu_scale(), h200(), &m0);
  ASSERT_EQ(unfused.tensors.size(), 3u);
  EXPECT_EQ(unfused.tensors[1].name, "gelu output");
  EXPECT_TRUE(unfused.tensors[1].intermediate);
  EXPECT_TRUE(unfused.trips[0].writes_intermediate);
  EXPECT_FALSE(unfused.trips[1].writes_intermediate);

  // One run lasts 3 s for level 0's 60 µs: at 0.5 s gelu is a third done, at 2.0 s scale runs.
  const FlowLayout early = layout_flow(unfused, 0.5, kMin, kMax);
  EXPECT_EQ(early.trip, 0);
  EXPECT_TRUE(has_intermediate_in(early, FlowPlace::hbm)) << "t lands in HBM while gelu writes";
  const FlowLayout late = layout_flow(unfused, 2.0, kMin, kMax);
  EXPECT_EQ(late.trip, 1);
  ASSERT_TRUE(has_block(unfused, late, "gelu output", FlowPlace::hbm));
  const auto t_block = std::find_if(late.blocks.begin(), late.blocks.end(),
                                    [](const FlowBlock& b) { return b.intermediate; });
  EXPECT_FLOAT_EQ(t_block->fill, 1.0f) << "written in full by the time scale runs";
  EXPECT_TRUE(t_block->being_read) << "scale reads it back from HBM";
  EXPECT_FALSE(late.lanes[0].stops_at_l2) << "64 MiB does not fit in 60 MiB of L2";
  EXPECT_TRUE(late.on_chip_lines.empty());
  EXPECT_FALSE(late.sm_note_lines.empty()) << "the SM box says nothing stays between launches";

  ASSERT_EQ(fused.on_chip.size(), 1u);
  EXPECT_EQ(fused.on_chip[0], "gelu output");
  for (double t : {0.2, 1.0, 1.9, 3.5}) {
    const FlowLayout l = layout_flow(fused, t, kMin, kMax);
    EXPECT_FALSE(has_intermediate_in(l, FlowPlace::hbm)) << "t = " << t;
    EXPECT_FALSE(has_intermediate_in(l, FlowPlace::l2)) << "t = " << t;
    ASSERT_EQ(l.on_chip_lines.size(), 2u);
    EXPECT_EQ(l.on_chip_lines[0], "kept in registers:");
    EXPECT_EQ(l.on_chip_lines[1], "gelu output");
    // The registers are inside the SM box.
    EXPECT_GE(l.on_chip_pos.x, l.boxes[2].min.x);
    EXPECT_LE(l.on_chip_pos.y, l.boxes[2].max.y);
  }
  EXPECT_NE(layout_flow(fused, 0.2, kMin, kMax).caption.find("stays in a register"),
            std::string::npos)
      << "the lesson's sentence for the fused level";
}

TEST(Flow, ResidualLayernormsMiddleLevelKeepsOnlyTheStatisticsOnChip) {
  const Lesson& rl = *find_lesson("residual_layernorm");
  const Measurement m0 = lesson_level("residual_layernorm", 4096, 0, 10.0);
  const Measurement m1 = lesson_level("residual_layernorm", 4096, 1, 10.0);
  const FlowInput in = flow_input(m1, &rl, h200(), &m0);
  ASSERT_EQ(in.trips.size(), 2u);
  EXPECT_EQ(in.tensors[1].name, "add output") << "h still goes through memory";
  ASSERT_EQ(in.on_chip.size(), 1u);
  EXPECT_EQ(in.on_chip[0], "mean_var output");
}

// Where the level table keeps values in shared memory or L2 (the fused FFN's h), the SM box
// says "kept on chip", not "kept in registers"; the elementwise lessons keep theirs in registers.
TEST(Flow, TheSmBoxSaysWhereTheLevelTableKeepsTheValues) {
  const Lesson& ffn = *find_lesson("ffn");
  const Measurement f0 = lesson_level("ffn", 16384, 0, 10.0);
  const Measurement f2 = lesson_level("ffn", 16384, 2, 10.0);
  const FlowInput fused_ffn = flow_input(f2, &ffn, h200(), &f0);
  ASSERT_FALSE(fused_ffn.on_chip.empty());
  EXPECT_FALSE(fused_ffn.on_chip_registers);
  const FlowLayout a = layout_flow(fused_ffn, 1.0, kMin, kMax);
  ASSERT_FALSE(a.on_chip_lines.empty());
  EXPECT_EQ(a.on_chip_lines[0].rfind("kept on chip", 0), 0u) << a.on_chip_lines[0];
  const Measurement g0 = lesson_level("gelu_scale", k16M, 0, 30.0);
  const Measurement g1 = lesson_level("gelu_scale", k16M, 1, 30.0);
  const FlowInput fused_gelu = flow_input(g1, &gelu_scale(), h200(), &g0);
  EXPECT_TRUE(fused_gelu.on_chip_registers);
  const FlowLayout b = layout_flow(fused_gelu, 1.0, kMin, kMax);
  ASSERT_FALSE(b.on_chip_lines.empty());
  EXPECT_EQ(b.on_chip_lines[0].rfind("kept in registers", 0), 0u) << b.on_chip_lines[0];
}

// ffn level 1 (cuBLASLt epilogues) writes h = GELU(x W1 + b1) between its two GEMMs: the
// level table's "kept on chip" is every other intermediate of level 0, never the gelu output,
// with and without level 0's measurement and with counters.
TEST(Flow, FfnsEpilogueLevelKeepsAllButTheGeluOutputOnChip) {
  const Lesson& ffn = *find_lesson("ffn");
  const Measurement m0 = lesson_level("ffn", 16384, 0, 10.0);
  Measurement m1 = lesson_level("ffn", 16384, 1, 10.0);
  for (const Measurement* level0 : {&m0, static_cast<const Measurement*>(nullptr)}) {
    const FlowInput in = flow_input(m1, &ffn, h200(), level0);
    EXPECT_EQ(std::find(in.on_chip.begin(), in.on_chip.end(), "gelu output"), in.on_chip.end())
        << "level 1 writes h to memory";
    EXPECT_NE(std::find(in.on_chip.begin(), in.on_chip.end(), "gemm_up output"), in.on_chip.end());
    EXPECT_NE(std::find(in.on_chip.begin(), in.on_chip.end(), "add_bias_up output"),
              in.on_chip.end());
  }
  add_counters(&m1, 1.0);  // measured DRAM bytes as the textbook's
  const FlowInput measured = flow_input(m1, &ffn, h200(), &m0);
  EXPECT_EQ(std::find(measured.on_chip.begin(), measured.on_chip.end(), "gelu output"),
            measured.on_chip.end());
}

TEST(Flow, L2ResidentReadsStopAtL2WithCounters) {
  // The H200 at 4M elements, cold: scale finds gelu's output in L2 (DRAM read 8 KiB of 16 MiB)
  // while its writes, and gelu's reads of x, reach DRAM.
  Measurement m0 = lesson_level("gelu_scale", int64_t(1) << 22, 0, 8.0);
  add_counters(&m0, 1.0);
  m0.launches[1].counters->dram_read_bytes = 8 * 1024;
  const FlowInput in = flow_input(m0, &gelu_scale(), h200(), &m0);
  EXPECT_FALSE(in.trips[0].reads_stop_at_l2);
  EXPECT_TRUE(in.trips[1].reads_stop_at_l2);
  EXPECT_FALSE(in.trips[1].writes_stop_at_l2);
  const FlowLayout l = layout_flow(in, 2.25, kMin, kMax);  // 3/4 of the chain: scale runs
  ASSERT_EQ(l.trip, 1);
  ASSERT_EQ(l.lanes.size(), 2u);
  const FlowLane& reads = l.lanes[0];
  EXPECT_FALSE(reads.write);
  EXPECT_TRUE(reads.stops_at_l2);
  EXPECT_EQ(reads.label, "L2 hit");
  EXPECT_LT(reads.dram.thickness, 0.01f) << "almost nothing comes from HBM";
  EXPECT_FALSE(reads.dram.visible);
  EXPECT_TRUE(reads.dram.tokens.empty());
  EXPECT_TRUE(reads.chip.visible);
  EXPECT_GT(reads.chip.thickness, 1.0f) << "the SM still gets all 16 MiB, from L2";
  EXPECT_FALSE(reads.chip.tokens.empty());
  // The reads start in the L2 box, not in HBM.
  EXPECT_GE(reads.chip.from.x, l.boxes[1].min.x);
  EXPECT_LE(reads.chip.from.x, l.boxes[1].max.x);
  EXPECT_TRUE(has_block(in, l, "gelu output", FlowPlace::l2));
  EXPECT_NE(l.status.find("from L2"), std::string::npos) << l.status;
}

TEST(Flow, L2ResidentReadsStopAtL2WithCountersOff) {
  // 1M elements = 4 MiB per tensor, under the 60 MiB L2.
  const Measurement cold = lesson_level("gelu_scale", int64_t(1) << 20, 0, 3.0);
  const FlowInput in = flow_input(cold, &gelu_scale(), h200(), &cold);
  EXPECT_FALSE(in.trips[0].reads_stop_at_l2) << "cold mode evicted x before the run";
  EXPECT_TRUE(in.trips[1].reads_stop_at_l2) << "gelu's 4 MiB output is still in L2";
  const Measurement warm = lesson_level("gelu_scale", int64_t(1) << 20, 0, 3.0, CacheMode::warm);
  EXPECT_TRUE(flow_input(warm, &gelu_scale(), h200(), &warm).trips[0].reads_stop_at_l2);
  // 64 MiB tensors do not fit: everything goes to HBM.
  const Measurement big = lesson_level("gelu_scale", k16M, 0, 30.0, CacheMode::warm);
  for (const auto& t : flow_input(big, &gelu_scale(), h200(), &big).trips) {
    EXPECT_FALSE(t.reads_stop_at_l2);
    EXPECT_FALSE(t.writes_stop_at_l2);
  }
}

TEST(Flow, TripsFollowLaunchOrderAndPaceFollowsMedianTimes) {
  Measurement m = lesson_level("gelu_scale", k16M, 0, 0.0);
  m.launches[0].time_us.median = 10;  // gelu takes a quarter of the chain
  m.launches[1].time_us.median = 30;
  m.chain_time_us.median = 40;
  const FlowInput in = flow_input(m, &gelu_scale(), h200(), &m);
  const double s_per_us = kFlowRunSeconds / 40;
  const FlowLayout a = layout_flow(in, 5 * s_per_us, kMin, kMax);
  EXPECT_EQ(a.trip, 0);
  EXPECT_NEAR(a.progress, 0.5f, 1e-4f);
  EXPECT_DOUBLE_EQ(a.seconds_per_us, s_per_us);
  const FlowLayout b = layout_flow(in, 25 * s_per_us, kMin, kMax);
  EXPECT_EQ(b.trip, 1);
  EXPECT_NEAR(b.progress, 0.5f, 1e-4f) << "15 of scale's 30 us";
  EXPECT_NE(b.status.find("launch 2 of 2, scale"), std::string::npos) << b.status;
  const FlowLayout done = layout_flow(in, 41 * s_per_us, kMin, kMax);
  EXPECT_TRUE(done.done);
  EXPECT_EQ(done.trip, -1);
  EXPECT_EQ(layout_flow(in, a.loop_seconds + 5 * s_per_us, kMin, kMax).trip, 0) << "it loops";
  // The pacing strip: gelu's segment a third as wide as scale's, in launch order.
  ASSERT_EQ(a.strip.size(), 2u);
  EXPECT_NEAR((a.strip[1].x1 - a.strip[1].x0) / (a.strip[0].x1 - a.strip[0].x0), 3.0f, 1e-3f);
  EXPECT_LT(a.strip[0].x1, a.strip[1].x0 + 1e-3f);
}

TEST(Flow, AFasterLevelFinishesSoonerOnLevelZerosClock) {
  const Measurement m0 = lesson_level("gelu_scale", k16M, 0, 32.0);  // 64 us
  const Measurement m1 = lesson_level("gelu_scale", k16M, 1, 32.0);  // 32 us
  const FlowInput fused = flow_input(m1, &gelu_scale(), h200(), &m0);
  EXPECT_DOUBLE_EQ(fused.pace_reference_us, 64.0);
  const FlowLayout at_2s = layout_flow(fused, 2.0, kMin, kMax);  // 42.7 us on level 0's clock
  EXPECT_TRUE(at_2s.done) << "the fused kernel is done at half of level 0's run";
  EXPECT_NE(at_2s.status.find("level 0: 64.0"), std::string::npos) << at_2s.status;
  const FlowLayout unfused_at_2s =
      layout_flow(flow_input(m0, &gelu_scale(), h200(), &m0), 2.0, kMin, kMax);
  EXPECT_EQ(unfused_at_2s.trip, 1) << "level 0 is still in its second launch";
}

TEST(Flow, LanesClockAndLabelsAllEndAtTheMeasuredChainTime) {
  Measurement m0 = lesson_level("gelu_scale", k16M, 0, 32.0);  // two launches of 32 us
  add_records(&m0, 2.0);                                       // one run: 2 us apart
  m0.chain_time_us.median = 70.0;  // the table's figure: the launches and a 6 us gap
  Measurement m1 = lesson_level("gelu_scale", k16M, 1, 32.0);
  m1.chain_time_us.median = 33.0;
  const FlowInput fused = flow_input(m1, &gelu_scale(), h200(), &m0);
  EXPECT_DOUBLE_EQ(fused.pace_reference_us, 70.0);
  EXPECT_NE(fused.pace_reference_label.find("70.0"), std::string::npos)
      << fused.pace_reference_label;
  EXPECT_NE(fused.level0_lane_label.find("70.0"), std::string::npos) << fused.level0_lane_label;
  ASSERT_EQ(fused.level0_lane.size(), 2u);
  EXPECT_NEAR(fused.level0_lane[1].start_us, 38.0, 1e-9) << "the recorded gap, scaled to 6 us";
  EXPECT_NEAR(fused.level0_lane[1].end_us, 70.0, 1e-9);
  // Level 0 shown itself: its own lane, clock and "done" line end at 70 us too.
  const FlowInput unfused = flow_input(m0, &gelu_scale(), h200(), &m0);
  EXPECT_NEAR(unfused.trips[1].gap_before_us, 6.0, 1e-9);
  EXPECT_NE(unfused.lane_label.find("70.0"), std::string::npos) << unfused.lane_label;
  const FlowLayout done = layout_flow(unfused, kFlowRunSeconds * 0.999, kMin, kMax);
  EXPECT_NE(done.time_label.find("of 70.0"), std::string::npos) << done.time_label;
  // Without a chain median (a hand-made measurement), the records' gaps as they are.
  m0.chain_time_us.median = 0;
  const FlowInput no_median = flow_input(m1, &gelu_scale(), h200(), &m0);
  EXPECT_NEAR(no_median.pace_reference_us, 66.0, 1e-9);
  EXPECT_NE(no_median.level0_lane_label.find("66.0"), std::string::npos)
      << no_median.level0_lane_label;
}

TEST(Flow, GapsBetweenLaunchesComeFromTheRecords) {
  Measurement m = lesson_level("gelu_scale", k16M, 0, 10.0);
  add_records(&m, 2.0);
  const FlowInput in = flow_input(m, &gelu_scale(), h200(), &m);
  EXPECT_DOUBLE_EQ(in.trips[0].gap_before_us, 0.0);
  EXPECT_NEAR(in.trips[1].gap_before_us, 2.0, 1e-9);
  const double s_per_us = kFlowRunSeconds / 22;
  const FlowLayout gap = layout_flow(in, 11 * s_per_us, kMin, kMax);
  EXPECT_TRUE(gap.in_gap);
  EXPECT_EQ(gap.trip, -1);
  EXPECT_TRUE(gap.lanes.empty()) << "nothing moves while the GPU idles";
  EXPECT_NE(gap.status.find("idles 2.0"), std::string::npos) << gap.status;
}

TEST(Flow, PlacesAreLabelledWithTheirCapacitiesAndHoverExplains) {
  const Measurement m0 = lesson_level("gelu_scale", k16M, 0, 30.0);
  const FlowInput in = flow_input(m0, &gelu_scale(), h200(), &m0);
  const FlowLayout l = layout_flow(in, 0.5, kMin, kMax);
  EXPECT_EQ(l.boxes[0].title, "HBM (global memory)");
  EXPECT_EQ(l.boxes[1].capacity, "60.0 MiB");
  EXPECT_EQ(l.boxes[2].title, "SM");
  EXPECT_EQ(l.boxes[2].capacity, "256.0 KiB registers");
  EXPECT_LT(l.boxes[0].max.x, l.boxes[1].min.x);
  EXPECT_LT(l.boxes[1].max.x, l.boxes[2].min.x);
  for (const auto& b : l.blocks) {  // every block inside its box
    const FlowBox& box = l.boxes[static_cast<int>(b.place)];
    EXPECT_GE(b.min.x, box.min.x);
    EXPECT_LE(b.max.x, box.max.x);
    EXPECT_LE(b.max.y, box.max.y);
  }
  const FlowHit l2 =
      flow_hit(l, middle(l.boxes[1].min, v2(l.boxes[1].max.x, l.boxes[1].min.y + 30)));
  EXPECT_EQ(l2.box, 1);
  EXPECT_NE(flow_readout(in, l, l2).find("60.0 MiB"), std::string::npos);
  const FlowHit sm = flow_hit(l, v2(l.boxes[2].min.x + 5, l.boxes[2].min.y + 5));
  EXPECT_NE(flow_readout(in, l, sm).find("one of 132"), std::string::npos);
  ASSERT_FALSE(l.lanes.empty());
  const FlowHit lane = flow_hit(l, middle(l.lanes[0].chip.from, l.lanes[0].chip.to));
  EXPECT_EQ(lane.lane, 0);
  EXPECT_NE(flow_readout(in, l, lane).find("counters off"), std::string::npos);
}

TEST(Flow, NoMeasurementGivesThePlacesAndAStill) {
  const FlowInput in = flow_input(Measurement(), 60 * kMiB);
  const FlowLayout l = layout_flow(in, 1.0, kMin, kMax);
  EXPECT_EQ(l.trip, -1);
  EXPECT_TRUE(l.blocks.empty());
  EXPECT_EQ(l.status, "No measurement yet.");
}

TEST(FlowClock, PausesAndResumesWhereItStopped) {
  FlowClock c;
  c.restart(10.0);
  EXPECT_DOUBLE_EQ(c.elapsed(11.5), 1.5);
  c.toggle_pause(11.5);
  EXPECT_TRUE(c.paused());
  EXPECT_DOUBLE_EQ(c.elapsed(20.0), 1.5);
  c.toggle_pause(20.0);
  EXPECT_DOUBLE_EQ(c.elapsed(21.0), 2.5);
}

}  // namespace
}  // namespace fl::viz
