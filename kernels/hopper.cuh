// Hopper's matrix path (sm_90a), the few primitives our wgmma kernels use, each a line or two
// of PTX with what it does beside it:
//
//   HBM/L2 --TMA (cp.async.bulk.tensor)--> shared memory, 128-byte swizzled, completion counted
//          in bytes on an mbarrier --wgmma (a warpgroup of 4 warps)--> fp32 accumulators
//
//   * The tensor memory accelerator (TMA) copies a box of a 2-D tensor (up to 256 x 256
//     elements) into shared memory on its own: one thread issues it, no registers pass the data,
//     and the box's rows land swizzled (16-byte chunk c of row r at chunk c ^ (r % 8)), the
//     layout wgmma reads without bank conflicts. Parts of a box outside the tensor are filled with
//     zeros, so ragged edges need no code.
//   * An mbarrier in shared memory counts arrivals and, for TMA, bytes: the issuing thread says
//     how many bytes to expect (arrive_expect_tx); the barrier's phase completes when they have
//     all landed. Waiters spin on the phase's parity (0, 1, 0, ...), so one barrier per ring
//     slot serves the whole loop.
//   * wgmma multiplies a 64 x N tile (A: 64 x 16, B: 16 x N) per instruction, asynchronously:
//     issue, commit a group, and wait for all but the newest groups later. A and B are read
//     straight from shared memory through 64-bit descriptors (start address, the stride between
//     8-row groups, the swizzle).
//
// Everything that needs sm_90a compiles only where __CUDA_ARCH_FEAT_SM90_ALL is defined (the
// build's "90a" architecture, CMakeLists.txt); FUSIONLAB_WGMMA tells host code that it did, and
// the launchers never pick a wgmma kernel without it. Host side: make_tensor_map_2d builds a TMA
// descriptor through the driver's entry point (no link against libcuda, which a machine without
// a GPU lacks).
#pragma once

#include <cuda.h>  // CUtensorMap (types only)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/status.h"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FL_SM90A_DEVICE 1
#endif

namespace fl {
// Whether this translation unit belongs to a build with the wgmma kernels (FUSIONLAB_WGMMA is
// defined for the kernels library when it compiles sm_90a, CMakeLists.txt).
#ifdef FUSIONLAB_WGMMA
inline constexpr bool kWgmmaBuild = true;
#else
inline constexpr bool kWgmmaBuild = false;
#endif
}  // namespace fl

namespace fl::hopper {

// ---- host: the TMA descriptor of a row-major rows x cols bf16 matrix --------------------------
// box_cols x box_rows elements per copy, box rows swizzled in spans of `swizzle` bytes (128 or
// 64: box_cols x 2 bytes must equal it); cols x 2 bytes must be a multiple of 16 and `base`
// 16-byte aligned. Elements of a box beyond the matrix read as zeros.
// row_stride: elements from one row to the next (0: cols, a packed matrix).
Status make_tensor_map_2d(CUtensorMap* map, const __nv_bfloat16* base, int64_t rows, int64_t cols,
                          int box_rows, int box_cols, int swizzle = 128, int64_t row_stride = 0);

// Whether the current device runs sm_90a code (compute capability 9.0), and its opt-in shared
// memory per block (the wgmma kernels' launchers ask before they pick themselves).
Status current_device(bool* sm90, int* optin_shared);

// ---- device ---------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The first 1024-byte boundary (the 128-byte swizzle's period) at or after p in dynamic shared
// memory. Offsetting p itself, rather than rounding its integer value, keeps the pointer's
// shared-memory provenance: the compiler then emits ld.shared/st.shared for plain accesses
// through it, where a pointer remade from an integer gets generic loads. Through such a pointer
// the LayerNorm-Linear's normalize step read each 16-byte chunk as 8 generic 2-byte loads (7.8 us
// a block against 6.3 once fixed, H100).
__device__ __forceinline__ unsigned char* align_1024(unsigned char* p) {
  return p + ((1024 - smem_address(p) % 1024) % 1024);
}

// mbarrier: init with the number of arrivals a phase needs.
__device__ __forceinline__ void barrier_init(uint64_t* bar, unsigned arrivals) {
#ifdef FL_SM90A_DEVICE
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(arrivals));
#endif
}
// Makes the initialised barriers visible to the copy engine (before the block's first barrier).
__device__ __forceinline__ void barrier_init_fence() {
#ifdef FL_SM90A_DEVICE
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
// One arrival that also says `bytes` more are to land on this phase (the TMA issuer's call).
__device__ __forceinline__ void arrive_expect_bytes(uint64_t* bar, uint32_t bytes) {
#ifdef FL_SM90A_DEVICE
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)),
               "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void arrive(uint64_t* bar) {
