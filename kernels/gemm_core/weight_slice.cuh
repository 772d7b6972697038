// The block-level pieces of the portable small-token rungs (sm_80+; fp32 also sm_70): a block
// owns a slice of the weights, asks for every byte of it at once with 16-byte cp.async (all of
// it in flight: at a few tokens the weights are what must move), and multiplies the activations
// by it from shared memory. What changes against the tile kernels of tensor_gemm.cuh: there a
// block walks K through a short ring, a few K-tiles in flight per SM, so at 1-64 tokens the SMs
// wait on DRAM latency; here one block per SM holds its whole slice (at C = 768, 24 hidden
// units: W1's 768 x 24 and W2's 24 x 768, 72 KB in bf16) and the copies are issued before any
// arithmetic.
//
//   stage():         rows of a row-major matrix into shared memory, padded to an odd number of
//                    16-byte chunks a row (ldmatrix and the fp32 loads then hit 8 distinct bank
//                    groups), zero outside the valid rows and columns; cp.async where rows are
//                    16-byte multiples and aligned, element-wise loads elsewhere (odd C).
//   warp_mma():      acc[nt] += A[16 rows, k0..k1) B[k0..k1, 8 nt columns] for up to kMaxNT
//                    8-column tiles; bf16 on mma.sync m16n8k16 (A by ldmatrix, B by
//                    ldmatrix.trans), fp32 on the CUDA cores in the same register layout (lane
//                    g = lane / 4, t = lane % 4 owns rows g, g + 8 and columns 2t, 2t + 1);
//                    run_all_at() where every tile is present: no per-tile tests, a k-step's B
//                    fragments all asked for before its mma, from lane addresses the caller may
//                    work out before the operands land (at a few warps a scheduler the
//                    instructions a warp executes, not the tensor cores, set the time).
//   block_product(): a 16 mtc-row panel times an 8 nt-column panel over K, the warps split into
//                    mtc row tiles x (8 / mtc) parts of K; the parts meet in shared memory and
//                    the caller's epilogue sees each sum once.
// Napkin math per k16 step (bf16): one ldmatrix.x4 of A, one ldmatrix.x4.trans per two column
// tiles, one mma per tile: about 2.5 instructions per mma, 4 KFLOP each.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/gemm_core/slice_plan.h"
#include "kernels/tensor_gemm.cuh"

namespace fl::slice {

// Elements of a 16-byte chunk; the step K is split and padded in (an mma's k16 for bf16).
template <typename T>
constexpr int kChunk = 16 / sizeof(T);
template <typename T>
constexpr int kKStep = k_step(sizeof(T));

// A shared-memory row of `cols` elements: an odd number of 16-byte chunks.
template <typename T>
__host__ __device__ constexpr int padded_ld(int cols) {
  return slice::padded_ld(cols, int(sizeof(T)));
}

// A float from L2 (ld.global.cg: values other blocks added with atomics in this launch).
__device__ __forceinline__ float load_cg(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}

__device__ __forceinline__ float4 load_cg4(const float* p) {
  float4 v;
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p));
  return v;
}

