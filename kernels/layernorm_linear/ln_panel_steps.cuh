// The block-level steps of ln_panel (kernels/layernorm_linear/ln_panel.cu): asking for x's
// panel and W's slice, waiting on them, the two-item multiplies, the normalization of the panel
// and the stores of y. The plan's form bits (ln_panel_plan.cuh) pick among their forms.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/gemm_core/weight_slice.cuh"
#include "kernels/layernorm_linear/ln_common.cuh"
#include "kernels/layernorm_linear/ln_panel_plan.cuh"
#include "kernels/tensor_gemm.cuh"

namespace fl::layernorm_linear {

// rows x cols (a multiple of 16 bytes) of g into s by 16-byte cp.async, zero-filled past
// rows_valid and cols_valid. With `stepped`, thread t takes chunks t, t + kPanelThreads, ...
// with the row and column advanced by constants (copy_tile divides by the row's chunks at
// every chunk: ~13 K chunks a block at 256 tokens).
// `threads` threads take part, thread `tid` this one (stepped only; else all of the block's).
template <typename T>
__device__ __forceinline__ void ask_rows(T* s, int ld_s, const T* g, int64_t ld_g, int rows,
                                         int cols, int64_t rows_valid, int64_t cols_valid,
                                         bool stepped, int threads = kPanelThreads,
                                         int tid = threadIdx.x) {
  if (!stepped) {
    tc::copy_tile<T, kPanelThreads, true>(s, ld_s, g, ld_g, rows, cols, rows_valid, cols_valid);
    return;
  }
  constexpr int E = tc::kVec<T>;
  const int chunks = cols / E;
  if (chunks == 0) return;
  const int dr = threads / chunks, dc = threads % chunks;
  int r = tid / chunks, c = tid % chunks;
  for (; r < rows; r += dr, c += dc) {
    if (c >= chunks) c -= chunks, ++r;
    if (r >= rows) break;
    const bool valid = r < rows_valid && c * E < cols_valid;
    const T* src = g + r * ld_g + c * E;
    tc::copy16_async(s + r * ld_s + c * E, valid ? src : g, valid);
  }
}

// W's slice into shared memory in plan.stages commit groups along K.
// With kPanelWarpsSplit, by the threads past the first kPanelXWarps warps (the copies stepped).
template <typename T>
__device__ __forceinline__ void ask_for_w(const LnArgs<T>& a, const PanelPlan<T>& plan, T* ws,
                                          int64_t n0) {
  const int ld_w = plan.ld_w();
  const bool split = (plan.form & kPanelWarpsSplit) != 0;
  const int threads = split ? kPanelThreads - 32 * kPanelXWarps : kPanelThreads;
  const int tid = split ? int(threadIdx.x) - 32 * kPanelXWarps : int(threadIdx.x);
  for (int st = 0; st < plan.stages; ++st) {
    const int k0 = plan.stage_k(st), k1 = plan.stage_k(st + 1);
    ask_rows(ws + k0 * ld_w, ld_w, a.w + k0 * int64_t(a.n) + n0, a.n, k1 - k0, plan.bn, k1 - k0,
             a.n - n0, split || (plan.form & kPanelCopyStepped) != 0, threads, tid);
    tc::async_commit();
  }
}

// cp.async.wait_group takes an immediate: this thread's copies but the newest n groups in.
__device__ __forceinline__ void wait_all_but(int n) {
  switch (n) {
    case 0:
      tc::async_wait<0>();
      break;
    case 1:
      tc::async_wait<1>();
      break;
    case 2:
      tc::async_wait<2>();
      break;
    case 3:
      tc::async_wait<3>();
      break;
    default:
      tc::async_wait<4>();
      break;
  }
}

// y[m0 + 16 mt .., n0 + 16 nt16 ..) = sum + b for the rows below `live` and the columns below
// the tile's `bn` and N (sum: one 16 x 16 item in mma.sync's layout, two 16 x 8 tiles). bias:
// b from column n0 on (in shared memory, or a.bias + n0).
template <typename T>
__device__ __forceinline__ void store_item(const LnArgs<T>& a, int64_t m0, int64_t n0, int bn,
                                           int live, int mt, int nt16, const float (&sum)[8],
                                           const T* bias) {
  const int lane = threadIdx.x & 31;
  const int64_t n_end = min(int64_t(a.n), n0 + bn);
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const int64_t col = n0 + nt16 * 16 + nt * 8 + 2 * (lane & 3);
    if (col >= n_end) continue;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t row = m0 + mt * 16 + (lane >> 2) + 8 * half;
      if (row - m0 >= live) continue;
      const float v0 = sum[nt * 4 + 2 * half] + Elem<T>::to_float(bias[col - n0]);
      if (col + 1 >= n_end) {
        a.y[row * a.n + col] = Elem<T>::from_float(v0);
        continue;
      }
      const float v1 = sum[nt * 4 + 2 * half + 1] + Elem<T>::to_float(bias[col + 1 - n0]);
      tc::store_pair(a.y, a.n, row, col, v0, v1, a.n % 2 == 0);
    }
  }
}

