// Turns CUDA runtime return codes into fl::Status with the failing call and its location.
// Every CUDA call in the project goes through FL_CUDA_TRY, and every kernel launch is followed
// by FL_CUDA_TRY(cudaGetLastError()): an exit code of 0 proves nothing (METHOD.md).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/status.h"

namespace fl {

inline Status cuda_status(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return Status::Ok();
  return Status::Error(std::string(call) + " failed: " + cudaGetErrorName(err) + " (" +
                       cudaGetErrorString(err) + ") at " + file + ":" + std::to_string(line));
}

}  // namespace fl

#define FL_CUDA_TRY(call) FL_TRY(::fl::cuda_status((call), #call, __FILE__, __LINE__))
