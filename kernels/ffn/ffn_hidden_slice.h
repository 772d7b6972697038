// The FFN's portable hidden-slice kernel (kernels/ffn/ffn_hidden_slice.cu): y = GELU(x W1 + b1)
// W2 + b2 at 1 to 64 tokens on any GPU from sm_80 (bf16) or sm_70 (fp32) whose shared memory
// holds a block's slice of both weights (ffn_hidden_slice_plan.h); no clusters, no TMA.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ffn/ffn_hidden_slice_plan.h"
#include "kernels/lesson.h"
#include "kernels/phases.h"
#include "kernels/status.h"

namespace fl {

struct FfnSliceBuffers {
  const void *x, *w1, *b1, *w2, *b2;  // x: m x C, W1: C x 4C, b1: 4C, W2: 4C x C, b2: C
  void* y;                            // m x C
  void* scratch;     // ffn_slice_scratch_bytes(), zeroed once when allocated (the kernel leaves
                     // its barrier counter's low 31 bits at zero)
  PhaseSink phases;  // stamps on when phases.records is set
  // W1 packed (ffn_slice_pack_w1) for slices of w1_packed_units, or null: read instead of W1's
  // columns where the switch is on (ffn_slice_w1_packed) and the launch's plan has those units.
  const void* w1_packed = nullptr;
  int w1_packed_units = 0;
};

// The phases each block records, in the order of their records' `phase`.
inline const std::vector<std::string>& ffn_slice_phases() {
  static const std::vector<std::string> names = {
      "copies asked for", "x and W1 in", "up-projection", "W2 in",
      "down-projection",  "hand-over",   "sum of y"};
  return names;
}

// Why the kernel cannot run this shape and precision on the current GPU, or Ok.
Status ffn_slice_supported(Precision p, int64_t m, int64_t c);
// The plan's choices a benchmark may override: hidden units a block (a multiple of 8; 0: the
// fewest that keep one block per SM); fp32's exact-row products up to rows_to tokens; W2's rows
// asked for after the up product where both would fit; warps a block. W1 in stages along K
// multiplied as they land, W2's rows asked for before x and W1, and W2 after the first stage
// measured slower and are gone (docs/PERFORMANCE.md).
struct FfnSliceTuning {
  int units = 0;
  int rows_to = kSliceRowsTo;  // fp32 up to this many tokens: exact-row products, no 16-row tiles
  bool w2_late = false;        // W2's rows asked for after the up product, as where they do not fit
  int warps = 0;               // 8, or 16 in bf16; 0: the plan's (FL_FFN_SLICE may set it)
  int shares = 0;  // bytes of a share's value: 4 (fp32) or, in bf16, 2; 0: the plan's (bf16 in
                   // bf16; FL_FFN_SLICE's second number may set it)
  bool w2_during_up = true;  // W2 late asked for under the up product where the plan allows
  bool x_ring = false;       // the ring form (bf16: x and W1 through a ring of K chunks) even
                             // where the resident forms fit (FL_FFN_SLICE's fifth number)
  int ring_stages = 0;       // its slots (2-4); 0: the most that fit
  int ring_form = 0;         // 0: the plan's; 1: W1 in the slots, W2 a share with each chunk; 2: W1
                             // resident, W2's rows each as soon as the W1 rows under it are done
                             // (FL_FFN_SLICE's seventh number)
  int prefetch = 0;          // blocks on the SMs the slices leave idle prefetch W2 into L2: 0 the
                             // plan's (the ring form's), 1 on, 2 off (FL_FFN_SLICE's eighth number)
  int stagger = 0;           // the ring's block b starts at chunk b mod chunks: 0 the plan's, 1 on,
                             // 2 off (FL_FFN_SLICE's ninth number)
  int walk = 0;      // the ring's copies of x: 0 the plan's (each thread's walk worked out once a
                     // launch), 2 stage() every chunk, the form before (FL_FFN_SLICE's tenth)
  int split = 0;     // the ring's up product with K split among warps (all of the slice's column
                     // tiles a warp): 0 the plan's, 1 on, 2 off: a warp's column tiles over all of
                     // K, the form before (FL_FFN_SLICE's eleventh number)
  int copies = 0;    // the resident copies: 0 the plan's (offsets stepped by constants), 2 stage()
                     // a copy (the form before), 3 stepped with W1's lines asked into L2
                     // first, 4 stepped with the column wrapping in x's and W2's rows, as
                     // before (FL_FFN_SLICE's twelfth number)
  int sum = 0;       // the sum of y's shuffle offset: 0 the plan's (worked out ahead), 2 divided
                     // out after the grid barrier, as before (FL_FFN_SLICE's thirteenth number)
  int barrier = 0;   // the grid barrier: 0 the plan's (an acq_rel atomic), 2 fences before and
                     // after, as before (FL_FFN_SLICE's fourteenth number)
  int direct = 0;    // the ring form's x: 0 the plan's (straight into registers where it fits:
                     // ffn_hidden_slice_direct.cuh), 1 that, 2 through the ring of K chunks
                     // (FL_FFN_SLICE's fifteenth number)
  int w2_early = 0;  // ring_direct: W2's rows that fit the unused slots asked for with W1; with
                     // w2_during_up, W2's rows past x and W1 asked for after them
                     // (ffn_slice_w2_early_resident): 0 the plan's, 1 both on, 2 both off,
                     // 3 ring_direct's on and the resident form's rows asked for once x and W1
                     // are in (FL_FFN_SLICE's sixteenth number)
  int deep = 0;      // ring_direct: x's first two batches of loads before W1's wait: 0 the plan's,
                     // 1 on, 2 off, one batch (FL_FFN_SLICE's seventeenth number)
  int w1_first = 0;  // the resident copies: W1's columns asked for before x's rows: 0 the plan's
                     // (W1's first where w2_during_up, else x's), 1 on, 2 off (FL_FFN_SLICE's
                     // eighteenth number)
  // The sum of y by groups, no grid barrier, where ffn_slice_groups_fit: 0 the plan's
  // (kSliceGroupSum with w2_during_up, kSliceGroupSumRing in the ring form), 1 on, 2 off, 3
  // groups of consecutive blocks, 4 polls without a sleep (FL_FFN_SLICE's nineteenth number).
  int groups = 0;
  // The ring form's h exchanged in groups of blocks, blocks / G shares of y instead of one a
  // block (ffn_slice_exchange): 0 the plan's (kSliceExchange), 1 on, 2 off, 4 or 8 on in groups
  // of that many blocks only (FL_FFN_SLICE's twentieth number).
  int exchange = 0;
};
// The scratch bytes of a launch with `tuning` (a tuning with more blocks than the plan's needs
// more: a share of y a block).
Status ffn_slice_scratch_bytes(Precision p, int64_t m, int64_t c, size_t* bytes,
                               FfnSliceTuning tuning = {});
// W1 packed: block s's slice, W1[:, units s .. units (s + 1)) (zero past 4C), as c rows of
// `units` contiguous values, the slices one after another: a block's W1 is one contiguous run
// of C x units values (48 KB in bf16 at C = 768, 32 units), where W1's columns are a 64-byte
// piece of each of C rows 6 KB apart. Made once when the weights are set up (not timed), for the
// plan's slice width; the same bytes are read. Whether launches read it: FL_FFN_W1_PACKED=0/1,
// else kSliceW1Packed.
size_t ffn_slice_packed_w1_bytes(Precision p, int64_t c);
Status ffn_slice_pack_w1(Precision p, const void* w1, int64_t m, int64_t c, void* packed,
                         int* units, cudaStream_t stream, FfnSliceTuning tuning = {});
bool ffn_slice_w1_packed();
Status launch_ffn_slice(Precision p, const FfnSliceBuffers& b, int64_t m, int64_t c,
                        cudaStream_t stream, FfnSliceTuning tuning = {});

}  // namespace fl
