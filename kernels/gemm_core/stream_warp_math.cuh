// The warp arithmetic of the weight-streaming GEMM (weight_stream.cuh): one warp's unit,
// acc += A[chunk rows, one unit of k] B[that k, 32 columns], and the loads of A through L2.
//   bf16: mma.sync m16n8k16; A in registers straight from L2, 16 bytes a row for two k16 steps
//         (lane t takes physical k = 8t .. 8t + 7; B's rows are stored in the matching order,
//         permute_row), B by ldmatrix.trans: 2 loads of A and 4 ldmatrix feed 8 MT mma.
//   fp32: the CUDA cores (no TF32), 16 rows a chunk, 16 k a unit: lane (r, q) owns rows r and
//         r + 8 and 8 columns; per k two 16-byte shared loads of B feed 16 FMAs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kernels/device_common.cuh"
#include "kernels/tensor_gemm.cuh"

namespace fl::stream {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kUnitN = 32;          // columns of a unit (64 B rows of bf16: two DRAM sectors)
constexpr int kRedLd = kUnitN + 4;  // a row of the cross-warp reduction area (floats)

template <typename T>
constexpr int kUnitK = std::is_same<T, float>::value ? 16 : 32;
template <typename T>
constexpr int kLds = kUnitN + tc::kPad<T>;  // shared-memory row of a unit, padded 16 bytes

// Where physical row p of a 32-row bf16 unit sits in shared memory: step s = bit 2, fragment
// half = bit 1, lane pair = bits 3-4, pair member = bit 0 (ldmatrix then reads 8 consecutive
// padded rows per matrix: no bank conflicts).
template <typename T>
__host__ __device__ constexpr int permute_row(int p) {
  if constexpr (std::is_same<T, float>::value) {
    return p;
  } else {
    return 16 * ((p >> 2) & 1) + 8 * ((p >> 1) & 1) + 2 * (p >> 3) + (p & 1);
  }
}

// What the loads of A need of a product.
template <typename T>
struct AView {
  const T* a;
  int64_t lda, m, k;
  bool vec;  // rows are 16-byte multiples and aligned
};

// ---- loads of A through L2 -------------------------------------------------------------------
__device__ __forceinline__ uint4 load_cg16(const void* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ float load_cg(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ float load_cg(const __nv_bfloat16* p) {
  unsigned short v;
  asm volatile("ld.global.cg.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return __bfloat162float(__ushort_as_bfloat16(v));
}

// 16 bytes of row `row` of A from column k: zero beyond m or K; element-wise where A's rows are
// not 16-byte multiples (odd C) or the run ends inside the 16 bytes.
template <typename T>
__device__ __forceinline__ uint4 load_a16(const AView<T>& p, int64_t row, int64_t k) {
  constexpr int E = tc::kVec<T>;
  if (row >= p.m) return make_uint4(0, 0, 0, 0);
  const T* src = p.a + row * p.lda + k;
  if (p.vec && k + E <= p.k) return load_cg16(src);
  T v[E];
#pragma unroll
  for (int e = 0; e < E; ++e) v[e] = Elem<T>::from_float(k + e < p.k ? load_cg(src + e) : 0.0f);
  uint4 out;
  memcpy(&out, v, 16);
  return out;
}

// ---- one warp's unit: acc += A[chunk rows, 32 k] B[32 k, 32 columns] ---------------------------
// bf16: acc[mt][nt][4] in mma.sync's layout (row g / g + 8, columns 2t, 2t + 1 of each 8).
template <typename T, int kTM>
struct WarpMath;

template <int kTM>
struct WarpMath<__nv_bfloat16, kTM> {
  using T = __nv_bfloat16;
  static constexpr int MT = kTM / 16, NT = kUnitN / 8;
  struct Acc {
    float v[MT][NT][4];
  };
  struct AFrag {
    uint4 lo[MT], hi[MT];  // rows g and g + 8: k = 8t .. 8t + 7 of the unit
  };
  static __device__ void zero(Acc& acc) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc.v[mt][nt][i] = 0.0f;
  }
  static __device__ void load(AFrag& f, const AView<T>& p, int64_t row0, int64_t k0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      f.lo[mt] = load_a16(p, row0 + mt * 16 + g, k0 + 8 * t);
      f.hi[mt] = load_a16(p, row0 + mt * 16 + g + 8, k0 + 8 * t);
    }
  }
  static __device__ void multiply(Acc& acc, const AFrag& f, const T* unit) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      unsigned b[NT][2];
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {  // matrices: b0 | b1 of columns 16np, then 16np + 8
        const int mj = lane >> 3;
        const T* q =
            unit + (16 * s + 8 * (mj & 1) + (lane & 7)) * kLds<T> + 16 * np + 8 * (mj >> 1);
        const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(q));
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(b[2 * np][0]), "=r"(b[2 * np][1]), "=r"(b[2 * np + 1][0]),
                       "=r"(b[2 * np + 1][1])
                     : "r"(addr));
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const unsigned a0 = s ? f.lo[mt].z : f.lo[mt].x, a2 = s ? f.lo[mt].w : f.lo[mt].y;
        const unsigned a1 = s ? f.hi[mt].z : f.hi[mt].x, a3 = s ? f.hi[mt].w : f.hi[mt].y;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          float* c = acc.v[mt][nt];
          asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
              "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
              : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
              : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b[nt][0]), "r"(b[nt][1]));
        }
      }
    }
