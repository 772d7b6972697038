// The parts of K of ln_mma_tiles' split tiles (LnTilesShape::splits > 1, a measurement form):
// each part of a tile adds its fp32 sums into the tile's slot in an L2 scratch, and the last
// part to arrive takes the totals and stores the tile (ln_mma_tiles.cu).
#pragma once

#include "kernels/gemm_core/weight_slice.cuh"

namespace fl::layernorm_linear {

// Part of a split tile: adds its sums into the tile's fp32 slot in L2 (red.add: no part waits
// for another), counts itself in; the last part to arrive takes the totals into acc, leaves the
// slot and its counter at zero for the next launch, and returns true (it stores the tile). The
// sums' order follows the parts' arrival, so the fp32 totals may differ in the last bits from
// one run to the next. A thread's values lie as float4 (acc[mt][nt]) at (i x owners + thread).
template <class Tile>
__device__ __forceinline__ bool add_part(typename Tile::Acc& acc, float* part, unsigned* arrive,
                                         int splits) {
  __shared__ int s_last;
  constexpr int kOwners = Tile::kThreads / Tile::kGroups;  // group 0 holds the sums
  const bool owner = threadIdx.x < kOwners;
  float4* p = reinterpret_cast<float4*>(part) + threadIdx.x;
  if (owner) {
#pragma unroll
    for (int mt = 0; mt < Tile::kMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < Tile::kNT; ++nt) {
        red_add4(reinterpret_cast<float*>(p + (mt * Tile::kNT + nt) * kOwners), acc[mt][nt]);
      }
  }
  __threadfence();  // this thread's sums before the tile's counter (release)
  __syncthreads();
  if (threadIdx.x == 0) s_last = atomicAdd(arrive, 1u) == unsigned(splits - 1);
  __syncthreads();
  if (!s_last) return false;
  __threadfence();  // every part's sums are in L2 (acquire); read past L1
  if (owner) {
#pragma unroll
    for (int mt = 0; mt < Tile::kMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < Tile::kNT; ++nt) {
        float4* q = p + (mt * Tile::kNT + nt) * kOwners;
        const float4 v = slice::load_cg4(reinterpret_cast<const float*>(q));  // from L2
        *q = make_float4(0.0f, 0.0f, 0.0f, 0.0f);  // for the next launch's parts
        acc[mt][nt][0] = v.x, acc[mt][nt][1] = v.y, acc[mt][nt][2] = v.z, acc[mt][nt][3] = v.w;
      }
  }
  if (threadIdx.x == 0) *arrive = 0;
  return true;
}

}  // namespace fl::layernorm_linear
