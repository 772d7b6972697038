// Proj in attention's last split, read in one burst (MegakernelOptions::last_split_proj 3): the
// head's last split reads its splits' partial sums with its ticket, not after it. Each split
// writes its partial row (o[64], max, sum) as flagged 64-bit words (publish_word: the float in
// the low half, layer + 1 in the high half, one single-copy-atomic relaxed store a word) into
// a.rows, [head][token][split][kRowWords]. Once the split's block is done, warps 1-7 load the
// head's rows (relaxed, gpu scope: L2) while thread 0's ticket (atom.acq_rel) is in flight; the
// split that takes the last ticket keeps every word that carries this layer's flag (a value of
// this layer: the word is atomic) and loads again only those that do not (after the ticket's
// acquire every split's words are visible). Warp 0 issues none of them: the ticket's release
// would wait for its own loads. The flags need no reset: a layer's rows are all rewritten by the
// next layer (flag + 1) and a launch ends with layer 12's; the buffer starts zeroed.
//
// Against last_split_proj 2: the last split's two dependent round trips (the ticket, then the
// splits' sums) become one; every split loads its head's rows (t x splits x 66 words: 4.6 KB at a
// cache of 512, t = 1) and all but the last drop them.
#pragma once

#include "kernels/gpt2_decode/counters.cuh"
#include "kernels/gpt2_decode/device.cuh"

