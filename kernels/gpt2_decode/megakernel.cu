// Level 4 of gpt2_decode: the whole decode step as one persistent launch, one block per SM.
//
// The host builds the step as a task list (tasks.cpp: a slice of a product, an attention head's
// split, the final norm), dealt to the blocks in stage order: four dependent stages a layer
// (qkv, attention, proj, mlp), since an MLP task adds its slice's share of h Wout straight into
// the next residual (red.add) instead of waiting for all of h. Each block runs its own list
// with one short loop:
//   1. ask L2 for the weights of the task two ahead (sm_90's bulk prefetch, one warp, no load
//      slots taken),
//   2. wait until this task's input stage is complete (a counter in global memory reaches that
//      stage's task count: four threads poll it with acquire loads) and for this task's weights,
//   3. run the task's device function (the same ops as the fused level: ops.cuh,
//      attention.cuh); once its own inputs (x, q, the partial sums) are in, start copying the
//      NEXT task's weight slice with its small parameters (LayerNorm's gamma and beta, the bias
//      slice), or for attention its cached keys and values, into the other of two shared-
//      memory buffers (cp.async, from L2 by now). Started any earlier, those copies would queue
//      ahead of this task's own loads, which are its critical path; started here, they stream
//      while the task computes and the next one waits,
//   4. bump its stage's counter (one red.release: the block's writes are visible before the
//      count is), and record the task (phases.h).
// The last block to finish zeroes the counters for the next launch. No block waits on a task
// later in its own list's stage order, so any number of co-resident blocks finishes (the
// partial-grid test runs on a few).
//
// Napkin math (t = 1, s = 512, H100): 170 MB of weights + 18.9 MB of cache at ~3 TB/s is
// ~63 us, so ~1.3 us a stage of 49. Each block holds about one slice per stage (9-75 KB), two
// buffers deep; activations are a few KB a task, read from L2. A stage's floor is its chain of
// L2 round trips (the count's release, the acquire that sees it, the inputs' loads), ~2 us.
#include <cstdint>

#include "kernels/cuda_check.h"
#include "kernels/gpt2_decode/attention.cuh"
#include "kernels/gpt2_decode/ops.cuh"
#include "kernels/gpt2_decode/launch.h"
#include "kernels/phases.cuh"

namespace fl {
namespace gpt2 {
namespace {

constexpr int kWorkBytes = kActFloats * 4;   // activations or attention scores (48 KB)
constexpr int kSumsBytes = kSumsFloats * 4;  // a chunk's sums before their epilogues

__device__ __forceinline__ void cp_async16(void* smem, const void* global) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(global) : "memory");
#else
  *reinterpret_cast<int4*>(smem) = *reinterpret_cast<const int4*>(global);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// Asks L2 for [p, p + bytes) (16-byte aligned, a multiple of 16) without waiting and without a
// slot in the SM's load queue: the TMA unit's bulk prefetch (sm_90; a no-op before).
__device__ __forceinline__ void l2_prefetch(const void* p, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}
// A range cut into 4 KB pieces over the lanes of one warp.
__device__ void l2_prefetch_range(const void* p, int64_t bytes, int lane) {
  constexpr int kPiece = 4096;
  const char* at = static_cast<const char*>(p);
  for (int64_t o = int64_t(lane) * kPiece; o < bytes; o += 32 * kPiece)
    l2_prefetch(at + o, static_cast<int>(bytes - o < kPiece ? bytes - o : kPiece));
}

__device__ __forceinline__ void cp_async4(void* smem, const void* global) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(global) : "memory");
#else
  *reinterpret_cast<unsigned*>(smem) = *reinterpret_cast<const unsigned*>(global);
#endif
}

// The stage counter's bump: the block's writes (ordered before thread 0 by __syncthreads) are
// visible to any block whose acquire load sees the new count.
__device__ __forceinline__ void release_add(unsigned* p, unsigned v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __threadfence();
  atomicAdd(p, v);
#endif
}

