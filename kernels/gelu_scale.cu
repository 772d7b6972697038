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

// The activation is GeluFastOp (activations.cuh: gelu_tanh_fast). Inputs span GELU's curved
// part and both tails. FLOPs per element: x^3 and the polynomial (~7) plus the exponential
// (counted as 1).
// Tolerances. fp32: the fast GELU is within ~1e-7 relative where GELU is not tiny, so ~4e-8 is
// typical. bf16: the output's own rounding (8 significant bits) gives ~2e-3, and the unfused
// chain rounds t once more.
//
// The spec: kernel, name, t, formula, inputs in [lo, hi), FLOPs per element, tolerances.
constexpr ActivationScaleSpec kGeluScale = {
    "gelu", "GELU", "GELU(x)", "y = s * GELU_tanh(x),  s = 0.5", -6.0f, 6.0f, 8.0, 1e-5, 1e-2};

FL_DEFINE_LESSON(gelu_scale, ActivationScaleLesson<GeluFastOp, kGeluScale>);

}  // namespace fl
