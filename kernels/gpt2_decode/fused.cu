// Levels 1-3 of gpt2_decode: five launches per block instead of seventeen.
//   ln1+qkv   LayerNorm in the product's prologue; bias, the 1/8 query scale and the cache
//             append in its epilogue
//   attention one kernel, a block per (head, split of the cache): partial softmax sums
//   proj      the splits combined in the prologue; bias and residual in the epilogue
//   ln2+fc    LayerNorm in the prologue; bias and GELU in the epilogue
//   out       bias and residual in the epilogue
// then LN_f: 61 launches. Each product kernel gives a warp one output row and a block eight
// (3C / 8 = 288, C / 8 = 96 and 4C / 8 = 384 blocks), so the weights are read once, in 16-byte
// loads, with all of a warp's row in flight before its first use.
//
// Level 2 replays these 61 launches as a CUDA graph; level 3 launches them with programmatic
// dependent launch: each kernel lets the next one start at once (launch_dependents), and the
// next one loads its weight row into registers before it waits for the previous kernel's
// output (griddepcontrol.wait), so the weight stream does not stop at a kernel boundary.
//
// Napkin math (t = 1): the ln1+qkv kernel reads 3.5 MB of weights, proj 1.2 MB, ln2+fc and out
// 4.7 MB each; at ~3 TB/s those are 1.2, 0.4, 1.6 and 1.6 us, about what a launch and its ramp
// cost: the small products are dominated by their boundaries.
#include "kernels/cuda_check.h"
#include "kernels/gpt2_decode/attention.cuh"
#include "kernels/gpt2_decode/ops.cuh"
#include "kernels/gpt2_decode/launch.h"

namespace fl {
namespace gpt2 {
namespace {

template <class Op>
__global__ void __launch_bounds__(kThreads) fused_linear_kernel(Op op) {
  constexpr int K = Op::kK;
  constexpr int kChunk = chunk_tokens<K>();
  static_assert(kChunk <= 32, "a lane per token of a chunk");
  __shared__ __align__(16) float act[kActFloats];
  __shared__ float sums[kStaticSums ? kWarps * kChunk : 1];
  allow_dependent_launch();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int first = blockIdx.x * kWarps;  // Op::kN is a multiple of 8: every warp has a row
  WeightRow<K> w;
  w.load(op.weights() + int64_t(first + warp) * K, lane);  // needs nothing from the kernel before
  grid_dependency_wait();
  const int t = op.a.tokens;
  for (int j0 = 0; j0 < t; j0 += kChunk) {
    const int tc = min(kChunk, t - j0);
    if (j0 > 0) __syncthreads();
    op.prologue(j0, tc, act);
    __syncthreads();
    if constexpr (kStaticSums) {  // the epilogues a thread per sum, after the block's sums
      for (int j = 0; j < tc; ++j) {
        const float sum = w.dot(act + j * K, lane);
        if (lane == 0) sums[warp * tc + j] = sum;
      }
      __syncthreads();
      finish_rows(op, j0, tc, first, kWarps, sums);
    } else {  // lane j runs token j's epilogue
      float mine = 0.f;
      for (int j = 0; j < tc; ++j) {
        const float sum = w.dot(act + j * K, lane);
        if (lane == j) mine = sum;
      }
      if (lane < tc) op.epilogue(j0 + lane, first + warp, mine);
    }
  }
}

__global__ void __launch_bounds__(kThreads) attention_kernel(DecodeArgs a, int layer) {
  __shared__ __align__(16) float smem[kAttentionSmemFloats];
  allow_dependent_launch();
  grid_dependency_wait();
  attend_split(a, layer, blockIdx.x, blockIdx.y, smem);
}

// cudaLaunchKernelEx with or without programmatic stream serialization.
template <typename... Params, typename... Args>
Status launch_ex(void (*kernel)(Params...), dim3 grid, cudaStream_t s, bool pdl, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kThreads);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  FL_CUDA_TRY(cudaLaunchKernelEx(&cfg, kernel, args...));
  return Status::Ok();
}

template <class Op>
Status launch_op(const Op& op, cudaStream_t s, bool pdl) {
  static_assert(Op::kN % kWarps == 0, "a warp per row, eight rows a block");
  return launch_ex(fused_linear_kernel<Op>, dim3(Op::kN / kWarps), s, pdl, op);
}

}  // namespace

bool pdl_supported() {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
    return false;
  return major >= 9;
}

Status launch_fused(const DecodeArgs& a, int layer, Matrix m, cudaStream_t s, bool pdl) {
  switch (m) {
    case Matrix::qkv:
      return launch_op(QkvOp{a, layer}, s, pdl);
    case Matrix::proj:
      return launch_op(ProjOp{a, layer}, s, pdl);
    case Matrix::fc:
      return launch_op(FcOp{a, layer}, s, pdl);
    case Matrix::out:
      return launch_op(OutOp{a, layer}, s, pdl);
  }
  return Status::Error("unknown matrix");
}

Status launch_attention(const DecodeArgs& a, int layer, cudaStream_t s, bool pdl) {
  return launch_ex(attention_kernel, dim3(kHeads, a.splits), s, pdl, a, layer);
}

}  // namespace gpt2
}  // namespace fl
