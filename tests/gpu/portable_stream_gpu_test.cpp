// The portable weight-streaming kernels (kernels/ffn/ffn_stream.cu, kernels/ffn/ffn_hidden_slice.cu
// and kernels/layernorm_linear/ln_linear_stream.cu), called directly: fp32 and bf16, random shapes
// with odd token counts and odd C (rows that are not 16-byte multiples take the element-wise
// loads), fresh random inputs per shape, outputs poisoned (NaN) before every run, each run compared
// with a CPU reference in double (h and xn rounded to the lesson's precision, as level 1 stores
// them). Every shape runs twice: the second run checks that the first left the kernel's counters at
// zero.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/ffn/ffn_hidden_slice.h"
#include "kernels/ffn/ffn_hidden_slice_fixed.h"
#include "kernels/ffn/ffn_stream.h"
#include "kernels/layernorm_linear/ln_linear_stream.h"
#include "tests/support/level_gpu_test.h"

namespace fl {
namespace {

// bf16 on the host: round to nearest even, as __float2bfloat16_rn does.
uint16_t bf16_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float bf16_value(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}
double round_to(Precision p, double v) {
  return p == Precision::bf16 ? bf16_value(bf16_bits(static_cast<float>(v))) : float(v);
}

// A tensor on the host (as doubles holding exactly the device's values) and on the device.
struct Tensor {
  std::vector<double> host;
  void* dev = nullptr;
  Precision p;
  Tensor(Precision prec, size_t n) : host(n), p(prec) {
    EXPECT_EQ(cudaMalloc(&dev, n * bytes_per_element(prec) + 16), cudaSuccess);
  }
  ~Tensor() { cudaFree(dev); }
  Tensor(const Tensor&) = delete;
  void fill(std::mt19937& rng, double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    for (double& v : host) v = round_to(p, d(rng));
    upload();
  }
  void upload() {
    const size_t n = host.size();
    if (p == Precision::bf16) {
      std::vector<uint16_t> b(n);
      for (size_t i = 0; i < n; ++i) b[i] = bf16_bits(static_cast<float>(host[i]));
      ASSERT_EQ(cudaMemcpy(dev, b.data(), 2 * n, cudaMemcpyHostToDevice), cudaSuccess);
    } else {
      std::vector<float> f(host.begin(), host.end());
      ASSERT_EQ(cudaMemcpy(dev, f.data(), 4 * n, cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  void poison() {
    ASSERT_EQ(cudaMemset(dev, 0xff, host.size() * bytes_per_element(p)), cudaSuccess);
  }
  std::vector<double> download() const {
    const size_t n = host.size();
    std::vector<double> out(n);
    if (p == Precision::bf16) {
      std::vector<uint16_t> b(n);
      EXPECT_EQ(cudaMemcpy(b.data(), dev, 2 * n, cudaMemcpyDeviceToHost), cudaSuccess);
      for (size_t i = 0; i < n; ++i) out[i] = bf16_value(b[i]);
    } else {
      std::vector<float> f(n);
      EXPECT_EQ(cudaMemcpy(f.data(), dev, 4 * n, cudaMemcpyDeviceToHost), cudaSuccess);
      for (size_t i = 0; i < n; ++i) out[i] = f[i];
    }
    return out;
  }
};

struct Scratch {
  void* dev = nullptr;
  explicit Scratch(size_t bytes) {
    EXPECT_EQ(cudaMalloc(&dev, bytes + 16), cudaSuccess);  // 0 bytes: a valid pointer all the same
    EXPECT_EQ(cudaMemset(dev, 0, bytes + 16), cudaSuccess);
  }
  ~Scratch() { cudaFree(dev); }
};

double tolerance(Precision p) {
  return p == Precision::bf16 ? 1e-2 : 1e-5;
}

double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

struct Shape {
  int64_t m, c;
};

bool cuda_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// The FFN kernels under test: ffn_stream (with the plan's groups, or 1, 2 or 8 groups; 8 warps a
// block or 16; 24 or 32 hidden units an up slice; W2 after x and W1), and ffn_hidden_slice with its
// plan's choices or with 32 hidden units a block (96 blocks on an H100: fewer than the SMs), or W1
// in stages, or W2's rows asked for first or after the up product, or the exact-row products of
// fp32 at up to 8 tokens (bf16 keeps its tiles), in one stage or four.
enum class FfnKernel {
  kStream,
  kStreamOneGroup,
  kStreamTwoGroups,
  kStreamEightGroupsUnits32,
  kStreamWarps16,
  kStreamWarps16FourGroups,
  kStreamOneGroupW2AfterXW1,
  kSlice,
  kSliceWarps16,
  kSliceW2Late,
  kSliceUnits32,
  kSliceRows,
  kSliceFp32Shares,     // fp32 shares (row by row) in bf16 too; in fp32 the plan's
  kSliceW2Plain,        // W2 late asked for after the up product, not under it (no w2_during_up)
  kSlicePlan,           // the plan's choices, no tuning at all
  kSliceRing,           // the ring form (x and W1 in K chunks; bf16), the plan's warps and slots
  kSliceRing8,          // ... 8 warps
  kSliceRing16,         // ... 16 warps
  kSliceRing2Slots,     // ... 2 slots
  kSliceRingW1InSlots,  // ... W1's rows in the slots, W2's a share with each chunk
  kSliceRingW2Early,    // ... W1 resident, W2's rows each as soon as the W1 rows under it are done
  kSliceRingStaggered,  // ... block b's chunks from chunk b mod chunks on (a tuning)
  kSliceRingUnsplit,    // ... a warp's column tiles over all of K (no K split; a tuning)
  kSliceRing32,         // ... 32 units a block (every column tile a warp's with the split)
  kSliceRingDirect8,    // ... 32 units, x straight into registers (ring_direct), 8 warps, W2
                        // all after the up product, one batch of x's loads before W1's wait
  kSliceRingDirect16,   // ... 32 units, ring_direct, W2's last rows with W1, two batches of
                        // x's loads before W1's wait, 16 warps
  kSliceRingNotDirect,  // ... 32 units, x through the ring (ring_direct off)
  kSliceRingDirectW2Early,  // ... ring_direct as planned: W2's last rows with W1, one batch
  kSlicePrefetch,           // the plan's, with blocks on the idle SMs prefetching W2 into L2
  kSliceW2EarlyResident,    // 8 warps, W2's rows past x and W1 asked for after them (where
                            // w2_during_up: ffn_slice_w2_early_resident)
  kSliceW2EarlyAfterXW1,    // ... those rows asked for once x and W1 are in
  kSliceW1First,            // 8 warps, the resident copies ask for W1's columns before x's rows
  kSliceRingExchange8,      // ring_direct, h exchanged in groups of blocks (ex_group), 8 warps
  kSliceRingExchange16      // ... 16 warps
};

bool is_ring(FfnKernel k) {
  return k == FfnKernel::kSliceRing || k == FfnKernel::kSliceRing8 ||
         k == FfnKernel::kSliceRing16 || k == FfnKernel::kSliceRing2Slots ||
         k == FfnKernel::kSliceRingW1InSlots || k == FfnKernel::kSliceRingW2Early ||
         k == FfnKernel::kSliceRingStaggered || k == FfnKernel::kSliceRingUnsplit ||
         k == FfnKernel::kSliceRing32 || k == FfnKernel::kSliceRingDirect8 ||
         k == FfnKernel::kSliceRingDirect16 || k == FfnKernel::kSliceRingNotDirect ||
         k == FfnKernel::kSliceRingDirectW2Early || k == FfnKernel::kSliceRingExchange8 ||
         k == FfnKernel::kSliceRingExchange16;
}

bool is_stream(FfnKernel k) {
  return k == FfnKernel::kStream || k == FfnKernel::kStreamOneGroup ||
         k == FfnKernel::kStreamTwoGroups || k == FfnKernel::kStreamEightGroupsUnits32 ||
         k == FfnKernel::kStreamWarps16 || k == FfnKernel::kStreamWarps16FourGroups ||
         k == FfnKernel::kStreamOneGroupW2AfterXW1;
}

FfnStreamTuning stream_tuning(FfnKernel k) {
  FfnStreamTuning t;
  if (k == FfnKernel::kStreamOneGroup) t.groups = 1;
  if (k == FfnKernel::kStreamTwoGroups) t.groups = 2;
  if (k == FfnKernel::kStreamEightGroupsUnits32) t.groups = 8, t.units = 32, t.w2_after_xw1 = 0;
  if (k == FfnKernel::kStreamWarps16) t.warps = 16;
  if (k == FfnKernel::kStreamWarps16FourGroups) t.warps = 16, t.groups = 4;
  if (k == FfnKernel::kStreamOneGroupW2AfterXW1) t.groups = 1, t.w2_after_xw1 = 1;
  return t;
}

Status ffn_supported(FfnKernel k, Precision p, Shape s) {
  if (k == FfnKernel::kSliceWarps16 && p != Precision::bf16) {
    return Status::Unsupported("the hidden-slice FFN's 16-warp form is bf16 only");
  }
  if (is_ring(k) && p != Precision::bf16) {
    return Status::Unsupported("the hidden-slice FFN's ring form is bf16 only");
  }
  return is_stream(k) ? ffn_stream_supported(p, s.m, s.c) : ffn_slice_supported(p, s.m, s.c);
}

// A shape the kernel cannot run on this GPU (its slices do not fit the shared memory) is left
// out with a line saying why; *ran counts the shapes checked.
void check_ffn(Precision p, Shape s, unsigned seed, FfnKernel kernel, int* ran) {
  SCOPED_TRACE(std::string(to_string(p)) + " tokens " + std::to_string(s.m) + " C " +
               std::to_string(s.c) + " kernel " + std::to_string(int(kernel)));
  const Status ok = ffn_supported(kernel, p, s);
  if (!ok.ok()) {
    std::printf("left out: %s\n", ok.message().c_str());
    return;
  }
  ++*ran;
  const int64_t m = s.m, c = s.c, h = 4 * c;
  std::mt19937 rng(seed);
  Tensor x(p, m * c), w1(p, c * h), b1(p, h), w2(p, h * c), b2(p, c), y(p, m * c);
  x.fill(rng, -1, 1);
  w1.fill(rng, -1 / std::sqrt(double(c)), 1 / std::sqrt(double(c)));
  b1.fill(rng, -0.1, 0.1);
  w2.fill(rng, -1 / std::sqrt(double(h)), 1 / std::sqrt(double(h)));
  b2.fill(rng, -0.1, 0.1);
  std::vector<double> ref(m * c), hid(h);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < h; ++j) {
      double acc = b1.host[j];
      for (int64_t k = 0; k < c; ++k) acc += x.host[r * c + k] * w1.host[k * h + j];
      hid[j] = round_to(p, gelu_tanh(acc));
    }
    for (int64_t n = 0; n < c; ++n) {
      double acc = b2.host[n];
      for (int64_t j = 0; j < h; ++j) acc += hid[j] * w2.host[j * c + n];
      ref[r * c + n] = acc;
    }
  }
  FfnSliceTuning tuning;
  if (kernel == FfnKernel::kSliceUnits32) tuning.units = 32;
  if (kernel == FfnKernel::kSliceWarps16) tuning.warps = 16;
  if (kernel == FfnKernel::kSliceW2Late) tuning.w2_late = true;
  if (kernel == FfnKernel::kSliceRows) tuning.rows_to = 8;
  if (kernel == FfnKernel::kSlice) tuning.warps = 8;  // the 8-warp form, whatever the plan takes
  if (kernel == FfnKernel::kSliceFp32Shares) tuning.shares = 4;
  if (kernel == FfnKernel::kSliceW2Plain) tuning.warps = 8, tuning.w2_during_up = false;
  tuning.x_ring = is_ring(kernel);
  if (kernel == FfnKernel::kSliceRing8) tuning.warps = 8;
  if (kernel == FfnKernel::kSliceRing16) tuning.warps = 16;
  if (kernel == FfnKernel::kSliceRing2Slots) tuning.ring_stages = 2;
  if (kernel == FfnKernel::kSliceRingW1InSlots) tuning.ring_form = 1;
  if (kernel == FfnKernel::kSliceRingW2Early) tuning.ring_form = 2;
  if (kernel == FfnKernel::kSliceRingStaggered) tuning.stagger = 1;
  if (kernel == FfnKernel::kSliceRingUnsplit) tuning.split = 2;
  if (kernel == FfnKernel::kSliceRing32) tuning.units = 32;
  if (kernel == FfnKernel::kSliceRingDirect8)
    tuning.units = 32, tuning.warps = 8, tuning.direct = 1;
  if (kernel == FfnKernel::kSliceRingDirect8) tuning.w2_early = 2, tuning.deep = 2;
  if (kernel == FfnKernel::kSliceRingDirect16) tuning.units = 32, tuning.warps = 16;
  if (kernel == FfnKernel::kSliceRingDirect16) tuning.direct = 1, tuning.deep = 1;
  if (kernel == FfnKernel::kSliceRingNotDirect) tuning.units = 32, tuning.direct = 2;
  if (kernel == FfnKernel::kSliceRingDirectW2Early) tuning.units = 32, tuning.direct = 1;
  if (kernel == FfnKernel::kSliceRingDirectW2Early) tuning.w2_early = 1, tuning.deep = 2;
  if (kernel == FfnKernel::kSlicePrefetch) tuning.prefetch = 1;
  if (kernel == FfnKernel::kSliceW2EarlyResident) tuning.warps = 8, tuning.w2_early = 1;
  if (kernel == FfnKernel::kSliceW2EarlyAfterXW1) tuning.warps = 8, tuning.w2_early = 3;
  if (kernel == FfnKernel::kSliceW1First) tuning.warps = 8, tuning.w1_first = 1;
  if (kernel == FfnKernel::kSliceRingExchange8 || kernel == FfnKernel::kSliceRingExchange16) {
    tuning.units = 32, tuning.direct = 1, tuning.exchange = 1;
    tuning.warps = kernel == FfnKernel::kSliceRingExchange8 ? 8 : 16;
  }
  size_t bytes = 0;
  const Status sized = is_stream(kernel)
                           ? ffn_stream_scratch_bytes(p, m, c, &bytes, stream_tuning(kernel))
                       : is_ring(kernel) ? ffn_slice_scratch_bytes(p, m, c, &bytes, tuning)
                                         : ffn_slice_scratch_bytes(p, m, c, &bytes);
  if (sized.unsupported()) {  // a tuning whose plan does not fit here
    std::printf("left out: %s\n", sized.message().c_str());
    --*ran;
    return;
  }
  ASSERT_TRUE(sized.ok()) << sized.message();
  Scratch scratch(bytes);
  const FfnStreamBuffers b{x.dev, w1.dev, b1.dev, w2.dev, b2.dev, y.dev, scratch.dev};
  FfnSliceBuffers sb{x.dev, w1.dev, b1.dev, w2.dev, b2.dev, y.dev, scratch.dev, {}, nullptr, 0};
  // W1 packed for the launch's slices where the switch is on (FL_FFN_W1_PACKED=1).
  Scratch packed(is_stream(kernel) ? 16 : ffn_slice_packed_w1_bytes(p, c));
  if (!is_stream(kernel) && ffn_slice_w1_packed()) {
    const Status st =
        ffn_slice_pack_w1(p, w1.dev, m, c, packed.dev, &sb.w1_packed_units, nullptr, tuning);
    ASSERT_TRUE(st.ok()) << st.message();
    sb.w1_packed = packed.dev;
  }
  for (int run = 0; run < 2; ++run) {
    y.poison();
    const Status st = is_stream(kernel)
                          ? launch_ffn_stream(p, b, m, c, nullptr, stream_tuning(kernel))
                          : launch_ffn_slice(p, sb, m, c, nullptr, tuning);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const double err = relative_l2_error(y.download(), ref);
    EXPECT_LT(err, tolerance(p)) << "run " << run;
  }
}

void check_ln(Precision p, Shape s, unsigned seed) {
  SCOPED_TRACE(std::string(to_string(p)) + " tokens " + std::to_string(s.m) + " C " +
               std::to_string(s.c));
  const Status ok = ln_stream_supported(p, s.m, s.c);
  if (!ok.ok()) GTEST_SKIP() << ok.message();
  const int64_t m = s.m, c = s.c, n = 3 * c;
  std::mt19937 rng(seed);
  Tensor x(p, m * c), gamma(p, c), beta(p, c), w(p, c * n), bias(p, n), y(p, m * n);
  x.fill(rng, -2, 3);
  gamma.fill(rng, 0.5, 1.5);
  beta.fill(rng, -0.2, 0.2);
  w.fill(rng, -1 / std::sqrt(double(c)), 1 / std::sqrt(double(c)));
  bias.fill(rng, -0.1, 0.1);
  std::vector<double> ref(m * n), xn(c);
  for (int64_t r = 0; r < m; ++r) {
    double mean = 0, var = 0;
    for (int64_t k = 0; k < c; ++k) mean += x.host[r * c + k];
    mean /= c;
    for (int64_t k = 0; k < c; ++k) var += (x.host[r * c + k] - mean) * (x.host[r * c + k] - mean);
    const double rstd = 1 / std::sqrt(var / c + 1e-5);
    for (int64_t k = 0; k < c; ++k) {
      xn[k] = round_to(p, (x.host[r * c + k] - mean) * rstd * gamma.host[k] + beta.host[k]);
    }
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias.host[j];
      for (int64_t k = 0; k < c; ++k) acc += xn[k] * w.host[k * n + j];
      ref[r * n + j] = acc;
    }
  }
  size_t bytes = 0;
  ASSERT_TRUE(ln_stream_scratch_bytes(p, m, c, n, &bytes).ok());
  Scratch scratch(bytes);
  const LnStreamBuffers b{x.dev, gamma.dev, beta.dev, w.dev, bias.dev, y.dev, scratch.dev};
  for (int run = 0; run < 2; ++run) {
    y.poison();
    const Status st = launch_ln_stream(p, b, m, c, n, nullptr);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const double err = relative_l2_error(y.download(), ref);
    EXPECT_LT(err, tolerance(p)) << "run " << run;
  }
}

// Odd token counts and odd C (and a few aligned ones, which take the 16-byte loads); the
// token counts cross the 16-token chunk size, C crosses the 32-column unit.
const Shape kFfnShapes[] = {{1, 97},   {7, 200}, {13, 131}, {16, 768}, {33, 255},
                            {61, 385}, {64, 64}, {1, 768},  {3, 1025}, {47, 768}};
const Shape kLnShapes[] = {{1, 97},   {9, 768},  {17, 131}, {63, 200}, {129, 385},
                           {255, 99}, {256, 64}, {1, 768},  {5, 1023}, {256, 768}};

// The hidden-slice FFN; fp32 at 17 x 768 asks for W2 after the up product on an H100 (both
// slices and x do not fit at once), at 47 and 64 x 768 it does not fit at all.
const Shape kSliceShapes[] = {{1, 97},   {2, 768},  {7, 200},  {13, 131}, {17, 768},
                              {33, 255}, {61, 385}, {64, 768}, {1, 1025}, {47, 768}};

class PortableStream : public ::testing::TestWithParam<Precision> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(PortableStream, FfnMatchesReferenceAtOddShapes) {
  unsigned seed = 11;
  int ran = 0;
  for (const Shape& s : kFfnShapes) check_ffn(GetParam(), s, seed++, FfnKernel::kStream, &ran);
  EXPECT_GE(ran, 5);
}

// ffn_stream's other forms: one group (no partial sums; W2 after x and W1), 2 groups, 8 groups of
// 32-unit slices with W2 asked for with x and W1, 16 warps a block with the plan's groups or 4.
TEST_P(PortableStream, FfnStreamFormsMatchReferenceAtOddShapes) {
  unsigned seed = 111;
  int ran = 0;
  for (const Shape& s : {Shape{1, 768}, Shape{7, 200}, Shape{33, 255}, Shape{61, 385},
                         Shape{64, 768}, Shape{3, 1025}}) {
    check_ffn(GetParam(), s, seed++, FfnKernel::kStreamOneGroup, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kStreamTwoGroups, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kStreamEightGroupsUnits32, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kStreamWarps16, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kStreamWarps16FourGroups, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kStreamOneGroupW2AfterXW1, &ran);
  }
  EXPECT_GE(ran, 18);  // fp32 leaves out the shapes whose slices do not fit
}

// W2's rows asked for after the up product where both would fit.
TEST_P(PortableStream, HiddenSliceFfnWithW2Late) {
  unsigned seed = 131;
  int ran = 0;
  for (const Shape& s : {Shape{1, 768}, Shape{13, 131}, Shape{16, 768}, Shape{33, 255}}) {
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceW2Late, &ran);
  }
  EXPECT_GE(ran, 3);
}

TEST_P(PortableStream, HiddenSliceFfnMatchesReferenceAtOddShapes) {
  unsigned seed = 51;
  int ran = 0;
  for (const Shape& s : kSliceShapes) check_ffn(GetParam(), s, seed++, FfnKernel::kSlice, &ran);
  EXPECT_GE(ran, 7);
}

// 32 hidden units a block where the plan would take 24: fewer blocks than SMs.
TEST_P(PortableStream, HiddenSliceFfnWithWiderSlices) {
  unsigned seed = 61;
  int ran = 0;
  for (const Shape& s : {Shape{1, 768}, Shape{5, 768}, Shape{15, 768}}) {
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceUnits32, &ran);
  }
  EXPECT_EQ(ran, 3);
}

// 16 warps a block (bf16 only): the copies, both products' parts and the sum over twice the
// warps; odd C, 1-4 row tiles, W2 late at 64 x 768 on GPUs with less shared memory.
TEST_P(PortableStream, HiddenSliceFfnWith16Warps) {
  unsigned seed = 81;
  int ran = 0;
  for (const Shape& s : {Shape{1, 97}, Shape{11, 768}, Shape{29, 131}, Shape{1, 768},
                         Shape{16, 768}, Shape{47, 385}, Shape{64, 768}}) {
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceWarps16, &ran);
  }
  EXPECT_EQ(ran, GetParam() == Precision::bf16 ? 7 : 0);
}

