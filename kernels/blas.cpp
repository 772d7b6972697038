// cuBLASLt GEMMs (see blas.h). One cuBLASLt handle and one workspace per process, made on first
// use; the measurement engine has one worker, so plans run one at a time.
#include "kernels/blas.h"

#include <cublasLt.h>

#include <atomic>
#include <mutex>

#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"

namespace fl::blas {
namespace {

std::atomic<bool> g_allow_tf32{false};

// cuBLASLt's recommended workspace for Hopper is 32 MiB; older GPUs use less of it.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

std::string lt_error(cublasStatus_t s, const char* call) {
  return std::string(call) + " failed: " + cublasLtGetStatusName(s) + " (" +
         cublasLtGetStatusString(s) + ")";
}

#define FL_LT_TRY(call)                                          \
  do {                                                           \
    const cublasStatus_t fl_lt_status = (call);                  \
    if (fl_lt_status != CUBLAS_STATUS_SUCCESS) {                 \
      return ::fl::Status::Error(lt_error(fl_lt_status, #call)); \
    }                                                            \
  } while (0)

constexpr size_t kHeuristicsCacheEntries = 256;  // cuBLASLt's heuristics cache (see context())

// The process's handle and workspace. Never destroyed: plans may outlive any owner we could
// name, and the driver reclaims both at exit.
struct Context {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
};

std::mutex g_context_mutex;
Context* g_context = nullptr;

Status context(Context** out) {
  std::lock_guard<std::mutex> lock(g_context_mutex);
  Context*& ctx = g_context;
  if (ctx == nullptr) {
    // Cap: cuBLASLt keeps one process-wide cache of its heuristics' answers, an entry per GEMM
    // shape asked about, 8192 entries by default: a size slider dragged for hours asks about
    // thousands of shapes (the live soak's resident memory grew in steps as new GEMM shapes
    // were planned; docs/RELIABILITY.md has what the cap changed). The lessons' plans are made
    // once per workspace (kernels/blas.h), so a small cache costs nothing measurable.
    FL_LT_TRY(cublasLtHeuristicsCacheSetCapacity(kHeuristicsCacheEntries));
    auto fresh = std::make_unique<Context>();
    FL_LT_TRY(cublasLtCreate(&fresh->handle));
    const Status allocated = fresh->workspace.allocate(kWorkspaceBytes);
    if (!allocated.ok()) {
      cublasLtDestroy(fresh->handle);
      return allocated.with_context("cuBLASLt workspace");
    }
    ctx = fresh.release();
  }
  *out = ctx;
  return Status::Ok();
}

}  // namespace

void forget_device_state() {
  std::lock_guard<std::mutex> lock(g_context_mutex);
  if (g_context == nullptr) return;
  cublasLtDestroy(g_context->handle);  // may report the lost context; the handle is gone anyway
  delete g_context;                    // frees the workspace (or fails quietly on a lost context)
  g_context = nullptr;
}

int64_t workspace_bytes() {
  std::lock_guard<std::mutex> lock(g_context_mutex);
  return g_context == nullptr ? 0 : static_cast<int64_t>(g_context->workspace.bytes());
}

bool allow_tf32() {
  return g_allow_tf32.load();
}
void set_allow_tf32(bool allow) {
  g_allow_tf32.store(allow);
}

struct Gemm::Impl {
  Context* ctx = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  Epilogue epilogue = Epilogue::none;

  ~Impl() {
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

Gemm::~Gemm() = default;

Status Gemm::plan(int64_t m, int64_t n, int64_t k, Precision precision, Epilogue epilogue,
                  std::unique_ptr<Gemm>* out) {
  if (m < 1 || n < 1 || k < 1) {
    return Status::Error("a GEMM needs m, n, k >= 1; got " + std::to_string(m) + " x " +
                         std::to_string(n) + " x " + std::to_string(k));
  }
  std::unique_ptr<Gemm> gemm(new Gemm());
  gemm->impl_ = std::make_unique<Impl>();
  Impl& g = *gemm->impl_;
  g.epilogue = epilogue;
  FL_TRY(context(&g.ctx));

  const bool fp32 = precision == Precision::fp32;
  const cudaDataType_t type = fp32 ? CUDA_R_32F : CUDA_R_16BF;
  const cublasComputeType_t compute =
      fp32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  FL_LT_TRY(cublasLtMatmulDescCreate(&g.desc, compute, CUDA_R_32F));
  const cublasOperation_t no_transpose = CUBLAS_OP_N;
  FL_LT_TRY(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSA, &no_transpose,
                                           sizeof(no_transpose)));
  FL_LT_TRY(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSB, &no_transpose,
                                           sizeof(no_transpose)));
  cublasLtEpilogue_t lt_epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (epilogue == Epilogue::bias) lt_epilogue = CUBLASLT_EPILOGUE_BIAS;
  if (epilogue == Epilogue::gelu_bias) lt_epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  FL_LT_TRY(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt_epilogue,
                                           sizeof(lt_epilogue)));
  if (epilogue != Epilogue::none) {
    // The bias has the output's type (cuBLASLt's default for bf16 D; fp32 for fp32 D).
    FL_LT_TRY(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type,
                                             sizeof(type)));
  }

