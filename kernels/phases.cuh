// The device side of phase timelines (kernels/phases.h): read the clock, write one record.
//
//   const uint64_t t0 = fl::phase_clock();
//   ... load the weights ...
//   fl::phase_record(sink, kWeightsIn, t0, fl::phase_clock());   // one thread per block calls it
//
// %globaltimer is the GPU's nanosecond wall clock, the same on every SM (its resolution is
// ~32 ns on recent GPUs, coarser on some drivers), so lanes of different SMs line up.
#pragma once

#include <cstdint>

#include "kernels/phases.h"

namespace fl {

__device__ __forceinline__ uint64_t phase_clock() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ unsigned phase_smid() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// Writes record `slot` (below the sink's capacity): the block's and SM's numbers are read here.
__device__ __forceinline__ void phase_write(const PhaseSink& sink, unsigned slot, unsigned phase,
                                            uint64_t start_ns, uint64_t end_ns, uint32_t arg,
                                            uint32_t wait_ns) {
  PhaseRecord r;
  r.start_ns = start_ns;
  r.end_ns = end_ns;
  r.block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  r.sm = static_cast<uint16_t>(phase_smid());
  r.phase = static_cast<uint16_t>(phase);
  r.arg = arg;
  r.wait_ns = wait_ns;
  sink.records[slot] = r;
}

// Writes one record if stamps are on. Call it from one thread of the block.
__device__ __forceinline__ void phase_record(const PhaseSink& sink, unsigned phase,
                                             uint64_t start_ns, uint64_t end_ns, uint32_t arg = 0,
                                             uint32_t wait_ns = 0) {
  if (sink.records == nullptr) return;
  const unsigned slot = atomicAdd(sink.count, 1u);
  if (slot < sink.capacity) phase_write(sink, slot, phase, start_ns, end_ns, arg, wait_ns);
}

// A block's phases one after another, as its thread 0 sees them: the first phase starts when
// the marks are made (the kernel's start), and each mark(phase) ends the running phase and
// starts the next. A mark only reads the clock (stamps off: one uniform branch); the records are
// written when the marks go out of scope (the kernel's end), all of a block's with one atomic,
// so no phase pays for an L2 round trip of the one before. Every thread may call mark(); only
// thread 0 keeps time. At most kMaxMarks phases a block are kept.
//
//   PhaseMarks marks(a.phases);          // at the top of the kernel
//   ... wait for the weights ...  marks.mark(kWeightsIn);
//   ... multiply ...              marks.mark(kUpProjection);
class PhaseMarks {
 public:
  static constexpr int kMaxMarks = 8;
  __device__ explicit PhaseMarks(const PhaseSink& sink) : sink_(sink) {
    if (keeps_time()) times_[0] = phase_clock();
  }
  __device__ void mark(unsigned phase, uint32_t arg = 0) {
    if (!keeps_time() || marks_ == kMaxMarks) return;
    times_[marks_ + 1] = phase_clock();
    phases_[marks_] = static_cast<uint16_t>(phase);
    args_[marks_] = arg;
    ++marks_;
  }
  __device__ ~PhaseMarks() {
    if (!keeps_time() || marks_ == 0) return;
    const unsigned first = atomicAdd(sink_.count, static_cast<unsigned>(marks_));
    for (int i = 0; i < marks_ && first + i < sink_.capacity; ++i) {
      phase_write(sink_, first + i, phases_[i], times_[i], times_[i + 1], args_[i], 0);
    }
  }
  PhaseMarks(const PhaseMarks&) = delete;
  PhaseMarks& operator=(const PhaseMarks&) = delete;

 private:
  __device__ bool keeps_time() const { return sink_.records != nullptr && threadIdx.x == 0; }
  const PhaseSink sink_;
  int marks_ = 0;
  uint64_t times_[kMaxMarks + 1];
  uint16_t phases_[kMaxMarks];
  uint32_t args_[kMaxMarks];
};

}  // namespace fl
