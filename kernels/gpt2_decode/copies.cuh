// How a megakernel task's bytes reach its SM (megakernel.cu): the ranges of global memory a
// task reads that no other task writes (its weight slice, or an attention split's cached keys
// and values, and its small parameters), and the three ways they move.
//
//   cp.async (any GPU from sm_80; plain copies below): each thread issues copies of 16 bytes into
//     shared memory, completion by commit groups. Each copy takes a slot in the SM's load queue,
//     so a 72 KB slice (4608 copies) queues ahead of the running task's own loads (x, q, the
//     partial sums), which are its critical path.
//   TMA bulk copies (sm_90): one thread asks for a whole contiguous range in one instruction,
//     the copy engine moves it and counts its bytes on an mbarrier. No load-queue slots: the
//     running task's loads do not wait behind the next task's bytes.
//   L2 bulk prefetch (sm_90): one instruction asks L2 for a range, nothing lands in the SM. The
//     tasks a few places ahead are asked for this way, so DRAM keeps streaming weights (which
//     depend on nothing) while the blocks wait on the dependency chain; their copy into shared
//     memory then comes from L2. An option (MegakernelOptions::l2_ahead), off in the lesson
//     (docs/PERFORMANCE.md has what it gave).
//
// Every range is contiguous because the megakernel reads Wout transposed (DecodeArgs::w_out_t:
// an MLP task's Wout columns are rows there), and 16-byte aligned, a multiple of 16 bytes.
#pragma once

#include <cstdint>

#include "kernels/gpt2_decode/attention.cuh"
#include "kernels/gpt2_decode/ops.cuh"
#include "kernels/hopper.cuh"
#include "kernels/phases.cuh"

namespace fl {
namespace gpt2 {

// Whether this compilation has the TMA bulk copies (the build's sm_90a code, hopper.cuh).
#ifdef FL_SM90A_DEVICE
constexpr bool kBulkBuild = true;
#else
constexpr bool kBulkBuild = false;
#endif

__device__ __forceinline__ void cp_async16(void* smem, const void* global) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(global) : "memory");
#else
  *reinterpret_cast<int4*>(smem) = *reinterpret_cast<const int4*>(global);
#endif
}
__device__ __forceinline__ void cp_async4(void* smem, const void* global) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(global) : "memory");
#else
  *reinterpret_cast<unsigned*>(smem) = *reinterpret_cast<const unsigned*>(global);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
}
__device__ __forceinline__ void cp_async_wait_all_but_newest() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 1;" ::: "memory");
#endif
}

// [p, p + bytes) into L2 (sm_90: cp.async.bulk.prefetch.L2; a no-op before).
__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}
// [src, src + bytes) into shared memory at dst, its bytes counted on `bar` (sm_90a builds).
__device__ __forceinline__ void copy_bulk(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
#ifdef FL_SM90A_DEVICE
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(hopper::smem_address(dst)),
      "l"(src), "r"(bytes), "r"(hopper::smem_address(bar))
      : "memory");
#endif
}

// A head's 64 columns of the regrouped Wproj for every output ([part][64][kProjRows], 96 KB).
__device__ __forceinline__ const bf16* head_proj_columns(const DecodeArgs& a, int layer, int head) {
  return a.w_proj_t + (int64_t(layer) * kHeads + head) * kProjParts * (kProjRows * kHeadDim);
}
// An attention split's share of its head's Wproj columns asked into L2 (kPrefetchesProj: the
// head's last split reads them all, and which split is last is not known ahead), 8 KB an
// instruction.
__device__ inline void prefetch_proj_share(const DecodeArgs& a, const DecodeTask& task) {
  constexpr int kBytes = kProjParts * kProjSliceBytes;
  const int head = task.first / a.splits, split = task.first % a.splits;
  const int share = (kBytes / a.splits + 255) & ~255, end = min(kBytes, (split + 1) * share);
  const char* src = reinterpret_cast<const char*>(head_proj_columns(a, task.layer, head));
  for (int o = split * share; o < end; o += 8192) prefetch_l2(src + o, min(8192, end - o));
}

// The large ranges a task reads (at most three: a slice of Wqkv / Wproj / Wfc and, for the
// MLP, the same rows of Wout transposed; or a split's cached keys and values, and for a fused
// attention task its Wproj part at the end of both buffers), each going to shared memory at
// `at[r]` bytes into the task's buffer. bytes[r] == 0: no range.
constexpr int kMaxRanges = 3;
struct TaskRanges {
  const void* src[kMaxRanges] = {nullptr, nullptr, nullptr};
  int bytes[kMaxRanges] = {0, 0, 0};
  int at[kMaxRanges] = {0, 0, 0};
};

