// The hidden-slice FFN's ring form (x_ring; kernels/ffn/ffn_hidden_slice.cu, plan in
// ffn_hidden_slice_plan.h): where x's rows do not fit beside the block's slices (an RTX 30/40
// card's 99 KiB a block at 33-64 bf16 tokens: x's 64 rows alone are 96 KB), x and W1's columns
// stream through a cp.async ring in K chunks instead of being held whole.
//
// What changes against the resident form: the up product runs chunk by chunk as the copies land
// (K is not split among warps: warp w takes row tile w / jr and 1-4 of the slice's column tiles
// over the whole of K, jr warps a row tile, so no partial sums meet in shared memory), and W2's
// rows, resident for the down product, are asked for a share with each chunk's copies (rows
// [kp i / n, kp (i + 1) / n) with chunk i of n), so that the last chunk brings W2's last rows:
// each SM's copy stream stays busy from the first request to the last byte.
// Tiles at C = 768, 64 tokens, 32 units a block (96 blocks on 132 SMs): a slot is x's 64 rows x
// 64 of K (9 KB, rows padded to 72) and W1's 64 rows x 32 units (5 KB); 3 slots (42 KB) beside
// W2's 32 rows (49 KB), h (5 KB) and b1: 96 KB. 12 chunks; a chunk's group asks for ~17 KB
// (x 8 KB from L2, W1 4 KB and W2's 2-3 rows 4-5 KB from DRAM), two in flight while one is
// multiplied.
// Napkin math at 64 tokens, C = 768: the weights are 9.4 MB (3.1 us at 3 TB/s), 98 KB a block,
// and x's 96 KB comes from L2 to each of the 96 blocks (9.4 MB of L2 reads); a block's copy
// stream is then ~195 KB (~8 us at the ~25 GB/s an SM's share of DRAM gives, less where x's part
// comes from L2 faster). The up product is 64 x 768 x 32 x 2 = 3.1 MFLOP a block (768 mma of
// m16n8k16, 96 a warp with 8 warps), hidden under the copies; the down product the same after
// the last byte. What bounds this form beyond the copies: the shares of y, 96 x 64 x 768 x 2 B =
// 9.4 MB written to L2 and read back after the grid barrier, as many bytes as the weights.
#pragma once

#include <cuda_runtime.h>

#include "kernels/activations.cuh"
#include "kernels/ffn/ffn_hidden_slice_steps.cuh"
#include "kernels/gemm_core/weight_slice.cuh"

namespace fl::hidden_slice {

// Chunk i's slot: x's rows and W1's rows of K [ring_k i, ring_k (i + 1)).
template <typename T>
__device__ __forceinline__ T* ring_x(const FfnSlicePlan& p, unsigned char* smem, int i) {
  return reinterpret_cast<T*>(smem + p.off_x + size_t(i % p.ring_stages) * p.ring_stage_bytes);
}
template <typename T>
__device__ __forceinline__ T* ring_w1(const FfnSlicePlan& p, unsigned char* smem, int i) {
  return reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(ring_x<T>(p, smem, i)) +
                              p.ring_x_bytes);
}

// Chunk i's copies (x's columns, W1's rows, W2's share of rows; with chunk 0 b1's slice) as one
// commit group; past the last chunk an empty group, so that every thread counts the same groups.
template <int kThr, typename T>
__device__ __forceinline__ void ring_stage(const SliceArgs<T>& a, unsigned char* smem, int i,
                                           int j0, int valid) {
  const FfnSlicePlan& p = a.p;
  if (i < p.ring_chunks) {
    const int k0 = i * p.ring_k, kv = min(p.ring_k, p.c - k0);  // kv >= 1: k0 < ck <= c + 15
    if (i == 0) {
      T* b1s = reinterpret_cast<T*>(smem + p.off_bias);
      constexpr int E = slice::kChunk<T>;
      slice::stage<kThr>(b1s, 0, a.b1 + j0, 0, 1, p.units, 1, valid, a.b1_vec && valid % E == 0);
    }
    slice::stage<kThr>(ring_x<T>(p, smem, i), p.ld_xr, a.x + k0, p.c, p.m, p.ring_k, p.m, kv,
                       a.x_vec);
    slice::stage<kThr>(ring_w1<T>(p, smem, i), p.ld_w1, a.w1 + int64_t(k0) * p.h + j0, p.h,
                       p.ring_k, p.units, kv, valid, a.w1_vec);
    const int r0 = p.kp * i / p.ring_chunks, r1 = p.kp * (i + 1) / p.ring_chunks;
    if (r1 > r0) {
      T* w2s = reinterpret_cast<T*>(smem + p.off_w2) + r0 * p.ld_w2;
      const int rows_valid = valid - r0;  // W2's zero rows past the slice (to kp) stay zero
      const T* src = rows_valid > 0 ? a.w2 + int64_t(j0 + r0) * p.c : a.w2;
      slice::stage<kThr>(w2s, p.ld_w2, src, p.c, r1 - r0, p.cp, rows_valid, p.c, a.w2_vec);
    }
  }
  tc::async_commit();
}

