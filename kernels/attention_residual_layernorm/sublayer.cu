// Lesson 10, attention_residual_layernorm: GPT-2's pre-LN attention sublayer,
//   h = x + Proj(Attn(LN1(x))),  y = LN2(h)
// x, h, y: tokens x C (C = 768, H = 12 heads of d = 64); W_qkv: C x 3C, W_proj: C x C. The size
// axis is the sequence length T with B = floor(16384 / T) sequences, as in lesson 9: the
// Linear layers cost the same at every T, the attention core grows with T.
//
// The ladder (each rung what earlier lessons taught, applied to the whole sublayer):
//   level 0, eager:     every op its own launch: LayerNorm, the QKV GEMM, its bias, the head
//                       split, lesson 9's level 0 (S = Q K^T, scale, mask, softmax, O = P V),
//                       the head merge, the projection GEMM, its bias, the residual add, LN2.
//   level 1, epilogues: cuBLASLt's bias epilogue on both GEMMs and lesson 9's fused softmax
//                       (lesson 5's fusion): 10 launches; S and P still cross HBM once each.
//   level 2, fused:     four launches of ours and cuBLASLt's: LN1 in the QKV GEMM's prologue
//                       (lesson 6's kernel), lesson 9's flash kernel reading q, k, v in place
//                       from qkv and writing O straight into the projection's input, the
//                       projection with its bias epilogue, then lesson 4's fused residual add +
//                       LayerNorm (h and y written once, h never read back).
// What stays unfused at the top, and why: the projection's input is the attention output of all
// 12 heads of a token, which exists only when every head's flash block is done (a grid-wide
// dependency); LN2 needs the whole row of h, which a GEMM tile of the projection does not own.
//
// Napkin at T = 512, bf16 (B = 32, 16,384 tokens): one tokens x C tensor is 25 MB, one T x T
// tensor (B H T^2) 201 MB, the weights 4.7 MB. GEMM FLOPs: QKV 58 G, projection 19 G, each
// attention GEMM 13 G (2 B H T^2 d; the flash kernel does the causal half of both, 13 G in all).
// Level 0 moves ~2.4 GB (eight passes of a T x T tensor, 33 of a tokens x C one), level 1
// ~1.4 GB (four and 25), level 2 ~0.36 GB (14 tokens x C passes). At ~3 TB/s and ~600 TFLOP/s:
// level 0 ~0.8 ms of traffic beside ~0.17 ms of math; level 2 ~0.12 ms of traffic and ~0.15 ms
// of math: the top is bound by its GEMMs and the flash kernel, not by memory.
#include "kernels/attention_residual_layernorm/sublayer.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/attention_rows.cuh"
#include "kernels/attention_residual_layernorm/workspace.cuh"
#include "kernels/catalog.h"
#include "kernels/layernorm_linear.h"

