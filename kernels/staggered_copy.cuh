// Copies into shared memory that many blocks make of the same rows at the same moment, each block
// starting at its own place in the rows (the portable small-token rungs: kernels/ffn/
// ffn_hidden_slice.cu, kernels/layernorm_linear/ln_linear_stream.cu).
//
// Why: in a weight-streaming launch every block asks for its copies in the first microsecond.
// Where all of them walk the same rows in the same order (x, which every block reads; W1's rows,
// of which every block takes a few columns), every SM asks for the same few lines at once: one
// L2 slice, one DRAM channel busy while the others wait, and a queue of misses on the same line.
// Starting block b at chunk b x total / blocks of the copy (and wrapping round) spreads the same
// requests over the whole range: the bytes are the same, the traffic is even.
#pragma once

#include <cstdint>

#include "kernels/device_common.cuh"
#include "kernels/gemm_core/slice_plan.h"
#include "kernels/tensor_gemm.cuh"

namespace fl::stagger {

// As slice::stage (rows x cols elements of g, row stride ldg, into s, row stride lds; zero outside
// rows_valid x cols_valid; vec: 16-byte cp.async chunks), but the copies of block `index` of
// `count` that copy the same rows begin at chunk index x total / count (row-major order over the
// rows x ceil(cols / E) chunks) and wrap round; count 0: at chunk 0.
template <typename T>
__device__ __forceinline__ void stage(T* s, int lds, const T* g, int64_t ldg, int rows, int cols,
                                      int rows_valid, int cols_valid, bool vec, int index,
                                      int count) {
  constexpr int E = 16 / sizeof(T);
  const int chunks = (cols + E - 1) / E, total = rows * chunks;
  if (total == 0) return;
  const int start = count > 0 ? int(int64_t(index % count) * total / count) : 0;
  for (int i = threadIdx.x; i < total; i += slice::kThreads) {
    int j = i + start;
    if (j >= total) j -= total;
    const int r = j / chunks, c = j - r * chunks;
    T* dst = s + r * lds + c * E;
    const T* src = g + r * ldg + c * E;
    if (vec) {
      const bool valid = r < rows_valid && c * E < cols_valid;
      tc::copy16_async(dst, valid ? src : g, valid);
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        dst[e] = r < rows_valid && c * E + e < cols_valid ? src[e] : Elem<T>::from_float(0.0f);
      }
    }
  }
}

}  // namespace fl::stagger
