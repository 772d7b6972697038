// Lesson 8's portable small-token rung: the whole FFN, y = GELU(x W1 + b1) W2 + b2, in one
// launch for 1 to 64 tokens on any GPU with cp.async (sm_80+; fp32 also on sm_70, with plain
// copies). No clusters, no TMA, no grid barrier: counters in L2 hand h from block to block.
//
// What changes against the split-hidden kernel (ffn.cu, level 2 where Hopper's kernels do not
// run): that one gives each block a slice of the hidden units for both products, so every block
// adds a share of every y element (at 64 tokens 25 MB of atomics into L2) and its W2 streams
// only once its h is done. Here each block has two jobs, and asks for the weights of both at
// once, before any arithmetic (kernels/gemm_core/weight_slice.cuh):
//   up:   8 nt hidden units (at C = 768: 24, on 128 blocks): h[:, slice] = GELU(x W1[:, slice]
//         + b1), x and W1's columns in shared memory; h written to L2, rounded to the lesson's
//         precision as level 1's h is; then the slice's group counter goes up (release);
//   down: one tile of W2, a group of slices' rows x a range of y's columns (at C = 768: 384 x
//         48, 8 groups x 16 ranges), copied in while the up job runs. The block waits for its
//         group's counter (acquire), copies that h (m x 384) from L2, and stores h W2[tile] as
//         its group's partial sums (fp32, L2); then the range's 8 blocks (one a group) meet at
//         a barrier (count_barrier.cuh) and each adds the 8 partial sums of an eighth of the
//         range's rows in group order (the same result every run) and writes them (+ b2). The
//         earlier form, the last group to finish a range adding all of it, is a tuning: at 64
//         tokens that one block read 8 x 64 x 48 floats (98 KB) while the others had left.
// Every block is resident at once (a cooperative launch guarantees it), so the waits end. The
// plan (ffn_stream_plan.h) sizes the slice so that the grid is one block per SM; on GPUs with
// less shared memory W2's tile is asked for after the up job.
//
// Budget at C = 768, bf16: W1 + W2 = 9.4 MB from HBM (3.1 us at 3 TB/s), 72 KB per block, all
// in flight at once; x (m x C) and h (m x 384) read per block from L2; partial sums 8 x m x C
// floats written and read once (1.5 MB at 64 tokens, against 25 MB of atomics with a split of
// W2 by slice). Predicted: the weights' 3.1 us plus a launch and four L2 round trips (h out,
// counter, h in, partial sums in), 5-6 us at 1-16 tokens.
#include "kernels/ffn/ffn_stream.h"
#include "kernels/ffn/ffn_stream_plan.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "kernels/activations.cuh"
#include "kernels/cuda_check.h"
#include "kernels/ffn/count_barrier.cuh"
#include "kernels/gemm_core/weight_slice.cuh"

namespace fl {
namespace {

using slice::kThreads;
using slice::round_up;

constexpr int kMaxGroups = kFfnMaxGroups;
constexpr int kCounters = 4 * kMaxGroups;  // ready, seen, done, meet

template <typename T>
struct FfnStreamArgs {
  FfnPlan p;
  const T *x, *w1, *b1, *w2, *b2;
  T *y, *h;            // h: m x 4C in the scratch buffer (L2)
  float* partial;      // groups x m x C: each group's sums over its hidden units
  unsigned* counters;  // ready, seen (per group), done, meet (per range): zero between launches
  bool x_vec, w1_vec, w2_vec, h_vec;
  bool spread;  // the range's sum spread over its blocks (a barrier of the range's groups)
};

// Every thread's writes, then one increment by thread 0; returns the old count to every thread.
__device__ __forceinline__ unsigned block_arrive(unsigned* counter, unsigned* s_word) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) *s_word = atomicAdd(counter, 1u);
  __syncthreads();
  return *s_word;
}

// y[r0 .. r1, n0 .. n0 + n_valid) = the groups' partial sums, added in group order (the same
// result every run), + b2. Four columns a thread where rows are 16-byte multiples: a thread keeps
// one load of every group in flight.
template <typename T>
__device__ __forceinline__ void write_range(const FfnStreamArgs<T>& a, int n0, int n_valid,
                                            const float* b2s, int r0, int r1) {
  const FfnPlan& p = a.p;
  const int64_t stride = int64_t(p.m) * p.c;
  if (p.c % 4 == 0) {
    const int quads = n_valid / 4;  // n_valid is a multiple of 8 or the rest of C
    for (int e = threadIdx.x; e < (r1 - r0) * quads; e += kThreads) {
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
      for (int i = 0; i < 4; ++i) a.y[at + i] = Elem<T>::from_float(out[i] + b2s[4 * q + i]);
    }
    return;
  }
  for (int e = threadIdx.x; e < (r1 - r0) * n_valid; e += kThreads) {
    const int64_t at = int64_t(r0 + e / n_valid) * p.c + n0 + e % n_valid;
    float sum = 0.0f;
#pragma unroll 8
    for (int g = 0; g < p.groups; ++g) sum += slice::load_cg(a.partial + g * stride + at);
    a.y[at] = Elem<T>::from_float(sum + b2s[e % n_valid]);
  }
}