// The shares of y: fp32 row by row (bf16's tuning; fp32's plan), and the plan's (bf16 tile by
// tile in bf16) with 8 and 16 warps, at odd token counts and odd C, 1-4 row tiles.
TEST_P(PortableStream, HiddenSliceFfnShareForms) {
  unsigned seed = 141;
  int ran = 0;
  for (const Shape& s : {Shape{1, 97}, Shape{3, 768}, Shape{13, 131}, Shape{16, 768},
                         Shape{29, 255}, Shape{47, 385}, Shape{64, 768}}) {
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceFp32Shares, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSlice, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceWarps16, &ran);
  }
  EXPECT_GE(ran, GetParam() == Precision::bf16 ? 21 : 8);  // fp32 leaves out what does not fit
}

// As an RTX 30/40 card plans it (99 KiB of shared memory a block, as `bench --choose-as 8.6`
// hands it to the plans), in bf16 on 132 SMs: at C from ~740 32 hidden units a block with
// W2's rows asked for over x and W1 once every warp holds its up operands in registers
// (w2_during_up), at C near 700 24 units with W2's zero rows over x (w2_pad_over_x, zeroed after
// the up product), odd C among both; small C as usual; fp32's slices at C near 768 do not fit
// there (left out), but at 1-16 tokens x's exact rows (x_rows) with W2 late. The same forms with
// W2 plainly late (FfnSliceTuning::w2_during_up off).
TEST_P(PortableStream, HiddenSliceFfnAsAnRtxCard) {
  const ChosenGpuSharedOptin rtx(99 * 1024);
  int device = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  unsigned seed = 151;
  int ran = 0, padded = 0, during = 0, exact = 0;
  for (const Shape& s : {Shape{1, 689}, Shape{13, 701}, Shape{3, 735}, Shape{1, 759}, Shape{5, 781},
                         Shape{11, 803}, Shape{16, 768}, Shape{1, 97}, Shape{9, 40}}) {
    FfnSlicePlan plan;
    if (ffn_slice_choose_plan(s.m, s.c, bytes_per_element(GetParam()), sms, 99 * 1024, &plan)) {
      padded += plan.w2_pad_over_x;
      during += plan.w2_during_up;
      exact += plan.x_rows > 0;
    }
    check_ffn(GetParam(), s, seed++, FfnKernel::kSlice, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceW2Plain, &ran);
  }
  const bool bf16 = GetParam() == Precision::bf16;
  if (bf16 && sms == 132) {
    EXPECT_EQ(padded, 3);
    EXPECT_EQ(during, 4);
  }
  if (!bf16 && sms == 132) EXPECT_EQ(exact, 5);  // all but 5 x 781, 11 x 803 and the small C
  EXPECT_EQ(ran, bf16 ? 18 : sms == 132 ? 14 : 4);
}

