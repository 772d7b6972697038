// A measurement backend: what the engine's worker thread drives. The live backend runs the
// lesson kernels on the GPU; tests use a fake; replay (a recording) arrives with the sessions
// work. A backend is created, used and destroyed on the engine's worker thread only, since the
// live one owns the CUDA context.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "app/measure/results.h"
#include "kernels/status.h"

namespace fl {

// Returns true when the work in flight should be abandoned (a newer request arrived).
using CancelCheck = std::function<bool()>;

// Progress of a long measurement, 0..1, with a short phrase ("gelu_scale level 1").
using ProgressCallback = std::function<void(double fraction, const std::string& what)>;

class MeasureBackend {
 public:
  virtual ~MeasureBackend() = default;
  virtual const DeviceFacts& device() const = 0;
  // "live" or "recorded".
  virtual const char* kind() const = 0;
  // Measures every requested level; a refused or failed request is a Status with one sentence.
  // Returning early because `cancelled()` turned true gives Status::Ok() and partial results.
  virtual Status measure(const MeasureRequest& request, const CancelCheck& cancelled,
                         std::vector<Measurement>* out) = 0;
};

}  // namespace fl
