// Attention level 2's variant kernels: the same block of work as flash_attention_kernel
// (flash_mma.cuh, flash_attention_block) with O written through shared memory
// (flash_mma_staged.cu, every head size and precision), and on other tile shapes as well
// (flash_mma_keys128.cu, flash_mma_3blocks.cu: bf16, d <= 64). Each launcher returns
// Status::Unsupported with one line where it cannot run, and the level table then runs
// flash_attention_kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/attention/flash_args.cuh"
#include "kernels/status.h"

namespace fl::attention {

// O through shared memory, 16-byte row pieces (T = float or __nv_bfloat16).
template <typename T>
Status launch_flash_staged(const FlashArgs<T>& a, int64_t heads, cudaStream_t stream);

// Why the retiled kernels cannot take head size d ("" when they can): their shape check.
std::string flash_retiled_shape_check(int64_t dim);

// 128 keys a K/V tile (FlashAttention-2's tile at d = 64), Q re-read from shared memory, O
// through shared memory.
Status launch_flash_keys128(const FlashArgs<__nv_bfloat16>& a, int64_t heads, cudaStream_t stream);

// 64 keys a tile as level 2, registers capped so that three blocks share an SM, O through
// shared memory.
Status launch_flash_3blocks(const FlashArgs<__nv_bfloat16>& a, int64_t heads, cudaStream_t stream);

}  // namespace fl::attention
