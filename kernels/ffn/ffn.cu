// Lesson 8, ffn: y = GELU_tanh(x W1 + b1) W2 + b2, x of tokens x C, W1 of C x 4C, W2 of 4C x C
// (a transformer's whole MLP: widen to H = 4C, activate, project back). This file holds the CPU
// reference, the workspace and the level table; level 2's kernels have a file each, beside it.
//
// The ladder:
//   level 0, unfused:   five kernels (GEMM, bias, GELU, GEMM, bias): the 4C-wide tensor makes
//                       three round trips through HBM (t = x W1, u = t + b1, h = GELU(u)), then
//                       s = h W2 one;
//   level 1, epilogues: two cuBLASLt GEMMs with fused epilogues (GELU+bias, then bias): h is
//                       written once and read once;
//   level 2, fused:     one kernel of ours on tensor cores. Which one runs is the level table's
//                       choice (its variant rows, below), by token count, precision and GPU;
//                       in the order a reader meets them, each file saying what it changes
//                       against the one before:
//     ffn_split.cu      any GPU: a block owns a slice of the 4C hidden units, keeps its h in
//                       shared memory, adds its share of y in L2; a grid barrier, then y;
//     ffn_cluster.cu    sm_90, up to 64 tokens: clusters of 8 blocks split C and exchange h in
//                       distributed shared memory: 7x fewer shares of y to add;
//     ffn_small.cu      sm_90a bf16, up to 64 tokens: TMA asks for every weight byte at once; h
//                       through L2 after one grid barrier, W2 split by K inside clusters;
//     ffn_wgmma.cu      sm_90a bf16, from 256 tokens: persistent wgmma tiles of both GEMMs, h
//                       through a ring buffer that L2 holds;
//     ffn_tiles.cu      any GPU, from 1K tokens where ffn_wgmma cannot run (fp32, or no sm_90a):
//                       both GEMMs as persistent tiles of the GEMM core (kernels/gemm_core/),
//                       h through L2 row block by row block.
// The byte-ratio limit (textbook bytes, level 1 over level 2): both move x, W1, W2 and y; level
// 1 also writes and reads h, 2 x M x 4C x b. At a few tokens the weights dominate (2 x C x 4C x b
// = 9.4 MB in bf16 at C = 768, 3.1 us at 3 TB/s), so the limit is 1.0x at 1 token and 1.3x at
// 64: what level 2 can win there is a launch and the gap between launches. At 16K tokens h is
// 100 MB each way and the limit is 12x, if h stayed on chip (ffn_wgmma.cu says why it does not).
// The level table below has every launch's bytes.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernels/bias_ops.cuh"
#include "kernels/blas.h"
#include "kernels/catalog.h"
#include "kernels/device_buffer.h"
#include "kernels/ffn/ffn_common.cuh"
#include "kernels/ffn/ffn_hidden_slice.h"
#include "kernels/ffn/ffn_small.h"
#include "kernels/ffn/ffn_stream.h"
#include "kernels/ffn/ffn_tiles.h"
#include "kernels/ffn/ffn_wgmma.h"
#include "kernels/gemm_common.cuh"
#include "kernels/level_table.h"
#include "kernels/workspace.cuh"

namespace fl {
namespace {

using ffn::ffn_cluster_phases;
using ffn::ffn_split_phases;
using ffn::FfnArgs;
using ffn::kFfnClusterTokens;
using ffn::kFfnWgmmaFrom;
using ffn::kMaxClusterBlocks;
using ffn::run_ffn_cluster;
using ffn::run_ffn_split;

// The two Linear layers: up, C -> 4C, and down, 4C -> C; in the epilogues level, cuBLASLt's
// GELU+bias epilogue and its bias epilogue.
constexpr LinearSpec kUp{
    1, 4, blas::Epilogue::gelu_bias, "gemm_up", "add_bias_up", "gemm_up_bias_gelu"};
constexpr LinearSpec kDown{
    4, 1, blas::Epilogue::bias, "gemm_down", "add_bias_down", "gemm_down_bias"};

// Device buffers for one shape and element type: x, the two Linear layers (W1, b1, W2, b2 and
// their cuBLASLt plans), the unfused chain's t, u, h and s, y, and the fused level's reduction
// state.
template <typename T>
class FfnWorkspace final : public LevelWorkspace<FfnWorkspace<T>> {
 public:
  FfnWorkspace(int64_t m, int64_t c, double tolerance)
      : m_(m),
        c_(c),
        h_(4 * c),
        tolerance_(tolerance),
        up_(m, c, kUp, {&x_, &t_, &u_, &hid_}),
        down_(m, c, kDown, {&hid_, &s_, &y_, &y_}) {
    this->set_where({m, c, int64_t(sizeof(T))}, precision_of<T>(), "tokens");
  }

