// A barrier of `count` resident blocks on one counter in L2, for the portable FFN kernels
// (ffn_hidden_slice.cu: the whole grid; ffn_stream.cu: the blocks of one column range).
// One atomic a block (the scheme of cooperative groups' grid sync): the first block adds
// 2^31 - (count - 1), every other block 1, so the counter's top bit flips when the last block
// arrives, whichever that is, and its low 31 bits are back at zero for the next use. The last
// block knows it is the last from its own atomic and goes on at once; the others poll. Every
// thread's writes before the barrier are visible to every thread of the other blocks after it.
// Ordering: fences (`__threadfence`, a MEMBAR.SC.GPU in sm_90a SASS, before the atomic and after
// the poll, as cooperative groups' grid sync), or with acq_rel (the hidden slice's plan) the
// atomic itself acq_rel at GPU scope (a block's writes released by it, the earlier blocks'
// acquired by the last block's, whose value the others' acquiring polls read) and no fence
// after the poll: the fence there was on every block's chain from the release to the sum of y.
#pragma once

#include <cuda_runtime.h>

#include "kernels/device_common.cuh"

namespace fl {

__device__ __forceinline__ unsigned add_acq_rel(unsigned* counter, unsigned add) {
  unsigned old;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], %2;"
               : "=r"(old)
               : "l"(counter), "r"(add)
               : "memory");
#else
  __threadfence();
  old = atomicAdd(counter, add);
  __threadfence();
#endif
  return old;
}

__device__ __forceinline__ void count_barrier(unsigned* counter, unsigned count, bool first,
                                              bool acq_rel = false) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned add = first ? 0x80000000u - (count - 1) : 1u;
    if (!acq_rel) __threadfence();  // the block's writes before its arrival
    const unsigned old = acq_rel ? add_acq_rel(counter, add) : atomicAdd(counter, add);
    if ((((old + add) ^ old) & 0x80000000u) == 0) {
      // Every block is resident, so this ends; a wrong count would hang the GPU instead: after
      // about a second, trap (the launch fails with an error) rather than hang.
      for (unsigned spins = 0; ((load_acquire(counter) ^ old) & 0x80000000u) == 0; ++spins) {
        if (spins == (1u << 24)) __trap();
        __nanosleep(32);
      }
    }
    if (!acq_rel) __threadfence();
  }
  __syncthreads();
}

// count_barrier in two halves, so that a block does work of its own between its arrival and
// the wait (the exchange's down-product addresses: ffn_hidden_slice_exchange_down.cuh): arrive()
// is the first barrier and thread 0's atomic, wait() thread 0's poll and the second barrier.
struct CountTicket {
  unsigned old = 0, add = 0;
};
__device__ __forceinline__ CountTicket count_arrive(unsigned* counter, unsigned count, bool first,
                                                    bool acq_rel = false) {
  __syncthreads();
  CountTicket t;
  if (threadIdx.x == 0) {
    t.add = first ? 0x80000000u - (count - 1) : 1u;
    if (!acq_rel) __threadfence();  // the block's writes before its arrival
    t.old = acq_rel ? add_acq_rel(counter, t.add) : atomicAdd(counter, t.add);
  }
  return t;
}
__device__ __forceinline__ void count_wait(unsigned* counter, const CountTicket& t,
                                           bool acq_rel = false) {
  if (threadIdx.x == 0) {
    if ((((t.old + t.add) ^ t.old) & 0x80000000u) == 0) {
      for (unsigned spins = 0; ((load_acquire(counter) ^ t.old) & 0x80000000u) == 0; ++spins) {
        if (spins == (1u << 24)) __trap();
        __nanosleep(32);
      }
    }
    if (!acq_rel) __threadfence();
  }
  __syncthreads();
}

}  // namespace fl
