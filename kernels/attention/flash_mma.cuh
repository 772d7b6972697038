// Attention level 2: flash attention (the FlashAttention-2 ideas), written to be read.
//
// What changes against level 1: S and P never exist in HBM. A block owns 128 query rows of one
// head and keeps them on chip (Q in shared memory, and for bf16 in registers); it streams the
// head's K and V through shared memory in tiles of kBK keys, computes that tile's 64 x kBK
// scores in registers, folds them into a running softmax, and accumulates O in registers. HBM
// sees Q, K, V read and O written: 4 B H T d b bytes, independent of T^2.
//
//   for each K/V tile j (keys kBK j .. kBK j + kBK - 1), while tile j + 1 is in flight:
//     S   = Q K_j^T                          (flash_math.cuh: mma.sync for bf16, FMA for fp32)
//     m'  = max(m, rowmax(S))                running max of each query row
//     P   = exp(s S - s m')                  s = 1/sqrt(d), as exp2 with s log2(e) folded in
//     l   = l exp(s (m - m')) + rowsum(P)    running sum, rescaled to the new max
//     O   = O exp(s (m - m')) + P V_j        the output so far, rescaled the same way
//   O /= l at the end.
//
// Causal tiles. Query q sees keys 0..q, so the block of queries q0..q0+63 stops at the tile
// holding key q0 + 63: tiles above the diagonal are never loaded (half the work of the full
// T x T). Only tiles that reach past q0 (the diagonal) or past T look at keys one by one. Blocks
// are launched longest-first (the last query tile has the most keys), so the short ones fill
// the gaps at the end.
//
// Tiles: 4 warps x 32 query rows; kBK = 64 keys (bf16) or 32 (fp32); d up to
// 64 or 128 (the head size is padded with zeros up to the tile's, so any d <= 128 runs). Data path:
//   HBM --cp.async 16 B--> shared memory: Q once; K, V double-buffered (tile j + 1 lands while
//   tile j is multiplied) --ldmatrix--> registers --mma.sync m16n8k16--> fp32 S and O.
// The end of a block: each warp writes its finished O rows into its own Q rows in shared memory
// (no other warp reads them, so no block barrier) and copies them out whole rows at a time, 16
// bytes a lane. Stored straight from the accumulator layout, a warp's 32 x 64 tile of O would
// take 256 two-byte stores that each touch 8 rows (bf16, d = 64); this way it takes 8 of 16
// bytes, each a run of whole 32-byte sectors: the store is one pass, but a block that owns few
// K/V tiles (T = 512: 2 to 8 of them) spends a visible share of its time there.
// Shared memory: (128 + 4 kBK) (d + 8) x 2 B = 54 KiB (bf16, d = 64), 104 KiB (bf16, d = 128).
//
// Napkin per head, bf16, d = 64, T = 4096: reads 3 T d b = 1.5 MiB (+ K and V once per query
// block from L2), writes T d b = 0.5 MiB; FLOPs 2 T^2 d (two GEMMs, half of the square each) =
// 2.1 GFLOP: ~1000 FLOP per byte of HBM, far above the ~300 of an H100's ridge, so the kernel is
// bound by the tensor cores and by the softmax's exp2 between them, not by memory.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/attention/attention_rows.cuh"
#include "kernels/attention/block_marks.cuh"
#include "kernels/attention/flash_args.cuh"
#include "kernels/attention/flash_math.cuh"
#include "kernels/cuda_check.h"
#include "kernels/phases.cuh"
#include "kernels/tensor_gemm.cuh"

