// Lesson 4, residual_layernorm: h = x + r; y = LayerNorm(h) * gamma + beta, over rows of C.
//
// The residual add and the LayerNorm that follows it in every transformer block (GPT-2: the
// attention or MLP output r added to the residual stream x, then ln_1 / ln_2). Both h and y are
// outputs: y feeds the next matmul, and h is the residual stream the next block adds onto.
// LayerNorm over one row of C values: mean = sum(h) / C, var = sum((h - mean)^2) / C (biased),
// y = (h - mean) / sqrt(var + 1e-5) * gamma + beta.
//
// The ladder: unfused is three kernels (add writes h; mean_var reads h and writes the row
// statistics; normalize reads h again and writes y); level 1 is PyTorch's eager split (add, then
// one LayerNorm kernel that reads h once); fused is one kernel. With N = rows x C elements of b
// bytes the levels move 6Nb, 5Nb and 4Nb (plus the small statistics and gamma, beta), so the
// byte-ratio limit of the fused speedup over level 0 is 6/4 = 1.5x (1.25x over level 1). h is
// an output, so the fused kernel must still write it: fusing saves h's two re-reads, not its
// write. The level table below has every launch's bytes.
//
// Prediction (before measuring), default shape R = 16,384, C = 768, fp32: N = 12.6M elements,
// Nb = 50.3 MB; level 0 moves 302.3 MB, level 1 251.7 MB, level 2 201.3 MB. At a copy bandwidth
// of ~3.0 TB/s (H100 SXM) that is ~101, ~84 and ~67 us. Each launch's own working set at this
// shape is only 1-3x a 50-60 MB L2, so the per-kernel percentages are judged at R = 256K rows
// (fp32: 805 MB per tensor), where every kernel streams from DRAM (measured: docs/PERFORMANCE.md).
//
// Kernel design (every row-wise launch):
//  - A row is spread over `lanes` threads, the fewest (8 to 512, a power of two) that hold it
//    with at most 8 16-byte packs each: C = 768 fp32 is 192 float4 = 32 lanes x 6, bf16 is 96
//    packs of 8 = 16 lanes x 6; rows longer than 1024 fp32 / 2048 bf16 take several warps and
//    a shared-memory step in the reductions. 512 lanes x 8 float4 bound C at 16384.
//  - Each thread loads its whole slice of the row into registers first (all loads in flight at
//    once), so the statistics, the normalisation and both writes never touch DRAM again: the
//    variance is the stable two-pass sum((h - mean)^2) over registers, at no extra traffic.
//  - Accesses are 16 bytes (float4 / 8 x bf16: LDG.E.128 / STG.E.128). When C is a multiple of
//    the vector width every row starts 16-byte aligned. Otherwise (odd C) a row starts with a
//    few single elements (the head) up to the next aligned address, continues in 16-byte packs
//    and ends with a short single-element tail; gamma and beta are then read element by element
//    (from L1), since their columns are not aligned in such a row. So any C works, C = 1 too.
//  - The add kernel is elementwise over N, so it is vectorised for any C (the tensor start is
//    aligned), with a scalar tail.
//  - Statistics are accumulated in fp32 for both precisions. In bf16 the stored h (rounded to
//    bf16) is what every level normalises, the fused kernel included, as PyTorch does with a
//    bf16 residual stream: so all levels compute the same function.
//  - gamma and beta are stored in the tensors' precision (bf16 with bf16, as in llm.c and bf16
//    inference). They are 2C elements per launch, re-read by every row from L1/L2, not DRAM:
//    fp32 parameters would change nothing measurable, and one element type keeps the code simple.
//
// The fused level (level 2's kernels, at the end of the table): one row step, three shapes.
//  - rows_any is the design above, for any C.
//  - rows_early: when C is a multiple of a pack (C = 768 is) every row is whole packs: the
//    head, tail and element-wise gamma/beta code drop out, and a thread holds at most 4 packs,
//    not 8 (C = 768: 3 packs, 64 lanes fp32 / 32 lanes bf16, blocks of 128 threads), for fewer
//    registers a thread: more rows resident per SM, so more bytes in flight. It loads gamma and
//    beta with x and r (Inductor's order): a row that reduced first and only then asked for
//    them would wait on a second round trip (L2, or DRAM at the first touch) before its store,
//    which is the whole time of a grid of a few rows.
//  - rows_warp (layernorm_warp_rows.cuh) is Inductor's shape: a warp a row and a warp a block,
//    the grid sized to the rows, 32 lanes fixed at compile time so that a thread's packs sit at
//    immediate offsets from one address. Registers are granted a row at a time: at C = 768 the
//    SM holds about 16 fp32 / 32 bf16 rows against rows_early's 10 / 20, and the grid's last
//    wave is a few rows, not a few blocks. h and y are stored together after the statistics,
//    under an L2 evict_last policy: x and r are dead once read, h and y are what the next
//    kernels read, so the L2 drops the clean input lines first. The table runs it at 2K-128K
//    rows; beyond, every form streams at copy speed, the few megabytes left in L2 no longer
//    pay, and rows_early keeps the large sizes (docs/PERFORMANCE.md has the measured
//    crossover).
//  Budget per row: reads 2Cb (x, r) + 2Cb of gamma, beta from L2 (not DRAM), writes 2Cb (h, y):
//  4Cb of DRAM traffic, C b-byte elements in registers once, two warp or block reductions.
#include <cuda_bf16.h>

