// LayerNorm-Linear's level 2 at many tokens on Hopper (sm_90a, bf16): y = LN(x) W + b in one
// kernel on wgmma, the LayerNorm in the GEMM's prologue and the bias in its epilogue.
//
// What changes against the cluster and tile kernels (ln_cluster.cu, ln_tile.cu): beyond ~100
// tokens the GEMM is arithmetic, not a weight stream, and mma.sync from shared memory through
// registers cannot feed Hopper's tensor cores. Here a block normalizes a 64-row panel of x once,
// in shared memory, in the layout wgmma reads, and W streams past it by TMA through the ring of
// kernels/wgmma_gemm.cuh (the FFN's wgmma kernel uses the same ring and epilogue).
//
// Tiles and data path (C = 768: K = 768, N = 3C = 2304; kernels/hopper.cuh has the primitives):
//
//   x (HBM) --TMA--> panel: the block's 64 rows x K, swizzled, in shared memory
//                    (the 8 consumer warps normalize it in place, once)
//   W (L2)  --TMA--> ring: 4 slots of 64 x 256 (32 KB)  --wgmma m64n128k16--> fp32 registers
//                    or 8 slots of 64 x 128 (16 KB)     --wgmma m64n64k16--> --(+ b, bf16)--> y
//
//   * A block owns 64 rows of x (tokens) and a run of y's tiles for those rows: 256 columns wide
//     from 4K tokens on, 128 below (twice the blocks, so that more SMs stream W at a few hundred
//     tokens). Runs are as long as it takes for nearly every SM to have one block (1K tokens,
//     128-column tiles: 16 row blocks x 6 runs of 3).
//   * 1. The panel, 64 x K (96 KB in bf16 at K = 768), lands by TMA in the 128-byte swizzled
//     K-major layout wgmma reads. Each consumer warp takes 8 rows' mean and 1/std there and
//     rewrites them normalized, (x - mean) * rstd * gamma + beta, rounded to bf16 as level 0's
//     xn is. xn never exists outside shared memory, and x is read from HBM once.
//   * 2. W streams past the panel: one producer thread copies W's 64 x 64 boxes, a tile's width
//     of them to a slot (4 or 2), into the ring (4 or 8 slots, 128 KB either way); each of the
//     two consumer warpgroups multiplies the whole panel by its half of the slot's columns (four
//     wgmma of K = 16) and frees the slot once those multiplies have completed.
//   * 3. Epilogue: y = acc + b, one rounding to bf16, stored from the accumulators 16 bytes of a
//     row at a time (each quad of lanes regroups its columns); meanwhile the producer is already
//     filling the ring with the next tile's W.
//
// Budget at 16K tokens: 2 M N K = 58 GFLOP (88 us at the ~660 TFLOP/s of a good H100 GEMM);
// HBM: x 25 MB + W 3.5 MB + y 75 MB = 104 MB (34 us at 3 TB/s); L2 -> SM: each block streams
// all of W, 256 x 3.5 MB = 906 MB. A block does 64 FLOP per byte of W it receives (a 2-byte
// element meets 64 rows), so the tensor cores' rate needs ~120 GB/s of W into every SM, against
// an L2 that delivers ~40 (docs/PERFORMANCE.md, lesson 6, has what was measured and tried). Step
// 1 is bound by instruction issue: 64 x 768 elements at ~6 instructions each on 8 warps.
// Shared memory: panel 96 KB + ring 128 KB, one block per SM. Shapes: C a multiple of 8 (16-byte
// rows for TMA) up to 768 (the panel's shared memory); other shapes, and GPUs or builds without
// sm_90a, take the other kernels.
#include "kernels/layernorm_linear/ln_wgmma.h"

#include <algorithm>
#include <cstdlib>

#include "kernels/cuda_check.h"
#include "kernels/gemm_common.cuh"
#include "kernels/hopper.cuh"
#include "kernels/phases.cuh"
#include "kernels/wgmma_gemm.cuh"

