// Level 4 at one token on sm_90 (the megakernel launch's variants "clusters" up to a cache of 2K
// and "clusters_long", with the key passes, past it): the decode step as one persistent launch
// of thread-block clusters, two grid-wide waits a layer instead of the task list's four.
//
// The task-list megakernel (megakernel.cu) waits on a count in global memory four times a layer
// (qkv, attention, proj, MLP): 48 grid-wide waits a step, each an L2 round trip or three. Only
// two of them are all-to-all: LayerNorm needs every element of the residual before qkv and
// before the MLP. The other two (a head's q, k, v before its attention; a head's splits before
// its proj) stay inside one head. Here each of the 12 heads is one cluster of 8 blocks (8 SMs of
// one GPC), and those two waits are exchanges through the blocks' shared memory (DSMEM), never
// through L2:
//
//   head stage (clusters 0-11, block r of head h's cluster):
//     wait for the layer before's MLP count; x = the residual; LN1 -> 8 rows each of q, k, v
//     (Wqkv rows h*64 + 8r .. in shared memory) -> into every block of the cluster (st.async:
//     each block waits on its own mbarrier for the 8 x 96 bytes it expects, no cluster barrier)
//     attention of q over keys [r*n, r*n + n) (n = ceil(s / 8); the new key on block 7), each
//     warp an online softmax over its keys, the 8 warps merged -> the split's partial sums
//     (o[64], max, sum) -> into every block of the cluster, the same way
//     merge the 8 partials (every block, the same o) -> o times a 32 x 192 piece of Wproj's
//     head columns (dims 32 * (r & 1) .., outputs 192 * (r >> 1) ..) added (red.add.v4) into
//     the layer's attention sum A[l]; release the head count
//   MLP stage (every block b of the grid): wait for the head count (96); x + A[l]; LN2 -> its
//     rows of h = GELU(Wfc x + bfc) (24 or 32 of 3072 on 120 blocks) -> h times the same rows
//     of Wout transposed: 768 partial sums, 96 to each block of the cluster (st.async) -> the
//     cluster's 8 partials of its 96 columns added up, then into the layer's MLP sum M[l]
//     (red.add.v4: 15 adds on each line of L2, not 120); release the MLP count.
//
// The residual entering layer l + 1 is R[l + 1] = R[l] + A[l] + M[l], never stored: every block
// keeps the x it last loaded in shared memory (R[l] + A[l] after the MLP stage's load) and adds
// only the sum the count it waited for completed (M[l] in the head stage, A[l + 1] in the MLP
// stage; the blocks without a head, which skip the head stage, both, in the same order), so
// every block holds the same x and no stage writes a vector another stage is still reading. The
// blocks without a head zero layer l - 2's sums for the next launch after their MLP stage (every
// reader is done), the final norm's block the last two layers' and the counts.
//
// Bytes: each block keeps two buffers in shared memory, one for its head task (Wqkv rows 36 KB,
// Wproj piece 12 KB, LN1's parameters, its keys and values: 16 KB at s = 512, 64 KB at 2K) and
// one for its MLP task (Wfc and Wout rows, 74-98 KB). Thread 0 asks for a buffer's next task
// (TMA bulk copies, one mbarrier a buffer) once the block has loaded x in its other stage: the
// head bytes of layer l + 1 after the MLP stage's x of layer l, the MLP bytes of layer l after
// the head stage's x (blocks without a head: right after their MLP count). Asked for at a
// release, the grid's wave of copies (~15 MB a layer) would sit in front of the next stage's x,
// the one load on the chain, in every SM's path from L2. At s = 512 a step reads 189.0 MB
// (61.8 us at ~3.06 TB/s); the chain is 24 grid-wide waits (~1.2 us each bare) and 36 exchanges
// inside the clusters. Past ~2.1K a block's keys outgrow its buffer: the rest stream through the
// same buffer after the first part, a buffer's worth a pass (TMA, waited for on the spot).
// Blocks: clusters of 8, as many as are resident at once (15 on an H100 SXM: 120 blocks; 96 run
// the heads, all 120 the MLP; at least 12). With phases on, thread 0 writes a record a stage
// (model.h's cluster_record_arg), from the stage's start (its wait included) to its release.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cluster.cuh"
#include "kernels/cuda_check.h"
#include "kernels/gpt2_decode/cluster_step.cuh"

