// The attention sublayer's workspace (kernels/attention_residual_layernorm/sublayer.cu has the
// lesson and its level table, SublayerWorkspace<T>::levels()): the inputs (x, both LayerNorms'
// gamma and beta, both Linear layers), every intermediate a level writes (xn, the QKV product t
// and qkv, the split heads q, k, v, O, the scores S and P, the merged heads a, the projection r),
// the outputs h and y, and the cuBLASLt plans, made once when the buffers are allocated.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/attention/flash_mma.cuh"
#include "kernels/attention/flash_mma_variants.h"
#include "kernels/attention_residual_layernorm/heads.cuh"
#include "kernels/attention_residual_layernorm/reference.h"
#include "kernels/attention_residual_layernorm/sublayer.h"
#include "kernels/bias_ops.cuh"
#include "kernels/blas.h"
#include "kernels/gemm_common.cuh"
#include "kernels/layernorm_rows.cuh"
#include "kernels/level_table.h"
#include "kernels/workspace.cuh"

namespace fl::sublayer {

constexpr float kXLo = -1.0f, kXHi = 3.0f;  // a residual stream a little off-centre
// The engine's check recomputes this many leading tokens of the first and the last sequence in
// fp64 on the host (causal: they depend on no later token): past two K/V tiles and one query
// tile of the flash kernel. The tests compare every token with the CPU reference.
constexpr int kCheckedLength = 160;

template <typename T>
class SublayerWorkspace final : public LevelWorkspace<SublayerWorkspace<T>> {
 public:
  SublayerWorkspace(int64_t batch, int length, int64_t c, double tolerance)
      : batch_(batch),
        c_(c),
        m_(batch * length),
        n_scores_(batch * kHeads * int64_t(length) * length),
        tolerance_(tolerance),
        layout_{batch * length, length, kHeads, static_cast<int>(c / kHeads)} {
    // The flash step's variants read it (the head size d = C / 12 decides flash_fp32_tiles).
    this->set_where({length, c, int64_t(sizeof(T))}, precision_of<T>(), "tokens per sequence");
  }

  static const LevelTable<SublayerWorkspace>& levels();  // the ladder, below

