// The ladder shared by relu_scale and gelu_scale: y = s * act(x).
//
// Levels:
//   0 unfused  two kernels: act writes the intermediate t = act(x) to HBM, scale reads it back.
//   1 fused    one kernel: the activation and the scale in registers, x read once, y written once.
// Textbook bytes (n elements of b bytes, b = 4 for fp32, 2 for bf16):
//   act   reads n*b (x), writes n*b (t)      scale  reads n*b (t), writes n*b (y)
//   fused reads n*b (x), writes n*b (y)
//   unfused 4nb, fused 2nb: the byte-ratio limit of the speedup is 2.0x.
// Every kernel is elementwise_kernel (elementwise.cuh): 16 bytes per thread access (float4 /
// 8 x bf16) and a scalar tail, so any size works. A lesson supplies the activation (a type with
// a float __device__ operator() for the kernels and a static double reference() for the CPU and
// GPU fp64 references) and an ActivationScaleSpec: names, text, input range, FLOPs, tolerances.
#pragma once

#include <cuda_bf16.h>

#include <memory>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/device_common.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/lesson.h"

namespace fl {

struct ActivationScaleSpec {
  const char* id;              // "gelu_scale"
  const char* title;           // "GELU + scale"
  const char* formula;         // "y = s * GELU_tanh(x),  s = 0.5"
  const char* act_kernel;      // level 0's first launch: "gelu"
  const char* fused_kernel;    // level 1's launch: "gelu_scale_fused"
  const char* unfused_summary;
  const char* fused_summary;
  float input_lo, input_hi;    // inputs are uniform in [lo, hi)
  double act_flops_per_element;
  double tolerance_fp32, tolerance_bf16;  // relative L2 error vs the double reference
};

// s = 0.5 in both lessons, so they differ only in the activation; a power of two keeps the
// scale itself exact.
constexpr float kActivationScale = 0.5f;

struct ScaleBy {
  __device__ float operator()(float t) const { return kActivationScale * t; }
};

template <typename Act>
struct ScaledActivation {
  __device__ float operator()(float x) const { return kActivationScale * Act()(x); }
};

// The fp64 reference on the GPU, fused with the comparison: reads x and y once.
template <typename T, typename Act>
__global__ void __launch_bounds__(kElementwiseThreads)
    activation_scale_check_kernel(const T* __restrict__ x, const T* __restrict__ y, int64_t n,
                                  ErrorSums* sums) {
  ErrorPartial p;
  for (int64_t i = blockIdx.x * int64_t(kElementwiseThreads) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kElementwiseThreads) {
    const double xv = Elem<T>::to_float(x[i]);
    p.add(Elem<T>::to_float(y[i]), kActivationScale * Act::reference(xv));
  }
  block_accumulate(sums, p);
}

template <typename T, typename Act>
class ActivationScaleWorkspace final : public Workspace {
 public:
  ActivationScaleWorkspace(const ActivationScaleSpec& spec, int64_t n, double tolerance)
      : spec_(spec), n_(n), tolerance_(tolerance) {}

  Status allocate() {
    FL_TRY(x_.allocate(n_ * sizeof(T)));
    FL_TRY(t_.allocate(n_ * sizeof(T)));
    FL_TRY(y_.allocate(n_ * sizeof(T)));
    FL_TRY(sums_.allocate(sizeof(ErrorSums)));
    return Status::Ok();
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    return fill_uniform(x_.as<T>(), n_, seed, spec_.input_lo, spec_.input_hi, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    FL_TRY(fill_nan(t_.as<T>(), n_, stream));
    return fill_nan(y_.as<T>(), n_, stream);
  }

  Status launch(int level, int launch, cudaStream_t stream) override {
    const T* x = x_.as<T>();
    T* t = t_.as<T>();
    T* y = y_.as<T>();
    if (level == 0 && launch == 0) return launch_elementwise(x, t, n_, Act{}, stream);
    if (level == 0 && launch == 1) return launch_elementwise<T>(t, y, n_, ScaleBy{}, stream);
    if (level == 1 && launch == 0) return launch_elementwise(x, y, n_, ScaledActivation<Act>{}, stream);
    return Status::Error(std::string(spec_.id) + " has no launch " + std::to_string(launch) +
                         " at level " + std::to_string(level));
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    return run_check(sums_, tolerance_, stream, [&](ErrorSums* sums) {
      activation_scale_check_kernel<T, Act><<<check_blocks(n_), kElementwiseThreads, 0, stream>>>(
          x_.as<T>(), y_.as<T>(), n_, sums);
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
  const ActivationScaleSpec& spec_;
  int64_t n_;
  double tolerance_;
  DeviceBuffer x_, t_, y_, sums_;
};

template <typename Act>
class ActivationScaleLesson final : public Lesson {
 public:
  explicit ActivationScaleLesson(const ActivationScaleSpec& spec) : spec_(spec) {
    info_.id = spec.id;
    info_.title = spec.title;
    info_.formula = spec.formula;
    info_.size_axis = {"elements", 1 << 10, int64_t(1) << 28, int64_t(1) << 24};
    info_.levels = {
        {"unfused", spec.unfused_summary, {spec.act_kernel, "scale"}},
        {"fused", spec.fused_summary, {spec.fused_kernel}},
    };
    info_.precisions = {Precision::fp32, Precision::bf16};
  }

  const LessonInfo& info() const override { return info_; }

  std::vector<LaunchTraffic> traffic(int level, Shape shape, Precision p) const override {
    const int64_t n = shape.size;
    const int64_t bytes = n * bytes_per_element(p);
    const double act_flops = spec_.act_flops_per_element * n, scale_flops = 1.0 * n;
    if (level == 0) {
      return {{spec_.act_kernel, bytes, bytes, act_flops}, {"scale", bytes, bytes, scale_flops}};
    }
    return {{spec_.fused_kernel, bytes, bytes, act_flops + scale_flops}};
  }

  int64_t workspace_bytes(Shape shape, Precision p) const override {
    return 3 * shape.size * bytes_per_element(p);  // x, t, y
  }

  Status create_workspace(Shape shape, Precision p, std::unique_ptr<Workspace>* out) const override {
    if (shape.size < 1) return Status::Error(std::string(spec_.id) + " needs at least 1 element");
    if (p == Precision::fp32) return make<float>(shape.size, p, out);
    return make<__nv_bfloat16>(shape.size, p, out);
  }

  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const auto& x = inputs.at(0).values;
    HostTensor y{"y", std::vector<double>(x.size())};
    for (size_t i = 0; i < x.size(); ++i) y.values[i] = kActivationScale * Act::reference(x[i]);
    return {y};
  }

  double tolerance(Precision p) const override {
    return p == Precision::fp32 ? spec_.tolerance_fp32 : spec_.tolerance_bf16;
  }

 private:
  template <typename T>
  Status make(int64_t n, Precision p, std::unique_ptr<Workspace>* out) const {
    auto ws = std::make_unique<ActivationScaleWorkspace<T, Act>>(spec_, n, tolerance(p));
    FL_TRY(ws->allocate());
    *out = std::move(ws);
    return Status::Ok();
  }

  const ActivationScaleSpec& spec_;
  LessonInfo info_;
};

}  // namespace fl
