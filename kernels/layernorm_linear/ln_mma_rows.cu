// The LayerNorm-Linear's level 2 at many tokens in bf16 on any GPU with mma.sync (sm_80+):
// ln_mma_rows_kernel, x normalized once per row block, on the GEMM core's bf16 tile
// (kernels/gemm_core/mma_tile.cuh).
//
// What changes against ln_mma.cu (each 128 x 128 block normalizes every x tile as it lands in
// its ring): there, each of a row block's N / 128 column blocks normalizes the same 128 x C of x
// again (18 times at C = 768), with the warps that issue the mma, behind the K-tile's barrier;
// in bf16 that normalization, not the product, was the work. Here a block owns kRows rows of x
// and keeps them, normalized once, in shared memory for the whole kernel (ln_wgmma.cu's
// structure on mma.sync), and W's column tiles stream past them:
//   1. x panel in: the block's kRows x C of x (16-byte cp.async, rows padded by 16 bytes so the
//      8 rows one ldmatrix phase reads fall in 8 bank groups), gamma and beta, while W's first
//      tile is already on its way; asked for in two halves of the rows;
//   2. statistics and normalize, once per block, in one pass: a warp takes two rows at a time,
//      a lane's 16-byte chunks of both in registers (mean, then the squared deviations from it,
//      exact in fp32; rounded to bf16 as level 0's xn), the first half of the rows while the
//      second lands;
//   3. column tiles: W streamed through a cp.async ring, one flat stream over all of the
//      block's column tiles (the next tile's first K-tiles fly during this tile's last
//      multiplies and its epilogue); A fragments by ldmatrix from the panel, B from the ring;
//      a W tile's 64-column slice copied by the two warps that read it, who wait for it with a
//      barrier of their own (bar.sync on one of 4 named barriers), not the block's; after a
//      column tile's last K-tile, y = acc + b (the bias read once a tile), stored from the
//      registers; a slice's two warps sit on two schedulers, and every address of the loop is
//      worked out once (ln_rows_lean.cuh).
// Tiles: kRows x 256 output tiles, warps of 64 x 64 (8 warps at 128 rows; 4 at 64 or 32 rows,
// for GPUs with less shared memory), a ring of 32 KiB (what shared memory leaves beside a
// 128-row panel at C = 768): 2 stages of 32 x 256.
// Shared memory at C = 768: 128 x 776 x 2 = 194 KiB of panel + 32 KiB of ring: one block an SM
// on an H100 (227 KiB); 64 rows on an A100 (163 KiB), 32 on sm_86 / sm_89 (99 KiB). gamma, beta
// and the row statistics live in the ring's later stages until the ring reaches them.
// Grid: a block per row block, times `groups` blocks splitting the column tiles where there are
// fewer row blocks than SMs (each then normalizes its rows once more: at 1K tokens and C = 768,
// 8 row blocks x 9 column tiles).
// Budget at 16K tokens, C = 768: 58 GFLOP, 92 us at mma.sync's 630 TFLOP/s, 0.23 ms at 250.
// Per K-tile of 32 a block's 8 warps read 64 KiB of shared memory by ldmatrix (512 clocks at
// 128 bytes a clock) for 2.1 MFLOP (870 clocks at mma.sync's rate): the main loop can run at
// most ~1.7x faster than its shared-memory reads. Normalizing 16K x 768 once: ~12 instructions
// an element, 0.15 G instructions, ~4 us over 132 SMs at full issue (8 warps an SM issue at a
// fraction of it). HBM moves x (25 MB), W (3.5 MB, then from L2 for every row block) and y (75
// MB) once: 35 us at 3 TB/s, of which x's 8 us comes before any multiply.
// Shapes: any token count; C and 3C multiples of 8. A C whose panel does not fit even at 32 rows
// is refused (Unsupported) and the table runs the next kernel.
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/gemm_core/mma_tile.cuh"
#include "kernels/gemm_core/tile_epilogue.cuh"
#include "kernels/layernorm_linear/ln_common.cuh"
#include "kernels/layernorm_linear/ln_row_pairs.cuh"
#include "kernels/layernorm_linear/ln_rows_lean.cuh"
#include "kernels/phases.cuh"

