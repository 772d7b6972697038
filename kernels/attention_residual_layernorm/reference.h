// The attention sublayer's CPU reference in double precision, from the stored inputs:
//   xn = LN1(x); qkv = xn W_qkv + b_qkv; a = causal attention of each head (lesson 9's reference,
//   on the heads split out of qkv); h = x + (a W_proj + b_proj); y = LN2(h).
// The LayerNorms are lesson 4's row reference (LN1 with a zero residual), the Linear layers the
// GEMM lessons' (reference_linear_row), the attention core the attention lesson's own reference:
// nothing of the arithmetic is written twice.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/gemm_common.cuh"
#include "kernels/layernorm_rows.cuh"
#include "kernels/lesson.h"

namespace fl {

const Lesson& attention_lesson();  // kernels/attention/attention.cu

namespace sublayer {

// Inputs, in download()'s order: x (B T x C), ln1 gamma and beta (C), W_qkv (C x 3C), b_qkv
// (3C), W_proj (C x C), b_proj (C), ln2 gamma and beta (C), dims {T, H}. Outputs: h, y (B T x C).
inline std::vector<HostTensor> reference(const std::vector<HostTensor>& in) {
  const std::vector<double>& x = in.at(0).values;
  const LinearInputs qkv_layer(in, 3), proj(in, 5);
  const int64_t length = static_cast<int64_t>(in.at(9).values.at(0));
  const int64_t heads = static_cast<int64_t>(in.at(9).values.at(1));
  const int64_t c = proj.n, d = c / heads, tokens = static_cast<int64_t>(x.size()) / c;
  const int64_t batch = tokens / length;
  // LN1 and the QKV projection, token by token; then q, k, v as heads x T x d for lesson 9.
  std::vector<double> zero(c, 0.0), unused(c), xn(c), row(3 * c);
  std::vector<double> q(tokens * c), k(tokens * c), v(tokens * c);
  for (int64_t m = 0; m < tokens; ++m) {
    layernorm_rows::residual_layernorm_row_reference(&x[m * c], zero.data(), in.at(1).values.data(),
                                                     in.at(2).values.data(), c, unused.data(),
                                                     xn.data());
    qkv_layer.row(xn.data(), row.data());
    const int64_t b = m / length, t = m % length;
    for (int64_t col = 0; col < c; ++col) {
      const int64_t at = ((b * heads + col / d) * length + t) * d + col % d;
      q[at] = row[col];
      k[at] = row[c + col];
      v[at] = row[2 * c + col];
    }
  }
  const std::vector<HostTensor> o = attention_lesson().reference(
      {{"q", q}, {"k", k}, {"v", v}, {"dims", {double(length), double(d)}}});
  // The heads side by side again, the output projection, the residual add and LN2.
  HostTensor h{"h", std::vector<double>(tokens * c)}, y{"y", std::vector<double>(tokens * c)};
  std::vector<double> a(c), r(c);
  for (int64_t m = 0; m < batch * length; ++m) {
    const int64_t b = m / length, t = m % length;
    for (int64_t col = 0; col < c; ++col) {
      a[col] = o[0].values[((b * heads + col / d) * length + t) * d + col % d];
    }
    proj.row(a.data(), r.data());
    layernorm_rows::residual_layernorm_row_reference(&x[m * c], r.data(), in.at(7).values.data(),
                                                     in.at(8).values.data(), c, &h.values[m * c],
                                                     &y.values[m * c]);
  }
  return {h, y};
}

}  // namespace sublayer
}  // namespace fl
