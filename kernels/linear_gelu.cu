// Lesson 7, linear_gelu: y = GELU_tanh(x W + b), x of tokens x C, W of C x 4C, b of 4C (the
// first Linear layer of a transformer's MLP and its activation).
//
// The ladder: unfused is three kernels (a cuBLASLt GEMM writes t = x W, add_bias writes
// u = t + b, gelu writes y = GELU(u): t and u, tokens x 4C each, round-trip through HBM); level 1
// is the GEMM and then lesson 3's fused bias_gelu kernel (t round-trips once); level 2 is one
// cuBLASLt GEMM with the GELU+bias epilogue, which applies the activation as the GEMM writes its
// tile, so only y reaches HBM. The level table below has every launch's bytes.
//
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
#include "kernels/level_table.h"
#include "kernels/workspace.cuh"

namespace fl {
namespace {

// Device buffers for one shape and element type: x, W, b, the unfused chain's t and u, y, and
// the cuBLASLt plans.
template <typename T>
class LinearGeluWorkspace final : public LevelWorkspace<LinearGeluWorkspace<T>> {
 public:
  LinearGeluWorkspace(int64_t m, int64_t c, double tolerance)
      : m_(m), k_(c), n_(4 * c), tolerance_(tolerance) {}

  static const LevelTable<LinearGeluWorkspace>& levels();  // the ladder, below

  Status allocate() {
    FL_TRY(allocate_elements<T>({{&x_, m_ * k_},
                                 {&w_, k_ * n_},
                                 {&b_, n_},
                                 {&t_, m_ * n_},
                                 {&u_, m_ * n_},
                                 {&y_, m_ * n_}}));
    FL_TRY(sums_.allocate(sizeof(ErrorSums)));
    const Precision p = precision_of<T>();
    FL_TRY(blas::Gemm::plan(m_, n_, k_, p, blas::Epilogue::none, &gemm_));
    return blas::Gemm::plan(m_, n_, k_, p, blas::Epilogue::gelu_bias, &gemm_gelu_bias_);
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    FL_TRY(fill_uniform(x_.as<T>(), m_ * k_, seed, gemm::kXLo, gemm::kXHi, stream));
    return gemm::fill_linear(w_.as<T>(), b_.as<T>(), k_, n_, seed, 0, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    return poison_elements<T>({{&t_, m_ * n_}, {&u_, m_ * n_}, {&y_, m_ * n_}}, stream);
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    const gemm::CheckArgs<T> a{x_.as<T>(), nullptr,    nullptr, w_.as<T>(), b_.as<T>(), nullptr,
                               nullptr,    y_.as<T>(), m_,      int(k_),    int(n_),    0};
    return check_gemm_rows<T, false, true, false>(a, sums_, tolerance_, stream, result);
  }

  // Inputs x (M x C), W (C x 4C), b (4C); output y.
  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    FL_TRY(download_tensors<T>(
        {{"x", x_.as<T>(), m_ * k_}, {"W", w_.as<T>(), k_ * n_}, {"b", b_.as<T>(), n_}}, stream,
        inputs));
    return download_tensors<T>({{"y", y_.as<T>(), m_ * n_}}, stream, outputs);
  }

