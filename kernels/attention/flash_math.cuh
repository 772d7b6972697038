// The two matrix products of one flash-attention step, S = Q K^T and O += P V, for one warp's
// query rows (kMT tiles of 16), in the mma.sync accumulator layout: lane = 4 g + t holds rows g and
// g + 8 and columns 2t, 2t + 1 of every 16 x 8 tile (c[0..1] row g, c[2..3] row g + 8). The flash
// kernel (flash_mma.cuh) does its online softmax on that layout whatever the precision; this file
// is the only place where bf16 and fp32 differ.
//
//   bf16 (sm_80+): tensor cores. Q's fragments are loaded once (ldmatrix.x4) and held in
//     registers where they fit (else re-read per tile); with 32 rows a warp every K and V
//     fragment read from shared memory feeds two mma, which halves the shared-memory reads per
//     FLOP (at 16 rows an ldmatrix.x4 of 512 bytes fed two mma, about as long on the shared-
//     memory port as on the tensor cores); K fragments come by ldmatrix (K is stored key-major,
//     which is the "col" layout mma wants for K^T); P never leaves registers: an S accumulator tile
//     of 16 x 8 fp32 is exactly half of an A fragment of 16 x 16 bf16, so two tiles pack into one A
//     operand; V fragments come by ldmatrix.trans.
//   fp32: the same tiles on the CUDA cores (fp32 FMA, results fp32-exact: no TF32). Q and K are
//     read from shared memory two k at a time (8-byte loads); P goes through a small per-warp
//     shared-memory tile, because an FMA's operands must be where the lane can read them.
//
// Shared-memory rows are padded by 16 bytes, so the 8 row addresses of an ldmatrix (bf16) or
// the 8 key rows a warp reads (fp32) fall in different banks.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <type_traits>

namespace fl::attention {

// kBK_: keys per K/V tile (0: 64 for bf16, 32 for fp32). kQRegs_: bf16 may hold Q's fragments in
// registers (where they fit); false re-reads them from shared memory per tile, which frees 32
// registers for wider score tiles or more blocks an SM.
template <typename T, int kD_, int kMT_, int kBK_ = 0, bool kQRegs_ = true>
struct FlashTile {
  static constexpr int kD = kD_;    // head dimension the tile holds (64, 128)
  static constexpr int kMT = kMT_;  // 16-row query tiles per warp: 1, or 2 (each K/V fragment
                                    // read from shared memory then feeds two mma)
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpRows = 16 * kMT;
  static constexpr int kBQ = kWarpRows * kWarps;  // query rows per block
  static constexpr bool kFp32 = std::is_same<T, float>::value;
  static constexpr int kBK = kBK_ > 0 ? kBK_ : kFp32 ? 32 : 64;  // keys per K/V tile
  static constexpr int kPad = 16 / int(sizeof(T));               // 16 bytes of padding a row
  static constexpr int kLd = kD + kPad;                          // row stride of the Q, K, V tiles
  static constexpr int kLdP = kBK + kPad;                        // row stride of fp32's P tile
  static constexpr int kNT = kBK / 8;                            // S tiles of 16 x 8 per 16 rows
  static constexpr int kDT = kD / 8;                             // O tiles of 16 x 8 per 16 rows
  // bf16 holds its Q fragments in registers unless that would cost more than 32 of them
  // (d = 128 at 32 rows a warp: O alone takes 128); then they are re-read per K/V tile.
  static constexpr bool kHoldQ = kQRegs_ && kMT * kD <= 128;
  // Shared memory in elements: Q, then two stages of K and V, then fp32's P tiles.
  static constexpr int kQElems = kBQ * kLd;
  static constexpr int kKVElems = kBK * kLd;
  static constexpr int kPElems = kFp32 ? kWarps * kWarpRows * kLdP : 0;
  static constexpr size_t kSmemBytes = sizeof(T) * size_t(kQElems + 4 * kKVElems + kPElems);
};

// Accumulators of one warp: S (then P) and O, kMT x 16 rows each.
template <class Tile>
using ScoreTile = float[Tile::kMT][Tile::kNT][4];
template <class Tile>
using OutTile = float[Tile::kMT][Tile::kDT][4];

template <typename T, class Tile>
struct FlashMath;

// ---- bf16: tensor cores ------------------------------------------------------------------------

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // bf16 needs compute capability 8.0 (the lessons do not offer it below)
#endif
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p, bool trans) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
  }
