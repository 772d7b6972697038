// LayerNorm-Linear's level 2 at many tokens on Hopper: y = LN(x) W + b as one wgmma kernel
// (kernels/layernorm_linear/ln_wgmma.cu explains its tiles and data path).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/phases.h"
#include "kernels/status.h"

namespace fl {

// Whether this build compiled the wgmma kernel (an sm_90a architecture, CMakeLists.txt).
bool ln_gemm_wgmma_built();

// Launches the kernel on `stream` when it can run here (built for sm_90a, a compute capability
// 9.0 GPU, C a multiple of 8 up to 768, 16-byte aligned x, gamma, beta and W) and sets
// *launched; otherwise leaves *launched false and the caller picks another kernel.
// x: m x k, gamma and beta: k, w: k x n, bias: n, y: m x n, all row-major.
Status try_ln_gemm_wgmma(const __nv_bfloat16* x, const __nv_bfloat16* gamma,
                         const __nv_bfloat16* beta, const __nv_bfloat16* w,
                         const __nv_bfloat16* bias, __nv_bfloat16* y, int64_t m, int k, int n,
                         int sms, cudaStream_t stream, bool* launched,
                         PhaseSink phases = PhaseSink());

// The phases the kernel declares, in the order of its records' `phase` (one record of each per
// block, from thread 0's view: a consumer).
inline const std::vector<std::string>& ln_gemm_wgmma_phases() {
  static const std::vector<std::string> names = {"setup", "x panel in", "normalize panel",
                                                 "W streamed past the panel (multiplies)",
                                                 "last tile's stores"};
  return names;
}

}  // namespace fl