// Once every group has stored its partial sums of column range `range`: either the last group to
// finish adds all of the range's rows (one block), or (spread) the range's blocks meet at a
// barrier and each adds its share of the rows (the sum spread over `groups` blocks).
template <typename T>
__device__ __forceinline__ void finish_range(const FfnStreamArgs<T>& a, int group, int range,
                                             int n0, int n_valid, const float* b2s,
                                             unsigned* s_word) {
  const FfnPlan& p = a.p;
  unsigned* done = a.counters + 2 * kMaxGroups;
  if (a.spread) {
    unsigned* meet = a.counters + 3 * kMaxGroups;
    count_barrier(meet + range, unsigned(p.groups), group == 0);
    write_range(a, n0, n_valid, b2s, group * p.m / p.groups, (group + 1) * p.m / p.groups);
    return;
  }
  if (block_arrive(done + range, s_word) != unsigned(p.groups - 1)) return;
  __threadfence();
  if (threadIdx.x == 0) done[range] = 0;  // for the next launch
  write_range(a, n0, n_valid, b2s, 0, p.m);
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) ffn_stream_kernel(FfnStreamArgs<T> a) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ unsigned s_word;
  const FfnPlan& p = a.p;
  T* w2s = reinterpret_cast<T*>(smem + p.off_w2);
  T* xs = reinterpret_cast<T*>(smem + p.off_x);
  T* w1s = reinterpret_cast<T*>(smem + p.off_w1);
  T* hs = xs;  // the down job's h, where x and W1 were
  float* red = reinterpret_cast<float*>(smem + p.off_x);
  float* b1s = reinterpret_cast<float*>(smem + p.off_bias);
  float* b2s = b1s + 8 * p.nt;
  unsigned *ready = a.counters, *seen = ready + kMaxGroups;
  // The two jobs: up slice j0.., down tile (group, range) when the block has one.
  const int r = 8 * p.nt, j0 = blockIdx.x * r, r_valid = min(r, p.h - j0);
  const bool has_down = int(blockIdx.x) < p.groups * p.ranges;
  const int group = blockIdx.x / p.ranges, range = blockIdx.x % p.ranges;
  const int k0 = group * p.kw, k_valid = min(p.kw, p.h - k0);
  const int n0 = range * p.nw, n_valid = min(p.nw, p.c - n0);
  // Every weight byte of the block is asked for before any arithmetic.
  slice::stage(xs, p.ld_x, a.x, p.c, 16 * p.mtc, p.ck, p.m, p.c, a.x_vec);
  slice::stage(w1s, p.ld_w1, a.w1 + j0, p.h, p.ck, r, p.c, r_valid, a.w1_vec);
  tc::async_commit();
  if (has_down && !p.w2_late) {
    slice::stage(w2s, p.ld_w2, a.w2 + int64_t(k0) * p.c + n0, p.c, p.kwk, p.nw, k_valid, n_valid,
                 a.w2_vec);
  }
  tc::async_commit();
  for (int i = threadIdx.x; i < r + p.nw; i += kThreads) {
    const bool is_b1 = i < r;
    const int col = is_b1 ? j0 + i : n0 + i - r;
    const bool valid = is_b1 ? i < r_valid : i - r < n_valid && has_down;
    b1s[i] = valid ? Elem<T>::to_float(is_b1 ? a.b1[col] : a.b2[col]) : 0.0f;
  }
  tc::async_wait<1>();  // x and W1
  __syncthreads();
  // Up: h[:, slice] into L2.
  slice::block_product<T, kFfnUpMaxNT>(
      xs, p.ld_x, w1s, p.ld_w1, p.ck, p.mtc, p.nt, red, [&](int row, int col, float s) {
        if (row < p.m && col < r_valid) {
          a.h[int64_t(row) * p.h + j0 + col] = Elem<T>::from_float(gelu_tanh_fast(s + b1s[col]));
        }
      });
  block_arrive(ready + blockIdx.x / p.spg, &s_word);  // release: this slice of h is in L2
  if (!has_down) {
    tc::async_wait<0>();
    return;
  }
  // Down: wait for the group's slices of h, take them from L2.
  if (p.w2_late) {
    slice::stage(w2s, p.ld_w2, a.w2 + int64_t(k0) * p.c + n0, p.c, p.kwk, p.nw, k_valid, n_valid,
                 a.w2_vec);
  }
  const unsigned need = unsigned(min(p.spg, p.blocks - group * p.spg));
  if (threadIdx.x == 0) {
    // Every block is resident, so this ends; a wrong count would hang the GPU instead: after
    // about a second, trap (the launch fails with an error) rather than hang.
    for (unsigned spins = 0; load_acquire(ready + group) < need; ++spins) {
      if (spins == (1u << 24)) __trap();
      __nanosleep(64);
    }
    __threadfence();
  }
  __syncthreads();
  slice::stage(hs, p.ld_h, a.h + k0, p.h, 16 * p.mtc, p.kwk, p.m, k_valid, a.h_vec);
  tc::async_commit();
  // The last of the range's readers of this group's counters puts them back to zero.
  if (block_arrive(seen + group, &s_word) == unsigned(p.ranges - 1) && threadIdx.x == 0) {
    ready[group] = 0;
    seen[group] = 0;
  }
  tc::async_wait<0>();  // W2's tile and h
  __syncthreads();
  float* mine = a.partial + int64_t(group) * p.m * p.c;
  slice::block_product<T, kFfnDownMaxNT>(hs, p.ld_h, w2s, p.ld_w2, p.kwk, p.mtc, p.nw / 8, red,
                                         [&](int row, int col, float s) {
                                           if (row < p.m && col < n_valid)
                                             mine[int64_t(row) * p.c + n0 + col] = s;
                                         });
  finish_range(a, group, range, n0, n_valid, b2s, &s_word);
}

