// The hidden-slice FFN's (kernels/ffn/ffn_hidden_slice.cu) launch arguments and the steps that
// are not products: what each warp and lane works out while the copies are in flight (the up
// product's K range and ldmatrix addresses, its first down job, its item of y, b2 of its first
// tile of y), and the sum of the blocks' shares of y after the grid barrier.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/device_common.cuh"
#include "kernels/ffn/ffn_hidden_slice_plan.h"
#include "kernels/gemm_core/weight_slice.cuh"
#include "kernels/phases.h"

namespace fl::hidden_slice {

template <typename T>
struct SliceArgs {
  FfnSlicePlan p;
  const T *x, *w1, *b1, *w2, *b2;
  T* y;
  float* partial;      // blocks x m x cp: each block's share of y
  unsigned* counters;  // [0] the grid barrier's counter: zero when allocated
  PhaseSink phases;
  bool x_vec, w1_vec, w2_vec, b1_vec;
  bool rows;  // fp32 at a few tokens: the exact-row products (gemm_core/row_products.cuh)
};

// Keeps a value worked out here: an empty volatile asm, which the compiler does not move past
// the copies' waits (also volatile asm), so the arithmetic behind it is done before them.
__device__ __forceinline__ void pin(int& v) {
  asm volatile("" : "+r"(v));
}
__device__ __forceinline__ void pin(unsigned& v) {
  asm volatile("" : "+r"(v));
}
__device__ __forceinline__ void pin(int64_t& v) {
  asm volatile("" : "+l"(v));
}
__device__ __forceinline__ void pin(float& v) {
  asm volatile("" : "+f"(v));
}

// A warp's job of the down product: row tile mt, y's columns [kCols chunk, kCols (chunk + 1)) of
// the block's share, and what its lanes need for it: ldmatrix's lane addresses (bf16) and where
// the lane's rows g and g + 8 go in the partial sums (float2 stores at the lane's column 2t of
// each 8-column tile; offsets, so that the stores stay global ones).
struct DownJob {
  int mt, chunk, tiles;  // tiles: 8-column tiles within C (all kCols / 8 but at C's end)
  unsigned a_addr, b_addr;
  int64_t out0, out8;
  bool row0, row8;  // rows g and g + 8 are tokens
};

// The job of row tile mt and column chunk `chunk` (past the row's chunks: the next row tiles').
template <int kW, typename T>
__device__ __forceinline__ DownJob down_job(const SliceArgs<T>& a, const T* hs, const T* w2s,
                                            int mt, int chunk) {
  const FfnSlicePlan& p = a.p;
  constexpr int kCols = kSliceDownCols * 8 / kW, NT = kCols / 8;
  const int chunks = (p.cp + kCols - 1) / kCols, lane = threadIdx.x & 31;
  while (chunk >= chunks) chunk -= chunks, ++mt;
  DownJob j;
  j.mt = mt, j.chunk = chunk;
  const int n0 = chunk * kCols, row = mt * 16 + (lane >> 2);
  j.tiles = min(NT, (p.cp - n0) / 8);
  j.a_addr = j.b_addr = 0;
  if constexpr (sizeof(T) == 2) {
    j.a_addr = slice::WarpMma<T, NT>::a_lane(hs + mt * 16 * p.ld_h, p.ld_h, 0);
    j.b_addr = slice::WarpMma<T, NT>::b_lane(w2s + n0, p.ld_w2, 0);
  }
  j.out0 = (int64_t(blockIdx.x) * p.m + row) * p.cp + n0 + 2 * (lane & 3);
  j.out8 = j.out0 + 8 * p.cp;
  j.row0 = row < p.m, j.row8 = row + 8 < p.m;
  return j;
}

// The (row, 4 columns) item of y a thread adds up in sum_tiles, among `split` lanes (part of
// them): at the block's first tile, its first share's offset in the partial sums, the offset
// from one of its shares to its next (`split` blocks on) and how many it adds.
struct SumLane {
  int item, part, split, loads;
  int64_t src, step;
};
template <int kThr, typename T>
__device__ __forceinline__ SumLane sum_lane(const SliceArgs<T>& a) {
  const FfnSlicePlan& p = a.p;
  const int items = 2 * p.m, shares = gridDim.x;  // items <= 128: one pass of the block
  int split = 1;
  while (split < 32 && 2 * split * items <= kThr && 2 * split <= shares) split *= 2;
  SumLane l;
  l.item = int(threadIdx.x) / split, l.part = int(threadIdx.x) % split, l.split = split;
  l.loads = l.item < items ? (shares - l.part + split - 1) / split : 0;
  const int row = l.item / 2, col = blockIdx.x * kSliceTileCols + 4 * (l.item % 2);
  const int64_t stride = int64_t(p.m) * p.cp;
  l.src = int64_t(row) * p.cp + col + l.part * stride;
  l.step = split * stride;
  return l;
}

// b2 at y's columns [8 tile, 8 tile + 8), zero past C.
template <typename T>
struct Bias8 {
  T v[8];
};
template <typename T>
__device__ __forceinline__ Bias8<T> load_bias8(const SliceArgs<T>& a, int tile) {
  Bias8<T> b;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int col = tile * kSliceTileCols + i;
    b.v[i] = col < a.p.c ? a.b2[col] : Elem<T>::from_float(0.0f);
  }
  return b;
}

// What each warp and lane does once the data lands, worked out while it is in flight (it
// depends only on the block's, warp's and lane's numbers and the shape): the up product's K
// range and ldmatrix addresses, the first down job, the item of y each thread adds up. Each
// value is pinned, so that the divisions and 64-bit products behind it are not on the chain
// from the last byte to the grid barrier.
struct Ahead {
  unsigned up_a, up_b, up_b_step;
  int up_steps;
  slice::PanelWarp up_warp;
  DownJob down;
  int down_more;  // the warp has more than one down job (more than 16 tokens, or small C)
  SumLane sum;
};

