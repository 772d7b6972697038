// The weight-streaming GEMM of the portable small-token rungs (sm_80+; sm_70 compiles it with
// plain copies): P = A B at a few tokens, where A (m x K, the activations, m <= 64 a chunk) is
// small and B (K x N, the weights) is what must move. What changes against the tile kernels of
// tensor_gemm.cuh: there a block owns an output tile and all of K, so at 16 tokens most SMs wait
// on one long column of B; here the whole product is cut into units of 32 columns x 32 rows of
// B (16 rows in fp32) and every block of the grid takes an equal, contiguous run of units
// ("stream-K"), so every SM pulls the same number of weight bytes, whatever N and K are.
//
// Data path of one block:
//
//   B (HBM) --cp.async 16 B--> a ring of kStages tiles in shared memory (a tile: 8 units, one
//            per warp: 256 x 32 bf16 = 16 KB), refilled as tiles are used: with 10 stages on a
//            Hopper every weight byte of a block is in flight at once at C = 768
//   A (L2)  --ld.global.cg 16 B--> registers, one unit ahead of the multiply (A is a few KB and
//            read by every block: it lives in L2; .cg because A may have been written by other
//            blocks earlier in the same launch: h of the FFN, the normalized rows)
//   bf16:    mma.sync m16n8k16, B by ldmatrix.trans; fp32: FMAs on the CUDA cores (no TF32)
//   a run's units of one column tile (a segment) sum in each warp's registers, then across the
//   8 warps in shared memory; a column tile cut between blocks is finished by the block that
//   arrives last (a counter per tile): it adds the others' partial sums (stored to L2) and runs
//   the epilogue. One pass over the weights, one small reduction through L2.
//
// The k order trick (bf16): a lane's A fragment of m16n8k16 holds k = 2t, 2t+1, 2t+8, 2t+9. The
// sum over k does not care which physical k a fragment slot stands for, as long as A and B
// agree; so lane t takes physical k = 8t .. 8t+7 of a 32-row unit (one 16-byte load per row for
// two k16 steps) and B's rows are stored in shared memory in the order ldmatrix must read them
// (permute_row): the loads of A are 16 bytes wide and B's ldmatrix stays conflict-free.
//
// Budget per unit (bf16): 2 KB of B from HBM, 64 rows x 64 B of A from L2 at 64 tokens, and
// 2 x 64 x 32 x 32 = 131 kFLOP; at 16 tokens the tensor cores idle and, by the napkin math,
// HBM sets the pace. As measured it does not yet: one 256-thread block per SM issues every copy
// and walks every tile itself, and at two warps per scheduler the instructions' latencies show
// (docs/PERFORMANCE.md, "Portable small-token rungs": the figures, the profile, what to try).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/gemm_core/stream_partition.h"
#include "kernels/gemm_core/stream_warp_math.cuh"
#include "kernels/tensor_gemm.cuh"

namespace fl::stream {

constexpr int kTileUnits = kWarps;
constexpr int kRedRows = 16;  // rows of the cross-warp reduction, one 16-row slab at a time

template <typename T>
constexpr int kTileElems = kTileUnits* kUnitK<T>* kLds<T>;
constexpr size_t kRedBytes = sizeof(float) * kWarps * kRedRows * kRedLd;

template <typename T>
constexpr size_t smem_bytes(int stages) {
  return size_t(stages) * kTileElems<T> * sizeof(T) + kRedBytes;
}

// ---- one product: its shape, its units and where its partial sums go ----------------------
// How the units are numbered and shared among the blocks: kernels/gemm_core/stream_partition.h.
template <typename T>
struct Product {
  AView<T> av;  // A: m x k
  const T* b;
  int64_t ldb;
  int m, n, k;
  int chunk_rows;      // kTM
  float* partial;      // (keys + G) slots of kTM x kUnitN fp32 (partial_floats)
  unsigned* counters;  // one per key, zero between launches (the last arrival resets it)
  bool b_vec;          // B's rows are 16-byte multiples and aligned (and so is n)
  Partition part;      // plan() fills it in

  // Fills in the partition for a grid of `blocks`.
  __host__ void plan(int blocks) {
    part = Partition::plan(m, n, k, chunk_rows, kUnitN, kUnitK<T>, blocks);
  }
};

// Partial-sum slots a product needs at `blocks` blocks (after plan()).
template <typename T>
inline int64_t partial_floats(const Product<T>& p, int64_t blocks) {
  return (int64_t(p.part.keys) + blocks) * p.chunk_rows * kUnitN;
}

// Issues the copies of a tile's B rows into a ring slot (every thread: 4 chunks of 16 bytes).
template <typename T>
__device__ __forceinline__ void copy_tile(T* slot, const Product<T>& p, const Tile& t) {
  constexpr int E = tc::kVec<T>, UK = kUnitK<T>, kChunksPerRow = kUnitN / E;
  const int64_t n0 = t.n0, k0 = int64_t(t.kb) * UK;
  const int rows = t.count * UK;
  for (int i = threadIdx.x; i < rows * kChunksPerRow; i += kThreads) {
    const int r = i / kChunksPerRow, c = (i % kChunksPerRow) * E;
    const int64_t gk = k0 + r, gn = n0 + c;
    T* dst = slot + ((r / UK) * UK + permute_row<T>(r % UK)) * kLds<T> + c;
    const T* src = p.b + gk * p.ldb + gn;
    if (p.b_vec) {
      const bool valid = gk < p.k && gn < p.n;  // n is a multiple of E here
      tc::copy16_async(dst, valid ? src : p.b, valid);
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        dst[e] = gk < p.k && gn + e < p.n ? src[e] : Elem<T>::from_float(0.0f);
      }
    }
  }
}

