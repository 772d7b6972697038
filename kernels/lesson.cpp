// Precision helpers and small shared pieces of the lesson interface.
#include <cmath>
#include <string>

#include "kernels/lesson.h"

#include "kernels/catalog.h"

namespace fl {

const char* to_string(Precision p) {
  return p == Precision::fp32 ? "fp32" : "bf16";
}

bool parse_precision(const std::string& text, Precision* out) {
  if (text == "fp32")
    *out = Precision::fp32;
  else if (text == "bf16")
    *out = Precision::bf16;
  else
    return false;
  return true;
}

int bytes_per_element(Precision p) {
  return p == Precision::fp32 ? 4 : 2;
}

std::string precision_unsupported_reason(Precision p, int cc_major, int cc_minor) {
  if (p == Precision::bf16 && cc_major < 8) {
    return "bf16 needs compute capability 8.0 (Ampere) or newer; this GPU is " +
           std::to_string(cc_major) + "." + std::to_string(cc_minor) + ", so only fp32 runs here";
  }
  return "";
}

double relative_l2_error(double err2, double ref2, int64_t count, double rms_floor) {
  const double denominator = std::sqrt(ref2 + double(count) * rms_floor * rms_floor);
  return denominator > 0 ? std::sqrt(err2) / denominator : 0.0;
}

int64_t total_bytes(const std::vector<LaunchTraffic>& launches) {
  int64_t sum = 0;
  for (const auto& l : launches) sum += l.bytes();
  return sum;
}

// Over the lessons() of whichever catalog the build links (catalog.cpp, or catalog_replay.cpp in
// the replay-only build).
const Lesson* find_lesson(const std::string& id) {
  for (const Lesson* lesson : lessons()) {
    if (lesson->info().id == id) return lesson;
  }
  return nullptr;
}

}  // namespace fl
