// Lesson 2, gelu_scale: y = s * GELU_tanh(x), the tutorial's headline.
//
// Levels:
//   0 unfused  two kernels: gelu writes the intermediate t = GELU(x) to HBM, scale reads it back.
//   1 fused    one kernel: GELU and the scale in registers, x read once, y written once.
// Textbook bytes (n elements of b bytes): unfused 4nb (x, t, t, y), fused 2nb (x, y), so the
// byte-ratio limit of the speedup is 2.0x once the tensor is far larger than L2.
//
// Every kernel moves 16 bytes per thread access (float4 / 8 x bf16) and finishes the tail
// (n not a multiple of the vector width) with one scalar element per thread, so any size works.
#include <cuda_bf16.h>

#include <cmath>
#include <memory>

#include "kernels/catalog.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/device_common.cuh"

namespace fl {
namespace {

constexpr float kScale = 0.5f;   // s
constexpr int kThreads = 256;
constexpr float kInputLo = -6.0f, kInputHi = 6.0f;  // spans GELU's curved part and both tails

const char* const kTeachingText =
    "GELU followed by a scale is two cheap elementwise operations. Unfused, the GELU kernel reads "
    "x from global memory (HBM) and writes its result t back to HBM, and then the scale kernel "
    "reads t again and writes y: four trips through memory for every element, while the "
    "arithmetic (a tanh and a few multiplies) takes the SMs almost no time. Fused, one kernel "
    "reads x, keeps GELU(x) in a register, scales it, and writes y: two trips. Both versions are "
    "limited by memory bandwidth, so halving the bytes should nearly halve the time: the "
    "speedup's ceiling is 2.0x. Drag the size slider and watch where that holds. Large tensors "
    "(far beyond the L2 cache) approach 2x. Tensors that fit in L2 never leave the chip, so "
    "the intermediate is cheap to re-read. Tiny tensors take a few microseconds whatever you do: "
    "there the saving is one kernel launch, not bytes.";

// ---- CPU reference (double) ----------------------------------------------------------------

double gelu_tanh_reference(double x) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

// ---- kernels -------------------------------------------------------------------------------

// 0.5 x (1 + tanh(z)) rewritten as x / (1 + exp(-2z)): the same function, but without the
// cancellation in 1 + tanh(z) that loses every digit in the negative tail (z < -9 gives 0 in
// fp32), and one expf instead of a tanhf.
__device__ __forceinline__ float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  const float z = k * (x + 0.044715f * x * x * x);
  return x / (1.0f + expf(-2.0f * z));
}

struct GeluOp {
  __device__ float operator()(float x) const { return gelu_tanh(x); }
};
struct ScaleOp {
  __device__ float operator()(float t) const { return kScale * t; }
};
struct GeluScaleOp {
  __device__ float operator()(float x) const { return kScale * gelu_tanh(x); }
};

// out[i] = op(in[i]): one 16-byte vector per thread; the threads past the last full vector take
// one tail element each. Used for all three kernels: the op is what differs between levels.
template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(const T* __restrict__ in,
                                                               T* __restrict__ out, int64_t n,
                                                               Op op) {
  constexpr int kVec = Vec16<T>::kCount;
  const int64_t full_vecs = n / kVec;
  const int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (i < full_vecs) {
    Vec16<T> v = load16(in + i * kVec);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v.v[k] = Elem<T>::from_float(op(Elem<T>::to_float(v.v[k])));
    store16(out + i * kVec, v);
  } else {
    const int64_t tail = full_vecs * kVec + (i - full_vecs);
    if (tail < n) out[tail] = Elem<T>::from_float(op(Elem<T>::to_float(in[tail])));
  }
}

// The fp64 reference on the GPU, fused with the comparison: reads x and y once.
template <typename T>
__global__ void __launch_bounds__(kThreads) check_kernel(const T* __restrict__ x,
                                                         const T* __restrict__ y, int64_t n,
                                                         ErrorSums* sums) {
  ErrorPartial p;
  for (int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kThreads) {
    const double xv = Elem<T>::to_float(x[i]);
    const double k = 0.7978845608028654;
    const double ref = kScale * 0.5 * xv * (1.0 + tanh(k * (xv + 0.044715 * xv * xv * xv)));
    p.add(Elem<T>::to_float(y[i]), ref);
  }
  block_accumulate(sums, p);
}

template <typename T, typename Op>
Status launch_elementwise(const T* in, T* out, int64_t n, Op op, cudaStream_t stream) {
  // One thread per full vector plus one per tail element (fewer than a vector's width).
  constexpr int kVec = Vec16<T>::kCount;
  const int64_t threads = n / kVec + n % kVec;
  const unsigned blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
  if (blocks == 0) return Status::Ok();
  elementwise_kernel<T, Op><<<blocks, kThreads, 0, stream>>>(in, out, n, op);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// ---- workspace -----------------------------------------------------------------------------

template <typename T>
class GeluScaleWorkspace final : public Workspace {
 public:
  explicit GeluScaleWorkspace(int64_t n, double tolerance) : n_(n), tolerance_(tolerance) {}

  Status allocate() {
    FL_TRY(x_.allocate(n_ * sizeof(T)));
    FL_TRY(t_.allocate(n_ * sizeof(T)));
    FL_TRY(y_.allocate(n_ * sizeof(T)));
    FL_TRY(sums_.allocate(sizeof(ErrorSums)));
    return Status::Ok();
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    return fill_uniform(x_.as<T>(), n_, seed, kInputLo, kInputHi, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    FL_TRY(fill_nan(t_.as<T>(), n_, stream));
    return fill_nan(y_.as<T>(), n_, stream);
  }

  Status launch(int level, int launch, cudaStream_t stream) override {
    const T* x = x_.as<T>();
    T* t = t_.as<T>();
    T* y = y_.as<T>();
    if (level == 0 && launch == 0) return launch_elementwise(x, t, n_, GeluOp{}, stream);
    if (level == 0 && launch == 1) return launch_elementwise<T>(t, y, n_, ScaleOp{}, stream);
    if (level == 1 && launch == 0) return launch_elementwise(x, y, n_, GeluScaleOp{}, stream);
    return Status::Error("gelu_scale has no launch " + std::to_string(launch) + " at level " +
                         std::to_string(level));
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    FL_CUDA_TRY(cudaMemsetAsync(sums_.get(), 0, sizeof(ErrorSums), stream));
    const int64_t wanted = (n_ + kThreads - 1) / kThreads;
    const unsigned blocks = static_cast<unsigned>(wanted < 4096 ? wanted : 4096);
    check_kernel<T><<<blocks, kThreads, 0, stream>>>(x_.as<T>(), y_.as<T>(), n_,
                                                      sums_.as<ErrorSums>());
    FL_CUDA_TRY(cudaGetLastError());
    ErrorSums host{};
    FL_CUDA_TRY(cudaMemcpyAsync(&host, sums_.get(), sizeof(host), cudaMemcpyDeviceToHost, stream));
    FL_CUDA_TRY(cudaStreamSynchronize(stream));
    *result = finish_check(host, tolerance_);
    return Status::Ok();
  }

  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    inputs->assign(1, HostTensor{"x", {}});
    outputs->assign(1, HostTensor{"y", {}});
    FL_TRY(copy_out(x_, stream, &(*inputs)[0].values));
    return copy_out(y_, stream, &(*outputs)[0].values);
  }

 private:
  Status copy_out(const DeviceBuffer& buffer, cudaStream_t stream, std::vector<double>* values) {
    std::vector<T> raw(n_);
    FL_CUDA_TRY(cudaMemcpyAsync(raw.data(), buffer.get(), n_ * sizeof(T), cudaMemcpyDeviceToHost,
                                stream));
    FL_CUDA_TRY(cudaStreamSynchronize(stream));
    values->resize(n_);
    for (int64_t i = 0; i < n_; ++i) (*values)[i] = Elem<T>::to_float(raw[i]);
    return Status::Ok();
  }

  int64_t n_;
  double tolerance_;
  DeviceBuffer x_, t_, y_, sums_;
};

// ---- the lesson ----------------------------------------------------------------------------

class GeluScale final : public Lesson {
 public:
  GeluScale() {
    info_.id = "gelu_scale";
    info_.title = "GELU + scale";
    info_.formula = "y = s * GELU_tanh(x),  s = 0.5";
    info_.teaching_text = kTeachingText;
    info_.size_axis = {"elements", 1 << 10, int64_t(1) << 28, int64_t(1) << 24};
    info_.levels = {
        {"unfused", "GELU and scale as two kernels; the intermediate t round-trips through HBM",
         {"gelu", "scale"}},
        {"fused", "one kernel; GELU(x) stays in a register", {"gelu_scale_fused"}},
    };
    info_.precisions = {Precision::fp32, Precision::bf16};
  }

  const LessonInfo& info() const override { return info_; }

  std::vector<LaunchTraffic> traffic(int level, Shape shape, Precision p) const override {
    const int64_t n = shape.size;
    const int64_t bytes = n * bytes_per_element(p);
    // GELU_tanh: x^3 and the polynomial (~7 flops) plus tanh (counted as 1); scale: 1.
    const double gelu_flops = 8.0 * n, scale_flops = 1.0 * n;
    if (level == 0) return {{"gelu", bytes, bytes, gelu_flops}, {"scale", bytes, bytes, scale_flops}};
    return {{"gelu_scale_fused", bytes, bytes, gelu_flops + scale_flops}};
  }

  int64_t workspace_bytes(Shape shape, Precision p) const override {
    return 3 * shape.size * bytes_per_element(p);  // x, t, y
  }

  Status create_workspace(Shape shape, Precision p, std::unique_ptr<Workspace>* out) const override {
    const int64_t n = shape.size;
    if (n < 1) return Status::Error("gelu_scale needs at least 1 element");
    if (p == Precision::fp32) return make<float>(n, p, out);
    return make<__nv_bfloat16>(n, p, out);
  }

  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const auto& x = inputs.at(0).values;
    HostTensor y{"y", std::vector<double>(x.size())};
    for (size_t i = 0; i < x.size(); ++i) y.values[i] = kScale * gelu_tanh_reference(x[i]);
    return {y};
  }

  // fp32: tanhf is within a few ulp, so ~1e-7 is typical. bf16: the output's own rounding
  // (8 significant bits) gives ~2e-3, and the unfused chain rounds t once more.
  double tolerance(Precision p) const override { return p == Precision::fp32 ? 1e-5 : 1e-2; }

 private:
  template <typename T>
  Status make(int64_t n, Precision p, std::unique_ptr<Workspace>* out) const {
    auto ws = std::make_unique<GeluScaleWorkspace<T>>(n, tolerance(p));
    FL_TRY(ws->allocate());
    *out = std::move(ws);
    return Status::Ok();
  }

  LessonInfo info_;
};

}  // namespace

const Lesson& gelu_scale_lesson() {
  static const GeluScale lesson;
  return lesson;
}

}  // namespace fl
