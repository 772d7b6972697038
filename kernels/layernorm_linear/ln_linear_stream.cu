// Lesson 6's portable small-token rung: y = LN(x) W + b in one launch of weight-streaming
// blocks (kernels/gemm_core/weight_stream.cuh), for 1 to 256 tokens on any GPU with cp.async
// (sm_80+; fp32 also on sm_70, with plain copies). No clusters, no TMA.
//
// What changes against the panel kernel (layernorm_linear.cu: a block owns a column slice and
// all of K, normalizing the rows it needs itself): there every block normalizes every row, and
// at 17 to 256 tokens the column slices are too few to keep every SM streaming W. Here:
//   1. the ring starts streaming W at once (its tiles do not depend on x);
//   2. meanwhile the blocks' warps normalize the rows, one row a warp, xn = (x - mean) * rstd *
//      gamma + beta rounded to the lesson's precision as level 1's xn is, into L2 (m x C: a few
//      hundred KB at most, read back from L2, never waited on from HBM);
//   3. a grid barrier (cooperative launch), then xn W + b with W cut into units of 32 columns
//      x 32 rows, each block an equal run of them, cut column tiles summed by the last block.
// Chunks of 16 tokens up to 16 (bf16), else 64; fp32 on the CUDA cores in chunks of 16. W is
// read from HBM once; each further chunk re-reads it from L2.
//
// Budget at C = 768, bf16: W = 3.5 MB (1.1 us at 3.35 TB/s), 27 KB per SM on 132 SMs; at 256
// tokens 0.9 GFLOP on mma.sync; x read 3 times per row from L1/L2 by the normalizing warp.
// As measured this rung is still slower than level 1 at every token count measured
// (docs/PERFORMANCE.md, "Portable small-token rungs"): not yet a level-table choice.
#include "kernels/layernorm_linear/ln_linear_stream.h"

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <type_traits>

#include "kernels/gemm_core/weight_stream.cuh"
#include "kernels/layernorm_rows.cuh"

