// stage_wait_bench: how fast an all-to-all stage wait can be on this GPU, and where the stage of
// lesson 11's megakernel goes when bytes stream under it (the sibling of stage_chain_bench). The
// skeleton: one block of 256 threads an SM (120 KB of shared memory keeps it alone there), 48
// stages, each ended by every block's arrival and awaited by every block; bare, or with each
// block's 1/48 of 189.0 MB a stage copied ahead into shared memory. The forms:
//   arrival  red.release.gpu.add (the megakernel's release_add) / fence.acq_rel + red.relaxed /
//            atom.release.gpu.add / __threadfence + atomicAdd;
//   waiting  ld.acquire.gpu each spin (the megakernel's wait_count) / ld.relaxed.gpu spins and
//            one fence.acq_rel / ld.volatile spins and one fence / ld.acquire with
//            __nanosleep(500) between polls (a tenth of the polls on the count's line);
//   layout   the stages' counts a 128-byte line apart instead of one word apart;
//   clusters (sm_90) blocks of a cluster of 2 or 4 meet first, one block a cluster arrives at
//            and polls the count, then releases its cluster: by the hardware cluster barrier
//            both ways, or by counts and flags in the leader's / the blocks' shared memory
//            (DSMEM, red.release.cluster and st.release.cluster);
//   skew     block b arrives b x 2 ns late (are simultaneous arrivals the cost?);
//   bytes    who copies (every thread, warps 1-7, or one TMA bulk copy from thread 32), 1 or 2
//            ahead, no waits at all (the bytes' roof), the release without its fence (a probe:
//            it orders nothing), and outputs written before each release (stored, or red.added
//            into one vector as the MLP adds its residual);
//   tree     groups of 12 blocks count in their own counter (atom.acq_rel), the group's last
//            arrival adds 1 to the stage's count (11 arrivals at the root);
//   L2       the bytes asked into L2 1-4 stages ahead (bulk prefetch), each chunk copied into
//            the SM after its stage's wait, or one ahead as before, or once the block's count
//            is released (the next chunk in flight while polling, not while releasing).
// Plus the physical floor: two blocks on two SMs passing one word back and forth (one way, us).
// Each row: median of `reps` launches (CUDA events, cold L2), us for 12 and 48 stages bare, us a
// stage (48 stages / 48; slope: (48 - 12) / 36) and the SM clock block 0 saw (clock64 over
// %globaltimer), then 48 stages with the bytes. docs/PERFORMANCE.md has what they gave.
//   stage_wait_bench [reps=25]
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tests/gpu/stage_wait_ops.cuh"

