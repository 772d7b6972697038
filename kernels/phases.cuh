// The device side of phase timelines (kernels/phases.h): read the clock, write one record.
//
//   const uint64_t t0 = fl::phase_clock();
//   ... load the weights ...
//   fl::phase_record(sink, kWeightsIn, t0, fl::phase_clock());   // one thread per block calls it
//
// Most kernels want PhaseMarks (below): a block's phases one after another, at a few cycles a
// mark.
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

// Writes record `slot`, a place the kernel chose without an atomic (a persistent kernel's task or
// tile index), and counts it: `count` ends at the number of records whatever the order. The count
// is a reduction nobody waits for (its result is unused), so no thread pays an L2 round trip.
__device__ __forceinline__ void phase_record_at(const PhaseSink& sink, unsigned slot,
                                                unsigned phase, uint64_t start_ns, uint64_t end_ns,
                                                uint32_t arg = 0, uint32_t wait_ns = 0) {
  if (sink.records == nullptr) return;
  atomicAdd(sink.count, 1u);
  if (slot < sink.capacity) phase_write(sink, slot, phase, start_ns, end_ns, arg, wait_ns);
}

// A block's kPhases phases one after another, as its thread 0 sees them: the first phase starts
// when the marks are made (the kernel's start), and each mark(phase) ends phase `phase` and
// starts the next. What a stamp costs, and why it is cheap:
//   * a mark reads the SM's cycle counter (%clock, a few cycles) into a register: `phase` is a
//     constant at every call site, so the marks stay in registers (one 32-bit word a phase), not
//     in local memory; stamps off, a mark is one uniform branch;
//   * %globaltimer (the clock every SM shares, the records' time base) is read twice a block, at
//     the start and the end; the marks' cycles are placed between the two by linear
//     interpolation (the SM's clock rate over the block's run);
//   * the block's slots are reserved at the start (one atomic whose result is waited for only
//     at the end, by which time it has long arrived), and the records are written at the end,
//     all at once, stores nobody waits for.
// A phase whose mark a block never reached ends where the phase before it ended (zero long), so
// every block leaves kPhases records in phase order. Every thread may call mark(); only thread 0
// keeps time.
//
//   PhaseMarks<3> marks(a.phases);      // at the top of the kernel
//   ... wait for the weights ...  marks.mark(kWeightsIn);
//   ... multiply ...              marks.mark(kUpProjection);
template <int kPhases>
class PhaseMarks {
 public:
  __device__ explicit PhaseMarks(const PhaseSink& sink) : sink_(sink) {
    if (!keeps_time()) return;
    base_ = atomicAdd(sink_.count, static_cast<unsigned>(kPhases));
    start_ns_ = phase_clock();
    start_cycles_ = cycles();
#pragma unroll
    for (int i = 0; i < kPhases; ++i) ends_[i] = 0;  // 0: not reached
  }
  __device__ void mark(unsigned phase) {
    if (!keeps_time() || phase >= unsigned(kPhases)) return;
    ends_[phase] = max(1u, cycles() - start_cycles_);
  }
  __device__ ~PhaseMarks() {
    if (!keeps_time()) return;
    const uint64_t end_ns = phase_clock();
    const unsigned end_cycles = max(1u, cycles() - start_cycles_);
    const float ns_per_cycle = static_cast<float>(end_ns - start_ns_) / end_cycles;
    uint64_t from = start_ns_;
#pragma unroll
    for (int i = 0; i < kPhases; ++i) {
      uint64_t to = from;
      if (ends_[i] != 0) {
        to = start_ns_ + static_cast<uint64_t>(ns_per_cycle * static_cast<float>(ends_[i]));
        to = min(max(to, from), end_ns);
      }
      if (base_ + i < sink_.capacity) phase_write(sink_, base_ + i, i, from, to, 0, 0);
      from = to;
    }
  }
  PhaseMarks(const PhaseMarks&) = delete;
  PhaseMarks& operator=(const PhaseMarks&) = delete;

 private:
  __device__ static unsigned cycles() {
    unsigned c;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(c));
    return c;
  }
  __device__ bool keeps_time() const {
    return sink_.records != nullptr && threadIdx.x == 0;
  }
  const PhaseSink sink_;
  unsigned base_ = 0, start_cycles_ = 0;
  uint64_t start_ns_ = 0;
  unsigned ends_[kPhases];  // cycles from the start to each phase's end
};

}  // namespace fl
