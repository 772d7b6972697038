// Lesson 8's portable small-token rung: the whole FFN, y = GELU(x W1 + b1) W2 + b2, in one
// launch for 1 to 64 tokens on any GPU with cp.async (sm_80+; fp32 also on sm_70, with plain
// copies). No clusters, no TMA, no grid barrier.
//
// What changes against the split-hidden kernel (ffn.cu, level 2 where Hopper's kernels do not
// run): that one also gives each block a slice of the hidden units, but its slices leave SMs
// idle and it streams W2 only once its h is done. Here the slice is sized so that every SM has
// one (at C = 768: 24 hidden units on 128 blocks), and the block asks for all of its weights at
// once (kernels/gemm_core/weight_slice.cuh): W1's 24 columns and W2's 24 rows, 72 KB in bf16,
// are all in flight before the first multiply. Then, in the block:
//   1. h[:, slice] = GELU(x W1[:, slice] + b1), x staged in shared memory beside W1; h stays
//      in shared memory, rounded to the lesson's precision as level 1's h is;
//   2. y_part = h[:, slice] W2[slice, :] on the W2 rows that landed meanwhile, added into an
//      fp32 accumulator in L2 (red.add: every block adds its share of every y element);
//   3. y is cut into 32-column tiles with a counter each: the warp whose increment comes last
//      for a tile turns it into y (+ b2) and sets the accumulator back to zero for the next
//      launch. The tiles are visited in an order rotated per block, so they finish spread out.
//
// Budget at C = 768, bf16: W1 + W2 = 9.4 MB from HBM (3.1 us at 3 TB/s), 72 KB per SM, every
// byte in flight at once; x (m x C) read by every block from L2 (at 16 tokens 3.2 MB in all);
// the reduction adds 128 blocks x m x C floats into L2 (0.4 MB at 1 token, 25 MB at 64: the
// cost that grows with tokens). Predicted: near 3.1 us plus the launch at 1 and 16 tokens.
#include "kernels/ffn/ffn_stream.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "kernels/activations.cuh"
#include "kernels/cuda_check.h"
#include "kernels/gemm_core/weight_slice.cuh"

