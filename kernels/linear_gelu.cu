// Lesson 7, linear_gelu: y = GELU_tanh(x W + b), x of tokens x C, W of C x 4C, b of 4C (the
// first Linear layer of a transformer's MLP and its activation).
//
// Levels:
//   0 unfused        three kernels: a cuBLASLt GEMM writes t = x W, add_bias writes u = t + b,
//                    gelu writes y = GELU(u). t and u (tokens x 4C each) round-trip through HBM.
//   1 bias+GELU      the GEMM, then lesson 3's fused bias_gelu kernel: t round-trips once.
//   2 epilogue       one cuBLASLt GEMM with the GELU+bias epilogue: the activation is applied
//                    as the GEMM writes its tile, so only y reaches HBM.
// Textbook bytes (M tokens, K = C, N = 4C, b bytes per element):
//   gemm       reads (M K + K N) b, writes M N b;  2 M N K flops
//   add_bias   reads (M N + N) b, writes M N b     gelu  reads M N b, writes M N b
//   bias_gelu  reads (M N + N) b, writes M N b     gemm_bias_gelu  reads (M K + K N + N) b, writes M N b
// At the default 16,384 x 768 fp32: the GEMM moves 264 MB for 77 GFLOP (arithmetic intensity
// ~290 flops/byte, far above any GPU's ridge point): it is compute-bound, while add_bias and gelu
// move 403 MB more for nothing but a few flops each. Fusion removes those bytes; what it saves in
// time depends on how long the GEMM itself takes, which is the lesson.
#include <cuda_bf16.h>

#include <memory>

#include "kernels/bias_ops.cuh"
#include "kernels/blas.h"
#include "kernels/catalog.h"
#include "kernels/device_buffer.h"
#include "kernels/gemm_common.cuh"

namespace fl {
namespace {

using gemm::kDefaultC;

template <typename T>
class LinearGeluWorkspace final : public Workspace {
 public:
  LinearGeluWorkspace(int64_t m, int64_t c, double tolerance)
      : m_(m), k_(c), n_(4 * c), tolerance_(tolerance) {}

  Status allocate() {
    FL_TRY(x_.allocate(m_ * k_ * sizeof(T)));
    FL_TRY(w_.allocate(k_ * n_ * sizeof(T)));
    FL_TRY(b_.allocate(n_ * sizeof(T)));
    FL_TRY(t_.allocate(m_ * n_ * sizeof(T)));
    FL_TRY(u_.allocate(m_ * n_ * sizeof(T)));
    FL_TRY(y_.allocate(m_ * n_ * sizeof(T)));
    FL_TRY(sums_.allocate(sizeof(ErrorSums)));
    const Precision p = std::is_same<T, float>::value ? Precision::fp32 : Precision::bf16;
    FL_TRY(blas::Gemm::plan(m_, n_, k_, p, blas::Epilogue::none, &gemm_));
    return blas::Gemm::plan(m_, n_, k_, p, blas::Epilogue::gelu_bias, &gemm_gelu_bias_);
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    FL_TRY(fill_uniform(x_.as<T>(), m_ * k_, seed, gemm::kXLo, gemm::kXHi, stream));
    const float wb = gemm::weight_bound(k_);
    FL_TRY(fill_uniform(w_.as<T>(), k_ * n_, mix64(seed ^ 0x3E16ull), -wb, wb, stream));
    return fill_uniform(b_.as<T>(), n_, mix64(seed ^ 0xB1A5ull), gemm::kBiasLo, gemm::kBiasHi, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    FL_TRY(fill_nan(t_.as<T>(), m_ * n_, stream));
    FL_TRY(fill_nan(u_.as<T>(), m_ * n_, stream));
    return fill_nan(y_.as<T>(), m_ * n_, stream);
  }

  Status launch(int level, int launch, cudaStream_t stream) override {
    const T *x = x_.as<T>(), *w = w_.as<T>(), *b = b_.as<T>();
    T *t = t_.as<T>(), *u = u_.as<T>(), *y = y_.as<T>();
    const int64_t mn = m_ * n_;
    if (level < 2 && launch == 0) return gemm_->run(x, w, nullptr, t, stream);
    if (level == 0 && launch == 1) return launch_bias_op(t, b, u, mn, n_, AddBiasOp{}, stream);
    if (level == 0 && launch == 2) return launch_elementwise<T>(u, y, mn, GeluFastOp{}, stream);
    if (level == 1 && launch == 1) return launch_bias_op(t, b, y, mn, n_, BiasGeluOp{}, stream);
    if (level == 2 && launch == 0) return gemm_gelu_bias_->run(x, w, b, y, stream);
    return Status::Error("linear_gelu has no launch " + std::to_string(launch) + " at level " +
                         std::to_string(level));
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    gemm::CheckArgs<T> a{x_.as<T>(), nullptr, nullptr, w_.as<T>(), b_.as<T>(), nullptr, nullptr,
                         y_.as<T>(), m_, int(k_), int(n_), 0};
    return run_check(sums_, tolerance_, stream, [&](ErrorSums* sums) {
      return gemm::launch_check_rows<T, false, true, false>(a, sums, stream);
    }, result);
  }

  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    *inputs = {HostTensor{"x", {}}, HostTensor{"W", {}}, HostTensor{"b", {}}};
    outputs->assign(1, HostTensor{"y", {}});
    FL_TRY(download_as_double(x_.as<T>(), m_ * k_, stream, &(*inputs)[0].values));
    FL_TRY(download_as_double(w_.as<T>(), k_ * n_, stream, &(*inputs)[1].values));
    FL_TRY(download_as_double(b_.as<T>(), n_, stream, &(*inputs)[2].values));
    return download_as_double(y_.as<T>(), m_ * n_, stream, &(*outputs)[0].values);
  }

