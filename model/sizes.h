// Sizes as people write them: "1K" = 1024, "16M" = 16 * 2^20, "1G" = 2^30 (binary, as the
// tutorial's "16M elements (64 MB of fp32)"), or plain digits ("1000003").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/lesson.h"
#include "kernels/status.h"

namespace fl {

// The largest size parse_size accepts, 2^62 (4294967296G): a lesson's own maximum is far below;
// this bound only keeps the arithmetic on sizes from overflowing.
constexpr int64_t kMaxParsedSize = int64_t(1) << 62;

Status parse_size(const std::string& text, int64_t* out);
Status parse_size_list(const std::string& text, std::vector<int64_t>* out);  // "1K,1M,16M"
// --levels: "all" (leaves *out empty: every level) or comma-separated numbers from 0 to
// kMaxLevelNumber ("0,1,3"). Which levels a lesson has is checked against the lesson later.
constexpr int kMaxLevelNumber = 1000;
Status parse_level_list(const std::string& text, std::vector<int>* out);

// Whether `lesson` takes `size`: 1 up to its size axis' maximum. The one check (and message) of
// bench --sizes, a script's `size` and the window: "gelu_scale takes sizes from 1 to 256M
// elements, got 1G".
Status check_lesson_size(const LessonInfo& lesson, int64_t size);

std::string format_size(int64_t n);      // "16M" when exact, else "1000003"
std::string format_bytes(double bytes);  // "64.0 MiB"

}  // namespace fl
