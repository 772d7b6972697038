// Lesson 8, ffn: y = GELU_tanh(x W1 + b1) W2 + b2, x of tokens x C, W1 of C x 4C, W2 of 4C x C
// (a transformer's whole MLP: widen to H = 4C, activate, project back). This file holds the CPU
// reference and the level table; the workspace is workspace.cuh, level 2's kernels have a file
// each, beside it.
//
// The ladder:
//   level 0, unfused:   five kernels (GEMM, bias, GELU, GEMM, bias): the 4C-wide tensor makes
//                       three round trips through HBM (t = x W1, u = t + b1, h = GELU(u)), then
//                       s = h W2 one;
//   level 1, epilogues: two cuBLASLt GEMMs with fused epilogues (GELU+bias, then bias): h is
//                       written once and read once;
//   level 2, fused:     one kernel of ours on tensor cores. Which one runs is the level table's
//                       choice (its variant rows, below), by token count, precision and GPU;
//                       in the order a reader meets them, each file saying what it changes
//                       against the one before:
//     ffn_split.cu      any GPU: a block owns a slice of the 4C hidden units, keeps its h in
//                       shared memory, adds its share of y in L2; a grid barrier, then y;
//     ffn_cluster.cu    sm_90, up to 64 tokens: clusters of 8 blocks split C and exchange h in
//                       distributed shared memory: 7x fewer shares of y to add;
//     ffn_small.cu      sm_90a bf16, up to 64 tokens: TMA asks for every weight byte at once; h
//                       through L2 after one grid barrier, W2 split by K inside clusters;
//     ffn_wgmma.cu      sm_90a bf16, from 256 tokens: persistent wgmma tiles of both GEMMs, h
//                       through a ring buffer that L2 holds;
//     ffn_tiles.cu      any GPU, from 1K tokens where ffn_wgmma cannot run (fp32, or no sm_90a):
//                       both GEMMs as persistent tiles of the GEMM core (kernels/gemm_core/),
//                       h through L2 row block by row block;
//     ffn_two_phase.cu  sm_80+ bf16, 1-64 tokens (no clusters): h into L2 in column tiles, one
//                       grid barrier, then h W2 in column tiles x parts of K: a few fp32
//                       partial sums a value of y instead of the hidden slice's one a block
//                       (preferred nowhere: it measured slower at 1-16 tokens, level at 64).
// The byte-ratio limit (textbook bytes, level 1 over level 2): both move x, W1, W2 and y; level
// 1 also writes and reads h, 2 x M x 4C x b. At a few tokens the weights dominate (2 x C x 4C x b
// = 9.4 MB in bf16 at C = 768, 3.1 us at 3 TB/s), so the limit is 1.0x at 1 token and 1.3x at
// 64: what level 2 can win there is a launch and the gap between launches. At 16K tokens h is
// 100 MB each way and the limit is 12x, if h stayed on chip (ffn_wgmma.cu says why it does not).
// The level table below has every launch's bytes.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernels/bias_ops.cuh"
#include "kernels/catalog.h"
#include "kernels/ffn/ffn_common.cuh"
#include "kernels/ffn/ffn_hidden_slice.h"
#include "kernels/ffn/ffn_small.h"
#include "kernels/ffn/ffn_stream.h"
#include "kernels/ffn/ffn_tiles.h"
#include "kernels/ffn/ffn_two_phase.h"
#include "kernels/ffn/ffn_wgmma.h"
#include "kernels/ffn/workspace.cuh"
#include "kernels/gemm_common.cuh"
#include "kernels/level_table.h"

