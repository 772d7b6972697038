// Kernel variants on a real GPU: at each token count the level table's choice is the kernel
// that ran, by CUPTI's name for it, and its output passes the check; a forced variant runs, or
// is refused with one line where it cannot run. Behaviour, not speed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>
#include <utility>

#include "app/measure/live_backend.h"
#include "kernels/catalog.h"
#include "kernels/level_table.h"

namespace fl {
namespace {

std::unique_ptr<LiveBackend> make_backend() {
  LiveOptions options;
  options.min_repetitions = 3;
  options.target_seconds = 0.01;
  options.counters = false;
  std::unique_ptr<LiveBackend> backend;
  const Status st = LiveBackend::create(options, &backend);
  EXPECT_TRUE(st.ok()) << st.message();
  return backend;
}

// Level 2 of `lesson` at `tokens`: measured, checked, and the variant that ran; every kernel
// record of the launch is that variant's kernel function.
std::string fused_variant_that_ran(LiveBackend& backend, const std::string& lesson, int64_t tokens,
                                   Precision p, std::map<std::string, std::string> forced = {},
                                   int choose_as_cc = 0) {
  MeasureRequest request{lesson, tokens, {2}, p, CacheMode::cold};
  request.variants = std::move(forced);
  request.choose_as_cc = choose_as_cc;
  std::vector<Measurement> ms;
  const Status st = backend.measure(request, nullptr, &ms);
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok() || ms.size() != 1) return "(no measurement)";
  const Measurement& m = ms[0];
  EXPECT_TRUE(m.check.passed) << lesson << " at " << tokens << ": " << m.check.rel_l2_error;
  const std::string ran = m.launches.at(0).variant;
  const auto& variants = find_lesson(lesson)->info().levels[2].variants;
  EXPECT_EQ(m.chosen_as_cc, choose_as_cc);
  EXPECT_FALSE(m.records.empty());
  for (const KernelRecord& r : m.records) {
    EXPECT_EQ(variant_of_kernel(variants, m.launches.at(0).textbook.kernel, r.kernel), ran)
        << "CUPTI named " << r.kernel;
  }
  return ran;
}

TEST(Variants, TheTablesChoiceIsTheKernelThatRan) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const GpuFacts gpu = current_gpu_facts();
  for (const char* lesson : {"ffn", "layernorm_linear"}) {
    for (Precision p : {Precision::bf16, Precision::fp32}) {
      for (int64_t tokens : {1, 16, 64, 256, 16384}) {
        const VariantChoice choice = find_lesson(lesson)->choose_variant(2, 0, {tokens, 0}, p, gpu);
        EXPECT_EQ(fused_variant_that_ran(*backend, lesson, tokens, p), choice.name)
            << lesson << " at " << tokens << " tokens: " << choice.reason;
      }
    }
  }
}

// On an sm_90 GPU with the wgmma kernels built: the kernels the level table names, by name.
TEST(Variants, HopperRunsTheSmallClusterAndWgmmaKernels) {
  const GpuFacts gpu = current_gpu_facts();
  if (gpu.cc_major != 9 || !gpu.wgmma_build) GTEST_SKIP() << "needs sm_90 and the wgmma build";
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const Precision bf16 = Precision::bf16;
  EXPECT_EQ(fused_variant_that_ran(*backend, "ffn", 1, bf16), "ffn_small");
  EXPECT_EQ(fused_variant_that_ran(*backend, "ffn", 64, bf16), "ffn_small");
  EXPECT_EQ(fused_variant_that_ran(*backend, "ffn", 256, bf16), "ffn_wgmma");
  EXPECT_EQ(fused_variant_that_ran(*backend, "ffn", 16384, bf16), "ffn_wgmma");
  EXPECT_EQ(fused_variant_that_ran(*backend, "ffn", 16, Precision::fp32), "ffn_hidden_slice");
  EXPECT_EQ(fused_variant_that_ran(*backend, "ffn", 64, Precision::fp32), "ffn_split");
  EXPECT_EQ(fused_variant_that_ran(*backend, "layernorm_linear", 1, bf16), "ln_panel");
  EXPECT_EQ(fused_variant_that_ran(*backend, "layernorm_linear", 64, bf16), "ln_cluster");
  EXPECT_EQ(fused_variant_that_ran(*backend, "layernorm_linear", 256, bf16), "ln_wgmma");
  EXPECT_EQ(fused_variant_that_ran(*backend, "layernorm_linear", 16384, bf16), "ln_wgmma");
}

