// The live backend: runs lesson kernels on GPU 0 and times them.
//
// Timing (this first cut) uses CUDA events around every launch: the events of one repetition
// bracket the chain, so the chain time includes the gaps between launches, which is what
// fusion removes at small sizes. CUPTI activity records replace the events in the engine issue.
//
// Cold cache: before every repetition, a read-only pass over a buffer of at least 2x L2 evicts
// the lesson's data. A flush that writes would leave dirty lines that the next kernel pays for.
#pragma once

#include <map>
#include <memory>
#include <utility>

#include "app/measure/backend.h"
#include "kernels/device_buffer.h"
#include "kernels/lesson.h"

namespace fl {

struct LiveOptions {
  int min_repetitions = 20;
  int max_repetitions = 2000;
  double target_seconds = 0.2;  // time budget per level; repetitions adapt to it
  uint64_t seed = 0;            // 0: a fresh seed per measurement
};

class LiveBackend final : public MeasureBackend {
 public:
  // Fails with one plain sentence when no usable GPU is present (no driver, no device).
  static Status create(const LiveOptions& options, std::unique_ptr<LiveBackend>* out);
  ~LiveBackend() override;

  const DeviceFacts& device() const override { return device_; }
  const char* kind() const override { return "live"; }
  Status measure(const MeasureRequest& request, const CancelCheck& cancelled,
                 std::vector<Measurement>* out) override;

  // Copy bandwidth (GB/s, bytes read + written) of the faster of cudaMemcpy device-to-device and
  // a 16-byte-vector copy kernel, moving `bytes_moved` bytes in total. Cached per (bytes, mode).
  Status copy_bandwidth(int64_t bytes_moved, CacheMode cache, double* gbps);
  // The device's roof: copy bandwidth over 1 GiB, cold. Stored in device().roof_gbps.
  Status measure_roof();

  // Largest size of `lesson` (at row length `inner`, 0 = default) that fits in free device
  // memory next to our own buffers.
  int64_t largest_fitting_size(const Lesson& lesson, Precision p, int64_t inner = 0) const;

 private:
  LiveBackend() = default;
  Status init();
  Status flush_l2();
  Status measure_level(const Lesson& lesson, const MeasureRequest& request, int level,
                       const CancelCheck& cancelled, Measurement* m);
  Status ensure_workspace(const Lesson& lesson, Shape shape, Precision p);
  // Median time (us) of `body` over repetitions, flushing L2 before each one when cold.
  template <typename Body>
  Status time_median(CacheMode cache, int repetitions, Body body, double* median_us);

  LiveOptions options_;
  DeviceFacts device_;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer flush_buffer_, flush_sink_;
  std::map<std::pair<int64_t, int>, double> copy_cache_;
  uint64_t seed_counter_ = 0;

  // The workspace of the last (lesson, size, precision): moving the fusion slider reuses it.
  std::unique_ptr<Workspace> workspace_;
  std::string workspace_lesson_;
  Shape workspace_shape_;
  Precision workspace_precision_ = Precision::fp32;
};

// Device facts without creating a context-owning backend (used by `fusionlab --version`-like
// queries and the UI's "no GPU" banner). Never fails: an unusable device has usable=false.
DeviceFacts query_device();

}  // namespace fl
