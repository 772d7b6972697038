// ln_panel's plan (kernels/layernorm_linear/ln_panel.cu): the block's tile, where each piece
// lies in shared memory, and the measurement switches a benchmark sets through the environment.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>

#include "kernels/tensor_gemm.cuh"

namespace fl::layernorm_linear {

constexpr int kPanelRows = 64;      // rows per block (the row chunk)
constexpr int kPanelThreads = 512;  // 16 warps

// How the block issues its copies, normalizes and multiplies (bits of PanelPlan::form; the plan
// takes kPanelForms, docs/PERFORMANCE.md has each measured): lane addresses of the two-item
// multiplies computed once and stepped by constants (bf16); copies whose row and column advance
// by constants (copy_tile divides at every 16-byte chunk); the normalization stepped the same
// way with gamma and beta read 16 bytes at a time (normalize_rows' Vec16 references compile
// to 2-byte loads, 16 a chunk).
constexpr int kPanelMmaByAddress = 1, kPanelCopyStepped = 2, kPanelNormalizeStepped = 8;
constexpr int kPanelAffineAsync = 256;  // below
constexpr int kPanelForms =
    kPanelMmaByAddress | kPanelCopyStepped | kPanelNormalizeStepped | kPanelAffineAsync;
// Tunings, measured and left off (no faster than the plan's form at 1-64 tokens, bf16;
// docs/PERFORMANCE.md has the figures): kPanelBiasAhead, the bias of the block's columns read into
// shared memory with gamma and beta before x's copies land (else read from global memory by
// the stores of y: a third dependent load before the thread's wait for x); kPanelSplitByAddress,
// the split-K multiplies (at most as many items as warps) on the stepped lane addresses too (else
// tc::warp_multiply); kPanelWarpsSplit, the first kPanelXWarps warps ask for x's panel, gamma, beta
// and the bias, wait for x and normalize it while the others ask for W's slice from the start (else
// every thread asks for both, W when plan.w_when says: W's copies asked for by the same threads
// were not what held the normalization up).
constexpr int kPanelBiasAhead = 16, kPanelSplitByAddress = 32, kPanelWarpsSplit = 64;
constexpr int kPanelXWarps = kPanelThreads / 64;
// kPanelAffineAsync (in the plan's form): gamma, beta and the bias of the block's columns by
// 16-byte cp.async in x's commit group (else 2-byte loads into registers and stores, each a
// dependent round trip before the thread's wait for x, and the bias read from global memory by
// the stores of y). Not with kPanelWarpsSplit (its own prologue).
constexpr int kPanelFormBits =
    kPanelForms | kPanelBiasAhead | kPanelSplitByAddress | kPanelWarpsSplit | kPanelAffineAsync;

template <typename T>
struct PanelPlan {
  int bn = 0, rows = 0, k = 0;  // columns per block, rows per block (M rounded to 16, <= 64), K
  int stages = 1;               // W's slice in this many commit groups along K (no split of K only)
  int w_when = 0;  // W's copies asked for with x's (0), once x is in (1), after normalizing (2)
  int form = kPanelForms;  // kPanelForms' bits
  __host__ __device__ int stage_k(int s) const { return k / 16 * s / stages * 16; }
  __host__ __device__ int ld_x() const { return k + tc::kPad<T>; }
  __host__ __device__ int ld_w() const { return bn + tc::kPad<T>; }
  // 16 x 16 items of the block's tile; with more items than warps no split of K (and no
  // partial sums in shared memory).
  __host__ __device__ int items() const { return (rows / 16) * ((bn + 15) / 16); }
  __host__ __device__ bool split_k() const { return items() <= kPanelThreads / 32; }
  __host__ __device__ size_t w_offset() const { return sizeof(T) * size_t(rows) * ld_x(); }
  __host__ __device__ size_t stats_offset() const {
    return (w_offset() + sizeof(T) * size_t(k) * ld_w() + 15) / 16 * 16;
  }
  __host__ __device__ size_t affine_offset() const {
    return stats_offset() + sizeof(float2) * rows;
  }
  __host__ __device__ size_t bias_offset() const {  // the bias of the block's bn columns
    return affine_offset() + 2 * sizeof(T) * size_t(k);
  }
  __host__ __device__ size_t red_offset() const {
    return (bias_offset() + sizeof(T) * size_t(bn) + 15) / 16 * 16;
  }
  __host__ __device__ size_t bytes() const {  // 8 accumulators a lane where K is split
    return red_offset() + (split_k() ? sizeof(float) * size_t(kPanelThreads) * 8 : 0);
  }
};

// Measurements only: FL_LN_PANEL "16" searches multiples of 16 up to 64 columns (the earlier
// plan), "RxB" takes R rows and B columns where they fit; FL_LN_PANEL_STAGES (1-4) asks for W
// in that many stages along K (one measured fastest: docs/PERFORMANCE.md); FL_LN_PANEL_W 1 asks
// for W once x is in (the plan's before kPanelAffineAsync: with gamma's and beta's dependent
// loads x landed later when W was asked for with it), 2 once x is normalized (0, the plan's: W's
// commit group right behind x's, measured fastest with kPanelAffineAsync); FL_LN_PANEL_FORM the
// form's bits (kPanelFormBits: 267 the plan's, 11 the one before it).
struct PanelSearch {
  int step = 8, most_bn = 128, rows = 0, bn = 0, stages = 1, w_when = 0;
  int form = kPanelForms;
};
inline PanelSearch panel_search(int elem_bytes) {
  PanelSearch s;
  if (elem_bytes == 4) s.step = 16, s.most_bn = 64;
  if (const char* st = std::getenv("FL_LN_PANEL_STAGES"); st != nullptr) {
    s.stages = std::min(4, std::max(1, std::atoi(st)));
  }
  if (const char* w = std::getenv("FL_LN_PANEL_W"); w != nullptr) {
    s.w_when = std::min(2, std::max(0, std::atoi(w)));
  }
  if (const char* f = std::getenv("FL_LN_PANEL_FORM"); f != nullptr) {
    s.form = std::atoi(f) & kPanelFormBits;
  }
  const char* env = std::getenv("FL_LN_PANEL");
  if (env == nullptr) return s;
  if (std::strcmp(env, "16") == 0) s.step = 16, s.most_bn = 64;
  if (std::sscanf(env, "%dx%d", &s.rows, &s.bn) != 2) s.rows = s.bn = 0;
  if (s.bn % s.step != 0) s.rows = s.bn = 0;
  return s;
}

}  // namespace fl::layernorm_linear