namespace fl::attention {

// The phases flash_attention_kernel records (BlockMarks, block_marks.cuh), in order.
enum FlashMmaPhase : unsigned { kMmaFirstTile, kMmaTiles, kMmaStore };
inline const std::vector<std::string>& flash_mma_phases() {
  static const std::vector<std::string> names = {"Q and first K/V in", "K/V tiles", "store"};
  return names;
}

// Folds one tile of scores into the running softmax of the lane's rows and turns s into P.
// m, l: running max (raw score units) and this lane's part of the running sum, per 16-row tile
// mt and row (g, g + 8); o is rescaled to the new max.
template <class Tile>
__device__ __forceinline__ void online_softmax(ScoreTile<Tile>& s, float (&m)[Tile::kMT][2],
                                               float (&l)[Tile::kMT][2], OutTile<Tile>& o,
                                               float c) {
#pragma unroll
  for (int mt = 0; mt < Tile::kMT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {  // rows g (s[.][.][0..1]) and g + 8 (s[.][.][2..3])
      float mx = m[mt][r];
#pragma unroll
      for (int nt = 0; nt < Tile::kNT; ++nt)
        mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // the 4 lanes of a row
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // Key 0 is in the first tile and never masked, so mx is finite from the first tile on.
      const float rescale = exp2_approx((m[mt][r] - mx) * c);  // 0 on the first tile
      const float mc = mx * c;
      m[mt][r] = mx;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < Tile::kNT; ++nt) {
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          s[mt][nt][e] = exp2_approx(fmaf(s[mt][nt][e], c, -mc));
          sum += s[mt][nt][e];
        }
      }
      l[mt][r] = l[mt][r] * rescale + sum;
#pragma unroll
      for (int dt = 0; dt < Tile::kDT; ++dt) {
        o[mt][dt][2 * r] *= rescale;
        o[mt][dt][2 * r + 1] *= rescale;
      }
    }
  }
}

// -inf for keys after the row's query or past the sequence (zero-filled by the loads). row0:
// the lane's first row (g of the warp's first 16-row tile).
template <class Tile>
__device__ __forceinline__ void mask_tile(ScoreTile<Tile>& s, int key0, int row0, int length) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int mt = 0; mt < Tile::kMT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < Tile::kNT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + nt * 8 + 2 * t + (e & 1);
        const int row = row0 + mt * 16 + (e >> 1) * 8;
        if (key > row || key >= length) s[mt][nt][e] = -INFINITY;
      }
    }
  }
}

// The end of a block: O = acc / l (l summed over the 4 lanes of each row), handed pair by pair
// to put(row in the warp, column, O[row][column], O[row][column + 1]).
template <class Tile, class Put>
__device__ __forceinline__ void finish_rows(const OutTile<Tile>& o, const float (&l)[Tile::kMT][2],
                                            Put put) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int mt = 0; mt < Tile::kMT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = l[mt][r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = 1.0f / sum;
#pragma unroll
      for (int dt = 0; dt < Tile::kDT; ++dt) {
        put(mt * 16 + 8 * r + (lane >> 2), dt * 8 + 2 * (lane & 3), o[mt][dt][2 * r] * inv,
            o[mt][dt][2 * r + 1] * inv);
      }
    }
  }
}

// Two neighbouring elements into shared memory in one store.
__device__ __forceinline__ void store_pair(__nv_bfloat16* p, float x, float y) {
  *reinterpret_cast<unsigned*>(p) = pack_bf16(x, y);
}
__device__ __forceinline__ void store_pair(float* p, float x, float y) {
  *reinterpret_cast<float2*>(p) = make_float2(x, y);
}

// A warp's `rows` x `dim` rows of O, staged in shared memory (row stride Tile::kLd), to `out`
// (row stride ld_out): whole rows a pass of the warp, 16 bytes a lane where `vec` (d and ld_out
// whole 16-byte packs, out 16-byte aligned), else element by element.
template <typename T, class Tile>
__device__ __forceinline__ void copy_rows_out(const T* staged, T* out, int64_t ld_out, int rows,
                                              int dim, bool vec) {
  const int lane = threadIdx.x & 31;
  if (vec) {
    constexpr int kVec = 16 / int(sizeof(T));
    const int packs = dim / kVec;
    for (int i = lane; i < rows * packs; i += 32) {
      const int r = i / packs, c = (i - r * packs) * kVec;
      *reinterpret_cast<uint4*>(out + r * ld_out + c) =
          *reinterpret_cast<const uint4*>(staged + r * Tile::kLd + c);
    }
  } else {
    for (int i = lane; i < rows * dim; i += 32) {
      const int r = i / dim, c = i - r * dim;
      out[r * ld_out + c] = staged[r * Tile::kLd + c];
    }
  }
}