namespace fl {
namespace {

using slice::kThreads;
using slice::kWarps;
using slice::padded_ld;
using slice::round_up;

constexpr int kUpMaxNT = 8;   // up to 64 hidden units a block
constexpr int kTileCols = 32;  // y's reduction tiles (4 mma column tiles)

// The shapes of one launch: the slice width, the shared-memory regions (offsets in bytes).
struct FfnPlan {
  int m = 0, c = 0, h = 0, mtc = 1, nt = 1, blocks = 0, tiles = 0;
  int ck = 0, rk = 0, ld_x = 0, ld_w1 = 0, ld_w2 = 0, ld_h = 0;
  size_t off_x = 0, off_w1 = 0, off_h = 0, smem = 0;
};

template <typename T>
FfnPlan plan_for(int64_t m, int64_t c, int nt, int sms) {
  FfnPlan p;
  constexpr int S = slice::kKStep<T>;
  p.m = int(m), p.c = int(c), p.h = int(4 * c);
  p.mtc = m <= 16 ? 1 : m <= 32 ? 2 : 4;
  p.nt = nt;
  p.blocks = (p.h + 8 * nt - 1) / (8 * nt);
  p.tiles = (p.c + kTileCols - 1) / kTileCols;
  p.ck = round_up(p.c, S);
  p.rk = round_up(8 * nt, S);
  p.ld_x = padded_ld<T>(p.ck);
  p.ld_w1 = padded_ld<T>(8 * nt);
  p.ld_w2 = padded_ld<T>(round_up(p.c, 8));
  p.ld_h = padded_ld<T>(p.rk);
  const size_t w2 = sizeof(T) * p.rk * p.ld_w2, x = sizeof(T) * 16 * p.mtc * p.ld_x;
  const size_t w1 = sizeof(T) * p.ck * p.ld_w1;
  p.off_x = w2;
  p.off_w1 = w2 + x;
  p.off_h = w2 + std::max(x + w1, slice::red_bytes(nt));
  p.smem = p.off_h + sizeof(T) * 16 * p.mtc * p.ld_h;
  (void)sms;
  return p;
}

template <typename T>
struct FfnStreamArgs {
  FfnPlan p;
  const T *x, *w1, *b1, *w2, *b2;
  T* y;
  float* acc;          // m x C, zero between launches
  unsigned* counters;  // one per tile of y, zero between launches
  bool x_vec, w1_vec, w2_vec;
};

// Step 3: this warp's share of the block's y_part (tiles of 32 columns, all rows), added into
// the accumulator; then one counter increment per tile, and the warp that comes last for a tile
// writes it out. One fence per warp, after all its additions.
template <typename T>
__device__ __forceinline__ void down_and_reduce(const FfnStreamArgs<T>& a, const T* hs,
                                                const T* w2s) {
  const FfnPlan& p = a.p;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  for (int i = warp; i < p.tiles; i += kWarps) {
    const int n0 = (i + blockIdx.x) % p.tiles * kTileCols;
    const int nt = min(kTileCols / 8, (p.c - n0 + 7) / 8);
    for (int mt = 0; mt < p.mtc; ++mt) {
      float acc[4][4];
      slice::zero(acc);
      slice::WarpMma<T, 4>::run(acc, nt, hs + mt * 16 * p.ld_h, p.ld_h, w2s + n0, p.ld_w2, 0,
                                p.rk);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int col = n0 + 8 * j + 2 * t;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int row = mt * 16 + g + 8 * half;
          if (j >= nt || row >= p.m) continue;
          float* dst = a.acc + int64_t(row) * p.c + col;
          if (col < p.c) atomicAdd(dst, acc[j][2 * half]);
          if (col + 1 < p.c) atomicAdd(dst + 1, acc[j][2 * half + 1]);
        }
      }
    }
  }
  __threadfence();  // this lane's additions before any of the warp's counters move
  __syncwarp();
  for (int i = warp; i < p.tiles; i += kWarps) {
    const int tile = (i + blockIdx.x) % p.tiles, n0 = tile * kTileCols;
    unsigned last = 0;
    if (lane == 0) last = atomicAdd(a.counters + tile, 1u) == gridDim.x - 1;
    if (!__shfl_sync(0xffffffffu, last, 0)) continue;
    __threadfence();  // every block's additions to the tile are visible
    const int cols = min(kTileCols, p.c - n0), total = p.m * kTileCols;
    constexpr int kBatch = 8;  // loads in flight per lane
    for (int base = lane; base < total; base += 32 * kBatch) {
      float v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int e = base + 32 * u, col = e % kTileCols;
        v[u] = e < total && col < cols ? slice::load_cg(a.acc + int64_t(e / kTileCols) * p.c + n0 + col)
                                       : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int e = base + 32 * u, col = e % kTileCols;
        if (e >= total || col >= cols) continue;
        const int64_t at = int64_t(e / kTileCols) * p.c + n0 + col;
        a.acc[at] = 0.0f;  // for the next launch
        a.y[at] = Elem<T>::from_float(v[u] + Elem<T>::to_float(a.b2[n0 + col]));
      }
    }
    if (lane == 0) a.counters[tile] = 0;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) ffn_stream_kernel(FfnStreamArgs<T> a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const FfnPlan& p = a.p;
  T* w2s = reinterpret_cast<T*>(smem);
  T* xs = reinterpret_cast<T*>(smem + p.off_x);
  T* w1s = reinterpret_cast<T*>(smem + p.off_w1);
  T* hs = reinterpret_cast<T*>(smem + p.off_h);
  float* red = reinterpret_cast<float*>(smem + p.off_x);  // overlays x and W1 after step 1
  const int r = 8 * p.nt, j0 = blockIdx.x * r, r_valid = min(r, p.h - j0);
  // Every weight byte of the block is asked for before any arithmetic.
  slice::stage(xs, p.ld_x, a.x, p.c, 16 * p.mtc, p.ck, p.m, p.c, a.x_vec);
  slice::stage(w1s, p.ld_w1, a.w1 + j0, p.h, p.ck, r, p.c, r_valid, a.w1_vec);
  tc::async_commit();
  slice::stage(w2s, p.ld_w2, a.w2 + int64_t(j0) * p.c, p.c, p.rk, round_up(p.c, 8), r_valid, p.c,
               a.w2_vec);
  tc::async_commit();
  for (int e = threadIdx.x; e < 16 * p.mtc * p.ld_h; e += kThreads) {
    hs[e] = Elem<T>::from_float(0.0f);  // h's columns past the slice stay zero
  }
  tc::async_wait<1>();  // x and W1
  __syncthreads();
  slice::block_product<T, kUpMaxNT>(
      xs, p.ld_x, w1s, p.ld_w1, p.ck, p.mtc, p.nt, red, [&](int row, int col, float s) {
        if (col < r_valid) {
          hs[row * p.ld_h + col] =
              Elem<T>::from_float(gelu_tanh_fast(s + Elem<T>::to_float(a.b1[j0 + col])));
        }
      });
  tc::async_wait<0>();  // W2
  __syncthreads();
  down_and_reduce(a, hs, w2s);
}

