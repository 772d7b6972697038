// The roofline's points and roofs, without a window.
#include "viz/roofline_view.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/viz/viz_test_data.h"

namespace fl::viz {
namespace {

using testing::lesson_level;

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

TEST(Roofline, PointsAreFlopsOverBytesAndFlopsOverTime) {
  // gelu_scale at 16M from its traffic model: level 0 at 65.6 us, level 1 at 30.3 us.
  const Measurement m0 = lesson_level("gelu_scale", int64_t(1) << 24, 0, 32.8);
  const Measurement m1 = lesson_level("gelu_scale", int64_t(1) << 24, 1, 30.3);
  const auto in = roofline_input({m0, m1}, 4315, 1);
  ASSERT_EQ(in.points.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Measurement& m = i == 0 ? m0 : m1;
    double flops = 0;
    for (const auto& l : m.launches) flops += l.textbook.flops;
    EXPECT_DOUBLE_EQ(in.points[i].flops, flops);
    EXPECT_DOUBLE_EQ(in.points[i].intensity, flops / m.textbook_bytes());
    EXPECT_DOUBLE_EQ(in.points[i].gflops, flops / (m.chain_time_us.median * 1e3));
  }
  EXPECT_DOUBLE_EQ(in.points[1].intensity / in.points[0].intensity, 2.0)
      << "same FLOPs, half the bytes";
  EXPECT_EQ(in.highlighted, 1);
}

TEST(Roofline, MemoryBoundPointsSitOnTheBandwidthRoof) {
  // Same FLOPs, half the bytes, half the time: intensity and rate both double.
  const auto in =
      roofline_input({level(0, 9e6, 16000000, 4.0), level(1, 9e6, 8000000, 2.0)}, 4000, 1);
  ASSERT_EQ(in.points.size(), 2u);
  EXPECT_DOUBLE_EQ(in.points[0].gflops, 9e6 / 4e3);  // 9e6 FLOP in 4 us
  EXPECT_DOUBLE_EQ(in.points[1].gflops, 2 * in.points[0].gflops);
  const auto layout = layout_roofline(in, ImVec2(0, 0), ImVec2(700, 300));
  ASSERT_EQ(layout.points.size(), 2u);
  EXPECT_GT(layout.points[1].x, layout.points[0].x) << "fusing moves the point right";
  EXPECT_LT(layout.points[1].y, layout.points[0].y) << "... and up";
  ASSERT_TRUE(layout.roof_visible);
  // Both points (16e6 B in 4 us = 4000 GB/s) sit exactly on the 4000 GB/s roof.
  const float slope =
      (layout.roof_to.y - layout.roof_from.y) / (layout.roof_to.x - layout.roof_from.x);
  for (const ImVec2& p : layout.points) {
    EXPECT_NEAR(layout.roof_from.y + slope * (p.x - layout.roof_from.x), p.y, 0.5f);
  }
  // Screen positions follow the log axes.
  EXPECT_NEAR(layout.points[0].x, layout.x_to_screen(in.points[0].intensity), 1e-3f);
  EXPECT_NEAR(layout.points[0].y, layout.y_to_screen(in.points[0].gflops), 1e-3f);
  EXPECT_NE(layout.roof_label.find("4000 GB/s"), std::string::npos);
  EXPECT_EQ(layout.note, "no datasheet peak for this GPU: only the bandwidth roof is drawn");
  EXPECT_FALSE(layout.compute_visible);
  EXPECT_NE(layout.y_title.find("GFLOP/s"), std::string::npos);
  EXPECT_NE(layout.x_title.find("FLOP per"), std::string::npos);
  // Its full label, or at least its level's name where the full one finds no free place.
  EXPECT_NE(layout.point_labels[1].find(in.points[1].label), std::string::npos);
  EXPECT_EQ(roofline_hit(layout, layout.points[1], 5), 1);
  EXPECT_NE(roofline_readout(in, 0).find("100% of the 4000 GB/s roof"), std::string::npos)
      << roofline_readout(in, 0);
}

TEST(Roofline, AKnownComputeRoofBendsTheRoofAtTheRidge) {
  const auto in = roofline_input({level(0, 9e6, 16000000, 4.0)}, 4000, 0, 60000);
  const auto layout = layout_roofline(in, ImVec2(0, 0), ImVec2(700, 300));
  ASSERT_TRUE(layout.compute_visible);
  EXPECT_TRUE(layout.note.empty());
  // The diagonal ends where the flat roof starts: intensity 60000 / 4000 = 15 FLOP/B.
  EXPECT_NEAR(layout.roof_to.x, layout.x_to_screen(15.0), 0.01f);
  EXPECT_NEAR(layout.roof_to.y, layout.compute_from.y, 0.01f);
  EXPECT_NEAR(layout.compute_from.y, layout.y_to_screen(60000), 0.01f);
}

TEST(Roofline, LabelsOfNearbyPointsDoNotOverlap) {
  const auto in =
      roofline_input({level(0, 9e6, 16000000, 4.0), level(1, 9e6, 15000000, 3.8)}, 4000, 1);
  const auto layout = layout_roofline(in, ImVec2(0, 0), ImVec2(700, 300));
  ASSERT_EQ(layout.point_label_pos.size(), 2u);
  const float dy = std::fabs(layout.point_label_pos[0].y - layout.point_label_pos[1].y);
  const float dx = std::fabs(layout.point_label_pos[0].x - layout.point_label_pos[1].x);
  EXPECT_TRUE(dy >= 16 || dx >= 0.6f * 16 * layout.point_labels[0].size());
}

// In a short panel (two views at once) the roofs' labels keep off every point, and the last x
// label keeps room for its whole text (no "10..."): the frame ends half that label from the edge.
TEST(Roofline, RoofLabelsKeepOffThePointsAndTheLastXLabelFits) {
  // Three compute-bound levels near the ridge, as the FFN's at 16K tokens.
  const auto in = roofline_input({level(0, 2.2e11, 1000000000, 500.0),
                                  level(1, 2.2e11, 360000000, 400.0),
                                  level(2, 2.2e11, 90000000, 300.0)},
                                 3057, 2, 756867);
  for (float h : {160.0f, 200.0f, 300.0f}) {
    const auto L = layout_roofline(in, ImVec2(0, 0), ImVec2(630, h));
    ASSERT_EQ(L.points.size(), 3u);
    const float fs = L.font_size, r = fs * 0.5f;
    const auto hits_a_point = [&](ImVec2 pos, const std::string& text) {
      const float w = 0.6f * fs * static_cast<float>(text.size());
      for (const ImVec2& p : L.points) {
        if (pos.x < p.x + r && p.x - r < pos.x + w && pos.y < p.y + r && p.y - r < pos.y + fs)
          return true;
      }
      return false;
    };
    if (L.roof_visible && !L.roof_label.empty()) {
      EXPECT_FALSE(hits_a_point(L.roof_label_pos, L.roof_label)) << h << ": " << L.roof_label;
    }
    if (L.compute_visible) {
      EXPECT_FALSE(hits_a_point(L.compute_label_pos, L.compute_label))
          << h << " label at " << L.compute_label_pos.x << "," << L.compute_label_pos.y
          << " from " << L.compute_from.x << "," << L.compute_from.y << " points "
          << L.points[0].x << "," << L.points[0].y << " " << L.points[1].x << ","
          << L.points[1].y << " " << L.points[2].x << "," << L.points[2].y << " fs " << fs;
    }
    ASSERT_FALSE(L.x_ticks.empty());
    const auto& [last_x, last_label] = L.x_ticks.back();
    EXPECT_LE(last_x + 0.6f * fs * static_cast<float>(last_label.size()) * 0.5f, 630.0f) << h;
  }
}

TEST(Roofline, NoPointForAWrongKernelOrNoTime) {
  const auto in =
      roofline_input({level(0, 1e6, 1000, 1.0, false), level(1, 1e6, 1000, 0.0)}, 1000, 1);
  EXPECT_TRUE(in.points.empty());
  EXPECT_TRUE(layout_roofline(in, ImVec2(0, 0), ImVec2(100, 100)).points.empty());
}

}  // namespace
}  // namespace fl::viz
