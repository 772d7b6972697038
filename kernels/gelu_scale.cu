// Lesson 2, gelu_scale: y = s * GELU_tanh(x), the tutorial's headline.
//
// Levels:
//   0 unfused  two kernels: gelu writes the intermediate t = GELU(x) to HBM, scale reads it back.
//   1 fused    one kernel: GELU and the scale in registers, x read once, y written once.
// Textbook bytes (n elements of b bytes): unfused 4nb (x, t, t, y), fused 2nb (x, y), so the
// byte-ratio limit of the speedup is 2.0x once the tensor is far larger than L2.
//
// Every kernel is elementwise_kernel (elementwise.cuh): 16 bytes per thread access (float4 /
// 8 x bf16), and the tail (n not a multiple of the vector width) one scalar element per thread,
// so any size works.
#include <cuda_bf16.h>

#include <memory>

#include "kernels/activations.cuh"
#include "kernels/catalog.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/device_common.cuh"
#include "kernels/elementwise.cuh"

namespace fl {
namespace {

constexpr float kScale = 0.5f;   // s
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
// gelu_tanh_reference (activations.cuh) times s, in the lesson's reference() below.

// ---- kernels -------------------------------------------------------------------------------
// All three are elementwise_kernel (elementwise.cuh) with a different op: GeluFastOp
// (activations.cuh) for the unfused chain's first kernel, and these two.

struct ScaleOp {
  __device__ float operator()(float t) const { return kScale * t; }
};
struct GeluScaleOp {
  __device__ float operator()(float x) const { return kScale * gelu_tanh_fast(x); }
};

// The fp64 reference on the GPU, fused with the comparison: reads x and y once.
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    check_kernel(const T* __restrict__ x, const T* __restrict__ y, int64_t n, ErrorSums* sums) {
  ErrorPartial p;
  for (int64_t i = blockIdx.x * int64_t(kElementwiseThreads) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kElementwiseThreads) {
    const double xv = Elem<T>::to_float(x[i]);
    p.add(Elem<T>::to_float(y[i]), kScale * gelu_tanh_reference(xv));
  }
  block_accumulate(sums, p);
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
    if (level == 0 && launch == 0) return launch_elementwise(x, t, n_, GeluFastOp{}, stream);
    if (level == 0 && launch == 1) return launch_elementwise<T>(t, y, n_, ScaleOp{}, stream);
    if (level == 1 && launch == 0) return launch_elementwise(x, y, n_, GeluScaleOp{}, stream);
    return Status::Error("gelu_scale has no launch " + std::to_string(launch) + " at level " +
                         std::to_string(level));
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    return run_check(sums_, tolerance_, stream, [&](ErrorSums* sums) {
      check_kernel<T><<<check_blocks(n_), kElementwiseThreads, 0, stream>>>(x_.as<T>(),
                                                                            y_.as<T>(), n_, sums);
    }, result);
  }

  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    inputs->assign(1, HostTensor{"x", {}});
    outputs->assign(1, HostTensor{"y", {}});
    FL_TRY(download_as_double(x_.as<T>(), n_, stream, &(*inputs)[0].values));
    return download_as_double(y_.as<T>(), n_, stream, &(*outputs)[0].values);
  }

 private:
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
