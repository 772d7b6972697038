// The cluster step's pieces (cluster_step.cu has the stages and the kernel): where a block's
// bytes sit in shared memory, the sums the stages add into, the block-wide LayerNorm and
// matrix-vector rows, and the TMA copies of a head task's and an MLP task's bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/device_common.cuh"
#include "kernels/gpt2_decode/copies.cuh"
#include "kernels/gpt2_decode/launch.h"
#include "kernels/phases.cuh"

namespace fl {
namespace gpt2 {
namespace cluster_step {

constexpr int kRanks = 8;                     // blocks a cluster
constexpr int kRankRows = kHeadDim / kRanks;  // rows of each of q, k, v a block computes
constexpr int kHeadBlocks = kHeads * kRanks;  // blocks with a head task (96)
constexpr int kPieceCols = kProjRows;         // proj outputs a block adds (192)
constexpr int kPieceDims = kHeadDim / 2;      // head dims a block's proj piece covers (32)
constexpr int kRowBytes = kC * 2;             // a weight row (1536 B)
constexpr int kGroups = kF / 8;               // MLP rows dealt in groups of 8 (384)
constexpr int kQkvBytes = 3 * kRankRows * 4;  // the q, k, v values a block sends each block (96 B)
constexpr int kMlpShare = kC / kRanks;        // M's columns a block of a cluster adds up (96)

// The head buffer's layout (bytes): Wqkv rows (q 8, k 8, v 8), the Wproj piece, LN1's gamma and
// beta, the 24 biases, bproj's 192, then the keys and values that fit.
constexpr int kHeadWqkv = 0;
constexpr int kHeadWproj = kHeadWqkv + 3 * kRankRows * kRowBytes;
constexpr int kHeadLn = kHeadWproj + kPieceDims * kPieceCols * 2;
constexpr int kHeadBias = kHeadLn + 2 * kRowBytes;
constexpr int kHeadBproj = kHeadBias + 3 * kRankRows * 2;
constexpr int kHeadKeys = kHeadBproj + kPieceCols * 2;
static_assert(kHeadKeys % 16 == 0, "bulk copies land on 16-byte boundaries");

// The fixed part of shared memory (floats), then the MLP buffer, then the head buffer.
struct Fixed {
  float x[kC];                       // the residual
  float xn[kC];                      // LayerNorm's output
  float qkv[3 * kHeadDim];           // the head's new q (scaled), k, v: sent by every block
  float parts[kRanks][kPartStride];  // the splits' partials (o[64], max, sum): sent by every block
  float mine[kPartStride];           // this block's partial, before it goes out
  float warps[kWarps][kPartStride];  // the warps' partials
  float o[kHeadDim];                 // the head's combined output
  float stage[64];                   // this block's 24 q, k, v values, or its MLP rows' h
  float stat[32];                    // block reductions
};
constexpr int kFixedBytes = (int(sizeof(Fixed)) + 255) & ~255;
// The MLP stage's partial sums of M from every block of the cluster, [rank][kMlpShare]: they
// land where the head stage's parts, mine and warps sit (in order, 4.6 KB). Never both at
// once: a block's peers send these only once every head block has released the layer's head
// count (this block's head stage is done), and the next layer's parts only once every block has
// released the MLP count (this block has added these up).
__device__ __forceinline__ float* mlp_in(Fixed& f) {
  return &f.parts[0][0];
}
static_assert(offsetof(Fixed, mine) == offsetof(Fixed, parts) + sizeof(Fixed::parts) &&
                  offsetof(Fixed, warps) == offsetof(Fixed, mine) + sizeof(Fixed::mine) &&
                  sizeof(Fixed::parts) + sizeof(Fixed::mine) + sizeof(Fixed::warps) >=
                      kRanks * kMlpShare * sizeof(float),
              "the MLP's partial sums fit over parts, mine and warps");
static_assert(offsetof(Fixed, qkv) % 16 == 0 && offsetof(Fixed, parts) % 16 == 0 &&
                  kPartStride % 4 == 0 && offsetof(Fixed, xn) % 16 == 0 &&
                  offsetof(Fixed, stage) % 16 == 0 && offsetof(Fixed, mine) % 16 == 0,
              "16-byte stores into other blocks and float4 reads");

// A grid's shared memory: the MLP buffer holds a block's rows of Wfc and of Wout transposed and
// their biases (LN2's gamma and beta and bout are read into registers before the stage's wait);
// the head buffer the rest of the opt-in, so that as many keys as possible stay in it.
struct Layout {
  int blocks = 0;     // 8 x clusters
  int mlp_rows = 0;   // at most, a block (a multiple of 8)
  int mlp_bytes = 0;  // the MLP buffer
  int key_cap = 0;    // keys (and values) the head buffer holds
  int shared = 0;     // dynamic shared memory a block
};
__host__ __device__ constexpr int mlp_wout_at(int rows) {
  return rows * kRowBytes;
}
__host__ __device__ constexpr int mlp_bias_at(int rows) {
  return 2 * rows * kRowBytes;
}

inline Layout layout_for(int clusters, int optin) {
  Layout l;
  l.blocks = clusters * kRanks;
  l.mlp_rows = 8 * ((kGroups + l.blocks - 1) / l.blocks);
  l.mlp_bytes = mlp_bias_at(l.mlp_rows) + l.mlp_rows * 2;
  const int head_bytes = optin - 1024 - kFixedBytes - l.mlp_bytes;  // (1 KB: the mbarriers)
  l.key_cap = (head_bytes - kHeadKeys) / (2 * kKeyRowBytes);
  l.shared = kFixedBytes + l.mlp_bytes + kHeadKeys + 2 * l.key_cap * kKeyRowBytes;
  return l;
}

struct StepArgs {
  unsigned* counts;  // [layer]: head blocks done, then [kLayers + layer]: MLP blocks done
  float* sums;       // A[layer][copy], then M[layer][copy], kC floats each
  int mlp_rows, key_cap, mlp_bytes;
  // A[layer] and M[layer] kept as this many copies (<= kMaxAttnCopies, kMaxMlpCopies; block b adds
  // into A's copy b % copies, cluster k into M's copy k % copies, the readers add them up): fewer
  // adds land on each line of L2.
  int attn_copies, mlp_copies;
  PhaseSink phases;            // a record a block a stage (model.h's cluster_record_arg) when on
  unsigned long long* stamps;  // null, or kStamps a layer a block (ClusterStamp, a measurement)
};
// (room for 8 copies of M: FL_CLUSTER_M_COPIES=8, a measurement; docs/PERFORMANCE.md has what
// each count gave)
constexpr int kMaxAttnCopies = 4, kMaxMlpCopies = 8;
static_assert(kClusterStepSums == int64_t(kMaxAttnCopies + kMaxMlpCopies) * kLayers * kC,
              "launch.h's count");
__device__ __forceinline__ float* attn_of(const StepArgs& p, int l, int copy = 0) {
  return p.sums + (l * kMaxAttnCopies + copy) * kC;
}
__device__ __forceinline__ float* mlp_of(const StepArgs& p, int l, int copy = 0) {
  return p.sums + (kMaxAttnCopies * kLayers + l * kMaxMlpCopies + copy) * kC;
}
// Layer l's sums zeroed for the next launch, share `part` of `parts` (every thread of the block).
__device__ inline void zero_layer(const StepArgs& p, int l, int part, int parts) {
  const int n = kC / 4, a = p.attn_copies * n, all = a + p.mlp_copies * n;
  for (int i = part * kThreads + threadIdx.x; i < all; i += parts * kThreads) {
    float4* at = i < a ? reinterpret_cast<float4*>(attn_of(p, l)) + i
                       : reinterpret_cast<float4*>(mlp_of(p, l)) + (i - a);
    *at = make_float4(0.f, 0.f, 0.f, 0.f);
  }
}
// A layer's attention sum A[l] or MLP sum M[l]: its copies, kC floats apart.
struct Sum {
  const float* at = nullptr;
  int copies = 0;
};
__device__ __forceinline__ Sum attn_sum(const StepArgs& p, int l) {
  return {attn_of(p, l), p.attn_copies};
}
__device__ __forceinline__ Sum mlp_sum(const StepArgs& p, int l) {
  return {mlp_of(p, l), p.mlp_copies};
}

// Thread 0's times in a layer (globaltimer ns), with stamps on: the head stage's start, its count
// seen, x loaded, its bytes in, its rows sent, the cluster's rows in, its split sent, the
// cluster's splits in, its count released; the MLP stage's count seen, bytes in, LN2 done, its
// rows of h done, count released;
// then the split's loop done, the SM clock beside the MLP's count seen (the clock's rate), the
// MLP's partial sums sent and the cluster's in, and the MLP stage's x loaded.
enum ClusterStamp {
  kHeadStart,
  kHeadSeen,
  kHeadInputs,
  kHeadBytes,
  kHeadRows,
  kHeadRowsIn,
  kHeadSplit,
  kHeadSplitsIn,
  kHeadReleased,
  kMlpSeen,
  kMlpBytes,
  kMlpNormed,  // LN2 done
  kMlpHidden,  // the block's rows of h done
  kMlpReleased,
  kHeadLoop,   // the split's keys done (before its warps merge)
  kClock,      // the SM's clock64 (not ns) at the MLP stage's count seen
  kMlpSent,    // the block's partial sums of M sent to the cluster
  kMlpSumsIn,  // the cluster's partial sums of this block's share in
  kMlpInputs,  // the MLP stage's x loaded (before its bytes' wait)
  kStamps
};
static_assert(kStamps * kLayers == kClusterStepStamps, "launch.h's count");
__device__ __forceinline__ void stamp(const StepArgs& p, int layer, int which) {
  if (p.stamps != nullptr && threadIdx.x == 0)
    p.stamps[(int64_t(blockIdx.x) * kLayers + layer) * kStamps + which] =
        which == kClock ? static_cast<unsigned long long>(clock64()) : phase_clock();
}

// ---- block-wide helpers (256 threads; warp_sum is device.cuh's) ------------------------------

// xn = LayerNorm(x) in one pass (the sum and the sum of squares in one block reduction); each
// thread holds gamma and beta of its three elements (threadIdx.x + 256 k).
__device__ inline void layer_norm(Fixed& f, const float (&gamma)[3], const float (&beta)[3]) {
  float v[3], s = 0.f, q = 0.f;
  for (int k = 0; k < 3; ++k) {
    v[k] = f.x[threadIdx.x + k * kThreads];
    s += v[k], q += v[k] * v[k];
  }
  s = warp_sum(s), q = warp_sum(q);
  if ((threadIdx.x & 31) == 0) f.stat[threadIdx.x / 32] = s, f.stat[8 + threadIdx.x / 32] = q;
  __syncthreads();
  s = q = 0.f;
  for (int w = 0; w < kWarps; ++w) s += f.stat[w], q += f.stat[8 + w];
  const float mean = s * (1.f / kC);
  const float rstd = rsqrtf(fmaxf(q * (1.f / kC) - mean * mean, 0.f) + float(kLnEps));
  for (int k = 0; k < 3; ++k)
    f.xn[threadIdx.x + k * kThreads] = (v[k] - mean) * rstd * gamma[k] + beta[k];
  __syncthreads();
}
// A LayerNorm's gamma and beta of this thread's elements, from bf16 (shared or global memory).
__device__ __forceinline__ void norm_params(const bf16* g, float (&gamma)[3], float (&beta)[3]) {
  for (int k = 0; k < 3; ++k) {
    gamma[k] = __bfloat162float(g[threadIdx.x + k * kThreads]);
    beta[k] = __bfloat162float(g[kC + threadIdx.x + k * kThreads]);
  }
}

// x = `from` (null: x as the block holds it) + b's copies + c's copies, vectors other blocks
// wrote (L2 loads, ld.global.cg). Every load is issued before the first add: one L2 round trip,
// not one a vector (a loop over the copies waits for each load before it issues the next).
// kB, kC2: the most copies b and c may have (the loads' registers: a gather of A alone holds 4,
// not the 12 of M and A).
template <int kB, int kC2 = 0>
__device__ inline void gather_x(Fixed& f, const float* from, Sum b, Sum c = Sum{}) {
  const int i = threadIdx.x;
  static_assert(kC / 4 <= kThreads, "a float4 of x a thread");
  if (i < kC / 4) {
    float4 w[kB + kC2 > 0 ? kB + kC2 : 1];
#pragma unroll
    for (int k = 0; k < kB + kC2; ++k) {
      const Sum& s = k < kB ? b : c;
      const int j = k < kB ? k : k - kB;
      w[k] = j < s.copies ? ld_cg(reinterpret_cast<const float4*>(s.at + j * kC) + i)
                          : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float4 v = from != nullptr ? ld_cg(reinterpret_cast<const float4*>(from) + i)
                               : reinterpret_cast<const float4*>(f.x)[i];
#pragma unroll
    for (int k = 0; k < kB + kC2; ++k) v.x += w[k].x, v.y += w[k].y, v.z += w[k].z, v.w += w[k].w;
    reinterpret_cast<float4*>(f.x)[i] = v;
  }
  __syncthreads();
}

// One warp: the dot products of N (<= 4) bf16 rows of kC (shared memory, kRowBytes apart) with
// xn, in every lane. N is a compile-time count: every load is issued before the first product
// (a count known only at run time leaves each row's loads behind a branch).
template <int N>
__device__ __forceinline__ void warp_rows(const bf16* w, const float* xn, float (&acc)[4]) {
  static_assert(N >= 1 && N <= 4, "up to 4 rows a warp");
  const int lane = threadIdx.x & 31;
  for (int k = 0; k < 4; ++k) acc[k] = 0.f;
#pragma unroll
  for (int c = 0; c < kC / 256; ++c) {
    const int e = (c * 32 + lane) * 8;
    const float4 x0 = *reinterpret_cast<const float4*>(xn + e);
    const float4 x1 = *reinterpret_cast<const float4*>(xn + e + 4);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const uint4 u = *reinterpret_cast<const uint4*>(w + k * kC + e);
      const float2 p0 = unpack2(u.x), p1 = unpack2(u.y), p2 = unpack2(u.z), p3 = unpack2(u.w);
      acc[k] += p0.x * x0.x + p0.y * x0.y + p1.x * x0.z + p1.y * x0.w + p2.x * x1.x + p2.y * x1.y +
                p3.x * x1.z + p3.y * x1.w;
    }
  }
#pragma unroll
  for (int k = 0; k < N; ++k) acc[k] = warp_sum(acc[k]);
}

// ---- the copies (thread 0) --------------------------------------------------------------------

__device__ __forceinline__ void copy(char* buf, int at, const void* src, int bytes, uint64_t* bar) {
  if (bytes > 0) copy_bulk(buf + at, src, static_cast<uint32_t>(bytes), bar);
}

struct HeadTask {
  int layer, head, rank;
  int first_key, keys, cached;  // keys [first_key, first_key + keys) below s; cached in smem
};
__device__ inline HeadTask head_task(const DecodeArgs& a, const StepArgs& p, int layer) {
  HeadTask t{layer, int(cluster::index()), int(cluster::rank()), 0, 0, 0};
  const int n = (a.cache + kRanks - 1) / kRanks;
  t.first_key = min(a.cache, t.rank * n);
  t.keys = min(a.cache, t.first_key + n) - t.first_key;
  t.cached = min(t.keys, p.key_cap);
  return t;
}
__device__ __forceinline__ int64_t cache_row(const DecodeArgs& a, const HeadTask& t, int pos) {
  return ((int64_t(t.layer) * kHeads + t.head) * a.positions() + pos) * kHeadDim;
}

__device__ inline void issue_head(const DecodeArgs& a, const HeadTask& t, char* buf, uint64_t* bar,
                                  int key_cap) {
  const bf16* L = layer_weights(a, t.layer);
  const int part = t.rank >> 1, half = t.rank & 1, kv = t.cached * kKeyRowBytes;
  hopper::arrive_expect_bytes(bar, kHeadKeys + 2 * kv);
  for (int m = 0; m < 3; ++m) {
    const int row = m * kC + t.head * kHeadDim + t.rank * kRankRows;
    copy(buf, kHeadWqkv + m * kRankRows * kRowBytes, L + LayerLayout::w_qkv + int64_t(row) * kC,
         kRankRows * kRowBytes, bar);
    copy(buf, kHeadBias + m * kRankRows * 2, L + LayerLayout::b_qkv + row, kRankRows * 2, bar);
  }
  const bf16* piece = head_proj_columns(a, t.layer, t.head) +
                      (int64_t(part) * kHeadDim + half * kPieceDims) * kPieceCols;
  copy(buf, kHeadWproj, piece, kPieceDims * kPieceCols * 2, bar);
  copy(buf, kHeadLn, L + LayerLayout::ln1_g, 2 * kRowBytes, bar);  // (gamma, then beta)
  copy(buf, kHeadBproj, L + LayerLayout::b_proj + part * kPieceCols, kPieceCols * 2, bar);
  copy(buf, kHeadKeys, a.k_cache + cache_row(a, t, t.first_key), kv, bar);
  copy(buf, kHeadKeys + key_cap * kKeyRowBytes, a.v_cache + cache_row(a, t, t.first_key), kv, bar);
}

__device__ __forceinline__ void mlp_rows_of(int blocks, int* first, int* rows) {
  const int g0 = blockIdx.x * kGroups / blocks, g1 = (blockIdx.x + 1) * kGroups / blocks;
  *first = 8 * g0, *rows = 8 * (g1 - g0);
}

__device__ inline void issue_mlp(const DecodeArgs& a, const StepArgs& p, int layer, char* buf,
                                 uint64_t* bar) {
  int first = 0, rows = 0;
  mlp_rows_of(gridDim.x, &first, &rows);
  const bf16* L = layer_weights(a, layer);
  hopper::arrive_expect_bytes(bar, 2 * rows * kRowBytes + rows * 2);
  copy(buf, 0, L + LayerLayout::w_fc + int64_t(first) * kC, rows * kRowBytes, bar);
  copy(buf, mlp_wout_at(p.mlp_rows), a.w_out_t + (int64_t(layer) * kF + first) * kC,
       rows * kRowBytes, bar);
  copy(buf, mlp_bias_at(p.mlp_rows), L + LayerLayout::b_fc + first, rows * 2, bar);
}

}  // namespace cluster_step
}  // namespace gpt2
}  // namespace fl
