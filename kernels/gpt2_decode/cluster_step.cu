// Level 4 at one token on sm_90: the decode step as one persistent launch of thread-block
// clusters, two grid-wide stages a layer instead of four.
//
// The task-list megakernel (megakernel.cu) waits on a count in global memory four times a layer
// (qkv, attention, proj, MLP): 48 grid-wide waits a step, each an L2 round trip or three. Only
// two of them are all-to-all: LayerNorm needs every element of the residual before qkv and
// before the MLP. The other two (a head's q, k, v before its attention; a head's splits before
// its proj) stay inside one head. Here each of the 12 heads is one cluster of 8 blocks (8 SMs of
// one GPC), and those two waits are cluster barriers, with the head's values moving through the
// blocks' shared memory (DSMEM), never through L2:
//
//   head stage (clusters 0-11, block r of head h's cluster):
//     wait for the layer before's MLP count; x = residual; LN1 -> 8 rows each of q, k, v
//     (Wqkv rows h*64 + 8r .. in shared memory) -> into every block of the cluster
//     cluster barrier
//     attention of q over keys [r*n, r*n + n) (n = ceil(s / 8); the new key on block 7) -> the
//     split's partial sums (o[64], max, sum) -> into every block of the cluster
//     cluster barrier
//     combine the 8 partials (every block, the same o) -> o times a 32 x 192 piece of Wproj's
//     head columns (dims 32 * (r & 1) .., outputs 192 * (r >> 1) ..) added (red) into the
//     layer's attention sum A[l]; release the head count
//   MLP stage (every block b of the grid): wait for the head count (96); x + A[l]; LN2 -> its
//     rows of h = GELU(Wfc x + bfc) (24 of 3072 on 128 blocks) -> h times the same rows of Wout
//     transposed, added into the layer's MLP sum M[l]; release the MLP count.
//
// The residual entering layer l + 1 is R[l] + A[l] + M[l]: the head stage's blocks sum the three
// (and block 0 stores it as R[l + 1] for the MLP stage), so no stage writes a vector that
// another stage of the same layer is still reading. The final norm's block zeroes A, M and the
// counts for the next launch once the last MLP count is in.
//
// Bytes: each block keeps two buffers in shared memory, one for its head task (Wqkv rows 36 KB,
// Wproj piece 12 KB, its keys and values: 16 KB at s = 512, 64 KB at 2K; keys past what fits are
// read from global memory) and one for its MLP task (Wfc and Wout rows, 72 KB on 128 blocks).
// Thread 0 asks for a buffer's next task (TMA bulk copies, one mbarrier a buffer) right after the
// count that ends its task is released, so the bytes stream while the block waits. At s = 512 a
// step reads 189.0 MB (61.8 us at ~3.06 TB/s); the chain is 24 grid-wide waits (~1.2 us each
// bare) and 24 pairs of cluster barriers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/cluster.cuh"
#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/gpt2_decode/copies.cuh"
#include "kernels/gpt2_decode/counters.cuh"
#include "kernels/gpt2_decode/launch.h"
#include "kernels/phases.cuh"