namespace fl::layernorm_linear {
namespace {

using T = __nv_bfloat16;
constexpr int kBN = 256, kBK = 32, kStageElems = kBK * kBN;
constexpr size_t kRingBytes = 2 * kStageElems * sizeof(T);  // two stages of 16 KiB

// The tile of kRows x 256: warps of 64 x 64 (two rows of 4 warps at 128 rows, one row of 4
// below; at 32 rows the warps are 32 x 64). The ring is the kernel's own.
template <int kRows, bool kSpread = false>
using RowsTile =
    gemm_core::MmaTile<kRows, kBN, kRows >= 128 ? kRows / 64 : 1, 4, 2, false, kSpread>;

// Panel rows are C rounded up to 64 elements (so a K-tile never reads past them) plus 8 (16
// bytes): consecutive rows start 16 bytes apart modulo 128, one bank group each.
__host__ __device__ inline int panel_ld(int k) {
  return (k + 63) / 64 * 64 + 8;
}
// gamma, beta (k each) and the row statistics: in the ring's second stage until the ring
// reaches it (the first stage already holds W's first tile).
inline size_t aux_bytes(int rows, int k) {
  return 2 * size_t(k) * sizeof(T) + rows * sizeof(float2);
}
template <int kRows>
size_t rows_smem(int k) {
  return size_t(kRows) * panel_ld(k) * sizeof(T) + kRingBytes;
}

// x's rows r0 .. r1 - 1 into the panel (zeros past m and past C), one commit group.
template <class Tile>
__device__ __forceinline__ void panel_rows_in(const LnArgs<T>& a, T* panel, int ld, int64_t m0,
                                              int r0, int r1) {
  const int chunks = ld / 8, k_chunks = a.k / 8;
  for (int i = r0 * chunks + threadIdx.x; i < r1 * chunks; i += Tile::kThreads) {
    const int r = i / chunks, c = i % chunks;
    const bool ok = m0 + r < a.m && c < k_chunks;
    tc::copy16_async(panel + r * ld + c * 8, ok ? a.x + (m0 + r) * a.k + c * 8 : a.x, ok);
  }
  tc::async_commit();
}

// Steps 1 and 2: the block's rows of x in shared memory, normalized in place. stats
// (LnRowsShape::stats): 0 two passes for the statistics and one to normalize, after all rows
// landed; 1 one pass in registers; 2 the same, the rows asked for in two halves and the first
// half normalized while the second lands.
template <class Tile>
__device__ __forceinline__ void panel_in_and_normalize(const LnArgs<T>& a, T* panel, int ld,
                                                       unsigned char* aux, int64_t m0, int stats,
                                                       PhaseMarks<3>& marks) {
  constexpr int kRows = Tile::kBM, kThreads = Tile::kThreads;
  T* s_gamma = reinterpret_cast<T*>(aux);
  T* s_beta = s_gamma + a.k;
  float2* s_stats = reinterpret_cast<float2*>(s_beta + a.k);
  const int k_chunks = a.k / 8;
  const bool one_pass = stats > 0 && k_chunks <= 32 * kLaneChunks;
  const int half = one_pass && stats == 2 ? kRows / 2 : kRows;
  for (int i = threadIdx.x; i < 2 * k_chunks; i += kThreads) {
    const bool g = i < k_chunks;
    const int c = g ? i : i - k_chunks;
    tc::copy16_async((g ? s_gamma : s_beta) + c * 8, (g ? a.gamma : a.beta) + c * 8, true);
  }
  panel_rows_in<Tile>(a, panel, ld, m0, 0, half);  // with gamma and beta
  if (half < kRows) panel_rows_in<Tile>(a, panel, ld, m0, half, kRows);
  if (half < kRows) {
    tc::async_wait<1>();  // W's first tile, gamma, beta and the first half
  } else {
    tc::async_wait<0>();  // and W's first tile, asked for before
  }
  __syncthreads();
  marks.mark(kRowsIn);
  if (one_pass) {
    // Step 2 in one pass (ln_row_pairs.cuh); rows past m are zeros in the panel: harmless.
    constexpr int kWarps = kThreads / 32;
    normalize_row_pairs<kWarps>(panel, ld, panel, ld, a.k, s_gamma, s_beta, 0, half, half);
    if (half < kRows) {
      tc::async_wait<0>();
      __syncthreads();
      normalize_row_pairs<kWarps>(panel, ld, panel, ld, a.k, s_gamma, s_beta, half, kRows, kRows);
    }
  } else {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int r = warp; r < kRows; r += kThreads / 32) {  // rows past m are zeros: harmless
      const T* row = panel + r * ld;
      const float mean = row_moment<T, 32>(row, k_chunks, lane, 0.0f, false) / a.k;
      const float var = row_moment<T, 32>(row, k_chunks, lane, mean, true) / a.k;
      if (lane == 0) s_stats[r] = make_float2(mean, rsqrtf(var + float(gemm::kLayerNormEps)));
    }
    __syncthreads();
    normalize_rows<T, kThreads>(panel, ld, kRows, a.k, s_stats, s_gamma, s_beta);
  }
  __syncthreads();  // the ring may now overwrite gamma, beta and the statistics
  marks.mark(kRowsNormalize);
}

// The main loop's forms (LnRowsShape::loop). kSlices: a W tile's columns are copied and waited
// for by the warps that read them (a barrier of kWarpsM warps; the swizzle keeps a 64-column
// slice's chunks inside it), so a slow warp holds back one other warp, not the block. kBias:
// the bias read once a column tile, not two loads a stored pair. kSpread (3, 4): a slice's two
// warps on two schedulers (MmaTile's kSpread). kLean (4): ln_rows_lean.cuh's loop, every
// address worked out once. The ring: 2 stages of 32 x 256.
template <int kLoop>
struct LoopForm {
  static constexpr bool kSlices = kLoop >= 1, kBias = kLoop >= 2;
  static constexpr bool kSpread = kLoop >= 3, kLean = kLoop >= 4;
  static constexpr int kDepth = 32, kStages = 2, kStageElems = kDepth * kBN;
  static_assert(kStages * kStageElems * sizeof(T) <= kRingBytes, "the ring's 32 KiB");
};

// Step 3: the flat stream of (column tile, K-tile) W tiles a block multiplies, W tile t in
// ring stage t % kStages; the block's column tiles are blockIdx.x, + groups, ...
template <class Tile, class Form>
struct WStream {
  const T* w;
  int n, k;
  T* ring;
  int kts, groups, total;
  __device__ int64_t n0(int t) const { return int64_t(blockIdx.x + (t / kts) * groups) * kBN; }
  __device__ T* stage(int t) const { return ring + (t % Form::kStages) * Form::kStageElems; }
  // Asks for W tile t (nothing past the last) and commits a group either way.
  __device__ void load(int t) const {
    if (t < total) {
      const int64_t k0 = int64_t(t % kts) * Form::kDepth;
      if constexpr (Form::kSlices) {
        load_slice(stage(t), k0, n0(t));
      } else {
        Tile::template load_b<Form::kDepth>(stage(t), w, n, n, k, k0, n0(t));
      }
    }
    tc::async_commit();
  }
  // The warps of column slice s (warp % kWarpsN == s) copy the slice's kWN columns of the tile.
  __device__ __forceinline__ void load_slice(T* sb, int64_t k0, int64_t tile_n0) const {
    constexpr int kPerRow = Tile::kWN / 8, kGroup = 32 * Tile::kWarpsM;
    constexpr int kChunks = Form::kDepth * kPerRow / kGroup;
    static_assert(Form::kDepth * kPerRow % kGroup == 0, "whole chunks");
    const int warp = Tile::warp(), slice = warp % Tile::kWarpsN;
    const int i0 = (threadIdx.x & 31) + 32 * (warp / Tile::kWarpsN);
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int i = i0 + j * kGroup, r = i / kPerRow, c = slice * kPerRow + i % kPerRow;
      const bool ok = k0 + r < k && tile_n0 + c * 8 < n;
      tc::copy16_async(sb + Tile::b_at(r, c), ok ? w + (k0 + r) * n + tile_n0 + c * 8 : w, ok);
    }
  }
  // This thread's copies of W tile t are in (the kStages - 2 later tiles may still fly); then
  // those of every thread that copied a part this warp reads.
  __device__ __forceinline__ void landed() const {
    tc::async_wait<Form::kStages - 2>();
    if constexpr (Form::kSlices) {
      const int slice = Tile::warp() % Tile::kWarpsN;
      asm volatile("bar.sync %0, %1;\n" ::"r"(1 + slice), "n"(32 * Tile::kWarpsM) : "memory");
    } else {
      __syncthreads();
    }
  }
};

