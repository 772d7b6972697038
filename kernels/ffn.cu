// Lesson 8, ffn: y = GELU_tanh(x W1 + b1) W2 + b2, x of tokens x C, W1 of C x 4C, W2 of 4C x C
// (a transformer's whole MLP: widen to H = 4C, activate, project back).
//
// Levels:
//   0 unfused     five kernels: GEMM, bias, GELU, GEMM, bias. The 4C-wide tensor makes three
//                 round trips through HBM (t = x W1, u = t + b1, h = GELU(u)), then s = h W2 one.
//   1 epilogues   two cuBLASLt GEMMs with fused epilogues (GELU+bias, then bias): h is written
//                 once and read once.
//   2 on chip     our one-kernel FFN (gemm_common.cuh): h never leaves the SM. It trades bytes for
//                 recomputation of nothing but for re-reading the weights from L2 in every block,
//                 with tiles of only 32 tokens, and it is plain SIMT code: it is measured and
//                 explained, not expected to win (see the teaching text).
// Textbook bytes (M tokens, C, H = 4C, b bytes per element):
//   gemm_up     reads (M C + C H) b, writes M H b       gemm_down  reads (M H + H C) b, writes M C b
//   bias/GELU on M x H: reads M H b (+ H), writes M H b   add_bias_down  reads (M C + C) b, writes M C b
//   ffn_on_chip reads (M C + 2 C H + H + C) b, writes M C b
#include <cuda_bf16.h>

#include <memory>

#include "kernels/bias_ops.cuh"
#include "kernels/blas.h"
#include "kernels/catalog.h"
#include "kernels/device_buffer.h"
#include "kernels/gemm_common.cuh"

namespace fl {
namespace {

using gemm::kDefaultC;

const char* const kTeachingText =
    "The MLP of a transformer block is two Linear layers with GELU between them: widen each "
    "token from C to H = 4C features, activate, project back to C. Unfused (level 0) it is five "
    "kernels, and the widest tensor of the block (tokens x 4C) goes through HBM six times: "
    "written by the first GEMM, read and written by the bias kernel and by GELU, read by the "
    "second GEMM. Level 1 is what production frameworks do: cuBLASLt epilogues fuse bias and "
    "GELU into the first GEMM and the second bias into the second GEMM, so h is written once and "
    "read once. Both GEMMs do 2 x tokens x C x 4C flops and are compute-bound at the default "
    "shape, so the bytes removed are a small share of the time (PyTorch on an H100: about 1.0x); "
    "they matter more in bf16 on tensor cores and at small batches. Level 2 asks whether h needs "
    "to leave the chip at all: one kernel keeps a block of tokens' h in shared memory and "
    "multiplies it straight into W2. The bytes to HBM drop to x, the weights and y. But to keep "
    "the output rows of its tokens on chip a block can hold only 32 tokens (against 128 or more "
    "in a GEMM tile), so it reads all of W1 and W2 from L2 for every 32 tokens: the L2 bytes "
    "(memory chart) grow many times, and our kernel uses plain fp32 arithmetic without tensor "
    "cores. It is slower, and that is the lesson: fusion pays when the bytes it removes are the "
    "bottleneck, and costs when it breaks the tiling that makes a GEMM compute-efficient. Real "
    "fused MLPs (e.g. in FlashAttention-style or persistent-kernel libraries) split H across "
    "blocks and reduce, or only fuse at small token counts. "
    "Measured on an NVIDIA H200 (2026-11-22, cold L2, 16,384 tokens x 768): fp32 3409 us "
    "unfused, 3296 us with epilogues (1.03x); bf16 335 and 246 us (1.36x). The on-chip kernel"
    " takes 56 ms in fp32: 16x level 0 and 18x cuBLAS's two GEMMs alone (3185 us); in bf16 54"
    " ms against 217 us of cuBLAS GEMMs. At 64 tokens it still takes 27 ms: two blocks of 32 "
    "tokens walk all 3072 hidden features one after the other while the rest of the GPU "
    "idles.";

template <typename T>
class FfnWorkspace final : public Workspace {
 public:
  FfnWorkspace(int64_t m, int64_t c, double tolerance)
      : m_(m), c_(c), h_(4 * c), tolerance_(tolerance) {}

