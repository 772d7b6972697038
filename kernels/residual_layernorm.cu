// Lesson 4, residual_layernorm: h = x + r; y = LayerNorm(h) * gamma + beta, over rows of C.
//
// The residual add and the LayerNorm that follows it in every transformer block (GPT-2: the
// attention or MLP output r added to the residual stream x, then ln_1 / ln_2). Both h and y are
// outputs: y feeds the next matmul, and h is the residual stream the next block adds onto.
// LayerNorm over one row of C values: mean = sum(h) / C, var = sum((h - mean)^2) / C (biased),
// y = (h - mean) / sqrt(var + 1e-5) * gamma + beta.
//
// Levels and launches (R rows of C elements, N = R * C, b bytes per element; mean and rstd are
// fp32, gamma and beta are in the tensors' precision):
//   0 unfused         add        reads x, r              writes h          3Nb
//                     mean_var   reads h                 writes mean, rstd  Nb + 8R
//                     normalize  reads h, mean, rstd,    writes y          2Nb + 8R + 2Cb
//                                gamma, beta
//   1 add+layernorm   add        as above                                  3Nb
//     (PyTorch's      layernorm  reads h, gamma, beta    writes y          2Nb + 2Cb
//      eager split)
//   2 fused           one kernel reads x, r, gamma, beta writes h, y       4Nb + 2Cb
// Textbook bytes: 6Nb, 5Nb and 4Nb (plus the small 16R and 2Cb), so the byte-ratio limit of the
// fused speedup over level 0 is 6/4 = 1.5x (1.25x over level 1). h is an output, so the fused
// kernel must still write it: fusing saves h's two re-reads, not its write.
//
// Prediction (before measuring), default shape R = 16,384, C = 768, fp32: N = 12.6M elements,
// Nb = 50.3 MB; level 0 moves 302.3 MB, level 1 251.7 MB, level 2 201.3 MB. At a copy bandwidth
// of ~3.0 TB/s (H100 SXM) that is ~101, ~84 and ~67 us. Each launch's own working set at this
// shape is only 1-3x a 50-60 MB L2, so the per-kernel percentages are judged at R = 256K rows
// (fp32: 805 MB per tensor), where every kernel streams from DRAM.
// First measurement (H200, driver 580.159, CUDA 13.0, cold L2, median of >= 50, fusionlab bench,
// % of copy bandwidth on textbook bytes), R = 262,144, C = 768:
//   fp32: add 102%, mean_var 99%, normalize 92%, layernorm 97%, fused 98%; 1148 / 937 / 768 us,
//         fused/unfused 1.49x against the 1.50x limit.
//   bf16: add 103%, mean_var 93%, normalize 98%, layernorm 97%, fused 96%; 571 / 471 / 390 us,
//         1.46x against 1.50x.
// At the default 16K rows the speedup reads 1.6x (the unfused chain's short kernels lose more to
// ramp-up and tail than the fused one), and at 1K rows 2.1-2.5x: launches, not bytes.
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
#include <cuda_bf16.h>

#include <cmath>
#include <memory>
#include <string>

#include "kernels/catalog.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/device_common.cuh"
#include "kernels/layernorm_rows.cuh"

