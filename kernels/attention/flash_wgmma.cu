// Attention level 3: flash attention on Hopper (sm_90a, bf16, d = 64 or 128), the
// FlashAttention-3 ideas on the algorithm of level 2 (flash_mma.cuh).
//
// What changes against level 2. Level 2's warps each load their tiles (cp.async), wait, multiply
// with mma.sync (16 x 8 x 16 a warp), run the softmax, multiply again: every warp does all of it
// in turn, and with 8 warps an SM has too few to hide one step behind another. Here the roles
// split:
//   * a producer warp (one thread of warpgroup kConsumers) asks the copy engine (TMA) for Q once
//     and then for every K and V tile of the block's keys, into a ring of kStages slots each,
//     each tile completing on its own mbarrier; it never touches a register of the data;
//   * consumer warpgroups (4 warps each, 64 query rows each) multiply with wgmma straight from
//     shared memory: S = Q K^T as m64n128k16 (A = Q, B = K, both 128-byte swizzled by TMA), and
//     O += P V as m64n{d}k16 with P from registers (the accumulators of S, turned to bf16 in
//     place: wgmma_rs.cuh);
//   * within a warpgroup, the softmax of tile j runs while the tensor cores do P_{j-1} V_{j-1}:
//     tile j's S and tile j-1's P V are issued together, the warpgroup waits for S only, runs
//     the softmax, and only then waits for P V, rescales O and packs the new P;
//   * across warpgroups, they take turns at issuing (ping-pong: wgmma_roles.cuh, Turns), so one's
//     softmax runs under the next one's products instead of every softmax at once;
//   * blocks start by groups of heads of about one wave (BlockTile), so a group's K and V are
//     read from DRAM once and from L2 by each of the group's blocks.
//
// Tiles: kBM = 64 kConsumers query rows a block (d = 64: 3 consumer warpgroups, 192 rows; d = 128:
// 2, 128 rows), kBN = 128 keys a K/V tile, kStages = 2 slots for K and 2 for V. Shared memory:
// Q kBM x d, K and V 2 x 128 x d each, in 64-column panels of 128-byte rows (TMA's swizzle unit):
// 88 KiB at d = 64, 160 KiB at d = 128, one block per SM. Registers (setmaxnreg): the producer
// warpgroup gives its registers to the consumers (24 each; consumers 160 at d = 64, 240 at
// d = 128): S takes 64 a thread, O d / 2, P 32.
//
// Causal: a block's keys end at its last query, so tiles above the diagonal are never loaded;
// only a tile that reaches past a warpgroup's first query or past T is masked key by key. Rows
// of a tile past T (or past the head) read the next head's rows or TMA's zeros; their scores are
// masked (keys) or their outputs not stored (queries).
//
// Budget per K/V tile and block, d = 128: 4 kBM kBN d = 8.4 MFLOP against 64 KiB through TMA
// (128 FLOP a byte, from L2 after the first block of a head); at an SM's share of the H100's
// ~990 TFLOP/s that is 1.1 us a tile and ~58 GB/s into each SM. From DRAM, every block re-reading
// its keys would be ~(T / 256) times Q, K, V and O: hence the head groups. The softmax's 64 x 128
// exp2 a warpgroup a tile take the SFU about as long as that warpgroup's products at d = 64 (512
// cycles each; 1024 at d = 128): hence the turns.
#include "kernels/attention/flash_wgmma.h"

#include <cuda.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention/attention_rows.cuh"  // kLog2e
#include "kernels/attention/block_marks.cuh"
#include "kernels/attention/wgmma_roles.cuh"
#include "kernels/attention/wgmma_rs.cuh"
#include "kernels/attention/wgmma_softmax.cuh"
#include "kernels/cuda_check.h"
#include "kernels/hopper.cuh"
#include "kernels/phases.cuh"

