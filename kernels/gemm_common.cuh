// Pieces shared by the GEMM lessons (6 layernorm_linear, 7 linear_gelu, 8 ffn): the fp64 check
// of sampled rows, our two teaching kernels (a GEMM with a LayerNorm prologue, and an FFN that
// keeps its 4C-wide activation on chip), and the shapes' limits.
//
// Row-major everywhere: x is tokens x C, a weight W is (inputs x outputs), y = x W + b.
//
// The teaching kernels are plain SIMT code (fp32 FMAs, no tensor cores), written to be read:
// they show *where* fusion puts the data, not how cuBLAS reaches its speed. The lessons measure
// them against cuBLAS and say so.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/activations.cuh"
#include "kernels/blas.h"
#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace fl::gemm {

constexpr int64_t kDefaultTokens = 32 * 512;  // batch 32 x sequence 512
constexpr int64_t kDefaultC = 768;            // GPT-2 small
constexpr int64_t kMaxTokens = 65536;
constexpr int64_t kMaxC = 2048;  // the check and FFN kernels hold rows of 4C in shared memory
constexpr double kLayerNormEps = 1e-5;

// Input ranges: activations of unit scale, weights scaled by 1/sqrt(fan-in) (as initialisers
// do) so every layer's output stays of unit scale and GELU sees both of its tails.
constexpr float kXLo = -2.0f, kXHi = 2.0f;
inline float weight_bound(int64_t fan_in) { return 1.7f / std::sqrt(float(fan_in)); }
constexpr float kBiasLo = -0.5f, kBiasHi = 0.5f;
constexpr float kGammaLo = 0.5f, kGammaHi = 1.5f;
constexpr float kBetaLo = -0.5f, kBetaHi = 0.5f;

// ---- the fp64 check of sampled rows --------------------------------------------------------
// A GEMM's reference costs as much arithmetic as the GEMM, in fp64: the gate checks every row up
// to kCheckedRows rows and kCheckedRows evenly spaced rows beyond (the first and last included,
// at most 16 apart at 65,536 tokens, so every 64-row tile of a GEMM is checked), every column
// of each. The gpu tests keep their shapes within kCheckedRows, so the GPU check and the CPU
// reference compare the same outputs.
constexpr int64_t kCheckedRows = 4096;

__host__ __device__ inline int64_t checked_row_count(int64_t m) {
  return m < kCheckedRows ? m : kCheckedRows;
}
__host__ __device__ inline int64_t checked_row(int64_t i, int64_t m) {
  return m <= kCheckedRows ? i : i * (m - 1) / (kCheckedRows - 1);
}

// What one check compares: y = [LN](x) W1 + b1, then GELU, then (for the FFN) y = h W2 + b2.
template <typename T>
struct CheckArgs {
  const T* x;
  const T* gamma;  // LayerNorm's scale and shift, when kLayerNorm
  const T* beta;
  const T* w1;  // k x n1
  const T* b1;
  const T* w2;  // n1 x n2, when kSecond
  const T* b2;
  const T* y;  // m x n1, or m x n2 when kSecond
  int64_t m;
  int k, n1, n2;
};

