// The LayerNorm-Linear's level 2 at up to 256 tokens on any GPU: ln_gemm_panel_kernel.
//
// What changes against the tile kernel (ln_tile.cu): at a few tokens the tile kernel's blocks
// each take a BM x BN tile and walk K through a ring: few blocks, each streaming W in short
// pieces with a few stages in flight, and every block computes its rows' statistics again. Here
// a block owns a column slice of W and all of K: the slice (C x bn, the block's share of the
// weights, read from HBM once in all) and the row chunk's whole x panel are asked for at once,
// and the slice is as narrow as it takes for every SM to have one block.
// Block (j, i) computes y[r i .. r i + r, j bn .. j bn + bn) (r = 16, 32 or 64 rows) over all of
// K = C, with no split of K and so no exchange between blocks:
//   1. copy:      the row chunk's x panel (r x C) into shared memory, gamma, beta and the bias
//                 of the block's columns by 16-byte cp.async in the same commit group (as
//                 2-byte loads, each a dependent round trip before the thread's wait for x,
//                 they measured slower: docs/PERFORMANCE.md); all of W's column slice asked for
//                 right behind them, its own commit group (asked for once x was in, it measured
//                 slower with the cp.async affine; faster with the 2-byte loads);
//   2. moments:   while W lands, each row's mean and 1/std (a warp per row, two passes over
//                 shared memory), then the panel normalized in place, rounded as level 0's xn;
//   3. multiply:  when W lands: warp items of 16 rows x 16 columns, each item's K split over
//                 as many warps as the block has to spare (16 warps, 1 to 8 items), the
//                 splits' partial sums added through shared memory, b added, y stored; with
//                 more items than warps (up to twice as many) a warp takes two, interleaved
//                 along K, and stores them from its registers (no split of K).
// Tiles: chunks of 16-64 rows, bn = 16-128 columns (in bf16 any multiple of 8: a 16-column item
// whose second half is past bn reads W's zeroed padding and is not stored), the pair whose
// busiest SM copies the fewest bytes (plan_ln_panel: at C = 768, 72 blocks of 32 columns at
// 1-16 tokens, 2 x 48 blocks of 32 rows x 48 columns at 64, 4 x 32 blocks of 64 rows x 72
// columns at 256: one wave, where 48 columns took two), 512 threads.
// Budget at C = 768, bf16, 16 tokens: W, 3.5 MB, read once (1.2 us at 3 TB/s), 48 KB a block;
// the phases after it are block-local: a few hundred cycles of statistics and multiplies. The
// price of not splitting K: every block of a row chunk reads its x panel (from L2) and
// normalizes it, N / bn times in all: why the cluster kernel takes over at a few tens of tokens.
// At 256 tokens (64 x 72 tiles, one wave): 99 KB of x + 111 KB of W a block, 26.6 MB through L2
// in all, where two waves of 64 x 48 moved 192 x 172 KB = 33 MB and the busiest SM twice 172 KB.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/cuda_check.h"
#include "kernels/gemm_common.cuh"
#include "kernels/layernorm_linear/ln_common.cuh"
#include "kernels/layernorm_linear/ln_panel_plan.cuh"
#include "kernels/layernorm_linear/ln_panel_steps.cuh"
#include "kernels/phases.cuh"
#include "kernels/tensor_gemm.cuh"