// 16 bytes of any type from L2 (ld.global.cg), as four words: bf16 shares other blocks wrote.
__device__ __forceinline__ uint4 load_cg16(const void* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// ---- stage: global rows into padded shared memory --------------------------------------------
// rows x chunks*E elements of g (row stride ldg) into s (row stride lds): element (r, c) read
// when r < rows_valid and c < cols_valid, zero otherwise. vec: g and ldg are 16-byte aligned and
// cols_valid is a multiple of E (a chunk is all in or all out), so each chunk is one cp.async.
// kThr: the block's threads, all of which take part (more threads: fewer chunks a thread).
template <int kThr = kThreads, typename T>
__device__ __forceinline__ void stage(T* s, int lds, const T* g, int64_t ldg, int rows, int cols,
                                      int rows_valid, int cols_valid, bool vec) {
  constexpr int E = kChunk<T>;
  const int chunks = (cols + E - 1) / E;
  if (chunks == 0) return;
  // Thread i takes chunks i, i + kThr, ...: the row and column advance by constants.
  const int dr = kThr / chunks, dc = kThr % chunks;
  int r = threadIdx.x / chunks, c = threadIdx.x % chunks;
  for (; r < rows; r += dr, c += dc) {
    if (c >= chunks) c -= chunks, ++r;
    if (r >= rows) break;
    T* dst = s + r * lds + c * E;
    const T* src = g + r * ldg + c * E;
    if (vec) {
      const bool valid = r < rows_valid && c * E < cols_valid;
      tc::copy16_async(dst, valid ? src : g, valid);
    } else {  // odd C: element by element, one copy of the loop's code (not unrolled)
#pragma unroll 1
      for (int e = 0; e < E; ++e) {
        dst[e] = r < rows_valid && c * E + e < cols_valid ? src[e] : Elem<T>::from_float(0.0f);
      }
    }
  }
}

// cp.async.wait_group takes its count as an immediate: wait_group min(n, N).
template <int N>
__device__ __forceinline__ void wait_pending(int n) {
  if constexpr (N == 0) {
    tc::async_wait<0>();
  } else if (n >= N) {
    tc::async_wait<N>();
  } else {
    wait_pending<N - 1>(n);
  }
}

// ---- one warp: acc[nt] += A[16 x (k0..k1)] B[(k0..k1) x 8 nt], k0 and k1 multiples of kKStep --
template <typename T, int kMaxNT>
struct WarpMma;

template <int kMaxNT>
struct WarpMma<__nv_bfloat16, kMaxNT> {
  using T = __nv_bfloat16;
  static_assert(kMaxNT % 2 == 0, "column tiles go in pairs (ldmatrix.x4.trans)");
  static __device__ __forceinline__ void run(float (&acc)[kMaxNT][4], int nt_count, const T* a,
                                             int lda, const T* b, int ldb, int k0, int k1) {
    run_at(acc, nt_count, a_lane(a, lda, k0), b_lane(b, ldb, k0), 16u * ldb * sizeof(T), k0, k1);
  }
  // run() from the lane addresses a_lane() and b_lane() gave at k0 (b_step: 16 rows of B in
  // bytes): a caller that multiplies the same places again and again (a ring's slots) works
  // them out once.
  static __device__ __forceinline__ void run_at(float (&acc)[kMaxNT][4], int nt_count,
                                                unsigned a_addr, unsigned b_addr, unsigned b_step,
                                                int k0, int k1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#pragma unroll 2
    for (int k = k0; k < k1; k += 16, a_addr += 32, b_addr += b_step) {
      unsigned a0, a1, a2, a3;
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3)
                   : "r"(a_addr));
#pragma unroll
      for (int np = 0; np < kMaxNT / 2; ++np) {
        if (2 * np >= nt_count) break;
        unsigned b0, b1, b2 = 0, b3 = 0;
        if (2 * np + 1 < nt_count) {
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                       : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
                       : "r"(b_addr + np * 32));
        } else {
          asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                       : "=r"(b0), "=r"(b1)
                       : "r"(b_addr + np * 32));
        }
        mma(acc[2 * np], a0, a1, a2, a3, b0, b1);
        if (2 * np + 1 < nt_count) mma(acc[2 * np + 1], a0, a1, a2, a3, b2, b3);
      }
    }
#else
    __trap();  // bf16 needs compute capability 8.0 (the lessons do not offer it below)
#endif
  }
  // ldmatrix's lane addresses: A's rows lane % 16 at k0 + 8 (lane / 16); B's rows
  // k0 + lane % 8 + 8 ((lane / 8) % 2) at columns 8 (lane / 16) of each pair of tiles. They
  // depend only on the lane and the operands' places: a caller may work them out before the
  // operands land (run_all_at).
  static __device__ __forceinline__ unsigned a_lane(const T* a, int lda, int k0) {
    const int lane = threadIdx.x & 31;
    return static_cast<unsigned>(
        __cvta_generic_to_shared(a + (lane & 15) * lda + k0 + (lane >> 4) * 8));
  }
  static __device__ __forceinline__ unsigned b_lane(const T* b, int ldb, int k0) {
    const int lane = threadIdx.x & 31;
    return static_cast<unsigned>(__cvta_generic_to_shared(
        b + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ldb + (lane >> 4) * 8));
  }
  // All kMaxNT tiles (the common case) over k_steps steps of 16 from the lane addresses a_lane()
  // and b_lane() gave (b_step: 16 rows of B in bytes): no per-tile tests, and a k-step's B
  // fragments all asked for before its mma, so their ldmatrix latencies overlap (the asm
  // statements are volatile: the compiler keeps their order).
  static __device__ __forceinline__ void run_all_at(float (&acc)[kMaxNT][4], unsigned a_addr,
                                                    unsigned b_addr, unsigned b_step, int k_steps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#pragma unroll 1
    for (int s = 0; s < k_steps; ++s, a_addr += 32, b_addr += b_step) {
      unsigned f[4], g[kMaxNT / 2][4];
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(f[0]), "=r"(f[1]), "=r"(f[2]), "=r"(f[3])
                   : "r"(a_addr));
#pragma unroll
      for (int np = 0; np < kMaxNT / 2; ++np) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(g[np][0]), "=r"(g[np][1]), "=r"(g[np][2]), "=r"(g[np][3])
                     : "r"(b_addr + np * 32));
      }
