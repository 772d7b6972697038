// Lesson 6, layernorm_linear: y = LN(x) W + b, x of tokens x C, W of C x 3C, b of 3C (GPT-2's
// ln_1 followed by the attention block's QKV projection, c_attn). This file holds the CPU
// reference, the level table and the table's dispatch for other lessons
// (kernels/layernorm_linear.h); the workspace is workspace.cuh, level 2's kernels have a file
// each, beside it.
//
// The ladder:
//   level 0, unfused:  three kernels: layernorm writes xn = LN(x) (lesson 4's one-kernel
//                      LayerNorm), a cuBLASLt GEMM writes t = xn W, add_bias writes y = t + b:
//                      xn and t round-trip through HBM;
//   level 1, epilogue: the LayerNorm, then one cuBLASLt GEMM with the bias epilogue: t never
//                      exists;
//   level 2, prologue: one kernel of ours on tensor cores: the rows' mean and 1/std computed on
//                      chip, x normalized in shared memory (the GEMM's prologue), the bias added
//                      as y is stored (the epilogue): xn never exists, one launch instead of
//                      two. Which kernel runs is the level table's choice (its variant rows,
//                      below), by token count, precision and GPU; in the order a reader meets
//                      them, each file saying what it changes against the one before:
//     ln_tile.cu       any GPU, any shape: BM x BN output tiles, K streamed through a cp.async
//                      ring, each x tile normalized as it lands;
//     ln_panel.cu      up to 256 tokens (picked at up to 16 on Hopper): a block owns a column
//                      slice of W and all of K, its x panel normalized once in shared memory;
//     ln_cluster.cu    sm_90 bf16, up to 256 tokens (picked at 17-96): a cluster of blocks
//                      splits K, partial moments and products meet in distributed shared memory;
//     ln_wgmma.cu      sm_90a bf16, picked beyond 96 tokens: a 64-row x panel normalized once,
//                      W streamed past it by TMA into wgmma tiles;
//     ln_mma.cu        any GPU, fp32, picked from 1K tokens: ln_tile's steps on the GEMM core's
//                      fp32 tile (kernels/gemm_core/). Its bf16 form runs, but loses to ln_tile
//                      (ln_mma.cu says why), so the table offers it in fp32 only;
//     ln_mma_tiles.cu  sm_80+ bf16, at 129-2K tokens where ln_wgmma cannot run and no
//                      folded weights exist (other lessons' ln_gemm_bias): the grid normalizes
//                      x once into an L2-resident xn, then the GEMM core's tiles, small enough
//                      to fill every SM, multiply it;
//     ln_mma_folded.cu sm_80+ bf16, picked at 129-4K in this lesson: gamma and beta folded into W
//                      when the weights are set up, the same tiles multiply raw x at once and
//                      apply each row's mean and 1/std in the epilogue (no wait for xn);
//     ln_mma_rows.cu   sm_80+ bf16, picked beyond those where ln_wgmma cannot run: x
//                      normalized once per row block, resident in shared memory, W's column
//                      tiles streamed past it into the GEMM core's mma.sync tile.
// The byte-ratio limit (textbook bytes, level 1 over level 2): level 1 also writes and reads xn
// (2 x M x C x b). At a few tokens W dominates (3.5 MB in bf16 at C = 768, 1.2 us at 3 TB/s): the
// limit is 1.0x and what level 2 can win is a launch, plus how many SMs pull W at once and how
// few steps follow its arrival; at 16K tokens the limit is 2.9x (xn is 25 MB each way), and the
// time is the tensor cores' arithmetic. The level table below has every launch's bytes.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>

#include "kernels/catalog.h"
#include "kernels/gemm_common.cuh"
#include "kernels/layernorm_linear.h"
#include "kernels/level_table.h"
#include "kernels/layernorm_linear/ln_common.cuh"
#include "kernels/layernorm_linear/ln_wgmma.h"
#include "kernels/layernorm_linear/workspace.cuh"

namespace fl::layernorm_linear {
namespace {

template <typename T>
Status launch_ln_wgmma(const LnArgs<T>& a, cudaStream_t stream) {
  bool launched = false;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    int device = 0, sms = 0;
    FL_CUDA_TRY(cudaGetDevice(&device));
    FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    FL_TRY(try_ln_gemm_wgmma(a.x, a.gamma, a.beta, a.w, a.bias, a.y, a.m, a.k, a.n, sms, stream,
                             &launched, a.phases));
  }
  return launched ? Status::Ok() : Status::Unsupported("its tiles do not fit on this GPU");
}

}  // namespace