// y's column tile of W tile t is whole: bias, store from the registers, start the next.
template <class Tile>
__device__ __forceinline__ void store_tile(typename Tile::Acc& acc, const LnArgs<T>& a, int64_t m0,
                                           int64_t n0) {
  Tile::store(acc, m0, n0, gemm_core::BiasStoreTile<T, false>{a.y, a.bias, a.m, a.n});
  Tile::zero(acc);
}

// One barrier a W tile: wait for tile t, ask for tile t + kStages - 1 into the stage tile t - 1
// used, multiply tile t. The panel never changes: its A fragments load before the wait.
template <class Tile, class Form, class At>
__device__ __forceinline__ void multiply(const LnArgs<T>& a, const WStream<Tile, Form>& w,
                                         const At& at, int64_t m0) {
  constexpr int kSteps = Form::kDepth / 16, kChunks = Form::kDepth / 8;
  const int wm = Tile::warp_m(), wn = Tile::warp_n();
  typename Tile::Acc acc;
  Tile::zero(acc);
  // Tile 0 is in (asked for before the panel); the stages after it were gamma, beta and the
  // statistics until now.
#pragma unroll
  for (int t = 1; t < Form::kStages - 1; ++t) w.load(t);
  gemm_core::MmaColumnBias<Tile> bias;
  for (int t = 0; t < w.total; ++t) {
    const int kt = t % w.kts;
    typename Tile::FragSet f;
    Tile::load_a_frags(f.a, at, wm, kt * kChunks);
    w.landed();
    w.load(t + Form::kStages - 1);
    if (Form::kBias && kt == w.kts - 1) bias.load(a.bias, a.n, w.n0(t));
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      if (step > 0) Tile::load_a_frags(f.a, at, wm, kt * kChunks + 2 * step);
      Tile::load_b_frags(f.b, w.stage(t), wn, step);
      Tile::mma_all(acc, f);
    }
    if (kt == w.kts - 1) {
      if constexpr (Form::kBias) {
        bias.store_and_zero(acc, a.y, a.m, a.n, m0, w.n0(t));
      } else {
        store_tile<Tile>(acc, a, m0, w.n0(t));
      }
    }
  }
}