// As an RTX card plans it (99 KiB), W2's last rows past x and W1 asked for right after them and
// the rest over W1 once the up operands are in registers (ffn_slice_w2_early_resident): 24 to 27
// of 32 rows late at C = 759-803, a last block of 28 valid units (C = 759), odd C (the element
// path), 1-16 tokens; those rows asked for once x and W1 are in; and W1's columns asked for
// before x's rows (w1_first). Small enough for compute-sanitizer.
TEST_P(PortableStream, HiddenSliceFfnW2EarlyAsAnRtxCard) {
  const ChosenGpuSharedOptin rtx(99 * 1024);
  int device = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  unsigned seed = 161;
  int ran = 0, early = 0;
  for (const Shape& s : {Shape{1, 759}, Shape{16, 768}, Shape{5, 781}, Shape{11, 803}}) {
    FfnSlicePlan plan;
    if (ffn_slice_choose_plan(s.m, s.c, bytes_per_element(GetParam()), sms, 99 * 1024, &plan)) {
      early += ffn_slice_w2_early_resident(&plan, 99 * 1024 - 64);
    }
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceW2EarlyResident, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceW2EarlyAfterXW1, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceW1First, &ran);
  }
  const bool bf16 = GetParam() == Precision::bf16;
  if (bf16 && sms == 132) EXPECT_EQ(early, 4);
  if (bf16) EXPECT_EQ(ran, 12);
}

