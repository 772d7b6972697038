// Random inputs, poison and the check's final arithmetic (declared in device_common.cuh).
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace fl {

namespace {

template <typename T>
__global__ void fill_uniform_kernel(T* data, int64_t n, uint64_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    data[i] = Elem<T>::from_float(uniform_at(seed, i, lo, hi));
  }
}

template <typename T>
__global__ void fill_value_kernel(T* data, int64_t n, float value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    data[i] = Elem<T>::from_float(value);
  }
}

unsigned fill_blocks(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

}  // namespace

template <typename T>
Status fill_uniform(T* data, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  fill_uniform_kernel<T><<<fill_blocks(n), 256, 0, stream>>>(data, n, seed, lo, hi);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

template <typename T>
Status fill_nan(T* data, int64_t n, cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  fill_value_kernel<T>
      <<<fill_blocks(n), 256, 0, stream>>>(data, n, std::numeric_limits<float>::quiet_NaN());
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

template Status fill_uniform<float>(float*, int64_t, uint64_t, float, float, cudaStream_t);
template Status fill_uniform<__nv_bfloat16>(__nv_bfloat16*, int64_t, uint64_t, float, float,
                                            cudaStream_t);
template Status fill_nan<float>(float*, int64_t, cudaStream_t);
template Status fill_nan<__nv_bfloat16>(__nv_bfloat16*, int64_t, cudaStream_t);

CheckResult finish_check(const ErrorSums& sums, double tolerance, double rms_floor) {
  CheckResult r;
  r.rel_l2_error =
      relative_l2_error(sums.err2, sums.ref2, static_cast<int64_t>(sums.count), rms_floor);
  double max_abs;
  static_assert(sizeof(max_abs) == sizeof(sums.max_abs_bits), "double is 64 bits");
  std::memcpy(&max_abs, &sums.max_abs_bits, sizeof(max_abs));
  r.max_abs_error = max_abs;
  r.non_finite = static_cast<int64_t>(sums.non_finite);
  r.tolerance = tolerance;
  r.passed = r.non_finite == 0 && std::isfinite(r.rel_l2_error) && r.rel_l2_error <= tolerance;
  return r;
}

}  // namespace fl
