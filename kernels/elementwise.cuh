// The machinery shared by the elementwise lessons (relu_scale, gelu_scale, bias_gelu; and the
// scale kernel of scale_mask_softmax): one
// kernel template that applies any float -> float op to a tensor with 16-byte vector accesses,
// and its launcher. (The host helpers every workspace needs are in workspace.cuh.)
//
// Why one vector per thread and nothing cleverer: an elementwise kernel is a copy with a little
// arithmetic in the middle, and the project's copy roof (app/measure/live_backend.cu,
// copy16_kernel) is exactly this shape. Each thread issues one 16-byte load and one 16-byte
// store (LDG.E.128 / STG.E.128), a warp touches 512 contiguous bytes per access, and a full GPU
// of resident threads keeps megabytes in flight, which is what HBM needs to reach its bandwidth.
//
// The kernels are `static` templates: every lesson file gets its own instantiations, so two
// lessons that happen to use the same op never share (or clash over) a kernel symbol.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/device_common.cuh"
#include "kernels/workspace.cuh"

namespace fl {

constexpr int kElementwiseThreads = 256;  // threads per block of every elementwise kernel

// Threads an elementwise launch over n elements needs: one per full 16-byte vector, plus one per
// tail element (n not a multiple of the vector width leaves fewer than a vector's width).
template <typename T>
inline int64_t vector_and_tail_threads(int64_t n) {
  constexpr int kVec = Vec16<T>::kCount;
  return n / kVec + n % kVec;
}

template <typename T>
inline unsigned vector_and_tail_blocks(int64_t n) {
  return static_cast<unsigned>((vector_and_tail_threads<T>(n) + kElementwiseThreads - 1) /
                               kElementwiseThreads);
}

// How an elementwise kernel moves its 16-byte vectors: with load16 and store16, unless its op
// derives from ReadOnlyPackedMoves; then with load16_ro and store16_packed (device_common.cuh),
// as all of scale_mask_softmax's kernels do. A tag on the op rather than a template parameter,
// so the kernels' names (the timeline shows CUPTI's) stay elementwise_kernel<T, Op>.
struct ReadOnlyPackedMoves {};

// out[i] = op(in[i]): one 16-byte vector per thread; the threads past the last full vector take
// one tail element each. The op is what differs between the kernels of a fusion ladder.
template <typename T, typename Op>
static __global__ void __launch_bounds__(kElementwiseThreads)
    elementwise_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t n, Op op) {
  constexpr int kVec = Vec16<T>::kCount;
  const int64_t full_vecs = n / kVec;
  const int64_t i = blockIdx.x * int64_t(kElementwiseThreads) + threadIdx.x;
  if (i < full_vecs) {
    constexpr bool kPlain = !std::is_base_of<ReadOnlyPackedMoves, Op>::value;
    Vec16<T> v = kPlain ? load16(in + i * kVec) : load16_ro(in + i * kVec);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v.v[k] = Elem<T>::from_float(op(Elem<T>::to_float(v.v[k])));
    if constexpr (kPlain) {
      store16(out + i * kVec, v);
    } else {
      store16_packed(out + i * kVec, v.v);
    }
  } else {
    const int64_t tail = full_vecs * kVec + (i - full_vecs);
    if (tail < n) out[tail] = Elem<T>::from_float(op(Elem<T>::to_float(in[tail])));
  }
}

template <typename T, typename Op>
static Status launch_elementwise(const T* in, T* out, int64_t n, Op op, cudaStream_t stream) {
  const unsigned blocks = vector_and_tail_blocks<T>(n);
  if (blocks == 0) return Status::Ok();
  elementwise_kernel<T, Op><<<blocks, kElementwiseThreads, 0, stream>>>(in, out, n, op);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// Blocks for a grid-stride fp64 check kernel of kElementwiseThreads threads: enough to fill any
// GPU, few enough that the per-block atomics stay negligible.
inline unsigned check_blocks(int64_t n) {
  const int64_t wanted = (n + kElementwiseThreads - 1) / kElementwiseThreads;
  return static_cast<unsigned>(wanted < 4096 ? (wanted > 0 ? wanted : 1) : 4096);
}

// Workspace::check of an elementwise lesson: runs `kernel`, its fp64 check kernel (a grid-stride
// loop over the n elements), on `args` and the error sums, then turns the sums into the result.
template <typename... Params, typename... Args>
Status check_elementwise(void (*kernel)(Params...), int64_t n, const DeviceBuffer& sums,
                         double tolerance, cudaStream_t stream, CheckResult* result, Args... args) {
  return run_check(
      sums, tolerance, stream,
      [&](ErrorSums* s) {
        kernel<<<check_blocks(n), kElementwiseThreads, 0, stream>>>(args..., s);
      },
      result);
}

}  // namespace fl
