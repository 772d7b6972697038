// ln_mma_rows.cu's main loop with its addresses worked out once (LoopForm 4): the loop that
// multiplies the block's normalized rows of x (a resident panel in shared memory) by W's column
// tiles streamed through a 2-stage cp.async ring of 32 x 256.
//
// What changes against LoopForm 3 (the same slices, barriers, bias and warp placement): there each
// W tile recomputed every address from (tile, K-tile, lane): a division by the K-tiles a column
// tile, 64-bit products for the 4 copies, the swizzle and the panel's row products for 16
// ldmatrix. Nsight Compute showed that integer arithmetic, several times the mma, filled the
// issue slots of two warps a scheduler and its dependent chains ("wait" stalls) left the
// tensor pipe idle. Here:
//   - a thread's copies of a W tile are rows r0 + 8 j (j < 4) of one 16-byte chunk column, so
//     their shared-memory offsets are one swizzled offset plus constants, their global addresses
//     one pointer per W tile plus multiples of 8 rows;
//   - the A fragments' panel addresses are 4 registers (one a 16-row tile) plus the K offset,
//     the B fragments' stage offsets 4 registers (one an ldmatrix.x4.trans pair of 8-column
//     tiles) plus the stage and the k16 step (immediates);
//   - K-tiles and column tiles are counted, not divided out of a flat index.
// Per W tile and warp: 64 mma, 16 ldmatrix, 4 cp.async, one barrier of the slice's two warps and
// ~30 instructions of bookkeeping.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/gemm_core/tile_epilogue.cuh"
#include "kernels/layernorm_linear/ln_common.cuh"

namespace fl::layernorm_linear::lean {

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void copy16(unsigned dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
#endif
}
template <bool kTrans>
__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], unsigned addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  }
#endif
}

// This thread's part of every W tile (kDepth rows x the slice's kWN columns, copied by the
// slice's 32 kWarpsM threads): rows r0 + kRowStep j of chunk column `chunk`.
template <class Tile, int kDepth>
struct SliceCopy {
  using T = __nv_bfloat16;
  static constexpr int kPerRow = Tile::kWN / 8, kGroup = 32 * Tile::kWarpsM;
  static constexpr int kRowStep = kGroup / kPerRow, kCopies = kDepth / kRowStep;
  // Rows 8 apart share the swizzle: one offset and immediates; else (4 apart) one a row.
  static constexpr int kOffsets = kRowStep % 8 == 0 ? 1 : kCopies;
  static_assert(kGroup % kPerRow == 0 && kDepth % kRowStep == 0, "whole rows of chunks");
  const T* w;
  int64_t n, row_stride;  // row_stride: kRowStep rows of W
  int k, r0, col;
  unsigned s_off[kOffsets];  // bytes into a stage
  __device__ SliceCopy(const T* w_, int64_t n_, int k_)
      : w(w_), n(n_), row_stride(kRowStep * n_), k(k_) {
    const int warp = Tile::warp(), slice = warp % Tile::kWarpsN;
    const int i0 = (threadIdx.x & 31) + 32 * (warp / Tile::kWarpsN);
    const int chunk = slice * kPerRow + i0 % kPerRow;
    r0 = i0 / kPerRow;
    col = chunk * 8;
#pragma unroll
    for (int j = 0; j < kOffsets; ++j)
      s_off[j] = 2u * unsigned(Tile::b_at(r0 + j * kRowStep, chunk));
  }
  __device__ __forceinline__ unsigned offset(int j) const {
    return kOffsets == 1 ? s_off[0] + j * kRowStep * Tile::kBN * 2 : s_off[kOffsets == 1 ? 0 : j];
  }
  // W rows k0 .. k0 + kDepth - 1 of the column tile at n0 into the stage at byte address stage
  // (zeros past k and n), one commit group.
  __device__ __forceinline__ void issue(unsigned stage, int k0, int64_t n0) const {
    const bool col_ok = n0 + col < n;
    const int rows_left = k - k0 - r0;
    const T* src = w + (int64_t(k0) + r0) * n + n0 + col;
#pragma unroll
    for (int j = 0; j < kCopies; ++j) {
      const bool ok = col_ok && rows_left > j * kRowStep;
      copy16(stage + offset(j), ok ? src + j * row_stride : w, ok);
    }
  }
};