// ---- the ring --------------------------------------------------------------------------------
// One block's stream of B tiles over up to two products (the FFN's up and down projections),
// kStages slots, one commit group per tile. The producer runs kStages - 1 tiles ahead of the
// consumer, across the products: the second product's weights stream in while the first one
// still computes, and while the block waits at a grid barrier.
template <typename T, int kStages>
struct Ring {
  T* slots;
  TileWalk walk;
  bool two, second;
  int issued;

  __device__ __forceinline__ void start(T* smem, const Product<T>& p0, const Product<T>& p1,
                                        bool two_products) {
    slots = smem;
    two = two_products;
    second = false;
    walk.begin(p0.part, blockIdx.x);
    issued = 0;
#pragma unroll 1
    for (int i = 0; i < kStages - 1; ++i) issue(p0, p1);
  }
  __device__ __forceinline__ T* slot(int i) const {
    return slots + (i % kStages) * kTileElems<T>;
  }
  // The next tile's copies (or an empty group, so that every thread's group count stays even).
  __device__ __forceinline__ void issue(const Product<T>& p0, const Product<T>& p1) {
    Tile t;
    if (!second) {
      t = walk.next(p0.part, kUnitN, kTileUnits);
      if (t.valid()) {
        copy_tile<T>(slot(issued), p0, t);
      } else if (two) {
        second = true;
        walk.begin(p1.part, blockIdx.x);
      }
    }
    if (second) {
      t = walk.next(p1.part, kUnitN, kTileUnits);
      if (t.valid()) copy_tile<T>(slot(issued), p1, t);
    }
    tc::async_commit();
    ++issued;
  }
};

// ---- the end of a segment ------------------------------------------------------------------
// The block's sums of one key (kTM x 32) meet across its warps in shared memory, 16 rows at a
// time. A key cut between blocks: each block stores its sums to its own slot (key + block: two
// blocks that share a key never share a slot), and the block whose counter increment comes last
// adds them all, in block order (the same result every run), and runs the epilogue.
template <typename T, int kTM, class Epilogue>
__device__ __forceinline__ void finish_segment(const typename WarpMath<T, kTM>::Acc& acc,
                                               const Product<T>& p, const Tile& t, float* red,
                                               unsigned* s_last, const Epilogue& epi) {
  using M = WarpMath<T, kTM>;
  constexpr int kSlot = kTM * kUnitN;
  const int warp = threadIdx.x >> 5;
  const int m0 = t.row0, n0 = t.n0;
  const int kbs = p.part.kblocks;
  const int first = p.part.block_of(t.key * kbs), last = p.part.block_of((t.key + 1) * kbs - 1);
  const bool alone = first == last;
  float* slot = p.partial + (int64_t(t.key) + blockIdx.x) * kSlot;
#pragma unroll 1
  for (int slab = 0; slab < kTM / kRedRows; ++slab) {
    __syncthreads();  // the area is free
    M::dump(acc, slab, red + warp * kRedRows * kRedLd);
    __syncthreads();
    for (int e = threadIdx.x; e < kRedRows * kUnitN; e += kThreads) {
      const int r = e / kUnitN, c = e % kUnitN, row = slab * kRedRows + r;
      float s = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) s += red[(w * kRedRows + r) * kRedLd + c];
      if (!alone) {
        slot[row * kUnitN + c] = s;
      } else if (m0 + row < p.m && n0 + c < p.n) {
        epi(m0 + row, n0 + c, s);
      }
    }
  }
  if (alone) return;
  __threadfence();  // this block's partial sums before its arrival
  __syncthreads();
  if (threadIdx.x == 0) {
    *s_last = atomicAdd(p.counters + t.key, 1u) == unsigned(last - first);
    if (*s_last) p.counters[t.key] = 0;  // every other block of the key has arrived
  }
  __syncthreads();
  if (!*s_last) return;
  __threadfence();
  for (int e = threadIdx.x; e < kSlot; e += kThreads) {
    const int row = e / kUnitN, c = e % kUnitN;
    if (m0 + row >= p.m || n0 + c >= p.n) continue;
    const float* q = p.partial + (int64_t(t.key) + first) * kSlot + e;
    float s = 0.0f;
#pragma unroll 4
    for (int b = 0; b <= last - first; ++b) s += load_cg(q + int64_t(b) * kSlot);
    epi(m0 + row, n0 + c, s);
  }
}