#include <cmath>
#include <memory>
#include <string>
#include <type_traits>

#include "kernels/catalog.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/device_common.cuh"
#include "kernels/layernorm_rows.cuh"
#include "kernels/layernorm_warp_rows.cuh"
#include "kernels/level_table.h"
#include "kernels/workspace.cuh"

namespace fl {
namespace {

using namespace layernorm_rows;                     // kEps, the row kernels and their launcher
constexpr int64_t kMaxElements = int64_t(1) << 28;  // R * C, at most (1 GiB per fp32 tensor)
constexpr int64_t kDefaultC = 768;                  // GPT-2 small's hidden size
constexpr int kCheckThreads = 256;
static_assert(kMaxC == 16384, "inner_max below promises C up to 16384");

// Inputs: the residual stream x a little off-centre (the mean is not 0, as in a real network,
// which is what makes the one-pass variance formula lose digits), the branch output r centred.
constexpr float kXLo = -1.0f, kXHi = 3.0f;
constexpr float kRLo = -1.0f, kRHi = 1.0f;
constexpr float kGammaLo = 0.5f, kGammaHi = 1.5f;
constexpr float kBetaLo = -0.5f, kBetaHi = 0.5f;

// ---- CPU reference (double): residual_layernorm_row_reference, layernorm_rows.cuh -------

// ---- kernels -------------------------------------------------------------------------------

// The fp64 reference on the GPU, fused with the comparison of both outputs: one warp per row,
// h and y of the row recomputed in double from the stored x, r, gamma and beta (as the CPU
// reference does), and both compared into the same error sums.
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <typename T>
__global__ void __launch_bounds__(kCheckThreads)
    check_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ gamma,
                 const T* __restrict__ beta, const T* __restrict__ h, const T* __restrict__ y,
                 int64_t rows, int c, ErrorSums* sums) {
  constexpr int kWarps = kCheckThreads / 32;
  const int lane = threadIdx.x & 31;
  ErrorPartial p;
  // Whole warps step together, so the shuffles below always see all 32 lanes.
  for (int64_t row = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5); row < rows;
       row += int64_t(gridDim.x) * kWarps) {
    const T* xr = x + row * c;
    const T* rr = r + row * c;
    auto h_ref = [&](int j) {
      return double(Elem<T>::to_float(xr[j])) + double(Elem<T>::to_float(rr[j]));
    };
    double sum = 0;
    for (int j = lane; j < c; j += 32) sum += h_ref(j);
    const double mean = warp_sum(sum) / c;
    double sq = 0;
    for (int j = lane; j < c; j += 32) sq += (h_ref(j) - mean) * (h_ref(j) - mean);
    const double rstd = 1.0 / sqrt(warp_sum(sq) / c + kEps);
    for (int j = lane; j < c; j += 32) {
      const double hv = h_ref(j);
      const double yv = (hv - mean) * rstd * double(Elem<T>::to_float(gamma[j])) +
                        double(Elem<T>::to_float(beta[j]));
      p.add(Elem<T>::to_float(y[row * c + j]), yv);
      p.add(Elem<T>::to_float(h[row * c + j]), hv);
    }
  }
  block_accumulate(sums, p);
}

