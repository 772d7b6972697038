// How the portable small-token FFN (kernels/ffn/ffn_stream.cu) cuts its work, in plain C++ so
// that a CPU test (tests/unit/stream_plan_test.cpp) checks what the kernel's correctness rests
// on: every hidden unit in one up slice, every (hidden unit, column) of W2 in one down tile,
// one block per SM at most (the blocks wait on each other), shared memory within the GPU's.
//
// Block b's up job: hidden units [8 nt b, 8 nt (b + 1)) (none past 4C: the last group's spare
// blocks). Its down job: group b / spg (the spg up slices of its group's blocks: kw hidden units)
// x column range b % spg (nw columns; none past C). A group's down tiles read only the h its own
// blocks make, so the hand-over is a barrier of the group's spg blocks; with one group there are
// no partial sums (each block writes its columns of y), with more the groups' partial sums of a
// column range meet at a barrier of the range's blocks, one a group.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/gemm_core/slice_plan.h"

namespace fl {

constexpr int kFfnUpMaxNT = 8;      // up to 64 hidden units a slice
constexpr int kFfnDownMaxNT = 12;   // up to 96 columns a down tile
constexpr int kFfnMaxGroups = 256;  // counters of each kind in the scratch buffer
// The plan's defaults (docs/PERFORMANCE.md has the other forms measured): 8 groups; beyond
// kFfnWideFrom - 1 tokens, in bf16, 32 hidden units an up slice and 16 warps a block.
constexpr int kFfnGroups = 8;
constexpr int64_t kFfnWideFrom = 17;

struct FfnPlan {
  int m = 0, c = 0, h = 0, mtc = 1;
  int nt = 1, warps = 8;       // up: slices of 8 nt hidden units, one a block; warps a block
  int spg = 1, groups = 0;     // up slices (and blocks) a group, groups
  int blocks = 0, ranges = 0;  // groups x spg; column ranges that hold columns (<= spg)
  int kw = 0, nw = 0;          // a down tile's rows (hidden units) and columns
  int ck = 0, kwk = 0, ld_x = 0, ld_w1 = 0, ld_w2 = 0, ld_h = 0;
  bool w2_late = false;       // W2's tile asked for after the up job (GPUs with less shared memory)
  bool w2_after_xw1 = false;  // else W2's tile asked for once x and W1 are in (bf16's choice)
  // Shared memory: [W2 tile | x, W1 (up) or h (down), and either's partial sums | b1, b2], or
  // with w2_late the W2 tile after h in the middle region. Offsets in bytes.
  size_t off_w2 = 0, off_x = 0, off_w1 = 0, off_bias = 0, smem = 0;
};

inline FfnPlan ffn_plan_for(int64_t m, int64_t c, int elem_bytes, int nt, int groups_wanted,
                            bool w2_late, int warps = slice::kWarps) {
  using slice::padded_ld;
  using slice::round_up;
  FfnPlan p;
  const int s = slice::k_step(elem_bytes);
  const size_t e = size_t(elem_bytes);
  p.m = int(m), p.c = int(c), p.h = int(4 * c);
  p.mtc = m <= 16 ? 1 : m <= 32 ? 2 : 4;
  p.nt = nt;
  p.warps = warps;
  const int up_blocks = (p.h + 8 * nt - 1) / (8 * nt);
  p.spg = (up_blocks + groups_wanted - 1) / groups_wanted;
  p.groups = (up_blocks + p.spg - 1) / p.spg;
  p.blocks = p.groups * p.spg;
  p.kw = p.spg * 8 * nt;
  p.nw = round_up((p.c + p.spg - 1) / p.spg, 8);
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
  const size_t red = slice::red_bytes(std::max(nt, p.nw / 8), warps);
  p.w2_late = w2_late;
  p.off_x = w2_late ? 0 : w2;
  p.off_w2 = w2_late ? down : 0;
  p.off_w1 = p.off_x + e * 16 * p.mtc * p.ld_x;
  p.off_bias = p.off_x + std::max({up, down + (w2_late ? w2 : 0), red});
  p.smem = p.off_bias + sizeof(float) * (8 * nt + p.nw);
  return p;
}

// W2's tile asked for once x and W1 are in (W1 then lands at the GPU's whole bandwidth and W2's
// copies run under the hand-over), where that measured faster: bf16.
inline bool ffn_default_w2_after_xw1(int elem_bytes) {
  return elem_bytes == 2;
}

// The block's warps at m tokens (0 in a tuning: this).
inline int ffn_default_warps(int64_t m, int elem_bytes) {
  return m >= kFfnWideFrom && elem_bytes == 2 ? 16 : 8;
}

// The plan at m tokens and hidden size c on a GPU of `sms` SMs and `smem_optin` bytes of shared
// memory per block: the fewest hidden units a slice that keep the grid within one block per SM,
// (or 8 nt_first, when given and more; 0: 32 units in bf16 from kFfnWideFrom tokens), then the
// fewest groups (from kFfnGroups, or `groups_first` when given) whose down tiles fit; W2's tile
// asked for with the rest where it fits, else after the up job; `warps` 0: ffn_default_warps.
// False when nothing fits.
inline bool ffn_choose_plan(int64_t m, int64_t c, int elem_bytes, int sms, int smem_optin,
                            FfnPlan* out, int groups_first = 0, int nt_first = 0, int warps = 0) {
  if (m < 1 || c < 1 || sms < 1) return false;
  if (warps == 0) warps = ffn_default_warps(m, elem_bytes);
  if (nt_first == 0 && m >= kFfnWideFrom && elem_bytes == 2) nt_first = 4;
  const int64_t units8 = (4 * c + 7) / 8;  // hidden units in 8s
  const int first_nt =
      std::max(nt_first, int(std::min<int64_t>(kFfnUpMaxNT, (units8 + sms - 1) / sms)));
  const int first_groups = groups_first > 0 ? groups_first : kFfnGroups;
  for (bool late : {false, true}) {
    for (int nt = first_nt; nt <= kFfnUpMaxNT; ++nt) {
      for (int groups = first_groups; groups <= 64; groups *= 2) {
        const FfnPlan p = ffn_plan_for(m, c, elem_bytes, nt, groups, late, warps);
        if (p.blocks > sms || p.groups > kFfnMaxGroups || p.spg > kFfnMaxGroups) continue;
        // + 64: the kernel's static shared memory
        if (p.nw / 8 > kFfnDownMaxNT || p.smem + 64 > size_t(smem_optin)) continue;
        *out = p;
        out->w2_after_xw1 = ffn_default_w2_after_xw1(elem_bytes);
        return true;
      }
    }
  }
  return false;
}

}  // namespace fl
