// portable_bench: the portable weight-streaming kernels against level 1 (cuBLASLt with fused
// epilogues; for the LayerNorm-Linear, lesson 4's LayerNorm kernel first), in one process so
// that the ratios come from one run. Cold L2: before every timed chain a kernel reads a buffer
// of 4x the L2 (reads: no dirty lines left to write back inside the timed region). Timed by
// CUPTI's kernel records as the app times a chain (first kernel's start to last kernel's end,
// the host's launch latency left out), with CUDA events around the chain beside it; median of
// the repetitions; level 1 and the portable kernel alternate. Inputs: random (never zeros).
// Prints one line per lesson, precision and token count.
//   portable_bench [C] [reps] [bf16|fp32]   (one precision only)
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/measure/cupti_tracer.h"
#include "kernels/blas.h"
#include "kernels/device_common.cuh"
#include "kernels/ffn/ffn_hidden_slice.h"
#include "kernels/ffn/ffn_stream.h"
#include "kernels/layernorm_linear/ln_common.cuh"
#include "kernels/layernorm_linear/ln_linear_stream.h"
#include "kernels/layernorm_rows.cuh"
#include "kernels/tensor_gemm.cuh"
#include "tests/support/bench_check.h"

namespace {

#define CHECK(expr) FL_BENCH_CHECK("portable_bench", expr)
#define CUDA(expr) CHECK(fl::cuda_status((expr), #expr, __FILE__, __LINE__))

__global__ void read_all(const int4* p, int64_t n, int* sink) {
  int acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    acc ^= p[i].x;
  }
  if (acc == 0x12345678) *sink = acc;
}

// The floor under a launch of one block per SM.
__global__ void empty_blocks() {}

