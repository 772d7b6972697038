// In-kernel phase timelines (DESIGN.md §3, "Phase timelines"): a kernel may declare phases
// ("weights in", "cluster exchange", "grid barrier", ...) and, when asked, record when each block
// (or each task of a persistent kernel) began and ended each one, read from %globaltimer, into a
// device buffer. Off by default: a launcher hands its kernel a PhaseSink whose `records` is null
// and the kernel's stamps cost one predictable branch.
//
// The record is the one contract between kernels and the rest of the app: the engine allocates
// the buffer, the results model stores the records, the timeline draws one lane per SM, the
// trace export one thread per SM. A persistent megakernel uses the same record for its tasks:
// `phase` is the task's kind, `arg` the task's index in its host-built task list, `wait_ns` how
// long it waited for its inputs before `start_ns`.
//
// Plain C++ (no CUDA header): the host side and the CPU tests read the same layout.
#pragma once

#include <cstdint>

namespace fl {

// One phase of one block, as the kernel wrote it (32 bytes, naturally aligned).
struct PhaseRecord {
  uint64_t start_ns = 0;  // %globaltimer when the phase began
  uint64_t end_ns = 0;    // %globaltimer when it ended
  uint32_t block = 0;     // linear block index in the grid
  uint16_t sm = 0;        // %smid of the SM the block ran on
  uint16_t phase = 0;     // index into the kernel's declared phase names
  uint32_t arg = 0;       // what the phase worked on (a tile, a task index): the kernel's choice
  uint32_t wait_ns = 0;   // time spent waiting for inputs just before start_ns (0 if none)
};
static_assert(sizeof(PhaseRecord) == 32, "PhaseRecord is the kernels' 32-byte record");

// Where a kernel writes its records: `count` is bumped atomically for each record; records past
// `capacity` are counted but not written, so the host can say how many were lost.
struct PhaseSink {
  PhaseRecord* records = nullptr;  // device memory; null: stamps are off
  unsigned* count = nullptr;       // device memory, zeroed before the launch
  unsigned capacity = 0;
  bool on() const { return records != nullptr; }
};

}  // namespace fl