// An attention task's cached keys and values (positions below s: inputs, never written by the
// step) go to shared memory like a product's weights, as many as fit one buffer (128 B a key
// and as much a value); the split's keys past them are read from global memory (a grid split
// longer than a buffer, MegakernelOptions::grid_splits).
constexpr int kKeyRowBytes = kHeadDim * 2;
__device__ inline SplitKeys cached_split(const DecodeArgs& a, const DecodeTask& task,
                                         int buffer_bytes) {
  if (task.flags & kProjects) {  // the whole head, in both buffers (the host checked the fit)
    return {0, a.positions(), a.cache};
  }
  SplitKeys keys = split_keys_of(a, task.first % a.splits);
  keys.cached = min(keys.cached, buffer_bytes / (2 * kKeyRowBytes));
  return keys;
}

__device__ inline TaskRanges task_ranges(const DecodeArgs& a, const DecodeTask& task,
                                         int buffer_bytes) {
  TaskRanges r;
  const bf16* w = layer_weights(a, task.layer);
  const int slice = task.count * kC * 2;  // every product's K is C
  switch (static_cast<TaskKind>(task.kind)) {
    case TaskKind::qkv:
      r.src[0] = w + LayerLayout::w_qkv + int64_t(task.first) * kC, r.bytes[0] = slice;
      break;
    case TaskKind::proj:
      if (task.flags & kHeadProj) {  // its head's columns of Wproj, regrouped (24 KB)
        r.src[0] = a.w_proj_t + (int64_t(task.layer) * kHeads * kProjParts + task.first) *
                                    (kProjRows * kHeadDim);
        r.bytes[0] = kProjSliceBytes;
      } else {
        r.src[0] = w + LayerLayout::w_proj + int64_t(task.first) * kC, r.bytes[0] = slice;
      }
      break;
    case TaskKind::mlp:
      r.src[0] = w + LayerLayout::w_fc + int64_t(task.first) * kC, r.bytes[0] = slice;
      if (mlp_wout_fits(task.count, buffer_bytes)) {
        r.src[1] = a.w_out_t + (int64_t(task.layer) * kF + task.first) * kC;
        r.bytes[1] = slice, r.at[1] = slice;
      }
      break;
    case TaskKind::attention: {
      const SplitKeys keys = cached_split(a, task, buffer_bytes);
      const bool fused = task.flags & kProjects;
      const int head = task.first / (fused ? kProjParts : a.splits);
      const int bytes = keys.cached * kHeadDim * 2;
      if (fused) {
        r.src[2] = a.w_proj_t + (int64_t(task.layer) * kHeads * kProjParts + task.first) *
                                    (kProjRows * kHeadDim);
        r.bytes[2] = kProjSliceBytes, r.at[2] = 2 * buffer_bytes - kProjSliceBytes;
      }
      const int64_t at =
          ((int64_t(task.layer) * kHeads + head) * a.positions() + keys.first) * kHeadDim;
      r.src[0] = a.k_cache + at, r.bytes[0] = bytes;
      r.src[1] = a.v_cache + at, r.bytes[1] = bytes, r.at[1] = bytes;
      break;
    }
    default:
      break;
  }
  return r;
}

// A product task's small parameters at the end of its buffer (model.h's kExtrasBytes).
__device__ inline SmallParams extras_of(const char* buffer, int buffer_bytes,
                                        const DecodeTask& task) {
  const bf16* e = reinterpret_cast<const bf16*>(buffer + buffer_bytes - kExtrasBytes);
  return {e, e + 2 * kC, e + 2 * kC + kMaxSliceRows, static_cast<int>(task.first)};
}

// A contiguous range by cp.async, every thread from `first` on a share of its 16-byte pieces.
__device__ inline void copy_async(char* dst, const void* src, int bytes, int first = 0) {
  const char* from = static_cast<const char*>(src);
  const int me = static_cast<int>(threadIdx.x) - first;
  if (me < 0) return;
  for (int i = me * 16; i < bytes; i += (kThreads - first) * 16) cp_async16(dst + i, from + i);
}
// A bias slice: `count` (even) bf16 from an even row, in 4-byte pieces.
__device__ inline void copy_bias_async(bf16* dst, const bf16* src, int count, int first) {
  const int me = static_cast<int>(threadIdx.x) - first;
  if (me < 0) return;
  for (int i = me; i < count / 2; i += kThreads - first) cp_async4(dst + 2 * i, src + 2 * i);
}