// The ring form (bf16): x through a ring of K chunks, W1 resident and W2's rows asked for over
// it after the up product (the plan's), or each as soon as the W1 rows under it are done, or
// W1's rows in the slots and W2's a share with each chunk; each block's chunks in K's order (the
// plan's) or staggered (from chunk b mod chunks on, and round); odd token counts (1-4 row tiles)
// and odd C (the element-wise copies; a last chunk of a few columns), with the plan's warps and
// slots, 8 and 16 warps, and 2 slots; K split among warps (the plan's) or a warp's column tiles
// over all of K, and 32 units a block (all four column tiles a warp's with the split).
TEST_P(PortableStream, HiddenSliceFfnRingForms) {
  unsigned seed = 171;
  int ran = 0;
  for (const Shape& s :
       {Shape{1, 97}, Shape{3, 768}, Shape{13, 131}, Shape{17, 40}, Shape{33, 255}, Shape{47, 768},
        Shape{61, 385}, Shape{64, 768}, Shape{64, 64}, Shape{29, 1025}}) {
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRing, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRing8, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRing16, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRing2Slots, &ran);
  }
  for (const Shape& s : {Shape{1, 97}, Shape{13, 131}, Shape{47, 768}, Shape{61, 385},
                         Shape{64, 768}, Shape{29, 1025}}) {
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRingW1InSlots, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRingW2Early, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRingStaggered, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRingUnsplit, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRing32, &ran);
  }
  EXPECT_EQ(ran, GetParam() == Precision::bf16 ? 70 : 0);
}

