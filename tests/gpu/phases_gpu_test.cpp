// Phase timelines on a real GPU: with phases asked for, the level-2 kernels of ffn and
// layernorm_linear leave one record per block per declared phase, in order, on real SMs, and the
// stamps' cost is measured; without, no launch carries any.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "app/measure/live_backend.h"

namespace fl {
namespace {

std::unique_ptr<LiveBackend> make_backend() {
  LiveOptions options;
  options.min_repetitions = 5;
  options.target_seconds = 0.02;
  options.counters = false;
  std::unique_ptr<LiveBackend> backend;
  const Status st = LiveBackend::create(options, &backend);
  EXPECT_TRUE(st.ok()) << st.message();
  return backend;
}

// The top level of `lesson` at `size` tokens, bf16, with phases asked for; `variant`, when
// given, forced for the level's launch.
Measurement measure_top(LiveBackend& backend, const std::string& lesson, int64_t size, bool phases,
                        const std::string& launch = "", const std::string& variant = "") {
  MeasureRequest r;
  if (!variant.empty()) r.variants[launch] = variant;
  r.lesson = lesson;
  r.size = size;
  r.levels = {2};
  r.precision = Precision::bf16;
  r.cache = CacheMode::cold;
  r.phases = phases;
  std::vector<Measurement> ms;
  const Status st = backend.measure(r, nullptr, &ms);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(ms.size(), 1u);
  return ms.empty() ? Measurement() : ms[0];
}

void expect_one_record_per_block_per_phase(const Measurement& m, int sm_count) {
  SCOPED_TRACE(m.lesson + " at " + std::to_string(m.size));
  ASSERT_TRUE(m.check.passed);
  ASSERT_EQ(m.launches.size(), 1u);
  ASSERT_TRUE(m.launches[0].phases) << "the level-2 kernel recorded no phases";
  const LaunchPhases& p = *m.launches[0].phases;
  ASSERT_GE(p.names.size(), 3u);
  EXPECT_EQ(p.lost, 0);
  // The launch's grid, as CUPTI saw it (timed with CUDA events, under compute-sanitizer: the
  // blocks the records name, which must then be 0..blocks-1): every block left a record of
  // every phase.
  size_t blocks = 0;
  if (!m.records.empty()) {
    const auto& g = m.records[0].grid;
    blocks = size_t(g[0]) * g[1] * g[2];
  } else {
    for (const PhaseRecord& r : p.records) blocks = std::max<size_t>(blocks, r.block + 1);
  }
  EXPECT_EQ(p.records.size(), blocks * p.names.size());
  std::map<uint32_t, std::vector<const PhaseRecord*>> by_block;
  for (const PhaseRecord& r : p.records) {
    EXPECT_LE(r.start_ns, r.end_ns);
    EXPECT_LT(r.sm, sm_count);
    EXPECT_LT(r.block, blocks);
    by_block[r.block].push_back(&r);
  }
  ASSERT_EQ(by_block.size(), blocks);
  uint64_t first = UINT64_MAX, last = 0;
  for (auto& [block, rs] : by_block) {
    ASSERT_EQ(rs.size(), p.names.size()) << "block " << block;
    std::sort(rs.begin(), rs.end(),
              [](const PhaseRecord* a, const PhaseRecord* b) { return a->phase < b->phase; });
    for (size_t i = 0; i < rs.size(); ++i) {
      EXPECT_EQ(rs[i]->phase, i) << "block " << block;  // each phase once
      EXPECT_EQ(rs[i]->sm, rs[0]->sm) << "a block stays on its SM";
      if (i > 0) EXPECT_GE(rs[i]->start_ns, rs[i - 1]->end_ns) << "block " << block;
    }
    first = std::min(first, rs.front()->start_ns);
    last = std::max(last, rs.back()->end_ns);
  }
  EXPECT_EQ(first, 0u) << "times count from the launch's first stamp";
  // The timeline spans about the launch: not more than a few times its median time.
  EXPECT_GT(last, 0u);
  EXPECT_LT(last * 1e-3, 20 * m.launches[0].time_us.median + 50);
  // The stamps' cost is measured: both times positive, the overhead a finite fraction.
  EXPECT_GT(p.time_off_us, 0);
  EXPECT_GT(p.time_on_us, 0);
  EXPECT_TRUE(std::isfinite(p.overhead()));
  std::printf(
      "[phases] %s %lld tokens: %zu blocks x %zu phases, stamps on %.2f us, off %.2f us "
      "(%+.1f%%)\n",
      m.lesson.c_str(), static_cast<long long>(m.size), blocks, p.names.size(), p.time_on_us,
      p.time_off_us, p.overhead() * 100);
}

bool hopper(const LiveBackend& backend) {
  return backend.device().cc_major >= 9;
}

TEST(PhasesGpu, FfnAt16TokensRecordsEveryBlocksPhases) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  if (!hopper(*backend)) GTEST_SKIP() << "the phase-declaring level-2 kernels here need sm_90";
  expect_one_record_per_block_per_phase(measure_top(*backend, "ffn", 16, true),
                                        backend->device().sm_count);
}

TEST(PhasesGpu, LayerNormLinearAt256TokensRecordsEveryBlocksPhases) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  if (!hopper(*backend)) GTEST_SKIP() << "the phase-declaring level-2 kernels here need sm_90";
  expect_one_record_per_block_per_phase(measure_top(*backend, "layernorm_linear", 256, true),
                                        backend->device().sm_count);
}

