// Lesson 8's portable small-token rung, split over the hidden units: the whole FFN, y =
// GELU(x W1 + b1) W2 + b2, in one launch for 1 to 64 tokens on any GPU with cp.async (sm_80+;
// fp32 also on sm_70, with plain copies). No clusters, no TMA.
//
// What changes against ffn_stream.cu: there a block's up slice and its down tile are different
// hidden units, so h goes from block to block through L2 behind per-group counters: a chain of
// dependent steps (h out, counter, h in) after the weights land. Here block b owns hidden units
// [U b, U (b + 1)) for BOTH products, W1's U columns and W2's U rows, and asks for the two
// slices at once (W2's rows do not depend on h): every weight byte is in flight from the first
// microsecond, and nothing passes between blocks until each has its share of y:
//   1. h[:, slice] = GELU(x W1[:, slice] + b1), x and W1's columns in shared memory, h kept in
//      shared memory, rounded to the lesson's precision as level 1's h is;
//   2. y_b = h[:, slice] W2[slice, :] on the rows that landed meanwhile: a full m x C share;
//   3. the shares meet in L2: each block stores its share (fp32), a grid barrier (every block is
//      resident: a cooperative launch), and block b adds the shares of y's columns [8 b, 8 b + 8)
//      in block order (the same result every run) and writes them (+ b2). Adding the shares into
//      one sum with red.add instead (128 x m x C atomics, and the last block to arrive writes y)
//      moves fewer bytes but waits longer: docs/PERFORMANCE.md has both measured.
// Tiles: U = 24 at C = 768 on 132 SMs (128 blocks, 256 threads); mma.sync m16n8k16 in bf16,
// CUDA-core fp32 in the same fragments (kernels/gemm_core/weight_slice.cuh).
// Budget at C = 768, bf16: W1 + W2 = 9.4 MB from HBM (3.1 us at 3 TB/s), 72 KB a block, all in
// flight at once; x (m x C) from L2 to every block; the shares 128 x m x C x 4 B written and read
// once (0.4 MB at 1 token, 6.3 MB at 16, 25 MB at 64: the cost that grows with tokens, at L2
// bandwidth 1-5 us beyond 16 tokens). Predicted at 1-16 tokens: the weights' 3.1 us plus a
// launch and two or three L2 round trips after the last slice lands.
#include "kernels/ffn/ffn_hidden_slice.h"

#include <cuda_bf16.h>

#include <string>

#include "kernels/activations.cuh"
#include "kernels/cuda_check.h"
#include "kernels/gemm_core/weight_slice.cuh"
#include "kernels/phases.cuh"

