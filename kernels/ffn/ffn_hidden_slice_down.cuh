// The hidden-slice FFN's (kernels/ffn/ffn_hidden_slice.cu) down product and its share of y:
// y_b = h[:, slice] W2[slice, :] from the block's h and W2's rows in shared memory, stored to the
// block's slot of the partial sums in L2 (fp32 row by row, or bf16 tile by tile), which the sum
// after the grid barrier adds.
// Tiles: warp w of kW takes (16-row tile, 768 / kW columns) jobs w, w + kW, ... (96 columns a
// job with 8 warps, 48 with 16: 12 or 6 column tiles of 8); the first job's ldmatrix addresses
// and store offsets are worked out during the copies (ffn_hidden_slice_steps.cuh: DownJob).
// Data path: h and W2 in shared memory -> ldmatrix -> mma.sync m16n8k16 (bf16; fp32 on the CUDA
// cores in the same fragments, or exact rows: ffn_hidden_slice_rows.cuh) -> registers -> the
// share in L2. Budget at C = 768, 32 units, bf16: 2 k steps x 12 tiles a warp a job, m x 768
// values a block stored (2 B each in bf16 shares from 9 tokens: 96 KB a block at 64 tokens).
// Measured and removed (H100, 2026-11-27, as an RTX card; docs/PERFORMANCE.md): a job in 2, 3 or
// 6 runs of column tiles, each run's shares stored before the next run's mma: 10.75 / 10.88 /
// 11.07 us at 16 tokens against the whole job's 10.78 (the down phase 1.10 against 1.09 us).
#pragma once

#include <cuda_bf16.h>

#include <type_traits>

#include "kernels/ffn/ffn_hidden_slice_rows.cuh"
#include "kernels/ffn/ffn_hidden_slice_steps.cuh"
#include "kernels/gemm_core/weight_slice.cuh"

namespace fl::hidden_slice {

// The stores of a down job's first `tiles` column tiles (rows past the tokens left out): a
// lane's two columns of a row as a float2, or as a bf16x2 in bf16 shares (S). In bf16 shares'
// tile-major order a store instruction writes 8 rows of one tile: 128 contiguous bytes.
template <typename S, int NT, typename T>
__device__ __forceinline__ void store_share(const SliceArgs<T>& a, const DownJob& j,
                                            const float (&acc)[NT][4], int tiles) {
  S* out0 = reinterpret_cast<S*>(a.partial) + j.out0;
  S* out8 = reinterpret_cast<S*>(a.partial) + j.out8;
  const int step = sizeof(S) == 4 ? kSliceTileCols : j.tile_step;  // fp32's a constant
  const auto put = [](S* at, float lo, float hi) {
    if constexpr (sizeof(S) == 4) {
      *reinterpret_cast<float2*>(at) = make_float2(lo, hi);
    } else {
      *reinterpret_cast<__nv_bfloat162*>(at) = __floats2bfloat162_rn(lo, hi);
    }
  };
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    if (nt >= tiles) break;
    if (j.row0) put(out0 + nt * step, acc[nt][0], acc[nt][1]);
    if (j.row8) put(out8 + nt * step, acc[nt][2], acc[nt][3]);
  }
}

template <int kW, typename S, typename T>
__device__ __forceinline__ void run_down_job(const SliceArgs<T>& a, const T* hs, const T* w2s,
                                             const DownJob& j) {
  const FfnSlicePlan& p = a.p;
  constexpr int kCols = kSliceDownCols * 8 / kW, NT = kCols / 8;
  float acc[NT][4];
  slice::zero(acc);
  if constexpr (sizeof(T) == 2) {
    if (j.tiles == NT) {  // every tile (C a multiple of the job's columns): no per-tile tests
      slice::WarpMma<T, NT>::run_all_at(acc, j.a_addr, j.b_addr, 16u * p.ld_w2 * sizeof(T),
                                        p.kp / 16);
      return store_share<S>(a, j, acc, NT);
    }
  }
  slice::WarpMma<T, NT>::run(acc, j.tiles, hs + j.mt * 16 * p.ld_h, p.ld_h, w2s + j.chunk * kCols,
                             p.ld_w2, 0, p.kp);
  store_share<S>(a, j, acc, j.tiles);
}

// y_b = h[:, slice] W2[slice, :]: warp w of kW takes (row tile, 768 / kW columns) jobs w, w + kW,
// ... (the first, and whether there are more, worked out ahead); the share goes to the block's
// slot of the partial sums. Exact rows: a thread a column quad (float4).
template <int kW, typename S, typename T>
__device__ __forceinline__ void down_product(const SliceArgs<T>& a, const T* hs, const T* w2s,
                                             const Ahead& w) {
  const FfnSlicePlan& p = a.p;
  if constexpr (std::is_same_v<T, float>) {
    if (a.rows) return down_rows_all(p, hs, w2s, a.partial + int64_t(blockIdx.x) * p.m * p.cp);
  }
  if (w.down.mt >= p.mtc) return;  // fewer jobs than warps
  run_down_job<kW, S>(a, hs, w2s, w.down);
  if (!w.down_more) return;
  for (DownJob j = down_job<kW, S>(a, hs, w2s, w.down.mt, w.down.chunk + kW); j.mt < p.mtc;
       j = down_job<kW, S>(a, hs, w2s, j.mt, j.chunk + kW)) {
    run_down_job<kW, S>(a, hs, w2s, j);
  }
}

}  // namespace fl::hidden_slice