// Two 16 x 16 items of a warp over k in [k0, k1) (bf16; the second only with `two`), the steps
// of the two interleaved: each item's ldmatrix lane addresses computed once and advanced by
// constants (tc::WarpStep works them out again at every k-step).
template <typename T>
__device__ __forceinline__ void two_items_by_address(float (&c0)[2][4], float (&c1)[2][4],
                                                     const T* const (&ap)[2],
                                                     const T* const (&bp)[2], int ld_x, int ld_w,
                                                     int k0, int k1, bool two) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    using Mma = slice::WarpMma<T, 2>;
    const int lane = threadIdx.x & 31;
    unsigned a_addr[2], b_addr[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      a_addr[i] = static_cast<unsigned>(
          __cvta_generic_to_shared(ap[i] + (lane & 15) * ld_x + k0 + (lane >> 4) * 8));
      b_addr[i] = static_cast<unsigned>(__cvta_generic_to_shared(
          bp[i] + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld_w + (lane >> 4) * 8));
    }
    const unsigned b_step = 16u * ld_w * sizeof(T);
    auto load = [&](int i, unsigned(&f)[8]) {  // A's 16 x 16 and B's 16 x 16 (two 16 x 8)
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(f[0]), "=r"(f[1]), "=r"(f[2]), "=r"(f[3])
                   : "r"(a_addr[i]));
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(f[4]), "=r"(f[5]), "=r"(f[6]), "=r"(f[7])
                   : "r"(b_addr[i]));
      a_addr[i] += 32;
      b_addr[i] += b_step;
    };
    unsigned f[2][8];
#pragma unroll 2
    for (int k = k0; k < k1; k += 16) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        if (i == 1 && !two) break;
        load(i, f[i]);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        if (i == 1 && !two) break;
        float(&c)[2][4] = i == 0 ? c0 : c1;
        Mma::mma(c[0], f[i][0], f[i][1], f[i][2], f[i][3], f[i][4], f[i][5]);
        Mma::mma(c[1], f[i][0], f[i][1], f[i][2], f[i][3], f[i][6], f[i][7]);
      }
    }
  }
#endif
}

// The panel's first `rows` rows normalized in place: thread t takes 16-byte chunks t, t +
// kPanelThreads, ... (the row and column stepped by constants, no division a chunk), gamma and
// beta read 16 bytes at a time (normalize_rows' Vec16 references compiled to 2-byte loads:
// 16 a chunk, Nsight Compute's MIO stalls at 256 tokens).
template <typename T>
__device__ __forceinline__ void normalize_panel(T* xs, int ld, int rows, int cols,
                                                const float2* stats, const T* gamma, const T* beta,
                                                int threads = kPanelThreads) {
  constexpr int E = tc::kVec<T>;
  const int chunks = cols / E;
  if (chunks == 0) return;
  const int dr = threads / chunks, dc = threads % chunks;
  int r = threadIdx.x / chunks, c = threadIdx.x % chunks;
  for (; r < rows; r += dr, c += dc) {
    if (c >= chunks) c -= chunks, ++r;
    if (r >= rows) break;
    Vec16<T> v, g, b;
    uint4* x = reinterpret_cast<uint4*>(xs + r * ld + c * E);
    *reinterpret_cast<uint4*>(&v) = *x;
    *reinterpret_cast<uint4*>(&g) = reinterpret_cast<const uint4*>(gamma)[c];
    *reinterpret_cast<uint4*>(&b) = reinterpret_cast<const uint4*>(beta)[c];
    normalize_vec(v, stats[r], g, b);
    *x = *reinterpret_cast<const uint4*>(&v);
  }
}

// kPanelAffineAsync: gamma and beta (k each) and the bias of columns [n0, n0 + bn) by 16-byte
// cp.async into the caller's commit group; a bias chunk that crosses N (or past it) by scalar
// loads, zeros past N. gamma and beta 16-byte aligned, k a multiple of 16 (the caller checks).
template <typename T>
__device__ __forceinline__ void ask_affine(const LnArgs<T>& a, T* gamma_s, T* beta_s, T* bias_s,
                                           int k, int bn, int64_t n0) {
  constexpr int E = tc::kVec<T>;
  const int kc = k / E, bc = bn / E;
  const bool bias_vec = reinterpret_cast<uintptr_t>(a.bias) % 16 == 0;
  for (int i = threadIdx.x; i < 2 * kc + bc; i += kPanelThreads) {
    if (i < 2 * kc) {
      const bool g = i < kc;
      const int c = g ? i : i - kc;
      tc::copy16_async((g ? gamma_s : beta_s) + c * E, (g ? a.gamma : a.beta) + c * E, true);
      continue;
    }
    const int c = (i - 2 * kc) * E;
    if (bias_vec && n0 + c + E <= a.n) {
      tc::copy16_async(bias_s + c, a.bias + n0 + c, true);
      continue;
    }
    for (int e = 0; e < E; ++e) {
      bias_s[c + e] = n0 + c + e < a.n ? a.bias[n0 + c + e] : Elem<T>::from_float(0.0f);
    }
  }
}

}  // namespace fl::layernorm_linear
