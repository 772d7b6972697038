// Lesson 8's portable small-token rung: the whole FFN, y = GELU(x W1 + b1) W2 + b2, in one
// launch of weight-streaming blocks (kernels/gemm_core/weight_stream.cuh), for 1 to 64 tokens on
// any GPU with cp.async (sm_80+; fp32 also on sm_70, with plain copies). No clusters, no TMA:
// what the Hopper kernels get from those (every weight byte asked for at once, partial sums
// added in a neighbour's shared memory), this one gets from a deep cp.async ring and a
// reduction through L2.
//
// What changes against the split-hidden kernel (ffn.cu, level 2 where Hopper's kernels do not
// run): there a block owns a slice of the hidden units and streams W1's and W2's slices behind
// it, and every block adds its share of y into L2 with atomics; 96 slices at C = 768 leave 36
// of 132 SMs idle, and a block's W2 slice starts streaming only when its h is done. Here:
//   1. up:   h = GELU(x W1 + b1), W1 cut into units of 32 hidden units x 32 rows, each block an
//            equal run of units: all SMs stream W1. Column tiles cut between blocks are summed
//            by the last block to finish one (partial sums through L2); h goes to L2, rounded to
//            the lesson's precision as level 1's h is;
//   2. the ring keeps streaming: W2's tiles are copied in while the block finishes step 1 and
//      waits at the grid barrier (cooperative launch: every block is resident), so W2 is
//      mostly in shared memory when h is ready;
//   3. down: y = h W2 + b2, cut the same way (units of 32 output columns x 32 rows of W2).
// Chunks: 16 tokens of mma rows up to 16 tokens, else 64 (bf16); fp32 multiplies on the CUDA
// cores in chunks of 16 (W re-read from L2 for each further chunk).
//
// Budget at C = 768, bf16: W1 + W2 = 9.4 MB from HBM (2.8 us at 3.35 TB/s), 71 KB per SM on 132
// SMs: with a 10-stage ring of 16 KB tiles all of it is in flight at once. x (m x C) and h (m x
// 4C) are read by every block from L2; partial sums: at most 2 slots per column tile.
// As measured this rung is still slower than level 1 at every token count measured
// (docs/PERFORMANCE.md, "Portable small-token rungs"): not yet a level-table choice.
#include "kernels/ffn/ffn_stream.h"

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <type_traits>

#include "kernels/activations.cuh"
#include "kernels/gemm_core/weight_stream.cuh"

