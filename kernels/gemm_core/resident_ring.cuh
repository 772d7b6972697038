// The portable GEMM core's main loop with B resident (sm_80+; mma_tile.cuh's MmaTile): a block
// tile's whole column slice of B (K x BN) copied into shared memory at once, then only A's
// K-tiles streamed through a cp.async ring.
//
// What changes against ring.cuh's main loop: there every K-tile brings A's and B's pieces
// together, so B's bytes (2/3 of a 64 x 128 tile's) arrive on the tile's path, K-tile by
// K-tile, at the rate one SM pulls from L2. Here the caller asks for all of B first, while the
// block has nothing else to do (ln_mma_tiles.cu: while the row items normalize x); after that
// the ring carries A alone (4 KiB a K-tile of 32 at BM = 64 instead of 12). The price is shared
// memory: K x BN bf16 beside the A ring (192 KiB at K = 768, BN = 128: one block an SM, and of
// the portable targets only sm_90's 227 KiB a block holds it; an A100's 163 KiB holds BN = 128
// up to K = 512, sm_86's and sm_89's 99 KiB up to K = 256). Budget per K-tile of 32 (BM x BN =
// 64 x 128, 8 warps of 32 x 32): 4 KiB copied in, 32 KiB of ldmatrix, 128 mma (0.5 MFLOP).
// B lies as one swizzled K x BN matrix (b_at's rows counted from its first row: K-tiles are
// whole multiples of 8 rows, so each K-tile's piece is laid out as ring.cuh's B tiles).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/tensor_gemm.cuh"

namespace fl::gemm_core {

// Shared memory the resident form needs at K = k: the A ring, then B (K padded to whole K-tiles).
template <class Tile>
constexpr size_t resident_smem_bytes(int64_t k) {
  const int64_t kts = (k + Tile::kBK - 1) / Tile::kBK;
  return 2 * (size_t(Tile::kStages) * Tile::kBM * Tile::kBK + size_t(kts) * Tile::kBK * Tile::kBN);
}

// Rows 0 .. k - 1 of B's columns n0 .. n0 + BN - 1 into sb (zero past k and n; K-tile order),
// as one commit group: the oldest group of the main loop that follows, so its first wait covers
// it.
template <class Tile, typename T>
__device__ __forceinline__ void load_b_resident(T* sb, const T* b, int64_t ldb, int64_t n,
                                                int64_t k, int64_t n0) {
  const int kts = static_cast<int>((k + Tile::kBK - 1) / Tile::kBK);
#pragma unroll 1
  for (int kt = 0; kt < kts; ++kt) {
    Tile::template load_b<Tile::kBK>(sb + kt * Tile::kBK * Tile::kBN, b, ldb, n, k,
                                     int64_t(kt) * Tile::kBK, n0);
  }
  tc::async_commit();
}

// acc += A[m0.., 0 .. k) B, B in sb (load_b_resident's, asked for before: its group is older than
// the ring's). The ring's order as ring.cuh's (prime S - 1 K-tiles of A; per K-tile: landed,
// barrier, refill the stage K-tile kt - 1 used, multiply), with fragments double-buffered as
// MmaTile::compute does. Ends with a barrier: the ring and sb may be reused at once.
template <class Tile, typename T>
__device__ __forceinline__ void resident_mainloop(typename Tile::Acc& acc, T* ring, const T* sb,
                                                  const T* a, int64_t lda, int64_t m, int64_t k,
                                                  int64_t m0) {
  static_assert(Tile::kPrefetch && Tile::kGSteps % 2 == 0, "fragments double-buffered");
  constexpr int S = Tile::kStages, kAElems = Tile::kBM * Tile::kBK;
  const int kts = static_cast<int>((k + Tile::kBK - 1) / Tile::kBK);
  const unsigned ring_at = static_cast<unsigned>(__cvta_generic_to_shared(ring));
  // Frags' B offsets count from a stage's start, past its A tile: K-tile kt's B piece less that.
  const unsigned b_at = static_cast<unsigned>(__cvta_generic_to_shared(sb)) - 2u * kAElems;
  auto a_stage = [&](int kt) { return ring_at + 2u * kAElems * unsigned(kt % S); };
  auto b_tile = [&](int kt) { return b_at + 2u * Tile::kBK * Tile::kBN * unsigned(kt); };
#pragma unroll
  for (int kt = 0; kt < S - 1; ++kt) {
    if (kt < kts) Tile::load_a(ring + (kt % S) * kAElems, a, lda, m, k, m0, kt);
    tc::async_commit();
  }
  auto landed = [&]() {  // this thread's copies of the next K-tile (and all of B) are in
    tc::async_wait<S - 2>();
    __syncthreads();
  };
  typename Tile::Frags fr;
  landed();
  Tile::load_frags_at(fr.f[0], a_stage(0), b_tile(0), fr, 0);
  for (int kt = 0; kt < kts; ++kt) {
    const int next = kt + S - 1;  // into the stage K-tile kt - 1 used (read by no warp now)
    if (next < kts) Tile::load_a(ring + (next % S) * kAElems, a, lda, m, k, m0, next);
    tc::async_commit();
#pragma unroll
    for (int s = 0; s < Tile::kGSteps; ++s) {
      if (s + 1 < Tile::kGSteps) {
        Tile::load_frags_at(fr.f[(s + 1) % 2], a_stage(kt), b_tile(kt), fr, s + 1);
      } else {
        landed();
        if (kt + 1 < kts) Tile::load_frags_at(fr.f[0], a_stage(kt + 1), b_tile(kt + 1), fr, 0);
      }
      Tile::mma_all(acc, fr.f[s % 2]);
    }
  }
  tc::async_wait<0>();
  __syncthreads();
}

}  // namespace fl::gemm_core
