// Lesson 8's portable small-token rung, split over the hidden units: the whole FFN, y =
// GELU(x W1 + b1) W2 + b2, in one launch for 1 to 64 tokens on any GPU with cp.async (sm_80+;
// fp32 also on sm_70, with plain copies). No clusters, no TMA.
//
// What changes against ffn_stream.cu: there a block's up slice and its down tile are different
// hidden units, so h goes from block to block through L2 behind per-group counters: a chain of
// dependent steps (h out, counter, h in) after the weights land. Here block b owns hidden units
// [U b, U (b + 1)) for BOTH products, W1's U columns and W2's U rows, and asks for both slices
// (and b1's) before any arithmetic: nothing passes between blocks until each has its share of y:
//   1. h[:, slice] = GELU(x W1[:, slice] + b1), x and W1's columns in shared memory (x's rows
//      past the tokens zeroed, not copied), h kept in shared memory, rounded to the lesson's
//      precision as level 1's h is;
//   2. y_b = h[:, slice] W2[slice, :] on the rows that landed meanwhile: a full m x C share;
//   3. the shares meet in L2: each block stores its share (fp32), a grid barrier (every block is
//      resident: a cooperative launch; one counter and one atomic a block, the last block goes
//      on at once), and block b adds the shares of y's columns [8 b, 8 b + 8) (a warp's lanes
//      split the shares and meet by shuffles: a fixed order, the same result every run) and
//      writes them + b2 (b2 read before the barrier).
// Tiles at C = 768 on 132 SMs, 8 warps (a tuning in bf16: 16, each product's parts of K and
// the down product's columns over twice the warps, 48 columns a job): U = 32 in bf16 (96
// blocks: W1's rows of a slice are 64-byte requests on 64-byte boundaries, and 96 shares), U =
// 24 in fp32 (128 blocks);
// mma.sync m16n8k16 in bf16, CUDA-core fp32 in the same fragments (gemm_core/weight_slice.cuh)
// from 9 tokens; at 1-8 fp32 tokens exact rows (gemm_core/row_products.cuh: no 16-row tile).
// Budget at C = 768, fp32: 18.9 MB (6.2 us at 3 TB/s), 147 KB a block (~9 us at the copy
// probe's ~16 GB/s a block: docs/PERFORMANCE.md), then 768 x 24 FMAs a product a block at one
// token. bf16: 9.4 MB (3.1 us), 96 KB a block (~5 us).
// After the last byte: the up product (6 k-steps x 4 column tiles a warp at one token), the
// reduction of 8 K parts and GELU (32 values at one token), the down product (2 k-steps x 12
// tiles a warp; both products on WarpMma::run_all where every tile is present, since with 2
// warps a scheduler each warp's executed instructions, not the mma, are the time), the share's
// store, the barrier (a fence, an atomic and a poll after the last block) and the sum (96 loads a
// column quad, 16 in flight a lane): well under 1 us of issue, a few L2 round trips. The shares are
// 96 x m x C x 4 B written and read once (0.3 MB at 1 token, 4.7 MB at 16, 19 MB at 64: the cost
// that grows with tokens). Predicted at 1 token: bf16 ~5 us of copies + ~3 us of chain + the
// launch, ~9 us; fp32 ~9 + ~3 + the launch, ~13 us.
#include "kernels/ffn/ffn_hidden_slice.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/activations.cuh"
#include "kernels/cuda_check.h"
#include "kernels/ffn/count_barrier.cuh"
#include "kernels/gemm_core/row_products.cuh"
#include "kernels/gemm_core/weight_slice.cuh"
#include "kernels/phases.cuh"

