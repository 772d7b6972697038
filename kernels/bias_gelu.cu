// Lesson 3, bias_gelu: y = GELU_tanh(x + b), x of rows x C, b of C (a Linear layer's bias).
//
// Unfused, add_bias writes t = x + b to HBM and gelu reads it back; fused, x + b stays in a
// register. With n = rows * C elements of b bytes (the bias is read once per launch, C b) that is
// (4n + C) b against (2n + C) b: the byte-ratio limit is 2.0x to within 1/rows. At the default
// 16,384 x 768 fp32 that is 201.3 MB against 100.7 MB, about 67 us against 34 us at ~3 TB/s (but
// each tensor, 50 MB, is about an H100's L2, so measure the roofline with more rows: 65,536 rows
// is 201 MB per tensor). The level table below lists the launches and their textbook bytes.
//
// Arithmetic: 1 flop (add) + ~8 (GELU) per element: far below the ridge point in flops, but not
// in instructions: to keep up with an H200's HBM in bf16 (4 bytes moved per element) each SM
// must finish ~4 elements per clock, ~30 instruction slots each, so GELU is gelu_tanh_fast
// (activations.cuh, ~10 instructions) and the column index costs two (ColumnOf), not a division.
//
// The bias broadcast: the kernels tile the *flattened* tensor with 16-byte vectors, not the rows,
// so every vector is aligned whatever C is (an odd C such as 781 only makes some vectors straddle
// two rows). Element e of the flat tensor adds b[e % C]. When C is a multiple of the vector width
// (C = 768), a vector never straddles rows and its bias entries are one aligned 16-byte load too;
// otherwise they are read one by one, wrapping to column 0 at a row's end. Either way the reads
// of b hit the L1/L2 caches after the first row: HBM sends the C bias values about once.
#include <cuda_bf16.h>

#include <cstdint>
#include <memory>

#include "kernels/activations.cuh"
#include "kernels/catalog.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/bias_ops.cuh"
#include "kernels/device_common.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/level_table.h"
#include "kernels/workspace.cuh"

namespace fl {
namespace {

// The tensor holds at most 2^28 elements (rows x C), like the elementwise lessons' largest size:
// the slider's row limit is that at the default C, and it keeps the flat index within 32 bits.
constexpr int64_t kMaxElements = int64_t(1) << 28;
constexpr int64_t kDefaultC = 768;                  // GPT-2 small's hidden size
constexpr float kInputLo = -4.0f, kInputHi = 4.0f;  // x
constexpr float kBiasLo = -2.0f, kBiasHi = 2.0f;    // b: x + b spans GELU's curve and both tails

// ---- CPU reference (double) ----------------------------------------------------------------
// gelu_tanh_reference (activations.cuh) of x + b[e % C], in the lesson's reference() below.

// ---- kernels -------------------------------------------------------------------------------

// The fp64 reference on the GPU, fused with the comparison: reads x, b and y once each.
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    check_kernel(const T* __restrict__ x, const T* __restrict__ bias, const T* __restrict__ y,
                 int64_t n, int64_t c, ErrorSums* sums) {
  ErrorPartial p;
  for (int64_t i = blockIdx.x * int64_t(kElementwiseThreads) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kElementwiseThreads) {
    const double h = double(Elem<T>::to_float(x[i])) + double(Elem<T>::to_float(bias[i % c]));
    p.add(Elem<T>::to_float(y[i]), gelu_tanh_reference(h));
  }
  block_accumulate(sums, p);
}

// ---- workspace -----------------------------------------------------------------------------

// Device buffers for one shape and element type: x, the bias b, the unfused chain's sum t and y.
template <typename T>
class BiasGeluWorkspace final : public LevelWorkspace<BiasGeluWorkspace<T>> {
 public:
  BiasGeluWorkspace(int64_t rows, int64_t c, double tolerance)
      : n_(rows * c), c_(c), tolerance_(tolerance) {}

  static const LevelTable<BiasGeluWorkspace>& levels();  // the ladder, below

  Status allocate() {
    FL_TRY(allocate_elements<T>({{&x_, n_}, {&b_, c_}, {&t_, n_}, {&y_, n_}}));
    return sums_.allocate(sizeof(ErrorSums));
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    FL_TRY(fill_uniform(x_.as<T>(), n_, seed, kInputLo, kInputHi, stream));
    return fill_uniform(b_.as<T>(), c_, mix64(seed ^ 0xB1A5ull), kBiasLo, kBiasHi, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    return poison_elements<T>({{&t_, n_}, {&y_, n_}}, stream);
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    return check_elementwise(check_kernel<T>, n_, sums_, tolerance_, stream, result, x_.as<T>(),
                             b_.as<T>(), y_.as<T>(), n_, c_);
  }

  // Inputs x (rows x C, flat) and b (C); output y.
  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    return download_io<T>({{"x", x_.as<T>(), n_}, {"b", b_.as<T>(), c_}}, {{"y", y_.as<T>(), n_}},
                          stream, inputs, outputs);
  }