template <typename T>
Status make_plan(int64_t m, int64_t c, FfnPlan* out) {
  int device = 0, sms = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const int64_t groups = (4 * c + 7) / 8;  // hidden units in 8s
  const int want = int(std::min<int64_t>(kUpMaxNT, (groups + sms - 1) / sms));
  for (int nt = want; nt >= 1; --nt) {
    const FfnPlan p = plan_for<T>(m, c, nt, sms);
    if (p.smem <= size_t(optin)) {
      *out = p;
      return Status::Ok();
    }
  }
  return Status::Error("the portable FFN at " + std::to_string(m) + " tokens and C = " +
                       std::to_string(c) + " needs " +
                       std::to_string(plan_for<T>(m, c, 1, sms).smem) +
                       " bytes of shared memory per block; this GPU offers " +
                       std::to_string(optin));
}

template <typename T>
Status launch_typed(const FfnStreamBuffers& b, int64_t m, int64_t c, cudaStream_t stream) {
  FfnStreamArgs<T> a{};
  FL_TRY(make_plan<T>(m, c, &a.p));
  constexpr int E = slice::kChunk<T>;
  auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  a.x = static_cast<const T*>(b.x);
  a.w1 = static_cast<const T*>(b.w1);
  a.b1 = static_cast<const T*>(b.b1);
  a.w2 = static_cast<const T*>(b.w2);
  a.b2 = static_cast<const T*>(b.b2);
  a.y = static_cast<T*>(b.y);
  a.counters = static_cast<unsigned*>(b.scratch);
  a.acc = reinterpret_cast<float*>(static_cast<char*>(b.scratch) + 256 * sizeof(unsigned));
  a.x_vec = c % E == 0 && aligned(b.x);
  a.w1_vec = (4 * c) % E == 0 && aligned(b.w1);
  a.w2_vec = c % E == 0 && aligned(b.w2);
  const auto kernel = ffn_stream_kernel<T>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(a.p.smem)));
  kernel<<<a.p.blocks, kThreads, a.p.smem, stream>>>(a);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

Status ffn_stream_supported(Precision p, int64_t m, int64_t c) {
  if (m < 1 || m > kFfnStreamMaxTokens) {
    return Status::Error("the portable small-token FFN takes 1 to " +
                         std::to_string(kFfnStreamMaxTokens) + " tokens, got " + std::to_string(m));
  }
  if (c < 1 || c > 2048) return Status::Error("the portable small-token FFN takes C of 1 to 2048");
  int device = 0, major = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (p == Precision::bf16 && major < 8) {
    return Status::Error("the portable FFN's bf16 path needs compute capability 8.0 (mma.sync)");
  }
  FfnPlan plan;
  return p == Precision::bf16 ? make_plan<__nv_bfloat16>(m, c, &plan) : make_plan<float>(m, c, &plan);
}

Status ffn_stream_scratch_bytes(Precision, int64_t m, int64_t c, size_t* bytes) {
  // 256 tile counters (C <= 2048: 64 tiles), then the m x C fp32 accumulator.
  *bytes = 256 * sizeof(unsigned) + sizeof(float) * size_t(m) * size_t(c);
  return Status::Ok();
}

Status launch_ffn_stream(Precision p, const FfnStreamBuffers& b, int64_t m, int64_t c,
                         cudaStream_t stream) {
  FL_TRY(ffn_stream_supported(p, m, c));
  return p == Precision::bf16 ? launch_typed<__nv_bfloat16>(b, m, c, stream)
                              : launch_typed<float>(b, m, c, stream);
}

}  // namespace fl
