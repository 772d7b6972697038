// Host helpers every lesson's workspace uses: making the workspace of a precision, running the
// fp64 check, copying tensors to the host for the CPU-reference tests. The launches themselves
// come from the lesson's level table (level_table.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/device_common.cuh"
#include "kernels/lesson.h"

namespace fl {

// Makes the workspace for precision `p`, Ws<float> or Ws<__nv_bfloat16>, constructed from
// `args`, and allocates its buffers (Ws::allocate()): what create_workspace does once a lesson
// has checked the shape.
template <template <typename> class Ws, typename... Args>
Status make_workspace(Precision p, std::unique_ptr<Workspace>* out, const Args&... args) {
  auto make = [&](auto ws) -> Status {
    FL_TRY(ws->allocate());
    *out = std::move(ws);
    return Status::Ok();
  };
  if (p == Precision::fp32) return make(std::make_unique<Ws<float>>(args...));
  return make(std::make_unique<Ws<__nv_bfloat16>>(args...));
}

// A buffer and how many elements it holds (of the element type the call names).
using Elements = std::pair<DeviceBuffer*, int64_t>;

// Allocates each buffer for its count of T: a workspace's allocate(), one line a buffer.
template <typename T>
Status allocate_elements(std::initializer_list<Elements> buffers) {
  for (const auto& [buffer, count] : buffers) FL_TRY(buffer->allocate(count * sizeof(T)));
  return Status::Ok();
}

// Fills each buffer's count of T with NaN: Workspace::poison_outputs, so that an output a
// kernel does not write cannot pass the check.
template <typename T>
Status poison_elements(std::initializer_list<Elements> buffers, cudaStream_t stream) {
  for (const auto& [buffer, count] : buffers) FL_TRY(fill_nan(buffer->as<T>(), count, stream));
  return Status::Ok();
}

// Runs one fp64 check: zeroes `sums`, calls launch_check(ErrorSums*) to enqueue the check kernel
// (it may return a Status), copies the sums back and turns them into a CheckResult.
// Synchronizes `stream`. `rms_floor`: relative_l2_error's.
template <typename LaunchCheck>
Status run_check(const DeviceBuffer& sums, double tolerance, cudaStream_t stream,
                 LaunchCheck launch_check, CheckResult* result,
                 double rms_floor = kDefaultRmsFloor) {
  FL_CUDA_TRY(cudaMemsetAsync(sums.get(), 0, sizeof(ErrorSums), stream));
  if constexpr (std::is_same<decltype(launch_check(sums.as<ErrorSums>())), Status>::value) {
    FL_TRY(launch_check(sums.as<ErrorSums>()));  // a launcher that reports its own errors
  } else {
    launch_check(sums.as<ErrorSums>());
  }
  FL_CUDA_TRY(cudaGetLastError());
  ErrorSums host{};
  FL_CUDA_TRY(cudaMemcpyAsync(&host, sums.get(), sizeof(host), cudaMemcpyDeviceToHost, stream));
  FL_CUDA_TRY(cudaStreamSynchronize(stream));
  *result = finish_check(host, tolerance, rms_floor);
  return Status::Ok();
}

// What a row-wise lesson's workspace holds besides its tensors (residual_layernorm,
// scale_mask_softmax): `rows` rows of `length` elements, n = rows x length in all, and the
// check's tolerance. The workspace derives from this as well as from LevelWorkspace and inherits
// its constructor, so make_workspace constructs it from (rows, length, tolerance).
class RowWorkspaceBase {
 public:
  RowWorkspaceBase(int64_t rows, int length, double tolerance)
      : rows_(rows), length_(length), n_(rows * length), tolerance_(tolerance) {}

 protected:
  // Blocks of `threads` threads for an fp64 check kernel that gives each row one warp (a
  // grid-stride loop over the rows): enough to fill any GPU, at most 4096.
  unsigned warp_per_row_blocks(int threads) const {
    const int warps = threads / 32;
    const int64_t wanted = (rows_ + warps - 1) / warps;
    return static_cast<unsigned>(wanted < 4096 ? wanted : 4096);
  }

  int64_t rows_;
  int length_;
  int64_t n_;
  double tolerance_;
};

// Copies n elements of type T to the host as doubles (for the CPU-reference tests).
template <typename T>
Status download_as_double(const T* device, int64_t n, cudaStream_t stream,
                          std::vector<double>* values) {
  std::vector<T> raw(n);
  FL_CUDA_TRY(cudaMemcpyAsync(raw.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost, stream));
  FL_CUDA_TRY(cudaStreamSynchronize(stream));
  values->resize(n);
  for (int64_t i = 0; i < n; ++i) (*values)[i] = Elem<T>::to_float(raw[i]);
  return Status::Ok();
}

// One tensor a workspace hands to the CPU-reference tests: its name, device data and length.
template <typename T>
struct DeviceTensor {
  const char* name;
  const T* data;
  int64_t count;
};

// Copies `tensors` to the host as doubles, in order: what Workspace::download returns as its
// inputs or its outputs. Synchronizes `stream`.
template <typename T>
Status download_tensors(const std::vector<DeviceTensor<T>>& tensors, cudaStream_t stream,
                        std::vector<HostTensor>* out) {
  out->assign(tensors.size(), HostTensor{});
  for (size_t k = 0; k < tensors.size(); ++k) {
    (*out)[k].name = tensors[k].name;
    FL_TRY(download_as_double(tensors[k].data, tensors[k].count, stream, &(*out)[k].values));
  }
  return Status::Ok();
}

// download()'s usual body: the inputs, then the outputs, each in order.
template <typename T>
Status download_io(const std::vector<DeviceTensor<T>>& in, const std::vector<DeviceTensor<T>>& out,
                   cudaStream_t stream, std::vector<HostTensor>* inputs,
                   std::vector<HostTensor>* outputs) {
  FL_TRY(download_tensors<T>(in, stream, inputs));
  return download_tensors<T>(out, stream, outputs);
}

}  // namespace fl