  Status allocate() {
    const int64_t mc = m_ * c_;
    FL_TRY(allocate_elements<T>({{&x_, mc},         {&ln1_g_, c_},
                                 {&ln1_b_, c_},     {&w_qkv_, 3 * c_ * c_},
                                 {&b_qkv_, 3 * c_}, {&w_proj_, c_ * c_},
                                 {&b_proj_, c_},    {&ln2_g_, c_},
                                 {&ln2_b_, c_},     {&xn_, mc},
                                 {&t_, 3 * mc},     {&qkv_, 3 * mc},
                                 {&q_, mc},         {&k_, mc},
                                 {&v_, mc},         {&o_, mc},
                                 {&s_, n_scores_},  {&p_, n_scores_},
                                 {&a_, mc},         {&r_, mc},
                                 {&h_, mc},         {&y_, mc}}));
    const Precision p = precision_of<T>();
    const int64_t t = layout_.length, d = layout_.dim, heads = batch_ * kHeads;
    FL_TRY(blas::Gemm::plan(m_, 3 * c_, c_, p, blas::Epilogue::none, &qkv_gemm_));
    FL_TRY(blas::Gemm::plan(m_, 3 * c_, c_, p, blas::Epilogue::bias, &qkv_gemm_bias_));
    FL_TRY(blas::Gemm::plan(m_, c_, c_, p, blas::Epilogue::none, &proj_gemm_));
    FL_TRY(blas::Gemm::plan(m_, c_, c_, p, blas::Epilogue::bias, &proj_gemm_bias_));
    FL_TRY(blas::BatchedGemm::plan(heads, t, t, d, true, 1.0f, p, &qk_gemm_));
    return blas::BatchedGemm::plan(heads, t, d, t, false, 1.0f, p, &pv_gemm_);
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    FL_TRY(fill_uniform(x_.as<T>(), m_ * c_, seed, kXLo, kXHi, stream));
    int salt = 0;
    for (DeviceBuffer* gamma : {&ln1_g_, &ln2_g_}) {
      FL_TRY(fill_uniform(gamma->as<T>(), c_, mix64(seed ^ (0x6A77ull + ++salt)), gemm::kGammaLo,
                          gemm::kGammaHi, stream));
    }
    for (DeviceBuffer* beta : {&ln1_b_, &ln2_b_}) {
      FL_TRY(fill_uniform(beta->as<T>(), c_, mix64(seed ^ (0xBE7Aull + ++salt)), gemm::kBetaLo,
                          gemm::kBetaHi, stream));
    }
    FL_TRY(gemm::fill_linear(w_qkv_.as<T>(), b_qkv_.as<T>(), c_, 3 * c_, seed, 0, stream));
    return gemm::fill_linear(w_proj_.as<T>(), b_proj_.as<T>(), c_, c_, seed, 1, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    const int64_t mc = m_ * c_;
    return poison_elements<T>({{&xn_, mc},
                               {&t_, 3 * mc},
                               {&qkv_, 3 * mc},
                               {&q_, mc},
                               {&k_, mc},
                               {&v_, mc},
                               {&o_, mc},
                               {&s_, n_scores_},
                               {&p_, n_scores_},
                               {&a_, mc},
                               {&r_, mc},
                               {&h_, mc},
                               {&y_, mc}},
                              stream);
  }

  // The first kCheckedLength tokens of the first and the last sequence, recomputed on the host
  // in fp64 (sublayer::reference) from the stored inputs, h and y compared.
  Status check(cudaStream_t stream, CheckResult* result) override {
    std::vector<HostTensor> params;
    FL_TRY(download_tensors<T>(parameters(), stream, &params));
    const int64_t rows = std::min<int64_t>(layout_.length, kCheckedLength);
    ErrorSums sums{};
    double max_abs = 0;
    std::vector<int64_t> sequences = {0};
    if (batch_ > 1) sequences.push_back(batch_ - 1);
    for (int64_t seq : sequences) {
      const int64_t first = seq * layout_.length * c_, n = rows * c_;
      std::vector<HostTensor> in, out;
      FL_TRY(download_tensors<T>({{"x", x_.as<T>() + first, n}}, stream, &in));
      in.insert(in.end(), params.begin(), params.end());
      in.push_back({"dims", {double(rows), double(kHeads)}});
      FL_TRY(download_tensors<T>({{"h", h_.as<T>() + first, n}, {"y", y_.as<T>() + first, n}},
                                 stream, &out));
      const std::vector<HostTensor> ref = sublayer::reference(in);
      for (size_t t = 0; t < ref.size(); ++t) {
        for (int64_t i = 0; i < n; ++i) {
          const double got = out[t].values[i], want = ref[t].values[i];
          if (!std::isfinite(got)) {
            ++sums.non_finite;
            continue;
          }
          sums.err2 += (got - want) * (got - want);
          sums.ref2 += want * want;
          max_abs = std::max(max_abs, std::abs(got - want));
          ++sums.count;
        }
      }
    }
    std::memcpy(&sums.max_abs_bits, &max_abs, sizeof(max_abs));
    *result = finish_check(sums, tolerance_);
    return Status::Ok();
  }

  // Inputs x, ln1 gamma, beta, W_qkv, b_qkv, W_proj, b_proj, ln2 gamma, beta and dims {T, H}
  // (the reference's order); outputs h and y.
  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    std::vector<DeviceTensor<T>> in = {{"x", x_.as<T>(), m_ * c_}};
    for (const DeviceTensor<T>& p : parameters()) in.push_back(p);
    FL_TRY(download_io<T>(in, {{"h", h_.as<T>(), m_ * c_}, {"y", y_.as<T>(), m_ * c_}}, stream,
                          inputs, outputs));
    inputs->push_back({"dims", {double(layout_.length), double(kHeads)}});
    return Status::Ok();
  }

