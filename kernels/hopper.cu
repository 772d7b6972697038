// Host side of kernels/hopper.cuh: TMA descriptors, built through the driver's entry point so
// that the program does not link against libcuda (absent on a machine without a GPU, where the
// app still starts and replays recordings).
#include "kernels/hopper.cuh"

#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <string>

#include "kernels/cuda_check.h"

namespace fl::hopper {
namespace {

using EncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;

// The driver's cuTensorMapEncodeTiled, looked up once; nullptr when the driver lacks it.
EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                           cudaEnableDefault, &found);
#else
    const cudaError_t e =
        cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, &found);
#endif
    if (e != cudaSuccess || found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();  // not sticky, but leave no error behind for the next check
      return static_cast<EncodeTiled>(nullptr);
    }
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

}  // namespace

Status make_tensor_map_2d(CUtensorMap* map, const __nv_bfloat16* base, int64_t rows, int64_t cols,
                          int box_rows, int box_cols, int swizzle, int64_t row_stride) {
  const EncodeTiled encode = encode_tiled();
  if (!encode) {
    return Status::Error(
        "the CUDA driver does not offer cuTensorMapEncodeTiled (TMA descriptors need a driver "
        "for CUDA 12 or newer)");
  }
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t stride_bytes[1] = {static_cast<cuuint64_t>(row_stride > 0 ? row_stride : cols) *
                                      sizeof(__nv_bfloat16)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r =
      encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<__nv_bfloat16*>(base), dims,
             stride_bytes, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    return Status::Error("cuTensorMapEncodeTiled refused a " + std::to_string(rows) + " x " +
                         std::to_string(cols) + " matrix with " + std::to_string(box_rows) + " x " +
                         std::to_string(box_cols) + " boxes (CUresult " +
                         std::to_string(static_cast<int>(r)) + ")");
  }
  return Status::Ok();
}

Status current_device(bool* sm90, int* optin_shared) {
  int device = 0, major = 0, minor = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  FL_CUDA_TRY(
      cudaDeviceGetAttribute(optin_shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  *sm90 = major == 9 && minor == 0;
  return Status::Ok();
}

}  // namespace fl::hopper
