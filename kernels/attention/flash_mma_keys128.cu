// Attention level 2, variant flash_mma_keys128: level 2's flash kernel with K/V tiles of 128 keys
// instead of 64 (FlashAttention-2's tile at head size 64), bf16, d <= 64.
//
// What changes against flash_attention_kernel (flash_mma.cuh): each K/V tile holds 128 keys, so a
// block runs half as many tile steps: half the __syncthreads pairs, half the online-softmax
// passes (row max and sum shuffles, the rescale of O), for the same mma work. The price is
// registers: a warp's score tile is 32 x 128 fp32 (128 registers a thread) beside O (64), so Q's
// fragments are re-read from shared memory for every tile instead of held (32 registers).
//
// Tiles: 4 warps x 32 query rows = 128 queries a block; K/V tiles of 128 keys x 64 dims,
// double-buffered by cp.async; O out through shared memory as in level 2. Shared memory:
// (128 + 4 x 128) x 72 x 2 B = 90 KiB: two blocks an SM on Hopper (the registers allow two as
// well: 128 threads x ~255), but one on GPUs with less shared memory an SM (A100: 164 KiB,
// sm_86/89: 100 KiB), which is why the table runs it on sm_90 only.
//
// Napkin per head at T = 4096: the same HBM bytes as level 2 (Q, K, V read, O written: 2 MiB) and
// the same 2 T^2 d = 2.1 GFLOP; what it saves is instructions between the products: per 128 keys
// one softmax bookkeeping pass (~100 FP32 instructions a thread) instead of two, against ~16
// mma a warp per 16 rows x 128 keys. The diagonal tile is half masked as before, now over 128
// keys: a causal block wastes up to 64 more key columns of work on it.
#include "kernels/attention/flash_mma.cuh"
#include "kernels/attention/flash_mma_variants.h"

namespace fl::attention {

using KeysTile128 = FlashTile<__nv_bfloat16, 64, 2, 128, false>;

template <bool kVectorized>
__global__ void __launch_bounds__(KeysTile128::kThreads)
    flash_attention_keys128_kernel(FlashArgs<__nv_bfloat16> a) {
  flash_attention_block<__nv_bfloat16, KeysTile128, kVectorized>(a);
}

std::string flash_keys128_shape_check(int64_t dim) {
  return dim >= 1 && dim <= 64 ? "" : "takes a head size d up to 64";
}

Status launch_flash_keys128(const FlashArgs<__nv_bfloat16>& a, int64_t heads, cudaStream_t stream) {
  const std::string shape = flash_keys128_shape_check(a.dim);
  if (!shape.empty()) return Status::Unsupported(shape);
  FL_TRY(flash_shape_ok(a, heads));
  return flash_rows_vectorized(a) ? launch_flash_tile<KeysTile128>(
                                        flash_attention_keys128_kernel<true>, a, heads, stream)
                                  : launch_flash_tile<KeysTile128>(
                                        flash_attention_keys128_kernel<false>, a, heads, stream);
}

}  // namespace fl::attention
