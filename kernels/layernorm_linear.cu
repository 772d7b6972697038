// Lesson 6, layernorm_linear: y = LN(x) W + b, x of tokens x C, W of C x 3C, b of 3C (GPT-2's
// ln_1 followed by the attention block's QKV projection, c_attn).
//
// The ladder: unfused is three kernels (layernorm writes xn = LN(x), lesson 4's one-kernel
// LayerNorm; a cuBLASLt GEMM writes t = xn W; add_bias writes y = t + b: xn and t round-trip
// through HBM); level 1 is the LayerNorm and then one cuBLASLt GEMM with the bias epilogue (t
// never exists); level 2 is one kernel of ours on tensor cores (kernels/tensor_gemm.cuh): each
// block computes its rows' mean and 1/std, normalizes x as its tiles land in shared memory (the
// GEMM's prologue) and adds the bias as it stores (the epilogue): xn never exists, and there is
// one launch instead of two. The level table below has every launch's bytes.
#include <cuda_bf16.h>

#include <cmath>
#include <memory>

#include "kernels/bias_ops.cuh"
#include "kernels/blas.h"
#include "kernels/catalog.h"
#include "kernels/device_buffer.h"
#include "kernels/gemm_common.cuh"
#include "kernels/layernorm_rows.cuh"
#include "kernels/level_table.h"
#include "kernels/tensor_gemm.cuh"
#include "kernels/workspace.cuh"

namespace fl {
namespace {

// ---- level 2: LayerNorm in the GEMM's prologue, bias in its epilogue -----------------------
// One kernel on our tensor-core core (kernels/tensor_gemm.cuh). A block owns a BM x BN tile of y:
//   1. prologue: the warps compute the mean and 1/std of the block's BM rows of x (all rows'
//      loads in flight at once; per-lane moments merged with Chan's formula), into shared memory,
//      while the first K-tiles are already on their way;
//   2. main loop: cp.async brings x and W tiles into the shared-memory ring; as an x tile lands,
//      each thread normalizes the chunks it copied, in place, (x - mean) * rstd * gamma + beta,
//      rounded to the lesson's precision as level 0's xn would be; then the warps multiply;
//   3. epilogue: y = acc + b, one rounding, stored straight from the accumulators.
// xn never exists in HBM. The price: each block reads its x rows once more for the statistics
// (from L2: the main loop reads the same rows), N / BN times over the whole GEMM.
// Tiles, by token count (at few tokens the GEMM streams W, and what matters is how many bytes
// of it are in flight; at many it is the tensor cores' arithmetic):
//   up to 16 tokens: 16 x 32 with 2 multiplying warps of 8, 128-byte K-tiles, 8 stages (28 KB of
//                    W in flight per block, 72 blocks at C = 768);
//   fewer 128 x 128 tiles than SMs: 64 x 32 with 4 multiplying warps of 8, 128-byte K-tiles,
//                    6 stages;
//   otherwise:       128 x 128 with 8 warps (64 x 32 each), 64-byte K-tiles, 4 stages.
using LnGemmTiny = tc::TileConfig<16, 32, 1, 2, 8, 128, 256>;
using LnGemmSmall = tc::TileConfig<64, 32, 2, 2, 6, 128, 256>;
using LnGemmBig = tc::TileConfig<128, 128, 2, 4, 4>;

// Mean and 1/std of `rows` rows of x from m0, a warp per kRows rows: every load of every row is
// issued before any is summed (a warp walking its rows one by one would wait for one DRAM round
// trip per row). Each lane keeps, per row, a count, a mean and a sum of squared deviations of the
// values it saw (shifted by its first value, so nothing cancels), and the lanes are merged with
// Chan's formula for combining variances.
struct Moments {
  float n = 0, mean = 0, m2 = 0;
  __device__ void merge(const Moments& o) {
    const float total = n + o.n;
    if (o.n == 0) return;
    const float delta = o.mean - mean, w = o.n / total;
    mean += delta * w;
    m2 += o.m2 + delta * delta * n * w;
    n = total;
  }
};

template <typename T, int kThreads, int kRows, bool kVectorized>
__device__ void row_statistics(const T* x, int64_t m, int k, int64_t m0, float* mean, float* rstd) {
  constexpr int E = kVectorized ? tc::kVec<T> : 1;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r0 = warp * kRows;
  float n[kRows] = {}, shift[kRows] = {}, sum[kRows] = {}, sq[kRows] = {};
  for (int c = lane * E; c < k; c += 32 * E) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (m0 + r0 + r >= m) continue;
      const T* p = x + (m0 + r0 + r) * k + c;
      float v[E];
      if constexpr (kVectorized) {
        const Vec16<T> chunk = load16(p);
#pragma unroll
        for (int e = 0; e < E; ++e) v[e] = Elem<T>::to_float(chunk.v[e]);
      } else {
        v[0] = Elem<T>::to_float(*p);
      }
      if (n[r] == 0) shift[r] = v[0];
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const float d = v[e] - shift[r];
        sum[r] += d;
        sq[r] += d * d;
      }
      n[r] += E;
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    Moments mo;
    if (n[r] > 0) mo = Moments{n[r], shift[r] + sum[r] / n[r], sq[r] - sum[r] * sum[r] / n[r]};
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      Moments other{__shfl_xor_sync(0xffffffffu, mo.n, offset),
                    __shfl_xor_sync(0xffffffffu, mo.mean, offset),
                    __shfl_xor_sync(0xffffffffu, mo.m2, offset)};
      if (mo.n == 0) {
        mo = other;
      } else {
        mo.merge(other);
      }
    }
    if (lane == 0) {
      const bool valid = m0 + r0 + r < m;
      const float inv = valid ? rsqrtf(fmaxf(mo.m2 / k, 0.0f) + float(gemm::kLayerNormEps)) : 0.0f;
      mean[r0 + r] = valid ? mo.mean : 0.0f;
      rstd[r0 + r] = inv;
    }
  }
}

