// The GEMM ladder's first rung (kernels/gemm_core/gemm_ladder.h): mma.sync and nothing else.
// Each warp computes a 32 x 32 piece of C as 2 x 4 tiles of m16n8k16; each lane loads the
// fragments the mma wants straight from global memory (A: two adjacent bf16 of one row, one
// 4-byte load; B: two bf16 of one column, k-major in memory, two 2-byte loads). No shared
// memory: a block of 4 warps (64 x 64 of C) reads each A and B element once per warp that
// needs it, through L1.
// Budget: per k16 step a warp loads 2 KiB of A and 1 KiB of B as 4- and 2-byte accesses
// (32-byte sectors a quarter used) for 8 mma (32 KFLOP): about 10 FLOP per byte through L1,
// where the tensor cores want several hundred: the rung is bound by the load pipes, far from
// the tensor cores' rate.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda_check.h"
#include "kernels/gemm_core/gemm_ladder.h"

namespace fl::gemm_core {
namespace {

__global__ void __launch_bounds__(128)
    mma_naive_kernel(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                     __nv_bfloat16* __restrict__ c, int64_t m, int64_t n, int64_t k) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  auto pack2 = [](__nv_bfloat16 lo, __nv_bfloat16 hi) {
    return unsigned(__bfloat16_as_ushort(lo)) | (unsigned(__bfloat16_as_ushort(hi)) << 16);
  };
  const int64_t wm = blockIdx.y * 64 + (warp >> 1) * 32, wn = blockIdx.x * 64 + (warp & 1) * 32;
  float acc[2][4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += 16) {
    unsigned af[2][4], bfr[4][2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {  // rows g and g + 8, k pairs 2t and 2t + 8
      const __nv_bfloat16* p = a + (wm + mt * 16 + g) * k + k0 + 2 * t;
      af[mt][0] = *reinterpret_cast<const unsigned*>(p);
      af[mt][1] = *reinterpret_cast<const unsigned*>(p + 8 * k);
      af[mt][2] = *reinterpret_cast<const unsigned*>(p + 8);
      af[mt][3] = *reinterpret_cast<const unsigned*>(p + 8 * k + 8);
    }
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {  // column g, k rows 2t, 2t + 1 and 2t + 8, 2t + 9
      const __nv_bfloat16* p = b + (k0 + 2 * t) * n + wn + nt * 8 + g;
      bfr[nt][0] = pack2(p[0], p[n]);
      bfr[nt][1] = pack2(p[8 * n], p[9 * n]);
    }
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        float* d = acc[mt][nt];
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(af[mt][0]), "r"(af[mt][1]), "r"(af[mt][2]), "r"(af[mt][3]), "r"(bfr[nt][0]),
              "r"(bfr[nt][1]));
      }
    }
  }
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      __nv_bfloat16* p = c + (wm + mt * 16 + g) * n + wn + nt * 8 + 2 * t;
      *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(acc[mt][nt][0], acc[mt][nt][1]);
      *reinterpret_cast<__nv_bfloat162*>(p + 8 * n) =
          __floats2bfloat162_rn(acc[mt][nt][2], acc[mt][nt][3]);
    }
  }
#else
  __trap();  // bf16 needs compute capability 8.0
#endif
}

}  // namespace

Status launch_mma_naive(const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k,
                        cudaStream_t stream) {
  if (m % 64 != 0 || n % 64 != 0 || k % 16 != 0) {
    return Status::Unsupported("mma_naive takes M and N multiples of 64 and K of 16");
  }
  const dim3 grid(static_cast<unsigned>(n / 64), static_cast<unsigned>(m / 64));
  mma_naive_kernel<<<grid, 128, 0, stream>>>(static_cast<const __nv_bfloat16*>(a),
                                             static_cast<const __nv_bfloat16*>(b),
                                             static_cast<__nv_bfloat16*>(c), m, n, k);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace fl::gemm_core
