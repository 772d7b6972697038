// The exchange's down product (ffn_hidden_slice_exchange.cuh) with its index math worked out
// while the group's barrier is awaited, as the hidden slice's own down product does during the
// copies (ffn_hidden_slice_down.cuh, DownJob): the same tiles and stores, fewer instructions a
// warp.
//
// Tiles at 64 tokens, C = 768, groups of 8, 16 warps: the group's h (64 x 256, row stride ld_hx)
// times W2's tile (256 x 96, ld_w2x) in shared memory; warp w takes row tile w / 4 and column
// tiles 3 (w % 4) .. 3 (w % 4) + 2 (kExNT = 3) over K = 256: 16 k steps of one ldmatrix.x4 of h,
// one ldmatrix.x4.trans and one .x2.trans of W2 and 3 mma (48 mma a warp), the next step's
// fragments asked for before this step's mma. Data path: shared memory -> ldmatrix -> mma.sync
// m16n8k16 -> registers -> bf16 pairs into share g in L2 (tile-major: a store instruction writes
// 8 rows of one tile, 128 contiguous bytes; row g + 8 is 128 bytes past row g).
// Worked out ahead (ExDownAhead, between the warp's arrival at the group's barrier and the wait):
// the job's row and column tiles (the divisions by the jobs' counts), ldmatrix's lane addresses,
// the store pointer and whether its rows are tokens; the group's h copy too (ExHCopy). Left for
// after the barrier (sm_90a SASS of 2026-11-27): ~200 instructions a warp, ~8.5 a k step and the
// 6 stores, no per-tile tests, against ~800 in ex_down's general loop (~110 of set-up with three
// divisions, ~65 for the job, ~30 a k step with the per-tile tests, ~130 for the stores' 64-bit
// addresses and tests).
// Budget a block: 16 warps x 48 mma x 4 KFLOP = 3.1 MFLOP (~0.7 us at mma.sync's rate); shared
// memory read by ldmatrix 16 warps x 16 steps x 1,280 B = 328 KB (~2,560 clocks at 128 B a
// clock: the bound once the instructions are gone, ~1.4 us).
// The set-up hides only where a block waits at the barrier longer than it takes
// (docs/PERFORMANCE.md has the phases). Where a warp's job is not one of exactly kExNT whole tiles
// (other C, 8 warps, groups of 4), the exchange runs ex_down's general loop.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/ffn/ffn_hidden_slice_steps.cuh"
#include "kernels/gemm_core/weight_slice.cuh"

namespace fl::hidden_slice {

// The block's group and tile: group g (blocks [G g, G g + G)), j = b mod G; the group's hidden
// units [kh g, kh g + kh), y's columns [n0, n0 + nc).
struct ExTile {
  int g, j, kh, nc, n0;
};
__device__ __forceinline__ ExTile ex_tile(const FfnSlicePlan& p) {
  ExTile t;
  t.g = int(blockIdx.x) / p.ex_group, t.j = int(blockIdx.x) % p.ex_group;
  t.kh = 32 * p.ex_group, t.nc = p.cp / p.ex_group, t.n0 = t.j * t.nc;
  return t;
}

// The down product's split of the group's share among kW warps: row tiles x col_jobs jobs of
// cpj column tiles (the last job may have fewer).
struct ExJobs {
  int nct, cpj, col_jobs;
};
template <int kW>
__device__ __forceinline__ ExJobs ex_jobs(const FfnSlicePlan& p, const ExTile& t) {
  ExJobs s;
  s.nct = t.nc / 8;
  const int per_row = max(1, kW / p.mtc);
  s.cpj = min(4, (s.nct + per_row - 1) / per_row), s.col_jobs = (s.nct + s.cpj - 1) / s.cpj;
  return s;
}

constexpr int kExNT = 3;  // the column tiles of a job on the fast path (C = 768, 16 warps)

// A warp's job, worked out ahead: fast when the block's jobs are one a warp at most, each of
// exactly kExNT whole tiles starting on a tile of the shares (then `on`: the warp has one).
struct ExDownAhead {
  unsigned a_addr, b_addr, b_step;  // ldmatrix's lane addresses at k = 0; 16 rows of W2's tile
  int k_steps, tile_step;           // K / 16; from a tile of the share to the next (values)
  __nv_bfloat16* out;               // the lane's row g, columns 2t, 2t + 1 of the job's first tile
  bool fast, on, row0, row8;        // row0 / row8: rows g / g + 8 of the tile are tokens
};

template <int kW, typename T>
__device__ __forceinline__ ExDownAhead ex_down_ahead(const SliceArgs<T>& a, const T* hx,
                                                     const T* w2x, const ExTile& t) {
  using S = __nv_bfloat16;
  const FfnSlicePlan& p = a.p;
  const ExJobs s = ex_jobs<kW>(p, t);
  ExDownAhead d;
  d.fast = sizeof(T) == 2 && s.cpj == kExNT && s.nct == s.cpj * s.col_jobs &&
           p.mtc * s.col_jobs <= kW && t.n0 % 8 == 0;
  const int w = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int mt = w / s.col_jobs, ct0 = (w % s.col_jobs) * s.cpj;
  d.on = mt < p.mtc;
  const int mt_in = d.on ? mt : 0;  // addresses inside the tiles either way
  d.a_addr = slice::WarpMma<T, 4>::a_lane(hx + mt_in * 16 * p.ld_hx, p.ld_hx, 0);
  d.b_addr = slice::WarpMma<T, 4>::b_lane(w2x + ct0 * 8, p.ld_w2x, 0);
  d.b_step = 16u * p.ld_w2x * sizeof(T);
  d.k_steps = t.kh / 16;
  d.tile_step = share_tile_step<S>(p);
  const int row = mt_in * 16 + (lane >> 2);
  d.out =
      reinterpret_cast<S*>(a.partial) + share_at<S>(p, t.g, row, t.n0 + ct0 * 8 + 2 * (lane & 3));
  d.row0 = row < p.m, d.row8 = row + 8 < p.m;
  return d;
}

// The group's h (m rows x kh, L2) into its tile in shared memory (row stride ld_hx), worked out
// ahead where the block's threads divide a row's 16-byte chunks (kh / 8 = 32 at groups of 8):
// then thread i copies chunk i mod chunks of rows i / chunks, + kThr / chunks, ...: one pointer,
// one shared address and a count, where slice::stage works its rows and columns out after the
// barrier (two divisions, a test a chunk).
template <typename T>
struct ExHCopy {
  const T* src;
  unsigned dst, dst_step;
  int64_t src_step;
  int n;
  bool fast;
};
template <int kThr, typename T>
__device__ __forceinline__ ExHCopy<T> ex_h_copy_ahead(const FfnSlicePlan& p, const T* h, T* hx,
                                                      const ExTile& t) {
  ExHCopy<T> c;
  const int chunks = t.kh / slice::kChunk<T>;
  c.fast = chunks > 0 && kThr % chunks == 0;
  const int dr = c.fast ? kThr / chunks : 1, r0 = c.fast ? int(threadIdx.x) / chunks : 0;
  const int col = (c.fast ? int(threadIdx.x) % chunks : 0) * slice::kChunk<T>;
  c.src = h + int64_t(r0) * p.h + t.kh * t.g + col;
  c.src_step = int64_t(dr) * p.h;
  c.dst = static_cast<unsigned>(__cvta_generic_to_shared(hx + r0 * p.ld_hx + col));
  c.dst_step = unsigned(dr * p.ld_hx * sizeof(T));
  c.n = r0 < p.m ? (p.m - 1 - r0) / dr + 1 : 0;
  return c;
}
template <typename T>
__device__ __forceinline__ void ex_h_copy(const ExHCopy<T>& c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const T* src = c.src;
  unsigned dst = c.dst;
#pragma unroll 1
  for (int i = 0; i < c.n; ++i, src += c.src_step, dst += c.dst_step) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
  }
#endif
}