template <typename T, class Cfg, bool kVectorized>
__global__ void __launch_bounds__(Cfg::kThreads)
    ln_gemm_bias_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                        const T* __restrict__ beta, const T* __restrict__ w,
                        const T* __restrict__ bias, T* __restrict__ y, int64_t m, int k, int n) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* ring = reinterpret_cast<T*>(smem);
  float* s_mean = reinterpret_cast<float*>(smem + tc::ring_bytes<T, Cfg>());
  float* s_rstd = s_mean + Cfg::kBM;
  float* s_gamma = s_rstd + Cfg::kBM;  // k of each, as fp32: the normalization reads them
  const int k_padded = (k + tc::kBK<T, Cfg> - 1) / tc::kBK<T, Cfg> * tc::kBK<T, Cfg>;
  float* s_beta = s_gamma + k_padded;  // from shared memory, never from HBM inside the loop
  const int64_t m0 = int64_t(blockIdx.y) * Cfg::kBM, n0 = int64_t(blockIdx.x) * Cfg::kBN;

  // Normalizes, in place, the 16-byte chunks of a landed x tile that this thread copied:
  // one 16-byte shared load and store per chunk, gamma and beta read as fp32 from shared memory.
  auto normalize = [&](T* tile, int ld, int64_t k0) {
    constexpr int E = tc::kVec<T>, kChunksPerRow = tc::kBK<T, Cfg> / E;
#pragma unroll
    for (int i = threadIdx.x; i < Cfg::kBM * kChunksPerRow; i += Cfg::kThreads) {
      const int r = i / kChunksPerRow, c = (i % kChunksPerRow) * E;
      const float rstd = s_rstd[r], shift = -s_mean[r] * rstd;  // xn = x rstd - mean rstd
      Vec16<T>* p = reinterpret_cast<Vec16<T>*>(tile + r * ld + c);
      Vec16<T> v = *p;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int64_t kk = k0 + c + e;  // gamma and beta are zero past k: so is the result
        const float xn = fmaf(Elem<T>::to_float(v.v[e]), rstd, shift);
        v.v[e] = Elem<T>::from_float(fmaf(xn, s_gamma[kk], s_beta[kk]));
      }
      *p = v;
    }
  };
  // The statistics (and gamma, beta) load while the first K-tiles are already in flight.
  auto statistics = [&]() {
    for (int i = threadIdx.x; i < k_padded; i += Cfg::kThreads) {
      s_gamma[i] = i < k ? Elem<T>::to_float(gamma[i]) : 0.0f;
      s_beta[i] = i < k ? Elem<T>::to_float(beta[i]) : 0.0f;
    }
    row_statistics<T, Cfg::kThreads, Cfg::kBM / (Cfg::kThreads / 32), kVectorized>(x, m, k, m0,
                                                                                   s_mean, s_rstd);
    __syncthreads();
  };

  float acc[Cfg::kMT][Cfg::kNT][4] = {};
  tc::block_mainloop<T, Cfg, kVectorized>(acc, ring, x, k, w, n, m, n, k, m0, n0, normalize,
                                          statistics);
  const bool pairs = n % 2 == 0;
  tc::for_each_pair<Cfg>(acc, [&](int r, int c, float v0, float v1) {
    const int64_t row = m0 + r, col = n0 + c;
    if (row >= m || col >= n) return;
    v0 += Elem<T>::to_float(bias[col]);
    if (col + 1 < n) v1 += Elem<T>::to_float(bias[col + 1]);
    tc::store_pair(y, n, row, col, v0, v1, pairs);
  });
}

