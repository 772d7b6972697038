// x's A fragments straight from global memory into registers for mma.sync m16n8k16 (bf16), B
// (W1's columns) by ldmatrix from shared memory: the hidden slice's ring_direct
// (ffn_hidden_slice_direct.cuh) and ffn_two_phase's direct up tiles use it.
// The trick: the sum over K does not care about K's order, so K is permuted within each 32-wide
// group the same way for A and B. Lane (g, t) loads x[row][32 q + 8 t .. + 8): 4 words, each a
// pair of K. Word (j + t) mod 4 goes to slot j: slot 0 A's a0 / a1 of the group's first k step
// (rows g / g + 8), slot 1 its a2 / a3, slots 2 and 3 the same of the second step. B's ldmatrix
// takes its 8 row addresses per 8 x 8 matrix from the lanes, so its row i (= 2 t' + e) of step s,
// half h is W1's row 32 q + 8 t' + 2 ((2 s + h + t') mod 4) + e: the same pairs. The rotation by
// t puts those 8 rows into 8 different 16-byte bank groups at 80-byte rows (the hidden slice's 32
// units padded to 40) and 48-byte rows (24 columns unpadded); without it rows 0, 1, 8, 9, ...
// would be a 4-way conflict at 80 bytes.
// Per 32 of K a warp: 2 16-byte loads a lane, 4 ldmatrix (x4 or x2 .trans), 6-8 mma.
// The first batch of loads is the caller's to ask for (x_lane, load_batch; warp_product does it
// just before W1's wait): the exchange's fixed kernel asks for it before anything else (and
// multiplies its warp's two batches unrolled: warp_product_two, load_batch_in), since in
// its SASS (sm_90a, CUDA 13.0) ptxas had moved these ld.global.nc past the cp.async wait and the
// block's barrier, so that x's L2 latency followed W1's instead of overlapping it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gemm_core/weight_slice.cuh"

namespace fl {
namespace direct {

constexpr int kGroupK = 32;  // K a lane's 16-byte load covers with its row's 3 other lanes
constexpr int kBatch = 3;    // groups a batch of loads; two batches in flight (deep: from before
                             // W1 is waited on; else the second asked for after it)

// Word j of the result is word (j + t) mod 4 of v.
__device__ __forceinline__ uint4 rotate(uint4 v, int t) {
  const uint4 r = (t & 1) ? make_uint4(v.y, v.z, v.w, v.x) : v;
  return (t & 2) ? make_uint4(r.z, r.w, r.x, r.y) : r;
}

// Rows g and g + 8 of the warp's row tile, a group's 8 K values each.
struct Rows {
  uint4 lo, hi;
};

// The lane's rows of x: rows g and g + 8 of the warp's row tile (lo_ok / hi_ok: the row is a
// token; else the pointer is x's first row, never read), and t, its 16-byte piece of a group.
struct XLane {
  const __nv_bfloat16 *lo, *hi;
  bool lo_ok, hi_ok;
  int t;
};
__device__ __forceinline__ XLane x_lane(const __nv_bfloat16* x, int c, int m, int mt) {
  const int lane = threadIdx.x & 31, r_lo = mt * 16 + (lane >> 2), r_hi = r_lo + 8;
  XLane l;
  l.lo_ok = r_lo < m, l.hi_ok = r_hi < m, l.t = lane & 3;
  l.lo = x + (l.lo_ok ? int64_t(r_lo) * c : 0);
  l.hi = x + (l.hi_ok ? int64_t(r_hi) * c : 0);
  return l;
}

// The lane's loads of groups [q, q + kBatch) within [q, q1) (zero past C and past the tokens).
__device__ __forceinline__ void load_batch(Rows (&r)[kBatch], const XLane& l, int q, int q1,
                                           int c) {
#pragma unroll
  for (int b = 0; b < kBatch; ++b) {
    const int k = (q + b) * kGroupK + 8 * l.t;
    const bool in = q + b < q1 && k < c;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    r[b].lo = in && l.lo_ok ? __ldg(reinterpret_cast<const uint4*>(l.lo + k)) : zero;
    r[b].hi = in && l.hi_ok ? __ldg(reinterpret_cast<const uint4*>(l.hi + k)) : zero;
  }
}

// The lane's loads of groups [q, q + kBatch), every one inside C (the caller's word), with no
// test: a lane whose row is past the tokens reads x's first row (x_lane's pointer), which only
// reaches the product's rows past the tokens, never stored.
__device__ __forceinline__ void load_batch_in(Rows (&r)[kBatch], const XLane& l, int q) {
#pragma unroll
  for (int b = 0; b < kBatch; ++b) {
    const int k = (q + b) * kGroupK + 8 * l.t;
    r[b].lo = __ldg(reinterpret_cast<const uint4*>(l.lo + k));
    r[b].hi = __ldg(reinterpret_cast<const uint4*>(l.hi + k));
  }
}

// acc[nt] += the batch's groups from q on (those below q1) times W1's kTiles column tiles (3 or
// 4); b_lane[s]: the lane's ldmatrix address of step s in group 0, group_bytes: 32 rows of W1.
template <int kTiles>
__device__ __forceinline__ void mma_batch(float (&acc)[4][4], const Rows (&r)[kBatch], int q,
                                          int q1, int t, const unsigned (&b_lane)[2],
                                          unsigned group_bytes) {
  static_assert(kTiles == 3 || kTiles == 4, "3 or 4 column tiles a warp");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using Mma = slice::WarpMma<__nv_bfloat16, 4>;
#pragma unroll
  for (int b = 0; b < kBatch; ++b) {
    if (q + b >= q1) break;
    const uint4 lo = rotate(r[b].lo, t), hi = rotate(r[b].hi, t);
    const unsigned at = unsigned(q + b) * group_bytes;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      unsigned f[2][4];
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(f[0][0]), "=r"(f[0][1]), "=r"(f[0][2]), "=r"(f[0][3])
                   : "r"(b_lane[s] + at));
      if constexpr (kTiles == 4) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(f[1][0]), "=r"(f[1][1]), "=r"(f[1][2]), "=r"(f[1][3])
                     : "r"(b_lane[s] + at + 32));
      } else {  // the third tile: matrices 0 and 1 of lanes 0-15's addresses
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(f[1][0]), "=r"(f[1][1])
                     : "r"(b_lane[s] + at + 32));
      }
      const unsigned a0 = s ? lo.z : lo.x, a2 = s ? lo.w : lo.y;
      const unsigned a1 = s ? hi.z : hi.x, a3 = s ? hi.w : hi.y;
      Mma::mma(acc[0], a0, a1, a2, a3, f[0][0], f[0][1]);
      Mma::mma(acc[1], a0, a1, a2, a3, f[0][2], f[0][3]);
      Mma::mma(acc[2], a0, a1, a2, a3, f[1][0], f[1][1]);
      if constexpr (kTiles == 4) Mma::mma(acc[3], a0, a1, a2, a3, f[1][2], f[1][3]);
    }
  }
