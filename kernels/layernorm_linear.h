// LayerNorm-Linear's fused level (kernels/layernorm_linear/layernorm_linear.cu) for the lessons
// built on it (the attention sublayer's QKV projection): y = LN(x) W + b as one kernel of ours, the
// LayerNorm in the GEMM's prologue and the bias in its epilogue, its data path picked by token
// count exactly as the layernorm_linear lesson's top level picks it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/status.h"

namespace fl::layernorm_linear {

// x: m x k, gamma and beta: k, w: k x n, bias: n, y: m x n; all row-major.
Status ln_gemm_bias(const float* x, const float* gamma, const float* beta, const float* w,
                    const float* bias, float* y, int64_t m, int k, int n, cudaStream_t stream);
Status ln_gemm_bias(const __nv_bfloat16* x, const __nv_bfloat16* gamma, const __nv_bfloat16* beta,
                    const __nv_bfloat16* w, const __nv_bfloat16* bias, __nv_bfloat16* y, int64_t m,
                    int k, int n, cudaStream_t stream);

}  // namespace fl::layernorm_linear