#else
  __trap();
#endif
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&v);
}

template <class Tile>
struct FlashMath<__nv_bfloat16, Tile> {
  using T = __nv_bfloat16;
  static constexpr int kQRegs = Tile::kHoldQ ? Tile::kMT * Tile::kD / 16 : 1;
  unsigned q[kQRegs][4];  // this warp's Q as A fragments, when held: [mt * kD / 16 + kk]

  // The A fragment of rows 16 mt.. and dims 16 kk.. of the warp's Q (sq: its first row).
  __device__ static void q_fragment(unsigned (&a)[4], const T* sq, int mt, int kk) {
    const int lane = threadIdx.x & 31;
    ldmatrix_x4(a, sq + (mt * 16 + (lane & 15)) * Tile::kLd + kk * 16 + (lane >> 4) * 8, false);
  }
  __device__ void load_q(const T* sq) {
    if constexpr (Tile::kHoldQ) {
#pragma unroll
      for (int mt = 0; mt < Tile::kMT; ++mt) {
#pragma unroll
        for (int kk = 0; kk < Tile::kD / 16; ++kk)
          q_fragment(q[mt * Tile::kD / 16 + kk], sq, mt, kk);
      }
    }
  }

  // s[mt][nt] += Q K^T for rows 16 mt.. and keys 8 nt .. 8 nt + 7 of the tile sk (key-major).
  __device__ void qk(ScoreTile<Tile>& s, const T* sq, const T* sk) const {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int kc = 0; kc < Tile::kD / 32; ++kc) {  // 32 dims: two k16 steps per ldmatrix.x4
      unsigned a[Tile::kMT][2][4];
#pragma unroll
      for (int mt = 0; mt < Tile::kMT; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if constexpr (Tile::kHoldQ) {
#pragma unroll
            for (int r = 0; r < 4; ++r) a[mt][h][r] = q[mt * Tile::kD / 16 + 2 * kc + h][r];
          } else {
            q_fragment(a[mt][h], sq, mt, 2 * kc + h);
          }
        }
      }
#pragma unroll
      for (int nt = 0; nt < Tile::kNT; ++nt) {
        unsigned b[4];
        ldmatrix_x4(b, sk + (nt * 8 + (lane & 7)) * Tile::kLd + kc * 32 + (lane >> 3) * 8, false);
#pragma unroll
        for (int mt = 0; mt < Tile::kMT; ++mt) {
          mma_bf16(s[mt][nt], a[mt][0], b[0], b[1]);
          mma_bf16(s[mt][nt], a[mt][1], b[2], b[3]);
        }
      }
    }
  }

  // o += P V: P is the softmax'd s (fp32, rounded to bf16 here), V the tile sv (key-major).
  __device__ void pv(OutTile<Tile>& o, const ScoreTile<Tile>& p, const T* sv, float* /*sp*/) const {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int kk = 0; kk < Tile::kBK / 16; ++kk) {
      unsigned a[Tile::kMT][4];
#pragma unroll
      for (int mt = 0; mt < Tile::kMT; ++mt) {
        a[mt][0] = pack_bf16(p[mt][2 * kk][0], p[mt][2 * kk][1]);
        a[mt][1] = pack_bf16(p[mt][2 * kk][2], p[mt][2 * kk][3]);
        a[mt][2] = pack_bf16(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]);
        a[mt][3] = pack_bf16(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dt = 0; dt < Tile::kDT; dt += 2) {
        unsigned b[4];
        ldmatrix_x4(b,
                    sv + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * Tile::kLd + dt * 8 +
                        (lane >> 4) * 8,
                    true);
#pragma unroll
        for (int mt = 0; mt < Tile::kMT; ++mt) {
          mma_bf16(o[mt][dt], a[mt], b[0], b[1]);
          mma_bf16(o[mt][dt + 1], a[mt], b[2], b[3]);
        }
      }
    }
  }
};

