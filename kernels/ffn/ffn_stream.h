// The FFN's portable small-token kernel (kernels/ffn/ffn_stream.cu): y = GELU(x W1 + b1) W2 + b2
// at 1 to 64 tokens on any GPU from sm_80 (bf16) or sm_70 (fp32) whose shared memory holds a
// block's slice of the weights (ffn_stream_plan.h), no clusters, no TMA.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/lesson.h"
#include "kernels/phases.h"
#include "kernels/status.h"

namespace fl {

constexpr int64_t kFfnStreamMaxTokens = 64;

struct FfnStreamBuffers {
  const void *x, *w1, *b1, *w2, *b2;  // x: m x C, W1: C x 4C, b1: 4C, W2: 4C x C, b2: C
  void* y;                            // m x C
  void* scratch;  // ffn_stream_scratch_bytes(), zeroed once when allocated (the kernel leaves
                  // its counters' low 31 bits at zero)
  PhaseSink phases = {};  // stamps on when phases.records is set
};

// The phases each block records, in the order of their records' `phase`.
inline const std::vector<std::string>& ffn_stream_phases() {
  static const std::vector<std::string> names = {
      "copies asked for", "x and W1 in",     "up-projection", "hand-over of h",
      "h and W2 in",      "down-projection", "sum of y"};
  return names;
}

// Why the kernel cannot run this shape and precision on the current GPU, or Ok.
Status ffn_stream_supported(Precision p, int64_t m, int64_t c);
// The plan's choices a benchmark may override: the groups of hidden units W2 is split into (0:
// the plan's, ffn_default_groups; 1: no partial sums), the hidden units of an up slice, the
// block's warps (8 or 16; 0: the plan's), W2's tile asked for once x and W1 are in (1) or with
// them (0; -1: the plan's).
struct FfnStreamTuning {
  int groups = 0;
  int units = 0;  // hidden units an up slice (a multiple of 8; 0: the plan's)
  int warps = 0;
  int w2_after_xw1 = -1;
};
// The scratch bytes of a launch with `tuning` (more groups: more partial sums).
Status ffn_stream_scratch_bytes(Precision p, int64_t m, int64_t c, size_t* bytes,
                                FfnStreamTuning tuning = {});
Status launch_ffn_stream(Precision p, const FfnStreamBuffers& b, int64_t m, int64_t c,
                         cudaStream_t stream, FfnStreamTuning tuning = {});

}  // namespace fl