  static const LevelTable<FfnWorkspace>& levels();                // the ladder, below
  static std::vector<VariantRow<FfnWorkspace>> fused_variants();  // level 2's kernels, below

  Status allocate() {
    FL_TRY(allocate_elements<T>({{&x_, m_ * c_},
                                 {&t_, m_ * h_},
                                 {&u_, m_ * h_},
                                 {&hid_, m_ * h_},
                                 {&s_, m_ * c_},
                                 {&y_, m_ * c_}}));
    FL_TRY(sums_.allocate(sizeof(ErrorSums)));
    // The fused level's reduction state: zero now, and left zero by every run of it.
    FL_TRY(acc_.allocate(m_ * c_ * sizeof(float)));
    // Each hidden slice's share of y (slices of 32 units at most 4C / 32), at up to 64 tokens
    // and 32 MiB: the fused kernel adds the shares with plain stores and one pass, not atomics.
    const int64_t shares = (h_ + 31) / 32 * m_ * c_ * int64_t(sizeof(float));
    if (m_ <= 64) FL_TRY(partial_.allocate(std::min<int64_t>(shares, int64_t(32) << 20)));
    FL_TRY(counters_.allocate((2 + kMaxClusterBlocks) * sizeof(unsigned)));
    FL_TRY(arrivals_.allocate(sizeof(unsigned long long)));  // the small-token kernel's barrier
    FL_CUDA_TRY(cudaMemset(acc_.get(), 0, acc_.bytes()));
    FL_CUDA_TRY(cudaMemset(counters_.get(), 0, counters_.bytes()));
    FL_CUDA_TRY(cudaMemset(arrivals_.get(), 0, arrivals_.bytes()));
    if (kRings) {  // the wgmma kernel's h ring and counters
      FL_TRY(h_ring_.allocate(ffn_wgmma_ring_rows(m_) * h_ * sizeof(T)));
      FL_TRY(tile_counters_.allocate(ffn_wgmma_counters(m_) * sizeof(unsigned)));
      FL_CUDA_TRY(cudaMemset(tile_counters_.get(), 0, tile_counters_.bytes()));
    }
    // The portable small-token kernel's counters, h and partial sums, where it can run here.
    size_t stream_bytes = 0;
    if (ffn_stream_scratch_bytes(precision_of<T>(), m_, c_, &stream_bytes).ok()) {
      FL_TRY(stream_scratch_.allocate(stream_bytes));
      FL_CUDA_TRY(cudaMemset(stream_scratch_.get(), 0, stream_scratch_.bytes()));
    }
    // The hidden-slice kernel's counters, sum and shares, where it can run here.
    size_t slice_bytes = 0;
    if (ffn_slice_scratch_bytes(precision_of<T>(), m_, c_, &slice_bytes).ok()) {
      FL_TRY(slice_scratch_.allocate(slice_bytes));
      FL_CUDA_TRY(cudaMemset(slice_scratch_.get(), 0, slice_scratch_.bytes()));
    }
    // The portable large-token kernel's tickets and per-row-block counters (left zero by it).
    FL_TRY(tiles_counters_.allocate(ffn_tiles_counter_bytes(m_)));
    FL_CUDA_TRY(cudaMemset(tiles_counters_.get(), 0, tiles_counters_.bytes()));
    FL_TRY(up_.allocate());
    return down_.allocate();
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    FL_TRY(fill_uniform(x_.as<T>(), m_ * c_, seed, gemm::kXLo, gemm::kXHi, stream));
    FL_TRY(up_.fill(seed, 0, stream));
    return down_.fill(seed, 1, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    return poison_elements<T>(
        {{&t_, m_ * h_}, {&u_, m_ * h_}, {&hid_, m_ * h_}, {&s_, m_ * c_}, {&y_, m_ * c_}}, stream);
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    const gemm::CheckArgs<T> a{x_.as<T>(), nullptr,         nullptr,      up_.weights(),
                               up_.bias(), down_.weights(), down_.bias(), y_.as<T>(),
                               m_,         int(c_),         int(h_),      int(c_)};
    return check_gemm_rows<T, false, true, true>(a, sums_, tolerance_, stream, result);
  }

  // Inputs x (M x C), W1 (C x 4C), b1 (4C), W2 (4C x C), b2 (C); output y.
  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    return download_io<T>({{"x", x_.as<T>(), m_ * c_},
                           up_.weights_tensor("W1"),
                           up_.bias_tensor("b1"),
                           down_.weights_tensor("W2"),
                           down_.bias_tensor("b2")},
                          {{"y", y_.as<T>(), m_ * c_}}, stream, inputs, outputs);
  }

