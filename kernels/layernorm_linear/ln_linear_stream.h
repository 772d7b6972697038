// The LayerNorm-Linear's portable small-token kernel (kernels/layernorm_linear/
// ln_linear_stream.cu): y = LN(x) W + b at 1 to 256 tokens on any GPU from sm_80 (bf16) or
// sm_70 (fp32), no clusters, no TMA.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/lesson.h"
#include "kernels/status.h"

namespace fl {

constexpr int64_t kLnStreamMaxTokens = 256;

struct LnStreamBuffers {
  const void *x, *gamma, *beta, *w, *bias;  // x: m x C, gamma, beta: C, W: C x N, bias: N
  void* y;                                  // m x N
  void* scratch;                            // ln_stream_scratch_bytes(), zeroed once when allocated
};

Status ln_stream_supported(Precision p, int64_t m, int64_t c);
Status ln_stream_scratch_bytes(Precision p, int64_t m, int64_t c, int64_t n, size_t* bytes);
Status launch_ln_stream(Precision p, const LnStreamBuffers& b, int64_t m, int64_t c, int64_t n,
                        cudaStream_t stream);

}  // namespace fl
