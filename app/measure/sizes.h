// Sizes as people write them: "1K" = 1024, "16M" = 16 * 2^20, "1G" = 2^30 (binary, as the
// tutorial's "16M elements (64 MB of fp32)"), or plain digits ("1000003").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/status.h"

namespace fl {

Status parse_size(const std::string& text, int64_t* out);
Status parse_size_list(const std::string& text, std::vector<int64_t>* out);  // "1K,1M,16M"
std::string format_size(int64_t n);      // "16M" when exact, else "1000003"
std::string format_bytes(double bytes);  // "64.0 MiB"

}  // namespace fl
