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

// y_b = h[:, slice] W2[slice, :]: warp w of kW takes (row tile, 768 / kW columns) jobs w, w + kW,
// ...; the share goes to the block's slot of the partial sums (float2 stores). Exact rows: a
// thread a column quad (float4).
template <int kW, typename T>
__device__ __forceinline__ void down_product(const SliceArgs<T>& a, const T* hs, const T* w2s) {
  const FfnSlicePlan& p = a.p;
  constexpr int kCols = kSliceDownCols * 8 / kW, NT = kCols / 8;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int chunks = (p.cp + kCols - 1) / kCols;
  float* out = a.partial + int64_t(blockIdx.x) * p.m * p.cp;
  if constexpr (std::is_same_v<T, float>) {
    if (a.rows) return slice::down_rows(p.m, p.kp, p.cp, hs, p.ld_h, w2s, p.ld_w2, out, p.cp);
  }
  for (int job = warp; job < p.mtc * chunks; job += kW) {
    const int mt = job / chunks, n0 = job % chunks * kCols;
    const int nt_count = min(NT, (p.cp - n0) / 8);
    float acc[NT][4];
    slice::zero(acc);
    const T* h_tile = hs + mt * 16 * p.ld_h;
    if constexpr (sizeof(T) == 2) {
      if (nt_count == NT) {  // every tile (C a multiple of the job's columns): no per-tile tests
        slice::WarpMma<T, NT>::run_all(acc, h_tile, p.ld_h, w2s + n0, p.ld_w2, 0, p.kp);
      } else {
        slice::WarpMma<T, NT>::run(acc, nt_count, h_tile, p.ld_h, w2s + n0, p.ld_w2, 0, p.kp);
      }
    } else {
      slice::WarpMma<T, NT>::run(acc, nt_count, h_tile, p.ld_h, w2s + n0, p.ld_w2, 0, p.kp);
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      if (nt >= nt_count) break;
      const int col = n0 + 8 * nt + 2 * t;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = mt * 16 + g + 8 * half;
        if (row >= p.m) continue;
        *reinterpret_cast<float2*>(out + int64_t(row) * p.cp + col) =
            make_float2(acc[nt][2 * half], acc[nt][2 * half + 1]);
      }
    }
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

// The (row, 4 columns) item a thread adds up in sum_tiles, and how many lanes share it.
struct SumItem {
  int item, part, split;
};
template <int kThr>
__device__ __forceinline__ SumItem sum_item(int m, int shares) {
  const int items = 2 * m;  // items <= 128: one pass of the block
  int split = 1;
  while (split < 32 && 2 * split * items <= kThr && 2 * split <= shares) split *= 2;
  return {int(threadIdx.x) / split, int(threadIdx.x) % split, split};
}

// After the barrier: block b adds the blocks' shares of y's 8-column tiles b, b + blocks, ...
// Each (row, 4 columns) item's shares are split among `split` lanes of one warp (a power of 2,
// at most 32), 16 loads in flight each, and the lanes' sums meet by shuffles: a fixed order (the
// same result every run) in log2(split) steps, where a serial pass through shared memory took
// `split` dependent loads (128 at one token).
template <int kThr, typename T>
__device__ __forceinline__ void sum_tiles(const SliceArgs<T>& a, float4 first_bias) {
  const FfnSlicePlan& p = a.p;
  const int items = 2 * p.m, shares = gridDim.x;
  const SumItem si = sum_item<kThr>(p.m, shares);
  const int item = si.item, part = si.part, split = si.split;
  const int64_t stride = int64_t(p.m) * p.cp;
  constexpr int kBatch = 16;
  for (int tile = blockIdx.x; tile < p.cp / kSliceTileCols; tile += gridDim.x) {
    const int row = item / 2, col = tile * kSliceTileCols + 4 * (item % 2);
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
    if (item < items) {
      const float* src = a.partial + int64_t(row) * p.cp + col;
      for (int b0 = part; b0 < shares; b0 += kBatch * split) {
        float4 v[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int b = b0 + u * split;
          v[u] = b < shares ? slice::load_cg4(src + b * stride) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) s.x += v[u].x, s.y += v[u].y, s.z += v[u].z, s.w += v[u].w;
      }
    }
#pragma unroll 1
    for (int o = split / 2; o > 0; o /= 2) {  // every lane takes part (items past the end add 0)
      s.x += __shfl_xor_sync(0xffffffffu, s.x, o);
      s.y += __shfl_xor_sync(0xffffffffu, s.y, o);
      s.z += __shfl_xor_sync(0xffffffffu, s.z, o);
      s.w += __shfl_xor_sync(0xffffffffu, s.w, o);
    }
    if (part == 0 && item < items) {
      store4(a, row, col, s, tile == int(blockIdx.x) ? first_bias : bias4(a, col));
    }
  }
}

// b2 for this thread's item of the block's first tile of y, asked for before the barrier so
// that its L2 round trip is not on the chain after it.
template <int kThr, typename T>
__device__ __forceinline__ float4 first_tile_bias(const SliceArgs<T>& a) {
  const SumItem si = sum_item<kThr>(a.p.m, gridDim.x);
  const int tile = blockIdx.x;
  if (si.part != 0 || si.item >= 2 * a.p.m || tile >= a.p.cp / kSliceTileCols) {
    return make_float4(0.f, 0.f, 0.f, 0.f);
  }
  return bias4(a, tile * kSliceTileCols + 4 * (si.item % 2));
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
                                           const T* b1s, T* hs, float* red, int valid) {
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
      return slice::block_product<T, 4, kW, true>(xs, p.ld_x, w1s, p.ld_w1, p.ck, p.mtc, 4, red,
                                                  to_h, p.m);
    }
  }
  slice::block_product<T, kSliceMaxUnits / 8, kW>(xs, p.ld_x, w1s, p.ld_w1, p.ck, p.mtc,
                                                  p.units / 8, red, to_h, p.m);
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
  // Every byte of x and W1, then of W2's rows, is asked for before any arithmetic (W2's after
  // the up product where both do not fit: w2_late, into the region x and W1 held).
  stage_xw1<kThr>(a, xs, w1s, b1s, j0, valid);
  if (!p.w2_late) stage_w2<kThr>(a, w2s, j0, valid);
  zero_padding<kThr>(p, xs, hs);
  marks.mark(kIssue);
  if (p.w2_late) {
    tc::async_wait<0>();
  } else {
    tc::async_wait<1>();  // this thread's x and W1 are in (W2's group may still be landing)
  }
  __syncthreads();
  marks.mark(kXW1In);
  up_product<kW>(a, xs, w1s, b1s, hs, red, valid);
  marks.mark(kUp);
  if (p.w2_late) stage_w2<kThr>(a, w2s, j0, valid);
  tc::async_wait<0>();
  __syncthreads();
  marks.mark(kW2In);
  const float4 b2_first = first_tile_bias<kThr>(a);
  down_product<kW>(a, hs, w2s);
  marks.mark(kDown);
  // Every block's share written before any block goes on (count_barrier.cuh).
  count_barrier(a.counters, gridDim.x, blockIdx.x == 0);
  marks.mark(kHandOver);
  sum_tiles<kThr>(a, b2_first);
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