namespace fl::ffn {

// ---- level 2's kernels ----------------------------------------------------------------------
// In the table's order: the first that can run and prefers the token count runs, else the last
// that can run (kernels/level_table.h). The split kernel runs everywhere.
template <typename T>
std::vector<VariantRow<FfnWorkspace<T>>> FfnWorkspace<T>::fused_variants() {
  using Ws = FfnWorkspace;
  const std::vector<Precision> bf16{Precision::bf16};
  return {
      {"ffn_small",
       "each block makes 32 hidden units of h into L2 (W1 by TMA), one grid barrier, then "
       "clusters of 8 split W2 and add their partial sums in distributed shared memory",
       "ffn_small_kernel",
       {90, 90, true, bf16, kFfnClusterTokens, 1, kFfnClusterTokens},
       [](Ws& w, cudaStream_t s) { return w.small(s); },
       [](const Dims& d) { return d.i % 32 == 0 ? "" : "C is not a multiple of 32"; },
       ffn_small_phases()},
      {"ffn_cluster",
       "clusters of 8 (or 4) blocks split C, exchange their partial sums of h in distributed "
       "shared memory, and add their shares of y with 16-byte atomics in L2",
       "ffn_cluster_kernel",
       {90, 0, false, bf16, kFfnClusterTokens, 1, kFfnClusterTokens},
       [](Ws& w, cudaStream_t s) { return w.cluster(s); },
       [](const Dims& d) { return d.i <= 1024 ? "" : "C is over 1024 (128 inputs a block)"; },
       ffn_cluster_phases()},
      {"ffn_wgmma",
       "persistent wgmma tiles of both GEMMs, fed by TMA; h goes through an L2-resident ring of "
       "row blocks, read back by the down tiles soon after it is written",
       "ffn_wgmma_kernel",
       {90, 90, true, bf16, 0, kFfnWgmmaFrom, 0},
       [](Ws& w, cudaStream_t s) { return w.wgmma(s); },
       [](const Dims& d) { return d.i % 8 == 0 ? "" : "C is not a multiple of 8"; },
       ffn_wgmma_phases()},
      // Preferred nowhere (kTwoPhaseFrom): it measured slower than the hidden slice at 1-64
      // tokens (ffn_two_phase.cu's header); `--variant ffn_fused=ffn_two_phase` runs it.
      {"ffn_two_phase",
       "phase 1 writes h = GELU(x W1 + b1) into L2 in tiles of its columns, x and W1 through a "
       "deep ring of K chunks; after one grid barrier phase 2 cuts h W2 into column tiles x "
       "parts of K (W2's tile asked for under the barrier's wait), a few fp32 partial sums a "
       "value of y (no clusters, no TMA)",
       "ffn_two_phase_kernel",
       {80, 0, false, bf16, kTwoPhaseMaxTokens, kTwoPhaseFrom, 0, 0, {}, "ffn_two_phase"},
       [](Ws& w, cudaStream_t s) { return w.two_phase(s); },
       [](const Dims& d) { return d.i % 8 == 0 ? "" : "C is not a multiple of 8"; },
       ffn_two_phase_phases()},
      {"ffn_hidden_slice",
       "each block owns a slice of the hidden units for both products and asks for W1's columns "
       "and W2's rows of it at once; the blocks' shares of y (bf16 in bf16) meet in L2 after a "
       "grid barrier (nothing passes between blocks before); the table's choice at 1-16 tokens, "
       "where it measured ahead of ffn_stream, and in bf16 to 64 (the next row); on sm_90 too "
       "in fp32, where the Hopper kernels do not run",
       "ffn_hidden_slice_kernel",
       {70, 0, false, {}, kSliceMaxTokens, 1, kSliceFasterTo, 0, {}, "ffn_hidden_slice"},
       [](Ws& w, cudaStream_t s) { return w.hidden_slice(s); },
       {},
       ffn_slice_phases()},
      // The same kernel in bf16 beyond kSliceFasterTo, where its bf16 shares measured ahead of
      // ffn_stream (fp32's shares are twice the bytes, and its slices stop fitting): a second
      // row for the same name, so that fp32 keeps ffn_stream there.
      {"ffn_hidden_slice",
       "in bf16 at 17-64 tokens too: the same kernel, its bf16 shares of y (tile by tile) half "
       "fp32's bytes through L2",
       "ffn_hidden_slice_kernel",
       {80,
        0,
        false,
        bf16,
        kSliceMaxTokens,
        kSliceFasterTo + 1,
        kSliceBf16FasterTo,
        0,
        {},
        "ffn_hidden_slice"},
       [](Ws& w, cudaStream_t s) { return w.hidden_slice(s); },
       {},
       ffn_slice_phases()},
      {"ffn_stream",
       "each block asks for its weights before any arithmetic (an up slice of W1, a tile of W2), "
       "makes its hidden units of h into L2, and after a barrier of its group's blocks "
       "multiplies the group's h by its W2 tile; the 8 groups' partial sums of a column range "
       "meet in L2 (no grid barrier; the GPUs without clusters)",
       "ffn_stream_kernel",
       {70, 0, false, {}, kFfnStreamMaxTokens, 1, kFfnStreamMaxTokens, 89, {}, "ffn_stream"},
       [](Ws& w, cudaStream_t s) { return w.stream(s); },
       {},
       ffn_stream_phases()},
      {"ffn_tiles",
       "both GEMMs as tiles of the GEMM core in one persistent launch (bf16: 128 x 256 from 8K "
       "tokens, 128 x 128 up and 64 x 128 down tiles below): blocks take tiles in ticket order, "
       "up tiles write h (bias + GELU) row block by row block, down tiles read it back from L2 "
       "once their row block's up tiles are done (any GPU, many tokens)",
       "ffn_tiles_kernel",
       {0, 0, false, {}, 0, kFfnTilesFrom, 0},
       [](Ws& w, cudaStream_t s) { return w.tiles(s); },
       [](const Dims& d) { return d.i % 8 == 0 ? "" : "C is not a multiple of 8"; },
       ffn_tiles_phases()},
      {"ffn_split",
       "each block owns a slice of the 4C hidden units (h in shared memory) and adds its share "
       "of y in L2; a grid barrier, then all blocks write y (any GPU: a cooperative launch)",
       "ffn_fused_kernel",
       {},
       [](Ws& w, cudaStream_t s) { return w.split(s); },
       {},
       ffn_split_phases()},
  };
}

// ---- the level table -----------------------------------------------------------------------
// M = s tokens, C = i, H = 4C hidden units, b bytes per element. The two layers' launches count
// as the Linear layer's formulas say (gemm_common.cuh): a GEMM reads its input and its weights
// and writes its output, 2 M C H flops; a bias kernel reads its bias once; FLOPs per element:
// bias 1, GELU 8. The fused kernel reads x, both weights and both biases once and writes y once.
template <typename T>
const LevelTable<FfnWorkspace<T>>& FfnWorkspace<T>::levels() {
  using Ws = FfnWorkspace;
  static const LinearRows<Ws> up = linear_rows<Ws>(&Ws::up_, kUp);
  static const LinearRows<Ws> down = linear_rows<Ws>(&Ws::down_, kDown);
  static const LevelTable<Ws> table = {
      {"unfused",
       "GEMM, bias, GELU, GEMM, bias: the 4C-wide tensor makes three round trips through HBM",
       "each GEMM's tiles, within its launch; t, u, h and s go to HBM and back",
       {up.gemm, up.add_bias, up.gelu, down.gemm, down.add_bias}},
      {"epilogues",
       "two cuBLASLt GEMMs with fused epilogues: h written once, read once",
       "each GEMM's tiles, and its product, activated or biased in registers before its store; "
       "h goes to HBM and back once",
       {up.epilogue, down.epilogue}},
      {"fused",
       "one tensor-core kernel: below 256 tokens split over the 4C hidden units (each block makes "
       "a slice of h and, with its cluster, a share of y); from 256 tokens both GEMMs' tiles, h "
       "through a ring buffer",
       "each block's slice of h = GELU(x W1 + b1), left in L2 and read back after one barrier "
       "(Hopper) or kept in shared memory, the shares of y meeting in shared memory or L2; or, "
       "from 256 tokens, h's row blocks in a ring buffer, read back by the down tiles soon after "
       "they are written (L2 still writes them back to HBM: see the counters)",
       {{"ffn_fused", nullptr,
         [](const Dims& d) {
           const int64_t tokens = d.s * d.i * d.b, weights = d.i * 4 * d.i * d.b;  // x or y; W
           const double gemm = 2.0 * d.s * d.i * (4 * d.i), hidden = 1.0 * d.s * (4 * d.i);
           return Textbook{tokens + 2 * weights + 4 * d.i * d.b + d.i * d.b, tokens,
                           2 * gemm + kGeluFlops * hidden + hidden + 1.0 * d.s * d.i};
         },
         fused_variants()}}},
  };
  return table;
}

}  // namespace fl::ffn

