// Lesson 1, relu_scale: y = s * relu(x), the simplest fusion there is.
//
// The ladder (unfused: relu then scale, t = relu(x) round-tripping through HBM; fused: one
// kernel) and its level table are shared with gelu_scale (activation_scale.cuh); this file
// holds what is particular to ReLU. Unfused moves 4nb, fused 2nb (n elements of b bytes): the
// byte-ratio limit of the speedup is 2.0x. At the default 16M fp32 elements that is 268 MB
// against 134 MB, about 89 us against 45 us at ~3 TB/s (an H100's copy bandwidth); a 64 MB
// tensor is bigger than its 50 MB L2, but not 4x: the roofline figures want 64M elements or more.
// Arithmetic: one compare and one multiply per element, so even the fused kernel does 1 flop per
// 4 bytes (fp32), far below any GPU's ridge point: every level is bound by memory bandwidth.
#include "kernels/activation_scale.cuh"
#include "kernels/activations.cuh"
#include "kernels/catalog.h"

namespace fl {

// The activation is ReluOp (activations.cuh). Inputs in [-4, 4): half of them are clipped to
// 0. FLOPs per element: one compare, counted as a flop.
// Tolerances. Each output is rounded once (t = relu(x) is exact: it is x or 0), so its relative
// error is at most half an ulp: 6e-8 in fp32, 2e-3 in bf16 (8 significant bits). With s = 0.5
// even that rounding is exact, so a correct kernel measures 0; the tolerances leave room for a
// scale that is not a power of two, and anything wrong (a lost tail, a stale t) is far above
// them.
//
// The spec: kernel, name, t, formula, inputs in [lo, hi), FLOPs per element, tolerances.
constexpr ActivationScaleSpec kReluScale = {
    "relu", "ReLU", "relu(x)", "y = s * relu(x),  s = 0.5", -4.0f, 4.0f, 1.0, 1e-6, 4e-3};

FL_DEFINE_LESSON(relu_scale, ActivationScaleLesson<ReluOp, kReluScale>);

}  // namespace fl
