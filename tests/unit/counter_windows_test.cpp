// The counter phase's windows (app/measure/cupti_counters.h): a long chain is counted a run of
// whole launches at a time, each within one pass of the range profiler (15 kernels and the
// drain), every launch in exactly one window, in order.
#include <gtest/gtest.h>

#include <vector>

#include "app/measure/cupti_counters.h"

namespace fl {
namespace {

void expect_cover(const std::vector<int>& kernels_per_launch, int launches) {
  const std::vector<CounterWindow> windows = counter_windows(kernels_per_launch, launches);
  ASSERT_FALSE(windows.empty());
  int next = 0;
  for (const CounterWindow& w : windows) {
    EXPECT_EQ(w.begin, next) << "windows follow each other";
    EXPECT_GT(w.end, w.begin) << "no empty window";
    int kernels = 0;
    for (int k = w.begin; k < w.end; ++k)
      kernels += kernels_per_launch.empty() ? 1 : kernels_per_launch[k];
    EXPECT_EQ(w.kernels, kernels);
    if (w.end - w.begin > 1) EXPECT_LE(w.kernels, RangeCounters::kMaxKernelsPerLaunch);
    next = w.end;
  }
  EXPECT_EQ(next, launches) << "every launch in a window";
}

TEST(CounterWindows, ShortChainsAreOneWindowAsBefore) {
  const std::vector<CounterWindow> w = counter_windows({}, 14);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].begin, 0);
  EXPECT_EQ(w[0].end, 14);
  // cuBLASLt launches of two kernels (split-K and its reduction) count twice.
  EXPECT_EQ(counter_windows({1, 2, 2, 1, 2, 1, 1, 2, 1, 2}, 10).size(), 1u);
  EXPECT_EQ(counter_windows({2, 2, 2, 2, 2, 2, 2, 2}, 8).size(), 2u);  // 16 kernels
}

TEST(CounterWindows, GptDecodeLevelsAreCut) {
  // Level 0: 205 launches of one kernel; level 1: 61.
  EXPECT_EQ(counter_windows({}, 205).size(), 14u);  // 13 x 15 + 10
  EXPECT_EQ(counter_windows({}, 61).size(), 5u);    // 4 x 15 + 1
  expect_cover({}, 205);
  expect_cover({}, 61);
  expect_cover({}, 1);
  expect_cover({2, 1, 2, 2, 2, 2, 2, 2, 2, 1, 1, 2}, 12);
  // A launch of more kernels than a pass takes stays whole, on its own (measure refuses it).
  const std::vector<CounterWindow> w = counter_windows({1, 61, 1}, 3);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[1].begin, 1);
  EXPECT_EQ(w[1].kernels, 61);
}

}  // namespace
}  // namespace fl
