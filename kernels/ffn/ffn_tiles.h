// The FFN's portable large-token kernel (kernels/ffn/ffn_tiles.cu): y = GELU(x W1 + b1) W2 + b2
// as one persistent launch of the GEMM core's tiles, on any GPU (bf16 from sm_80, fp32 from
// sm_70), no clusters, no TMA, no cooperative launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/phases.h"

#include "kernels/lesson.h"
#include "kernels/status.h"

namespace fl {

constexpr int64_t kFfnTilesFrom = 1024;  // tokens: the table prefers it from here on

struct FfnTilesBuffers {
  const void *x, *w1, *b1, *w2, *b2;  // x: m x C, W1: C x 4C, b1: 4C, W2: 4C x C, b2: C
  void* y;                            // m x C
  void* h;                            // m x 4C: GELU(x W1 + b1), written and read back
  unsigned* counters;                 // ffn_tiles_counter_bytes(m), zeroed once when allocated
                                      // (every launch leaves them at zero)
  PhaseSink phases;                   // stamps on when set: one record a tile, ffn_tiles_phases()
};

// The phases of ffn_tiles' records: one a tile, in the slot of its ticket, arg = its row block,
// wait_ns = how long a down tile waited for its rows of h.
enum FfnTilesPhase : unsigned { kFfnTileUp, kFfnTileDown };
inline const std::vector<std::string>& ffn_tiles_phases() {
  static const std::vector<std::string> names = {
      "up tile: x W1 + b1, GELU, h to L2", "down tile: waits for its rows of h, then h W2 + b2"};
  return names;
}

constexpr int64_t kFfnTilesWideFrom = 8192;  // tokens: 128 x 256 tiles from here on (bf16)

// The bf16 tiles (fp32 always runs 128 x 128 on the CUDA cores): automatic is
// ffn_tiles_shape(m); the others are there to be measured against each other. k128x256 stages
// its outputs through shared memory and cuts the last row blocks' down tiles in halves of their
// width (a shorter tail); k128x256_direct does neither (the outputs stored from the registers,
// the form before), k128x256_staged only the first, k128x256_tail only the second. In fp32,
// automatic cuts the down tiles over K (ffn_tiles.cu) and k128x128 keeps them whole.
enum class FfnTilesShape {
  automatic,
  k128x128,
  k128x256,
  k128x128_down64,
  k128x256_direct,
  k128x256_staged,
  k128x256_tail
};
FfnTilesShape ffn_tiles_shape(int64_t m);

size_t ffn_tiles_counter_bytes(int64_t m);
Status launch_ffn_tiles(Precision p, const FfnTilesBuffers& b, int64_t m, int64_t c,
                        cudaStream_t stream, FfnTilesShape shape = FfnTilesShape::automatic);

}  // namespace fl