// A product's small parameters by cp.async (a few KB: LayerNorm's gamma and beta, the bias
// slices; bias slices start on even rows, so only 4-byte aligned), by the threads from `first` on.
__device__ inline void copy_small_params(const DecodeArgs& a, const DecodeTask& task, char* buffer,
                                         int buffer_bytes, int first) {
  const bf16* w = layer_weights(a, task.layer);
  const SmallParams e = extras_of(buffer, buffer_bytes, task);
  char* gamma = reinterpret_cast<char*>(const_cast<bf16*>(e.gamma));
  bf16* bias = const_cast<bf16*>(e.bias);
  switch (static_cast<TaskKind>(task.kind)) {
    case TaskKind::qkv:
      copy_async(gamma, w + LayerLayout::ln1_g, 2 * kC * 2, first);
      copy_bias_async(bias, w + LayerLayout::b_qkv + task.first, task.count, first);
      if (task.flags & kInitsResidual) {  // bproj's and bout's columns (ResidualInit)
        const int c0 = init_column(task.first), n = init_column(task.first + task.count) - c0;
        bf16* b2 = const_cast<bf16*>(e.bias2);
        copy_bias_async(b2, w + LayerLayout::b_proj + c0, n, first);
        copy_bias_async(b2 + kMaxSliceRows / 2, w + LayerLayout::b_out + c0, n, first);
      }
      break;
    case TaskKind::proj:
      if (task.flags & kHeadProj) break;  // its biases are in the residuals' starting values
      copy_bias_async(bias, w + LayerLayout::b_proj + task.first, task.count, first);
      copy_bias_async(const_cast<bf16*>(e.bias2), w + LayerLayout::b_out + task.first, task.count,
                      first);
      break;
    case TaskKind::mlp:
      copy_async(gamma, w + LayerLayout::ln2_g, 2 * kC * 2, first);
      copy_bias_async(bias, w + LayerLayout::b_fc + task.first, task.count, first);
      break;
    case TaskKind::final_norm:  // LN_f's gamma and beta (read from here with quick_tail)
      copy_async(gamma, a.weights + kFinalLnG, 2 * kC * 2, first);
      break;
    default:
      break;
  }
}

// Step 1 of a task (issued while the task before it runs): its large ranges by TMA (thread
// `copier`; `landed` completes when they are in, also when there are none) or by cp.async, then
// its small parameters by cp.async, from the threads `first` on (0, or 32: warp 0 polls
// meanwhile, MegakernelOptions::poll_first). One commit group per task, so "all but the newest
// group" is always the running task's.
// part: kCopyAll; kCopyLarge (bulk only: the large ranges, issued early) or kCopySmall (the
// rest, later). marks (probes on): the copier's stamps, when it began, had issued the large
// ranges, and had committed.
enum CopyPart { kCopyAll, kCopyLarge, kCopySmall };
__device__ inline void issue_copies(const DecodeArgs& a, const DecodeTask& task, char* buffer,
                                    int buffer_bytes, bool bulk, uint64_t* landed, int copier = 0,
                                    CopyPart part = kCopyAll, int first = 0,
                                    uint64_t* marks = nullptr) {
  const bool marking = marks != nullptr && threadIdx.x == copier;
  if (marking) marks[0] = phase_clock();
  const TaskRanges r = task_ranges(a, task, buffer_bytes);
  if (part == kCopySmall) {
  } else if (bulk) {
    if (threadIdx.x == copier) {
      const int bytes = r.bytes[0] + r.bytes[1] + r.bytes[2];
      hopper::arrive_expect_bytes(landed, static_cast<uint32_t>(bytes));
      for (int k = 0; k < kMaxRanges; ++k)
        if (r.bytes[k] > 0) copy_bulk(buffer + r.at[k], r.src[k], r.bytes[k], landed);
    }
  } else {
    for (int k = 0; k < kMaxRanges; ++k) copy_async(buffer + r.at[k], r.src[k], r.bytes[k], first);
  }
  if ((task.flags & kPrefetchesProj) && threadIdx.x == copier && part != kCopySmall)
    prefetch_proj_share(a, task);
  if (marking) marks[1] = phase_clock();
  if (part == kCopyLarge) return;
  copy_small_params(a, task, buffer, buffer_bytes, first);
  cp_async_commit();
  if (marking) marks[2] = phase_clock();
}

// Whether a task's large ranges stay clear of the small parameters at its buffer's end (which
// the task before it in that buffer may still read while they land).
__device__ inline bool clear_of_extras(const DecodeArgs& a, const DecodeTask& task,
                                       int buffer_bytes) {
  const TaskRanges r = task_ranges(a, task, buffer_bytes);
  int top = 0;
  for (int k = 0; k < kMaxRanges; ++k) top = max(top, r.bytes[k] > 0 ? r.at[k] + r.bytes[k] : 0);
  return top <= buffer_bytes - kExtrasBytes;
}

// The L2 prefetch of a task ahead: its large ranges in pieces of 8 KB over the lanes of one
// warp (each piece one instruction).
__device__ inline void prefetch_task_l2(const DecodeArgs& a, const DecodeTask& task,
                                        int buffer_bytes, int lane) {
  constexpr int kPiece = 8192;
  const TaskRanges r = task_ranges(a, task, buffer_bytes);
  for (int k = 0; k < kMaxRanges; ++k) {
    const char* src = static_cast<const char*>(r.src[k]);
    for (int o = lane * kPiece; o < r.bytes[k]; o += 32 * kPiece)
      prefetch_l2(src + o, static_cast<uint32_t>(min(kPiece, r.bytes[k] - o)));
  }
}

}  // namespace gpt2
}  // namespace fl