#ifdef FL_SM90A_DEVICE
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar)) : "memory");
#endif
}
// Waits until the barrier's phase of this parity has completed. A fresh barrier is in phase 0,
// so waiting on parity 1 returns at once ("the phase before" counts as done): a ring's producer
// starts waiting on its empty slots with parity 1.
__device__ __forceinline__ void wait(uint64_t* bar, uint32_t parity) {
#ifdef FL_SM90A_DEVICE
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_address(bar)),
      "r"(parity)
      : "memory");
#endif
}

// TMA: copy the box at (col, row) of `map`'s matrix into shared memory at dst (1024-byte aligned
// for the 128-byte swizzle); the bytes count on `bar`.
__device__ __forceinline__ void copy_box(void* dst, const CUtensorMap* map, int col, int row,
                                         uint64_t* bar) {
#ifdef FL_SM90A_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(col), "r"(row), "r"(smem_address(bar))
      : "memory");
#endif
}

// The same box copied once from L2 into every block of the cluster named in `mask` (bit r: rank
// r), at dst's offset in each, counted on the barrier at bar's offset in each: the blocks must
// have initialised that barrier first.
__device__ __forceinline__ void copy_box_multicast(void* dst, const CUtensorMap* map, int col,
                                                   int row, uint64_t* bar, uint16_t mask) {
#ifdef FL_SM90A_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(col), "r"(row), "r"(smem_address(bar)), "h"(mask)
      : "memory");
#endif
}

// Fetches a TMA descriptor (a kernel parameter) ahead of its first copy.
__device__ __forceinline__ void prefetch_map(const CUtensorMap* map) {
#ifdef FL_SM90A_DEVICE
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#endif
}

// Ordinary stores to shared memory that wgmma (the async proxy) reads next: each writing thread
// fences before the barrier that publishes them.
__device__ __forceinline__ void fence_async_shared() {
#ifdef FL_SM90A_DEVICE
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// A named barrier for `threads` threads (a subset of the block: the producer warp never joins).
__device__ __forceinline__ void sync_threads(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// Arrive at named barrier `id` (of `threads` in all) without waiting: the signalling half of a
// handshake whose other half waits in sync_threads.
__device__ __forceinline__ void arrive_threads(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// wgmma's shared-memory descriptor for a 128-byte-swizzled operand: start address, the "leading"
// byte offset (between 64-element column groups of an MN-major operand; unused for K-major),
// the "stride" byte offset (between 8-row groups, 1024 bytes: 8 rows of 128 bytes), swizzle
// mode 1 (128 bytes) in bits 62-63. Addresses and offsets are in units of 16 bytes.
__device__ __forceinline__ uint64_t descriptor(const void* smem, uint32_t leading_bytes,
                                               uint32_t stride_bytes) {
  const uint32_t addr = smem_address(smem);
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
         static_cast<uint64_t>((leading_bytes >> 4) & 0x3FFF) << 16 |
         static_cast<uint64_t>((stride_bytes >> 4) & 0x3FFF) << 32 | 1ull << 62;
}

// Before the first wgmma that touches accumulators other instructions wrote; after issuing,
// commit the group; wait until at most `kPending` groups are still running.
__device__ __forceinline__ void wgmma_fence() {
#ifdef FL_SM90A_DEVICE
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#ifdef FL_SM90A_DEVICE
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#ifdef FL_SM90A_DEVICE
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
#endif
}

// d (64 x 128, fp32, the warpgroup's accumulators) += A (64 x 16, K-major) * B (16 x 128,
// MN-major: "transposed", the weights' rows are N-contiguous; kTransB = 0: K-major, B's rows
// K-contiguous, as K's rows are in attention's Q K^T); accumulate = 0 overwrites d.
// Thread t of the warpgroup holds d[4 j + 2 h + e] = D[16 (t / 32) + (t % 32) / 4 + 8 h]
// [8 j + 2 (t % 4) + e] for j < 16, h, e < 2.
template <int kTransB = 1>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                 int accumulate) {
#ifdef FL_SM90A_DEVICE
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, %67;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransB));
#endif
}

// The same with B 16 x 64: d is 64 x 64 (32 registers a thread, j < 8 in the layout above).
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                int accumulate) {
#ifdef FL_SM90A_DEVICE
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
#endif
}