// ---- launchers -----------------------------------------------------------------------------

// ---- workspace -----------------------------------------------------------------------------

// Device buffers for one shape and element type: inputs x, r, gamma, beta; outputs h, y; the
// unfused chain's row statistics mean and rstd. Rows of length_ = C elements.
template <typename T>
class ResidualLayerNormWorkspace final : public LevelWorkspace<ResidualLayerNormWorkspace<T>>,
                                         RowWorkspaceBase {
 public:
  // (rows, C, tolerance); the shape and precision level 2's variant choice reads.
  ResidualLayerNormWorkspace(int64_t rows, int c, double tolerance)
      : RowWorkspaceBase(rows, c, tolerance) {
    this->set_where({rows, c, int64_t(sizeof(T))},
                    std::is_same_v<T, float> ? Precision::fp32 : Precision::bf16, "rows");
  }

  static const LevelTable<ResidualLayerNormWorkspace>& levels();                // the ladder, below
  static std::vector<VariantRow<ResidualLayerNormWorkspace>> fused_variants();  // below

  Status allocate() {
    FL_TRY(allocate_elements<T>(
        {{&x_, n_}, {&r_, n_}, {&h_, n_}, {&y_, n_}, {&gamma_, length_}, {&beta_, length_}}));
    FL_TRY(allocate_elements<float>({{&mean_, rows_}, {&rstd_, rows_}}));
    return sums_.allocate(sizeof(ErrorSums));
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    FL_TRY(fill_uniform(x_.as<T>(), n_, mix64(seed + 1), kXLo, kXHi, stream));
    FL_TRY(fill_uniform(r_.as<T>(), n_, mix64(seed + 2), kRLo, kRHi, stream));
    FL_TRY(fill_uniform(gamma_.as<T>(), length_, mix64(seed + 3), kGammaLo, kGammaHi, stream));
    return fill_uniform(beta_.as<T>(), length_, mix64(seed + 4), kBetaLo, kBetaHi, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    FL_TRY(poison_elements<T>({{&h_, n_}, {&y_, n_}}, stream));
    return poison_elements<float>({{&mean_, rows_}, {&rstd_, rows_}}, stream);
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    return run_check(
        sums_, tolerance_, stream,
        [&](ErrorSums* sums) {
          check_kernel<T><<<warp_per_row_blocks(kCheckThreads), kCheckThreads, 0, stream>>>(
              x_.as<T>(), r_.as<T>(), gamma_.as<T>(), beta_.as<T>(), h_.as<T>(), y_.as<T>(), rows_,
              length_, sums);
        },
        result);
  }

  // Inputs x, r, gamma, beta (the reference reads C from gamma's length); outputs y, h.
  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    return download_io<T>({{"x", x_.as<T>(), n_},
                           {"r", r_.as<T>(), n_},
                           {"gamma", gamma_.as<T>(), length_},
                           {"beta", beta_.as<T>(), length_}},
                          {{"y", y_.as<T>(), n_}, {"h", h_.as<T>(), n_}}, stream, inputs, outputs);
  }

 private:
  // What every row kernel takes.
  RowArgs<T> args() const {
    return {x_.as<T>(), r_.as<T>(),        gamma_.as<T>(),    beta_.as<T>(), h_.as<T>(),
            y_.as<T>(), mean_.as<float>(), rstd_.as<float>(), rows_,         length_};
  }

  DeviceBuffer x_, r_, h_, y_, gamma_, beta_, mean_, rstd_, sums_;
};

// ---- the level table -----------------------------------------------------------------------
// R = s rows of C = i elements of b bytes: one tensor (x, r, h or y) is R C b; mean and rstd
// are fp32 (a row statistic each); gamma and beta are C elements each. FLOPs per element: add 1;
// mean/var 4 (sum; subtract, square, sum); normalize 4 (subtract, scale by rstd, multiply by
// gamma, add beta); the per-row sqrt is not counted.
int64_t params_bytes(const Dims& d) {
  return 2 * d.i * d.b;
}  // gamma and beta

