// The hidden-slice FFN's (kernels/ffn/ffn_hidden_slice.cu) sum of y by groups, in place of the
// grid barrier and sum_tiles where the plan's group_sum is on (ffn_slice_groups_fit: bf16 shares,
// 9-64 tokens, 8 or 16 warps, 8 to kSliceGroupBlocks blocks; the resident forms, and the ring's
// at 33-64 tokens with ring_group_sum).
// With the barrier every block waits for the last block's arrival, then all 96 blocks read the
// 2.4 MB of shares at once (16 tokens, C = 768). Here the blocks are 8 interleaved groups
// (block b in group b % 8, 12 blocks each at 96; as a tuning, groups of consecutive blocks), each
// with its own counter (a 128-byte line of the scratch's head):
//   1. once its share is stored, a __syncthreads, then thread 0 arrives at its group's counter
//      (one acq_rel atomic, the count barrier's scheme: the top bit flips when the group is in)
//      and passes the value before it to the block's warps through shared memory;
//   2. warp w of each block waits for group w only (lane 0 polls with acquire loads, then a
//      __syncwarp) and adds group w's shares of the block's tile: lane l takes row l % 16 of the
//      tile (one 16-byte load: 8 bf16 columns) and shares w + 8 (l / 16), + 16, + 32, ... (6 loads
//      at 96 blocks, one batch), the two halves meet by one shuffle;
//   3. the 8 warps' sums meet in shared memory (8 x 16 rows x 8 fp32: 4 KB over the up product's
//      partial sums' room, free once the down product is done), added in warp order + b2 by
//      thread `row` and stored as one 16-byte store.
// At 33-64 tokens (the ring form, 2-4 row tiles) warp w takes group w % 8's shares of row tiles
// w / 8, w / 8 + warps / 8, ...: at 64 tokens, C = 768, 96 blocks, 16 warps, a block's tile of
// y is 12 shares x 64 rows x 16 bytes = 12 KB a group, 98 KB a block, 9.4 MB GPU-wide (as
// sum_tiles'), each lane 2 row tiles x 6 loads.
// A warp whose group is in adds its shares while later blocks are still on their down product,
// so once the last block arrives only its group's warps load: an eighth of the 2.4 MB at once,
// not all of it. The order of the adds is fixed (a lane's shares in order, then the halves, then
// the warps in order): the same result every run. Traffic: the shares' bytes as sum_tiles'; 8
// counters, each polled by one lane of one warp a block.
// Measured slower and removed (H100, 2026-11-27, as an RTX card at 9-16 bf16 tokens;
// docs/PERFORMANCE.md): the arrival as a red.release (a block's, or each warp's) with the
// launch's parity loaded at the start, so that no warp waits for the atomic's answer: 1.3-1.6 us
// slower at 16 tokens.
#pragma once

#include <cuda_bf16.h>

#include "kernels/device_common.cuh"
#include "kernels/ffn/count_barrier.cuh"
#include "kernels/ffn/ffn_hidden_slice_steps.cuh"
#include "kernels/gemm_core/weight_slice.cuh"

namespace fl::hidden_slice {

// The groups: interleaved, block b in group b % 8 (the plan's form), or contiguous
// (group_contiguous, blocks a multiple of 8: blocks [g G, g G + G), G = blocks / 8). Group g's
// blocks are base + stride j, j < size.
struct Group {
  int base, stride, size;
};
__device__ __forceinline__ Group group_of(const FfnSlicePlan& p, int g) {
  if (p.group_contiguous) return {g * (p.blocks / kSliceGroups), 1, p.blocks / kSliceGroups};
  return {g, kSliceGroups, (p.blocks - g + kSliceGroups - 1) / kSliceGroups};
}
__device__ __forceinline__ int group_index(const FfnSlicePlan& p, int b) {
  return p.group_contiguous ? b / (p.blocks / kSliceGroups) : b % kSliceGroups;
}

// Group g's counter (a 128-byte line of its own in the scratch's head).
__device__ __forceinline__ unsigned* group_counter(unsigned* counters, int g) {
  return counters + 256 / sizeof(unsigned) + kSliceCounterWords * g;
}

// The block's share is stored (every thread's stores, by the __syncthreads): thread 0 arrives
// at its group's counter (the count barrier's scheme: one acq_rel atomic, the group's first block
// adds 2^31 - (size - 1), the others 1, so the top bit flips when its last block arrives); the
// counter's value before it (whose top bit every group's counter still has until its group is in)
// goes to `slot` for the block's warps.
__device__ __forceinline__ void arrive_group(const FfnSlicePlan& p, unsigned* counters,
                                             unsigned* slot) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const int g = group_index(p, blockIdx.x);
    const Group k = group_of(p, g);
    const unsigned add = int(blockIdx.x) == k.base ? 0x80000000u - unsigned(k.size - 1) : 1u;
    *slot = add_acq_rel(group_counter(counters, g), add);
  }
  __syncthreads();
}