namespace fl {
namespace gpt2 {
namespace {

using namespace cluster_step;

// The sums' copies the step keeps (StepArgs): one each (docs/PERFORMANCE.md has what more gave).
constexpr int kAttnCopies = 1, kMlpCopies = 1;

// ---- the head stage ---------------------------------------------------------------------------

// LN1 of x -> this block's 8 rows each of q (scaled by 1/8), k and v (k and v rounded to bf16, as
// the cache keeps them) into every block of the cluster; k and v into the cache at position s.
__device__ void head_rows(const DecodeArgs& a, const HeadTask& t, Fixed& f, const char* buf,
                          uint64_t* rows_in) {
  const bf16* w = reinterpret_cast<const bf16*>(buf + kHeadWqkv);
  const bf16* bias = reinterpret_cast<const bf16*>(buf + kHeadBias);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  constexpr int kPerWarp = 3 * kRankRows / kWarps;  // 3
  float acc[4];
  warp_rows<kPerWarp>(w + warp * kPerWarp * kC, f.xn, acc);
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
    cluster::store_async_peer(&f.qkv[m * kHeadDim + t.rank * kRankRows + h * 4], to,
                              make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]),
                                         __float_as_uint(v[2]), __float_as_uint(v[3])),
                              rows_in);
  } else if (threadIdx.x < 2 * kRanks * 3 + 2) {  // the new k and v rows' 8 values
    const int m = threadIdx.x - 2 * kRanks * 3 + 1;
    __align__(16) bf16 row[kRankRows];
    for (int k = 0; k < kRankRows; ++k) row[k] = __float2bfloat16(f.stage[m * kRankRows + k]);
    bf16* cache = (m == 1 ? a.k_cache : a.v_cache) + cache_row(a, t, a.cache) + t.rank * kRankRows;
    *reinterpret_cast<uint4*>(cache) = *reinterpret_cast<const uint4*>(row);
  }
}

// One warp's online softmax: the running max, sum and its lanes' two dims of the output.
struct Online {
  float m = -INFINITY, l = 0.f;
  float2 o = make_float2(0.f, 0.f);
  // Four more scores (every lane holds them; -inf: no key) and the lane's value pairs.
  __device__ __forceinline__ void add(const float (&s)[4], const float2 (&v)[4]) {
    const float mn = fmaxf(fmaxf(m, fmaxf(s[0], s[1])), fmaxf(s[2], s[3]));
    const float scale = __expf(m - mn);  // (m = -inf at first: 0; mn is finite)
    l *= scale, o.x *= scale, o.y *= scale, m = mn;
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      const float p = __expf(s[g] - mn);
      l += p, o.x += p * v[g].x, o.y += p * v[g].y;
    }
  }
  // One more score and value pair.
  __device__ __forceinline__ void add1(float s, float2 v) {
    const float mn = fmaxf(m, s), scale = __expf(m - mn), p = __expf(s - mn);
    l = l * scale + p, o.x = o.x * scale + p * v.x, o.y = o.y * scale + p * v.y, m = mn;
  }
};

// One warp's keys [0, n) of the head buffer's rows, 4 at a time from 4 * warp on, every 32nd
// (8 lanes a key for the score, each lane two dims of the values); the key index clamped into
// range and a clamped key's score -inf, so the loop has no branch.
__device__ __forceinline__ void attend_keys(Online& on, const float (&q)[8], const bf16* k,
                                            const bf16* v, int n) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, sub = lane & 7;
