// What every gpt2_decode kernel shares (model.h has the shapes): the step's buffers, LayerNorm
// of the t rows into shared memory, one slice of a matrix-vector product with the weights read
// in 16-byte rows, and programmatic dependent launch (ops.cuh: the block's four matrix ops and
// the combine of the attention splits; attention.cuh: the decode-attention split). The per-op
// chain (level 0), the fused kernels (levels 1-3) and the megakernel's tasks (level 4) are built
// from these, so every level computes the same sums in the same order.
//
// Activations are fp32 (t x 3072 floats at most); anything a kernel reads that another block of
// the same launch may have written (the megakernel) is read with ld.global.cg, from L2, so no
// SM can see a stale line in its own L1.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gpt2_decode/model.h"

namespace fl {
namespace gpt2 {

using bf16 = __nv_bfloat16;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kActFloats = 12288;          // shared activations: 16 rows of C or 4 rows of 4C
constexpr int kPartStride = kHeadDim + 4;  // a split's partial: o[64], max, sum, pad
constexpr int kPositionsStride = kMaxSplitLength;

// Loads that skip L1 (ld.global.cg), for values other blocks wrote earlier in this launch. nvcc
// has __ldcg for every type used here; clang's CUDA headers (the sm_70 compile check) lack its
// float and unsigned overloads, so there the same PTX is spelled out.
#if defined(__clang__)
__device__ __forceinline__ float ld_cg(const float* p) {
  float v;
  asm("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned ld_cg(const unsigned* p) {
  unsigned v;
  asm("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ float2 ld_cg(const float2* p) {
  float2 v;
  asm("ld.global.cg.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ float4 ld_cg(const float4* p) {
  float4 v;
  asm("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
      : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
      : "l"(p));
  return v;
}
#else
template <class T>
__device__ __forceinline__ T ld_cg(const T* p) {
  return __ldcg(p);
}
#endif

// The step's device buffers (pointers into the workspace) and its shape.
struct DecodeArgs {
  const bf16* weights;  // model.h's layout
  bf16* k_cache;        // [layer][head][s + t][64]
  bf16* v_cache;
  const float* x_in;  // [t][C]: the hidden states entering block 0
  float* x;           // [t][C]: the residual stream
  float* q;           // [t][C]: queries, already scaled by 1/sqrt(64)
  float* partials;    // [t][head][splits][kPartStride]: attention's per-split sums
  float* h;           // [t][4C]: the MLP's hidden activations
  float* y;           // [t][C]: LN_f(x), the step's output
  // The per-op chain's own intermediates (level 0).
  float* xn;      // [t][C]: a LayerNorm's output
  float* qkv;     // [t][3C]
  float* att;     // [t][C]
  float* tmp;     // [t][C]: a projection before its bias and residual
  float* scores;  // [t][head][s + t]
  int cache;      // s
  int tokens;     // t
  int splits;     // attention splits per head
  // The megakernel's residual after each MLP (null at levels 0-3): proj writes x + b_out there
  // and every MLP slice adds its share of h Wout into it, so the next layer reads it.
  float* x_mlp = nullptr;
  // Copies of x_mlp (MegakernelOptions::residual_copies, t x C floats apart): proj writes copy 0
  // and zeroes the others, each MLP task adds into one, and the readers add them up.
  int residual_copies = 1;
  // The megakernel's copy of every layer's Wout transposed ([layer][4C][C]; null at levels 0-3):
  // an MLP task's Wout columns are one contiguous run there (copies.cuh).
  const bf16* w_out_t = nullptr;
  // Probes (model.h's ProbeSlot; null unless a measurement asks): per task kind, summed
  // nanoseconds of each slot and the count (kTaskKinds x (kProbeSlots + 1) words), then
  // kProbeSlots words a block where probe_mark leaves the times inside its running task.
  unsigned long long* probes = nullptr;
  // The megakernel's proj by head, or attention and proj as one stage (MegakernelOptions::
  // head_proj, fused_proj): every layer's Wproj regrouped as [layer][head][part][64][kProjRows]
  // (null otherwise), and with two_residuals the residual after each MLP kept in two buffers,
  // layer l's in x_mlp + (l & 1) * t * C (its qkv tasks write its starting value while they
  // read the one before; proj's and the MLP's tasks add into it).
  const bf16* w_proj_t = nullptr;
  bool two_residuals = false;
  bool branch_free_keys = kBranchFreeKeys;  // attention's loads predicated (MegakernelOptions)
  int residual_spread = 1;  // the one-token kernel's x_mlp spread out (spread_index; 1: dense)
  // Attention splits' partial rows as flagged words (last_split_proj 3; null: `partials`).
  unsigned long long* rows = nullptr;
  // q, k and v as flagged words for attention (MegakernelOptions::qkv_words; null: off),
  // [head][token][kQkvWords] (split_rows.cuh).
  unsigned long long* qkv_words = nullptr;
  __host__ __device__ int positions() const { return cache + tokens; }
};

// A task's time at a point inside it (the megakernel with probes on; a no-op elsewhere).
__device__ __forceinline__ void probe_mark(const DecodeArgs& a, int slot) {
  if (a.probes == nullptr || threadIdx.x != 0) return;
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  a.probes[kProbeSums + blockIdx.x * kProbeSlots + slot] = t;
}

__device__ __forceinline__ const bf16* layer_weights(const DecodeArgs& a, int layer) {
  return a.weights + int64_t(layer) * LayerLayout::size;
}
__device__ __forceinline__ int64_t residual_stride(const DecodeArgs& a) {
  return int64_t(a.tokens) * kC * a.residual_spread;
}
// Where element i of a residual spread `spread` times sits: each 8 floats (a 32-byte sector) at
// the start of 8 x spread floats (at 4, a 128-byte line each).
__device__ __forceinline__ int64_t spread_index(int64_t i, int spread) {
  return (i >> 3) * (8 * spread) + (i & 7);
}
__device__ __forceinline__ int64_t spread_at(const DecodeArgs& a, int64_t i) {
  return spread_index(i, a.residual_spread);
}
// The megakernel's residual after layer `layer`'s MLP (two buffers with two_residuals).
__device__ __forceinline__ float* x_mlp_of(const DecodeArgs& a, int layer) {
  return a.x_mlp + (a.two_residuals ? (layer & 1) * residual_stride(a) : 0);
}
// Where layer `layer` reads its residual from: the step's input for block 0.
__device__ __forceinline__ const float* residual_in(const DecodeArgs& a, int layer) {
  return layer == 0 ? a.x_in : a.x_mlp != nullptr ? x_mlp_of(a, layer - 1) : a.x;
}
// How many copies of it to add up (the megakernel's x_mlp may have several), and how far apart.
__device__ __forceinline__ int residual_copies_in(const DecodeArgs& a, int layer) {
  return layer == 0 || a.x_mlp == nullptr ? 1 : a.residual_copies;
}
// And how far spread out it is (block 0's input and levels 0-3's x are dense).
__device__ __forceinline__ int residual_spread_in(const DecodeArgs& a, int layer) {
  return layer == 0 || a.x_mlp == nullptr ? 1 : a.residual_spread;
}

// ---- small pieces ---------------------------------------------------------------------------

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float to_f(bf16 v) {
  return __bfloat162float(v);
}
// The two bf16 halves of a 32-bit word, low first.
__device__ __forceinline__ float2 unpack2(unsigned u) {
  return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}
// Keys per attention split (model.h's split_length, on the device).
__host__ __device__ __forceinline__ int split_keys(int positions, int splits) {
  return (positions + splits - 1) / splits;
}
__device__ __forceinline__ float gelu(float v) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
}

// Programmatic dependent launch (sm_90): a kernel launched with the attribute may start while
// the previous one drains; grid_dependency_wait() holds it until that one has finished and its
// writes are visible. Without the attribute (or before sm_90) both are no-ops.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---- LayerNorm of rows [j0, j0 + rows) of src into dst (dst row r = token j0 + r) -------------
// One warp per row, the row's 768 values in registers (6 float4 per lane), two passes. Gamma and
// beta (global or shared memory) are loaded with the row, before any store: a store through dst
// between their loads would make each one wait for the one before (dst may alias them as far
// as the compiler knows). src may be `copies` partial rows `stride` floats apart, added up
// (every copy's loads in flight before the first add), each spread `spread` times (spread_index).
struct NoRaw {  // what layernorm_rows does with a row's values before it normalizes them
  __device__ void operator()(int, int, const float4&) const {}
};
template <class Raw = NoRaw>
__device__ inline void layernorm_rows(const float* src, const bf16* g, const bf16* b, int j0,
                                      int rows, float* dst, int copies = 1, int64_t stride = 0,
                                      int spread = 1, const Raw& raw = NoRaw{}) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  auto quad = [&](int q) { return (q >> 1) * (2 * spread) + (q & 1); };
  for (int r = warp; r < rows; r += kWarps) {
    const float4* row = reinterpret_cast<const float4*>(src + int64_t(j0 + r) * kC * spread);
    float4 v[6];
    uint2 gv[6], bv[6];
#pragma unroll
    for (int i = 0; i < 6; ++i) {
      v[i] = ld_cg(row + quad(lane + 32 * i));
      gv[i] = reinterpret_cast<const uint2*>(g)[lane + 32 * i];
      bv[i] = reinterpret_cast<const uint2*>(b)[lane + 32 * i];
    }
    for (int c0 = 1; c0 < copies; c0 += 3) {  // three copies' loads at a time
      float4 u[3][6];
#pragma unroll
      for (int c = 0; c < 3; ++c)
#pragma unroll
        for (int i = 0; i < 6; ++i)
          u[c][i] = c0 + c < copies ? ld_cg(row + (c0 + c) * (stride / 4) + quad(lane + 32 * i))
                                    : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int c = 0; c < 3; ++c)
#pragma unroll
        for (int i = 0; i < 6; ++i)
          v[i].x += u[c][i].x, v[i].y += u[c][i].y, v[i].z += u[c][i].z, v[i].w += u[c][i].w;
    }
    float sum = 0;
#pragma unroll
    for (int i = 0; i < 6; ++i) {
      raw(j0 + r, 4 * (lane + 32 * i), v[i]);  // token, first column, its four values
      sum += v[i].x + v[i].y + v[i].z + v[i].w;
    }
    const float mean = warp_sum(sum) * (1.0f / kC);
    float var = 0;
#pragma unroll
    for (int i = 0; i < 6; ++i) {
      const float dx = v[i].x - mean, dy = v[i].y - mean, dz = v[i].z - mean, dw = v[i].w - mean;
      var += dx * dx + dy * dy + dz * dz + dw * dw;
    }
    const float rstd = rsqrtf(warp_sum(var) * (1.0f / kC) + float(kLnEps));
#pragma unroll
    for (int i = 0; i < 6; ++i) {
      const float2 g01 = unpack2(gv[i].x), g23 = unpack2(gv[i].y);
      const float2 b01 = unpack2(bv[i].x), b23 = unpack2(bv[i].y);
      float4 out;
      out.x = (v[i].x - mean) * rstd * g01.x + b01.x;
      out.y = (v[i].y - mean) * rstd * g01.y + b01.y;
      out.z = (v[i].z - mean) * rstd * g23.x + b23.x;
      out.w = (v[i].w - mean) * rstd * g23.y + b23.y;
      reinterpret_cast<float4*>(dst + int64_t(r) * kC)[lane + 32 * i] = out;
    }
  }
}

// ---- one weight row against the activations --------------------------------------------------
// A warp holds one row of W (K bf16) in registers, 16 bytes per lane per step: K / 256 steps.
template <int K>
struct WeightRow {
  static constexpr int kSteps = K / 256;
  int4 w[kSteps];
  __device__ void load(const bf16* row, int lane) {  // global or shared memory
#pragma unroll
    for (int v = 0; v < kSteps; ++v)
      w[v] = *reinterpret_cast<const int4*>(row + (v * 32 + lane) * 8);
  }
  // This lane's share of the dot product with one activation row in shared memory.
  __device__ float partial(const float* act, int lane) const {
    float s = 0;
#pragma unroll
    for (int v = 0; v < kSteps; ++v) {
      const float4 a0 = *reinterpret_cast<const float4*>(act + (v * 32 + lane) * 8);
      const float4 a1 = *reinterpret_cast<const float4*>(act + (v * 32 + lane) * 8 + 4);
      const float2 w0 = unpack2(w[v].x), w1 = unpack2(w[v].y), w2 = unpack2(w[v].z),
                   w3 = unpack2(w[v].w);
      s += a0.x * w0.x + a0.y * w0.y + a0.z * w1.x + a0.w * w1.y;
      s += a1.x * w2.x + a1.y * w2.y + a1.z * w3.x + a1.w * w3.y;
    }
    return s;
  }
  // The warp's dot product with one activation row in shared memory (every lane gets it).
  __device__ float dot(const float* act, int lane) const {
    return warp_sum(partial(act, lane));
  }
};

// Rows a warp of linear_slice holds at once: two where a row is short (K = C: 3 registers of 16
// bytes a lane each), so their loads and their reductions overlap; one for K = 4C.
template <int K>
constexpr int rows_at_once() {
  return K <= 1024 ? 2 : 1;
}

// Rows of activations one pass of shared memory holds: all 16 tokens of C, 4 of 4C.
template <int K>
constexpr int chunk_tokens() {
  return kActFloats / K;
}

// The epilogues of a chunk's sums (sums[r * tc + j] for row first + r, token j0 + j), a thread
// each: their loads (bias, residual) are all in flight at once instead of one after another.
template <class Op>
__device__ void finish_rows(const Op& op, int j0, int tc, int first, int count, const float* sums) {
  for (int i = threadIdx.x; i < count * tc; i += kThreads)
    op.epilogue(j0 + i % tc, first + i / tc, sums[i]);
}

// Room for a chunk's sums: rows of a slice x tokens of a chunk.
constexpr int kSumsFloats = 1024;

// Kernels with 48 KB of static activations keep their sums in static shared memory beside them
// where the compiler allows more than 48 KB of it (sm_90); below, each sum stays in a lane.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr bool kStaticSums = false;
#else
constexpr bool kStaticSums = true;
#endif

// A slice of a matrix-vector product: output rows [first, first + count) of the matrix whose
// row `first` is at W (global or shared memory), for every token. The op says how activations
// reach shared memory (op.prologue(j0, tokens, act): LayerNorm, the attention combine, a copy)
// and what happens to each sum (op.epilogue(j, n, sum): bias, GELU, residual, the cache);
// after_inputs() runs once, by every thread, when the first chunk's activations are in.
// With kSharedSums (count x chunk_tokens<K>() sums must fit kSumsFloats) the epilogues run a
// thread per sum after the whole slice; without (kernels whose 48 KB of static shared memory
// the activations fill; `sums` unused), lane j of the warp that summed a row runs token j's.
// What a kernel does once a task's inputs are in shared memory (the megakernel: start the next
// task's copies, so their bytes do not share the way into the SM with the inputs' loads).
struct NoHook {
  __device__ void operator()() const {}
};

// One chunk's products: warp w takes rows w, w + 8, ... (kRows of them at a time: each row's
// sum is the same sum as alone, its reduction warp_sum's butterfly, the rows' levels
// interleaved); lane j of the warp keeps token j's sum without kSharedSums.
template <int kRows, class Op, bool kSharedSums>
__device__ void slice_products(const Op& op, const bf16* W, int first, int count, const float* act,
                               float* sums, int j0, int tc) {
  constexpr int K = Op::kK;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int r0 = warp; r0 < count; r0 += kRows * kWarps) {
    WeightRow<K> row[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int r = r0 + i * kWarps;
      if (r < count) {
        row[i].load(W + int64_t(r) * K, lane);
      } else {
#pragma unroll
        for (int v = 0; v < WeightRow<K>::kSteps; ++v) row[i].w[v] = make_int4(0, 0, 0, 0);
      }
    }
    float mine[kRows] = {};  // lane j: token j's sum (without `sums`)
    for (int j = 0; j < tc; ++j) {
      float sum[kRows];
#pragma unroll
      for (int i = 0; i < kRows; ++i) sum[i] = row[i].partial(act + j * K, lane);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int i = 0; i < kRows; ++i) sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], o);
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int r = r0 + i * kWarps;
        if (kSharedSums) {
          if (lane == 0 && r < count) sums[r * tc + j] = sum[i];
        } else if (lane == j) {
          mine[i] = sum[i];
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kRows; ++i)
      if (!kSharedSums && lane < tc && r0 + i * kWarps < count)
        op.epilogue(j0 + lane, first + r0 + i * kWarps, mine[i]);
  }
}

