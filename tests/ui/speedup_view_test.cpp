// The speedup series built from the results model (no GPU: measurements are made up here).
#include "viz/speedup_view.h"

#include <gtest/gtest.h>

#include "kernels/catalog.h"
#include "tests/support/recorded.h"

namespace fl::viz {
namespace {

Measurement fake(int64_t size, int level, double chain_us, bool passed = true) {
  Measurement m = testing_support::recorded_measurement("gelu_scale", size, level, chain_us);
  m.check.passed = passed;
  return m;
}

TEST(SpeedupSeries, TwoLevelsOfOneSizeGiveOnePoint) {
  const std::vector<Measurement> ms = {fake(1 << 24, 0, 350.0), fake(1 << 24, 1, 175.0)};
  const auto points = speedup_series(ms, "gelu_scale", Precision::fp32, CacheMode::cold);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].size, 1 << 24);
  EXPECT_DOUBLE_EQ(points[0].speedup, 2.0);
}

TEST(SpeedupSeries, AFailedCheckGivesNoPoint) {
  EXPECT_TRUE(speedup_series({fake(1 << 20, 0, 30.0), fake(1 << 20, 1, 10.0, false)}, "gelu_scale",
                             Precision::fp32, CacheMode::cold)
                  .empty());
  EXPECT_TRUE(speedup_series({fake(1 << 20, 0, 30.0, false), fake(1 << 20, 1, 10.0)}, "gelu_scale",
                             Precision::fp32, CacheMode::cold)
                  .empty());
}

TEST(SpeedupSeries, NeedsBothLevelsAndMatchingLessonPrecisionAndCache) {
  EXPECT_TRUE(
      speedup_series({fake(1 << 20, 0, 30.0)}, "gelu_scale", Precision::fp32, CacheMode::cold)
          .empty());
  const std::vector<Measurement> ms = {fake(1 << 20, 0, 30.0), fake(1 << 20, 1, 20.0)};
  EXPECT_TRUE(speedup_series(ms, "relu_scale", Precision::fp32, CacheMode::cold).empty());
  EXPECT_TRUE(speedup_series(ms, "gelu_scale", Precision::bf16, CacheMode::cold).empty());
  EXPECT_TRUE(speedup_series(ms, "gelu_scale", Precision::fp32, CacheMode::warm).empty());
}

TEST(SpeedupSeries, SortedBySizeAndANewRunReplacesThePointAtItsSize) {
  std::vector<Measurement> history;
  merge_measurements(&history, {fake(1 << 24, 0, 300.0), fake(1 << 24, 1, 200.0)});
  merge_measurements(&history, {fake(1 << 10, 0, 10.0), fake(1 << 10, 1, 8.0)});
  merge_measurements(&history, {fake(1 << 24, 0, 360.0), fake(1 << 24, 1, 180.0)});
  EXPECT_EQ(history.size(), 4u);
  const auto points = speedup_series(history, "gelu_scale", Precision::fp32, CacheMode::cold);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].size, 1 << 10);
  EXPECT_DOUBLE_EQ(points[0].speedup, 1.25);
  EXPECT_EQ(points[1].size, 1 << 24);
  EXPECT_DOUBLE_EQ(points[1].speedup, 2.0);
}

TEST(SpeedupView, ByteRatioLimitOfGeluScaleIsTwo) {
  const Lesson* lesson = find_lesson("gelu_scale");
  ASSERT_NE(lesson, nullptr);
  EXPECT_DOUBLE_EQ(byte_ratio_limit(*lesson, 1 << 24, Precision::fp32), 2.0);
}

TEST(SpeedupView, SpecCarriesSeriesLimitAndMarker) {
  SpeedupView view;
  view.measured = {{1 << 20, 1.5}};
  view.reference_label = "tutorial, V100 (published)";
  view.reference = {{1 << 10, 1.72}, {1 << 20, 1.59}};
  view.byte_ratio_limit = 2.0;
  view.current_size = 1 << 24;
  const PlotSpec spec = speedup_plot_spec(view);
  ASSERT_EQ(spec.series.size(), 2u);
  EXPECT_TRUE(spec.series[0].hollow_markers);  // the reference is drawn apart from measurements
  EXPECT_EQ(spec.series[1].points.size(), 1u);
  EXPECT_TRUE(spec.reference.enabled);
  EXPECT_EQ(spec.reference.label, "byte-ratio limit 2.0x");
  EXPECT_TRUE(spec.marker.enabled);
  EXPECT_EQ(spec.marker.label, "16M");
  EXPECT_EQ(spec.x_format(1 << 20), "1M");
}

}  // namespace
}  // namespace fl::viz

namespace fl::viz {
namespace {

// The measured series carries the p20-p80 spread of the repetitions as a band around each point.
TEST(SpeedupSeries, CarriesTheP20P80Band) {
  Measurement unfused, fused;
  unfused.lesson = fused.lesson = "gelu_scale";
  unfused.size = fused.size = 1 << 20;
  fused.level = 1;
  unfused.check.passed = fused.check.passed = true;
  unfused.chain_time_us = {20, 18, 25, 19, 21, 50};  // median, min, max, p20, p80, count
  fused.chain_time_us = {10, 9, 12, 9.5, 10.5, 50};
  const auto series =
      speedup_series({unfused, fused}, "gelu_scale", Precision::fp32, CacheMode::cold);
  ASSERT_EQ(series.size(), 1u);
  EXPECT_DOUBLE_EQ(series[0].speedup, 2.0);
  EXPECT_DOUBLE_EQ(series[0].lo, 19 / 10.5);
  EXPECT_DOUBLE_EQ(series[0].hi, 21 / 9.5);
  EXPECT_LT(series[0].lo, series[0].speedup);
  EXPECT_GT(series[0].hi, series[0].speedup);
}

}  // namespace
}  // namespace fl::viz