 private:
  // Level 2's kernels (its variants, in the level table below) on this workspace's buffers.
  FfnArgs<T> fused_args() const {
    return {x_.as<T>(),
            up_.weights(),
            up_.bias(),
            down_.weights(),
            down_.bias(),
            y_.as<T>(),
            acc_.as<float>(),
            partial_.as<float>(),
            partial_.bytes(),
            counters_.as<unsigned>(),
            m_,
            static_cast<int>(c_),
            static_cast<int>(h_),
            this->phase_sink()};
  }
  // The cluster kernel in bf16 only: in fp32 its tiles and partial sums leave too little room
  // for all its clusters to be resident at the lesson's shapes.
  Status cluster(cudaStream_t stream) {
    if constexpr (std::is_same_v<T, float>) {
      (void)stream;
      return Status::Unsupported("runs in bf16 only");
    } else {
      FL_TRY(run_ffn_cluster(fused_args(), stream));
      this->declare_phases(ffn_cluster_phases());
      return Status::Ok();
    }
  }
  Status split(cudaStream_t stream) {
    FL_TRY(run_ffn_split(fused_args(), stream));
    this->declare_phases(ffn_split_phases());
    return Status::Ok();
  }
  // The small-token kernel (ffn_small.cu); h goes through the unfused chain's h buffer
  // (level 2 writes it before it reads it).
  Status small(cudaStream_t stream) {
    if constexpr (kRings) {
      const FfnSmallBuffers b{
          x_.as<T>(),        up_.weights(), up_.bias(),   down_.weights(),
          down_.bias(),      y_.as<T>(),    hid_.as<T>(), arrivals_.as<unsigned long long>(),
          this->phase_sink()};
      bool launched = false;
      FL_TRY(try_ffn_small(b, m_, static_cast<int>(c_), static_cast<int>(h_), stream, &launched));
      if (launched) {
        this->declare_phases(ffn_small_phases());
        return Status::Ok();
      }
    }
    return Status::Unsupported("its clusters do not all fit on this GPU at once");
  }
  // The portable small-token kernel (ffn_stream.cu), where its plan fits this GPU.
  Status stream(cudaStream_t stream) {
    if (!stream_scratch_.get()) {
      FL_TRY(ffn_stream_supported(precision_of<T>(), m_, c_));  // says why not
      return Status::Unsupported("its scratch buffer could not be planned");
    }
    const FfnStreamBuffers b{
        x_.as<T>(), up_.weights(),         up_.bias(),        down_.weights(), down_.bias(),
        y_.as<T>(), stream_scratch_.get(), this->phase_sink()};
    FL_TRY(launch_ffn_stream(precision_of<T>(), b, m_, c_, stream));
    this->declare_phases(ffn_stream_phases());
    return Status::Ok();
  }
  // The portable hidden-slice kernel (ffn_hidden_slice.cu), where its plan fits this GPU.
  Status hidden_slice(cudaStream_t stream) {
    if (!slice_scratch_.get()) {
      FL_TRY(ffn_slice_supported(precision_of<T>(), m_, c_));  // says why not
      return Status::Unsupported("its scratch buffer could not be planned");
    }
    const FfnSliceBuffers b{x_.as<T>(),   up_.weights(), up_.bias(),           down_.weights(),
                            down_.bias(), y_.as<T>(),    slice_scratch_.get(), this->phase_sink()};
    FL_TRY(launch_ffn_slice(precision_of<T>(), b, m_, c_, stream));
    this->declare_phases(ffn_slice_phases());
    return Status::Ok();
  }
  // The portable large-token kernel (ffn_tiles.cu); h goes through the unfused chain's h buffer.
  Status tiles(cudaStream_t stream) {
    const FfnTilesBuffers b{
        x_.as<T>(),        up_.weights(), up_.bias(),   down_.weights(),
        down_.bias(),      y_.as<T>(),    hid_.as<T>(), tiles_counters_.as<unsigned>(),
        this->phase_sink()};
    FL_TRY(launch_ffn_tiles(precision_of<T>(), b, m_, c_, stream));
    this->declare_phases(ffn_tiles_phases());
    return Status::Ok();
  }
  // The wgmma kernel (ffn_wgmma.cu), h through the ring buffer.
  Status wgmma(cudaStream_t stream) {
    if constexpr (kRings) {
      int device = 0, sms = 0;
      FL_CUDA_TRY(cudaGetDevice(&device));
      FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
      const FfnWgmmaBuffers b{
          x_.as<T>(),        up_.weights(), up_.bias(),      down_.weights(),
          down_.bias(),      y_.as<T>(),    h_ring_.as<T>(), tile_counters_.as<unsigned>(),
          this->phase_sink()};
      bool launched = false;
      FL_TRY(
          try_ffn_wgmma(b, m_, static_cast<int>(c_), static_cast<int>(h_), sms, stream, &launched));
      if (launched) return Status::Ok();
    }
    return Status::Unsupported("its tiles do not fit on this GPU");
  }