// The ring form at small shapes for compute-sanitizer: one chunk and a partial one, odd C, 1-4
// row tiles, 8 and 16 warps, 2 slots; K split among warps (the plan's: one column tile, and with
// 32 units all four) and not.
TEST_P(PortableStream, HiddenSliceFfnRingSmallShapes) {
  int ran = 0;
  check_ffn(GetParam(), {5, 40}, 201, FfnKernel::kSliceRing8, &ran);
  check_ffn(GetParam(), {35, 33}, 202, FfnKernel::kSliceRing16, &ran);
  check_ffn(GetParam(), {64, 136}, 203, FfnKernel::kSliceRing2Slots, &ran);
  check_ffn(GetParam(), {9, 97}, 204, FfnKernel::kSliceRingW1InSlots, &ran);
  check_ffn(GetParam(), {21, 72}, 205, FfnKernel::kSliceRingW2Early, &ran);
  check_ffn(GetParam(), {33, 200}, 206, FfnKernel::kSliceRingStaggered, &ran);
  check_ffn(GetParam(), {51, 203}, 207, FfnKernel::kSliceRing32, &ran);
  check_ffn(GetParam(), {19, 131}, 208, FfnKernel::kSliceRingUnsplit, &ran);
  EXPECT_EQ(ran, GetParam() == Precision::bf16 ? 8 : 0);
}

