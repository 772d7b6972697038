// The bookkeeping of the Hopper flash kernel's roles (flash_wgmma.cu): which head and queries a
// block takes, where a party is in a shared-memory ring, how the register file is split between
// producer and consumers, and the consumer warpgroups' turns at the tensor cores.
#pragma once

#include <cstdint>

#include "kernels/hopper.cuh"

namespace fl::attention::wg {

// The consumer warpgroups take turns at the tensor cores (FlashAttention-3's ping-pong): each
// issues its products only once the warpgroup before it has issued its own, and passes the turn
// on as soon as they are issued. The tensor cores then run one warpgroup's products while the
// next one's softmax runs, where warpgroups left alone drift into step: all softmaxes at once,
// the tensor cores idle meanwhile. Warpgroup w waits for its turn at named barrier 1 + w (its 128
// threads wait, the previous warpgroup's 128 arrive); warpgroup 0 gives itself the first turn,
// and the last turn of the last warpgroup is passed to nobody, so every barrier sees as many
// arrivals as waits.
template <int kConsumers>
struct Turns {
  int wg;
  __device__ explicit Turns(int w) : wg(w) {
    if (wg == 0) hopper::arrive_threads(1, 256);
  }
  __device__ void take() const { hopper::sync_threads(1 + wg, 256); }
  __device__ void pass(bool last) const {
    if (!(last && wg == kConsumers - 1)) hopper::arrive_threads(1 + (wg + 1) % kConsumers, 256);
  }
};

// The block's head and first query. Blocks start in the order of blockIdx.x: the longest rows
// (the most K/V tiles) first, within groups of `group` heads. A head's K and V are read by every
// one of its q_tiles blocks; a group of heads is about one wave of blocks, so its K and V stay in
// L2 while they run (heads taken one query tile at a time across all of them, every head's K and V
// at once, are twice the L2 at d = 128 and go on being re-read from DRAM).
struct BlockTile {
  int head, q0;
  __device__ BlockTile(int heads, int q_tiles, int group, int bm) {
    const int b = static_cast<int>(blockIdx.x), per_group = group * q_tiles;
    const int first = b / per_group * group, in_group = min(group, heads - first);
    const int r = b % per_group;
    head = first + r % in_group;
    q0 = (q_tiles - 1 - r / in_group) * bm;
  }
};

// A party's place in a ring: the slot and its phase's parity.
struct Cursor {
  int slot = 0;
  uint32_t phase = 0;
  template <int kStages>
  __device__ void advance() {
    if (++slot == kStages) slot = 0, phase ^= 1;
  }
};

// setmaxnreg: a warpgroup's registers a thread raised (more) or lowered to kRegs, the producer
// giving up what the consumers take (the kernel caps them at entry with __launch_bounds__(.., 1)).
template <int kRegs>
__device__ __forceinline__ void set_registers(bool more) {
#ifdef FL_SM90A_DEVICE
  if (more) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs) : "memory");
  } else {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs) : "memory");
  }
#endif
}

}  // namespace fl::attention::wg