namespace fl {
namespace gpt2 {
namespace {

constexpr int kRanks = 8;                     // blocks a cluster
constexpr int kRankRows = kHeadDim / kRanks;  // rows of each of q, k, v a block computes
constexpr int kHeadBlocks = kHeads * kRanks;  // blocks with a head task (96)
constexpr int kPieceCols = kProjRows;         // proj outputs a block adds (192)
constexpr int kPieceDims = kHeadDim / 2;      // head dims a block's proj piece covers (32)
constexpr int kRowBytes = kC * 2;             // a weight row (1536 B)
constexpr int kGroups = kF / 8;               // MLP rows dealt in groups of 8 (384)
constexpr int kMaxRankKeys = kMaxCache / kRanks + 1;

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
  float x[kC];                       // the residual, then (MLP) unused
  float xn[kC];                      // LayerNorm's output
  float qkv[3 * kHeadDim];           // the head's new q (scaled), k, v: written by every block
  float parts[kRanks][kPartStride];  // the splits' partials: written by every block
  float mine[kPartStride];           // this block's partial, before it goes out
  float o[kHeadDim];                 // the head's combined output
  float warps[kWarps][kHeadDim];     // the attention's per-warp sums
  float stage[64];                   // this block's 24 q, k, v values, or its MLP rows' h
  float stat[32];                    // block reductions
  float scores[kMaxRankKeys + 15];
};
constexpr int kFixedBytes = (int(sizeof(Fixed)) + 1023) & ~1023;
static_assert(offsetof(Fixed, qkv) % 16 == 0 && offsetof(Fixed, parts) % 16 == 0 &&
                  kPartStride % 4 == 0 && offsetof(Fixed, xn) % 16 == 0,
              "16-byte stores into other blocks and float4 reads");

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
__host__ __device__ constexpr int mlp_ln_at(int rows) {
  return 2 * rows * kRowBytes;
}
__host__ __device__ constexpr int mlp_bias_at(int rows) {
  return mlp_ln_at(rows) + 2 * kRowBytes;
}
__host__ __device__ constexpr int mlp_bout_at(int rows) {
  return mlp_bias_at(rows) + rows * 2;
}

Layout layout_for(int clusters, int optin) {
  Layout l;
  l.blocks = clusters * kRanks;
  l.mlp_rows = 8 * ((kGroups + l.blocks - 1) / l.blocks);
  l.mlp_bytes = mlp_bout_at(l.mlp_rows) + kRowBytes;
  const int head_bytes = optin - 1024 - kFixedBytes - l.mlp_bytes;  // (1 KB: the mbarriers)
  l.key_cap = (head_bytes - kHeadKeys) / (2 * kKeyRowBytes);
  l.shared = kFixedBytes + l.mlp_bytes + kHeadKeys + 2 * l.key_cap * kKeyRowBytes;
  return l;
}

struct StepArgs {
  unsigned* counts;  // [layer]: head blocks done, then [kLayers + layer]: MLP blocks done
  float* sums;       // R[layer] (l >= 1), then A[layer], then M[layer], kC floats each
  int mlp_rows, key_cap, mlp_bytes;
  unsigned long long* stamps;  // null, or kStamps a layer a block (ClusterStamp, a measurement)
};
// Thread 0's times in a layer (globaltimer ns), with stamps on: the head stage's start, its count
// seen, x loaded, its bytes in, its rows sent, the first cluster barrier passed, its split sent,
// the second passed, its count released; the MLP stage's count seen, bytes in, count released.
enum ClusterStamp {
  kHeadStart,
  kHeadSeen,
  kHeadInputs,
  kHeadBytes,
  kHeadRows,
  kHeadBarrier1,
  kHeadSplit,
  kHeadBarrier2,
  kHeadReleased,
  kMlpSeen,
  kMlpBytes,
  kMlpReleased,
  kStamps
};
static_assert(kStamps * kLayers == kClusterStepStamps, "launch.h's count");
__device__ __forceinline__ void stamp(const StepArgs& p, int layer, int which) {
  if (p.stamps != nullptr && threadIdx.x == 0)
    p.stamps[(int64_t(blockIdx.x) * kLayers + layer) * kStamps + which] = phase_clock();
}
__device__ __forceinline__ float* residual_of(const StepArgs& p, int l) {
  return p.sums + l * kC;
}
__device__ __forceinline__ float* attn_of(const StepArgs& p, int l) {
  return p.sums + (kLayers + l) * kC;
}
__device__ __forceinline__ float* mlp_of(const StepArgs& p, int l) {
  return p.sums + (2 * kLayers + l) * kC;
}

// ---- block-wide helpers (256 threads) ---------------------------------------------------------

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// The block's sum (or max) of v, in every thread; `slot` (8 floats) must not be in use.
template <bool kMax>
__device__ float block_reduce(float v, float* slot) {
  v = kMax ? warp_max(v) : warp_sum(v);
  if ((threadIdx.x & 31) == 0) slot[threadIdx.x / 32] = v;
  __syncthreads();
  float r = slot[0];
  for (int w = 1; w < kWarps; ++w) r = kMax ? fmaxf(r, slot[w]) : r + slot[w];
  return r;
}

// xn = LayerNorm(x) (two passes, as the reference), gamma and beta bf16.
__device__ void layer_norm(Fixed& f, const bf16* gamma, const bf16* beta) {
  float v[3], s = 0.f;
  for (int k = 0; k < 3; ++k) s += v[k] = f.x[threadIdx.x + k * kThreads];
  const float mean = block_reduce<false>(s, f.stat) * (1.f / kC);
  float d = 0.f;
  for (int k = 0; k < 3; ++k) d += (v[k] - mean) * (v[k] - mean);
  const float rstd = rsqrtf(block_reduce<false>(d, f.stat + 8) * (1.f / kC) + float(kLnEps));
  for (int k = 0; k < 3; ++k) {
    const int i = threadIdx.x + k * kThreads;
    f.xn[i] = (v[k] - mean) * rstd * __bfloat162float(gamma[i]) + __bfloat162float(beta[i]);
  }
  __syncthreads();
}

// x = the sum of up to three vectors another stage wrote (L2 loads: ld.global.cg).
__device__ void load_sum(Fixed& f, const float* a, const float* b, const float* c) {
  for (int i = threadIdx.x; i < kC / 4; i += kThreads) {
    float4 v = ld_cg(reinterpret_cast<const float4*>(a) + i);
    if (b != nullptr) {
      const float4 w = ld_cg(reinterpret_cast<const float4*>(b) + i);
      v.x += w.x, v.y += w.y, v.z += w.z, v.w += w.w;
    }
    if (c != nullptr) {
      const float4 w = ld_cg(reinterpret_cast<const float4*>(c) + i);
      v.x += w.x, v.y += w.y, v.z += w.z, v.w += w.w;
    }
    reinterpret_cast<float4*>(f.x)[i] = v;
  }
  __syncthreads();
}

// One warp: the dot products of `n` (<= 4) bf16 rows of kC (shared memory, kRowBytes apart)
// with xn, in every lane.
__device__ __forceinline__ void warp_rows(const bf16* w, const float* xn, int n, float (&acc)[4]) {
  const int lane = threadIdx.x & 31;
  for (int k = 0; k < 4; ++k) acc[k] = 0.f;
#pragma unroll
  for (int c = 0; c < kC / 256; ++c) {
    const int e = (c * 32 + lane) * 8;
    const float4 x0 = *reinterpret_cast<const float4*>(xn + e);
    const float4 x1 = *reinterpret_cast<const float4*>(xn + e + 4);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (k >= n) break;
      const uint4 u = *reinterpret_cast<const uint4*>(w + k * kC + e);
      const float2 p0 = unpack2(u.x), p1 = unpack2(u.y), p2 = unpack2(u.z), p3 = unpack2(u.w);
      acc[k] += p0.x * x0.x + p0.y * x0.y + p1.x * x0.z + p1.y * x0.w + p2.x * x1.x + p2.y * x1.y +
                p3.x * x1.z + p3.y * x1.w;
    }
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) acc[k] = warp_sum(acc[k]);
}

// ---- the copies (thread 0) --------------------------------------------------------------------

__device__ void copy(char* buf, int at, const void* src, int bytes, uint64_t* bar) {
  if (bytes > 0) copy_bulk(buf + at, src, static_cast<uint32_t>(bytes), bar);
}

struct HeadTask {
  int layer, head, rank;
  int first_key, keys, cached;  // keys [first_key, first_key + keys) below s; cached in smem
};
__device__ HeadTask head_task(const DecodeArgs& a, const StepArgs& p, int layer) {
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

__device__ void issue_head(const DecodeArgs& a, const HeadTask& t, char* buf, uint64_t* bar,
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

__device__ void mlp_rows_of(int blocks, int* first, int* rows) {
  const int g0 = blockIdx.x * kGroups / blocks, g1 = (blockIdx.x + 1) * kGroups / blocks;
  *first = 8 * g0, *rows = 8 * (g1 - g0);
}

__device__ void issue_mlp(const DecodeArgs& a, const StepArgs& p, int layer, char* buf,
                          uint64_t* bar) {
  int first = 0, rows = 0;
  mlp_rows_of(gridDim.x, &first, &rows);
  const bf16* L = layer_weights(a, layer);
  const int bout = blockIdx.x == 0 ? kRowBytes : 0;
  hopper::arrive_expect_bytes(bar, 2 * rows * kRowBytes + 2 * kRowBytes + rows * 2 + bout);
  copy(buf, 0, L + LayerLayout::w_fc + int64_t(first) * kC, rows * kRowBytes, bar);
  copy(buf, mlp_wout_at(p.mlp_rows), a.w_out_t + (int64_t(layer) * kF + first) * kC,
       rows * kRowBytes, bar);
  copy(buf, mlp_ln_at(p.mlp_rows), L + LayerLayout::ln2_g, 2 * kRowBytes, bar);
  copy(buf, mlp_bias_at(p.mlp_rows), L + LayerLayout::b_fc + first, rows * 2, bar);
  copy(buf, mlp_bout_at(p.mlp_rows), L + LayerLayout::b_out, bout, bar);
}

// ---- the head stage ---------------------------------------------------------------------------

// The residual entering layer l as stored (R[l]; the step's input for layer 0).
__device__ __forceinline__ const float* base_of(const DecodeArgs& a, const StepArgs& p, int l) {
  return l == 0 ? a.x_in : residual_of(p, l);
}

// LN1 of x -> this block's 8 rows each of q (scaled by 1/8), k and v (k and v rounded to bf16, as
// the cache keeps them) into every block of the cluster; k and v into the cache at position s.
__device__ void head_rows(const DecodeArgs& a, const HeadTask& t, Fixed& f, const char* buf) {
  const bf16* w = reinterpret_cast<const bf16*>(buf + kHeadWqkv);
  const bf16* bias = reinterpret_cast<const bf16*>(buf + kHeadBias);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  constexpr int kPerWarp = 3 * kRankRows / kWarps;  // 3
  float acc[4];
  warp_rows(w + warp * kPerWarp * kC, f.xn, kPerWarp, acc);
#pragma unroll
  for (int k = 0; k < kPerWarp; ++k) {
    const int i = warp * kPerWarp + k;
    const float v = acc[k] + __bfloat162float(bias[i]);
    if (lane == k) f.stage[i] = i < kRankRows ? v * 0.125f : __bfloat162float(__float2bfloat16(v));
  }
  __syncthreads();
  if (threadIdx.x < 2 * kRanks * 3) {  // 16 bytes a store: 6 a destination
    const int to = threadIdx.x / 6, m = threadIdx.x % 6 / 2, h = threadIdx.x & 1;
    const float* v = f.stage + m * kRankRows + h * 4;
    cluster::store_peer(&f.qkv[m * kHeadDim + t.rank * kRankRows + h * 4], to,
                        make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]),
                                   __float_as_uint(v[2]), __float_as_uint(v[3])));
  } else if (threadIdx.x < 2 * kRanks * 3 + 2) {  // the new k and v rows' 8 values
    const int m = threadIdx.x - 2 * kRanks * 3 + 1;
    __align__(16) bf16 row[kRankRows];
    for (int k = 0; k < kRankRows; ++k) row[k] = __float2bfloat16(f.stage[m * kRankRows + k]);
    bf16* cache = (m == 1 ? a.k_cache : a.v_cache) + cache_row(a, t, a.cache) + t.rank * kRankRows;
    *reinterpret_cast<uint4*>(cache) = *reinterpret_cast<const uint4*>(row);
  }
}

