// Residual add + LayerNorm with a warp a row (lesson 4's fused level, variant rows_warp; the
// design notes of every row kernel are in residual_layernorm.cu, the general row kernel in
// layernorm_rows.cuh).
//
// What changes against the aligned row kernel (layernorm_rows.cuh, rows_early), in the shape
// torch.compile's Inductor generates for this op (one program of one warp a row, grid = rows):
//  - A row is one warp, and a block is one warp: the grid is sized to the rows. Registers are
//    then granted a row at a time, and the SM holds as many rows as its registers allow (up to
//    its 32 blocks), not a multiple of a 2- or 4-row block.
//  - The 32 lanes are fixed at compile time, so a thread's packs sit at fixed distances from
//    its first one (32 x 16 bytes): one address per tensor and immediate offsets, not one
//    address per pack. At C = 768 a thread holds 6 float4 / 3 packs of 8 bf16 of each of x, r,
//    gamma and beta, all asked for before any is used.
//  - The reductions are butterfly shuffles within the warp: no shared memory, no barrier.
//  - h and y are stored together once the statistics are known (Inductor's order), and with
//    an L2 evict_last policy (sm_80+; a plain store below). x and r are dead once read, while
//    h and y are what the next kernels read (the next block's residual add, the next matmul):
//    when the L2 must give up lines it gives up the clean lines of x and r first and keeps the
//    written ones, so the last megabytes of h and y can still be in L2 when the kernel ends
//    (written back later, or read from there by the next kernel).
// Budget per row (as every fused form): reads 2Cb of x and r from DRAM, gamma and beta from L2
// or L1, writes 2Cb of h and y: 4Cb of DRAM traffic, of which the last megabytes written may
// still be in L2 when the kernel ends; the limit is a copy of 4 R C b bytes.
// Rows of whole 16-byte packs only (C a multiple of 4 fp32 / 8 bf16), at most 8 packs a thread
// (C up to 1024 fp32 / 2048 bf16).
#pragma once

#include <cuda_bf16.h>

#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/layernorm_rows.cuh"

namespace fl {
namespace layernorm_rows {

constexpr int kWarpRowMaxPacks = 8;  // 16-byte packs a thread holds, at most

// Sum over the warp; every lane gets it (butterfly shuffles: all lanes agree to the bit).
__device__ __forceinline__ float warp_row_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// An L2 evict_last policy for the stores of h and y (createpolicy needs sm_80; 0 below it).
__device__ __forceinline__ uint64_t l2_evict_last_policy() {
  uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
#endif
  return policy;
}

// A 16-byte store under that policy (a plain store on sm_70).
template <typename T>
__device__ __forceinline__ void store16_evict_last(T* p, const Vec16<T>& v, uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int4 b = *reinterpret_cast<const int4*>(&v);
  asm volatile("st.global.L2::cache_hint.v4.b32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p), "r"(b.x),
               "r"(b.y), "r"(b.z), "r"(b.w), "l"(policy)
               : "memory");
#else
  (void)policy;
  store16(p, v);
#endif
}

// One thread's packs of a row: pack k at column (lane + 32 k) x kVec, k < kPacks.
template <typename T, int kPacks>
struct WarpRowPacks {
  static constexpr int kVec = Vec16<T>::kCount;
  static constexpr int kStride = 32 * kVec;  // elements between a thread's packs
  int lane, packs;                           // packs: of the row (C / kVec)

  __device__ bool has(int k) const { return lane + k * 32 < packs; }
  // Loads this thread's packs of the row that starts at `row` (all issued before any use).
  __device__ __forceinline__ void load(const T* row, Vec16<T> (&v)[kPacks]) const {
    const T* p = row + lane * kVec;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      if (has(k)) v[k] = load16(p + k * kStride);
    }
  }
};

// h and y of one row from x, r, gamma and beta in registers; the statistics from the rounded
// h, as every level does; h and y stored together at the end, both kept in L2 (evict_last).
template <typename T, int kPacks>
__device__ __forceinline__ void warp_row_step(const WarpRowPacks<T, kPacks>& packs,
                                              const Vec16<T> (&xs)[kPacks],
                                              const Vec16<T> (&rs)[kPacks],
                                              const Vec16<T> (&gs)[kPacks],
                                              const Vec16<T> (&bs)[kPacks], T* h_row, T* y_row,
                                              int c) {
  constexpr int kVec = Vec16<T>::kCount;
  constexpr int kStride = WarpRowPacks<T, kPacks>::kStride;
  h_row += packs.lane * kVec;
  y_row += packs.lane * kVec;
  auto f32 = [](T v) { return widen(v); };
  // h = x + r, rounded to T; its sum on the way.
  Vec16<T> hs[kPacks];
  float sum = 0;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    if (packs.has(k)) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        hs[k].v[j] = Elem<T>::from_float(f32(xs[k].v[j]) + f32(rs[k].v[j]));
        sum += f32(hs[k].v[j]);
      }
    }
  }
  // The statistics from registers: mean, then the stable sum((h - mean)^2).
  const float mean = warp_row_sum(sum) / float(c);
  float sq = 0;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    if (packs.has(k)) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float d = f32(hs[k].v[j]) - mean;
        sq += d * d;
      }
    }
  }
  const float rstd = rsqrtf(warp_row_sum(sq) / float(c) + float(kEps));
  // y, and both outputs stored.
  const uint64_t keep = l2_evict_last_policy();
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    if (packs.has(k)) {
      Vec16<T> out;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        out.v[j] = Elem<T>::from_float((f32(hs[k].v[j]) - mean) * rstd * f32(gs[k].v[j]) +
                                       f32(bs[k].v[j]));
      }
      store16_evict_last(h_row + k * kStride, hs[k], keep);
      store16_evict_last(y_row + k * kStride, out, keep);
    }
  }
}

