// The hidden slice's ring form with x straight into registers (ring_direct; the plan's ring form
// where W1 is resident, 32 units a block, C a multiple of 8): no ring of x in shared memory, no
// barrier or cp.async wait a chunk.
//
// Why: the ring's up product measured ~0.74 us a 64-wide K chunk at 64 tokens (12 chunks, 8.8
// us), bound by each chunk's fixed instructions (the wait, the block barrier, x's copies, the
// slot's addresses) at 4 warps a scheduler, not by bytes (docs/PERFORMANCE.md). Here each warp
// loads its own A fragments from global memory (L2: every block reads all of x) with one 16-byte
// load a row per 32 of K, all of a warp's loads in flight at once, and multiplies them by W1's
// resident columns: the block synchronizes once, when W1 is in.
// The trick: the sum over K does not care about K's order, so K is permuted within each 32-wide
// group the same way for A and B. Lane (g, t) loads x[row][32 q + 8 t .. + 8): 4 words, each a
// pair of K. Word (j + t) mod 4 goes to slot j: slot 0 A's a0 / a1 of the group's first k step
// (rows g / g + 8), slot 1 its a2 / a3, slots 2 and 3 the same of the second step. B's ldmatrix
// takes its 8 row addresses per 8 x 8 matrix from the lanes, so its row i (= 2 t' + e) of step s,
// half h is W1's row 32 q + 8 t' + 2 ((2 s + h + t') mod 4) + e: the same pairs. The rotation by
// t puts those 8 rows into 8 different 16-byte bank groups at the plan's 80-byte rows (without
// it, rows 0, 1, 8, 9, ... would be a 4-way conflict).
// Tiles at C = 768, 64 tokens, 16 warps: warp w takes row tile w % 4 and K part w / 4 (6 groups
// of 32: 12 16-byte loads, 24 ldmatrix.x4.trans, 48 mma into 4 accumulators); the parts meet over
// W1's columns (slice::reduce_parts), then W2's rows are asked for over them, as in the ring
// (with w2_early_from, a tuning, W2's last rows lie in the unused slots and came with W1).
// Bytes: every block reads x's 96 KB from L2 (9.4 MB over 96 blocks, as the ring did), W1's 48
// KB slice from DRAM; no shared memory for x.
#pragma once

#include <cuda_runtime.h>

#include "kernels/activations.cuh"
#include "kernels/ffn/ffn_hidden_slice_ring.cuh"
#include "kernels/gemm_core/weight_slice.cuh"

namespace fl::hidden_slice {
namespace direct {

constexpr int kGroupK = 32;  // K a lane's 16-byte load covers with its row's 3 other lanes
constexpr int kBatch = 3;  // groups a batch of loads; two batches in flight (direct_deep: from
                           // before W1 is waited on; else the second asked for after it)

// Word j of the result is word (j + t) mod 4 of v.
__device__ __forceinline__ uint4 rotate(uint4 v, int t) {
  const uint4 r = (t & 1) ? make_uint4(v.y, v.z, v.w, v.x) : v;
  return (t & 2) ? make_uint4(r.z, r.w, r.x, r.y) : r;
}

// Rows g and g + 8 of the warp's row tile, a group's 8 K values each.
struct Rows {
  uint4 lo, hi;
};

// The lane's loads of groups [q, q + kBatch) within [q, q1) (zero past C and past the tokens).
template <typename T>
__device__ __forceinline__ void load_batch(Rows (&r)[kBatch], const T* x_lo, const T* x_hi,
                                           bool lo_ok, bool hi_ok, int q, int q1, int c, int t) {
#pragma unroll
  for (int b = 0; b < kBatch; ++b) {
    const int k = (q + b) * kGroupK + 8 * t;
    const bool in = q + b < q1 && k < c;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    r[b].lo = in && lo_ok ? __ldg(reinterpret_cast<const uint4*>(x_lo + k)) : zero;
    r[b].hi = in && hi_ok ? __ldg(reinterpret_cast<const uint4*>(x_hi + k)) : zero;
  }
}

// acc[nt] += the batch's groups from q on (those below q1) times W1's columns; b_lane[s]: the
// lane's ldmatrix address of step s in group 0, group_bytes: 32 rows of W1.
__device__ __forceinline__ void mma_batch(float (&acc)[4][4], const Rows (&r)[kBatch], int q,
                                          int q1, int t, const unsigned (&b_lane)[2],
                                          unsigned group_bytes) {
  using Mma = slice::WarpMma<__nv_bfloat16, 4>;
#pragma unroll
  for (int b = 0; b < kBatch; ++b) {
    if (q + b >= q1) break;
    const uint4 lo = rotate(r[b].lo, t), hi = rotate(r[b].hi, t);
    const unsigned at = unsigned(q + b) * group_bytes;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      unsigned f[2][4];
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(f[np][0]), "=r"(f[np][1]), "=r"(f[np][2]), "=r"(f[np][3])
                     : "r"(b_lane[s] + at + np * 32));
      }
      const unsigned a0 = s ? lo.z : lo.x, a2 = s ? lo.w : lo.y;
      const unsigned a1 = s ? hi.z : hi.x, a3 = s ? hi.w : hi.y;
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        Mma::mma(acc[2 * np], a0, a1, a2, a3, f[np][0], f[np][1]);
        Mma::mma(acc[2 * np + 1], a0, a1, a2, a3, f[np][2], f[np][3]);
      }
    }
  }
}

}  // namespace direct

