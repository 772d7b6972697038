// The host-side arithmetic of the weight-slice kernels (kernels/gemm_core/weight_slice.cuh),
// in plain C++ so that the plans built on it (kernels/ffn/ffn_stream_plan.h,
// kernels/layernorm_linear/ln_linear_stream_plan.h) are checked by a CPU test
// (tests/unit/stream_plan_test.cpp): block size, padded shared-memory rows, partial-sum area.
#pragma once

#include <cstddef>

#if defined(__CUDACC__)
#define FL_SLICE_HD __host__ __device__
#else
#define FL_SLICE_HD
#endif

namespace fl::slice {

constexpr int kWarps = 8, kThreads = 32 * kWarps;

FL_SLICE_HD constexpr int round_up(int v, int to) {
  return (v + to - 1) / to * to;
}

// K is split among warps and padded in steps of an mma's k16 (bf16) or 4 (fp32, float4 loads).
FL_SLICE_HD constexpr int k_step(int elem_bytes) {
  return elem_bytes == 4 ? 4 : 16;
}

// A shared-memory row of `cols` elements: an odd number of 16-byte chunks, so that 8 rows read
// at the same column fall in 8 different bank groups (ldmatrix, the fp32 float4 loads).
FL_SLICE_HD constexpr int padded_ld(int cols, int elem_bytes) {
  const int e = 16 / elem_bytes;
  const int chunks = (cols + e - 1) / e;
  return (chunks | 1) * e;
}

// Shared memory of block_product's partial sums for a panel of 8 nt columns: `warps` parts x
// 16 rows (per row tile of a warp) x 8 nt floats.
inline size_t red_bytes(int nt, int warps = kWarps) {
  return sizeof(float) * size_t(warps) * 16 * 8 * size_t(nt);
}

}  // namespace fl::slice