// `wide` (the megakernel's option wide_rows): a slice of K = C with more than 16 rows takes
// four rows a warp at a time, so up to 32 rows are one pass. kRowsAtOnce > 0 (the one-token
// megakernel's kOneTokenRowsAtOnce): that many rows a warp at a time, whatever `wide` says.
// after_weights() runs once, by every thread, when no thread reads W any more (the megakernel
// may then start copying another task's weights over it).
template <class Op, bool kSharedSums = true, int kRowsAtOnce = 0, class AfterInputs = NoHook,
          class AfterWeights = NoHook>
__device__ void linear_slice(const Op& op, const bf16* W, int first, int count, float* act,
                             float* sums, const AfterInputs& after_inputs = NoHook{},
                             bool wide = false, const AfterWeights& after_weights = NoHook{}) {
  constexpr int K = Op::kK;
  constexpr int kChunk = chunk_tokens<K>();
  static_assert(kChunk <= 32, "a lane per token of a chunk");
  const int t = op.a.tokens;
  for (int j0 = 0; j0 < t; j0 += kChunk) {
    const int tc = min(kChunk, t - j0);
    if (j0 > 0) __syncthreads();  // the previous chunk's rows and sums are read
    op.prologue(j0, tc, act);
    __syncthreads();
    probe_mark(op.a, kProbeInputs);
    if (j0 == 0) after_inputs();
    bool done = false;
    if constexpr (kRowsAtOnce > 0) {
      slice_products<kRowsAtOnce, Op, kSharedSums>(op, W, first, count, act, sums, j0, tc);
      done = true;
    } else if constexpr (K <= 1024) {
      if (wide && count > 2 * kWarps) {
        slice_products<4, Op, kSharedSums>(op, W, first, count, act, sums, j0, tc);
        done = true;
      }
    }
    if (!done)
      slice_products<rows_at_once<K>(), Op, kSharedSums>(op, W, first, count, act, sums, j0, tc);
    if (kSharedSums) {
      __syncthreads();
      probe_mark(op.a, kProbeCompute);
      if (j0 + kChunk >= t) after_weights();
      finish_rows(op, j0, tc, first, count, sums);
    }
  }
}

}  // namespace gpt2
}  // namespace fl