// h[:, slice] = GELU(x W1[:, slice] + b1) with x's fragments loaded straight into registers
// (the plan's ring_direct): the first batch of a warp's loads is asked for before W1's copies
// are waited on; first_in() runs once W1 is in. Then, as the ring's, the parts meet over W1's
// columns, h is written and W2's rows are asked for over W1 (one commit group). Ends with the
// block synchronized.
template <int kW, typename T, class FirstIn>
__device__ __forceinline__ void direct_up_product(const SliceArgs<T>& a, unsigned char* smem,
                                                  T* hs, int j0, int valid,
                                                  const FirstIn& first_in) {
  using direct::kBatch;
  using direct::kGroupK;
  constexpr int kThr = 32 * kW;
  const FfnSlicePlan& p = a.p;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const slice::PanelWarp pw = slice::panel_warp<kW>(p.mtc);
  const int groups = (p.c + kGroupK - 1) / kGroupK;
  const int q0 = pw.part < pw.parts ? groups * pw.part / pw.parts : 0;
  const int q1 = pw.part < pw.parts ? groups * (pw.part + 1) / pw.parts : 0;
  const int r_lo = pw.mt * 16 + g, r_hi = r_lo + 8;
  const bool lo_ok = r_lo < p.m, hi_ok = r_hi < p.m;
  const T* x_lo = a.x + (lo_ok ? int64_t(r_lo) * p.c : 0);
  const T* x_hi = a.x + (hi_ok ? int64_t(r_hi) * p.c : 0);
  // The first batch's loads (with direct_deep the second's too) before W1 is waited on.
  direct::Rows cur[kBatch], next[kBatch];
  direct::load_batch(cur, x_lo, x_hi, lo_ok, hi_ok, q0, q1, p.c, t);
  if (p.direct_deep) direct::load_batch(next, x_lo, x_hi, lo_ok, hi_ok, q0 + kBatch, q1, p.c, t);
  // The lane's ldmatrix rows of each step (see the header): matrix L / 8 of the x4, row L % 8.
  const int i = lane & 7, hh = (lane >> 3) & 1, tt = i >> 1;
  const T* w1s = reinterpret_cast<const T*>(smem + p.off_w1);
  unsigned b_lane[2];
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int row = 8 * tt + 2 * ((2 * s + hh + tt) & 3) + (i & 1);
    b_lane[s] = unsigned(__cvta_generic_to_shared(w1s + row * p.ld_w1 + (lane >> 4) * 8));
  }
  const unsigned group_bytes = unsigned(kGroupK * p.ld_w1 * sizeof(T));
  float acc[4][4];
  slice::zero(acc);
  tc::async_wait<0>();  // b1 and W1 (the only group before the up product)
  __syncthreads();
  first_in();
  for (int q = q0; q < q1; q += kBatch) {
    if (!p.direct_deep) direct::load_batch(next, x_lo, x_hi, lo_ok, hi_ok, q + kBatch, q1, p.c, t);
    direct::mma_batch(acc, cur, q, q1, t, b_lane, group_bytes);
#pragma unroll
    for (int b = 0; b < kBatch; ++b) cur[b] = next[b];
    if (p.direct_deep) {
      direct::load_batch(next, x_lo, x_hi, lo_ok, hi_ok, q + 2 * kBatch, q1, p.c, t);
    }
  }
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
