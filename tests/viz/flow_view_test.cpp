// The flow animation's computed content: volumes follow the bytes, the intermediate lands in HBM
// only in the unfused chain, L2-resident data stops at L2, and launches take turns by time.
#include "viz/flow_view.h"

#include <gtest/gtest.h>

namespace fl::viz {
namespace {

Measurement chain(int level, int launches, int64_t bytes_each, double us_each, double dram_fraction = -1) {
  Measurement m;
  m.level = level;
  m.level_name = launches > 1 ? "unfused" : "fused";
  for (int k = 0; k < launches; ++k) {
    LaunchResult l;
    l.textbook.kernel = "k" + std::to_string(k);
    l.textbook.bytes_read = bytes_each;
    l.textbook.bytes_written = bytes_each;
    l.time_us.median = us_each;
    if (dram_fraction >= 0) {
      const auto b = static_cast<int64_t>(bytes_each * dram_fraction);
      l.counters = LaunchCounters{b, b, 2 * bytes_each};
    }
    m.launches.push_back(l);
  }
  return m;
}

double total_volume(const FlowInput& in) {
  double v = 0;
  for (const auto& t : in.trips) v += t.read_bytes + t.write_bytes;
  return v;
}

TEST(Flow, VolumesFollowTheByteRatio) {
  // gelu_scale-like: the unfused chain moves twice the fused kernel's bytes.
  const FlowInput unfused = flow_input(chain(0, 2, 1 << 20, 10), 50 << 20);
  const FlowInput fused = flow_input(chain(1, 1, 1 << 20, 10), 50 << 20);
  EXPECT_DOUBLE_EQ(total_volume(unfused) / total_volume(fused), 2.0);
  // Measured bytes replace textbook ones when the counters have them.
  const FlowInput measured = flow_input(chain(0, 2, 1000, 10, 1.02), 50 << 20);
  EXPECT_TRUE(measured.trips[0].measured);
  EXPECT_DOUBLE_EQ(measured.trips[0].read_bytes, 1020);
}

TEST(Flow, TheIntermediateLandsInHbmOnlyWhenUnfused) {
  const FlowInput unfused = flow_input(chain(0, 2, 1000, 10), 1 << 20);
  const FlowInput fused = flow_input(chain(1, 1, 1000, 10), 1 << 20);
  // Late in the loop (second launch in flight) the unfused HBM holds the intermediate.
  const FlowLayout a = layout_flow(unfused, 2.9, ImVec2(0, 0), ImVec2(600, 200), 20);
  EXPECT_EQ(a.trip, 1);
  ASSERT_EQ(a.hbm_tensors.size(), 2u);
  EXPECT_NE(a.hbm_tensors[1].find("intermediate"), std::string::npos);
  const FlowLayout b = layout_flow(fused, 2.9, ImVec2(0, 0), ImVec2(600, 200), 20);
  EXPECT_EQ(b.hbm_tensors.size(), 1u);
  EXPECT_FALSE(b.sm_note.empty()) << "the fused kernel keeps intermediates in registers";
}

TEST(Flow, LaunchesTakeTurnsByMeasuredTimeAndBandsScaleWithBytes) {
  Measurement m = chain(0, 2, 1000, 10);
  m.launches[1].time_us.median = 30;  // the second launch takes 3/4 of the loop
  m.launches[1].textbook.bytes_read = 500;
  const FlowInput in = flow_input(m, 1 << 20);
  EXPECT_EQ(layout_flow(in, 0.5, ImVec2(0, 0), ImVec2(600, 200), 20).trip, 0);  // first quarter
  const FlowLayout late = layout_flow(in, 1.2, ImVec2(0, 0), ImVec2(600, 200), 20);
  EXPECT_EQ(late.trip, 1);
  EXPECT_FALSE(late.writing);
  EXPECT_NEAR(late.band, 10.0f, 0.01f) << "500 of the largest 1000 bytes: half the 20 px band";
}

TEST(Flow, L2ResidentDataStopsAtL2) {
  const FlowInput in = flow_input(chain(0, 2, 1 << 20, 10, 0.05), 60 << 20);  // DRAM saw 5%
  ASSERT_TRUE(in.trips[1].stays_in_l2);
  const FlowLayout l = layout_flow(in, 2.0, ImVec2(0, 0), ImVec2(600, 200), 20);
  EXPECT_EQ(l.turn_at, FlowPlace::l2);
  const FlowInput far = flow_input(chain(0, 2, 1 << 20, 10, 1.0), 60 << 20);
  EXPECT_EQ(layout_flow(far, 2.0, ImVec2(0, 0), ImVec2(600, 200), 20).turn_at, FlowPlace::hbm);
}

}  // namespace
}  // namespace fl::viz
