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
// Precision: x W' and mu u nearly cancel where |mu| >> sigma (each ~|mu| / sigma times the
// result); both are fp32 (the mma's accumulators; u summed in fp64 from the rounded W'), so the
// cancellation costs ~1e-7 |mu| / sigma relative, far under bf16's 4e-3. The moments are fp32
// sums of x - p and (x - p)^2 with p the first value a thread sees of its row (so s2 - s1^2 / n
// does not cancel even where |mu| >> sigma), merged by Chan's pairwise rule; W' rounds
// gamma W to bf16 where level 0 rounds xn: the same 2^-9 once per product term.
// Tiles (ln_tiles_forms.cuh): form 7 (64 x 128, 8 warps of 32 x 32, K-tiles of 32 in 8 stages,
// 96 KiB: fits sm_86's 99 KiB) while the 64-row tiles fit one round of SMs, else form 5 (32 x
// 128, 4 warps, 4 stages of 10 KiB, 2 blocks an SM); both have one chunk of x a thread a K-tile.
// Budget at 256 tokens, C = 768: 0.9 GFLOP, 1.5 us at mma.sync's ~600 TFLOP/s; HBM: x, W', y
// (0.4 + 3.5 + 1.2 MB) once, ~1.7 us at 3 TB/s; through L2 each 64 x 128 tile reads 96 KiB of x
// and 192 KiB of W' (72 tiles: 21 MB), ~7 us for one SM's 288 KiB at the ~40 KiB/us an SM gets
// when all pull at once: the tile's ring from the launch on, with no normalization before it.
// The moments: ~3 instructions an element of x a tile on the ALU beside 16 mma a warp a K-tile.
// Shapes: any token count; C a multiple of 8 up to 1024, 3C a multiple of 8.
#include <cuda_bf16.h>

#include <cstdlib>

#include "kernels/cuda_check.h"
#include "kernels/gemm_common.cuh"
#include "kernels/gemm_core/mma_tile.cuh"
#include "kernels/gemm_core/ring.cuh"
#include "kernels/gemm_core/tile_epilogue.cuh"
#include "kernels/layernorm_linear/ln_common.cuh"
#include "kernels/layernorm_linear/ln_fold.h"
#include "kernels/layernorm_linear/ln_tiles_forms.cuh"
#include "kernels/lesson.h"

