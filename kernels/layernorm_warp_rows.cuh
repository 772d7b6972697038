// Residual add + LayerNorm with a row per warp (lesson 4's fused level; the design notes of
// every row kernel are in residual_layernorm.cu, the general row kernel in layernorm_rows.cuh).
//
// What changes against the aligned row kernel (layernorm_rows.cuh, rows_early):
//  - A row's threads are a compile-time group of kLanes (32: one warp), so every pack of a
//    thread sits at a fixed distance from its first one (kLanes x 16 bytes): one 64-bit address
//    per tensor and immediate offsets, not one address per pack. The saved registers are rows
//    resident per SM, which is what keeps bytes in flight. At C = 768 a thread holds 6 float4 /
//    3 packs of 8 bf16 of each of x, r, gamma and beta.
//  - The reductions are butterfly shuffles inside the row's group, never shared memory or a
//    barrier; blocks are kRowsPerBlock rows (1: Inductor's 32-thread blocks, so the registers
//    are granted a row at a time).
//  - Two ways to cover the rows (WarpRowGrid): a block per kRowsPerBlock rows (the grid sized
//    to the rows), or as many blocks as fit on the GPU at once, each striding over the rows:
//    gamma and beta are then read once per thread, not once per row, and the next row's x and r
//    are in flight while the current row is reduced and normalized, so a warp never waits on
//    DRAM with nothing asked for.
// Budget per row (as every fused form): reads 2Cb of x and r from DRAM, gamma and beta from L2
// or L1, writes 2Cb of h and y: 4Cb of DRAM traffic; the limit is a copy of 4 R C b bytes.
// Rows of whole 16-byte packs only (C a multiple of 4 fp32 / 8 bf16), at most kLanes x 8 packs.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/layernorm_rows.cuh"

namespace fl {
namespace layernorm_rows {

// How a warp-row launch covers the rows, and when it reads gamma and beta (flags).
enum WarpRowGrid : int {
  kGridRows = 0,      // one block per kRowsPerBlock rows, the grid sized to the rows
  kGridResident = 1,  // the blocks that fit at once, striding over rows; next row prefetched
  kLateParams = 2,    // with kGridRows: gamma and beta asked for once h is made (from L1/L2,
                      // under the reductions), so x, r, gamma and beta never all hold registers
};

constexpr int kWarpRowLanes = 32;
constexpr int kWarpRowMaxPacks = 8;

// Sum over the kLanes threads of a row (an aligned group of a warp): all of them get it.
template <int kLanes>
__device__ __forceinline__ float group_sum(float v) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "lanes: 2^k <= 32");
  const unsigned group = kLanes == 32 ? 0xffffffffu : ((1u << kLanes) - 1u);
  const unsigned mask = group << ((threadIdx.x & 31) & ~(kLanes - 1));
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(mask, v, offset);
  return v;
}

// One thread's packs of one row of a tensor: pack k at column (lane + k * kLanes) * kVec.
template <typename T, int kLanes, int kPacks>
struct WarpRowPacks {
  static constexpr int kVec = Vec16<T>::kCount;
  static constexpr int kStride = kLanes * kVec;  // elements between a thread's packs
  int lane, packs;                               // packs: of the row (C / kVec)

  __device__ bool has(int k) const { return lane + k * kLanes < packs; }
  // Loads this thread's packs of the row that starts at `row` (all issued before any use).
  __device__ __forceinline__ void load(const T* row, Vec16<T> (&v)[kPacks]) const {
    const T* p = row + lane * kVec;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      if (has(k)) v[k] = load16(p + k * kStride);
    }
  }
};

// h and y of one row from x and r in registers: h stored as soon as it is made, the statistics
// from the stored (rounded) h, y normalized with gamma and beta from registers. `between` runs
// after h's stores and before the reductions (the resident grid issues the next row's loads).
template <typename T, int kLanes, int kPacks, typename Between>
__device__ __forceinline__ void warp_row_step(const WarpRowPacks<T, kLanes, kPacks>& packs,
                                              const Vec16<T> (&xs)[kPacks],
                                              const Vec16<T> (&rs)[kPacks],
                                              const Vec16<T> (&gs)[kPacks],
                                              const Vec16<T> (&bs)[kPacks], T* h_row, T* y_row,
                                              int c, Between between) {
  constexpr int kVec = Vec16<T>::kCount;
  constexpr int kStride = WarpRowPacks<T, kLanes, kPacks>::kStride;
  h_row += packs.lane * kVec;
  y_row += packs.lane * kVec;
  auto f32 = [](T v) { return widen(v); };
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
      store16(h_row + k * kStride, hs[k]);
    }
  }
  between();
  const float mean = group_sum<kLanes>(sum) / float(c);
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
  const float rstd = rsqrtf(group_sum<kLanes>(sq) / float(c) + float(kEps));
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    if (packs.has(k)) {
      Vec16<T> out;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        out.v[j] = Elem<T>::from_float((f32(hs[k].v[j]) - mean) * rstd * f32(gs[k].v[j]) +
                                       f32(bs[k].v[j]));
      }
      store16(y_row + k * kStride, out);
    }
  }
}