 private:
  int64_t m_, k_, n_;
  double tolerance_;
  DeviceBuffer x_, w_, b_, t_, u_, y_, sums_;
  std::unique_ptr<blas::Gemm> gemm_, gemm_gelu_bias_;
};

class LinearGelu final : public Lesson {
 public:
  LinearGelu() {
    info_.id = "linear_gelu";
    info_.title = "Linear + GELU";
    info_.formula = "y = GELU_tanh(x W + b),  x: tokens x C,  W: C x 4C,  b: 4C";
    info_.size_axis.unit = "tokens";
    info_.size_axis.min = 1;
    info_.size_axis.max = gemm::kMaxTokens;
    info_.size_axis.default_size = gemm::kDefaultTokens;
    info_.size_axis.inner_name = "hidden size C";
    info_.size_axis.inner_default = kDefaultC;
    info_.size_axis.inner_max = gemm::kMaxC;
    info_.levels = {
        {"unfused", "cuBLASLt GEMM, then bias and GELU kernels: the 4C-wide product round-trips through HBM twice",
         {"gemm", "add_bias", "gelu"}},
        {"bias+GELU fused", "the GEMM, then one bias+GELU kernel: one round trip left",
         {"gemm", "bias_gelu_fused"}},
        {"epilogue", "one cuBLASLt GEMM with a GELU+bias epilogue: only y reaches HBM",
         {"gemm_bias_gelu"}},
    };
    info_.precisions = {Precision::fp32, Precision::bf16};
  }

  const LessonInfo& info() const override { return info_; }

  std::vector<LaunchTraffic> traffic(int level, Shape shape, Precision p) const override {
    shape = resolve(shape);
    const int64_t b = bytes_per_element(p);
    const int64_t m = shape.size, k = shape.inner, n = 4 * shape.inner;
    const double gemm_flops = 2.0 * m * n * k, gelu_flops = 8.0 * m * n, bias_flops = 1.0 * m * n;
    const LaunchTraffic gemm{"gemm", (m * k + k * n) * b, m * n * b, gemm_flops};
    if (level == 0) {
      return {gemm, {"add_bias", (m * n + n) * b, m * n * b, bias_flops},
              {"gelu", m * n * b, m * n * b, gelu_flops}};
    }
    if (level == 1) return {gemm, {"bias_gelu_fused", (m * n + n) * b, m * n * b, bias_flops + gelu_flops}};
    return {{"gemm_bias_gelu", (m * k + k * n + n) * b, m * n * b, gemm_flops + bias_flops + gelu_flops}};
  }

  int64_t workspace_bytes(Shape shape, Precision p) const override {
    shape = resolve(shape);
    const int64_t m = shape.size, k = shape.inner, n = 4 * shape.inner;
    return (m * k + k * n + n + 3 * m * n) * bytes_per_element(p);
  }

  Status create_workspace(Shape shape, Precision p, std::unique_ptr<Workspace>* out) const override {
    shape = resolve(shape);
    return make_gemm_workspace<LinearGeluWorkspace>("linear_gelu", shape, p, tolerance(p), out);
  }

  // inputs: x (M x C), W (C x 4C), b (4C).
  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const auto& x = inputs.at(0).values;
    const auto& w = inputs.at(1).values;
    const auto& b = inputs.at(2).values;
    const int64_t n = static_cast<int64_t>(b.size());
    const int64_t k = n / 4, m = k > 0 ? static_cast<int64_t>(x.size()) / k : 0;
    HostTensor y{"y", std::vector<double>(m * n)};
    for (int64_t r = 0; r < m; ++r) {
      double* out = &y.values[r * n];
      reference_linear_row(&x[r * k], k, w.data(), b.data(), n, out);
      for (int64_t c = 0; c < n; ++c) out[c] = gelu_tanh_reference(out[c]);
    }
    return {y};
  }

  double tolerance(Precision p) const override { return gemm_tolerance(p); }

 private:
  LessonInfo info_;
};

}  // namespace

const Lesson& linear_gelu_lesson() {
  static const LinearGelu lesson;
  return lesson;
}

}  // namespace fl