// The copy probe: what a weight slice's copies alone cost. Block b asks for `rows` rows of
// `row_bytes` (a multiple of 16) at src + b * block_step + r * stride, all of them by 16-byte
// cp.async before one wait (as the weight-slice kernels do), or, with `regs`, by 16-byte loads
// into registers, kPerThread in flight a thread, stored to shared memory after.
constexpr int kPerThread = 18;
template <bool regs>
__global__ void copy_probe(const char* src, int rows, int row_bytes, int64_t stride,
                           int64_t block_step, int* sink) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int chunks = row_bytes / 16, total = rows * chunks;
  const char* base = src + blockIdx.x * block_step;
  auto at = [&](int i) { return base + int64_t(i / chunks) * stride + (i % chunks) * 16; };
  if constexpr (!regs) {
    for (int i = threadIdx.x; i < total; i += blockDim.x) {
      fl::tc::copy16_async(smem + size_t(i) * 16, at(i), true);
    }
    fl::tc::async_commit();
    fl::tc::async_wait<0>();
  } else {
    for (int i0 = 0; i0 < total; i0 += kPerThread * blockDim.x) {
      int4 v[kPerThread];
#pragma unroll
      for (int u = 0; u < kPerThread; ++u) {
        const int i = i0 + u * blockDim.x + threadIdx.x;
        if (i < total) {
          asm volatile("ld.global.cg.v4.s32 {%0, %1, %2, %3}, [%4];"
                       : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                       : "l"(at(i)));
        }
      }
#pragma unroll
      for (int u = 0; u < kPerThread; ++u) {
        const int i = i0 + u * blockDim.x + threadIdx.x;
        if (i < total) reinterpret_cast<int4*>(smem)[i] = v[u];
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0 && smem[0] == 0x5a && smem[16] == 0x5b) *sink = 1;
}

struct Buf {
  void* p = nullptr;
  explicit Buf(size_t bytes) { CUDA(cudaMalloc(&p, bytes)); }
  ~Buf() { cudaFree(p); }
};

void random_fill(Buf& b, fl::Precision prec, int64_t n, unsigned seed, float scale) {
  // Uniform in [-scale, scale), by the lessons' own filler (kernels/device_common.cuh).
  CHECK(prec == fl::Precision::bf16
            ? fl::fill_uniform(static_cast<__nv_bfloat16*>(b.p), n, seed, -scale, scale, nullptr)
            : fl::fill_uniform(static_cast<float*>(b.p), n, seed, -scale, scale, nullptr));
}

struct Times {
  float cupti_us = 0, events_us = 0;
};

struct Timer {
  Buf flush{size_t(4) * 64 << 20};  // 256 MB: 5x an H100's L2
  Buf sink{64};
  cudaEvent_t start, stop;
  fl::KernelTracer* tracer = nullptr;
  Timer() {
    CUDA(cudaMemset(flush.p, 1, size_t(4) * 64 << 20));
    CUDA(cudaEventCreate(&start));
    CUDA(cudaEventCreate(&stop));
    // Under Nsight Compute CUPTI is taken: the events' times stand in.
    if (!fl::KernelTracer::instance(&tracer).ok()) tracer = nullptr;
  }
  Times once(const std::function<fl::Status()>& chain) {
    read_all<<<1024, 256>>>(static_cast<const int4*>(flush.p), (size_t(4) * 64 << 20) / 16,
                            static_cast<int*>(sink.p));
    CUDA(cudaGetLastError());
    const uint64_t id = tracer ? tracer->reserve_ids(1) : 0;
    CUDA(cudaEventRecord(start));
    if (tracer) CHECK(tracer->push(id));
    CHECK(chain());
    if (tracer) CHECK(tracer->pop());
    CUDA(cudaEventRecord(stop));
    CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (!tracer) return {ms * 1000.0f, ms * 1000.0f};
    CHECK(tracer->flush(false));
    if (tracer->count(id, id) == 0) CHECK(tracer->flush(true));
    std::vector<fl::TracedKernel> kernels;
    tracer->take(id, id, &kernels, nullptr);
    if (kernels.empty()) CHECK(fl::Status::Error("CUPTI delivered no kernel record"));
    uint64_t first = kernels[0].start_ns, last = kernels[0].end_ns;
    for (const fl::TracedKernel& k : kernels) {
      first = std::min(first, k.start_ns);
      last = std::max(last, k.end_ns);
    }
    return {float(last - first) / 1000.0f, ms * 1000.0f};
  }
};

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Several kernels against level 1, interleaved in one loop: one line each, level 1's median
// from the same repetitions.
using Chain = std::pair<std::string, std::function<fl::Status()>>;
void compare_many(const char* lesson, fl::Precision p, int64_t m, Timer& t, int reps,
                  const std::function<fl::Status()>& level1, const std::vector<Chain>& chains) {
  for (int i = 0; i < 3; ++i) {
    t.once(level1);
    for (const Chain& c : chains) t.once(c.second);
  }
  std::vector<float> l1;
  std::vector<std::vector<float>> times(chains.size());
  for (int i = 0; i < reps; ++i) {
    l1.push_back(t.once(level1).cupti_us);
    for (size_t j = 0; j < chains.size(); ++j)
      times[j].push_back(t.once(chains[j].second).cupti_us);
  }
  const float base = median(l1);
  for (size_t j = 0; j < chains.size(); ++j) {
    const float us = median(times[j]);
    std::printf("%-17s %-4s tokens %6lld  level1 %8.2f us  %-24s %8.2f us  ratio %5.2fx\n", lesson,
                fl::to_string(p), static_cast<long long>(m), base, chains[j].first.c_str(), us,
                base / us);
  }
}

void bench_ffn(fl::Precision p, int64_t m, int64_t c, Timer& t, int reps) {
  const int64_t h = 4 * c, e = fl::bytes_per_element(p);
  Buf x(m * c * e), w1(c * h * e), b1(h * e), w2(h * c * e), b2(c * e), hid(m * h * e),
      y(m * c * e);
  random_fill(x, p, m * c, 1, 1.0f);
  random_fill(w1, p, c * h, 2, 0.03f);
  random_fill(b1, p, h, 3, 0.1f);
  random_fill(w2, p, h * c, 4, 0.02f);
  random_fill(b2, p, c, 5, 0.1f);
  if (const fl::Status ok = fl::ffn_stream_supported(p, m, c); !ok.ok()) {
    std::printf("%-17s %-4s tokens %6lld  portable kernel refused: %s\n", "ffn", fl::to_string(p),
                static_cast<long long>(m), ok.message().c_str());
    return;
  }
  std::unique_ptr<fl::blas::Gemm> up, down;
  CHECK(fl::blas::Gemm::plan(m, h, c, p, fl::blas::Epilogue::gelu_bias, &up));
  CHECK(fl::blas::Gemm::plan(m, c, h, p, fl::blas::Epilogue::bias, &down));
  // ffn_stream with its plan's choices, then its groups (1-8), hidden units of an up slice (24,
  // 32), warps (8, 16) and W2 with x and W1 or after them (a form that does not fit is left out).
  const std::pair<const char*, fl::FfnStreamTuning> stream_tunings[] = {
      {"ffn_stream", {}},
      {"stream g1 u24 w8 W2 with", {1, 24, 8, 0}},
      {"stream g1 u24 w8 W2 after", {1, 24, 8, 1}},
      {"stream g8 u24 w8 W2 with", {8, 24, 8, 0}},
      {"stream g8 u24 w8 W2 after", {8, 24, 8, 1}},
      {"stream g8 u24 w16 W2 after", {8, 24, 16, 1}},
      {"stream g8 u32 w16 W2 with", {8, 32, 16, 0}},
      {"stream g8 u32 w16 W2 after", {8, 32, 16, 1}},
      {"stream g4 u32 w16 W2 after", {4, 32, 16, 1}},
  };
  size_t bytes = 0;
  for (const auto& [name, tuning] : stream_tunings) {
    size_t b = 0;
    if (fl::ffn_stream_scratch_bytes(p, m, c, &b, tuning).ok()) bytes = std::max(bytes, b);
  }
  Buf scratch(bytes);
  CUDA(cudaMemset(scratch.p, 0, bytes));
  const fl::FfnStreamBuffers b{x.p, w1.p, b1.p, w2.p, b2.p, y.p, scratch.p, {}};
  std::vector<Chain> chains;
  for (const auto& [name, tuning] : stream_tunings) {
    size_t need = 0;
    if (!fl::ffn_stream_scratch_bytes(p, m, c, &need, tuning).ok()) continue;
    // Only the forms that fit as asked: the plan moves to more groups where one does not fit.
    if (tuning.groups > 0 && m > 16 && tuning.groups == 1) continue;
    chains.push_back({name, [&, tuning = tuning] {
                        return fl::launch_ffn_stream(p, b, m, c, nullptr, tuning);
                      }});
  }
  // The hidden-slice kernel with its plan's choices (32 units on an H100 in bf16, 24 in fp32, W1
  // and W2 at once, fp32's exact rows at 1-8 tokens), on 8 and 16 warps (bf16), then fp32's
  // 16-row tiles at every token count (its other forms are measured in docs/PERFORMANCE.md).
  const std::pair<const char*, fl::FfnSliceTuning> tunings[] = {
      {"hidden_slice", {}},
      {"hidden_slice w8", {0, fl::kSliceRowsTo, false, 8}},
      {"hidden_slice w16", {0, fl::kSliceRowsTo, false, 16}},
      {"hidden_slice fp32 tiles", {0, 0, false, 0}},
  };
  size_t slice_bytes = 0;
  for (const auto& [name, tuning] : tunings) {
    size_t bytes = 0;
    if (fl::ffn_slice_scratch_bytes(p, m, c, &bytes, tuning).ok()) {
      slice_bytes = std::max(slice_bytes, bytes);
    }
  }
  std::unique_ptr<Buf> slice_scratch;
  fl::FfnSliceBuffers sb{x.p, w1.p, b1.p, w2.p, b2.p, y.p, nullptr, {}, nullptr, 0};
  if (slice_bytes > 0) {
    slice_scratch = std::make_unique<Buf>(slice_bytes);
    CUDA(cudaMemset(slice_scratch->p, 0, slice_bytes));
    sb.scratch = slice_scratch->p;
    for (const auto& [name, tuning] : tunings) {
      if (tuning.warps == 16 && p != fl::Precision::bf16) continue;  // bf16 only
      chains.push_back({name, [&, tuning = tuning] {
                          return fl::launch_ffn_slice(p, sb, m, c, nullptr, tuning);
                        }});
    }
  }
  compare_many(
      "ffn", p, m, t, reps,
      [&] {
        FL_TRY(up->run(x.p, w1.p, b1.p, hid.p, nullptr));
        return down->run(hid.p, w2.p, b2.p, y.p, nullptr);
      },
      chains);
}

template <typename T>
fl::Status layernorm(const Buf& x, const Buf& g, const Buf& be, Buf& xn, int64_t m, int c) {
  using fl::layernorm_rows::RowArgs;
  const RowArgs<T> a{nullptr,
                     nullptr,
                     static_cast<const T*>(g.p),
                     static_cast<const T*>(be.p),
                     static_cast<T*>(const_cast<void*>(x.p)),
                     static_cast<T*>(xn.p),
                     nullptr,
                     nullptr,
                     m,
                     c};
  return fl::layernorm_rows::launch_rows<T, fl::layernorm_rows::RowStep::kLayerNorm>(a, nullptr);
}

void bench_ln(fl::Precision p, int64_t m, int64_t c, Timer& t, int reps) {
  const int64_t n = 3 * c, e = fl::bytes_per_element(p);
  Buf x(m * c * e), g(c * e), be(c * e), w(c * n * e), bias(n * e), xn(m * c * e), y(m * n * e);
  random_fill(x, p, m * c, 6, 2.0f);
  random_fill(g, p, c, 7, 1.0f);
  random_fill(be, p, c, 8, 0.2f);
  random_fill(w, p, c * n, 9, 0.03f);
  random_fill(bias, p, n, 10, 0.1f);
  if (const fl::Status ok = fl::ln_stream_supported(p, m, c); !ok.ok()) {
    std::printf("%-17s %-4s tokens %6lld  portable kernel refused: %s\n", "layernorm_linear",
                fl::to_string(p), static_cast<long long>(m), ok.message().c_str());
    return;
  }
  std::unique_ptr<fl::blas::Gemm> gemm;
  CHECK(fl::blas::Gemm::plan(m, n, c, p, fl::blas::Epilogue::bias, &gemm));
  size_t bytes = 0;
  CHECK(fl::ln_stream_scratch_bytes(p, m, c, n, &bytes));
  Buf scratch(bytes + 16);
  CUDA(cudaMemset(scratch.p, 0, bytes + 16));
  const fl::LnStreamBuffers b{x.p, g.p, be.p, w.p, bias.p, y.p, scratch.p};
  const bool bf = p == fl::Precision::bf16;
  // ln_panel with its plan, the earlier plan (multiples of 16 columns), W in 2 stages along K, W
  // asked for with x, once x is in or once it is normalized (FL_LN_PANEL, FL_LN_PANEL_STAGES and
  // FL_LN_PANEL_W, read by the plan at each launch); a shape that does not fit is left out.
  auto panel = [&, bf](const char* plan, const char* stages) {
    if (plan == nullptr) {
      unsetenv("FL_LN_PANEL");
    } else {
      setenv("FL_LN_PANEL", plan, 1);
    }
    setenv("FL_LN_PANEL_STAGES", stages, 1);
    if (bf) {
      using T = __nv_bfloat16;
      const fl::layernorm_linear::LnArgs<T> a{static_cast<const T*>(x.p),
                                              static_cast<const T*>(g.p),
                                              static_cast<const T*>(be.p),
                                              static_cast<const T*>(w.p),
                                              static_cast<const T*>(bias.p),
                                              static_cast<T*>(y.p),
                                              m,
                                              int(c),
                                              int(n),
                                              {}};
      return fl::layernorm_linear::launch_ln_panel<T>(a, nullptr);
    }
    const fl::layernorm_linear::LnArgs<float> a{static_cast<const float*>(x.p),
                                                static_cast<const float*>(g.p),
                                                static_cast<const float*>(be.p),
                                                static_cast<const float*>(w.p),
                                                static_cast<const float*>(bias.p),
                                                static_cast<float*>(y.p),
                                                m,
                                                int(c),
                                                int(n),
                                                {}};
    return fl::layernorm_linear::launch_ln_panel<float>(a, nullptr);
  };
  std::vector<Chain> chains = {
      {"ln_stream", [&] { return fl::launch_ln_stream(p, b, m, c, n, nullptr); }}};
  struct PanelCase {
    const char *plan, *stages, *w, *form;  // FL_LN_PANEL ("": the plan's), _STAGES, _W, _FORM
  };
  // The plan's (form "-", W with x's copies), the same with W once x is in, then each form bit
  // of the one before it (W once x is in) alone and all of them.
  const PanelCase panels[] = {{"", "1", "0", "-"}, {"", "1", "1", "-"}, {"", "1", "1", "0"},
                              {"", "1", "1", "1"}, {"", "1", "1", "2"}, {"", "1", "1", "8"},
                              {"", "1", "1", "11"}};
  auto unset = [] {
    for (const char* v : {"FL_LN_PANEL", "FL_LN_PANEL_STAGES", "FL_LN_PANEL_W", "FL_LN_PANEL_FORM"})
      unsetenv(v);
  };
  for (const PanelCase& pc : panels) {
    const char* env = pc.plan[0] == 0 ? nullptr : pc.plan;
    auto set = [pc] {
      setenv("FL_LN_PANEL_W", pc.w, 1);
      if (pc.form[0] != '-') setenv("FL_LN_PANEL_FORM", pc.form, 1);
    };
    set();
    const bool fits = panel(env, pc.stages).ok();
    unset();
    if (!fits) continue;
    const std::string name = std::string("ln_panel ") + (env ? env : "plan") + " S=" + pc.stages +
                             " W=" + pc.w + " F=" + pc.form;
    chains.push_back({name, [&, env, pc, set, unset] {
                        set();
                        const fl::Status st = panel(env, pc.stages);
                        unset();
                        return st;
                      }});
  }
  unset();
  CUDA(cudaDeviceSynchronize());
  compare_many(
      "layernorm_linear", p, m, t, reps,
      [&] {
        FL_TRY(bf ? layernorm<__nv_bfloat16>(x, g, be, xn, m, int(c))
                  : layernorm<float>(x, g, be, xn, m, int(c)));
        return gemm->run(xn.p, w.p, bias.p, y.p, nullptr);
      },
      chains);
}

// The code probe: kN fused multiply-adds a thread in straight-line code (one 16-byte
// instruction each: kN x 16 bytes of code), one block of 256 threads per SM. Cold, the flush has
// evicted the code from L2 and every instruction comes from DRAM once; warm, the same launch
// again right after. The difference is what fetching that much code costs a kernel's first run.
template <int kN>
__global__ void code_probe(float* out, float b, float c) {
  float a[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] = threadIdx.x + j;
#pragma unroll
  for (int i = 0; i < kN / 8; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(a[j]) : "f"(b), "f"(c));
  }
  float s = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += a[j];
  if (s == 12345.0f) out[threadIdx.x] = s;
}