// Sum over a warp; every lane gets it. The LayerNorm statistics of the check are computed by
// every warp of the block over the whole row (the same order everywhere, so the same bits):
// no shared scratch and no barrier inside a reduction.
__device__ inline double warp_sum_all(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

constexpr int kCheckThreads = 256;

// One block per checked row (grid-stride): the row's reference in fp64 in shared memory, then
// every output of the row compared. Dynamic shared memory: x row (k), slack, hidden row (n1,
// FFN only), slack. The slack: ptxas turns the first two loads of a dot product's remainder
// (k % 4 elements) into one 16-byte LDS.128 issued before the branch that would skip the
// second, so when k % 4 == 1 the load reads one double past the row (seen in the SASS of
// check_rows_kernel<float, false, true, true>, CUDA 13.0) and discards it. Past the x row that
// read landed on the hidden row while other threads wrote it, which racecheck reports as a race
// (H200, 2026-11-22); past the allocation, memcheck reported it out of bounds. kCheckSlack
// doubles after each row keep those reads in bytes nobody writes.
constexpr int kCheckSlack = 2;

template <typename T, bool kLayerNorm, bool kGelu, bool kSecond>
__global__ void __launch_bounds__(kCheckThreads) check_rows_kernel(CheckArgs<T> a, ErrorSums* sums) {
  extern __shared__ double s_row[];
  double* s_x = s_row;
  double* s_h = s_row + a.k + kCheckSlack;
  auto f = [](T v) { return double(Elem<T>::to_float(v)); };
  ErrorPartial p;
  const int64_t rows = checked_row_count(a.m);
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const int64_t row = checked_row(i, a.m);
    const T* xr = a.x + row * a.k;
    __syncthreads();  // the previous row's readers are done with s_row
    for (int j = threadIdx.x; j < a.k; j += blockDim.x) s_x[j] = f(xr[j]);
    __syncthreads();
    if constexpr (kLayerNorm) {
      const int lane = threadIdx.x & 31;
      double sum = 0;
      for (int j = lane; j < a.k; j += 32) sum += s_x[j];
      const double mean = warp_sum_all(sum) / a.k;
      double sq = 0;
      for (int j = lane; j < a.k; j += 32) sq += (s_x[j] - mean) * (s_x[j] - mean);
      const double rstd = 1.0 / sqrt(warp_sum_all(sq) / a.k + kLayerNormEps);
      __syncthreads();  // every warp has read the raw row before it is normalized in place
      for (int j = threadIdx.x; j < a.k; j += blockDim.x) {
        s_x[j] = (s_x[j] - mean) * rstd * f(a.gamma[j]) + f(a.beta[j]);
      }
      __syncthreads();
    }
    for (int c = threadIdx.x; c < a.n1; c += blockDim.x) {
      double acc = f(a.b1[c]);
      for (int j = 0; j < a.k; ++j) acc += s_x[j] * f(a.w1[int64_t(j) * a.n1 + c]);
      if constexpr (kGelu) acc = gelu_tanh_reference(acc);
      if constexpr (kSecond) {
        s_h[c] = acc;
      } else {
        p.add(Elem<T>::to_float(a.y[row * a.n1 + c]), acc);
      }
    }
    if constexpr (kSecond) {
      __syncthreads();
      for (int c = threadIdx.x; c < a.n2; c += blockDim.x) {
        double acc = f(a.b2[c]);
        for (int j = 0; j < a.n1; ++j) acc += s_h[j] * f(a.w2[int64_t(j) * a.n2 + c]);
        p.add(Elem<T>::to_float(a.y[row * a.n2 + c]), acc);
      }
    }
  }
  block_accumulate(sums, p);
}

template <typename T, bool kLayerNorm, bool kGelu, bool kSecond>
Status launch_check_rows(const CheckArgs<T>& a, ErrorSums* sums, cudaStream_t stream) {
  const size_t smem = sizeof(double) * (a.k + kCheckSlack + (kSecond ? a.n1 + kCheckSlack : 0));
  auto kernel = check_rows_kernel<T, kLayerNorm, kGelu, kSecond>;
  if (smem > 48 * 1024) {
    FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)));
  }
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(checked_row_count(a.m), 2048));
  kernel<<<blocks, kCheckThreads, smem, stream>>>(a, sums);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// ---- teaching kernel 1: a GEMM whose A-tile load normalizes (layernorm_linear) -------------
