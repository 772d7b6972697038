// Attention level 2, variant flash_fp32_tiles: level 2's flash algorithm in fp32 on the CUDA
// cores, with the products register-blocked as in an SGEMM (a thread owns an 8 x 4 tile of S and
// of O and reads 16 bytes a load), instead of the mma.sync accumulator layout that
// flash_attention_kernel's fp32 path shares with bf16 (flash_math.cuh).
//
// What changes against flash_attention_kernel in fp32: there a lane owns 2 x 2 outputs of each
// 16 x 8 tile and reads Q and K 8 bytes at a time: 12 loads for 64 FMA, the shared-memory pipe
// about three quarters as busy as the FMA pipe. Here thread (ty, tx) of a 8 x 16 grid owns rows
// ty + 8 i (i < 8) and, in S = Q K^T, keys tx + 16 j (j < 4); per 4 dims it loads 8 float4 of Q
// (the 16 lanes of a row group read the same address: a broadcast) and 4 float4 of K (16 rows
// with a stride of 17 float4s: every 8 of them in different banks), then runs 8 x 4 x 4 = 128
// FMA: 12 loads for 128 FMA, half the load instructions and two thirds of the shared-memory
// wavefronts per FMA. In O += P V the same thread owns dims 4 tx .. 4 tx + 3 of its rows and reads
// P (its rows, 4 keys: a broadcast) and V (4 keys x 4 dims, contiguous across the 16 lanes) as
// float4: the same 12 loads for 128 FMA. All tiles stay row-major as cp.async lands them: no
// transposes. P goes through shared memory between the products (the keys of a row are spread
// over the 16 lanes of its row group); a warp writes and reads only its own rows of it, so a
// __syncwarp orders them.
//
// Online softmax as level 2: per row the running max m (raw score units, reduced over the 16 lanes
// of the row group by 4 shuffles) and each lane's part of the running sum l (summed over the lanes
// at the end), exp2 with the scale times log2(e) folded in, O rescaled when the max moves.
//
// Tiles: 64 queries a block (4 warps, each two row groups), K/V tiles of 64 keys, head size
// d <= 64 (padded with zeros to 64). One K and one V buffer, each refilled by cp.async as soon as
// its product is done: K of tile j + 1 lands under the softmax and P V of tile j, V of tile j + 1
// under the next Q K^T (four barriers a tile). Two stages of K and V (one wait a tile, as level 2)
// would take 104 KiB and allow two blocks an SM; this takes Q 64 x 68, K and V 64 x 68 each, P
// 64 x 80 floats = 71 KiB: three blocks (12 warps) an SM on sm_80 and sm_90, at 168 registers a
// thread (S and O 32 each, m and l 8 each, the K and V fragments 16).
//
// Napkin per head, T = 4096, d = 64: the same HBM bytes as level 2 (Q, K, V read, O written:
// 4 MiB in fp32) and the same 2 T^2 d = 2.1 GFLOP; per 64 x 64 tile a thread runs 4096 FMA,
// 384 loads and ~250 instructions of softmax, masking and the P store: ~85% FMA issue, against
// ~80% for level 2's fp32 path. The diagonal tile is computed whole and half masked: 8 of 72
// tiles' work wasted at T = 512, 1% at 8K.
#include "kernels/attention/flash_mma.cuh"
#include "kernels/attention/flash_mma_variants.h"

