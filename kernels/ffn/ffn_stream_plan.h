// How the portable small-token FFN (kernels/ffn/ffn_stream.cu) cuts its work, in plain C++ so
// that a CPU test (tests/unit/stream_plan_test.cpp) checks what the kernel's correctness rests
// on: every hidden unit in one up slice, every (hidden unit, column) of W2 in one down tile,
// one block per SM at most (the blocks wait on each other), shared memory within the GPU's.
//
// Block b's up job: hidden units [8 nt b, 8 nt (b + 1)). Its down job, when b < groups x
// ranges: group b / ranges (spg consecutive up slices: kw hidden units) x column range
// b % ranges (nw columns).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/gemm_core/slice_plan.h"

namespace fl {

constexpr int kFfnUpMaxNT = 8;      // up to 64 hidden units a slice
constexpr int kFfnDownMaxNT = 12;   // up to 96 columns a down tile
constexpr int kFfnMaxGroups = 256;  // counters of each kind in the scratch buffer

struct FfnPlan {
  int m = 0, c = 0, h = 0, mtc = 1;
  int nt = 1, blocks = 0;               // up: slices of 8 nt hidden units, one a block
  int spg = 1, groups = 0, ranges = 0;  // down: slices per group, groups, column ranges
  int kw = 0, nw = 0;                   // a down tile's rows (hidden units) and columns
  int ck = 0, kwk = 0, ld_x = 0, ld_w1 = 0, ld_w2 = 0, ld_h = 0;
  bool w2_late = false;  // W2's tile asked for after the up job (GPUs with less shared memory)
  // Shared memory: [W2 tile | x, W1 (up) or h (down), and either's partial sums | b1, b2], or
  // with w2_late the W2 tile after h in the middle region. Offsets in bytes.
  size_t off_w2 = 0, off_x = 0, off_w1 = 0, off_bias = 0, smem = 0;
};

inline FfnPlan ffn_plan_for(int64_t m, int64_t c, int elem_bytes, int nt, int groups_wanted,
                            bool w2_late) {
  using slice::padded_ld;
  using slice::round_up;
  FfnPlan p;
  const int s = slice::k_step(elem_bytes);
  const size_t e = size_t(elem_bytes);
  p.m = int(m), p.c = int(c), p.h = int(4 * c);
  p.mtc = m <= 16 ? 1 : m <= 32 ? 2 : 4;
  p.nt = nt;
  p.blocks = (p.h + 8 * nt - 1) / (8 * nt);
  p.spg = (p.blocks + groups_wanted - 1) / groups_wanted;
  p.groups = (p.blocks + p.spg - 1) / p.spg;
  p.kw = p.spg * 8 * nt;
  const int per_group = p.blocks / p.groups;  // blocks for the ranges of one group
  p.nw = round_up((p.c + per_group - 1) / per_group, 8);
  p.ranges = (p.c + p.nw - 1) / p.nw;
  p.ck = round_up(p.c, s);
  p.kwk = round_up(p.kw, s);
  p.ld_x = padded_ld(p.ck, elem_bytes);
  p.ld_w1 = padded_ld(8 * nt, elem_bytes);
  p.ld_w2 = padded_ld(p.nw, elem_bytes);
  p.ld_h = padded_ld(p.kwk, elem_bytes);
  const size_t w2 = e * p.kwk * p.ld_w2;
  const size_t up = e * (size_t(16) * p.mtc * p.ld_x + size_t(p.ck) * p.ld_w1);
  const size_t down = e * 16 * p.mtc * p.ld_h;
  const size_t red = slice::red_bytes(std::max(nt, p.nw / 8));
  p.w2_late = w2_late;
  p.off_x = w2_late ? 0 : w2;
  p.off_w2 = w2_late ? down : 0;
  p.off_w1 = p.off_x + e * 16 * p.mtc * p.ld_x;
  p.off_bias = p.off_x + std::max({up, down + (w2_late ? w2 : 0), red});
  p.smem = p.off_bias + sizeof(float) * (8 * nt + p.nw);
  return p;
}

// The plan at m tokens and hidden size c on a GPU of `sms` SMs and `smem_optin` bytes of shared
// memory per block: the fewest hidden units a slice that keep the grid within one block per SM,
// (or 8 nt_first, when given and more), then the fewest groups (8 or more, or `groups_first` or
// more when given) whose column ranges fit a down tile; W2's tile asked for
// with the rest where it fits, else after the up job. False when nothing fits.
inline bool ffn_choose_plan(int64_t m, int64_t c, int elem_bytes, int sms, int smem_optin,
                            FfnPlan* out, int groups_first = 0, int nt_first = 0) {
  const int64_t units8 = (4 * c + 7) / 8;  // hidden units in 8s
  const int first_nt =
      std::max(nt_first, int(std::min<int64_t>(kFfnUpMaxNT, (units8 + sms - 1) / sms)));
  for (bool late : {false, true}) {
    for (int nt = first_nt; nt <= kFfnUpMaxNT; ++nt) {
      for (int groups = groups_first > 0 ? groups_first : 8; groups <= 64; groups *= 2) {
        const FfnPlan p = ffn_plan_for(m, c, elem_bytes, nt, groups, late);
        if (p.blocks > sms || p.groups > kFfnMaxGroups || p.ranges > kFfnMaxGroups) break;
        // + 64: the kernel's static shared memory
        if (p.nw / 8 > kFfnDownMaxNT || p.smem + 64 > size_t(smem_optin)) continue;
        *out = p;
        return true;
      }
    }
  }
  return false;
}

}  // namespace fl