// The tile kernel (any GPU) leaves its three phases per block too: forced at an odd token count.
TEST(PhasesGpu, LayerNormLinearTileKernelRecordsEveryBlocksPhases) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const Measurement m =
      measure_top(*backend, "layernorm_linear", 333, true, "ln_gemm_bias", "ln_tile");
  ASSERT_EQ(m.launches.size(), 1u);
  EXPECT_EQ(m.launches[0].variant, "ln_tile");
  expect_one_record_per_block_per_phase(m, backend->device().sm_count);
}

// The FFN's wgmma kernel is persistent: one record per tile (phase: up or down tile; arg: the
// tile's place in the list), each tile once, a block's tiles one after another.
TEST(PhasesGpu, FfnWgmmaRecordsEveryTileOnce) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const int64_t tokens = 1000;
  const Measurement m = measure_top(*backend, "ffn", tokens, true);
  ASSERT_EQ(m.launches.size(), 1u);
  if (m.launches[0].variant != "ffn_wgmma") {
    GTEST_SKIP() << "level 2 runs " << m.launches[0].variant << " here, not ffn_wgmma";
  }
  ASSERT_TRUE(m.check.passed);
  ASSERT_TRUE(m.launches[0].phases);
  const LaunchPhases& p = *m.launches[0].phases;
  ASSERT_EQ(p.names.size(), 2u);
  EXPECT_EQ(p.lost, 0);
  const int64_t row_blocks = (tokens + 127) / 128, c = 768;
  const int64_t up = row_blocks * (4 * c / 256), down = row_blocks * (c / 256);
  ASSERT_EQ(static_cast<int64_t>(p.records.size()), up + down);
  std::vector<int> seen(up + down, 0);
  int64_t ups = 0;
  std::map<uint32_t, std::vector<const PhaseRecord*>> by_block;
  for (const PhaseRecord& r : p.records) {
    ASSERT_LT(r.arg, seen.size());
    ++seen[r.arg];
    EXPECT_LE(r.start_ns, r.end_ns);
    EXPECT_LT(r.phase, 2u);
    ups += r.phase == 0;
    by_block[r.block].push_back(&r);
  }
  for (int n : seen) EXPECT_EQ(n, 1);
  EXPECT_EQ(ups, up);
  for (auto& [block, rs] : by_block) {
    std::sort(rs.begin(), rs.end(),
              [](const PhaseRecord* a, const PhaseRecord* b) { return a->start_ns < b->start_ns; });
    for (size_t i = 1; i < rs.size(); ++i) {
      EXPECT_GE(rs[i]->start_ns, rs[i - 1]->end_ns) << "block " << block;
      EXPECT_EQ(rs[i]->sm, rs[0]->sm) << "a block stays on its SM";
    }
  }
  EXPECT_GT(p.time_off_us, 0);
  EXPECT_GT(p.time_on_us, 0);
  std::printf(
      "[phases] ffn %lld tokens (ffn_wgmma): %zu tiles, stamps on %.2f us, off %.2f us "
      "(%+.1f%%)\n",
      static_cast<long long>(tokens), p.records.size(), p.time_on_us, p.time_off_us,
      p.overhead() * 100);
}