// x's fragments straight into registers (ring_direct: C a multiple of 8, 32 units): odd token
// counts (1-4 row tiles, rows past the tokens zero), a last 32-wide K group of 8 columns (C = 40,
// 136, 200), 8 warps (3 row tiles: 2 parts of K and 2 idle warps at 33-48 tokens) and 16, the
// ring (ring_direct off) beside it, and W2's last rows asked for with W1 (w2_early); odd C falls
// back to the ring. Small enough for compute-sanitizer.
TEST_P(PortableStream, HiddenSliceFfnRingDirect) {
  unsigned seed = 231;
  int ran = 0;
  for (const Shape& s : {Shape{1, 40}, Shape{35, 40}, Shape{17, 200}, Shape{64, 136}, Shape{9, 72},
                         Shape{61, 72}, Shape{13, 131}}) {
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRingDirect8, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRingDirect16, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRingNotDirect, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRingDirectW2Early, &ran);
  }
  EXPECT_EQ(ran, GetParam() == Precision::bf16 ? 28 : 0);
}

// ring_direct at C = 768 and near it (the plan's shapes at 33-64 tokens).
TEST_P(PortableStream, HiddenSliceFfnRingDirectWide) {
  unsigned seed = 251;
  int ran = 0;
  for (const Shape& s : {Shape{33, 768}, Shape{47, 768}, Shape{64, 768}, Shape{50, 1024}}) {
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRingDirect8, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRingDirect16, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRingDirectW2Early, &ran);
  }
  EXPECT_EQ(ran, GetParam() == Precision::bf16 ? 12 : 0);
}

// fp32 as an RTX 30/40 card plans it (99 KiB a block) at 1-16 tokens and C near 768: x's exact
// rows (1, 2, 4 or 8 of them, zero past the tokens; from 9 tokens two passes of 8 over the
// resident W1) and W1's rows unpadded, W2 late over them (x_rows; the 16-row form does not
// fit); odd C and token counts. bf16 runs its own plans.
TEST_P(PortableStream, HiddenSliceFfnExactRowsAsAnRtxCard) {
  const ChosenGpuSharedOptin rtx(99 * 1024);
  int device = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  unsigned seed = 211;
  int ran = 0, exact = 0;
  for (const Shape& s : {Shape{2, 701}, Shape{7, 769}, Shape{6, 745}, Shape{4, 768}, Shape{8, 768},
                         Shape{1, 767}, Shape{9, 745}, Shape{11, 767}, Shape{16, 768}}) {
    FfnSlicePlan plan;
    if (ffn_slice_choose_plan(s.m, s.c, bytes_per_element(GetParam()), sms, 99 * 1024, &plan)) {
      exact += plan.x_rows > 0;
    }
    check_ffn(GetParam(), s, seed++, FfnKernel::kSlice, &ran);
  }
  if (GetParam() == Precision::fp32 && sms == 132) EXPECT_EQ(exact, 9);
  if (sms == 132) EXPECT_EQ(ran, 9);  // fp32's plans need one block an SM in 24 units
  if (GetParam() == Precision::bf16) EXPECT_EQ(ran, 9);
}

// Exact-row shapes for compute-sanitizer (fp32, 99 KiB a block): 5 tokens (8 rows, 3 zero), 13
// (two passes, the second of 5 rows).
TEST_P(PortableStream, HiddenSliceFfnExactRowsSmall) {
  const ChosenGpuSharedOptin rtx(99 * 1024);
  int ran = 0;
  check_ffn(GetParam(), {5, 689}, 221, FfnKernel::kSlice, &ran);
  check_ffn(GetParam(), {13, 689}, 222, FfnKernel::kSlice, &ran);
  EXPECT_EQ(ran, 2);
}

// As an RTX 30/40 card plans it (99 KiB a block) at 33-64 bf16 tokens: x's rows no longer fit
// beside the slices, so the plan is the ring form (on 132 SMs); odd C and token counts among
// them. fp32 has no plan there (left out).
TEST_P(PortableStream, HiddenSliceFfnRingAsAnRtxCard) {
  const ChosenGpuSharedOptin rtx(99 * 1024);
  int device = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  unsigned seed = 191;
  int ran = 0, ring = 0;
  for (const Shape& s :
       {Shape{33, 768}, Shape{47, 768}, Shape{49, 781}, Shape{64, 768}, Shape{61, 701}}) {
    FfnSlicePlan plan;
    if (ffn_slice_choose_plan(s.m, s.c, bytes_per_element(GetParam()), sms, 99 * 1024, &plan)) {
      ring += plan.x_ring;
    }
    check_ffn(GetParam(), s, seed++, FfnKernel::kSlicePlan, &ran);
  }
  const bool bf16 = GetParam() == Precision::bf16;
  if (bf16 && sms == 132) EXPECT_EQ(ring, 5);
  EXPECT_EQ(ran, bf16 ? 5 : 0);
}

// The sum of y by groups in the ring form (FL_FFN_SLICE's nineteenth number 1, set here unless
// the environment names a form) as an RTX card plans it (99 KiB a block) at odd token counts
// 33-64 (2-4 row tiles, 8 and 16 warps) and odd C (not a multiple of 8: the ring, not
// ring_direct; 88-105 blocks: groups of 11-14), each shape launched twice (check_ffn) so both of
// the counters' parities run. Small enough for compute-sanitizer.
TEST_P(PortableStream, HiddenSliceFfnRingGroupsAsAnRtxCard) {
  const ChosenGpuSharedOptin rtx(99 * 1024);
  const char* had = std::getenv("FL_FFN_SLICE");
  if (had == nullptr) setenv("FL_FFN_SLICE", "0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1", 1);
  unsigned seed = 261;
  int ran = 0;
  for (const Shape& s : {Shape{33, 768}, Shape{35, 701}, Shape{47, 776}, Shape{49, 768},
                         Shape{57, 833}, Shape{63, 704}, Shape{64, 768}}) {
    check_ffn(GetParam(), s, seed++, FfnKernel::kSlicePlan, &ran);
  }
  if (had == nullptr) unsetenv("FL_FFN_SLICE");
  EXPECT_EQ(ran, GetParam() == Precision::bf16 ? 7 : 0);
}

