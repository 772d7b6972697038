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
  const T* w1p;  // W1 packed (block s's C x units values from s C units on), or null: W1's columns
  T* y;
  float* partial;      // blocks x m x cp: each block's share of y (values of the kernel's S)
  unsigned* counters;  // [0] the grid barrier's counter: zero when allocated
  PhaseSink phases;
  bool x_vec, w1_vec, w2_vec, b1_vec;
  bool y_vec;  // C a multiple of 8 and y 16-byte aligned: the sum stores whole items
  bool rows;   // fp32 at a few tokens: the exact-row products (gemm_core/row_products.cuh)
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

// Where value (row, col) of block s's share of y lies in the partial sums, in values of S:
// fp32 row by row (s, row, col); bf16 tile by tile (s, col / 8, row, col % 8): an 8-column tile's
// rows are 16 bytes each, one after another, so that 8 rows of a tile (a store instruction of
// the down product) are 128 contiguous bytes, and so are a block's tile in consecutive rows (the
// sum's loads). Each share is m x cp values either way.
template <typename S>
__device__ __forceinline__ int64_t share_at(const FfnSlicePlan& p, int s, int row, int col) {
  if constexpr (sizeof(S) == 4) {
    return (int64_t(s) * p.m + row) * p.cp + col;
  } else {
    return ((int64_t(s) * (p.cp / kSliceTileCols) + col / kSliceTileCols) * p.m + row) *
               kSliceTileCols +
           col % kSliceTileCols;
  }
}
// From a tile of a share to its next (8 columns on).
template <typename S>
__device__ __forceinline__ int share_tile_step(const FfnSlicePlan& p) {
  return sizeof(S) == 4 ? kSliceTileCols : kSliceTileCols * p.m;
}

// A warp's job of the down product: row tile mt, y's columns [kCols chunk, kCols (chunk + 1)) of
// the block's share, and what its lanes need for it: ldmatrix's lane addresses (bf16) and where
// the lane's rows g and g + 8 go in the partial sums (2-value stores at the lane's column 2t of
// each 8-column tile, tile_step values apart; offsets, so that the stores stay global ones).
struct DownJob {
  int mt, chunk, tiles;  // tiles: 8-column tiles within C (all kCols / 8 but at C's end)
  unsigned a_addr, b_addr;
  int64_t out0, out8;
  int tile_step;
  bool row0, row8;  // rows g and g + 8 are tokens
};

// The job of row tile mt and column chunk `chunk` (past the row's chunks: the next row tiles').
template <int kW, typename S, typename T>
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
  j.out0 = share_at<S>(p, blockIdx.x, row, n0 + 2 * (lane & 3));
  j.out8 = share_at<S>(p, blockIdx.x, row + 8, n0 + 2 * (lane & 3));
  j.tile_step = share_tile_step<S>(p);
  j.row0 = row < p.m, j.row8 = row + 8 < p.m;
  return j;
}

// Columns of y a thread's item covers in the sum: one 16-byte load of a share, 4 fp32 or 8 bf16
// values (S: the shares' type).
template <typename S>
constexpr int kItemCols = 16 / int(sizeof(S));