  // Whether level 2 can take the wgmma kernel: bf16 on a build with the wgmma kernels.
  static constexpr bool kRings = std::is_same_v<T, __nv_bfloat16> && kWgmmaBuild;

  int64_t m_, c_, h_;
  double tolerance_;
  DeviceBuffer x_, t_, u_, hid_, s_, y_, sums_, acc_, partial_, counters_, arrivals_, h_ring_,
      tile_counters_, stream_scratch_, slice_scratch_, tiles_counters_;
  LinearLayer<T> up_, down_;
};

// ---- level 2's kernels ----------------------------------------------------------------------
// In the table's order: the first that can run and prefers the token count runs, else the last
// that can run (kernels/level_table.h). The split kernel runs everywhere.
template <typename T>
std::vector<VariantRow<FfnWorkspace<T>>> FfnWorkspace<T>::fused_variants() {
  using Ws = FfnWorkspace;
  const std::vector<Precision> bf16{Precision::bf16};
  return {
      {"ffn_small",
       "each block makes 32 hidden units of h into L2 (W1 by TMA), one grid barrier, then "
       "clusters of 8 split W2 and add their partial sums in distributed shared memory",
       "ffn_small_kernel",
       {90, 90, true, bf16, kFfnClusterTokens, 1, kFfnClusterTokens},
       [](Ws& w, cudaStream_t s) { return w.small(s); },
       [](const Dims& d) { return d.i % 32 == 0 ? "" : "C is not a multiple of 32"; },
       ffn_small_phases()},
      {"ffn_cluster",
       "clusters of 8 (or 4) blocks split C, exchange their partial sums of h in distributed "
       "shared memory, and add their shares of y with 16-byte atomics in L2",
       "ffn_cluster_kernel",
       {90, 0, false, bf16, kFfnClusterTokens, 1, kFfnClusterTokens},
       [](Ws& w, cudaStream_t s) { return w.cluster(s); },
       [](const Dims& d) { return d.i <= 1024 ? "" : "C is over 1024 (128 inputs a block)"; },
       ffn_cluster_phases()},
      {"ffn_wgmma",
       "persistent wgmma tiles of both GEMMs, fed by TMA; h goes through an L2-resident ring of "
       "row blocks, read back by the down tiles soon after it is written",
       "ffn_wgmma_kernel",
       {90, 90, true, bf16, 0, kFfnWgmmaFrom, 0},
       [](Ws& w, cudaStream_t s) { return w.wgmma(s); },
       [](const Dims& d) { return d.i % 8 == 0 ? "" : "C is not a multiple of 8"; },
       ffn_wgmma_phases()},
      {"ffn_hidden_slice",
       "each block owns a slice of the hidden units for both products and asks for W1's columns "
       "and W2's rows of it at once; the blocks' shares of y (bf16 in bf16) meet in L2 after a "
       "grid barrier (nothing passes between blocks before); the table's choice at 1-16 tokens, "
       "where it measured ahead of ffn_stream, and in bf16 to 64 (the next row); on sm_90 too "
       "in fp32, where the Hopper kernels do not run",
       "ffn_hidden_slice_kernel",
       {70, 0, false, {}, kSliceMaxTokens, 1, kSliceFasterTo, 0, {}, "ffn_hidden_slice"},
       [](Ws& w, cudaStream_t s) { return w.hidden_slice(s); },
       {},
       ffn_slice_phases()},
      // The same kernel in bf16 beyond kSliceFasterTo, where its bf16 shares measured ahead of
      // ffn_stream (fp32's shares are twice the bytes, and its slices stop fitting): a second
      // row for the same name, so that fp32 keeps ffn_stream there.
      {"ffn_hidden_slice",
       "in bf16 at 17-64 tokens too: the same kernel, its bf16 shares of y (tile by tile) half "
       "fp32's bytes through L2",
       "ffn_hidden_slice_kernel",
       {80,
        0,
        false,
        bf16,
        kSliceMaxTokens,
        kSliceFasterTo + 1,
        kSliceBf16FasterTo,
        0,
        {},
        "ffn_hidden_slice"},
       [](Ws& w, cudaStream_t s) { return w.hidden_slice(s); },
       {},
       ffn_slice_phases()},
      {"ffn_stream",
       "each block asks for its weights before any arithmetic (an up slice of W1, a tile of W2), "
       "makes its hidden units of h into L2, and after a barrier of its group's blocks "
       "multiplies the group's h by its W2 tile; the 8 groups' partial sums of a column range "
       "meet in L2 (no grid barrier; the GPUs without clusters)",
       "ffn_stream_kernel",
       {70, 0, false, {}, kFfnStreamMaxTokens, 1, kFfnStreamMaxTokens, 89, {}, "ffn_stream"},
       [](Ws& w, cudaStream_t s) { return w.stream(s); },
       {},
       ffn_stream_phases()},
      {"ffn_tiles",
       "both GEMMs as tiles of the GEMM core in one persistent launch (bf16: 128 x 256 from 8K "
       "tokens, 128 x 128 up and 64 x 128 down tiles below): blocks take tiles in ticket order, "
       "up tiles write h (bias + GELU) row block by row block, down tiles read it back from L2 "
       "once their row block's up tiles are done (any GPU, many tokens)",
       "ffn_tiles_kernel",
       {0, 0, false, {}, 0, kFfnTilesFrom, 0},
       [](Ws& w, cudaStream_t s) { return w.tiles(s); },
       [](const Dims& d) { return d.i % 8 == 0 ? "" : "C is not a multiple of 8"; },
       ffn_tiles_phases()},
      {"ffn_split",
       "each block owns a slice of the 4C hidden units (h in shared memory) and adds its share "
       "of y in L2; a grid barrier, then all blocks write y (any GPU: a cooperative launch)",
       "ffn_fused_kernel",
       {},
       [](Ws& w, cudaStream_t s) { return w.split(s); },
       {},
       ffn_split_phases()},
  };
}

// ---- the level table -----------------------------------------------------------------------
// M = s tokens, C = i, H = 4C hidden units, b bytes per element. The two layers' launches count
// as the Linear layer's formulas say (gemm_common.cuh): a GEMM reads its input and its weights
// and writes its output, 2 M C H flops; a bias kernel reads its bias once; FLOPs per element:
// bias 1, GELU 8. The fused kernel reads x, both weights and both biases once and writes y once.
template <typename T>
const LevelTable<FfnWorkspace<T>>& FfnWorkspace<T>::levels() {
  using Ws = FfnWorkspace;
  static const LinearRows<Ws> up = linear_rows<Ws>(&Ws::up_, kUp);
  static const LinearRows<Ws> down = linear_rows<Ws>(&Ws::down_, kDown);
  static const LevelTable<Ws> table = {
      {"unfused",
       "GEMM, bias, GELU, GEMM, bias: the 4C-wide tensor makes three round trips through HBM",
       "each GEMM's tiles, within its launch; t, u, h and s go to HBM and back",
       {up.gemm, up.add_bias, up.gelu, down.gemm, down.add_bias}},
      {"epilogues",
       "two cuBLASLt GEMMs with fused epilogues: h written once, read once",
       "each GEMM's tiles, and its product, activated or biased in registers before its store; "
       "h goes to HBM and back once",
       {up.epilogue, down.epilogue}},
      {"fused",
       "one tensor-core kernel: below 256 tokens split over the 4C hidden units (each block makes "
       "a slice of h and, with its cluster, a share of y); from 256 tokens both GEMMs' tiles, h "
       "through a ring buffer",
       "each block's slice of h = GELU(x W1 + b1), left in L2 and read back after one barrier "
       "(Hopper) or kept in shared memory, the shares of y meeting in shared memory or L2; or, "
       "from 256 tokens, h's row blocks in a ring buffer, read back by the down tiles soon after "
       "they are written (L2 still writes them back to HBM: see the counters)",
       {{"ffn_fused", nullptr,
         [](const Dims& d) {
           const int64_t tokens = d.s * d.i * d.b, weights = d.i * 4 * d.i * d.b;  // x or y; W
           const double gemm = 2.0 * d.s * d.i * (4 * d.i), hidden = 1.0 * d.s * (4 * d.i);
           return Textbook{tokens + 2 * weights + 4 * d.i * d.b + d.i * d.b, tokens,
                           2 * gemm + kGeluFlops * hidden + hidden + 1.0 * d.s * d.i};
         },
         fused_variants()}}},
  };
  return table;
}

// ---- the lesson ----------------------------------------------------------------------------

class Ffn final : public GemmLesson<FfnWorkspace> {
 public:
  Ffn()
      : GemmLesson("ffn", "FFN (C -> 4C -> C)",
                   "y = GELU_tanh(x W1 + b1) W2 + b2,  W1: C x 4C,  W2: 4C x C") {}

