// gemm_ladder_bench: every rung of the portable GEMM core's ladder (kernels/gemm_core/
// gemm_ladder.h) beside cuBLASLt's plain GEMM (Epilogue::none; on an H100 its Hopper kernels),
// in one process so that the ratios come from one run, at the lessons' GEMM shapes: the
// LayerNorm-Linear's x W (tokens x 768 x 2304) at 1K and 16K tokens and the FFN's up (16K x 768
// x 3072) and down (16K x 3072 x 768) projections. Cold L2: before every timed launch a kernel
// reads a buffer of 256 MB. Timed with CUDA events around the one launch; median of `reps`.
// Inputs random, never zeros; each rung's output is checked against cuBLASLt's (relative L2
// error) so a fast wrong rung cannot hide. Prints one line per rung and shape: ms, TFLOP/s,
// fraction of cuBLASLt.
// First (bf16 runs) mma.sync's own rate on registers, the figure the core's prediction is
// written against, and a check that every form of ln_mma_rows writes the same bytes at odd
// shapes. Then the large-token fused kernels' candidates in bf16, each form against the others
// at 1K, 4K and 16K tokens (C = 768), timed the same way: the LayerNorm-Linear's ln_tile and
// ln_mma_rows with each option (outputs against ln_tile's), and ffn_tiles with each tile shape
// (outputs against the 128 x 128 form's).
// Then ln_mma and ffn_tiles in fp32 on the CUDA-core tile, timed only.
//   gemm_ladder_bench [reps] [fp32]
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/blas.h"
#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/ffn/ffn_tiles.h"
#include "kernels/gemm_core/gemm_ladder.h"
#include "kernels/layernorm_linear/ln_common.cuh"
#include "tests/support/bench_check.h"

namespace {

#define CHECK(expr) FL_BENCH_CHECK("gemm_ladder_bench", expr)
#define CUDA(expr) CHECK(fl::cuda_status((expr), #expr, __FILE__, __LINE__))

// Uniform in [-1, 1), by the lessons' own filler (kernels/device_common.cuh).
void fill_random(void* out, bool bf16, int64_t n, unsigned seed) {
  CHECK(bf16 ? fl::fill_uniform(static_cast<__nv_bfloat16*>(out), n, seed, -1.0f, 1.0f, nullptr)
             : fl::fill_uniform(static_cast<float*>(out), n, seed, -1.0f, 1.0f, nullptr));
}

__global__ void read_all(const int4* p, int64_t n, int* sink) {
  int acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    acc ^= p[i].x;
  }
  if (acc == 0x12345678) *sink = acc;
}

// Sum of squares of a - b and of b (relative L2 error of a against b), in double.
__global__ void diff_sums(const void* a, const void* b, bool bf16, int64_t n, double* sums) {
  double num = 0, den = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const double x = bf16 ? double(__bfloat162float(static_cast<const __nv_bfloat16*>(a)[i]))
                          : double(static_cast<const float*>(a)[i]);
    const double y = bf16 ? double(__bfloat162float(static_cast<const __nv_bfloat16*>(b)[i]))
                          : double(static_cast<const float*>(b)[i]);
    num += (x - y) * (x - y);
    den += y * y;
  }
  atomicAdd(&sums[0], num);  // sm_60+
  atomicAdd(&sums[1], den);
}

struct Buf {
  void* p = nullptr;
  explicit Buf(size_t bytes) { CUDA(cudaMalloc(&p, bytes)); }
  ~Buf() { cudaFree(p); }
};

// The LayerNorm-Linear's arguments over the bench's buffers: y = LN(x) W + b, C -> 3C.
template <class T>
fl::layernorm_linear::LnArgs<T> ln_args(const Buf& x, const Buf& gamma, const Buf& beta,
                                        const Buf& w, const Buf& bias, Buf& y, int64_t m,
                                        int64_t c) {
  return {static_cast<const T*>(x.p),
          static_cast<const T*>(gamma.p),
          static_cast<const T*>(beta.p),
          static_cast<const T*>(w.p),
          static_cast<const T*>(bias.p),
          static_cast<T*>(y.p),
          m,
          int(c),
          int(3 * c),
          fl::PhaseSink()};
}

