// The LayerNorm-Linear with gamma and beta folded into the weights (ln_mma_folded.cu; bf16,
// sm_80+): the transform made once when the weights are set up, and the kernel that uses it.
// Host-only declarations, so that tests and the lesson can call them from C++.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
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

// The bytes of ln_mma_tiles' scratch for m x n outputs (ln_mma_tiles.cu): its counters, and up
// to 1024 tokens the sums where the parts of K of its and ln_mma_folded's split tiles meet.
size_t ln_mma_tiles_counter_bytes(int64_t m, int64_t n);

// How ln_mma_folded runs. tile: 0 the kept rule, else a form of ln_tiles_forms.cuh whose A tile
// is one 16-byte chunk a thread (3, 5, 7 or 10; others Unsupported). splits: 0 the kept rule
// (whole tiles), 1 whole tiles, 2-8 each tile in that many parts of K whose sums meet in `counters`
// (an ln_mma_tiles_counter_bytes(m, n) scratch, zeroed once, left zero by every launch); whole
// tiles without it or above 1024 tokens. prefetch: u and b' of a tile's columns asked into L2 when
// it starts (1), or not (0).
struct LnFoldForm {
  int tile = 0;
  int splits = 0;
  unsigned* counters = nullptr;
  int prefetch = 1;
};

// y = LN(x) W + b = rstd (x W') - rstd mean u + b' for x: m x k, y: m x n (row-major); k a
// multiple of 8 up to 1024, n a multiple of 8.
Status ln_mma_folded(const __nv_bfloat16* x, LnFold fold, __nv_bfloat16* y, int64_t m, int k, int n,
                     LnFoldForm form, cudaStream_t stream);

}  // namespace fl::layernorm_linear
