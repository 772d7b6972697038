// stage_chain_bench: the floor under lesson 11's megakernel. A decode step there is a chain of
// dependent stages (four a layer, 48 a step) on one block per SM, each stage ending in a count
// released to global memory that every block of the next stage waits for (the megakernel's own
// release_add and wait_count, kernels/gpt2_decode/counters.cuh), while the blocks stream the
// step's weights and cache (189.0 MB at a cache of 512). This bench times that skeleton with no
// arithmetic, so the lesson can say how much of a step the chain itself costs on this GPU:
//   sync     S stages of waits and releases only, nothing read: the chain's latency (us/stage);
//   flags, sleep, shards  the same with other ways to tell a stage's end (Barrier below);
//   stream   every block reads its share of the bytes in S chunks, no waits: the roof of this
//            access pattern (one block an SM, 256 threads);
//   chain    both, each chunk's loads issued after its stage's wait (no prefetch): the sum;
//   ahead D  both, with each block's next D chunks in flight in a ring of D + 1 shared-memory
//            slots (cp.async, sm_80+), issued before the wait: how far ahead copies must run
//            for the bytes to hide the chain (the megakernel copies one task ahead, by TMA bulk
//            copies on sm_90: the ring here is the same schedule with 16-byte copies);
//   ring 4   the ring 4 ahead without the waits: the ring's own roof;
//   flags 1, sleep 1, shards 1  ahead 1 with those; then ahead 1 with the same bytes in 36 and
//            24 stages (three or two a layer instead of four).
// Block b's chunk of stage s is chunk s * blocks + b, so each stage reads a fresh 1/S of the
// bytes. Cold L2: a 256 MB read before every timed launch; counters zeroed before it. Median of
// `reps` launches, CUDA events around the one launch.
//   stage_chain_bench [megabytes=189.0] [reps=30]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/gpt2_decode/counters.cuh"
#include "kernels/tensor_gemm.cuh"
#include "tests/support/bench_check.h"

namespace {

#define CHECK(expr) FL_BENCH_CHECK("stage_chain_bench", expr)
#define CUDA(expr) CHECK(fl::cuda_status((expr), #expr, __FILE__, __LINE__))

constexpr int kThreads = 256;
constexpr int kMaxStages = 48;
constexpr int kWords = kMaxStages * 8 * 32;  // the largest layout: 8 shards a stage, a line each

// How a stage's end is told to the next stage's blocks.
//   kNone   no waits at all (the stream rows);
//   kCount  the megakernel's: one counter a stage, each block red.release-adds 1, thread 0 of
//           every block spins on ld.acquire until it reads the block count;
//   kFlags  one word a block holding the stages it has finished, stored with st.release (no
//           atomics, no shared address); warp 0 of a waiting block reads all blocks' words
//           (5 loads a lane for 132 blocks, in flight together) until every one has reached s.
//   kSleep  kCount with __nanosleep(64) between polls (fewer loads on the counter's line while the
//           blocks' adds arrive);
//   kShards kCount spread over 8 counters a stage, 128 bytes apart (block b adds to b % 8): lanes
//           0-7 of warp 0 each spin on one until it holds its blocks' count.
enum Barrier { kNone, kCount, kFlags, kSleep, kShards };
constexpr int kShardCount = 8, kShardStride = 32;  // words: one 128-byte line a shard

__device__ __forceinline__ void store_release(unsigned* p, unsigned v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __threadfence();
  *reinterpret_cast<volatile unsigned*>(p) = v;
#endif
}

__device__ __forceinline__ unsigned load_relaxed(const unsigned* p) {
  unsigned v;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
#else
  v = *reinterpret_cast<const volatile unsigned*>(p);
#endif
  return v;
}

__device__ __forceinline__ void fence_acquire() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
#else
  __threadfence();
#endif
}

// Stage s's wait: until every block has finished stage s - 1, then the block.
__device__ __forceinline__ void wait_stage(const unsigned* words, int s, int barrier) {
  if (s > 0 && barrier == kCount && threadIdx.x == 0) {
    fl::gpt2::wait_count(words + s - 1, gridDim.x, false);
  } else if (s > 0 && barrier == kSleep && threadIdx.x == 0) {
    while (fl::load_acquire(words + s - 1) < gridDim.x) __nanosleep(64);
  } else if (s > 0 && barrier == kShards && threadIdx.x < 32) {
    const unsigned lane = threadIdx.x, blocks = gridDim.x;
    const unsigned target =
        lane < kShardCount ? (blocks - lane + kShardCount - 1) / kShardCount : 0;
    const unsigned* shard =
        words + (int64_t(s - 1) * kShardCount + lane % kShardCount) * kShardStride;
    bool mine = lane >= kShardCount;
    while (!__all_sync(0xffffffffu, mine)) mine = mine || fl::load_acquire(shard) >= target;
  } else if (s > 0 && barrier == kFlags && threadIdx.x < 32) {
    bool all = false;
    while (!all) {  // relaxed loads, all in flight at once; one acquire fence once all have seen s
      bool mine = true;
      for (unsigned b = threadIdx.x; b < gridDim.x; b += 32)
        mine = (load_relaxed(words + b) >= static_cast<unsigned>(s)) & mine;
      all = __all_sync(0xffffffffu, mine);
    }
    fence_acquire();
  }
  __syncthreads();
}

