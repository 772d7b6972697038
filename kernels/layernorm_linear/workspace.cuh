// The LayerNorm-Linear lesson's workspace (kernels/layernorm_linear/layernorm_linear.cu has the
// lesson, its level table, LayerNormLinearWorkspace<T>::levels(), and level 2's variant rows,
// fused_variants()): x, gamma, beta, the Linear layer (W, b and the cuBLASLt plans), the unfused
// chain's xn and t, y, ln_mma_tiles' counters and, in bf16, ln_mma_folded's folded weights (made
// when the weights are filled, not timed).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/bias_ops.cuh"
#include "kernels/blas.h"
#include "kernels/device_buffer.h"
#include "kernels/gemm_common.cuh"
#include "kernels/layernorm_linear/ln_common.cuh"
#include "kernels/layernorm_linear/ln_fold.h"
#include "kernels/layernorm_linear/ln_linear_stream.h"
#include "kernels/layernorm_rows.cuh"
#include "kernels/level_table.h"
#include "kernels/workspace.cuh"

namespace fl::layernorm_linear {
// The one Linear layer, C -> 3C; in the epilogue level, cuBLASLt's bias epilogue.
constexpr LinearSpec kLinear{1, 3, blas::Epilogue::bias, "gemm", "add_bias", "gemm_bias"};

// Device buffers for one shape and element type: x, gamma, beta, the Linear layer (W, b and the
// cuBLASLt plans), the unfused chain's xn and t, and y.
template <typename T>
class LayerNormLinearWorkspace final : public LevelWorkspace<LayerNormLinearWorkspace<T>> {
 public:
  LayerNormLinearWorkspace(int64_t m, int64_t c, double tolerance)
      : m_(m),
        k_(c),
        n_(3 * c),
        tolerance_(tolerance),
        linear_(m, c, kLinear, {&xn_, &t_, &y_, &y_}) {
    this->set_where({m, c, int64_t(sizeof(T))}, precision_of<T>(), "tokens");
  }

  // The ladder and level 2's kernels, in layernorm_linear.cu.
  static const LevelTable<LayerNormLinearWorkspace>& levels();
  static std::vector<VariantRow<LayerNormLinearWorkspace>> fused_variants();

  Status allocate() {
    FL_TRY(allocate_elements<T>({{&x_, m_ * k_},
                                 {&gamma_, k_},
                                 {&beta_, k_},
                                 {&xn_, m_ * k_},
                                 {&t_, m_ * n_},
                                 {&y_, m_ * n_}}));
    FL_TRY(sums_.allocate(sizeof(ErrorSums)));
    // ln_mma_tiles' tickets and per-row-block counters, and where the parts of K of its and
    // ln_mma_folded's split tiles meet (left zero by them); ln_mma_tiles' xn is xn_.
    FL_TRY(tiles_counters_.allocate(layernorm_linear::ln_mma_tiles_counter_bytes(m_, n_)));
    FL_CUDA_TRY(cudaMemset(tiles_counters_.get(), 0, tiles_counters_.bytes()));
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {  // ln_mma_folded's weights
      FL_TRY(allocate_elements<T>({{&w_fold_, k_ * n_}}));
      FL_TRY(allocate_elements<float>({{&u_fold_, n_}, {&b_fold_, n_}}));
    }
    return linear_.allocate();
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    // x off-centre (a residual stream's mean is not 0), so the normalization matters.
    FL_TRY(fill_uniform(x_.as<T>(), m_ * k_, seed, -1.0f, 3.0f, stream));
    FL_TRY(fill_uniform(gamma_.as<T>(), k_, mix64(seed ^ 0x6A77ull), gemm::kGammaLo, gemm::kGammaHi,
                        stream));
    FL_TRY(fill_uniform(beta_.as<T>(), k_, mix64(seed ^ 0xBE7Aull), gemm::kBetaLo, gemm::kBetaHi,
                        stream));
    FL_TRY(linear_.fill(seed, 0, stream));
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {  // set up with the weights, not timed
      FL_TRY(layernorm_linear::fold_ln_weights(gamma_.as<T>(), beta_.as<T>(), linear_.weights(),
                                               linear_.bias(), int(k_), int(n_), fold(), stream));
    }
    return Status::Ok();
  }

