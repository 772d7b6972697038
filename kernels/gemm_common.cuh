// Pieces shared by the GEMM lessons (6 layernorm_linear, 7 linear_gelu, 8 ffn): the fp64 check
// of sampled rows, the inputs' ranges, the shapes' limits, the lesson class (GemmLesson) and the
// Linear layer (LinearLayer: its tensors and launches; linear_rows: its rows of a level table).
// Our own fused kernels are built on the tensor-core GEMM core in kernels/tensor_gemm.cuh and
// live in their lessons' files.
//
// Row-major everywhere: x is tokens x C, a weight W is (inputs x outputs), y = x W + b.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/activations.cuh"
#include "kernels/bias_ops.cuh"
#include "kernels/blas.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/device_common.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/level_table.h"
#include "kernels/workspace.cuh"

namespace fl::gemm {

constexpr int64_t kDefaultTokens = 32 * 512;  // batch 32 x sequence 512
constexpr int64_t kDefaultC = 768;            // GPT-2 small
constexpr int64_t kMaxTokens = 65536;
constexpr int64_t kMaxC = 2048;  // the check kernel holds rows of 4C in shared memory (fp64)
constexpr double kLayerNormEps = 1e-5;

// Input ranges: activations of unit scale, weights scaled by 1/sqrt(fan-in) (as initialisers
// do) so every layer's output stays of unit scale and GELU sees both of its tails.
constexpr float kXLo = -2.0f, kXHi = 2.0f;
inline float weight_bound(int64_t fan_in) {
  return 1.7f / std::sqrt(float(fan_in));
}
constexpr float kBiasLo = -0.5f, kBiasHi = 0.5f;
constexpr float kGammaLo = 0.5f, kGammaHi = 1.5f;

// The RMS a GEMM lesson's output counts as at least in its relative error (relative_l2_error).
// These inputs give outputs of RMS ~0.7-0.9 from C = 64 on, but at a hidden size of a few the
// handful of products and the bias can cancel: at 3 tokens x C = 1 in bf16 the rounding of h
// alone (2^-9 a value) read above 2e-2 in ~0.4% of random draws (worst 0.56) with the default
// floor, in a CPU simulation of cuBLASLt's chain. At 0.35 the worst of 60,000 draws reads below
// 2e-2, and at unit scale the relative error reads ~9% lower; a wrong tile or bias (errors of
// order 1) still fails.
constexpr double kOutputRmsFloor = 0.35;
constexpr float kBetaLo = -0.5f, kBetaHi = 0.5f;

// Random weights W (fan_in x fan_out) and bias b (fan_out) of one Linear layer, in the ranges
// above; `layer` (0, 1) picks the seeds, so the FFN's two layers differ.
template <typename T>
Status fill_linear(T* w, T* b, int64_t fan_in, int64_t fan_out, uint64_t seed, int layer,
                   cudaStream_t stream) {
  const float wb = weight_bound(fan_in);
  FL_TRY(fill_uniform(w, fan_in * fan_out, mix64(seed ^ (0x3E16ull + layer)), -wb, wb, stream));
  return fill_uniform(b, fan_out, mix64(seed ^ (0xB1A5ull + layer)), kBiasLo, kBiasHi, stream);
}

// ---- the fp64 check of sampled rows --------------------------------------------------------
// A GEMM's reference costs as much arithmetic as the GEMM, in fp64: the gate checks every row up
// to kCheckedRows rows and kCheckedRows evenly spaced rows beyond (the first and last included,
// at most 16 apart at 65,536 tokens, so every 64-row tile of a GEMM is checked), every column
// of each. The gpu tests keep their shapes within kCheckedRows, so the GPU check and the CPU
// reference compare the same outputs.
constexpr int64_t kCheckedRows = 4096;

__host__ __device__ inline int64_t checked_row_count(int64_t m) {
  return m < kCheckedRows ? m : kCheckedRows;
}
__host__ __device__ inline int64_t checked_row(int64_t i, int64_t m) {
  return m <= kCheckedRows ? i : i * (m - 1) / (kCheckedRows - 1);
}

// What one check compares: y = [LN](x) W1 + b1, then GELU, then (for the FFN) y = h W2 + b2.
template <typename T>
struct CheckArgs {
  const T* x;
  const T* gamma;  // LayerNorm's scale and shift, when kLayerNorm
  const T* beta;
  const T* w1;  // k x n1
  const T* b1;
  const T* w2;  // n1 x n2, when kSecond
  const T* b2;
  const T* y;  // m x n1, or m x n2 when kSecond
  int64_t m;
  int k, n1, n2;
};

// Sum over a warp; every lane gets it. The LayerNorm statistics of the check are computed by
// every warp of the block over the whole row (the same order everywhere, so the same bits):
// no shared scratch and no barrier inside a reduction.
__device__ inline double warp_sum_all(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

constexpr int kCheckThreads = 256;

// One block per checked row (grid-stride): the row's reference in fp64 in shared memory, then
// every output of the row compared. Dynamic shared memory: x row (k), slack, hidden row (n1,
// FFN only), slack. The slack: ptxas turns the first two loads of a dot product's remainder
// (k % 4 elements) into one 16-byte LDS.128 issued before the branch that would skip the
// second, so when k % 4 == 1 the load reads one double past the row (seen in the SASS of
// check_rows_kernel<float, false, true, true>, CUDA 13.0) and discards it. Past the x row that
// read landed on the hidden row while other threads wrote it, which racecheck reports as a race;
// past the allocation, memcheck reports it out of bounds. kCheckSlack
// doubles after each row keep those reads in bytes nobody writes.
constexpr int kCheckSlack = 2;

template <typename T, bool kLayerNorm, bool kGelu, bool kSecond>
__global__ void __launch_bounds__(kCheckThreads)
    check_rows_kernel(CheckArgs<T> a, ErrorSums* sums) {
  extern __shared__ double s_row[];
  double* s_x = s_row;
  double* s_h = s_row + a.k + kCheckSlack;
  auto f = [](T v) { return double(Elem<T>::to_float(v)); };
  ErrorPartial p;
  const int64_t rows = checked_row_count(a.m);
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const int64_t row = checked_row(i, a.m);
    const T* xr = a.x + row * a.k;
    __syncthreads();  // the previous row's readers are done with s_row
    for (int j = threadIdx.x; j < a.k; j += blockDim.x) s_x[j] = f(xr[j]);
    __syncthreads();
    if constexpr (kLayerNorm) {
      const int lane = threadIdx.x & 31;
      double sum = 0;
      for (int j = lane; j < a.k; j += 32) sum += s_x[j];
      const double mean = warp_sum_all(sum) / a.k;
      double sq = 0;
      for (int j = lane; j < a.k; j += 32) sq += (s_x[j] - mean) * (s_x[j] - mean);
      const double rstd = 1.0 / sqrt(warp_sum_all(sq) / a.k + kLayerNormEps);
      __syncthreads();  // every warp has read the raw row before it is normalized in place
      for (int j = threadIdx.x; j < a.k; j += blockDim.x) {
        s_x[j] = (s_x[j] - mean) * rstd * f(a.gamma[j]) + f(a.beta[j]);
      }
      __syncthreads();
    }
    for (int c = threadIdx.x; c < a.n1; c += blockDim.x) {
      double acc = f(a.b1[c]);
      for (int j = 0; j < a.k; ++j) acc += s_x[j] * f(a.w1[int64_t(j) * a.n1 + c]);
      if constexpr (kGelu) acc = gelu_tanh_reference(acc);
      if constexpr (kSecond) {
        s_h[c] = acc;
      } else {
        p.add(Elem<T>::to_float(a.y[row * a.n1 + c]), acc);
      }
    }
    if constexpr (kSecond) {
      __syncthreads();
      for (int c = threadIdx.x; c < a.n2; c += blockDim.x) {
        double acc = f(a.b2[c]);
        for (int j = 0; j < a.n1; ++j) acc += s_h[j] * f(a.w2[int64_t(j) * a.n2 + c]);
        p.add(Elem<T>::to_float(a.y[row * a.n2 + c]), acc);
      }
    }
  }
  block_accumulate(sums, p);
}

template <typename T, bool kLayerNorm, bool kGelu, bool kSecond>
Status launch_check_rows(const CheckArgs<T>& a, ErrorSums* sums, cudaStream_t stream) {
  const size_t smem = sizeof(double) * (a.k + kCheckSlack + (kSecond ? a.n1 + kCheckSlack : 0));
  auto kernel = check_rows_kernel<T, kLayerNorm, kGelu, kSecond>;
  if (smem > 48 * 1024) {
    FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)));
  }
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(checked_row_count(a.m), 2048));
  kernel<<<blocks, kCheckThreads, smem, stream>>>(a, sums);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace fl::gemm

