// The tile forms ln_mma_tiles runs (kernels/gemm_core/mma_tile.cuh's MmaTile), numbered as
// LnTilesShape::tile and FL_LN_TILES say them, shared by its two ways to normalize x: row items
// into an xn in L2 (ln_mma_tiles.cu) and each tile its own rows (ln_mma_tiles_local.cu).
//   1 64 x 64, 4 warps of 32 x 32 (K-tiles of 32, 4 stages of 8 KiB; 2 blocks an SM)
//   2 64 x 128, 4 warps of 32 x 64 (4 stages of 12 KiB; 2 blocks an SM)
//   3 64 x 128, 8 warps of 32 x 32 (one block an SM: two warps a scheduler)
//   4 64 x 128, two K groups of 4 warps of 32 x 64 (K-tiles of 64, 4 stages of 24 KiB; a group
//     takes two of a K-tile's four k16 steps, the halves added through shared memory)
//   5 32 x 128, 4 warps of 16 x 64; 6 the same in two K groups
//   7 form 3 with 8 stages (96 KiB: twice the bytes in flight)
//   8 form 4 with 6 stages (144 KiB)
//   9 64 x 128, 8 warps of 32 x 32 with K-tiles of 64 (each warp all four k16 steps: half the
//     barriers of form 3; 4 stages of 24 KiB)
//   10 64 x 256, 8 warps of 32 x 64 (4 stages of 20 KiB; with W resident, in parts of K)
#pragma once

#include "kernels/gemm_core/mma_tile.cuh"
#include "kernels/status.h"

namespace fl::layernorm_linear {

// Form 9, whose shared memory the kept rule asks about (ln_mma_tiles.cu).
using LnResidentTile = gemm_core::MmaTile<64, 128, 2, 4, 4, true, false, 64>;
// Form 7, which the kept rule runs where W is streamed (its 96 KiB where the GPU has them).
using LnDeepTile = gemm_core::MmaTile<64, 128, 2, 4, 8, true>;

template <class Tile_, int kMinBlocks_>
struct TilesForm {
  using Tile = Tile_;
  static constexpr int kMinBlocks = kMinBlocks_;  // for __launch_bounds__
};

// run(TilesForm<Tile, kMinBlocks>{}) for form `form` (1-10), else Unsupported.
template <class Run>
Status with_tiles_form(int form, const Run& run) {
  using gemm_core::MmaTile;
  switch (form) {
    case 1:
      return run(TilesForm<MmaTile<64, 64, 2, 2, 4, true>, 2>{});
    case 2:
      return run(TilesForm<MmaTile<64, 128, 2, 2, 4, true>, 2>{});
    case 3:
      return run(TilesForm<MmaTile<64, 128, 2, 4, 4, true>, 1>{});
    case 4:
      return run(TilesForm<MmaTile<64, 128, 2, 2, 4, true, false, 64, 2>, 1>{});
    case 5:
      return run(TilesForm<MmaTile<32, 128, 2, 2, 4, true>, 2>{});
    case 6:
      return run(TilesForm<MmaTile<32, 128, 2, 2, 4, true, false, 64, 2>, 2>{});
    case 7:
      return run(TilesForm<LnDeepTile, 1>{});
    case 8:
      return run(TilesForm<MmaTile<64, 128, 2, 2, 6, true, false, 64, 2>, 1>{});
    case 9:
      return run(TilesForm<LnResidentTile, 1>{});
    case 10:
      return run(TilesForm<MmaTile<64, 256, 2, 4, 4, true>, 1>{});
    default:
      return Status::Unsupported("no such tile (1-10)");
  }
}

}  // namespace fl::layernorm_linear