#else
    __trap();  // bf16 needs compute capability 8.0 (the lessons do not offer it below)
#endif
  }
  // Rows 16 slab .. +15 of the warp's sums into red (16 x kRedLd floats).
  static __device__ void dump(const Acc& acc, int slab, float* red) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if (mt != slab) continue;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int col = nt * 8 + 2 * t;
        *reinterpret_cast<float2*>(red + g * kRedLd + col) =
            make_float2(acc.v[mt][nt][0], acc.v[mt][nt][1]);
        *reinterpret_cast<float2*>(red + (g + 8) * kRedLd + col) =
            make_float2(acc.v[mt][nt][2], acc.v[mt][nt][3]);
      }
    }
  }
};

// fp32 on the CUDA cores, 16 rows a chunk: lane (r = lane / 4, q = lane % 4) owns rows r and
// r + 8 and columns 8q .. 8q + 7; per k, two 16-byte shared loads of B feed 16 FMAs.
template <>
struct WarpMath<float, 16> {
  using T = float;
  static constexpr int MT = 1;
  struct Acc {
    float v[2][8];
  };
  struct AFrag {
    uint4 row[2][4];  // rows r and r + 8, k 0 .. 15 of the unit
  };
  static __device__ void zero(Acc& acc) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc.v[i][j] = 0.0f;
  }
  static __device__ void load(AFrag& f, const AView<T>& p, int64_t row0, int64_t k0) {
    const int r = (threadIdx.x & 31) >> 2;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) f.row[i][j] = load_a16(p, row0 + r + 8 * i, k0 + 4 * j);
  }
  static __device__ void multiply(Acc& acc, const AFrag& f, const T* unit) {
    const int q = threadIdx.x & 3;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float4 b0 = *reinterpret_cast<const float4*>(unit + (4 * j + e) * kLds<T> + 8 * q);
        const float4 b1 =
            *reinterpret_cast<const float4*>(unit + (4 * j + e) * kLds<T> + 8 * q + 4);
        const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const unsigned bits = e == 0   ? f.row[i][j].x
                                : e == 1 ? f.row[i][j].y
                                : e == 2 ? f.row[i][j].z
                                         : f.row[i][j].w;
          const float a = __uint_as_float(bits);
#pragma unroll
          for (int c = 0; c < 8; ++c) acc.v[i][c] = fmaf(a, bv[c], acc.v[i][c]);
        }
      }
    }
  }
  static __device__ void dump(const Acc& acc, int, float* red) {
    const int r = (threadIdx.x & 31) >> 2, q = threadIdx.x & 3;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float* dst = red + (r + 8 * i) * kRedLd + 8 * q;
      *reinterpret_cast<float4*>(dst) =
          make_float4(acc.v[i][0], acc.v[i][1], acc.v[i][2], acc.v[i][3]);
      *reinterpret_cast<float4*>(dst + 4) =
          make_float4(acc.v[i][4], acc.v[i][5], acc.v[i][6], acc.v[i][7]);
    }
  }
};

}  // namespace fl::stream
