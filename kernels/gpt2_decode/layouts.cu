// The megakernel's own weight layouts (megakernel.cu, attention_proj.cuh), written once when the
// weights are: Wout transposed, so an MLP task's Wout columns are one contiguous run, and Wproj
// regrouped by head and part, so a fused attention task's part of it is one.
#include <cstdint>

#include "kernels/cuda_check.h"
#include "kernels/gpt2_decode/launch.h"

namespace fl {
namespace gpt2 {
namespace {

// Wout of every layer ([C][4C]) transposed into [4C][C], once when the weights are written: an
// MLP task's Wout columns become one contiguous run of bytes (copies.cuh). 32 x 32 tiles through
// shared memory, both sides coalesced.
__global__ void transpose_w_out(const bf16* weights, bf16* w_out_t) {
  __shared__ bf16 tile[32][33];
  const int layer = blockIdx.z;
  const bf16* src = weights + int64_t(layer) * LayerLayout::size + LayerLayout::w_out;
  bf16* dst = w_out_t + int64_t(layer) * kF * kC;
  const int col0 = blockIdx.x * 32, row0 = blockIdx.y * 32;  // in Wout: col < 4C, row < C
  for (int r = threadIdx.y; r < 32; r += blockDim.y)
    tile[r][threadIdx.x] = src[int64_t(row0 + r) * kF + col0 + threadIdx.x];
  __syncthreads();
  for (int r = threadIdx.y; r < 32; r += blockDim.y)
    dst[int64_t(col0 + r) * kC + row0 + threadIdx.x] = tile[threadIdx.x][r];
}

// Every layer's Wproj ([C][C], output rows) regrouped as [layer][head][part][64][kProjRows]:
// a fused attention task's part (its head's 64 columns, kProjRows output rows) becomes one
// contiguous run with the rows side by side (attention_proj.cuh). A thread an element.
__global__ void regroup_w_proj(const bf16* weights, bf16* w_proj_t) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(kLayers) * kC * kC) return;
  const int c = int(i % kProjRows), d = int(i / kProjRows % kHeadDim);
  const int part = int(i / (kProjRows * kHeadDim) % kProjParts);
  const int head = int(i / (int64_t(kProjRows) * kHeadDim * kProjParts) % kHeads);
  const int layer = int(i / (int64_t(kC) * kC));
  const bf16* w = weights + int64_t(layer) * LayerLayout::size + LayerLayout::w_proj;
  w_proj_t[i] = w[int64_t(part * kProjRows + c) * kC + head * kHeadDim + d];
}

}  // namespace

Status launch_transpose_w_out(const bf16* weights, bf16* w_out_t, cudaStream_t s) {
  transpose_w_out<<<dim3(kF / 32, kC / 32, kLayers), dim3(32, 8), 0, s>>>(weights, w_out_t);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

Status launch_regroup_w_proj(const bf16* weights, bf16* w_proj_t, cudaStream_t s) {
  const int64_t n = int64_t(kLayers) * kC * kC;
  regroup_w_proj<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(weights, w_proj_t);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpt2
}  // namespace fl
