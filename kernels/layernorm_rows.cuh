// LayerNorm's row kernels, shared by residual_layernorm (lesson 4) and layernorm_linear
// (lesson 6): one kernel, four steps (statistics only, normalize with given statistics, a whole
// LayerNorm, residual add + LayerNorm), two launchers (launch_rows for any row length,
// launch_aligned_rows for rows of whole 16-byte packs). The design notes are in
// residual_layernorm.cu and above row_body below.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/row_split.cuh"

namespace fl {
namespace layernorm_rows {

// LayerNorm's epsilon (PyTorch's default); fp32 kernels use float(kEps).
constexpr double kEps = 1e-5;
constexpr int kMinRowBlock = 128;  // threads per block of the row kernels (at least)
constexpr int kMinLanes = 8;       // threads sharing one row: at least 8 (a head or tail has < 8)
constexpr int kMaxLanes = 512;     // and at most 512
constexpr int kMaxPacks = 8;       // 16-byte packs a thread holds: 32 registers of row data
constexpr int kMaxC = kMaxLanes * kMaxPacks * 4;  // fp32: 16384 (bf16 could go twice as far)

// Sum of `v` over the `lanes` threads that share a row; every one of them gets the same value.
// Within a warp (or an aligned group of 8 or 16 lanes): butterfly shuffles, and since
// a + b == b + a exactly, all lanes agree to the bit. Across warps: one partial per warp in
// shared memory and a barrier, so every thread of the block must call it, with the same `lanes`.
__device__ __forceinline__ float row_sum(float v, int lanes, float* scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    // `lanes` is the same across the warp, so all 32 lanes shuffle or none does.
    if (offset < lanes) v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  if (lanes <= 32) return v;
  const int warp = threadIdx.x >> 5, warps_per_row = lanes >> 5;
  if ((threadIdx.x & 31) == 0) scratch[warp] = v;
  __syncthreads();
  const int first = (warp / warps_per_row) * warps_per_row;
  float total = 0;
  for (int w = 0; w < warps_per_row; ++w) total += scratch[first + w];
  return total;
}

// bf16 -> fp32 is exact: the 16 bits become the top half of the float. Written as a volatile
// asm so the compiler widens again at each use instead of keeping a float copy of the whole
// row slice alive: the slice then costs 4 registers per 8 bf16, not 8 (mean_var at C = 768:
// 60 registers instead of 82), so more rows, and bytes, are in flight per SM. On an H200 at
// 256K rows this took bf16 mean_var from 81-84% of copy bandwidth (16 or 32 lanes per row) to
// 93%, and layernorm from 85-88% to 97%. fp32 has nothing to widen.
__device__ __forceinline__ float widen(float v) {
  return v;
}
__device__ __forceinline__ float widen(__nv_bfloat16 v) {
  float f;
  asm volatile("mov.b32 %0, {0, %1};" : "=f"(f) : "h"(__bfloat16_as_ushort(v)));
  return f;
}

// What a launch of the row kernel does. The steps share one body: load a row slice into
// registers, then (depending on the step) compute the statistics and write what this launch
// writes. Only the trips through memory differ between the levels.
enum class RowStep {
  kMeanVar,    // level 0, launch 1: h -> mean, rstd
  kNormalize,  // level 0, launch 2: h, mean, rstd, gamma, beta -> y
  kLayerNorm,  // level 1, launch 1: h, gamma, beta -> y (statistics in registers)
  kFused,      // level 2: x, r, gamma, beta -> h, y
};

// How a launch of the row kernel reads its row, fixed at compile time (flags).
enum RowMoves : int {
  kAnyRows = 0,      // a row may start anywhere: head | packs | tail; gamma, beta by element
  kAlignedRows = 1,  // every row starts 16-byte aligned (C a multiple of a pack): packs only
  kEarlyParams = 2,  // with kAlignedRows: gamma and beta loaded with the row, not after the
                     // statistics, so no row waits on a second round trip (Inductor's order)
};

// One row per `lanes` threads (8 or 16 lanes for short rows, a warp, or up to 16 warps for long
// rows); blockDim.x / lanes rows per block. A row is  head | 16-byte packs | tail  and thread
// `rank` holds its RowSlice (row_split.cuh: packs rank, rank + lanes, ..., head and tail element
// `rank` where those exist); kPacks is the compile-time bound on its packs, so the whole slice
// lives in registers. The packs are kept as stored (bf16 stays bf16: half the registers) and
// widened to fp32 where used. For C = 768 there is no head or tail: the general launch gives
// fp32 32 lanes x 6 float4 and bf16 16 lanes x 6 packs, the aligned launches 3 packs a thread
// (64 and 32 lanes). kMoves says which code the row takes (RowMoves above).
template <typename T, int kPacks, RowStep kStep, int kMoves>
__device__ __forceinline__ void row_body(const T* __restrict__ x, const T* __restrict__ r,
                                         const T* __restrict__ gamma, const T* __restrict__ beta,
                                         T* __restrict__ h, T* __restrict__ y,
                                         float* __restrict__ mean_out, float* __restrict__ rstd_out,
                                         int64_t rows, int c, int lanes) {
  constexpr int kVec = Vec16<T>::kCount;
  __shared__ float s_sum[kMaxLanes / 32], s_sq[kMaxLanes / 32];
  const int rank = threadIdx.x % lanes;
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / lanes) + threadIdx.x / lanes;
  // Threads of a row past the end still take part in row_sum's barriers; they move no data.
  const bool active = row < rows;
  const int64_t base = row * c;
  // The row as head | 16-byte packs | tail (row_split.cuh): h is the one tensor every step
  // touches, and every tensor's row splits alike. A thread of a row past the end holds nothing.
  // Aligned rows are whole packs, known at compile time: no head, no tail, no scalar path.
  constexpr bool kAligned = (kMoves & kAlignedRows) != 0;
  RowSplit<T> split;
  if constexpr (kAligned) {
    split = RowSplit<T>{0, c / kVec, 0};
  } else {
    split = split_row(h + base, c);
  }
  const RowSlice<T> slice{split, rank, lanes};
  const bool has_head = !kAligned && active && slice.has_head();
  const bool has_tail = !kAligned && active && slice.has_tail();
  auto has_pack = [&](int k) { return active && slice.has_pack(k); };
  const int head_col = slice.head_col(), tail_col = slice.tail_col();
  auto f32 = [](T v) { return widen(v); };
  auto add = [&](T a, T b) { return Elem<T>::from_float(f32(a) + f32(b)); };
  // gamma and beta of this thread's packs, when they are loaded with the row (kEarlyParams).
  constexpr bool kEarly = kAligned && kStep != RowStep::kMeanVar && (kMoves & kEarlyParams) != 0;
  Vec16<T> gs[kEarly ? kPacks : 1], bs[kEarly ? kPacks : 1];
  auto load_params = [&] {
    if constexpr (kEarly) {
#pragma unroll
      for (int k = 0; k < kPacks; ++k) {
        if (has_pack(k)) {
          gs[k] = load16(gamma + slice.pack_col(k));
          bs[k] = load16(beta + slice.pack_col(k));
        }
      }
    }
  };