// y = LN(x) W + b without writing LN(x): the statistics (mean, rstd per row) come from a small
// pass before, and each x element is normalized as it is staged into shared memory. A classic
// SIMT tiling: a 64 x 64 tile of y per block of 256 threads, 4 x 4 outputs per thread, K in
// steps of 16; inputs are widened to fp32 as they are staged, the sum is fp32.
constexpr int kTileM = 64, kTileN = 64, kTileK = 16, kTileThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kTileThreads) ln_gemm_bias_kernel(
    const T* __restrict__ x, const float* __restrict__ mean, const float* __restrict__ rstd,
    const T* __restrict__ gamma, const T* __restrict__ beta, const T* __restrict__ w,
    const T* __restrict__ bias, T* __restrict__ y, int64_t m, int k, int n) {
  __shared__ float s_a[kTileK][kTileM + 1];  // normalized x, transposed (k-major); +1: no bank conflicts on the store
  __shared__ float s_b[kTileK][kTileN];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t m0 = int64_t(blockIdx.y) * kTileM;
  const int n0 = blockIdx.x * kTileN;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < k; k0 += kTileK) {
    // Stage the A tile (64 rows x 16 k), normalizing: 4 elements per thread.
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int idx = threadIdx.x + e * kTileThreads;
      const int r = idx / kTileK, kk = idx % kTileK;
      const int64_t row = m0 + r;
      const int col = k0 + kk;
      float v = 0.0f;
      if (row < m && col < k) {
        v = (Elem<T>::to_float(x[row * k + col]) - mean[row]) * rstd[row] *
                Elem<T>::to_float(gamma[col]) + Elem<T>::to_float(beta[col]);
      }
      s_a[kk][r] = v;
    }
    // Stage the B tile (16 k x 64 columns of W).
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int idx = threadIdx.x + e * kTileThreads;
      const int kk = idx / kTileN, c = idx % kTileN;
      const int row = k0 + kk, col = n0 + c;
      s_b[kk][c] = row < k && col < n ? Elem<T>::to_float(w[int64_t(row) * n + col]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = s_a[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = s_b[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
      }
    }
    __syncthreads();
  }
  // Epilogue: the bias, then one rounding to T.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t row = m0 + ty + 16 * i;
    if (row >= m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int col = n0 + tx + 16 * j;
      if (col < n) y[row * n + col] = Elem<T>::from_float(acc[i][j] + Elem<T>::to_float(bias[col]));
    }
  }
}

