// Where each tensor of a fusion level went, decided from the measured DRAM bytes against the
// level's textbook bytes: the one answer the flow view, the memory chart and their sentences
// share, so that no picture or word says "on chip" where the counters saw the tensor in HBM.
//
// Two kinds of tensor:
//  - an intermediate that one launch of the level writes and a later one reads back: by design
//    it goes to HBM; it stayed in L2 where its writer's DRAM writes or its reader's DRAM reads
//    fall under half the textbook bytes (the size fits in L2);
//  - a value the level table keeps on chip (a level-0 intermediate whose producer no longer
//    launches here, "gelu output" in the fused FFN): it went through HBM where the level's DRAM
//    writes exceed its textbook writes by about that value's size (0.4x to 1.6x of it), and its
//    reads by at least 0.4x of it too (only the writes: L2 wrote it back, the reads came from L2).
// The excess is taken over the whole level (every launch's measured bytes minus its textbook
// bytes), so dirty lines that one launch leaves and the next writes back cancel out.
// Without counters every tensor is where the design puts it, and `measured` is false.
#pragma once

#include <string>
#include <vector>

#include "kernels/lesson.h"
#include "model/results.h"

namespace fl::viz {

enum class TensorHome { hbm, l2, on_chip };
const char* to_string(TensorHome home);  // "HBM", "L2", "on chip"

struct TensorPlace {
  std::string name;           // "gelu output"
  double bytes = 0;           // its size by the textbook count
  bool intermediate = false;  // true: written to memory between two launches of this level
  TensorHome design = TensorHome::hbm;    // where the level table puts it
  TensorHome measured = TensorHome::hbm;  // where the counters say it went (= design without)
  bool written_back = false;  // in L2 for its reader, yet its bytes reached DRAM as writes
  int launch = -1;            // the launch that writes it (an intermediate) or holds it
  double dram_write_bytes = 0, dram_read_bytes = 0;  // the DRAM bytes the verdict rests on
  std::string sentence;  // "gelu output (96.0 MiB) went through HBM: ..." (measured, or design)
  bool moved() const { return measured != design; }
};

struct TensorHomes {
  bool measured = false;  // every launch had counters: the verdicts are the counters'
  std::vector<TensorPlace> tensors;
  std::string design_reason;  // the level table's "what stays on chip" sentence
  // Level-wide DRAM bytes beyond the textbook (measured - textbook, over every launch).
  double extra_write_bytes = 0, extra_read_bytes = 0;
  double textbook_write_bytes = 0, dram_write_bytes = 0;
  // The caption's clause about where the tensors went, from the verdicts: empty when the
  // measurement agrees with the level's own summary (or there are no counters).
  std::string headline;
  bool any_moved() const;
};

// Which of level 0's intermediates (l0: level 0's launches; entry k for the tensor launch k
// writes) level `m` keeps on chip by design: every one, less those it still writes to memory.
// A level-0 launch that still runs at this level writes its tensor as before
// (residual_layernorm level 1 still writes "add output"); a tensor this level writes between
// two renamed launches is the latest level-0 intermediate of the same textbook size (ffn level
// 1's epilogue GEMM writes h, level 0's "gelu output"). Level 0 keeps nothing.
std::vector<bool> kept_by_design(const Measurement& m, const std::vector<LaunchTraffic>& l0);
// Level 0's launches with their textbook traffic at m's shape: the lesson's, else `level0`'s.
std::vector<LaunchTraffic> level0_traffic(const Measurement& m, const Lesson* lesson,
                                          const Measurement* level0);

// `lesson` (may be null) gives level 0's launches and the table's reason; `level0` (may be null,
// may be `m`) stands in for level 0's launches when the lesson is absent.
TensorHomes tensor_homes(const Measurement& m, const Lesson* lesson, const Measurement* level0);

// The level's summary with its clause on where tensors go replaced by the measured one when the
// counters disagree with it ("GELU and scale as two kernels; measured: gelu output stays in
// L2 ..."); the summary itself otherwise.
std::string measured_summary(const std::string& summary, const TensorHomes& homes);

}  // namespace fl::viz