namespace fl {
namespace {

enum Phase : unsigned { kIssue, kXW1In, kUp, kW2In, kDown, kHandOver, kSum, kPhaseCount };

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

template <int kThr, typename T>
__device__ __forceinline__ void stage_w2(const SliceArgs<T>& a, T* w2s, int j0, int valid) {
  const FfnSlicePlan& p = a.p;
  slice::stage<kThr>(w2s, p.ld_w2, a.w2 + int64_t(j0) * p.c, p.c, p.kp, p.cp, valid, p.c, a.w2_vec);
  tc::async_commit();
}

// Keeps a value worked out here: an empty volatile asm, which the compiler does not move past
// the copies' waits (also volatile asm), so the arithmetic behind it is done before them.
__device__ __forceinline__ void pin(int& v) { asm volatile("" : "+r"(v)); }
__device__ __forceinline__ void pin(unsigned& v) { asm volatile("" : "+r"(v)); }
__device__ __forceinline__ void pin(int64_t& v) { asm volatile("" : "+l"(v)); }
__device__ __forceinline__ void pin(float& v) { asm volatile("" : "+f"(v)); }

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

// The float2 stores of a down job's first `tiles` column tiles (rows past the tokens left out).
template <int NT, typename T>
__device__ __forceinline__ void store_share(const SliceArgs<T>& a, const DownJob& j,
                                            const float (&acc)[NT][4], int tiles) {
  float* out0 = a.partial + j.out0;
  float* out8 = a.partial + j.out8;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    if (nt >= tiles) break;
    if (j.row0) *reinterpret_cast<float2*>(out0 + 8 * nt) = make_float2(acc[nt][0], acc[nt][1]);
    if (j.row8) *reinterpret_cast<float2*>(out8 + 8 * nt) = make_float2(acc[nt][2], acc[nt][3]);
  }
}

template <int kW, typename T>
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
      return store_share(a, j, acc, NT);
    }
  }
  slice::WarpMma<T, NT>::run(acc, j.tiles, hs + j.mt * 16 * p.ld_h, p.ld_h, w2s + j.chunk * kCols,
                             p.ld_w2, 0, p.kp);
  store_share(a, j, acc, j.tiles);
}

// y_b = h[:, slice] W2[slice, :]: warp w of kW takes (row tile, 768 / kW columns) jobs w, w + kW,
// ... (the first, and whether there are more, worked out ahead); the share goes to the block's
// slot of the partial sums. Exact rows: a thread a column quad (float4).
template <int kW, typename T>
__device__ __forceinline__ void down_product(const SliceArgs<T>& a, const T* hs, const T* w2s,
                                             const Ahead& w) {
  const FfnSlicePlan& p = a.p;
  if constexpr (std::is_same_v<T, float>) {
    if (a.rows) {
      float* out = a.partial + int64_t(blockIdx.x) * p.m * p.cp;
      return slice::down_rows(p.m, p.kp, p.cp, hs, p.ld_h, w2s, p.ld_w2, out, p.cp);
    }
  }
  if (w.down.mt >= p.mtc) return;  // fewer jobs than warps
  run_down_job<kW>(a, hs, w2s, w.down);
  if (!w.down_more) return;
  for (DownJob j = down_job<kW>(a, hs, w2s, w.down.mt, w.down.chunk + kW); j.mt < p.mtc;
       j = down_job<kW>(a, hs, w2s, j.mt, j.chunk + kW)) {
    run_down_job<kW>(a, hs, w2s, j);
  }
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
      const float4 b = l.item % 2 ? make_float4(f[4], f[5], f[6], f[7])
                                  : make_float4(f[0], f[1], f[2], f[3]);
      store4(a, row, col, s, tile == int(blockIdx.x) ? b : bias4(a, col));
    }
  }
}

// The up product's operands: b1's slice, x's rows and W1's columns of the block's slice, one
// commit group.
template <int kThr, typename T>
__device__ __forceinline__ void stage_xw1(const SliceArgs<T>& a, T* xs, T* w1s, T* b1s, int j0,
                                          int valid) {
  const FfnSlicePlan& p = a.p;
  constexpr int E = slice::kChunk<T>;
  slice::stage<kThr>(b1s, 0, a.b1 + j0, 0, 1, p.units, 1, valid, a.b1_vec && valid % E == 0);
  slice::stage<kThr>(xs, p.ld_x, a.x, p.c, p.m, p.ck, p.m, p.c, a.x_vec);
  slice::stage<kThr>(w1s, p.ld_w1, a.w1 + j0, p.h, p.ck, p.units, p.c, valid, a.w1_vec);
  tc::async_commit();
}

// The rows of x's tiles past the tokens are zero (they are not copied) and so are h's padding
// columns, which meet W2's zero rows (rows of both are whole 16-byte chunks).
template <int kThr, typename T>
__device__ __forceinline__ void zero_padding(const FfnSlicePlan& p, T* xs, T* hs) {
  uint4* zx = reinterpret_cast<uint4*>(xs + p.m * p.ld_x);
  uint4* zh = reinterpret_cast<uint4*>(hs);
  const int nx = (16 * p.mtc - p.m) * p.ld_x * int(sizeof(T)) / 16;
  const int n = nx + 16 * p.mtc * p.ld_h * int(sizeof(T)) / 16;
  for (int i = threadIdx.x; i < n; i += kThr)
    (i < nx ? zx[i] : zh[i - nx]) = make_uint4(0, 0, 0, 0);
}

