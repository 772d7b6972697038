// The FFN's portable large-token kernel (kernels/ffn/ffn_tiles.cu): y = GELU(x W1 + b1) W2 + b2
// as one persistent launch of the GEMM core's tiles, on any GPU (bf16 from sm_80, fp32 from
// sm_70), no clusters, no TMA, no cooperative launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

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
};

size_t ffn_tiles_counter_bytes(int64_t m);
Status launch_ffn_tiles(Precision p, const FfnTilesBuffers& b, int64_t m, int64_t c,
                        cudaStream_t stream);

}  // namespace fl
