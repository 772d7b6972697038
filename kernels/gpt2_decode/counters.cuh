// The megakernel's dependency counters on the device (megakernel.cu): a task's count released
// once its block's outputs are written, the acquire that waits for a stage's count, and the
// bump that returns the count it made. Counters live in global memory, one per stage.
#pragma once

#include "kernels/device_common.cuh"

namespace fl {
namespace gpt2 {

// The stage counter's bump: the block's writes (ordered before the releasing thread by
// __syncthreads) are visible to any block whose acquire load sees the new count.
__device__ __forceinline__ void release_add(unsigned* p, unsigned v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __threadfence();
  atomicAdd(p, v);
#endif
}

// The same bump when the block needs the count it made (the ticket of a head's split; a stage
// completed by this block, option skip_own_poll): acquire and release, the old count returned.
__device__ __forceinline__ unsigned acq_rel_add(unsigned* p, unsigned v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;"
               : "=r"(old)
               : "l"(p), "r"(v)
               : "memory");
  return old;
#else
  __threadfence();
  const unsigned old = atomicAdd(p, v);
  __threadfence();
  return old;
#endif
}

// Step 2: until the counter reaches the target (one thread). Relaxed spins and one acquire fence
// (an option), or an acquire load each spin.
__device__ __forceinline__ void wait_count(const unsigned* counter, unsigned target, bool relaxed) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  if (relaxed) {
    unsigned v = 0;
    do {
      asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory");
    } while (v < target);
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    return;
  }
#endif
  while (load_acquire(counter) < target) {
  }
}

}  // namespace gpt2
}  // namespace fl
