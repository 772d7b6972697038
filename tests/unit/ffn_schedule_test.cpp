// The FFN wgmma kernel's tile list (kernels/ffn/ffn_schedule.h): the kernel is correct and cannot
// deadlock only if the list holds every tile once and puts every tile's dependencies before it
// (a down tile after all up tiles of its row block; an up tile after all down tiles of the row
// block that last used its ring slot). Checked here for the shipped lag and ring and for edge
// cases: fewer row blocks than the lag, one row block, lag 0, the largest lag the ring allows.
#include "kernels/ffn/ffn_schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>
#include <vector>

namespace fl::ffn_schedule {
namespace {

struct Case {
  int rows, up, down, lag, ring;
};

// Where each (down, rb, nt) sits in the list; fails the test on a repeat or a tile out of range.
std::map<std::tuple<bool, int, int>, int> positions(const Case& c) {
  std::map<std::tuple<bool, int, int>, int> at;
  const int tiles = c.rows * (c.up + c.down);
  for (int p = 0; p < tiles; ++p) {
    const Tile t = tile_at(p, c.rows, c.up, c.down, c.lag);
    EXPECT_GE(t.rb, 0);
    EXPECT_LT(t.rb, c.rows);
    EXPECT_GE(t.nt, 0);
    EXPECT_LT(t.nt, t.down ? c.down : c.up);
    EXPECT_TRUE(at.emplace(std::make_tuple(t.down, t.rb, t.nt), p).second)
        << "tile (" << t.down << ", " << t.rb << ", " << t.nt << ") listed twice";
  }
  return at;
}

TEST(FfnSchedule, EveryTileOnceAndEveryDependencyEarlier) {
  const std::vector<Case> cases = {
      {128, 12, 3, 40, 64},  // 16K tokens, C = 768: the shipped lag and ring
      {32, 12, 3, 40, 64},   // 4K tokens: fewer row blocks than the lag
      {2, 12, 3, 40, 64},    // 256 tokens
      {1, 1, 1, 40, 64},     // one row block, one tile of each kind
      {17, 9, 3, 0, 1},      // lag 0: a row block's down tiles right after its up tiles
      {300, 32, 8, 63, 64},  // C = 2048 (8K hidden), the largest lag the ring allows
      {41, 5, 2, 7, 12},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "rows " << c.rows << " up " << c.up << " down " << c.down
                                      << " lag " << c.lag << " ring " << c.ring);
    const auto at = positions(c);
    ASSERT_EQ(at.size(), size_t(c.rows) * (c.up + c.down));
    for (int rb = 0; rb < c.rows; ++rb) {
      for (int d = 0; d < c.down; ++d) {
        for (int u = 0; u < c.up; ++u) {
          EXPECT_LT(at.at({false, rb, u}), at.at({true, rb, d}))
              << "down tile " << d << " of row block " << rb << " before its up tile " << u;
        }
      }
      if (rb < c.ring) continue;
      for (int u = 0; u < c.up; ++u) {
        for (int d = 0; d < c.down; ++d) {
          EXPECT_LT(at.at({true, rb - c.ring, d}), at.at({false, rb, u}))
              << "up tile " << u << " of row block " << rb << " overwrites the ring slot before "
              << "down tile " << d << " of row block " << rb - c.ring << " read it";
        }
      }
    }
  }
}

// The check above can fail: a lag as long as the ring puts an up tile before the last reader of
// its slot.
TEST(FfnSchedule, ALagAsLongAsTheRingIsCaught) {
  const Case c{10, 2, 1, 4, 4};
  const auto at = positions(c);
  EXPECT_GT(at.at({true, 0, 0}), at.at({false, 4, 0}));
}

}  // namespace
}  // namespace fl::ffn_schedule