#pragma unroll 2
  for (int j0 = warp * 4; j0 < n; j0 += 4 * kWarps) {
    const int j = j0 + (lane >> 3);
    const uint4 u = *reinterpret_cast<const uint4*>(k + min(j, n - 1) * kHeadDim + sub * 8);
    const float2 k0 = unpack2(u.x), k1 = unpack2(u.y), k2 = unpack2(u.z), k3 = unpack2(u.w);
    float s = q[0] * k0.x + q[1] * k0.y + q[2] * k1.x + q[3] * k1.y + q[4] * k2.x + q[5] * k2.y +
              q[6] * k3.x + q[7] * k3.y;
    for (int o = 4; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (j >= n) s = -INFINITY;
    float s4[4];
    float2 v4[4];
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      s4[g] = __shfl_sync(0xffffffffu, s, g * 8);
      v4[g] =
          unpack2(*reinterpret_cast<const unsigned*>(v + min(j0 + g, n - 1) * kHeadDim + 2 * lane));
    }
    on.add(s4, v4);
  }
}

// The split's partial softmax sums over its keys -> parts[rank] of every block of the cluster.
// Warp w takes keys w*4 .. w*4 + 3 of every 32 (8 lanes a key for the scores, every lane two
// dims of the values), an online softmax of its own; the 8 warps merged at the end.
template <bool kKeyPasses>
__device__ void attend(const DecodeArgs& a, const StepArgs& p, const HeadTask& t, Fixed& f,
                       char* buf, uint64_t* splits_in, uint64_t* more_keys) {
  const int key_cap = p.key_cap;
  const bf16* kbuf = reinterpret_cast<const bf16*>(buf + kHeadKeys);
  const bf16* vbuf = kbuf + key_cap * kHeadDim;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, sub = lane & 7;
  float q[8];
  for (int k = 0; k < 8; ++k) q[k] = f.qkv[sub * 8 + k];
  Online on;
  attend_keys(on, q, kbuf, vbuf, t.cached);
  // Keys past the buffer (a cache past ~2.1K): through the same buffer, a buffer's worth a pass
  // (TMA; `passes` the same every layer, so pass i of layer l is the barrier's phase l*passes+i).
  // Built without them (kKeyPasses false) for the caches whose keys fit: their code, never run
  // there, slows that kernel (docs/PERFORMANCE.md, lesson 11).
  const int passes = kKeyPasses ? (t.keys - t.cached + key_cap - 1) / key_cap : 0;
  for (int i = 0; i < passes; ++i) {
    const int from = t.cached + i * key_cap, n = min(key_cap, t.keys - from);
    __syncthreads();  // (every warp done with the buffer's keys)
    if (threadIdx.x == 0) {
      hopper::arrive_expect_bytes(more_keys, 2 * n * kKeyRowBytes);
      copy(buf, kHeadKeys, a.k_cache + cache_row(a, t, t.first_key + from), n * kKeyRowBytes,
           more_keys);
      copy(buf, kHeadKeys + key_cap * kKeyRowBytes, a.v_cache + cache_row(a, t, t.first_key + from),
           n * kKeyRowBytes, more_keys);
    }
    hopper::wait(more_keys, unsigned(t.layer * passes + i) & 1u);
    attend_keys(on, q, kbuf, vbuf, n);
  }
  if (t.rank == kRanks - 1 && warp == 0) {  // the new key, from the cluster's k and v
    on.add1(warp_sum(f.qkv[2 * lane] * f.qkv[kHeadDim + 2 * lane] +
                     f.qkv[2 * lane + 1] * f.qkv[kHeadDim + 2 * lane + 1]),
            make_float2(f.qkv[2 * kHeadDim + 2 * lane], f.qkv[2 * kHeadDim + 2 * lane + 1]));
  }
  stamp(p, t.layer, kHeadLoop);
  f.warps[warp][2 * lane] = on.o.x, f.warps[warp][2 * lane + 1] = on.o.y;
  if (lane == 0) f.warps[warp][kHeadDim] = on.m, f.warps[warp][kHeadDim + 1] = on.l;
  __syncthreads();
  if (threadIdx.x < kHeadDim) {
    float m = -INFINITY, l = 0.f, o = 0.f;
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, f.warps[w][kHeadDim]);
    for (int w = 0; m != -INFINITY && w < kWarps; ++w) {
      const float e = __expf(f.warps[w][kHeadDim] - m);
      l += e * f.warps[w][kHeadDim + 1], o += e * f.warps[w][threadIdx.x];
    }
    f.mine[threadIdx.x] = o;
    if (threadIdx.x == 0) f.mine[kHeadDim] = m, f.mine[kHeadDim + 1] = l;
    if (threadIdx.x < 2) f.mine[kHeadDim + 2 + threadIdx.x] = 0.f;
  }
  __syncthreads();
  constexpr int kQuads = kPartStride / 4;  // 17 stores of 16 bytes a destination
  if (threadIdx.x < kRanks * kQuads) {
    const int to = threadIdx.x / kQuads, q4 = threadIdx.x % kQuads;
    const float* v = f.mine + q4 * 4;
    cluster::store_async_peer(&f.parts[t.rank][q4 * 4], to,
                              make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]),
                                         __float_as_uint(v[2]), __float_as_uint(v[3])),
                              splits_in);
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
  // 4 outputs and a quarter of the 32 dims a thread (192 threads), the quarters summed in xn
  // (free by now), then one red.add of 4 a thread (48) into the block's copy of A[l]
  constexpr int kGroups4 = kPieceCols / 4, kQuarter = kPieceDims / 4;
  const int half = t.rank & 1, part = t.rank >> 1;
  if (threadIdx.x < 4 * kGroups4) {
    const int c = 4 * (threadIdx.x % kGroups4), d0 = kQuarter * (threadIdx.x / kGroups4);
    const bf16* w = reinterpret_cast<const bf16*>(buf + kHeadWproj);
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int d = d0; d < d0 + kQuarter; ++d) {
      const float od = f.o[half * kPieceDims + d];
      const uint2 u = *reinterpret_cast<const uint2*>(w + d * kPieceCols + c);
      const float2 w0 = unpack2(u.x), w1 = unpack2(u.y);
      sum.x += od * w0.x, sum.y += od * w0.y, sum.z += od * w1.x, sum.w += od * w1.y;
    }
    reinterpret_cast<float4*>(f.xn)[threadIdx.x] = sum;
  }
  __syncthreads();
  if (threadIdx.x >= kGroups4) return;
  const int c = 4 * threadIdx.x;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if (t.head == 0 && half == 0) {  // bproj, once
    const uint2 u =
        *reinterpret_cast<const uint2*>(reinterpret_cast<const bf16*>(buf + kHeadBproj) + c);
    const float2 b0 = unpack2(u.x), b1 = unpack2(u.y);
    acc[0] = b0.x, acc[1] = b0.y, acc[2] = b1.x, acc[3] = b1.y;
  }
  for (int q = 0; q < 4; ++q) {
    const float4 v = reinterpret_cast<const float4*>(f.xn)[q * kGroups4 + threadIdx.x];
    acc[0] += v.x, acc[1] += v.y, acc[2] += v.z, acc[3] += v.w;
  }
  red_add4(attn_of(p, t.layer, blockIdx.x % p.attn_copies) + part * kPieceCols + c, acc);
}

