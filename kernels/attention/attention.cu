// Lesson 9, attention: the causal multi-head attention core O = softmax(mask(s Q K^T)) V.
//
// Q, K, V and O are B x H x T x d (SDPA's layout: each head a T x d matrix), s = 1/sqrt(d), and
// query q sees keys 0..q. The size axis is the sequence length T; the batch follows it so that
// a run holds about 16,384 tokens: B = floor(16384 / T) (every power of two divides, so the
// bench grid runs exactly 16,384 tokens). H = 12 heads; the head size d is the row length (64
// by default, 128 for the larger models, any d up to 128 in the tests).
//
// The ladder (each rung adds one idea):
//   level 0, eager:   S = Q K^T (cuBLASLt batched GEMM), scale, causal mask, softmax, O = P V;
//                     S and its successors are T x T per head, written to HBM and read back.
//   level 1, fused softmax: the two GEMMs with lesson 5's fusion between them (scale, mask and
//                     softmax in one pass): S and P still round-trip through HBM, once each.
//   level 2, flash:   one kernel; Q, K, V tiles in shared memory, S and P in registers, online
//                     softmax, causal tiles skipped (flash_mma.cuh). No T x T tensor exists.
//   level 3, Hopper flash: the same algorithm with the work split by role (flash_wgmma.cu): a
//                     producer warp keeps a TMA ring of K/V tiles full, consumer warpgroups
//                     multiply with wgmma, one tile's softmax runs under the next one's products.
//                     On other GPUs (and for fp32, or d other than 64, 128): level 2's kernel.
//
// Napkin at T = 4096, bf16, d = 64 (B = 4, H = 12): Q, K, V, O are 6 MiB each, one T x T tensor
// (B H T^2 b) 1.5 GiB. Level 0 moves ~11 GiB (S written, read and written by scale and mask, read
// by the softmax, P written and read), level 1 ~6 GiB, level 2 24 MiB: ~4 ms, ~2 ms and 8 us at
// ~3 TB/s, while the causal 52 GFLOP take ~0.1 ms at ~500 TFLOP/s: they pay for T^2 traffic.
//
// The byte and FLOP formulas of the level table count 16,384 tokens (B H T^2 = 16384 H T): exact
// on the bench grid, an over-count when T does not divide 16,384 (then B T < 16,384).
#include "kernels/attention/attention.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/attention/attention_rows.cuh"
#include "kernels/attention/flash_mma.cuh"
#include "kernels/attention/flash_mma_variants.h"
#include "kernels/attention/flash_wgmma.h"
#include "kernels/attention/reference.h"
#include "kernels/attention/workspace.cuh"
#include "kernels/catalog.h"
#include "kernels/level_table.h"