namespace fl {
namespace gpt2 {

constexpr int kRowWords = kHeadDim + 2;  // a split's o[64], max and sum
constexpr int kBurst = 4;                // words a loading thread holds across the ticket
constexpr int kLoaders = kThreads - 32;  // warps 1-7

__device__ __forceinline__ void st_relaxed(unsigned long long* p, unsigned long long v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  *reinterpret_cast<volatile unsigned long long*>(p) = v;
#endif
}
__device__ __forceinline__ unsigned long long ld_relaxed(const unsigned long long* p) {
  unsigned long long v;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
#else
  v = *reinterpret_cast<const volatile unsigned long long*>(p);
#endif
  return v;
}

// Head `head`'s rows (t x splits x kRowWords words, one run).
__device__ __forceinline__ unsigned long long* head_rows(const DecodeArgs& a, int head) {
  return a.rows + int64_t(head) * a.tokens * a.splits * kRowWords;
}
// Word w of split `split`'s row for token j, with layer's flag.
__device__ __forceinline__ void publish_word(const DecodeArgs& a, int layer, int head, int j,
                                             int split, int w, float v) {
  const unsigned long long flag = static_cast<unsigned long long>(layer + 1) << 32;
  st_relaxed(head_rows(a, head) + (int64_t(j) * a.splits + split) * kRowWords + w,
             flag | __float_as_uint(v));
}

// q, k and v as flagged words (MegakernelOptions::qkv_words): a qkv task's epilogue writes each
// value it makes as publish_word does a row's (k and v rounded to bf16, as the cache holds them),
// at [head][token][w]: w = d for q, 64 + d for k, 128 + d for v; an attention split loads its
// head's (await_qkv) instead of waiting for the qkv stage's count.
constexpr int kQkvWords = 3 * kHeadDim;
__device__ __forceinline__ void publish_qkv(const DecodeArgs& a, int layer, int j, int n,
                                            float v) {  // output n of qkv (0 .. 3C) for token j
  const int part = n / kC, c = n % kC, head = c / kHeadDim;
  const unsigned long long flag = static_cast<unsigned long long>(layer + 1) << 32;
  st_relaxed(
      a.qkv_words + (int64_t(head) * a.tokens + j) * kQkvWords + part * kHeadDim + c % kHeadDim,
      flag | __float_as_uint(v));
}
// An attention split's inputs from the words: q (t x 64 floats) and, where the split holds the
// step's new positions [max(p0, s), p1), their keys and values as bf16 rows in `fresh` (keys at
// token j's row j, values kMaxTokens rows on), each word loaded until it carries the layer's flag.
__device__ inline void await_qkv(const DecodeArgs& a, int layer, int head, int p0, int p1, float* q,
                                 bf16* fresh) {
  const unsigned flag = unsigned(layer + 1);
  const int j_new = max(p0, a.cache) - a.cache, n_new = max(0, p1 - max(p0, a.cache));
  const int nq = a.tokens * kHeadDim, n = nq + n_new * 2 * kHeadDim;
  const unsigned long long* words = a.qkv_words + int64_t(head) * a.tokens * kQkvWords;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const int e = i - nq, j = i < nq ? i / kHeadDim : j_new + e / (2 * kHeadDim);
    const int w = i < nq ? i % kHeadDim : kHeadDim + e % (2 * kHeadDim);
    const unsigned long long* src = words + int64_t(j) * kQkvWords + w;
    unsigned long long v = ld_relaxed(src);
    while (unsigned(v >> 32) != flag) v = ld_relaxed(src);
    const float f = __uint_as_float(unsigned(v));
    if (i < nq)
      q[i] = f;
    else  // (w - 64: keys' dims, then values')
      fresh[(w < 2 * kHeadDim ? 0 : kMaxTokens * kHeadDim) + j * kHeadDim + w % kHeadDim] =
          __float2bfloat16_rn(f);
  }
}

// Tokens of a pass: their rows fit the activations' room (48 KB) as floats.
__device__ __forceinline__ int row_pass_tokens(const DecodeArgs& a) {
  return min(a.tokens, kActFloats / (a.splits * kRowWords));
}

// Warps 1-7, before the ticket: the first pass's first kBurst x kLoaders words.
__device__ __forceinline__ void issue_burst(const DecodeArgs& a, int head,
                                            unsigned long long (&burst)[kBurst]) {
  const int n = row_pass_tokens(a) * a.splits * kRowWords, i0 = int(threadIdx.x) - 32;
  const unsigned long long* src = head_rows(a, head);
#pragma unroll
  for (int k = 0; k < kBurst; ++k) {
    const int i = i0 + k * kLoaders;
    burst[k] = i0 >= 0 && i < n ? ld_relaxed(src + i) : 0ull;
  }
}

// Tokens [j0, j0 + tc)'s rows (in `work` as floats, after a barrier) combined into o.
__device__ __forceinline__ void combine_pass(int splits, const float* work, int j0, int tc,
                                             float* o) {
  for (int i = threadIdx.x; i < tc * kHeadDim; i += kThreads) {
    const int jj = i / kHeadDim, d = i % kHeadDim;
    const float* rows = work + jj * splits * kRowWords;
    float m = -INFINITY;
    for (int s = 0; s < splits; ++s) m = fmaxf(m, rows[s * kRowWords + kHeadDim]);
    float l = 0.f, acc = 0.f;
    for (int s = 0; s < splits; ++s) {
      const float ls = rows[s * kRowWords + kHeadDim + 1];
      const float w = ls > 0.f ? __expf(rows[s * kRowWords + kHeadDim] - m) : 0.f;
      l += w * ls;
      acc += w * rows[s * kRowWords + d];
    }
    o[(j0 + jj) * kHeadDim + d] = acc / l;  // every token sees key 0: l > 0
  }
}

// The last split, after its ticket: the head's rows combined into o (t x 64 floats), a pass of
// tokens at a time through `work` (their words as floats, then per token the splits' maxima,
// weights and sums: the combine's sums in the combine's order). Ends with a barrier.
__device__ inline void combine_rows(const DecodeArgs& a, int layer, int head,
                                    const unsigned long long (&burst)[kBurst], float* work,
                                    float* o) {
  const unsigned flag = unsigned(layer + 1);
  const int splits = a.splits, tokens = row_pass_tokens(a), i0 = int(threadIdx.x) - 32;
  for (int j0 = 0; j0 < a.tokens; j0 += tokens) {
    const int tc = min(tokens, a.tokens - j0), n = tc * splits * kRowWords;
    const unsigned long long* src = head_rows(a, head) + int64_t(j0) * splits * kRowWords;
    if (j0 > 0) __syncthreads();  // the pass before's rows are read
    if (i0 >= 0) {
#pragma unroll
      for (int k = 0; k < kBurst; ++k) {
        const int i = i0 + k * kLoaders;
        if (i >= n) break;
        unsigned long long w = j0 == 0 ? burst[k] : 0ull;
        if (unsigned(w >> 32) != flag) w = ld_relaxed(src + i);  // not in by the burst
        work[i] = __uint_as_float(unsigned(w));
      }
      for (int i = i0 + kBurst * kLoaders; i < n; i += kLoaders)
        work[i] = __uint_as_float(unsigned(ld_relaxed(src + i)));
    }
    __syncthreads();
    combine_pass(splits, work, j0, tc, o);
  }
  __syncthreads();
}

// proj by head reading rows (MegakernelOptions::proj_reads_rows): its head's rows as they land,
// combined into o (t x 64 floats) as combine_rows does. Every thread loads up to kBurst words at
// once (all in flight), then loads again, together, those that do not yet carry this layer's
// flag, until every one does: each split writes every word of its row once a layer. With a
// counter (qkv_words: the task's count waited for here, not before the task) thread 0 waits
// for it (an acquire, ordered before the block's adds by the barriers below) while warps 1-7
// load the rows. Ends with a barrier.
__device__ inline void await_rows(const DecodeArgs& a, int layer, int head, float* work, float* o,
                                  const unsigned* counter = nullptr, unsigned target = 0) {
  const unsigned flag = unsigned(layer + 1);
  const int splits = a.splits, tokens = row_pass_tokens(a);
  const int skip = counter != nullptr ? 32 : 0, loaders = kThreads - skip;
  const int li = int(threadIdx.x) - skip;  // this thread's place among the loaders (< 0: none)
  if (counter != nullptr && threadIdx.x == 0) wait_count(counter, target, false);
  for (int j0 = 0; j0 < a.tokens; j0 += tokens) {
    const int tc = min(tokens, a.tokens - j0), n = tc * splits * kRowWords;
    const unsigned long long* src = head_rows(a, head) + int64_t(j0) * splits * kRowWords;
    if (j0 > 0) __syncthreads();  // the pass before's rows are read
    for (int base = 0; li >= 0 && base < n; base += kBurst * loaders) {
      unsigned long long w[kBurst];
      bool stale = false;
#pragma unroll
      for (int k = 0; k < kBurst; ++k) {
        const int i = base + li + k * loaders;
        w[k] = i < n ? ld_relaxed(src + i) : static_cast<unsigned long long>(flag) << 32;
      }
      do {
        stale = false;
#pragma unroll
        for (int k = 0; k < kBurst; ++k) {
          const int i = base + li + k * loaders;
          if (unsigned(w[k] >> 32) != flag) w[k] = ld_relaxed(src + i), stale = true;
        }
      } while (stale);
#pragma unroll
      for (int k = 0; k < kBurst; ++k) {
        const int i = base + li + k * loaders;
        if (i < n) work[i] = __uint_as_float(unsigned(w[k]));
      }
    }
    __syncthreads();
    combine_pass(splits, work, j0, tc, o);
  }
  __syncthreads();
}

}  // namespace gpt2
}  // namespace fl