 private:
  std::vector<DeviceTensor<T>> parameters() const {
    return {{"ln1_gamma", ln1_g_.as<T>(), c_},      {"ln1_beta", ln1_b_.as<T>(), c_},
            {"W_qkv", w_qkv_.as<T>(), 3 * c_ * c_}, {"b_qkv", b_qkv_.as<T>(), 3 * c_},
            {"W_proj", w_proj_.as<T>(), c_ * c_},   {"b_proj", b_proj_.as<T>(), c_},
            {"ln2_gamma", ln2_g_.as<T>(), c_},      {"ln2_beta", ln2_b_.as<T>(), c_}};
  }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(layout_.dim)); }
  int64_t score_rows() const { return batch_ * kHeads * layout_.length; }

  // Lesson 4's row kernels: a LayerNorm of `in` into `out`, or h = x + r and y = LN2(h) fused.
  Status layernorm(const DeviceBuffer& in, const DeviceBuffer& gamma, const DeviceBuffer& beta,
                   DeviceBuffer& out, cudaStream_t stream) {
    const layernorm_rows::RowArgs<T> a{
        nullptr,     nullptr, gamma.as<T>(), beta.as<T>(), in.as<T>(),
        out.as<T>(), nullptr, nullptr,       m_,           static_cast<int>(c_)};
    return layernorm_rows::launch_rows<T, layernorm_rows::RowStep::kLayerNorm>(a, stream);
  }
  Status residual_layernorm(cudaStream_t stream) {
    const layernorm_rows::RowArgs<T> a{
        x_.as<T>(), r_.as<T>(),          ln2_g_.as<T>(), ln2_b_.as<T>(),
        h_.as<T>(), y_.as<T>(),          nullptr,        nullptr,
        m_,         static_cast<int>(c_)};
    return layernorm_rows::launch_rows<T, layernorm_rows::RowStep::kFused>(a, stream);
  }
  Status add_bias(const DeviceBuffer& in, const DeviceBuffer& bias, DeviceBuffer& out, int64_t n,
                  cudaStream_t stream) {
    return launch_bias_op(in.as<T>(), bias.as<T>(), out.as<T>(), m_ * n, n, AddBiasOp{}, stream);
  }
  attention::FlashArgs<T> flash_args() const {
    return {qkv_.as<T>(),
            qkv_.as<T>() + c_,
            qkv_.as<T>() + 2 * c_,
            a_.as<T>(),
            layout_.length,
            layout_.dim,
            scale(),
            kHeads,
            3 * c_,
            c_};
  }
  // A flash kernel of one precision U (fp32's register-tiled form); the other precision says why
  // not, and the level table then runs flash_mma.
  template <typename U>
  Status flash_only([[maybe_unused]] attention::FlashLaunch<U> f,
                    [[maybe_unused]] cudaStream_t stream) {
    if constexpr (std::is_same<T, U>::value)
      return f(flash_args(), batch_ * kHeads, stream);
    else
      return Status::Unsupported(std::is_same<U, float>::value ? "runs in fp32 only"
                                                               : "runs in bf16 only");
  }

  int64_t batch_, c_, m_, n_scores_;
  double tolerance_;
  sublayer::HeadLayout layout_;
  std::unique_ptr<blas::Gemm> qkv_gemm_, qkv_gemm_bias_, proj_gemm_, proj_gemm_bias_;
  std::unique_ptr<blas::BatchedGemm> qk_gemm_, pv_gemm_;
  DeviceBuffer x_, ln1_g_, ln1_b_, w_qkv_, b_qkv_, w_proj_, b_proj_, ln2_g_, ln2_b_;
  DeviceBuffer xn_, t_, qkv_, q_, k_, v_, o_, s_, p_, a_, r_, h_, y_;
};

}  // namespace fl::sublayer
