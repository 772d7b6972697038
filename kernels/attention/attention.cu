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

#include "kernels/attention/attention_check.cuh"
#include "kernels/attention/attention_rows.cuh"
#include "kernels/attention/flash_mma.cuh"
#include "kernels/attention/flash_mma_variants.h"
#include "kernels/attention/flash_wgmma.h"
#include "kernels/attention/reference.h"
#include "kernels/blas.h"
#include "kernels/catalog.h"
#include "kernels/level_table.h"
#include "kernels/workspace.cuh"

namespace fl {

const Lesson& attention_lesson();  // FL_DEFINE_LESSON below

namespace {

using attention::kTokens;
constexpr int kHeads = 12;
constexpr int64_t kMaxLength = 16384;
constexpr int kDefaultDim = 64, kMaxDim = 128;
constexpr int kFirstFlashLevel = 2;  // levels 0 and 1 hold S and P; the flash levels do not
// Scores have unit variance after the scale when q and k are uniform on [-a, a] with
// a^2 / 3 = 1: a = sqrt(3). Softmax rows then are neither flat nor one-hot.
constexpr float kQkBound = 1.7320508f;
constexpr float kVBound = 1.0f;

// What levels 0 and 1 leave free beside S and P (cuBLASLt's workspace, the check's sums).
constexpr int64_t kScoresMargin = int64_t(512) << 20;

int64_t batch_for(int64_t length) {
  return std::max<int64_t>(1, kTokens / std::max<int64_t>(1, length));
}

// ---- the workspace -------------------------------------------------------------------------

template <typename T>
class AttentionWorkspace final : public LevelWorkspace<AttentionWorkspace<T>> {
 public:
  AttentionWorkspace(int64_t heads, int length, int dim, double tolerance)
      : heads_(heads),
        length_(length),
        dim_(dim),
        tolerance_(tolerance),
        n_qkv_(heads * length * dim),
        n_scores_(heads * int64_t(length) * length) {
    this->set_where({length, dim, int64_t(sizeof(T))}, precision(), "tokens per sequence");
  }

  static const LevelTable<AttentionWorkspace>& levels();  // the ladder, below

  // Q, K, V, O always; the T x T tensors S and P only when they fit in what is free, so that a
  // length too long for levels 0 and 1 still runs level 2 (their launches then say why not).
  Status allocate() {
    FL_TRY(allocate_elements<T>({{&q_, n_qkv_}, {&k_, n_qkv_}, {&v_, n_qkv_}, {&o_, n_qkv_}}));
    FL_TRY(sums_.allocate(sizeof(ErrorSums)));
    size_t free_bytes = 0, total = 0;
    FL_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total));
    const int64_t scores_bytes = 2 * n_scores_ * int64_t(sizeof(T));
    const int64_t budget = static_cast<int64_t>(free_bytes) - kScoresMargin;
    if (scores_bytes > budget) {
      // The longest sequence whose S and P would fit, at this run's heads per token.
      const int64_t heads_per_sequence = std::max<int64_t>(1, heads_ / batch_for(length_));
      int64_t fits = length_ - 1;
      while (fits > 0 &&
             2 * batch_for(fits) * heads_per_sequence * fits * fits * int64_t(sizeof(T)) > budget) {
        --fits;
      }
      scores_missing_ = "levels 0 and 1 need " + std::to_string(scores_bytes >> 20) +
                        " MiB for S and P at T = " + std::to_string(length_) + " but " +
                        std::to_string(free_bytes >> 20) + " MiB are free (the longest T " +
                        "that fits is " + std::to_string(fits) +
                        "); the flash level needs none of it (cudaErrorMemoryAllocation, which "
                        "the measurement engine takes as this level not fitting)";
      return Status::Ok();
    }
    return allocate_elements<T>({{&s_, n_scores_}, {&p_, n_scores_}});
  }

