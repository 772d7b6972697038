// The LayerNorm-Linear's level 2 at a few hundred tokens in bf16 on any GPU with mma.sync
// (sm_80+), LayerNorm moved to the epilogue: ln_mma_folded_kernel.
//
// What changes against ln_mma_tiles.cu: there every tile waits for the grid's row items to
// normalize its rows into xn (x read cold from HBM, normalized, written to L2, released, polled)
// before its first multiply, a chain as long as level 1's whole LayerNorm kernel. Here nothing
// waits: LayerNorm is linear in x once a row's mean mu and 1/std r are known,
//   LN(x) W + b = r (x W') - r mu u + b',   W' = diag(gamma) W,  u = colsum(W'),  b' = beta W + b,
// so a tile multiplies the raw rows of x by W' at once, and the row statistics come from the x
// K-tiles its ring brings anyway (every chunk of K passes through it): the thread that copied a
// 16-byte chunk of x adds its 8 values to its row's moments (the ring's hook, before the K-tile's
// barrier), the epilogue combines a row's 4 threads, then y = r (acc - mu u) + b' (fp32, rounded
// once) staged through shared memory as 16-byte rows (tile_epilogue.cuh's staged_store).
// W', u and b' are a weight-load transform (fold_ln_weights, below): made once when the weights
// are set up, like a cuBLASLt plan, not part of the timed launch; level 1 still runs the
// LayerNorm and then cuBLASLt on W.
// Precision: x W' and mu u nearly cancel where |mu| >> sigma; both are fp32 (the mma's
// accumulators; u summed in fp64 from the rounded W'), so the cancellation costs ~1e-7 |mu| /
// sigma relative, far under bf16's 4e-3. The moments are fp32 sums of x - p and (x - p)^2 with p
// the row's first value (so s2 - s1^2 / n does not cancel even where |mu| >> sigma, and every
// thread's and part's sums of a row simply add); W' rounds gamma W to bf16 where level 0 rounds
// xn: the same 2^-9 once per product term.
// Parts of K (FL_LN_FOLD_SPLITS 2-8, a measurement form: the kept rule runs whole tiles, since
// the parts' sums cost more than the shorter chains saved, docs/PERFORMANCE.md): a tile's K-tiles
// cut in S parts, a block each, so S times the blocks pull x and W' and each chain is 1/S as
// long; a part adds its fp32 sums (BM x BN) and its rows' two sums into an L2 scratch (red.add,
// ln_tile_parts.cuh's add_part) and the last to arrive stores the tile. Costs: the sums, 32 KiB a
// 64 x 128 part added in L2 (2.3 MB a part at 256 tokens), then read back by the last part.
// Tiles (ln_tiles_forms.cuh): form 7 (64 x 128, 8 warps of 32 x 32, K-tiles of 32 in 8 stages,
// 96 KiB: fits sm_86's 99 KiB) while the 64-row tiles fit one round of SMs, form 5 (32 x 128, 4
// warps, 4 stages of 10 KiB, 2 blocks an SM) up to four rounds of them (1K tokens at C = 768 on
// 132 SMs), form 10 (64 x 256, 8 warps of 32 x 64, 4 stages of 20 KiB: half the x reads of a
// 128-column tile a column) from there; each has one chunk of x a thread a K-tile.
// Budget at 256 tokens, C = 768: 0.9 GFLOP, 1.5 us at mma.sync's ~600 TFLOP/s; HBM: x, W', y
// (0.4 + 3.5 + 1.2 MB) once, ~1.7 us at 3 TB/s; through L2 each 64 x 128 tile reads 96 KiB of x
// and 192 KiB of W' (72 tiles: 21 MB), ~7 us for one SM's 288 KiB at the ~40 KiB/us an SM gets
// when all pull at once: the tile's ring from the launch on, with no normalization before it.
// Whole tiles leave 60 of the 132 SMs idle there; the prediction for 2 parts (144 blocks, 144
// KiB an SM): the ring's share halves (~3.5 us) for ~1 us of sums in L2, ~9-10 us in all.
// u and b' (fp32, 512 bytes each a tile) are asked into L2 at the start: read after the main
// loop, they would bring HBM's latency onto the tail.
// The moments: ~3 instructions an element of x a tile on the ALU beside 16 mma a warp a K-tile.
// Shapes: any token count; C a multiple of 8 up to 1024, 3C a multiple of 8.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdlib>