// Key j of the block's split (j == keys: the new one, on block 7), from shared memory where it
// was copied, else from global memory; 8 values from `at`.
__device__ __forceinline__ uint4 key_chunk(const DecodeArgs& a, const HeadTask& t, const bf16* kbuf,
                                           int j, int at) {
  if (j < t.cached) return *reinterpret_cast<const uint4*>(kbuf + j * kHeadDim + at);
  return __ldg(reinterpret_cast<const uint4*>(a.k_cache + cache_row(a, t, t.first_key + j) + at));
}
__device__ __forceinline__ float2 value_pair(const DecodeArgs& a, const HeadTask& t, const Fixed& f,
                                             const bf16* vbuf, int j, int d) {
  if (j == t.keys) return make_float2(f.qkv[2 * kHeadDim + d], f.qkv[2 * kHeadDim + d + 1]);
  const bf16* row =
      j < t.cached ? vbuf + j * kHeadDim : a.v_cache + cache_row(a, t, t.first_key + j);
  return unpack2(*reinterpret_cast<const unsigned*>(row + d));
}

// The split's partial softmax sums over its keys -> parts[rank] of every block of the cluster.
__device__ void attend(const DecodeArgs& a, const HeadTask& t, Fixed& f, const char* buf,
                       int key_cap) {
  const bf16* kbuf = reinterpret_cast<const bf16*>(buf + kHeadKeys);
  const bf16* vbuf = kbuf + key_cap * kHeadDim;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, sub = lane & 7;
  const bool has_new = t.rank == kRanks - 1;
  const int total = t.keys + (has_new ? 1 : 0);
  float q[8];
  for (int k = 0; k < 8; ++k) q[k] = f.qkv[sub * 8 + k];
  for (int j0 = 0; j0 < t.keys; j0 += 4 * kWarps) {  // 8 lanes a key, 4 keys a warp
    const int j = j0 + warp * 4 + (lane >> 3);
    float s = 0.f;
    if (j < t.keys) {
      const uint4 u = key_chunk(a, t, kbuf, j, sub * 8);
      const float2 k0 = unpack2(u.x), k1 = unpack2(u.y), k2 = unpack2(u.z), k3 = unpack2(u.w);
      s = q[0] * k0.x + q[1] * k0.y + q[2] * k1.x + q[3] * k1.y + q[4] * k2.x + q[5] * k2.y +
          q[6] * k3.x + q[7] * k3.y;
    }
    for (int o = 4; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (sub == 0 && j < t.keys) f.scores[j] = s;
  }
  if (has_new && warp == 0) {
    const float s = warp_sum(f.qkv[2 * lane] * f.qkv[kHeadDim + 2 * lane] +
                             f.qkv[2 * lane + 1] * f.qkv[kHeadDim + 2 * lane + 1]);
    if (lane == 0) f.scores[t.keys] = s;
  }
  __syncthreads();
  float m = -INFINITY;
  for (int j = threadIdx.x; j < total; j += kThreads) m = fmaxf(m, f.scores[j]);
  m = block_reduce<true>(m, f.stat + 16);
  float l = 0.f;
  for (int j = threadIdx.x; j < total; j += kThreads) l += f.scores[j] = __expf(f.scores[j] - m);
  l = block_reduce<false>(l, f.stat + 24);  // (its barrier orders the scores' stores too)
  float2 o = make_float2(0.f, 0.f);
  for (int j = warp; j < total; j += kWarps) {
    const float pj = f.scores[j];
    const float2 v = value_pair(a, t, f, vbuf, j, 2 * lane);
    o.x += pj * v.x, o.y += pj * v.y;
  }
  f.warps[warp][2 * lane] = o.x, f.warps[warp][2 * lane + 1] = o.y;
  __syncthreads();
  if (threadIdx.x < kHeadDim) {
    float sum = 0.f;
    for (int w = 0; w < kWarps; ++w) sum += f.warps[w][threadIdx.x];
    f.mine[threadIdx.x] = sum;
  } else if (threadIdx.x < kPartStride) {
    f.mine[threadIdx.x] = threadIdx.x == kHeadDim ? m : threadIdx.x == kHeadDim + 1 ? l : 0.f;
  }
  __syncthreads();
  constexpr int kQuads = kPartStride / 4;  // 17 stores of 16 bytes a destination
  if (threadIdx.x < kRanks * kQuads) {
    const int to = threadIdx.x / kQuads, q4 = threadIdx.x % kQuads;
    const float* v = f.mine + q4 * 4;
    cluster::store_peer(&f.parts[t.rank][q4 * 4], to,
                        make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]),
                                   __float_as_uint(v[2]), __float_as_uint(v[3])));
  }
}