  Status poison_outputs(cudaStream_t stream) override {
    return poison_elements<T>({{&xn_, m_ * k_}, {&t_, m_ * n_}, {&y_, m_ * n_}}, stream);
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    const gemm::CheckArgs<T> a{x_.as<T>(),        gamma_.as<T>(), beta_.as<T>(),
                               linear_.weights(), linear_.bias(), nullptr,
                               nullptr,           y_.as<T>(),     m_,
                               int(k_),           int(n_),        0};
    return check_gemm_rows<T, true, false, false>(a, sums_, tolerance_, stream, result);
  }

  // Inputs x (M x C), gamma, beta (C), W (C x 3C), b (3C); output y.
  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    return download_io<T>({{"x", x_.as<T>(), m_ * k_},
                           {"gamma", gamma_.as<T>(), k_},
                           {"beta", beta_.as<T>(), k_},
                           linear_.weights_tensor("W"),
                           linear_.bias_tensor("b")},
                          {{"y", y_.as<T>(), m_ * n_}}, stream, inputs, outputs);
  }

 private:
  // Lesson 4's one-kernel LayerNorm, xn = LN(x): the row kernels read their input through `h`.
  Status layernorm(cudaStream_t stream) {
    using layernorm_rows::RowArgs;
    using layernorm_rows::RowStep;
    const RowArgs<T> a{
        nullptr, nullptr, gamma_.as<T>(),      beta_.as<T>(), x_.as<T>(), xn_.as<T>(), nullptr,
        nullptr, m_,      static_cast<int>(k_)};
    return layernorm_rows::launch_rows<T, RowStep::kLayerNorm>(a, stream);
  }

  // Level 2's arguments: x, gamma, beta, W, b and y of this workspace (and, for ln_mma_tiles,
  // the unfused chain's xn as its scratch, and its counters).
  LnArgs<T> fused_args() const {
    return {x_.as<T>(),
            gamma_.as<T>(),
            beta_.as<T>(),
            linear_.weights(),
            linear_.bias(),
            y_.as<T>(),
            m_,
            static_cast<int>(k_),
            static_cast<int>(n_),
            this->phase_sink(),
            xn_.as<T>(),
            static_cast<unsigned*>(tiles_counters_.get()),
            w_fold_.as<T>(),
            u_fold_.as<float>(),
            b_fold_.as<float>()};
  }
  // ln_mma_folded's weights (bf16 only; empty in fp32).
  layernorm_linear::LnFold fold() const {
    return {w_fold_.as<__nv_bfloat16>(), u_fold_.as<float>(), b_fold_.as<float>()};
  }
  // The portable small-token kernel (ln_linear_stream.cu): nothing kept between launches.
  Status stream(cudaStream_t stream) {
    const LnStreamBuffers b{x_.as<T>(),     gamma_.as<T>(), beta_.as<T>(), linear_.weights(),
                            linear_.bias(), y_.as<T>(),     nullptr};
    return launch_ln_stream(precision_of<T>(), b, m_, k_, n_, stream);
  }
  // Runs one of level 2's kernels and names the phases it records (kernels/phases.h).
  template <typename Launch>
  Status fused(Launch launch, const std::vector<std::string>* phases, cudaStream_t stream) {
    FL_TRY(launch(fused_args(), stream));
    if (phases != nullptr) this->declare_phases(*phases);
    return Status::Ok();
  }

  int64_t m_, k_, n_;
  double tolerance_;
  DeviceBuffer x_, gamma_, beta_, xn_, t_, y_, sums_, tiles_counters_, w_fold_, u_fold_, b_fold_;
  LinearLayer<T> linear_;
};

}  // namespace fl::layernorm_linear