template <typename T>
Status launch_ln_gemm_bias(const T* x, const float* mean, const float* rstd, const T* gamma,
                           const T* beta, const T* w, const T* bias, T* y, int64_t m, int k,
                           int n, cudaStream_t stream) {
  const int64_t row_tiles = (m + kTileM - 1) / kTileM;
  if (row_tiles > 65535) return Status::Error("ln_gemm_bias takes at most 65535 x 64 rows");
  const dim3 grid(static_cast<unsigned>((n + kTileN - 1) / kTileN), static_cast<unsigned>(row_tiles));
  ln_gemm_bias_kernel<T><<<grid, kTileThreads, 0, stream>>>(x, mean, rstd, gamma, beta, w, bias, y,
                                                            m, k, n);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// ---- teaching kernel 2: the FFN with its 4C activation kept on chip (ffn) -------------------
// y = GELU(x W1 + b1) W2 + b2 in one kernel. A block owns kRows tokens and walks the hidden
// dimension H = 4C in chunks of kChunk: it computes that chunk of h = GELU(x W1 + b1) into
// shared memory, then adds h_chunk W2[chunk, :] to the block's running y (kRows x C, in shared
// memory). h never leaves the SM. The price, which is the lesson: every block reads all of W1
// and W2 (from L2: 2 C H weights per block, where two GEMMs read them once per 64-128-row tile
// as well, but keep far more tokens per tile), with a tile of only kRows tokens for the y
// accumulator to fit, so each weight is used kRows times per read instead of ~128.
constexpr int kFfnThreads = 256;
constexpr int kChunk = 64;

template <typename T, int kRows>
__global__ void __launch_bounds__(kFfnThreads) ffn_on_chip_kernel(
    const T* __restrict__ x, const T* __restrict__ w1, const T* __restrict__ b1,
    const T* __restrict__ w2, const T* __restrict__ b2, T* __restrict__ y, int64_t m, int c,
    int hidden) {
  extern __shared__ float s_mem[];
  float* s_y = s_mem;                  // kRows x c: the running output rows
  float* s_h = s_mem + kRows * c;      // kRows x kChunk: this chunk of the hidden rows
  const int64_t m0 = int64_t(blockIdx.x) * kRows;
  for (int i = threadIdx.x; i < kRows * c; i += kFfnThreads) s_y[i] = 0.0f;

  constexpr int kGroups = kFfnThreads / kChunk;  // 4 row groups in the h phase
  constexpr int kRowsPerThread = (kRows + kGroups - 1) / kGroups;
  const int j = threadIdx.x % kChunk, group = threadIdx.x / kChunk;
  for (int j0 = 0; j0 < hidden; j0 += kChunk) {
    // 1. h[r][j0 + j] = GELU(x[r] . W1[:, j0 + j] + b1): thread (group, j) takes rows
    //    group, group + 4, ... The x loads are the same address across a warp (a broadcast).
    float acc[kRowsPerThread] = {};
    const bool col_ok = j0 + j < hidden;
    for (int kk = 0; kk < c; ++kk) {
      const float wv = col_ok ? Elem<T>::to_float(w1[int64_t(kk) * hidden + j0 + j]) : 0.0f;
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) {
        const int r = group + i * kGroups;
        if (r < kRows && m0 + r < m) acc[i] += Elem<T>::to_float(x[(m0 + r) * c + kk]) * wv;
      }
    }
    __syncthreads();  // the previous chunk's readers of s_h are done
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int r = group + i * kGroups;
      if (r < kRows) {
        s_h[r * kChunk + j] = col_ok ? gelu_tanh_fast(acc[i] + Elem<T>::to_float(b1[j0 + j])) : 0.0f;
      }
    }
    __syncthreads();
    // 2. y[r][col] += h[r][chunk] . W2[chunk, col]: thread owns columns col = tid, tid + 256, ...
    const int chunk = min(kChunk, hidden - j0);
    for (int col = threadIdx.x; col < c; col += kFfnThreads) {
      float sum[kRows] = {};
      for (int jj = 0; jj < chunk; ++jj) {
        const float wv = Elem<T>::to_float(w2[int64_t(j0 + jj) * c + col]);
#pragma unroll
        for (int r = 0; r < kRows; ++r) sum[r] += s_h[r * kChunk + jj] * wv;
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) s_y[r * c + col] += sum[r];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kRows * c; i += kFfnThreads) {
    const int r = i / c, col = i % c;
    if (m0 + r < m) y[(m0 + r) * c + col] = Elem<T>::from_float(s_y[i] + Elem<T>::to_float(b2[col]));
  }
}

// Shared memory of one FFN block.
inline size_t ffn_smem_bytes(int rows, int c) {
  return sizeof(float) * (size_t(rows) * c + size_t(rows) * kChunk);
}

template <typename T, int kRows>
Status launch_ffn_rows(const T* x, const T* w1, const T* b1, const T* w2, const T* b2, T* y,
                       int64_t m, int c, int hidden, cudaStream_t stream) {
  const size_t smem = ffn_smem_bytes(kRows, c);
  auto kernel = ffn_on_chip_kernel<T, kRows>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(smem)));
  const unsigned blocks = static_cast<unsigned>((m + kRows - 1) / kRows);
  kernel<<<blocks, kFfnThreads, smem, stream>>>(x, w1, b1, w2, b2, y, m, c, hidden);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// The most tokens per block whose y rows fit in this GPU's shared memory: 32 at C = 768 on a