// The head's output from the 8 partials, times this block's piece of Wproj, added into A[l].
__device__ void project(const StepArgs& p, const HeadTask& t, Fixed& f, const char* buf) {
  if (threadIdx.x < kHeadDim) {
    float m = -INFINITY;
    for (int r = 0; r < kRanks; ++r) m = fmaxf(m, f.parts[r][kHeadDim]);
    float l = 0.f, o = 0.f;
    for (int r = 0; r < kRanks; ++r) {
      const float e = __expf(f.parts[r][kHeadDim] - m);  // (0 for a split with no keys)
      l += e * f.parts[r][kHeadDim + 1], o += e * f.parts[r][threadIdx.x];
    }
    f.o[threadIdx.x] = o / l;
  }
  __syncthreads();
  if (threadIdx.x >= kPieceCols / 2) return;
  const int half = t.rank & 1, part = t.rank >> 1, c = 2 * threadIdx.x;
  const bf16* w = reinterpret_cast<const bf16*>(buf + kHeadWproj);
  float2 sum = make_float2(0.f, 0.f);
  if (t.head == 0 && half == 0) {  // bproj, once
    sum = unpack2(
        *reinterpret_cast<const unsigned*>(reinterpret_cast<const bf16*>(buf + kHeadBproj) + c));
  }
#pragma unroll 8
  for (int d = 0; d < kPieceDims; ++d) {
    const float od = f.o[half * kPieceDims + d];
    const float2 wv = unpack2(*reinterpret_cast<const unsigned*>(w + d * kPieceCols + c));
    sum.x += od * wv.x, sum.y += od * wv.y;
  }
  float* out = attn_of(p, t.layer) + part * kPieceCols + c;
  atomicAdd(out, sum.x);
  atomicAdd(out + 1, sum.y);
}