namespace fl::attention {
namespace {

using bf16 = __nv_bfloat16;
namespace hp = hopper;

enum WgmmaPhase : unsigned { kQIn, kFirstTile, kTiles, kStore };

template <int kD>
struct WgTile {
  static constexpr int kConsumers = kD == 64 ? 3 : 2;
  static constexpr int kBM = 64 * kConsumers, kBN = 128, kStages = 2;
  static constexpr int kPanels = kD / 64;  // 64-column panels (128-byte rows) of Q, K and V
  static constexpr int kQBytes = kBM * kD * 2, kKVBytes = kBN * kD * 2;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kConsumerRegs = kConsumers == 3 ? 160 : 240, kProducerRegs = 24;
  static constexpr int kBarriers = 1 + 4 * kStages;
  static constexpr size_t kSmemBytes =
      1024 + kQBytes + 2 * kStages * kKVBytes + kBarriers * sizeof(uint64_t);
  static_assert(kPanels * 64 == kD, "d is a whole number of 128-byte panels");
  static_assert(128 * (kProducerRegs + kConsumers * kConsumerRegs) <= 65536,
                "the register split fits the SM's 64K registers");
};

// The block's shared memory: Q, the K and V rings, and the barriers (q_full; per slot k_full,
// k_empty, v_full, v_empty). K slot s starts at k + s kKVBytes, its panel p p kBN 128 bytes on.
template <int kD>
struct Smem {
  unsigned char *q, *k, *v;
  uint64_t *q_full, *k_full, *k_empty, *v_full, *v_empty;
  __device__ explicit Smem(unsigned char* raw) {
    using W = WgTile<kD>;
    q = hp::align_1024(raw);
    k = q + W::kQBytes;
    v = k + W::kStages * W::kKVBytes;
    q_full = reinterpret_cast<uint64_t*>(v + W::kStages * W::kKVBytes);
    k_full = q_full + 1;
    k_empty = k_full + W::kStages;
    v_full = k_empty + W::kStages;
    v_empty = v_full + W::kStages;
  }
};

// The producer thread: Q once, then K and V tile by tile as slots free up. Head n's rows are
// rows (n / group) T .. of the maps, its columns (n % group) d ...
template <int kD>
__device__ void produce(const Smem<kD>& sm, const CUtensorMap* q_map, const CUtensorMap* k_map,
                        const CUtensorMap* v_map, int row0, int col0, int q0, int tiles) {
  using W = WgTile<kD>;
  hp::prefetch_map(q_map);
  hp::prefetch_map(k_map);
  hp::prefetch_map(v_map);
  hp::arrive_expect_bytes(sm.q_full, W::kQBytes);
  for (int p = 0; p < W::kPanels; ++p)
    hp::copy_box(sm.q + p * W::kBM * 128, q_map, col0 + 64 * p, row0 + q0, sm.q_full);
  wg::Cursor at;
  for (int j = 0; j < tiles; ++j) {
    const int key0 = row0 + j * W::kBN;
    unsigned char* k = sm.k + at.slot * W::kKVBytes;
    unsigned char* v = sm.v + at.slot * W::kKVBytes;
    hp::wait(&sm.k_empty[at.slot], at.phase ^ 1);
    hp::arrive_expect_bytes(&sm.k_full[at.slot], W::kKVBytes);
    for (int p = 0; p < W::kPanels; ++p)
      hp::copy_box(k + p * W::kBN * 128, k_map, col0 + 64 * p, key0, &sm.k_full[at.slot]);
    hp::wait(&sm.v_empty[at.slot], at.phase ^ 1);
    hp::arrive_expect_bytes(&sm.v_full[at.slot], W::kKVBytes);
    for (int p = 0; p < W::kPanels; ++p)
      hp::copy_box(v + p * W::kBN * 128, v_map, col0 + 64 * p, key0, &sm.v_full[at.slot]);
    at.advance<W::kStages>();
  }
}

// S = Q K^T for the warpgroup's 64 rows (q: their first row in panel 0) and a K slot: K-major
// A and B, 8-row groups 1024 bytes apart, a k step of 16 is 32 bytes along the row.
template <int kD>
__device__ __forceinline__ void issue_qk(float (&s)[64], const unsigned char* q,
                                         const unsigned char* k) {
  using W = WgTile<kD>;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    const int panel = kk / 4, along = (kk % 4) * 32;
    const uint64_t da = hp::descriptor(q + panel * W::kBM * 128 + along, 16, 1024);
    const uint64_t db = hp::descriptor(k + panel * W::kBN * 128 + along, 16, 1024);
    hp::wgmma_m64n128k16<0>(s, da, db, kk > 0);
  }
  hp::wgmma_commit();
}

// O += P V for a V slot: V is MN-major (its rows, the keys, are the k dimension), a k step of 16
// keys is 16 rows (2048 bytes), d's 64-column panels kBN 128 bytes apart.
template <int kD>
__device__ __forceinline__ void issue_pv(float (&o)[kD / 2], const uint32_t (&p)[32],
                                         const unsigned char* v) {
  using W = WgTile<kD>;
#pragma unroll
  for (int kk = 0; kk < W::kBN / 16; ++kk) {
    const uint32_t a[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
    const uint64_t db = hp::descriptor(v + kk * 16 * 128, W::kBN * 128, 1024);
    if constexpr (kD == 64) {
      hp::wgmma_rs_m64n64k16(o, a, db, 1);
    } else {
      hp::wgmma_rs_m64n128k16(o, a, db, 1);
    }
  }
  hp::wgmma_commit();
}

// A consumer warpgroup: its 64 query rows against the block's `tiles` K/V tiles, then O / l
// stored. Releases each K slot once its S is in registers and each V slot once its P V is done.
template <int kD>
__device__ void consume(const Smem<kD>& sm, const FlashArgs<bf16>& a, int head, int q0, int tiles,
                        BlockMarks<kStore + 1>& marks) {
  using W = WgTile<kD>;
  const int wg = threadIdx.x / 128, lane = threadIdx.x % 32;
  const wg::Turns<W::kConsumers> turns(wg);
  const int first = q0 + 64 * wg;                                  // the warpgroup's first query
  const int row = first + 16 * (threadIdx.x / 32 % 4) + lane / 4;  // the thread's rows: + 8 h
  const float c = a.scale * kLog2e;
  const unsigned char* q = sm.q + wg * 64 * 128;
  float s[64], o[kD / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, rescale[2];
  uint32_t p[32];
#pragma unroll
  for (int i = 0; i < kD / 2; ++i) o[i] = 0.0f;
  auto needs_mask = [&](int j) {
    return (j + 1) * W::kBN - 1 > first || (j + 1) * W::kBN > a.length;
  };
  wg::Cursor kc, vc;
  hp::wait(sm.q_full, 0);
  marks.mark(kQIn);

  hp::wait(&sm.k_full[kc.slot], kc.phase);
  turns.take();
  hp::wgmma_fence();
  issue_qk<kD>(s, q, sm.k + kc.slot * W::kKVBytes);
  turns.pass(false);
  hp::wgmma_wait<0>();
  hp::fence_all(s);
  if (lane == 0) hp::arrive(&sm.k_empty[kc.slot]);
  kc.advance<W::kStages>();
  if (needs_mask(0)) wg::mask_tile(s, 0, row, a.length);
  wg::softmax_tile(s, m, l, rescale, c);
  wg::next_p<kD>(s, p, o, rescale);
  marks.mark(kFirstTile);

  for (int j = 1; j < tiles; ++j) {
    // Tile j's S and tile j - 1's P V go to the tensor cores together; the softmax of tile j
    // runs while P V does.
    hp::wait(&sm.k_full[kc.slot], kc.phase);
    turns.take();
    hp::wgmma_fence();  // p and o were last written by ordinary instructions
    issue_qk<kD>(s, q, sm.k + kc.slot * W::kKVBytes);
    hp::wait(&sm.v_full[vc.slot], vc.phase);
    issue_pv<kD>(o, p, sm.v + vc.slot * W::kKVBytes);
    turns.pass(false);
    hp::wgmma_wait<1>();  // S of tile j is in
    hp::fence_all(s);
    if (lane == 0) hp::arrive(&sm.k_empty[kc.slot]);
    kc.advance<W::kStages>();
    if (needs_mask(j)) wg::mask_tile(s, j * W::kBN, row, a.length);
    wg::softmax_tile(s, m, l, rescale, c);
    hp::wgmma_wait<0>();  // P V of tile j - 1 is done: O and P are free again
    hp::fence_all(o);
    hp::fence_all(p);
    if (lane == 0) hp::arrive(&sm.v_empty[vc.slot]);
    vc.advance<W::kStages>();
    wg::next_p<kD>(s, p, o, rescale);
  }
  hp::wait(&sm.v_full[vc.slot], vc.phase);
  turns.take();
  hp::wgmma_fence();
  issue_pv<kD>(o, p, sm.v + vc.slot * W::kKVBytes);
  turns.pass(true);
  hp::wgmma_wait<0>();
  hp::fence_all(o);
  if (lane == 0) hp::arrive(&sm.v_empty[vc.slot]);
  marks.mark(kTiles);

  // O / l, the sum over the row's 4 lanes; rows past T are not stored.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    l[h] = 1.0f / l[h];
  }
#pragma unroll
  for (int i = 0; i < kD / 2; ++i) o[i] *= l[i / 2 % 2];
  const int64_t ld_out = a.ld_out > 0 ? a.ld_out : a.dim;
  bf16* out = a.o + a.base(head, ld_out);
  hp::for_each_piece(
      o, [](int, float v0, float v1) { return __floats2bfloat162_rn(v0, v1); },
      [&](int r, int col, uint4 piece) {
        if (first + r < a.length)
          *reinterpret_cast<uint4*>(out + int64_t(first + r) * ld_out + col) = piece;
      });
  marks.mark(kStore);
}

// grid: heads x query tiles of kBM (BlockTile); block: kConsumers consumer warpgroups, then the
// producer's.
template <int kD>
__global__ void __launch_bounds__(WgTile<kD>::kThreads, 1)
    flash_wgmma_kernel(const __grid_constant__ CUtensorMap q_map,
                       const __grid_constant__ CUtensorMap k_map,
                       const __grid_constant__ CUtensorMap v_map, FlashArgs<bf16> a, int heads,
                       int group) {
#ifdef FL_SM90A_DEVICE
  using W = WgTile<kD>;
  __shared__ BlockMarks<kStore + 1> marks;
  marks.begin(a.phases);
  extern __shared__ unsigned char smem_raw[];
  const Smem<kD> sm(smem_raw);
  if (threadIdx.x == 0) {
    hp::barrier_init(sm.q_full, 1);
    for (int s = 0; s < W::kStages; ++s) {
      hp::barrier_init(&sm.k_full[s], 1);
      hp::barrier_init(&sm.v_full[s], 1);
      hp::barrier_init(&sm.k_empty[s], 4 * W::kConsumers);  // one arrival per consumer warp
      hp::barrier_init(&sm.v_empty[s], 4 * W::kConsumers);
    }
    hp::barrier_init_fence();
  }
  __syncthreads();
  const wg::BlockTile at(heads, (a.length + W::kBM - 1) / W::kBM, group, W::kBM);
  const int q0 = at.q0;
  const int keys = min(a.length, q0 + W::kBM);  // causal: nothing past the last query
  const int tiles = (keys + W::kBN - 1) / W::kBN;
  if (threadIdx.x >= 128 * W::kConsumers) {
    wg::set_registers<W::kProducerRegs>(false);
    if (threadIdx.x == 128 * W::kConsumers) {
      const int row0 = at.head / a.group * a.length;
      const int col0 = at.head % a.group * a.dim;
      produce<kD>(sm, &q_map, &k_map, &v_map, row0, col0, q0, tiles);
    }
    return;
  }
  wg::set_registers<W::kConsumerRegs>(true);
  consume<kD>(sm, a, at.head, q0, tiles, marks);
  marks.end();
#endif
}

template <int kD>
Status launch_with(const FlashArgs<bf16>& a, int64_t heads, cudaStream_t stream) {
  using W = WgTile<kD>;
  bool sm90 = false;
  int optin = 0;
  FL_TRY(hopper::current_device(&sm90, &optin));
  if (!sm90) return Status::Unsupported("needs a compute capability 9.0 GPU");
  if (W::kSmemBytes > size_t(optin))
    return Status::Unsupported("its " + std::to_string(W::kSmemBytes >> 10) +
                               " KiB of shared memory do not fit a block here");
  const int64_t ld = a.ld_in > 0 ? a.ld_in : a.dim;
  const int64_t rows = heads / a.group * a.length, cols = int64_t(a.group) * a.dim;
  CUtensorMap q_map, k_map, v_map;
  FL_TRY(hopper::make_tensor_map_2d(&q_map, a.q, rows, cols, W::kBM, 64, 128, ld));
  FL_TRY(hopper::make_tensor_map_2d(&k_map, a.k, rows, cols, W::kBN, 64, 128, ld));
  FL_TRY(hopper::make_tensor_map_2d(&v_map, a.v, rows, cols, W::kBN, 64, 128, ld));
  auto kernel = flash_wgmma_kernel<kD>;
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(W::kSmemBytes)));
  // Heads a group: one wave of blocks (an SM holds one), at least one head.
  int sms = 0, device = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int q_tiles = (a.length + W::kBM - 1) / W::kBM;
  const int group = static_cast<int>(std::min<int64_t>(std::max(1, sms / q_tiles), heads));
  const unsigned blocks = static_cast<unsigned>(heads * q_tiles);
  kernel<<<blocks, W::kThreads, W::kSmemBytes, stream>>>(q_map, k_map, v_map, a,
                                                         static_cast<int>(heads), group);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

std::string flash_wgmma_shape_check(int64_t dim) {
  return dim == 64 || dim == 128 ? "" : "takes a head size d of 64 or 128";
}

const std::vector<std::string>& flash_wgmma_phases() {
  static const std::vector<std::string> names = {"Q in", "first K/V tile", "K/V tiles", "store"};
  return names;
}

Status launch_flash_wgmma(const FlashArgs<bf16>& a, int64_t heads, cudaStream_t stream) {
  if (!kWgmmaBuild) return Status::Unsupported("needs a build with the sm_90a (wgmma) kernels");
  const std::string shape = flash_wgmma_shape_check(a.dim);
  if (!shape.empty()) return Status::Unsupported(shape);
  const int64_t ld_in = a.ld_in > 0 ? a.ld_in : a.dim, ld_out = a.ld_out > 0 ? a.ld_out : a.dim;
  const bool aligned =
      reinterpret_cast<uintptr_t>(a.q) % 16 == 0 && reinterpret_cast<uintptr_t>(a.k) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(a.v) % 16 == 0 && reinterpret_cast<uintptr_t>(a.o) % 16 == 0 &&
      ld_in % 8 == 0 && ld_out % 8 == 0;
  if (!aligned) return Status::Unsupported("TMA needs 16-byte aligned rows");
  if (a.group < 1 || heads % a.group != 0 || heads > INT32_MAX ||
      heads / a.group * a.length > INT32_MAX || a.length < 1 ||
      heads * ((a.length + 63) / 64) > INT32_MAX)  // blocks of 64 queries or more
    return Status::Unsupported("takes fewer than 2^31 rows of whole sequences");
  return a.dim == 64 ? launch_with<64>(a, heads, stream) : launch_with<128>(a, heads, stream);
}

}  // namespace fl::attention
