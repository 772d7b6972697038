// The megakernel's probes (megakernel.cu, DecodeArgs::probes): where a task's time went, for
// the measurements that ask for it (the breakdown in docs/PERFORMANCE.md, section 11).
#pragma once

#include <cstdint>

#include "kernels/gpt2_decode/launch.h"
#include "kernels/hopper.cuh"
#include "kernels/phases.cuh"

namespace fl {
namespace gpt2 {

// With probes on (DecodeArgs::probes), the thread that releases the count adds the task's time
// in each slot (model.h's ProbeSlot) to its kind's sums: from asking for the counter to seeing
// it, to the bytes and the barrier, to the marks probe_mark left inside the task (a slot not
// marked takes no time), to the outputs written and the count released; and leaves the task's
// own stamps (task `index`, model.h's ProbeStamp: `st` holds the loop's), so a stage's slowest
// task is read.
__device__ inline void probe_task(const DecodeArgs& a, int kind, int index, const uint64_t* st,
                                  uint64_t written, uint64_t ended) {
  if (a.probes == nullptr) return;
  unsigned long long* marks = a.probes + kProbeSums + blockIdx.x * kProbeSlots;
  unsigned long long* mine =
      a.probes + kProbeSums + gridDim.x * kProbeSlots + int64_t(index) * kProbeStamps;
  for (int s = 0; s < kProbeStamps; ++s) mine[s] = st[s];
  const uint64_t inputs = marks[kProbeInputs] != 0 ? marks[kProbeInputs] : st[kStampStarted];
  mine[kStampInputs] = inputs;
  mine[kStampComputed] = marks[kProbeCompute] != 0 ? marks[kProbeCompute] : inputs;
  mine[kStampWritten] = written, mine[kStampEnded] = ended;
  unsigned long long* sums = a.probes + kind * (kProbeSlots + 1);
  for (int s = 0; s < kProbeSlots; ++s)
    atomicAdd(sums + s, mine[kStampAsked + s + 1] - mine[kStampAsked + s]);
  atomicAdd(sums + kProbeSlots, 1ull);
  marks[kProbeInputs] = marks[kProbeCompute] = 0;
}

// Whether the bulk copy counted on `bar` has landed (its phase `parity` complete), not waiting
// (mbarrier.test_wait; sm_90a builds, else "landed").
__device__ __forceinline__ bool copy_landed(const uint64_t* bar, unsigned parity) {
#ifdef FL_SM90A_DEVICE
  unsigned done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}"
      : "=r"(done)
      : "r"(hopper::smem_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
#else
  return true;
#endif
}

// With probes on, the releasing thread's look at the next task's bulk copy (`bar` null: none in
// flight) just before the release (`after` false; stamps its start) or just after (model.h's
// kStampNextCopy and kStampReleaseFrom), so that a long release is read against it.
__device__ inline void probe_next_copy(const DecodeArgs& a, uint64_t* st, const uint64_t* bar,
                                       unsigned parity, bool after) {
  if (a.probes == nullptr) return;
  const uint64_t landed = bar != nullptr && copy_landed(bar, parity) ? 1 : 0;
  if (after) {
    st[kStampNextCopy] |= landed << 2;
    return;
  }
  st[kStampNextCopy] = (bar != nullptr ? 1 : 0) | landed << 1;
  st[kStampReleaseFrom] = phase_clock();
}

}  // namespace gpt2
}  // namespace fl