template <class Tile, int kLoop>
__global__ void __launch_bounds__(Tile::kThreads, 1)
    ln_mma_rows_kernel(LnArgs<T> a, int ld, int groups, int stats) {
  using Form = LoopForm<kLoop>;
  PhaseMarks<3> marks(a.phases);
  extern __shared__ __align__(16) unsigned char smem[];
  T* panel = reinterpret_cast<T*>(smem);
  const int64_t m0 = int64_t(blockIdx.y) * Tile::kBM;
  const int tiles_n = (a.n + kBN - 1) / kBN, kts = (a.k + Form::kDepth - 1) / Form::kDepth;
  const int total = (tiles_n - int(blockIdx.x) + groups - 1) / groups * kts;
  const WStream<Tile, Form> w{a.w, a.n, a.k, panel + Tile::kBM * ld, kts, groups, total};
  const lean::SliceCopy<Tile, Form::kDepth> copy(a.w, a.n, a.k);
  if constexpr (Form::kLean) {  // W's first tile flies while x comes in and is normalized
    copy.issue(lean::smem_u32(w.stage(0)), 0, int64_t(blockIdx.x) * kBN);
    tc::async_commit();
  } else {
    w.load(0);
  }
  panel_in_and_normalize<Tile>(a, panel, ld, reinterpret_cast<unsigned char*>(w.stage(1)), m0,
                               stats, marks);
  if constexpr (Form::kLean) {
    static_assert(Form::kSlices && Form::kBias && Form::kSpread, "form 3's loop, addresses once");
    lean::multiply<Tile, Form::kDepth>(a, copy, panel, ld, w.ring, kts, groups, total / kts, m0);
  } else {
    const auto at = [panel, ld](int r, int c) { return panel + r * ld + c * 8; };
    multiply<Tile, Form>(a, w, at, m0);
  }
  tc::async_wait<0>();
  marks.mark(kRowsMultiply);
}

