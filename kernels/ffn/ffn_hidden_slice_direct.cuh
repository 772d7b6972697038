// The hidden slice's ring form with x straight into registers (ring_direct; the plan's ring form
// where W1 is resident, 32 units a block, C a multiple of 8): no ring of x in shared memory, no
// barrier or cp.async wait a chunk.
//
// Against the ring form: the ring's up product is bound by each chunk's fixed instructions (the
// wait, the block barrier, x's copies, the slot's addresses) at 4 warps a scheduler, not by bytes
// (docs/PERFORMANCE.md has the profile and both forms measured). Here each warp
// loads its own A fragments from global memory (L2: every block reads all of x) with one 16-byte
// load a row per 32 of K, all of a warp's loads in flight at once, and multiplies them by W1's
// resident columns (direct_x.cuh: K permuted within 32-wide groups alike for x and W1): the block
// synchronizes once, when W1 is in.
// Tiles at C = 768, 64 tokens, 16 warps: warp w takes row tile w % 4 and K part w / 4 (6 groups
// of 32: 12 16-byte loads, 24 ldmatrix.x4.trans, 48 mma into 4 accumulators); the parts meet over
// W1's columns (slice::reduce_parts), then W2's rows are asked for over them, as in the ring
// (with w2_early_from, the plan's, W2's last rows lie in the unused slots and came with W1).
// Bytes: every block reads x's 96 KB from L2 (9.4 MB over 96 blocks, as the ring did), W1's 48
// KB slice from DRAM; no shared memory for x. FLOPs a block at 64 tokens: 2 x 64 x 768 x 32 =
// 3.1 M for the up product, as many for the down.
#pragma once

#include <cuda_runtime.h>

#include "kernels/activations.cuh"
#include "kernels/ffn/direct_x.cuh"
#include "kernels/ffn/ffn_hidden_slice_ring.cuh"
#include "kernels/gemm_core/weight_slice.cuh"

namespace fl::hidden_slice {

// h[:, slice] = GELU(x W1[:, slice] + b1) with x's fragments loaded straight into registers
// (the plan's ring_direct; direct_x.cuh): a warp's first batches of loads are asked for before
// W1's copies are waited on; first_in() runs once W1 is in. Then, as the ring's, the parts meet
// over W1's columns, h is written and W2's rows are asked for over W1 (one commit group; with
// w2_early_from, W2's last rows came with W1). Ends with the block synchronized.
template <int kW, typename T, class FirstIn>
__device__ __forceinline__ void direct_up_product(const SliceArgs<T>& a, unsigned char* smem, T* hs,
                                                  int j0, int valid, const FirstIn& first_in) {
  constexpr int kThr = 32 * kW;
  const FfnSlicePlan& p = a.p;
  const slice::PanelWarp pw = slice::panel_warp<kW>(p.mtc);
  const int groups = (p.c + direct::kGroupK - 1) / direct::kGroupK;
  const int q0 = pw.part < pw.parts ? groups * pw.part / pw.parts : 0;
  const int q1 = pw.part < pw.parts ? groups * (pw.part + 1) / pw.parts : 0;
  float acc[4][4];
  slice::zero(acc);
  direct::warp_product<4>(acc, a.x, p.c, p.m, pw.mt, q0, q1,
                          reinterpret_cast<const T*>(smem + p.off_w1), p.ld_w1, p.direct_deep, [&] {
                            tc::async_wait<0>();  // b1 and W1 (and W2's early rows)
                            __syncthreads();
                            first_in();
                          });
  const T* b1s = reinterpret_cast<const T*>(smem + p.off_bias);
  const auto to_h = [&](int row, int col, float v) {
    const float h = col < valid ? gelu_tanh_fast(v + Elem<T>::to_float(b1s[col])) : 0.0f;
    hs[row * p.ld_h + col] = Elem<T>::from_float(h);
  };
  slice::reduce_parts<4, kW>(acc, pw, p.mtc, 4, reinterpret_cast<float*>(smem + p.off_red), to_h,
                             p.m);
  ring_w2_rows<kThr>(a, smem, 0, p.w2_early_from > 0 ? p.w2_early_from : p.kp, j0, valid);
  tc::async_commit();
}

}  // namespace fl::hidden_slice