  // Column-major views of the row-major tensors (blas.h): A = W^T, B = X^T, D = Y^T.
  FL_LT_TRY(cublasLtMatrixLayoutCreate(&g.a, type, static_cast<uint64_t>(n),
                                       static_cast<uint64_t>(k), n));
  FL_LT_TRY(cublasLtMatrixLayoutCreate(&g.b, type, static_cast<uint64_t>(k),
                                       static_cast<uint64_t>(m), k));
  FL_LT_TRY(cublasLtMatrixLayoutCreate(&g.d, type, static_cast<uint64_t>(n),
                                       static_cast<uint64_t>(m), n));

  cublasLtMatmulPreference_t preference = nullptr;
  FL_LT_TRY(cublasLtMatmulPreferenceCreate(&preference));
  size_t workspace = g.ctx->workspace.bytes();
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = cublasLtMatmulAlgoGetHeuristic(g.ctx->handle, g.desc, g.a, g.b, g.d, g.d, preference, 1,
                                       &result, &found);
  }
  cublasLtMatmulPreferenceDestroy(preference);
  if (s != CUBLAS_STATUS_SUCCESS)
    return Status::Error(lt_error(s, "cublasLtMatmulAlgoGetHeuristic"));
  if (found == 0) {
    return Status::Error("cuBLASLt has no algorithm for a " + std::string(to_string(precision)) +
                         " GEMM of " + std::to_string(m) + " x " + std::to_string(k) + " by " +
                         std::to_string(k) + " x " + std::to_string(n) + " on this GPU");
  }
  g.algo = result.algo;
  *out = std::move(gemm);
  return Status::Ok();
}

Status Gemm::run(const void* x, const void* w, const void* bias, void* y,
                 cudaStream_t stream) const {
  const Impl& g = *impl_;
  if (g.epilogue != Epilogue::none) {
    FL_LT_TRY(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                             sizeof(bias)));
  }
  const float alpha = 1.0f, beta = 0.0f;
  FL_LT_TRY(cublasLtMatmul(g.ctx->handle, g.desc, &alpha, w, g.a, x, g.b, &beta, y, g.d, y, g.d,
                           &g.algo, g.ctx->workspace.get(), g.ctx->workspace.bytes(), stream));
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

struct BatchedGemm::Impl {
  Gemm::Impl layouts;  // the descriptors, destroyed with it
  float alpha = 1.0f;
};

BatchedGemm::~BatchedGemm() = default;

