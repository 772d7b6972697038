#include "viz/bandwidth_view.h"

#include <gtest/gtest.h>

#include "tests/support/recorded.h"

namespace fl::viz {
namespace {

TEST(BandwidthSeries, OneSeriesPerLevelPlusTheCopyReference) {
  std::vector<Measurement> history;
  for (int64_t size : {int64_t(1) << 20, int64_t(1) << 26}) {
    for (int level : {0, 1}) {
      Measurement m =
          testing_support::recorded_measurement("gelu_scale", size, level, level == 0 ? 200 : 100);
      LaunchResult l;
      l.textbook.bytes_read = l.textbook.bytes_written = (level == 0 ? 2 : 1) * 1000000;
      m.launches.push_back(l);
      m.chain_copy_gbps = 25;
      history.push_back(m);
    }
  }
  const auto series = bandwidth_series(history, "gelu_scale", Precision::fp32, CacheMode::cold);
  ASSERT_EQ(series.size(), 3u);  // level 0, level 1, copy
  EXPECT_EQ(series[0].label, "level 0 unfused");
  ASSERT_EQ(series[0].points.size(), 2u);
  EXPECT_DOUBLE_EQ(series[0].points[0].y, 20.0);  // 4e6 bytes in 200 us
  EXPECT_DOUBLE_EQ(series[1].points[0].y, 20.0);  // 2e6 bytes in 100 us: the same rate
  EXPECT_TRUE(series[2].hollow_markers);
  EXPECT_DOUBLE_EQ(series[2].points[1].y, 25.0);
  EXPECT_TRUE(bandwidth_series(history, "relu_scale", Precision::fp32, CacheMode::cold).empty());
}

}  // namespace
}  // namespace fl::viz
