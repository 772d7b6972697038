// Attention level 2, variant flash_mma_3blocks: level 2's flash kernel with its registers capped
// so that three blocks share an SM instead of two, bf16, d <= 64.
//
// What changes against flash_attention_kernel (flash_mma.cuh): the kernel asks for three resident
// blocks (__launch_bounds__(128, 3): at most 170 registers a thread, against the ~255 the
// compiler takes unasked), and re-reads Q's fragments from shared memory for every tile so that
// S (64 registers) and O (64) still fit without spilling. Twelve warps an SM instead of eight:
// more warps to switch to while one waits on ldmatrix, a barrier or the exp2 unit.
//
// Tiles: as level 2, 4 warps x 32 query rows, K/V tiles of 64 keys x 64 dims, double-buffered
// by cp.async. Shared memory: (128 + 4 x 64) x 72 x 2 B = 54 KiB a block, 162 KiB for three.
//
// Napkin: the same bytes and FLOPs as level 2 (per head at T = 4096: 2 MiB of HBM, 2.1 GFLOP);
// it adds one ldmatrix.x4 of Q per 16 x 16 product step (a quarter more shared-memory reads in
// Q K^T) and gains 50% more resident warps.
#include "kernels/attention/flash_mma.cuh"
#include "kernels/attention/flash_mma_variants.h"

namespace fl::attention {

using ThreeBlocksTile = FlashTile<__nv_bfloat16, 64, 2, 64, false>;

template <bool kVectorized>
__global__ void __launch_bounds__(ThreeBlocksTile::kThreads, 3)
    flash_attention_3blocks_kernel(FlashArgs<__nv_bfloat16> a) {
  flash_attention_block<__nv_bfloat16, ThreeBlocksTile, kVectorized, true>(a);
}

Status launch_flash_3blocks(const FlashArgs<__nv_bfloat16>& a, int64_t heads,
                            cudaStream_t stream) {
  const std::string shape = flash_retiled_shape_check(a.dim);
  if (!shape.empty()) return Status::Unsupported(shape);
  FL_TRY(flash_shape_ok(a, heads));
  return flash_rows_vectorized(a)
             ? launch_flash_tile<ThreeBlocksTile>(flash_attention_3blocks_kernel<true>, a, heads,
                                                  stream)
             : launch_flash_tile<ThreeBlocksTile>(flash_attention_3blocks_kernel<false>, a, heads,
                                                  stream);
}

}  // namespace fl::attention
