// Status: the error type every layer returns. Our process lives for hours while a learner drags
// sliders, so nothing below the command line ever exits or throws across a layer: it returns a
// Status whose message says what failed and where, in words a learner can act on.
#pragma once

#include <string>
#include <utility>

namespace fl {

class [[nodiscard]] Status {
 public:
  Status() = default;  // success
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }
  // A kernel variant that finds, as it plans its launch, that it cannot run here (its clusters
  // do not all fit at once, ...): an error, but the level table may pick another variant
  // instead (kernels/level_table.h).
  static Status Unsupported(std::string message) {
    Status s(std::move(message));
    s.unsupported_ = true;
    return s;
  }

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return message_; }
  bool unsupported() const { return unsupported_; }

  // Prefixes context ("gelu_scale level 1: ") to an error; success passes through unchanged.
  Status with_context(const std::string& context) const {
    if (ok()) return *this;
    Status s(context + ": " + message_);
    s.unsupported_ = unsupported_;
    return s;
  }

 private:
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
  bool failed_ = false;
  bool unsupported_ = false;
  std::string message_;
};

}  // namespace fl

// Returns from the enclosing function if `expr` (a Status) failed.
#define FL_TRY(expr)                         \
  do {                                       \
    ::fl::Status fl_status_ = (expr);        \
    if (!fl_status_.ok()) return fl_status_; \
  } while (0)