// ---- fp32: CUDA cores --------------------------------------------------------------------------

template <class Tile>
struct FlashMath<float, Tile> {
  __device__ void load_q(const float*) {}  // Q stays in shared memory

  // s[mt][nt] += Q K^T; sq: the warp's first query row. With two 16-row tiles each K value read
  // from shared memory feeds both.
  __device__ void qk(ScoreTile<Tile>& s, const float* sq, const float* sk) const {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll 2
    for (int k = 0; k < Tile::kD; k += 2) {
      float2 qa[Tile::kMT], qb[Tile::kMT];
#pragma unroll
      for (int mt = 0; mt < Tile::kMT; ++mt) {
        qa[mt] = *reinterpret_cast<const float2*>(sq + (mt * 16 + g) * Tile::kLd + k);
        qb[mt] = *reinterpret_cast<const float2*>(sq + (mt * 16 + g + 8) * Tile::kLd + k);
      }
#pragma unroll
      for (int nt = 0; nt < Tile::kNT; ++nt) {
        const float* key = sk + (nt * 8 + 2 * t) * Tile::kLd + k;
        const float2 kx = *reinterpret_cast<const float2*>(key);
        const float2 ky = *reinterpret_cast<const float2*>(key + Tile::kLd);
#pragma unroll
        for (int mt = 0; mt < Tile::kMT; ++mt) {
          s[mt][nt][0] += qa[mt].x * kx.x + qa[mt].y * kx.y;
          s[mt][nt][1] += qa[mt].x * ky.x + qa[mt].y * ky.y;
          s[mt][nt][2] += qb[mt].x * kx.x + qb[mt].y * kx.y;
          s[mt][nt][3] += qb[mt].x * ky.x + qb[mt].y * ky.y;
        }
      }
    }
  }

  // sp: this warp's kWarpRows x kBK tile of P in shared memory.
  __device__ void pv(OutTile<Tile>& o, const ScoreTile<Tile>& p, const float* sv, float* sp) const {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < Tile::kMT; ++mt) {
      float* rows = sp + mt * 16 * Tile::kLdP;
#pragma unroll
      for (int nt = 0; nt < Tile::kNT; ++nt) {
        *reinterpret_cast<float2*>(rows + g * Tile::kLdP + nt * 8 + 2 * t) = {p[mt][nt][0],
                                                                              p[mt][nt][1]};
        *reinterpret_cast<float2*>(rows + (g + 8) * Tile::kLdP + nt * 8 + 2 * t) = {p[mt][nt][2],
                                                                                    p[mt][nt][3]};
      }
    }
    __syncwarp();
#pragma unroll 2
    for (int k = 0; k < Tile::kBK; ++k) {
      float pa[Tile::kMT], pb[Tile::kMT];
#pragma unroll
      for (int mt = 0; mt < Tile::kMT; ++mt) {
        pa[mt] = sp[(mt * 16 + g) * Tile::kLdP + k];
        pb[mt] = sp[(mt * 16 + g + 8) * Tile::kLdP + k];
      }
#pragma unroll
      for (int dt = 0; dt < Tile::kDT; ++dt) {
        const float2 v = *reinterpret_cast<const float2*>(sv + k * Tile::kLd + dt * 8 + 2 * t);
#pragma unroll
        for (int mt = 0; mt < Tile::kMT; ++mt) {
          o[mt][dt][0] += pa[mt] * v.x;
          o[mt][dt][1] += pa[mt] * v.y;
          o[mt][dt][2] += pb[mt] * v.x;
          o[mt][dt][3] += pb[mt] * v.y;
        }
      }
    }
    __syncwarp();  // the next tile's P overwrites sp
  }
};

}  // namespace fl::attention