// A block's mbarriers: its two buffers' bytes in (TMA), the cluster's q, k, v rows in, its
// splits' partials in and its share of M's partial sums in (st.async from every block of the
// cluster), each once a layer; the keys past the head buffer, once a pass.
struct Bars {
  uint64_t head_bytes, mlp_bytes, rows_in, splits_in, mlp_in;
  uint64_t more_keys;  // the keys past the head buffer, a pass at a time (TMA)
};

template <bool kKeyPasses>
__device__ void head_stage(const DecodeArgs& a, const StepArgs& p, Fixed& f, char* buf,
                           char* mlp_buf, Bars& b, int l) {
  const HeadTask t = head_task(a, p, l);
  const unsigned parity = l & 1;
  const uint64_t start = phase_clock();
  stamp(p, l, kHeadStart);
  if (threadIdx.x == 0) {  // (the last layer's exchanges are complete: these are this layer's)
    hopper::arrive_expect_bytes(&b.rows_in, kRanks * kQkvBytes);
    hopper::arrive_expect_bytes(&b.splits_in, kRanks * kPartStride * 4);
    if (l > 0) wait_count(p.counts + kLayers + l - 1, gridDim.x, false);
  }
  const uint64_t seen = phase_clock();
  stamp(p, l, kHeadSeen);
  __syncthreads();
  if (l == 0)
    gather_x<0>(f, a.x_in, Sum{});
  else  // (x holds the MLP stage's input, R[l - 1] + A[l - 1])
    gather_x<kMaxMlpCopies>(f, nullptr, mlp_sum(p, l - 1));
  stamp(p, l, kHeadInputs);
  // (this layer's MLP bytes only now, x loaded: the header's Bytes)
  if (l > 0 && threadIdx.x == 0) issue_mlp(a, p, l, mlp_buf, &b.mlp_bytes);
  hopper::wait(&b.head_bytes, parity);
  stamp(p, l, kHeadBytes);
  float gamma[3], beta[3];
  norm_params(reinterpret_cast<const bf16*>(buf + kHeadLn), gamma, beta);
  layer_norm(f, gamma, beta);
  head_rows(a, t, f, buf, &b.rows_in);
  stamp(p, l, kHeadRows);
  hopper::wait(&b.rows_in, parity);  // every block's q, k, v rows in
  stamp(p, l, kHeadRowsIn);
  attend<kKeyPasses>(a, p, t, f, buf, &b.splits_in, &b.more_keys);
  stamp(p, l, kHeadSplit);
  hopper::wait(&b.splits_in, parity);  // every split's partial in
  stamp(p, l, kHeadSplitsIn);
  project(p, t, f, buf);
  __syncthreads();
  if (threadIdx.x == 0) {
    release_add(p.counts + l, 1u);
    stamp(p, l, kHeadReleased);
    phase_record(p.phases, 0, start, phase_clock(),
                 cluster_record_arg(0, l, t.head * kRanks + t.rank), uint32_t(seen - start));
  }
}