template <int kW, typename T>
__device__ __forceinline__ Ahead work_out_ahead(const SliceArgs<T>& a, const T* xs, const T* w1s,
                                                const T* hs, const T* w2s) {
  constexpr int kThr = 32 * kW;
  const FfnSlicePlan& p = a.p;
  Ahead w;
  int k0 = 0, k1 = 0;
  slice::warp_k_range<T, kW>(0, p.ck, p.mtc, &k0, &k1);
  w.up_a = w.up_b = w.up_b_step = 0;
  w.up_steps = (k1 - k0) / slice::kKStep<T>;
  w.up_warp = slice::panel_warp<kW>(p.mtc);
  if constexpr (sizeof(T) == 2) {
    const T* a_tile = xs + w.up_warp.mt * 16 * p.ld_x;
    w.up_a = slice::WarpMma<T, 4>::a_lane(a_tile, p.ld_x, k0);
    w.up_b = slice::WarpMma<T, 4>::b_lane(w1s, p.ld_w1, k0);
    w.up_b_step = 16u * p.ld_w1 * sizeof(T);
  }
  w.down = down_job<kW>(a, hs, w2s, 0, threadIdx.x >> 5);
  w.down_more = down_job<kW>(a, hs, w2s, w.down.mt, w.down.chunk + kW).mt < p.mtc;
  w.sum = sum_lane<kThr>(a);
  pin(w.up_a), pin(w.up_b), pin(w.up_b_step), pin(w.up_steps);
  pin(w.up_warp.mt), pin(w.up_warp.part), pin(w.up_warp.parts);
  pin(w.down.mt), pin(w.down.chunk), pin(w.down.tiles), pin(w.down.a_addr), pin(w.down.b_addr);
  pin(w.down.out0), pin(w.down.out8), pin(w.down_more);
  pin(w.sum.item), pin(w.sum.part), pin(w.sum.split), pin(w.sum.loads), pin(w.sum.src);
  pin(w.sum.step);
  return w;
}

// b2 at y's columns [col, col + 4), zero past C.
template <typename T>
__device__ __forceinline__ float4 bias4(const SliceArgs<T>& a, int col) {
  float b[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) b[i] = col + i < a.p.c ? Elem<T>::to_float(a.b2[col + i]) : 0.0f;
  return make_float4(b[0], b[1], b[2], b[3]);
}

template <typename T>
__device__ __forceinline__ void store4(const SliceArgs<T>& a, int row, int col, float4 v,
                                       float4 b) {
  const float s[4] = {v.x + b.x, v.y + b.y, v.z + b.z, v.w + b.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (col + i < a.p.c) a.y[int64_t(row) * a.p.c + col + i] = Elem<T>::from_float(s[i]);
  }
}

// After the barrier: block b adds the blocks' shares of y's 8-column tiles b, b + blocks, ...
// Each (row, 4 columns) item's shares are split among `split` lanes of one warp (a power of 2,
// at most 32), up to 16 loads in flight each, and the lanes' sums meet by shuffles: a fixed
// order (the same result every run) in log2(split) steps, where a serial pass through shared
// memory took `split` dependent loads (128 at one token). The loads stop at the lane's count
// (3 a lane at one token): short code, fetched cold after the barrier. first_b2: b2 at the
// block's first tile.
template <typename T>
__device__ __forceinline__ void sum_tiles(const SliceArgs<T>& a, const SumLane& l,
                                          const float (&first_b2)[8]) {
  const FfnSlicePlan& p = a.p;
  constexpr int kBatch = 16;
  const int row = l.item / 2;
  int64_t src = l.src;
  for (int tile = blockIdx.x; tile < p.cp / kSliceTileCols;
       tile += gridDim.x, src += int64_t(gridDim.x) * kSliceTileCols) {
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
    const float* q = a.partial + src;
    for (int b0 = 0; b0 < l.loads; b0 += kBatch) {
      float4 v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        v[u] = b0 + u < l.loads ? slice::load_cg4(q + u * l.step) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
      q += kBatch * l.step;
#pragma unroll
      for (int u = 0; u < kBatch; ++u) s.x += v[u].x, s.y += v[u].y, s.z += v[u].z, s.w += v[u].w;
    }
#pragma unroll 1
    for (int o = l.split / 2; o > 0; o /= 2) {  // every lane takes part (items past the end add 0)
      s.x += __shfl_xor_sync(0xffffffffu, s.x, o);
      s.y += __shfl_xor_sync(0xffffffffu, s.y, o);
      s.z += __shfl_xor_sync(0xffffffffu, s.z, o);
      s.w += __shfl_xor_sync(0xffffffffu, s.w, o);
    }
    if (l.part == 0 && l.item < 2 * p.m) {
      const int col = tile * kSliceTileCols + 4 * (l.item % 2);
      const float* f = first_b2;  // the item's half of it, by selects (no local memory)
      const float4 b =
          l.item % 2 ? make_float4(f[4], f[5], f[6], f[7]) : make_float4(f[0], f[1], f[2], f[3]);
      store4(a, row, col, s, tile == int(blockIdx.x) ? b : bias4(a, col));
    }
  }
}

// b2 of the block's first tile of y as floats, taken once x and W1 are in (its load, asked for
// at the start, has long landed) and pinned: its conversion neither waits on DRAM before the
// copies are asked for nor sits on the chain after the barrier.
template <typename T>
__device__ __forceinline__ void bias8_floats(const Bias8<T>& b, float (&f)[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    f[i] = Elem<T>::to_float(b.v[i]);
    pin(f[i]);
  }
}

}  // namespace fl::hidden_slice