__device__ void head_stage(const DecodeArgs& a, const StepArgs& p, Fixed& f, char* buf,
                           uint64_t* bar, unsigned parity, int l) {
  const HeadTask t = head_task(a, p, l);
  stamp(p, l, kHeadStart);
  if (threadIdx.x == 0 && l > 0) wait_count(p.counts + kLayers + l - 1, gridDim.x, false);
  stamp(p, l, kHeadSeen);
  __syncthreads();
  if (l == 0) {
    load_sum(f, a.x_in, nullptr, nullptr);
  } else {
    load_sum(f, base_of(a, p, l - 1), attn_of(p, l - 1), mlp_of(p, l - 1));
    for (int i = threadIdx.x; blockIdx.x == 0 && i < kC / 4; i += kThreads)  // R[l], for the MLP
      reinterpret_cast<float4*>(residual_of(p, l))[i] = reinterpret_cast<const float4*>(f.x)[i];
  }
  stamp(p, l, kHeadInputs);
  hopper::wait(bar, parity);
  stamp(p, l, kHeadBytes);
  const bf16* ln = reinterpret_cast<const bf16*>(buf + kHeadLn);
  layer_norm(f, ln, ln + kC);
  head_rows(a, t, f, buf);
  stamp(p, l, kHeadRows);
  cluster::sync();  // every block's q, k, v rows in
  stamp(p, l, kHeadBarrier1);
  attend(a, t, f, buf, p.key_cap);
  stamp(p, l, kHeadSplit);
  cluster::sync();  // every split's partial in
  stamp(p, l, kHeadBarrier2);
  project(p, t, f, buf);
  __syncthreads();
  if (threadIdx.x == 0) {
    release_add(p.counts + l, 1u);
    stamp(p, l, kHeadReleased);
    if (l + 1 < kLayers) issue_head(a, head_task(a, p, l + 1), buf, bar, p.key_cap);
  }
}

