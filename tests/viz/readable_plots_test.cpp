// Issue 15's readable plots, as computed layouts (no window): a log y axis where the values span
// more than 10x, the 1x line and the p20-p80 band in the legend, the roofline's compute roof
// from a measured GEMM or the datasheet, one byte axis for every level of the memory chart, the
// flow view's two lanes and shared memory, the palette's roles, the overlap checker, SVG export.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "tests/viz/viz_test_data.h"
#include "viz/flow_view.h"
#include "viz/memory_chart.h"
#include "viz/palette.h"
#include "viz/roofline_view.h"
#include "viz/speedup_view.h"
#include "viz/svg.h"
#include "viz/text.h"

namespace fl::viz {
namespace {

using testing::add_counters;
using testing::add_records;
using testing::h200;

const ImVec2 kMin(0, 0), kMax(1200, 600);

// The ffn top level at 0.06x beside its 11.9x byte-ratio limit (the picture).
SpeedupView ffn_like() {
  SpeedupView v;
  v.size_unit = "tokens";
  v.size_min = 16;
  v.size_max = 16384;
  v.level = 2;
  v.top_level = 2;
  v.measured = {{16, 0.9, 0.85, 0.95}, {1024, 0.3, 0.28, 0.32}, {16384, 0.06, 0.055, 0.065}};
  v.byte_ratio_limit = 11.9;
  return v;
}

TEST(ReadablePlots, ValuesSpanningMoreThanTenTimesGetALogAxisWithEveryPointInside) {
  const PlotLayout L = layout_plot(speedup_plot_spec(ffn_like()), kMin, kMax);
  ASSERT_TRUE(L.y_log);
  EXPECT_LE(L.y_min, 0.055);
  EXPECT_GE(L.y_max, 11.9);
  for (const auto& s : L.series) {
    for (const ImVec2& p : s.screen) {
      EXPECT_LT(p.y, L.frame_max.y - 5) << "0.06x is above the axis, not flat on it";
      EXPECT_GT(p.y, L.frame_min.y);
    }
  }
  // 0.06 and 0.6 are a decade apart on screen, as 1 and 10 are.
  EXPECT_NEAR(L.y_to_screen(0.06) - L.y_to_screen(0.6), L.y_to_screen(1) - L.y_to_screen(10), 0.01);
  // A narrow range stays linear and starts at zero.
  SpeedupView narrow = ffn_like();
  narrow.measured = {{16, 1.5}, {1024, 1.9}};
  narrow.byte_ratio_limit = 2.0;
  const PlotLayout N = layout_plot(speedup_plot_spec(narrow), kMin, kMax);
  EXPECT_FALSE(N.y_log);
  EXPECT_EQ(N.y_min, 0.0);
}

TEST(ReadablePlots, EverySpeedupPlotHasTheOneXLineAndExplainsTheBandInItsLegend) {
  const PlotLayout L = layout_plot(speedup_plot_spec(ffn_like()), kMin, kMax);
  bool unity = false, limit = false, band = false;
  for (const auto& line : L.lines) {
    if (line.value == 1.0) unity = true;
    if (line.value == 11.9) limit = true;
    EXPECT_EQ(line.color & 0x00FFFFFFu, line.value == 1.0 ? palette::reference_dim & 0x00FFFFFFu
                                                          : palette::reference & 0x00FFFFFFu)
        << "reference lines are neutral grey";
  }
  for (const auto& e : L.legend) {
    if (e.kind == PlotLegendEntry::band) {
      band = true;
      EXPECT_NE(e.label.find("p20-p80"), std::string::npos);
    }
  }
  EXPECT_TRUE(unity);
  EXPECT_TRUE(limit);
  EXPECT_TRUE(band);
  // The measured series wears its level's colour: the top level's green.
  EXPECT_EQ(L.series.back().color, palette::level_top);
}

TEST(ReadablePlots, TheRooflineNeverSaysUnknownOnAKnownGpu) {
  std::string source;
  // Nothing measured: the datasheet, labelled so.
  EXPECT_DOUBLE_EQ(compute_roof_gflops("NVIDIA H200", Precision::fp32, {}, &source), 67000.0);
  EXPECT_NE(source.find("datasheet"), std::string::npos);
  EXPECT_GT(datasheet_peak_gflops("NVIDIA H100 80GB HBM3", Precision::bf16), 900000.0);
  EXPECT_GT(datasheet_peak_gflops("Tesla V100-SXM2-16GB", Precision::fp32), 15000.0);
  EXPECT_GT(datasheet_peak_gflops("NVIDIA A100-SXM4-80GB", Precision::fp32), 19000.0);
  // A measured cuBLASLt GEMM of the same precision wins.
  Measurement gemm = testing::lesson_level("linear_gelu", 4096, 0, 100.0);
  ASSERT_FALSE(gemm.launches.empty());
  const double flops = gemm.launches[0].textbook.flops;
  const double got = compute_roof_gflops("NVIDIA H200", Precision::fp32, {gemm}, &source);
  EXPECT_NEAR(got, flops / (100.0 * 1e3), 1e-6);
  EXPECT_NE(source.find("measured"), std::string::npos);
  // On the plot: a compute roof with its source in the label, no "unknown" note.
  const Measurement a = testing::lesson_level("gelu_scale", 1 << 24, 0, 40.0);
  const Measurement b = testing::lesson_level("gelu_scale", 1 << 24, 1, 40.0);
  RooflineInput in = roofline_input({a, b}, 4315, 1, 67000);
  in.compute_roof_source = "datasheet, NVIDIA H200, fp32";
  const RooflineLayout L = layout_roofline(in, kMin, kMax);
  EXPECT_TRUE(L.compute_visible);
  EXPECT_NE(L.compute_label.find("datasheet"), std::string::npos);
  EXPECT_EQ(L.note.find("unknown"), std::string::npos);
}

TEST(ReadablePlots, TheMemoryChartKeepsOneByteAxisForEveryLevelAtASize) {
  const Measurement l0 = testing::lesson_level("gelu_scale", 1 << 24, 0, 40.0);
  const Measurement l1 = testing::lesson_level("gelu_scale", 1 << 24, 1, 40.0);
  const std::vector<Measurement> both = {l0, l1};
  const MemoryLayout a = layout_memory(memory_input(l0, l0, &both), kMin, kMax);
  const MemoryLayout b = layout_memory(memory_input(l1, l0, &both), kMin, kMax);
  EXPECT_DOUBLE_EQ(a.axis_max_bytes, b.axis_max_bytes) << "moving the fusion slider keeps the axis";
  // So the fused total bar is shorter than level 0's: the saving shows as bars shrinking.
  const auto total_height = [](const MemoryLayout& L) {
    for (auto it = L.bars.rbegin(); it != L.bars.rend(); ++it) {
      if (it->kind == MemoryBar::textbook) return it->max.y - it->min.y;
    }
    return 0.0f;
  };
  EXPECT_LT(total_height(b), total_height(a) * 0.6f);
  // Without the other levels, each level scales to itself (the old behaviour).
  const MemoryLayout alone = layout_memory(memory_input(l1, l0), kMin, kMax);
  EXPECT_LT(alone.axis_max_bytes, a.axis_max_bytes);
}

TEST(ReadablePlots, TheFlowViewDrawsLevelZeroAndTheLevelAsTwoLanesOnOneAxis) {
  const Lesson& lesson = *find_lesson("residual_layernorm");
  const int top = lesson.level_count() - 1;
  Measurement l0 = testing::lesson_level("residual_layernorm", 1 << 16, 0, 30.0);
  Measurement lt = testing::lesson_level("residual_layernorm", 1 << 16, top, 30.0);
  add_records(&l0, 2.0);
  add_records(&lt, 2.0);
  for (auto& r : lt.records) r.dynamic_shared_bytes = 3072;  // LayerNorm rows staged
  for (auto& r : l0.records) r.dynamic_shared_bytes = 0, r.static_shared_bytes = 0;
  DeviceFacts d = testing::h200();
  d.cc_major = 9;
  d.cc_minor = 0;
  const FlowInput in = flow_input(lt, &lesson, d, &l0);
  ASSERT_EQ(in.level0_lane.size(), l0.launches.size());
  const FlowLayout L = layout_flow(in, 0.5, kMin, kMax);
  ASSERT_EQ(L.level0_strip.size(), l0.launches.size());
  ASSERT_EQ(L.strip.size(), lt.launches.size());
  EXPECT_LT(L.level0_strip_max.y, L.strip_min.y + 0.5f) << "level 0's lane above this level's";
  EXPECT_FLOAT_EQ(L.level0_strip_min.x, L.strip_min.x)
      << "one time axis: both lanes start together";
  // Level 0 takes longer, so its lane reaches further right on the shared axis.
  EXPECT_GT(L.level0_strip.back().x1, L.strip.back().x1);
  // The top level stages rows in shared memory: the SM box draws it and the text says so.
  EXPECT_TRUE(in.trips[0].stages_in_shared);
  EXPECT_TRUE(L.shared_visible);
  EXPECT_NE(L.shared_label.find("shared memory"), std::string::npos);
  EXPECT_NE(L.status.find("stages data"), std::string::npos) << L.status;
  // Its level table keeps the row in registers (shared memory only stages it): the box says so.
  ASSERT_FALSE(L.on_chip_lines.empty());
  EXPECT_EQ(L.on_chip_lines[0].rfind("kept in registers", 0), 0u) << L.on_chip_lines[0];
  // The capacity sentence uses the GPU's own numbers.
  EXPECT_NE(L.capacity.find("132 SMs"), std::string::npos) << L.capacity;
  EXPECT_NE(L.capacity.find("228.0 KiB shared"), std::string::npos) << L.capacity;
  // Level 0 itself: one lane, no level-0 copy of it.
  const FlowLayout L0 = layout_flow(flow_input(l0, &lesson, d, &l0), 0.5, kMin, kMax);
  EXPECT_TRUE(L0.level0_strip.empty());
}

TEST(ColourLanguage, LevelsHaveFixedColoursAndReadsAndWritesDiffer) {
  EXPECT_EQ(palette::level_color(0, 2), palette::level0);
  EXPECT_EQ(palette::level_color(2, 2), palette::level_top);
  EXPECT_EQ(palette::level_color(1, 2), palette::level_between[0]);
  EXPECT_EQ(palette::level_color(1, 1), palette::level_top) << "the top level is always green";
  EXPECT_NE(palette::reads, palette::writes);
  EXPECT_NE(palette::compared, palette::level0);
  EXPECT_NE(palette::compared, palette::level_top);
}

TEST(TextThatFits, TheCheckerFindsOverlapsAndTextCrossingItsClipRect) {
  TextRect a{ImVec2(0, 0), ImVec2(50, 16), ImVec2(0, 0), ImVec2(100, 100), "a"};
  TextRect b{ImVec2(40, 10), ImVec2(90, 26), ImVec2(0, 0), ImVec2(100, 100), "b"};
  TextRect c{ImVec2(60, 30), ImVec2(120, 46), ImVec2(0, 0), ImVec2(100, 100), "c"};
  TextRect d{ImVec2(0, 17), ImVec2(30, 33), ImVec2(0, 0), ImVec2(100, 100), "d"};
  EXPECT_EQ(text_problems({a, d}).size(), 0u) << "stacked lines do not overlap";
  EXPECT_EQ(text_problems({a, b}).size(), 1u);
  EXPECT_EQ(text_problems({c}).size(), 1u) << "c crosses the right edge";
}

TEST(SvgExport, APlotBecomesAnSvgDocumentWrittenAtomically) {
  const PlotLayout L = layout_plot(speedup_plot_spec(ffn_like()), kMin, kMax);
  const std::string svg = plot_svg(L);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("byte-ratio limit 11.9x"), std::string::npos);
  EXPECT_NE(svg.find("1x: as fast as level 0"), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos) << "reference lines dashed";
  EXPECT_NE(svg.find("rgb(0,158,115)"), std::string::npos) << "the top level's Okabe-Ito green";
  const std::string path = ::testing::TempDir() + "/fusionlab_plot_test.svg";
  std::string why;
  ASSERT_TRUE(write_file_atomic(path, svg, &why)) << why;
  std::ifstream in(path);
  std::stringstream back;
  back << in.rdbuf();
  EXPECT_EQ(back.str(), svg);
  std::remove(path.c_str());
  EXPECT_FALSE(write_file_atomic("/nonexistent-folder/x.svg", svg, &why));
  EXPECT_NE(why.find("/nonexistent-folder/x.svg"), std::string::npos) << why;
}

TEST(SpeedupCrossover, NamesTheNeighbouringSizesWhereTheCurveCrosses1x) {
  // The fused FFN on an H100 (bf16, cold): faster than the chain up to 16 tokens, slower at 64.
  std::vector<SpeedupPoint> points = {{1, 1.19}, {4, 1.21}, {16, 1.23}, {64, 0.58}, {256, 0.40}};
  EXPECT_EQ(crossover_text(points, "tokens"), "crosses 1x between 16 and 64 tokens");
  points = {{1024, 0.9}, {4096, 1.4}};  // starting to pay off also counts
  EXPECT_EQ(crossover_text(points, "elements"), "crosses 1x between 1K and 4K elements");
  points = {{1, 1.5}, {4, 1.2}};
  EXPECT_EQ(crossover_text(points, "tokens"), "");
  EXPECT_EQ(crossover_text({}, "tokens"), "");
}

}  // namespace
}  // namespace fl::viz
