// Attention level 2, variant flash_mma_staged: level 2's flash kernel with O written through
// shared memory, every head size and both precisions.
//
// What changes against flash_attention_kernel (flash_mma.cuh): only the end of a block. There
// each lane stores its own O elements straight from the mma accumulator layout: two neighbouring
// elements of 8 rows a store instruction, element by element (2 bytes each in bf16), so a warp's
// 32 x 64 tile of O takes 256 narrow store instructions that each touch 8 rows. Here the warp
// writes its finished rows into its own Q rows in shared memory (free once its last Q K^T is
// done: no other warp reads them, so no block barrier), then copies them out whole rows at a
// time, 16 bytes a lane: 8 store instructions for the same tile (bf16, d = 64), each a run of
// whole 32-byte sectors.
//
// Tiles and data path as level 2 (4 warps x 32 query rows, K/V tiles of 64 keys in bf16 and 32 in
// fp32, double-buffered by cp.async); no extra shared memory.
//
// Napkin: O is 1/4 of the kernel's HBM bytes (T d b a head) and the store is one pass at the end
// of a block, but a block that owns few K/V tiles (T = 512: 2 to 8 tiles of 64 keys) spends a
// visible share of its time there; the saving is in issued store instructions (32x fewer) and
// in partial-sector writes, not in bytes.
#include "kernels/attention/flash_mma.cuh"
#include "kernels/attention/flash_mma_variants.h"

namespace fl::attention {

template <typename T, class Tile, bool kVectorized>
__global__ void __launch_bounds__(Tile::kThreads) flash_attention_staged_kernel(FlashArgs<T> a) {
  flash_attention_block<T, Tile, kVectorized, true>(a);
}

template <typename T>
Status launch_flash_staged(const FlashArgs<T>& a, int64_t heads, cudaStream_t stream) {
  FL_TRY(flash_shape_ok(a, heads));
  return with_flash_tile(a, [&](auto tile, auto vectorized) {
    using Tile = decltype(tile);
    return launch_flash_tile<Tile>(
        flash_attention_staged_kernel<T, Tile, decltype(vectorized)::value>, a, heads, stream);
  });
}

template Status launch_flash_staged<float>(const FlashArgs<float>&, int64_t, cudaStream_t);
template Status launch_flash_staged<__nv_bfloat16>(const FlashArgs<__nv_bfloat16>&, int64_t,
                                                   cudaStream_t);

}  // namespace fl::attention