namespace fl {

const Lesson& attention_residual_layernorm_lesson();  // FL_DEFINE_LESSON below

namespace {

using sublayer::kHeads;
using sublayer::SublayerWorkspace;
constexpr int64_t kTokens = 16384;  // B T of a lesson run
constexpr int64_t kMaxLength = 16384, kDefaultC = 768, kMaxC = 12 * 128;

constexpr LinearSpec kQkv{1, 3, blas::Epilogue::bias, "gemm_qkv", "add_bias_qkv", "gemm_qkv_bias"};
constexpr LinearSpec kProj{
    1, 1, blas::Epilogue::bias, "gemm_proj", "add_bias_proj", "gemm_proj_bias"};

int64_t batch_for(int64_t length) {
  return std::max<int64_t>(1, kTokens / std::max<int64_t>(1, length));
}

// ---- the level table -----------------------------------------------------------------------
// Dims: s = T, i = C, b bytes; the formulas count the 16,384 tokens of a run (exact on the bench
// grid, an over-count when T does not divide 16,384). One tokens x C tensor is 16384 C b; one
// T x T tensor is B H T^2 b = 16384 H T b. An attention GEMM over the full square does
// 2 B H T^2 d = 2 (16384) T C FLOPs; the flash kernel the causal half of both, as much in all.
// The Linear layers and bias kernels count as the GEMM lessons' formulas (gemm_common.cuh,
// bias_ops.cuh), the LayerNorms as lesson 4's: 8 FLOPs an element, 9 with the residual add.
Dims tokens(const Dims& x) {
  return {kTokens, x.i, x.b};
}
int64_t act_bytes(const Dims& x) {
  return kTokens * x.i * x.b;
}
int64_t score_bytes(const Dims& x) {
  return kTokens * kHeads * x.s * x.b;
}
double attention_flops(const Dims& x) {
  return 2.0 * kTokens * x.s * x.i;
}

}  // namespace

namespace sublayer {

template <typename T>
const LevelTable<SublayerWorkspace<T>>& SublayerWorkspace<T>::levels() {
  using Ws = SublayerWorkspace;
  auto gemm = [](const LinearSpec& spec, bool bias) {
    return [spec, bias](const Dims& x) {
      return bias ? gemm_epilogue_textbook(tokens(x), spec) : gemm_textbook(tokens(x), spec);
    };
  };
  auto pass = [](double flops_per_score) {  // one read and one write of a T x T tensor
    return [flops_per_score](const Dims& x) {
      return Textbook{score_bytes(x), score_bytes(x), flops_per_score * kTokens * kHeads * x.s};
    };
  };
  auto layernorm_textbook = [](const Dims& x) {
    return Textbook{act_bytes(x) + 2 * x.i * x.b, act_bytes(x), 8.0 * kTokens * x.i};
  };
  static const LaunchRow<Ws> ln1 = {
      "layernorm_1",
      [](Ws& w, cudaStream_t st) { return w.layernorm(w.x_, w.ln1_g_, w.ln1_b_, w.xn_, st); },
      layernorm_textbook};
  static const LaunchRow<Ws> ln2 = {
      "layernorm_2",
      [](Ws& w, cudaStream_t st) { return w.layernorm(w.h_, w.ln2_g_, w.ln2_b_, w.y_, st); },
      layernorm_textbook};
  static const LaunchRow<Ws> split = {"split_heads",
                                      [](Ws& w, cudaStream_t st) {
                                        return sublayer::launch_split_heads(
                                            w.qkv_.template as<T>(), w.q_.template as<T>(),
                                            w.k_.template as<T>(), w.v_.template as<T>(), w.layout_,
                                            st);
                                      },
                                      [](const Dims& x) {
                                        return Textbook{3 * act_bytes(x), 3 * act_bytes(x), 0};
                                      }};
  static const LaunchRow<Ws> qk = {
      "qk_gemm",
      [](Ws& w, cudaStream_t st) {
        return w.qk_gemm_->run(w.q_.get(), w.k_.get(), w.s_.get(), st);
      },
      [](const Dims& x) {
        return Textbook{2 * act_bytes(x), score_bytes(x), attention_flops(x)};
      }};
  static const LaunchRow<Ws> pv = {
      "pv_gemm",
      [](Ws& w, cudaStream_t st) {
        return w.pv_gemm_->run(w.p_.get(), w.v_.get(), w.o_.get(), st);
      },
      [](const Dims& x) {
        return Textbook{score_bytes(x) + act_bytes(x), act_bytes(x), attention_flops(x)};
      }};
  static const LaunchRow<Ws> merge = {"merge_heads",
                                      [](Ws& w, cudaStream_t st) {
                                        return sublayer::launch_merge_heads(w.o_.template as<T>(),
                                                                            w.a_.template as<T>(),
                                                                            w.layout_, st);
                                      },
                                      [](const Dims& x) {
                                        return Textbook{act_bytes(x), act_bytes(x), 0};
                                      }};
  static const LaunchRow<Ws> residual_add = {
      "residual_add",
      [](Ws& w, cudaStream_t st) {
        return layernorm_rows::launch_add(w.x_.template as<T>(), w.r_.template as<T>(),
                                          w.h_.template as<T>(), w.m_ * w.c_, st);
      },
      [](const Dims& x) {
        return Textbook{2 * act_bytes(x), act_bytes(x), 1.0 * kTokens * x.i};
      }};
  static const LaunchRow<Ws> proj_bias = {
      kProj.gemm_epilogue,
      [](Ws& w, cudaStream_t st) {
        return w.proj_gemm_bias_->run(w.a_.get(), w.w_proj_.get(), w.b_proj_.get(), w.r_.get(), st);
      },
      gemm(kProj, true)};
  static const LevelTable<Ws> table = {
      {"eager",
       "every op its own launch, as PyTorch eager runs the block: LayerNorm, GEMM, bias, the "
       "head split, lesson 9's eager attention, the head merge, GEMM, bias, residual add, "
       "LayerNorm",
       "only within a launch: xn, the products, qkv, the split heads, S, P and O, a, r and h all "
       "go to HBM and back",
       {ln1,
        {kQkv.gemm,
         [](Ws& w, cudaStream_t st) {
           return w.qkv_gemm_->run(w.xn_.get(), w.w_qkv_.get(), nullptr, w.t_.get(), st);
         },
         gemm(kQkv, false)},
        {kQkv.add_bias,
         [](Ws& w, cudaStream_t st) { return w.add_bias(w.t_, w.b_qkv_, w.qkv_, 3 * w.c_, st); },
         [](const Dims& x) { return bias_op_textbook(tokens(x), 3 * x.i, kAddFlops); }},
        split,
        qk,
        {"scale",
         [](Ws& w, cudaStream_t st) {
           return attention::launch_scale(w.s_.template as<T>(), w.p_.template as<T>(), w.n_scores_,
                                          w.scale(), st);
         },
         pass(1)},
        {"causal_mask",
         [](Ws& w, cudaStream_t st) {
           return attention::launch_causal_mask(w.p_.template as<T>(), w.s_.template as<T>(),
                                                w.score_rows(), w.layout_.length, st);
         },
         pass(0)},
        {"softmax",
         [](Ws& w, cudaStream_t st) {
           return attention::launch_softmax_rows<T, false>(w.s_.template as<T>(),
                                                           w.p_.template as<T>(), w.score_rows(),
                                                           w.layout_.length, w.scale(), st);
         },
         pass(4)},
        pv,
        merge,
        {kProj.gemm,
         [](Ws& w, cudaStream_t st) {
           return w.proj_gemm_->run(w.a_.get(), w.w_proj_.get(), nullptr, w.t_.get(), st);
         },
         gemm(kProj, false)},
        {kProj.add_bias,
         [](Ws& w, cudaStream_t st) { return w.add_bias(w.t_, w.b_proj_, w.r_, w.c_, st); },
         [](const Dims& x) { return bias_op_textbook(tokens(x), x.i, kAddFlops); }},
        residual_add,
        ln2}},
      {"epilogues",
       "the GEMMs add their biases in cuBLASLt's epilogue and the attention core is lesson 9's "
       "fused softmax; the head split and merge, the residual add and both LayerNorms stay",
       "the GEMM tiles with their biases, and the scale and mask applied to S as it is read: "
       "S and P still cross HBM once each",
       {ln1,
        {kQkv.gemm_epilogue,
         [](Ws& w, cudaStream_t st) {
           return w.qkv_gemm_bias_->run(w.xn_.get(), w.w_qkv_.get(), w.b_qkv_.get(), w.qkv_.get(),
                                        st);
         },
         gemm(kQkv, true)},
        split,
        qk,
        {"scale_mask_softmax",
         [](Ws& w, cudaStream_t st) {
           return attention::launch_softmax_rows<T, true>(w.s_.template as<T>(),
                                                          w.p_.template as<T>(), w.score_rows(),
                                                          w.layout_.length, w.scale(), st);
         },
         pass(5)},
        pv,
        merge,
        proj_bias,
        residual_add,
        ln2}},
      {"fused",
       "four launches: LN1 in the QKV GEMM's prologue, flash attention on qkv in place, the "
       "projection with its bias epilogue, then the residual add fused with LN2",
       "LN1's rows, normalized as they land in shared memory; S and P in registers; the row of "
       "h and its statistics: xn, S, P, the split heads and the read-back of h never reach HBM",
       {{"ln_gemm_bias",
         [](Ws& w, cudaStream_t st) {
           return layernorm_linear::ln_gemm_bias(
               w.x_.template as<T>(), w.ln1_g_.template as<T>(), w.ln1_b_.template as<T>(),
               w.w_qkv_.template as<T>(), w.b_qkv_.template as<T>(), w.qkv_.template as<T>(), w.m_,
               static_cast<int>(w.c_), static_cast<int>(3 * w.c_), st);
         },
         [](const Dims& x) {  // the epilogue GEMM's traffic, gamma and beta, LN1's FLOPs
           Textbook t = gemm_epilogue_textbook(tokens(x), kQkv);
           t.read += 2 * x.i * x.b;
           t.flops += 8.0 * kTokens * x.i;
           return t;
         }},
        {"flash_attention",
         nullptr,
         [](const Dims& x) {
           return Textbook{3 * act_bytes(x), act_bytes(x), attention_flops(x)};
         },
         // Lesson 9's level 2 kernels, on qkv in place (d = 64 here).
         {{"flash_fp32_tiles",
           "fp32: a thread owns 8 x 4 of S and of O, read by 16-byte loads",
           "flash_fp32_tiles_kernel",
           {0, 0, false, {Precision::fp32}},
           [](Ws& w, cudaStream_t st) {
             return w.flash_only(attention::launch_flash_fp32_tiles, st);
           },
           [](const Dims& x) { return attention::flash_fp32_tiles_shape_check(x.i / kHeads); }},
          {"flash_mma",
           "4 warps of 32 query rows, K/V tiles of 64 keys double-buffered by cp.async",
           "flash_attention_kernel",
           {},
           [](Ws& w, cudaStream_t st) {
             return attention::launch_flash(w.flash_args(), w.batch_ * kHeads, st);
           }}}},
        proj_bias,
        {"residual_layernorm_fused",
         [](Ws& w, cudaStream_t st) { return w.residual_layernorm(st); },
         [](const Dims& x) {
           return Textbook{2 * act_bytes(x) + 2 * x.i * x.b, 2 * act_bytes(x), 9.0 * kTokens * x.i};
         }}}},
  };
  return table;
}

}  // namespace sublayer

namespace {

// ---- the lesson ----------------------------------------------------------------------------

class AttentionSublayer final : public LevelLesson<SublayerWorkspace<float>> {
 public:
  AttentionSublayer()
      : LevelLesson(
            "attention_residual_layernorm", "Attention sublayer + residual + LayerNorm",
            "h = x + Proj(Attn(LN1(x))),  y = LN2(h)  (12 causal heads)",
            {"tokens per sequence", 1, kMaxLength, 1024, "hidden size C", kDefaultC, kMaxC}) {}

