// The FFN's level 2 at 1-64 tokens on Hopper (sm_90a): hidden-split up-projection, h through L2,
// cluster-reduced down-projection (kernels/ffn/ffn_small.cu explains its data path and budget).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/phases.h"
#include "kernels/status.h"

namespace fl {

// x: m x c, w1: c x hidden, b1: hidden, w2: hidden x c, b2: c, y: m x c (row-major, bf16);
// h: m x hidden bf16 of scratch; arrivals: the grid barrier's count, zero when allocated and
// then used by this kernel only (each run adds its block count, the same for every run of one
// shape).
struct FfnSmallBuffers {
  const __nv_bfloat16 *x, *w1, *b1, *w2, *b2;
  __nv_bfloat16 *y, *h;
  unsigned long long* arrivals;
  PhaseSink phases;  // stamps on when phases.records is set (kernels/phases.h)
};

// The phases the kernel declares, in the order of its records' `phase` (one record of each per
// block, from thread 0's view).
inline const std::vector<std::string>& ffn_small_phases() {
  static const std::vector<std::string> names = {
      "setup",        "x and W1 in", "up-projection",
      "grid barrier", "h and W2 in", "down-projection and cluster exchange"};
  return names;
}

// Launches the kernel on `stream` when it can run here (a build with sm_90a, a compute
// capability 9.0 GPU, m <= 64, c a multiple of 32, 16-byte aligned operands, all its clusters
// resident at once) and sets *launched; otherwise leaves *launched false (the caller picks
// another kernel).
Status try_ffn_small(const FfnSmallBuffers& buffers, int64_t m, int c, int hidden,
                     cudaStream_t stream, bool* launched);

}  // namespace fl