__device__ __forceinline__ void release_stage(unsigned* words, int s, int barrier) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (barrier == kCount || barrier == kSleep) fl::gpt2::release_add(words + s, 1u);
  if (barrier == kShards)
    fl::gpt2::release_add(
        words + (int64_t(s) * kShardCount + blockIdx.x % kShardCount) * kShardStride, 1u);
  if (barrier == kFlags) store_release(words + blockIdx.x, static_cast<unsigned>(s + 1));
}

// kAhead = 0: loads after the wait, into registers. kAhead > 0: a ring of kAhead + 1 chunks in
// shared memory, chunk s + kAhead asked for at the top of stage s (one commit group a chunk).
template <int kAhead>
__global__ void __launch_bounds__(kThreads, 1)
    stage_chain(const int4* bytes, int64_t chunk16, int stages, int barrier, unsigned* words,
                int* sink) {
  extern __shared__ int4 ring[];
  auto chunk = [&](int s) { return bytes + (int64_t(s) * gridDim.x + blockIdx.x) * chunk16; };
  auto ask = [&](int s) {
    if (s >= stages) return;
    int4* slot = ring + int64_t(s % (kAhead + 1)) * chunk16;
    for (int64_t i = threadIdx.x; i < chunk16; i += kThreads)
      fl::tc::copy16_async(slot + i, chunk(s) + i, true);
  };
  int acc = 0;
  if (kAhead > 0) {
    for (int s = 0; s < kAhead; ++s) {
      ask(s);
      fl::tc::async_commit();  // a group a chunk
    }
  }
  for (int s = 0; s < stages; ++s) {
    if (kAhead > 0) {
      ask(s + kAhead);         // into the slot stage s - 1 read (past its release's barrier)
      fl::tc::async_commit();  // empty past the last chunk: one group a stage all the same
    }
    wait_stage(words, s, barrier);
    if (kAhead == 0) {
      const int4* c = chunk(s);
      for (int64_t i = threadIdx.x; i < chunk16; i += kThreads) acc ^= __ldcg(c + i).x;
    } else {
      fl::tc::async_wait<kAhead>();  // chunks s + 1 .. s + kAhead may still fly: chunk s has landed
      __syncthreads();
      const int4* slot = ring + int64_t(s % (kAhead + 1)) * chunk16;
      for (int64_t i = threadIdx.x; i < chunk16; i += kThreads) acc ^= slot[i].x;
    }
    release_stage(words, s, barrier);
  }
  if (acc == 0x7a5c3e1d) *sink = acc;  // keeps the loads
}

__global__ void read_all(const int4* p, int64_t n, int* sink) {
  int acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    acc ^= p[i].x;
  if (acc == 0x12345678) *sink = acc;
}

struct Setup {
  int blocks = 0;
  int64_t chunk16 = 0;  // int4s a chunk
  int4* bytes = nullptr;
  int4* flush = nullptr;
  int64_t flush16 = (256ll << 20) / 16;
  unsigned* words = nullptr;  // the stages' counters or the blocks' flags
  int* sink = nullptr;
};

