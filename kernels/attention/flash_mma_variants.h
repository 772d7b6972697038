// Attention level 2's variant kernels: the same block of work as flash_attention_kernel
// (flash_mma.cuh, flash_attention_block) on another tile shape (flash_mma_keys128.cu: bf16,
// d <= 64, sm_90). The launcher returns Status::Unsupported with one line where it cannot run,
// and the level table then runs flash_attention_kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/attention/flash_args.cuh"
#include "kernels/status.h"

namespace fl::attention {

// Why flash_mma_keys128 cannot take head size d ("" when it can): its shape check.
std::string flash_keys128_shape_check(int64_t dim);

// 128 keys a K/V tile (FlashAttention-2's tile at d = 64), Q re-read from shared memory.
Status launch_flash_keys128(const FlashArgs<__nv_bfloat16>& a, int64_t heads, cudaStream_t stream);

}  // namespace fl::attention
