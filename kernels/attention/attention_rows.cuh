// Attention levels 0 and 1: the kernels between the two batched GEMMs, which read and write the
// T x T score tensors in HBM.
//
// The scores S of one head are T x T (query q, key j), and the B*H heads are stacked, so S is a
// tensor of B*H*T rows of T keys and the query of row r is q = r % T.
//
//   level 0 (what PyTorch eager runs): S1 = s S (the lessons' elementwise kernel);
//     causal_mask_kernel S2 = S1 with -inf where j > q; softmax_rows_kernel<false>
//     P = softmax(S2). Three passes over T^2.
//   level 1 (lesson 5's fusion): softmax_rows_kernel<true> reads S once, scales and masks it as
//     it arrives and writes P once: the online-softmax rule of lesson 5 (a row summarized as
//     (max, sum), summaries merged by rescaling to the larger max).
//
// Data path. One warp per row (the scale is elementwise). The softmax makes two sweeps over its
// row: the first finds each lane's (max, sum) with the online rule, the warp merges them with
// shuffles, the second reads the row again (from L2: a warp's row is at most 64 KiB and was just
// read) and writes P = exp(s x - s m) / sum. Lesson 5's kernel holds a row in registers instead,
// with the scale fixed at compile time and rows up to 8192 keys; attention has both head sizes (s =
// 1/8 and 1/sqrt(128)) and rows up to 16384 keys, so its rows take this simpler two-sweep form.
// Loads and stores are one element a lane (coalesced, 64 or 128 bytes a warp access): T need not be
// a multiple of a vector, T = 1 included.
//
// Napkin, n = B H T^2 elements of b bytes: scale and mask each read n b and write n b, the
// softmax reads n b (the second sweep hits L2) and writes n b; the fused softmax the same.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/elementwise.cuh"

namespace fl::attention {

constexpr int kRowThreads = 256;  // 8 warps a block, a row a warp
constexpr float kLog2e = 1.4426950408889634f;

// exp2 on the special-function unit; exp2(-inf) = 0, which is how masked keys get exactly 0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Merges the summary (m2, d2) into (m, d): sums are of exp2((x - m) c), rescaled to the larger
// max. An empty summary (-inf, 0) changes nothing.
__device__ __forceinline__ void merge_online(float& m, float& d, float m2, float d2, float c) {
  const float m_new = fmaxf(m, m2);
  if (m_new == -INFINITY) return;
  d = d * exp2_approx((m - m_new) * c) + d2 * exp2_approx((m2 - m_new) * c);
  m = m_new;
}

// S1 = scale * S: the lessons' elementwise kernel (16-byte vectors) with this op.
struct ScaleBy {
  float scale;
  __device__ float operator()(float x) const { return scale * x; }
};

// S2 = S1 with -inf where key j > query q. One warp a row, as the softmax: the row's query is
// row % T, and no element needs a division to find its (q, j).
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    causal_mask_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t rows, int length) {
  const int64_t row = blockIdx.x * int64_t(kRowThreads / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int q = static_cast<int>(row % length);
  const T masked = Elem<T>::from_float(-INFINITY);
  const T* src = in + row * length;
  T* dst = out + row * length;
#pragma unroll 4
  for (int j = (threadIdx.x & 31); j < length; j += 32) dst[j] = j > q ? masked : src[j];
}

// P = softmax over each row. kScaleAndMask = false: level 0's softmax of S2 (already scaled and
// masked). true: level 1's fused kernel, reading raw S: keys after the query are skipped (their
// P is written as 0 without reading S), and since s > 0 the max of s S is s times the max of S,
// so s folds into the exponent's factor c = s log2(e).
template <typename T, bool kScaleAndMask>
__global__ void __launch_bounds__(kRowThreads)
    softmax_rows_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t rows, int length,
                        float scale) {
  const int64_t row = blockIdx.x * int64_t(kRowThreads / 32) + threadIdx.x / 32;
  if (row >= rows) return;  // only warp shuffles below: a spare warp may simply leave
  const int lane = threadIdx.x & 31;
  const T* src = in + row * length;
  T* dst = out + row * length;
  const float c = kScaleAndMask ? scale * kLog2e : kLog2e;
  const int visible = kScaleAndMask ? static_cast<int>(row % length) + 1 : length;

  float m = -INFINITY, d = 0.0f;  // this lane's summary
#pragma unroll 4
  for (int j = lane; j < visible; j += 32) merge_online(m, d, Elem<T>::to_float(src[j]), 1.0f, c);
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
    const float d2 = __shfl_xor_sync(0xffffffffu, d, offset);
    merge_online(m, d, m2, d2, c);
  }
  const float mc = m * c, inv = 1.0f / d;  // key 0 is never masked: d >= 1
#pragma unroll 4
  for (int j = lane; j < length; j += 32) {
    const float p = j < visible ? exp2_approx(fmaf(Elem<T>::to_float(src[j]), c, -mc)) * inv : 0.0f;
    dst[j] = Elem<T>::from_float(p);
  }
}

// ---- launchers ---------------------------------------------------------------------------------

inline unsigned row_blocks(int64_t rows) {
  constexpr int kRowsPerBlock = kRowThreads / 32;
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

template <typename T>
Status launch_scale(const T* in, T* out, int64_t n, float scale, cudaStream_t stream) {
  return launch_elementwise<T>(in, out, n, ScaleBy{scale}, stream);
}

template <typename T>
Status launch_causal_mask(const T* in, T* out, int64_t rows, int length, cudaStream_t stream) {
  causal_mask_kernel<T><<<row_blocks(rows), kRowThreads, 0, stream>>>(in, out, rows, length);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

template <typename T, bool kScaleAndMask>
Status launch_softmax_rows(const T* in, T* out, int64_t rows, int length, float scale,
                           cudaStream_t stream) {
  softmax_rows_kernel<T, kScaleAndMask>
      <<<row_blocks(rows), kRowThreads, 0, stream>>>(in, out, rows, length, scale);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace fl::attention