  Status allocate() {
    FL_TRY(x_.allocate(m_ * c_ * sizeof(T)));
    FL_TRY(w1_.allocate(c_ * h_ * sizeof(T)));
    FL_TRY(b1_.allocate(h_ * sizeof(T)));
    FL_TRY(w2_.allocate(h_ * c_ * sizeof(T)));
    FL_TRY(b2_.allocate(c_ * sizeof(T)));
    FL_TRY(t_.allocate(m_ * h_ * sizeof(T)));
    FL_TRY(u_.allocate(m_ * h_ * sizeof(T)));
    FL_TRY(hid_.allocate(m_ * h_ * sizeof(T)));
    FL_TRY(s_.allocate(m_ * c_ * sizeof(T)));
    FL_TRY(y_.allocate(m_ * c_ * sizeof(T)));
    FL_TRY(sums_.allocate(sizeof(ErrorSums)));
    const Precision p = std::is_same<T, float>::value ? Precision::fp32 : Precision::bf16;
    FL_TRY(blas::Gemm::plan(m_, h_, c_, p, blas::Epilogue::none, &up_));
    FL_TRY(blas::Gemm::plan(m_, c_, h_, p, blas::Epilogue::none, &down_));
    FL_TRY(blas::Gemm::plan(m_, h_, c_, p, blas::Epilogue::gelu_bias, &up_gelu_bias_));
    return blas::Gemm::plan(m_, c_, h_, p, blas::Epilogue::bias, &down_bias_);
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    FL_TRY(fill_uniform(x_.as<T>(), m_ * c_, seed, gemm::kXLo, gemm::kXHi, stream));
    const float w1b = gemm::weight_bound(c_), w2b = gemm::weight_bound(h_);
    FL_TRY(fill_uniform(w1_.as<T>(), c_ * h_, mix64(seed ^ 0x3E16ull), -w1b, w1b, stream));
    FL_TRY(fill_uniform(b1_.as<T>(), h_, mix64(seed ^ 0xB1A5ull), gemm::kBiasLo, gemm::kBiasHi, stream));
    FL_TRY(fill_uniform(w2_.as<T>(), h_ * c_, mix64(seed ^ 0x3E17ull), -w2b, w2b, stream));
    return fill_uniform(b2_.as<T>(), c_, mix64(seed ^ 0xB1A6ull), gemm::kBiasLo, gemm::kBiasHi, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    for (DeviceBuffer* wide : {&t_, &u_, &hid_}) FL_TRY(fill_nan(wide->as<T>(), m_ * h_, stream));
    FL_TRY(fill_nan(s_.as<T>(), m_ * c_, stream));
    return fill_nan(y_.as<T>(), m_ * c_, stream);
  }

  Status launch(int level, int launch, cudaStream_t stream) override {
    const T *x = x_.as<T>(), *w1 = w1_.as<T>(), *b1 = b1_.as<T>(), *w2 = w2_.as<T>(), *b2 = b2_.as<T>();
    T *t = t_.as<T>(), *u = u_.as<T>(), *h = hid_.as<T>(), *s = s_.as<T>(), *y = y_.as<T>();
    if (level == 0) {
      switch (launch) {
        case 0: return up_->run(x, w1, nullptr, t, stream);
        case 1: return launch_bias_op(t, b1, u, m_ * h_, h_, AddBiasOp{}, stream);
        case 2: return launch_elementwise<T>(u, h, m_ * h_, GeluFastOp{}, stream);
        case 3: return down_->run(h, w2, nullptr, s, stream);
        case 4: return launch_bias_op(s, b2, y, m_ * c_, c_, AddBiasOp{}, stream);
        default: break;
      }
    }
    if (level == 1 && launch == 0) return up_gelu_bias_->run(x, w1, b1, h, stream);
    if (level == 1 && launch == 1) return down_bias_->run(h, w2, b2, y, stream);
    if (level == 2 && launch == 0) {
      return gemm::launch_ffn_on_chip(x, w1, b1, w2, b2, y, m_, static_cast<int>(c_),
                                      static_cast<int>(h_), stream);
    }
    return Status::Error("ffn has no launch " + std::to_string(launch) + " at level " +
                         std::to_string(level));
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    gemm::CheckArgs<T> a{x_.as<T>(), nullptr, nullptr, w1_.as<T>(), b1_.as<T>(), w2_.as<T>(),
                         b2_.as<T>(), y_.as<T>(), m_, int(c_), int(h_), int(c_)};
    return run_check(sums_, tolerance_, stream, [&](ErrorSums* sums) {
      return gemm::launch_check_rows<T, false, true, true>(a, sums, stream);
    }, result);
  }

  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    *inputs = {HostTensor{"x", {}}, HostTensor{"W1", {}}, HostTensor{"b1", {}},
               HostTensor{"W2", {}}, HostTensor{"b2", {}}};
    outputs->assign(1, HostTensor{"y", {}});
    FL_TRY(download_as_double(x_.as<T>(), m_ * c_, stream, &(*inputs)[0].values));
    FL_TRY(download_as_double(w1_.as<T>(), c_ * h_, stream, &(*inputs)[1].values));
    FL_TRY(download_as_double(b1_.as<T>(), h_, stream, &(*inputs)[2].values));
    FL_TRY(download_as_double(w2_.as<T>(), h_ * c_, stream, &(*inputs)[3].values));
    FL_TRY(download_as_double(b2_.as<T>(), c_, stream, &(*inputs)[4].values));
    return download_as_double(y_.as<T>(), m_ * c_, stream, &(*outputs)[0].values);
  }

