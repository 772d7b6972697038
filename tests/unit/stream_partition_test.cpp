// The weight-streaming GEMM's partition (kernels/gemm_core/stream_partition.h), checked on the
// CPU by walking every block of the grid the way the kernels do: every unit exactly once, tiles
// inside one key, at most tile_units units, each key's cut shared by exactly the blocks
// block_of(its first unit) .. block_of(its last unit), one segment per (block, key), and the
// partial-sum slots key + block distinct and below keys + blocks. Shapes include grids larger
// than the number of units (a GPU test once caught keys left unfinished there).
#include "kernels/gemm_core/stream_partition.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace fl::stream {
namespace {

struct Case {
  int m, n, k, chunk_rows, unit_n, unit_k, blocks;
};

void check(const Case& c) {
  SCOPED_TRACE("m " + std::to_string(c.m) + " n " + std::to_string(c.n) + " k " +
               std::to_string(c.k) + " chunk " + std::to_string(c.chunk_rows) + " blocks " +
               std::to_string(c.blocks));
  const Partition p = Partition::plan(c.m, c.n, c.k, c.chunk_rows, c.unit_n, c.unit_k, c.blocks);
  ASSERT_GT(p.units, 0);
  std::vector<int> seen(p.units, 0);
  std::map<int, std::set<int>> blocks_of_key;  // key -> blocks with a segment of it
  std::set<std::pair<int, int>> segments;      // (block, key)
  std::set<long long> slots;
  for (int b = 0; b < c.blocks; ++b) {
    TileWalk walk;
    walk.begin(p, b);
    int segment_key = -1;
    for (Tile t = walk.next(p, c.unit_n, 8); t.valid(); t = walk.next(p, c.unit_n, 8)) {
      ASSERT_GE(t.count, 1);
      ASSERT_LE(t.count, 8);
      ASSERT_LE(t.kb + t.count, p.kblocks) << "a tile crosses its key";
      ASSERT_EQ(t.row0, t.key / p.col_tiles * c.chunk_rows);
      ASSERT_EQ(t.n0, t.key % p.col_tiles * c.unit_n);
      for (int i = 0; i < t.count; ++i) ++seen[t.key * p.kblocks + t.kb + i];
      if (segment_key != t.key) {
        ASSERT_TRUE(segments.insert({b, t.key}).second) << "two segments of one key in a block";
        segment_key = t.key;
      }
      blocks_of_key[t.key].insert(b);
      if (t.ends_segment) {
        const int first = p.block_of(t.key * p.kblocks);
        const int last = p.block_of((t.key + 1) * p.kblocks - 1);
        ASSERT_LE(first, b);
        ASSERT_GE(last, b);
        if (first != last) {
          const long long slot = (long long)t.key + b;
          ASSERT_LT(slot, (long long)p.keys + c.blocks);
          ASSERT_TRUE(slots.insert(slot).second) << "two cut segments share slot " << slot;
        }
      }
    }
    if (b >= p.workers) EXPECT_EQ(p.first_unit(b), p.first_unit(b + 1)) << "block " << b;
  }
  for (int u = 0; u < p.units; ++u) ASSERT_EQ(seen[u], 1) << "unit " << u;
  for (const auto& [key, blocks] : blocks_of_key) {
    const int first = p.block_of(key * p.kblocks), last = p.block_of((key + 1) * p.kblocks - 1);
    ASSERT_EQ(int(blocks.size()), last - first + 1) << "key " << key;
    ASSERT_EQ(*blocks.begin(), first);
    ASSERT_EQ(*blocks.rbegin(), last);
  }
  ASSERT_EQ(int(blocks_of_key.size()), p.keys);
}

TEST(StreamPartition, EveryUnitOnceAndEveryCutKeyFinishable) {
  const Case cases[] = {
      {16, 3072, 768, 16, 32, 32, 132},   // the FFN's up projection at C = 768, bf16
      {64, 768, 3072, 64, 32, 32, 132},   // its down projection
      {256, 2304, 768, 64, 32, 32, 132},  // the LayerNorm-Linear at 256 tokens
      {61, 1540, 385, 16, 32, 16, 132},   // fp32 units, odd C, four chunks
      {1, 388, 97, 16, 32, 32, 132},      // fewer units (52) than blocks
      {256, 192, 64, 64, 32, 32, 132},    // 48 units on 132 blocks
      {1, 32, 32, 16, 32, 32, 132},       // one unit
      {7, 200, 800, 16, 32, 16, 108},     // an A100's SM count
      {33, 1020, 255, 64, 32, 32, 46},    // an RTX 4070's
      {255, 297, 99, 16, 32, 16, 80},     // a V100's, fp32
  };
  for (const Case& c : cases) check(c);
}

}  // namespace
}  // namespace fl::stream
