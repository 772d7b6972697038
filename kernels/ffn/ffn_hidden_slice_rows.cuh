// The hidden-slice FFN's (kernels/ffn/ffn_hidden_slice.cu) exact-row products in fp32
// (gemm_core/row_products.cuh: a lane owns W1's columns, a thread a column quad of W2's rows),
// in passes of up to 8 tokens.
//
// What changes against one pass: where x's 16-row tiles do not fit beside W1's slice (an RTX
// card's 99 KiB at 9-16 fp32 tokens: x 49 KB, W1 74 KB), x's shared memory holds 8 rows
// (x_rows), and the up product runs twice over the resident W1: rows 0-7, then rows 8-15 asked
// for into the same 8 rows once the first pass's partial sums (over x, not W1) are added up.
// The down product (W2 late, over x and W1) runs over h's rows 8 at a time.
// Budget at 16 tokens, C = 768, 24 units a block (128 blocks): x 24.7 KB a pass (the second from
// L2, ~1 us after the first pass), W1 74 KB and W2 74 KB from DRAM; 2 x 768 x 24 x 16 FMAs a
// product a block, ~0.3 us of issue at 8 warps.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/ffn/ffn_hidden_slice_steps.cuh"
#include "kernels/gemm_core/row_products.cuh"
#include "kernels/gemm_core/weight_slice.cuh"

namespace fl::hidden_slice {

// h[r, :] = to_h(r, col, x[r] W1[:, slice]) for r < m, 8 rows a pass; x's rows of the first
// pass are in (and W1's), the later passes' are asked for here into x's rows (the partial sums,
// red, overlay x: up_reduce ends with the block synchronized).
template <int kThr, class ToH>
__device__ __forceinline__ void up_rows(const SliceArgs<float>& a, float* xs, const float* w1s,
                                        float* red, const ToH& to_h) {
  const FfnSlicePlan& p = a.p;
  for (int r0 = 0; r0 < p.m; r0 += slice::kRowsMax) {
    const int rows = min(slice::kRowsMax, p.m - r0);
    if (r0 > 0) {  // rows past the tokens zero (stage's zero fill): the products read them
      slice::stage<kThr>(xs, p.ld_x, a.x + int64_t(r0) * p.c, p.c, p.x_rows, p.ck, rows, p.c,
                         a.x_vec);
      tc::async_commit();
      tc::async_wait<0>();
      __syncthreads();
    }
    float racc[slice::kRowsMax][2] = {};
    slice::up_part(racc, rows, p.units, xs, p.ld_x, w1s, p.ld_w1, 0, p.ck);
    slice::up_reduce(racc, rows, p.units, red,
                     [&](int row, int col, float s) { to_h(r0 + row, col, s); });
  }
}

// The block's share of y = h W2[slice, :], h's rows 8 at a time (h's rows past m zero).
__device__ __forceinline__ void down_rows_all(const FfnSlicePlan& p, const float* hs,
                                              const float* w2s, float* out) {
  for (int r0 = 0; r0 < p.m; r0 += slice::kRowsMax) {
    slice::down_rows(min(slice::kRowsMax, p.m - r0), p.kp, p.cp, hs + r0 * p.ld_h, p.ld_h, w2s,
                     p.ld_w2, out + int64_t(r0) * p.cp, p.cp);
  }
}

}  // namespace fl::hidden_slice