template <typename T, class Cfg, bool kVectorized>
Status launch_ln_gemm_config(const T* x, const T* gamma, const T* beta, const T* w, const T* bias,
                             T* y, int64_t m, int k, int n, cudaStream_t stream) {
  const int k_padded = (k + tc::kBK<T, Cfg> - 1) / tc::kBK<T, Cfg> * tc::kBK<T, Cfg>;
  const size_t smem =
      tc::ring_bytes<T, Cfg>() + (2 * Cfg::kBM + 2 * size_t(k_padded)) * sizeof(float);
  auto kernel = ln_gemm_bias_kernel<T, Cfg, kVectorized>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>((n + Cfg::kBN - 1) / Cfg::kBN),
                  static_cast<unsigned>((m + Cfg::kBM - 1) / Cfg::kBM));
  kernel<<<grid, Cfg::kThreads, smem, stream>>>(x, gamma, beta, w, bias, y, m, k, n);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

template <typename T>
Status launch_ln_gemm_bias(const T* x, const T* gamma, const T* beta, const T* w, const T* bias,
                           T* y, int64_t m, int k, int n, cudaStream_t stream) {
  int device = 0, sms = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const bool vec = tc::vector_ok<T>(x, k) && tc::vector_ok<T>(w, n);
  auto go = [&](auto config) -> Status {
    using Cfg = decltype(config);
    if (vec)
      return launch_ln_gemm_config<T, Cfg, true>(x, gamma, beta, w, bias, y, m, k, n, stream);
    return launch_ln_gemm_config<T, Cfg, false>(x, gamma, beta, w, bias, y, m, k, n, stream);
  };
  if (m <= 16) return go(LnGemmTiny{});
  if (((m + 127) / 128) * ((n + 127) / 128) < sms) return go(LnGemmSmall{});
  return go(LnGemmBig{});
}

// Device buffers for one shape and element type: x, gamma, beta, W, b, the unfused chain's xn
// and t, y, and the cuBLASLt plans.
template <typename T>
class LayerNormLinearWorkspace final : public LevelWorkspace<LayerNormLinearWorkspace<T>> {
 public:
  LayerNormLinearWorkspace(int64_t m, int64_t c, double tolerance)
      : m_(m), k_(c), n_(3 * c), tolerance_(tolerance) {}

