#include "model/results.h"

#include <gtest/gtest.h>

namespace fl {
namespace {

TEST(Stats, MedianAndQuantilesOfKnownSamples) {
  const Stats s = summarize({5, 1, 4, 2, 3});
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.p20, 1.8);  // rank 0.8 between 1 and 2
  EXPECT_DOUBLE_EQ(s.p80, 4.2);
  const Stats even = summarize({1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(even.median, 2.5);
  EXPECT_EQ(summarize({}).count, 0);
}

Measurement timed(double us, int64_t bytes, bool correct = true) {
  Measurement m;
  m.chain_time_us.median = us;
  LaunchResult l;
  l.textbook.bytes_read = bytes / 2;
  l.textbook.bytes_written = bytes / 2;
  m.launches.push_back(l);
  m.check.passed = correct;
  return m;
}

TEST(Results, SpeedupAndBandwidthFromMedians) {
  const Measurement unfused = timed(200, 4000000), fused = timed(100, 2000000);
  EXPECT_DOUBLE_EQ(speedup(unfused, fused), 2.0);
  EXPECT_DOUBLE_EQ(fused.achieved_gbps(), 20.0);  // 2e6 bytes in 100 us
}

TEST(Results, NoSpeedupForAWrongKernel) {
  EXPECT_EQ(speedup(timed(200, 4), timed(100, 2, /*correct=*/false)), 0);
  EXPECT_EQ(speedup(timed(200, 4), timed(0, 2)), 0);
}

TEST(Results, CacheModeNames) {
  CacheMode c;
  ASSERT_TRUE(parse_cache_mode("warm", &c));
  EXPECT_EQ(c, CacheMode::warm);
  EXPECT_STREQ(to_string(CacheMode::cold), "cold");
  EXPECT_FALSE(parse_cache_mode("hot", &c));
}

}  // namespace
}  // namespace fl
