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

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return message_; }

  // Prefixes context ("gelu_scale level 1: ") to an error; success passes through unchanged.
  Status with_context(const std::string& context) const {
    return ok() ? *this : Status(context + ": " + message_);
  }

 private:
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
  bool failed_ = false;
  std::string message_;
};

}  // namespace fl

// Returns from the enclosing function if `expr` (a Status) failed.
#define FL_TRY(expr)                         \
  do {                                       \
    ::fl::Status fl_status_ = (expr);        \
    if (!fl_status_.ok()) return fl_status_; \
  } while (0)
