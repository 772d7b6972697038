// Lesson 9's CPU reference in double precision (plain C++): causal attention of every head,
// O = softmax(mask(Q K^T / sqrt(d))) V, key j visible to query i when j <= i.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace fl::attention {

// q, k, v: heads x length x dim, each head contiguous; returns o of the same shape.
inline std::vector<double> causal_attention_reference(const std::vector<double>& q,
                                                      const std::vector<double>& k,
                                                      const std::vector<double>& v, int64_t length,
                                                      int64_t dim) {
  const int64_t heads = static_cast<int64_t>(q.size()) / (length * dim);
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  std::vector<double> o(q.size(), 0.0), p(length);
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t base = h * length * dim;
    for (int64_t i = 0; i < length; ++i) {
      double m = -INFINITY, l = 0;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < dim; ++c) dot += q[base + i * dim + c] * k[base + j * dim + c];
        p[j] = scale * dot;
        m = std::max(m, p[j]);
      }
      for (int64_t j = 0; j <= i; ++j) l += (p[j] = std::exp(p[j] - m));
      double* out = &o[base + i * dim];
      for (int64_t j = 0; j <= i; ++j) {
        for (int64_t c = 0; c < dim; ++c) out[c] += p[j] / l * v[base + j * dim + c];
      }
    }
  }
  return o;
}

}  // namespace fl::attention
