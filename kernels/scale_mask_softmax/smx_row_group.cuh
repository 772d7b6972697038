// Lesson 5's row machinery (kernels/scale_mask_softmax/): the constants every rung's kernel
// shares, exp2 on the special-function unit, the row group that gives a row to 8 to 512 threads
// with up to 4 16-byte vectors each, and the online-softmax rule that merges (max, sum) summaries.
//
// Not a rung of its own: the row kernels of level 0 (smx_unfused_rows.cuh) reduce with
// RowGroup::reduce, those of levels 1 and 2 (smx_softmax_rows.cuh) with row_merge_online. The
// budget it serves: a row of L keys of b bytes read from DRAM once per kernel, with 64 bytes a
// thread (2 KB a warp) in flight; the reductions add one shuffle tree (and one barrier for
// groups of several warps) a row, no DRAM traffic.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/device_common.cuh"

namespace fl {
// An unnamed namespace, in this header and the lesson's other kernel headers: only
// scale_mask_softmax.cu includes them (one translation unit), and the kernels keep the names
// the recordings carry (CUPTI's, e.g. elementwise_kernel<float, fl::ScaleOp>).
namespace {

constexpr float kScale = 0.125f;  // s = 1/sqrt(64): exact in binary, so s * S rounds nothing
constexpr float kLog2e = 1.4426950408889634f;  // exp(x) = exp2(x * log2(e)): one FFMA + MUFU.EX2
constexpr int kThreads = 256;  // block size of every kernel but the 512-thread row groups

// 16-byte vectors: every kernel here loads with load16_ro and stores with store16_packed
// (device_common.cuh says why).

// load16_ro as a callable for RowSlice::stream_packs.
template <typename T>
struct LoadReadOnly {
  __device__ Vec16<T> operator()(const T* p) const { return load16_ro(p); }
};

// exp2 on the special-function unit: one MUFU.EX2, within a few fp32 ulp (the fp32 check
// measures ~6e-8 relative error end to end); results below 2^-126 flush to 0, which in a softmax is
// a term 2^-126 times smaller than the row's largest and so changes no sum. exp2(-inf) = 0, which
// is how masked keys get probability exactly 0.
__device__ __forceinline__ float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// ---- row groups -----------------------------------------------------------------------------

// Each row kernel gives a row to a group of kRowThreads threads: 8 or 16 lanes of a warp for
// short rows, a warp, or several warps of a block for long ones. Every thread then has up to
// kVecsPerThread = 4 vectors of its row in flight (64 bytes): a warp keeps 2 KB of loads
// outstanding whatever the row length and precision, which is what it takes to cover DRAM
// latency at full bandwidth with the warps an SM can hold. (One warp per 512-key bf16 row would
// have only 1 KB in flight and reach ~85-89% of copy bandwidth on an H100.)
constexpr int kVecsPerThread = 4;
constexpr int kMaxRowThreads = 512;

template <int kRowThreads>
struct RowGroup {
  static_assert(kRowThreads >= 8 && kRowThreads <= kMaxRowThreads &&
                    (kRowThreads & (kRowThreads - 1)) == 0,
                "a power of two from 8 lanes to 512 threads");
  static constexpr int kBlockThreads = kRowThreads < kThreads ? kThreads : kRowThreads;
  static constexpr int kRowsPerBlock = kBlockThreads / kRowThreads;
  static constexpr int kWarpsPerRow = kRowThreads / 32;  // 0 for groups within a warp

  __device__ static int64_t row() {
    return int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kRowThreads;
  }
  __device__ static int thread() { return threadIdx.x % kRowThreads; }

  // Reduces one float per thread over the group with `op`; every thread of the group gets the
  // result. Every thread of the block must call it: groups within a warp shuffle with the full
  // warp mask, and groups of several warps meet at a barrier. Called once per kernel.
  template <typename Op>
  __device__ static float reduce(float v, Op op) {
    constexpr int kWidth = kRowThreads < 32 ? kRowThreads : 32;
    for (int offset = kWidth / 2; offset > 0; offset >>= 1) {
      v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    if constexpr (kWarpsPerRow > 1) {
      __shared__ float s_warp[kBlockThreads / 32];
      if ((threadIdx.x & 31) == 0) s_warp[threadIdx.x >> 5] = v;
      __syncthreads();
      const int first = (threadIdx.x / kRowThreads) * kWarpsPerRow;
      v = s_warp[first];
      for (int w = 1; w < kWarpsPerRow; ++w) v = op(v, s_warp[first + w]);
    }
    return v;
  }
};

// The fewest threads (8 at least) that hold `vecs` vectors with kVecsPerThread each; long rows
// get kMaxRowThreads and, in the streaming kernels, more than one trip.
inline int row_threads_for(int vecs) {
  int threads = 8;
  while (threads < kMaxRowThreads && threads * kVecsPerThread < vecs) threads *= 2;
  return threads;
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// The online-softmax rule. A partial row is summarized by (m, d): its max m and its sum
// d = sum exp2((x - m) * c). Two summaries combine into one by rescaling each sum to the larger
// max, so the max and the sum of a row come out of a single reduction. An empty summary is
// (-inf, 0) and stays harmless (no -inf - -inf = NaN).
__device__ __forceinline__ void merge_online(float& m, float& d, float m2, float d2, float c) {
  const float m_new = fmaxf(m, m2);
  if (m_new == -INFINITY) return;
  d = d * exp2_fast((m - m_new) * c) + d2 * exp2_fast((m2 - m_new) * c);
  m = m_new;
}

// RowGroup::reduce for (m, d) pairs; the same rules (every thread calls it, once per kernel).
template <int kRowThreads>
__device__ __forceinline__ void row_merge_online(float& m, float& d, float c) {
  using Group = RowGroup<kRowThreads>;
  constexpr int kWidth = kRowThreads < 32 ? kRowThreads : 32;
  for (int offset = kWidth / 2; offset > 0; offset >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
    const float d2 = __shfl_xor_sync(0xffffffffu, d, offset);
    merge_online(m, d, m2, d2, c);
  }
  if constexpr (Group::kWarpsPerRow > 1) {
    __shared__ float s_m[Group::kBlockThreads / 32], s_d[Group::kBlockThreads / 32];
    if ((threadIdx.x & 31) == 0) {
      s_m[threadIdx.x >> 5] = m;
      s_d[threadIdx.x >> 5] = d;
    }
    __syncthreads();
    const int first = (threadIdx.x / kRowThreads) * Group::kWarpsPerRow;
    m = s_m[first];
    d = s_d[first];
    for (int w = 1; w < Group::kWarpsPerRow; ++w)
      merge_online(m, d, s_m[first + w], s_d[first + w], c);
  }
}

}  // namespace
}  // namespace fl