struct Shape {
  const char* what;
  int64_t m, n, k;
};

// Median ms of `reps` cold launches of `launch`.
template <class F>
float median_ms(int reps, Buf& flush, Buf& sink, F launch) {
  cudaEvent_t start, stop;
  CUDA(cudaEventCreate(&start));
  CUDA(cudaEventCreate(&stop));
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    read_all<<<1024, 256>>>(static_cast<const int4*>(flush.p), (size_t(256) << 20) / 16,
                            static_cast<int*>(sink.p));
    CUDA(cudaEventRecord(start));
    CHECK(launch());
    CUDA(cudaEventRecord(stop));
    CUDA(cudaEventSynchronize(stop));
    float t = 0;
    CUDA(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  CUDA(cudaEventDestroy(start));
  CUDA(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The mma.sync peak the core's prediction is written against: each warp issues 8 independent
// chains of m16n8k16 (bf16 in, fp32 accumulate) on registers, no memory traffic; blocks of 8
// warps, `per_sm` blocks an SM.
__global__ void mma_peak(int iters, float* sink) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned a = 0x3f803f80u + (threadIdx.x & 1), b = 0x3f803f80u;  // bf16 pairs near 1
  float c[8][4] = {};
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
          "{%8,%9}, {%0,%1,%2,%3};\n"
          : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
          : "r"(a), "r"(a), "r"(a), "r"(a), "r"(b), "r"(b));
    }
  }
  float s = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  if (s == 1.2345f) *sink = s;
#endif
}
void bench_mma_peak(Buf& sink) {
  int sms = 0;
  CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int iters = 4096;
  for (int per_sm : {1, 2, 4}) {
    const int blocks = sms * per_sm;
    mma_peak<<<blocks, 256>>>(iters, static_cast<float*>(sink.p));  // warm-up
    cudaEvent_t start, stop;
    CUDA(cudaEventCreate(&start));
    CUDA(cudaEventCreate(&stop));
    CUDA(cudaEventRecord(start));
    mma_peak<<<blocks, 256>>>(iters, static_cast<float*>(sink.p));
    CUDA(cudaEventRecord(stop));
    CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA(cudaEventElapsedTime(&ms, start, stop));
    const double flop = double(blocks) * 8 * iters * 8 * 4096.0;
    std::printf("mma.sync peak (m16n8k16 bf16, %2d warps an SM): %8.3f ms %7.1f TFLOP/s\n",
                8 * per_sm, ms, flop / ms * 1e-9);
    CUDA(cudaEventDestroy(start));
    CUDA(cudaEventDestroy(stop));
  }
}

void bench_shape(const Shape& s, fl::Precision p, int reps, Buf& flush, Buf& sink) {
  const bool bf = p == fl::Precision::bf16;
  const size_t b = bf ? 2 : 4;
  Buf a(s.m * s.k * b), w(s.k * s.n * b), ref(s.m * s.n * b), out(s.m * s.n * b), sums(16);
  fill_random(a.p, bf, s.m * s.k, 1234u);
  fill_random(w.p, bf, s.k * s.n, 5678u);
  CUDA(cudaGetLastError());
  std::unique_ptr<fl::blas::Gemm> gemm;
  CHECK(fl::blas::Gemm::plan(s.m, s.n, s.k, p, fl::blas::Epilogue::none, &gemm));
  const double flop = 2.0 * s.m * s.n * s.k;
  const float blas_ms =
      median_ms(reps, flush, sink, [&] { return gemm->run(a.p, w.p, nullptr, ref.p, nullptr); });
  std::printf("%-6s %-22s %-5s %8.3f ms %7.1f TFLOP/s  1.00x cuBLASLt\n", s.what, "cublaslt",
              fl::to_string(p), blas_ms, flop / blas_ms * 1e-9);
  const auto& rungs = fl::gemm_core::gemm_ladder();
  for (size_t r = 0; r < rungs.size(); ++r) {
    if (rungs[r].precision != p) continue;
    CUDA(cudaMemset(out.p, 0xff, s.m * s.n * b));
    const fl::Status first =
        fl::gemm_core::launch_ladder_rung(r, a.p, w.p, out.p, s.m, s.n, s.k, nullptr);
    if (!first.ok()) {
      std::printf("%-6s %-22s %-5s %s\n", s.what, rungs[r].name.c_str(), fl::to_string(p),
                  first.message().c_str());
      continue;
    }
    CUDA(cudaMemset(sums.p, 0, 16));
    diff_sums<<<256, 256>>>(out.p, ref.p, bf, s.m * s.n, static_cast<double*>(sums.p));
    double host[2];
    CUDA(cudaMemcpy(host, sums.p, 16, cudaMemcpyDeviceToHost));
    const double err = std::sqrt(host[0] / host[1]);
    const float ms = median_ms(reps, flush, sink, [&] {
      return fl::gemm_core::launch_ladder_rung(r, a.p, w.p, out.p, s.m, s.n, s.k, nullptr);
    });
    std::printf("%-6s %-22s %-5s %8.3f ms %7.1f TFLOP/s  %.2fx cuBLASLt  err %.1e%s\n", s.what,
                rungs[r].name.c_str(), fl::to_string(p), ms, flop / ms * 1e-9, blas_ms / ms, err,
                err < (bf ? 1e-2 : 1e-5) ? "" : "  WRONG");
  }
}

