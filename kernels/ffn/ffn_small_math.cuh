// The small-token FFN kernel's arithmetic (kernels/ffn/ffn_small.cu): mma.sync straight from
// TMA's swizzled boxes in shared memory, and the few vector helpers of its sums.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace fl::ffn_small_math {

using bf16 = __nv_bfloat16;

// The shared-memory address of 16-byte chunk `chunk` of row `row` in a box of 128-byte rows
// swizzled by 128 bytes (chunk c of row r lands at c ^ (r % 8)), or of 64-byte rows swizzled by
// 64 bytes (bits 7-8 of the offset, (r / 2) % 4 here, flip bits 4-5).
__device__ __forceinline__ uint32_t at_128(uint32_t box, int row, int chunk) {
  return box + row * 128 + ((chunk ^ (row & 7)) << 4);
}
__device__ __forceinline__ uint32_t at_64(uint32_t box, int row, int chunk) {
  return box + row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4);
}

// One warp's k16 step at k0: acc[MT][NT] += A (rows row0.., 16 MT of them) B (columns chunk0 x 8..,
// 8 NT of them). a_at(row, kc) and b_at(k, chunk) give the shared-memory address of A's 16-byte
// chunk kc (k / 8) of a row and of B's chunk `chunk` of row k. Fragments as in
// kernels/tensor_gemm.cuh (ldmatrix x4 for A; x4.trans for two 8-column tiles of B).
template <int MT, int NT, class AAt, class BAt>
__device__ __forceinline__ void mma_step(float (&acc)[MT][NT][4], int k0, int row0, int chunk0,
                                         const AAt& a_at, const BAt& b_at) {
  const int lane = threadIdx.x & 31;
  unsigned af[MT][4], bfr[NT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(af[mt][0]), "=r"(af[mt][1]), "=r"(af[mt][2]), "=r"(af[mt][3])
                 : "r"(a_at(row0 + mt * 16 + (lane & 15), k0 / 8 + (lane >> 4))));
  }
#pragma unroll
  for (int nt = 0; nt < NT; nt += 2) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(bfr[nt][0]), "=r"(bfr[nt][1]), "=r"(bfr[nt + 1][0]), "=r"(bfr[nt + 1][1])
                 : "r"(b_at(k0 + (lane & 7) + ((lane >> 3) & 1) * 8, chunk0 + nt + (lane >> 4))));
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      float* d = acc[mt][nt];
      asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
          "{%8,%9}, {%0,%1,%2,%3};\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
          : "r"(af[mt][0]), "r"(af[mt][1]), "r"(af[mt][2]), "r"(af[mt][3]), "r"(bfr[nt][0]),
            "r"(bfr[nt][1]));
    }
  }
}

// The sum of `count` float4s `stride` floats apart (partial sums in shared memory).
__device__ __forceinline__ float4 sum_quads(const float* p, int count, int stride) {
  float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int i = 0; i < count; ++i) {
    const float4 v = *reinterpret_cast<const float4*>(p + i * stride);
    s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
  }
  return s;
}
// Four bf16 (8-byte aligned) as floats, and four floats rounded to bf16 into 8 bytes.
__device__ __forceinline__ float4 load_bf16x4(const bf16* p) {
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p + 2));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}
__device__ __forceinline__ void store_bf16x4(bf16* p, float4 v) {
  union {
    __nv_bfloat162 pair[2];
    uint2 bits;
  } out;
  out.pair[0] = __floats2bfloat162_rn(v.x, v.y);
  out.pair[1] = __floats2bfloat162_rn(v.z, v.w);
  *reinterpret_cast<uint2*>(p) = out.bits;
}

}  // namespace fl::ffn_small_math
