// Thread block clusters (sm_90): the special registers, the cluster barrier and stores into
// another block's shared memory (distributed shared memory, DSMEM), shared by the cluster
// kernels of lessons 6 (layernorm_linear) and 8 (ffn). A cluster is up to 8 blocks (portable
// size) that run at once on one GPC; each can write the others' shared memory, and a cluster
// barrier makes those writes visible. Everything here compiles to nothing below sm_90, where the
// launchers never pick a cluster kernel.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/status.h"

namespace fl::cluster {

// Cluster special registers, barriers and DSMEM stores (PTX: sm_90).
__device__ __forceinline__ unsigned rank() {
  unsigned r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
#endif
  return r;
}
__device__ __forceinline__ unsigned index() {
  unsigned q = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(q));
#endif
  return q;
}
// Every thread of every block of the cluster arrives; shared-memory writes before it (local or
// into other blocks) are visible to the whole cluster after it.
__device__ __forceinline__ void sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
#endif
}
// A block may touch another's shared memory only once that block is running: each block arrives
// here as it starts and waits just before its first store into another block (the wait is then
// usually already satisfied).
__device__ __forceinline__ void arrive_started() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_started() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
#endif
}
// The address of `local`'s counterpart in block `rank`'s shared memory.
__device__ __forceinline__ unsigned peer_address(void* local, unsigned rank) {
  unsigned remote = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(local));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
#endif
  return remote;
}
// Stores 8 or 16 bytes (`local` aligned to them) at `local`'s address in block `rank`'s shared
// memory. A cluster's exchanges are limited by the number of stores more than by their bytes:
// 16 bytes at a time where the data allows.
__device__ __forceinline__ void store_peer(void* local, unsigned rank, uint2 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("st.shared::cluster.v2.u32 [%0], {%1, %2};" ::"r"(peer_address(local, rank)),
               "r"(v.x), "r"(v.y)
               : "memory");
#endif
}
__device__ __forceinline__ void store_peer(void* local, unsigned rank, uint4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(peer_address(local, rank)),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
#endif
}

// Stores 16 bytes at `local`'s address in block `rank`'s shared memory and counts them on the
// mbarrier at `local_bar`'s address there (st.async: the receiver waits on its mbarrier for the
// bytes it expects, no cluster barrier). The receiver initialises the barrier, fences
// (fence.mbarrier_init.release.cluster) and then arrives (arrive_started); the sender stores
// after wait_started.
__device__ __forceinline__ void store_async_peer(void* local, unsigned rank, uint4 v,
                                                 uint64_t* local_bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, "
      "[%5];" ::"r"(peer_address(local, rank)),
      "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(peer_address(local_bar, rank))
      : "memory");
#endif
}

// How many clusters of `config` can be resident at once (asked once per kernel and shared
// memory size: the answer does not change while the program runs). Leaves the kernel's shared
// memory limit at config's size on every call, cached or not, so that a launch of `config` may
// follow (the limit is per kernel: an earlier call for another size may have lowered it).
inline Status max_active_clusters(const void* kernel, const cudaLaunchConfig_t& config, int* fit) {
  static std::mutex lock;
  static std::map<std::tuple<const void*, size_t, unsigned>, int> known;
  const std::lock_guard<std::mutex> hold(lock);
  const auto key =
      std::make_tuple(kernel, config.dynamicSmemBytes, config.attrs[0].val.clusterDim.x);
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(config.dynamicSmemBytes)));
  auto found = known.find(key);
  if (found == known.end()) {
    int n = 0;
    FL_CUDA_TRY(cudaOccupancyMaxActiveClusters(&n, kernel, &config));
    found = known.emplace(key, n).first;
  }
  *fit = found->second;
  return Status::Ok();
}

// A launch of `clusters` clusters of `size` blocks in a 1-D grid, `threads` threads and `shared`
// bytes of dynamic shared memory a block: the configuration and the cluster attribute it points
// to (so not copyable).
struct Launch {
  cudaLaunchAttribute attr{};
  cudaLaunchConfig_t config{};
  Launch(int clusters, int size, int threads, size_t shared, cudaStream_t stream = nullptr) {
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = static_cast<unsigned>(size);
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    config.gridDim = dim3(static_cast<unsigned>(clusters * size));
    config.blockDim = dim3(static_cast<unsigned>(threads));
    config.dynamicSmemBytes = shared;
    config.stream = stream;
    config.attrs = &attr;
    config.numAttrs = 1;
  }
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;
};

// Whether all of the launch's clusters can be resident at once: the cluster kernels' blocks
// wait on each other, so every cluster must run from the start.
inline Status all_resident(const void* kernel, const Launch& launch, bool* fit) {
  int most = 0;
  FL_TRY(max_active_clusters(kernel, launch.config, &most));
  *fit = launch.config.gridDim.x / launch.attr.val.clusterDim.x <= unsigned(most);
  return Status::Ok();
}

}  // namespace fl::cluster
