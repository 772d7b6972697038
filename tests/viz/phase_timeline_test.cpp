// The phase timeline's layout, computed without a window: one lane per SM (a row more where
// blocks overlapped), one box per record at its time, the legend, and the hover read-out.
#include "viz/phase_timeline.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/support/recorded.h"

namespace fl::viz {
namespace {

using fl::testing_support::recorded_measurement;
using fl::testing_support::sample_phases;

const std::vector<std::string> kNames = {"weights in", "up-projection", "grid barrier",
                                         "down-projection"};

Measurement with_phases(int blocks, int sms) {
  Measurement m = recorded_measurement("ffn", 16, 2, 10.0, Precision::bf16, CacheMode::cold, 768);
  LaunchResult plain;
  plain.textbook = {"prologue", 1 << 10, 1 << 10, 0};
  LaunchResult l;
  l.textbook = {"ffn_fused", 1 << 20, 1 << 14, 1e8};
  l.phases = sample_phases(blocks, sms, kNames);
  m.launches = {plain, l};
  return m;
}

TEST(PhaseTimeline, OnlyLaunchesWithPhasesGetALaneSet) {
  const std::vector<PhaseTimelineInput> inputs = phase_timeline_inputs(with_phases(12, 8));
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(inputs[0].launch, 1);
  EXPECT_EQ(inputs[0].kernel, "ffn_fused");
  EXPECT_EQ(inputs[0].lanes.size(), inputs[0].phases.records.size());
  EXPECT_FALSE(inputs[0].tasks);
  EXPECT_TRUE(phase_timeline_inputs(recorded_measurement("ffn", 16, 2, 10.0)).empty());
}

TEST(PhaseTimeline, OneLanePerSmAndBoxesAtTheirTimes) {
  const PhaseTimelineInput in = phase_timeline_inputs(with_phases(12, 8))[0];
  const ImVec2 min(10, 20), max(1010, 620);
  const PhaseTimelineLayout L = layout_phase_timeline(in, min, max);
  // 8 SMs; SMs 0-3 ran two overlapping blocks: 12 rows, SM by SM, top to bottom.
  ASSERT_EQ(L.rows.size(), 12u);
  EXPECT_EQ(L.rows[0].sm, 0);
  EXPECT_EQ(L.rows[1].sm, 0);
  EXPECT_EQ(L.rows[1].slot, 1);
  EXPECT_EQ(L.rows.back().sm, 7);
  for (size_t i = 1; i < L.rows.size(); ++i) EXPECT_GE(L.rows[i].y0, L.rows[i - 1].y1 - 1e-3f);
  ASSERT_EQ(L.boxes.size(), in.phases.records.size());
  // The axis runs from the first stamp to the last end: block 11's last phase ends at
  // 110 + 3000 + 900 ns.
  EXPECT_NEAR(L.span_us, 4.01, 1e-9);
  const float px_per_us = (L.frame_max.x - L.frame_min.x) / static_cast<float>(L.span_us);
  for (const PhaseBox& b : L.boxes) {
    const PhaseRecord& r = in.phases.records[b.record];
    EXPECT_NEAR(b.min.x, L.frame_min.x + r.start_ns * 1e-3 * px_per_us, 0.01);
    EXPECT_NEAR(b.max.x - b.min.x, 0.9 * px_per_us, 0.01);
    EXPECT_GE(b.min.y, L.frame_min.y - 1e-3f);
    EXPECT_LE(b.max.y, L.frame_max.y + 1e-3f);
    EXPECT_EQ(b.phase, r.phase);
    // In its SM's lane.
    bool in_lane = false;
    for (const PhaseLaneRow& row : L.rows) {
      in_lane =
          in_lane || (row.sm == r.sm && b.min.y >= row.y0 - 1e-3f && b.max.y <= row.y1 + 1e-3f);
    }
    EXPECT_TRUE(in_lane) << "record " << b.record;
  }
  // Inside the area given; the legend names every phase once.
  EXPECT_GE(L.frame_min.x, min.x);
  EXPECT_LE(L.frame_max.x, max.x);
  EXPECT_LE(L.frame_max.y, max.y);
  ASSERT_EQ(L.legend.size(), kNames.size());
  for (size_t i = 0; i < kNames.size(); ++i) EXPECT_EQ(L.legend[i].label, kNames[i]);
  EXPECT_GE(L.frame_min.y, L.legend.back().swatch_max.y);
  EXPECT_EQ(L.title, "ffn_fused: 12 blocks on 8 SMs, 48 phase records");
  EXPECT_EQ(L.cost, "stamps on 10.2 \xC2\xB5s, off 10.0 \xC2\xB5s (+2.0%)");
  EXPECT_TRUE(L.note.empty());
  ASSERT_GE(L.ticks.size(), 2u);
  EXPECT_EQ(L.ticks.front().us, 0);
}

TEST(PhaseTimeline, ManySmsLabelOnlyWhatFits) {
  const PhaseTimelineInput in = phase_timeline_inputs(with_phases(132, 132))[0];
  const PhaseTimelineLayout L = layout_phase_timeline(in, ImVec2(0, 0), ImVec2(1200, 400));
  ASSERT_EQ(L.rows.size(), 132u);
  ASSERT_GE(L.sm_labels.size(), 2u);
  EXPECT_LT(L.sm_labels.size(), 132u);
  for (size_t i = 1; i < L.sm_labels.size(); ++i) {
    EXPECT_GE(L.sm_labels[i].pos.y - L.sm_labels[i - 1].pos.y, L.font_size) << "labels apart";
  }
  EXPECT_LE(L.sm_labels.back().pos.y + L.font_size, L.frame_max.y + 1e-3f);
  // 72 lanes: the last label, moved up inside the lanes, does not touch the one before.
  const PhaseTimelineLayout few = layout_phase_timeline(
      phase_timeline_inputs(with_phases(72, 72))[0], ImVec2(0, 0), ImVec2(1000, 330));
  for (size_t i = 1; i < few.sm_labels.size(); ++i) {
    EXPECT_GE(few.sm_labels[i].pos.y - few.sm_labels[i - 1].pos.y, few.font_size) << i;
  }
}

TEST(PhaseTimeline, HoverNamesBlockSmPhaseAndTimes) {
  const PhaseTimelineInput in = phase_timeline_inputs(with_phases(12, 8))[0];
  const PhaseTimelineLayout L = layout_phase_timeline(in, ImVec2(0, 0), ImVec2(1000, 600));
  // The middle of block 5's "grid barrier" box.
  int wanted = -1;
  for (size_t i = 0; i < L.boxes.size(); ++i) {
    const PhaseRecord& r = in.phases.records[L.boxes[i].record];
    if (r.block == 5 && r.phase == 2) wanted = static_cast<int>(i);
  }
  ASSERT_GE(wanted, 0);
  const PhaseBox& b = L.boxes[wanted];
  const ImVec2 centre(0.5f * (b.min.x + b.max.x), 0.5f * (b.min.y + b.max.y));
  EXPECT_EQ(phase_timeline_hit(L, centre), wanted);
  EXPECT_EQ(phase_timeline_hit(L, ImVec2(-50, -50)), -1);
  EXPECT_EQ(phase_readout(in, b.record),
            "grid barrier\nblock 5 on SM 5\n2.05 \xC2\xB5s to 2.95 \xC2\xB5s: 0.90 \xC2\xB5s\n"
            "(ffn_fused, times from the launch's first stamp)");
}

TEST(PhaseTimeline, TasksShowTheirArgumentAndWait) {
  Measurement m = with_phases(2, 2);
  LaunchPhases& p = *m.launches[1].phases;
  p.records[1].arg = 17;
  p.records[1].wait_ns = 2500;
  const PhaseTimelineInput in = phase_timeline_inputs(m)[0];
  EXPECT_TRUE(in.tasks);
  const std::string readout = phase_readout(in, 1);
  EXPECT_NE(readout.find("task 17, waited 2.50 \xC2\xB5s for its inputs"), std::string::npos)
      << readout;
  // A caller that knows the task list names the task.
  PhaseTimelineInput named = in;
  named.task_name = [](uint32_t arg) { return "layer 0 fc rows " + std::to_string(arg); };
  EXPECT_NE(phase_readout(named, 1).find("task 17 (layer 0 fc rows 17), waited"), std::string::npos)
      << phase_readout(named, 1);
}

TEST(PhaseTimeline, SaysWhenRecordsWereLostOrNoneCame) {
  Measurement m = with_phases(4, 4);
  m.launches[1].phases->lost = 9;
  PhaseTimelineLayout L =
      layout_phase_timeline(phase_timeline_inputs(m)[0], ImVec2(0, 0), ImVec2(800, 400));
  EXPECT_EQ(L.note, "9 records lost (the buffer was full): lanes are incomplete");
  m.launches[1].phases->records.clear();
  L = layout_phase_timeline(phase_timeline_inputs(m)[0], ImVec2(0, 0), ImVec2(800, 400));
  EXPECT_EQ(L.note, "no phase records: the kernel recorded none in this run");
  EXPECT_TRUE(L.boxes.empty());
}

}  // namespace
}  // namespace fl::viz
