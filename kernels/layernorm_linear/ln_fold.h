// The LayerNorm-Linear with gamma and beta folded into the weights (ln_mma_folded.cu; bf16,
// sm_80+): the transform made once when the weights are set up, and the kernel that uses it.
// Host-only declarations, so that tests and the lesson can call them from C++.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/status.h"

namespace fl::layernorm_linear {

// The weights with LayerNorm's gamma and beta folded in: W' = diag(gamma) W rounded to bf16
// (k x n), u = W''s column sums of the rounded values and b' = beta W + b (n each, fp32, summed in
// fp64). A weight-load transform: made once when W, b, gamma or beta change, not per launch.
struct LnFold {
  __nv_bfloat16* w = nullptr;
  float* u = nullptr;
  float* b = nullptr;
};
Status fold_ln_weights(const __nv_bfloat16* gamma, const __nv_bfloat16* beta,
                       const __nv_bfloat16* w, const __nv_bfloat16* bias, int k, int n, LnFold fold,
                       cudaStream_t stream);

// y = LN(x) W + b = rstd (x W') - rstd mean u + b' for x: m x k, y: m x n (row-major); k a
// multiple of 8 up to 1024, n a multiple of 8. tile: 0 the kept rule, else a form of
// ln_tiles_forms.cuh whose A tile is one 16-byte chunk a thread (3, 5 or 7; others Unsupported).
Status ln_mma_folded(const __nv_bfloat16* x, LnFold fold, __nv_bfloat16* y, int64_t m, int k, int n,
                     int tile, cudaStream_t stream);

}  // namespace fl::layernorm_linear