// The first ring_stages - 1 chunks' copies asked for; the slots' x rows past the tokens (never
// copied) and h zeroed.
template <int kThr, typename T>
__device__ __forceinline__ void ring_issue(const SliceArgs<T>& a, unsigned char* smem, T* hs,
                                           int j0, int valid) {
  const FfnSlicePlan& p = a.p;
  for (int i = 0; i + 1 < p.ring_stages; ++i) ring_stage<kThr>(a, smem, i, j0, valid);
  const int row_chunks = p.ld_xr * int(sizeof(T)) / 16, pad_rows = 16 * p.mtc - p.m;
  const int nx = pad_rows * row_chunks, per_slot = nx;
  const int n = p.ring_stages * per_slot + 16 * p.mtc * p.ld_h * int(sizeof(T)) / 16;
  uint4* zh = reinterpret_cast<uint4*>(hs);
  for (int i = threadIdx.x; i < n; i += kThr) {
    if (i < p.ring_stages * per_slot) {
      uint4* zx = reinterpret_cast<uint4*>(ring_x<T>(p, smem, i / per_slot) + p.m * p.ld_xr);
      zx[i % per_slot] = make_uint4(0, 0, 0, 0);
    } else {
      zh[i - p.ring_stages * per_slot] = make_uint4(0, 0, 0, 0);
    }
  }
}

// h[:, slice] = GELU(x W1[:, slice] + b1) through the ring: chunk i is multiplied once every
// thread's copies of it are in, after chunk i + stages - 1 is asked for into the slot chunk
// i - 1 left. first_in() runs once the first chunk is in. Warp w takes row tile w / jr and
// column tiles [per q, per (q + 1)) of the slice (q = w % jr; jr of 1, 2 or 4 warps a row tile,
// the most the warps allow). Ends with the block synchronized, h written.
template <int kW, typename T, class FirstIn>
__device__ __forceinline__ void ring_up_product(const SliceArgs<T>& a, unsigned char* smem,
                                                T* hs, int j0, int valid, const FirstIn& first_in) {
  constexpr int kThr = 32 * kW;
  const FfnSlicePlan& p = a.p;
  const int tiles = p.units / 8, warp = threadIdx.x >> 5;
  int jr = 4;
  while (jr > 1 && jr * p.mtc > kW) jr /= 2;
  const int per = (tiles + jr - 1) / jr, mt = warp / jr, nt0 = (warp % jr) * per;
  const int ntc = mt < p.mtc ? max(0, min(per, tiles - nt0)) : 0;
  float acc[4][4];
  slice::zero(acc);
  for (int i = 0; i < p.ring_chunks; ++i) {
    slice::wait_pending<kSliceRingMaxStages - 2>(p.ring_stages - 2);  // chunk i is in
    __syncthreads();  // ... every thread's part of it; every warp done with chunk i - 1's slot
    if (i == 0) first_in();
    ring_stage<kThr>(a, smem, i + p.ring_stages - 1, j0, valid);
    if (ntc > 0) {
      slice::WarpMma<T, 4>::run(acc, ntc, ring_x<T>(p, smem, i) + mt * 16 * p.ld_xr, p.ld_xr,
                                ring_w1<T>(p, smem, i) + nt0 * 8, p.ld_w1, 0, p.ring_k);
    }
  }
  // h's rows past the tokens and columns past the slice stay zero (ring_issue).
  const T* b1s = reinterpret_cast<const T*>(smem + p.off_bias);
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    if (nt >= ntc) break;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = mt * 16 + g + 8 * (e >> 1), col = (nt0 + nt) * 8 + 2 * t + (e & 1);
      if (row >= p.m) continue;
      const float v =
          col < valid ? gelu_tanh_fast(acc[nt][e] + Elem<T>::to_float(b1s[col])) : 0.0f;
      hs[row * p.ld_h + col] = Elem<T>::from_float(v);
    }
  }
  __syncthreads();
}

}  // namespace fl::hidden_slice