// Until group g's counter's top bit differs from `old`'s (lane 0 polls with acquire loads, then
// the warp meets: what the group's blocks stored before arriving is visible to the warp). Every
// block is resident, so it comes; a wrong count traps after about a second rather than hang.
// group_spin: the polls back to back, no __nanosleep between them.
__device__ __forceinline__ void wait_group(unsigned* counters, int g, unsigned old, bool spin) {
  if ((threadIdx.x & 31) == 0) {
    const unsigned* c = group_counter(counters, g);
    for (unsigned spins = 0; ((load_acquire(c) ^ old) & 0x80000000u) == 0; ++spins) {
      if (spins == (1u << 24)) __trap();
      if (!spin) __nanosleep(32);
    }
  }
  __syncwarp();
}

// After arrive_group: warp w waits for group w % 8 and adds its shares of the block's tiles,
// row tiles w / 8, w / 8 + warps / 8, ... (16 rows each: 1-4 at 1-64 tokens; 16 warps take two
// row tiles a group each at 49-64 tokens, 8 warps all of them), the warps meet in `red` (8 groups
// x 16 mtc rows x 8 fp32: 4 KB a row tile, 16 KB at 64 tokens) and threads 0 .. m - 1 add them +
// b2 (first_b2: b2 at the block's first tile) into y. bf16 shares (S) only.
template <typename T>
__device__ __forceinline__ void group_sum_tiles(const SliceArgs<T>& a, unsigned old, float* red,
                                                const float (&first_b2)[8]) {
  using S = __nv_bfloat16;
  const FfnSlicePlan& p = a.p;
  constexpr int kLoads = kSliceGroupBlocks / kSliceGroups / 2;  // a lane's shares at most
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = warp % kSliceGroups;
  const int rt0 = warp / kSliceGroups, rt_step = p.warps / kSliceGroups, rows = 16 * p.mtc;
  wait_group(a.counters, g, old, p.group_spin);
  const Group k = group_of(p, g);
  const int half = lane >> 4, first = k.base + k.stride * half;
  const S* shares = reinterpret_cast<const S*>(a.partial);
  const int64_t step = 2 * k.stride * int64_t(p.m) * p.cp;  // the lane's next share: 2 on in k
  for (int tile = blockIdx.x; tile < p.cp / kSliceTileCols; tile += p.blocks) {
    for (int rt = rt0; rt < p.mtc; rt += rt_step) {
      const int row = 16 * rt + (lane & 15);
      float s[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) s[i] = 0.0f;
      if (row < p.m) {
        const S* q = shares + share_at<S>(p, first, row, tile * kSliceTileCols);
        uint4 v[kLoads];
#pragma unroll
        for (int u = 0; u < kLoads; ++u) {
          const bool in = half + 2 * u < k.size;
          v[u] = in ? slice::load_cg16(q + u * step) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < kLoads; ++u) add_values<S>(s, v[u]);
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) s[i] += __shfl_xor_sync(0xffffffffu, s[i], 16);
      float* mine = red + (g * rows + row) * 8;
      if (half == 0) {
        reinterpret_cast<float4*>(mine)[0] = make_float4(s[0], s[1], s[2], s[3]);
        reinterpret_cast<float4*>(mine)[1] = make_float4(s[4], s[5], s[6], s[7]);
      }
    }
    __syncthreads();
    if (int(threadIdx.x) < p.m) {
      const int r = threadIdx.x, col = tile * kSliceTileCols;
      float y[8], b[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        y[i] = 0.0f;
        b[i] = tile == int(blockIdx.x) ? first_b2[i]
                                       : (col + i < p.c ? Elem<T>::to_float(a.b2[col + i]) : 0.0f);
      }
#pragma unroll
      for (int w = 0; w < kSliceGroups; ++w) {
        const float4 lo = reinterpret_cast<const float4*>(red + (w * rows + r) * 8)[0];
        const float4 hi = reinterpret_cast<const float4*>(red + (w * rows + r) * 8)[1];
        y[0] += lo.x, y[1] += lo.y, y[2] += lo.z, y[3] += lo.w;
        y[4] += hi.x, y[5] += hi.y, y[6] += hi.z, y[7] += hi.w;
      }
      store_item(a, r, col, y, b);
    }
    __syncthreads();  // red again for the next tile
  }
}

}  // namespace fl::hidden_slice