// The up product once x and W1 are in (and W2's rows still landing, unless they come late):
// warp w of kW takes row tile w % mtc and part w / mtc of K, the parts meet in shared memory
// and h = GELU(. + b1) is rounded into h's slice. fp32 at a few tokens multiplies exact rows.
template <int kW, typename T>
__device__ __forceinline__ void up_product(const SliceArgs<T>& a, const T* xs, const T* w1s,
                                           const T* b1s, T* hs, float* red, int valid,
                                           const Ahead& w) {
  const FfnSlicePlan& p = a.p;
  // h's rows past the tokens stay zero: their products are never stored.
  const auto to_h = [&](int row, int col, float s) {
    const float v = col < valid ? gelu_tanh_fast(s + Elem<T>::to_float(b1s[col])) : 0.0f;
    hs[row * p.ld_h + col] = Elem<T>::from_float(v);
  };
  if constexpr (std::is_same_v<T, float>) {
    if (a.rows) {
      float racc[slice::kRowsMax][2] = {};
      slice::up_part(racc, p.m, p.units, xs, p.ld_x, w1s, p.ld_w1, 0, p.ck);
      return slice::up_reduce(racc, p.m, p.units, red, to_h);
    }
  }
  if constexpr (sizeof(T) == 2) {
    if (p.units == 32) {  // the plan's slice in bf16 at C = 768: every tile, no per-tile tests
      float acc[4][4];
      slice::zero(acc);
      slice::WarpMma<T, 4>::run_all_at(acc, w.up_a, w.up_b, w.up_b_step, w.up_steps);
      return slice::reduce_parts<4, kW>(acc, w.up_warp, p.mtc, 4, red, to_h, p.m);
    }
  }
  slice::block_product<T, kSliceMaxUnits / 8, kW>(xs, p.ld_x, w1s, p.ld_w1, p.ck, p.mtc,
                                                  p.units / 8, red, to_h, p.m);
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

template <typename T, int kW>
__global__ void __launch_bounds__(32 * kW, 1) ffn_hidden_slice_kernel(SliceArgs<T> a) {
  constexpr int kThr = 32 * kW;
  extern __shared__ __align__(16) unsigned char smem[];
  PhaseMarks<kPhaseCount> marks(a.phases);
  const FfnSlicePlan& p = a.p;
  T* w2s = reinterpret_cast<T*>(smem + p.off_w2);
  T* xs = reinterpret_cast<T*>(smem + p.off_x);
  T* w1s = reinterpret_cast<T*>(smem + p.off_w1);
  T* hs = reinterpret_cast<T*>(smem + p.off_h);
  float* red = reinterpret_cast<float*>(smem + p.off_x);  // overlays x and W1 once used
  T* b1s = reinterpret_cast<T*>(smem + p.off_bias);
  const int j0 = blockIdx.x * p.units, valid = min(p.units, p.h - j0);
  // b2 of the block's first tile of y first (one broadcast load a value; its DRAM trip overlaps
  // the copies'); then every byte of x and W1, then of W2's rows, before any arithmetic (W2's
  // after the up product where both do not fit: w2_late, into the region x and W1 held).
  const Bias8<T> b2_raw = load_bias8(a, blockIdx.x);
  stage_xw1<kThr>(a, xs, w1s, b1s, j0, valid);
  if (!p.w2_late) stage_w2<kThr>(a, w2s, j0, valid);
  zero_padding<kThr>(p, xs, hs);
  const Ahead ahead = work_out_ahead<kW>(a, xs, w1s, hs, w2s);
  marks.mark(kIssue);
  if (p.w2_late) {
    tc::async_wait<0>();
  } else {
    tc::async_wait<1>();  // this thread's x and W1 are in (W2's group may still be landing)
  }
  __syncthreads();
  marks.mark(kXW1In);
  float b2_first[8];
  bias8_floats(b2_raw, b2_first);
  up_product<kW>(a, xs, w1s, b1s, hs, red, valid, ahead);
  marks.mark(kUp);
  if (p.w2_late) stage_w2<kThr>(a, w2s, j0, valid);
  tc::async_wait<0>();
  __syncthreads();
  marks.mark(kW2In);
  down_product<kW>(a, hs, w2s, ahead);
  marks.mark(kDown);
  // Every block's share written before any block goes on (count_barrier.cuh).
  count_barrier(a.counters, gridDim.x, blockIdx.x == 0);
  marks.mark(kHandOver);
  sum_tiles(a, ahead.sum, b2_first);
  marks.mark(kSum);
}

// FL_FFN_SLICE=warps (8 or 16; 0 or nothing: the plan's) replaces the warps of every launch
// whose tuning leaves them to the plan: how `fusionlab bench --phases` measures the forms.
FfnSliceTuning tuning_from_env(FfnSliceTuning t) {
  const char* env = std::getenv("FL_FFN_SLICE");
  if (t.warps == 0 && env != nullptr && *env != '\0') t.warps = std::atoi(env);
  return t;
}

template <typename T>
Status make_plan(int64_t m, int64_t c, FfnSliceTuning tuning, FfnSlicePlan* out) {
  int device = 0, sms = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (tuning.warps != 0 && tuning.warps != 8 && (tuning.warps != 16 || sizeof(T) != 2)) {
    return Status::Error("the hidden-slice FFN takes 8 warps a block, or 16 in bf16");
  }
  if (ffn_slice_choose_plan(m, c, int(sizeof(T)), sms, optin, out, tuning.units, tuning.w2_late,
                            tuning.warps)) {
    return Status::Ok();
  }
  return Status::Unsupported(
      "the hidden-slice FFN at " + std::to_string(m) + " tokens and C = " + std::to_string(c) +
      " does not fit one block per SM in " + std::to_string(optin) + " bytes of shared memory");
}

template <typename T>
Status launch_typed(const FfnSliceBuffers& b, int64_t m, int64_t c, FfnSliceTuning tuning,
                    cudaStream_t stream) {
  SliceArgs<T> a{};
  tuning = tuning_from_env(tuning);
  FL_TRY(make_plan<T>(m, c, tuning, &a.p));
  constexpr int E = slice::kChunk<T>;
  auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  a.x = static_cast<const T*>(b.x);
  a.w1 = static_cast<const T*>(b.w1);
  a.b1 = static_cast<const T*>(b.b1);
  a.w2 = static_cast<const T*>(b.w2);
  a.b2 = static_cast<const T*>(b.b2);
  a.y = static_cast<T*>(b.y);
  char* scratch = static_cast<char*>(b.scratch);
  a.counters = reinterpret_cast<unsigned*>(scratch);
  a.partial = reinterpret_cast<float*>(scratch + 256);
  a.phases = b.phases;
  a.x_vec = c % E == 0 && aligned(b.x);
  a.w1_vec = (4 * c) % E == 0 && aligned(b.w1);
  a.w2_vec = c % E == 0 && aligned(b.w2);
  a.b1_vec = aligned(b.b1);
  a.rows = sizeof(T) == 4 && m <= std::min<int64_t>(tuning.rows_to, slice::kRowsMax);
  if (!aligned(b.scratch)) return Status::Error("the FFN's scratch buffer is not 16-byte aligned");
  if constexpr (sizeof(T) == 2) {
    if (a.p.warps == 16) {
      return slice::launch_cooperative(ffn_hidden_slice_kernel<T, 16>, a, a.p.blocks, 32 * 16,
                                       a.p.smem, stream);
    }
  }
  return slice::launch_cooperative(ffn_hidden_slice_kernel<T, 8>, a, a.p.blocks, 32 * 8, a.p.smem,
                                   stream);
}

}  // namespace

