// A thread's part of staging one shape of block again and again (a cp.async ring's K chunks),
// worked out once a launch. Used by the portable FFN rings (kernels/ffn/ffn_hidden_slice_ring.cuh,
// kernels/ffn/ffn_two_phase.cu); stage_stepped() (below) is the same idea for a block staged once
// (the hidden slice's resident x, W1 and W2).
//
// What changes against weight_slice.cuh's stage(): stage() works out, on every call, which
// 16-byte chunks of a rows x cols block a thread copies: thread i takes chunks i, i + kThr, ...,
// so its first row and column are threadIdx.x / chunks and threadIdx.x % chunks, and its steps
// kThr / chunks and kThr % chunks, with `chunks` (16-byte chunks a row) known only at run time:
// two integer divisions (an MUFU.RCP, an F2I and a dozen dependent integer instructions each),
// then 64-bit address products a chunk. Called once a launch that is nothing; called once a ring
// chunk it is a chain of dependent integer arithmetic between each chunk's barrier and its mma
// (the sm_90a SASS of the hidden slice's ring step: docs/PERFORMANCE.md). Here walk() does that
// arithmetic once and keeps, for each of the thread's chunks (at most kMax), its offsets in
// shared and global memory (elements) and its row and first column; stage_at() then asks for
// the block at any place in shared and global memory (a ring slot, a K offset) with two compares
// and one cp.async a chunk.
//
// Tiles: a ring chunk of the hidden slice is x's m rows x 64 of K (8 chunks a row: 2 a thread at
// 64 tokens and 8 warps, 1 at 16 warps); the two-phase kernel's is x's 16 mtc rows x 64 and
// W1's 64 rows x up_cols (up to 8 chunks a row). Data path: global (L2 or DRAM) -> cp.async
// (16 bytes, zero-filled where invalid) -> shared memory. Budget: 4 kMax registers a thread,
// no shared memory; a chunk's walk costs ~5 instructions a copy instead of ~40 + 2 divisions a
// call.
// Only the vector path: g and ldg 16-byte aligned, cols_valid a multiple of the chunk's
// elements (odd C stays on stage()'s element path).
#pragma once

#include <cuda_runtime.h>

#include "kernels/gemm_core/weight_slice.cuh"

namespace fl::slice {

// The thread's chunks of a rows x chunks*E block: n of them (n <= kMax), chunk j at shared
// offset s[j] and global offset g[j] (elements, from the block's corners), in row row[j] from
// column col[j].
template <int kMax>
struct Walk {
  int n;
  int s[kMax], g[kMax], row[kMax], col[kMax];
};

// The walk of a rows x cols block (cols padded to whole chunks) with shared row stride lds and
// global row stride ldg, for a block of kThr threads. The caller sees to rows x chunks <= kMax
// kThr (its shapes' bounds, static_asserted where it calls this).
template <int kThr, int kMax, typename T>
__device__ __forceinline__ Walk<kMax> walk(int lds, int ldg, int rows, int cols) {
  constexpr int E = kChunk<T>;
  const int chunks = (cols + E - 1) / E;
  Walk<kMax> w;
  w.n = 0;
#pragma unroll
  for (int j = 0; j < kMax; ++j) {
    const int q = int(threadIdx.x) + j * kThr, r = chunks > 0 ? q / chunks : rows;
    const int c = q - r * chunks;
    w.s[j] = r * lds + c * E, w.g[j] = r * ldg + c * E, w.row[j] = r, w.col[j] = c * E;
    if (r < rows) w.n = j + 1;
  }
  return w;
}

// The block at s (shared) from g (global): each of the thread's chunks one cp.async, the
// elements past rows_valid or cols_valid zero. No commit.
template <int kMax, typename T>
__device__ __forceinline__ void stage_at(const Walk<kMax>& w, T* s, const T* g, int rows_valid,
                                         int cols_valid) {
#pragma unroll
  for (int j = 0; j < kMax; ++j) {
    if (j >= w.n) break;
    const bool valid = w.row[j] < rows_valid && w.col[j] < cols_valid;
    tc::copy16_async(s + w.s[j], valid ? g + w.g[j] : g, valid);
  }
}

// stage()'s vector path with the thread's place carried from copy to copy instead of worked out
// at each: the shared and global offsets advance by the constant steps of kThr chunks (dr rows
// and dc chunks, once a call: the call's two divisions), and by a row's wrap where the column
// passes the row's end. Where the thread's column is fixed (kThr a multiple of the chunks a row:
// W1's slice of 32 bf16 units, 4 chunks a row, 12 copies a thread 64 rows apart at 8 warps) the
// loop is a compare, the selects, the cp.async and the adds a copy (sm_90a, unrolled by 4: ~10-11
// SASS instructions a copy, 3 of them the compiler's no-op guards before each cp.async; ~21 where
// the column wraps, as in x's and W2's rows; against ~40 in stage(), whose loop also carries the
// element path). Used by the hidden slice's resident copies (ffn_hidden_slice_copies.cuh).
// fixed_column (the hidden slice's plan): where kThr is not a multiple of the chunks a row but
// holds at least one row, only the first dr x chunks threads copy (dr = kThr / chunks), each
// one column, rows dr apart (x's and W2's rows at C = 768 bf16, 96 chunks a row: 192 of 256
// threads, 16 of W2's copies each at the fixed column's ~10 instructions instead of 12 at ~21);
// else the column wraps as above.
// Vector path only: g and ldg 16-byte aligned, cols_valid a multiple of the chunk's elements.
template <int kThr, typename T>
__device__ __forceinline__ void stage_stepped(T* s, int lds, const T* g, int64_t ldg, int rows,
                                              int cols, int rows_valid, int cols_valid,
                                              bool fixed_column = false) {
  constexpr int E = kChunk<T>;
  const int chunks = (cols + E - 1) / E;
  if (chunks == 0) return;
  const int dr = kThr / chunks;
  const int dc = fixed_column && dr > 0 ? 0 : kThr % chunks;
  if (dc == 0 && int(threadIdx.x) >= dr * chunks) return;  // past the whole rows: no copies
  int r = int(threadIdx.x) / chunks, ce = (int(threadIdx.x) % chunks) * E;  // row, first column
  T* dst = s + r * lds + ce;
  const T* src = g + r * ldg + ce;
  const int s_step = dr * lds, s_col = dc * E;
  const int64_t g_step = dr * ldg;
  if (dc == 0) {  // a fixed column: rows dr apart
    const bool col_ok = ce < cols_valid;
#pragma unroll 4
    for (; r < rows; r += dr, dst += s_step, src += g_step) {
      const bool valid = col_ok && r < rows_valid;
      tc::copy16_async(dst, valid ? src : g, valid);
    }
    return;
  }
  const int wrap = chunks * E;
  for (; r < rows; r += dr, dst += s_step + s_col, src += g_step + s_col, ce += s_col) {
    if (ce >= wrap) ce -= wrap, ++r, dst += lds - wrap, src += ldg - wrap;
    if (r >= rows) break;
    const bool valid = r < rows_valid && ce < cols_valid;
    tc::copy16_async(dst, valid ? src : g, valid);
  }
}

}  // namespace fl::slice
