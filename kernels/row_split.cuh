// The row helper of the row-wise kernels (LayerNorm in layernorm_rows.cuh, softmax in
// scale_mask_softmax/, and the attention lessons to come): a row split at 16-byte boundaries
// into head | packs | tail, and which of those a thread holds when several threads share a row.
//
// Why a split: every access should move 16 bytes (LDG.E.128 / STG.E.128: float4, 8 x bf16), and
// a 16-byte access must be 16-byte aligned. A row of L elements of a row-major tensor starts
// aligned only when L * sizeof(T) is a multiple of 16; for any other L most rows start between
// two boundaries. So a row is read as `head` single elements up to the first boundary, then
// whole 16-byte packs, then a `tail` of fewer single elements than a pack holds: any L works,
// L = 1 included. Tensors of the same shape from cudaMalloc (256-byte aligned) split the same
// way, so the split of a row of one tensor is the split of that row of the others.
//
// Sharing a row: thread `rank` of the `lanes` threads that share a row holds head element
// `rank`, tail element `rank` (head and tail are shorter than a pack, and the kernels give a row
// at least 8 threads, a bf16 pack's elements), and packs rank, rank + lanes, rank + 2 lanes, ...:
// its k-th pack is rank + k * lanes, so the loads of a row's threads are contiguous.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/device_common.cuh"

namespace fl {

// A row of `length` elements as head | packs | tail (columns from the row's first element).
template <typename T>
struct RowSplit {
  static constexpr int kVec = Vec16<T>::kCount;  // elements per 16-byte pack
  int head;   // single elements before the first 16-byte boundary (fewer than kVec)
  int packs;  // whole 16-byte packs
  int tail;   // single elements after the last pack (fewer than kVec)

  __device__ int pack_col(int pack) const { return head + pack * kVec; }  // its first column
  __device__ int tail_col(int j) const { return head + packs * kVec + j; }
};

// The split of the row that starts at `row`.
template <typename T>
__device__ __forceinline__ RowSplit<T> split_row(const T* row, int length) {
  constexpr int kVec = Vec16<T>::kCount;
  const int misaligned = static_cast<int>((reinterpret_cast<uintptr_t>(row) & 15) / sizeof(T));
  const int head = min(misaligned == 0 ? 0 : kVec - misaligned, length);
  const int packs = (length - head) / kVec;
  return {head, packs, length - head - packs * kVec};
}

// What thread `rank` of the `lanes` threads sharing a row holds of it (see the top of the file).
template <typename T>
struct RowSlice {
  RowSplit<T> split;
  int rank, lanes;

  __device__ bool has_head() const { return rank < split.head; }
  __device__ int head_col() const { return rank; }
  __device__ bool has_tail() const { return rank < split.tail; }
  __device__ int tail_col() const { return split.tail_col(rank); }
  // This thread's k-th pack: whether the row has it, and its first column.
  __device__ bool has_pack(int k) const { return rank + k * lanes < split.packs; }
  __device__ int pack_col(int k) const { return split.pack_col(rank + k * lanes); }

  // Calls single(col) for this thread's head element, then for its tail element.
  template <typename Single>
  __device__ __forceinline__ void for_each_single(Single single) const {
    if (has_head()) single(head_col());
    if (has_tail()) single(tail_col());
  }

  // Streams this thread's packs through registers for a row longer than it can hold: kBatch
  // packs at a time, every load of a batch issued before any of them is used (loads in flight
  // are what cover DRAM latency), then pack(col, v) for each, v by reference: a callback that
  // takes its pack by value let the compiler sink the loads below the previous pack's store,
  // one DRAM round trip each (seen in the SASS of softmax's divide kernel, CUDA 13.0).
  // `load(const T*)` is the kernel's 16-byte load.
  template <int kBatch, typename Load, typename Pack>
  __device__ __forceinline__ void stream_packs(const T* row, Load load, Pack pack) const {
    for (int first = rank; first < split.packs; first += kBatch * lanes) {
      Vec16<T> v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        if (first + u * lanes < split.packs) v[u] = load(row + split.pack_col(first + u * lanes));
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        if (first + u * lanes < split.packs) pack(split.pack_col(first + u * lanes), v[u]);
      }
    }
  }
};

}  // namespace fl