// Relative L2 error of out against ref (n elements of bf16 or fp32).
double rel_error(const Buf& out, const Buf& ref, bool bf, int64_t n) {
  Buf sums(16);
  CUDA(cudaMemset(sums.p, 0, 16));
  diff_sums<<<256, 256>>>(out.p, ref.p, bf, n, static_cast<double*>(sums.p));
  double host[2];
  CUDA(cudaMemcpy(host, sums.p, 16, cudaMemcpyDeviceToHost));
  return std::sqrt(host[0] / host[1]);
}

// The fused candidates of one token count: name, launch, the reference it is checked against.
struct Candidate {
  const char* name;
  std::function<fl::Status()> launch;
};
void bench_candidates(const char* what, int64_t m, double flop, int64_t out_elems,
                      std::vector<Candidate> cs, Buf& out, int reps, Buf& flush, Buf& sink) {
  Buf ref(out_elems * 2);
  for (size_t i = 0; i < cs.size(); ++i) {
    CUDA(cudaMemset(out.p, 0xff, out_elems * 2));  // NaN-poisoned: unwritten outputs show
    const fl::Status first = cs[i].launch();
    if (!first.ok()) {
      std::printf("%-6s %-22s %lld tokens: %s\n", what, cs[i].name, (long long)m,
                  first.message().c_str());
      continue;
    }
    CUDA(cudaDeviceSynchronize());
    double err = 0;
    if (i == 0) {
      CUDA(cudaMemcpy(ref.p, out.p, out_elems * 2, cudaMemcpyDeviceToDevice));
    } else {
      err = rel_error(out, ref, true, out_elems);
    }
    const float ms = median_ms(reps, flush, sink, cs[i].launch);
    std::printf("%-6s %-22s %6lld tokens %8.3f ms %7.1f TFLOP/s  err vs %s %.1e%s\n", what,
                cs[i].name, (long long)m, ms, flop / ms * 1e-9, cs[0].name, err,
                err < 1e-2 ? "" : "  WRONG");
  }
}