namespace fl {

// out[0..n) = b + x[0..k) W, W row-major k x n, all in double: the Linear layer of the CPU
// references (row by row, so a reference needs no tokens x 4C buffer beyond its output).
inline void reference_linear_row(const double* x, int64_t k, const double* w, const double* b,
                                 int64_t n, double* out) {
  for (int64_t c = 0; c < n; ++c) out[c] = b[c];
  for (int64_t j = 0; j < k; ++j) {
    const double* wr = w + j * n;
    for (int64_t c = 0; c < n; ++c) out[c] += x[j] * wr[c];
  }
}

// A Linear layer's weights W (k x n, row-major) and bias b (n) among a CPU reference's inputs,
// as `download` lists them (W, then b): the fan-out n is b's length, the fan-in k = W's / n.
struct LinearInputs {
  LinearInputs(const std::vector<HostTensor>& inputs, size_t w_at)
      : w(inputs.at(w_at).values), b(inputs.at(w_at + 1).values) {}
  const std::vector<double>& w;
  const std::vector<double>& b;
  const int64_t n = static_cast<int64_t>(b.size());
  const int64_t k = n > 0 ? static_cast<int64_t>(w.size()) / n : 0;

  // out[0..n) = b + x[0..k) W.
  void row(const double* x, double* out) const {
    reference_linear_row(x, k, w.data(), b.data(), n, out);
  }
};

// The output y of a GEMM lesson's CPU reference, built row by row: x holds M rows of k values
// (M = x's size / k), and row(x_row, y_row) writes the n values of y's row from x's.
template <typename Row>
HostTensor reference_rows(const std::vector<double>& x, int64_t k, int64_t n, Row row) {
  const int64_t m = k > 0 ? static_cast<int64_t>(x.size()) / k : 0;
  HostTensor y{"y", std::vector<double>(m * n)};
  for (int64_t r = 0; r < m; ++r) row(&x[r * k], &y.values[r * n]);
  return y;
}

// The shapes every GEMM lesson accepts (tokens along the slider, C the hidden size).
inline Status gemm_shape_ok(const char* lesson, Shape shape) {
  if (shape.size < 1 || shape.size > gemm::kMaxTokens) {
    return Status::Error(std::string(lesson) + " takes 1 to " + std::to_string(gemm::kMaxTokens) +
                         " tokens, got " + std::to_string(shape.size));
  }
  if (shape.inner < 1 || shape.inner > gemm::kMaxC) {
    return Status::Error(std::string(lesson) + " takes a hidden size C of 1 to " +
                         std::to_string(gemm::kMaxC) + ", got " + std::to_string(shape.inner));
  }
  return Status::Ok();
}

// Relative L2 error allowed against the fp64 reference. fp32 without TF32: the sums of C to 4C
// products in fp32 (~1e-6), GELU's fast form, and cuBLASLt's own GELU, whose exact formula is
// not documented: 5e-4 leaves room for an erf-based GELU (<= 5e-4 absolute from the tanh form)
// while a wrong tile or a missing bias gives errors of order 1. TF32 rounds each product's
// inputs to 10 mantissa bits (~5e-4 relative per product): 5e-3. bf16: inputs are exact (the
// reference reads the stored bf16 values), the outputs and every intermediate written to HBM
// round to 8 significant bits (~3e-3 each): 2e-2.
inline double gemm_tolerance(Precision p) {
  if (p == Precision::bf16) return 2e-2;
  return blas::allow_tf32() ? 5e-3 : 5e-4;
}

// ---- what the GEMM lessons' classes share ----------------------------------------------------

// The lesson class of a GEMM lesson: tokens along the size slider, the hidden size C as the row
// length, both precisions, the shapes gemm_shape_ok accepts and gemm_tolerance. Its levels and
// traffic() are the workspace's level table (LevelLesson); Ws<T> is constructed from
// (tokens, C, tolerance). A lesson adds its reference and buffer_bytes.
template <template <typename> class Ws>
class GemmLesson : public LevelLesson<Ws<float>> {
 public:
  Status create_workspace(Shape shape, Precision p, std::unique_ptr<Workspace>* out) const final {
    shape = this->resolve(shape);
    FL_TRY(gemm_shape_ok(this->info().id.c_str(), shape));
    return make_workspace<Ws>(p, out, shape.size, shape.inner, tolerance(p));
  }
  double tolerance(Precision p) const final { return gemm_tolerance(p); }
  double rms_floor() const final { return gemm::kOutputRmsFloor; }
  int64_t workspace_bytes(Shape shape, Precision p) const final {
    shape = this->resolve(shape);
    return buffer_bytes(shape.size, shape.inner, bytes_per_element(p));
  }

