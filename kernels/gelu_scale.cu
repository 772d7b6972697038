// Lesson 2, gelu_scale: y = s * GELU_tanh(x), the tutorial's headline.
//
// Levels:
//   0 unfused  two kernels: gelu writes the intermediate t = GELU(x) to HBM, scale reads it back.
//   1 fused    one kernel: GELU and the scale in registers, x read once, y written once.
// Textbook bytes (n elements of b bytes): unfused 4nb (x, t, t, y), fused 2nb (x, y), so the
// byte-ratio limit of the speedup is 2.0x once the tensor is far larger than L2.
//
// The kernels, workspace and lesson class are the ladder shared with relu_scale
// (activation_scale.cuh); this file holds what is particular to GELU. The kernels compute
// gelu_tanh_fast (activations.cuh: exp2 and a fast division, ~10 instructions per element, so
// even bf16 keeps up with HBM); the references compute gelu_tanh_reference in double.
#include "kernels/activation_scale.cuh"
#include "kernels/activations.cuh"
#include "kernels/catalog.h"

namespace fl {
namespace {

struct Gelu {
  __device__ float operator()(float x) const { return gelu_tanh_fast(x); }
  __host__ __device__ static double reference(double x) { return gelu_tanh_reference(x); }
};

// fp32: the fast GELU is within ~1e-7 relative where GELU is not tiny, so ~4e-8 is typical.
// bf16: the output's own rounding (8 significant bits) gives ~2e-3, and the unfused chain rounds
// t once more.
const ActivationScaleSpec kSpec = {
    "gelu_scale",
    "GELU + scale",
    "y = s * GELU_tanh(x),  s = 0.5",
    "gelu",
    "gelu_scale_fused",
    "GELU and scale as two kernels; the intermediate t round-trips through HBM",
    "one kernel; GELU(x) stays in a register",
    -6.0f, 6.0f,  // spans GELU's curved part and both tails
    8.0,          // x^3 and the polynomial (~7 flops) plus the exponential (counted as 1)
    1e-5, 1e-2,
};

}  // namespace

const Lesson& gelu_scale_lesson() {
  static const ActivationScaleLesson<Gelu> lesson(kSpec);
  return lesson;
}

}  // namespace fl
