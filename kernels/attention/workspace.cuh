// The attention lesson's workspace (kernels/attention/attention.cu has the lesson and its level
// table, AttentionWorkspace<T>::levels(), with level 2's and level 3's variant rows): Q, K, V and
// O for B H heads of T x d, the T x T tensors S and P of levels 0 and 1 (only where they fit),
// the check's sums and the batched GEMMs' cuBLASLt plans, made on first use.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_check.cuh"
#include "kernels/attention/flash_mma.cuh"
#include "kernels/blas.h"
#include "kernels/level_table.h"
#include "kernels/workspace.cuh"

namespace fl::attention {

constexpr int kFirstFlashLevel = 2;  // levels 0 and 1 hold S and P; the flash levels do not
// Scores have unit variance after the scale when q and k are uniform on [-a, a] with
// a^2 / 3 = 1: a = sqrt(3). Softmax rows then are neither flat nor one-hot.
constexpr float kQkBound = 1.7320508f;
constexpr float kVBound = 1.0f;

// What levels 0 and 1 leave free beside S and P (cuBLASLt's workspace, the check's sums).
constexpr int64_t kScoresMargin = int64_t(512) << 20;

inline int64_t batch_for(int64_t length) {
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

  static const LevelTable<AttentionWorkspace>& levels();  // the ladder, in attention.cu

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

}  // namespace fl::attention