// Four floats added into global memory where other blocks add theirs (one vector red on sm_90).
__device__ __forceinline__ void red_add4(float* p, const float (&v)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v[0]), "f"(v[1]),
               "f"(v[2]), "f"(v[3])
               : "memory");
#else
  for (int i = 0; i < 4; ++i) atomicAdd(p + i, v[i]);
#endif
}

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
#else
  v = *reinterpret_cast<const volatile unsigned*>(p);
#endif
  return v;
}

// Step 2's wait: lane 0 of warps 0-3 poll the counter, their polls spread over an L2 round trip
// (a short sleep apart), so the count is seen about a quarter round trip after it lands rather
// than half of one; the first to see it tells the others through shared memory (atomics: the
// pollers race on purpose). Its acquire and the __syncthreads after the wait make the
// producers' writes visible to the whole block.
constexpr int kPollers = 4;
__device__ void wait_for_inputs(const unsigned* counter, unsigned target, int task, int* seen) {
  const int warp = threadIdx.x >> 5;
  if ((threadIdx.x & 31) != 0 || warp >= kPollers) return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  if (warp > 0) __nanosleep(200 * warp);
#endif
  while (atomicAdd(seen, 0) != task) {
    if (load_acquire(counter) >= target) {
      atomicExch(seen, task);
      return;
    }
  }
}

// The weight slice a product task reads (null for other tasks) and its length in bytes.
__device__ const bf16* task_weights(const DecodeArgs& a, const DecodeTask& task, int* bytes) {
  const bf16* w = a.weights + int64_t(task.layer) * LayerLayout::size;
  int64_t at = 0, k = 0;
  switch (static_cast<TaskKind>(task.kind)) {
    case TaskKind::qkv:
      at = LayerLayout::w_qkv, k = kC;
      break;
    case TaskKind::proj:
      at = LayerLayout::w_proj, k = kC;
      break;
    case TaskKind::mlp:  // the Wfc rows; prefetch_inputs adds the Wout columns
      at = LayerLayout::w_fc, k = kC;
      break;
    default:
      *bytes = 0;
      return nullptr;
  }
  *bytes = static_cast<int>(task.count * k * 2);
  return w + at + int64_t(task.first) * k;
}

// An attention task's keys and values go to shared memory like a product's weights when the
// whole split fits one buffer: the cached ones (positions below s: inputs, never written by the
// step) while it waits, its own ones after (attend_split).
__device__ bool split_fits(const SplitKeys& keys, int buffer_bytes) {
  return 2 * (keys.end - keys.first) * kHeadDim * 2 <= buffer_bytes;
}

// The copies are issued by warps 1-7: warp 0's first thread is meanwhile spinning on the
// task's dependency counter (step 2), so a satisfied wait is seen while the copies go out.
constexpr int kCopyThreads = kThreads - 32;
__device__ __forceinline__ int copy_thread() {
  return static_cast<int>(threadIdx.x) - 32;  // negative in warp 0: no copies
}
__device__ void copy_async(char* dst, const void* src, int bytes) {
  const char* from = static_cast<const char*>(src);
  const int tid = copy_thread();
  if (tid < 0) return;
  for (int i = tid * 16; i < bytes; i += kCopyThreads * 16) cp_async16(dst + i, from + i);
}
// `rows` runs of `bytes` (a multiple of 16), `stride` bytes apart in global memory, packed.
__device__ void copy_rows_async(char* dst, const void* src, int rows, int bytes, int64_t stride) {
  const char* from = static_cast<const char*>(src);
  const int per_row = bytes / 16, tid = copy_thread();
  if (tid < 0) return;
  for (int i = tid; i < rows * per_row; i += kCopyThreads) {
    const int r = i / per_row, c = (i % per_row) * 16;
    cp_async16(dst + r * bytes + c, from + r * stride + c);
  }
}
// A bias slice: `count` (even) bf16 from an even row, in 4-byte pieces.
__device__ void copy_bias_async(bf16* dst, const bf16* src, int count) {
  const int tid = copy_thread();
  if (tid < 0) return;
  for (int i = tid; i < count / 2; i += kCopyThreads) cp_async4(dst + 2 * i, src + 2 * i);
}

