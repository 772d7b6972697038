// A compared recording on the speedup and bandwidth plots, as layout data: its series is dashed,
// distinct in colour, labelled with its GPU and date, placed on the same axes as the measured
// one, and the legend moves to the corner where it hides least. The screenshot caption's layout.
#include <gtest/gtest.h>

#include <cstdio>

#include <algorithm>

#include "viz/bandwidth_view.h"
#include "viz/caption.h"
#include "viz/speedup_view.h"
#include "viz/svg.h"
#include "viz_test_data.h"

namespace fl::viz {
namespace {

const ImVec2 kCanvasMin(0, 0), kCanvasMax(800, 400);

SpeedupView view_with_overlay() {
  SpeedupView v;
  v.measured_label = "recorded on NVIDIA H200, 2026-11-22: level 1 fused vs 0 (fp32, cold L2)";
  v.measured = {{1 << 10, 2.5}, {1 << 20, 2.1}, {1 << 26, 2.03}};
  v.byte_ratio_limit = 2.0;
  SpeedupOverlay o;
  o.label = "compared: NVIDIA H200, 2026-11-22 (fp32, warm L2)";
  o.points = {{1 << 10, 7.5}, {1 << 20, 3.0}, {1 << 26, 2.0}};
  v.overlays.push_back(o);
  return v;
}

const PlotSeriesLayout* series_named(const PlotLayout& L, const std::string& prefix) {
  for (const auto& s : L.series) {
    if (s.label.rfind(prefix, 0) == 0) return &s;
  }
  return nullptr;
}

TEST(CompareOverlay, SpeedupOverlayIsDashedDistinctAndOnTheSameAxes) {
  const PlotLayout L = layout_plot(speedup_plot_spec(view_with_overlay()), kCanvasMin, kCanvasMax);
  const PlotSeriesLayout* measured = series_named(L, "recorded on");
  const PlotSeriesLayout* compared = series_named(L, "compared: NVIDIA H200, 2026-11-22");
  ASSERT_NE(measured, nullptr);
  ASSERT_NE(compared, nullptr);
  EXPECT_TRUE(compared->dashed);
  EXPECT_FALSE(measured->dashed);
  EXPECT_NE(compared->color, measured->color);
  EXPECT_EQ(compared->color, kCompareColor);
  // Drawn under the measured curve: earlier in the series list.
  EXPECT_LT(compared - L.series.data(), measured - L.series.data());
  // Same sizes, same screen x; the y range grew to hold the overlay's 7.5x.
  ASSERT_EQ(compared->screen.size(), measured->screen.size());
  for (size_t i = 0; i < measured->screen.size(); ++i) {
    EXPECT_FLOAT_EQ(compared->screen[i].x, measured->screen[i].x);
  }
  EXPECT_GE(L.y_max, 7.5);
  EXPECT_GE(compared->screen[0].y, L.frame_min.y);
  EXPECT_LT(compared->screen[0].y, measured->screen[0].y) << "7.5x sits above 2.5x";
}

TEST(CompareOverlay, WithoutAnOverlayTheSpecIsAsBefore) {
  SpeedupView v = view_with_overlay();
  v.overlays.clear();
  const PlotSpec spec = speedup_plot_spec(v);
  ASSERT_EQ(spec.series.size(), 1u);
  EXPECT_FALSE(spec.series[0].dashed);
}

TEST(CompareOverlay, TheLegendAvoidsTheData) {
  // Data crowding the bottom-right corner: the legend goes where it hides nothing.
  SpeedupView v = view_with_overlay();
  v.byte_ratio_limit = 0;
  v.measured = {{1 << 20, 0.2}, {1 << 24, 0.3}, {1 << 28, 0.2}};
  v.overlays[0].points = {{1 << 20, 0.25}, {1 << 24, 0.35}, {1 << 28, 0.3}};
  v.reference = {{1 << 10, 9.0}};  // and one point at the top-left
  v.reference_label = "tutorial";
  const PlotLayout L = layout_plot(speedup_plot_spec(v), kCanvasMin, ImVec2(1400, 400));
  EXPECT_EQ(L.legend_corner, 1) << "top-right is the free corner";
  for (const auto& s : L.series) {
    for (const ImVec2& p : s.screen) {
      const bool inside = p.x >= L.legend_min.x && p.x <= L.legend_max.x && p.y >= L.legend_min.y &&
                          p.y <= L.legend_max.y;
      EXPECT_FALSE(inside) << s.label;
    }
  }
  EXPECT_GE(L.legend_min.x, L.frame_min.x);
  EXPECT_LE(L.legend_max.x, L.frame_max.x);
  EXPECT_GE(L.legend_min.y, L.frame_min.y);
  // An empty plot keeps the legend bottom-right, as always.
  SpeedupView empty;
  empty.measured_label = "measured";
  EXPECT_EQ(layout_plot(speedup_plot_spec(empty), kCanvasMin, kCanvasMax).legend_corner, 0);
}

// The screenshot in docs/images/compare-gelu_scale-cold-vs-warm-speedup.png before the fix: a
// short plot (the views panel of a 1280 x 800 window) whose four-row legend hid the compared
// curve in every corner.
SpeedupView crowded_view() {
  SpeedupView v = view_with_overlay();
  v.measured = {{1 << 10, 2.5}, {1 << 12, 2.5}, {1 << 14, 2.5}, {1 << 20, 2.1}, {1 << 26, 2.03}};
  v.overlays[0].points = {{1 << 10, 6.3}, {1 << 12, 7.5}, {1 << 14, 6.4},
                          {1 << 16, 6.0}, {1 << 18, 5.0}, {1 << 20, 3.5},
                          {1 << 22, 3.0}, {1 << 24, 2.1}, {1 << 26, 2.0}};
  v.reference = {{1 << 10, 1.7}, {1 << 20, 1.6}, {1 << 24, 1.9}};
  v.reference_label = "tutorial, V100 (published)";
  return v;
}

TEST(CompareOverlay, OnAShortCrowdedPlotTheLegendMovesAboveTheFrame) {
  const ImVec2 canvas_max(800, 300);
  PlotStyle style;
  style.font_size = 16;
  const PlotLayout L =
      layout_plot(speedup_plot_spec(crowded_view()), kCanvasMin, canvas_max, style);
  ASSERT_TRUE(L.legend_outside) << "every corner of the frame hides part of a curve";
  // Six entries: tutorial, compared, measured, its p20-p80 band, the byte-ratio limit, 1x.
  ASSERT_EQ(L.legend_entries.size(), 6u);
  // The strip lies between the y title and the frame, and no entry overlaps the next one.
  EXPECT_GE(L.legend_min.y, kCanvasMin.y + style.font_size);
  EXPECT_LE(L.legend_max.y, L.frame_min.y);
  for (size_t i = 0; i < L.legend_entries.size(); ++i) {
    const ImVec2 e = L.legend_entries[i];
    EXPECT_GE(e.x, L.frame_min.x);
    EXPECT_LT(e.x, L.frame_max.x);
    EXPECT_LE(e.y + L.legend_row_height, L.frame_min.y + 0.5f);
    if (i > 0 && L.legend_entries[i - 1].y == e.y) EXPECT_GT(e.x, L.legend_entries[i - 1].x);
  }
  // Every data point is inside the (smaller) frame, none under the legend.
  for (const auto& s : L.series) {
    for (const ImVec2& p : s.screen) {
      EXPECT_GE(p.y, L.frame_min.y) << s.label;
      EXPECT_GT(p.y, L.legend_max.y) << s.label;
    }
  }
  EXPECT_GE(L.frame_max.y - L.frame_min.y, 4 * style.font_size) << "the plot keeps four lines";

  // The same data on a tall canvas has a free corner: the legend stays inside, in a box.
  const PlotLayout tall =
      layout_plot(speedup_plot_spec(crowded_view()), kCanvasMin, ImVec2(1800, 1000), style);
  EXPECT_FALSE(tall.legend_outside);
  EXPECT_TRUE(tall.legend_entries.empty());
  // And a canvas too short for a strip above a readable frame: the legend still hides no data
  // (beside the frame when that leaves it half the width, else above a smaller frame).
  for (const ImVec2 max : {ImVec2(800, 140), ImVec2(1800, 200), ImVec2(400, 140)}) {
    const PlotLayout tiny = layout_plot(speedup_plot_spec(crowded_view()), kCanvasMin, max, style);
    EXPECT_TRUE(tiny.legend_outside) << max.x << "x" << max.y;
    EXPECT_EQ(legend_over_data(tiny), 0) << max.x << "x" << max.y;
    EXPECT_EQ(tiny.legend_entries.size(), tiny.legend.size());
    if (tiny.legend_beside) {
      EXPECT_GE(tiny.frame_max.x - tiny.frame_min.x, (max.x - kCanvasMin.x) * 0.5f - 64);
      for (const ImVec2 e : tiny.legend_entries) EXPECT_GT(e.x, tiny.frame_max.x);
    }
  }
}

// The SVG export draws the legend where the window does: outside the frame whenever it would
// hide data (docs/VIEWS.md, "Speedup plot"), so no legend text lies on the plotted curves.
TEST(CompareOverlay, TheSvgLegendStaysOffTheDataToo) {
  PlotStyle style;
  style.font_size = 16;
  for (const ImVec2 max : {ImVec2(800, 300), ImVec2(800, 160), ImVec2(1800, 200)}) {
    const PlotLayout L = layout_plot(speedup_plot_spec(crowded_view()), kCanvasMin, max, style);
    ASSERT_TRUE(L.legend_outside);
    const std::string svg = plot_svg(L);
    for (const PlotLegendEntry& e : L.legend) {
      const size_t at = svg.find(">" + e.label + "</text>");
      ASSERT_NE(at, std::string::npos) << e.label;
      const size_t open = svg.rfind("<text x=\"", at);
      ASSERT_NE(open, std::string::npos);
      float x = 0, y = 0;
      ASSERT_EQ(std::sscanf(svg.c_str() + open, "<text x=\"%f\" y=\"%f\"", &x, &y), 2);
      // SVG coordinates are relative to the canvas; y is the baseline.
      const float fx0 = L.frame_min.x - kCanvasMin.x, fx1 = L.frame_max.x - kCanvasMin.x;
      const float fy0 = L.frame_min.y - kCanvasMin.y, fy1 = L.frame_max.y - kCanvasMin.y;
      const bool inside = x > fx0 && x < fx1 && y > fy0 && y - style.font_size < fy1;
      EXPECT_FALSE(inside) << e.label << " at " << x << "," << y << " in a " << max.x << "x"
                           << max.y << " plot";
    }
  }
}

// Three labelled values on each axis at least, however short the plot (two ticks, 0x and 5x,
// say nothing about the scale between them).
TEST(CompareOverlay, EveryAxisKeepsThreeLabelledTicks) {
  PlotStyle style;
  style.font_size = 16;
  for (float h : {120.0f, 150.0f, 200.0f, 400.0f}) {
    const PlotLayout L =
        layout_plot(speedup_plot_spec(crowded_view()), kCanvasMin, ImVec2(900, h), style);
    int x_labels = 0, y_labels = 0;
    for (const auto& t : L.x_ticks) x_labels += t.label.empty() ? 0 : 1;
    for (const auto& t : L.y_ticks) y_labels += t.label.empty() ? 0 : 1;
    EXPECT_GE(x_labels, 3) << h;
    EXPECT_GE(y_labels, 3) << h;
  }
}

TEST(CompareOverlay, BandwidthOverlayIsLighterDashedAndLabelledWithoutItsCopyCurve) {
  using testing::lesson_level;
  std::vector<Measurement> ms;
  for (int64_t size : {int64_t(1) << 20, int64_t(1) << 26}) {
    for (int level : {0, 1}) {
      Measurement m = lesson_level("gelu_scale", size, level, level == 0 ? 100 : 50);
      m.chain_copy_gbps = 4000;
      ms.push_back(m);
    }
  }
  const auto own = bandwidth_series(ms, "gelu_scale", Precision::fp32, CacheMode::cold);
  const auto over = bandwidth_overlay_series(ms, "gelu_scale", Precision::fp32, CacheMode::cold,
                                             "NVIDIA H100, 2026-12-01 (fp32, cold L2)");
  ASSERT_EQ(own.size(), 3u);   // two levels and the copy curve
  ASSERT_EQ(over.size(), 2u);  // two levels
  for (size_t i = 0; i < over.size(); ++i) {
    EXPECT_TRUE(over[i].dashed);
    EXPECT_FALSE(over[i].hollow_markers);
    EXPECT_EQ(over[i].label, own[i].label + ", NVIDIA H100, 2026-12-01 (fp32, cold L2)");
    // One legend row for the whole recording (the first level's), naming it.
    EXPECT_EQ(over[i].in_legend, i == 0);
    ASSERT_EQ(over[i].points.size(), own[i].points.size());
    EXPECT_DOUBLE_EQ(over[i].points[1].y, own[i].points[1].y);
    // The colour language: a compared recording is vermillion, whatever its level.
    EXPECT_EQ(over[i].color, palette::compared);
    EXPECT_NE(over[i].color, own[i].color);
  }
  // Both on one plot: the layout keeps the overlay's dashes.
  std::vector<PlotSeries> all = over;
  all.insert(all.end(), own.begin(), own.end());
  const PlotLayout L = layout_plot(bandwidth_plot_spec(all, "elements", 1024, int64_t(1) << 28),
                                   kCanvasMin, kCanvasMax);
  ASSERT_EQ(L.series.size(), 5u);
  EXPECT_TRUE(L.series[0].dashed);
  EXPECT_FALSE(L.series[2].dashed);
  EXPECT_EQ(L.series[0].legend_label, "dashed: NVIDIA H100, 2026-12-01 (fp32, cold L2)");
  EXPECT_TRUE(L.series[1].legend_label.empty()) << "the second compared level shares that row";
  EXPECT_EQ(L.series[2].legend_label, L.series[2].label);
}

TEST(Caption, PiecesFillLinesInOrderAndNeverSplit) {
  const std::vector<std::string> pieces = {"Fusion Lab",
                                           "NVIDIA H200 (recorded)",
                                           "gelu_scale, 64M elements = 256.0 MiB of fp32",
                                           "",
                                           "level 1 of 1: fused",
                                           "fp32, cold L2",
                                           "recorded 2026-11-22"};
  const auto width = [](const std::string& s) { return 8.0f * static_cast<float>(s.size()); };
  const CaptionLayout wide = layout_caption(pieces, 2000, 16, width);
  ASSERT_EQ(wide.lines.size(), 1u);
  EXPECT_EQ(wide.lines[0].rfind("Fusion Lab" + std::string(kCaptionSeparator) + "NVIDIA H200", 0),
            0u);
  const CaptionLayout narrow = layout_caption(pieces, 500, 16, width);
  ASSERT_GT(narrow.lines.size(), 1u);
  EXPECT_GT(narrow.height, wide.height);
  std::string joined;
  for (const auto& line : narrow.lines) {
    EXPECT_LE(width(line), 500 - 2 * narrow.padding) << line;
    joined += (joined.empty() ? "" : kCaptionSeparator) + line;
  }
  EXPECT_EQ(joined, wide.lines[0]) << "the same pieces in the same order";
  // A piece wider than the strip gets a line of its own.
  const CaptionLayout tiny = layout_caption({"a", std::string(100, 'x'), "b"}, 200, 16, width);
  EXPECT_EQ(tiny.lines.size(), 3u);
  EXPECT_EQ(layout_caption({}, 500, 16).height, 0);
}

}  // namespace
}  // namespace fl::viz