 private:
  int64_t n_, c_;
  double tolerance_;
  DeviceBuffer x_, b_, t_, y_, sums_;
};

// ---- the level table -----------------------------------------------------------------------
// n = s rows x i = C elements of b bytes; every launch reads the C bias values once. FLOPs per
// element: the add 1; GELU_tanh 8 (x^3 and the polynomial ~7, tanh counted as 1). The formulas
// are bias_ops.cuh's, which the GEMM lessons use for the same kernels on their products.
template <typename T>
const LevelTable<BiasGeluWorkspace<T>>& BiasGeluWorkspace<T>::levels() {
  using Ws = BiasGeluWorkspace;
  static const LevelTable<Ws> table = {
      {"unfused",
       "bias add and GELU as two kernels; the sum t round-trips through HBM",
       "nothing between the kernels: t goes to HBM and back",
       {{"add_bias",
         [](Ws& w, cudaStream_t s) {
           return launch_bias_op(w.x_.as<T>(), w.b_.as<T>(), w.t_.as<T>(), w.n_, w.c_, AddBiasOp{},
                                 s);
         },
         [](const Dims& d) { return bias_op_textbook(d, d.i, kAddFlops); }},
        {"gelu",
         [](Ws& w, cudaStream_t s) {
           return launch_elementwise<T>(w.t_.as<T>(), w.y_.as<T>(), w.n_, GeluFastOp{}, s);
         },
         [](const Dims& d) { return gelu_textbook(d, d.i); }}}},
      {"fused",
       "one kernel; x + b stays in a register",
       "t = x + b, in a register",
       {{"bias_gelu_fused",
         [](Ws& w, cudaStream_t s) {
           return launch_bias_op(w.x_.as<T>(), w.b_.as<T>(), w.y_.as<T>(), w.n_, w.c_, BiasGeluOp{},
                                 s);
         },
         [](const Dims& d) { return bias_op_textbook(d, d.i, kAddFlops + kGeluFlops); }}}},
  };
  return table;
}

// ---- the lesson ----------------------------------------------------------------------------

class BiasGelu final : public LevelLesson<BiasGeluWorkspace<float>> {
 public:
  BiasGelu()
      : LevelLesson("bias_gelu", "bias + GELU",
                    "y = GELU_tanh(x + b),  x: rows x C,  b: C (broadcast over the rows)",
                    {"rows", 1,
                     kMaxElements / kDefaultC,  // 349,525 rows of 768
                     32 * 512,                  // batch 32 x sequence 512
                     "hidden size C", kDefaultC, 16384}) {}

  int64_t workspace_bytes(Shape shape, Precision p) const override {
    shape = resolve(shape);
    const int64_t n = shape.size * shape.inner;
    return (3 * n + shape.inner) * bytes_per_element(p);  // x, t, y and b
  }

  Status create_workspace(Shape shape, Precision p,
                          std::unique_ptr<Workspace>* out) const override {
    shape = resolve(shape);
    if (shape.size < 1) return Status::Error("bias_gelu needs at least 1 row");
    if (shape.inner < 1) return Status::Error("bias_gelu needs a hidden size C of at least 1");
    if (shape.inner > kMaxElements || shape.size > kMaxElements / shape.inner) {
      return Status::Error("bias_gelu holds at most 2^28 = " + std::to_string(kMaxElements) +
                           " elements (rows x C); at C = " + std::to_string(shape.inner) +
                           " that is " + std::to_string(kMaxElements / shape.inner) +
                           " rows, got " + std::to_string(shape.size) + ".");
    }
    return make_workspace<BiasGeluWorkspace>(p, out, shape.size, shape.inner, tolerance(p));
  }

  // inputs: x (rows x C, flat) and b (C); C is b's length.
  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const auto& x = inputs.at(0).values;
    const auto& b = inputs.at(1).values;
    HostTensor y{"y", std::vector<double>(x.size())};
    if (b.empty()) return {y};
    for (size_t i = 0; i < x.size(); ++i) y.values[i] = gelu_tanh_reference(x[i] + b[i % b.size()]);
    return {y};
  }

  // fp32: gelu_tanh_fast's hardware 2^x and reciprocal are within a few ulp near GELU's curve,
  // and the unfused chain rounds t = x + b once more (6e-8); ~1e-7 is typical. bf16: the
  // output's own rounding (8 significant bits) gives ~2e-3, and the unfused chain also rounds t
  // to bf16 before GELU (slope at most 1.13). A bias read from the wrong column gives errors of
  // order 1, far above either tolerance.
  double tolerance(Precision p) const override { return p == Precision::fp32 ? 1e-5 : 1e-2; }
};

}  // namespace

FL_DEFINE_LESSON(bias_gelu, BiasGelu);

}  // namespace fl