  // x, xn, q, k, v, O, a, r, h, y (tokens x C each), t and qkv (tokens x 3C), S and P (B H T^2)
  // and the parameters (4 C^2 weights; 8 C of biases, gammas and betas).
  int64_t workspace_bytes(Shape shape, Precision p) const override {
    shape = resolve(shape);
    const int64_t b = bytes_per_element(p), c = shape.inner;
    const int64_t m = batch_for(shape.size) * shape.size;
    const int64_t scores = batch_for(shape.size) * kHeads * shape.size * shape.size;
    return (16 * m * c + 2 * scores + 4 * c * c + 8 * c) * b;
  }

  Status create_workspace(Shape shape, Precision p,
                          std::unique_ptr<Workspace>* out) const override {
    shape = resolve(shape);
    if (shape.size < 1 || shape.size > kMaxLength) {
      return Status::Error("attention_residual_layernorm takes a sequence length T from 1 to " +
                           std::to_string(kMaxLength) + "; got " + std::to_string(shape.size));
    }
    return sublayer::make_workspace(batch_for(shape.size), static_cast<int>(shape.size),
                                    shape.inner, p, out);
  }

  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    return sublayer::reference(inputs);
  }

  // The GEMM lessons' tolerance (gemm_common.cuh): bf16 rounds qkv, S, P, O, r and h to 8
  // significant bits on the way; fp32 stays within 5e-4 (TF32 off).
  double tolerance(Precision p) const override { return gemm_tolerance(p); }
};

}  // namespace

namespace sublayer {

Status make_workspace(int64_t batch, int length, int64_t c, Precision p,
                      std::unique_ptr<Workspace>* out) {
  if (batch < 1 || length < 1 || c < kHeads || c > kMaxC || c % kHeads != 0) {
    return Status::Error(
        "attention_residual_layernorm takes B, T >= 1 and a hidden size C that "
        "is a multiple of 12 from 12 to " +
        std::to_string(kMaxC) +
        " (head "
        "size d = C / 12 up to 128); got B = " +
        std::to_string(batch) + ", T = " + std::to_string(length) + ", C = " + std::to_string(c));
  }
  const Lesson& lesson = attention_residual_layernorm_lesson();
  return fl::make_workspace<SublayerWorkspace>(p, out, batch, length, c, lesson.tolerance(p));
}

}  // namespace sublayer

FL_DEFINE_LESSON(attention_residual_layernorm, AttentionSublayer);

}  // namespace fl