 protected:
  // The device memory of the workspace's buffers at M tokens, hidden size C and b bytes per
  // element.
  virtual int64_t buffer_bytes(int64_t m, int64_t c, int64_t b) const = 0;

  GemmLesson(const char* id, const char* title, const char* formula)
      : LevelLesson<Ws<float>>(id, title, formula,
                               {"tokens", 1, gemm::kMaxTokens, gemm::kDefaultTokens,
                                "hidden size C", gemm::kDefaultC, gemm::kMaxC}) {}
};

// The precision a GEMM workspace of element type T plans its cuBLASLt GEMMs in.
template <typename T>
constexpr Precision precision_of() {
  return std::is_same<T, float>::value ? Precision::fp32 : Precision::bf16;
}

// Workspace::check of a GEMM lesson: the fp64 check of sampled rows (check_rows_kernel) of what
// `a` describes, into `sums`.
template <typename T, bool kLayerNorm, bool kGelu, bool kSecond>
Status check_gemm_rows(const gemm::CheckArgs<T>& a, const DeviceBuffer& sums, double tolerance,
                       cudaStream_t stream, CheckResult* result) {
  return run_check(
      sums, tolerance, stream,
      [&](ErrorSums* s) {
        return gemm::launch_check_rows<T, kLayerNorm, kGelu, kSecond>(a, s, stream);
      },
      result, gemm::kOutputRmsFloor);
}

// ---- a Linear layer ------------------------------------------------------------------------
// The GEMM lessons are built of Linear layers, out = in W + b over M tokens: layernorm_linear has
// one (C -> 3C), linear_gelu one (C -> 4C), the FFN two (C -> 4C -> C). A layer's fan-in and
// fan-out are multiples of the hidden size C, so a level table's formulas read them off Dims
// (M = d.s tokens, C = d.i).

// What a lesson says of one of its Linear layers, in this order (a constexpr in its file): its
// shape, the epilogue of its one-GEMM level, and the names the charts show for its kernels.
struct LinearSpec {
  int k_per_c, n_per_c;       // fan-in K = k_per_c C, fan-out N = n_per_c C
  blas::Epilogue epilogue;    // what the GEMM with the epilogue adds: bias, or GELU+bias
  const char* gemm;           // the unfused chain's GEMM, "gemm_up"
  const char* add_bias;       // the unfused chain's bias kernel, "add_bias_up"
  const char* gemm_epilogue;  // the GEMM with the epilogue, "gemm_up_bias_gelu"
  int64_t k(int64_t c) const { return k_per_c * c; }
  int64_t n(int64_t c) const { return n_per_c * c; }
};

// t = in W: in (M x K) and W (K x N) read once, t (M x N) written once, 2 M N K flops.
inline Textbook gemm_textbook(const Dims& d, const LinearSpec& l) {
  const int64_t k = l.k(d.i), n = l.n(d.i);
  return {(d.s * k + k * n) * d.b, d.s * n * d.b, 2.0 * d.s * n * k};
}

// out = [GELU](in W + b) in one GEMM: the GEMM's traffic, the bias (N) read once more, and the
// epilogue's flops per output (the add, and GELU).
inline Textbook gemm_epilogue_textbook(const Dims& d, const LinearSpec& l) {
  const int64_t n = l.n(d.i);
  const bool gelu = l.epilogue == blas::Epilogue::gelu_bias;
  Textbook t = gemm_textbook(d, l);
  t.read += n * d.b;
  t.flops += (gelu ? kAddFlops + kGeluFlops : kAddFlops) * double(d.s * n);
  return t;
}

// The workspace's buffers a Linear layer's launches read and write: its input (M x K) and, M x N
// each, the unfused chain's product t = in W, the biased t + b, and the layer's output.
struct LinearBuffers {
  const DeviceBuffer* in;
  const DeviceBuffer* t;
  const DeviceBuffer* biased;  // the output itself where nothing follows the bias
  const DeviceBuffer* out;
};

// One Linear layer of a workspace: W (K x N), b (N), its two cuBLASLt plans (the plain GEMM of
// the unfused chain and the GEMM with the epilogue), and each fusion level's launches on the
// workspace's buffers it was given.
template <typename T>
class LinearLayer {
 public:
  LinearLayer(int64_t m, int64_t c, const LinearSpec& spec, const LinearBuffers& io)
      : m(m), k(spec.k(c)), n(spec.n(c)), epilogue_(spec.epilogue), io_(io) {}
  LinearLayer(const LinearLayer&) = delete;  // it points into its workspace
  LinearLayer& operator=(const LinearLayer&) = delete;