template <int kRows, int kLoop = kLnRowsLoop>
Status launch_rows(const LnArgs<T>& a, int stats, int sms, cudaStream_t stream) {
  using Tile = RowsTile<kRows, LoopForm<kLoop>::kSpread>;
  const size_t smem = rows_smem<kRows>(a.k);
  auto kernel = ln_mma_rows_kernel<Tile, kLoop>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const int64_t row_blocks = (a.m + kRows - 1) / kRows;
  const int tiles_n = (a.n + kBN - 1) / kBN;
  if (row_blocks > 65535) return Status::Unsupported("too many tokens for its grid");
  // Split the column tiles among more blocks only while the row blocks leave SMs idle.
  const int groups = int(std::clamp<int64_t>(sms / row_blocks, 1, tiles_n));
  const dim3 grid{unsigned(groups), unsigned(row_blocks)};
  kernel<<<grid, Tile::kThreads, smem, stream>>>(a, panel_ld(a.k), groups, stats);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// 128 rows in the main loop's form `loop` (the forms measured against each other).
Status launch_128(const LnArgs<T>& a, int stats, int loop, int sms, cudaStream_t stream) {
  using Launch = Status (*)(const LnArgs<T>&, int, int, cudaStream_t);
  static constexpr Launch kForms[] = {launch_rows<128, 0>, launch_rows<128, 1>, launch_rows<128, 2>,
                                      launch_rows<128, 3>, launch_rows<128, 4>};
  if (loop < 0 || loop >= 5) return Status::Unsupported("no such main loop form (0-4)");
  return kForms[loop](a, stats, sms, stream);
}

// The most rows (up to max_rows) whose panel fits: 128, else 64, else 32.
Status launch_fitting(const LnArgs<T>& a, LnRowsShape shape, int sms, int optin,
                      cudaStream_t stream) {
  if (shape.max_rows >= 128 && rows_smem<128>(a.k) <= size_t(optin))
    return launch_128(a, shape.stats, shape.loop, sms, stream);
  if (shape.max_rows >= 64 && rows_smem<64>(a.k) <= size_t(optin))
    return launch_rows<64>(a, shape.stats, sms, stream);
  if (rows_smem<32>(a.k) <= size_t(optin)) return launch_rows<32>(a, shape.stats, sms, stream);
  return Status::Unsupported("its x panel does not fit shared memory");
}

}  // namespace

Status launch_ln_mma_rows(const LnArgs<__nv_bfloat16>& a, LnRowsShape shape, cudaStream_t stream) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (a.k % 8 != 0 || a.n % 8 != 0 || !aligned(a.x) || !aligned(a.w) || !aligned(a.gamma) ||
      !aligned(a.beta) || !aligned(a.y)) {
    return Status::Unsupported("C is not a multiple of 8");
  }
  int device = 0, sms = 0, optin = 0, major = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 8) return Status::Unsupported("bf16 mma.sync needs compute capability 8.0");
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (aux_bytes(128, a.k) > kRingBytes / 2) return Status::Unsupported("C is too large for it");
  return launch_fitting(a, shape, sms, optin, stream);
}

}  // namespace fl::layernorm_linear