namespace fl {

const Lesson& attention_lesson();  // FL_DEFINE_LESSON below

namespace {

constexpr int kHeads = 12;
constexpr int64_t kMaxLength = 16384;
constexpr int kDefaultDim = 64, kMaxDim = 128;

}  // namespace

namespace attention {
namespace {

// ---- the level table -----------------------------------------------------------------------
// Dims: s = T, i = d, b bytes. One of Q, K, V, O is 16384 H d b bytes; one T x T tensor is
// B H T^2 b = 16384 H T b. A GEMM over the full square does 2 B H T^2 d = 2 (16384 H) T d FLOPs;
// the flash kernel computes the causal half of both GEMMs, the same 2 B H T^2 d in all.
int64_t qkv_bytes(const Dims& x) {
  return kTokens * kHeads * x.i * x.b;
}
int64_t score_bytes(const Dims& x) {
  return kTokens * kHeads * x.s * x.b;
}
double gemm_flops(const Dims& x) {
  return 2.0 * kTokens * kHeads * x.s * x.i;
}
double score_elements(const Dims& x) {
  return 1.0 * kTokens * kHeads * x.s;
}
// Both flash levels: Q, K, V read and O written once; the causal half of both products.
Textbook flash_textbook(const Dims& x) {
  return {3 * qkv_bytes(x), qkv_bytes(x), gemm_flops(x)};
}

}  // namespace

template <typename T>
const LevelTable<AttentionWorkspace<T>>& AttentionWorkspace<T>::levels() {
  using Ws = AttentionWorkspace;
  static const LaunchRow<Ws> qk = {
      "qk_gemm", [](Ws& w, cudaStream_t st) { return w.qk_gemm(st); },
      [](const Dims& x) {
        return Textbook{2 * qkv_bytes(x), score_bytes(x), gemm_flops(x)};
      }};
  static const LaunchRow<Ws> pv = {
      "pv_gemm", [](Ws& w, cudaStream_t st) { return w.pv_gemm(w.p_, st); },
      [](const Dims& x) {
        return Textbook{score_bytes(x) + qkv_bytes(x), qkv_bytes(x), gemm_flops(x)};
      }};
  auto pass = [](double flops_per_score) {  // one read and one write of a T x T tensor
    return [flops_per_score](const Dims& x) {
      return Textbook{score_bytes(x), score_bytes(x), flops_per_score * score_elements(x)};
    };
  };
  // Level 2's kernels in the table's order. Level 3 runs them where its Hopper kernel cannot
  // (fp32, other GPUs, a build without sm_90a), so the top level is never slower than level 2.
  static const std::vector<VariantRow<Ws>> portable = {
      {"flash_fp32_tiles",
       "fp32: a thread owns 8 x 4 of S and of O, read by 16-byte loads (half as many)",
       "flash_fp32_tiles_kernel",
       {90, 0, false, {Precision::fp32}, 0, 1, 0},
       [](Ws& w, cudaStream_t st) { return w.only(attention::launch_flash_fp32_tiles, st); },
       [](const Dims& x) { return attention::flash_fp32_tiles_shape_check(x.i); },
       attention::flash_mma_phases()},
      {"flash_mma_keys128",
       "K/V tiles of 128 keys (FlashAttention-2's at d = 64): half the barriers and "
       "online-softmax passes, Q re-read from shared memory to make room",
       "flash_attention_keys128_kernel",
       {90, 0, false, {Precision::bf16}, 0, 1024, 0},
       [](Ws& w, cudaStream_t st) { return w.only(attention::launch_flash_keys128, st); },
       [](const Dims& x) { return attention::flash_keys128_shape_check(x.i); },
       attention::flash_mma_phases()},
      {"flash_mma",
       "4 warps of 32 query rows, K/V tiles of 64 keys double-buffered by cp.async, Q held "
       "in registers where it fits, O out through shared memory",
       "flash_attention_kernel",
       {},
       [](Ws& w, cudaStream_t st) { return w.flash_mma(st); },
       {},
       attention::flash_mma_phases()}};
  // The Hopper kernel is preferred from T = 2K at d = 64: below that its fixed costs a block (the
  // TMA prologue, the store) outweigh what wgmma saves, and level 2's kernels finish first. At
  // d = 128 level 2 has no kernel of its strength (half the rows a block, twice the registers for
  // O): the Hopper kernel is preferred from T = 512 (docs/PERFORMANCE.md, lesson 9).
  static const std::vector<VariantRow<Ws>> hopper = [] {
    std::vector<VariantRow<Ws>> rows = {
        {"flash_wgmma",
         "TMA and a producer warp feed consumer warpgroups multiplying with wgmma; each tile's "
         "softmax runs under the previous tile's P V, the warpgroups take turns at the tensor "
         "cores, and blocks run by groups of heads whose K and V stay in L2",
         "flash_wgmma_kernel",
         {90, 90, true, {Precision::bf16}, 0, 2048, 0, 0, {{128, 512, 0}}},
         [](Ws& w, cudaStream_t st) { return w.only(attention::launch_flash_wgmma, st); },
         [](const Dims& x) { return attention::flash_wgmma_shape_check(x.i); },
         attention::flash_wgmma_phases()}};
    rows.insert(rows.end(), portable.begin(), portable.end());
    return rows;
  }();
  static const LevelTable<Ws> table = {
      {"eager",
       "what PyTorch eager runs: a batched GEMM for S, then scale, causal mask and softmax "
       "each "
       "a pass over the T x T scores in HBM, then a batched GEMM for O",
       "only within a launch: S, the scaled and masked S, and P are T x T per head, in HBM",
       {qk,
        {"scale",
         [](Ws& w, cudaStream_t st) {
           FL_TRY(w.need_scores());
           return attention::launch_scale(w.s_.template as<T>(), w.p_.template as<T>(), w.n_scores_,
                                          w.scale(), st);
         },
         pass(1)},
        {"causal_mask",
         [](Ws& w, cudaStream_t st) {
           FL_TRY(w.need_scores());
           return attention::launch_causal_mask(w.p_.template as<T>(), w.s_.template as<T>(),
                                                w.heads_ * w.length_, w.length_, st);
         },
         pass(0)},
        {"softmax",
         [](Ws& w, cudaStream_t st) {
           FL_TRY(w.need_scores());
           return attention::launch_softmax_rows<T, false>(
               w.s_.template as<T>(), w.p_.template as<T>(), w.heads_ * w.length_, w.length_,
               w.scale(), st);
         },
         pass(4)},
        pv}},
      {"fused softmax",
       "the two GEMMs with lesson 5's fusion between them: scale, mask and softmax read S once "
       "and write P once",
       "the scale and the mask, applied to S as it is read: S and P still cross HBM once each",
       {qk,
        {"scale_mask_softmax",
         [](Ws& w, cudaStream_t st) {
           FL_TRY(w.need_scores());
           return attention::launch_softmax_rows<T, true>(
               w.s_.template as<T>(), w.p_.template as<T>(), w.heads_ * w.length_, w.length_,
               w.scale(), st);
         },
         pass(5)},
        pv}},
      {"flash",
       "one kernel: K and V stream through shared memory in tiles, each tile's scores stay in "
       "registers, an online softmax rescales the running output, causal tiles are skipped",
       "S and P (a 128 x 64 tile a block at a time, in registers), the running max and sum, "
       "and O until it is final: no T x T tensor ever reaches HBM",
       {{"flash_attention", nullptr, flash_textbook, portable}}},
      {"Hopper flash",
       "the flash algorithm split by role: a producer warp keeps a TMA ring of K and V tiles "
       "full, consumer warpgroups multiply with wgmma, and one tile's softmax runs while the "
       "tensor cores do the previous tile's P V (on other GPUs: level 2's kernel)",
       "as level 2 (S and P a 64 x 128 tile a warpgroup, in registers; O until it is final), "
       "with K and V in a shared-memory ring that no consumer thread copies into",
       {{"flash_attention", nullptr, flash_textbook, hopper}}},
  };
  return table;
}

}  // namespace attention

namespace {
using attention::AttentionWorkspace;
using attention::batch_for;

// ---- the lesson ----------------------------------------------------------------------------

class Attention final : public LevelLesson<AttentionWorkspace<float>> {
 public:
  Attention()
      : LevelLesson(
            "attention", "Causal attention",
            "O = softmax(mask(Q K^T / sqrt(d))) V  per head, key j <= query q",
            {"tokens per sequence", 1, kMaxLength, 1024, "head size d", kDefaultDim, kMaxDim}) {}

