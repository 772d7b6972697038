// What both flash kernels take (flash_mma.cuh, flash_wgmma.cu): the heads, where their rows are,
// the scale, and where phase stamps go (off unless a sink is given).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/phases.h"
#include "kernels/status.h"

namespace fl::attention {

// A batch of heads. Head n's rows start at `base(n)` and are `ld` elements apart: SDPA's layout
// (heads x length x dim, each head contiguous) is group = 1, ld = dim; a GPT-2 block's
// (tokens x 3C for q, k, v side by side, tokens x C for o; head h of a sequence at columns
// h d..) is group = H, ld = 3C (in) and C (out), with k = q + C and v = q + 2C.
template <typename T>
struct FlashArgs {
  const T* q;
  const T* k;
  const T* v;
  T* o;
  int length;  // T
  int dim;     // d
  float scale;
  int group = 1;          // heads per sequence (consecutive heads share a sequence's rows)
  int64_t ld_in = 0;      // row stride of q, k, v (0: dim)
  int64_t ld_out = 0;     // row stride of o (0: dim)
  PhaseSink phases = {};  // stamps on when set (the phases are the kernel's: *_phases())

  __device__ int64_t base(int64_t head, int64_t ld) const {
    return (head / group) * length * ld + (head % group) * dim;
  }
};

// A flash kernel's launcher: the heads' arguments, the number of heads, the stream.
template <typename T>
using FlashLaunch = Status (*)(const FlashArgs<T>&, int64_t, cudaStream_t);

}  // namespace fl::attention