namespace fl {
namespace {

template <typename T>
struct LnStreamArgs {
  stream::Product<T> gemm;  // xn W
  const T *x, *gamma, *beta, *bias;
  T *xn, *y;
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One warp normalizes row `row` of x into xn: mean, then the squared deviations (two passes
// over the row, from L1), then the normalized row. Unrolled so that each lane has 8 loads in
// flight on the first (cold) pass.
template <typename T>
__device__ void normalize_row(const LnStreamArgs<T>& a, int64_t row) {
  const int lane = threadIdx.x & 31;
  const int64_t c = a.gemm.k;
  const T* x = a.x + row * c;
  float sum = 0.0f;
#pragma unroll 8
  for (int64_t i = lane; i < c; i += 32) sum += Elem<T>::to_float(x[i]);
  const float mean = warp_sum(sum) / float(c);
  float sq = 0.0f;
#pragma unroll 8
  for (int64_t i = lane; i < c; i += 32) {
    const float d = Elem<T>::to_float(x[i]) - mean;
    sq += d * d;
  }
  const float rstd = rsqrtf(warp_sum(sq) / float(c) + float(layernorm_rows::kEps));
#pragma unroll 4
  for (int64_t i = lane; i < c; i += 32) {
    const float v = (Elem<T>::to_float(x[i]) - mean) * rstd;
    a.xn[row * c + i] =
        Elem<T>::from_float(v * Elem<T>::to_float(a.gamma[i]) + Elem<T>::to_float(a.beta[i]));
  }
}

template <typename T, int kTM, int kStages>
__global__ void __launch_bounds__(stream::kThreads, 1) ln_stream_kernel(LnStreamArgs<T> a) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* ring_mem = reinterpret_cast<T*>(smem);
  float* red = reinterpret_cast<float*>(smem + kStages * stream::kTileElems<T> * sizeof(T));
  stream::Ring<T, kStages> ring;
  ring.start(ring_mem, a.gemm, a.gemm, false);
  const int64_t warps = int64_t(gridDim.x) * stream::kWarps;
  for (int64_t row = int64_t(blockIdx.x) * stream::kWarps + (threadIdx.x >> 5); row < a.gemm.m;
       row += warps) {
    normalize_row(a, row);
  }
  cooperative_groups::this_grid().sync();  // every row of xn is in L2
  const int64_t n = a.gemm.n;
  stream::run_product<T, kTM, kStages>(
      ring, [&] { ring.issue(a.gemm, a.gemm); }, 0, a.gemm, red,
      [&](int64_t r, int64_t col, float s) {
        a.y[r * n + col] = Elem<T>::from_float(s + Elem<T>::to_float(a.bias[col]));
      });
  tc::async_wait<0>();
}

template <typename T>
LnStreamArgs<T> make_args(const LnStreamBuffers& b, int64_t m, int64_t c, int64_t n, int blocks,
                          stream::ScratchLayout* layout) {
  const int tm = std::is_same<T, float>::value || m <= 16 ? 16 : 64;
  constexpr int E = tc::kVec<T>;
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  LnStreamArgs<T> a{};
  a.gemm = {{nullptr, c, m, c, false},
            static_cast<const T*>(b.w),
            n,
            static_cast<int>(m),
            static_cast<int>(n),
            static_cast<int>(c),
            tm,
            nullptr,
            nullptr,
            n % E == 0 && aligned(b.w)};
  a.gemm.plan(blocks);
  *layout = stream::ScratchLayout(a.gemm.part.keys, stream::partial_floats(a.gemm, blocks),
                                  sizeof(T) * m * c);
  char* base = static_cast<char*>(b.scratch);
  a.gemm.counters = reinterpret_cast<unsigned*>(base);
  a.gemm.partial = reinterpret_cast<float*>(base + layout->partial);
  a.xn = reinterpret_cast<T*>(base + layout->rows);
  a.gemm.av.a = a.xn;
  a.gemm.av.vec = c % E == 0 && aligned(a.xn);
  a.x = static_cast<const T*>(b.x);
  a.gamma = static_cast<const T*>(b.gamma);
  a.beta = static_cast<const T*>(b.beta);
  a.bias = static_cast<const T*>(b.bias);
  a.y = static_cast<T*>(b.y);
  return a;
}

template <typename T, int kTM>
Status launch_typed(const LnStreamArgs<T>& a, int blocks, cudaStream_t stream) {
  return stream::with_stages<T>([&](auto stages) {
    constexpr int S = decltype(stages)::value;
    return stream::launch_cooperative(ln_stream_kernel<T, kTM, S>, a, stream::smem_bytes<T>(S),
                                      blocks, stream);
  });
}

}  // namespace

Status ln_stream_supported(Precision p, int64_t m, int64_t c) {
  if (m < 1 || m > kLnStreamMaxTokens) {
    return Status::Error("the portable small-token LayerNorm-Linear takes 1 to " +
                         std::to_string(kLnStreamMaxTokens) + " tokens, got " + std::to_string(m));
  }
  if (c < 1) return Status::Error("the portable LayerNorm-Linear needs C >= 1");
  int device = 0, major = 0, cooperative = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  if (p == Precision::bf16 && major < 8) {
    return Status::Error(
        "the portable LayerNorm-Linear's bf16 path needs compute capability 8.0 (mma.sync)");
  }
  if (!cooperative)
    return Status::Error("the portable LayerNorm-Linear needs cooperative launches");
  return Status::Ok();
}

Status ln_stream_scratch_bytes(Precision p, int64_t m, int64_t c, int64_t n, size_t* bytes) {
  int blocks = 0;
  FL_TRY(stream::stream_blocks(&blocks));
  stream::ScratchLayout layout(0, 0, 0);
  const LnStreamBuffers none{};
  if (p == Precision::bf16) {
    make_args<__nv_bfloat16>(none, m, c, n, blocks, &layout);
  } else {
    make_args<float>(none, m, c, n, blocks, &layout);
  }
  *bytes = layout.bytes;
  return Status::Ok();
}

Status launch_ln_stream(Precision p, const LnStreamBuffers& b, int64_t m, int64_t c, int64_t n,
                        cudaStream_t stream) {
  FL_TRY(ln_stream_supported(p, m, c));
  int blocks = 0;
  FL_TRY(stream::stream_blocks(&blocks));
  stream::ScratchLayout layout(0, 0, 0);
  if (p == Precision::fp32) {
    return launch_typed<float, 16>(make_args<float>(b, m, c, n, blocks, &layout), blocks, stream);
  }
  using bf16 = __nv_bfloat16;
  const LnStreamArgs<bf16> a = make_args<bf16>(b, m, c, n, blocks, &layout);
  return m <= 16 ? launch_typed<bf16, 16>(a, blocks, stream)
                 : launch_typed<bf16, 64>(a, blocks, stream);
}

}  // namespace fl