// The (row, kItemCols columns) item of y a thread adds up in sum_tiles, among `split` lanes of
// one warp: item `item` (warp w holds items 32 w / split ..., lane l item l % (32 / split) of
// them, so that consecutive lanes read consecutive items of one share), part `part` = l / (32 /
// split) of the shares; at the block's first tile, its first share's offset in the partial sums
// (in values of S), the offset from one of its shares to its next (`split` blocks on) and how
// many it adds; `apart` = 32 / split, the lanes between an item's parts (the shuffles' last
// offset), worked out here (0 where the plan asks for the division after the barrier:
// sum_apart_ahead off, the form before).
struct SumLane {
  int item, part, split, loads, apart;
  int64_t src, step;
};
template <int kThr, typename S, typename T>
__device__ __forceinline__ SumLane sum_lane(const SliceArgs<T>& a) {
  const FfnSlicePlan& p = a.p;
  constexpr int kPerRow = kSliceTileCols / kItemCols<S>;
  // items <= 128: one pass of the block; blocks / ex_group shares where h is exchanged
  const int items = kPerRow * p.m, shares = p.ex_group > 0 ? p.blocks / p.ex_group : p.blocks;
  int split = 1;
  while (split < 32 && 2 * split * items <= kThr && 2 * split <= shares) split *= 2;
  const int lane = threadIdx.x & 31, per_warp = 32 / split;
  SumLane l;
  l.item = (threadIdx.x >> 5) * per_warp + lane % per_warp, l.part = lane / per_warp;
  l.split = split, l.apart = p.sum_apart_ahead ? per_warp : 0;
  l.loads = l.item < items ? (shares - l.part + split - 1) / split : 0;
  const int row = l.item / kPerRow;
  const int col = blockIdx.x * kSliceTileCols + kItemCols<S> * (l.item % kPerRow);
  l.src = l.item < items ? share_at<S>(p, l.part, row, col) : 0;
  l.step = int64_t(split) * p.m * p.cp;
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

template <int kW, typename S, typename T>
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
  w.down = down_job<kW, S>(a, hs, w2s, 0, threadIdx.x >> 5);
  w.down_more = down_job<kW, S>(a, hs, w2s, w.down.mt, w.down.chunk + kW).mt < p.mtc;
  w.sum = sum_lane<kThr, S>(a);
  pin(w.up_a), pin(w.up_b), pin(w.up_b_step), pin(w.up_steps);
  pin(w.up_warp.mt), pin(w.up_warp.part), pin(w.up_warp.parts);
  pin(w.down.mt), pin(w.down.chunk), pin(w.down.tiles), pin(w.down.a_addr), pin(w.down.b_addr);
  pin(w.down.out0), pin(w.down.out8), pin(w.down.tile_step), pin(w.down_more);
  pin(w.sum.item), pin(w.sum.part), pin(w.sum.split), pin(w.sum.loads), pin(w.sum.src);
  pin(w.sum.step), pin(w.sum.apart);
  return w;
}

// A warp's whole part of the up product's operands in registers (bf16, a 32-unit slice: per k
// step A's fragment and four column tiles' of W1, 12 registers), from the lane addresses worked
// out ahead: once every warp holds them, x and W1 may be overwritten (W2's rows, w2_during_up)
// while the mma run on the registers.
struct UpOperands {
  unsigned f[kSliceUpRegSteps][4], g[kSliceUpRegSteps][2][4];
  __device__ __forceinline__ void load(const Ahead& w) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#pragma unroll
    for (int s = 0; s < kSliceUpRegSteps; ++s) {
      if (s >= w.up_steps) break;
      const unsigned a = w.up_a + 32u * s, b = w.up_b + w.up_b_step * s;
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(f[s][0]), "=r"(f[s][1]), "=r"(f[s][2]), "=r"(f[s][3])
                   : "r"(a));
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(g[s][np][0]), "=r"(g[s][np][1]), "=r"(g[s][np][2]), "=r"(g[s][np][3])
                     : "r"(b + 32u * np));
      }
    }
#endif
  }
  __device__ __forceinline__ void run(float (&acc)[4][4], int steps) const {
    using Mma = slice::WarpMma<__nv_bfloat16, 4>;
#pragma unroll
    for (int s = 0; s < kSliceUpRegSteps; ++s) {
      if (s >= steps) break;
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        Mma::mma(acc[2 * np], f[s][0], f[s][1], f[s][2], f[s][3], g[s][np][0], g[s][np][1]);
        Mma::mma(acc[2 * np + 1], f[s][0], f[s][1], f[s][2], f[s][3], g[s][np][2], g[s][np][3]);
      }
    }
  }
};

// s += the N values of S in v (bf16: a word's low half first; its bits << 16 are the float).
template <typename S, int N>
__device__ __forceinline__ void add_values(float (&s)[N], uint4 v) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (sizeof(S) == 4) {
      s[i] += __uint_as_float(w[i]);
    } else {
      s[2 * i] += __uint_as_float(w[i] << 16);
      s[2 * i + 1] += __uint_as_float(w[i] & 0xffff0000u);
    }
  }
}