namespace fl::viz {
namespace {

// PyTorch peers as speedups over our level 0 at the sizes both have: torch.compile first, a
// failed peer point or a size without our level 0 gives no point, warm mode gives no series.
TEST(PeerSpeedupSeries, SpeedupOverOurLevelZero) {
  std::vector<Measurement> ours = {
      testing_support::recorded_measurement("gelu_scale", 1024, 0, 3.0),
      testing_support::recorded_measurement("gelu_scale", 1024, 1, 1.5),
      testing_support::recorded_measurement("gelu_scale", 1 << 20, 0, 8.0),
      testing_support::recorded_measurement("gelu_scale", 4096, 0, 4.0)};
  PeerFile peers;
  peers.device_name = "NVIDIA H100 80GB HBM3";
  auto series = [](const char* id, const char* label, std::vector<PeerPoint> points) {
    PeerSeries s;
    s.lesson = "gelu_scale";
    s.precision = Precision::fp32;
    s.peer = id;
    s.label = label;
    s.points = std::move(points);
    return s;
  };
  auto point = [](int64_t size, double us, bool passed = true) {
    PeerPoint p;
    p.size = size;
    p.median_us = p.p20_us = p.p80_us = us;
    p.passed = passed;
    return p;
  };
  peers.series = {series("eager", "PyTorch eager", {point(1 << 20, 16.0)}),
                  series("compile", "torch.compile",
                         {point(1024, 2.0), point(4096, 1.0, false), point(1 << 20, 4.0),
                          point(1 << 24, 50.0)})};
  const auto out = peer_speedup_series(ours, peers, "gelu_scale", Precision::fp32, CacheMode::cold,
                                       " (recorded on X)");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].label, "torch.compile (recorded on X)");
  ASSERT_EQ(out[0].points.size(), 2u);  // 4K failed its check, 16M has no level 0 of ours
  EXPECT_EQ(out[0].points[0].size, 1024);
  EXPECT_DOUBLE_EQ(out[0].points[0].speedup, 1.5);
  EXPECT_DOUBLE_EQ(out[0].points[1].speedup, 2.0);
  EXPECT_EQ(out[1].label, "PyTorch eager (recorded on X)");
  ASSERT_EQ(out[1].points.size(), 1u);
  EXPECT_DOUBLE_EQ(out[1].points[0].speedup, 0.5);
  EXPECT_TRUE(
      peer_speedup_series(ours, peers, "gelu_scale", Precision::fp32, CacheMode::warm).empty());
  EXPECT_TRUE(
      peer_speedup_series(ours, peers, "gelu_scale", Precision::bf16, CacheMode::cold).empty());
  // The plot draws them as reference series, after the measured one's spec is built.
  SpeedupView view;
  view.peers = out;
  const PlotSpec spec = speedup_plot_spec(view);
  int peer_series = 0;
  for (const PlotSeries& s : spec.series) peer_series += s.hollow_markers ? 1 : 0;
  EXPECT_EQ(peer_series, 2);
}

}  // namespace
}  // namespace fl::viz

namespace fl::viz {
namespace {

// The portable kernels' series: the same level, dashed with hollow markers in the level's own
// colour, after the measured curve, with its shorter legend text.
TEST(SpeedupView, ThePortableSeriesIsTheLevelsColourDashed) {
  std::vector<Measurement> portable = {fake(1 << 20, 0, 30.0), fake(1 << 20, 1, 20.0)};
  for (Measurement& m : portable) m.chosen_as_cc = 86;
  SpeedupView view;
  view.level = 1;
  view.top_level = 1;
  view.measured = {{1 << 20, 2.0}};
  view.portable.label = "portable kernels (as on compute capability 8.6), measured on an H100";
  view.portable.points =
      speedup_series(portable, "gelu_scale", Precision::fp32, CacheMode::cold, 1);
  view.portable_legend = "portable kernels (as on 8.6)";
  ASSERT_EQ(view.portable.points.size(), 1u);
  EXPECT_DOUBLE_EQ(view.portable.points[0].speedup, 1.5);
  const PlotSpec spec = speedup_plot_spec(view);
  ASSERT_EQ(spec.series.size(), 2u);
  const PlotSeries& p = spec.series[1];  // after the measured curve: the legend reads on
  EXPECT_EQ(p.legend_label, "portable kernels (as on 8.6)");
  EXPECT_TRUE(p.dashed);
  EXPECT_TRUE(p.hollow_markers);
  EXPECT_EQ(p.color, spec.series[0].color);  // the level's colour, as the measured curve
  EXPECT_FALSE(spec.series[0].dashed);
  // No points: no series.
  view.portable.points.clear();
  EXPECT_EQ(speedup_plot_spec(view).series.size(), 1u);
}

}  // namespace
}  // namespace fl::viz
