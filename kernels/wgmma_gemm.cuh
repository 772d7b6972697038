// The streamed tensor-core GEMM tile of our big-token kernels on Hopper (sm_90a): C = A B for a
// 128 x 256 tile, both operands streamed by TMA through a ring of shared-memory slots, multiplied
// by wgmma into fp32 registers. The FFN's big-token kernel (kernels/ffn/ffn_wgmma.cu) writes only
// its order of tiles around it; the LayerNorm-Linear's (kernels/layernorm_linear/ln_wgmma.cu)
// uses the same ring and epilogue for W alone (its A is a panel that stays in shared memory).
//
//   A (M x K, row-major, e.g. x)  --TMA: a 128 x 64 box (16 KB)------+
//                                                                    +--> slot (48 KB) x 4
//   B (K x N, row-major, e.g. W)  --TMA: four 64 x 64 boxes (32 KB)--+     --wgmma--> fp32
//
//   * A block has 384 threads. Warpgroups 0 and 1 are the consumers: warpgroup g multiplies rows
//     [64 g, 64 g + 64) of the tile by all 256 columns (wgmma m64n256k16, 128 fp32 accumulators
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
// the tensor cores need ~86 GB/s into every SM (the LayerNorm-Linear's 64-row panels need 120;
// docs/PERFORMANCE.md, lesson 6, has what L2 delivered).
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

// ---- the ring: slots that TMA fills and wgmma empties ---------------------------------------
// kStages slots of kSlotBytes (each 1024-byte aligned: the swizzle's period), and per slot a
// "full" barrier (the producer's arrival and the bytes) and an "empty" one (each consumer warp).
// Every wgmma kernel of ours streams its operands through one of these: the 128 x 256 tile below
// (both operands), and the LayerNorm-Linear's panel kernel (W only: its A stays in shared memory).
template <int kStages_, int kSlotBytes_>
struct SlotRing {
  static constexpr int kStages = kStages_, kSlotBytes = kSlotBytes_;
  static constexpr size_t kBarrierBytes = 2 * kStages * sizeof(uint64_t);
  unsigned char* slots;
  uint64_t* full;
  uint64_t* empty;
  __device__ unsigned char* slot(int s) const { return slots + s * kSlotBytes; }
};

// Where a party is in a ring: the slot and the parity of that slot's current phase.
template <int kStages>
struct RingCursor {
  int slot = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++slot == kStages) slot = 0, phase ^= 1;
  }
};

// The ring's slots at `slots` (1024-byte aligned) and its barriers at `barriers`; thread 0
// initialises the barriers (`consumer_warps` arrivals free a slot). The caller makes the block
// wait (a __syncthreads, after a barrier_init_fence) before any thread uses the ring.
template <class R>
__device__ inline R place_ring(unsigned char* slots, uint64_t* barriers, unsigned consumer_warps) {
  R r{slots, barriers, barriers + R::kStages};
  if (threadIdx.x == 0) {
    for (int s = 0; s < R::kStages; ++s) {
      hopper::barrier_init(&r.full[s], 1);
      hopper::barrier_init(&r.empty[s], consumer_warps);
    }
  }
  return r;
}

// The producer: waits until the cursor's slot is empty, says that `bytes` will land on its full
// barrier, and returns the slot; the caller issues the TMA copies onto r.full[at.slot].
template <class R>
__device__ __forceinline__ unsigned char* fill_slot(const R& r, const RingCursor<R::kStages>& at,
                                                    uint32_t bytes) {
  hopper::wait(&r.empty[at.slot], at.phase ^ 1);
  hopper::arrive_expect_bytes(&r.full[at.slot], bytes);
  return r.slot(at.slot);
}

// A consumer warpgroup over k_steps slots: waits until each is full, calls multiply(slot, ks)
// (which issues its wgmma), and frees a slot once its multiplies have completed, so that the
// producer refills it while the next slot is multiplied.
template <class R, class Multiply>
__device__ __forceinline__ void consume_slots(const R& r, RingCursor<R::kStages>& at, int k_steps,
                                              Multiply&& multiply) {
  const int lane = threadIdx.x % 32;
  int previous = 0;
  for (int ks = 0; ks < k_steps; ++ks) {
    hopper::wait(&r.full[at.slot], at.phase);
    hopper::wgmma_fence();
    multiply(static_cast<const unsigned char*>(r.slot(at.slot)), ks);
    hopper::wgmma_commit();
    hopper::wgmma_wait<1>();  // the previous slot's multiplies have completed: free it
    if (ks > 0 && lane == 0) hopper::arrive(&r.empty[previous]);
    previous = at.slot;
    at.advance();
  }
  hopper::wgmma_wait<0>();
  if (lane == 0) hopper::arrive(&r.empty[previous]);
}