  // Allocates W and b and plans both GEMMs.
  Status allocate() {
    FL_TRY(allocate_elements<T>({{&w_, k * n}, {&b_, n}}));
    FL_TRY(blas::Gemm::plan(m, n, k, precision_of<T>(), blas::Epilogue::none, &gemm_));
    return blas::Gemm::plan(m, n, k, precision_of<T>(), epilogue_, &gemm_epilogue_);
  }

  // Random W and b in gemm::fill_linear's ranges; `layer` (0, 1) picks the seeds.
  Status fill(uint64_t seed, int layer, cudaStream_t stream) {
    return gemm::fill_linear(weights(), bias(), k, n, seed, layer, stream);
  }

  // The unfused chain: t = in W (cuBLASLt), biased = t + b, and after a GELU+bias layer
  // out = GELU(biased).
  Status gemm(cudaStream_t stream) const {
    return gemm_->run(io_.in->as<T>(), weights(), nullptr, io_.t->as<T>(), stream);
  }
  Status add_bias(cudaStream_t stream) const {
    return launch_bias_op(io_.t->as<T>(), bias(), io_.biased->as<T>(), out_elements(), n,
                          AddBiasOp{}, stream);
  }
  Status gelu(cudaStream_t stream) const {
    return launch_elementwise<T>(io_.biased->as<T>(), io_.out->as<T>(), out_elements(),
                                 GeluFastOp{}, stream);
  }
  // Lesson 3's fused kernel on the GEMM's product: out = GELU(t + b).
  Status bias_gelu(cudaStream_t stream) const {
    return launch_bias_op(io_.t->as<T>(), bias(), io_.out->as<T>(), out_elements(), n, BiasGeluOp{},
                          stream);
  }
  // One cuBLASLt GEMM whose epilogue adds the bias (and applies GELU) before the store.
  Status gemm_epilogue(cudaStream_t stream) const {
    return gemm_epilogue_->run(io_.in->as<T>(), weights(), bias(), io_.out->as<T>(), stream);
  }