  // inputs: x (M x C), W1 (C x 4C), b1 (4C), W2 (4C x C), b2 (C).
  std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const override {
    const LinearInputs up(inputs, 1), down(inputs, 3);
    std::vector<double> h(up.n);
    auto row = [&](const double* x, double* y) {  // one row of y from one row of x
      up.row(x, h.data());
      for (double& v : h) v = gelu_tanh_reference(v);
      down.row(h.data(), y);
    };
    return {reference_rows(inputs.at(0).values, up.k, down.n, row)};
  }

 protected:
  // x, s, y (M x C); W1, W2; b1, b2; t, u, h (M x H); the fused level's fp32 accumulator (M x C),
  // counters (40 + 8 bytes) and, at up to 64 tokens, the hidden slices' shares of y (at most 32
  // MiB).
  int64_t buffer_bytes(int64_t m, int64_t c, int64_t b) const override {
    const int64_t h = 4 * c;
    // bf16 on Hopper builds: the wgmma kernel's h ring and counters too.
    const int64_t ring =
        b == 2 && kWgmmaBuild ? ffn_wgmma_ring_rows(m) * h * b + ffn_wgmma_counters(m) * 4 : 0;
    const int64_t tiles = int64_t(ffn_tiles_counter_bytes(m));  // ffn_tiles' counters
    return (3 * m * c + 2 * c * h + h + c + 3 * m * h) * b + m * c * 4 + 48 + ring + tiles +
           (m <= 64 ? std::min<int64_t>((h + 31) / 32 * m * c * 4, int64_t(32) << 20) : 0);
  }
};

}  // namespace

FL_DEFINE_LESSON(ffn, Ffn);

}  // namespace fl
