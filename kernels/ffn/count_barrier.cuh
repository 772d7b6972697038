// A barrier of `count` resident blocks on one counter in L2, for the portable FFN kernels
// (ffn_hidden_slice.cu: the whole grid; ffn_stream.cu: the blocks of one column range).
// One atomic a block (the scheme of cooperative groups' grid sync): the first block adds
// 2^31 - (count - 1), every other block 1, so the counter's top bit flips when the last block
// arrives, whichever that is, and its low 31 bits are back at zero for the next use. The last
// block knows it is the last from its own atomic and goes on at once; the others poll. Every
// thread's writes before the barrier are visible to every thread of the other blocks after it.
#pragma once

#include <cuda_runtime.h>

#include "kernels/device_common.cuh"

namespace fl {

__device__ __forceinline__ void count_barrier(unsigned* counter, unsigned count, bool first) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned add = first ? 0x80000000u - (count - 1) : 1u;
    __threadfence();  // the block's writes before its arrival
    const unsigned old = atomicAdd(counter, add);
    if ((((old + add) ^ old) & 0x80000000u) == 0) {
      // Every block is resident, so this ends; a wrong count would hang the GPU instead: after
      // about a second, trap (the launch fails with an error) rather than hang.
      for (unsigned spins = 0; ((load_acquire(counter) ^ old) & 0x80000000u) == 0; ++spins) {
        if (spins == (1u << 24)) __trap();
        __nanosleep(32);
      }
    }
    __threadfence();
  }
  __syncthreads();
}

}  // namespace fl