  // What each level holds on the device (the peak memory the memory chart and bench show): Q,
  // K, V and O at every level; levels 0 and 1 add S and P (T x T per head) and cuBLASLt's
  // workspace. The buffers' allocated bytes, so a level that could not get S and P says 0.
  int64_t level_device_bytes(int level) const override {
    const int64_t qkvo = int64_t(q_.bytes() + k_.bytes() + v_.bytes() + o_.bytes());
    if (level >= kFirstFlashLevel) return qkvo;
    if (s_.get() == nullptr) return 0;
    return qkvo + int64_t(s_.bytes() + p_.bytes()) + blas::workspace_bytes();
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    FL_TRY(fill_uniform(q_.as<T>(), n_qkv_, mix64(seed + 1), -kQkBound, kQkBound, stream));
    FL_TRY(fill_uniform(k_.as<T>(), n_qkv_, mix64(seed + 2), -kQkBound, kQkBound, stream));
    return fill_uniform(v_.as<T>(), n_qkv_, mix64(seed + 3), -kVBound, kVBound, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    FL_TRY(poison_elements<T>({{&o_, n_qkv_}}, stream));
    if (s_.get() == nullptr) return Status::Ok();
    return poison_elements<T>({{&s_, n_scores_}, {&p_, n_scores_}}, stream);
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    // Every row while the fp64 work stays small (the tests' shapes: the check then measures the
    // same error as the CPU reference); beyond, kCheckedRows rows spread over the tensor.
    const int64_t rows = heads_ * length_;
    const double work = double(rows) * (length_ + 1) / 2 * dim_;  // multiply-adds per sweep
    const int64_t checked = work <= 4e9 ? rows : std::min(rows, attention::kCheckedRows);
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(
        4096, (checked * 32 + attention::kCheckThreads - 1) / attention::kCheckThreads));
    return run_check(
        sums_, tolerance_, stream,
        [&](ErrorSums* sums) {
          attention::attention_check_kernel<T><<<blocks, attention::kCheckThreads, 0, stream>>>(
              q_.as<T>(), k_.as<T>(), v_.as<T>(), o_.as<T>(), heads_, length_, dim_,
              1.0 / std::sqrt(double(dim_)), checked, sums);
        },
        result);
  }

  // Inputs q, k, v and dims = {T, d} (the reference's shape); output o.
  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    FL_TRY(download_io<T>(
        {{"q", q_.as<T>(), n_qkv_}, {"k", k_.as<T>(), n_qkv_}, {"v", v_.as<T>(), n_qkv_}},
        {{"o", o_.as<T>(), n_qkv_}}, stream, inputs, outputs));
    inputs->push_back({"dims", {double(length_), double(dim_)}});
    return Status::Ok();
  }

 private:
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(dim_)); }

  Status need_scores() const {
    return scores_missing_.empty() ? Status::Ok() : Status::Error(scores_missing_);
  }
  // S = Q K^T (alpha = 1: the scale is a kernel of its own or folded into the softmax).
  Status qk_gemm(cudaStream_t stream) {
    FL_TRY(need_scores());
    if (!qk_)
      FL_TRY(
          blas::BatchedGemm::plan(heads_, length_, length_, dim_, true, 1.0f, precision(), &qk_));
    return qk_->run(q_.get(), k_.get(), s_.get(), stream);
  }
  // O = P V, from `p` (level 0's softmax writes into s_'s partner).
  Status pv_gemm(const DeviceBuffer& p, cudaStream_t stream) {
    FL_TRY(need_scores());
    if (!pv_)
      FL_TRY(
          blas::BatchedGemm::plan(heads_, length_, dim_, length_, false, 1.0f, precision(), &pv_));
    return pv_->run(p.get(), v_.get(), o_.get(), stream);
  }
  static Precision precision() {
    return std::is_same<T, float>::value ? Precision::fp32 : Precision::bf16;
  }
  attention::FlashArgs<T> flash_args() const {
    attention::FlashArgs<T> a{q_.as<T>(), k_.as<T>(), v_.as<T>(), o_.as<T>(),
                              length_,    dim_,       scale()};
    a.phases = this->phase_sink();
    return a;
  }
  Status flash_mma(cudaStream_t stream) {
    FL_TRY(attention::launch_flash(flash_args(), heads_, stream));
    this->declare_phases(attention::flash_mma_phases());
    return Status::Ok();
  }
  // Kernels of one precision U (level 2's variants, level 3's); the other says why not.
  template <typename U>
  Status only([[maybe_unused]] attention::FlashLaunch<U> f, [[maybe_unused]] cudaStream_t st) {
    if constexpr (std::is_same<T, U>::value)
      return f(flash_args(), heads_, st);
    else
      return Status::Unsupported(std::is_same<U, float>::value ? "runs in fp32 only"
                                                               : "runs in bf16 only");
  }

  int64_t heads_;  // B H
  int length_, dim_;
  double tolerance_;
  int64_t n_qkv_, n_scores_;
  std::string scores_missing_;
  std::unique_ptr<blas::BatchedGemm> qk_, pv_;
  DeviceBuffer q_, k_, v_, o_, s_, p_, sums_;
};

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