  // 1. Load this thread's slice of the row: every load is issued before any value is used.
  Vec16<T> hs[kPacks];           // h, as stored
  float head_v = 0, tail_v = 0;  // 0 where this thread holds no head or tail element
  if constexpr (kStep == RowStep::kFused) {
    Vec16<T> xs[kPacks], rs[kPacks];
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      if (has_pack(k)) {
        xs[k] = load16(x + base + slice.pack_col(k));
        rs[k] = load16(r + base + slice.pack_col(k));
      }
    }
    load_params();
    // h = x + r, rounded to T and written right away (it is final); the statistics use the
    // rounded value, as the unfused levels do when they read h back.
    if (has_head) {
      const T hv = add(x[base + head_col], r[base + head_col]);
      h[base + head_col] = hv;
      head_v = f32(hv);
    }
    if (has_tail) {
      const T hv = add(x[base + tail_col], r[base + tail_col]);
      h[base + tail_col] = hv;
      tail_v = f32(hv);
    }
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      if (has_pack(k)) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) hs[k].v[j] = add(xs[k].v[j], rs[k].v[j]);
        store16(h + base + slice.pack_col(k), hs[k]);
      }
    }
  } else {
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      if (has_pack(k)) hs[k] = load16(h + base + slice.pack_col(k));
    }
    load_params();
    if (has_head) head_v = f32(h[base + head_col]);
    if (has_tail) tail_v = f32(h[base + tail_col]);
  }

  // 2. The row's statistics: from registers (two passes, no extra traffic), or read back from
  // the mean_var launch (level 0).
  float mean, rstd;
  if constexpr (kStep == RowStep::kNormalize) {
    mean = active ? mean_out[row] : 0.0f;
    rstd = active ? rstd_out[row] : 0.0f;
  } else {
    float sum = head_v + tail_v;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      if (has_pack(k)) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) sum += f32(hs[k].v[j]);
      }
    }
    mean = row_sum(sum, lanes, s_sum) / float(c);
    auto square = [mean](float a) { return (a - mean) * (a - mean); };
    float sq = (has_head ? square(head_v) : 0.0f) + (has_tail ? square(tail_v) : 0.0f);
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      if (has_pack(k)) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) sq += square(f32(hs[k].v[j]));
      }
    }
    rstd = rsqrtf(row_sum(sq, lanes, s_sq) / float(c) + float(kEps));
  }

  // 3. What this launch writes.
  if constexpr (kStep == RowStep::kMeanVar) {
    if (active && rank == 0) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  } else {
    auto normalize = [mean, rstd](float a, T g, T b) {
      return Elem<T>::from_float((a - mean) * rstd * Elem<T>::to_float(g) + Elem<T>::to_float(b));
    };
    // gamma[col] is 16-byte aligned exactly when the row is (no head).
    const bool params_aligned = kAligned || slice.split.head == 0;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      if (!has_pack(k)) continue;
      Vec16<T> g, b, out;
      if constexpr (kEarly) {
        g = gs[k];
        b = bs[k];
      } else if (params_aligned) {
        g = load16(gamma + slice.pack_col(k));
        b = load16(beta + slice.pack_col(k));
      } else {
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          g.v[j] = gamma[slice.pack_col(k) + j];
          b.v[j] = beta[slice.pack_col(k) + j];
        }
      }
