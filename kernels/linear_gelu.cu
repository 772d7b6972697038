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

// The one Linear layer, C -> 4C; in the epilogue level, cuBLASLt's GELU+bias epilogue.
constexpr LinearSpec kLinear{1, 4, blas::Epilogue::gelu_bias, "gemm", "add_bias", "gemm_bias_gelu"};

// Device buffers for one shape and element type: x, the Linear layer (W, b and the cuBLASLt
// plans), the unfused chain's t and u, and y.
template <typename T>
class LinearGeluWorkspace final : public LevelWorkspace<LinearGeluWorkspace<T>> {
 public:
  LinearGeluWorkspace(int64_t m, int64_t c, double tolerance)
      : tolerance_(tolerance), linear_(m, c, kLinear, {&x_, &t_, &u_, &y_}) {}

  static const LevelTable<LinearGeluWorkspace>& levels();  // the ladder, below

  Status allocate() {
    const int64_t product = linear_.out_elements();  // t, u and y
    FL_TRY(allocate_elements<T>(
        {{&x_, linear_.in_elements()}, {&t_, product}, {&u_, product}, {&y_, product}}));
    FL_TRY(sums_.allocate(sizeof(ErrorSums)));
    return linear_.allocate();
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    FL_TRY(fill_uniform(x_.as<T>(), linear_.in_elements(), seed, gemm::kXLo, gemm::kXHi, stream));
    return linear_.fill(seed, 0, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    const int64_t product = linear_.out_elements();
    return poison_elements<T>({{&t_, product}, {&u_, product}, {&y_, product}}, stream);
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    const gemm::CheckArgs<T> a{x_.as<T>(),     nullptr,        nullptr,        linear_.weights(),
                               linear_.bias(), nullptr,        nullptr,        y_.as<T>(),
                               linear_.m,      int(linear_.k), int(linear_.n), 0};
    return check_gemm_rows<T, false, true, false>(a, sums_, tolerance_, stream, result);
  }

  // Inputs x (M x C), W (C x 4C), b (4C); output y.
  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    return download_io<T>({{"x", x_.as<T>(), linear_.in_elements()},
                           linear_.weights_tensor("W"),
                           linear_.bias_tensor("b")},
                          {{"y", y_.as<T>(), linear_.out_elements()}}, stream, inputs, outputs);
  }

 private:
  double tolerance_;
  DeviceBuffer x_, t_, u_, y_, sums_;
  LinearLayer<T> linear_;
};

// ---- the level table -----------------------------------------------------------------------
// M = s tokens, K = i = C, N = 4C, b bytes per element; the formulas are the Linear layer's
// (gemm_common.cuh): the GEMM reads x (M K) and W (K N) and writes M N, 2 M N K flops; the bias
// kernels read the N bias values once. FLOPs per element of the M x N product: bias 1, GELU 8.
template <typename T>
const LevelTable<LinearGeluWorkspace<T>>& LinearGeluWorkspace<T>::levels() {
  using Ws = LinearGeluWorkspace;
  static const LinearRows<Ws> linear = linear_rows<Ws>(&Ws::linear_, kLinear);
  static const LevelTable<Ws> table = {
      {"unfused",
       "cuBLASLt GEMM, then bias and GELU kernels: the 4C-wide product round-trips through HBM "
       "twice",
       "the GEMM's tiles, in shared memory and registers; t and u go to HBM and back",
       {linear.gemm, linear.add_bias, linear.gelu}},
      {"bias+GELU fused",
       "the GEMM, then one bias+GELU kernel: one round trip left",
       "the GEMM's tiles; then t + b, in a register; t goes to HBM and back",
       {linear.gemm, linear.bias_gelu}},
      {"epilogue",
       "one cuBLASLt GEMM with a GELU+bias epilogue: only y reaches HBM",
       "the GEMM's tiles, and the product, biased and activated in registers before its store",
       {linear.epilogue}},
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