// Hopper (100 KB), 16 on a Volta (96 KB per block at most).
template <typename T>
Status launch_ffn_on_chip(const T* x, const T* w1, const T* b1, const T* w2, const T* b2, T* y,
                          int64_t m, int c, int hidden, cudaStream_t stream) {
  int device = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  auto fits = [&](int rows) { return ffn_smem_bytes(rows, c) <= size_t(optin); };
  if (fits(32)) return launch_ffn_rows<T, 32>(x, w1, b1, w2, b2, y, m, c, hidden, stream);
  if (fits(16)) return launch_ffn_rows<T, 16>(x, w1, b1, w2, b2, y, m, c, hidden, stream);
  if (fits(8)) return launch_ffn_rows<T, 8>(x, w1, b1, w2, b2, y, m, c, hidden, stream);
  if (fits(4)) return launch_ffn_rows<T, 4>(x, w1, b1, w2, b2, y, m, c, hidden, stream);
  return Status::Error("ffn: a block's output rows (C = " + std::to_string(c) +
                       ") do not fit in this GPU's shared memory");
}

}  // namespace fl::gemm

namespace fl {

// out[0..n) = b + x[0..k) W, W row-major k x n, all in double: the Linear layer of the CPU
// references (row by row, so a reference needs no tokens x 4C buffer beyond its output).
inline void reference_linear_row(const double* x, int64_t k, const double* w, const double* b,
                                 int64_t n, double* out) {
  for (int64_t c = 0; c < n; ++c) out[c] = b[c];
  for (int64_t j = 0; j < k; ++j) {
    const double* wr = w + j * n;
    for (int64_t c = 0; c < n; ++c) out[c] += x[j] * wr[c];
  }
}

// The shapes every GEMM lesson accepts (tokens along the slider, C the hidden size).
inline Status gemm_shape_ok(const char* lesson, Shape shape) {
  if (shape.size < 1 || shape.size > gemm::kMaxTokens) {
    return Status::Error(std::string(lesson) + " takes 1 to " + std::to_string(gemm::kMaxTokens) +
                         " tokens, got " + std::to_string(shape.size));
  }
  if (shape.inner < 1 || shape.inner > gemm::kMaxC) {
    return Status::Error(std::string(lesson) + " takes a hidden size C of 1 to " +
                         std::to_string(gemm::kMaxC) + ", got " + std::to_string(shape.inner));
  }
  return Status::Ok();
}

// Validates `shape` and makes the lesson's workspace, Ws<float> or Ws<__nv_bfloat16>, with its
// buffers and cuBLASLt plans (Ws(tokens, C, tolerance), then allocate()).
template <template <typename> class Ws>
Status make_gemm_workspace(const char* lesson, Shape shape, Precision p, double tolerance,
                           std::unique_ptr<Workspace>* out) {
  FL_TRY(gemm_shape_ok(lesson, shape));
  auto make = [&](auto ws) -> Status {
    FL_TRY(ws->allocate());
    *out = std::move(ws);
    return Status::Ok();
  };
  if (p == Precision::fp32) return make(std::make_unique<Ws<float>>(shape.size, shape.inner, tolerance));
  return make(std::make_unique<Ws<__nv_bfloat16>>(shape.size, shape.inner, tolerance));
}

// Relative L2 error allowed against the fp64 reference. fp32 without TF32: the sums of C to 4C
// products in fp32 (~1e-6), GELU's fast form, and cuBLASLt's own GELU, whose exact formula is
// not documented: 5e-4 leaves room for an erf-based GELU (<= 5e-4 absolute from the tanh form)
// while a wrong tile or a missing bias gives errors of order 1. TF32 rounds each product's
// inputs to 10 mantissa bits (~5e-4 relative per product): 5e-3. bf16: inputs are exact (the
// reference reads the stored bf16 values), the outputs and every intermediate written to HBM
// round to 8 significant bits (~3e-3 each): 2e-2.
inline double gemm_tolerance(Precision p) {
  if (p == Precision::bf16) return 2e-2;
  return blas::allow_tf32() ? 5e-3 : 5e-4;
}

}  // namespace fl
