// stage_wait_bench's device operations (tests/gpu/stage_wait_bench.cu): the PTX forms of the
// loads, stores, reductions and fences a stage's arrival and wait are made of (gpu and cluster
// scope), a spin with a time limit, and the copies of the bytes (16-byte cp.async, one TMA bulk
// copy counted on an mbarrier). sm_90.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace stage_wait {

static __device__ unsigned g_timeout;  // a wait gave up (blocks not co-resident): every wait then ends

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned ld_relaxed(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned ld_volatile(const unsigned* p) {
  unsigned v;
  asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void fence_acq_rel() {
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
}
__device__ __forceinline__ void red_release(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void red_relaxed(unsigned* p, unsigned v) {
  asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned atom_add(unsigned* p, unsigned v, bool acq_rel) {
  unsigned old;
  if (acq_rel)
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;"
                 : "=r"(old)
                 : "l"(p), "r"(v)
                 : "memory");
  else
    asm volatile("atom.release.gpu.global.add.u32 %0, [%1], %2;"
                 : "=r"(old)
                 : "l"(p), "r"(v)
                 : "memory");
  return old;
}
__device__ __forceinline__ void st_release_cluster(unsigned* p, unsigned v) {  // generic: DSMEM
  asm volatile("st.release.cluster.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void red_release_cluster(unsigned* p, unsigned v) {
  asm volatile("red.release.cluster.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned ld_acquire_cluster(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.cluster.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Spins until ready(); gives up after 200 ms (then every later wait at once).
template <class Ready>
__device__ __forceinline__ void spin(Ready ready, bool sleep = false) {
  unsigned n = 0;
  uint64_t t0 = 0;
  while (!ready()) {
    if (sleep) __nanosleep(500);
    if ((++n & 255) != 0) continue;
    if (*reinterpret_cast<volatile unsigned*>(&g_timeout) != 0) return;
    const uint64_t t = now_ns();
    if (t0 == 0) t0 = t;
    if (t - t0 > 200000000ull) {
      atomicExch(&g_timeout, 1u);
      return;
    }
  }
}

__device__ __forceinline__ void copy16(void* smem, const int4* g) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(g) : "memory");
}

__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(a) : "memory");
}
// One TMA bulk copy of `bytes` (a multiple of 16) into shared memory, counted on `bar`.
__device__ __forceinline__ void bulk_copy(void* smem, const void* g, unsigned bytes,
                                          uint64_t* bar) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(a),
      "l"(g), "r"(bytes), "r"(b)
      : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile(
      "{\n.reg .pred done;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n@!done bra WAIT_%=;\n}\n" ::"r"(b),
      "r"(parity)
      : "memory");
}

}  // namespace stage_wait