#include "kernels/cuda_check.h"
#include "kernels/gemm_common.cuh"
#include "kernels/gemm_core/mma_tile.cuh"
#include "kernels/gemm_core/ring.cuh"
#include "kernels/gemm_core/tile_epilogue.cuh"
#include "kernels/gemm_core/weight_slice.cuh"
#include "kernels/layernorm_linear/ln_common.cuh"
#include "kernels/layernorm_linear/ln_fold.h"
#include "kernels/layernorm_linear/ln_tile_parts.cuh"
#include "kernels/layernorm_linear/ln_tiles_forms.cuh"

namespace fl::layernorm_linear {
namespace {

using T = __nv_bfloat16;

// One thread's sums over its chunks of one row: of x - p and (x - p)^2, p the row's first value
// (the same for every thread and every part of K that sums the row, so their sums add).
struct RowSums {
  float pivot = 0.0f, s1 = 0.0f, s2 = 0.0f;
  __device__ __forceinline__ void add(const T* chunk) {
    const uint4 raw = *reinterpret_cast<const uint4*>(chunk);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __bfloat1622float2(h[e]);
      const float d0 = f.x - pivot, d1 = f.y - pivot;
      s1 += d0 + d1;
      s2 = fmaf(d0, d0, fmaf(d1, d1, s2));
    }
  }
  // The row's sums over the kRowChunks threads (consecutive lanes) that copied its chunks.
  template <int kRowChunks>
  __device__ __forceinline__ float2 merged() const {
    float2 v = make_float2(s1, s2);
#pragma unroll
    for (int off = 1; off < kRowChunks; off *= 2) {
      v.x += __shfl_xor_sync(0xffffffffu, v.x, off);
      v.y += __shfl_xor_sync(0xffffffffu, v.y, off);
    }
    return v;
  }
  // (mean, 1/std) of a row of length k whose sums are v.
  __device__ __forceinline__ float2 statistics(float2 v, int k) const {
    const float d = v.x / float(k);  // mean - p: of the order of the row's spread
    const float var = fmaxf(v.y / float(k) - d * d, 0.0f);
    return make_float2(pivot + d, rsqrtf(var + float(gemm::kLayerNormEps)));
  }
};

struct FoldArgs {
  const T *x, *w;
  const float *u, *b;
  T* y;
  int64_t m;
  int k, n, tiles_n, splits;
  LnPartsScratch parts;  // kSplit: where the parts of a tile meet
  bool prefetch;         // u and b' of the tile's columns asked into L2 at the start
};

// Block b: part b % splits of tile b / splits; tile t: row block t / tiles_n, column tile t %
// tiles_n (a row block's tiles side by side, so its rows of x come from HBM once and from L2 for
// the rest). Part q multiplies K-tiles [kts q / splits, kts (q + 1) / splits); kSplit: the
// parts add their sums and their rows' sums in L2 and the last to arrive stores the tile.
template <class Tile, int kMinBlocks, bool kSplit>
__global__ void __launch_bounds__(Tile::kThreads, kMinBlocks) ln_mma_folded_kernel(FoldArgs a) {
  static_assert(Tile::kAChunks == 1 && Tile::kGroups == 1, "one chunk of x a thread a K-tile");
  static_assert(32 % Tile::kRowChunks == 0, "a row's chunks in one warp");
  extern __shared__ __align__(16) unsigned char smem[];
  T* ring = reinterpret_cast<T*>(smem);
  float2* s_stats = reinterpret_cast<float2*>(smem + Tile::kSmemBytes);  // (mean, 1/std) a row
  const int splits = kSplit ? a.splits : 1;
  const int tile = static_cast<int>(blockIdx.x) / splits, q = static_cast<int>(blockIdx.x) % splits;
  const int64_t m0 = int64_t(tile / a.tiles_n) * Tile::kBM,
                n0 = int64_t(tile % a.tiles_n) * Tile::kBN;
  const int kts = (a.k + Tile::kBK - 1) / Tile::kBK;
  const int k0 = kts * q / splits * Tile::kBK, k1 = min(a.k, kts * (q + 1) / splits * Tile::kBK);
  const int row = static_cast<int>(threadIdx.x) / Tile::kRowChunks;  // whose chunks it copies
  // u and b' are read after the main loop: asked into L2 now, their HBM latency is off the tail.
  constexpr int kLines = Tile::kBN / 32;  // 128-byte lines of u (and of b') the tile reads
  if (a.prefetch && threadIdx.x < 2 * kLines) {
    const int64_t c = n0 + threadIdx.x % kLines * 32;
    const float* p = (threadIdx.x < kLines ? a.u : a.b) + c;
    if (c < a.n) asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
  }
  RowSums sums;
  if (m0 + row < a.m) sums.pivot = __bfloat162float(a.x[(m0 + row) * a.k]);
  auto add = [&](T* chunk, int, int64_t kk) {
    if (kk < k1 - k0) sums.add(chunk);  // chunks past C are zeros, not values of the row
  };
  const gemm_core::NoHook none;
  typename Tile::Acc acc;
  Tile::zero(acc);
  gemm_core::ring_mainloop<Tile>(acc, ring, a.x + k0, a.k, a.w + int64_t(k0) * a.n, a.n, a.m, a.n,
                                 k1 - k0, m0, n0, add, none);
  float2 v = sums.merged<Tile::kRowChunks>();
  const bool first = threadIdx.x % Tile::kRowChunks == 0;  // of its row's threads
  if constexpr (kSplit) {
    float* rs = a.parts.rows + (int64_t(tile) * Tile::kBM + row) * 2;
    if (first) atomicAdd(rs, v.x), atomicAdd(rs + 1, v.y);
    if (!add_part<Tile>(acc, a.parts.parts + int64_t(tile) * Tile::kBM * Tile::kBN,
                        a.parts.arrive + tile, splits))
      return;  // not the last part
    if (first) v = make_float2(slice::load_cg(rs), slice::load_cg(rs + 1)), rs[0] = rs[1] = 0.0f;
  }
  if (first) s_stats[row] = sums.statistics(v, a.k);
  // u and b' of this thread's columns (pairs col0 + 8 nt), zero past n.
  float2 u[Tile::kNT], b[Tile::kNT];
  const int64_t c0 = gemm_core::MmaColumnBias<Tile>::col0(n0);
#pragma unroll
  for (int nt = 0; nt < Tile::kNT; ++nt) {
    const int64_t c = c0 + nt * 8;
    const bool in = c < a.n;
    u[nt] = in ? *reinterpret_cast<const float2*>(a.u + c) : make_float2(0.0f, 0.0f);
    b[nt] = in ? *reinterpret_cast<const float2*>(a.b + c) : make_float2(0.0f, 0.0f);
  }
  __syncthreads();  // every row's statistics
  gemm_core::staged_store<Tile>(acc, ring, a.y, a.m, a.n, m0, n0, [&](int r, int nt, float2 v) {
    const float2 s = s_stats[r];
    return make_float2(fmaf(s.y, fmaf(-s.x, u[nt].x, v.x), b[nt].x),
                       fmaf(s.y, fmaf(-s.x, u[nt].y, v.y), b[nt].y));
  });
}

// splits > 1: in parts of K (where `a.parts` has room), two blocks an SM up to 64 x 128.
template <class Tile, int kMinBlocks>
Status launch_folded(const FoldArgs& args, int optin, cudaStream_t stream) {
  if constexpr (Tile::kAChunks != 1 || Tile::kGroups != 1) {
    return Status::Unsupported("its A tile is not one chunk a thread (forms 3, 5, 7, 10)");
  } else {
    const size_t smem = Tile::kSmemBytes + Tile::kBM * sizeof(float2);
    if (smem > size_t(optin))
      return Status::Unsupported("its tile does not fit this GPU's shared memory");
    FoldArgs a = args;
    a.tiles_n = (a.n + Tile::kBN - 1) / Tile::kBN;
    if (a.parts.parts == nullptr || a.splits < 2) a.splits = 1;
    const int64_t blocks = (a.m + Tile::kBM - 1) / Tile::kBM * a.tiles_n * a.splits;
    if (blocks > (int64_t(1) << 31) - 1) return Status::Unsupported("too many tokens");
    constexpr int kSplitMin = Tile::kBM * Tile::kBN <= 64 * 128 ? 2 : kMinBlocks;
    auto kernel = a.splits > 1 ? ln_mma_folded_kernel<Tile, kSplitMin, true>
                               : ln_mma_folded_kernel<Tile, kMinBlocks, false>;
    FL_CUDA_TRY(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    kernel<<<unsigned(blocks), Tile::kThreads, smem, stream>>>(a);
    FL_CUDA_TRY(cudaGetLastError());
    return Status::Ok();
  }
}

// Column j of the folded weights: W'[:, j] = bf16(gamma W[:, j]), u[j] = sum W'[:, j],
// b'[j] = beta . W[:, j] + b[j] (fp64 sums; a thread a column, consecutive columns coalesced).
__global__ void fold_weights_kernel(const T* gamma, const T* beta, const T* w, const T* bias, int k,
                                    int n, T* w_fold, float* u, float* b) {
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= n) return;
  double su = 0.0, sb = 0.0;
  for (int i = 0; i < k; ++i) {
    const float wv = __bfloat162float(w[int64_t(i) * n + j]);
    const T f = __float2bfloat16_rn(__bfloat162float(gamma[i]) * wv);
    w_fold[int64_t(i) * n + j] = f;
    su += double(__bfloat162float(f));
    sb += double(__bfloat162float(beta[i])) * double(wv);
  }
  u[j] = float(su);
  b[j] = float(sb + double(__bfloat162float(bias[j])));
}

}  // namespace