#pragma unroll
      for (int j = 0; j < kVec; ++j) out.v[j] = normalize(f32(hs[k].v[j]), g.v[j], b.v[j]);
      store16(y + base + slice.pack_col(k), out);
    }
    if (has_head) {
      y[base + head_col] = normalize(head_v, gamma[head_col], beta[head_col]);
    }
    if (has_tail) {
      y[base + tail_col] = normalize(tail_v, gamma[tail_col], beta[tail_col]);
    }
  }
}

// The kernels: one body, two names, so that CUPTI's records tell the general kernel (any row)
// from the aligned one (rows of whole packs; its kEarlyParams is a template argument).
template <typename T, int kPacks, RowStep kStep>
__global__ void __launch_bounds__(kMaxLanes, 1)
    row_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ gamma,
               const T* __restrict__ beta, T* __restrict__ h, T* __restrict__ y,
               float* __restrict__ mean_out, float* __restrict__ rstd_out, int64_t rows, int c,
               int lanes) {
  row_body<T, kPacks, kStep, kAnyRows>(x, r, gamma, beta, h, y, mean_out, rstd_out, rows, c, lanes);
}
template <typename T, int kPacks, RowStep kStep, int kMoves>
__global__ void __launch_bounds__(kMaxLanes, 1)
    aligned_row_kernel(const T* __restrict__ x, const T* __restrict__ r,
                       const T* __restrict__ gamma, const T* __restrict__ beta, T* __restrict__ h,
                       T* __restrict__ y, float* __restrict__ mean_out,
                       float* __restrict__ rstd_out, int64_t rows, int c, int lanes) {
  row_body<T, kPacks, kStep, kMoves | kAlignedRows>(x, r, gamma, beta, h, y, mean_out, rstd_out,
                                                    rows, c, lanes);
}