// The LayerNorm-Linear's candidates at m tokens (C = 768): ln_tile first (the outputs'
// reference), ln_panel where it runs (up to 256 tokens), ln_mma_rows' forms (all of them unless
// `focus`), ln_mma_tiles' tiles (64 x 64; 64 x 128 at one block an SM and as many as fit; 8
// warps of 32 x 32; two K groups; 32 x 128, alone and in two K groups; some in 2-4 parts of K)
// and its kept one.
void bench_ln(int64_t m, bool focus, int reps, Buf& flush, Buf& sink) {
  namespace ln = fl::layernorm_linear;
  using bf16 = __nv_bfloat16;
  const int64_t c = 768;
  Buf x(m * c * 2), gamma(c * 2), beta(c * 2), w(c * 3 * c * 2), bias(3 * c * 2), y(m * 3 * c * 2),
      xn(m * c * 2), counters(ln::ln_mma_tiles_counter_bytes(m, 3 * c));
  CUDA(cudaMemset(counters.p, 0, ln::ln_mma_tiles_counter_bytes(m, 3 * c)));
  fill_random(x.p, true, m * c, 11u);
  fill_random(gamma.p, true, c, 12u);
  fill_random(beta.p, true, c, 13u);
  fill_random(w.p, true, c * 3 * c, 14u);
  fill_random(bias.p, true, 3 * c, 15u);
  auto a = ln_args<bf16>(x, gamma, beta, w, bias, y, m, c);
  a.xn = static_cast<bf16*>(xn.p);
  a.counters = static_cast<unsigned*>(counters.p);
  const auto rows = [&a](int stats, int loop) {
    return [&a, stats, loop] {
      return ln::launch_ln_mma_rows(a, ln::LnRowsShape{128, stats, loop}, nullptr);
    };
  };
  const auto tiles = [&a](int tile, int per_sm, int splits = 1, int normalize = 1) {
    return [&a, tile, per_sm, splits, normalize] {
      return ln::launch_ln_mma_tiles(a, ln::LnTilesShape{tile, per_sm, splits, normalize, 0},
                                     nullptr);
    };
  };
  const auto local = [&tiles](int tile) { return tiles(tile, 0, 1, 2); };
  std::vector<Candidate> cs = {{"ln_tile", [&] { return ln::launch_ln_tile(a, nullptr); }}};
  if (m <= ln::kLnClusterRows)
    cs.push_back({"ln_panel", [&] { return ln::launch_ln_panel(a, nullptr); }});
  if (!focus) {
    cs.insert(cs.end(), {{"ln_mma_rows_s0_l0", rows(0, 0)},
                         {"ln_mma_rows_s1_l0", rows(1, 0)},
                         {"ln_mma_rows_s2_l0", rows(2, 0)},
                         {"ln_mma_rows_s2_l1", rows(2, 1)},
                         {"ln_mma_rows_s2_l2", rows(2, 2)},
                         {"ln_mma_rows_s2_l3", rows(2, 3)},
                         {"ln_mma_rows_s2_l4", rows(2, 4)},
                         {"ln_mma_rows_r64", [&] {
                            return ln::launch_ln_mma_rows(a, ln::LnRowsShape{64}, nullptr);
                          }}});
  }
  if (focus) {  // each tile normalizing its own rows, and the deeper rings
    cs.insert(cs.end(), {{"local_64x64", local(1)},
                         {"local_64x128", local(2)},
                         {"local_64x128_w8", local(3)},
                         {"local_64x128_k2", local(4)},
                         {"local_64x128_w8_8st", local(7)},
                         {"local_64x128_k2_6st", local(8)},
                         {"local (kept rule)", local(0)},
                         {"ln_mma_tiles_64x128_w8_8st", tiles(7, 0)},
                         {"ln_mma_tiles_64x128_k2_6st", tiles(8, 0)},
                         {"ln_mma_tiles (kept)", tiles(0, 0, 0, 0)}});
  }
  cs.insert(cs.end(), {{"ln_mma_rows (kept)",
                        [&] { return ln::launch_ln_mma_rows(a, ln::LnRowsShape{}, nullptr); }},
                       {"ln_mma_tiles_64x64", tiles(1, 0)},
                       {"ln_mma_tiles_64x64_s2", tiles(1, 0, 2)},
                       {"ln_mma_tiles_64x64_s3", tiles(1, 0, 3)},
                       {"ln_mma_tiles_64x128_1sm", tiles(2, 1)},
                       {"ln_mma_tiles_64x128", tiles(2, 0)},
                       {"ln_mma_tiles_64x128_s2", tiles(2, 0, 2)},
                       {"ln_mma_tiles_64x128_s3", tiles(2, 0, 3)},
                       {"ln_mma_tiles_64x128_s4", tiles(2, 0, 4)},
                       {"ln_mma_tiles_64x128_w8", tiles(3, 0)},
                       {"ln_mma_tiles_64x128_w8_s2", tiles(3, 0, 2)},
                       {"ln_mma_tiles_64x128_k2", tiles(4, 0)},
                       {"ln_mma_tiles_64x128_k2_s2", tiles(4, 0, 2)},
                       {"ln_mma_tiles_32x128", tiles(5, 0)},
                       {"ln_mma_tiles_32x128_s2", tiles(5, 0, 2)},
                       {"ln_mma_tiles_32x128_k2", tiles(6, 0)},
                       {"ln_mma_tiles (kept)", tiles(0, 0, 0, 0)}});
  bench_candidates("lnlin", m, 2.0 * m * c * 3 * c, m * 3 * c, cs, y, reps, flush, sink);
}

