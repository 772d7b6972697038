// Level 4 of gpt2_decode: the whole decode step as one persistent launch, one block per SM.
//
// The host builds the step as a task list (tasks.cpp: a slice of a product, an attention head's
// split, the final norm), dealt to the blocks in stage order: four dependent stages a layer
// (qkv, attention, proj, mlp), since an MLP task adds its slice's share of h Wout straight into
// the next residual (red.add) instead of waiting for all of h. Each block runs its own list
// with one short loop:
//   1. start copying the NEXT task's weight slice with its small parameters (LayerNorm's gamma
//      and beta, the bias slice), or for attention its cached keys and values, into the other
//      of two shared-memory buffers (cp.async), so bytes keep streaming while this task waits
//      and nothing after the wait goes to DRAM,
//   2. wait until this task's input stage is complete (a counter in global memory reaches that
//      stage's task count: one thread spins on an acquire load),
//   3. wait for this task's own weights (issued one task earlier), run the task's device
//      function (the same ops as the fused level: device.cuh, attention.cuh),
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
#include "kernels/device_common.cuh"
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
__device__ __forceinline__ void cp_async_wait_all_but_newest() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 1;" ::: "memory");
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

// An attention task's cached keys and values (positions below s: inputs, never written by the
// step) go to shared memory like a product's weights when both fit one buffer.
__device__ SplitKeys cached_split(const DecodeArgs& a, const DecodeTask& task, int buffer_bytes) {
  SplitKeys keys = split_keys_of(a, task.first % a.splits);
  if (2 * keys.cached * kHeadDim * 2 > buffer_bytes) keys.cached = 0;
  return keys;
}

__device__ void copy_async(char* dst, const void* src, int bytes) {
  const char* from = static_cast<const char*>(src);
  for (int i = threadIdx.x * 16; i < bytes; i += kThreads * 16) cp_async16(dst + i, from + i);
}
// `rows` runs of `bytes` (a multiple of 16), `stride` bytes apart in global memory, packed.
__device__ void copy_rows_async(char* dst, const void* src, int rows, int bytes, int64_t stride) {
  const char* from = static_cast<const char*>(src);
  const int per_row = bytes / 16;
  for (int i = threadIdx.x; i < rows * per_row; i += kThreads) {
    const int r = i / per_row, c = (i % per_row) * 16;
    cp_async16(dst + r * bytes + c, from + r * stride + c);
  }
}
// A bias slice: `count` (even) bf16 from an even row, in 4-byte pieces.
__device__ void copy_bias_async(bf16* dst, const bf16* src, int count) {
  for (int i = threadIdx.x; i < count / 2; i += kThreads) cp_async4(dst + 2 * i, src + 2 * i);
}

// A product task's small parameters at the end of its buffer (model.h's kExtrasBytes).
__device__ SmallParams extras_of(const char* buffer, int buffer_bytes, const DecodeTask& task) {
  const bf16* e = reinterpret_cast<const bf16*>(buffer + buffer_bytes - kExtrasBytes);
  return {e, e + 2 * kC, e + 2 * kC + kMaxSliceRows, static_cast<int>(task.first)};
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
    const SplitKeys keys = cached_split(a, task, buffer_bytes);
    const int head = task.first / a.splits, bytes = keys.cached * kHeadDim * 2;
    const int64_t at =
        ((int64_t(task.layer) * kHeads + head) * a.positions() + keys.first) * kHeadDim;
    copy_async(buffer, a.k_cache + at, bytes);
    copy_async(buffer + bytes, a.v_cache + at, bytes);
  } else if (static_cast<TaskKind>(task.kind) != TaskKind::final_norm) {
    prefetch_product(a, task, buffer, buffer_bytes);
  }
  cp_async_commit();
}

// Step 3: the task's device function; the products read their slice from shared memory.
__device__ void run_task(const DecodeArgs& a, const DecodeTask& task, const char* buffer,
                         int buffer_bytes, float* work, float* sums) {
  const int layer = task.layer;
  const bf16* weights = reinterpret_cast<const bf16*>(buffer);
  const SmallParams p = extras_of(buffer, buffer_bytes, task);
  switch (static_cast<TaskKind>(task.kind)) {
    case TaskKind::qkv:
      linear_slice(QkvOp{a, layer, p}, weights, task.first, task.count, work, sums);
      break;
    case TaskKind::attention:
      attend_split(a, layer, task.first / a.splits, task.first % a.splits, work,
                   cached_split(a, task, buffer_bytes).cached > 0 ? weights : nullptr);
      break;
    case TaskKind::proj:
      linear_slice(ProjOp{a, layer, p}, weights, task.first, task.count, work, sums);
      break;
    case TaskKind::mlp: {
      linear_slice(FcOp{a, layer, p, sums}, weights, task.first, task.count, work, sums);
      __syncthreads();  // the slice's h is in `sums`
      const bool fits = mlp_wout_fits(task.count, buffer_bytes);
      const bf16* w_out = fits ? weights + task.count * kC
                               : layer_weights(a, layer) + LayerLayout::w_out + task.first;
      mlp_down(a, w_out, fits ? task.count : kF, task.count, sums);
      break;
    }
    case TaskKind::final_norm:
      layernorm_rows(a.x_mlp, a.weights + kFinalLnG, a.weights + kFinalLnG + kC, 0, a.tokens, a.y);
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
  const int begin = block_begin[blockIdx.x], end = block_begin[blockIdx.x + 1];
  if (begin < end) prefetch_inputs(a, tasks[begin], buffers[0], buffer_bytes);
  for (int i = begin; i < end; ++i) {
    const DecodeTask task = tasks[i];
    const int slot = (i - begin) & 1;
    if (i + 1 < end)
      prefetch_inputs(a, tasks[i + 1], buffers[slot ^ 1], buffer_bytes);
    else
      cp_async_commit();  // keep one group per task
    const uint64_t asked = phase_clock();
    if (threadIdx.x == 0 && task.wait_counter != kNoCounter) {
      while (load_acquire(counters + task.wait_counter) < task.wait_target) {
      }
    }
    cp_async_wait_all_but_newest();
    __syncthreads();
    const uint64_t started = phase_clock();
    run_task(a, task, buffers[slot], buffer_bytes, work, sums);
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
