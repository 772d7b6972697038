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

// Writes one record if stamps are on. Call it from one thread of the block.
__device__ __forceinline__ void phase_record(const PhaseSink& sink, unsigned phase,
                                             uint64_t start_ns, uint64_t end_ns, uint32_t arg = 0,
                                             uint32_t wait_ns = 0) {
  if (sink.records == nullptr) return;
  const unsigned slot = atomicAdd(sink.count, 1u);
  if (slot >= sink.capacity) return;
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

}  // namespace fl