namespace fl {
namespace {

using bf16 = __nv_bfloat16;
namespace wg = wgmma_gemm;

constexpr int kRows = 64;      // x rows (tokens) per block: the panel's rows
constexpr int kBoxN = 64;      // a W box is 64 columns (128 bytes: the swizzle's row) ...
constexpr int kStageK = 64;    // ... by 64 rows of K; a ring slot holds a tile's boxes
constexpr int kPanelK = 64;    // the panel is stored in K-blocks of 64 (128-byte rows)
constexpr int kMaxK = 768;     // the panel's longest rows: 64 x 768 bf16 = 96 KB
constexpr int kThreads = 288;  // warps 0-7: two consumer warpgroups; warp 8: the producer
constexpr int kConsumerWarps = 8;
constexpr int kPanelBlockBytes = kRows * kPanelK * 2;  // 8 KB
constexpr int kBoxBytes = kStageK * kBoxN * 2;         // 8 KB
constexpr int kRingBytes = 128 * 1024;
constexpr int kMaxStages = 8;
// The phases each block records (ln_gemm_wgmma_phases() names them, in this order).
enum Phase : unsigned { kSetup, kPanelIn, kNormalize, kTiles, kLastStores };

// A tile's width: 256 columns (4 boxes a slot, 4 slots of 32 KB: 3 in flight while one is
// multiplied), or, where 256-column tiles leave SMs idle (a few hundred tokens), 128 (2 boxes,
// 8 slots of 16 KB). Consumer warpgroup g takes columns [g kTileN / 2, (g + 1) kTileN / 2).
template <int kTileN_>
struct Tiles {
  static constexpr int kTileN = kTileN_;
  static constexpr int kBoxes = kTileN / kBoxN;
  static constexpr int kSlotBytes = kBoxes * kBoxBytes;
  static constexpr int kStages = kRingBytes / kSlotBytes;
  static constexpr int kWarpgroupN = kTileN / 2;
  static constexpr int kAcc = kWarpgroupN / 2;  // fp32 accumulators a thread
};

struct WgmmaArgs {
  const bf16 *gamma, *beta, *bias;
  bf16* y;
  int64_t m;
  int k, n;
  int tiles_per_block;  // a block's run of tiles
  PhaseSink phases;     // ln_gemm_wgmma_phases(), stamps on when set
};

size_t shared_bytes(int k) {
  // panel, ring, 2 x kMaxStages + 1 barriers, and 1 KB to align the start to the swizzle's 1024 B.
  return size_t((k + kPanelK - 1) / kPanelK) * kPanelBlockBytes + kRingBytes +
         (2 * kMaxStages + 1) * sizeof(uint64_t) + 1024;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ void unpack8(uint4 u, float (&f)[8]) {
  const bf16* h = reinterpret_cast<const bf16*>(&u);
#pragma unroll
  for (int e = 0; e < 8; ++e) f[e] = __bfloat162float(h[e]);
}

constexpr int kChunksPerLane = kMaxK / 8 / 32;  // a row's 16-byte chunks a lane holds

// gamma and beta in a lane's registers: chunks lane, lane + 32 and lane + 64 (elements 8 j ..
// 8 j + 7 of chunk j; K <= 768 is at most 96 chunks), the same for every row it normalizes.
// Loaded at the block's start, so that their latency hides behind the panel's.
struct Affine {
  uint4 gamma[kChunksPerLane], beta[kChunksPerLane];
};

__device__ __forceinline__ Affine load_affine(const WgmmaArgs& a, int lane) {
  Affine f;
#pragma unroll
  for (int i = 0; i < kChunksPerLane; ++i) {
    const int j = lane + 32 * i;
    if (j < a.k / 8) {
      f.gamma[i] = reinterpret_cast<const uint4*>(a.gamma)[j];
      f.beta[i] = reinterpret_cast<const uint4*>(a.beta)[j];
    }
  }
  return f;
}

// Step 1: the warp's rows of the panel, normalized in place. Chunk j of row r (elements
// 8 j .. 8 j + 7) is in K-block j / 8, at chunk (j % 8) ^ (r % 8) of the row's 128 bytes there,
// swizzled as TMA wrote it. A lane holds chunks lane, lane + 32 and lane + 64 of a row. Two
// passes over the row in registers (sum, then squared deviations from the mean): nothing cancels.
// The step is bound by instruction issue (64 rows x 768 elements on 8 warps), so an element
// costs 6 instructions: its unpacking, a sum, its
// deviation d (kept), d^2, d * rstd * gamma + beta as a multiply and an FMA, half a pack; gamma and
// beta are unpacked once for all rows. Two rows at a time overlap their reductions' shuffles.
__device__ void normalize_panel(unsigned char* panel, const WgmmaArgs& a, const Affine& f,
                                int64_t row0, int warp, int lane) {
  constexpr int kRowsPerWarp = kRows / kConsumerWarps, kBatch = 2;
  auto offset = [](int r, int j) {
    return (j / 8) * kPanelBlockBytes + r * 128 + (((j % 8) ^ (r % 8)) << 4);
  };
  const int chunks = a.k / 8;
  const float inv_k = 1.0f / a.k;
  float gamma[kChunksPerLane][8], beta[kChunksPerLane][8];
#pragma unroll
  for (int i = 0; i < kChunksPerLane; ++i) {
    unpack8(f.gamma[i], gamma[i]);
    unpack8(f.beta[i], beta[i]);
  }
  for (int r0 = kRowsPerWarp * warp; r0 < kRowsPerWarp * (warp + 1); r0 += kBatch) {
    float v[kBatch][kChunksPerLane][8];
    float mean[kBatch], rstd[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      float sum = 0;
#pragma unroll
      for (int i = 0; i < kChunksPerLane; ++i) {
        const int j = lane + 32 * i;
        if (j < chunks) {
          unpack8(*reinterpret_cast<const uint4*>(panel + offset(r0 + b, j)), v[b][i]);
#pragma unroll
          for (int e = 0; e < 8; ++e) sum += v[b][i][e];
        }
      }
      mean[b] = warp_sum(sum) * inv_k;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      float squares = 0;
#pragma unroll
      for (int i = 0; i < kChunksPerLane; ++i) {
        if (lane + 32 * i < chunks) {
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            v[b][i][e] -= mean[b];
            squares += v[b][i][e] * v[b][i][e];
          }
        }
      }
      rstd[b] = rsqrtf(warp_sum(squares) * inv_k + static_cast<float>(gemm::kLayerNormEps));
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (row0 + r0 + b >= a.m) break;  // rows past the last token stay TMA's zeros
#pragma unroll
      for (int i = 0; i < kChunksPerLane; ++i) {
        const int j = lane + 32 * i;
        if (j < chunks) {
          uint32_t out[4];
#pragma unroll
          for (int e = 0; e < 8; e += 2) {
            const __nv_bfloat162 h =
                __floats2bfloat162_rn(v[b][i][e] * rstd[b] * gamma[i][e] + beta[i][e],
                                      v[b][i][e + 1] * rstd[b] * gamma[i][e + 1] + beta[i][e + 1]);
            out[e / 2] = *reinterpret_cast<const uint32_t*>(&h);
          }
          *reinterpret_cast<uint4*>(panel + offset(r0 + b, j)) =
              make_uint4(out[0], out[1], out[2], out[3]);
        }
      }
    }
  }
}

// The producer thread: the panel's K-blocks of x onto panel_full, then W's boxes through the
// ring, a tile's width of them to a slot, for each of the block's tiles.
template <class T, class Ring>
__device__ void produce(const Ring& ring, unsigned char* panel, uint64_t* panel_full,
                        const CUtensorMap* x_map, const CUtensorMap* w_map, int64_t row0,
                        int tile_begin, int tile_end, const WgmmaArgs& a) {
  const int k_blocks = (a.k + kPanelK - 1) / kPanelK, k_steps = (a.k + kStageK - 1) / kStageK;
  hopper::arrive_expect_bytes(panel_full, k_blocks * kPanelBlockBytes);
  for (int kb = 0; kb < k_blocks; ++kb) {
    hopper::copy_box(panel + kb * kPanelBlockBytes, x_map, kb * kPanelK, static_cast<int>(row0),
                     panel_full);
  }
  wg::RingCursor<Ring::kStages> at;
  for (int tile = tile_begin; tile < tile_end; ++tile) {
    for (int ks = 0; ks < k_steps; ++ks) {
      unsigned char* slot = wg::fill_slot(ring, at, Ring::kSlotBytes);
      for (int box = 0; box < T::kBoxes; ++box) {
        hopper::copy_box(slot + box * kBoxBytes, w_map, tile * T::kTileN + box * kBoxN,
                         ks * kStageK, &ring.full[at.slot]);
      }
      at.advance();
    }
  }
}

// Step 2 for one tile: consumer warpgroup `group` multiplies the whole normalized panel by its
// half of the tile's columns (T::kWarpgroupN), slot by slot as W's boxes land.
template <class T, class Ring>
__device__ __forceinline__ void multiply_tile(const Ring& ring, wg::RingCursor<Ring::kStages>& at,
                                              const unsigned char* panel, int k_steps, int group,
                                              float (&acc)[T::kAcc]) {
#pragma unroll
  for (int i = 0; i < T::kAcc; ++i) acc[i] = 0.0f;
  wg::consume_slots(ring, at, k_steps, [&](const unsigned char* slot, int ks) {
#pragma unroll
    for (int kk = 0; kk < kStageK / 16; ++kk) {
      const int k = ks * kStageK + kk * 16;
      // A: K-major, 8-row groups 1024 B apart; a K step of 16 moves 32 B along the row.
      const uint64_t desc_a = hopper::descriptor(
          panel + (k / kPanelK) * kPanelBlockBytes + (k % kPanelK) * 2, 16, 1024);
      // B: N-major (W's rows): 8-row groups 1024 B apart, 64-column groups one box apart.
      const uint64_t desc_b = hopper::descriptor(
          slot + T::kBoxes / 2 * group * kBoxBytes + kk * 16 * 128, kBoxBytes, 1024);
      if constexpr (T::kTileN == 256) {
        hopper::wgmma_m64n128k16(acc, desc_a, desc_b, 1);
      } else {
        hopper::wgmma_m64n64k16(acc, desc_a, desc_b, 1);
      }
    }
  });
}

template <int kTileN>
__global__ void __launch_bounds__(kThreads, 1)
    ln_gemm_wgmma_kernel(const __grid_constant__ CUtensorMap x_map,
                         const __grid_constant__ CUtensorMap w_map, WgmmaArgs a) {
#ifdef FL_SM90A_DEVICE
  using T = Tiles<kTileN>;
  using Ring = wg::SlotRing<T::kStages, T::kSlotBytes>;
  extern __shared__ unsigned char shared_raw[];
  // The swizzle's pattern repeats every 1024 bytes: every TMA destination starts on one.
  unsigned char* panel = hopper::align_1024(shared_raw);
  unsigned char* slots = panel + (a.k + kPanelK - 1) / kPanelK * kPanelBlockBytes;
  uint64_t* barriers = reinterpret_cast<uint64_t*>(slots + kRingBytes);
  const Ring ring = wg::place_ring<Ring>(slots, barriers, kConsumerWarps);
  uint64_t* panel_full = barriers + 2 * T::kStages;  // x has landed

  const int64_t row0 = int64_t(blockIdx.y) * kRows;
  const int n_tiles = (a.n + kTileN - 1) / kTileN;
  const int tile_begin = blockIdx.x * a.tiles_per_block;
  const int tile_end = min(n_tiles, tile_begin + a.tiles_per_block);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  PhaseMarks<kLastStores + 1> marks(a.phases);  // thread 0: a consumer

  if (threadIdx.x == 0) {
    hopper::barrier_init(panel_full, 1);
    hopper::barrier_init_fence();
  }
  Affine affine;  // the consumers' gamma and beta, asked for before any TMA copy
  if (warp < kConsumerWarps) affine = load_affine(a, lane);
  __syncthreads();

  if (warp == kConsumerWarps) {  // the producer: one thread issues every copy
    if (lane == 0)
      produce<T>(ring, panel, panel_full, &x_map, &w_map, row0, tile_begin, tile_end, a);
    return;
  }

  // The consumers: step 1, then steps 2 and 3 for each tile.
  const int group = warp / 4;  // the consumer warpgroup: its half of each tile's columns
  marks.mark(kSetup);
  hopper::wait(panel_full, 0);
  marks.mark(kPanelIn);
  normalize_panel(panel, a, affine, row0, warp, lane);
  hopper::fence_async_shared();                  // the normalized panel is read by wgmma next
  hopper::sync_threads(1, 32 * kConsumerWarps);  // both warpgroups read every row
  marks.mark(kNormalize);

  const int k_steps = (a.k + kStageK - 1) / kStageK;
  wg::RingCursor<Ring::kStages> at;
  for (int tile = tile_begin; tile < tile_end; ++tile) {
    const int col0 = tile * kTileN + T::kWarpgroupN * group;
    __nv_bfloat162 bias[T::kAcc / 4];  // loaded ahead of the multiplies (wgmma_gemm.cuh)
    wg::load_bias(a.bias, a.n, col0, bias);
    float acc[T::kAcc];
    multiply_tile<T>(ring, at, panel, k_steps, group, acc);
    if (tile == tile_end - 1) marks.mark(kTiles);
    // Step 3: y = acc + b, one rounding to bf16, 16-byte stores.
    wg::store_tile(acc, bias, a.y + row0 * a.n + col0, a.n, a.m - row0, a.n - col0,
                   [](float v) { return v; });
  }
  marks.mark(kLastStores);
#endif
}

template <int kTileN>
Status launch(const __nv_bfloat16* x, const WgmmaArgs& args0, const __nv_bfloat16* w, int sms,
              int optin, cudaStream_t stream, bool* launched) {
  const size_t bytes = shared_bytes(args0.k);
  if (bytes > size_t(optin)) return Status::Ok();
  // Row blocks down the tokens; each row block's tiles split into runs so that the
  // grid fills the SMs about once (a second block per SM cannot fit: panel and ring take its
  // shared memory).
  const int64_t row_blocks = (args0.m + kRows - 1) / kRows;
  const int n_tiles = (args0.n + kTileN - 1) / kTileN;
  if (row_blocks > 65535) return Status::Ok();
  const int runs_wanted = static_cast<int>(std::max<int64_t>(1, sms / row_blocks));
  WgmmaArgs args = args0;
  args.tiles_per_block = (n_tiles + runs_wanted - 1) / runs_wanted;
  const int runs = (n_tiles + args.tiles_per_block - 1) / args.tiles_per_block;

  CUtensorMap x_map, w_map;
  FL_TRY(hopper::make_tensor_map_2d(&x_map, x, args.m, args.k, kRows, kPanelK));
  FL_TRY(hopper::make_tensor_map_2d(&w_map, w, args.k, args.n, kStageK, kBoxN));
  auto kernel = ln_gemm_wgmma_kernel<kTileN>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(bytes)));
  const dim3 grid(static_cast<unsigned>(runs), static_cast<unsigned>(row_blocks));
  kernel<<<grid, kThreads, bytes, stream>>>(x_map, w_map, args);
  FL_CUDA_TRY(cudaGetLastError());
  *launched = true;
  return Status::Ok();
}

}  // namespace