// ---- level 2's kernels ----------------------------------------------------------------------
// In the table's order: the first that can run and prefers the token count runs, else the last
// that can run (kernels/level_table.h). The tile kernel runs everywhere.
template <typename T>
std::vector<VariantRow<LayerNormLinearWorkspace<T>>> LayerNormLinearWorkspace<T>::fused_variants() {
  using Ws = LayerNormLinearWorkspace;
  const std::vector<Precision> bf16{Precision::bf16};
  return {
      {"ln_cluster",
       "a cluster of 4 (or 8) blocks splits C: partial row moments and partial products meet in "
       "distributed shared memory; W is streamed by every SM at once",
       "ln_gemm_cluster_kernel",
       {90, 0, false, bf16, kLnClusterRows, 17, kLnClusterPick},
       [](Ws& w, cudaStream_t s) { return w.fused(launch_ln_cluster<T>, &ln_cluster_phases(), s); },
       [](const Dims& d) { return d.i % 64 == 0 ? "" : "C is not a multiple of 64"; },
       ln_cluster_phases()},
      {"ln_wgmma",
       "a 64-row panel of x normalized once in shared memory, W streamed past it by TMA into "
       "wgmma tiles (128 columns below 4K tokens, 256 from there)",
       "ln_gemm_wgmma_kernel",
       {90, 90, true, bf16, 0, kLnClusterPick + 1, 0},
       [](Ws& w, cudaStream_t s) {
         return w.fused(launch_ln_wgmma<T>, &ln_gemm_wgmma_phases(), s);
       },
       [](const Dims& d) {
         return d.i % 8 == 0 && d.i <= 768 ? "" : "C is not a multiple of 8 up to 768";
       },
       ln_gemm_wgmma_phases()},
      {"ln_mma_folded",
       "LayerNorm moved to the epilogue: gamma and beta folded into W when the weights are set "
       "up, the GEMM core's tiles multiply raw x at once, sum each row's moments from the x "
       "tiles they load, and apply its mean and 1/std to the product (bf16, sm_80+)",
       "ln_mma_folded_kernel",
       {80, 0, false, bf16, 0, layernorm_linear::kLnFoldedPreferFrom,
        layernorm_linear::kLnFoldedPreferTo},
       [](Ws& w, cudaStream_t s) { return w.fused(launch_ln_mma_folded<T>, nullptr, s); },
       [](const Dims& d) {
         return d.i % 8 == 0 && d.i <= 1024 ? "" : "C is not a multiple of 8 up to 1024";
       }},
      {"ln_mma_tiles",
       "the grid normalizes x once into an xn that stays in L2, then the GEMM core's mma.sync "
       "tiles (64 x 128, 8 warps each while they fit one block an SM) fill every SM (bf16, "
       "sm_80+)",
       "ln_mma_tiles_kernel",
       {80, 0, false, bf16, 0, layernorm_linear::kLnTilesPreferFrom,
        layernorm_linear::kLnTilesPreferTo},
       [](Ws& w, cudaStream_t s) { return w.fused(launch_ln_mma_tiles<T>, &ln_tiles_phases(), s); },
       [](const Dims& d) {
         return d.i % 8 == 0 && d.i <= 1024 ? "" : "C is not a multiple of 8 up to 1024";
       },
       ln_tiles_phases()},
      {"ln_panel",
       "a block owns a slice of W's columns and the whole of C: its 64-row x panel is normalized "
       "in shared memory, no split of K, no exchange between blocks",
       "ln_gemm_panel_kernel",
       {0, 0, false, {}, kLnClusterRows, 1, kLnClusterRows},
       [](Ws& w, cudaStream_t s) { return w.fused(launch_ln_panel<T>, &ln_panel_phases(), s); },
       panel_shape_check,
       ln_panel_phases()},
      {"ln_stream",
       "token chunks x column slices, one block each, sized to fill every SM once; a block asks "
       "for its rows of x and its columns of W at once and normalizes while W arrives (up to 256 "
       "tokens where the panel kernel does not fit and, on Hopper, no cluster or wgmma kernel "
       "runs: fp32)",
       "ln_stream_kernel",
       {70, 0, false, {}, kLnStreamMaxTokens, 1, kLnStreamMaxTokens},
       [](Ws& w, cudaStream_t s) { return w.stream(s); }},
      {"ln_mma_rows",
       "a block keeps its rows of x, normalized once, in shared memory and streams W's column "
       "tiles past them through a cp.async ring into mma.sync (bf16, many tokens, sm_80+)",
       "ln_mma_rows_kernel",
       {80, 0, false, bf16, 0, layernorm_linear::kLnRowsFrom, 0},
       [](Ws& w, cudaStream_t s) { return w.fused(launch_ln_mma_rows<T>, &ln_rows_phases(), s); },
       [](const Dims& d) { return d.i % 8 == 0 ? "" : "C is not a multiple of 8"; },
       ln_rows_phases()},
      {"ln_mma",
       "ln_tile's steps on the GEMM core's fp32 tile (kernels/gemm_core/sgemm_tile.cuh): 8 x 8 "
       "register blocks a thread, 16-byte loads, warp tiles; each x tile normalized as it "
       "lands (any GPU, many tokens, fp32)",
       "ln_gemm_mma_kernel",
       {0, 0, false, {Precision::fp32}, 0, kLnMmaFrom, 0},
       [](Ws& w, cudaStream_t s) { return w.fused(launch_ln_mma<T>, nullptr, s); },
       [](const Dims& d) { return d.i % 8 == 0 ? "" : "C is not a multiple of 8"; }},
      {"ln_tile",
       "BM x BN output tiles, K streamed through a cp.async ring; each x tile normalized as it "
       "lands (any GPU, any shape)",
       "ln_gemm_bias_kernel",
       {},
       [](Ws& w, cudaStream_t s) { return w.fused(launch_ln_tile<T>, &ln_tile_phases(), s); },
       {},
       ln_tile_phases()},
  };
}

