// The memory chart's numbers and bars, without a window.
#include "viz/memory_chart.h"

#include <gtest/gtest.h>

#include "tests/viz/viz_test_data.h"

namespace fl::viz {
namespace {

using testing::add_counters;
using testing::kMiB;
using testing::lesson_level;

constexpr int64_t k16M = int64_t(1) << 24;

TEST(MemoryChart, SavedBytesIsLevelZeroMinusTheShownLevel) {
  Measurement m0 = lesson_level("gelu_scale", k16M, 0, 30.0);
  Measurement m1 = lesson_level("gelu_scale", k16M, 1, 30.0);
  add_counters(&m0, 1.05);
  add_counters(&m1, 1.0);
  const MemoryInput in = memory_input(m1, m0);
  EXPECT_FALSE(in.baseline);
  EXPECT_DOUBLE_EQ(in.level0_textbook_bytes, 256.0 * kMiB);
  EXPECT_DOUBLE_EQ(in.saved_textbook_bytes,
                   static_cast<double>(m0.textbook_bytes() - m1.textbook_bytes()));
  EXPECT_DOUBLE_EQ(in.saved_textbook_bytes, 128.0 * kMiB);
  ASSERT_TRUE(in.saved_dram_known);
  const auto d0 = *m0.counters_total(), d1 = *m1.counters_total();
  EXPECT_DOUBLE_EQ(in.saved_dram_bytes,
                   static_cast<double>(d0.dram_read_bytes + d0.dram_write_bytes -
                                       d1.dram_read_bytes - d1.dram_write_bytes));
  ASSERT_EQ(in.groups.size(), 2u);  // the launch and the total
  EXPECT_EQ(in.total().kernel, "total");
  EXPECT_TRUE(in.counters);

  const MemoryLayout layout = layout_memory(in, ImVec2(0, 0), ImVec2(900, 260));
  EXPECT_DOUBLE_EQ(layout.saved_bytes, 128.0 * kMiB);
  EXPECT_EQ(layout.saved_value, "128.0 MiB") << "the big number";
  EXPECT_EQ(layout.saved_title, "saved by fusion (textbook)");
  std::string detail;
  for (const auto& l : layout.saved_detail) detail += l + " ";
  EXPECT_NE(detail.find("level 0 moves 256.0 MiB"), std::string::npos) << detail;
  EXPECT_NE(detail.find("50% less"), std::string::npos) << detail;
  EXPECT_NE(detail.find("measured in DRAM"), std::string::npos) << detail;

  const MemoryInput base = memory_input(m0, m0);
  EXPECT_TRUE(base.baseline);
  EXPECT_DOUBLE_EQ(base.saved_textbook_bytes, 0);
  EXPECT_EQ(layout_memory(base, ImVec2(0, 0), ImVec2(900, 260)).saved_title,
            "level 0 moves (textbook)");
}

// Peak device memory: the shown level's against level 0's, and every level's at this size in
// level order (other sizes left out); nothing said where no measurement knows it.
TEST(MemoryChart, PeakDeviceMemoryOfEveryLevelAtTheShownSize) {
  std::vector<Measurement> all;
  const int64_t peaks[] = {3279945728, 3279945728, 25165824, 25165824};
  for (int level = 3; level >= 0; --level) {  // out of order: the chart sorts
    Measurement m = lesson_level("attention", 4096, level, 30.0);
    m.peak_device_bytes = peaks[level];
    all.push_back(m);
  }
  Measurement other_size = all[0];
  other_size.size = 2048;
  other_size.peak_device_bytes = 1;
  all.push_back(other_size);
  const Measurement level0 = all[3];
  const Measurement flash = all[1];  // level 2
  const MemoryInput in = memory_input(flash, level0, &all);
  EXPECT_DOUBLE_EQ(in.peak_bytes, 25165824.0);
  ASSERT_EQ(in.peaks.size(), 4u);
  for (int level = 0; level < 4; ++level) {
    EXPECT_EQ(in.peaks[level].level, level);
    EXPECT_DOUBLE_EQ(in.peaks[level].bytes, double(peaks[level]));
  }
  const MemoryLayout layout = layout_memory(in, ImVec2(0, 0), ImVec2(1400, 400));
  std::string detail;
  for (const auto& l : layout.saved_detail) detail += l + " ";
  EXPECT_NE(detail.find("peak device memory: 24.0 MiB (level 0: 3.1 GiB)"), std::string::npos)
      << detail;
  EXPECT_NE(detail.find("levels 0 to 3: 3.1 GiB, 3.1 GiB, 24.0 MiB, 24.0 MiB"), std::string::npos)
      << detail;
  // A level that was not measured: the list names the levels it has.
  all.erase(all.begin() + 2);  // level 1
  const MemoryInput gap = memory_input(flash, level0, &all);
  std::string gap_detail;
  for (const auto& l : layout_memory(gap, ImVec2(0, 0), ImVec2(1400, 400)).saved_detail)
    gap_detail += l + " ";
  EXPECT_NE(gap_detail.find("levels 0, 2, 3: 3.1 GiB, 24.0 MiB, 24.0 MiB"), std::string::npos)
      << gap_detail;

  Measurement unknown = lesson_level("gelu_scale", k16M, 1, 30.0);
  const MemoryInput none = memory_input(unknown, unknown);
  EXPECT_TRUE(none.peaks.empty());
  std::string none_detail;
  for (const auto& l : layout_memory(none, ImVec2(0, 0), ImVec2(900, 260)).saved_detail)
    none_detail += l;
  EXPECT_EQ(none_detail.find("device memory"), std::string::npos) << none_detail;
}

TEST(MemoryChart, GroupedBarsPerLaunchAndTotalAreProportionalToBytes) {
  Measurement m0 = lesson_level("gelu_scale", k16M, 0, 30.0);
  add_counters(&m0, 1.0);
  const MemoryInput in = memory_input(m0, m0);
  const MemoryLayout layout = layout_memory(in, ImVec2(0, 0), ImVec2(1000, 300));
  ASSERT_EQ(layout.bars.size(), 3u * 3);  // gelu, scale, total x textbook, DRAM, L2
  EXPECT_EQ(layout.unit, "MiB");
  // The total's L2 bytes (1.5 x 256 MiB) are the tallest: the axis reaches at least that.
  EXPECT_GE(layout.axis_max_bytes, 384.0 * kMiB);
  const float frame_h = layout.frame_max.y - layout.frame_min.y;
  for (const auto& b : layout.bars) {
    EXPECT_NEAR(b.max.y - b.min.y, static_cast<float>(b.bytes / layout.axis_max_bytes) * frame_h,
                0.01f);
  }
  // gelu's textbook bar: 64 MiB read below 64 MiB written.
  const MemoryBarRect& gelu = layout.bars[0];
  EXPECT_EQ(gelu.kind, MemoryBar::textbook);
  EXPECT_DOUBLE_EQ(gelu.bytes, 128.0 * kMiB);
  EXPECT_NEAR(gelu.max.y - gelu.split_y, gelu.split_y - gelu.min.y, 0.01f);
  // The total's textbook bar is twice gelu's.
  EXPECT_NEAR((layout.bars[6].max.y - layout.bars[6].min.y) / (gelu.max.y - gelu.min.y), 2.0f,
              1e-3f);
  // Groups left to right, each labelled; every tick label has the unit.
  ASSERT_EQ(layout.group_labels.size(), 3u);
  EXPECT_EQ(layout.group_labels[2].second, "total");
  EXPECT_LT(layout.bars[0].max.x, layout.bars[3].min.x);
  for (const auto& [y, label] : layout.y_ticks) EXPECT_NE(label.find("MiB"), std::string::npos);
  EXPECT_EQ(layout.bars[2].value_label, "192 MiB") << "gelu's L2 bytes, 1.5 x 128 MiB";
  const std::string r = memory_readout(in, layout.bars[1]);
  EXPECT_NE(r.find("100% of the textbook"), std::string::npos) << r;
  EXPECT_EQ(memory_hit(layout, middle(layout.bars[4].min, layout.bars[4].max)), 4);
}

TEST(MemoryChart, WithoutCountersOnlyTextbookBarsAndTheReason) {
  Measurement m0 = lesson_level("gelu_scale", 1 << 20, 0, 3.0);
  Measurement m1 = lesson_level("gelu_scale", 1 << 20, 1, 3.0);
  m1.counters_status = CountersStatus::unavailable;
  m1.counters_note = "counters need admin rights (ERR_NVGPUCTRPERM)";
  const MemoryInput in = memory_input(m1, m0);
  EXPECT_FALSE(in.counters);
  EXPECT_FALSE(in.saved_dram_known);
  EXPECT_DOUBLE_EQ(in.saved_textbook_bytes, 8.0 * kMiB);
  const MemoryLayout layout = layout_memory(in, ImVec2(0, 0), ImVec2(1200, 260));
  EXPECT_EQ(layout.bars.size(), 2u) << "launch + total, textbook only";
  EXPECT_EQ(layout.legend.size(), 1u);
  EXPECT_NE(layout.counters_note.find("ERR_NVGPUCTRPERM"), std::string::npos)
      << layout.counters_note;
}

TEST(MemoryChart, TheBadgeSaysWhetherTheOutputIsCorrect) {
  Measurement m1 = lesson_level("gelu_scale", 1 << 20, 1, 3.0);
  const MemoryLayout ok = layout_memory(memory_input(m1, m1), ImVec2(0, 0), ImVec2(900, 260));
  EXPECT_TRUE(ok.badge_ok);
  EXPECT_NE(ok.badge.find("output correct"), std::string::npos);
  EXPECT_NE(ok.badge.find("3.6e-08"), std::string::npos);
  m1.check.passed = false;
  m1.check.rel_l2_error = 0.25;
  const MemoryLayout bad = layout_memory(memory_input(m1, m1), ImVec2(0, 0), ImVec2(900, 260));
  EXPECT_FALSE(bad.badge_ok);
  EXPECT_NE(bad.badge.find("WRONG"), std::string::npos);
  EXPECT_NE(bad.badge.find("2.5e-01 > tol. 1.0e-05"), std::string::npos) << bad.badge;
}

}  // namespace
}  // namespace fl::viz