// One block's work: grid (heads, query tiles). kVectorized: d is a multiple of 16 bytes' worth
// of elements, so every row starts 16-byte aligned and the copies are cp.async; otherwise element
// by element. Shared by the kernels of every tile shape (flash_attention_kernel below, and the
// variant flash_mma_keys128.cu).
template <typename T, class Tile, bool kVectorized>
__device__ __forceinline__ void flash_attention_block(const FlashArgs<T>& a) {
  __shared__ BlockMarks<kMmaStore + 1> marks;
  marks.begin(a.phases);
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);
  T* skv = sq + Tile::kQElems;  // stage s: K at skv + 2 s kKVElems, V right after it
  float* sp = reinterpret_cast<float*>(skv + 4 * Tile::kKVElems);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * Tile::kBQ;  // longest rows first
  const int64_t ld = a.ld_in > 0 ? a.ld_in : a.dim, ld_out = a.ld_out > 0 ? a.ld_out : a.dim;
  const int64_t head = a.base(blockIdx.x, ld);
  const T* k_head = a.k + head;
  const T* v_head = a.v + head;
  const int keys = min(a.length, q0 + Tile::kBQ);  // causal: nothing past the last query
  const int kv_tiles = (keys + Tile::kBK - 1) / Tile::kBK;

  auto load_kv = [&](int tile, int stage) {
    const int key0 = tile * Tile::kBK;
    T* sk = skv + 2 * stage * Tile::kKVElems;
    tc::copy_tile<T, Tile::kThreads, kVectorized>(sk, Tile::kLd, k_head + int64_t(key0) * ld, ld,
                                                  Tile::kBK, Tile::kD, a.length - key0, a.dim);
    tc::copy_tile<T, Tile::kThreads, kVectorized>(sk + Tile::kKVElems, Tile::kLd,
                                                  v_head + int64_t(key0) * ld, ld, Tile::kBK,
                                                  Tile::kD, a.length - key0, a.dim);
  };
  tc::copy_tile<T, Tile::kThreads, kVectorized>(sq, Tile::kLd, a.q + head + int64_t(q0) * ld, ld,
                                                Tile::kBQ, Tile::kD, a.length - q0, a.dim);
  load_kv(0, 0);
  tc::async_commit();

  FlashMath<T, Tile> math;
  const T* sq_warp = sq + warp * Tile::kWarpRows * Tile::kLd;
  float* sp_warp = sp + warp * Tile::kWarpRows * Tile::kLdP;
  const int row0 = q0 + warp * Tile::kWarpRows + (lane >> 2);  // rows row0 + 16 mt + {0, 8}
  const float c = a.scale * kLog2e;
  OutTile<Tile> o = {};
  float m[Tile::kMT][2], l[Tile::kMT][2];
#pragma unroll
  for (int mt = 0; mt < Tile::kMT; ++mt) {
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
  }

  for (int j = 0; j < kv_tiles; ++j) {
    if (j + 1 < kv_tiles) load_kv(j + 1, (j + 1) & 1);
    tc::async_commit();   // possibly empty: one group per iteration keeps the count simple
    tc::async_wait<1>();  // tile j (and Q) have landed for this thread...
    __syncthreads();      // ...and for every thread
    if (j == 0) {
      marks.mark(kMmaFirstTile);
      math.load_q(sq_warp);
    }
    const T* sk = skv + 2 * (j & 1) * Tile::kKVElems;
    ScoreTile<Tile> s = {};
    math.qk(s, sq_warp, sk);
    const int key0 = j * Tile::kBK;
    if (key0 + Tile::kBK - 1 > q0 || key0 + Tile::kBK > a.length)
      mask_tile<Tile>(s, key0, row0, a.length);
    online_softmax<Tile>(s, m, l, o, c);
    math.pv(o, s, sk + Tile::kKVElems, sp_warp);
    __syncthreads();  // the next iteration's copies overwrite this stage
  }
  marks.mark(kMmaTiles);

  const int warp_row0 = q0 + warp * Tile::kWarpRows;    // the warp's first query row
  T* staged = sq + warp * Tile::kWarpRows * Tile::kLd;  // the warp's own Q rows, free now
  finish_rows<Tile>(o, l, [&](int r, int col, float x, float y) {
    store_pair(staged + r * Tile::kLd + col, x, y);
  });
  __syncwarp();
  constexpr int kVec = 16 / int(sizeof(T));
  const bool vec_out =
      kVectorized && ld_out % kVec == 0 && reinterpret_cast<uintptr_t>(a.o) % 16 == 0;
  copy_rows_out<T, Tile>(staged, a.o + a.base(blockIdx.x, ld_out) + int64_t(warp_row0) * ld_out,
                         ld_out, min(Tile::kWarpRows, a.length - warp_row0), a.dim, vec_out);
  marks.mark(kMmaStore);
  marks.end();
}