namespace cg = cooperative_groups;
using namespace stage_wait;  // NOLINT: the bench's own operations
namespace {

#define CUDA(expr)                                                                       \
  do {                                                                                   \
    const cudaError_t e_ = (expr);                                                       \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "stage_wait_bench: %s: %s\n", #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

constexpr int kThreads = 256, kStages = 48, kLine = 32;  // words
constexpr int kSmemFloor = 120 << 10;                    // > half an SM: one block an SM
constexpr int kTreeGroup = 12;
constexpr int kWords = 64 * kStages * kLine;

enum Arrive { kRedRelease, kFenceRed, kAtomRelease, kThreadfence, kTree, kNoFence };
enum Wait { kAcquire, kRelaxed, kVolatile, kSleep };
enum Hier { kFlat, kClusterBarrier, kClusterSmem };
enum CopyAt { kBeforeWait, kAfterWait, kAfterRelease };
struct Form {
  const char* name;
  int arrive = kRedRelease, wait = kAcquire, hier = kFlat, cluster = 1, stride = 1;
  int skew_ns = 0;  // block b arrives ~b x skew_ns later (2 clocks a ns; bare: spread out)
  // The bytes: chunks `ahead` stages ahead, by cp.async from threads first_copier on, or by one
  // TMA bulk copy a chunk from thread 32 (bulk); waits false: no waits nor arrivals at all.
  int ahead = 1, first_copier = 0;
  bool bulk = false, waits = true;
  // l2_ahead > 0: chunk s + l2_ahead asked into L2 at the top of stage s (a bulk prefetch from
  // thread 32: no bytes come to the SM) and, with copy_at kAfterWait, chunk s copied into
  // shared memory after stage s's wait, from L2, so that no bytes are in flight to the SM while
  // it polls and releases. copy_at kBeforeWait: chunk s + ahead at the top of stage s (as
  // without L2 prefetch); kAfterRelease: chunk s + 1 once stage s's count is released (a
  // barrier after the release: in flight while the block polls, not while it computes or
  // releases).
  int l2_ahead = 0, copy_at = kAfterWait;
  // The block's outputs before each release: 0 none, 1 a float4 a thread stored (4 KB a block),
  // 2 three floats a thread red.added into one 768-float vector (as the MLP adds its residual).
  int outputs = 0;
};

__device__ __forceinline__ void wait_flat(const unsigned* count, unsigned target, int wait) {
  if (wait == kAcquire || wait == kSleep) {
    spin([&] { return ld_acquire(count) >= target; }, wait == kSleep);
  } else {
    if (wait == kRelaxed) spin([&] { return ld_relaxed(count) >= target; });
    if (wait == kVolatile) spin([&] { return ld_volatile(count) >= target; });
    fence_acq_rel();
  }
}

__device__ __forceinline__ void arrive_flat(unsigned* words, int s, const Form& f) {
  unsigned* count = words + s * f.stride;
  if (f.arrive == kRedRelease) red_release(count, 1u);
  if (f.arrive == kFenceRed) fence_acq_rel(), red_relaxed(count, 1u);
  if (f.arrive == kNoFence) red_relaxed(count, 1u);  // orders nothing: a probe of the fence
  if (f.arrive == kAtomRelease) atom_add(count, 1u, false);
  if (f.arrive == kThreadfence) __threadfence(), atomicAdd(count, 1u);
  if (f.arrive == kTree) {  // the group's last arrival adds its group to the stage's count
    unsigned* group = words + (kStages + s * 16 + blockIdx.x / kTreeGroup) * kLine;
    const unsigned size =
        unsigned(min(kTreeGroup, int(gridDim.x) - int(blockIdx.x) / kTreeGroup * kTreeGroup));
    if (atom_add(group, 1u, true) == size - 1) red_release(count, 1u);
  }
}

// What stage s's count reaches once the stage is done.
__device__ __forceinline__ unsigned stage_target(const Form& f) {
  if (f.hier != kFlat) return gridDim.x / f.cluster;
  if (f.arrive == kTree) return (gridDim.x + kTreeGroup - 1) / kTreeGroup;
  return gridDim.x;
}

// The end of stage s (every thread): the block's work is done; arrive.
__device__ __forceinline__ void release_stage(unsigned* words, int s, const Form& f,
                                              unsigned* arrivals) {
  if (f.hier == kClusterBarrier) {
    cg::this_cluster().sync();  // barrier.cluster.arrive.release + wait.acquire
    if (cg::this_cluster().block_rank() == 0 && threadIdx.x == 0)
      red_release(words + s * f.stride, 1u);
    return;
  }
  __syncthreads();
  if (threadIdx.x != 0 || !f.waits) return;
  if (f.skew_ns > 0) {
    const long long until = clock64() + 2ll * blockIdx.x * f.skew_ns;  // ~2 cycles a ns
    while (clock64() < until) {
    }
  }
  if (f.hier == kFlat) return arrive_flat(words, s, f);
  cg::cluster_group cluster = cg::this_cluster();  // kClusterSmem: count in the leader's smem
  if (cluster.block_rank() != 0) {
    red_release_cluster(cluster.map_shared_rank(arrivals, 0), 1u);
  } else {
    const unsigned target = (s + 1) * (f.cluster - 1);
    spin([&] { return ld_acquire_cluster(arrivals) >= target; });
    red_release(words + s * f.stride, 1u);
  }
}

// The start of stage s (s > 0, every thread): until stage s - 1 is done everywhere.
__device__ __forceinline__ void wait_stage(const unsigned* words, int s, const Form& f,
                                           unsigned* flag) {
  const unsigned* count = words + (s - 1) * f.stride;
  if (f.hier == kFlat) {
    if (threadIdx.x == 0 && f.waits) wait_flat(count, stage_target(f), f.wait);
    __syncthreads();
    return;
  }
  cg::cluster_group cluster = cg::this_cluster();
  const bool leader = cluster.block_rank() == 0;
  if (leader && threadIdx.x == 0) wait_flat(count, stage_target(f), f.wait);
  if (f.hier == kClusterBarrier) {
    cluster.sync();
    return;
  }
  if (threadIdx.x == 0) {  // kClusterSmem: the leader stores s into each block's flag
    if (leader) {
      for (int r = 1; r < f.cluster; ++r) st_release_cluster(cluster.map_shared_rank(flag, r), s);
    } else {
      spin([&] { return ld_acquire_cluster(flag) >= unsigned(s); });
    }
  }
  __syncthreads();
}

// The skeleton: chunk16 == 0 bare; else block b's chunk s + ahead asked before stage s's wait.
__global__ void __launch_bounds__(kThreads, 1)
    chain(const int4* bytes, int64_t chunk16, int stages, Form f, unsigned* words, int* sink,
          unsigned long long* clocks, float* out) {
  extern __shared__ int4 ring[];
  __shared__ unsigned arrivals, flag;
  __shared__ __align__(8) uint64_t landed[4];  // a slot's bulk copy is in (bulk)
  if (threadIdx.x == 0) {
    arrivals = flag = 0;
    for (int b = 0; b < 4; ++b) mbar_init(&landed[b]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (f.hier != kFlat) cg::this_cluster().sync();  // the flags are zero before anyone stores
  const uint64_t c0 = clock64(), t0 = now_ns();
  const int slots = f.ahead + 1, copiers = kThreads - f.first_copier;
  auto slot = [&](int s) { return ring + (s % slots) * chunk16; };
  auto ask = [&](int s) {
    if (chunk16 == 0 || s >= stages) return;
    const int4* src = bytes + (int64_t(s) * gridDim.x + blockIdx.x) * chunk16;
    if (f.bulk) {
      if (threadIdx.x == 32) bulk_copy(slot(s), src, unsigned(chunk16 * 16), &landed[s % slots]);
      return;
    }
    for (int64_t i = int(threadIdx.x) - f.first_copier; i >= 0 && i < chunk16; i += copiers)
      copy16(slot(s) + i, src + i);
  };
  const bool late = f.l2_ahead > 0 && f.copy_at == kAfterWait;
  const bool after_release = f.copy_at == kAfterRelease;  // (1 ahead)
  auto prefetch = [&](int s) {
    if (chunk16 == 0 || s >= stages || threadIdx.x != 32) return;
    const int4* src = bytes + (int64_t(s) * gridDim.x + blockIdx.x) * chunk16;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src),
                 "r"(unsigned(chunk16 * 16))
                 : "memory");
  };
  int acc = 0;
  for (int s = 0; s < f.l2_ahead; ++s) prefetch(s);
  for (int s = 0; !late && s < f.ahead; ++s) {
    ask(s);
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  for (int s = 0; s < stages; ++s) {
    if (f.l2_ahead > 0) prefetch(s + f.l2_ahead);
    // into the slot stage s - 1 read (past its release's barrier)
    if (!late && !after_release) ask(s + f.ahead);
    asm volatile("cp.async.commit_group;" ::: "memory");
    if (s > 0) wait_stage(words, s, f, &flag);
    if (late) ask(s);
    if (late) asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
    if (!late && f.ahead == 1) asm volatile("cp.async.wait_group 1;" ::: "memory");
    if (!late && f.ahead == 2) asm volatile("cp.async.wait_group 2;" ::: "memory");
    if (!late && f.ahead == 3) asm volatile("cp.async.wait_group 3;" ::: "memory");
    if (f.bulk && chunk16 > 0) mbar_wait(&landed[s % slots], (s / slots) & 1);
    __syncthreads();
    for (int64_t i = threadIdx.x; i < chunk16; i += kThreads) acc ^= slot(s)[i].x;
    if (f.outputs == 1)
      reinterpret_cast<float4*>(
          out + 4096)[(s & 1) * gridDim.x * kThreads + blockIdx.x * kThreads + threadIdx.x] =
          make_float4(acc, s, 0, 1);
    for (int k = 0; f.outputs == 2 && k < 3; ++k)
      atomicAdd(out + (s & 1) * 1024 + k * kThreads + threadIdx.x, 1.0f);
    release_stage(words, s, f, &arrivals);
    if (after_release) {  // chunk s + 1 once the count is out (thread 0 past its red.release)
      __syncthreads();
      ask(s + 1);
      asm volatile("cp.async.commit_group;" ::: "memory");
    }
  }
  if (f.hier != kFlat) cg::this_cluster().sync();  // no block leaves while its smem is read
  if (blockIdx.x == 0 && threadIdx.x == 0) clocks[0] = clock64() - c0, clocks[1] = now_ns() - t0;
  if (acc == 0x7a5c3e1d) *sink = acc;
}

// The floor: block 0 and block 1 (two SMs) pass a count back and forth `trips` times.
__global__ void ping_pong(unsigned* a, unsigned* b, int trips, int form, unsigned long long* ns) {
  extern __shared__ int4 unused[];
  if (threadIdx.x != 0) return;
  unsigned* mine = blockIdx.x == 0 ? a : b;
  const unsigned* theirs = blockIdx.x == 0 ? b : a;
  const uint64_t t0 = now_ns();
  for (int i = 1; i <= trips; ++i) {
    if (blockIdx.x == 1) {
      if (form != 1) spin([&] { return ld_acquire(theirs) >= unsigned(i); });
      if (form == 1) spin([&] { return ld_relaxed(theirs) >= unsigned(i); }), fence_acq_rel();
    }
    if (form == 0)
      asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(mine), "r"(i) : "memory");
    if (form == 1) {
      fence_acq_rel();
      asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(mine), "r"(i) : "memory");
    }
    if (form == 2) red_release(mine, 1u);
    if (blockIdx.x == 0) {
      if (form != 1) spin([&] { return ld_acquire(theirs) >= unsigned(i); });
      if (form == 1) spin([&] { return ld_relaxed(theirs) >= unsigned(i); }), fence_acq_rel();
    }
  }
  if (blockIdx.x == 0) *ns = now_ns() - t0;
}

struct Setup {
  int blocks = 0;
  int4* bytes = nullptr;
  int4* flush = nullptr;
  int64_t flush16 = (256ll << 20) / 16;
  unsigned* words = nullptr;
  int* sink = nullptr;
  unsigned long long* clocks = nullptr;
  float* out = nullptr;  // the outputs' rows (Form::outputs)
};

__global__ void read_all(const int4* p, int64_t n, int* sink) {
  int acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    acc ^= p[i].x;
  if (acc == 0x12345678) *sink = acc;
}

struct Timing {
  float us = -1;  // -1: timed out (not co-resident) or no such grid
  double mhz = 0;
};

Timing time_chain(const Setup& u, const Form& f, int blocks, int stages, bool with_bytes,
                  int reps) {
  const int64_t chunk16 = with_bytes ? int64_t(189.0e6 / (16.0 * blocks * kStages)) : 0;
  const int smem = std::max<int>(kSmemFloor, int((f.ahead + 1) * chunk16 * 16));
  CUDA(cudaFuncSetAttribute(chain, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  cfg.gridDim = dim3(blocks), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = smem;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = f.cluster, attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr, cfg.numAttrs = f.cluster > 1 ? 1 : 0;
  cudaEvent_t start, stop;
  CUDA(cudaEventCreate(&start));
  CUDA(cudaEventCreate(&stop));
  std::vector<float> us;
  Timing t;
  const unsigned zero = 0;
  for (int r = 0; r < reps + 2; ++r) {
    CUDA(cudaMemset(u.words, 0, kWords * sizeof(unsigned)));
    read_all<<<4 * u.blocks, 512>>>(u.flush, u.flush16, u.sink);
    CUDA(cudaEventRecord(start));
    CUDA(cudaLaunchKernelEx(&cfg, chain, static_cast<const int4*>(u.bytes), chunk16, stages, f,
                            u.words, u.sink, u.clocks, u.out));
    CUDA(cudaEventRecord(stop));
    CUDA(cudaEventSynchronize(stop));
    unsigned timeout = 0;
    CUDA(cudaMemcpyFromSymbol(&timeout, g_timeout, sizeof timeout));
    if (timeout != 0) {
      CUDA(cudaMemcpyToSymbol(g_timeout, &zero, sizeof zero));
      return t;
    }
    float ms = 0;
    CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (r >= 2) us.push_back(ms * 1e3f);
  }
  unsigned long long clocks[2];
  CUDA(cudaMemcpy(clocks, u.clocks, sizeof clocks, cudaMemcpyDeviceToHost));
  t.mhz = 1e3 * double(clocks[0]) / double(clocks[1]);
  CUDA(cudaEventDestroy(start));
  CUDA(cudaEventDestroy(stop));
  std::sort(us.begin(), us.end());
  t.us = us[us.size() / 2];
  return t;
}

// The largest grid (<= SMs, a multiple of the cluster) whose clusters are all resident at once.
int grid_for(const Setup& u, const Form& f) {
  if (f.cluster == 1) return u.blocks;
  CUDA(cudaFuncSetAttribute(chain, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemFloor));
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  cfg.gridDim = dim3(u.blocks / f.cluster * f.cluster), cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmemFloor;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = f.cluster, attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr, cfg.numAttrs = 1;
  int clusters = 0;
  CUDA(cudaOccupancyMaxActiveClusters(&clusters, chain, &cfg));
  return std::min(clusters, u.blocks / f.cluster) * f.cluster;
}

void row(const Setup& u, const Form& f, int blocks, int reps) {
  const Timing b12 = time_chain(u, f, blocks, 12, false, reps);
  const Timing b48 = time_chain(u, f, blocks, kStages, false, reps);
  const Timing a48 = time_chain(u, f, blocks, kStages, true, reps);
  std::printf(
      "%-44s %3d blocks | bare 12 %7.1f  48 %7.1f us  %5.2f us/stage  slope %5.2f  %4.0f MHz"
      " | bytes ahead 48 %7.1f us  %5.2f us/stage  %4.0f MHz\n",
      f.name, blocks, b12.us, b48.us, b48.us / kStages, (b48.us - b12.us) / 36, b48.mhz, a48.us,
      a48.us / kStages, a48.mhz);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 25;
  if (reps < 1 || reps > 1000) return std::fprintf(stderr, "stage_wait_bench: reps 1..1000\n"), 2;
  cudaDeviceProp prop{};
  CUDA(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  CUDA(cudaDriverGetVersion(&driver));
  Setup u;
  u.blocks = prop.multiProcessorCount;
  std::printf("%s, %d SMs, driver API %d; %d threads a block, one block an SM, median of %d\n",
              prop.name, u.blocks, driver, kThreads, reps);
  CUDA(cudaMalloc(&u.bytes, size_t(189.0e6) + (1 << 20)));
  CUDA(cudaMemset(u.bytes, 0x5a, size_t(189.0e6)));
  CUDA(cudaMalloc(&u.flush, size_t(u.flush16) * 16));
  CUDA(cudaMemset(u.flush, 0x3c, size_t(u.flush16) * 16));
  CUDA(cudaMalloc(&u.words, kWords * sizeof(unsigned)));
  CUDA(cudaMalloc(&u.sink, sizeof(int)));
  CUDA(cudaMalloc(&u.clocks, 2 * sizeof(unsigned long long)));
  CUDA(cudaMalloc(&u.out, (4096 + 2 * 4 * kThreads * u.blocks) * sizeof(float)));
  // The floor: one way of a ping-pong between two SMs, median of 9 runs of 2000 round trips.
  CUDA(cudaFuncSetAttribute(ping_pong, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemFloor));
  const char* pp[] = {"st.release / ld.acquire", "fence + st.relaxed / ld.relaxed + fence",
                      "red.release.add / ld.acquire"};
  for (int form = 0; form < 3; ++form) {
    std::vector<double> one_way;
    for (int r = 0; r < 9; ++r) {
      CUDA(cudaMemset(u.words, 0, kWords * sizeof(unsigned)));
      ping_pong<<<2, 32, kSmemFloor>>>(u.words, u.words + kLine, 2000, form, u.clocks);
      CUDA(cudaDeviceSynchronize());
      unsigned long long ns = 0;
      CUDA(cudaMemcpy(&ns, u.clocks, sizeof ns, cudaMemcpyDeviceToHost));
      one_way.push_back(ns / 4000.0 / 1e3);
    }
    std::sort(one_way.begin(), one_way.end());
    std::printf("ping-pong 2 SMs, %-40s one way %.3f us\n", pp[form], one_way[4]);
  }
  std::vector<Form> forms;
  auto add = [&](const char* name, auto change) {
    Form f;
    f.name = name;
    change(f);
    forms.push_back(f);
  };
  add("megakernel: red.release / ld.acquire", [](Form&) {});
  add("arrive fence.acq_rel + red.relaxed", [](Form& f) { f.arrive = kFenceRed; });
  add("arrive atom.release.add", [](Form& f) { f.arrive = kAtomRelease; });
  add("arrive __threadfence + atomicAdd", [](Form& f) { f.arrive = kThreadfence; });
  add("wait ld.relaxed + fence", [](Form& f) { f.wait = kRelaxed; });
  add("wait ld.volatile + fence", [](Form& f) { f.wait = kVolatile; });
  add("wait ld.acquire + nanosleep(500)", [](Form& f) { f.wait = kSleep; });
  add("counts a line apart", [](Form& f) { f.stride = kLine; });
  add("counts a line apart, relaxed wait", [](Form& f) { f.stride = kLine, f.wait = kRelaxed; });
  add("arrivals skewed 2 ns a block (0.26 us)", [](Form& f) { f.skew_ns = 2; });
  add("tree: groups of 12 (atom.acq_rel), root", [](Form& f) { f.arrive = kTree; });
  add("cluster 2, cluster barrier both ways",
      [](Form& f) { f.hier = kClusterBarrier, f.cluster = 2; });
  add("cluster 4, cluster barrier both ways",
      [](Form& f) { f.hier = kClusterBarrier, f.cluster = 4; });
  add("cluster 2, DSMEM count and flags", [](Form& f) { f.hier = kClusterSmem, f.cluster = 2; });
  add("cluster 4, DSMEM count and flags", [](Form& f) { f.hier = kClusterSmem, f.cluster = 4; });
  add("cluster 4, DSMEM, relaxed wait",
      [](Form& f) { f.hier = kClusterSmem, f.cluster = 4, f.wait = kRelaxed; });
  // Where the bytes' stage goes: who copies, how far ahead, and whether the release's fence waits.
  add("bytes alone, no waits (cp.async, 1 ahead)", [](Form& f) { f.waits = false; });
  add("bytes alone, no waits (cp.async, 2 ahead)", [](Form& f) { f.waits = false, f.ahead = 2; });
  add("bytes alone, no waits (TMA bulk, 1 ahead)", [](Form& f) { f.waits = false, f.bulk = true; });
  add("copies by warps 1-7 (warp 0 polls, releases)", [](Form& f) { f.first_copier = 32; });
  add("TMA bulk copies by thread 32", [](Form& f) { f.bulk = true; });
  add("2 ahead", [](Form& f) { f.ahead = 2; });
  add("2 ahead, copies by warps 1-7", [](Form& f) { f.ahead = 2, f.first_copier = 32; });
  add("2 ahead, TMA bulk", [](Form& f) { f.ahead = 2, f.bulk = true; });
  add("probe: red.relaxed, no fence (orders nothing)", [](Form& f) { f.arrive = kNoFence; });
  add("probe: no fence, copies by warps 1-7",
      [](Form& f) { f.arrive = kNoFence, f.first_copier = 32; });
  add("probe: no fence, TMA bulk", [](Form& f) { f.arrive = kNoFence, f.bulk = true; });
  add("outputs: 4 KB stored a block", [](Form& f) { f.outputs = 1; });
  add("outputs: 768 red.add a block, one vector", [](Form& f) { f.outputs = 2; });
  add("outputs: 768 red.add, TMA bulk", [](Form& f) { f.outputs = 2, f.bulk = true; });
  // The bytes asked into L2 ahead, each chunk copied into the SM after its stage's wait.
  add("L2 1 ahead, cp.async after the wait", [](Form& f) { f.l2_ahead = 1; });
  add("L2 2 ahead, cp.async after the wait", [](Form& f) { f.l2_ahead = 2; });
  add("L2 4 ahead, cp.async after the wait", [](Form& f) { f.l2_ahead = 4; });
  add("L2 2 ahead, TMA bulk after the wait", [](Form& f) { f.l2_ahead = 2, f.bulk = true; });
  add("L2 2 ahead, no waits (its roof)", [](Form& f) { f.l2_ahead = 2, f.waits = false; });
  // The L2 prefetch with the bytes into the SM one ahead as before (in flight while polling
  // and releasing, but from L2), and the next chunk asked only once the count is released (in
  // flight while polling, not while releasing).
  add("L2 2 ahead + cp.async 1 ahead", [](Form& f) { f.l2_ahead = 2, f.copy_at = kBeforeWait; });
  add("L2 2 ahead + TMA bulk 1 ahead",
      [](Form& f) { f.l2_ahead = 2, f.copy_at = kBeforeWait, f.bulk = true; });
  add("L2 2 ahead, cp.async after the release",
      [](Form& f) { f.l2_ahead = 2, f.copy_at = kAfterRelease; });
  add("L2 2 ahead, TMA bulk after the release",
      [](Form& f) { f.l2_ahead = 2, f.copy_at = kAfterRelease, f.bulk = true; });
  add("no L2 prefetch, cp.async after the release", [](Form& f) { f.copy_at = kAfterRelease; });
  add("L2 2 ahead, cp.async after the wait, warps 1-7",
      [](Form& f) { f.l2_ahead = 2, f.first_copier = 32; });
  add("megakernel form again (drift)", [](Form&) {});
  for (const Form& f : forms) {
    const int blocks = grid_for(u, f);
    row(u, f, blocks, reps);
    if (blocks != u.blocks && f.cluster > 1) {  // the flat form at the same grid, for comparison
      Form flat;
      flat.name = "  megakernel form at the same grid";
      row(u, flat, blocks, reps);
    }
  }
  CUDA(cudaFree(u.bytes));
  CUDA(cudaFree(u.flush));
  CUDA(cudaFree(u.words));
  CUDA(cudaFree(u.sink));
  CUDA(cudaFree(u.clocks));
  CUDA(cudaFree(u.out));
  return 0;
}