 private:
  int64_t m_, c_, h_;
  double tolerance_;
  DeviceBuffer x_, w1_, b1_, w2_, b2_, t_, u_, hid_, s_, y_, sums_;
  std::unique_ptr<blas::Gemm> up_, down_, up_gelu_bias_, down_bias_;
};

class Ffn final : public Lesson {
 public:
  Ffn() {
    info_.id = "ffn";
    info_.title = "FFN (C -> 4C -> C)";
    info_.formula = "y = GELU_tanh(x W1 + b1) W2 + b2,  W1: C x 4C,  W2: 4C x C";
    info_.teaching_text = kTeachingText;
    info_.size_axis.unit = "tokens";
    info_.size_axis.min = 1;
    info_.size_axis.max = gemm::kMaxTokens;
    info_.size_axis.default_size = gemm::kDefaultTokens;
    info_.size_axis.inner_name = "hidden size C";
    info_.size_axis.inner_default = kDefaultC;
    info_.size_axis.inner_max = gemm::kMaxC;
    info_.levels = {
        {"unfused", "GEMM, bias, GELU, GEMM, bias: the 4C-wide tensor makes three round trips through HBM",
         {"gemm_up", "add_bias_up", "gelu", "gemm_down", "add_bias_down"}},
        {"epilogues", "two cuBLASLt GEMMs with fused epilogues: h written once, read once",
         {"gemm_up_bias_gelu", "gemm_down_bias"}},
        {"on chip", "one kernel keeps h in shared memory; it re-reads the weights from L2 instead",
         {"ffn_on_chip"}},
    };
    info_.precisions = {Precision::fp32, Precision::bf16};
  }

  const LessonInfo& info() const override { return info_; }

  std::vector<LaunchTraffic> traffic(int level, Shape shape, Precision p) const override {
    shape = resolve(shape);
    const int64_t b = bytes_per_element(p);
    const int64_t m = shape.size, c = shape.inner, h = 4 * shape.inner;
    const double gemm_flops = 2.0 * m * c * h, gelu_flops = 8.0 * m * h;
    if (level == 0) {
      return {{"gemm_up", (m * c + c * h) * b, m * h * b, gemm_flops},
              {"add_bias_up", (m * h + h) * b, m * h * b, 1.0 * m * h},
              {"gelu", m * h * b, m * h * b, gelu_flops},
              {"gemm_down", (m * h + h * c) * b, m * c * b, gemm_flops},
              {"add_bias_down", (m * c + c) * b, m * c * b, 1.0 * m * c}};
    }
    if (level == 1) {
      return {{"gemm_up_bias_gelu", (m * c + c * h + h) * b, m * h * b, gemm_flops + gelu_flops + m * h},
              {"gemm_down_bias", (m * h + h * c + c) * b, m * c * b, gemm_flops + 1.0 * m * c}};
    }
    return {{"ffn_on_chip", (m * c + 2 * c * h + h + c) * b, m * c * b,
             2 * gemm_flops + gelu_flops + 1.0 * m * h + 1.0 * m * c}};
  }

  int64_t workspace_bytes(Shape shape, Precision p) const override {
    shape = resolve(shape);
    const int64_t m = shape.size, c = shape.inner, h = 4 * shape.inner;
    return (3 * m * c + 2 * c * h + h + c + 3 * m * h) * bytes_per_element(p);
  }

  Status create_workspace(Shape shape, Precision p, std::unique_ptr<Workspace>* out) const override {
    shape = resolve(shape);
    return make_gemm_workspace<FfnWorkspace>("ffn", shape, p, tolerance(p), out);
  }

  // inputs: x (M x C), W1 (C x 4C), b1 (4C), W2 (4C x C), b2 (C).
  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const auto& x = inputs.at(0).values;
    const auto& w1 = inputs.at(1).values;
    const auto& b1 = inputs.at(2).values;
    const auto& w2 = inputs.at(3).values;
    const auto& b2 = inputs.at(4).values;
    const int64_t c = static_cast<int64_t>(b2.size()), h = static_cast<int64_t>(b1.size());
    const int64_t m = c > 0 ? static_cast<int64_t>(x.size()) / c : 0;
    HostTensor y{"y", std::vector<double>(m * c)};
    std::vector<double> hid(h);
    for (int64_t r = 0; r < m; ++r) {
      reference_linear_row(&x[r * c], c, w1.data(), b1.data(), h, hid.data());
      for (int64_t j = 0; j < h; ++j) hid[j] = gelu_tanh_reference(hid[j]);
      reference_linear_row(hid.data(), h, w2.data(), b2.data(), c, &y.values[r * c]);
    }
    return {y};
  }

  double tolerance(Precision p) const override { return gemm_tolerance(p); }

 private:
  LessonInfo info_;
};

}  // namespace

const Lesson& ffn_lesson() {
  static const Ffn lesson;
  return lesson;
}

}  // namespace fl