namespace fl {
namespace {

using namespace layernorm_rows;  // kEps, the row kernels and their launcher
constexpr int kAddThreads = 256;
constexpr int64_t kMaxElements = int64_t(1) << 28;  // R * C, at most (1 GiB per fp32 tensor)
constexpr int kCheckThreads = 256;
static_assert(kMaxC == 16384, "inner_max below promises C up to 16384");

// Inputs: the residual stream x a little off-centre (the mean is not 0, as in a real network,
// which is what makes the one-pass variance formula lose digits), the branch output r centred.
constexpr float kXLo = -1.0f, kXHi = 3.0f;
constexpr float kRLo = -1.0f, kRHi = 1.0f;
constexpr float kGammaLo = 0.5f, kGammaHi = 1.5f;
constexpr float kBetaLo = -0.5f, kBetaHi = 0.5f;

// ---- CPU reference (double) ----------------------------------------------------------------

// h and y of one row, in double, from the stored inputs. The same arithmetic as the GPU check.
void residual_layernorm_row_reference(const double* x, const double* r, const double* gamma,
                                      const double* beta, int64_t c, double* h, double* y) {
  double sum = 0;
  for (int64_t j = 0; j < c; ++j) {
    h[j] = x[j] + r[j];
    sum += h[j];
  }
  const double mean = sum / double(c);
  double sq = 0;
  for (int64_t j = 0; j < c; ++j) sq += (h[j] - mean) * (h[j] - mean);
  const double rstd = 1.0 / std::sqrt(sq / double(c) + kEps);
  for (int64_t j = 0; j < c; ++j) y[j] = (h[j] - mean) * rstd * gamma[j] + beta[j];
}

// ---- kernels -------------------------------------------------------------------------------

// h = x + r over all N elements, ignoring rows: one 16-byte vector per thread; the threads past
// the last full vector take one tail element each (the same scheme as gelu_scale).
template <typename T>
__global__ void __launch_bounds__(kAddThreads) add_kernel(const T* __restrict__ x,
                                                          const T* __restrict__ r,
                                                          T* __restrict__ h, int64_t n) {
  constexpr int kVec = Vec16<T>::kCount;
  const int64_t full_vecs = n / kVec;
  const int64_t i = blockIdx.x * int64_t(kAddThreads) + threadIdx.x;
  if (i < full_vecs) {
    const Vec16<T> a = load16(x + i * kVec);
    const Vec16<T> b = load16(r + i * kVec);
    Vec16<T> out;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      out.v[k] = Elem<T>::from_float(Elem<T>::to_float(a.v[k]) + Elem<T>::to_float(b.v[k]));
    }
    store16(h + i * kVec, out);
  } else {
    const int64_t tail = full_vecs * kVec + (i - full_vecs);
    if (tail < n) h[tail] = Elem<T>::from_float(Elem<T>::to_float(x[tail]) + Elem<T>::to_float(r[tail]));
  }
}

// The fp64 reference on the GPU, fused with the comparison of both outputs: one warp per row,
// h and y of the row recomputed in double from the stored x, r, gamma and beta (as the CPU
// reference does), and both compared into the same error sums.
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <typename T>
__global__ void __launch_bounds__(kCheckThreads) check_kernel(
    const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ gamma,
    const T* __restrict__ beta, const T* __restrict__ h, const T* __restrict__ y, int64_t rows,
    int c, ErrorSums* sums) {
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

template <typename T>
Status launch_add(const T* x, const T* r, T* h, int64_t n, cudaStream_t stream) {
  constexpr int kVec = Vec16<T>::kCount;
  const int64_t threads = n / kVec + n % kVec;  // one per full vector, one per tail element
  const unsigned blocks = static_cast<unsigned>((threads + kAddThreads - 1) / kAddThreads);
  if (blocks == 0) return Status::Ok();
  add_kernel<T><<<blocks, kAddThreads, 0, stream>>>(x, r, h, n);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// ---- workspace -----------------------------------------------------------------------------

template <typename T>
class ResidualLayerNormWorkspace final : public Workspace {
 public:
  ResidualLayerNormWorkspace(int64_t rows, int c, double tolerance)
      : rows_(rows), c_(c), n_(rows * c), tolerance_(tolerance) {}

  Status allocate() {
    FL_TRY(x_.allocate(n_ * sizeof(T)));
    FL_TRY(r_.allocate(n_ * sizeof(T)));
    FL_TRY(h_.allocate(n_ * sizeof(T)));
    FL_TRY(y_.allocate(n_ * sizeof(T)));
    FL_TRY(gamma_.allocate(c_ * sizeof(T)));
    FL_TRY(beta_.allocate(c_ * sizeof(T)));
    FL_TRY(mean_.allocate(rows_ * sizeof(float)));
    FL_TRY(rstd_.allocate(rows_ * sizeof(float)));
    FL_TRY(sums_.allocate(sizeof(ErrorSums)));
    return Status::Ok();
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    FL_TRY(fill_uniform(x_.as<T>(), n_, mix64(seed + 1), kXLo, kXHi, stream));
    FL_TRY(fill_uniform(r_.as<T>(), n_, mix64(seed + 2), kRLo, kRHi, stream));
    FL_TRY(fill_uniform(gamma_.as<T>(), c_, mix64(seed + 3), kGammaLo, kGammaHi, stream));
    return fill_uniform(beta_.as<T>(), c_, mix64(seed + 4), kBetaLo, kBetaHi, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    FL_TRY(fill_nan(h_.as<T>(), n_, stream));
    FL_TRY(fill_nan(y_.as<T>(), n_, stream));
    FL_TRY(fill_nan(mean_.as<float>(), rows_, stream));
    return fill_nan(rstd_.as<float>(), rows_, stream);
  }

  Status launch(int level, int launch, cudaStream_t stream) override {
    const RowArgs<T> a{x_.as<T>(),   r_.as<T>(),        gamma_.as<T>(),    beta_.as<T>(),
                       h_.as<T>(),   y_.as<T>(),        mean_.as<float>(), rstd_.as<float>(),
                       rows_,        c_};
    if ((level == 0 || level == 1) && launch == 0) return launch_add(a.x, a.r, a.h, n_, stream);
    if (level == 0 && launch == 1) return launch_rows<T, RowStep::kMeanVar>(a, stream);
    if (level == 0 && launch == 2) return launch_rows<T, RowStep::kNormalize>(a, stream);
    if (level == 1 && launch == 1) return launch_rows<T, RowStep::kLayerNorm>(a, stream);
    if (level == 2 && launch == 0) return launch_rows<T, RowStep::kFused>(a, stream);
    return Status::Error("residual_layernorm has no launch " + std::to_string(launch) +
                         " at level " + std::to_string(level));
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    FL_CUDA_TRY(cudaMemsetAsync(sums_.get(), 0, sizeof(ErrorSums), stream));
    constexpr int kWarps = kCheckThreads / 32;
    const int64_t wanted = (rows_ + kWarps - 1) / kWarps;
    const unsigned blocks = static_cast<unsigned>(wanted < 4096 ? wanted : 4096);
    check_kernel<T><<<blocks, kCheckThreads, 0, stream>>>(x_.as<T>(), r_.as<T>(), gamma_.as<T>(),
                                                           beta_.as<T>(), h_.as<T>(), y_.as<T>(),
                                                           rows_, c_, sums_.as<ErrorSums>());
    FL_CUDA_TRY(cudaGetLastError());
    ErrorSums host{};
    FL_CUDA_TRY(cudaMemcpyAsync(&host, sums_.get(), sizeof(host), cudaMemcpyDeviceToHost, stream));
    FL_CUDA_TRY(cudaStreamSynchronize(stream));
    *result = finish_check(host, tolerance_);
    return Status::Ok();
  }

  // Inputs x, r, gamma, beta (the reference reads C from gamma's length); outputs y, h.
  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    inputs->assign({HostTensor{"x", {}}, HostTensor{"r", {}}, HostTensor{"gamma", {}},
                    HostTensor{"beta", {}}});
    outputs->assign({HostTensor{"y", {}}, HostTensor{"h", {}}});
    FL_TRY(copy_out(x_, n_, stream, &(*inputs)[0].values));
    FL_TRY(copy_out(r_, n_, stream, &(*inputs)[1].values));
    FL_TRY(copy_out(gamma_, c_, stream, &(*inputs)[2].values));
    FL_TRY(copy_out(beta_, c_, stream, &(*inputs)[3].values));
    FL_TRY(copy_out(y_, n_, stream, &(*outputs)[0].values));
    return copy_out(h_, n_, stream, &(*outputs)[1].values);
  }

 private:
  static Status copy_out(const DeviceBuffer& buffer, int64_t count, cudaStream_t stream,
                         std::vector<double>* values) {
    std::vector<T> raw(count);
    FL_CUDA_TRY(cudaMemcpyAsync(raw.data(), buffer.get(), count * sizeof(T),
                                cudaMemcpyDeviceToHost, stream));
    FL_CUDA_TRY(cudaStreamSynchronize(stream));
    values->resize(count);
    for (int64_t i = 0; i < count; ++i) (*values)[i] = Elem<T>::to_float(raw[i]);
    return Status::Ok();
  }

  int64_t rows_;
  int c_;
  int64_t n_;
  double tolerance_;
  DeviceBuffer x_, r_, h_, y_, gamma_, beta_, mean_, rstd_, sums_;
};

// ---- the lesson ----------------------------------------------------------------------------

class ResidualLayerNorm final : public Lesson {
 public:
  ResidualLayerNorm() {
    info_.id = "residual_layernorm";
    info_.title = "Residual add + LayerNorm";
    info_.formula = "h = x + r;  y = (h - mean(h)) / sqrt(var(h) + 1e-5) * gamma + beta  (per row)";
    info_.size_axis.unit = "rows";
    info_.size_axis.min = 1;
    info_.size_axis.max = kMaxElements / kDefaultC;  // 349,525 rows of 768: 2^28 elements
    info_.size_axis.default_size = 32 * 512;         // batch 32 x sequence 512
    info_.size_axis.inner_name = "hidden size C";
    info_.size_axis.inner_default = kDefaultC;
    info_.size_axis.inner_max = kMaxC;
    info_.levels = {
        {"unfused",
         "three kernels: add, mean/var, normalize; h round-trips through HBM twice",
         {"add", "mean_var", "normalize"}},
        {"add + layernorm",
         "PyTorch's split: an add kernel, then one LayerNorm kernel that reads h once",
         {"add", "layernorm"}},
        {"fused", "one kernel; the row stays in registers, h and y are written once each",
         {"residual_layernorm_fused"}},
    };
    info_.precisions = {Precision::fp32, Precision::bf16};
  }

  const LessonInfo& info() const override { return info_; }

  std::vector<LaunchTraffic> traffic(int level, Shape shape, Precision p) const override {
    shape = resolve(shape);
    const int64_t rows = shape.size, c = shape.inner, n = rows * c;
    const int64_t b = bytes_per_element(p);
    const int64_t tensor = n * b;           // one of x, r, h, y
    const int64_t params = 2 * c * b;       // gamma and beta
    const int64_t stats = rows * int64_t(sizeof(float));  // mean or rstd
    // FLOPs per element: add 1; mean/var 4 (sum; subtract, square, sum); normalize 4
    // (subtract, scale by rstd, multiply by gamma, add beta). The per-row sqrt is not counted.
    const LaunchTraffic add{"add", 2 * tensor, tensor, 1.0 * n};
    if (level == 0) {
      return {add,
              {"mean_var", tensor, 2 * stats, 4.0 * n},
              {"normalize", tensor + 2 * stats + params, tensor, 4.0 * n}};
    }
    if (level == 1) return {add, {"layernorm", tensor + params, tensor, 8.0 * n}};
    return {{"residual_layernorm_fused", 2 * tensor + params, 2 * tensor, 9.0 * n}};
  }

  int64_t workspace_bytes(Shape shape, Precision p) const override {
    shape = resolve(shape);
    const int64_t b = bytes_per_element(p);
    // x, r, h, y; gamma, beta; mean, rstd; the check's sums.
    return 4 * shape.size * shape.inner * b + 2 * shape.inner * b +
           2 * shape.size * int64_t(sizeof(float)) + int64_t(sizeof(ErrorSums));
  }

  Status create_workspace(Shape shape, Precision p, std::unique_ptr<Workspace>* out) const override {
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
    if (p == Precision::fp32) return make<float>(rows, static_cast<int>(c), p, out);
    return make<__nv_bfloat16>(rows, static_cast<int>(c), p, out);
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

 private:
  static constexpr int64_t kDefaultC = 768;

  template <typename T>
  Status make(int64_t rows, int c, Precision p, std::unique_ptr<Workspace>* out) const {
    auto ws = std::make_unique<ResidualLayerNormWorkspace<T>>(rows, c, tolerance(p));
    FL_TRY(ws->allocate());
    *out = std::move(ws);
    return Status::Ok();
  }

  LessonInfo info_;
};

}  // namespace

const Lesson& residual_layernorm_lesson() {
  static const ResidualLayerNorm lesson;
  return lesson;
}

}  // namespace fl