// How the row kernels split a row of C elements among threads.
struct RowPlan {
  int lanes = kMinLanes;     // threads per row: 8, 16, a warp, or 2..16 warps for long rows
  int packs_per_thread = 1;  // ceil(packs / lanes); rounded up to an instantiated kPacks
  int threads = kMinRowBlock;
  unsigned blocks = 0;
};

template <typename T>
RowPlan plan_rows(int64_t rows, int c, int max_packs = kMaxPacks) {
  RowPlan plan;
  constexpr int kVec = Vec16<T>::kCount;
  const int packs = c / kVec;  // at most; a row with a head has one pack fewer
  // The fewest lanes that hold the row with at most max_packs packs each: more bytes per thread
  // amortise the reduction, and a short row does not leave most of a warp idle.
  plan.lanes = kMinLanes;
  while (plan.lanes * max_packs < packs && plan.lanes < kMaxLanes) plan.lanes *= 2;
  plan.packs_per_thread = packs > plan.lanes ? (packs + plan.lanes - 1) / plan.lanes : 1;
  plan.threads = plan.lanes > kMinRowBlock ? plan.lanes : kMinRowBlock;
  const int rows_per_block = plan.threads / plan.lanes;
  plan.blocks = static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
  return plan;
}

template <typename T>
struct RowArgs {
  const T* x;
  const T* r;
  const T* gamma;
  const T* beta;
  T* h;
  T* y;
  float* mean;
  float* rstd;
  int64_t rows;
  int c;
};

// Picks the smallest instantiated kPacks >= plan.packs_per_thread. The counts are few on purpose
// (each is a kernel per type and step): a slice rounded up costs a few idle registers.
template <typename T, RowStep kStep, int kMoves, int kFirst, int... kRest>
Status launch_row_packs(const RowArgs<T>& a, const RowPlan& plan, cudaStream_t stream) {
  if (plan.packs_per_thread <= kFirst) {
    if constexpr (kMoves == kAnyRows) {
      row_kernel<T, kFirst, kStep><<<plan.blocks, plan.threads, 0, stream>>>(
          a.x, a.r, a.gamma, a.beta, a.h, a.y, a.mean, a.rstd, a.rows, a.c, plan.lanes);
    } else {
      aligned_row_kernel<T, kFirst, kStep, kMoves><<<plan.blocks, plan.threads, 0, stream>>>(
          a.x, a.r, a.gamma, a.beta, a.h, a.y, a.mean, a.rstd, a.rows, a.c, plan.lanes);
    }
    FL_CUDA_TRY(cudaGetLastError());
    return Status::Ok();
  }
  if constexpr (sizeof...(kRest) > 0) {
    return launch_row_packs<T, kStep, kMoves, kRest...>(a, plan, stream);
  } else {
    return Status::Error("layernorm rows: no row kernel for " +
                         std::to_string(plan.packs_per_thread) +
                         " packs per thread (C = " + std::to_string(a.c) + ")");
  }
}

template <typename T, RowStep kStep>
Status launch_rows(const RowArgs<T>& a, cudaStream_t stream) {
  const RowPlan plan = plan_rows<T>(a.rows, a.c);
  if (plan.blocks == 0) return Status::Ok();
  // C = 768 takes 6 packs per lane: 32 lanes in fp32, 16 in bf16.
  return launch_row_packs<T, kStep, kAnyRows, 1, 2, 3, 4, 6, 8>(a, plan, stream);
}

// ---- the aligned launches (lesson 4's fused level) ------------------------------------------
// When C is a multiple of a pack and every tensor starts 16-byte aligned (cudaMalloc gives 256),
// every row is whole packs: the kernel drops the head, tail and element-wise gamma/beta code,
// and a thread holds at most kAlignedPacks packs (C = 768: 3, so 64 lanes in fp32, 32 in bf16)
// instead of 6: fewer registers a thread, more rows resident per SM, smaller blocks of work.
constexpr int kAlignedPacks = 4;