// ---- the MLP stage ----------------------------------------------------------------------------

// h = GELU(LN2(x) Wfc + bfc) for N rows a warp (the block's 8 N rows) -> f.stage.
template <int N>
__device__ __forceinline__ void mlp_rows(Fixed& f, const bf16* wfc, const bf16* bias) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, r0 = warp * N;
  float acc[4];
  warp_rows<N>(wfc + r0 * kC, f.xn, acc);
#pragma unroll
  for (int k = 0; k < N; ++k)
    if (lane == k) f.stage[r0 + k] = gelu(acc[k] + __bfloat162float(bias[r0 + k]));
}
// A block's 3 or 4 groups of 8 rows (mlp_rows_of: 384 groups over 96 to 128 blocks), 3 or 4
// rows a warp, a count the compiler knows in each branch.
static_assert(kGroups / (16 * kRanks) >= 3 && (kGroups + kHeadBlocks - 1) / kHeadBlocks <= 4,
              "3 or 4 groups of rows a block, 12 to 16 clusters");
__device__ __forceinline__ void mlp_hidden(Fixed& f, const char* buf, const StepArgs& p, int rows) {
  const bf16* wfc = reinterpret_cast<const bf16*>(buf);
  const bf16* bias = reinterpret_cast<const bf16*>(buf + mlp_bias_at(p.mlp_rows));
  if (rows == 4 * kWarps)
    mlp_rows<4>(f, wfc, bias);
  else
    mlp_rows<3>(f, wfc, bias);
  __syncthreads();
}

