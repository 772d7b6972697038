// The FFN lesson's workspace (kernels/ffn/ffn.cu has the lesson, its level table,
// FfnWorkspace<T>::levels(), and level 2's variant rows, fused_variants()): x, the two Linear
// layers (W1, b1, W2, b2 and their cuBLASLt plans), the unfused chain's t, u, h and s, y, and the
// fused kernels' reduction state, counters and scratch (made once when the buffers are
// allocated, left zero by every run).
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/blas.h"
#include "kernels/device_buffer.h"
#include "kernels/ffn/ffn_common.cuh"
#include "kernels/ffn/ffn_hidden_slice.h"
#include "kernels/ffn/ffn_small.h"
#include "kernels/ffn/ffn_stream.h"
#include "kernels/ffn/ffn_tiles.h"
#include "kernels/ffn/ffn_two_phase.h"
#include "kernels/ffn/ffn_wgmma.h"
#include "kernels/gemm_common.cuh"
#include "kernels/level_table.h"
#include "kernels/workspace.cuh"

namespace fl::ffn {

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

  static const LevelTable<FfnWorkspace>& levels();                // the ladder, in ffn.cu
  static std::vector<VariantRow<FfnWorkspace>> fused_variants();  // level 2's kernels, in ffn.cu

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
      // ... and W1 packed for its slices (fill_inputs lays it out).
      FL_TRY(w1_packed_.allocate(ffn_slice_packed_w1_bytes(precision_of<T>(), c_)));
    }
    // The two-phase kernel's counters and fp32 accumulator of y (left zero by it).
    size_t two_phase_bytes = 0;
    if (ffn_two_phase_scratch_bytes(precision_of<T>(), m_, c_, &two_phase_bytes).ok()) {
      FL_TRY(two_phase_scratch_.allocate(two_phase_bytes));
      FL_CUDA_TRY(cudaMemset(two_phase_scratch_.get(), 0, two_phase_scratch_.bytes()));
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
    // The hidden slice's W1 packed for its plan's slices: a one-time copy at setup, like
    // ln_mma_folded's folded weights (a plan that takes other slice widths reads W1's columns).
    w1_packed_units_ = 0;
    if (w1_packed_.get()) {
      FL_TRY(ffn_slice_pack_w1(precision_of<T>(), up_.weights(), m_, c_, w1_packed_.get(),
                               &w1_packed_units_, stream));
    }
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
  // Level 2's kernels (its variants, in ffn.cu's level table) on this workspace's buffers.
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
    const FfnSliceBuffers b{
        x_.as<T>(), up_.weights(),        up_.bias(),         down_.weights(),  down_.bias(),
        y_.as<T>(), slice_scratch_.get(), this->phase_sink(), w1_packed_.get(), w1_packed_units_};
    FL_TRY(launch_ffn_slice(precision_of<T>(), b, m_, c_, stream));
    this->declare_phases(ffn_slice_phases());
    return Status::Ok();
  }
  // The portable two-phase kernel (ffn_two_phase.cu); h goes through the unfused chain's h
  // buffer (level 2 writes it before it reads it).
  Status two_phase(cudaStream_t stream) {
    if (!two_phase_scratch_.get()) {
      FL_TRY(ffn_two_phase_supported(precision_of<T>(), m_, c_));  // says why not
      return Status::Unsupported("its scratch buffer could not be planned");
    }
    const FfnTwoPhaseBuffers b{
        x_.as<T>(),        up_.weights(), up_.bias(),   down_.weights(),
        down_.bias(),      y_.as<T>(),    hid_.as<T>(), two_phase_scratch_.get(),
        this->phase_sink()};
    FL_TRY(launch_ffn_two_phase(precision_of<T>(), b, m_, c_, stream));
    this->declare_phases(ffn_two_phase_phases());
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
      tile_counters_, stream_scratch_, slice_scratch_, tiles_counters_, two_phase_scratch_,
      w1_packed_;
  int w1_packed_units_ = 0;  // the slice width w1_packed_ was laid out for (0: none)
  LinearLayer<T> up_, down_;
};

}  // namespace fl::ffn