Status BatchedGemm::plan(int64_t batch, int64_t m, int64_t n, int64_t k, bool w_transposed,
                         float alpha, Precision precision, std::unique_ptr<BatchedGemm>* out) {
  if (batch < 1 || batch > INT32_MAX || m < 1 || n < 1 || k < 1) {
    return Status::Error("a batched GEMM needs 1 <= batch < 2^31 and m, n, k >= 1; got " +
                         std::to_string(batch) + " x " + std::to_string(m) + " x " +
                         std::to_string(n) + " x " + std::to_string(k));
  }
  std::unique_ptr<BatchedGemm> gemm(new BatchedGemm());
  gemm->impl_ = std::make_unique<Impl>();
  gemm->impl_->alpha = alpha;
  Gemm::Impl& g = gemm->impl_->layouts;
  FL_TRY(context(&g.ctx));
  const bool fp32 = precision == Precision::fp32;
  const cudaDataType_t type = fp32 ? CUDA_R_32F : CUDA_R_16BF;
  const cublasComputeType_t compute =
      fp32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  FL_LT_TRY(cublasLtMatmulDescCreate(&g.desc, compute, CUDA_R_32F));
  // Column-major, as in Gemm: D = Y^T (n x m) = op(A) B with B = X^T (k x m) and op(A) = W^T
  // (n x k): W row-major k x n is a column-major n x k matrix (no transpose); a stored W^T
  // (row-major n x k) is a column-major k x n matrix that cuBLASLt transposes.
  const cublasOperation_t op_a = w_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = CUBLAS_OP_N;
  FL_LT_TRY(
      cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  FL_LT_TRY(
      cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  if (w_transposed) {
    FL_LT_TRY(cublasLtMatrixLayoutCreate(&g.a, type, u(k), u(n), k));
  } else {
    FL_LT_TRY(cublasLtMatrixLayoutCreate(&g.a, type, u(n), u(k), n));
  }
  FL_LT_TRY(cublasLtMatrixLayoutCreate(&g.b, type, u(k), u(m), k));
  FL_LT_TRY(cublasLtMatrixLayoutCreate(&g.d, type, u(n), u(m), n));
  const int32_t count = static_cast<int32_t>(batch);
  const int64_t strides[3] = {k * n, m * k, m * n};
  cublasLtMatrixLayout_t layouts[3] = {g.a, g.b, g.d};
  for (int l = 0; l < 3; ++l) {
    FL_LT_TRY(cublasLtMatrixLayoutSetAttribute(layouts[l], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                               &count, sizeof(count)));
    FL_LT_TRY(cublasLtMatrixLayoutSetAttribute(
        layouts[l], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[l], sizeof(strides[l])));
  }
  cublasLtMatmulPreference_t preference = nullptr;
  FL_LT_TRY(cublasLtMatmulPreferenceCreate(&preference));
  size_t workspace = g.ctx->workspace.bytes();
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = cublasLtMatmulAlgoGetHeuristic(g.ctx->handle, g.desc, g.a, g.b, g.d, g.d, preference, 1,
                                       &result, &found);
  }
  cublasLtMatmulPreferenceDestroy(preference);
  if (s != CUBLAS_STATUS_SUCCESS)
    return Status::Error(lt_error(s, "cublasLtMatmulAlgoGetHeuristic"));
  if (found == 0) {
    return Status::Error("cuBLASLt has no algorithm for " + std::to_string(batch) + " " +
                         to_string(precision) + " GEMMs of " + std::to_string(m) + " x " +
                         std::to_string(k) + " by " + std::to_string(k) + " x " +
                         std::to_string(n) + " on this GPU");
  }
  g.algo = result.algo;
  *out = std::move(gemm);
  return Status::Ok();
}

Status BatchedGemm::run(const void* x, const void* w, void* y, cudaStream_t stream) const {
  const Gemm::Impl& g = impl_->layouts;
  const float beta = 0.0f;
  FL_LT_TRY(cublasLtMatmul(g.ctx->handle, g.desc, &impl_->alpha, w, g.a, x, g.b, &beta, y, g.d, y,
                           g.d, &g.algo, g.ctx->workspace.get(), g.ctx->workspace.bytes(), stream));
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace fl::blas