// ---- the MLP stage ----------------------------------------------------------------------------

__device__ void mlp_stage(const DecodeArgs& a, const StepArgs& p, Fixed& f, char* buf,
                          uint64_t* bar, unsigned parity, int l) {
  int first = 0, rows = 0;
  mlp_rows_of(gridDim.x, &first, &rows);
  if (threadIdx.x == 0) wait_count(p.counts + l, kHeadBlocks, false);
  stamp(p, l, kMlpSeen);
  __syncthreads();
  load_sum(f, base_of(a, p, l), attn_of(p, l), nullptr);
  hopper::wait(bar, parity);
  stamp(p, l, kMlpBytes);
  const bf16* ln = reinterpret_cast<const bf16*>(buf + mlp_ln_at(p.mlp_rows));
  layer_norm(f, ln, ln + kC);
  const bf16* wfc = reinterpret_cast<const bf16*>(buf);
  const bf16* bias = reinterpret_cast<const bf16*>(buf + mlp_bias_at(p.mlp_rows));
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, per_warp = rows / kWarps;
  for (int r0 = warp * per_warp; r0 < (warp + 1) * per_warp; r0 += 4) {
    const int n = min(4, (warp + 1) * per_warp - r0);
    float acc[4];
    warp_rows(wfc + r0 * kC, f.xn, n, acc);
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (k < n && lane == k) f.stage[r0 + k] = gelu(acc[k] + __bfloat162float(bias[r0 + k]));
  }
  __syncthreads();
  if (threadIdx.x < kC / 4) {  // 4 outputs a thread: h times Wout's rows (transposed)
    const bf16* wout = reinterpret_cast<const bf16*>(buf + mlp_wout_at(p.mlp_rows));
    const int c = 4 * threadIdx.x;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    if (blockIdx.x == 0) {  // bout, once
      const uint2 u = *reinterpret_cast<const uint2*>(
          reinterpret_cast<const bf16*>(buf + mlp_bout_at(p.mlp_rows)) + c);
      const float2 b0 = unpack2(u.x), b1 = unpack2(u.y);
      acc[0] = b0.x, acc[1] = b0.y, acc[2] = b1.x, acc[3] = b1.y;
    }
    for (int r = 0; r < rows; ++r) {
      const float hr = f.stage[r];
      const uint2 u = *reinterpret_cast<const uint2*>(wout + r * kC + c);
      const float2 w0 = unpack2(u.x), w1 = unpack2(u.y);
      acc[0] += hr * w0.x, acc[1] += hr * w0.y, acc[2] += hr * w1.x, acc[3] += hr * w1.y;
    }
    red_add4(mlp_of(p, l) + c, acc);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    release_add(p.counts + kLayers + l, 1u);
    stamp(p, l, kMlpReleased);
    if (l + 1 < kLayers) issue_mlp(a, p, l + 1, buf, bar);
  }
}

