// Lesson 8's portable small-token rung: the whole FFN, y = GELU(x W1 + b1) W2 + b2, in one
// launch for 1 to 64 tokens on any GPU with cp.async (sm_80+; fp32 also on sm_70, with plain
// copies). No clusters, no TMA: h goes from block to block through L2, behind one barrier of a
// group of blocks.
//
// What changes against ffn_hidden_slice.cu: there block b owns hidden units for both products,
// so every block holds a share of every y element (m x C fp32 a block, 96 shares to add after a
// grid barrier that waits for the last W2 byte). Here each block has two jobs, and asks for the
// weights of both before any arithmetic (kernels/gemm_core/weight_slice.cuh):
//   up:   8 nt hidden units (at C = 768: 24 on 128 blocks up to 16 tokens, 32 on 96 from 17 in
//         bf16): h[:, slice] = GELU(x W1[:, slice] + b1) into L2, rounded to the lesson's
//         precision as level 1's h is;
//   down: a tile of W2, its group's hidden units x a range of y's columns. A group is spg
//         consecutive blocks, and its down tiles read only the h those blocks make: the
//         hand-over is a barrier of the group's blocks (count_barrier.cuh, no grid barrier),
//         which can pass while W2's tiles are still landing. Then h (m x kw) from L2, and
//         h W2[tile]:
//           G groups (the plan's 8: 384 rows x 48 or 64 columns, 36-48 KB in bf16): the
//             groups' partial sums (fp32, L2) of a column range meet at a barrier of the
//             range's G blocks, and each adds 1/G of the range's rows in group order (the same
//             result every run) and writes them (+ b2);
//           one group (a tuning): the tile is all 4C rows x 8 columns and the block writes its
//             columns of y (+ b2): no partial sums, no second barrier, but each block reads all
//             of h (m x 4C from L2) and asks for 16-byte rows of W2.
// b1's and b2's slices come first (by cp.async: a plain load issued behind the weights' copies
// returns after them), then x and W1; W2's tile with them (fp32) or, in bf16, once x and W1 are
// in, so that W1 lands at the whole GPU's bandwidth and W2's copies run under the up product
// and the hand-over. Rows of x and h past the tokens are not copied (their products are never
// stored). Every block is resident at once (a cooperative launch guarantees it), so the waits
// end. The plan (ffn_stream_plan.h) keeps the grid at one block per SM; on GPUs with less shared
// memory W2's tile is asked for after the up job. 8 warps a block, or 16 from 17 tokens in bf16
// (the copies and both products over twice the warps).
//
// Budget at C = 768, bf16: W1 + W2 = 9.4 MB from HBM (3.1 us at 3 TB/s), 72-96 KB a block; x (m
// x C) read by every block from L2; h: m x 4C x 2 B written once and read by each of its group's
// spg blocks (a block reads m x kw: 12 KB at 16 tokens, 49 KB at 64); partial sums 8 x m x C x
// 4 B (1.6 MB at 64 tokens). After W1 lands: the up product, h's stores and a barrier (a fence,
// an atomic, a poll: ~1.5 us), h's L2 round trip, the down product, the partial sums' stores, a
// second barrier and the sum: about six dependent L2 round trips after the weights.
#include "kernels/ffn/ffn_stream.h"
#include "kernels/ffn/ffn_stream_plan.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/activations.cuh"
#include "kernels/cuda_check.h"
#include "kernels/ffn/count_barrier.cuh"
#include "kernels/gemm_core/weight_slice.cuh"
#include "kernels/phases.cuh"

