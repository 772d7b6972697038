// The streamed tensor-core GEMM tile of our big-token kernels on Hopper (sm_90a): C = A B for a
// 128 x 256 tile, both operands streamed by TMA through a ring of shared-memory slots, multiplied
// by wgmma into fp32 registers. The FFN's big-token kernel (kernels/ffn/ffn_wgmma.cu) writes only
// its epilogues and its order of tiles around it.
//
//   A (M x K, row-major, e.g. x)  --TMA: a 128 x 64 box (16 KB)------+
//                                                                    +--> slot (48 KB) x 4
//   B (K x N, row-major, e.g. W)  --TMA: four 64 x 64 boxes (32 KB)--+     --wgmma--> fp32
//
//   * A block has 384 threads. Warpgroups 0 and 1 are the consumers: warpgroup c multiplies rows
//     [64 c, 64 c + 64) of the tile by all 256 columns (wgmma m64n256k16, 128 fp32 accumulators
//     a thread). Warpgroup 2 is the producer: its first thread issues every copy, the rest only
//     hand their registers to the consumers (setmaxnreg: 40 for the producer, 232 for them).
//   * A slot is one K step of 64: x's 128 x 64 box and W's 64 x 256 as four 64 x 64 boxes (TMA's
//     128-byte swizzle caps a box row at 64 bf16). The producer waits until a slot is empty,
//     says how many bytes will land (48 KB) and issues the five copies; consumers wait until the
//     slot is full, issue its four wgmma (K = 16 each), and free it once those have completed,
//     so three slots are in flight while one is multiplied. Ragged edges need no code: TMA fills
//     a box's part outside the matrix with zeros (and still counts its bytes).
//   * Blocks are persistent (one per SM: the ring takes 192 KB of shared memory) and walk their
//     tiles in the order the caller gives; the ring runs on across tiles, so the producer is
//     already loading the next tile while the consumers run this one's epilogue.
//
// Budget of one tile at K = 768: 2 x 128 x 256 x 768 = 50 MFLOP (6.7 us at an SM's share of the
// H100's 989 TFLOP/s) against 12 slots x 48 KB = 576 KB through the ring: 87 FLOP per byte, so
// the tensor cores need ~86 GB/s into every SM (the panel kernel's 64-row blocks needed 120, and
// got ~40; docs/PERFORMANCE.md).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/hopper.cuh"

namespace fl::wgmma_gemm {

constexpr int kBM = 128, kBN = 256, kBK = 64;  // tile rows, tile columns, K per slot
constexpr int kStages = 4;                     // ring slots
constexpr int kThreads = 384;                  // two consumer warpgroups, one producer warpgroup
constexpr int kConsumerThreads = 256, kConsumerWarps = 8;
constexpr int kBoxN = 64;                             // a B box's columns (128 bytes)
constexpr int kABytes = kBM * kBK * 2;                // 16 KB
constexpr int kBBoxBytes = kBK * kBoxN * 2;           // 8 KB
constexpr int kSlotBytes = kABytes + 4 * kBBoxBytes;  // 48 KB
constexpr size_t kSharedBytes = size_t(kStages) * kSlotBytes + 2 * kStages * sizeof(uint64_t) +
                                1024;  // + the barriers, + 1 KB to align slots to the swizzle

// The ring in shared memory: slots (1024-byte aligned, the swizzle's period), and per slot a
// "full" barrier (the producer's arrival and the bytes) and an "empty" one (each consumer warp).
struct Ring {
  unsigned char* slots;
  uint64_t* full;
  uint64_t* empty;
};

// Where a party is in the ring: the slot and the parity of that slot's current phase.
struct Cursor {
  int slot = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++slot == kStages) slot = 0, phase ^= 1;
  }
};

// Carves the ring out of the dynamic shared memory and initialises its barriers; every thread
// of the block calls it (it ends with __syncthreads).
__device__ inline Ring make_ring(unsigned char* shared_raw) {
  Ring r;
  r.slots = hopper::align_1024(shared_raw);
  r.full = reinterpret_cast<uint64_t*>(r.slots + kStages * kSlotBytes);
  r.empty = r.full + kStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      hopper::barrier_init(&r.full[s], 1);
      hopper::barrier_init(&r.empty[s], kConsumerWarps);
    }
    hopper::barrier_init_fence();
  }
  __syncthreads();
  return r;
}

__device__ inline bool is_producer() {
  return threadIdx.x >= kConsumerThreads;
}

// The register split between the warpgroups (called once by every thread of its warpgroup).
__device__ inline void producer_registers() {
#ifdef FL_SM90A_DEVICE
  asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
#endif
}
__device__ inline void consumer_registers() {
#ifdef FL_SM90A_DEVICE
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
#endif
}

// The producer thread: one tile's K steps, A's rows [row0, row0 + 128) and B's columns
// [col0, col0 + 256).
__device__ inline void produce_tile(const Ring& r, Cursor& at, const CUtensorMap* a,
                                    const CUtensorMap* b, int row0, int col0, int k_steps) {
  for (int ks = 0; ks < k_steps; ++ks) {
    hopper::wait(&r.empty[at.slot], at.phase ^ 1);
    uint64_t* full = &r.full[at.slot];
    unsigned char* slot = r.slots + at.slot * kSlotBytes;
    hopper::arrive_expect_bytes(full, kSlotBytes);
    hopper::copy_box(slot, a, ks * kBK, row0, full);
    for (int box = 0; box < 4; ++box) {
      hopper::copy_box(slot + kABytes + box * kBBoxBytes, b, col0 + box * kBoxN, ks * kBK, full);
    }
    at.advance();
  }
}

// A consumer warpgroup (c = 0 or 1): acc = its 64 rows of the tile, over k_steps slots.
__device__ inline void consume_tile(const Ring& r, Cursor& at, float (&acc)[128], int k_steps,
                                    int c) {
  const int lane = threadIdx.x % 32;
  int previous = 0;
  for (int ks = 0; ks < k_steps; ++ks) {
    hopper::wait(&r.full[at.slot], at.phase);
    const unsigned char* slot = r.slots + at.slot * kSlotBytes;
    hopper::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      // A: K-major, 8-row groups 1024 B apart; a K step of 16 moves 32 B along the row.
      const uint64_t desc_a = hopper::descriptor(slot + 64 * c * 128 + kk * 32, 16, 1024);
      // B: N-major (W's rows): 8-row groups 1024 B apart, 64-column groups one box apart.
      const uint64_t desc_b = hopper::descriptor(slot + kABytes + kk * 16 * 128, kBBoxBytes, 1024);
      hopper::wgmma_m64n256k16(acc, desc_a, desc_b, ks > 0 || kk > 0);  // the first overwrites
    }
    hopper::wgmma_commit();
    hopper::wgmma_wait<1>();  // the previous slot's multiplies have completed: free it
    if (ks > 0 && lane == 0) hopper::arrive(&r.empty[previous]);
    previous = at.slot;
    at.advance();
  }
  hopper::wgmma_wait<0>();
  if (lane == 0) hopper::arrive(&r.empty[previous]);
}

// The accumulators' places: consumer warpgroup c holds rows [64 c, 64 c + 64) of the tile, in
// the layout of kernels/hopper.cuh; hopper::for_each_piece hands them out 16 bytes at a time.

}  // namespace fl::wgmma_gemm