// Chosen as an sm_86 card (bench --choose-as 8.6), this GPU runs that card's choice, by CUPTI's
// name, correctly; choosing as a newer GPU than this one is refused with one line.
TEST(Variants, ChosenAsAnOlderGpuTheKernelsThatGpuRunsRunHere) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  const GpuFacts gpu = current_gpu_facts();
  const int cc = gpu.cc_major * 10 + gpu.cc_minor;
  if (cc < 86) GTEST_SKIP() << "needs a GPU of compute capability 8.6 or newer";
  const GpuFacts sm86{8, 6, gpu.sms, false};
  for (const char* lesson : {"ffn", "layernorm_linear"}) {
    for (int64_t tokens : {1, 16, 64, 256, 16384}) {
      const VariantChoice choice =
          find_lesson(lesson)->choose_variant(2, 0, {tokens, 0}, Precision::bf16, sm86);
      EXPECT_EQ(fused_variant_that_ran(*backend, lesson, tokens, Precision::bf16, {}, 86),
                choice.name)
          << lesson << " at " << tokens << " tokens: " << choice.reason;
    }
  }
  // The FFN's small-token plans size themselves to the chosen card's shared memory (99 KiB a
  // block on an RTX 30/40 card, 163 on an A100), and the CPU's choice (the lesson panel's) asks
  // the same plans: in both precisions they agree on the kernel that ran.
  for (int as : {86, 80}) {
    const GpuFacts older{as / 10, as % 10, gpu.sms, false};
    for (Precision p : {Precision::bf16, Precision::fp32}) {
      for (int64_t tokens : {1, 4, 9, 16, 33, 64}) {
        const VariantChoice choice =
            find_lesson("ffn")->choose_variant(2, 0, {tokens, 0}, p, older);
        EXPECT_EQ(fused_variant_that_ran(*backend, "ffn", tokens, p, {}, as), choice.name)
            << "ffn at " << tokens << " tokens in " << to_string(p) << " as " << as << ": "
            << choice.reason;
      }
    }
  }
  MeasureRequest newer{"ffn", 16, {2}, Precision::bf16, CacheMode::cold};
  newer.choose_as_cc = cc + 10;
  std::vector<Measurement> ms;
  const Status st = backend->measure(newer, nullptr, &ms);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("or an older one"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos);
}

TEST(Variants, AForcedVariantRunsCorrectlyOrIsRefusedWithOneLine) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  // Every variant that can run at 48 tokens (an odd chunk of the mma tiles) runs and passes.
  const GpuFacts gpu = current_gpu_facts();
  for (const char* lesson : {"ffn", "layernorm_linear"}) {
    const Lesson* l = find_lesson(lesson);
    for (const VariantInfo& v : l->info().levels[2].variants) {
      const Where where{{48, l->info().size_axis.inner_default, 2}, Precision::bf16, gpu};
      if (!variant_cannot_run(v, where).empty()) continue;
      EXPECT_EQ(fused_variant_that_ran(*backend, lesson, 48, Precision::bf16, {{v.launch, v.name}}),
                v.name);
    }
  }
  // The cluster kernel takes 64 tokens at most.
  std::vector<Measurement> ms;
  MeasureRequest request{"ffn", 256, {2}, Precision::bf16, CacheMode::cold};
  request.variants = {{"ffn_fused", "ffn_cluster"}};
  const Status st = backend->measure(request, nullptr, &ms);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("ffn_cluster cannot run here: takes at most 64, not 256"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos);
  // ... and the backend measures the next request as usual.
  EXPECT_EQ(fused_variant_that_ran(*backend, "ffn", 16, Precision::bf16),
            find_lesson("ffn")->choose_variant(2, 0, {16, 0}, Precision::bf16, gpu).name);
}

// The LayerNorm-Linear's panel kernel forced at `shapes` (tokens x C) in fp32 and bf16: outputs
// poisoned before each run, checked against the reference.
void check_panel(const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  for (Precision p : {Precision::bf16, Precision::fp32}) {
    for (const auto& [tokens, c] : shapes) {
      MeasureRequest request{"layernorm_linear", tokens, {2}, p, CacheMode::cold};
      request.inner = c;
      request.variants = {{"ln_gemm_bias", "ln_panel"}};
      std::vector<Measurement> ms;
      const Status st = backend->measure(request, nullptr, &ms);
      if (!st.ok() && st.message().find("does not fit") != std::string::npos) continue;
      ASSERT_TRUE(st.ok()) << st.message();
      ASSERT_EQ(ms.size(), 1u);
      EXPECT_TRUE(ms[0].check.passed)
          << to_string(p) << " " << tokens << " x " << c << ": " << ms[0].check.rel_l2_error;
      EXPECT_EQ(ms[0].launches.at(0).variant, "ln_panel");
    }
  }
}

// At odd token counts its plan takes chunks of 16, 32, 48 or 64 rows (a last chunk part empty)
// and slices of 16-64 columns; C a multiple of 16.
TEST(Variants, PanelLayerNormLinearRunsEachChunkShape) {
  check_panel({{1, 768}, {33, 208}, {47, 768}, {65, 768}, {129, 336}, {255, 768}});
}

// Two small shapes for compute-sanitizer (32-row and 16-row chunks).
TEST(Variants, PanelLayerNormLinearSmallShapes) {
  check_panel({{35, 96}, {9, 48}});
}

