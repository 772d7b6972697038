// The memory chart's numbers and bars, without a window.
#include "viz/memory_chart.h"

#include <gtest/gtest.h>

namespace fl::viz {
namespace {

Measurement level(int lvl, int launches, int64_t bytes_each, bool counters) {
  Measurement m;
  m.level = lvl;
  m.check.passed = true;
  for (int k = 0; k < launches; ++k) {
    LaunchResult l;
    l.textbook.kernel = "k" + std::to_string(k);
    l.textbook.bytes_read = bytes_each;
    l.textbook.bytes_written = bytes_each;
    if (counters) l.counters = LaunchCounters{bytes_each, bytes_each + 10, 3 * bytes_each};
    m.launches.push_back(l);
  }
  return m;
}

TEST(MemoryChart, SavedBytesIsLevelZeroMinusTheShownLevel) {
  const Measurement unfused = level(0, 2, 1000, true), fused = level(1, 1, 1000, true);
  const MemoryInput in = memory_input(fused, unfused);
  EXPECT_DOUBLE_EQ(in.saved_textbook_bytes, 4000 - 2000);
  EXPECT_DOUBLE_EQ(in.saved_dram_bytes, (2 * 2010) - 2010);
  ASSERT_EQ(in.rows.size(), 2u);  // the launch and the total
  EXPECT_EQ(in.rows.back().kernel, "total");
  EXPECT_TRUE(in.counters);
  EXPECT_DOUBLE_EQ(memory_input(unfused, unfused).saved_textbook_bytes, 0);
}

TEST(MemoryChart, BarsAreProportionalToBytes) {
  const Measurement unfused = level(0, 2, 1000, true);
  const MemoryInput in = memory_input(unfused, unfused);
  const MemoryLayout layout = layout_memory(in, ImVec2(0, 0), ImVec2(1100, 300), 100);
  ASSERT_EQ(layout.bars.size(), 3u * kMemoryBarKinds);  // 2 launches + total, 5 bars each
  EXPECT_DOUBLE_EQ(layout.scale_bytes, 6000);  // the total's L2 bytes are the largest
  // Row 0's textbook read (1000 B) is a sixth of the full 1000 px width.
  EXPECT_NEAR(layout.bars[0].max.x - layout.bars[0].min.x, 1000.0f / 6, 0.01f);
}

TEST(MemoryChart, WithoutCountersOnlyTextbookBars) {
  const Measurement fused = level(1, 1, 500, false), unfused = level(0, 2, 500, false);
  const MemoryInput in = memory_input(fused, unfused);
  EXPECT_FALSE(in.counters);
  EXPECT_LT(in.saved_dram_bytes, 0);
  const MemoryLayout layout = layout_memory(in, ImVec2(0, 0), ImVec2(500, 100), 50);
  EXPECT_EQ(layout.bars.size(), 2u * 2);  // launch + total, textbook read and write
}

}  // namespace
}  // namespace fl::viz