bool ln_gemm_wgmma_built() {
#ifdef FUSIONLAB_WGMMA
  return true;
#else
  return false;
#endif
}

Status try_ln_gemm_wgmma(const __nv_bfloat16* x, const __nv_bfloat16* gamma,
                         const __nv_bfloat16* beta, const __nv_bfloat16* w,
                         const __nv_bfloat16* bias, __nv_bfloat16* y, int64_t m, int k, int n,
                         int sms, cudaStream_t stream, bool* launched, PhaseSink phases) {
  *launched = false;
  if (!ln_gemm_wgmma_built() || m < 1 || k % 8 != 0 || k > kMaxK || n % 8 != 0) {
    return Status::Ok();
  }
  for (const void* p : {static_cast<const void*>(x), static_cast<const void*>(gamma),
                        static_cast<const void*>(beta), static_cast<const void*>(w)}) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return Status::Ok();
  }
  if (reinterpret_cast<uintptr_t>(bias) % 4 != 0 || reinterpret_cast<uintptr_t>(y) % 16 != 0) {
    return Status::Ok();
  }
  bool sm90 = false;
  int optin = 0;
  FL_TRY(hopper::current_device(&sm90, &optin));
  if (!sm90) return Status::Ok();
  const WgmmaArgs args{gamma, beta, bias, y, m, k, n, 0, phases};
  // 128-column tiles below 4K tokens: twice the blocks, each streaming half as much of W (the
  // widths measured against each other: docs/PERFORMANCE.md, lesson 6).
  const bool narrow = m < 4096;
  return narrow ? launch<128>(x, args, w, sms, optin, stream, launched)
                : launch<256>(x, args, w, sms, optin, stream, launched);
}

}  // namespace fl