// The panel's forms (FL_LN_PANEL_FORM, ln_panel_plan.cuh): the earlier one (0), each bit alone,
// the one before the plan's (11), the bias ahead with the split-K multiplies by address (59),
// the first three tunings (123), gamma, beta and the bias by cp.async alone (256) and the plan's
// (267), at odd token counts, two items a warp at 255 x 768.
TEST(Variants, PanelLayerNormLinearRunsEachForm) {
  for (const char* form :
       {"0", "1", "2", "8", "16", "32", "64", "11", "59", "123", "256", "267", "379"}) {
    SCOPED_TRACE(std::string("FL_LN_PANEL_FORM=") + form);
    setenv("FL_LN_PANEL_FORM", form, 1);
    check_panel({{1, 768}, {35, 96}, {129, 336}, {255, 768}});
  }
  unsetenv("FL_LN_PANEL_FORM");
}

// The attention sublayer's flash step lists lesson 9's level 2 kernels: fp32 runs the
// register-tiled CUDA-core kernel, bf16 the mma.sync one, and CUPTI names the kernel the table
// chose.
TEST(Variants, TheSublayersFlashStepRunsLevel2sKernelOfItsPrecision) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  struct Want {
    Precision p;
    std::string variant, function;
  };
  for (const Want& want : {Want{Precision::fp32, "flash_fp32_tiles", "flash_fp32_tiles_kernel"},
                           Want{Precision::bf16, "flash_mma", "flash_attention_kernel"}}) {
    SCOPED_TRACE(to_string(want.p));
    MeasureRequest request{"attention_residual_layernorm", 512, {2}, want.p, CacheMode::cold};
    std::vector<Measurement> ms;
    const Status st = backend->measure(request, nullptr, &ms);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(ms.size(), 1u);
    EXPECT_TRUE(ms[0].check.passed) << ms[0].check.rel_l2_error;
    int flash_launches = 0;
    for (const auto& launch : ms[0].launches) {
      if (launch.textbook.kernel != "flash_attention") continue;
      ++flash_launches;
      EXPECT_EQ(launch.variant, want.variant);
    }
    EXPECT_EQ(flash_launches, 1);
    int records = 0;
    for (const KernelRecord& r : ms[0].records)
      records += r.kernel.find(want.function) != std::string::npos;
    EXPECT_GT(records, 0) << "CUPTI saw no " << want.function;
  }
}

// Lesson 4's fused level (residual_layernorm.cu, "level 2's kernels"): the table's choice at
// C = 768, and every form that takes a row length runs it correctly, forced, at odd row counts
// (37: a block left part empty; 5001 and 70001: grids of many waves) and row lengths that give
// 1 to 8 packs a thread, one or several warps a row.
TEST(Variants, ResidualLayerNormRunsEachRowForm) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  auto ran = [&](int64_t rows, int64_t c, Precision p, std::map<std::string, std::string> forced) {
    MeasureRequest request{"residual_layernorm", rows, {2}, p, CacheMode::cold};
    request.inner = c;
    request.variants = std::move(forced);
    std::vector<Measurement> ms;
    const Status st = backend->measure(request, nullptr, &ms);
    EXPECT_TRUE(st.ok()) << rows << " x " << c << ": " << st.message();
    if (!st.ok() || ms.size() != 1) return std::string("(no measurement)");
    EXPECT_TRUE(ms[0].check.passed) << rows << " x " << c << ": " << ms[0].check.rel_l2_error;
    return ms[0].launches.at(0).variant;
  };
  for (Precision p : {Precision::fp32, Precision::bf16}) {
    SCOPED_TRACE(to_string(p));
    EXPECT_EQ(ran(3, 768, p, {}), "rows_early");
    EXPECT_EQ(ran(5001, 768, p, {}), "rows_warp");
    EXPECT_EQ(ran(16384, 768, p, {}), "rows_warp");
    EXPECT_EQ(ran(65536, 768, p, {}), "rows_warp");
    EXPECT_EQ(ran(37, 781, p, {}), "rows_any");  // not a multiple of a pack
    const int64_t vec = p == Precision::fp32 ? 4 : 8;
    for (int64_t c : {vec, 5 * vec, int64_t(768), 256 * vec, int64_t(1032), 2048 * vec}) {
      std::vector<std::string> forms = {"rows_early", "rows_any"};
      // A warp a row holds at most 8 packs a thread: 1024 fp32 / 2048 bf16.
      if (c <= 256 * vec) forms.push_back("rows_warp");
      for (const std::string& form : forms) {
        EXPECT_EQ(ran(37, c, p, {{"residual_layernorm_fused", form}}), form) << "C = " << c;
      }
    }
    EXPECT_EQ(ran(70001, 8 * vec, p, {{"residual_layernorm_fused", "rows_warp"}}), "rows_warp");
    EXPECT_EQ(ran(5001, 768, p, {{"residual_layernorm_fused", "rows_early"}}), "rows_early");
    // Where a warp a row cannot hold the row, forcing it is refused with one line.
    MeasureRequest request{"residual_layernorm", 37, {2}, p, CacheMode::cold};
    request.inner = 257 * vec;
    request.variants = {{"residual_layernorm_fused", "rows_warp"}};
    std::vector<Measurement> ms;
    const Status st = backend->measure(request, nullptr, &ms);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("rows_warp cannot run here"), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace fl
