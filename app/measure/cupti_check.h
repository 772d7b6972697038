// Turns CUPTI return codes into fl::Status, like FL_CUDA_TRY does for the CUDA runtime: the
// failing call, CUPTI's own name and text for the code, and where. Every CUPTI call in the
// measurement library goes through FL_CUPTI_TRY or is checked by hand where a code selects a
// degraded mode (counters not permitted, another profiler attached).
#pragma once

#include <cupti.h>

#include <string>

#include "kernels/status.h"

namespace fl {

inline std::string cupti_result_text(CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) {
    return "CUPTI error " + std::to_string(static_cast<int>(result));
  }
  return text;
}

inline Status cupti_status(CUptiResult result, const char* call, const char* file, int line) {
  if (result == CUPTI_SUCCESS) return Status::Ok();
  return Status::Error(std::string(call) + " failed: " + cupti_result_text(result) + " at " + file +
                       ":" + std::to_string(line));
}

}  // namespace fl

#define FL_CUPTI_TRY(call) FL_TRY(::fl::cupti_status((call), #call, __FILE__, __LINE__))
