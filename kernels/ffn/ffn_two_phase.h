// The FFN's portable two-phase kernel (kernels/ffn/ffn_two_phase.cu): y = GELU(x W1 + b1) W2 + b2
// at 1 to 64 tokens in bf16 on any GPU from sm_80 whose shared memory holds its plan
// (ffn_two_phase_plan.h); no clusters, no TMA. h goes through L2, one grid barrier.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ffn/ffn_two_phase_plan.h"
#include "kernels/lesson.h"
#include "kernels/phases.h"
#include "kernels/status.h"

namespace fl {

struct FfnTwoPhaseBuffers {
  const void *x, *w1, *b1, *w2, *b2;  // x: m x C, W1: C x 4C, b1: 4C, W2: 4C x C, b2: C
  void* y;                            // m x C
  void* h;                            // m x 4C: GELU(x W1 + b1), written in phase 1, read in 2
  void* scratch;          // ffn_two_phase_scratch_bytes(), zeroed once when allocated (left zero)
  PhaseSink phases = {};  // stamps on when phases.records is set
};

// The phases each block records, in the order of their records' `phase` (a block without a
// down tile leaves its last four zero long, and only a column tile's last block writes y).
inline const std::vector<std::string>& ffn_two_phase_phases() {
  static const std::vector<std::string> names = {"up product (x and W1 through the ring)",
                                                 "h stored, W2 asked for, grid barrier",
                                                 "W2's and h's tiles in",
                                                 "down product",
                                                 "partial sums added (reds)",
                                                 "y written (a column tile's last block)"};
  return names;
}

// The plan's choices a benchmark may override (FL_FFN_TWO_PHASE="stages,down_cols,prefetch,kib"):
// the ring's slots (0: the most that fit), y's columns a down tile (0: the plan's), whether each
// block asks L2 for its W2 tile at the start (0: the plan's, off; 1 on; 2 off), and the shared
// memory a block the plan may take, in KiB (0: the GPU's, or the chosen GPU's under
// --choose-as; 99 plans a variant forced with --variant as an RTX 30/40 card would run it).
// FL_FFN_TWO_PHASE=off: the launch says it cannot run, so the level table takes its next choice.
// FL_FFN_TWO_PHASE_ROTATE=1 / 2 sets `rotate` (block b's ring starts at K chunk b % chunks, or
// every block at chunk 0); FL_FFN_TWO_PHASE_UP_COLS=32 widens the up tiles (h's columns a block
// in phase 1) to at least 32.
struct FfnTwoPhaseTuning {
  int stages = 0;
  int down_cols = 0;
  int prefetch = 0;
  int kib = 0;
  int rotate = 0;  // the ring's K order: 0 the plan's (every block from chunk 0), 1 rotated, 2 not
  int direct = 0;  // phase 1's up tiles: 0 the plan's (kTwoPhaseDirect), 1 direct (x's fragments
                   // straight into registers, W1's tile resident; direct_x.cuh), 2 the ring
};

// Why the kernel cannot run this shape and precision on the current GPU (with the shared memory
// a block that a choice as an older GPU plans with), or Ok.
Status ffn_two_phase_supported(Precision p, int64_t m, int64_t c);
Status ffn_two_phase_scratch_bytes(Precision p, int64_t m, int64_t c, size_t* bytes);
Status launch_ffn_two_phase(Precision p, const FfnTwoPhaseBuffers& b, int64_t m, int64_t c,
                            cudaStream_t stream, FfnTwoPhaseTuning tuning = {});

}  // namespace fl