template <typename T>
const LevelTable<ResidualLayerNormWorkspace<T>>& ResidualLayerNormWorkspace<T>::levels() {
  using Ws = ResidualLayerNormWorkspace;
  // Levels 0 and 1 start with the same add.
  static const LaunchRow<Ws> add = {
      "add",
      [](Ws& w, cudaStream_t s) {
        return launch_add(w.x_.as<T>(), w.r_.as<T>(), w.h_.as<T>(), w.n_, s);
      },
      [](const Dims& d) {
        return Textbook{2 * d.tensor_bytes(), d.tensor_bytes(), 1.0 * d.elements()};
      }};
  static const LevelTable<Ws> table = {
      {"unfused",
       "three kernels: add, mean/var, normalize; h round-trips through HBM twice",
       "only within a launch: h goes to HBM and is read back twice, mean and rstd once",
       {add,
        {"mean_var",
         [](Ws& w, cudaStream_t s) { return launch_rows<T, RowStep::kMeanVar>(w.args(), s); },
         [](const Dims& d) {
           return Textbook{d.tensor_bytes(), 2 * d.row_stat_bytes(), 4.0 * d.elements()};
         }},
        {"normalize",
         [](Ws& w, cudaStream_t s) { return launch_rows<T, RowStep::kNormalize>(w.args(), s); },
         [](const Dims& d) {
           return Textbook{d.tensor_bytes() + 2 * d.row_stat_bytes() + params_bytes(d),
                           d.tensor_bytes(), 4.0 * d.elements()};
         }}}},
      {"add + layernorm",
       "PyTorch's split: an add kernel, then one LayerNorm kernel that reads h once",
       "the row of h and its statistics, in registers, within the LayerNorm kernel",
       {add,
        {"layernorm",
         [](Ws& w, cudaStream_t s) { return launch_rows<T, RowStep::kLayerNorm>(w.args(), s); },
         [](const Dims& d) {
           return Textbook{d.tensor_bytes() + params_bytes(d), d.tensor_bytes(),
                           8.0 * d.elements()};
         }}}},
      {"fused",
       "one kernel; the row stays in registers, h and y are written once each",
       "the row of h and its statistics, in registers: h is written, never read back",
       {{"residual_layernorm_fused", nullptr,
         [](const Dims& d) {
           return Textbook{2 * d.tensor_bytes() + params_bytes(d), 2 * d.tensor_bytes(),
                           9.0 * d.elements()};
         },
         fused_variants()}}},
  };
  return table;
}

// ---- level 2's kernels -----------------------------------------------------------------------
// One row step in three shapes (layernorm_warp_rows.cuh; layernorm_rows.cuh); in the table's
// order the first that can run and prefers the size runs, else the last that can run
// (kernels/level_table.h). C = 768 is aligned, so the first two run there; rows_any takes every
// other C.
template <typename T>
std::vector<VariantRow<ResidualLayerNormWorkspace<T>>>
ResidualLayerNormWorkspace<T>::fused_variants() {
  using Ws = ResidualLayerNormWorkspace;
  constexpr RowStep kF = RowStep::kFused;
  return {
      {"rows_warp",
       "a warp a row and a warp a block, the grid sized to the rows (Inductor's shape): 6 float4 "
       "/ 3 bf16 packs a thread at C = 768 at fixed offsets, x, r, gamma and beta asked for at "
       "once, h and y stored together after the statistics and kept in L2 (evict_last) while "
       "the dead x and r lines go first",
       "warp_row_kernel",
       {0, 0, false, {}, 0, 2048, 131071},
       [](Ws& w, cudaStream_t s) { return launch_warp_rows<T>(w.args(), s); },
       [](const Dims& d) { return warp_rows_refusal(d.i, d.b); }},
      {"rows_early",
       "aligned rows, 3 packs a thread at C = 768 (64 lanes fp32, 32 bf16, blocks of 128 "
       "threads); gamma and beta loaded with the row, so no row waits on a second round trip "
       "after its statistics",
       "aligned_row_kernel",
       {},
       [](Ws& w, cudaStream_t s) { return launch_aligned_rows<T, kF, kEarlyParams>(w.args(), s); },
       [](const Dims& d) { return aligned_rows_refusal(d.i, d.b); }},
      {"rows_any",
       "any C: a row as a head, 16-byte packs and a tail, up to 8 packs a thread; gamma and beta "
       "element by element where the row is not aligned",
       "row_kernel",
       {},
       [](Ws& w, cudaStream_t s) { return launch_rows<T, kF>(w.args(), s); }},
  };
}