template <int kAhead>
float median_us(const Setup& u, int stages, int barrier, int reps) {
  const size_t smem = kAhead > 0 ? size_t(kAhead + 1) * u.chunk16 * 16 : 0;
  CUDA(cudaFuncSetAttribute(stage_chain<kAhead>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            static_cast<int>(smem)));
  cudaEvent_t start, stop;
  CUDA(cudaEventCreate(&start));
  CUDA(cudaEventCreate(&stop));
  std::vector<float> us;
  for (int r = 0; r < reps + 2; ++r) {
    CUDA(cudaMemset(u.words, 0, kWords * sizeof(unsigned)));
    read_all<<<4 * u.blocks, 512>>>(u.flush, u.flush16, u.sink);
    CUDA(cudaGetLastError());
    CUDA(cudaEventRecord(start));
    stage_chain<kAhead>
        <<<u.blocks, kThreads, smem>>>(u.bytes, u.chunk16, stages, barrier, u.words, u.sink);
    CUDA(cudaGetLastError());
    CUDA(cudaEventRecord(stop));
    CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (r >= 2) us.push_back(ms * 1e3f);
  }
  CUDA(cudaEventDestroy(start));
  CUDA(cudaEventDestroy(stop));
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

void report(const char* mode, int stages, float us, double bytes, float roof_us) {
  std::printf("%-9s stages %2d  %8.2f us  %5.2f us/stage  %7.1f GB/s  %5.1f%% of the stream\n",
              mode, stages, us, us / stages, bytes > 0 ? bytes / (us * 1e3) : 0.0,
              roof_us > 0 ? 100.0 * roof_us / us : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  const double megabytes = argc > 1 ? std::atof(argv[1]) : 189.0;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 30;
  if (!(megabytes >= 1 && megabytes <= 4096) || reps < 1 || reps > 1000) {
    std::fprintf(stderr, "stage_chain_bench: megabytes is 1..4096, reps 1..1000\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CUDA(cudaGetDeviceProperties(&prop, 0));
  Setup u;
  u.blocks = prop.multiProcessorCount;
  u.chunk16 = static_cast<int64_t>(megabytes * 1e6 / (16.0 * u.blocks * kMaxStages));
  const double bytes = 16.0 * u.chunk16 * u.blocks * kMaxStages;
  std::printf(
      "%s, %d SMs, one block of %d threads an SM; %.1f MB in %d chunks of %.1f KB a block\n",
      prop.name, u.blocks, kThreads, bytes / 1e6, kMaxStages, u.chunk16 * 16 / 1e3);
  CUDA(cudaMalloc(&u.bytes, size_t(bytes)));
  CUDA(cudaMemset(u.bytes, 0x5a, size_t(bytes)));
  CUDA(cudaMalloc(&u.flush, size_t(u.flush16) * 16));
  CUDA(cudaMemset(u.flush, 0x3c, size_t(u.flush16) * 16));
  CUDA(cudaMalloc(&u.words, kWords * sizeof(unsigned)));
  CUDA(cudaMalloc(&u.sink, sizeof(int)));
  // Nothing read: chunks of no bytes (before 2026-11-27 these rows loaded the chunks after each
  // wait, as `chain` does, and were taken for the bare chain).
  Setup bare = u;
  bare.chunk16 = 0;
  for (int stages : {24, 36, 48})
    report("sync", stages, median_us<0>(bare, stages, kCount, reps), 0, 0);
  report("flags", kMaxStages, median_us<0>(bare, kMaxStages, kFlags, reps), 0, 0);
  report("sleep", kMaxStages, median_us<0>(bare, kMaxStages, kSleep, reps), 0, 0);
  report("shards", kMaxStages, median_us<0>(bare, kMaxStages, kShards, reps), 0, 0);
  // Bytes: always all 48 chunks' worth (fewer stages would read less), so the rows compare.
  const float roof = median_us<0>(u, kMaxStages, kNone, reps);
  report("stream", kMaxStages, roof, bytes, roof);
  report("ring 4", kMaxStages, median_us<4>(u, kMaxStages, kNone, reps), bytes, roof);
  report("chain", kMaxStages, median_us<0>(u, kMaxStages, kCount, reps), bytes, roof);
  report("ahead 1", kMaxStages, median_us<1>(u, kMaxStages, kCount, reps), bytes, roof);
  report("ahead 2", kMaxStages, median_us<2>(u, kMaxStages, kCount, reps), bytes, roof);
  report("ahead 4", kMaxStages, median_us<4>(u, kMaxStages, kCount, reps), bytes, roof);
  report("flags 1", kMaxStages, median_us<1>(u, kMaxStages, kFlags, reps), bytes, roof);
  report("sleep 1", kMaxStages, median_us<1>(u, kMaxStages, kSleep, reps), bytes, roof);
  report("shards 1", kMaxStages, median_us<1>(u, kMaxStages, kShards, reps), bytes, roof);
  for (int stages : {36, 24}) {  // the same bytes in fewer, larger chunks
    Setup v = u;
    v.chunk16 = u.chunk16 * kMaxStages / stages;
    report("ahead 1", stages, median_us<1>(v, stages, kCount, reps), bytes, roof);
  }
  CUDA(cudaFree(u.bytes));
  CUDA(cudaFree(u.flush));
  CUDA(cudaFree(u.words));
  CUDA(cudaFree(u.sink));
  return 0;
}