// y[row, col .. col + N) = s + b: one 8- or 16-byte store where C is a multiple of 8 and y is
// 16-byte aligned (y_vec: the item is then whole), else element by element within C.
template <int N, typename T>
__device__ __forceinline__ void store_item(const SliceArgs<T>& a, int row, int col,
                                           const float (&s)[N], const float (&b)[N]) {
  T* dst = a.y + int64_t(row) * a.p.c + col;
  if (a.y_vec) {
    if constexpr (sizeof(T) == 2) {
      unsigned w[N / 2];
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
        const __nv_bfloat162 h =
            __floats2bfloat162_rn(s[2 * i] + b[2 * i], s[2 * i + 1] + b[2 * i + 1]);
        w[i] = *reinterpret_cast<const unsigned*>(&h);
      }
      if constexpr (N == 8) {
        *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
      } else {
        *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
      }
    } else {
      static_assert(N == 4, "fp32 items are 4 columns");
      *reinterpret_cast<float4*>(dst) =
          make_float4(s[0] + b[0], s[1] + b[1], s[2] + b[2], s[3] + b[3]);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (col + i < a.p.c) dst[i] = Elem<T>::from_float(s[i] + b[i]);
  }
}

// After the barrier: block b adds the blocks' shares of y's 8-column tiles b, b + blocks, ...
// Each (row, kItemCols columns) item's shares are split among `split` lanes of one warp (a power
// of 2, at most 32, 32 / split lanes apart), a batch of 16-byte loads in flight each, and the
// lanes' sums meet by shuffles: a fixed order (the same result every run) in log2(split) steps,
// where a serial pass through shared memory took `split` dependent loads (128 at one token).
// The batches stop at the lane's count (3 loads a lane at one token): short code, fetched cold
// after the barrier. first_b2: b2 at the block's first tile.
template <typename S, typename T>
__device__ __forceinline__ void sum_tiles(const SliceArgs<T>& a, const SumLane& l,
                                          const float (&first_b2)[8]) {
  const FfnSlicePlan& p = a.p;
  // Loads a lane keeps in flight: 16 of fp32 (4 adds each), 8 of bf16 (8 adds and 8 unpacking
  // instructions each): a batch runs whole, its loads past the lane's count as zeros, so a short
  // count (3 at one token) issues the rest of the batch too.
  constexpr int N = kItemCols<S>, kPerRow = kSliceTileCols / N, kBatch = sizeof(S) == 4 ? 16 : 8;
  const int row = l.item / kPerRow, half = l.item % kPerRow;
  const S* shares = reinterpret_cast<const S*>(a.partial);
  const int64_t next = int64_t(p.blocks) * share_tile_step<S>(p);
  int64_t src = l.src;
  for (int tile = blockIdx.x; tile < p.cp / kSliceTileCols; tile += p.blocks, src += next) {
    float s[N];
#pragma unroll
    for (int i = 0; i < N; ++i) s[i] = 0.0f;
    const S* q = shares + src;
    for (int b0 = 0; b0 < l.loads; b0 += kBatch) {
      uint4 v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        v[u] = b0 + u < l.loads ? slice::load_cg16(q + u * l.step) : make_uint4(0u, 0u, 0u, 0u);
      }
      q += kBatch * l.step;
#pragma unroll
      for (int u = 0; u < kBatch; ++u) add_values<S>(s, v[u]);
    }
    const int apart = l.apart != 0 ? l.apart : 32 / l.split;  // the item's parts' lanes apart
#pragma unroll 1
    for (int o = 16; o >= apart; o /= 2) {
#pragma unroll
      for (int i = 0; i < N; ++i) s[i] += __shfl_xor_sync(0xffffffffu, s[i], o);
    }
    if (l.part == 0 && l.item < kPerRow * p.m) {
      const int col = tile * kSliceTileCols + N * half;
      float b[N];
#pragma unroll
      for (int i = 0; i < N; ++i) {  // the item's part of first_b2 by selects (no local memory)
        b[i] = tile == int(blockIdx.x) ? (half == 0 ? first_b2[i] : first_b2[(N + i) % 8])
                                       : (col + i < p.c ? Elem<T>::to_float(a.b2[col + i]) : 0.0f);
      }
      store_item(a, row, col, s, b);
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
