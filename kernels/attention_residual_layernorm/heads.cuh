// The attention sublayer's levels 0 and 1: the two layout copies PyTorch eager makes around its
// batched matmuls. The QKV projection writes qkv as tokens x 3C (q | k | v side by side, head h
// at columns h d .. h d + d - 1 of each); the batched GEMMs of lesson 9's levels 0 and 1 want
// each head as a contiguous T x d matrix. So
//   split_heads: qkv.split(C).view(B, T, H, d).transpose(1, 2), made contiguous: q, k, v of
//                B x H x T x d each (eager's matmul copies each strided operand the same way);
//   merge_heads: O.transpose(1, 2).contiguous().view(B, T, C): the heads back side by side, the
//                output projection's input a (tokens x C).
// The flash level needs neither: its kernel reads q, k, v in place from qkv (a row stride of 3C)
// and writes O straight into a (a row stride of C).
//
// Data path: one 16-byte vector a thread when d is a multiple of the vector (d = 64: 8 bf16 or 4
// fp32 elements, all of one head), else one element a thread; a grid-stride loop over the
// token-major side, so reads (split) or writes (merge) of a warp are one contiguous run and the
// other side is d-element runs. Napkin, M = B T tokens, b bytes: split reads and writes 3 M C b,
// merge M C b each way; no arithmetic.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda_check.h"

namespace fl::sublayer {

// B sequences of T tokens, H heads of d: C = H d.
struct HeadLayout {
  int64_t tokens;  // B T
  int length;      // T
  int heads;       // H
  int dim;         // d

  __host__ __device__ int64_t c() const { return int64_t(heads) * dim; }
  // Where column `col` (0..C-1) of token m lands in a B x H x T x d tensor.
  __device__ int64_t head_major(int64_t m, int64_t col) const {
    const int64_t b = m / length, t = m % length, h = col / dim, j = col % dim;
    return ((b * heads + h) * length + t) * dim + j;
  }
};

constexpr int kHeadThreads = 256;

template <typename T, int kVec>
__device__ __forceinline__ void copy_vector(const T* __restrict__ src, T* __restrict__ dst) {
  if constexpr (kVec * sizeof(T) == 16) {
    *reinterpret_cast<int4*>(dst) = *reinterpret_cast<const int4*>(src);
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) dst[i] = src[i];
  }
}

template <typename T, int kVec>
__global__ void __launch_bounds__(kHeadThreads)
    split_heads_kernel(const T* __restrict__ qkv, T* q, T* k, T* v, HeadLayout l) {
  const int64_t c = l.c(), vectors = l.tokens * 3 * c / kVec;
  for (int64_t e = blockIdx.x * int64_t(kHeadThreads) + threadIdx.x; e < vectors;
       e += int64_t(gridDim.x) * kHeadThreads) {
    const int64_t i = e * kVec, m = i / (3 * c), col = i % (3 * c);
    const int which = static_cast<int>(col / c);
    T* out = which == 0 ? q : which == 1 ? k : v;
    copy_vector<T, kVec>(qkv + i, out + l.head_major(m, col - which * c));
  }
}

template <typename T, int kVec>
__global__ void __launch_bounds__(kHeadThreads)
    merge_heads_kernel(const T* __restrict__ o, T* __restrict__ a, HeadLayout l) {
  const int64_t c = l.c(), vectors = l.tokens * c / kVec;
  for (int64_t e = blockIdx.x * int64_t(kHeadThreads) + threadIdx.x; e < vectors;
       e += int64_t(gridDim.x) * kHeadThreads) {
    const int64_t i = e * kVec;
    copy_vector<T, kVec>(o + l.head_major(i / c, i % c), a + i);
  }
}

inline unsigned head_blocks(int64_t vectors) {
  return static_cast<unsigned>(
      std::clamp<int64_t>((vectors + kHeadThreads - 1) / kHeadThreads, 1, int64_t(1) << 20));
}

template <typename T>
Status launch_split_heads(const T* qkv, T* q, T* k, T* v, const HeadLayout& l,
                          cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  if (l.dim % kVec == 0) {
    split_heads_kernel<T, kVec>
        <<<head_blocks(l.tokens * 3 * l.c() / kVec), kHeadThreads, 0, stream>>>(qkv, q, k, v, l);
  } else {
    split_heads_kernel<T, 1>
        <<<head_blocks(l.tokens * 3 * l.c()), kHeadThreads, 0, stream>>>(qkv, q, k, v, l);
  }
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

template <typename T>
Status launch_merge_heads(const T* o, T* a, const HeadLayout& l, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  if (l.dim % kVec == 0) {
    merge_heads_kernel<T, kVec>
        <<<head_blocks(l.tokens * l.c() / kVec), kHeadThreads, 0, stream>>>(o, a, l);
  } else {
    merge_heads_kernel<T, 1><<<head_blocks(l.tokens * l.c()), kHeadThreads, 0, stream>>>(o, a, l);
  }
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace fl::sublayer