// ---- the level table -----------------------------------------------------------------------
// M = s tokens, K = i = C, N = 3C, b bytes per element. LayerNorm reads x (M K) and gamma, beta
// (2 K) and writes M K, 8 flops per element; the Linear layer's launches count as its formulas
// say (gemm_common.cuh): the GEMM reads xn (M K) and W (K N) and writes M N, 2 M N K flops; the
// bias is read once (N), 1 flop per element of the product.
template <typename T>
const LevelTable<LayerNormLinearWorkspace<T>>& LayerNormLinearWorkspace<T>::levels() {
  using Ws = LayerNormLinearWorkspace;
  // Levels 0 and 1 start with the same LayerNorm.
  static const LaunchRow<Ws> layernorm = {
      "layernorm", [](Ws& w, cudaStream_t s) { return w.layernorm(s); },
      [](const Dims& d) {
        return Textbook{d.tensor_bytes() + 2 * d.i * d.b, d.tensor_bytes(), 8.0 * d.elements()};
      }};
  static const LinearRows<Ws> linear = linear_rows<Ws>(&Ws::linear_, kLinear);
  static const LevelTable<Ws> table = {
      {"unfused",
       "LayerNorm, cuBLASLt GEMM and bias as three kernels: xn and the product round-trip "
       "through HBM",
       "the LayerNorm's rows and the GEMM's tiles, each within its launch; xn and t go to HBM "
       "and back",
       {layernorm, linear.gemm, linear.add_bias}},
      {"epilogue",
       "LayerNorm, then one cuBLASLt GEMM with a bias epilogue",
       "the GEMM's tiles, and the product, biased in registers before its store; xn goes to "
       "HBM and back",
       {layernorm, linear.epilogue}},
      {"prologue",
       "one kernel on tensor cores: row statistics and LayerNorm in the GEMM's prologue, bias in "
       "its epilogue; xn never exists",
       "the rows' mean and 1/std, gamma and beta, and each x tile, normalized in shared memory "
       "as it lands",
       {{"ln_gemm_bias", nullptr,
         // The statistics re-read x from L2: not counted. What the epilogue level's GEMM
         // counts, plus gamma and beta (2 K) and the LayerNorm's flops.
         [](const Dims& d) {
           Textbook t = gemm_epilogue_textbook(d, kLinear);
           t.read += 2 * d.i * d.b;
           t.flops += 8.0 * d.s * d.i;
           return t;
         },
         fused_variants()}}},
  };
  return table;
}

}  // namespace fl::layernorm_linear

namespace fl {
namespace {
using layernorm_linear::launch_ln_cluster;
using layernorm_linear::launch_ln_mma;
using layernorm_linear::launch_ln_mma_rows;
using layernorm_linear::launch_ln_mma_tiles;
using layernorm_linear::launch_ln_panel;
using layernorm_linear::launch_ln_tile;
using layernorm_linear::launch_ln_wgmma;
using layernorm_linear::LayerNormLinearWorkspace;
using layernorm_linear::LnArgs;

// ---- the lesson ----------------------------------------------------------------------------

class LayerNormLinear final : public GemmLesson<LayerNormLinearWorkspace> {
 public:
  LayerNormLinear()
      : GemmLesson("layernorm_linear", "LayerNorm + Linear",
                   "y = LN(x) W + b,  x: tokens x C,  W: C x 3C,  b: 3C") {}