Status fold_ln_weights(const T* gamma, const T* beta, const T* w, const T* bias, int k, int n,
                       LnFold fold, cudaStream_t stream) {
  if (k <= 0 || n <= 0 || fold.w == nullptr || fold.u == nullptr || fold.b == nullptr)
    return Status::Unsupported("no buffers for the folded weights");
  fold_weights_kernel<<<(n + 255) / 256, 256, 0, stream>>>(gamma, beta, w, bias, k, n, fold.w,
                                                           fold.u, fold.b);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

Status ln_mma_folded(const T* x, LnFold fold, T* y, int64_t m, int k, int n, LnFoldForm form,
                     cudaStream_t stream) {
  if (fold.w == nullptr || fold.u == nullptr || fold.b == nullptr)
    return Status::Unsupported("it needs the folded weights (made when the weights are set up)");
  LnTilesGpu gpu;
  FL_TRY(ln_tiles_gpu(k, n, {x, fold.w, y}, &gpu));
  const int64_t tiles = (m + 63) / 64 * ((n + 127) / 128);
  int tile = form.tile, splits = form.splits;
  if (tile == 0) {  // form 7 while its 64 x 128 tiles fit one round of SMs (96 KiB), form 5 up
    // to four rounds of them, form 10 (64 x 256, 80 KiB) from there
    const bool deep = LnDeepTile::kSmemBytes + 64 * sizeof(float2) <= size_t(gpu.optin);
    tile = tiles <= gpu.sms && deep ? 7 : tiles <= 4 * int64_t(gpu.sms) ? 5 : 10;
  }
  if (splits == 0) splits = 1;
  const LnPartsScratch parts = ln_parts_scratch(form.counters, m, n);
  const FoldArgs a{x, fold.w, fold.u, fold.b, y, m, k, n, 0, splits, parts, form.prefetch != 0};
  return with_tiles_form(tile, [&](auto f) {
    using Form = decltype(f);
    return launch_folded<typename Form::Tile, Form::kMinBlocks>(a, gpu.optin, stream);
  });
}

// The level table's launch: the kept rule, or FL_LN_FOLD_TILE's form (3, 5, 7, 10),
// FL_LN_FOLD_SPLITS' parts of K (1-8) and FL_LN_FOLD_PREFETCH=0 (no L2 prefetch; measurements).
Status launch_ln_mma_folded_bf16(const LnArgs<T>& a, cudaStream_t stream) {
  const auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::atoi(v) : 0;
  };
  const LnFold fold{const_cast<T*>(a.w_fold), const_cast<float*>(a.u_fold),
                    const_cast<float*>(a.b_fold)};
  const char* prefetch = std::getenv("FL_LN_FOLD_PREFETCH");
  const LnFoldForm form{env("FL_LN_FOLD_TILE"), std::min(env("FL_LN_FOLD_SPLITS"), 8), a.counters,
                        prefetch != nullptr ? std::atoi(prefetch) : 1};
  return ln_mma_folded(a.x, fold, a.y, a.m, a.k, a.n, form, stream);
}

}  // namespace fl::layernorm_linear