template <int kN>
void code_probe_case(Timer& t, int reps, int sms, float* out) {
  auto launch = [&] {
    code_probe<kN><<<sms, 256>>>(out, 1.0f, 0.0f);
    return fl::cuda_status(cudaGetLastError(), "code_probe", __FILE__, __LINE__);
  };
  std::vector<float> one, two;
  for (int i = 0; i < reps + 3; ++i) {
    const float a = t.once(launch).cupti_us;
    const float b = t.once([&] {
                       FL_TRY(launch());
                       return launch();
                     }).cupti_us;
    if (i >= 3) one.push_back(a), two.push_back(b);
  }
  std::printf("code probe %5d FMAs (%3d KB of code): cold %7.2f us, cold + warm %7.2f us\n", kN,
              kN * 16 / 1024, median(one), median(two));
}

// The copy probe's cases: the FFN's 9.4 MB of bf16 weights at C = 768 cut into 128 blocks of
// 72 KB (and half that), cold L2, asked for by 256, 512 or 1024 threads or loaded into
// registers: a block's time to have its slice in shared memory, and the rate that makes. (Cases
// of other shapes, 144 KB a block, 48-512-byte rows, 256 or 132 blocks, are not here: a launch
// of them failed with an illegal address that was not found.)
void copy_probes(Timer& t, int reps) {
  {
    int sms = 0;
    CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    Buf out(4096);
    code_probe_case<512>(t, reps, sms, static_cast<float*>(out.p));
    code_probe_case<4096>(t, reps, sms, static_cast<float*>(out.p));
  }
  struct Case {
    const char* name;
    int blocks, rows, row_bytes;
    int64_t stride, step;
    int threads;
    bool regs;
  };
  const int64_t kb72 = 72 * 1024;
  const Case cases[] = {
      {"contiguous 72 KB", 128, 1, int(kb72), 0, kb72, 256, false},
      {"contiguous 72 KB, 512 thr", 128, 1, int(kb72), 0, kb72, 512, false},
      {"contiguous 72 KB, 1024 thr", 128, 1, int(kb72), 0, kb72, 1024, false},
      {"contiguous 72 KB, ld.v4 regs", 128, 1, int(kb72), 0, kb72, 256, true},
      {"contiguous 36 KB", 128, 1, int(kb72 / 2), 0, kb72 / 2, 256, false},
      // The same 72 KB for every block (from L2 after the first miss), and each line read by 4
      // blocks: what an SM's copies reach when the bytes are in L2, as ln_panel's x and W are.
      {"one 72 KB for all blocks", 128, 1, int(kb72), 0, 0, 256, false},
      {"72 KB, each line 4 blocks", 128, 1, int(kb72), 0, kb72 / 4, 256, false},
  };
  Buf src(size_t(2) * 128 * kb72 + 4096);
  CUDA(cudaMemset(src.p, 1, size_t(2) * 128 * kb72 + 4096));
  Buf sink(64);
  for (const Case& k : cases) {
    const int64_t bytes = int64_t(k.rows) * k.row_bytes;
    const auto kernel = k.regs ? copy_probe<true> : copy_probe<false>;
    CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
    std::vector<float> v;
    for (int i = 0; i < reps + 3; ++i) {
      const float us =
          t.once([&] {
             kernel<<<k.blocks, k.threads, bytes>>>(static_cast<const char*>(src.p), k.rows,
                                                    k.row_bytes, k.stride, k.step,
                                                    static_cast<int*>(sink.p));
             return fl::cuda_status(cudaGetLastError(), "copy_probe", __FILE__, __LINE__);
           }).cupti_us;
      if (i >= 3) v.push_back(us);
    }
    const float us = median(v);
    std::printf(
        "copy probe %-30s %3d blocks x %6.1f KB: %7.2f us, %5.1f GB/s a block, %6.0f GB/s in all\n",
        k.name, k.blocks, bytes / 1024.0, us, bytes / (us * 1e3), k.blocks * bytes / (us * 1e3));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t c = argc > 1 ? std::atoll(argv[1]) : 768;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 50;
  cudaDeviceProp prop{};
  CUDA(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  CUDA(cudaDriverGetVersion(&driver));
  std::printf("portable_bench: %s, driver API %d, C = %lld, cold L2, median of %d\n", prop.name,
              driver, static_cast<long long>(c), reps);
  Timer t;
  {
    int sms = 0;
    CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    std::vector<float> v;
    for (int i = 0; i < reps + 3; ++i) {
      const float us =
          t.once([&] {
             empty_blocks<<<sms, 256>>>();
             return fl::cuda_status(cudaGetLastError(), "empty_blocks", __FILE__, __LINE__);
           }).cupti_us;
      if (i >= 3) v.push_back(us);
    }
    std::printf("empty launch, one block per SM (CUPTI): %.2f us\n", median(v));
  }
  copy_probes(t, reps);
  const std::string only = argc > 3 ? argv[3] : "";
  for (fl::Precision p : {fl::Precision::bf16, fl::Precision::fp32}) {
    if (!only.empty() && only != fl::to_string(p)) continue;
    for (int64_t m : {1, 4, 16, 64}) bench_ffn(p, m, c, t, reps);
    for (int64_t m : {1, 16, 64, 256}) bench_ln(p, m, c, t, reps);
  }
  return 0;
}