// A product task's small parameters at the end of its buffer (model.h's kExtrasBytes), and
// room for proj's residual slice, loaded with the attention partials.
__device__ SmallParams extras_of(char* buffer, int buffer_bytes, const DecodeTask& task) {
  char* at = buffer + buffer_bytes - kExtrasBytes;
  const bf16* e = reinterpret_cast<const bf16*>(at);
  float* residual = reinterpret_cast<float*>(at + (2 * kC + 2 * kMaxSliceRows) * 2);
  return {e, e + 2 * kC, e + 2 * kC + kMaxSliceRows, static_cast<int>(task.first), task.count,
          residual};
}

// Step 1 for a product: its weights, the MLP's Wout columns where they fit, gamma and beta, and
// the bias slices.
__device__ void prefetch_product(const DecodeArgs& a, const DecodeTask& task, char* buffer,
                                 int buffer_bytes) {
  int bytes = 0;
  copy_async(buffer, task_weights(a, task, &bytes), bytes);
  const bf16* w = layer_weights(a, task.layer);
  const SmallParams e = extras_of(buffer, buffer_bytes, task);
  bf16* gamma = const_cast<bf16*>(e.gamma);
  bf16* bias = const_cast<bf16*>(e.bias);
  switch (static_cast<TaskKind>(task.kind)) {
    case TaskKind::qkv:
      copy_async(reinterpret_cast<char*>(gamma), w + LayerLayout::ln1_g, 2 * kC * 2);
      copy_bias_async(bias, w + LayerLayout::b_qkv + task.first, task.count);
      break;
    case TaskKind::proj:
      copy_bias_async(bias, w + LayerLayout::b_proj + task.first, task.count);
      copy_bias_async(const_cast<bf16*>(e.bias2), w + LayerLayout::b_out + task.first, task.count);
      break;
    case TaskKind::mlp:
      if (mlp_wout_fits(task.count, buffer_bytes))
        copy_rows_async(buffer + bytes, w + LayerLayout::w_out + task.first, kC, task.count * 2,
                        int64_t(kF) * 2);
      copy_async(reinterpret_cast<char*>(gamma), w + LayerLayout::ln2_g, 2 * kC * 2);
      copy_bias_async(bias, w + LayerLayout::b_fc + task.first, task.count);
      break;
    default:
      break;
  }
}

// Two tasks ahead, warp 1 asks L2 for what prefetch_inputs will copy (the small parameters
// come along from L2 or DRAM; they are a few KB), so that copy streams from L2.
__device__ void l2_prefetch_task(const DecodeArgs& a, const DecodeTask& task, int buffer_bytes) {
  const int lane = threadIdx.x & 31;
  if ((threadIdx.x >> 5) != 1) return;
  const TaskKind kind = static_cast<TaskKind>(task.kind);
  if (kind == TaskKind::attention) {
    const SplitKeys keys = split_keys_of(a, task.first % a.splits);
    if (!split_fits(keys, buffer_bytes)) return;
    const int64_t at = ((int64_t(task.layer) * kHeads + task.first / a.splits) * a.positions() +
                        keys.first) * kHeadDim;
    l2_prefetch_range(a.k_cache + at, keys.cached * kHeadDim * 2, lane);
    l2_prefetch_range(a.v_cache + at, keys.cached * kHeadDim * 2, lane);
    return;
  }
  if (kind == TaskKind::final_norm) return;
  int bytes = 0;
  l2_prefetch_range(task_weights(a, task, &bytes), bytes, lane);
  if (kind == TaskKind::mlp && mlp_wout_fits(task.count, buffer_bytes)) {
    const bf16* w_out = layer_weights(a, task.layer) + LayerLayout::w_out + task.first;
    for (int r = lane; r < kC; r += 32) l2_prefetch(w_out + int64_t(r) * kF, task.count * 2);
  }
}