template <typename T>
Status make_plan(int64_t m, int64_t c, FfnStreamTuning tuning, FfnPlan* out) {
  int device = 0, sms = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (ffn_choose_plan(m, c, int(sizeof(T)), sms, optin, out, tuning.groups, tuning.units / 8)) {
    return Status::Ok();
  }
  return Status::Unsupported(
      "the portable FFN at " + std::to_string(m) + " tokens and C = " + std::to_string(c) +
      " does not fit one block per SM in " + std::to_string(optin) + " bytes of shared memory");
}

template <typename T>
Status launch_typed(const FfnStreamBuffers& b, int64_t m, int64_t c, FfnStreamTuning tuning,
                    cudaStream_t stream) {
  FfnStreamArgs<T> a{};
  FL_TRY(make_plan<T>(m, c, tuning, &a.p));
  a.spread = tuning.spread;
  constexpr int E = slice::kChunk<T>;
  auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  a.x = static_cast<const T*>(b.x);
  a.w1 = static_cast<const T*>(b.w1);
  a.b1 = static_cast<const T*>(b.b1);
  a.w2 = static_cast<const T*>(b.w2);
  a.b2 = static_cast<const T*>(b.b2);
  a.y = static_cast<T*>(b.y);
  char* scratch = static_cast<char*>(b.scratch);
  a.counters = reinterpret_cast<unsigned*>(scratch);
  a.h = reinterpret_cast<T*>(scratch + kCounters * sizeof(unsigned));
  a.partial = reinterpret_cast<float*>(scratch + kCounters * sizeof(unsigned) +
                                       round_up(int(sizeof(T) * m * 4 * c), 256));
  a.x_vec = c % E == 0 && aligned(b.x);
  a.w1_vec = (4 * c) % E == 0 && aligned(b.w1);
  a.w2_vec = c % E == 0 && aligned(b.w2);
  a.h_vec = (4 * c) % E == 0 && aligned(a.h);
  return slice::launch_cooperative(ffn_stream_kernel<T>, a, a.p.blocks, kThreads, a.p.smem, stream);
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
  FL_TRY(ffn_stream_supported(p, m, c));
  FfnPlan plan;
  FL_TRY(p == Precision::bf16 ? make_plan<__nv_bfloat16>(m, c, tuning, &plan)
                              : make_plan<float>(m, c, tuning, &plan));
  *bytes = kCounters * sizeof(unsigned) + round_up(int(bytes_per_element(p) * m * 4 * c), 256) +
           sizeof(float) * size_t(plan.groups) * size_t(m) * size_t(c);
  return Status::Ok();
}

Status launch_ffn_stream(Precision p, const FfnStreamBuffers& b, int64_t m, int64_t c,
                         cudaStream_t stream, FfnStreamTuning tuning) {
  FL_TRY(ffn_stream_supported(p, m, c));
  return p == Precision::bf16 ? launch_typed<__nv_bfloat16>(b, m, c, tuning, stream)
                              : launch_typed<float>(b, m, c, tuning, stream);
}

}  // namespace fl
