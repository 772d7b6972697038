// DeviceBuffer: RAII owner of one cudaMalloc allocation. Allocation failure is a Status (the
// size slider can ask for more memory than the GPU has), never an exception.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "kernels/cuda_check.h"

namespace fl {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }

  Status allocate(size_t bytes) {
    reset();
    if (bytes == 0) return Status::Ok();
    FL_CUDA_TRY(cudaMalloc(&ptr_, bytes));
    bytes_ = bytes;
    return Status::Ok();
  }
  void reset() {
    if (ptr_ != nullptr) cudaFree(ptr_);  // cannot fail usefully in a destructor
    ptr_ = nullptr;
    bytes_ = 0;
  }

  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace fl
