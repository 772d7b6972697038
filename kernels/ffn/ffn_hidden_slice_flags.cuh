// The hidden-slice FFN's (kernels/ffn/ffn_hidden_slice.cu) sum of y by flags, in place of the
// grid barrier and sum_tiles where the plan's flag_sum is on (ffn_slice_flags_fit: bf16 shares,
// 9-16 tokens, the resident forms, 8 warps, at most kSliceFlagBlocks blocks).
// With the barrier every block waits for the last block's arrival, then all 96 blocks read the
// 2.4 MB of shares at once (16 tokens, C = 768). Here:
//   1. each block reads the launch's number n (the scratch's word 1) when it starts;
//   2. once its share is stored, a __syncthreads, then one release store of n + 1 to its own
//      flag (a 128-byte line of its own, in the scratch's head);
//   3. warp w of each block owns shares [w G, w G + G), G = ceil(blocks / 8) (12 at 96 blocks):
//      lane l < G polls flag w G + l (relaxed loads, then one acquire fence) until it reads n + 1,
//      a __syncwarp, and the warp adds its shares of the block's tile: lane l takes row l % 16 of
//      the tile (one 16-byte load: 8 bf16 columns) and shares w G + l / 16, + 2, + 4, ... (6 loads
//      at 96 blocks, one batch), the two halves meet by one shuffle;
//   4. the 8 warps' sums meet in shared memory (8 x 16 rows x 8 fp32: 4 KB over the up product's
//      partial sums' room, free once the down product is done), added in warp order + b2 by
//      thread `row` and stored as one 16-byte store;
//   5. block 0, having seen every flag (so every block has read n), writes n + 1 as the next
//      launch's number.
// A warp whose 12 shares are in adds them while later blocks are still on their down product: the
// chain after the last block's share is its flag, one poll, 6 loads of one share's rows and the
// meeting, not an atomic's round trip, a poll and every block's 24 KB of loads at once.
// The order of the adds is fixed (a lane's shares in order, then the halves, then the warps in
// order): the same result every run. Traffic: each polling lane one 4-byte load a poll (12 a warp,
// 96 lines in all); the shares' bytes as sum_tiles'.
#pragma once

#include <cuda_bf16.h>

#include "kernels/device_common.cuh"
#include "kernels/ffn/ffn_hidden_slice_steps.cuh"
#include "kernels/gemm_core/weight_slice.cuh"

namespace fl::hidden_slice {

// The scratch's launch number (word 1; word 0 is the grid barrier's counter) and block b's flag.
__device__ __forceinline__ unsigned* launch_number(unsigned* counters) {
  return counters + 1;
}
__device__ __forceinline__ unsigned* share_flag(unsigned* counters, int b) {
  return counters + 256 / sizeof(unsigned) + kSliceFlagWords * b;
}

__device__ __forceinline__ unsigned load_relaxed(const unsigned* p) {
  unsigned v;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
#else
  v = *reinterpret_cast<const volatile unsigned*>(p);
#endif
  return v;
}

// The block's share is stored (every thread's stores, by the __syncthreads): flag b = n + 1.
__device__ __forceinline__ void raise_flag(unsigned* counters, unsigned next) {
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* f = share_flag(counters, blockIdx.x);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(f), "r"(next) : "memory");
#else
    __threadfence();
    *reinterpret_cast<volatile unsigned*>(f) = next;
#endif
  }
}

// Until flag b reads `next` (relaxed polls, then an acquire fence: what block b stored before its
// flag is visible to this thread, and, after a __syncwarp, to its warp). A flag that never comes
// (every block is resident, so it comes) traps after about a second rather than hang.
__device__ __forceinline__ void wait_flag(unsigned* counters, int b, unsigned next) {
  const unsigned* f = share_flag(counters, b);
  for (unsigned spins = 0; load_relaxed(f) != next; ++spins) {
    if (spins == (1u << 24)) __trap();
    __nanosleep(32);
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
#else
  __threadfence();
#endif
}

// Steps 3-5 above (`next` = n + 1; red: 4 KB of shared memory; first_b2: b2 at the block's first
// tile). bf16 shares (S) only.
template <typename T>
__device__ __forceinline__ void flag_sum_tiles(const SliceArgs<T>& a, unsigned next, float* red,
                                               const float (&first_b2)[8]) {
  using S = __nv_bfloat16;
  const FfnSlicePlan& p = a.p;
  constexpr int kLoads = kSliceFlagBlocks / 8 / 2;  // a lane's shares at most
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int per = (p.blocks + 7) / 8, s0 = warp * per, s1 = min(s0 + per, p.blocks);
  if (lane < s1 - s0) wait_flag(a.counters, s0 + lane, next);
  __syncwarp();
  const int row = lane & 15, half = lane >> 4;
  const S* shares = reinterpret_cast<const S*>(a.partial);
  for (int tile = blockIdx.x; tile < p.cp / kSliceTileCols; tile += p.blocks) {
    float s[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i] = 0.0f;
    if (row < p.m) {
      const S* q = shares + share_at<S>(p, s0 + half, row, tile * kSliceTileCols);
      const int64_t step = 2 * int64_t(p.m) * p.cp;  // two shares on
      uint4 v[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        v[u] = s0 + half + 2 * u < s1 ? slice::load_cg16(q + u * step) : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int u = 0; u < kLoads; ++u) add_values<S>(s, v[u]);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i] += __shfl_xor_sync(0xffffffffu, s[i], 16);
    float* mine = red + (warp * 16 + row) * 8;
    if (half == 0) {
      reinterpret_cast<float4*>(mine)[0] = make_float4(s[0], s[1], s[2], s[3]);
      reinterpret_cast<float4*>(mine)[1] = make_float4(s[4], s[5], s[6], s[7]);
    }
    __syncthreads();
    // Every warp of block 0 has seen its flags: every block has read this launch's number.
    if (blockIdx.x == 0 && threadIdx.x == 0 && tile == 0) *launch_number(a.counters) = next;
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
      for (int w = 0; w < 8; ++w) {
        const float4 lo = reinterpret_cast<const float4*>(red + (w * 16 + r) * 8)[0];
        const float4 hi = reinterpret_cast<const float4*>(red + (w * 16 + r) * 8)[1];
        y[0] += lo.x, y[1] += lo.y, y[2] += lo.z, y[3] += lo.w;
        y[4] += hi.x, y[5] += hi.y, y[6] += hi.z, y[7] += hi.w;
      }
      store_item(a, r, col, y, b);
    }
    __syncthreads();  // red again for the next tile
  }
}

}  // namespace fl::hidden_slice