namespace fl::layernorm_linear {
namespace {

// More items than warps (up to twice as many): warp w takes items w and w + warps over all of K,
// interleaved step by step (two independent mma chains), and stores them from its registers.
// W's slice lands in plan.stages commit groups along K: each is multiplied as it lands.
template <typename T>
__device__ __forceinline__ void multiply_items(const LnArgs<T>& a, const PanelPlan<T>& plan,
                                               const T* xs, const T* ws, int64_t m0, int64_t n0,
                                               int rows, int live, const T* bias) {
  constexpr int kWarps = kPanelThreads / 32;
  const int warp = threadIdx.x >> 5, col_tiles = (plan.bn + 15) / 16;
  const int items = rows / 16 * col_tiles;
  const int ld_x = plan.ld_x(), ld_w = plan.ld_w();
  const T* ap[2];
  const T* bp[2];
  const bool one = warp < items, two = warp + kWarps < items;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int item = min(warp + i * kWarps, items - 1);
    ap[i] = xs + item / col_tiles * 16 * ld_x;
    bp[i] = ws + item % col_tiles * 16;
  }
  float acc[2][1][2][4] = {};
  const bool by_address = std::is_same_v<T, __nv_bfloat16> && (plan.form & kPanelMmaByAddress);
  for (int s = 0; s < plan.stages; ++s) {
    wait_all_but(plan.stages - 1 - s);  // this thread's copies of stage s, then everyone's
    __syncthreads();
    if (by_address && one) {
      const int k0 = plan.stage_k(s), k1 = plan.stage_k(s + 1);
      two_items_by_address(acc[0][0], acc[1][0], ap, bp, ld_x, ld_w, k0, k1, two);
      continue;
    }
    for (int k = plan.stage_k(s); one && k < plan.stage_k(s + 1); k += 16) {
      tc::WarpStep<T, 1, 2>::run(acc[0], ap[0] + k, ld_x, bp[0] + k * ld_w, ld_w);
      if (two) tc::WarpStep<T, 1, 2>::run(acc[1], ap[1] + k, ld_x, bp[1] + k * ld_w, ld_w);
    }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if ((i == 0 && !one) || (i == 1 && !two)) break;
    const int item = warp + i * kWarps;
    float sum[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) sum[e] = acc[i][0][e / 4][e % 4];
    store_item(a, m0, n0, plan.bn, live, item / col_tiles, item % col_tiles, sum, bias);
  }
}

// 3. multiply: with more items than warps, each warp two items over all of K, W's stages as
// they land; else warp w takes item w % items and K split w / items of `splits`, the splits
// added in shared memory; then b added and y stored.
template <typename T, class Marks>
__device__ __forceinline__ void multiply_and_store(const LnArgs<T>& a, const PanelPlan<T>& plan,
                                                   const T* xs, const T* ws, float* red, int64_t m0,
                                                   int64_t n0, int rows, int live, const T* bias,
                                                   Marks& marks) {
  constexpr int kWarps = kPanelThreads / 32;
  const int k = plan.k, bn = plan.bn, ld_x = plan.ld_x(), ld_w = plan.ld_w();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (!plan.split_k()) {
    multiply_items(a, plan, xs, ws, m0, n0, rows, live, bias);
    marks.mark(kPanelMultiply);
    marks.mark(kPanelStore);
    return;
  }
  tc::async_wait<0>();  // W's slice (this thread's copies)
  __syncthreads();
  const int col_tiles = (bn + 15) / 16, items = rows / 16 * col_tiles;
  const int splits = max(1, kWarps / items), k16 = k / 16;
  const int per_split = (k16 + splits - 1) / splits;
  float acc[1][2][4] = {};
  const int item = warp % items, split = warp / items;
  const int mt = item / col_tiles, nt16 = item % col_tiles;
  if (split < splits) {
    const int kb = split * per_split * 16, ke = min(k, (split + 1) * per_split * 16);
    const bool by_address = std::is_same_v<T, __nv_bfloat16> && (plan.form & kPanelSplitByAddress);
    if (ke > kb && by_address) {
      const T* const ap[2] = {xs + mt * 16 * ld_x, xs};
      const T* const bp[2] = {ws + nt16 * 16, ws};
      float unused[2][4] = {};
      two_items_by_address(acc[0], unused, ap, bp, ld_x, ld_w, kb, ke, false);
    } else if (ke > kb) {
      tc::warp_multiply<T, 1, 2>(acc, xs + mt * 16 * ld_x + kb, ld_x, ws + kb * ld_w + nt16 * 16,
                                 ld_w, ke - kb);
    }
  }
  float* mine = red + (warp * 32 + lane) * 8;
#pragma unroll
  for (int e = 0; e < 8; ++e) mine[e] = acc[0][e / 4][e % 4];
  __syncthreads();
  marks.mark(kPanelMultiply);
  if (warp < items) {
    float sum[8] = {};
    for (int s = 0; s < splits; ++s) {
      const float* part = red + ((s * items + warp) * 32 + lane) * 8;
#pragma unroll
      for (int e = 0; e < 8; ++e) sum[e] += part[e];
    }
    store_item(a, m0, n0, bn, live, mt, nt16, sum, bias);
  }
  marks.mark(kPanelStore);
}

// kPanelWarpsSplit's copies and normalization: the threads past the first kPanelXWarps warps ask
// for W's slice (and zero its padding columns) and go on to the multiplies' wait; the first
// kPanelXWarps warps ask for x's panel and gamma, beta and the bias, wait for x and normalize
// it, meeting on a named barrier of their own (the block's barrier 0 stays the multiplies').
template <typename T, class Marks>
__device__ __forceinline__ void split_prologue(const LnArgs<T>& a, const PanelPlan<T>& plan, T* xs,
                                               T* ws, float2* stats, T* gamma_s, T* beta_s,
                                               T* bias_s, int64_t m0, int64_t n0, int rows,
                                               int live, Marks& marks) {
  constexpr int kX = 32 * kPanelXWarps;
  const int k = plan.k, ld_x = plan.ld_x(), ld_w = plan.ld_w();
  if (threadIdx.x >= kX) {
    ask_for_w(a, plan, ws, n0);
    if (plan.bn % 16 != 0) {  // a last item's second half reads W's padding: zeros, never stored
      for (int r = threadIdx.x - kX; r < k; r += kPanelThreads - kX) {
        *reinterpret_cast<uint4*>(ws + r * ld_w + plan.bn) = make_uint4(0, 0, 0, 0);
      }
    }
    return;
  }
  ask_rows(xs, ld_x, a.x + m0 * k, k, rows, k, a.m - m0, k, true, kX, threadIdx.x);
  tc::async_commit();
  for (int i = threadIdx.x; i < k; i += kX) gamma_s[i] = a.gamma[i], beta_s[i] = a.beta[i];
  if (threadIdx.x < plan.bn) {
    bias_s[threadIdx.x] =
        n0 + threadIdx.x < a.n ? a.bias[n0 + threadIdx.x] : Elem<T>::from_float(0.0f);
  }
  const auto meet = [] { asm volatile("bar.sync 1, %0;" ::"r"(kX) : "memory"); };
  tc::async_wait<0>();  // x's panel (the only group of these threads)
  meet();
  marks.mark(kPanelIn);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, chunks = k / tc::kVec<T>;
  for (int r = warp; r < live; r += kPanelXWarps) {
    const float mean = row_moment<T, 32>(xs + r * ld_x, chunks, lane, 0.0f, false) / k;
    const float m2 = row_moment<T, 32>(xs + r * ld_x, chunks, lane, mean, true);
    if (lane == 0)
      stats[r] = make_float2(mean, rsqrtf(fmaxf(m2 / k, 0.0f) + float(gemm::kLayerNormEps)));
  }
  meet();
  normalize_panel(xs, ld_x, live, k, stats, gamma_s, beta_s, kX);
  marks.mark(kPanelNormalize);
}

// Launch bounds of one block an SM: up to 128 registers a thread (without the 1 ptxas kept 64
// and spilled; a second block an SM never fits the panel's shared memory at C = 768 anyway).
template <typename T>
__global__ void __launch_bounds__(kPanelThreads, 1)
    ln_gemm_panel_kernel(LnArgs<T> a, PanelPlan<T> plan) {
  constexpr int kThreads = kPanelThreads, kWarps = kThreads / 32;
  extern __shared__ __align__(16) unsigned char smem[];
  T* xs = reinterpret_cast<T*>(smem);
  T* ws = reinterpret_cast<T*>(smem + plan.w_offset());
  float2* stats = reinterpret_cast<float2*>(smem + plan.stats_offset());  // (mean, rstd)
  // gamma and beta as T, read 16 bytes (one chunk's worth) at a time: as float2 per element the
  // lanes of a warp, 8 elements apart, hit 2 banks (16-way conflicts:
  // docs/PERFORMANCE.md, lesson 6, has what that cost).
  T* gamma_s = reinterpret_cast<T*>(smem + plan.affine_offset());
  T* beta_s = gamma_s + plan.k;
  T* bias_s = reinterpret_cast<T*>(smem + plan.bias_offset());
  float* red = reinterpret_cast<float*>(smem + plan.red_offset());  // [warp][lane][8]
  const int k = plan.k, bn = plan.bn, ld_x = plan.ld_x(), ld_w = plan.ld_w();
  const int64_t n0 = int64_t(blockIdx.x) * bn, m0 = int64_t(blockIdx.y) * plan.rows;
  const int rows = min(plan.rows, static_cast<int>((a.m - m0 + 15) / 16 * 16));
  const int live = static_cast<int>(min(int64_t(rows), a.m - m0));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  PhaseMarks<kPanelStore + 1> marks(a.phases);

  const bool split = (plan.form & kPanelWarpsSplit) != 0;
  const bool affine_async = !split && (plan.form & kPanelAffineAsync) &&
                            reinterpret_cast<uintptr_t>(a.gamma) % 16 == 0 &&
                            reinterpret_cast<uintptr_t>(a.beta) % 16 == 0;
  const bool bias_ahead = (plan.form & (kPanelBiasAhead | kPanelWarpsSplit)) != 0 || affine_async;
  const T* bias = bias_ahead ? bias_s : a.bias + n0;
  if (split) {
    split_prologue(a, plan, xs, ws, stats, gamma_s, beta_s, bias_s, m0, n0, rows, live, marks);
    return multiply_and_store(a, plan, xs, ws, red, m0, n0, rows, live, bias, marks);
  }
  // 1. copy: x's panel (its own commit group; gamma, beta and the bias in it with
  // kPanelAffineAsync), then W's slice right behind it (plan.w_when 0), once x is in (1) or
  // once x is normalized (2).
  ask_rows(xs, ld_x, a.x + m0 * k, k, rows, k, a.m - m0, k, (plan.form & kPanelCopyStepped) != 0);
  if (affine_async) ask_affine(a, gamma_s, beta_s, bias_s, k, bn, n0);
  tc::async_commit();
  if (plan.w_when == 0) ask_for_w(a, plan, ws, n0);
  for (int i = threadIdx.x; !affine_async && i < k; i += kThreads) {
    gamma_s[i] = a.gamma[i], beta_s[i] = a.beta[i];
  }
  if (bias_ahead && !affine_async && threadIdx.x < bn) {
    bias_s[threadIdx.x] =
        n0 + threadIdx.x < a.n ? a.bias[n0 + threadIdx.x] : Elem<T>::from_float(0.0f);
  }
  if (bn % 16 != 0) {  // a last item's second half reads W's padding: zeros, never stored
    for (int r = threadIdx.x; r < k; r += kThreads) {
      *reinterpret_cast<uint4*>(ws + r * ld_w + bn) = make_uint4(0, 0, 0, 0);
    }
  }
  wait_all_but(plan.w_when == 0 ? plan.stages : 0);  // x's panel
  __syncthreads();
  if (plan.w_when == 1) ask_for_w(a, plan, ws, n0);
  marks.mark(kPanelIn);

  // 2. moments, a warp per row, 16 bytes a lane at a time; then normalize in place.
  constexpr int E = tc::kVec<T>;
  const int chunks = k / E;
  for (int r = warp; r < live; r += kWarps) {
    const float mean = row_moment<T, 32>(xs + r * ld_x, chunks, lane, 0.0f, false) / k;
    const float m2 = row_moment<T, 32>(xs + r * ld_x, chunks, lane, mean, true);
    if (lane == 0)
      stats[r] = make_float2(mean, rsqrtf(fmaxf(m2 / k, 0.0f) + float(gemm::kLayerNormEps)));
  }
  __syncthreads();
  if (plan.form & kPanelNormalizeStepped) {
    normalize_panel(xs, ld_x, live, k, stats, gamma_s, beta_s);
  } else {
    normalize_rows<T, kThreads>(xs, ld_x, live, k, stats, gamma_s, beta_s);
  }
  if (plan.w_when == 2) ask_for_w(a, plan, ws, n0);
  marks.mark(kPanelNormalize);

  multiply_and_store(a, plan, xs, ws, red, m0, n0, rows, live, bias, marks);
}

// The panel plan: rows a block (16, 32 or 64: the chunk) and columns (bn: in bf16 a multiple of 8,
// in fp32 of 16; at most twice as many 16 x 16 items a block as warps), chosen for the fewest
// bytes the busiest SM must copy in: ceil(blocks / SMs) blocks of (rows + bn) x C each (a second
// block on an SM shares its bandwidth: docs/PERFORMANCE.md, lesson 6), a bn whose W rows end
// mid-sector counted 5/4. At C = 768 in bf16: one 16-row chunk in 72 slices of 32 columns at
// 1-16 tokens; two chunks of 32 rows in 48 slices of 48 columns at 64; four of 64 rows in 32
// slices of 72 columns at 256 (one wave: 64 x 48, the best multiple of 16, took two). *ok is
// false when nothing fits.
template <typename T>
Status plan_ln_panel(const LnArgs<T>& a, int sms, int optin, PanelPlan<T>* plan, bool* ok) {
  *ok = false;
  const PanelSearch search = panel_search(int(sizeof(T)));
  const int most_rows = static_cast<int>(std::min<int64_t>(kPanelRows, (a.m + 15) / 16 * 16));
  int64_t best = 0;
  for (int rows : {most_rows, 32, 16}) {
    if (rows > most_rows || (search.rows > 0 && rows != search.rows)) continue;
    for (int bn = search.step; bn <= search.most_bn; bn += search.step) {
      if (search.bn > 0 && bn != search.bn) continue;
      PanelPlan<T> p;
      p.k = a.k, p.rows = rows, p.bn = bn, p.stages = search.stages, p.w_when = search.w_when;
      p.form = search.form;
      if (p.bytes() > size_t(optin) || p.items() > 2 * (kPanelThreads / 32)) continue;
      const void* kernel = reinterpret_cast<const void*>(ln_gemm_panel_kernel<T>);
      FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(p.bytes())));
      int per_sm = 0;
      FL_CUDA_TRY(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kPanelThreads, p.bytes()));
      if (per_sm < 1) continue;
      const int64_t blocks = (a.m + rows - 1) / rows * ((a.n + bn - 1) / bn);
      // W's rows of a bn that is not a multiple of 16 bf16 columns end mid-sector: such a plan
      // counts its bytes 5/4 (measured: docs/PERFORMANCE.md, section 8's portable rungs).
      const int64_t cost = (blocks + sms - 1) / sms * (rows + bn) * (bn % 16 == 0 ? 4 : 5);
      if (*ok && cost >= best) continue;
      *plan = p;
      *ok = true;
      best = cost;
    }
  }
  return Status::Ok();
}

