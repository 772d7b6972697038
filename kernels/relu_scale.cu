// Lesson 1, relu_scale: y = s * relu(x), the simplest fusion there is.
//
// Levels:
//   0 unfused  two kernels: relu writes the intermediate t = relu(x) to HBM, scale reads it back.
//   1 fused    one kernel: relu and the scale in registers, x read once, y written once.
// Textbook bytes (n elements of b bytes, b = 4 for fp32, 2 for bf16):
//   relu  reads n*b (x), writes n*b (t)      scale  reads n*b (t), writes n*b (y)
//   fused reads n*b (x), writes n*b (y)
//   unfused 4nb, fused 2nb: the byte-ratio limit of the speedup is 2.0x. At the default 16M fp32
//   elements that is 268 MB against 134 MB, about 89 us against 45 us at ~3 TB/s (an H100's
//   copy bandwidth); a 64 MB tensor is bigger than its 50 MB L2, but not 4x: the roofline
//   figures want 64M elements or more.
// Arithmetic: one compare and one multiply per element, so even the fused kernel does 1 flop per
// 4 bytes (fp32), far below any GPU's ridge point: every level is bound by memory bandwidth.
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

// s = 0.5, as in gelu_scale, so the two lessons differ only in the activation. A power of two
// also makes every output exact: the scale only changes the exponent.
constexpr float kScale = 0.5f;
constexpr float kInputLo = -4.0f, kInputHi = 4.0f;  // half the inputs are clipped to 0

const char* const kTeachingText =
    "ReLU followed by a scale is about the least work a kernel can do: a compare and a multiply "
    "per element. Unfused, the ReLU kernel reads x from global memory (HBM) and writes its "
    "result t back to HBM, then the scale kernel reads t again and writes y: four trips through "
    "memory per element, two of them only to park t. Fused, one kernel reads x, keeps relu(x) in "
    "a register, scales it and writes y: two trips, one launch. The arithmetic is nothing next "
    "to the memory traffic, so time is bytes divided by bandwidth, and halving the bytes sets "
    "the ceiling of the speedup at 2.0x. What to watch as you drag the size slider: for large "
    "tensors (several times the L2 cache) both versions run near the copy bandwidth shown beside "
    "them and the speedup approaches 2x. When the whole working set fits in L2 (a few MB), t "
    "never reaches HBM: the second kernel re-reads it from the on-chip cache, the measured DRAM "
    "bytes fall below the textbook count, and the speedup shrinks. For tiny tensors (a thousand "
    "elements) each kernel takes a few microseconds whatever it does, mostly launch and ramp-up: "
    "fusion then saves one launch, not bytes, and the timeline shows the gap between the two "
    "unfused launches. Compare with the next lesson, GELU + scale: its activation does many "
    "times the arithmetic (an exponential and a division per element), yet at large sizes both "
    "lessons take about the same time, because both are waiting on memory.";

// ---- CPU reference (double) ----------------------------------------------------------------
// s * relu_reference(x) (activations.cuh), in the lesson's reference() below.

// ---- kernels -------------------------------------------------------------------------------
// All three are elementwise_kernel (elementwise.cuh) with a different op: ReluOp
// (activations.cuh) for the unfused chain's first kernel, and these two.

struct ScaleOp {
  __device__ float operator()(float t) const { return kScale * t; }
};
struct ReluScaleOp {
  __device__ float operator()(float x) const { return kScale * relu(x); }
};

// The fp64 reference on the GPU, fused with the comparison: reads x and y once.
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    check_kernel(const T* __restrict__ x, const T* __restrict__ y, int64_t n, ErrorSums* sums) {
  ErrorPartial p;
  for (int64_t i = blockIdx.x * int64_t(kElementwiseThreads) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kElementwiseThreads) {
    const double xv = Elem<T>::to_float(x[i]);
    p.add(Elem<T>::to_float(y[i]), kScale * relu_reference(xv));
  }
  block_accumulate(sums, p);
}

// ---- workspace -----------------------------------------------------------------------------

template <typename T>
class ReluScaleWorkspace final : public Workspace {
 public:
  explicit ReluScaleWorkspace(int64_t n, double tolerance) : n_(n), tolerance_(tolerance) {}

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
    if (level == 0 && launch == 0) return launch_elementwise(x, t, n_, ReluOp{}, stream);
    if (level == 0 && launch == 1) return launch_elementwise<T>(t, y, n_, ScaleOp{}, stream);
    if (level == 1 && launch == 0) return launch_elementwise(x, y, n_, ReluScaleOp{}, stream);
    return Status::Error("relu_scale has no launch " + std::to_string(launch) + " at level " +
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

class ReluScale final : public Lesson {
 public:
  ReluScale() {
    info_.id = "relu_scale";
    info_.title = "ReLU + scale";
    info_.formula = "y = s * relu(x),  s = 0.5";
    info_.teaching_text = kTeachingText;
    info_.size_axis = {"elements", 1 << 10, int64_t(1) << 28, int64_t(1) << 24};
    info_.levels = {
        {"unfused", "ReLU and scale as two kernels; the intermediate t round-trips through HBM",
         {"relu", "scale"}},
        {"fused", "one kernel; relu(x) stays in a register", {"relu_scale_fused"}},
    };
    info_.precisions = {Precision::fp32, Precision::bf16};
  }

  const LessonInfo& info() const override { return info_; }

  std::vector<LaunchTraffic> traffic(int level, Shape shape, Precision p) const override {
    const int64_t n = shape.size;
    const int64_t bytes = n * bytes_per_element(p);
    // ReLU: one compare (counted as a flop); scale: one multiply.
    const double relu_flops = 1.0 * n, scale_flops = 1.0 * n;
    if (level == 0) {
      return {{"relu", bytes, bytes, relu_flops}, {"scale", bytes, bytes, scale_flops}};
    }
    return {{"relu_scale_fused", bytes, bytes, relu_flops + scale_flops}};
  }

  int64_t workspace_bytes(Shape shape, Precision p) const override {
    return 3 * shape.size * bytes_per_element(p);  // x, t, y
  }

  Status create_workspace(Shape shape, Precision p,
                          std::unique_ptr<Workspace>* out) const override {
    const int64_t n = shape.size;
    if (n < 1) return Status::Error("relu_scale needs at least 1 element");
    if (p == Precision::fp32) return make<float>(n, p, out);
    return make<__nv_bfloat16>(n, p, out);
  }

  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const auto& x = inputs.at(0).values;
    HostTensor y{"y", std::vector<double>(x.size())};
    for (size_t i = 0; i < x.size(); ++i) y.values[i] = kScale * relu_reference(x[i]);
    return {y};
  }

  // Each output is rounded once (t = relu(x) is exact: it is x or 0), so its relative error is
  // at most half an ulp: 6e-8 in fp32, 2e-3 in bf16 (8 significant bits). With s = 0.5 even that
  // rounding is exact, so a correct kernel measures 0; the tolerances leave room for a scale
  // that is not a power of two, and anything wrong (a lost tail, a stale t) is far above them.
  double tolerance(Precision p) const override { return p == Precision::fp32 ? 1e-6 : 4e-3; }

 private:
  template <typename T>
  Status make(int64_t n, Precision p, std::unique_ptr<Workspace>* out) const {
    auto ws = std::make_unique<ReluScaleWorkspace<T>>(n, tolerance(p));
    FL_TRY(ws->allocate());
    *out = std::move(ws);
    return Status::Ok();
  }

  LessonInfo info_;
};

}  // namespace

const Lesson& relu_scale_lesson() {
  static const ReluScale lesson;
  return lesson;
}

}  // namespace fl
