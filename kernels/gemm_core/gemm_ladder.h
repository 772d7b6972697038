// The portable GEMM core as a ladder, in the style of siboehm's SGEMM_CUDA: each rung a kernel
// that adds one idea to the rung before, C = A B (A: M x K, B: K x N, C: M x N, row-major), so a
// learner can time each idea on their own GPU (tests/gpu/gemm_ladder_bench.cu prints TFLOP/s;
// docs/PERFORMANCE.md keeps the measured ladder). The rungs, in order:
//   bf16 (sm_80+):
//     mma_naive            mma.sync m16n8k16 with every fragment loaded from global memory by
//                          its lane (gemm_core/ladder_naive.cu): the tensor cores, nothing else;
//     ring_padded          tensor_gemm.cuh's block tile: 128 x 128 tiles through a 4-stage
//                          cp.async ring, rows padded by 16 bytes, ldmatrix, 8 warps of 64 x 32;
//     swizzled             the same tiles in XOR-swizzled shared memory (gemm_core/mma_tile.cuh);
//     warp_64x64           4 warps of 64 x 64: half the shared-memory reads per mma;
//     prefetched           fragments double-buffered in registers, the K-tile barrier moved
//                          behind the last ldmatrix (the lessons' tile);
//     block_128x256        the same warps' tiles, 8 of them in a 128 x 256 block, 3 stages;
//   fp32 on the CUDA cores (every GPU):
//     fp32_mma_layout      tensor_gemm.cuh's fp32 path: the mma fragment layout with FMAs;
//     fp32_warptile        register blocking (8 x 8 a thread), 16-byte loads, warp tiling,
//                          3 stages (gemm_core/sgemm_tile.cuh);
//     fp32_warptile_4stage the same with 4 stages;
//     fp32_transposed_a    A transposed in shared memory by the threads that copied it: a
//                          thread's 8 rows of one k are two 16-byte loads, as B's columns are;
//     fp32_bk8_4stage      the same with K-tiles of 8 in 4 stages (the lessons' fp32 tile).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/lesson.h"
#include "kernels/status.h"

namespace fl::gemm_core {

struct LadderRung {
  std::string name;  // "warp_64x64"
  std::string idea;  // one line: what it adds to the rung before
  Precision precision;
};
const std::vector<LadderRung>& gemm_ladder();

// Runs rung `rung` of gemm_ladder() on device pointers of its precision. Unsupported, with one
// line, where the rung cannot take the shape (every rung: N and K multiples of 8, 16-byte
// aligned pointers; mma_naive: M and N multiples of 64, K of 16).
Status launch_ladder_rung(size_t rung, const void* a, const void* b, void* c, int64_t m, int64_t n,
                          int64_t k, cudaStream_t stream);

// The first rung (ladder_naive.cu).
Status launch_mma_naive(const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k,
                        cudaStream_t stream);

}  // namespace fl::gemm_core