#pragma unroll
      for (int np = 0; np < kMaxNT / 2; ++np) {
        mma(acc[2 * np], f[0], f[1], f[2], f[3], g[np][0], g[np][1]);
        mma(acc[2 * np + 1], f[0], f[1], f[2], f[3], g[np][2], g[np][3]);
      }
    }
#endif
  }
  static __device__ __forceinline__ void mma(float (&c)[4], unsigned a0, unsigned a1, unsigned a2,
                                             unsigned a3, unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
        "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
  }
};

// fp32 on the CUDA cores: per 4 k, two 16-byte loads of A (rows g and g + 8) and four 8-byte
// loads of B per column tile feed 16 FMAs per tile. A tile's four loads issue before its FMAs:
// with a load waited on before the next is issued (one tile's k at a time), each costs its
// whole latency at the one or two warps a scheduler these kernels run (docs/PERFORMANCE.md has
// both forms measured).
template <int kMaxNT>
struct WarpMma<float, kMaxNT> {
  static __device__ __forceinline__ void run(float (&acc)[kMaxNT][4], int nt_count, const float* a,
                                             int lda, const float* b, int ldb, int k0, int k1) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const float* a0 = a + g * lda;
    const float* a1 = a0 + 8 * lda;
    const float* bk = b + k0 * ldb + 2 * t;
#pragma unroll 1
    for (int k = k0; k < k1; k += 4, bk += 4 * ldb) {
      const float4 x0 = *reinterpret_cast<const float4*>(a0 + k);
      const float4 x1 = *reinterpret_cast<const float4*>(a1 + k);
      const float r0[4] = {x0.x, x0.y, x0.z, x0.w}, r1[4] = {x1.x, x1.y, x1.z, x1.w};
#pragma unroll
      for (int nt = 0; nt < kMaxNT; ++nt) {
        if (nt >= nt_count) break;
        float2 w[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) w[e] = *reinterpret_cast<const float2*>(bk + e * ldb + nt * 8);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          acc[nt][0] = fmaf(r0[e], w[e].x, acc[nt][0]);
          acc[nt][1] = fmaf(r0[e], w[e].y, acc[nt][1]);
          acc[nt][2] = fmaf(r1[e], w[e].x, acc[nt][2]);
          acc[nt][3] = fmaf(r1[e], w[e].y, acc[nt][3]);
        }
      }
    }
  }
};

template <int kMaxNT>
__device__ __forceinline__ void zero(float (&acc)[kMaxNT][4]) {
#pragma unroll
  for (int nt = 0; nt < kMaxNT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
}

// ---- the parts of a split-K panel product meet ----------------------------------------------
// Warp w's place in a split-K panel product of mtc row tiles (mtc of at most kW, the block's
// warps): row tile w % mtc, part w / mtc of K's kW / mtc parts (past them where mtc does not
// divide kW: no part). A caller may work it out before the operands land.
struct PanelWarp {
  int mt, part, parts;
};
template <int kW = kWarps>
__device__ __forceinline__ PanelWarp panel_warp(int mtc) {
  const int warp = threadIdx.x >> 5;
  return {warp % mtc, warp / mtc, kW / mtc};
}

// acc: warp w's sums for its row tile and part of K (pw). The parts go to red (kW / mtc x 16 mtc
// x 8 nt floats; it may overlay the operands: the block syncs before writing it), then
// epi(row, col, sum) for every element of the first `row_count` rows (the caller's rows past
// them keep what they hold). Ends with the block synchronized after the epilogue.
template <int kMaxNT, int kW = kWarps, class Epilogue>
__device__ __forceinline__ void reduce_parts(const float (&acc)[kMaxNT][4], PanelWarp pw, int mtc,
                                             int nt_count, float* red, const Epilogue& epi,
                                             int row_count = 1 << 30) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int mt = pw.mt, part = pw.part, parts = pw.parts;
  const int rows = 16 * mtc, cols = 8 * nt_count;
  __syncthreads();     // every warp is done with A and B: red may overlay them
  if (part < parts) {  // where mtc does not divide kWarps, the last warps had no part of K
    float* mine = red + part * rows * cols + (mt * 16 + g) * cols + 2 * t;
#pragma unroll
    for (int nt = 0; nt < kMaxNT; ++nt) {
      if (nt >= nt_count) break;
      *reinterpret_cast<float2*>(mine + nt * 8) = make_float2(acc[nt][0], acc[nt][1]);
      *reinterpret_cast<float2*>(mine + 8 * cols + nt * 8) = make_float2(acc[nt][2], acc[nt][3]);
    }
  }
  __syncthreads();
  const int used = min(rows, row_count) * cols;
  for (int e = threadIdx.x; e < used; e += 32 * kW) {
    float s = 0.0f;
    for (int p = 0; p < parts; ++p) s += red[p * rows * cols + e];
    epi(e / cols, e % cols, s);
  }
  __syncthreads();
}
template <int kMaxNT, int kW = kWarps, class Epilogue>
__device__ __forceinline__ void reduce_parts(const float (&acc)[kMaxNT][4], int mtc, int nt_count,
                                             float* red, const Epilogue& epi,
                                             int row_count = 1 << 30) {
  reduce_parts<kMaxNT, kW>(acc, panel_warp<kW>(mtc), mtc, nt_count, red, epi, row_count);
}