namespace fl::attention {
namespace {

// Both configurations: the head size the tile holds, keys a K/V tile, a thread's rows (ty + 8 i)
// and its keys in S (tx + 16 j) or dims in O (4 tx + e).
constexpr int kD = 64, kBK = 64, kTM = 8, kTN = 4;
constexpr int kLd = kD + 4;     // Q, K, V rows: 17 float4s, odd, so 8 rows' float4s miss each other
constexpr int kLdP = kBK + 16;  // P rows: rows ty and ty + 1 half a bank cycle apart

struct Fp32Tile {
  static constexpr int kBQ = 64;  // query rows a block: 8 row groups of 8 rows
  static constexpr int kThreads = 128;
  static constexpr int kMinBlocks = 3;  // blocks an SM (the kernel's bounds)
  static constexpr int kQElems = kBQ * kLd;
  static constexpr int kKVElems = kBK * kLd;
  static constexpr int kPElems = kBQ * kLdP;
  static constexpr size_t kSmemBytes = sizeof(float) * size_t(kQElems + 2 * kKVElems + kPElems);
};
using Tile = Fp32Tile;
using Frag = float[kTM][kTN];  // S (then P) or O of a thread

// s += Q K^T for the thread's rows (q: its first row, ty) and keys (k: its first key, tx).
__device__ __forceinline__ void qk_tile(Frag& s, const float* q, const float* k) {
#pragma unroll 4
  for (int c = 0; c < kD; c += 4) {
    float4 kv[kTN];
#pragma unroll
    for (int j = 0; j < kTN; ++j) kv[j] = *reinterpret_cast<const float4*>(k + 16 * j * kLd + c);
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
      const float4 qv = *reinterpret_cast<const float4*>(q + 8 * i * kLd + c);
#pragma unroll
      for (int j = 0; j < kTN; ++j) {
        s[i][j] = fmaf(qv.x, kv[j].x, s[i][j]);
        s[i][j] = fmaf(qv.y, kv[j].y, s[i][j]);
        s[i][j] = fmaf(qv.z, kv[j].z, s[i][j]);
        s[i][j] = fmaf(qv.w, kv[j].w, s[i][j]);
      }
    }
  }
}

// o += P V for the thread's rows (p: its first row of P, ty) and dims (v: column 4 tx of V).
__device__ __forceinline__ void pv_tile(Frag& o, const float* p, const float* v) {
#pragma unroll 4
  for (int k = 0; k < kBK; k += 4) {
    float4 vv[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) vv[e] = *reinterpret_cast<const float4*>(v + (k + e) * kLd);
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
      const float4 pv = *reinterpret_cast<const float4*>(p + 8 * i * kLdP + k);
      const float w[4] = {pv.x, pv.y, pv.z, pv.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        o[i][0] = fmaf(w[e], vv[e].x, o[i][0]);
        o[i][1] = fmaf(w[e], vv[e].y, o[i][1]);
        o[i][2] = fmaf(w[e], vv[e].z, o[i][2]);
        o[i][3] = fmaf(w[e], vv[e].w, o[i][3]);
      }
    }
  }
}

// Folds a tile of scores into the running softmax of the thread's rows; s becomes P, o is
// rescaled to the new max. The 16 lanes of a row group (lane bits 0-3) share its rows.
__device__ __forceinline__ void softmax_tile(Frag& s, float (&m)[kTM], float (&l)[kTM], Frag& o,
                                             float c) {
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    float mx = m[i];
#pragma unroll
    for (int j = 0; j < kTN; ++j) mx = fmaxf(mx, s[i][j]);
#pragma unroll
    for (int x = 1; x < 16; x *= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, x));
    // Key 0 is in the first tile and never masked, so mx is finite from the first tile on.
    const float rescale = exp2_approx((m[i] - mx) * c);  // 0 on the first tile
    const float mc = mx * c;
    m[i] = mx;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      s[i][j] = exp2_approx(fmaf(s[i][j], c, -mc));
      sum += s[i][j];
    }
    l[i] = l[i] * rescale + sum;
#pragma unroll
    for (int e = 0; e < kTN; ++e) o[i][e] *= rescale;
  }
}