// The same with B 16 x 256: d is 64 x 256 (128 registers a thread, j < 32 in the layout above).
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b,
                                                 int accumulate) {
#ifdef FL_SM90A_DEVICE
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, "
      "%127}, "
      "%128, %129, p, 1, 1, 0, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
        "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
        "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
        "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
        "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
        "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
#endif
}

// Release and acquire across blocks (the FFN's per-row-block counters, kernels/ffn/ffn_wgmma.cu):
// a writer's plain stores, then fence_async_global and a release add, are seen by a reader that
// acquires the count and fences before its TMA (the async proxy) reads what was written.
__device__ __forceinline__ void fence_async_global() {
#ifdef FL_SM90A_DEVICE
  asm volatile("fence.proxy.async.global;" ::: "memory");
#endif
}
// A reduction (no answer) with release semantics: everything this thread has seen, the stores of
// the block ordered before it by __syncthreads included, is visible to whoever acquires the new
// count (CUTLASS's grid barriers arrive the same way). Cheaper than __threadfence + atomicAdd.
__device__ __forceinline__ void red_release(unsigned long long* counter, unsigned long long v) {
#ifdef FL_SM90A_DEVICE
  asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(counter), "l"(v) : "memory");
#endif
}

// Adds v with release semantics and returns the value before.
__device__ __forceinline__ unsigned add_release(unsigned* counter, unsigned v) {
  unsigned old = 0;
#ifdef FL_SM90A_DEVICE
  asm volatile("atom.release.gpu.global.add.u32 %0, [%1], %2;"
               : "=r"(old)
               : "l"(counter), "r"(v)
               : "memory");
#endif
  return old;
}
// The accumulators' rows leave in 16-byte pieces: in the layout above, the 4 lanes of a quad
// hold a row's columns 8 j .. 8 j + 7 as 4 pairs (lane q: 8 j + 2 q, + 1). Given the pairs of 4
// such column groups j0 + i as bf16x2 words w[i], this returns, in lane q, group j0 + q's 8
// columns (word i from lane i): a 4 x 4 transpose in the quad, 3 shuffles. A warp's store then
// writes 8 rows x 64 contiguous bytes, whole 32-byte sectors, with a quarter of the instructions
// of storing the pairs (docs/PERFORMANCE.md: 160 -> 140 us for the LayerNorm-Linear at 16K).
__device__ __forceinline__ uint4 quad_transpose(const uint32_t (&w)[4]) {
  const int lane = threadIdx.x % 32, q = lane % 4;
  uint32_t out[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    // Round r: lane q reads lane s = (q + r) % 4, which sends its word for lane q: w[(s - r) % 4].
    const int send = (q + 4 - r) % 4, from = (q + r) % 4;
    const uint32_t mine = send == 0 ? w[0] : send == 1 ? w[1] : send == 2 ? w[2] : w[3];
    const uint32_t got = r == 0 ? mine : __shfl_sync(0xffffffffu, mine, (lane & ~3) | from);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (from == i) out[i] = got;
    }
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// A warpgroup's accumulators of a 64 x N tile (kAcc = N / 2 a thread) leave in 16-byte pieces:
// acc[4 j + 2 h + e] is the element (row(h), 8 j + 2 (lane % 4) + e), row(h) = 16 (warp % 4) +
// lane / 4 + 8 h (the layout above). convert(j, v0, v1) makes each pair a bf16x2 word (bias,
// activation, rounding), each quad regroups 4 column groups (quad_transpose), and
// store(row, col, piece) gets the tile's row `row` of the warpgroup's 64, columns col .. col + 7.
template <int kAcc, class Convert, class Store>
__device__ __forceinline__ void for_each_piece(const float (&acc)[kAcc], Convert&& convert,
                                               Store&& store) {
  const int warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
  const int row = 16 * warp + lane / 4;
#pragma unroll
  for (int g = 0; g < kAcc / 16; ++g) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int j = 4 * g + i;
        const __nv_bfloat162 v = convert(j, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
        w[i] = *reinterpret_cast<const uint32_t*>(&v);
      }
      store(row + 8 * h, 8 * (4 * g + lane % 4), quad_transpose(w));
    }
  }
}

__device__ __forceinline__ unsigned load_acquire(const unsigned* counter) {
  unsigned v = 0;
#ifdef FL_SM90A_DEVICE
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory");
#endif
  return v;
}
__device__ __forceinline__ unsigned long long load_acquire(const unsigned long long* counter) {
  unsigned long long v = 0;
#ifdef FL_SM90A_DEVICE
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(counter) : "memory");
#endif
  return v;
}

}  // namespace fl::hopper
