// Lesson 5, scale_mask_softmax: the attention probabilities P = softmax(mask(s * S)), row-wise.
//
// The scores S of one head form a square L x L matrix (query q, key j; Sq = Sk = L), and the
// B*H heads are stacked, so S is a tensor of `rows` = B*H*L rows of L keys each and the query of
// row r is q = r % L. The scale is s = 1/sqrt(64) (head dimension 64). The causal mask hides
// the future: key j > q becomes -inf, so its probability is exactly 0; key 0 is never masked,
// so every row has something to normalize.
//
// The ladder: unfused is five kernels, each op its own launch and each itself efficient (scale,
// mask, row_max, exp_sum, divide); level 1 is what PyTorch eager runs (scale and mask are still
// two elementwise kernels, then one softmax kernel that keeps its row on chip); fused is one
// kernel that reads S once, scales and masks it as it arrives, finds the row's max and sum with
// the online-softmax rule in registers and writes P once. With n = rows * L elements of b bytes
// the levels move 9nb + 16 rows (the fp32 row max and sum), 6nb and 2nb, so the byte-ratio
// limit of the speedup is 4.5x over the five-kernel chain (4.504x at L = 512 in fp32) and 3.0x
// over the eager one, once the scores are far larger than L2. The level table below has every
// launch's bytes.
// Prediction at the default shape, fp32 (196,608 rows x 512 keys, 402.7 MB per tensor):
// unfused 3,627.0 MB, softmax fused 2,415.9 MB, fused 805.3 MB; at ~3.0 TB/s of copy bandwidth
// (H100 SXM) about 1.21 ms, 0.81 ms and 0.27 ms. bf16 halves every figure but the 16 bytes/row.
//
// Access pattern. Every kernel moves 16 bytes per access (float4 / 8 x bf16). The elementwise
// kernels (scale, mask) walk the flat tensor, so only the tensor's last few elements need scalar
// accesses. The row kernels give each row to a group of 8 to 512 threads sized so that every
// thread has up to 4 vectors of it (L = 512: a warp per fp32 row, half a warp per bf16 row;
// L = 8192 fp32: 512 threads). A row of odd length starts at an address that is not a multiple
// of 16 bytes, so each row is split into a scalar head (up to the first 16-byte boundary), full
// 16-byte vectors, and a scalar tail (row_split.cuh, shared with LayerNorm): any L works, L = 1
// included. The softmax and fused kernels hold their whole row in registers, so the row is read
// from DRAM once.
//
// Measured figures (and where the unfused kernels lose a few percent: the write-back of the dirty
// lines their predecessor left in L2) are in docs/PERFORMANCE.md.
//
// The files of kernels/scale_mask_softmax/, in the order a reader meets them:
//   smx_row_group.cuh     the row group and the online-softmax rule the row kernels share
//   smx_scale_mask.cuh    levels 0 and 1: the scale and causal-mask kernels
//   smx_unfused_rows.cuh  level 0: row_max, exp_sum and divide
//   smx_softmax_rows.cuh  levels 1 and 2: the softmax with its row in registers, and the fused
//                         kernel (the same kernel, scaling and masking as the row arrives)
// This file: the CPU reference, the fp64 check, the row kernels' launcher, the workspace, the
// level table and the lesson.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/catalog.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/device_common.cuh"
#include "kernels/level_table.h"
#include "kernels/scale_mask_softmax/smx_row_group.cuh"
#include "kernels/scale_mask_softmax/smx_scale_mask.cuh"
#include "kernels/scale_mask_softmax/smx_softmax_rows.cuh"
#include "kernels/scale_mask_softmax/smx_unfused_rows.cuh"
#include "kernels/workspace.cuh"