  // What every level needs: Q, K, V, O. Levels 0 and 1 also need S and P, 2 B H T^2 b more,
  // which the workspace allocates only where they fit (else those levels say why and the flash
  // level still runs), so a length is refused as a whole only when Q, K, V, O do not fit.
  int64_t workspace_bytes(Shape shape, Precision p) const override {
    shape = resolve(shape);
    const int64_t b = bytes_per_element(p);
    const int64_t heads = batch_for(shape.size) * kHeads;
    return 4 * heads * shape.size * shape.inner * b + int64_t(sizeof(ErrorSums));
  }

  Status create_workspace(Shape shape, Precision p,
                          std::unique_ptr<Workspace>* out) const override {
    shape = resolve(shape);
    if (shape.size < 1 || shape.size > kMaxLength) {
      return Status::Error("attention takes a sequence length T from 1 to " +
                           std::to_string(kMaxLength) + "; got " + std::to_string(shape.size));
    }
    return attention::make_workspace(batch_for(shape.size), kHeads, static_cast<int>(shape.size),
                                     static_cast<int>(shape.inner), p, out);
  }

  // Inputs as download() returns them: q, k, v (heads x T x d) and dims {T, d}. Output: o.
  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const int64_t length = static_cast<int64_t>(inputs.at(3).values.at(0));
    const int64_t dim = static_cast<int64_t>(inputs.at(3).values.at(1));
    return {{"o", attention::causal_attention_reference(inputs.at(0).values, inputs.at(1).values,
                                                        inputs.at(2).values, length, dim)}};
  }

  // fp32: cuBLASLt's fp32 GEMMs and the flash kernel's FMA are fp32 throughout; exp2.approx
  // adds a few ulp. bf16: S (levels 0, 1), P and O are each rounded to 8 significant bits.
  double tolerance(Precision p) const override { return p == Precision::fp32 ? 2e-5 : 1e-2; }
};

}  // namespace

namespace attention {

Status make_workspace(int64_t batch, int heads, int length, int dim, Precision p,
                      std::unique_ptr<Workspace>* out) {
  if (batch < 1 || heads < 1 || length < 1 || dim < 1 || dim > kMaxDim) {
    return Status::Error("attention takes B, H, T >= 1 and a head size d from 1 to " +
                         std::to_string(kMaxDim) + "; got B = " + std::to_string(batch) +
                         ", H = " + std::to_string(heads) + ", T = " + std::to_string(length) +
                         ", d = " + std::to_string(dim));
  }
  return fl::make_workspace<AttentionWorkspace>(p, out, batch * heads, length, dim,
                                                attention_lesson().tolerance(p));
}

}  // namespace attention

FL_DEFINE_LESSON(attention, Attention);

}  // namespace fl
