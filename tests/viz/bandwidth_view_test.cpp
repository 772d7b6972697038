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

// PyTorch peers on the same plot: the top level's textbook bytes over the peer's time, at the
// sizes we measured; torch.compile first; a failed peer point gives none; warm mode none at all.
TEST(BandwidthPeerSeries, TopLevelBytesOverThePeersTime) {
  std::vector<Measurement> history;
  for (int level : {0, 1}) {
    Measurement m = testing_support::recorded_measurement("gelu_scale", 1 << 20, level, 100);
    LaunchResult l;
    l.textbook.bytes_read = l.textbook.bytes_written = (level == 0 ? 2 : 1) * 1000000;
    m.launches.push_back(l);
    history.push_back(m);
  }
  PeerFile peers;
  auto series = [](const char* id, const char* label, double us, bool passed) {
    PeerSeries s;
    s.lesson = "gelu_scale";
    s.peer = id;
    s.label = label;
    PeerPoint p;
    p.size = 1 << 20;
    p.median_us = us;
    p.passed = passed;
    PeerPoint elsewhere = p;
    elsewhere.size = 1 << 10;  // a size we did not measure: no point
    s.points = {elsewhere, p};
    return s;
  };
  peers.series = {series("eager", "PyTorch eager", 400, true),
                  series("compile", "torch.compile", 200, true),
                  series("cuda_graph", "eager in a CUDA graph", 300, false)};
  const auto out =
      bandwidth_peer_series(history, peers, "gelu_scale", Precision::fp32, CacheMode::cold, "!");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].label, "torch.compile!");
  ASSERT_EQ(out[0].points.size(), 1u);
  EXPECT_DOUBLE_EQ(out[0].points[0].y, 10.0);  // 2e6 bytes of the fused level in 200 us
  EXPECT_DOUBLE_EQ(out[1].points[0].y, 5.0);
  EXPECT_TRUE(out[0].hollow_markers);
  EXPECT_TRUE(bandwidth_peer_series(history, peers, "gelu_scale", Precision::fp32, CacheMode::warm)
                  .empty());
}

}  // namespace
}  // namespace fl::viz