  T* weights() const { return w_.as<T>(); }  // W, K x N
  T* bias() const { return b_.as<T>(); }     // b, N
  // W and b as Workspace::download lists them for the CPU reference, under the lesson's names.
  DeviceTensor<T> weights_tensor(const char* name) const { return {name, weights(), k * n}; }
  DeviceTensor<T> bias_tensor(const char* name) const { return {name, bias(), n}; }
  int64_t in_elements() const { return m * k; }   // of its input, M x K
  int64_t out_elements() const { return m * n; }  // of t, the biased t and the output: M x N

  const int64_t m, k, n;  // M tokens, K inputs, N outputs

 private:
  DeviceBuffer w_, b_;
  blas::Epilogue epilogue_;
  LinearBuffers io_;
  std::unique_ptr<blas::Gemm> gemm_, gemm_epilogue_;
};

// A Linear layer's rows of a level table, each with its textbook traffic: the unfused chain's
// gemm, add_bias and (after a GELU+bias layer) gelu; lesson 3's bias_gelu_fused; and the GEMM
// with the epilogue. gelu and bias_gelu_fused keep lesson 3's names.
template <class Ws>
struct LinearRows {
  LaunchRow<Ws> gemm, add_bias, gelu, bias_gelu, epilogue;
};

// The rows of the workspace's layer `layer` (a member pointer: &Ws::up_), described by `l`.
template <class Ws, typename T>
LinearRows<Ws> linear_rows(LinearLayer<T> Ws::*layer, const LinearSpec& l) {
  return {
      {l.gemm, [layer](Ws& w, cudaStream_t s) { return (w.*layer).gemm(s); },
       [l](const Dims& d) { return gemm_textbook(d, l); }},
      {l.add_bias, [layer](Ws& w, cudaStream_t s) { return (w.*layer).add_bias(s); },
       [l](const Dims& d) { return bias_op_textbook(d, l.n(d.i), kAddFlops); }},
      {"gelu", [layer](Ws& w, cudaStream_t s) { return (w.*layer).gelu(s); },
       [l](const Dims& d) { return gelu_textbook(d, l.n(d.i)); }},
      {"bias_gelu_fused", [layer](Ws& w, cudaStream_t s) { return (w.*layer).bias_gelu(s); },
       [l](const Dims& d) { return bias_op_textbook(d, l.n(d.i), kAddFlops + kGeluFlops); }},
      {l.gemm_epilogue, [layer](Ws& w, cudaStream_t s) { return (w.*layer).gemm_epilogue(s); },
       [l](const Dims& d) { return gemm_epilogue_textbook(d, l); }},
  };
}

}  // namespace fl