// ---- the lesson ----------------------------------------------------------------------------

class ResidualLayerNorm final : public LevelLesson<ResidualLayerNormWorkspace<float>> {
 public:
  ResidualLayerNorm()
      : LevelLesson("residual_layernorm", "Residual add + LayerNorm",
                    "h = x + r;  y = (h - mean(h)) / sqrt(var(h) + 1e-5) * gamma + beta  (per row)",
                    {"rows", 1,
                     kMaxElements / kDefaultC,  // 349,525 rows of 768: 2^28 elements
                     32 * 512,                  // batch 32 x sequence 512
                     "hidden size C", kDefaultC, kMaxC}) {}

  int64_t workspace_bytes(Shape shape, Precision p) const override {
    shape = resolve(shape);
    const int64_t b = bytes_per_element(p);
    // x, r, h, y; gamma, beta; mean, rstd; the check's sums.
    return 4 * shape.size * shape.inner * b + 2 * shape.inner * b +
           2 * shape.size * int64_t(sizeof(float)) + int64_t(sizeof(ErrorSums));
  }

  Status create_workspace(Shape shape, Precision p,
                          std::unique_ptr<Workspace>* out) const override {
    shape = resolve(shape);
    const int64_t rows = shape.size, c = shape.inner;
    if (rows < 1) return Status::Error("residual_layernorm needs at least 1 row");
    if (c < 1 || c > kMaxC) {
      return Status::Error("residual_layernorm takes a hidden size C from 1 to " +
                           std::to_string(kMaxC) + "; got " + std::to_string(c));
    }
    if (rows > kMaxElements / c) {
      return Status::Error("residual_layernorm takes at most " + std::to_string(kMaxElements) +
                           " elements (rows x C); " + std::to_string(rows) + " x " +
                           std::to_string(c) + " is more: at C = " + std::to_string(c) +
                           " use at most " + std::to_string(kMaxElements / c) + " rows");
    }
    return make_workspace<ResidualLayerNormWorkspace>(p, out, rows, static_cast<int>(c),
                                                      tolerance(p));
  }

  // Inputs as download() returns them: x, r (rows x C), gamma, beta (C). Outputs: y, h.
  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const auto& x = inputs.at(0).values;
    const auto& r = inputs.at(1).values;
    const auto& gamma = inputs.at(2).values;
    const auto& beta = inputs.at(3).values;
    const int64_t c = static_cast<int64_t>(gamma.size());
    const int64_t rows = c > 0 ? static_cast<int64_t>(x.size()) / c : 0;
    HostTensor y{"y", std::vector<double>(x.size())};
    HostTensor h{"h", std::vector<double>(x.size())};
    for (int64_t row = 0; row < rows; ++row) {
      residual_layernorm_row_reference(&x[row * c], &r[row * c], gamma.data(), beta.data(), c,
                                       &h.values[row * c], &y.values[row * c]);
    }
    return {y, h};
  }

  // Relative L2 error of y and h together against the double reference computed from the stored
  // inputs (h = x + r exactly, y = LayerNorm of that exact h). fp32: h = x + r is one rounding,
  // the fp32 statistics of a row a few ulp more: ~5e-8 measured (H200, C from 1 to 16384), and
  // 1e-5 leaves room for rows of small variance (rstd up to 1/sqrt(eps) = 316 magnifies h's
  // rounding). bf16: h and y are each stored with 8 significant bits (~1.6e-3 relative RMS),
  // and every level normalises the stored, rounded h rather than the exact x + r, so h's
  // rounding reaches y as well: ~2e-3 measured, 1e-2 allowed.
  double tolerance(Precision p) const override { return p == Precision::fp32 ? 1e-5 : 1e-2; }
};

}  // namespace

FL_DEFINE_LESSON(residual_layernorm, ResidualLayerNorm);

}  // namespace fl