namespace fl {
namespace {

constexpr double kScaleDouble = 0.125;  // s in double: the CPU reference and the fp64 check
// Raw scores q.k over d = 64 unit-variance components have standard deviation sqrt(64) = 8.
// Uniform on [-14, 14] has standard deviation 14 / sqrt(3) = 8.1, so after the 1/8 scale the
// logits have standard deviation ~1, which is what the 1/sqrt(d) scale is there to achieve:
// softmax rows that are neither flat nor one-hot (max/min probability up to e^3.5 = 33x).
constexpr float kInputLo = -14.0f, kInputHi = 14.0f;
constexpr int64_t kRowsDefault = int64_t(32) * 12 * 512;  // batch 32 x 12 heads x 512 queries
constexpr int64_t kLengthDefault = 512;                   // keys per row = sequence length
constexpr int64_t kLengthMax = 8192;
constexpr int64_t kMaxElements = int64_t(1) << 28;  // 256M scores: 1 GiB per fp32 tensor

// ---- CPU reference (double) ----------------------------------------------------------------

// P for `rows` rows of `length` scores: softmax over the keys j <= q of s * S[j], 0 beyond.
std::vector<double> softmax_reference(const std::vector<double>& scores, int64_t length) {
  std::vector<double> p(scores.size(), 0.0);
  const int64_t rows = length > 0 ? static_cast<int64_t>(scores.size()) / length : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double* s = scores.data() + r * length;
    double* out = p.data() + r * length;
    const int64_t q = r % length;
    double m = -INFINITY;
    for (int64_t j = 0; j <= q; ++j) m = std::max(m, kScaleDouble * s[j]);
    double d = 0;
    for (int64_t j = 0; j <= q; ++j) d += std::exp(kScaleDouble * s[j] - m);
    for (int64_t j = 0; j <= q; ++j) out[j] = std::exp(kScaleDouble * s[j] - m) / d;
  }
  return p;
}

// ---- the GPU's fp64 check ------------------------------------------------------------------

struct CheckSums {
  ErrorSums error;
  unsigned long long masked_nonzero;  // masked keys whose probability is not exactly 0
};

// One warp per row: the fp64 reference from S (max, sum, then each probability), compared with
// P as it goes. Reads the row of S three times; it runs once per measurement, not timed.
constexpr int kCheckWarps = kThreads / 32;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    check_kernel(const T* __restrict__ s, const T* __restrict__ p, int64_t rows, int length,
                 CheckSums* sums) {
  ErrorPartial partial;
  unsigned long long masked_nonzero = 0;
  const int lane = threadIdx.x & 31;
  for (int64_t row = int64_t(blockIdx.x) * kCheckWarps + (threadIdx.x >> 5); row < rows;
       row += int64_t(gridDim.x) * kCheckWarps) {
    const T* s_row = s + row * length;
    const T* p_row = p + row * length;
    const int q = static_cast<int>(row % length);
    double m = -INFINITY;
    for (int j = lane; j <= q; j += 32) m = fmax(m, kScaleDouble * Elem<T>::to_float(s_row[j]));
    for (int offset = 16; offset > 0; offset >>= 1)
      m = fmax(m, __shfl_xor_sync(0xffffffffu, m, offset));
    double d = 0;
    for (int j = lane; j <= q; j += 32) d += exp(kScaleDouble * Elem<T>::to_float(s_row[j]) - m);
    for (int offset = 16; offset > 0; offset >>= 1) d += __shfl_xor_sync(0xffffffffu, d, offset);
    for (int j = lane; j < length; j += 32) {
      const double out = Elem<T>::to_float(p_row[j]);
      const double ref = j <= q ? exp(kScaleDouble * Elem<T>::to_float(s_row[j]) - m) / d : 0.0;
      partial.add(out, ref);
      if (j > q && out != 0.0) ++masked_nonzero;
    }
  }
  if (masked_nonzero != 0) atomicAdd(&sums->masked_nonzero, masked_nonzero);
  block_accumulate(&sums->error, partial);
}

// ---- launchers -----------------------------------------------------------------------------

enum class RowKernel { max, exp_sum, divide, softmax, fused };

// Launches one row kernel with a row group of kRowThreads threads.
template <typename T, int kRowThreads>
Status launch_rows_with(RowKernel kernel, const T* in, T* out, float* row_max, float* row_sum,
                        int64_t rows, int length, cudaStream_t stream) {
  using Group = RowGroup<kRowThreads>;
  const unsigned blocks =
      static_cast<unsigned>((rows + Group::kRowsPerBlock - 1) / Group::kRowsPerBlock);
  constexpr int threads = Group::kBlockThreads;
  switch (kernel) {
    case RowKernel::max:
      row_max_kernel<T, kRowThreads><<<blocks, threads, 0, stream>>>(in, row_max, rows, length);
      break;
    case RowKernel::exp_sum:
      exp_sum_kernel<T, kRowThreads>
          <<<blocks, threads, 0, stream>>>(in, row_max, out, row_sum, rows, length);
      break;
    case RowKernel::divide:
      divide_kernel<T, kRowThreads><<<blocks, threads, 0, stream>>>(in, row_sum, out, rows, length);
      break;
    case RowKernel::softmax:
      softmax_rows_kernel<T, kRowThreads, false>
          <<<blocks, threads, 0, stream>>>(in, out, rows, length);
      break;
    case RowKernel::fused:
      softmax_rows_kernel<T, kRowThreads, true>
          <<<blocks, threads, 0, stream>>>(in, out, rows, length);
      break;
  }
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// The row group for this row length (row_threads_for); the softmax kernels must hold the whole
// row, so they refuse rows longer than kMaxRowThreads * kVecsPerThread vectors (L = 8192 fp32).
template <typename T>
Status launch_rows(RowKernel kernel, const T* in, T* out, float* row_max, float* row_sum,
                   int64_t rows, int length, cudaStream_t stream) {
  constexpr int kVec = Vec16<T>::kCount;
  const int vecs = (length + kVec - 1) / kVec;
  const bool in_registers = kernel == RowKernel::softmax || kernel == RowKernel::fused;
  if (in_registers && vecs > kMaxRowThreads * kVecsPerThread) {
    return Status::Error("scale_mask_softmax holds rows of up to " +
                         std::to_string(kMaxRowThreads * kVecsPerThread * kVec) +
                         " keys in registers; got " + std::to_string(length));
  }
  switch (row_threads_for(vecs)) {
    case 8:
      return launch_rows_with<T, 8>(kernel, in, out, row_max, row_sum, rows, length, stream);
    case 16:
      return launch_rows_with<T, 16>(kernel, in, out, row_max, row_sum, rows, length, stream);
    case 32:
      return launch_rows_with<T, 32>(kernel, in, out, row_max, row_sum, rows, length, stream);
    case 64:
      return launch_rows_with<T, 64>(kernel, in, out, row_max, row_sum, rows, length, stream);
    case 128:
      return launch_rows_with<T, 128>(kernel, in, out, row_max, row_sum, rows, length, stream);
    case 256:
      return launch_rows_with<T, 256>(kernel, in, out, row_max, row_sum, rows, length, stream);
    default:
      return launch_rows_with<T, 512>(kernel, in, out, row_max, row_sum, rows, length, stream);
  }
}

// ---- workspace -----------------------------------------------------------------------------

// Device buffers for one shape and element type: the scores S, the unfused chain's
// intermediates (s*S, masked, exponentials), the probabilities P and the fp32 row max and sum.
template <typename T>
class ScaleMaskSoftmaxWorkspace final : public LevelWorkspace<ScaleMaskSoftmaxWorkspace<T>>,
                                        RowWorkspaceBase {
 public:
  using RowWorkspaceBase::RowWorkspaceBase;  // (rows, keys per row L, tolerance)

  static const LevelTable<ScaleMaskSoftmaxWorkspace>& levels();  // the ladder, below

  Status allocate() {
    FL_TRY(allocate_elements<T>({{&s_, n_}, {&s1_, n_}, {&s2_, n_}, {&e_, n_}, {&p_, n_}}));
    FL_TRY(allocate_elements<float>({{&row_max_, rows_}, {&row_sum_, rows_}}));
    return sums_.allocate(sizeof(CheckSums));
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    return fill_uniform(s_.as<T>(), n_, seed, kInputLo, kInputHi, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    FL_TRY(poison_elements<T>({{&s1_, n_}, {&s2_, n_}, {&e_, n_}, {&p_, n_}}, stream));
    return poison_elements<float>({{&row_max_, rows_}, {&row_sum_, rows_}}, stream);
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    FL_CUDA_TRY(cudaMemsetAsync(sums_.get(), 0, sizeof(CheckSums), stream));
    check_kernel<T><<<warp_per_row_blocks(kThreads), kThreads, 0, stream>>>(
        s_.as<T>(), p_.as<T>(), rows_, length_, sums_.as<CheckSums>());
    FL_CUDA_TRY(cudaGetLastError());
    CheckSums host{};
    FL_CUDA_TRY(cudaMemcpyAsync(&host, sums_.get(), sizeof(host), cudaMemcpyDeviceToHost, stream));
    FL_CUDA_TRY(cudaStreamSynchronize(stream));
    *result = finish_check(host.error, tolerance_);
    // A masked key must get probability exactly 0, not merely a small one.
    if (host.masked_nonzero != 0) result->passed = false;
    return Status::Ok();
  }

  // Inputs: the scores S and, as a one-value tensor, the row length L the reference needs.
  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    FL_TRY(download_tensors<T>({{"S", s_.as<T>(), n_}}, stream, inputs));
    inputs->push_back(HostTensor{"row_length", {static_cast<double>(length_)}});
    return download_tensors<T>({{"P", p_.as<T>(), n_}}, stream, outputs);
  }

 private:
  // One of the row kernels, from `in` to `out`, with the row statistics m and d.
  Status rows(RowKernel kernel, const DeviceBuffer& in, const DeviceBuffer& out,
              cudaStream_t stream) {
    return launch_rows<T>(kernel, in.as<T>(), out.as<T>(), row_max_.as<float>(),
                          row_sum_.as<float>(), rows_, length_, stream);
  }

  DeviceBuffer s_, s1_, s2_, e_, p_;  // S, s*S, masked, exponentials, probabilities
  DeviceBuffer row_max_, row_sum_, sums_;
};

// ---- the level table -----------------------------------------------------------------------
// S, P and every intermediate are s rows x i = L keys of b bytes (d.tensor_bytes()); the row
// max m and sum d are fp32, one a row each (d.row_stat_bytes()).
// FLOPs per score: scale 1 (multiply), mask 0 (a select), max 1 (compare), exp-sum 3 (subtract,
// exponential counted as 1, add), divide 1.
template <typename T>
const LevelTable<ScaleMaskSoftmaxWorkspace<T>>& ScaleMaskSoftmaxWorkspace<T>::levels() {
  using Ws = ScaleMaskSoftmaxWorkspace;
  // Levels 0 and 1 start with the same two elementwise kernels.
  static const LaunchRow<Ws> scale = {
      "scale",
      [](Ws& w, cudaStream_t s) { return launch_scale(w.s_.as<T>(), w.s1_.as<T>(), w.n_, s); },
      [](const Dims& d) {
        return Textbook{d.tensor_bytes(), d.tensor_bytes(), 1.0 * d.elements()};
      }};
  static const LaunchRow<Ws> mask = {"mask",
                                     [](Ws& w, cudaStream_t s) {
                                       return launch_mask<T>(w.s1_.as<T>(), w.s2_.as<T>(), w.n_,
                                                             w.length_, s);
                                     },
                                     [](const Dims& d) {
                                       return Textbook{d.tensor_bytes(), d.tensor_bytes(), 0.0};
                                     }};
  static const LevelTable<Ws> table = {
      {"unfused",
       "five kernels (scale, mask, row max, exp-sum, divide); every intermediate round-trips "
       "through HBM",
       "only within a launch: every intermediate goes to HBM and back",
       {scale,
        mask,
        {"row_max",  // writes only m: the e it is handed stays untouched
         [](Ws& w, cudaStream_t s) { return w.rows(RowKernel::max, w.s2_, w.e_, s); },
         [](const Dims& d) {
           return Textbook{d.tensor_bytes(), d.row_stat_bytes(), 1.0 * d.elements()};
         }},
        {"exp_sum",
         [](Ws& w, cudaStream_t s) { return w.rows(RowKernel::exp_sum, w.s2_, w.e_, s); },
         [](const Dims& d) {
           return Textbook{d.tensor_bytes() + d.row_stat_bytes(),
                           d.tensor_bytes() + d.row_stat_bytes(), 3.0 * d.elements()};
         }},
        {"divide", [](Ws& w, cudaStream_t s) { return w.rows(RowKernel::divide, w.e_, w.p_, s); },
         [](const Dims& d) {
           return Textbook{d.tensor_bytes() + d.row_stat_bytes(), d.tensor_bytes(),
                           1.0 * d.elements()};
         }}}},
      {"softmax fused",
       "what PyTorch eager runs: scale and mask kernels, then one softmax kernel that keeps "
       "its row on chip",
       "the row, its max and its sum, in registers, within the softmax kernel",
       {scale,
        mask,
        {"softmax",
         [](Ws& w, cudaStream_t s) { return w.rows(RowKernel::softmax, w.s2_, w.p_, s); },
         [](const Dims& d) {
           return Textbook{d.tensor_bytes(), d.tensor_bytes(), 5.0 * d.elements()};
         }}}},
      {"fused",
       "one kernel: S read once, scaled and masked in registers, online softmax, P written "
       "once",
       "the scaled, masked row and its running max and sum, in registers",
       {{"scale_mask_softmax_fused",
         [](Ws& w, cudaStream_t s) { return w.rows(RowKernel::fused, w.s_, w.p_, s); },
         [](const Dims& d) {
           return Textbook{d.tensor_bytes(), d.tensor_bytes(), 6.0 * d.elements()};
         }}}},
  };
  return table;
}

// ---- the lesson ----------------------------------------------------------------------------

class ScaleMaskSoftmax final : public LevelLesson<ScaleMaskSoftmaxWorkspace<float>> {
 public:
  ScaleMaskSoftmax()
      : LevelLesson("scale_mask_softmax", "Scale + causal mask + softmax",
                    "P = softmax_rows(mask_causal(s * S)),  s = 1/sqrt(64), masked keys -> -inf",
                    {"rows", 1, kMaxElements / kLengthDefault, kRowsDefault,
                     "keys per row L (the sequence length)", kLengthDefault, kLengthMax}) {}

  int64_t workspace_bytes(Shape shape, Precision p) const override {
    shape = resolve(shape);
    // S, S1, S2, e, P, plus the fp32 row max and row sum.
    return 5 * shape.size * shape.inner * bytes_per_element(p) +
           2 * shape.size * int64_t(sizeof(float)) + int64_t(sizeof(CheckSums));
  }

  Status create_workspace(Shape shape, Precision p,
                          std::unique_ptr<Workspace>* out) const override {
    shape = resolve(shape);
    if (shape.size < 1) return Status::Error("scale_mask_softmax needs at least 1 row");
    if (shape.inner < 1 || shape.inner > kLengthMax) {
      return Status::Error("scale_mask_softmax takes rows of 1 to " + std::to_string(kLengthMax) +
                           " keys; got " + std::to_string(shape.inner));
    }
    if (shape.size * shape.inner > kMaxElements) {
      return Status::Error("scale_mask_softmax takes up to " + std::to_string(kMaxElements) +
                           " scores (rows x keys); " + std::to_string(shape.size) + " x " +
                           std::to_string(shape.inner) + " is more. At " +
                           std::to_string(shape.inner) + " keys the largest is " +
                           std::to_string(kMaxElements / shape.inner) + " rows.");
    }
    return make_workspace<ScaleMaskSoftmaxWorkspace>(p, out, shape.size,
                                                     static_cast<int>(shape.inner), tolerance(p));
  }

  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const auto& scores = inputs.at(0).values;
    const int64_t length = static_cast<int64_t>(inputs.at(1).values.at(0));
    return {HostTensor{"P", softmax_reference(scores, length)}};
  }

  // fp32: ex2.approx is within a few ulp and each row's sum adds at most a few dozen terms in
  // sequence (the rest is a tree): 3e-8 to 7e-8 measured, so 1e-5 leaves a wide margin.
  // bf16: P's own rounding to 8 significant bits gives ~1.5e-3, and the unfused chain rounds e
  // once more (0.7e-3 to 1.9e-3 measured); 1e-2 still catches any real mistake.
  double tolerance(Precision p) const override { return p == Precision::fp32 ? 1e-5 : 1e-2; }
};

}  // namespace

FL_DEFINE_LESSON(scale_mask_softmax, ScaleMaskSoftmax);

}  // namespace fl