Status ffn_slice_supported(Precision p, int64_t m, int64_t c) {
  if (m < 1 || m > kSliceMaxTokens) {
    return Status::Unsupported("the hidden-slice FFN takes 1 to " +
                               std::to_string(kSliceMaxTokens) + " tokens, got " +
                               std::to_string(m));
  }
  if (c < 1) return Status::Error("the hidden-slice FFN needs C >= 1");
  FL_TRY(slice::cooperative_gpu_supported(p, "the hidden-slice FFN"));
  FfnSlicePlan plan;
  return p == Precision::bf16 ? make_plan<__nv_bfloat16>(m, c, {}, &plan)
                              : make_plan<float>(m, c, {}, &plan);
}

Status ffn_slice_scratch_bytes(Precision p, int64_t m, int64_t c, size_t* bytes,
                               FfnSliceTuning tuning) {
  FL_TRY(ffn_slice_supported(p, m, c));
  FfnSlicePlan plan;
  FL_TRY(p == Precision::bf16 ? make_plan<__nv_bfloat16>(m, c, tuning, &plan)
                              : make_plan<float>(m, c, tuning, &plan));
  *bytes = ffn_slice_scratch_bytes_for(plan);
  return Status::Ok();
}

Status launch_ffn_slice(Precision p, const FfnSliceBuffers& b, int64_t m, int64_t c,
                        cudaStream_t stream, FfnSliceTuning tuning) {
  FL_TRY(ffn_slice_supported(p, m, c));
  return p == Precision::bf16 ? launch_typed<__nv_bfloat16>(b, m, c, tuning, stream)
                              : launch_typed<float>(b, m, c, tuning, stream);
}

}  // namespace fl