// The kernel: x, r -> h, y for rows of c elements (c a multiple of a pack, at most
// kLanes x kPacks packs). Threads of a row past the end load and store nothing but still shuffle
// (their group is whole, so the shuffles' masks hold).
template <typename T, int kLanes, int kPacks, int kRowsPerBlock, int kGrid, int kMinBlocks>
__global__ void __launch_bounds__(kLanes* kRowsPerBlock, kMinBlocks)
    warp_row_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ gamma,
                    const T* __restrict__ beta, T* __restrict__ h, T* __restrict__ y,
                    int64_t rows, int c) {
  const WarpRowPacks<T, kLanes, kPacks> packs{static_cast<int>(threadIdx.x % kLanes),
                                              c / Vec16<T>::kCount};
  int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanes;
  Vec16<T> xs[kPacks], rs[kPacks], gs[kPacks], bs[kPacks];
  if (row < rows) {  // x and r first, then gamma and beta: all four in flight at once
    packs.load(x + row * c, xs);
    packs.load(r + row * c, rs);
  }
  auto load_params = [&] {
    packs.load(gamma, gs);
    packs.load(beta, bs);
  };
  if constexpr ((kGrid & kLateParams) == 0) load_params();
  if constexpr ((kGrid & kGridResident) == 0) {
    if (row < rows) {
      warp_row_step(packs, xs, rs, gs, bs, h + row * c, y + row * c, c, [&] {
        if constexpr ((kGrid & kLateParams) != 0) load_params();
      });
    }
  } else {
    // Every thread of a group takes the same rows, so a group leaves the loop whole.
    const int64_t stride = int64_t(gridDim.x) * kRowsPerBlock;
    for (; row < rows; row += stride) {
      const int64_t next = row + stride;
      warp_row_step(packs, xs, rs, gs, bs, h + row * c, y + row * c, c, [&] {
        if (next < rows) {  // x and r are spent: their registers take the next row's
          packs.load(x + next * c, xs);
          packs.load(r + next * c, rs);
        }
      });
    }
  }
}

// "" when a warp-row launch takes rows of c elements of `bytes` bytes, else why not.
inline std::string warp_rows_refusal(int64_t c, int64_t bytes) {
  const std::string aligned = aligned_rows_refusal(c, bytes);
  if (!aligned.empty()) return aligned;
  const int64_t vec = 16 / bytes;
  if (c > int64_t(kWarpRowLanes) * kWarpRowMaxPacks * vec) {
    return "C = " + std::to_string(c) + " needs more than " + std::to_string(kWarpRowMaxPacks) +
           " packs a thread with a warp a row";
  }
  return "";
}

// Picks the smallest instantiated kPacks that holds a thread's packs, and the grid.
template <typename T, int kRowsPerBlock, int kGrid, int kMinBlocks, int kFirst, int... kRest>
Status launch_warp_row_packs(const RowArgs<T>& a, int packs_per_thread, cudaStream_t stream) {
  if (packs_per_thread <= kFirst) {
    constexpr int kThreads = kWarpRowLanes * kRowsPerBlock;
    auto kernel = warp_row_kernel<T, kWarpRowLanes, kFirst, kRowsPerBlock, kGrid, kMinBlocks>;
    int64_t blocks = (a.rows + kRowsPerBlock - 1) / kRowsPerBlock;
    if constexpr ((kGrid & kGridResident) != 0) {
      int device = 0, sms = 0, per_sm = 0;
      FL_CUDA_TRY(cudaGetDevice(&device));
      FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
      FL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0));
      blocks = std::min<int64_t>(blocks, int64_t(sms) * std::max(per_sm, 1));
    }
    kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a.x, a.r, a.gamma, a.beta, a.h,
                                                                   a.y, a.rows, a.c);
    FL_CUDA_TRY(cudaGetLastError());
    return Status::Ok();
  }
  if constexpr (sizeof...(kRest) > 0) {
    return launch_warp_row_packs<T, kRowsPerBlock, kGrid, kMinBlocks, kRest...>(a, packs_per_thread,
                                                                           stream);
  } else {
    return Status::Error("layernorm warp rows: no kernel for " + std::to_string(packs_per_thread) +
                         " packs per thread (C = " + std::to_string(a.c) + ")");
  }
}

// Residual add + LayerNorm (lesson 4's fused step) with a warp a row.
// kMinBlocks: blocks an SM must hold at once (__launch_bounds__), which caps the registers; 0:
// no cap.
template <typename T, int kRowsPerBlock, int kGrid, int kMinBlocks = 0>
Status launch_warp_rows(const RowArgs<T>& a, cudaStream_t stream) {
  const std::string refusal = warp_rows_refusal(a.c, sizeof(T));
  if (!refusal.empty()) return Status::Unsupported(refusal);
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!(aligned(a.x) && aligned(a.r) && aligned(a.gamma) && aligned(a.beta) && aligned(a.h) &&
        aligned(a.y))) {
    return Status::Unsupported("a tensor does not start 16-byte aligned");
  }
  if (a.rows == 0) return Status::Ok();
  const int packs = a.c / Vec16<T>::kCount;
  const int per_thread = (packs + kWarpRowLanes - 1) / kWarpRowLanes;
  return launch_warp_row_packs<T, kRowsPerBlock, kGrid, kMinBlocks, 2, 3, 4, 6, 8>(a, per_thread,
                                                                                 stream);
}

}  // namespace layernorm_rows
}  // namespace fl