// One k step's fragments: h's 16 x 16 (f[0..3]), W2's 16 x 24 (tiles 0-1 f[4..7], tile 2 f[8..9]).
__device__ __forceinline__ void ex_frags(unsigned (&f)[10], unsigned a, unsigned b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(f[0]), "=r"(f[1]), "=r"(f[2]), "=r"(f[3])
               : "r"(a));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(f[4]), "=r"(f[5]), "=r"(f[6]), "=r"(f[7])
               : "r"(b));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(f[8]), "=r"(f[9])
               : "r"(b + 32));
#endif
}
__device__ __forceinline__ void ex_mma3(float (&acc)[kExNT][4], const unsigned (&f)[10]) {
  using M = slice::WarpMma<__nv_bfloat16, 4>;
  M::mma(acc[0], f[0], f[1], f[2], f[3], f[4], f[5]);
  M::mma(acc[1], f[0], f[1], f[2], f[3], f[6], f[7]);
  M::mma(acc[2], f[0], f[1], f[2], f[3], f[8], f[9]);
}

// The fast path: k_steps (even: K = 32 G) steps, the next step's fragments in flight during this
// step's mma; then the stores (rows past the tokens left out).
template <typename T>
__device__ __forceinline__ void ex_down_fast(const ExDownAhead& d) {
  if (!d.on) return;
  float acc[kExNT][4];
  slice::zero(acc);
  unsigned f0[10], f1[10], a = d.a_addr, b = d.b_addr;
  ex_frags(f0, a, b);
#pragma unroll 2
  for (int s = 2; s < d.k_steps; s += 2) {
    ex_frags(f1, a + 32, b + d.b_step);
    ex_mma3(acc, f0);
    a += 64, b += 2 * d.b_step;
    ex_frags(f0, a, b);
    ex_mma3(acc, f1);
  }
  ex_frags(f1, a + 32, b + d.b_step);
  ex_mma3(acc, f0);
  ex_mma3(acc, f1);
#pragma unroll
  for (int nt = 0; nt < kExNT; ++nt) {
    __nv_bfloat16* at = d.out + nt * d.tile_step;
    if (d.row0) {
      *reinterpret_cast<__nv_bfloat162*>(at) = __floats2bfloat162_rn(acc[nt][0], acc[nt][1]);
    }
    if (d.row8) {
      *reinterpret_cast<__nv_bfloat162*>(at + 8 * kSliceTileCols) =
          __floats2bfloat162_rn(acc[nt][2], acc[nt][3]);
    }
  }
}

}  // namespace fl::hidden_slice