// One block: 64 query rows of one head, grid (heads, query tiles) as level 2's kernel.
template <bool kVectorized>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocks)
    flash_fp32_tiles_kernel(FlashArgs<float> a) {
  __shared__ BlockMarks<kMmaStore + 1> marks;
  marks.begin(a.phases);
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* sq = reinterpret_cast<float*>(smem_raw);
  float* skv = sq + Tile::kQElems;  // K, then V
  float* sp = skv + 2 * Tile::kKVElems;

  const int lane = threadIdx.x & 31;
  const int ty = 2 * (threadIdx.x >> 5) + (lane >> 4), tx = lane & 15;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * Tile::kBQ;  // longest rows first
  const int64_t ld = a.ld_in > 0 ? a.ld_in : a.dim, ld_out = a.ld_out > 0 ? a.ld_out : a.dim;
  const int64_t head = a.base(blockIdx.x, ld);
  const int keys = min(a.length, q0 + Tile::kBQ);  // causal: nothing past the last query
  const int kv_tiles = (keys + kBK - 1) / kBK;

  // Tile `tile` of K (which = 0) or V (1) into its buffer.
  auto load = [&](int which, int tile) {
    const int key0 = tile * kBK;
    const float* src = (which == 0 ? a.k : a.v) + head + int64_t(key0) * ld;
    tc::copy_tile<float, Tile::kThreads, kVectorized>(skv + which * Tile::kKVElems, kLd, src, ld,
                                                      kBK, kD, a.length - key0, a.dim);
  };
  tc::copy_tile<float, Tile::kThreads, kVectorized>(sq, kLd, a.q + head + int64_t(q0) * ld, ld,
                                                    Tile::kBQ, kD, a.length - q0, a.dim);
  load(0, 0);
  tc::async_commit();  // Q and K: waited for before Q K^T
  load(1, 0);
  tc::async_commit();  // V in a group of its own: waited for only before P V

  const float c = a.scale * kLog2e;
  Frag o = {};
  float m[kTM], l[kTM];
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
  float* p_rows = sp + ty * kLdP;  // the thread's rows of P: ty + 8 i

  for (int j = 0; j < kv_tiles; ++j) {
    tc::async_wait<1>();  // K (and Q) of tile j have landed for this thread (V may not)...
    __syncthreads();      // ...and for every thread
    if (j == 0) marks.mark(kMmaFirstTile);
    Frag s = {};
    qk_tile(s, sq + ty * kLd, skv + tx * kLd);
    __syncthreads();  // every warp is done with K j: refill it under the softmax and P V
    if (j + 1 < kv_tiles) load(0, j + 1);
    tc::async_commit();  // possibly empty: one group per refill keeps the count simple
    const int key0 = j * kBK;
    if (key0 + kBK - 1 > q0 || key0 + kBK > a.length) {
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
#pragma unroll
        for (int jj = 0; jj < kTN; ++jj) {
          const int key = key0 + tx + 16 * jj;
          if (key > q0 + ty + 8 * i || key >= a.length) s[i][jj] = -INFINITY;
        }
      }
    }
    softmax_tile(s, m, l, o, c);
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
#pragma unroll
      for (int jj = 0; jj < kTN; ++jj) p_rows[8 * i * kLdP + tx + 16 * jj] = s[i][jj];
    }
    tc::async_wait<1>();  // V j has landed (K j + 1 may be in flight)...
    __syncthreads();      // ...for every thread; this also orders the warp's rows of P
    pv_tile(o, p_rows, skv + Tile::kKVElems + 4 * tx);
    __syncthreads();  // every warp is done with V j (and its own P) before they are refilled
    if (j + 1 < kv_tiles) load(1, j + 1);
    tc::async_commit();
  }
  marks.mark(kMmaTiles);

  // O / l, the sum over the 16 lanes of the row group; straight to HBM, 16 bytes a lane where
  // the rows allow (4 dims a lane, a row group's 16 lanes one 256-byte run).
  const bool vec = kVectorized && ld_out % 4 == 0 && reinterpret_cast<uintptr_t>(a.o) % 16 == 0;
  float* out = a.o + a.base(blockIdx.x, ld_out);
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    float sum = l[i];
#pragma unroll
    for (int x = 1; x < 16; x *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, x);
    const float inv = 1.0f / sum;
    const int row = q0 + ty + 8 * i, col = 4 * tx;
    if (row >= a.length || col >= a.dim) continue;
    float* dst = out + int64_t(row) * ld_out + col;
    if (vec) {
      *reinterpret_cast<float4*>(dst) =
          make_float4(o[i][0] * inv, o[i][1] * inv, o[i][2] * inv, o[i][3] * inv);
    } else {
      for (int e = 0; e < 4 && col + e < a.dim; ++e) dst[e] = o[i][e] * inv;
    }
  }
  marks.mark(kMmaStore);
  marks.end();
}

}  // namespace

std::string flash_fp32_tiles_shape_check(int64_t dim) {
  return dim >= 1 && dim <= kD ? "" : "takes a head size d up to 64";
}

Status launch_flash_fp32_tiles(const FlashArgs<float>& a, int64_t heads, cudaStream_t stream) {
  const std::string shape = flash_fp32_tiles_shape_check(a.dim);
  if (!shape.empty()) return Status::Unsupported(shape);
  FL_TRY(flash_shape_ok(a, heads));
  int device = 0, smem = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (size_t(smem) < Tile::kSmemBytes) {
    return Status::Unsupported("needs " + std::to_string(Tile::kSmemBytes >> 10) +
                               " KiB of shared memory a block");
  }
  return launch_flash_tile<Tile>(
      flash_rows_vectorized(a) ? flash_fp32_tiles_kernel<true> : flash_fp32_tiles_kernel<false>, a,
      heads, stream);
}

}  // namespace fl::attention