// The block's part of M[l]: its rows of h times the same rows of Wout (transposed), 4 outputs a
// thread (192 threads), 8 rows of h at a time, two sets of sums (half the chain of adds); each
// thread's 4 sums go to the block of the cluster that adds up their share of the columns (block r:
// 96 r ..). acc: bout in block 0, else zeros.
__device__ __forceinline__ void mlp_down(const StepArgs& p, Fixed& f, const char* buf, int rows,
                                         float (&acc)[4], uint64_t* sums_in) {
  const int c = 4 * threadIdx.x;
  if (c >= kC) return;
  const bf16* wout = reinterpret_cast<const bf16*>(buf + mlp_wout_at(p.mlp_rows));
  float odd[4] = {0.f, 0.f, 0.f, 0.f};
  for (int r = 0; r < rows; r += 8) {
    const float4 h0 = *reinterpret_cast<const float4*>(f.stage + r);
    const float4 h1 = *reinterpret_cast<const float4*>(f.stage + r + 4);
    const float hs[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
    uint2 u[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) u[k] = *reinterpret_cast<const uint2*>(wout + (r + k) * kC + c);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const float2 w0 = unpack2(u[k].x), w1 = unpack2(u[k].y);
      float* s = (k & 1) ? odd : acc;
      s[0] += hs[k] * w0.x, s[1] += hs[k] * w0.y, s[2] += hs[k] * w1.x, s[3] += hs[k] * w1.y;
    }
  }
  cluster::store_async_peer(
      mlp_in(f) + cluster::rank() * kMlpShare + c % kMlpShare, c / kMlpShare,
      make_uint4(__float_as_uint(acc[0] + odd[0]), __float_as_uint(acc[1] + odd[1]),
                 __float_as_uint(acc[2] + odd[2]), __float_as_uint(acc[3] + odd[3])),
      sums_in);
}

// The cluster's 8 partial sums of this block's share of M[l], added up (24 threads, 4 columns
// each) into the cluster's copy of M[l]: 15 adds on each line of L2 where every block adding its
// own would make 120.
__device__ __forceinline__ void mlp_add(const StepArgs& p, Fixed& f, int l) {
  constexpr int kQuads = kMlpShare / 4;
  if (threadIdx.x >= kQuads) return;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int r = 0; r < kRanks; ++r) {
    const float4 v = reinterpret_cast<const float4*>(mlp_in(f) + r * kMlpShare)[threadIdx.x];
    acc[0] += v.x, acc[1] += v.y, acc[2] += v.z, acc[3] += v.w;
  }
  red_add4(
      mlp_of(p, l, cluster::index() % p.mlp_copies) + cluster::rank() * kMlpShare + 4 * threadIdx.x,
      acc);
}