template <typename T>
Status try_ln_panel(const LnArgs<T>& a, int sms, cudaStream_t stream, bool* launched) {
  *launched = false;
  if (a.m > kLnClusterRows || a.k % 16 != 0 || !tc::vector_ok<T>(a.x, a.k) ||
      !tc::vector_ok<T>(a.w, a.n)) {
    return Status::Ok();
  }
  int device = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  PanelPlan<T> plan;
  FL_TRY(plan_ln_panel(a, sms, optin, &plan, launched));
  if (!*launched) return Status::Ok();
  // The plan's search left the attribute at the last candidate's bytes: set the chosen one's.
  FL_CUDA_TRY(cudaFuncSetAttribute(ln_gemm_panel_kernel<T>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(plan.bytes())));
  const dim3 grid(static_cast<unsigned>((a.n + plan.bn - 1) / plan.bn),
                  static_cast<unsigned>((a.m + plan.rows - 1) / plan.rows));
  ln_gemm_panel_kernel<T><<<grid, kPanelThreads, plan.bytes(), stream>>>(a, plan);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

std::string panel_shape_check(const Dims& d) {
  if (d.i % 16 != 0) return "C is not a multiple of 16";
  auto bytes = [&](auto tag) {
    PanelPlan<decltype(tag)> p;
    p.bn = 16;
    p.k = static_cast<int>(d.i);
    p.rows = static_cast<int>(std::min<int64_t>(kPanelRows, (d.s + 15) / 16 * 16));
    return p.bytes();
  };
  const size_t need = d.b == 4 ? bytes(float{}) : bytes(__nv_bfloat16{});
  return need <= 227 * 1024 ? "" : "its x panel does not fit in 227 KB of shared memory";
}

// The panel, cluster and wgmma kernels when they can run here, else Status::Unsupported.
template <typename T>
Status launch_ln_panel(const LnArgs<T>& a, cudaStream_t stream) {
  int device = 0, sms = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  bool launched = false;
  FL_TRY(try_ln_panel(a, sms, stream, &launched));
  return launched ? Status::Ok()
                  : Status::Unsupported("its panel does not fit in this GPU's shared memory");
}

template Status launch_ln_panel<float>(const LnArgs<float>&, cudaStream_t);
template Status launch_ln_panel<__nv_bfloat16>(const LnArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace fl::layernorm_linear