template <typename T, class Tile, bool kVectorized>
__global__ void __launch_bounds__(Tile::kThreads) flash_attention_kernel(FlashArgs<T> a) {
  flash_attention_block<T, Tile, kVectorized>(a);
}

// Launches `kernel` (one of the kernels around flash_attention_block) with Tile's grid and
// shared memory.
template <class Tile, typename T>
Status launch_flash_tile(void (*kernel)(FlashArgs<T>), const FlashArgs<T>& a, int64_t heads,
                         cudaStream_t stream) {
  // Above 48 KiB a block's shared memory must be asked for; the call is cheap and idempotent.
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(Tile::kSmemBytes)));
  const dim3 grid(static_cast<unsigned>(heads),
                  static_cast<unsigned>((a.length + Tile::kBQ - 1) / Tile::kBQ));
  kernel<<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(a);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// Whether the rows can be copied 16 bytes at a time (cp.async): d and the row stride are whole
// 16-byte packs.
template <typename T>
bool flash_rows_vectorized(const FlashArgs<T>& a) {
  constexpr int kVec = 16 / int(sizeof(T));
  return a.dim % kVec == 0 && a.ld_in % kVec == 0;
}

// Warps own 32 query rows (two 16-row tiles): kMT = 1, 16 rows a warp, was measured slower on
// an H100 at every length and head size (docs/PERFORMANCE.md, lesson 9), because each K and V
// fragment then feeds one mma instead of two; the template keeps it one edit away.
constexpr int kFlashWarpTiles = 2;

// Calls launch(Tile{}, std::bool_constant<kVectorized>{}) with the tile of the head size (64 or
// 128 columns) and the copy path, for the kernels that take every head size.
template <typename T, class Launch>
Status with_flash_tile(const FlashArgs<T>& a, Launch launch) {
  using Narrow = FlashTile<T, 64, kFlashWarpTiles>;
  using Wide = FlashTile<T, 128, kFlashWarpTiles>;
  const bool vectorized = flash_rows_vectorized(a);
  if (a.dim <= 64)
    return vectorized ? launch(Narrow{}, std::true_type{}) : launch(Narrow{}, std::false_type{});
  return vectorized ? launch(Wide{}, std::true_type{}) : launch(Wide{}, std::false_type{});
}

// The shapes every flash kernel takes; one line why not otherwise.
template <typename T>
Status flash_shape_ok(const FlashArgs<T>& a, int64_t heads) {
  if (a.dim < 1 || a.dim > 128)
    return Status::Error("flash attention takes a head size from 1 to 128");
  if (heads < 1 || heads > INT32_MAX || a.length < 1 || a.length > 65535 * 64)
    return Status::Error("flash attention takes 1 to 2^31 - 1 heads of 1 to 4,194,240 tokens");
  return Status::Ok();
}

// Picks the tile for the head size (64 or 128 columns) and the copy path.
template <typename T>
Status launch_flash(const FlashArgs<T>& a, int64_t heads, cudaStream_t stream) {
  FL_TRY(flash_shape_ok(a, heads));
  return with_flash_tile(a, [&](auto tile, auto vectorized) {
    using Tile = decltype(tile);
    return launch_flash_tile<Tile>(flash_attention_kernel<T, Tile, decltype(vectorized)::value>, a,
                                   heads, stream);
  });
}

}  // namespace fl::attention