// Warp w's share of K in [k0, k1) (a multiple of the k step) when K is split into
// kW / mtc parts: [*lo, *hi), possibly empty.
template <typename T, int kW = kWarps>
__device__ __forceinline__ void warp_k_range(int k0, int k1, int mtc, int* lo, int* hi) {
  constexpr int S = kKStep<T>;
  const int part = (threadIdx.x >> 5) / mtc, parts = kW / mtc, steps = (k1 - k0) / S;
  *lo = part < parts ? k0 + steps * part / parts * S : k1;
  *hi = part < parts ? k0 + steps * (part + 1) / parts * S : k1;
}

// ---- a block's panel product with split K --------------------------------------------------
// P = A[16 mtc rows, K] B[K, 8 nt columns] (K a multiple of kKStep): warp w takes row tile
// w % mtc and part w / mtc of K; the parts meet in red (reduce_parts) and the caller's epilogue
// sees each sum once (of the first row_count rows). Ends with the block synchronized after the
// epilogue.
template <typename T, int kMaxNT, int kW = kWarps, class Epilogue>
__device__ __forceinline__ void block_product(const T* a, int lda, const T* b, int ldb, int K,
                                              int mtc, int nt_count, float* red,
                                              const Epilogue& epi, int row_count = 1 << 30) {
  int k0 = 0, k1 = 0;
  warp_k_range<T, kW>(0, K, mtc, &k0, &k1);
  float acc[kMaxNT][4];
  zero(acc);
  const T* a_tile = a + ((threadIdx.x >> 5) % mtc) * 16 * lda;
  WarpMma<T, kMaxNT>::run(acc, nt_count, a_tile, lda, b, ldb, k0, k1);
  reduce_parts<kMaxNT, kW>(acc, mtc, nt_count, red, epi, row_count);
}

// ---- launching a weight-streaming kernel (host) ---------------------------------------------

// Whether this GPU can run a weight-streaming kernel that ends in a grid barrier, in precision p:
// bf16 needs mma.sync (compute capability 8.0), the barrier a cooperative launch. Else
// Unsupported with one line that names the kernel (`what`, e.g. "the hidden-slice FFN").
inline Status cooperative_gpu_supported(Precision p, const std::string& what) {
  int device = 0, major = 0, cooperative = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  if (p == Precision::bf16 && major < 8) {
    return Status::Unsupported(what + "'s bf16 path needs compute capability 8.0 (mma.sync)");
  }
  if (!cooperative) return Status::Unsupported(what + " needs cooperative launches");
  return Status::Ok();
}

// Launches kernel(args) with every block resident at once (a cooperative launch: its grid
// barrier cannot wait on a block that never started) and `smem` bytes of dynamic shared memory.
template <class Args>
Status launch_cooperative(void (*kernel)(Args), Args& args, int blocks, int threads, size_t smem,
                          cudaStream_t stream) {
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(smem)));
  void* params[] = {&args};
  FL_CUDA_TRY(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), dim3(blocks),
                                          dim3(threads), params, smem, stream));
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace fl::slice