__device__ void mlp_stage(const DecodeArgs& a, const StepArgs& p, Fixed& f, char* buf,
                          char* head_buf, Bars& b, int l) {
  int first = 0, rows = 0;
  mlp_rows_of(gridDim.x, &first, &rows);
  // (LN2's parameters and bout into registers before the wait: no load after it but x's)
  const bf16* L = layer_weights(a, l);
  float gamma[3], beta[3], acc[4] = {0.f, 0.f, 0.f, 0.f};
  norm_params(L + LayerLayout::ln2_g, gamma, beta);
  const int c = 4 * threadIdx.x;
  if (blockIdx.x == 0 && c < kC) {  // bout, once
    const uint2 u = __ldg(reinterpret_cast<const uint2*>(L + LayerLayout::b_out + c));
    const float2 b0 = unpack2(u.x), b1 = unpack2(u.y);
    acc[0] = b0.x, acc[1] = b0.y, acc[2] = b1.x, acc[3] = b1.y;
  }
  const uint64_t start = phase_clock();
  if (threadIdx.x == 0) {  // (the last layer's partial sums are added: these are this layer's)
    hopper::arrive_expect_bytes(&b.mlp_in, kRanks * kMlpShare * 4);
    wait_count(p.counts + l, kHeadBlocks, false);
  }
  const uint64_t seen = phase_clock();
  stamp(p, l, kMlpSeen);
  stamp(p, l, kClock);
  __syncthreads();
  if (blockIdx.x < kHeadBlocks)  // (x holds the head stage's input, R[l])
    gather_x<kMaxAttnCopies>(f, nullptr, attn_sum(p, l));
  else  // R[l] = R[l - 1] + A[l - 1] (x) + M[l - 1], added as the head blocks add it
    gather_x<kMaxMlpCopies, kMaxAttnCopies>(f, l == 0 ? a.x_in : nullptr,
                                            l == 0 ? Sum{} : mlp_sum(p, l - 1), attn_sum(p, l));
  stamp(p, l, kMlpInputs);
  const bool heads = blockIdx.x < kHeadBlocks;
  if (heads && l + 1 < kLayers && threadIdx.x == 0)  // (x loaded: the header's Bytes)
    issue_head(a, head_task(a, p, l + 1), head_buf, &b.head_bytes, p.key_cap);
  hopper::wait(&b.mlp_bytes, l & 1);
  stamp(p, l, kMlpBytes);
  layer_norm(f, gamma, beta);
  stamp(p, l, kMlpNormed);
  mlp_hidden(f, buf, p, rows);
  stamp(p, l, kMlpHidden);
  mlp_down(p, f, buf, rows, acc, &b.mlp_in);
  stamp(p, l, kMlpSent);
  hopper::wait(&b.mlp_in, l & 1);  // the cluster's partial sums of this block's share in
  stamp(p, l, kMlpSumsIn);
  mlp_add(p, f, l);
  __syncthreads();
  if (threadIdx.x == 0) {
    release_add(p.counts + kLayers + l, 1u);
    stamp(p, l, kMlpReleased);
    phase_record(p.phases, 1, start, phase_clock(),
                 cluster_record_arg(1, l, first / 8 | (rows / 8 - 1) << 9), uint32_t(seen - start));
    if (l + 1 < kLayers && !heads) issue_mlp(a, p, l + 1, buf, &b.mlp_bytes);
  }
  // Blocks without a head task zero layer l - 2's sums for the next launch, off the chain: every
  // block that reads them (M(l - 2), H(l - 1)) is done, since this block saw H(l) counted.
  if (blockIdx.x >= kHeadBlocks && l >= 2)
    zero_layer(p, l - 2, blockIdx.x - kHeadBlocks, gridDim.x - kHeadBlocks);
}

// y = LN_f(the last residual), then the sums and counts zeroed for the next launch (block 0,
// once every MLP block of the last layer is counted: no block reads them after).
__device__ void final_norm(const DecodeArgs& a, const StepArgs& p, Fixed& f) {
  float gamma[3], beta[3];
  norm_params(a.weights + kFinalLnG, gamma, beta);
  const uint64_t start = phase_clock();
  if (threadIdx.x == 0) wait_count(p.counts + 2 * kLayers - 1, gridDim.x, false);
  const uint64_t seen = phase_clock();
  __syncthreads();
  // (x: R[11] + A[11], block 0 has a head)
  gather_x<kMaxMlpCopies>(f, nullptr, mlp_sum(p, kLayers - 1));
  layer_norm(f, gamma, beta);
  for (int i = threadIdx.x; i < kC; i += kThreads) a.y[i] = f.xn[i];
  if (threadIdx.x == 0)
    phase_record(p.phases, 2, start, phase_clock(), cluster_record_arg(2, 0, 0),
                 uint32_t(seen - start));
  // (the layers the blocks without a head task have not zeroed: mlp_stage)
  for (int l = gridDim.x > kHeadBlocks ? kLayers - 2 : 0; l < kLayers; ++l) zero_layer(p, l, 0, 1);
  for (int i = threadIdx.x; i < 2 * kLayers; i += kThreads) p.counts[i] = 0u;
}

