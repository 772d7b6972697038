// The megakernel's dependency counters on the device (megakernel.cu): a task's count released
// once its block's outputs are written (count_done: which counter a task bumps), the acquire
// that waits for a stage's count, and the bump that returns the count it made. Counters live in
// global memory, one per stage.
#pragma once

#include "kernels/device_common.cuh"
#include "kernels/gpt2_decode/model.h"

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

// Step 4: a task's outputs are counted done (thread 0, after the block's __syncthreads): its
// stage's counter, or with head waits each head's its rows belong to, or with proj by head an
// attention split's head's. With skip_own_poll the bump returns the count: `known` then holds the
// counter and the count it has reached.
__device__ inline void count_done(const DecodeTask& task, int splits, unsigned* counters,
                                  bool returns, unsigned (&known)[2]) {
  if (task.flags & kProjectsLast) {  // a head's last split, its proj added: the MLP's count
    release_add(counters + task.done_counter + kHeads, 1u);
  } else if (task.flags & kBumpsHead) {  // an attention split of proj by head: its head's counter
    release_add(counters + task.done_counter + task.first / splits, 1u);
  } else if (returns && !(task.flags & kBumpsHeads)) {
    known[0] = task.done_counter;
    known[1] = acq_rel_add(counters + task.done_counter, 1u) + 1;
  } else if (task.flags & kBumpsHeads) {
    int head_a = 0, head_b = 0;
    heads_of_rows(static_cast<int>(task.first), task.count, &head_a, &head_b);
    release_add(counters + task.done_counter + head_a, 1u);
    if (head_b != head_a) release_add(counters + task.done_counter + head_b, 1u);
  } else {
    release_add(counters + task.done_counter, 1u);
  }
}

}  // namespace gpt2
}  // namespace fl