namespace fl::layernorm_linear {
namespace {

using T = __nv_bfloat16;

// One thread's moments of its chunks of one row: count values, their sums of x - p and
// (x - p)^2, p the first value it saw.
struct RowMoments {
  float pivot = 0.0f, s1 = 0.0f, s2 = 0.0f;
  int count = 0;
  __device__ __forceinline__ void add(const T* chunk) {
    const uint4 raw = *reinterpret_cast<const uint4*>(chunk);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
    if (count == 0) pivot = __low2float(h[0]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __bfloat1622float2(h[e]);
      const float d0 = f.x - pivot, d1 = f.y - pivot;
      s1 += d0 + d1;
      s2 = fmaf(d0, d0, fmaf(d1, d1, s2));
    }
    count += 8;
  }
  // (mean, M2) of these values; (0, 0) for none.
  __device__ __forceinline__ float2 mean_m2() const {
    if (count == 0) return make_float2(0.0f, 0.0f);
    const float n = float(count);
    return make_float2(pivot + s1 / n, fmaxf(s2 - s1 * s1 / n, 0.0f));
  }
};

// Merges the moments of the kRowChunks threads (consecutive lanes) that copied a row's chunks
// (Chan's pairwise rule) into (mean, 1/std) of the row, whose length is k.
template <int kRowChunks>
__device__ __forceinline__ float2 row_statistics(const RowMoments& mom, int k) {
  float2 mm = mom.mean_m2();
  float n = float(mom.count);
#pragma unroll
  for (int off = 1; off < kRowChunks; off *= 2) {
    const float mean_b = __shfl_xor_sync(0xffffffffu, mm.x, off);
    const float m2_b = __shfl_xor_sync(0xffffffffu, mm.y, off);
    const float n_b = __shfl_xor_sync(0xffffffffu, n, off);
    const float total = n + n_b;
    if (total > 0.0f) {
      const float d = mean_b - mm.x;
      mm = make_float2(mm.x + d * (n_b / total), mm.y + m2_b + d * d * (n * n_b / total));
    }
    n = total;
  }
  return make_float2(mm.x, rsqrtf(mm.y / float(k) + float(gemm::kLayerNormEps)));
}

struct FoldArgs {
  const T *x, *w;
  const float *u, *b;
  T* y;
  int64_t m;
  int k, n, tiles_n;
};

// Block b: row block b / tiles_n, column tile b % tiles_n (a row block's tiles side by side, so
// its rows of x come from HBM once and from L2 for the rest).
template <class Tile, int kMinBlocks>
__global__ void __launch_bounds__(Tile::kThreads, kMinBlocks) ln_mma_folded_kernel(FoldArgs a) {
  static_assert(Tile::kAChunks == 1 && Tile::kGroups == 1, "one chunk of x a thread a K-tile");
  static_assert(32 % Tile::kRowChunks == 0, "a row's chunks in one warp");
  extern __shared__ __align__(16) unsigned char smem[];
  T* ring = reinterpret_cast<T*>(smem);
  float2* s_stats = reinterpret_cast<float2*>(smem + Tile::kSmemBytes);  // (mean, 1/std) a row
  const int rb = static_cast<int>(blockIdx.x) / a.tiles_n,
            cb = static_cast<int>(blockIdx.x) % a.tiles_n;
  const int64_t m0 = int64_t(rb) * Tile::kBM, n0 = int64_t(cb) * Tile::kBN;
  RowMoments mom;
  const int k = a.k;
  auto moments = [&](T* chunk, int, int64_t kk) {
    if (kk < k) mom.add(chunk);  // chunks past C are zeros, not values of the row
  };
  const gemm_core::NoHook none;
  typename Tile::Acc acc;
  Tile::zero(acc);
  gemm_core::ring_mainloop<Tile>(acc, ring, a.x, a.k, a.w, a.n, a.m, a.n, a.k, m0, n0, moments,
                                 none);
  const float2 stats = row_statistics<Tile::kRowChunks>(mom, a.k);
  if (threadIdx.x % Tile::kRowChunks == 0) s_stats[threadIdx.x / Tile::kRowChunks] = stats;
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

template <class Tile, int kMinBlocks>
Status launch_folded(const FoldArgs& args, cudaStream_t stream) {
  if constexpr (Tile::kAChunks != 1 || Tile::kGroups != 1) {
    return Status::Unsupported("its A tile is not one chunk a thread (forms 3, 5, 7)");
  } else {
    const size_t smem = Tile::kSmemBytes + Tile::kBM * sizeof(float2);
    int device = 0, optin = 0;
    FL_CUDA_TRY(cudaGetDevice(&device));
    FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (smem > size_t(optin))
      return Status::Unsupported("its tile does not fit this GPU's shared memory");
    auto kernel = ln_mma_folded_kernel<Tile, kMinBlocks>;
    FL_CUDA_TRY(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    FoldArgs a = args;
    a.tiles_n = (a.n + Tile::kBN - 1) / Tile::kBN;
    const int64_t tiles = (a.m + Tile::kBM - 1) / Tile::kBM * a.tiles_n;
    if (tiles > (int64_t(1) << 31) - 1) return Status::Unsupported("too many tokens");
    kernel<<<unsigned(tiles), Tile::kThreads, smem, stream>>>(a);
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

Status ln_mma_folded(const T* x, LnFold fold, T* y, int64_t m, int k, int n, int tile,
                     cudaStream_t stream) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (fold.w == nullptr || fold.u == nullptr || fold.b == nullptr)
    return Status::Unsupported("it needs the folded weights (made when the weights are set up)");
  if (k % 8 != 0 || k > 1024 || n % 8 != 0 || !aligned(x) || !aligned(fold.w) || !aligned(y))
    return Status::Unsupported("C is not a multiple of 8 up to 1024");
  int device = 0, major = 0, sms = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (major < 8) return Status::Unsupported("bf16 mma.sync needs compute capability 8.0");
  if (tile == 0) {  // form 7 while its 64-row tiles fit one round of SMs (96 KiB), else form 5
    int optin = 0;
    FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    const int chosen = chosen_gpu_shared_optin();
    if (chosen > 0 && chosen < optin) optin = chosen;
    const int64_t tiles = (m + 63) / 64 * ((n + 127) / 128);
    const bool deep = LnDeepTile::kSmemBytes + 64 * sizeof(float2) <= size_t(optin);
    tile = tiles <= sms && deep ? 7 : 5;
  }
  const FoldArgs a{x, fold.w, fold.u, fold.b, y, m, k, n, 0};
  return with_tiles_form(tile, [&](auto form) {
    using Form = decltype(form);
    return launch_folded<typename Form::Tile, Form::kMinBlocks>(a, stream);
  });
}

// The level table's launch: the kept rule, or FL_LN_FOLD_TILE's form (3, 5, 7; measurements).
Status launch_ln_mma_folded_bf16(const LnArgs<T>& a, cudaStream_t stream) {
  const char* env = std::getenv("FL_LN_FOLD_TILE");
  const LnFold fold{const_cast<T*>(a.w_fold), const_cast<float*>(a.u_fold),
                    const_cast<float*>(a.b_fold)};
  return ln_mma_folded(a.x, fold, a.y, a.m, a.k, a.n, env != nullptr ? std::atoi(env) : 0, stream);
}

}  // namespace fl::layernorm_linear