// ---- a product's consumer loop -------------------------------------------------------------
// Multiplies this block's units of `p` (tiles `first_tile` on in the ring's order) and calls
// epi(row, col, sum) once for every element of every column tile this block finishes. Returns
// the ring position after the product.
// issue() refills the ring (Ring::issue with the kernel's products).
template <typename T, int kTM, int kStages, class Issue, class Epilogue>
__device__ __forceinline__ int run_product(Ring<T, kStages>& ring, const Issue& issue,
                                           int first_tile, const Product<T>& p, float* red_area,
                                           const Epilogue& epi) {
  using M = WarpMath<T, kTM>;
  const int warp = threadIdx.x >> 5;
  __shared__ unsigned s_last;
  TileWalk walk;
  walk.begin(p.part, blockIdx.x);
  typename M::Acc acc;
  M::zero(acc);
  typename M::AFrag a_now, a_next;
  Tile t = walk.next(p.part, kUnitN, kTileUnits);
  auto load_a = [&](typename M::AFrag& f, const Tile& tile) {
    if (!tile.valid() || warp >= tile.count) return;
    M::load(f, p.av, tile.row0, int64_t(tile.kb + warp) * kUnitK<T>);
  };
  load_a(a_now, t);
  int i = first_tile;
  while (t.valid()) {
    const Tile next = walk.next(p.part, kUnitN, kTileUnits);
    tc::async_wait<kStages - 2>();  // this thread's copies of tile i have landed
    __syncthreads();                // everyone's have; everyone is done with tile i - 1
    issue();                        // into the slot tile i - 1 used
    load_a(a_next, next);
    if (warp < t.count) M::multiply(acc, a_now, ring.slot(i) + warp * kUnitK<T> * kLds<T>);
    if (t.ends_segment) {
      finish_segment<T, kTM>(acc, p, t, red_area, &s_last, epi);
      M::zero(acc);
    }
    a_now = a_next;
    t = next;
    ++i;
  }
  return i;
}

}  // namespace fl::stream

namespace fl::stream {

// ---- the host side ---------------------------------------------------------------------------
// A weight-streaming kernel runs one block per SM (the grid barrier needs every block resident;
// more blocks would only split the same bytes finer) with the deepest ring that fits the GPU's
// shared memory: 10 stages on a Hopper, 7 on an A100, 4 on the 100 KB parts (RTX 30/40).
inline Status stream_blocks(int* blocks) {
  int device = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(blocks, cudaDevAttrMultiProcessorCount, device));
  return Status::Ok();
}

// Calls f(std::integral_constant<int, S>{}) with the deepest ring that fits.
template <typename T, class F>
Status with_stages(F&& f) {
  int device = 0, optin = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (smem_bytes<T>(10) <= size_t(optin)) return f(std::integral_constant<int, 10>{});
  if (smem_bytes<T>(7) <= size_t(optin)) return f(std::integral_constant<int, 7>{});
  if (smem_bytes<T>(4) <= size_t(optin)) return f(std::integral_constant<int, 4>{});
  return Status::Error("the weight-streaming kernels need " + std::to_string(smem_bytes<T>(4)) +
                       " bytes of shared memory per block; this GPU offers " +
                       std::to_string(optin));
}

// Launches kernel(args) cooperatively, one block per SM, kThreads threads, `smem` bytes. The
// shared-memory limit is set on every launch (a device reset forgets it); whether a block fits
// is asked on the first launch only (the occupancy query costs microseconds of host time).
template <class Args>
Status launch_cooperative(void (*kernel)(Args), const Args& args, size_t smem, int blocks,
                          cudaStream_t stream) {
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(smem)));
  static const Status configured = [&]() -> Status {
    int per_sm = 0;
    FL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
    if (per_sm < 1) return Status::Error("a weight-streaming block does not fit on an SM");
    return Status::Ok();
  }();
  FL_TRY(configured);
  Args copy = args;
  void* params[] = {&copy};
  FL_CUDA_TRY(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), dim3(blocks),
                                          dim3(kThreads), params, smem, stream));
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// Carves a scratch buffer: counters first (zero between launches), then fp32 partial sums, then
// what the kernel keeps in L2 (h, the normalized rows). Offsets are 256-byte aligned.
struct ScratchLayout {
  size_t counters = 0, partial = 0, rows = 0, bytes = 0;
  static size_t align(size_t v) { return (v + 255) / 256 * 256; }
  ScratchLayout(int64_t counters_n, int64_t partial_floats, size_t rows_bytes) {
    partial = align(sizeof(unsigned) * counters_n);
    rows = partial + align(sizeof(float) * partial_floats);
    bytes = rows + align(rows_bytes);
  }
};

}  // namespace fl::stream
