// The plot widget's layout as plain data: no ImGui context, no window, no pixels.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "model/sizes.h"
#include "viz/plot.h"

namespace fl::viz {
namespace {

constexpr double K = 1024, M = 1024 * 1024;

// The speedup plot's axes: 1K..256M elements on log2, two points and a 2.0x reference line.
PlotSpec size_spec() {
  PlotSpec spec;
  spec.x_min = 1 * K;
  spec.x_max = 256 * M;
  spec.log_base = 2;
  spec.x_unit = "elements";
  spec.x_format = [](double x) { return format_size(static_cast<int64_t>(x + 0.5)); };
  spec.y_suffix = "x";
  PlotSeries s;
  s.label = "measured";
  s.points = {{16 * M, 1.9}, {1 * K, 1.2}, {1 * M, 1.5}};  // unsorted on purpose
  spec.series.push_back(s);
  spec.reference.enabled = true;
  spec.reference.y = 2.0;
  spec.reference.label = "byte-ratio limit 2.0x";
  return spec;
}

const PlotTick* tick_at(const std::vector<PlotTick>& ticks, double value) {
  for (const auto& t : ticks) {
    if (std::fabs(t.value - value) <= 1e-9 * value) return &t;
  }
  return nullptr;
}

PlotLayout layout_800x400(const PlotSpec& spec) {
  PlotStyle style;
  style.font_size = 16;
  return layout_plot(spec, ImVec2(0, 0), ImVec2(800, 400), style);
}

TEST(PlotLayout, LogAxisHasLabelledTicksAtPowersIncludingTheBinaryDecades) {
  const PlotLayout L = layout_800x400(size_spec());
  ASSERT_FALSE(L.x_ticks.empty());
  for (const auto& t : L.x_ticks) {
    const double e = std::log2(t.value);
    EXPECT_NEAR(e, std::round(e), 1e-9) << "tick " << t.value << " is not a power of 2";
    EXPECT_GE(t.pos, L.frame_min.x - 0.01f);
    EXPECT_LE(t.pos, L.frame_max.x + 0.01f);
  }
  const PlotTick* k1 = tick_at(L.x_ticks, 1 * K);
  const PlotTick* m1 = tick_at(L.x_ticks, 1 * M);
  const PlotTick* m256 = tick_at(L.x_ticks, 256 * M);
  ASSERT_TRUE(k1 && m1 && m256);
  EXPECT_EQ(k1->label, "1K");
  EXPECT_EQ(m1->label, "1M");
  EXPECT_EQ(m256->label, "256M");
  EXPECT_FLOAT_EQ(k1->pos, L.frame_min.x);
  EXPECT_FLOAT_EQ(m256->pos, L.frame_max.x);
  // Equal ratios are equal distances on a log axis.
  const PlotTick* k32 = tick_at(L.x_ticks, 32 * K);
  if (k32) {
    EXPECT_NEAR(k32->pos - k1->pos, m1->pos - k32->pos, 0.01);
  }
  // Labelled ticks stay apart: no two labels closer than a label's estimated width.
  float last = -1e9f;
  for (const auto& t : L.x_ticks) {
    if (t.label.empty()) continue;
    EXPECT_GT(t.pos - last, 16 * 0.6f * 4);
    last = t.pos;
  }
}

TEST(PlotLayout, PointAt16MLiesHalfwayBetweenThe1MAnd256MTicks) {
  const PlotLayout L = layout_800x400(size_spec());
  const PlotTick* m1 = tick_at(L.x_ticks, 1 * M);
  const PlotTick* m256 = tick_at(L.x_ticks, 256 * M);
  ASSERT_TRUE(m1 && m256);
  ASSERT_EQ(L.series.size(), 1u);
  const PlotSeriesLayout& s = L.series[0];
  ASSERT_EQ(s.data.size(), 3u);
  EXPECT_EQ(s.data[2].x, 16 * M);  // sorted by x
  // log2: 1M = 2^20, 16M = 2^24, 256M = 2^28: exactly halfway.
  EXPECT_NEAR(s.screen[2].x, m1->pos + 0.5f * (m256->pos - m1->pos), 0.01);
  EXPECT_GT(s.screen[2].x, m1->pos);
  EXPECT_LT(s.screen[2].x, m256->pos);
  // y: a linear map through the frame, larger values higher up.
  EXPECT_NEAR(s.screen[2].y, L.y_to_screen(1.9), 1e-3);
  EXPECT_LT(s.screen[2].y, s.screen[1].y);
}

TEST(PlotLayout, LinearYHasNiceTicksAndTheReferenceLineSitsAtItsValue) {
  const PlotLayout L = layout_800x400(size_spec());
  EXPECT_EQ(L.y_min, 0.0);               // speedups start at zero
  EXPECT_GE(L.y_max, 2.0 * 1.1 - 1e-9);  // headroom above the reference line
  ASSERT_GE(L.y_ticks.size(), 3u);
  const double step = L.y_ticks[1].value - L.y_ticks[0].value;
  for (size_t i = 1; i < L.y_ticks.size(); ++i) {
    EXPECT_NEAR(L.y_ticks[i].value - L.y_ticks[i - 1].value, step, 1e-9);
    EXPECT_LT(L.y_ticks[i].pos, L.y_ticks[i - 1].pos);  // up the screen
  }
  const PlotTick* two = tick_at(L.y_ticks, 2.0);
  ASSERT_TRUE(two);
  ASSERT_TRUE(L.reference_visible);
  EXPECT_NEAR(L.reference_y, two->pos, 1e-3);
  const float h = L.frame_max.y - L.frame_min.y;
  EXPECT_NEAR(L.reference_y, L.frame_max.y - (2.0 - L.y_min) / (L.y_max - L.y_min) * h, 1e-3);
  EXPECT_EQ(two->label.back(), 'x');
}

TEST(PlotLayout, NiceStepsAreOneTwoOrFiveTimesAPowerOfTen) {
  double lo = 0, hi = 2.3;
  EXPECT_DOUBLE_EQ(nice_linear_step(&lo, &hi, 6), 0.5);
  EXPECT_DOUBLE_EQ(hi, 2.5);
  lo = 0.13, hi = 0.87;
  EXPECT_DOUBLE_EQ(nice_linear_step(&lo, &hi, 10), 0.1);
  EXPECT_NEAR(lo, 0.1, 1e-12);
  EXPECT_NEAR(hi, 0.9, 1e-12);
  lo = 5, hi = 5;  // empty range: still an axis
  EXPECT_GT(nice_linear_step(&lo, &hi, 5), 0);
  EXPECT_GT(hi, lo);
}

TEST(PlotLayout, MarkerSitsAtTheCurrentSize) {
  PlotSpec spec = size_spec();
  spec.marker.enabled = true;
  spec.marker.x = 16 * M;
  spec.marker.label = "16M";
  const PlotLayout L = layout_800x400(spec);
  ASSERT_TRUE(L.marker_visible);
  EXPECT_NEAR(L.marker_x, L.series[0].screen[2].x, 1e-3);
  spec.marker.x = 1e12;  // off the axis: not drawn
  EXPECT_FALSE(layout_800x400(spec).marker_visible);
}

TEST(PlotLayout, HoverPicksTheNearestPointWithinReach) {
  PlotSpec spec = size_spec();
  PlotSeries other;
  other.label = "reference";
  other.points = {{1 * M, 1.0}};
  spec.series.push_back(other);
  const PlotLayout L = layout_800x400(spec);
  const ImVec2 m1_measured = L.series[0].screen[1];   // (1M, 1.5)
  const ImVec2 m1_reference = L.series[1].screen[0];  // (1M, 1.0)

  PlotHover h = pick_nearest(L, ImVec2(m1_measured.x + 3, m1_measured.y - 2), 40);
  EXPECT_EQ(h.series, 0);
  EXPECT_EQ(h.index, 1);
  EXPECT_EQ(hover_readout(L, h), "measured: 1M elements, 1.50x");

  h = pick_nearest(L, ImVec2(m1_reference.x - 2, m1_reference.y + 4), 40);
  EXPECT_EQ(h.series, 1);
  EXPECT_EQ(h.index, 0);

  // Too far from every point, or outside the plot area: nothing.
  EXPECT_FALSE(pick_nearest(L, ImVec2(m1_measured.x + 200, L.frame_min.y + 5), 20).valid());
  EXPECT_FALSE(pick_nearest(L, ImVec2(L.frame_max.x + 5, m1_measured.y), 1000).valid());
}

TEST(PlotLayout, EveryPartFitsInsideTheCanvas) {
  const PlotLayout L = layout_800x400(size_spec());
  EXPECT_GT(L.frame_min.x, L.canvas_min.x);
  EXPECT_GT(L.frame_min.y, L.canvas_min.y);
  EXPECT_LT(L.frame_max.x, L.canvas_max.x);
  EXPECT_LT(L.frame_max.y, L.canvas_max.y);
  EXPECT_LT(L.x_title_pos.y + 16, L.canvas_max.y + 0.01f);
}

}  // namespace
}  // namespace fl::viz
