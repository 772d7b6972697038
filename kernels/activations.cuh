// Activation functions shared by the lessons, each in two forms: the float version the kernels
// run, and the double version behind every reference (the CPU reference and the GPU's fp64
// check compute the same formula, so they measure the same error).
#pragma once

#include <cuda_runtime.h>

#include <cmath>

namespace fl {

// ---- GELU, tanh approximation (GPT-2's "gelu_new") -----------------------------------------
//   GELU_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))

__host__ __device__ inline double gelu_tanh_reference(double x) {
  const double k = 0.7978845608028654;  // sqrt(2/pi), the double nearest to it
  return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

// The kernels' GELU. 0.5 x (1 + tanh(z)) is rewritten as x / (1 + exp(-2z)): the same function
// without the cancellation in 1 + tanh(z) that loses every digit in the negative tail (z < -9
// gives 0 in fp32). It must also keep up with HBM in bf16: a form with expf and an IEEE division
// costs about 30 instructions per element (range reduction, Newton steps, slow-path check), and
// in bf16 (4 bytes moved per element) an H200 SM must finish ~4 elements per clock; that form
// measured 82% (gelu) and 68% (bias + GELU) of copy bandwidth there. Here:
//   exp(-2z) = 2^(x (a + b x^2)),  a = -2 sqrt(2/pi) / ln 2,  b = 0.044715 a
// folds the constants into one polynomial, exp2f is the hardware 2^x (MUFU.EX2, 2 ulp), and
// __fdividef is a reciprocal and a multiply: about 10 instructions per element.
// Accuracy: the exponent's rounding grows with its size, ~1e-7 relative where GELU is not tiny
// (|x| < 3) and ~1e-6 in the far negative tail, where GELU is ~1e-10 and counts for nothing in
// a relative L2 error. For x < -10 the power overflows to inf and __fdividef(x, inf) gives -0,
// the right limit. NaN stays NaN.
__device__ __forceinline__ float gelu_tanh_fast(float x) {
  constexpr float a = -2.302208198144325f;  // -2 sqrt(2/pi) / ln 2
  constexpr float b = 0.044715f * a;
  return __fdividef(x, 1.0f + exp2f(x * (a + b * x * x)));
}

// ---- ReLU ----------------------------------------------------------------------------------
// Written as "x < 0 ? 0 : x" rather than fmax(x, 0) so a NaN input stays NaN (as in PyTorch)
// instead of turning into a plausible 0.

__host__ __device__ inline double relu_reference(double x) {
  return x < 0.0 ? 0.0 : x;
}

__device__ __forceinline__ float relu(float x) {
  return x < 0.0f ? 0.0f : x;
}

// ---- as elementwise ops (see elementwise.cuh) ----------------------------------------------
// The float operator() is what the kernels run; the static reference() is the same function in
// double, for the CPU reference and the GPU's fp64 check.

struct GeluFastOp {
  __device__ float operator()(float x) const { return gelu_tanh_fast(x); }
  __host__ __device__ static double reference(double x) { return gelu_tanh_reference(x); }
};

struct ReluOp {
  __device__ float operator()(float x) const { return relu(x); }
  __host__ __device__ static double reference(double x) { return relu_reference(x); }
};

}  // namespace fl