namespace fl {
namespace {

template <typename T>
struct FfnStreamArgs {
  stream::Product<T> up, down;
  const T *b1, *b2;
  T *h, *y;
};

template <typename T, int kTM, int kStages>
__global__ void __launch_bounds__(stream::kThreads, 1) ffn_stream_kernel(FfnStreamArgs<T> a) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* ring_mem = reinterpret_cast<T*>(smem);
  float* red = reinterpret_cast<float*>(smem + kStages * stream::kTileElems<T> * sizeof(T));
  stream::Ring<T, kStages> ring;
  ring.start(ring_mem, a.up, a.down, true);
  auto issue = [&] { ring.issue(a.up, a.down); };
  const int64_t hidden = a.up.n, c = a.down.n;
  const int tiles = stream::run_product<T, kTM, kStages>(
      ring, issue, 0, a.up, red, [&](int64_t r, int64_t col, float s) {
        a.h[r * hidden + col] =
            Elem<T>::from_float(gelu_tanh_fast(s + Elem<T>::to_float(a.b1[col])));
      });
  cooperative_groups::this_grid().sync();  // every block's h is in L2
  stream::run_product<T, kTM, kStages>(
      ring, issue, tiles, a.down, red, [&](int64_t r, int64_t col, float s) {
        a.y[r * c + col] = Elem<T>::from_float(s + Elem<T>::to_float(a.b2[col]));
      });
  tc::async_wait<0>();  // the ring's last (empty) groups
}

template <typename T>
int chunk_rows(int64_t m) {
  return std::is_same<T, float>::value || m <= 16 ? 16 : 64;
}

// The two products and the scratch layout at G blocks.
template <typename T>
FfnStreamArgs<T> make_args(const FfnStreamBuffers& b, int64_t m, int64_t c, int blocks,
                           stream::ScratchLayout* layout) {
  const int64_t h = 4 * c;
  const int tm = chunk_rows<T>(m);
  constexpr int E = tc::kVec<T>;
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  FfnStreamArgs<T> a{};
  a.up = {{static_cast<const T*>(b.x), c, m, c, c % E == 0 && aligned(b.x)},
          static_cast<const T*>(b.w1),
          h,
          static_cast<int>(m),
          static_cast<int>(h),
          static_cast<int>(c),
          tm,
          nullptr,
          nullptr,
          h % E == 0 && aligned(b.w1)};
  a.down = {{nullptr, h, m, h, false},
            static_cast<const T*>(b.w2),
            c,
            static_cast<int>(m),
            static_cast<int>(c),
            static_cast<int>(h),
            tm,
            nullptr,
            nullptr,
            c % E == 0 && aligned(b.w2)};
  a.up.plan(blocks);
  a.down.plan(blocks);
  const int64_t partial =
      std::max(stream::partial_floats(a.up, blocks), stream::partial_floats(a.down, blocks));
  *layout =
      stream::ScratchLayout(int64_t(a.up.part.keys) + a.down.part.keys, partial, sizeof(T) * m * h);
  char* base = static_cast<char*>(b.scratch);
  unsigned* counters = reinterpret_cast<unsigned*>(base);
  float* partials = reinterpret_cast<float*>(base + layout->partial);
  a.h = reinterpret_cast<T*>(base + layout->rows);
  a.up.partial = a.down.partial = partials;  // up's sums are all read before the barrier
  a.up.counters = counters;
  a.down.counters = counters + a.up.part.keys;
  a.down.av.a = a.h;
  a.down.av.vec = h % E == 0 && aligned(a.h);
  a.b1 = static_cast<const T*>(b.b1);
  a.b2 = static_cast<const T*>(b.b2);
  a.y = static_cast<T*>(b.y);
  return a;
}

template <typename T, int kTM>
Status launch_typed(const FfnStreamArgs<T>& a, int blocks, cudaStream_t stream) {
  return stream::with_stages<T>([&](auto stages) {
    constexpr int S = decltype(stages)::value;
    return stream::launch_cooperative(ffn_stream_kernel<T, kTM, S>, a, stream::smem_bytes<T>(S),
                                      blocks, stream);
  });
}

}  // namespace

Status ffn_stream_supported(Precision p, int64_t m, int64_t c) {
  if (m < 1 || m > kFfnStreamMaxTokens) {
    return Status::Error("the portable small-token FFN takes 1 to " +
                         std::to_string(kFfnStreamMaxTokens) + " tokens, got " + std::to_string(m));
  }
  if (c < 1) return Status::Error("the portable small-token FFN needs C >= 1");
  int device = 0, major = 0, cooperative = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  if (p == Precision::bf16 && major < 8) {
    return Status::Error("the portable FFN's bf16 path needs compute capability 8.0 (mma.sync)");
  }
  if (!cooperative) return Status::Error("the portable FFN needs cooperative launches");
  return Status::Ok();
}

Status ffn_stream_scratch_bytes(Precision p, int64_t m, int64_t c, size_t* bytes) {
  int blocks = 0;
  FL_TRY(stream::stream_blocks(&blocks));
  stream::ScratchLayout layout(0, 0, 0);
  const FfnStreamBuffers none{};
  if (p == Precision::bf16) {
    make_args<__nv_bfloat16>(none, m, c, blocks, &layout);
  } else {
    make_args<float>(none, m, c, blocks, &layout);
  }
  *bytes = layout.bytes;
  return Status::Ok();
}

Status launch_ffn_stream(Precision p, const FfnStreamBuffers& b, int64_t m, int64_t c,
                         cudaStream_t stream) {
  FL_TRY(ffn_stream_supported(p, m, c));
  int blocks = 0;
  FL_TRY(stream::stream_blocks(&blocks));
  stream::ScratchLayout layout(0, 0, 0);
  if (p == Precision::fp32) {
    return launch_typed<float, 16>(make_args<float>(b, m, c, blocks, &layout), blocks, stream);
  }
  using bf16 = __nv_bfloat16;
  const FfnStreamArgs<bf16> a = make_args<bf16>(b, m, c, blocks, &layout);
  return m <= 16 ? launch_typed<bf16, 16>(a, blocks, stream)
                 : launch_typed<bf16, 64>(a, blocks, stream);
}

}  // namespace fl
