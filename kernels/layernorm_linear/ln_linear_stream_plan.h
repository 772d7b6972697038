// How the portable small-token LayerNorm-Linear (kernels/layernorm_linear/ln_linear_stream.cu)
// cuts its work, in plain C++ so that a CPU test (tests/unit/stream_plan_test.cpp) checks it:
// token chunks of 16 mtc rows x column slices of 8 nt columns, one block each (block b: chunk
// b / slices, slice b % slices), every output once, shared memory within the GPU's.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/gemm_core/slice_plan.h"

namespace fl {

constexpr int kLnStreamMaxNT = 12;  // up to 96 columns a block

struct LnPlan {
  int m = 0, c = 0, n = 0, mtc = 1, nt = 1, slices = 0, blocks = 0;
  int ck = 0, ld_x = 0, ld_w = 0;
  // Shared memory: [x chunk | W slice] (the partial sums overlay them) | gamma, beta, bias
  // slice (fp32). Offsets in bytes.
  size_t off_w = 0, off_params = 0, smem = 0;
};

inline LnPlan ln_plan_for(int64_t m, int64_t c, int64_t n, int elem_bytes, int mtc, int nt) {
  LnPlan p;
  p.m = int(m), p.c = int(c), p.n = int(n), p.mtc = mtc, p.nt = nt;
  p.slices = int((n + 8 * nt - 1) / (8 * nt));
  p.blocks = p.slices * int((m + 16 * mtc - 1) / (16 * mtc));
  p.ck = slice::round_up(p.c, slice::k_step(elem_bytes));
  p.ld_x = slice::padded_ld(p.ck, elem_bytes);
  p.ld_w = slice::padded_ld(8 * nt, elem_bytes);
  const size_t e = size_t(elem_bytes);
  const size_t x = e * 16 * mtc * p.ld_x, w = e * p.ck * p.ld_w;
  p.off_w = x;
  p.off_params = std::max(x + w, slice::red_bytes(nt));
  p.smem = p.off_params + sizeof(float) * (2 * size_t(p.c) + 8 * nt);
  return p;
}

// The chunk (16 mtc rows) and slice width (8 nt columns) that move the fewest bytes per block,
// a second wave of blocks counting as a second block's bytes. False when nothing fits.
inline bool ln_choose_plan(int64_t m, int64_t c, int64_t n, int elem_bytes, int sms, int smem_optin,
                           LnPlan* out) {
  double best = -1;
  for (int mtc : {1, 2, 4}) {
    if (mtc > 1 && 16 * (mtc / 2) >= m) break;  // a bigger chunk than the tokens
    for (int nt = 1; nt <= kLnStreamMaxNT; ++nt) {
      const LnPlan p = ln_plan_for(m, c, n, elem_bytes, mtc, nt);
      if (p.smem > size_t(smem_optin)) continue;
      const double waves = (p.blocks + sms - 1) / sms;
      const double rows = double(std::min<int64_t>(m, 16 * mtc));
      const double cost = waves * elem_bytes * double(c) * (rows + 8.0 * nt);
      if (best < 0 || cost < best) best = cost, *out = p;
    }
  }
  return best >= 0;
}

}  // namespace fl