namespace fl {
namespace {

using slice::round_up;

constexpr int kMaxGroups = kFfnMaxGroups;
constexpr int kCounters = 2 * kMaxGroups;  // a group's hand-over, a column range's meeting

enum Phase : unsigned { kIssue, kXW1In, kUp, kHandOver, kHW2In, kDown, kSum, kPhaseCount };

template <typename T>
struct FfnStreamArgs {
  FfnPlan p;
  const T *x, *w1, *b1, *w2, *b2;
  T *y, *h;            // h: m x 4C in the scratch buffer (L2)
  float* partial;      // groups x m x C: each group's sums over its hidden units
  unsigned* counters;  // the groups' hand-overs, then the ranges' meetings: low bits zero
  PhaseSink phases;
  bool x_vec, w1_vec, w2_vec, h_vec, b1_vec, b2_vec;
};

// y[r0 .. r1, n0 .. n0 + n_valid) = the groups' partial sums, added in group order (the same
// result every run), + b2. Four columns a thread where rows are 16-byte multiples: a thread keeps
// one load of every group in flight.
template <int kThr, typename T>
__device__ __forceinline__ void write_range(const FfnStreamArgs<T>& a, int n0, int n_valid,
                                            const T* b2s, int r0, int r1) {
  const FfnPlan& p = a.p;
  const int64_t stride = int64_t(p.m) * p.c;
  if (p.c % 4 == 0) {
    const int quads = n_valid / 4;  // n_valid is a multiple of 8 or the rest of C
    for (int e = threadIdx.x; e < (r1 - r0) * quads; e += kThr) {
      const int q = e % quads;
      const int64_t at = int64_t(r0 + e / quads) * p.c + n0 + 4 * q;
      float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
      for (int g = 0; g < p.groups; ++g) {
        const float4 v = slice::load_cg4(a.partial + g * stride + at);
        sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
      }
      const float out[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a.y[at + i] = Elem<T>::from_float(out[i] + Elem<T>::to_float(b2s[4 * q + i]));
      }
    }
    return;
  }
  for (int e = threadIdx.x; e < (r1 - r0) * n_valid; e += kThr) {
    const int64_t at = int64_t(r0 + e / n_valid) * p.c + n0 + e % n_valid;
    float sum = 0.0f;
#pragma unroll 8
    for (int g = 0; g < p.groups; ++g) sum += slice::load_cg(a.partial + g * stride + at);
    a.y[at] = Elem<T>::from_float(sum + Elem<T>::to_float(b2s[e % n_valid]));
  }
}

// The block's W2 tile: its group's rows [k0, k0 + k_valid) x its range's columns, one commit group.
template <int kThr, typename T>
__device__ __forceinline__ void stage_w2(const FfnStreamArgs<T>& a, T* w2s, int k0, int k_valid,
                                         int n0, int n_valid) {
  const FfnPlan& p = a.p;
  slice::stage<kThr>(w2s, p.ld_w2, a.w2 + int64_t(k0) * p.c + n0, p.c, p.kwk, p.nw, k_valid,
                     n_valid, a.w2_vec);
  tc::async_commit();
}

template <typename T, int kW>
__global__ void __launch_bounds__(32 * kW, 1) ffn_stream_kernel(FfnStreamArgs<T> a) {
  constexpr int kThr = 32 * kW;
  extern __shared__ __align__(16) unsigned char smem[];
  PhaseMarks<kPhaseCount> marks(a.phases);
  const FfnPlan& p = a.p;
  T* w2s = reinterpret_cast<T*>(smem + p.off_w2);
  T* xs = reinterpret_cast<T*>(smem + p.off_x);
  T* w1s = reinterpret_cast<T*>(smem + p.off_w1);
  T* hs = xs;  // the down job's h, where x and W1 were
  float* red = reinterpret_cast<float*>(smem + p.off_x);
  T* b1s = reinterpret_cast<T*>(smem + p.off_bias);  // 8 nt, then nw (16-byte multiples)
  T* b2s = b1s + 8 * p.nt;
  // The two jobs: up slice j0.. (none past 4C: a spare block of the last group), down tile
  // (group, range) (none past C).
  const int r = 8 * p.nt, j0 = blockIdx.x * r, r_valid = min(r, p.h - j0);
  const int group = blockIdx.x / p.spg, range = blockIdx.x % p.spg;
  const int k0 = group * p.kw, k_valid = min(p.kw, p.h - k0);
  const int n0 = range * p.nw, n_valid = min(p.nw, p.c - n0);
  const bool has_down = n_valid > 0;
  // Every weight byte of the block is asked for before any arithmetic: b1's and b2's slices
  // first (a bias load behind the weights' copies would hold the up product until the last W2
  // byte), then x and W1, then W2 (or, with w2_after_xw1, once x and W1 are in: W1 then lands
  // at the whole GPU's bandwidth and W2's copies run under the hand-over).
  constexpr int E = slice::kChunk<T>;
  slice::stage<kThr>(b1s, 0, a.b1 + j0, 0, 1, r, 1, r_valid, a.b1_vec && r_valid % E == 0);
  if (has_down) {
    slice::stage<kThr>(b2s, 0, a.b2 + n0, 0, 1, p.nw, 1, n_valid, a.b2_vec && n_valid % E == 0);
  }
  slice::stage<kThr>(xs, p.ld_x, a.x, p.c, p.m, p.ck, p.m, p.c, a.x_vec);
  if (r_valid > 0) {
    slice::stage<kThr>(w1s, p.ld_w1, a.w1 + j0, p.h, p.ck, r, p.c, r_valid, a.w1_vec);
  }
  tc::async_commit();
  const bool w2_now = has_down && !p.w2_late && !p.w2_after_xw1;
  if (w2_now) stage_w2<kThr>(a, w2s, k0, k_valid, n0, n_valid);
  marks.mark(kIssue);
  if (w2_now) {
    tc::async_wait<1>();  // biases, x and W1
  } else {
    tc::async_wait<0>();
  }
  __syncthreads();
  marks.mark(kXW1In);
  if (has_down && !p.w2_late && p.w2_after_xw1) stage_w2<kThr>(a, w2s, k0, k_valid, n0, n_valid);
  // Up: h[:, slice] into L2.
  slice::block_product<T, kFfnUpMaxNT, kW>(
      xs, p.ld_x, w1s, p.ld_w1, p.ck, p.mtc, p.nt, red, [&](int row, int col, float s) {
        if (row < p.m && col < r_valid) {
          const float v = gelu_tanh_fast(s + Elem<T>::to_float(b1s[col]));
          a.h[int64_t(row) * p.h + j0 + col] = Elem<T>::from_float(v);
        }
      });
  marks.mark(kUp);
  if (has_down && p.w2_late) stage_w2<kThr>(a, w2s, k0, k_valid, n0, n_valid);
  // The group's h is in L2 before any of its blocks reads it.
  count_barrier(a.counters + group, unsigned(p.spg), range == 0);
  marks.mark(kHandOver);
  if (!has_down) return;  // nothing in flight: a block without a tile asked for no W2
  slice::stage<kThr>(hs, p.ld_h, a.h + k0, p.h, p.m, p.kwk, p.m, k_valid, a.h_vec);
  tc::async_commit();
  tc::async_wait<0>();  // W2's tile and h
  __syncthreads();
  marks.mark(kHW2In);
  if (p.groups == 1) {  // all of 4C: the block's columns of y
    slice::block_product<T, kFfnDownMaxNT, kW>(
        hs, p.ld_h, w2s, p.ld_w2, p.kwk, p.mtc, p.nw / 8, red, [&](int row, int col, float s) {
          if (row < p.m && col < n_valid) {
            a.y[int64_t(row) * p.c + n0 + col] =
                Elem<T>::from_float(s + Elem<T>::to_float(b2s[col]));
          }
        });
    marks.mark(kDown);
    return;
  }
  float* mine = a.partial + int64_t(group) * p.m * p.c;
  slice::block_product<T, kFfnDownMaxNT, kW>(hs, p.ld_h, w2s, p.ld_w2, p.kwk, p.mtc, p.nw / 8, red,
                                             [&](int row, int col, float s) {
                                               if (row < p.m && col < n_valid)
                                                 mine[int64_t(row) * p.c + n0 + col] = s;
                                             });
  marks.mark(kDown);
  count_barrier(a.counters + kMaxGroups + range, unsigned(p.groups), group == 0);
  write_range<kThr>(a, n0, n_valid, b2s, group * p.m / p.groups, (group + 1) * p.m / p.groups);
  marks.mark(kSum);
}

// FL_FFN_STREAM=groups,units,warps,w2_after (e.g. "8,32,16,1"; 0 in the first three and -1 or
// nothing in the last: the plan's) replaces the tuning of every launch: how `fusionlab bench
// --variant ffn_fused=ffn_stream --phases` measures the forms that portable_bench compares.
FfnStreamTuning tuning_from_env(FfnStreamTuning t) {
  const char* env = std::getenv("FL_FFN_STREAM");
  if (env == nullptr || *env == '\0') return t;
  int v[4] = {0, 0, 0, -1};
  if (std::sscanf(env, "%d,%d,%d,%d", &v[0], &v[1], &v[2], &v[3]) >= 1) {
    t.groups = v[0], t.units = v[1], t.warps = v[2], t.w2_after_xw1 = v[3];
  }
  return t;
}

// The plan on this GPU within `optin` bytes of shared memory a block (0: planned_shared_optin's
// share of this GPU's: a chosen older GPU's where a choice as one is in force).
template <typename T>
Status make_plan(int64_t m, int64_t c, FfnStreamTuning tuning, FfnPlan* out, int optin = 0) {
  int device = 0, sms = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (optin == 0) {
    FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    optin = planned_shared_optin(optin);
  }
  if (tuning.warps != 0 && tuning.warps != 8 && tuning.warps != 16) {
    return Status::Error("the portable FFN takes 8 or 16 warps a block");
  }
  if (ffn_choose_plan(m, c, int(sizeof(T)), sms, optin, out, tuning.groups, tuning.units / 8,
                      tuning.warps)) {
    return Status::Ok();
  }
  return Status::Unsupported(
      "the portable FFN at " + std::to_string(m) + " tokens and C = " + std::to_string(c) +
      " does not fit one block per SM in " + std::to_string(optin) + " bytes of shared memory");
}

template <typename T>
Status launch_typed(const FfnStreamBuffers& b, int64_t m, int64_t c, FfnStreamTuning tuning,
                    cudaStream_t stream) {
  tuning = tuning_from_env(tuning);
  FfnStreamArgs<T> a{};
  FL_TRY(make_plan<T>(m, c, tuning, &a.p));
  constexpr int E = slice::kChunk<T>;
  auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  a.x = static_cast<const T*>(b.x);
  a.w1 = static_cast<const T*>(b.w1);
  a.b1 = static_cast<const T*>(b.b1);
  a.w2 = static_cast<const T*>(b.w2);
  a.b2 = static_cast<const T*>(b.b2);
  a.y = static_cast<T*>(b.y);
  a.phases = b.phases;
  char* scratch = static_cast<char*>(b.scratch);
  a.counters = reinterpret_cast<unsigned*>(scratch);
  a.h = reinterpret_cast<T*>(scratch + kCounters * sizeof(unsigned));
  a.partial = reinterpret_cast<float*>(scratch + kCounters * sizeof(unsigned) +
                                       round_up(int(sizeof(T) * m * 4 * c), 256));
  a.x_vec = c % E == 0 && aligned(b.x);
  a.w1_vec = (4 * c) % E == 0 && aligned(b.w1);
  a.w2_vec = c % E == 0 && aligned(b.w2);
  a.h_vec = (4 * c) % E == 0 && aligned(a.h);
  a.b1_vec = aligned(b.b1);  // slices start at multiples of 8 elements; the last may be short
  a.b2_vec = aligned(b.b2);
  if (tuning.w2_after_xw1 >= 0) a.p.w2_after_xw1 = tuning.w2_after_xw1 != 0;
  if (!aligned(b.scratch)) return Status::Error("the FFN's scratch buffer is not 16-byte aligned");
  if (a.p.warps == 16) {
    return slice::launch_cooperative(ffn_stream_kernel<T, 16>, a, a.p.blocks, 512, a.p.smem,
                                     stream);
  }
  return slice::launch_cooperative(ffn_stream_kernel<T, 8>, a, a.p.blocks, 256, a.p.smem, stream);
}

}  // namespace

Status ffn_stream_supported(Precision p, int64_t m, int64_t c) {
  if (m < 1 || m > kFfnStreamMaxTokens) {
    return Status::Unsupported("the portable small-token FFN takes 1 to " +
                               std::to_string(kFfnStreamMaxTokens) + " tokens, got " +
                               std::to_string(m));
  }
  if (c < 1) return Status::Error("the portable small-token FFN needs C >= 1");
  FL_TRY(slice::cooperative_gpu_supported(p, "the portable FFN"));
  FfnPlan plan;
  return p == Precision::bf16 ? make_plan<__nv_bfloat16>(m, c, {}, &plan)
                              : make_plan<float>(m, c, {}, &plan);
}

Status ffn_stream_scratch_bytes(Precision p, int64_t m, int64_t c, size_t* bytes,
                                FfnStreamTuning tuning) {
  // The counters, h (m x 4C), then the groups' partial sums (groups x m x C, fp32).
  // Made before any choice as an older GPU, the buffer holds the plan for each opt-in limit
  // below this GPU's too (a smaller one may take more groups, each a partial sum of y).
  FL_TRY(ffn_stream_supported(p, m, c));
  tuning = tuning_from_env(tuning);
  int device = 0, optin = 0, groups = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  for (int limit : plannable_shared_optins(optin)) {
    FfnPlan plan;
    const Status st = p == Precision::bf16 ? make_plan<__nv_bfloat16>(m, c, tuning, &plan, limit)
                                           : make_plan<float>(m, c, tuning, &plan, limit);
    if (st.ok()) groups = std::max(groups, plan.groups);
    if (!st.ok() && !st.unsupported()) return st;
  }
  if (groups == 0) return Status::Unsupported("the portable FFN has no plan here");
  *bytes = kCounters * sizeof(unsigned) + round_up(int(bytes_per_element(p) * m * 4 * c), 256) +
           sizeof(float) * size_t(groups) * size_t(m) * size_t(c);
  return Status::Ok();
}

Status launch_ffn_stream(Precision p, const FfnStreamBuffers& b, int64_t m, int64_t c,
                         cudaStream_t stream, FfnStreamTuning tuning) {
  FL_TRY(ffn_stream_supported(p, m, c));
  return p == Precision::bf16 ? launch_typed<__nv_bfloat16>(b, m, c, tuning, stream)
                              : launch_typed<float>(b, m, c, tuning, stream);
}

}  // namespace fl
