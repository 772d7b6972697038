// The portable GEMM core (kernels/gemm_core/): every rung of the GEMM ladder against a CPU
// product in double, and the large-token portable kernels built on it (ln_mma in fp32,
// ln_mma_rows and ln_mma_tiles in bf16, ffn_tiles), forced through the live backend at random
// shapes with odd token counts (the backend poisons the outputs and runs the lesson's fp64 check);
// a C that is not a multiple of 8 is refused with one line. Behaviour, not speed
// (tests/gpu/gemm_ladder_bench.cu times them).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "app/measure/live_backend.h"
#include "kernels/gemm_core/gemm_ladder.h"
#include "kernels/layernorm_linear/ln_fold.h"

namespace fl {
namespace {

uint16_t bf16_bits(float v) {  // round to nearest even, as __float2bfloat16_rn
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
double bf16_value(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

// A matrix on the host (doubles holding exactly the device's values) and on the device.
struct Matrix {
  Precision p;
  std::vector<double> host;
  void* dev = nullptr;
  Matrix(Precision prec, size_t n) : p(prec), host(n) {
    EXPECT_EQ(cudaMalloc(&dev, n * bytes_per_element(prec)), cudaSuccess);
  }
  ~Matrix() { cudaFree(dev); }
  Matrix(const Matrix&) = delete;
  void fill(std::mt19937& rng, double offset = 0.0) {  // offset + uniform [-1, 1)
    std::uniform_real_distribution<double> d(offset - 1.0, offset + 1.0);
    const size_t n = host.size();
    std::vector<uint16_t> b(n);
    std::vector<float> f(n);
    for (size_t i = 0; i < n; ++i) {
      f[i] = static_cast<float>(d(rng));
      b[i] = bf16_bits(f[i]);
      host[i] = p == Precision::bf16 ? bf16_value(b[i]) : f[i];
    }
    const void* src = p == Precision::bf16 ? static_cast<const void*>(b.data()) : f.data();
    ASSERT_EQ(cudaMemcpy(dev, src, n * bytes_per_element(p), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<double> download() const {
    const size_t n = host.size();
    std::vector<double> out(n);
    std::vector<uint16_t> b(n);
    std::vector<float> f(n);
    void* dst = p == Precision::bf16 ? static_cast<void*>(b.data()) : f.data();
    EXPECT_EQ(cudaMemcpy(dst, dev, n * bytes_per_element(p), cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < n; ++i) out[i] = p == Precision::bf16 ? bf16_value(b[i]) : f[i];
    return out;
  }
};

bool cuda_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Why this machine cannot run the bf16 mma.sync forms, or "" where it can (a failed query is a
// test failure as well as the reason).
std::string without_bf16_mma() {
  if (!cuda_available()) return "no GPU";
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess) {
    ADD_FAILURE() << "cudaDeviceGetAttribute(compute capability) failed";
    return "no compute capability";
  }
  return major < 8 ? "bf16 mma.sync needs compute capability 8.0" : "";
}

// Unsets the named environment variables when the test's scope ends: the ln_mma_tiles forms
// below are measurement switches read at each launch.
struct UnsetAtEnd {
  std::vector<const char*> names;
  ~UnsetAtEnd() {
    for (const char* name : names) unsetenv(name);
  }
};

// Relative L2 error of rung `rung`'s C = A B against the CPU; infinity for any non-finite
// element (an unwritten, poisoned one).
double ladder_error(size_t rung, int64_t m, int64_t n, int64_t k, Status* status) {
  const Precision p = gemm_core::gemm_ladder().at(rung).precision;
  std::mt19937 rng(static_cast<unsigned>(rung * 7919 + m * 31 + n * 17 + k));
  Matrix a(p, m * k), b(p, k * n), c(p, m * n);
  a.fill(rng);
  b.fill(rng);
  EXPECT_EQ(cudaMemset(c.dev, 0xff, m * n * bytes_per_element(p)), cudaSuccess);  // NaN
  *status = gemm_core::launch_ladder_rung(rung, a.dev, b.dev, c.dev, m, n, k, nullptr);
  if (!status->ok()) return 0;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<double> out = c.download();
  double num = 0, den = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0;
      for (int64_t kk = 0; kk < k; ++kk) ref += a.host[i * k + kk] * b.host[kk * n + j];
      const double v = out[i * n + j];
      if (!std::isfinite(v)) return INFINITY;
      num += (v - ref) * (v - ref);
      den += ref * ref;
    }
  }
  return std::sqrt(num / den);
}

TEST(GemmLadder, EveryRungMatchesTheCpuProduct) {
  if (!cuda_available()) GTEST_SKIP() << "no GPU";
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  const auto& rungs = gemm_core::gemm_ladder();
  ASSERT_GE(rungs.size(), 6u);
  for (size_t r = 0; r < rungs.size(); ++r) {
    if (rungs[r].precision == Precision::bf16 && major < 8) continue;
    const double tol = rungs[r].precision == Precision::bf16 ? 1e-2 : 1e-5;
    // A square shape every rung takes, then edges that cut the tiles (M odd, N and K multiples
    // of 8 only), which mma_naive refuses.
    for (auto [m, n, k] :
         {std::tuple<int64_t, int64_t, int64_t>{256, 320, 128}, {197, 136, 72}, {129, 264, 40}}) {
      Status st;
      const double err = ladder_error(r, m, n, k, &st);
      if (!st.ok()) {
        EXPECT_TRUE(st.unsupported() && rungs[r].name == "mma_naive") << st.message();
        EXPECT_EQ(st.message().find('\n'), std::string::npos);
        continue;
      }
      EXPECT_LT(err, tol) << rungs[r].name << " at " << m << " x " << n << " x " << k;
    }
  }
}

std::unique_ptr<LiveBackend> make_backend() {
  LiveOptions options;
  options.min_repetitions = 2;
  options.target_seconds = 0.005;
  options.counters = false;
  std::unique_ptr<LiveBackend> backend;
  const Status st = LiveBackend::create(options, &backend);
  EXPECT_TRUE(st.ok()) << st.message();
  return backend;
}

// Level 2 of `lesson` with `variant` forced at tokens x c: ran, passed the check, and was it.
void expect_forced_runs(LiveBackend& backend, const char* lesson, const char* launch,
                        const char* variant, int64_t tokens, int64_t c, Precision p) {
  MeasureRequest request{lesson, tokens, {2}, p, CacheMode::cold};
  request.inner = c;
  request.variants = {{launch, variant}};
  std::vector<Measurement> ms;
  const Status st = backend.measure(request, nullptr, &ms);
  ASSERT_TRUE(st.ok()) << variant << " at " << tokens << " x " << c << ": " << st.message();
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_TRUE(ms[0].check.passed) << variant << " " << to_string(p) << " at " << tokens << " x "
                                  << c << ": rel. error " << ms[0].check.rel_l2_error;
  EXPECT_EQ(ms[0].launches.at(0).variant, variant);
}

using Shapes = std::initializer_list<std::pair<int64_t, int64_t>>;

// ln_mma_tiles forced at each tokens x C (bf16; its form as the FL_LN_* switches set), checked.
void expect_ln_mma_tiles_runs(LiveBackend& backend, Shapes shapes) {
  for (auto [m, c] : shapes) {
    expect_forced_runs(backend, "layernorm_linear", "ln_gemm_bias", "ln_mma_tiles", m, c,
                       Precision::bf16);
  }
}

// ... at `count` random shapes from `rng` (odd token counts up to 1100, C an odd multiple of 8 up
// to 512), then at `fixed`.
void expect_ln_mma_tiles_random(LiveBackend& backend, std::mt19937& rng, int count, Shapes fixed) {
  std::uniform_int_distribution<int64_t> tokens(1, 1100), eighths(1, 64);
  for (int i = 0; i < count; ++i) {
    const int64_t m = tokens(rng) | 1, c = 8 * (eighths(rng) | 1);
    expect_ln_mma_tiles_runs(backend, {{m, c}});
  }
  expect_ln_mma_tiles_runs(backend, fixed);
}

struct Forced {
  const char *lesson, *launch, *variant;
  bool fp32, bf16;  // the precisions the table offers it in (ln_mma fp32, ln_mma_rows bf16)
  bool offered(Precision p, int major) const {
    return p == Precision::fp32 ? fp32 : bf16 && major >= 8;
  }
};
const Forced kForced[] = {{"layernorm_linear", "ln_gemm_bias", "ln_mma", true, false},
                          {"layernorm_linear", "ln_gemm_bias", "ln_mma_rows", false, true},
                          {"layernorm_linear", "ln_gemm_bias", "ln_mma_tiles", false, true},
                          {"ffn", "ffn_fused", "ffn_tiles", true, true}};

TEST(GemmCore, ForcedLargeTokenVariantsRunRandomShapes) {
  if (!cuda_available()) GTEST_SKIP() << "no GPU";
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  std::mt19937 rng(20261126);
  std::uniform_int_distribution<int64_t> tokens(1, 700), eighths(1, 96);
  for (const Forced& f : kForced) {
    for (Precision p : {Precision::fp32, Precision::bf16}) {
      if (!f.offered(p, major)) continue;
      for (int i = 0; i < 5; ++i) {
        const int64_t m = tokens(rng) | 1, c = 8 * eighths(rng);  // odd token counts
        SCOPED_TRACE(std::string(f.variant) + " " + to_string(p));
        expect_forced_runs(*backend, f.lesson, f.launch, f.variant, m, c, p);
      }
      expect_forced_runs(*backend, f.lesson, f.launch, f.variant, 1031, 768, p);  // 9 row blocks
    }
  }
  // Where the fp32 kernels change form on an H100's 264 block slots (elsewhere they run these
  // shapes in their other form): ln_mma's blocks take 3 column tiles each (33791 x 256: 264 row
  // blocks of 6 tiles), ffn_tiles cuts its down tiles in halves over K (4099 x 768; in quarters
  // at the shapes above).
  expect_forced_runs(*backend, "layernorm_linear", "ln_gemm_bias", "ln_mma", 33791, 256,
                     Precision::fp32);
  expect_forced_runs(*backend, "ffn", "ffn_fused", "ffn_tiles", 4099, 768, Precision::fp32);
  if (major < 8) return;
  // ln_mma_rows' smaller panels (64 rows at C = 1024, 32 at C = 2048 on an H100's 227 KiB;
  // 128 rows on fewer SMs' worth of row blocks at 4099 tokens) and ffn_tiles' 128 x 256 tiles
  // (from 4K tokens).
  for (const int64_t c : {1024, 2048}) {
    expect_forced_runs(*backend, "layernorm_linear", "ln_gemm_bias", "ln_mma_rows", 301, c,
                       Precision::bf16);
  }
  expect_forced_runs(*backend, "layernorm_linear", "ln_gemm_bias", "ln_mma_rows", 4099, 768,
                     Precision::bf16);
  expect_forced_runs(*backend, "ffn", "ffn_fused", "ffn_tiles", 4099, 264, Precision::bf16);
  // ln_mma_tiles at the widest C it takes (its rows in registers) and with 64 x 128 tiles (from
  // 513 tokens); ffn_tiles' 128 x 256 form from 8K tokens (outputs staged in shared memory, the
  // last row blocks' down tiles narrow; a last row block of one row, a last column tile of 8).
  expect_forced_runs(*backend, "layernorm_linear", "ln_gemm_bias", "ln_mma_tiles", 301, 1024,
                     Precision::bf16);
  expect_forced_runs(*backend, "layernorm_linear", "ln_gemm_bias", "ln_mma_tiles", 4099, 776,
                     Precision::bf16);
  expect_forced_runs(*backend, "ffn", "ffn_fused", "ffn_tiles", 8193, 264, Precision::bf16);
}

// ln_mma_tiles alone, for memcheck and racecheck, as the table runs it at these shapes on a GPU
// with sm_90's shared memory: row items, then 64 x 128 tiles of 8 warps, each tile's W columns
// resident in shared memory, xn in K-tiles of 64 (133 x 72: 3 row blocks of 2 column tiles;
// 521 x 264: 9 row blocks of 7).
TEST(GemmCore, LnMmaTilesSmallShapesForTheSanitizer) {
  if (const std::string why = without_bf16_mma(); !why.empty()) GTEST_SKIP() << why;
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  expect_ln_mma_tiles_runs(*backend, {{133, 72}, {521, 264}});
}

// The same for its other forms: W streamed (FL_LN_RESIDENT=1: 8 warps a 64 x 128 tile in
// K-tiles of 32 here), resident with K-tiles of 32 (FL_LN_TILES=3), in 2 parts of K with K-tiles
// of 64 (9), and on 64 x 256 tiles in 3 parts (10).
TEST(GemmCore, LnMmaTilesFormsSmallShapesForTheSanitizer) {
  if (const std::string why = without_bf16_mma(); !why.empty()) GTEST_SKIP() << why;
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const UnsetAtEnd unset{{"FL_LN_RESIDENT", "FL_LN_TILES", "FL_LN_SPLITS"}};
  struct Form {
    const char *resident, *tiles, *splits;
  };
  for (const Form& f :
       {Form{"1", "0", "1"}, Form{"2", "3", "1"}, Form{"2", "9", "2"}, Form{"2", "10", "3"}}) {
    ASSERT_EQ(setenv("FL_LN_RESIDENT", f.resident, 1), 0);
    ASSERT_EQ(setenv("FL_LN_TILES", f.tiles, 1), 0);
    ASSERT_EQ(setenv("FL_LN_SPLITS", f.splits, 1), 0);
    SCOPED_TRACE(std::string("FL_LN_RESIDENT=") + f.resident + " FL_LN_TILES=" + f.tiles +
                 " FL_LN_SPLITS=" + f.splits);
    expect_ln_mma_tiles_runs(*backend, {{133, 72}, {521, 264}});
  }
}

// The same with W's first K-tiles asked for before a tile's wait (FL_LN_RESIDENT=3; block b
// taking ticket b first, the kept rule): 8 warps a 64 x 128 tile in K-tiles of 32 (3), in 8
// stages (7) and in K-tiles of 64 (9), whole, and form 9 in 2 parts of K.
TEST(GemmCore, LnMmaTilesAheadSmallShapesForTheSanitizer) {
  if (const std::string why = without_bf16_mma(); !why.empty()) GTEST_SKIP() << why;
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const UnsetAtEnd unset{{"FL_LN_RESIDENT", "FL_LN_TILES", "FL_LN_SPLITS"}};
  ASSERT_EQ(setenv("FL_LN_RESIDENT", "3", 1), 0);
  for (const char* tiles_splits : {"3 1", "7 1", "9 1", "9 2"}) {
    const std::string f = tiles_splits;
    ASSERT_EQ(setenv("FL_LN_TILES", f.substr(0, 1).c_str(), 1), 0);
    ASSERT_EQ(setenv("FL_LN_SPLITS", f.substr(2).c_str(), 1), 0);
    SCOPED_TRACE("FL_LN_TILES, FL_LN_SPLITS = " + f);
    expect_ln_mma_tiles_runs(*backend, {{133, 72}, {521, 264}});
  }
}

// ln_mma_tiles with each tile normalizing its own rows (FL_LN_NORM=2), for memcheck and
// racecheck: the kept tile (8 warps of 32 x 32 at these shapes) and two K groups of 4 warps.
TEST(GemmCore, LnMmaTilesLocalSmallShapesForTheSanitizer) {
  if (const std::string why = without_bf16_mma(); !why.empty()) GTEST_SKIP() << why;
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const UnsetAtEnd unset{{"FL_LN_NORM", "FL_LN_TILES"}};
  ASSERT_EQ(setenv("FL_LN_NORM", "2", 1), 0);
  for (const char* tile : {"0", "4"}) {
    ASSERT_EQ(setenv("FL_LN_TILES", tile, 1), 0);
    SCOPED_TRACE(std::string("FL_LN_TILES=") + tile);
    expect_ln_mma_tiles_runs(*backend, {{133, 72}, {521, 264}});
  }
}

// Every tile form of ln_mma_tiles with each tile normalizing its own rows (FL_LN_NORM=2,
// FL_LN_TILES 1-10), at random shapes with odd token counts and C an odd multiple of 8, at a C of
// one K-tile and at the widest C the table gives it.
TEST(GemmCore, LnMmaTilesLocalEveryTileRandomShapes) {
  if (const std::string why = without_bf16_mma(); !why.empty()) GTEST_SKIP() << why;
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const UnsetAtEnd unset{{"FL_LN_NORM", "FL_LN_TILES"}};
  ASSERT_EQ(setenv("FL_LN_NORM", "2", 1), 0);
  std::mt19937 rng(20261128);
  for (int tile = 0; tile <= 10; ++tile) {
    ASSERT_EQ(setenv("FL_LN_TILES", std::to_string(tile).c_str(), 1), 0);
    SCOPED_TRACE("FL_LN_TILES=" + std::to_string(tile));
    expect_ln_mma_tiles_random(*backend, rng, 5, {{133, 24}, {301, 1024}});
  }
}

// Every tile form of ln_mma_tiles with row items (FL_LN_NORM=1; FL_LN_TILES 1-6: 64 x 64; 64 x
// 128 as 4 warps, 8 warps or two K groups of 4; 32 x 128 alone and in two K groups), W streamed
// (FL_LN_RESIDENT=1), each whole and in 2-4 parts of K (FL_LN_SPLITS), at random shapes with
// odd token counts and C an odd multiple of 8 (tiles and row items cut at both edges), at a C
// of fewer K-tiles than parts and at the widest C it takes; the deeper rings (7, 8), K-tiles of
// 64 on 8 warps (9) and 64 x 256 tiles (10) whole and in 2 parts.
TEST(GemmCore, LnMmaTilesEveryTileRandomShapes) {
  if (const std::string why = without_bf16_mma(); !why.empty()) GTEST_SKIP() << why;
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const UnsetAtEnd unset{{"FL_LN_NORM", "FL_LN_TILES", "FL_LN_SPLITS", "FL_LN_RESIDENT"}};
  ASSERT_EQ(setenv("FL_LN_NORM", "1", 1), 0);
  ASSERT_EQ(setenv("FL_LN_RESIDENT", "1", 1), 0);
  std::mt19937 rng(20261127);
  for (int tile = 1; tile <= 10; ++tile) {
    for (int splits = 1; splits <= (tile <= 6 ? 4 : 2); ++splits) {
      ASSERT_EQ(setenv("FL_LN_TILES", std::to_string(tile).c_str(), 1), 0);
      ASSERT_EQ(setenv("FL_LN_SPLITS", std::to_string(splits).c_str(), 1), 0);
      SCOPED_TRACE("FL_LN_TILES=" + std::to_string(tile) +
                   " FL_LN_SPLITS=" + std::to_string(splits));
      expect_ln_mma_tiles_random(*backend, rng, 4, {{133, 24}, {301, 1024}});
    }
  }
}

// Every tile form of ln_mma_tiles with its W rows resident in shared memory (FL_LN_RESIDENT=2,
// FL_LN_TILES 1-10), whole and in 3 parts of K (64 x 256 tiles also in 8), at random shapes with
// odd token counts and C an odd multiple of 8, at a C of one K-tile (fewer K-tiles than parts),
// at 1031 x 768 (more tickets than SMs: a block takes several, each bringing its own W; beyond
// the parts' scratch: whole tiles) and at C = 1024, where a whole tile's W does not fit and the
// streamed form runs.
TEST(GemmCore, LnMmaTilesResidentRandomShapes) {
  if (const std::string why = without_bf16_mma(); !why.empty()) GTEST_SKIP() << why;
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const UnsetAtEnd unset{{"FL_LN_TILES", "FL_LN_RESIDENT", "FL_LN_SPLITS"}};
  ASSERT_EQ(setenv("FL_LN_RESIDENT", "2", 1), 0);
  std::mt19937 rng(20261129);
  for (int tile = 1; tile <= 10; ++tile) {
    for (int splits : {1, 3, 8}) {
      if (splits == 8 && tile != 10) continue;
      ASSERT_EQ(setenv("FL_LN_TILES", std::to_string(tile).c_str(), 1), 0);
      ASSERT_EQ(setenv("FL_LN_SPLITS", std::to_string(splits).c_str(), 1), 0);
      SCOPED_TRACE("FL_LN_TILES=" + std::to_string(tile) +
                   " FL_LN_SPLITS=" + std::to_string(splits));
      expect_ln_mma_tiles_random(*backend, rng, 4, {{133, 24}, {1031, 768}, {301, 1024}});
    }
  }
}

// Every tile form of ln_mma_tiles (FL_LN_TILES 1-10) with W streamed and its first K-tiles asked
// for before the wait (FL_LN_RESIDENT=3), whole and in 2 parts of K, each with every ticket from
// the counter (FL_LN_FIRST=0), with block b taking ticket b first (FL_LN_FIRST=1, the kept rule)
// and without the one-ticket exit (FL_LN_FIRST=2: later tickets from gridDim.x on), at
// random shapes with odd token counts and C an odd multiple of 8, at a C of one K-tile (fewer
// K-tiles than the ring's stages ahead), at 1031 x 768 (more tickets than blocks: later tickets
// from the counter) and at the widest C.
TEST(GemmCore, LnMmaTilesAheadRandomShapes) {
  if (const std::string why = without_bf16_mma(); !why.empty()) GTEST_SKIP() << why;
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const UnsetAtEnd unset{{"FL_LN_TILES", "FL_LN_RESIDENT", "FL_LN_SPLITS", "FL_LN_FIRST"}};
  ASSERT_EQ(setenv("FL_LN_RESIDENT", "3", 1), 0);
  std::mt19937 rng(20261130);
  for (int tile = 1; tile <= 10; ++tile) {
    for (int splits : {1, 2}) {
      for (const char* first : {"0", "1", "2"}) {
        ASSERT_EQ(setenv("FL_LN_TILES", std::to_string(tile).c_str(), 1), 0);
        ASSERT_EQ(setenv("FL_LN_SPLITS", std::to_string(splits).c_str(), 1), 0);
        ASSERT_EQ(setenv("FL_LN_FIRST", first, 1), 0);
        SCOPED_TRACE("FL_LN_TILES=" + std::to_string(tile) +
                     " FL_LN_SPLITS=" + std::to_string(splits) + " FL_LN_FIRST=" + first);
        expect_ln_mma_tiles_random(*backend, rng, 2, {{133, 24}, {301, 1024}});
      }
    }
  }
  ASSERT_EQ(setenv("FL_LN_TILES", "3", 1), 0);
  ASSERT_EQ(setenv("FL_LN_SPLITS", "1", 1), 0);
  ASSERT_EQ(setenv("FL_LN_FIRST", "1", 1), 0);
  expect_ln_mma_tiles_runs(*backend, {{1031, 768}, {255, 768}});
}

// ln_mma_folded (LayerNorm in the epilogue of tiles that multiply raw x by the folded W) forced
// at small shapes, for memcheck and racecheck: its kept form (64 x 128, 8 stages) and 32 x 128
// (FL_LN_FOLD_TILE=5).
TEST(GemmCore, LnMmaFoldedSmallShapesForTheSanitizer) {
  if (const std::string why = without_bf16_mma(); !why.empty()) GTEST_SKIP() << why;
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const UnsetAtEnd unset{{"FL_LN_FOLD_TILE"}};
  for (const char* tile : {"0", "5"}) {
    ASSERT_EQ(setenv("FL_LN_FOLD_TILE", tile, 1), 0);
    SCOPED_TRACE(std::string("FL_LN_FOLD_TILE=") + tile);
    for (auto [m, c] : {std::pair<int64_t, int64_t>{133, 72}, {521, 264}}) {
      expect_forced_runs(*backend, "layernorm_linear", "ln_gemm_bias", "ln_mma_folded", m, c,
                         Precision::bf16);
    }
  }
}

// ... at random shapes (odd token counts up to 1100, C an odd multiple of 8 up to 512), each
// form it takes (3, 5, 7), and at GPT-2's C and the widest C the table gives it.
TEST(GemmCore, LnMmaFoldedRandomShapes) {
  if (const std::string why = without_bf16_mma(); !why.empty()) GTEST_SKIP() << why;
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const UnsetAtEnd unset{{"FL_LN_FOLD_TILE"}};
  std::mt19937 rng(0xf01d);
  std::uniform_int_distribution<int64_t> tokens(1, 1100), eighths(1, 64);
  for (const char* tile : {"3", "5", "7", "0"}) {
    ASSERT_EQ(setenv("FL_LN_FOLD_TILE", tile, 1), 0);
    SCOPED_TRACE(std::string("FL_LN_FOLD_TILE=") + tile);
    for (int i = 0; i < 2; ++i) {
      const int64_t m = tokens(rng) | 1, c = 8 * (eighths(rng) | 1);
      expect_forced_runs(*backend, "layernorm_linear", "ln_gemm_bias", "ln_mma_folded", m, c,
                         Precision::bf16);
    }
  }
  for (auto [m, c] : {std::pair<int64_t, int64_t>{256, 768}, {1023, 1024}, {1, 768}}) {
    expect_forced_runs(*backend, "layernorm_linear", "ln_gemm_bias", "ln_mma_folded", m, c,
                       Precision::bf16);
  }
  // In 2-4 parts of K (FL_LN_FOLD_SPLITS), each form, at odd shapes.
  const UnsetAtEnd unset_splits{{"FL_LN_FOLD_SPLITS"}};
  for (const char* splits : {"2", "3", "4"}) {
    ASSERT_EQ(setenv("FL_LN_FOLD_SPLITS", splits, 1), 0);
    for (const char* tile : {"0", "3", "5", "10"}) {
      ASSERT_EQ(setenv("FL_LN_FOLD_TILE", tile, 1), 0);
      SCOPED_TRACE(std::string("FL_LN_FOLD_SPLITS=") + splits + " FL_LN_FOLD_TILE=" + tile);
      const int64_t m = tokens(rng) | 1, c = 8 * (eighths(rng) | 1);
      expect_forced_runs(*backend, "layernorm_linear", "ln_gemm_bias", "ln_mma_folded", m, c,
                         Precision::bf16);
    }
  }
}

// ln_mma_folded through its own API (kernels/layernorm_linear/ln_fold.h) against an fp64
// LayerNorm-Linear on the host: m tokens, C = k, the rows' values offset + U[-1, 1) (far from 0,
// x W' and mean u nearly cancel), y poisoned (NaN) first; tile as ln_mma_folded's.
struct FoldedCase {
  int64_t m;
  int k, tile;
  double offset;
  int splits = 1;  // parts of K (LnFoldForm::splits)
};
void expect_folded_matches_fp64(const FoldedCase c, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message() << c.m << " x " << c.k << " tile " << c.tile << " offset "
                                    << c.offset << " splits " << c.splits);
  const int k = c.k, n = 3 * c.k;
  const int64_t m = c.m;
  const Precision b16 = Precision::bf16;
  Matrix x(b16, m * k), gamma(b16, k), beta(b16, k), w(b16, size_t(k) * n), bias(b16, n),
      y(b16, m * n), w_fold(b16, size_t(k) * n), u(Precision::fp32, n), bf(Precision::fp32, n);
  x.fill(rng, c.offset);
  gamma.fill(rng, 1.0);
  beta.fill(rng);
  w.fill(rng);
  bias.fill(rng);
  using B = __nv_bfloat16;
  const layernorm_linear::LnFold fold{static_cast<B*>(w_fold.dev), static_cast<float*>(u.dev),
                                      static_cast<float*>(bf.dev)};
  Status st = layernorm_linear::fold_ln_weights(
      static_cast<const B*>(gamma.dev), static_cast<const B*>(beta.dev),
      static_cast<const B*>(w.dev), static_cast<const B*>(bias.dev), k, n, fold, nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  // The parts' scratch, zeroed once; every launch leaves it at zero (checked after two).
  const size_t scratch = layernorm_linear::ln_mma_tiles_counter_bytes(m, n);
  unsigned* counters = nullptr;
  ASSERT_EQ(cudaMalloc(&counters, scratch), cudaSuccess);
  ASSERT_EQ(cudaMemset(counters, 0, scratch), cudaSuccess);
  for (int launch = 0; launch < 2; ++launch) {
    ASSERT_EQ(cudaMemset(y.dev, 0xff, m * n * 2), cudaSuccess);  // NaN
    st = layernorm_linear::ln_mma_folded(static_cast<const B*>(x.dev), fold, static_cast<B*>(y.dev),
                                         m, k, n, {c.tile, c.splits, counters}, nullptr);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  std::vector<unsigned> left(scratch / sizeof(unsigned));
  ASSERT_EQ(cudaMemcpy(left.data(), counters, scratch, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaFree(counters), cudaSuccess);
  size_t nonzero = 0;
  for (unsigned v : left) nonzero += v != 0;
  EXPECT_EQ(nonzero, 0u) << "words of the parts' scratch left non-zero";
  const std::vector<double> got = y.download();
  double err = 0.0, ref = 0.0;
  std::vector<double> xn(k), row(n);
  for (int64_t r = 0; r < m; ++r) {
    const double* xr = x.host.data() + r * k;
    double mean = 0.0, var = 0.0;
    for (int j = 0; j < k; ++j) mean += xr[j] / k;
    for (int j = 0; j < k; ++j) var += (xr[j] - mean) * (xr[j] - mean) / k;
    const double rstd = 1.0 / std::sqrt(var + 1e-5);
    for (int j = 0; j < k; ++j) xn[j] = (xr[j] - mean) * rstd * gamma.host[j] + beta.host[j];
    for (int col = 0; col < n; ++col) row[col] = bias.host[col];
    for (int j = 0; j < k; ++j) {
      const double* wr = w.host.data() + size_t(j) * n;
      for (int col = 0; col < n; ++col) row[col] += xn[j] * wr[col];
    }
    for (int col = 0; col < n; ++col) {
      const double d = got[r * n + col] - row[col];
      err += d * d;
      ref += row[col] * row[col];
    }
  }
  const double rel = std::sqrt(err / ref);
  std::printf("ln_mma_folded %ld x %d (tile %d, %d parts), rows' mean ~%g: rel. L2 error %.3g\n",
              long(m), k, c.tile, c.splits, c.offset, rel);
  EXPECT_LT(rel, 2e-2);  // the lesson's bf16 tolerance (gemm_tolerance)
  EXPECT_LT(rel, 8e-3);  // and what bf16's rounding of W' and y alone leaves room for
}

// ... with rows whose mean is far from 0 and centred rows, at odd shapes, each form.
TEST(GemmCore, LnMmaFoldedOffCentreRowsMatchFp64) {
  if (const std::string why = without_bf16_mma(); !why.empty()) GTEST_SKIP() << why;
  std::mt19937 rng(0x20f01d);
  for (const FoldedCase c : {FoldedCase{77, 264, 0, 20.0}, FoldedCase{256, 768, 0, 20.0},
                             FoldedCase{301, 520, 5, 20.0}, FoldedCase{129, 72, 3, -50.0},
                             FoldedCase{256, 768, 0, 0.0}, FoldedCase{256, 768, 7, 20.0, 2},
                             FoldedCase{255, 776, 7, -50.0, 3}, FoldedCase{1023, 1024, 5, 20.0, 2},
                             FoldedCase{67, 136, 10, 20.0, 4}, FoldedCase{1025, 264, 0, 20.0, 2}}) {
    expect_folded_matches_fp64(c, rng);
  }
}

// ... at one small shape a form (kept, 32 x 128), for racecheck and memcheck: their time.
TEST(GemmCore, LnMmaFoldedDirectSmallForTheSanitizer) {
  if (const std::string why = without_bf16_mma(); !why.empty()) GTEST_SKIP() << why;
  std::mt19937 rng(0x5a01d);
  for (const FoldedCase c : {FoldedCase{133, 72, 0, 20.0}, FoldedCase{67, 136, 5, 20.0},
                             FoldedCase{133, 264, 7, 20.0, 3}, FoldedCase{67, 136, 5, 20.0, 2}}) {
    expect_folded_matches_fp64(c, rng);
  }
}

// ffn_tiles' 128 x 256 form in bf16 alone, for memcheck and racecheck (its outputs staged in the
// ring, its narrow tail tiles).
TEST(GemmCore, FfnTilesWideSmallForTheSanitizer) {
  if (const std::string why = without_bf16_mma(); !why.empty()) GTEST_SKIP() << why;
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  expect_forced_runs(*backend, "ffn", "ffn_fused", "ffn_tiles", 8193, 72, Precision::bf16);
}

TEST(GemmCore, ACNotAMultipleOf8IsRefusedWithOneLine) {
  if (!cuda_available()) GTEST_SKIP() << "no GPU";
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  for (const Forced& f : kForced) {
    MeasureRequest request{
        f.lesson, 37, {2}, f.fp32 ? Precision::fp32 : Precision::bf16, CacheMode::cold};
    request.inner = 781;
    request.variants = {{f.launch, f.variant}};
    std::vector<Measurement> ms;
    const Status st = backend->measure(request, nullptr, &ms);
    ASSERT_FALSE(st.ok()) << f.variant;
    EXPECT_NE(st.message().find("C is not a multiple of 8"), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos);
  }
  // ln_mma in bf16: refused by the table, with the reason.
  MeasureRequest request{"layernorm_linear", 1031, {2}, Precision::bf16, CacheMode::cold};
  request.variants = {{"ln_gemm_bias", "ln_mma"}};
  std::vector<Measurement> ms;
  const Status st = backend->measure(request, nullptr, &ms);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("runs in fp32 only"), std::string::npos) << st.message();
}

// One small case of each kernel, for compute-sanitizer (scripts/portable-check.sh's pattern).
TEST(GemmCore, SmallShapesForTheSanitizer) {
  if (!cuda_available()) GTEST_SKIP() << "no GPU";
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  for (const Forced& f : kForced) {
    for (Precision p : {Precision::fp32, Precision::bf16}) {
      if (!f.offered(p, major)) continue;
      expect_forced_runs(*backend, f.lesson, f.launch, f.variant, 133, 72, p);
    }
  }
  for (size_t r = 0; r < gemm_core::gemm_ladder().size(); ++r) {
    if (gemm_core::gemm_ladder()[r].precision == Precision::bf16 && major < 8) continue;
    Status st;
    EXPECT_LT(ladder_error(r, 129, 136, 40, &st), 1e-2) << gemm_core::gemm_ladder()[r].name;
  }
}

// ffn_tiles in fp32 alone, for racecheck and memcheck: its down tiles cut over K in quarters at
// both shapes on an H100 (parts wait for the parts before them, counters in L2).
TEST(GemmCore, FfnTilesFp32SmallShapesForTheSanitizer) {
  if (!cuda_available()) GTEST_SKIP() << "no GPU";
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  for (auto [m, c] : {std::pair<int64_t, int64_t>{133, 72}, {301, 264}}) {
    expect_forced_runs(*backend, "ffn", "ffn_fused", "ffn_tiles", m, c, Precision::fp32);
  }
}

}  // namespace
}  // namespace fl