// h exchanged in groups of blocks (ex_group: ffn_hidden_slice_exchange.cuh) in the ring form:
// groups of 8 (C a multiple of 64: 1-4 groups) and of 4 (C = 96, 160: 12 and 20 blocks), 1-4 row
// tiles at odd token counts, 8 and 16 warps; C = 200 (25 blocks) and 5 tokens on 8 warps (fp32
// shares) fall back to ring_direct's share a block. C = 576 at 49 and 57 tokens on 16 warps: the
// down product's fast path (4 row tiles x 3 jobs of 3 column tiles, rows past the tokens left
// out; ffn_hidden_slice_exchange_down.cuh). Small enough for compute-sanitizer.
TEST_P(PortableStream, HiddenSliceFfnRingExchange) {
  unsigned seed = 281;
  int ran = 0;
  for (const Shape& s :
       {Shape{33, 64}, Shape{35, 128}, Shape{47, 192}, Shape{64, 256}, Shape{5, 64}, Shape{17, 128},
        Shape{33, 96}, Shape{29, 160}, Shape{13, 200}, Shape{49, 576}, Shape{57, 576}}) {
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRingExchange8, &ran);
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRingExchange16, &ran);
  }
  EXPECT_EQ(ran, GetParam() == Precision::bf16 ? 22 : 0);
}

// The exchange as an RTX card plans it (99 KiB a block; FL_FFN_SLICE's twentieth number 1, set
// here unless the environment names a form) at 33-64 tokens, C = 768, 832 (96 and 104 blocks,
// groups of 8; W2's tile rows 124-255 asked for with W1) and 896 (112 blocks, groups of 4), each
// shape launched twice (check_ffn): both of the counters' parities.
TEST_P(PortableStream, HiddenSliceFfnRingExchangeAsAnRtxCard) {
  const ChosenGpuSharedOptin rtx(99 * 1024);
  int device = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  const char* had = std::getenv("FL_FFN_SLICE");
  if (had == nullptr) setenv("FL_FFN_SLICE", "0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1", 1);
  unsigned seed = 301;
  int ran = 0, exchanged = 0;
  for (const Shape& s : {Shape{33, 768}, Shape{35, 832}, Shape{47, 768}, Shape{49, 832},
                         Shape{57, 896}, Shape{63, 832}, Shape{64, 768}}) {
    FfnSlicePlan plan;
    if (ffn_slice_choose_plan(s.m, s.c, bytes_per_element(GetParam()), sms, 99 * 1024, &plan)) {
      plan.ring_direct = plan.ring_direct && ffn_slice_ring_direct_fits(plan);
      exchanged += ffn_slice_exchange(&plan);
    }
    check_ffn(GetParam(), s, seed++, FfnKernel::kSlicePlan, &ran);
  }
  if (had == nullptr) unsetenv("FL_FFN_SLICE");
  const bool bf16 = GetParam() == Precision::bf16;
  if (bf16 && sms == 132) EXPECT_EQ(exchanged, 7);
  EXPECT_EQ(ran, bf16 ? 7 : 0);
}

// The 9-16-token RTX plan's kernel with the plan's fields as constants (the default;
// kernels/ffn/ffn_hidden_slice_fixed.h) as an RTX card plans it (99 KiB): at C = 768 and 9, 12,
// 13 and 16 tokens the launch takes it (bf16), at 1 token, 17 tokens and odd C the plan's
// kernel; then the same shapes with FL_FFN_SLICE_FIXED=0 (the plan's kernel everywhere), unless
// the environment names a form. Each shape launched twice (both of the groups' counters'
// parities). Small enough for compute-sanitizer.
TEST_P(PortableStream, HiddenSliceFfnFixedAsAnRtxCard) {
  const ChosenGpuSharedOptin rtx(99 * 1024);
  const char* had = std::getenv("FL_FFN_SLICE_FIXED");
  unsigned seed = 281;
  int ran = 0;
  for (const char* form : {"1", "0"}) {
    if (had == nullptr) setenv("FL_FFN_SLICE_FIXED", form, 1);
    for (const Shape& s : {Shape{9, 768}, Shape{12, 768}, Shape{13, 768}, Shape{16, 768},
                           Shape{1, 768}, Shape{17, 768}, Shape{11, 803}}) {
      check_ffn(GetParam(), s, seed++, FfnKernel::kSlicePlan, &ran);
    }
    if (had != nullptr) break;
  }
  if (had == nullptr) unsetenv("FL_FFN_SLICE_FIXED");
  EXPECT_GE(ran, 4);
}

// The exchange's 49-64-token RTX plan's kernel with the plan's fields as constants (the default;
// ffn_hidden_slice_fixed.h's ffn_slice_fix_rtx64) as an RTX card plans it (99 KiB): at C = 768
// and 49, 57, 63 and 64 tokens the launch takes it (bf16, 132 SMs), at 48 tokens and C = 832 the
// plan's kernels (the exchange's general instance at 832); then the same shapes with
// FL_FFN_EX_FIXED=0, unless the environment names a form. Small enough for compute-sanitizer.
TEST_P(PortableStream, HiddenSliceFfnExchangeFixedAsAnRtxCard) {
  const ChosenGpuSharedOptin rtx(99 * 1024);
  int device = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  const char* had = std::getenv("FL_FFN_EX_FIXED");
  unsigned seed = 331;
  int ran = 0, fixed = 0;
  for (const char* form : {"1", "0"}) {
    if (had == nullptr) setenv("FL_FFN_EX_FIXED", form, 1);
    for (const Shape& s : {Shape{49, 768}, Shape{57, 768}, Shape{63, 768}, Shape{64, 768},
                           Shape{48, 768}, Shape{57, 832}, Shape{64, 832}}) {
      FfnSlicePlan plan;
      if (form[0] == '1' &&
          ffn_slice_choose_plan(s.m, s.c, bytes_per_element(GetParam()), sms, 99 * 1024, &plan)) {
        plan.ring_direct = plan.ring_direct && ffn_slice_ring_direct_fits(plan);
        if (plan.warps == 16 && ffn_slice_exchange(&plan)) fixed += ffn_slice_ex_fixed_fits(plan);
      }
      check_ffn(GetParam(), s, seed++, FfnKernel::kSlicePlan, &ran);
    }
    if (had != nullptr) break;
  }
  if (had == nullptr) unsetenv("FL_FFN_EX_FIXED");
  const bool bf16 = GetParam() == Precision::bf16;
  if (bf16 && sms == 132) EXPECT_EQ(fixed, 4);
  EXPECT_GE(ran, bf16 ? 7 : 0);
}