// ffn_tiles' shapes at m tokens (C = 768): the 128 x 128 form first (the outputs' reference);
// with `focus` only the 128 x 256 forms (staged outputs, narrow tail, both, neither).
void bench_ffn(int64_t m, bool focus, int reps, Buf& flush, Buf& sink) {
  const int64_t c = 768;
  Buf x(m * c * 2), w1(c * 4 * c * 2), b1(4 * c * 2), w2(4 * c * c * 2), b2(c * 2), y(m * c * 2),
      h(m * 4 * c * 2), counters(fl::ffn_tiles_counter_bytes(m));
  CUDA(cudaMemset(counters.p, 0, fl::ffn_tiles_counter_bytes(m)));
  fill_random(x.p, true, m * c, 21u);
  fill_random(w1.p, true, 4 * c * c, 22u);
  fill_random(b1.p, true, 4 * c, 23u);
  fill_random(w2.p, true, 4 * c * c, 24u);
  fill_random(b2.p, true, c, 25u);
  const fl::FfnTilesBuffers b{x.p,  w1.p, b1.p, w2.p,
                              b2.p, y.p,  h.p,  static_cast<unsigned*>(counters.p)};
  auto shape = [&](fl::FfnTilesShape s) {
    return [&b, m, c, s] { return fl::launch_ffn_tiles(fl::Precision::bf16, b, m, c, nullptr, s); };
  };
  std::vector<Candidate> cs = {{"ffn_tiles_128x128", shape(fl::FfnTilesShape::k128x128)}};
  if (!focus) cs.push_back({"ffn_tiles_down64", shape(fl::FfnTilesShape::k128x128_down64)});
  cs.insert(cs.end(),
            {{"ffn_tiles_128x256_direct", shape(fl::FfnTilesShape::k128x256_direct)},
             {"ffn_tiles_128x256_staged", shape(fl::FfnTilesShape::k128x256_staged)},
             {"ffn_tiles_128x256_tail", shape(fl::FfnTilesShape::k128x256_tail)},
             {"ffn_tiles_128x256 (both)", shape(fl::FfnTilesShape::k128x256)},
             {"ffn_tiles_128x256_direct again", shape(fl::FfnTilesShape::k128x256_direct)}});
  bench_candidates("ffn", m, 4.0 * m * c * 4 * c, m * c, cs, y, reps, flush, sink);
}

void bench_fused(int reps, Buf& flush, Buf& sink, bool focus) {
  for (int64_t m : focus ? std::vector<int64_t>{128, 256, 1024, 4096}
                         : std::vector<int64_t>{256, 1024, 4096, 16384}) {
    bench_ln(m, focus, reps, flush, sink);
  }
  for (int64_t m :
       focus ? std::vector<int64_t>{8192, 16384} : std::vector<int64_t>{1024, 4096, 8192, 16384}) {
    bench_ffn(m, focus, reps, flush, sink);
  }
}

