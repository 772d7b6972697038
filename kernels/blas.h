// cuBLASLt matrix multiplies for the GEMM lessons (6-8): Y = X W (+ bias) (then GELU), row-major
// X (m x k, the tokens), W (k x n, the weights), Y (m x n); fp32 or bf16 storage, fp32
// accumulation. The "cuBLAS GEMM" of a level 0 and the "cuBLASLt epilogue" of a fused level are
// the same call with a different epilogue, so the two levels differ only in what fusion changes.
//
// cuBLASLt is column-major. A row-major m x n matrix is the column-major n x m matrix with the
// same bytes, so Y = X W is computed as Y^T = W^T X^T: A = W (n x k, leading dimension n),
// B = X (k x m, leading dimension k), D = Y (n x m, leading dimension n). The bias is one value
// per row of D, i.e. per output feature: exactly cuBLASLt's bias epilogue.
//
// One algorithm is chosen per shape when the plan is made (cuBLASLt's heuristic, first answer),
// so every repetition runs the same kernels. cuBLASLt may launch more than one kernel for one
// call (split-K with a separate reduction); the measurement engine sums such launches.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/lesson.h"
#include "kernels/status.h"

namespace fl::blas {

enum class Epilogue {
  none,       // D = A B
  bias,       // D = A B + bias
  gelu_bias,  // D = GELU(A B + bias), cuBLASLt's GELU (the tanh form)
};

// TF32 tensor-core math for fp32 GEMMs: off by default (fp32 results then match an fp32
// reference to ~1e-6), switched on by `fusionlab bench --allow-tf32`. Process-wide; set it
// before plans are made.
// Before cudaDeviceReset (the live backend, after a kernel fault): drops the process's cuBLASLt
// handle and workspace, made on the context the reset destroys; the next plan makes new ones.
// Every Gemm must be destroyed first.
void forget_device_state();

// Bytes of the process's cuBLASLt workspace as allocated (every plan's run may use it); 0 before
// the first plan.
int64_t workspace_bytes();

bool allow_tf32();
void set_allow_tf32(bool allow);

// A planned GEMM of one shape, precision and epilogue. Cheap to run; making one asks cuBLASLt
// for an algorithm (a few milliseconds).
class Gemm {
 public:
  static Status plan(int64_t m, int64_t n, int64_t k, Precision precision, Epilogue epilogue,
                     std::unique_ptr<Gemm>* out);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // x: m x k, w: k x n, bias: n (ignored for Epilogue::none), y: m x n; all row-major, of the
  // precision the plan was made for.
  Status run(const void* x, const void* w, const void* bias, void* y, cudaStream_t stream) const;

 private:
  Gemm() = default;
  friend class BatchedGemm;  // shares Impl's descriptors
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A strided batch of GEMMs with no epilogue (the attention lessons' S = Q K^T and O = P V, one
// per head): for b < batch, Y_b (m x n) = alpha X_b (m x k) W_b, row-major, where W_b is k x n,
// or, with w_transposed, W_b^T is stored (n x k: the keys K, whose rows are the columns of K^T).
// Consecutive problems are m k, k n and m n elements apart.
class BatchedGemm {
 public:
  static Status plan(int64_t batch, int64_t m, int64_t n, int64_t k, bool w_transposed, float alpha,
                     Precision precision, std::unique_ptr<BatchedGemm>* out);
  ~BatchedGemm();
  BatchedGemm(const BatchedGemm&) = delete;
  BatchedGemm& operator=(const BatchedGemm&) = delete;

  Status run(const void* x, const void* w, void* y, cudaStream_t stream) const;

 private:
  BatchedGemm() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fl::blas
