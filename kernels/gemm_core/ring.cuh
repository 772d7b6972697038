// The cp.async ring both block tiles of the portable GEMM core run (mma_tile.cuh on the tensor
// cores, sgemm_tile.cuh on the CUDA cores): kStages K-tiles of A and B in flight, one barrier per
// K-tile, in the order of CUTLASS's multistage main loop:
//
//   prime:  K-tiles 0 .. S-2 asked for (one commit group each, empty ones too, so that "at most
//           S-2 groups pending" always means "K-tile kt has landed")
//   loop:   K-tile kt landed -> the prologue hook on this thread's chunks of A -> barrier ->
//           ask for K-tile kt + S-1 into the stage K-tile kt - 1 used -> multiply K-tile kt
//
// A Tile provides: kBK, kStages, kStageElems, Acc, Frags (fragments carried from one K-tile to
// the next; empty where nothing is), kPrefetch, load_stage, visit_a, begin (the first K-tile's
// first fragments, where kPrefetch) and compute(acc, frags, this stage, next stage, has_next,
// landed_next): with kPrefetch, compute calls landed_next() itself between its last fragment
// load and its last multiply, so the barrier for K-tile kt + 1 comes while the tensor cores are
// busy; without, the loop waits for each K-tile before computing it.
#pragma once

#include <cstdint>

#include "kernels/tensor_gemm.cuh"

namespace fl::gemm_core {

// B's part of K-tiles 0 .. S-2 (MmaTile's stages: A's BM x BK, then B's BK x BN) asked for as
// one commit group, before the caller waits for A (ln_mma_tiles.cu: W's first K-tiles fly while
// the tile waits for its rows of xn). ring_mainloop<Tile, true> then primes A alone:
// the extra group is the oldest, so "K-tile kt has landed" still means B's part too.
template <class Tile, typename T>
__device__ __forceinline__ void prime_b_ahead(T* ring, const T* b, int64_t ldb, int64_t n,
                                              int64_t k, int64_t n0) {
  const int kts = static_cast<int>((k + Tile::kBK - 1) / Tile::kBK);
#pragma unroll
  for (int kt = 0; kt < Tile::kStages - 1; ++kt) {
    if (kt < kts)
      Tile::template load_b<Tile::kBK>(ring + kt * Tile::kStageElems + Tile::kBM * Tile::kBK, b,
                                       ldb, n, k, int64_t(kt) * Tile::kBK, n0);
  }
  tc::async_commit();
}

// acc += A[m0.., :] B[:, n0..] over all of K. hook(chunk, row, k) runs on every landed chunk of
// A before any warp reads it (the LayerNorm prologue); after_prime() once while the first K-tiles
// fly. kBAhead: B's part of the first S-1 K-tiles was asked for already (prime_b_ahead, with b
// and n0 as here). Ends with a barrier: the ring may be refilled at once.
template <class Tile, bool kBAhead = false, typename T, class Hook, class AfterPrime>
__device__ __forceinline__ void ring_mainloop(typename Tile::Acc& acc, T* ring, const T* a,
                                              int64_t lda, const T* b, int64_t ldb, int64_t m,
                                              int64_t n, int64_t k, int64_t m0, int64_t n0,
                                              const Hook& hook, const AfterPrime& after_prime) {
  constexpr int S = Tile::kStages;
  const int kts = static_cast<int>((k + Tile::kBK - 1) / Tile::kBK);
  // K-tile kt lies in stage kt % S: a mask where S is a power of 2; else counted along (s_cur
  // holds kt, s_next kt + 1, s_load kt + S - 1), not divided out of kt.
  constexpr bool kMask = (S & (S - 1)) == 0;
  auto stage = [ring](int s) { return ring + (kMask ? s & (S - 1) : s) * Tile::kStageElems; };
  auto after = [](int s) { return kMask ? s + 1 : s + 1 == S ? 0 : s + 1; };
#pragma unroll
  for (int kt = 0; kt < S - 1; ++kt) {
    if (kt < kts) {
      if constexpr (kBAhead) {
        Tile::load_a(stage(kt), a, lda, m, k, m0, kt);
      } else {
        Tile::load_stage(stage(kt), a, lda, b, ldb, m, n, k, m0, n0, kt);
      }
    }
    tc::async_commit();
  }
  after_prime();
  auto landed = [&](int kt, int s) {  // this thread's copies of K-tile kt are in; then everyone's
    tc::async_wait<S - 2>();
    if (kt < kts) Tile::visit_a(stage(s), kt, hook);
    __syncthreads();
  };
  typename Tile::Frags frags;
  if constexpr (Tile::kPrefetch) {
    landed(0, 0);
    Tile::begin(frags, stage(0));
  }
  int s_cur = 0, s_load = S - 1;
  for (int kt = 0; kt < kts; ++kt) {
    const int s_next = after(s_cur);
    if constexpr (!Tile::kPrefetch) landed(kt, s_cur);
    // Into the stage K-tile kt - 1 used: no warp reads it any more (its last fragments are in
    // registers, or its multiply is done).
    const int next = kt + S - 1;
    if (next < kts) Tile::load_stage(stage(s_load), a, lda, b, ldb, m, n, k, m0, n0, next);
    tc::async_commit();
    Tile::compute(acc, frags, stage(s_cur), stage(s_next), kt + 1 < kts,
                  [&]() { landed(kt + 1, s_next); });
    s_cur = s_next, s_load = after(s_load);
  }
  tc::async_wait<0>();
  __syncthreads();
}

// Asks L2 for rows 0 .. k - 1 of B's columns n0 .. n0 + kBN - 1 (128-byte lines; no wait, no
// registers): what a tile will stream through its ring later, fetched while it does other work.
template <class Tile, typename T>
__device__ __forceinline__ void prefetch_b_l2(const T* b, int64_t ldb, int k, int64_t n0,
                                              int64_t n) {
  constexpr int kLines = Tile::kBN * int(sizeof(T)) / 128, kPerLine = 128 / int(sizeof(T));
  for (int i = threadIdx.x; i < k * kLines; i += Tile::kThreads) {
    const int r = i / kLines, l = i % kLines;
    if (n0 + l * kPerLine < n)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(b + r * ldb + n0 + l * kPerLine));
  }
}

// The tile the table's hooks see when there is nothing to do.
struct NoHook {
  template <typename T>
  __device__ void operator()(T*, int, int64_t) const {}
  __device__ void operator()() const {}
};

}  // namespace fl::gemm_core
