// The timeline's layout, computed without a window: one bar per launch of the level, in time
// order, gaps where the records have them, and the fusion slider's level decides the count.
#include "viz/timeline_view.h"

#include <gtest/gtest.h>

namespace fl::viz {
namespace {

Measurement level_with_records(int level, int launches, double kernel_us, double gap_us) {
  Measurement m;
  m.level = level;
  m.level_name = level == 0 ? "unfused" : "fused";
  double t = 0;
  for (int k = 0; k < launches; ++k) {
    LaunchResult l;
    l.textbook.kernel = "k" + std::to_string(k);
    l.textbook.bytes_read = l.textbook.bytes_written = 1000;
    l.time_us.median = kernel_us;
    m.launches.push_back(l);
    KernelRecord r;
    r.launch = k;
    r.start_rel_ns = static_cast<int64_t>(t * 1e3);
    r.end_rel_ns = static_cast<int64_t>((t + kernel_us) * 1e3);
    r.grid = {{256, 1, 1}};
    r.block = {{256, 1, 1}};
    m.records.push_back(r);
    t += kernel_us + gap_us;
  }
  return m;
}

TEST(Timeline, OneBarPerLaunchInOrderWithTheGapsBetween) {
  const Measurement unfused = level_with_records(0, 5, 10.0, 2.0);
  const TimelineLayout layout = layout_timeline(timeline_input(unfused), ImVec2(0, 0), ImVec2(580, 100));
  ASSERT_EQ(layout.bars.size(), 5u);
  EXPECT_DOUBLE_EQ(layout.span_us, 58.0);  // 5 x 10 us + 4 gaps of 2 us
  for (size_t i = 1; i < layout.bars.size(); ++i) {
    EXPECT_GT(layout.bars[i].min.x, layout.bars[i - 1].max.x) << "bars in time order, apart";
  }
  ASSERT_EQ(layout.gaps.size(), 4u);
  for (const auto& g : layout.gaps) EXPECT_NEAR(g.us, 2.0, 1e-9);
  EXPECT_NEAR(layout.bars[0].max.x - layout.bars[0].min.x, 100.0f, 0.01f);  // 10 of 58 us in 580 px
  EXPECT_GE(layout.ticks.size(), 3u);
  EXPECT_EQ(timeline_hit(layout, ImVec2(5, 50)), 0);
  EXPECT_EQ(timeline_hit(layout, ImVec2(575, 50)), 4);
}

TEST(Timeline, TheFusionSliderChangesTheLaunchCount) {
  const Measurement unfused = level_with_records(0, 5, 10.0, 2.0);
  const Measurement fused = level_with_records(2, 1, 12.0, 0.0);
  const auto a = layout_timeline(timeline_input(unfused), ImVec2(0, 0), ImVec2(500, 80));
  const auto b = layout_timeline(timeline_input(fused), ImVec2(0, 0), ImVec2(500, 80));
  EXPECT_EQ(a.bars.size(), 5u);
  EXPECT_EQ(b.bars.size(), 1u);
  EXPECT_TRUE(b.gaps.empty());
}

TEST(Timeline, WithoutRecordsMediansGoBackToBackAndSaySo) {
  Measurement m = level_with_records(0, 2, 7.0, 3.0);
  m.records.clear();
  const TimelineInput in = timeline_input(m);
  EXPECT_FALSE(in.from_records);
  const auto layout = layout_timeline(in, ImVec2(0, 0), ImVec2(140, 60));
  ASSERT_EQ(layout.bars.size(), 2u);
  EXPECT_DOUBLE_EQ(layout.span_us, 14.0);
  EXPECT_TRUE(layout.gaps.empty()) << "gaps are unknown without records";
}

TEST(Timeline, EmptyMeasurementDrawsNothing) {
  EXPECT_TRUE(layout_timeline(TimelineInput(), ImVec2(0, 0), ImVec2(100, 50)).bars.empty());
}

}  // namespace
}  // namespace fl::viz
