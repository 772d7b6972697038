// The timeline's layout, computed without a window: one bar per launch of the level, in time
// order, labelled gaps where the records have them, medians back to back (and said so) where not.
#include "viz/timeline_view.h"

#include <gtest/gtest.h>

#include "tests/viz/viz_test_data.h"

namespace fl::viz {
namespace {

using testing::add_counters;
using testing::add_records;
using testing::lesson_level;

TEST(Timeline, OneBarPerLaunchInOrderWithTheGapsBetween) {
  Measurement unfused = lesson_level("scale_mask_softmax", 4096, 0, 10.0);
  const size_t n = unfused.launches.size();
  ASSERT_GE(n, 3u);
  add_records(&unfused, 2.0);
  const TimelineInput in = timeline_input(unfused);
  EXPECT_TRUE(in.from_records);
  ASSERT_EQ(in.launches.size(), n);
  const float width = 1000;
  const TimelineLayout layout = layout_timeline(in, ImVec2(0, 0), ImVec2(width, 160));
  ASSERT_EQ(layout.bars.size(), n);
  EXPECT_NEAR(layout.span_us, 10.0 * n + 2.0 * (n - 1), 1e-9);
  for (size_t i = 1; i < n; ++i) {
    EXPECT_GT(layout.bars[i].min.x, layout.bars[i - 1].max.x) << "bars in time order, apart";
  }
  ASSERT_EQ(layout.gaps.size(), n - 1);
  for (const auto& g : layout.gaps) {
    EXPECT_GT(g.us, 0);
    EXPECT_NEAR(g.us, 2.0, 1e-9);
    EXPECT_GT(g.x1, g.x0);
    EXPECT_EQ(g.label, "gap 2.0 \xC2\xB5s");
  }
  EXPECT_TRUE(layout.gaps[0].label_visible);
  // Bars are as long as their launches, on one scale.
  const float px_per_us =
      (layout.frame_max.x - layout.frame_min.x) / static_cast<float>(layout.span_us);
  EXPECT_NEAR(layout.bars[0].max.x - layout.bars[0].min.x, 10 * px_per_us, 0.01f);
  EXPECT_GE(layout.ticks.size(), 3u);
  EXPECT_EQ(layout.ticks[0].label, "0 \xC2\xB5s");
  EXPECT_EQ(layout.note, "") << "from records: no note";
  EXPECT_NE(layout.summary.find("of gaps"), std::string::npos) << layout.summary;
  const ImVec2 in_first = middle(layout.bars[0].min, layout.bars[0].max);
  const ImVec2 in_last = middle(layout.bars.back().min, layout.bars.back().max);
  EXPECT_EQ(timeline_hit(layout, in_first), 0);
  EXPECT_EQ(timeline_hit(layout, in_last), static_cast<int>(n - 1));
  EXPECT_EQ(
      timeline_gap_hit(layout, v2(0.5f * (layout.gaps[0].x0 + layout.gaps[0].x1), in_first.y)), 0);
}

TEST(Timeline, OverlappingLaunchesAreNotAddedUpPastTheSpan) {
  // Programmatic dependent launch: each kernel starts 2 us before the one before it ends.
  Measurement m = lesson_level("residual_layernorm", 4096, 0, 10.0);
  add_records(&m, -2.0);
  const TimelineLayout layout = layout_timeline(timeline_input(m), ImVec2(0, 0), ImVec2(1000, 160));
  const size_t n = m.launches.size();
  ASSERT_GT(n, 1u);
  EXPECT_NEAR(layout.span_us, 10.0 * n - 2.0 * (n - 1), 1e-9);
  EXPECT_TRUE(layout.gaps.empty());
  EXPECT_EQ(layout.summary.find("of gaps"), std::string::npos) << layout.summary;
  EXPECT_NE(layout.summary.find("overlapping"), std::string::npos) << layout.summary;
}

TEST(Timeline, TheFusionSliderChangesTheLaunchCount) {
  // residual_layernorm: 3 launches, then 2, then 1.
  const Lesson& rl = *find_lesson("residual_layernorm");
  for (int level = 0; level < rl.level_count(); ++level) {
    Measurement m = lesson_level("residual_layernorm", 4096, level, 5.0);
    add_records(&m, 1.5);
    const auto layout = layout_timeline(timeline_input(m), ImVec2(0, 0), ImVec2(600, 140));
    EXPECT_EQ(layout.bars.size(), rl.info().levels[level].launches.size()) << "level " << level;
    EXPECT_EQ(layout.gaps.size(), layout.bars.size() - 1);
  }
}

TEST(Timeline, HoverShowsNameGridBlockDurationAndBytes) {
  Measurement m = lesson_level("gelu_scale", int64_t(1) << 24, 0, 30.0);
  add_counters(&m, 1.0);
  add_records(&m, 1.2);
  const TimelineInput in = timeline_input(m);
  ASSERT_EQ(in.launches.size(), 2u);
  EXPECT_EQ(in.launches[1].kernel, "scale");
  EXPECT_EQ(in.launches[1].shared_bytes, 1024);
  const std::string r = timeline_readout(in, 1);
  for (const char* expected :
       {"scale", "elementwise_kernel<float, scale>", "launch 2 of 2", "30.0 \xC2\xB5s",
        "grid 65536 x 1 x 1", "block 256 x 1 x 1", "19 registers", "1.0 KiB shared",
        "textbook bytes: 128.0 MiB", "DRAM bytes (measured): 128.0 MiB"}) {
    EXPECT_NE(r.find(expected), std::string::npos) << expected << " in:\n" << r;
  }
  const auto layout = layout_timeline(in, ImVec2(0, 0), ImVec2(800, 140));
  ASSERT_EQ(layout.gaps.size(), 1u);
  EXPECT_NE(timeline_gap_readout(in, layout.gaps[0]).find("idles 1.2"), std::string::npos);
}

TEST(Timeline, WithoutRecordsMediansGoBackToBackAndSaySo) {
  Measurement m = lesson_level("gelu_scale", 1 << 20, 0, 7.0);
  m.launches[1].time_us.median = 3.0;
  const TimelineInput in = timeline_input(m);
  EXPECT_FALSE(in.from_records);
  const auto layout = layout_timeline(in, ImVec2(0, 0), ImVec2(400, 120));
  ASSERT_EQ(layout.bars.size(), 2u);
  EXPECT_DOUBLE_EQ(layout.span_us, 10.0);
  EXPECT_TRUE(layout.gaps.empty()) << "gaps are unknown without records";
  EXPECT_NEAR(layout.bars[0].max.x, layout.bars[1].min.x, 1e-3f) << "back to back";
  EXPECT_EQ(layout.note, "from medians (no raw records)");
  EXPECT_EQ(timeline_readout(in, 0).find("grid"), std::string::npos) << "no launch config known";
}

TEST(Timeline, AbsoluteTimestampsAloneStillGiveTheTimeline) {
  Measurement m = lesson_level("gelu_scale", 1 << 20, 0, 4.0);
  add_records(&m, 1.0);
  for (auto& r : m.records) r.start_rel_ns = r.end_rel_ns = 0;  // only CUPTI's absolute times
  const auto layout = layout_timeline(timeline_input(m), ImVec2(0, 0), ImVec2(400, 120));
  EXPECT_NEAR(layout.span_us, 9.0, 1e-9);
  ASSERT_EQ(layout.gaps.size(), 1u);
  EXPECT_NEAR(layout.gaps[0].us, 1.0, 1e-9);
}

TEST(Timeline, EmptyMeasurementDrawsNothing) {
  EXPECT_TRUE(layout_timeline(TimelineInput(), ImVec2(0, 0), ImVec2(100, 50)).bars.empty());
}

}  // namespace
}  // namespace fl::viz