// ---- the epilogue: bias, activation, 16-byte stores ------------------------------------------
// A consumer warpgroup's bias for its accumulators' column pairs (8 j + 2 (lane % 4) from col0,
// hopper::for_each_piece's layout), loaded before the multiplies so that the loads' latency
// hides behind them: loaded in the epilogue, each waits behind the previous pair's stores (the
// compiler cannot move a load of b above a store to y), and Nsight Compute showed the consumers
// stalled on L1TEX for a third to two thirds of their cycles.
template <int kPairs>
__device__ __forceinline__ void load_bias(const __nv_bfloat16* b, int n, int col0,
                                          __nv_bfloat162 (&bias)[kPairs]) {
  const int first = col0 + 2 * (threadIdx.x % 4);
#pragma unroll
  for (int j = 0; j < kPairs; ++j) {
    const int col = first + 8 * j;
    bias[j] = col < n ? *reinterpret_cast<const __nv_bfloat162*>(b + col)
                      : __floats2bfloat162_rn(0.0f, 0.0f);
  }
}

// out = act(acc + bias), rounded once to bf16, for the warpgroup's 64 rows from `out` (row
// stride ld) and its columns: 16 bytes of a row a store (hopper::for_each_piece); rows from
// `rows` on and columns from `cols` on are past the matrix and not stored (cols a multiple of 8:
// a piece is wholly in or out).
template <int kAcc, class Activation>
__device__ __forceinline__ void store_tile(const float (&acc)[kAcc],
                                           const __nv_bfloat162 (&bias)[kAcc / 4],
                                           __nv_bfloat16* out, int64_t ld, int64_t rows, int cols,
                                           Activation&& act) {
  hopper::for_each_piece(
      acc,
      [&](int j, float v0, float v1) {
        const float2 b = __bfloat1622float2(bias[j]);
        return __floats2bfloat162_rn(act(v0 + b.x), act(v1 + b.y));
      },
      [&](int r, int col, uint4 piece) {
        if (r < rows && col < cols) *reinterpret_cast<uint4*>(out + r * ld + col) = piece;
      });
}

// ---- the streamed 128 x 256 tile ---------------------------------------------------------------
using Ring = SlotRing<kStages, kSlotBytes>;
using Cursor = RingCursor<kStages>;

// Carves the tile's ring out of the dynamic shared memory and initialises its barriers; every
// thread of the block calls it (it ends with __syncthreads).
__device__ inline Ring make_ring(unsigned char* shared_raw) {
  unsigned char* slots = hopper::align_1024(shared_raw);
  const Ring r = place_ring<Ring>(slots, reinterpret_cast<uint64_t*>(slots + kStages * kSlotBytes),
                                  kConsumerWarps);
  if (threadIdx.x == 0) hopper::barrier_init_fence();
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
    unsigned char* slot = fill_slot(r, at, kSlotBytes);
    uint64_t* full = &r.full[at.slot];
    hopper::copy_box(slot, a, ks * kBK, row0, full);
    for (int box = 0; box < 4; ++box) {
      hopper::copy_box(slot + kABytes + box * kBBoxBytes, b, col0 + box * kBoxN, ks * kBK, full);
    }
    at.advance();
  }
}

// Consumer warpgroup `group` (0 or 1): acc = its 64 rows of the tile, over k_steps slots.
__device__ inline void consume_tile(const Ring& r, Cursor& at, float (&acc)[128], int k_steps,
                                    int group) {
  consume_slots(r, at, k_steps, [&](const unsigned char* slot, int ks) {
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      // A: K-major, 8-row groups 1024 B apart; a K step of 16 moves 32 B along the row.
      const uint64_t desc_a = hopper::descriptor(slot + 64 * group * 128 + kk * 32, 16, 1024);
      // B: N-major (W's rows): 8-row groups 1024 B apart, 64-column groups one box apart.
      const uint64_t desc_b = hopper::descriptor(slot + kABytes + kk * 16 * 128, kBBoxBytes, 1024);
      hopper::wgmma_m64n256k16(acc, desc_a, desc_b, ks > 0 || kk > 0);  // the first overwrites
    }
  });
}

// The accumulators' places: consumer warpgroup `group` holds rows [64 group, 64 group + 64) of
// the tile, in the layout of kernels/hopper.cuh; hopper::for_each_piece hands them out 16 bytes
// at a time.

}  // namespace fl::wgmma_gemm