// The lane's ldmatrix addresses: A's 16-row tiles in the panel (K-tile 0, step 0) and B's pairs
// of 8-column tiles in a stage (step 0).
template <class Tile>
struct FragAddrs {
  static constexpr int kMT = Tile::kMT, kPairs = Tile::kNT / 2;
  unsigned a[kMT], b[kPairs];
  __device__ FragAddrs(const __nv_bfloat16* panel, int ld) {
    const int lane = threadIdx.x & 31, wm = Tile::warp_m(), wn = Tile::warp_n();
    const unsigned base = smem_u32(panel);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      a[mt] = base + 2u * unsigned((wm + mt * 16 + (lane & 15)) * ld + (lane >> 4) * 8);
    }
    const int r = (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int q = 0; q < kPairs; ++q) {
      b[q] = 2u * unsigned(Tile::b_at(r, (wn >> 3) + 2 * q + (lane >> 4)));
    }
  }
  // Step `step` of the K-tile at byte offset koff in the panel, from the stage at `stage`.
  __device__ __forceinline__ void load_a(typename Tile::FragSet& f, unsigned koff, int step) const {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) ldsm_x4<false>(f.a[mt], a[mt] + koff + step * 32);
  }
  __device__ __forceinline__ void load_b(typename Tile::FragSet& f, unsigned stage,
                                         int step) const {
#pragma unroll
    for (int q = 0; q < kPairs; ++q) {
      unsigned r[4];
      ldsm_x4<true>(r, stage + b[q] + step * 16 * Tile::kBN * 2);
      f.b[2 * q][0] = r[0], f.b[2 * q][1] = r[1], f.b[2 * q + 1][0] = r[2],
              f.b[2 * q + 1][1] = r[3];
    }
  }
};

// The block's column tiles blockIdx.x, + groups, ... (`tiles` of them), each over kts W tiles of
// kDepth rows; W tile 0 is already asked for (into stage 0). Ends with every copy waited for.
template <class Tile, int kDepth>
__device__ __forceinline__ void multiply(const LnArgs<__nv_bfloat16>& a,
                                         const SliceCopy<Tile, kDepth>& copy,
                                         const __nv_bfloat16* panel, int ld, __nv_bfloat16* ring,
                                         int kts, int groups, int tiles, int64_t m0) {
  constexpr int kSteps = kDepth / 16;
  constexpr unsigned kStageBytes = kDepth * Tile::kBN * 2;
  const FragAddrs<Tile> at(panel, ld);
  const unsigned ring0 = smem_u32(ring);
  const int slice = Tile::warp() % Tile::kWarpsN;
  const auto n0_of = [groups](int ct) { return int64_t(blockIdx.x + ct * groups) * Tile::kBN; };
  int p_kt = 1, p_ct = 0;  // the next W tile to ask for
  if (p_kt == kts) p_kt = 0, p_ct = 1;
  typename Tile::Acc acc;
  Tile::zero(acc);
  gemm_core::MmaColumnBias<Tile> bias;
  unsigned phase = 0;  // the stage W tile t is in: t % 2
  for (int ct = 0; ct < tiles; ++ct) {
    const int64_t n0 = n0_of(ct);
    for (int kt = 0; kt < kts; ++kt) {
      const unsigned koff = unsigned(kt) * kDepth * 2;
      typename Tile::FragSet f;
      at.load_a(f, koff, 0);
      tc::async_wait<0>();  // this thread's copies of W tile t; then the slice's other warp's
      asm volatile("bar.sync %0, %1;\n" ::"r"(1 + slice), "n"(32 * Tile::kWarpsM) : "memory");
      if (p_ct < tiles) copy.issue(ring0 + (phase ^ 1u) * kStageBytes, p_kt * kDepth, n0_of(p_ct));
      tc::async_commit();
      if (++p_kt == kts) p_kt = 0, ++p_ct;
      if (kt == kts - 1) bias.load(a.bias, a.n, n0);
      const unsigned stage = ring0 + phase * kStageBytes;
#pragma unroll
      for (int step = 0; step < kSteps; ++step) {
        if (step > 0) at.load_a(f, koff, step);
        at.load_b(f, stage, step);
        Tile::mma_all(acc, f);
      }
      phase ^= 1u;
    }
    bias.store_and_zero(acc, a.y, a.m, a.n, m0, n0);
  }
  tc::async_wait<0>();
}

}  // namespace fl::layernorm_linear::lean
