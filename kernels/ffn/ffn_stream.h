// The FFN's portable small-token kernel (kernels/ffn/ffn_stream.cu): y = GELU(x W1 + b1) W2 + b2
// at 1 to 64 tokens on any GPU from sm_80 (bf16) or sm_70 (fp32) whose shared memory holds a
// block's slice of the weights (ffn_stream_plan.h), no clusters, no TMA.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/lesson.h"
#include "kernels/status.h"

namespace fl {

constexpr int64_t kFfnStreamMaxTokens = 64;

struct FfnStreamBuffers {
  const void *x, *w1, *b1, *w2, *b2;  // x: m x C, W1: C x 4C, b1: 4C, W2: 4C x C, b2: C
  void* y;                            // m x C
  void* scratch;  // ffn_stream_scratch_bytes(), zeroed once when allocated (the kernel leaves
                  // its counters at zero)
};

// Why the kernel cannot run this shape and precision on the current GPU, or Ok.
Status ffn_stream_supported(Precision p, int64_t m, int64_t c);
// The plan's choices a benchmark may override: the groups of hidden units W2 is split into (0:
// the plan's, the fewest from 8 that fit); each column range's sum spread over the range's
// blocks after a barrier of them (measured faster: docs/PERFORMANCE.md), or added by the last
// group to finish it (one block); the hidden units of an up slice.
struct FfnStreamTuning {
  int groups = 0;
  bool spread = true;
  int units = 0;  // hidden units an up slice (a multiple of 8; 0: the fewest that fit the SMs)
};
// The scratch bytes of a launch with `tuning` (more groups: more partial sums).
Status ffn_stream_scratch_bytes(Precision p, int64_t m, int64_t c, size_t* bytes,
                                FfnStreamTuning tuning = {});
Status launch_ffn_stream(Precision p, const FfnStreamBuffers& b, int64_t m, int64_t c,
                         cudaStream_t stream, FfnStreamTuning tuning = {});

}  // namespace fl
