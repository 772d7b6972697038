// The FFN's level 2 at many tokens on Hopper: one persistent kernel of wgmma tiles with h in an
// L2-resident ring (kernels/ffn/ffn_wgmma.cu explains its tiles, data path and ordering).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/hopper.cuh"  // kWgmmaBuild
#include "kernels/phases.h"
#include "kernels/status.h"

namespace fl {

// x: m x c, w1: c x hidden, b1: hidden, w2: hidden x c, b2: c, y: m x c (row-major, bf16);
// h_ring: ffn_wgmma_ring_rows(m) x hidden bf16 of scratch; counters: ffn_wgmma_counters(m)
// unsigned, all zero before the first run (every run leaves them zero).
struct FfnWgmmaBuffers {
  const __nv_bfloat16 *x, *w1, *b1, *w2, *b2;
  __nv_bfloat16 *y, *h_ring;
  unsigned* counters;
  PhaseSink phases;  // stamps on when phases.records is set (kernels/phases.h)
};

// The phases the kernel declares: one record per tile, from a consumer's view (phase: the tile's
// kind; arg: its place in the tile list). A tile's time includes its wait for operands (for a
// down tile, for its row block's h).
inline const std::vector<std::string>& ffn_wgmma_phases() {
  static const std::vector<std::string> names = {"up tile: h = GELU(x W1 + b1) into the ring",
                                                 "down tile: y = h W2 + b2"};
  return names;
}

// The ring's rows at m tokens: kRing row blocks of 128, or as many as there are (a row block's
// slot is its index modulo kRing, so fewer row blocks use fewer slots).
int64_t ffn_wgmma_ring_rows(int64_t m);
int64_t ffn_wgmma_counters(int64_t m);

// Launches the kernel on `stream` when it can run here (a build with sm_90a, a compute
// capability 9.0 GPU, c and hidden multiples of 8, 16-byte aligned operands) and sets *launched;
// otherwise leaves *launched false and the caller picks another kernel.
Status try_ffn_wgmma(const FfnWgmmaBuffers& buffers, int64_t m, int c, int hidden, int sms,
                     cudaStream_t stream, bool* launched);

}  // namespace fl
