// Lesson 2, gelu_scale: y = s * GELU_tanh(x), the tutorial's headline.
//
// The ladder (unfused: gelu then scale, t = GELU(x) round-tripping through HBM; fused: one
// kernel) and its level table are shared with relu_scale (activation_scale.cuh): the byte-ratio
// limit of the speedup is 2.0x once the tensor is far larger than L2. This file holds what is
// particular to GELU. The kernels compute gelu_tanh_fast (activations.cuh: exp2 and a fast
// division, ~10 instructions per element, so even bf16 keeps up with HBM); the references
// compute gelu_tanh_reference in double.
#include "kernels/activation_scale.cuh"
#include "kernels/activations.cuh"
#include "kernels/catalog.h"

namespace fl {
namespace {

struct Gelu {
  __device__ float operator()(float x) const { return gelu_tanh_fast(x); }
  __host__ __device__ static double reference(double x) { return gelu_tanh_reference(x); }

  // Tolerances. fp32: the fast GELU is within ~1e-7 relative where GELU is not tiny, so ~4e-8
  // is typical. bf16: the output's own rounding (8 significant bits) gives ~2e-3, and the
  // unfused chain rounds t once more.
  static constexpr ActivationScaleSpec kSpec = {
      "gelu_scale",
      "GELU + scale",
      "y = s * GELU_tanh(x),  s = 0.5",
      "gelu",
      "gelu_scale_fused",
      "GELU and scale as two kernels; the intermediate t round-trips through HBM",
      "one kernel; GELU(x) stays in a register",
      "t = GELU(x), in a register",
      -6.0f,
      6.0f,  // spans GELU's curved part and both tails
      8.0,   // x^3 and the polynomial (~7 flops) plus the exponential (counted as 1)
      1e-5,
      1e-2,
  };
};

}  // namespace

FL_DEFINE_LESSON(gelu_scale, ActivationScaleLesson<Gelu>);

}  // namespace fl