// The MLP task's second half: its `count` rows of h (h[r * t + j], shared memory) times the same
// columns of Wout (w: row n's columns at w + n * stride; shared memory or the weights) added
// into x_mlp. A thread per 4 outputs, a vector red per token.
__device__ void mlp_down(const DecodeArgs& a, const bf16* w, int64_t stride, int count,
                         const float* h) {
  const int t = a.tokens;
  for (int q = threadIdx.x; q < kC / 4; q += kThreads) {
    float acc[kMaxTokens][4];
#pragma unroll
    for (int j = 0; j < kMaxTokens; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    for (int c = 0; c < count; c += 8) {
      float wf[4][8];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int4 v = *reinterpret_cast<const int4*>(w + (4 * q + r) * stride + c);
        const float2 w0 = unpack2(v.x), w1 = unpack2(v.y), w2 = unpack2(v.z), w3 = unpack2(v.w);
        wf[r][0] = w0.x, wf[r][1] = w0.y, wf[r][2] = w1.x, wf[r][3] = w1.y;
        wf[r][4] = w2.x, wf[r][5] = w2.y, wf[r][6] = w3.x, wf[r][7] = w3.y;
      }
#pragma unroll
      for (int j = 0; j < kMaxTokens; ++j) {
        if (j >= t) break;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float hv = h[(c + e) * t + j];
#pragma unroll
          for (int r = 0; r < 4; ++r) acc[j][r] += wf[r][e] * hv;
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kMaxTokens; ++j) {
      if (j >= t) break;
      red_add4(a.x_mlp + j * kC + 4 * q, acc[j]);
    }
  }
}

// Step 1: every thread issues its share of the slice's 16-byte copies; one commit group per
// task, empty for tasks without one, so "all but the newest group" is always this task's.
__device__ void prefetch_inputs(const DecodeArgs& a, const DecodeTask& task, char* buffer,
                                int buffer_bytes) {
  if (static_cast<TaskKind>(task.kind) == TaskKind::attention) {
    const SplitKeys keys = split_keys_of(a, task.first % a.splits);
    if (split_fits(keys, buffer_bytes)) {
      const int head = task.first / a.splits, bytes = keys.cached * kHeadDim * 2;
      const int64_t at =
          ((int64_t(task.layer) * kHeads + head) * a.positions() + keys.first) * kHeadDim;
      copy_async(buffer, a.k_cache + at, bytes);
      copy_async(buffer + (keys.end - keys.first) * kHeadDim * 2, a.v_cache + at, bytes);
    }
  } else if (static_cast<TaskKind>(task.kind) != TaskKind::final_norm) {
    prefetch_product(a, task, buffer, buffer_bytes);
  }
  cp_async_commit();
}

// Step 3: the task's device function; the products read their slice from shared memory.
template <class AfterInputs>
__device__ void run_task(const DecodeArgs& a, const DecodeTask& task, char* buffer,
                         int buffer_bytes, float* work, float* sums, const AfterInputs& next) {
  const int layer = task.layer;
  const bf16* weights = reinterpret_cast<const bf16*>(buffer);
  const SmallParams p = extras_of(buffer, buffer_bytes, task);
  switch (static_cast<TaskKind>(task.kind)) {
    case TaskKind::qkv:
      linear_slice(QkvOp{a, layer, p}, weights, task.first, task.count, work, sums, next);
      break;
    case TaskKind::attention: {
      const int split = task.first % a.splits;
      bf16* kv = split_fits(split_keys_of(a, split), buffer_bytes)
                     ? reinterpret_cast<bf16*>(buffer)
                     : nullptr;
      attend_split(a, layer, task.first / a.splits, split, work, kv, next);
      break;
    }
    case TaskKind::proj:
      linear_slice(ProjOp{a, layer, p}, weights, task.first, task.count, work, sums, next);
      break;
    case TaskKind::mlp: {
      linear_slice(FcOp{a, layer, p, sums}, weights, task.first, task.count, work, sums, next);
      __syncthreads();  // the slice's h is in `sums`
      const bool fits = mlp_wout_fits(task.count, buffer_bytes);
      const bf16* w_out = fits ? weights + task.count * kC
                               : layer_weights(a, layer) + LayerLayout::w_out + task.first;
      mlp_down(a, w_out, fits ? task.count : kF, task.count, sums);
      break;
    }
    case TaskKind::final_norm:
      next();
      layernorm_rows(a.x_mlp, a.weights + kFinalLnG, a.weights + kFinalLnG + kC, 0, a.tokens,
                     a.y);
      break;
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    megakernel(DecodeArgs a, const DecodeTask* tasks, const int* block_begin, unsigned* counters,
               int counter_count, int buffer_bytes, PhaseSink phases) {
  extern __shared__ __align__(16) char smem[];
  float* work = reinterpret_cast<float*>(smem);
  float* sums = reinterpret_cast<float*>(smem + kWorkBytes);
  char* buffers[2] = {smem + kWorkBytes + kSumsBytes,
                      smem + kWorkBytes + kSumsBytes + buffer_bytes};
  __shared__ int seen;  // the last task whose input stage a poller saw complete
  if (threadIdx.x == 0) seen = -1;
  __syncthreads();
  const int begin = block_begin[blockIdx.x], end = block_begin[blockIdx.x + 1];
  if (begin < end) prefetch_inputs(a, tasks[begin], buffers[0], buffer_bytes);
  if (begin + 1 < end) l2_prefetch_task(a, tasks[begin + 1], buffer_bytes);
  for (int i = begin; i < end; ++i) {
    const DecodeTask task = tasks[i];
    const int slot = (i - begin) & 1;
    if (i + 2 < end) l2_prefetch_task(a, tasks[i + 2], buffer_bytes);
    const uint64_t asked = phase_clock();
    if (task.wait_counter != kNoCounter)
      wait_for_inputs(counters + task.wait_counter, task.wait_target, i, &seen);
    cp_async_wait_all();  // this task's copies, issued while the task before it ran
    __syncthreads();
    const uint64_t started = phase_clock();
    // The next task's copies start once this task's own inputs are in (after_inputs).
    const auto next = [&] {
      if (i + 1 < end) prefetch_inputs(a, tasks[i + 1], buffers[slot ^ 1], buffer_bytes);
    };
    run_task(a, task, buffers[slot], buffer_bytes, work, sums, next);
    __syncthreads();  // the outputs are written and both buffers free for the next copies
    if (threadIdx.x == 0) {
      release_add(counters + task.done_counter, 1u);
      phase_record(phases, task.kind, started, phase_clock(), static_cast<uint32_t>(i),
                   static_cast<uint32_t>(started - asked));
    }
  }
  // The last block out resets every counter (none is read after its block's last wait).
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(counters + counter_count, 1u) == gridDim.x - 1) {
      for (int c = 0; c <= counter_count; ++c) counters[c] = 0;
      __threadfence();
    }
  }
}

}  // namespace

Status megakernel_limits(int* weight_buffer_bytes, int* blocks) {
  int device = 0, optin = 0, sms = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  static_assert(kWorkBytes + kSumsBytes + 1024 == kMegakernelFixedSharedBytes, "model.h's count");
  const int buffer = weight_buffer_bytes_for(optin);
  if (buffer == 0) {
    return Status::Error(
        "the megakernel needs " + std::to_string(kWorkBytes + kSumsBytes + 2 * kF * 2) +
        " bytes of shared memory per block; this GPU offers " + std::to_string(optin));
  }
  *weight_buffer_bytes = buffer;
  *blocks = sms;
  return Status::Ok();
}

Status launch_megakernel(const DecodeArgs& a, const MegakernelPlan& plan, cudaStream_t s) {
  const int smem = kWorkBytes + kSumsBytes + 2 * plan.weight_buffer_bytes;
  FL_CUDA_TRY(cudaFuncSetAttribute(megakernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  megakernel<<<plan.blocks, kThreads, smem, s>>>(a, plan.tasks, plan.block_begin, plan.counters,
                                                 plan.counter_count, plan.weight_buffer_bytes,
                                                 plan.phases);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpt2
}  // namespace fl