// The forms of one kernel must agree bit for bit (each adds the same products in the same
// order): ln_mma_rows' statistics and main-loop forms against the first, at odd token counts
// and C, each output NaN-poisoned first. Prints one line a
// shape; "WRONG" where any byte differs or a form fails.
bool same_output(const std::vector<std::function<fl::Status()>>& forms, const Buf& out,
                 size_t bytes) {
  std::vector<char> first(bytes), other(bytes);
  for (size_t i = 0; i < forms.size(); ++i) {
    CUDA(cudaMemset(out.p, 0xff, bytes));
    if (!forms[i]().ok()) return false;
    CUDA(cudaDeviceSynchronize());
    CUDA(cudaMemcpy(i == 0 ? first.data() : other.data(), out.p, bytes, cudaMemcpyDeviceToHost));
    if (i > 0 && other != first) return false;
  }
  return true;
}
void check_forms() {
  namespace ln = fl::layernorm_linear;
  using bf16 = __nv_bfloat16;
  for (auto [m, c] : {std::pair<int64_t, int64_t>{1031, 776}, {301, 1024}, {4099, 264}}) {
    Buf x(m * c * 2), gamma(c * 2), beta(c * 2), w(c * 3 * c * 2), bias(3 * c * 2),
        y(m * 3 * c * 2);
    unsigned seed = 41;
    for (auto [buf, n] :
         {std::pair{&x, m * c}, {&gamma, c}, {&beta, c}, {&w, 3 * c * c}, {&bias, 3 * c}}) {
      fill_random(buf->p, true, n, seed++);
    }
    const auto a = ln_args<bf16>(x, gamma, beta, w, bias, y, m, c);
    std::vector<std::function<fl::Status()>> forms;
    for (int stats = 0; stats < 3; ++stats) {
      for (int loop = 0; loop < 5; ++loop) {
        forms.push_back([&a, stats, loop] {
          return ln::launch_ln_mma_rows(a, ln::LnRowsShape{128, stats, loop}, nullptr);
        });
      }
    }
    std::printf("forms  ln_mma_rows %lld x %lld: 3 statistics x 5 loops %s\n", (long long)m,
                (long long)c, same_output(forms, y, m * 3 * c * 2) ? "agree" : "WRONG");
  }
}

// The fp32 large-token kernels on the lessons' fp32 tile at 1K, 4K, 16K tokens (C = 768): ln_mma
// (column tiles grouped as the launcher chooses, and one a block) and ffn_tiles (down tiles split
// over K as it chooses, and whole), to set beside the bare GEMM's rows (the gap is the fusion's
// own cost). Timed only: their outputs are checked against fp64 by the GPU tests (GemmCore.*).
void bench_fused_fp32(int reps, Buf& flush, Buf& sink) {
  namespace ln = fl::layernorm_linear;
  const int64_t c = 768;
  for (int64_t m : {1024, 4096, 16384}) {
    Buf x(m * c * 4), gamma(c * 4), beta(c * 4), w(c * 4 * c * 4), bias(4 * c * 4),
        w2(4 * c * c * 4), b2(c * 4), y(m * 3 * c * 4), h(m * 4 * c * 4),
        counters(fl::ffn_tiles_counter_bytes(m));
    CUDA(cudaMemset(counters.p, 0, fl::ffn_tiles_counter_bytes(m)));
    unsigned seed = 31;
    for (auto [buf, n] : {std::pair{&x, m * c},
                          {&gamma, c},
                          {&beta, c},
                          {&w, 4 * c * c},
                          {&bias, 4 * c},
                          {&w2, 4 * c * c},
                          {&b2, c}}) {
      fill_random(buf->p, false, n, seed++);
    }
    const auto a = ln_args<float>(x, gamma, beta, w, bias, y, m, c);
    const fl::FfnTilesBuffers b{x.p,  w.p, bias.p, w2.p,
                                b2.p, y.p, h.p,    static_cast<unsigned*>(counters.p)};
    const auto row = [&](const char* what, const char* name, double flop, auto launch) {
      const float ms = median_ms(reps, flush, sink, launch);
      std::printf("%-6s %-22s %6lld tokens %8.3f ms %7.1f TFLOP/s\n", what, name, (long long)m, ms,
                  flop / ms * 1e-9);
    };
    const double ln_flop = 2.0 * m * c * 3 * c, ffn_flop = 4.0 * m * c * 4 * c;
    row("lnlin", "ln_mma fp32", ln_flop, [&] { return ln::launch_ln_mma(a, nullptr); });
    row("lnlin", "ln_mma fp32 1 tile", ln_flop,
        [&] { return ln::launch_ln_mma_groups(a, 1, nullptr); });
    row("ffn", "ffn_tiles fp32", ffn_flop,
        [&] { return fl::launch_ffn_tiles(fl::Precision::fp32, b, m, c, nullptr); });
    row("ffn", "ffn_tiles fp32 whole", ffn_flop, [&] {
      return fl::launch_ffn_tiles(fl::Precision::fp32, b, m, c, nullptr,
                                  fl::FfnTilesShape::k128x128);
    });
  }
}