// "" when launch_aligned_rows takes rows of c elements of `bytes` bytes, else why not.
inline std::string aligned_rows_refusal(int64_t c, int64_t bytes) {
  if (bytes <= 0 || 16 % bytes != 0) {
    return "elements of " + std::to_string(bytes) + " bytes do not fill 16-byte packs";
  }
  const int64_t vec = 16 / bytes;
  if (c % vec != 0) {
    return "C = " + std::to_string(c) + " is not a multiple of " + std::to_string(vec);
  }
  if (c > int64_t(kAlignedPacks) * kMaxLanes * vec) {
    return "C = " + std::to_string(c) + " needs more than " + std::to_string(kAlignedPacks) +
           " packs a thread";
  }
  return "";
}

template <typename T, RowStep kStep, int kMoves>
Status launch_aligned_rows(const RowArgs<T>& a, cudaStream_t stream) {
  const std::string refusal = aligned_rows_refusal(a.c, sizeof(T));
  if (!refusal.empty()) return Status::Unsupported(refusal);
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!(aligned(a.x) && aligned(a.r) && aligned(a.gamma) && aligned(a.beta) && aligned(a.h) &&
        aligned(a.y))) {
    return Status::Unsupported("a tensor does not start 16-byte aligned");
  }
  const RowPlan plan = plan_rows<T>(a.rows, a.c, kAlignedPacks);
  if (plan.blocks == 0) return Status::Ok();
  return launch_row_packs<T, kStep, kMoves | kAlignedRows, 1, 2, 3, 4>(a, plan, stream);
}

// ---- lesson 4's residual add and its CPU reference (also the attention sublayer's) --------

constexpr int kAddThreads = 256;

// h = x + r over all N elements, ignoring rows: one 16-byte vector per thread; the threads past
// the last full vector take one tail element each (the same scheme as gelu_scale).
template <typename T>
__global__ void __launch_bounds__(kAddThreads)
    add_kernel(const T* __restrict__ x, const T* __restrict__ r, T* __restrict__ h, int64_t n) {
  constexpr int kVec = Vec16<T>::kCount;
  const int64_t full_vecs = n / kVec;
  const int64_t i = blockIdx.x * int64_t(kAddThreads) + threadIdx.x;
  if (i < full_vecs) {
    const Vec16<T> a = load16(x + i * kVec);
    const Vec16<T> b = load16(r + i * kVec);
    Vec16<T> out;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      out.v[k] = Elem<T>::from_float(Elem<T>::to_float(a.v[k]) + Elem<T>::to_float(b.v[k]));
    }
    store16(h + i * kVec, out);
  } else {
    const int64_t tail = full_vecs * kVec + (i - full_vecs);
    if (tail < n) {
      h[tail] = Elem<T>::from_float(Elem<T>::to_float(x[tail]) + Elem<T>::to_float(r[tail]));
    }
  }
}

template <typename T>
Status launch_add(const T* x, const T* r, T* h, int64_t n, cudaStream_t stream) {
  constexpr int kVec = Vec16<T>::kCount;
  const int64_t threads = n / kVec + n % kVec;  // one per full vector, one per tail element
  const unsigned blocks = static_cast<unsigned>((threads + kAddThreads - 1) / kAddThreads);
  if (blocks == 0) return Status::Ok();
  add_kernel<T><<<blocks, kAddThreads, 0, stream>>>(x, r, h, n);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// h and y of one row, in double, from the stored inputs. The same arithmetic as the GPU check.
inline void residual_layernorm_row_reference(const double* x, const double* r, const double* gamma,
                                             const double* beta, int64_t c, double* h, double* y) {
  double sum = 0;
  for (int64_t j = 0; j < c; ++j) {
    h[j] = x[j] + r[j];
    sum += h[j];
  }
  const double mean = sum / double(c);
  double sq = 0;
  for (int64_t j = 0; j < c; ++j) sq += (h[j] - mean) * (h[j] - mean);
  const double rstd = 1.0 / std::sqrt(sq / double(c) + kEps);
  for (int64_t j = 0; j < c; ++j) y[j] = (h[j] - mean) * rstd * gamma[j] + beta[j];
}

}  // namespace layernorm_rows
}  // namespace fl