// Blocks on the SMs the plan leaves idle prefetching W2 into L2 (a tuning): the shares' sum and
// the grid barrier count the plan's blocks only. fp32 and bf16, 1-4 row tiles, odd C, the ring
// form among them (bf16 at 47 tokens as an RTX card).
TEST_P(PortableStream, HiddenSliceFfnWithPrefetchingBlocks) {
  unsigned seed = 211;
  int ran = 0;
  for (const Shape& s : {Shape{1, 97}, Shape{3, 768}, Shape{13, 131}, Shape{16, 768},
                         Shape{29, 255}, Shape{64, 768}}) {
    check_ffn(GetParam(), s, seed++, FfnKernel::kSlicePrefetch, &ran);
  }
  const ChosenGpuSharedOptin rtx(99 * 1024);
  check_ffn(GetParam(), {47, 768}, seed++, FfnKernel::kSlicePrefetch, &ran);
  EXPECT_GE(ran, GetParam() == Precision::bf16 ? 7 : 4);  // fp32 leaves out what does not fit
}

// The exact-row products at 1-8 tokens (and at 9, past them: the tiles), odd C among them.
TEST_P(PortableStream, HiddenSliceFfnWithExactRows) {
  unsigned seed = 91;
  int ran = 0;
  for (const Shape& s :
       {Shape{1, 768}, Shape{3, 97}, Shape{5, 768}, Shape{7, 131}, Shape{8, 40}, Shape{9, 768}}) {
    check_ffn(GetParam(), s, seed++, FfnKernel::kSliceRows, &ran);
  }
  check_ffn(GetParam(), {3, 767}, seed++, FfnKernel::kSliceRows, &ran);
  EXPECT_EQ(ran, 7);
}

TEST_P(PortableStream, LayerNormLinearMatchesReferenceAtOddShapes) {
  unsigned seed = 31;
  for (const Shape& s : kLnShapes) check_ln(GetParam(), s, seed++);
}

// A few small shapes (odd and aligned C) for compute-sanitizer, whose tools are slow on the
// shapes above.
TEST_P(PortableStream, SmallShapes) {
  int ran = 0;
  check_ffn(GetParam(), {3, 40}, 71, FfnKernel::kStream, &ran);
  check_ffn(GetParam(), {17, 33}, 72, FfnKernel::kStream, &ran);
  check_ffn(GetParam(), {9, 40}, 82, FfnKernel::kStreamTwoGroups, &ran);
  check_ffn(GetParam(), {5, 33}, 84, FfnKernel::kStreamWarps16FourGroups, &ran);
  check_ffn(GetParam(), {2, 40}, 83, FfnKernel::kSliceW2Late, &ran);
  check_ffn(GetParam(), {1, 40}, 75, FfnKernel::kSlice, &ran);
  check_ffn(GetParam(), {9, 33}, 76, FfnKernel::kSlice, &ran);
  check_ffn(GetParam(), {5, 72}, 77, FfnKernel::kSliceWarps16, &ran);  // fp32: left out
  check_ffn(GetParam(), {2, 40}, 78, FfnKernel::kSliceUnits32, &ran);
  check_ffn(GetParam(), {3, 768}, 79, FfnKernel::kSlice, &ran);  // bf16: 32 units a block
  check_ffn(GetParam(), {3, 40}, 80, FfnKernel::kSliceRows, &ran);
  check_ffn(GetParam(), {7, 33}, 81, FfnKernel::kSliceRows, &ran);
  check_ffn(GetParam(), {1, 40}, 85, FfnKernel::kStreamOneGroupW2AfterXW1, &ran);
  check_ffn(GetParam(), {9, 33}, 86, FfnKernel::kSliceWarps16, &ran);   // fp32: left out
  check_ffn(GetParam(), {17, 40}, 87, FfnKernel::kSliceWarps16, &ran);  // fp32: left out
  check_ffn(GetParam(), {5, 33}, 88, FfnKernel::kSliceFp32Shares, &ran);
  check_ffn(GetParam(), {19, 72}, 89, FfnKernel::kSlice, &ran);        // two row tiles
  check_ffn(GetParam(), {5, 40}, 90, FfnKernel::kSliceRing, &ran);     // fp32: left out
  check_ffn(GetParam(), {35, 33}, 91, FfnKernel::kSliceRing16, &ran);  // fp32: left out
  EXPECT_EQ(ran, GetParam() == Precision::bf16 ? 19 : 14);
  check_ln(GetParam(), {5, 48}, 73);
  check_ln(GetParam(), {35, 21}, 74);
}

TEST_P(PortableStream, RefusesTooManyTokensWithAMessage) {
  const Status ffn = ffn_stream_supported(GetParam(), kFfnStreamMaxTokens + 1, 768);
  ASSERT_FALSE(ffn.ok());
  EXPECT_NE(ffn.message().find("tokens"), std::string::npos);
  const Status slice = ffn_slice_supported(GetParam(), kSliceMaxTokens + 1, 768);
  ASSERT_FALSE(slice.ok());
  EXPECT_NE(slice.message().find("tokens"), std::string::npos);
  const Status ln = ln_stream_supported(GetParam(), kLnStreamMaxTokens + 1, 768);
  ASSERT_FALSE(ln.ok());
  EXPECT_NE(ln.message().find("tokens"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Precisions, PortableStream,
                         ::testing::Values(Precision::fp32, Precision::bf16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace fl