// The kernel, built twice (two names, so that CUPTI's name says which ran): clustered_step where
// every block's keys fit its head buffer (up to a cache of ~2.1K on an H100), clustered_step_long
// with the key passes past that.
template <bool kKeyPasses>
__device__ __forceinline__ void step(const DecodeArgs& a, const StepArgs& p) {
#ifdef FL_SM90A_DEVICE
  extern __shared__ __align__(16) char smem[];
  __shared__ Bars bars;
  Fixed& f = *reinterpret_cast<Fixed*>(smem);
  char* mlp_buf = smem + kFixedBytes;
  char* head_buf = mlp_buf + p.mlp_bytes;
  const bool heads = cluster::index() < kHeads;
  if (threadIdx.x == 0) {
    for (uint64_t* bar : {&bars.head_bytes, &bars.mlp_bytes, &bars.rows_in, &bars.splits_in,
                          &bars.mlp_in, &bars.more_keys})
      hopper::barrier_init(bar, 1);
    hopper::barrier_init_fence();
    if (heads) issue_head(a, head_task(a, p, 0), head_buf, &bars.head_bytes, p.key_cap);
    issue_mlp(a, p, 0, mlp_buf, &bars.mlp_bytes);
  }
  cluster::sync();  // every block of the cluster running (DSMEM stores follow), barriers set
  for (int l = 0; l < kLayers; ++l) {
    if (heads) head_stage<kKeyPasses>(a, p, f, head_buf, mlp_buf, bars, l);
    mlp_stage(a, p, f, mlp_buf, head_buf, bars, l);
  }
  if (blockIdx.x == 0) final_norm(a, p, f);
#endif
}

__global__ void __launch_bounds__(kThreads, 1) clustered_step(DecodeArgs a, StepArgs p) {
  step<false>(a, p);
}
__global__ void __launch_bounds__(kThreads, 1) clustered_step_long(DecodeArgs a, StepArgs p) {
  step<true>(a, p);
}

}  // namespace

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
    bool fit = false, fit_long = false;
    FL_TRY(cluster::all_resident(reinterpret_cast<const void*>(clustered_step), launch, &fit));
    FL_TRY(cluster::all_resident(reinterpret_cast<const void*>(clustered_step_long), launch,
                                 &fit_long));
    if (fit && fit_long) {
      *clusters = q;
      return Status::Ok();
    }
  }
  return Status::Ok();
}

Status launch_cluster_step(const DecodeArgs& a, const ClusterStepPlan& plan, bool key_passes,
                           cudaStream_t s) {
  if (a.tokens != 1 || a.w_out_t == nullptr || a.w_proj_t == nullptr)
    return Status::Error("the cluster step runs one token with Wout and Wproj regrouped");
  bool sm90 = false;
  int optin = 0;
  FL_TRY(hopper::current_device(&sm90, &optin));
  const Layout l = layout_for(plan.clusters, optin);
  const int keys = (a.cache + kRanks - 1) / kRanks;  // (a block's split)
  if (!key_passes && keys > l.key_cap) {
    return Status::Unsupported("a block's " + std::to_string(keys) +
                               " keys outgrow its head buffer (" + std::to_string(l.key_cap) +
                               " keys on this GPU): clusters_long streams them in passes");
  }
  // FL_CLUSTER_A_COPIES / FL_CLUSTER_M_COPIES = 1, 2, 4 (or 8, M only; a measurement): the sums'
  // copies.
  auto copies = [](const char* name, int given) {
    const char* env = std::getenv(name);
    return env != nullptr && (env[0] == '1' || env[0] == '2' || env[0] == '4' || env[0] == '8')
               ? env[0] - '0'
               : given;
  };
  const StepArgs p{plan.counts,
                   plan.sums,
                   l.mlp_rows,
                   l.key_cap,
                   l.mlp_bytes,
                   std::min(copies("FL_CLUSTER_A_COPIES", kAttnCopies), kMaxAttnCopies),
                   copies("FL_CLUSTER_M_COPIES", kMlpCopies),
                   plan.phases,
                   plan.stamps};
  const auto kernel = key_passes ? clustered_step_long : clustered_step;
  cluster::Launch launch(plan.clusters, kRanks, kThreads, size_t(l.shared), s);
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, l.shared));
  FL_CUDA_TRY(cudaLaunchKernelEx(&launch.config, kernel, a, p));
  return Status::Ok();
}

}  // namespace gpt2
}  // namespace fl