  // inputs: x (M x C), gamma (C), beta (C), W (C x 3C), b (3C).
  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const auto& gamma = inputs.at(1).values;
    const auto& beta = inputs.at(2).values;
    const LinearInputs linear(inputs, 3);
    const int64_t k = linear.k;
    std::vector<double> xn(k);
    auto row = [&](const double* x, double* y) {  // one row of y from one row of x
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += x[j];
      const double mean = sum / double(k);
      double sq = 0;
      for (int64_t j = 0; j < k; ++j) sq += (x[j] - mean) * (x[j] - mean);
      const double rstd = 1.0 / std::sqrt(sq / double(k) + gemm::kLayerNormEps);
      for (int64_t j = 0; j < k; ++j) xn[j] = (x[j] - mean) * rstd * gamma[j] + beta[j];
      linear.row(xn.data(), y);
    };
    return {reference_rows(inputs.at(0).values, k, linear.n, row)};
  }

 protected:
  // x and xn (M x C), gamma and beta (C), W (C x 3C), b (3C), t, y (M x 3C), ln_mma_tiles'
  // counters.
  int64_t buffer_bytes(int64_t m, int64_t c, int64_t b) const override {
    const int64_t n = 3 * c;
    // bf16: ln_mma_folded's W' (C x 3C) and its u and b' (3C fp32 each).
    const int64_t folded = b == 2 ? c * n * b + 2 * n * 4 : 0;
    return (2 * m * c + 2 * c + c * n + n + 2 * m * n) * b +
           int64_t(layernorm_linear::ln_mma_tiles_counter_bytes(m, n)) + folded;
  }
};

// Level 2's launch outside the workspace (other lessons reuse the fused LayerNorm-Linear): the
// level table's choice of kernel for these operands, the next one where a kernel finds it
// cannot run here.
template <typename T>
Status launch_ln_gemm_bias(const T* x, const T* gamma, const T* beta, const T* w, const T* bias,
                           T* y, int64_t m, int k, int n, cudaStream_t stream) {
  using Ws = LayerNormLinearWorkspace<T>;
  const LaunchRow<Ws>& row = Ws::levels().back().launches.at(0);
  const LnArgs<T> a{x, gamma, beta, w, bias, y, m, k, n, PhaseSink()};
  const Where where{{m, k, int64_t(sizeof(T))}, precision_of<T>(), current_gpu_facts()};
  const std::vector<VariantInfo> infos = variant_infos(row);
  std::vector<bool> skip(infos.size(), false);
  for (size_t tries = 0; tries < infos.size(); ++tries) {
    const VariantChoice c = choose_variant(infos, where, variant_checks(row), "tokens", skip);
    if (c.index < 0) break;
    const Status st = c.name == "ln_cluster"     ? launch_ln_cluster(a, stream)
                      : c.name == "ln_wgmma"     ? launch_ln_wgmma(a, stream)
                      : c.name == "ln_panel"     ? launch_ln_panel(a, stream)
                      : c.name == "ln_mma_tiles" ? launch_ln_mma_tiles(a, stream)
                      : c.name == "ln_mma_folded"
                          ? Status::Unsupported("no folded weights outside the lesson")
                      : c.name == "ln_mma_rows" ? launch_ln_mma_rows(a, stream)
                      : c.name == "ln_mma"      ? launch_ln_mma(a, stream)
                                                : launch_ln_tile(a, stream);
    if (!st.unsupported()) return st.with_context(c.name);
    skip[c.index] = true;
  }
  return Status::Error("ln_gemm_bias: no kernel variant can run here");
}

}  // namespace

FL_DEFINE_LESSON(layernorm_linear, LayerNormLinear);

}  // namespace fl

namespace fl::layernorm_linear {

Status ln_gemm_bias(const float* x, const float* gamma, const float* beta, const float* w,
                    const float* bias, float* y, int64_t m, int k, int n, cudaStream_t stream) {
  return launch_ln_gemm_bias(x, gamma, beta, w, bias, y, m, k, n, stream);
}
Status ln_gemm_bias(const __nv_bfloat16* x, const __nv_bfloat16* gamma, const __nv_bfloat16* beta,
                    const __nv_bfloat16* w, const __nv_bfloat16* bias, __nv_bfloat16* y, int64_t m,
                    int k, int n, cudaStream_t stream) {
  return launch_ln_gemm_bias(x, gamma, beta, w, bias, y, m, k, n, stream);
}

}  // namespace fl::layernorm_linear
