// The roofline's points and roof, without a window.
#include "viz/roofline_view.h"

#include <gtest/gtest.h>

#include <cmath>

namespace fl::viz {
namespace {

Measurement level(int lvl, double flops, int64_t bytes, double us, bool correct = true) {
  Measurement m;
  m.level = lvl;
  m.level_name = lvl == 0 ? "unfused" : "fused";
  m.chain_time_us.median = us;
  m.check.passed = correct;
  LaunchResult l;
  l.textbook.flops = flops;
  l.textbook.bytes_read = bytes / 2;
  l.textbook.bytes_written = bytes / 2;
  m.launches.push_back(l);
  return m;
}

TEST(Roofline, PointsAreIntensityAndAchievedRate) {
  // Same FLOPs, half the bytes, half the time: intensity and rate both double.
  const auto in = roofline_input({level(0, 9e6, 16000000, 4.0), level(1, 9e6, 8000000, 2.0)}, 4000, 1);
  ASSERT_EQ(in.points.size(), 2u);
  EXPECT_DOUBLE_EQ(in.points[0].intensity, 9e6 / 16e6);
  EXPECT_DOUBLE_EQ(in.points[0].gflops, 9e6 / 4e3);  // 9e6 FLOP in 4 us
  EXPECT_DOUBLE_EQ(in.points[1].intensity, 2 * in.points[0].intensity);
  EXPECT_DOUBLE_EQ(in.points[1].gflops, 2 * in.points[0].gflops);
  EXPECT_EQ(in.highlighted, 1);

  const auto layout = layout_roofline(in, ImVec2(0, 0), ImVec2(400, 300));
  ASSERT_EQ(layout.points.size(), 2u);
  EXPECT_GT(layout.points[1].x, layout.points[0].x) << "fusing moves the point right";
  EXPECT_LT(layout.points[1].y, layout.points[0].y) << "... and up";
  // Both points (16e6 B in 4 us = 4000 GB/s) sit exactly on the 4000 GB/s roof's line.
  const float slope = (layout.roof_to.y - layout.roof_from.y) / (layout.roof_to.x - layout.roof_from.x);
  for (const ImVec2& p : layout.points) {
    EXPECT_NEAR(layout.roof_from.y + slope * (p.x - layout.roof_from.x), p.y, 0.5f);
  }
}

TEST(Roofline, NoPointForAWrongKernelOrNoTime) {
  const auto in = roofline_input({level(0, 1e6, 1000, 1.0, false), level(1, 1e6, 1000, 0.0)}, 1000, 1);
  EXPECT_TRUE(in.points.empty());
  EXPECT_TRUE(layout_roofline(in, ImVec2(0, 0), ImVec2(100, 100)).points.empty());
}

}  // namespace
}  // namespace fl::viz