// One launch of each kernel worth profiling at the LayerNorm-Linear's 16K shape, for Nsight
// Compute (`ncu -k regex:...`): the bf16 rungs from prefetched on, then ln_mma_rows' forms 2-4.
void profile_launches() {
  namespace ln = fl::layernorm_linear;
  using bf16 = __nv_bfloat16;
  const int64_t m = 16384, c = 768;
  Buf x(m * c * 2), gamma(c * 2), beta(c * 2), w(c * 3 * c * 2), bias(3 * c * 2), y(m * 3 * c * 2);
  unsigned seed = 51;
  for (auto [buf, n] :
       {std::pair{&x, m * c}, {&gamma, c}, {&beta, c}, {&w, 3 * c * c}, {&bias, 3 * c}}) {
    fill_random(buf->p, true, n, seed++);
  }
  const auto& rungs = fl::gemm_core::gemm_ladder();
  for (size_t r = 0; r < rungs.size(); ++r) {
    if (rungs[r].precision != fl::Precision::bf16 || r < 4) continue;  // prefetched on
    CHECK(fl::gemm_core::launch_ladder_rung(r, x.p, w.p, y.p, m, 3 * c, c, nullptr));
    CUDA(cudaDeviceSynchronize());
  }
  const auto a = ln_args<bf16>(x, gamma, beta, w, bias, y, m, c);
  for (int loop = 2; loop < 5; ++loop) {
    CHECK(ln::launch_ln_mma_rows(a, ln::LnRowsShape{128, 2, loop}, nullptr));
    CUDA(cudaDeviceSynchronize());
  }
  std::printf("profile launches done\n");
}

}  // namespace

// gemm_ladder_bench [reps] [fp32 | bf16 | fused | lntiles | profile]: fp32 only the fp32 rungs
// and fp32 fused kernels; bf16 only the bf16 ones; fused only the bf16 fused kernels' candidates
// (the LayerNorm-Linear at 256-4K tokens, ffn_tiles' 128 x 256 forms at 8K and 16K); lntiles only
// the LayerNorm-Linear's at 129, 256, 512 and 1023 tokens; profile only profile_launches().
int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(3, std::atoi(argv[1])) : 15;
  Buf flush(size_t(256) << 20), sink(64);
  CUDA(cudaMemset(flush.p, 1, size_t(256) << 20));
  const Shape shapes[] = {{"ln1K", 1024, 2304, 768},
                          {"ln16K", 16384, 2304, 768},
                          {"up16K", 16384, 3072, 768},
                          {"dn16K", 16384, 768, 3072}};
  const std::string mode = argc > 2 ? argv[2] : "";
  if (mode == "profile") {
    profile_launches();
    return 0;
  }
  if (mode == "fused") {  // only the bf16 fused kernels' candidates at the sizes they are for
    bench_fused(reps, flush, sink, true);
    return 0;
  }
  if (mode == "lntiles") {  // only the LayerNorm-Linear's candidates at 129 to 1023 tokens
    for (int64_t m : {129, 256, 512, 1023}) bench_ln(m, true, reps, flush, sink);
    return 0;
  }
  const bool fp32_only = mode == "fp32", bf16_only = mode == "bf16";
  if (!fp32_only) bench_mma_peak(sink);
  if (!fp32_only) check_forms();
  for (fl::Precision p : {fl::Precision::bf16, fl::Precision::fp32}) {
    if ((fp32_only && p == fl::Precision::bf16) || (bf16_only && p == fl::Precision::fp32)) {
      continue;
    }
    for (const Shape& s : shapes) bench_shape(s, p, reps, flush, sink);
  }
  if (!fp32_only) bench_fused(reps, flush, sink, false);
  if (!bf16_only) bench_fused_fp32(reps, flush, sink);
  return 0;
}