 private:
  int64_t m_, k_, n_;
  double tolerance_;
  DeviceBuffer x_, w_, b_, t_, u_, y_, sums_;
  std::unique_ptr<blas::Gemm> gemm_, gemm_gelu_bias_;
};

// ---- the level table -----------------------------------------------------------------------
// M = s tokens, K = i = C, N = 4C, b bytes per element. The GEMM reads x (M K) and W (K N) and
// writes M N, 2 M N K flops; the bias kernels read the N bias values once. FLOPs per element of
// the M x N product: bias 1, GELU 8.
int64_t product_bytes(const Dims& d) {
  return d.s * 4 * d.i * d.b;
}  // t, u or y: M x N
double product_elements(const Dims& d) {
  return double(d.s * 4 * d.i);
}
int64_t gemm_read_bytes(const Dims& d) {
  return (d.s * d.i + d.i * 4 * d.i) * d.b;
}
double gemm_flops(const Dims& d) {
  return 2.0 * d.s * (4 * d.i) * d.i;
}

template <typename T>
const LevelTable<LinearGeluWorkspace<T>>& LinearGeluWorkspace<T>::levels() {
  using Ws = LinearGeluWorkspace;
  // Levels 0 and 1 start with the same plain GEMM.
  static const LaunchRow<Ws> gemm = {
      "gemm",
      [](Ws& w, cudaStream_t s) {
        return w.gemm_->run(w.x_.as<T>(), w.w_.as<T>(), nullptr, w.t_.as<T>(), s);
      },
      [](const Dims& d) {
        return Textbook{gemm_read_bytes(d), product_bytes(d), gemm_flops(d)};
      }};
  static const LevelTable<Ws> table = {
      {"unfused",
       "cuBLASLt GEMM, then bias and GELU kernels: the 4C-wide product round-trips through HBM "
       "twice",
       "the GEMM's tiles, in shared memory and registers; t and u go to HBM and back",
       {gemm,
        {"add_bias",
         [](Ws& w, cudaStream_t s) {
           return launch_bias_op(w.t_.as<T>(), w.b_.as<T>(), w.u_.as<T>(), w.m_ * w.n_, w.n_,
                                 AddBiasOp{}, s);
         },
         [](const Dims& d) {
           return Textbook{product_bytes(d) + 4 * d.i * d.b, product_bytes(d),
                           1.0 * product_elements(d)};
         }},
        {"gelu",
         [](Ws& w, cudaStream_t s) {
           return launch_elementwise<T>(w.u_.as<T>(), w.y_.as<T>(), w.m_ * w.n_, GeluFastOp{}, s);
         },
         [](const Dims& d) {
           return Textbook{product_bytes(d), product_bytes(d), 8.0 * product_elements(d)};
         }}}},
      {"bias+GELU fused",
       "the GEMM, then one bias+GELU kernel: one round trip left",
       "the GEMM's tiles; then t + b, in a register; t goes to HBM and back",
       {gemm,
        {"bias_gelu_fused",
         [](Ws& w, cudaStream_t s) {
           return launch_bias_op(w.t_.as<T>(), w.b_.as<T>(), w.y_.as<T>(), w.m_ * w.n_, w.n_,
                                 BiasGeluOp{}, s);
         },
         [](const Dims& d) {
           return Textbook{product_bytes(d) + 4 * d.i * d.b, product_bytes(d),
                           1.0 * product_elements(d) + 8.0 * product_elements(d)};
         }}}},
      {"epilogue",
       "one cuBLASLt GEMM with a GELU+bias epilogue: only y reaches HBM",
       "the GEMM's tiles, and the product, biased and activated in registers before its store",
       {{"gemm_bias_gelu",
         [](Ws& w, cudaStream_t s) {
           return w.gemm_gelu_bias_->run(w.x_.as<T>(), w.w_.as<T>(), w.b_.as<T>(), w.y_.as<T>(), s);
         },
         [](const Dims& d) {
           return Textbook{gemm_read_bytes(d) + 4 * d.i * d.b, product_bytes(d),
                           gemm_flops(d) + 1.0 * product_elements(d) + 8.0 * product_elements(d)};
         }}}},
  };
  return table;
}

// ---- the lesson ----------------------------------------------------------------------------

class LinearGelu final : public GemmLesson<LinearGeluWorkspace> {
 public:
  LinearGelu()
      : GemmLesson("linear_gelu", "Linear + GELU",
                   "y = GELU_tanh(x W + b),  x: tokens x C,  W: C x 4C,  b: 4C") {}

  // inputs: x (M x C), W (C x 4C), b (4C).
  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const LinearInputs linear(inputs, 1);
    auto row = [&](const double* x, double* y) {  // one row of y from one row of x
      linear.row(x, y);
      for (int64_t c = 0; c < linear.n; ++c) y[c] = gelu_tanh_reference(y[c]);
    };
    return {reference_rows(inputs.at(0).values, linear.k, linear.n, row)};
  }

 protected:
  // x (M x C), W (C x 4C), b (4C), and t, u, y (M x 4C).
  int64_t buffer_bytes(int64_t m, int64_t c, int64_t b) const override {
    return (m * c + 4 * c * c + 4 * c + 3 * m * 4 * c) * b;
  }
};

}  // namespace

FL_DEFINE_LESSON(linear_gelu, LinearGelu);

}  // namespace fl