  static const LevelTable<LayerNormLinearWorkspace>& levels();  // the ladder, below

  Status allocate() {
    FL_TRY(allocate_elements<T>({{&x_, m_ * k_},
                                 {&gamma_, k_},
                                 {&beta_, k_},
                                 {&w_, k_ * n_},
                                 {&b_, n_},
                                 {&xn_, m_ * k_},
                                 {&t_, m_ * n_},
                                 {&y_, m_ * n_}}));
    FL_TRY(sums_.allocate(sizeof(ErrorSums)));
    const Precision p = precision_of<T>();
    FL_TRY(blas::Gemm::plan(m_, n_, k_, p, blas::Epilogue::none, &gemm_));
    return blas::Gemm::plan(m_, n_, k_, p, blas::Epilogue::bias, &gemm_bias_);
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    // x off-centre (a residual stream's mean is not 0), so the normalization matters.
    FL_TRY(fill_uniform(x_.as<T>(), m_ * k_, seed, -1.0f, 3.0f, stream));
    FL_TRY(fill_uniform(gamma_.as<T>(), k_, mix64(seed ^ 0x6A77ull), gemm::kGammaLo, gemm::kGammaHi,
                        stream));
    FL_TRY(fill_uniform(beta_.as<T>(), k_, mix64(seed ^ 0xBE7Aull), gemm::kBetaLo, gemm::kBetaHi,
                        stream));
    return gemm::fill_linear(w_.as<T>(), b_.as<T>(), k_, n_, seed, 0, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    return poison_elements<T>({{&xn_, m_ * k_}, {&t_, m_ * n_}, {&y_, m_ * n_}}, stream);
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    const gemm::CheckArgs<T> a{x_.as<T>(), gamma_.as<T>(), beta_.as<T>(), w_.as<T>(),
                               b_.as<T>(), nullptr,        nullptr,       y_.as<T>(),
                               m_,         int(k_),        int(n_),       0};
    return check_gemm_rows<T, true, false, false>(a, sums_, tolerance_, stream, result);
  }

  // Inputs x (M x C), gamma, beta (C), W (C x 3C), b (3C); output y.
  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    FL_TRY(download_tensors<T>({{"x", x_.as<T>(), m_ * k_},
                                {"gamma", gamma_.as<T>(), k_},
                                {"beta", beta_.as<T>(), k_},
                                {"W", w_.as<T>(), k_ * n_},
                                {"b", b_.as<T>(), n_}},
                               stream, inputs));
    return download_tensors<T>({{"y", y_.as<T>(), m_ * n_}}, stream, outputs);
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

  int64_t m_, k_, n_;
  double tolerance_;
  DeviceBuffer x_, gamma_, beta_, w_, b_, xn_, t_, y_, sums_;
  std::unique_ptr<blas::Gemm> gemm_, gemm_bias_;
};

// ---- the level table -----------------------------------------------------------------------
// M = s tokens, K = i = C, N = 3C, b bytes per element. LayerNorm reads x (M K) and gamma, beta
// (2 K) and writes M K, 8 flops per element; the GEMM reads xn (M K) and W (K N) and writes
// M N, 2 M N K flops; the bias is read once (N), 1 flop per element of the product.
int64_t x_bytes(const Dims& d) {
  return d.s * d.i * d.b;
}  // x or xn: M x K
int64_t product_bytes(const Dims& d) {
  return d.s * 3 * d.i * d.b;
}  // t or y: M x N
int64_t weights_bytes(const Dims& d) {
  return d.i * 3 * d.i * d.b;
}  // W: K x N
int64_t bias_bytes(const Dims& d) {
  return 3 * d.i * d.b;
}
double gemm_flops(const Dims& d) {
  return 2.0 * d.s * (3 * d.i) * d.i;
}
double layernorm_flops(const Dims& d) {
  return 8.0 * d.s * d.i;
}
double bias_flops(const Dims& d) {
  return 1.0 * d.s * (3 * d.i);
}

template <typename T>
const LevelTable<LayerNormLinearWorkspace<T>>& LayerNormLinearWorkspace<T>::levels() {
  using Ws = LayerNormLinearWorkspace;
  // Levels 0 and 1 start with the same LayerNorm.
  static const LaunchRow<Ws> layernorm = {
      "layernorm", [](Ws& w, cudaStream_t s) { return w.layernorm(s); },
      [](const Dims& d) {
        return Textbook{x_bytes(d) + 2 * d.i * d.b, x_bytes(d), layernorm_flops(d)};
      }};
  static const LevelTable<Ws> table = {
      {"unfused",
       "LayerNorm, cuBLASLt GEMM and bias as three kernels: xn and the product round-trip "
       "through HBM",
       "the LayerNorm's rows and the GEMM's tiles, each within its launch; xn and t go to HBM "
       "and back",
       {layernorm,
        {"gemm",
         [](Ws& w, cudaStream_t s) {
           return w.gemm_->run(w.xn_.as<T>(), w.w_.as<T>(), nullptr, w.t_.as<T>(), s);
         },
         [](const Dims& d) {
           return Textbook{x_bytes(d) + weights_bytes(d), product_bytes(d), gemm_flops(d)};
         }},
        {"add_bias",
         [](Ws& w, cudaStream_t s) {
           return launch_bias_op(w.t_.as<T>(), w.b_.as<T>(), w.y_.as<T>(), w.m_ * w.n_, w.n_,
                                 AddBiasOp{}, s);
         },
         [](const Dims& d) {
           return Textbook{product_bytes(d) + bias_bytes(d), product_bytes(d), bias_flops(d)};
         }}}},
      {"epilogue",
       "LayerNorm, then one cuBLASLt GEMM with a bias epilogue",
       "the GEMM's tiles, and the product, biased in registers before its store; xn goes to "
       "HBM and back",
       {layernorm,
        {"gemm_bias",
         [](Ws& w, cudaStream_t s) {
           return w.gemm_bias_->run(w.xn_.as<T>(), w.w_.as<T>(), w.b_.as<T>(), w.y_.as<T>(), s);
         },
         [](const Dims& d) {
           return Textbook{x_bytes(d) + weights_bytes(d) + bias_bytes(d), product_bytes(d),
                           gemm_flops(d) + bias_flops(d)};
         }}}},
      {"prologue",
       "one kernel on tensor cores: row statistics and LayerNorm in the GEMM's prologue, bias in "
       "its epilogue; xn never exists",
       "the rows' mean and 1/std, gamma and beta, and each x tile, normalized in shared memory "
       "as it lands",
       {{"ln_gemm_bias",
         [](Ws& w, cudaStream_t s) {
           return launch_ln_gemm_bias(w.x_.as<T>(), w.gamma_.as<T>(), w.beta_.as<T>(), w.w_.as<T>(),
                                      w.b_.as<T>(), w.y_.as<T>(), w.m_, static_cast<int>(w.k_),
                                      static_cast<int>(w.n_), s);
         },
         // The statistics re-read x from L2: not counted.
         [](const Dims& d) {
           return Textbook{x_bytes(d) + weights_bytes(d) + 2 * d.i * d.b + bias_bytes(d),
                           product_bytes(d), gemm_flops(d) + layernorm_flops(d) + bias_flops(d)};
         }}}},
  };
  return table;
}

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
  // x and xn (M x C), gamma and beta (C), W (C x 3C), b (3C), and t, y (M x 3C).
  int64_t buffer_bytes(int64_t m, int64_t c, int64_t b) const override {
    const int64_t n = 3 * c;
    return (2 * m * c + 2 * c + c * n + n + 2 * m * n) * b;
  }
};

}  // namespace

FL_DEFINE_LESSON(layernorm_linear, LayerNormLinear);

}  // namespace fl