// x, r -> h, y for rows of c elements, a warp (and a block) a row: the grid is sized to the
// rows. x and r first, then gamma and beta: all four in flight before any is used.
template <typename T, int kPacks>
__global__ void __launch_bounds__(32)
    warp_row_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ gamma,
                    const T* __restrict__ beta, T* __restrict__ h, T* __restrict__ y, int64_t rows,
                    int c) {
  const WarpRowPacks<T, kPacks> packs{static_cast<int>(threadIdx.x % 32), c / Vec16<T>::kCount};
  const int64_t row = int64_t(blockIdx.x) + threadIdx.x / 32;
  Vec16<T> xs[kPacks], rs[kPacks], gs[kPacks], bs[kPacks];
  if (row < rows) {
    packs.load(x + row * c, xs);
    packs.load(r + row * c, rs);
  }
  packs.load(gamma, gs);
  packs.load(beta, bs);
  // The whole warp takes the branch or none of it, so no shuffle misses a lane.
  if (row < rows) warp_row_step(packs, xs, rs, gs, bs, h + row * c, y + row * c, c);
}

// "" when launch_warp_rows takes rows of c elements of `bytes` bytes, else why not.
inline std::string warp_rows_refusal(int64_t c, int64_t bytes) {
  const std::string aligned = aligned_rows_refusal(c, bytes);
  if (!aligned.empty()) return aligned;
  if (c > int64_t(32) * kWarpRowMaxPacks * (16 / bytes)) {
    return "C = " + std::to_string(c) + " needs more than " + std::to_string(kWarpRowMaxPacks) +
           " packs a thread with a warp a row";
  }
  return "";
}

// Picks the smallest instantiated kPacks that holds a thread's packs.
template <typename T, int kFirst, int... kRest>
Status launch_warp_row_packs(const RowArgs<T>& a, int packs_per_thread, cudaStream_t stream) {
  if (packs_per_thread <= kFirst) {
    warp_row_kernel<T, kFirst><<<static_cast<unsigned>(a.rows), 32, 0, stream>>>(
        a.x, a.r, a.gamma, a.beta, a.h, a.y, a.rows, a.c);
    FL_CUDA_TRY(cudaGetLastError());
    return Status::Ok();
  }
  if constexpr (sizeof...(kRest) > 0) {
    return launch_warp_row_packs<T, kRest...>(a, packs_per_thread, stream);
  } else {
    return Status::Error("layernorm warp rows: no kernel for " + std::to_string(packs_per_thread) +
                         " packs per thread (C = " + std::to_string(a.c) + ")");
  }
}

// Residual add + LayerNorm (lesson 4's fused step) with a warp a row.
template <typename T>
Status launch_warp_rows(const RowArgs<T>& a, cudaStream_t stream) {
  const std::string refusal = warp_rows_refusal(a.c, sizeof(T));
  if (!refusal.empty()) return Status::Unsupported(refusal);
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!(aligned(a.x) && aligned(a.r) && aligned(a.gamma) && aligned(a.beta) && aligned(a.h) &&
        aligned(a.y))) {
    return Status::Unsupported("a tensor does not start 16-byte aligned");
  }
  if (a.rows == 0) return Status::Ok();
  if (a.rows > int64_t(0x7fffffff)) return Status::Unsupported("more rows than a grid holds");
  const int packs = a.c / Vec16<T>::kCount;
  // C = 768: 6 packs a thread in fp32, 3 in bf16.
  return launch_warp_row_packs<T, 2, 3, 4, 6, 8>(a, (packs + 31) / 32, stream);
}

}  // namespace layernorm_rows
}  // namespace fl
