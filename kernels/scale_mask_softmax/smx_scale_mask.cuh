// Lesson 5, levels 0 and 1: the two elementwise kernels that start both chains, S1 = s * S and
// S2 = S1 with the causal mask, and their launchers.
//
// The first rung: each op is its own launch, each itself efficient (16-byte vectors over the flat
// tensor). Budget, n = rows * L scores of b bytes: scale reads n b and writes n b (one multiply a
// score), mask the same (a select): 4 n b of the unfused chain's 9 n b and of level 1's 6 n b.
// The fused kernel (smx_softmax_rows.cuh) does both as the row arrives instead.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/scale_mask_softmax/smx_row_group.cuh"
#include "kernels/status.h"

namespace fl {
namespace {  // unnamed: smx_row_group.cuh says why

// ---- level 0 and 1: the elementwise kernels ------------------------------------------------
// Both walk the flat tensor: one 16-byte vector per thread, the threads past the last full
// vector take one tail element each.

// S1 = s * S: elementwise_kernel (elementwise.cuh) with this op, which moves its vectors as the
// row kernels do (ReadOnlyPackedMoves).
struct ScaleOp : ReadOnlyPackedMoves {
  __device__ float operator()(float x) const { return kScale * x; }
};

// S2 = S1 with -inf where key j > query q. Element i sits at (h, q, j) with i = h L^2 + q L + j
// (h = batch x head): two 32-bit divisions per vector find q and j of its first element
// (n <= 2^28 and L^2 <= 2^26 fit in 32 bits), and the rest follow by counting.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    causal_mask_kernel(const T* __restrict__ in, T* __restrict__ out, uint32_t n, uint32_t length) {
  constexpr int kVec = Vec16<T>::kCount;
  const uint32_t full_vecs = n / kVec;
  const uint32_t i = blockIdx.x * uint32_t(kThreads) + threadIdx.x;
  const T masked = Elem<T>::from_float(-INFINITY);
  if (i < full_vecs) {
    const uint32_t first = i * kVec;
    const uint32_t in_matrix = first % (length * length);  // q L + j
    uint32_t q = in_matrix / length, j = in_matrix - q * length;
    Vec16<T> v = load16_ro(in + first);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      if (j > q) v.v[k] = masked;
      if (++j == length) {  // the vector runs into the next row (odd L)
        j = 0;
        q = q + 1 == length ? 0 : q + 1;
      }
    }
    store16_packed(out + first, v.v);
  } else {
    const uint32_t tail = full_vecs * kVec + (i - full_vecs);
    if (tail < n) {
      const uint32_t in_matrix = tail % (length * length);
      const uint32_t q = in_matrix / length, j = in_matrix - q * length;
      out[tail] = j > q ? masked : in[tail];
    }
  }
}

template <typename T>
Status launch_scale(const T* in, T* out, int64_t n, cudaStream_t stream) {
  static_assert(kThreads == kElementwiseThreads, "the scale kernel has the elementwise block size");
  return launch_elementwise<T>(in, out, n, ScaleOp{}, stream);
}

template <typename T>
Status launch_mask(const T* in, T* out, int64_t n, int length, cudaStream_t stream) {
  constexpr int kVec = Vec16<T>::kCount;
  const unsigned blocks = static_cast<unsigned>((n / kVec + n % kVec + kThreads - 1) / kThreads);
  if (blocks == 0) return Status::Ok();
  causal_mask_kernel<T><<<blocks, kThreads, 0, stream>>>(in, out, static_cast<uint32_t>(n),
                                                         static_cast<uint32_t>(length));
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace
}  // namespace fl
