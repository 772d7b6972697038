// The fp64 CPU reference of one decode step (model.h): straight loops in double, read in the
// order of the formulas. The step's own keys and values are used unrounded here; the kernels
// round them to bf16 when they append them to the cache, which is most of their error.
#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "kernels/gpt2_decode/model.h"

namespace fl {
namespace gpt2 {

double gelu_tanh(double v) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)));
}

namespace {

void layernorm(const double* x, const double* g, const double* b, double* out) {
  double mean = 0, var = 0;
  for (int c = 0; c < kC; ++c) mean += x[c];
  mean /= kC;
  for (int c = 0; c < kC; ++c) var += (x[c] - mean) * (x[c] - mean);
  const double rstd = 1.0 / std::sqrt(var / kC + kLnEps);
  for (int c = 0; c < kC; ++c) out[c] = (x[c] - mean) * rstd * g[c] + b[c];
}

// out[j][n] = in[j] . W[n] + bias[n] for t rows, W stored [n][k]: the rows of W split over the
// CPU's threads (the GPU tests run this reference at every level of many shapes).
void linear(const double* in, int t, const double* w, const double* bias, int n_out, int k_in,
            double* out) {
  auto part = [&](int n0, int n1) {
    for (int n = n0; n < n1; ++n) {
      const double* row = w + int64_t(n) * k_in;
      for (int j = 0; j < t; ++j) {
        double sum = bias[n];
        for (int k = 0; k < k_in; ++k) sum += in[int64_t(j) * k_in + k] * row[k];
        out[int64_t(j) * n_out + n] = sum;
      }
    }
  };
  const int threads = std::max(1, std::min(16, int(std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  const int step = (n_out + threads - 1) / threads;
  for (int n0 = step; n0 < n_out; n0 += step)
    pool.emplace_back(part, n0, std::min(n_out, n0 + step));
  part(0, std::min(n_out, step));
  for (std::thread& th : pool) th.join();
}

}  // namespace

std::vector<double> reference_step(const std::vector<double>& x_in,
                                   const std::vector<double>& weights,
                                   const std::vector<double>& k_cache,
                                   const std::vector<double>& v_cache, int t, int s) {
  const int positions = s + t;
  std::vector<double> x = x_in, a(int64_t(t) * kC), qkv(int64_t(t) * 3 * kC);
  std::vector<double> att(int64_t(t) * kC), h(int64_t(t) * kF), tmp(int64_t(t) * kC);
  std::vector<double> scores(positions);
  for (int layer = 0; layer < kLayers; ++layer) {
    const double* w = weights.data() + int64_t(layer) * LayerLayout::size;
    for (int j = 0; j < t; ++j)
      layernorm(&x[j * kC], w + LayerLayout::ln1_g, w + LayerLayout::ln1_b, &a[j * kC]);
    linear(a.data(), t, w + LayerLayout::w_qkv, w + LayerLayout::b_qkv, 3 * kC, kC, qkv.data());
    // key p of head hd: the cache below s, the step's own k rows from s on.
    auto key = [&](int hd, int p, int d) {
      if (p >= s) return qkv[int64_t(p - s) * 3 * kC + kC + hd * kHeadDim + d];
      return k_cache[((int64_t(layer) * kHeads + hd) * positions + p) * kHeadDim + d];
    };
    auto value = [&](int hd, int p, int d) {
      if (p >= s) return qkv[int64_t(p - s) * 3 * kC + 2 * kC + hd * kHeadDim + d];
      return v_cache[((int64_t(layer) * kHeads + hd) * positions + p) * kHeadDim + d];
    };
    for (int j = 0; j < t; ++j) {
      const double* q = &qkv[int64_t(j) * 3 * kC];
      for (int hd = 0; hd < kHeads; ++hd) {
        const int seen = s + j + 1;  // causal: token j sees positions 0..s+j
        double m = -INFINITY;
        for (int p = 0; p < seen; ++p) {
          double dot = 0;
          for (int d = 0; d < kHeadDim; ++d) dot += q[hd * kHeadDim + d] * key(hd, p, d);
          scores[p] = dot / std::sqrt(double(kHeadDim));
          m = std::max(m, scores[p]);
        }
        double l = 0;
        for (int p = 0; p < seen; ++p) l += (scores[p] = std::exp(scores[p] - m));
        for (int d = 0; d < kHeadDim; ++d) {
          double o = 0;
          for (int p = 0; p < seen; ++p) o += scores[p] * value(hd, p, d);
          att[j * kC + hd * kHeadDim + d] = o / l;
        }
      }
    }
    linear(att.data(), t, w + LayerLayout::w_proj, w + LayerLayout::b_proj, kC, kC, tmp.data());
    for (int64_t i = 0; i < int64_t(t) * kC; ++i) x[i] += tmp[i];
    for (int j = 0; j < t; ++j)
      layernorm(&x[j * kC], w + LayerLayout::ln2_g, w + LayerLayout::ln2_b, &a[j * kC]);
    linear(a.data(), t, w + LayerLayout::w_fc, w + LayerLayout::b_fc, kF, kC, h.data());
    for (double& v : h) v = gelu_tanh(v);
    linear(h.data(), t, w + LayerLayout::w_out, w + LayerLayout::b_out, kC, kF, tmp.data());
    for (int64_t i = 0; i < int64_t(t) * kC; ++i) x[i] += tmp[i];
  }
  std::vector<double> y(int64_t(t) * kC);
  for (int j = 0; j < t; ++j) {
    layernorm(&x[j * kC], weights.data() + kFinalLnG, weights.data() + kFinalLnG + kC, &y[j * kC]);
  }
  return y;
}

}  // namespace gpt2
}  // namespace fl