// y = LN_f(the last residual), then the sums and counts zeroed for the next launch (block 0,
// once every MLP block of the last layer is counted: no block reads them after).
__device__ void final_norm(const DecodeArgs& a, const StepArgs& p, Fixed& f) {
  if (threadIdx.x == 0) wait_count(p.counts + 2 * kLayers - 1, gridDim.x, false);
  __syncthreads();
  load_sum(f, base_of(a, p, kLayers - 1), attn_of(p, kLayers - 1), mlp_of(p, kLayers - 1));
  layer_norm(f, a.weights + kFinalLnG, a.weights + kFinalLnG + kC);
  for (int i = threadIdx.x; i < kC; i += kThreads) a.y[i] = f.xn[i];
  for (int i = threadIdx.x; i < 2 * kLayers * kC; i += kThreads) attn_of(p, 0)[i] = 0.f;
  for (int i = threadIdx.x; i < 2 * kLayers; i += kThreads) p.counts[i] = 0u;
}

__global__ void __launch_bounds__(kThreads, 1) cluster_step(DecodeArgs a, StepArgs p) {
#ifdef FL_SM90A_DEVICE
  extern __shared__ __align__(16) char smem[];
  __shared__ uint64_t landed[2];  // the head buffer's bytes, the MLP buffer's
  Fixed& f = *reinterpret_cast<Fixed*>(smem);
  char* mlp_buf = smem + kFixedBytes;
  char* head_buf = mlp_buf + p.mlp_bytes;
  const bool heads = cluster::index() < kHeads;
  if (threadIdx.x == 0) {
    hopper::barrier_init(&landed[0], 1);
    hopper::barrier_init(&landed[1], 1);
    hopper::barrier_init_fence();
    if (heads) issue_head(a, head_task(a, p, 0), head_buf, &landed[0], p.key_cap);
    issue_mlp(a, p, 0, mlp_buf, &landed[1]);
  }
  cluster::sync();  // every block of the cluster running (DSMEM stores follow), barriers set
  for (int l = 0; l < kLayers; ++l) {
    const unsigned parity = l & 1;  // (each buffer's barrier completes once a layer)
    if (heads) head_stage(a, p, f, head_buf, &landed[0], parity, l);
    mlp_stage(a, p, f, mlp_buf, &landed[1], parity, l);
  }
  if (blockIdx.x == 0) final_norm(a, p, f);
#endif
}

}  // namespace