namespace fl {
namespace {

using slice::kThreads;
using slice::kWarps;

enum Phase : unsigned { kIssue, kXW1In, kUp, kW2In, kDown, kHandOver, kSum, kPhaseCount };

template <typename T>
struct SliceArgs {
  FfnSlicePlan p;
  const T *x, *w1, *b1, *w2, *b2;
  T* y;
  float* partial;      // blocks x m x cp: each block's share of y
  unsigned* counters;  // [0] barrier arrivals, [1] barrier generation: zero when allocated
  PhaseSink phases;
  bool x_vec, w1_vec, w2_vec;
};

template <typename T>
__device__ __forceinline__ void stage_w2(const SliceArgs<T>& a, T* w2s, int j0, int valid) {
  const FfnSlicePlan& p = a.p;
  slice::stage(w2s, p.ld_w2, a.w2 + int64_t(j0) * p.c, p.c, p.kp, p.cp, valid, p.c, a.w2_vec);
  tc::async_commit();
}

// y_b = h[:, slice] W2[slice, :]: warp w takes (row tile, 96 columns) jobs w, w + 8, ...; the
// share goes to the block's slot of the partial sums (float2 stores).
template <typename T>
__device__ __forceinline__ void down_product(const SliceArgs<T>& a, const T* hs, const T* w2s) {
  const FfnSlicePlan& p = a.p;
  constexpr int NT = kSliceDownCols / 8;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int chunks = (p.cp + kSliceDownCols - 1) / kSliceDownCols;
  float* out = a.partial + int64_t(blockIdx.x) * p.m * p.cp;
  for (int job = warp; job < p.mtc * chunks; job += kWarps) {
    const int mt = job / chunks, n0 = job % chunks * kSliceDownCols;
    const int nt_count = min(NT, (p.cp - n0) / 8);
    float acc[NT][4];
    slice::zero(acc);
    slice::WarpMma<T, NT>::run(acc, nt_count, hs + mt * 16 * p.ld_h, p.ld_h, w2s + n0, p.ld_w2, 0,
                               p.kp);
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

template <typename T>
__device__ __forceinline__ void store4(const SliceArgs<T>& a, int row, int col, float4 v) {
  const float s[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (col + i < a.p.c) {
      a.y[int64_t(row) * a.p.c + col + i] =
          Elem<T>::from_float(s[i] + Elem<T>::to_float(a.b2[col + i]));
    }
  }
}

// Every block's share written before any block goes on. The generation counter only grows; the
// last to arrive resets the count (for the next launch) and moves the generation.
__device__ __forceinline__ void grid_barrier(unsigned* count, unsigned* generation) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned seen = load_acquire(generation);
    __threadfence();  // the block's shares before its arrival
    if (atomicAdd(count, 1u) == gridDim.x - 1) {
      *count = 0;
      __threadfence();
      atomicAdd(generation, 1u);
    } else {
      // Every block is resident, so this ends; a wrong count would hang the GPU instead: after
      // about a second, trap (the launch fails with an error) rather than hang.
      for (unsigned spins = 0; load_acquire(generation) == seen; ++spins) {
        if (spins == (1u << 24)) __trap();
        __nanosleep(32);
      }
    }
    __threadfence();
  }
  __syncthreads();
}

// After the barrier: block b adds the blocks' shares of y's 8-column tiles b, b + blocks, ...
// Each (row, 4 columns) item's shares are split among `split` threads, 16 loads in flight each,
// then added in block order through shared memory.
template <typename T>
__device__ __forceinline__ void sum_tiles(const SliceArgs<T>& a, float4* red) {
  const FfnSlicePlan& p = a.p;
  const int items = 2 * p.m, shares = gridDim.x;
  int split = 1;
  while (2 * split * items <= kThreads && 2 * split <= shares) split *= 2;
  const int item = threadIdx.x / split, part = threadIdx.x % split;
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
    red[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x < items) {
      float4 sum = red[threadIdx.x * split];
      for (int k = 1; k < split; ++k) {
        const float4 v = red[threadIdx.x * split + k];
        sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
      }
      store4(a, threadIdx.x / 2, tile * kSliceTileCols + 4 * (threadIdx.x % 2), sum);
    }
    __syncthreads();
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) ffn_hidden_slice_kernel(SliceArgs<T> a) {
  extern __shared__ __align__(16) unsigned char smem[];
  PhaseMarks<kPhaseCount> marks(a.phases);
  const FfnSlicePlan& p = a.p;
  T* w2s = reinterpret_cast<T*>(smem + p.off_w2);
  T* xs = reinterpret_cast<T*>(smem + p.off_x);
  T* w1s = reinterpret_cast<T*>(smem + p.off_w1);
  T* hs = reinterpret_cast<T*>(smem + p.off_h);
  float* red = reinterpret_cast<float*>(smem + p.off_x);  // overlays x and W1 once used
  float* b1s = reinterpret_cast<float*>(smem + p.off_bias);
  const int j0 = blockIdx.x * p.units, valid = min(p.units, p.h - j0);
  // Every weight byte of the block is asked for before any arithmetic.
  slice::stage(xs, p.ld_x, a.x, p.c, 16 * p.mtc, p.ck, p.m, p.c, a.x_vec);
  slice::stage(w1s, p.ld_w1, a.w1 + j0, p.h, p.ck, p.units, p.c, valid, a.w1_vec);
  tc::async_commit();
  if (!p.w2_late) stage_w2(a, w2s, j0, valid);
  for (int i = threadIdx.x; i < p.units; i += kThreads) {
    b1s[i] = i < valid ? Elem<T>::to_float(a.b1[j0 + i]) : 0.0f;
  }
  for (int i = threadIdx.x; i < 16 * p.mtc * p.ld_h; i += kThreads) {
    hs[i] = Elem<T>::from_float(0.0f);  // the padding columns of h meet W2's zero rows
  }
  marks.mark(kIssue);
  if (p.w2_late) {
    tc::async_wait<0>();
  } else {
    tc::async_wait<1>();  // x and W1; W2 may still be in flight
  }
  __syncthreads();
  marks.mark(kXW1In);
  slice::block_product<T, kSliceMaxUnits / 8>(
      xs, p.ld_x, w1s, p.ld_w1, p.ck, p.mtc, p.units / 8, red, [&](int row, int col, float s) {
        hs[row * p.ld_h + col] =
            Elem<T>::from_float(col < valid ? gelu_tanh_fast(s + b1s[col]) : 0.0f);
      });
  marks.mark(kUp);
  if (p.w2_late) stage_w2(a, w2s, j0, valid);
  tc::async_wait<0>();
  __syncthreads();
  marks.mark(kW2In);
  down_product(a, hs, w2s);
  marks.mark(kDown);
  grid_barrier(a.counters, a.counters + 1);
  marks.mark(kHandOver);
  sum_tiles(a, reinterpret_cast<float4*>(red));
  marks.mark(kSum);
}

template <typename T>
Status make_plan(int64_t m, int64_t c, FfnSliceTuning tuning, FfnSlicePlan* out) {
  int device = 0, sms = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (ffn_slice_choose_plan(m, c, int(sizeof(T)), sms, optin, out, tuning.units)) {
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
  if (!aligned(b.scratch)) return Status::Error("the FFN's scratch buffer is not 16-byte aligned");
  const auto kernel = ffn_hidden_slice_kernel<T>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(a.p.smem)));
  void* params[] = {&a};
  FL_CUDA_TRY(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), dim3(a.p.blocks),
                                          dim3(kThreads), params, a.p.smem, stream));
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

Status ffn_slice_supported(Precision p, int64_t m, int64_t c) {
  if (m < 1 || m > kSliceMaxTokens) {
    return Status::Unsupported("the hidden-slice FFN takes 1 to " +
                               std::to_string(kSliceMaxTokens) + " tokens, got " +
                               std::to_string(m));
  }
  if (c < 1) return Status::Error("the hidden-slice FFN needs C >= 1");
  int device = 0, major = 0, cooperative = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  if (p == Precision::bf16 && major < 8) {
    return Status::Unsupported(
        "the hidden-slice FFN's bf16 path needs compute capability 8.0 (mma.sync)");
  }
  if (!cooperative) return Status::Unsupported("the hidden-slice FFN needs cooperative launches");
  FfnSlicePlan plan;
  return p == Precision::bf16 ? make_plan<__nv_bfloat16>(m, c, {}, &plan)
                              : make_plan<float>(m, c, {}, &plan);
}

Status ffn_slice_scratch_bytes(Precision p, int64_t m, int64_t c, size_t* bytes) {
  FL_TRY(ffn_slice_supported(p, m, c));
  FfnSlicePlan plan;
  FL_TRY(p == Precision::bf16 ? make_plan<__nv_bfloat16>(m, c, {}, &plan)
                              : make_plan<float>(m, c, {}, &plan));
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
