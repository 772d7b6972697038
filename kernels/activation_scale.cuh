// The ladder shared by relu_scale and gelu_scale: y = s * act(x).
//
// The simplest fusion there is. Unfused, act writes the intermediate t = act(x) to HBM and the
// scale kernel reads it back; fused, t stays in a register. With n elements of b bytes that is
// 4nb against 2nb, so the byte-ratio limit of the speedup is 2.0x once the tensor is far larger
// than L2. The level table below lists the launches and their textbook bytes.
//
// Every kernel is elementwise_kernel (elementwise.cuh): 16 bytes per thread access (float4 /
// 8 x bf16) and a scalar tail, so any size works. A lesson is ActivationScaleLesson<Act, kSpec>:
// Act is the activation's op from activations.cuh (a float __device__ operator() for the
// kernels, a static double reference() for the CPU and GPU fp64 references) and kSpec the
// lesson's ActivationScaleSpec. The lesson's id, title, kernel names and level summaries are
// built from the spec's names below, so both lessons say them alike.
#pragma once

#include <cuda_bf16.h>

#include <memory>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/device_common.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/lesson.h"
#include "kernels/level_table.h"
#include "kernels/workspace.cuh"

namespace fl {

// What a lesson on this ladder says of its activation, in this order (a lesson writes it on one
// line, a constexpr in its file, and says why in a comment above).
struct ActivationScaleSpec {
  // The activation's kernel, "gelu"; the lesson's id is gelu_scale, its fused kernel
  // gelu_scale_fused.
  const char* kernel;
  const char* name;          // in the title and the summaries: "GELU" (title "GELU + scale")
  const char* t;             // the intermediate t = act(x) in the text: "GELU(x)"
  const char* formula;       // "y = s * GELU_tanh(x),  s = 0.5"
  float input_lo, input_hi;  // inputs are uniform in [lo, hi)
  double act_flops_per_element;
  double tolerance_fp32, tolerance_bf16;  // relative L2 error vs the double reference
};

inline std::string activation_scale_id(const ActivationScaleSpec& spec) {
  return std::string(spec.kernel) + "_scale";
}

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

// Device buffers for one size and element type: the input x, the unfused chain's intermediate
// t and the output y.
template <typename T, typename Act, const ActivationScaleSpec& kSpec>
class ActivationScaleWorkspace final
    : public LevelWorkspace<ActivationScaleWorkspace<T, Act, kSpec>> {
 public:
  ActivationScaleWorkspace(int64_t n, double tolerance) : n_(n), tolerance_(tolerance) {}

  static const LevelTable<ActivationScaleWorkspace>& levels();  // the ladder, below

  Status allocate() {
    FL_TRY(allocate_elements<T>({{&x_, n_}, {&t_, n_}, {&y_, n_}}));
    return sums_.allocate(sizeof(ErrorSums));
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    return fill_uniform(x_.as<T>(), n_, seed, kSpec.input_lo, kSpec.input_hi, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    return poison_elements<T>({{&t_, n_}, {&y_, n_}}, stream);
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    return check_elementwise(activation_scale_check_kernel<T, Act>, n_, sums_, tolerance_, stream,
                             result, x_.as<T>(), y_.as<T>(), n_);
  }

  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    return download_io<T>({{"x", x_.as<T>(), n_}}, {{"y", y_.as<T>(), n_}}, stream, inputs,
                          outputs);
  }

 private:
  int64_t n_;
  double tolerance_;
  DeviceBuffer x_, t_, y_, sums_;
};

// ---- the level table -----------------------------------------------------------------------
// n = s elements of b bytes. The activation's FLOPs per element are the lesson's; the scale is
// one multiply.
template <typename T, typename Act, const ActivationScaleSpec& kSpec>
const LevelTable<ActivationScaleWorkspace<T, Act, kSpec>>&
ActivationScaleWorkspace<T, Act, kSpec>::levels() {
  using Ws = ActivationScaleWorkspace;
  const std::string name = kSpec.name, t = kSpec.t;
  static const LevelTable<Ws> table = {
      {"unfused",
       name + " and scale as two kernels; the intermediate t round-trips through HBM",
       "nothing between the kernels: t goes to HBM and back",
       {{kSpec.kernel,
         [](Ws& w, cudaStream_t s) {
           return launch_elementwise(w.x_.as<T>(), w.t_.as<T>(), w.n_, Act{}, s);
         },
         [](const Dims& d) {
           return Textbook{d.s * d.b, d.s * d.b, kSpec.act_flops_per_element * d.s};
         }},
        {"scale",
         [](Ws& w, cudaStream_t s) {
           return launch_elementwise<T>(w.t_.as<T>(), w.y_.as<T>(), w.n_, ScaleBy{}, s);
         },
         [](const Dims& d) {
           return Textbook{d.s * d.b, d.s * d.b, 1.0 * d.s};
         }}}},
      {"fused",
       "one kernel; " + t + " stays in a register",
       "t = " + t + ", in a register",
       {{activation_scale_id(kSpec) + "_fused",
         [](Ws& w, cudaStream_t s) {
           return launch_elementwise(w.x_.as<T>(), w.y_.as<T>(), w.n_, ScaledActivation<Act>{}, s);
         },
         [](const Dims& d) {
           return Textbook{d.s * d.b, d.s * d.b, kSpec.act_flops_per_element * d.s + 1.0 * d.s};
         }}}},
  };
  return table;
}

// ---- the lesson ----------------------------------------------------------------------------

template <typename Act, const ActivationScaleSpec& kSpec>
class ActivationScaleLesson final
    : public LevelLesson<ActivationScaleWorkspace<float, Act, kSpec>> {
 public:
  ActivationScaleLesson()
      : LevelLesson<ActivationScaleWorkspace<float, Act, kSpec>>(
            activation_scale_id(kSpec), std::string(kSpec.name) + " + scale", kSpec.formula,
            {"elements", 1 << 10, int64_t(1) << 28, int64_t(1) << 24}) {}

  int64_t workspace_bytes(Shape shape, Precision p) const override {
    return 3 * shape.size * bytes_per_element(p);  // x, t, y
  }

  Status create_workspace(Shape shape, Precision p,
                          std::unique_ptr<Workspace>* out) const override {
    if (shape.size < 1) {
      return Status::Error(this->info().id + " needs at least 1 element");
    }
    return make_workspace<Ws>(p, out, shape.size, tolerance(p));
  }

  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const auto& x = inputs.at(0).values;
    HostTensor y{"y", std::vector<double>(x.size())};
    for (size_t i = 0; i < x.size(); ++i) y.values[i] = kActivationScale * Act::reference(x[i]);
    return {y};
  }

  double tolerance(Precision p) const override {
    return p == Precision::fp32 ? kSpec.tolerance_fp32 : kSpec.tolerance_bf16;
  }

 private:
  template <typename T>
  using Ws = ActivationScaleWorkspace<T, Act, kSpec>;
};

}  // namespace fl