bool cluster_step_requested() {
  const char* env = std::getenv("FL_DECODE_CLUSTER");
  return env != nullptr && std::strcmp(env, "1") == 0;
}

Status cluster_step_clusters(int* clusters) {
  *clusters = 0;
  if (!kWgmmaBuild) return Status::Ok();
  bool sm90 = false;
  int optin = 0;
  FL_TRY(hopper::current_device(&sm90, &optin));
  if (!sm90) return Status::Ok();
  for (int q = 16; q >= kHeads; --q) {  // the most clusters of 8 that run at once, >= 12
    const Layout l = layout_for(q, optin);
    if (l.key_cap < 1) continue;
    cluster::Launch launch(q, kRanks, kThreads, size_t(l.shared));
    bool fit = false;
    FL_TRY(cluster::all_resident(reinterpret_cast<const void*>(cluster_step), launch, &fit));
    if (fit) {
      *clusters = q;
      return Status::Ok();
    }
  }
  return Status::Ok();
}

Status launch_cluster_step(const DecodeArgs& a, const ClusterStepPlan& plan, cudaStream_t s) {
  if (a.tokens != 1 || a.w_out_t == nullptr || a.w_proj_t == nullptr)
    return Status::Error("the cluster step runs one token with Wout and Wproj regrouped");
  bool sm90 = false;
  int optin = 0;
  FL_TRY(hopper::current_device(&sm90, &optin));
  const Layout l = layout_for(plan.clusters, optin);
  const StepArgs p{plan.counts, plan.sums, l.mlp_rows, l.key_cap, l.mlp_bytes, plan.stamps};
  cluster::Launch launch(plan.clusters, kRanks, kThreads, size_t(l.shared), s);
  FL_CUDA_TRY(
      cudaFuncSetAttribute(cluster_step, cudaFuncAttributeMaxDynamicSharedMemorySize, l.shared));
  FL_CUDA_TRY(cudaLaunchKernelEx(&launch.config, cluster_step, a, p));
  return Status::Ok();
}

}  // namespace gpt2
}  // namespace fl