#else
  __trap();  // bf16 needs compute capability 8.0 (the lessons do not offer it below)
#endif
}

// One warp's product: acc[nt] += x[16 mt .., 32 q0 .. 32 q1) W1s[same rows, 8 kTiles columns],
// x in global memory (m rows of c, c a multiple of 8, 16-byte aligned; l = x_lane(...)), W1's
// rows in shared memory at w1s (row stride ld elements, rows zero past c to a whole group), cur
// the first batch of loads (load_batch at q0), asked for by the caller; with deep the second is
// asked for here, then ready() runs (the caller's wait for W1 and barrier), then the batches are
// multiplied, the next one asked for ahead of each.
// The lane's ldmatrix addresses of W1's rows (w1s, row stride ld) for the two k steps of group 0
// (see the header): matrix L / 8 of the x4, row L % 8.
__device__ __forceinline__ void b_lanes(unsigned (&b_lane)[2], const __nv_bfloat16* w1s, int ld) {
  const int lane = threadIdx.x & 31;
  const int i = lane & 7, hh = (lane >> 3) & 1, tt = i >> 1;
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int row = 8 * tt + 2 * ((2 * s + hh + tt) & 3) + (i & 1);
    b_lane[s] = unsigned(__cvta_generic_to_shared(w1s + row * ld + (lane >> 4) * 8));
  }
}

template <int kTiles, class Ready>
__device__ __forceinline__ void warp_product_from(float (&acc)[4][4], const XLane& l,
                                                  Rows (&cur)[kBatch], int c, int q0, int q1,
                                                  const __nv_bfloat16* w1s, int ld, bool deep,
                                                  const Ready& ready) {
  using T = __nv_bfloat16;
  Rows next[kBatch];
  if (deep) load_batch(next, l, q0 + kBatch, q1, c);
  unsigned b_lane[2];
  b_lanes(b_lane, w1s, ld);
  const unsigned group_bytes = unsigned(kGroupK * ld * sizeof(T));
  ready();
  for (int q = q0; q < q1; q += kBatch) {
    if (!deep) load_batch(next, l, q + kBatch, q1, c);
    mma_batch<kTiles>(acc, cur, q, q1, l.t, b_lane, group_bytes);
#pragma unroll
    for (int b = 0; b < kBatch; ++b) cur[b] = next[b];
    if (deep) load_batch(next, l, q + 2 * kBatch, q1, c);
  }
}

// warp_product_from's product over exactly two batches, groups [q0, q0 + 2 kBatch), all inside C
// (first: load_batch_in at q0): no loop, no tests of the groups or rows (load_batch_in), the
// second batch asked for after ready() into registers of its own (no copies between batches),
// then between() (the caller's other asks, behind the loads) before the first batch's mma.
template <int kTiles, class Ready, class Between>
__device__ __forceinline__ void warp_product_two(float (&acc)[4][4], const XLane& l,
                                                 const Rows (&first)[kBatch], int q0,
                                                 const __nv_bfloat16* w1s, int ld,
                                                 const Ready& ready, const Between& between) {
  unsigned b_lane[2];
  b_lanes(b_lane, w1s, ld);
  const unsigned group_bytes = unsigned(kGroupK * ld * sizeof(__nv_bfloat16));
  ready();
  Rows second[kBatch];
  load_batch_in(second, l, q0 + kBatch);
  between();
  mma_batch<kTiles>(acc, first, q0, q0 + kBatch, l.t, b_lane, group_bytes);
  mma_batch<kTiles>(acc, second, q0 + kBatch, q0 + 2 * kBatch, l.t, b_lane, group_bytes);
}

// The same with the first batch asked for here.
template <int kTiles, class Ready>
__device__ __forceinline__ void warp_product(float (&acc)[4][4], const __nv_bfloat16* x, int c,
                                             int m, int mt, int q0, int q1,
                                             const __nv_bfloat16* w1s, int ld, bool deep,
                                             const Ready& ready) {
  const XLane l = x_lane(x, c, m, mt);
  Rows cur[kBatch];
  load_batch(cur, l, q0, q1, c);
  warp_product_from<kTiles>(acc, l, cur, c, q0, q1, w1s, ld, deep, ready);
}

}  // namespace direct
}  // namespace fl
