// Attention level 3 on Hopper (kernels/attention/flash_wgmma.cu): the launcher and its phases.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention/flash_args.cuh"
#include "kernels/status.h"

namespace fl::attention {

// Launches the Hopper flash kernel on `heads` heads, or returns Status::Unsupported with one
// line saying why it cannot run here (not an sm_90 GPU or build, d not 64 or 128, a row stride
// or pointer that TMA cannot take): the level table then runs the mma.sync flash kernel.
Status launch_flash_wgmma(const FlashArgs<__nv_bfloat16>& a, int64_t heads, cudaStream_t stream);

// Why the kernel cannot take head size d ("" when it can): the variant's shape check.
std::string flash_wgmma_shape_check(int64_t dim);

// The phases flash_wgmma_kernel records, in the order of their index.
const std::vector<std::string>& flash_wgmma_phases();

}  // namespace fl::attention