namespace fl {
namespace {
using ffn::FfnWorkspace;

// ---- the lesson ----------------------------------------------------------------------------

class Ffn final : public GemmLesson<FfnWorkspace> {
 public:
  Ffn()
      : GemmLesson("ffn", "FFN (C -> 4C -> C)",
                   "y = GELU_tanh(x W1 + b1) W2 + b2,  W1: C x 4C,  W2: 4C x C") {}

  // inputs: x (M x C), W1 (C x 4C), b1 (4C), W2 (4C x C), b2 (C).
  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const LinearInputs up(inputs, 1), down(inputs, 3);
    std::vector<double> h(up.n);
    auto row = [&](const double* x, double* y) {  // one row of y from one row of x
      up.row(x, h.data());
      for (double& v : h) v = gelu_tanh_reference(v);
      down.row(h.data(), y);
    };
    return {reference_rows(inputs.at(0).values, up.k, down.n, row)};
  }

 protected:
  // x, s, y (M x C); W1, W2; b1, b2; t, u, h (M x H); the fused level's fp32 accumulator (M x C),
  // counters (40 + 8 bytes) and, at up to 64 tokens, the hidden slices' shares of y (at most 32
  // MiB).
  int64_t buffer_bytes(int64_t m, int64_t c, int64_t b) const override {
    const int64_t h = 4 * c;
    // bf16 on Hopper builds: the wgmma kernel's h ring and counters too.
    const int64_t ring =
        b == 2 && kWgmmaBuild ? ffn_wgmma_ring_rows(m) * h * b + ffn_wgmma_counters(m) * 4 : 0;
    const int64_t tiles = int64_t(ffn_tiles_counter_bytes(m));  // ffn_tiles' counters
    return (3 * m * c + 2 * c * h + h + c + 3 * m * h) * b + m * c * 4 + 48 + ring + tiles +
           (m <= 64 ? std::min<int64_t>((h + 31) / 32 * m * c * 4, int64_t(32) << 20) : 0);
  }
};

}  // namespace

FL_DEFINE_LESSON(ffn, Ffn);

}  // namespace fl