// The portable large-token kernels: ln_mma_rows leaves its three phases per block; ffn_tiles
// one record per tile (up or down; arg: its row block), a block's tiles one after another.
TEST(PhasesGpu, PortableLargeTokenKernelsRecordTheirPhases) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  if (backend->device().cc_major < 8) GTEST_SKIP() << "bf16 needs sm_80";
  const Measurement ln =
      measure_top(*backend, "layernorm_linear", 1031, true, "ln_gemm_bias", "ln_mma_rows");
  ASSERT_EQ(ln.launches.size(), 1u);
  EXPECT_EQ(ln.launches[0].variant, "ln_mma_rows");
  expect_one_record_per_block_per_phase(ln, backend->device().sm_count);

  const int64_t tokens = 1031, row_blocks = (tokens + 127) / 128, c = 768;
  const Measurement m = measure_top(*backend, "ffn", tokens, true, "ffn_fused", "ffn_tiles");
  ASSERT_EQ(m.launches.size(), 1u);
  ASSERT_TRUE(m.check.passed);
  ASSERT_TRUE(m.launches[0].phases);
  const LaunchPhases& p = *m.launches[0].phases;
  ASSERT_EQ(p.names.size(), 2u);
  EXPECT_EQ(p.lost, 0);
  // Below 4K tokens: 128 x 128 up tiles, 64 x 128 down tiles.
  const int64_t up = row_blocks * (4 * c / 128), down = row_blocks * 2 * (c / 128);
  ASSERT_EQ(static_cast<int64_t>(p.records.size()), up + down);
  int64_t ups = 0;
  std::map<uint32_t, std::vector<const PhaseRecord*>> by_block;
  for (const PhaseRecord& r : p.records) {
    EXPECT_LT(r.arg, uint32_t(row_blocks));
    EXPECT_LE(r.start_ns, r.end_ns);
    EXPECT_LT(r.phase, 2u);
    EXPECT_TRUE(r.phase == 1 || r.wait_ns == 0) << "only down tiles wait";
    ups += r.phase == 0;
    by_block[r.block].push_back(&r);
  }
  EXPECT_EQ(ups, up);
  for (auto& [block, rs] : by_block) {
    std::sort(rs.begin(), rs.end(),
              [](const PhaseRecord* a, const PhaseRecord* b) { return a->start_ns < b->start_ns; });
    for (size_t i = 1; i < rs.size(); ++i) {
      EXPECT_GE(rs[i]->start_ns, rs[i - 1]->end_ns) << "block " << block;
    }
  }
}

// ln_mma_tiles: one record per ticket, the row items (8 rows each, 16 with 8-warp tiles) then the
// 64 x 128 tiles, each as 1-4 parts of its K (arg: the row block; only tiles wait, for their row
// block's items).
TEST(PhasesGpu, LnMmaTilesRecordsEveryTicket) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  if (backend->device().cc_major < 8) GTEST_SKIP() << "bf16 needs sm_80";
  const int64_t tokens = 301, c = 768, row_blocks = (tokens + 63) / 64;
  const Measurement m =
      measure_top(*backend, "layernorm_linear", tokens, true, "ln_gemm_bias", "ln_mma_tiles");
  ASSERT_EQ(m.launches.size(), 1u);
  ASSERT_TRUE(m.check.passed);
  ASSERT_TRUE(m.launches[0].phases);
  const LaunchPhases& p = *m.launches[0].phases;
  ASSERT_EQ(p.names.size(), 2u);
  EXPECT_EQ(p.lost, 0);
  const int64_t tiles = row_blocks * (3 * c / 128);
  int64_t items = 0;
  for (const PhaseRecord& r : p.records) items += r.phase == 0;
  EXPECT_TRUE(items == (tokens + 7) / 8 || items == (tokens + 15) / 16) << items << " items";
  const int64_t parts = static_cast<int64_t>(p.records.size()) - items;
  EXPECT_EQ(parts % tiles, 0) << parts << " tile records";
  EXPECT_GE(parts, tiles);
  EXPECT_LE(parts, 4 * tiles);
  for (const PhaseRecord& r : p.records) {
    EXPECT_LE(r.start_ns, r.end_ns);
    EXPECT_LT(r.phase, 2u);
    if (r.phase == 1) EXPECT_LT(r.arg, uint32_t(row_blocks));
    EXPECT_TRUE(r.phase == 1 || r.wait_ns == 0) << "only tiles wait";
  }
}

TEST(PhasesGpu, OffByDefaultAndLevelsWithoutStampsCarryNone) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const Measurement off = measure_top(*backend, "ffn", 16, false);
  ASSERT_EQ(off.launches.size(), 1u);
  EXPECT_FALSE(off.launches[0].phases);
  // Level 0 (cuBLASLt and elementwise kernels) declares no phases, asked or not.
  MeasureRequest r;
  r.lesson = "ffn";
  r.size = 16;
  r.levels = {0};
  r.precision = Precision::bf16;
  r.phases = true;
  std::vector<Measurement> ms;
  ASSERT_TRUE(backend->measure(r, nullptr, &ms).ok());
  ASSERT_EQ(ms.size(), 1u);
  for (const LaunchResult& l : ms[0].launches) EXPECT_FALSE(l.phases) << l.textbook.kernel;
  // After a pass with stamps, the stamps are off again: the next measurement has none.
  const Measurement again = measure_top(*backend, "ffn", 16, false);
  EXPECT_FALSE(again.launches[0].phases);
}

}  // namespace
}  // namespace fl
