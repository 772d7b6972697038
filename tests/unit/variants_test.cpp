// Kernel variants (kernels/level_table.h): the level table's choice as a function of shape,
// precision and GPU, checked on the CPU for the lessons whose fused level has several
// kernels; and the machinery (forcing, refusing, falling back, recording) on a small table.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/catalog.h"
#include "kernels/level_table.h"

namespace fl {
namespace {

const GpuFacts kH100{9, 0, 132, true};          // an sm_90 GPU, a build with the wgmma kernels
const GpuFacts kH100NoWgmma{9, 0, 132, false};  // the same GPU, a build without sm_90a
const GpuFacts kA100{8, 0, 108, true};          // sm_80: no clusters, no wgmma
const GpuFacts kV100{7, 0, 80, false};          // sm_70: fp32 only in the lessons
const GpuFacts kRtx3090{8, 6, 82, false};       // sm_86
const GpuFacts kRtx4090{8, 9, 128, false};      // sm_89

std::string chosen(const char* lesson, int64_t tokens, Precision p, const GpuFacts& gpu) {
  const Lesson* l = find_lesson(lesson);
  if (l == nullptr) return "no lesson";
  return l->choose_variant(2, 0, {tokens, 0}, p, gpu).name;
}

TEST(Variants, FfnFusedLevelChoosesByTokensPrecisionAndGpu) {
  const Precision bf16 = Precision::bf16, fp32 = Precision::fp32;
  // bf16 on Hopper: the small-token kernel up to 64 tokens, the wgmma kernel from 256, the split
  // kernel between.
  EXPECT_EQ(chosen("ffn", 1, bf16, kH100), "ffn_small");
  EXPECT_EQ(chosen("ffn", 16, bf16, kH100), "ffn_small");
  EXPECT_EQ(chosen("ffn", 64, bf16, kH100), "ffn_small");
  EXPECT_EQ(chosen("ffn", 128, bf16, kH100), "ffn_split");
  EXPECT_EQ(chosen("ffn", 256, bf16, kH100), "ffn_wgmma");
  EXPECT_EQ(chosen("ffn", 16384, bf16, kH100), "ffn_wgmma");
  // fp32 on Hopper (the Hopper kernels run in bf16 only): the hidden slice up to 16 tokens, then
  // the split kernel.
  EXPECT_EQ(chosen("ffn", 1, fp32, kH100), "ffn_hidden_slice");
  EXPECT_EQ(chosen("ffn", 64, fp32, kH100), "ffn_split");
  EXPECT_EQ(chosen("ffn", 256, fp32, kH100), "ffn_split");
  EXPECT_EQ(chosen("ffn", 1023, fp32, kH100), "ffn_split");
  // ... and from 1K tokens the GEMM core's persistent tiles (ffn_tiles).
  EXPECT_EQ(chosen("ffn", 1024, fp32, kH100), "ffn_tiles");
  EXPECT_EQ(chosen("ffn", 16384, fp32, kH100), "ffn_tiles");
  // Without the sm_90a kernels, bf16 takes the cluster kernel at a few tokens.
  EXPECT_EQ(chosen("ffn", 16, bf16, kH100NoWgmma), "ffn_cluster");
  EXPECT_EQ(chosen("ffn", 256, bf16, kH100NoWgmma), "ffn_split");
  EXPECT_EQ(chosen("ffn", 16384, bf16, kH100NoWgmma), "ffn_tiles");
  // sm_80 (163 KiB of shared memory a block): the hidden slice up to 64 tokens in bf16 and up to
  // 16 in fp32, where its plan fits; beyond 16 fp32 tokens neither portable plan fits (ffn_stream's
  // takes 180 KiB at 17): the split kernel, as beyond 64 tokens.
  for (int64_t tokens : {1, 16, 17, 32, 64}) {
    EXPECT_EQ(chosen("ffn", tokens, bf16, kA100), "ffn_hidden_slice") << tokens;
  }
  for (int64_t tokens : {1, 16}) EXPECT_EQ(chosen("ffn", tokens, fp32, kA100), "ffn_hidden_slice");
  for (int64_t tokens : {17, 64}) EXPECT_EQ(chosen("ffn", tokens, fp32, kA100), "ffn_split");
  for (int64_t tokens : {65, 256, 1023}) {
    EXPECT_EQ(chosen("ffn", tokens, bf16, kA100), "ffn_split") << tokens;
  }
  for (int64_t tokens : {1024, 16384}) {
    EXPECT_EQ(chosen("ffn", tokens, bf16, kA100), "ffn_tiles") << tokens;
  }
}

// Which kernel each GPU generation runs: the portable FFN (ffn_hidden_slice at 1-16 tokens and
// in bf16 to 64, ffn_stream in fp32 beyond 16, as they measured on an H100) on sm_70 (fp32), sm_80,
// sm_86 and sm_89 up to 64 tokens where their plans fit the GPU's shared memory (96 KiB a block on
// a V100, 99 on an RTX card: at C = 768 the hidden slice in bf16 up to 16 tokens, and to 32 on an
// RTX 4090's 128 SMs, whose slices are 24 units, and at 33-64 there the ring form of 32 units;
// fp32 on the RTX 4090 at 1-16 tokens with x's exact rows, W2 late; else the split kernel); the
// portable LayerNorm-Linear (ln_stream) there only where the
// panel kernel does not fit (it measured faster on an H100: docs/PERFORMANCE.md); on sm_90 the
// Hopper kernels in bf16, and the portable ones only when forced (they can run there), but for
// fp32, where no Hopper kernel runs: the hidden slice at 1-16 tokens (ahead of the split kernel)
// and ln_stream up to 256 where the panel does not fit (ahead of ln_tile).
TEST(Variants, PortableKernelsArePickedOnVoltaAmpereAndAdaNotOnHopper) {
  const Precision bf16 = Precision::bf16, fp32 = Precision::fp32;
  for (const GpuFacts& gpu : {kV100, kA100, kRtx3090, kRtx4090}) {
    const std::string cc = std::to_string(gpu.cc_major * 10 + gpu.cc_minor);
    const bool a100 = cc == "80", rtx4090 = cc == "89";
    for (int64_t tokens : {1, 8, 9, 16}) {
      EXPECT_EQ(chosen("ffn", tokens, fp32, gpu),
                a100 || rtx4090 ? "ffn_hidden_slice" : "ffn_split")
          << cc << " " << tokens;
    }
    for (int64_t tokens : {17, 64, 65}) {
      EXPECT_EQ(chosen("ffn", tokens, fp32, gpu), "ffn_split") << cc << " " << tokens;
    }
    for (int64_t tokens : {1, 16}) {
      EXPECT_EQ(chosen("layernorm_linear", tokens, fp32, gpu), "ln_panel") << cc << " " << tokens;
    }
#ifndef FUSIONLAB_REPLAY_ONLY  // the panel's shape check: fp32 at C = 768 fits up to 16 tokens
    for (int64_t tokens : {64, 256}) {
      EXPECT_EQ(chosen("layernorm_linear", tokens, fp32, gpu), "ln_stream") << cc << " " << tokens;
    }
#endif
    EXPECT_EQ(chosen("layernorm_linear", 257, fp32, gpu), "ln_tile") << cc;
    // From 1K tokens the GEMM core's large-token kernels, fp32 on the CUDA cores everywhere.
    for (int64_t tokens : {1024, 16384}) {
      EXPECT_EQ(chosen("layernorm_linear", tokens, fp32, gpu), "ln_mma") << cc << " " << tokens;
      EXPECT_EQ(chosen("ffn", tokens, fp32, gpu), "ffn_tiles") << cc << " " << tokens;
    }
    if (gpu.cc_major >= 8) {  // bf16 from sm_80 (mma.sync)
      EXPECT_EQ(chosen("ffn", 1, bf16, gpu), "ffn_hidden_slice") << cc;
      EXPECT_EQ(chosen("ffn", 16, bf16, gpu), "ffn_hidden_slice") << cc;
      EXPECT_EQ(chosen("ffn", 17, bf16, gpu), a100 || rtx4090 ? "ffn_hidden_slice" : "ffn_split")
          << cc;
      // 64 tokens: the A100's resident slices, an RTX 4090's ring form (x and W1 in K chunks);
      // an RTX 3090's 82 SMs need 40 units a block, beyond the ring's 32.
      EXPECT_EQ(chosen("ffn", 64, bf16, gpu), a100 || rtx4090 ? "ffn_hidden_slice" : "ffn_split")
          << cc;
      EXPECT_EQ(chosen("ffn", 65, bf16, gpu), "ffn_split") << cc;
      // 129-4K tokens: the core's tiles on raw x, LayerNorm in their epilogue; beyond, x's rows
      // normalized once, resident, W streamed past them.
      EXPECT_EQ(chosen("layernorm_linear", 128, bf16, gpu), "ln_panel") << cc;
      for (int64_t tokens : {129, 256, 1023, 1024, 2048, 4096}) {
        EXPECT_EQ(chosen("layernorm_linear", tokens, bf16, gpu), "ln_mma_folded")
            << cc << " " << tokens;
      }
      EXPECT_EQ(chosen("layernorm_linear", 4097, bf16, gpu), "ln_mma_rows") << cc;
      EXPECT_EQ(chosen("layernorm_linear", 16384, bf16, gpu), "ln_mma_rows") << cc;
      EXPECT_EQ(chosen("ffn", 16384, bf16, gpu), "ffn_tiles") << cc;
    }
  }
  for (int64_t tokens : {1, 16, 64}) EXPECT_EQ(chosen("ffn", tokens, bf16, kH100), "ffn_small");
  // fp32 on sm_90 (no Hopper kernel in fp32): the hidden slice where it is ahead, then the split.
  for (int64_t tokens : {1, 16}) EXPECT_EQ(chosen("ffn", tokens, fp32, kH100), "ffn_hidden_slice");
  EXPECT_EQ(chosen("ffn", 17, fp32, kH100), "ffn_split");
  EXPECT_EQ(chosen("ffn", 64, fp32, kH100), "ffn_split");
  EXPECT_EQ(chosen("layernorm_linear", 1, bf16, kH100), "ln_panel");
#ifndef FUSIONLAB_REPLAY_ONLY  // the panel's shape check, as above
  // fp32 up to 256 on sm_90 too, where the panel does not fit: the portable stream kernel (0.68x
  // level 1 at 64 tokens on an H100 against ln_tile's 0.39x, docs/PERFORMANCE.md); ln_tile beyond.
  for (int64_t tokens : {64, 256}) {
    EXPECT_EQ(chosen("layernorm_linear", tokens, fp32, kH100), "ln_stream") << tokens;
  }
  EXPECT_EQ(chosen("layernorm_linear", 257, fp32, kH100), "ln_tile");
#endif
  // On sm_90 they can run: `bench --variant` may force them.
  const Lesson* ffn = find_lesson("ffn");
  ASSERT_NE(ffn, nullptr);
  int slice_rows = 0;
  for (const VariantInfo& v : ffn->info().levels[2].variants) {
    if (v.name != "ffn_stream" && v.name != "ffn_hidden_slice") continue;
    EXPECT_EQ(variant_cannot_run(v, Where{{16, 768, 2}, bf16, kH100}), "");
    // ffn_stream is preferred only before sm_90; the hidden slice everywhere, behind ffn_small
    // and ffn_cluster in the table's order (bf16 on sm_90 takes those): its first row at 1-16
    // tokens, its second (bf16 only) at 17-64.
    const int64_t at = v.name == "ffn_stream" || slice_rows == 0 ? 4 : 32;
    EXPECT_EQ(variant_preferred(v, Where{{at, 768, 2}, bf16, kH100}), v.name == "ffn_hidden_slice");
    EXPECT_TRUE(variant_preferred(v, Where{{at, 768, 2}, bf16, kRtx4090}));
    if (v.name == "ffn_hidden_slice" && slice_rows++ == 1) {
      EXPECT_NE(variant_cannot_run(v, Where{{32, 768, 4}, fp32, kRtx4090}), "");
      EXPECT_FALSE(variant_preferred(v, Where{{16, 768, 2}, bf16, kRtx4090}));
    }
  }
  EXPECT_EQ(slice_rows, 2);
}

// Lesson 4 at C = 768 (docs/PERFORMANCE.md, residual_layernorm): a warp a row at 2K-128K rows,
// the aligned kernel with gamma and beta loaded with the row elsewhere, in both precisions and
// on any GPU (the row kernels are portable); a C that is not a multiple of a pack takes the
// general kernel, and one a warp cannot hold (more than 8 packs a thread) the aligned one.
TEST(Variants, ResidualLayerNormFusedLevelChoosesByRows) {
  for (const GpuFacts& gpu : {kH100, kA100}) {
    for (Precision p : {Precision::fp32, Precision::bf16}) {
      for (int64_t rows : {2, 128, 1365, 2047, 131072, 262144}) {
        EXPECT_EQ(chosen("residual_layernorm", rows, p, gpu), "rows_early") << rows;
      }
      for (int64_t rows : {2048, 4096, 16384, 32768, 65536, 131071}) {
        EXPECT_EQ(chosen("residual_layernorm", rows, p, gpu), "rows_warp") << rows;
      }
    }
  }
#ifndef FUSIONLAB_REPLAY_ONLY  // the row kernels' shape checks (packs a thread) are C++ only
  const Lesson* lesson = find_lesson("residual_layernorm");
  ASSERT_NE(lesson, nullptr);
  auto at_c = [&](int64_t c, Precision p) {
    return lesson->choose_variant(2, 0, {4096, c}, p, kH100).name;
  };
  EXPECT_EQ(at_c(781, Precision::fp32), "rows_any");
  EXPECT_EQ(at_c(1024, Precision::fp32), "rows_warp");
  EXPECT_EQ(at_c(1028, Precision::fp32), "rows_early");  // 257 packs: over 8 a thread
  EXPECT_EQ(at_c(2048, Precision::bf16), "rows_warp");
  EXPECT_EQ(at_c(2056, Precision::bf16), "rows_early");
#endif
}

TEST(Variants, LayerNormLinearFusedLevelChoosesByTokensPrecisionAndGpu) {
  const Precision bf16 = Precision::bf16, fp32 = Precision::fp32;
  EXPECT_EQ(chosen("layernorm_linear", 1, bf16, kH100), "ln_panel");
  EXPECT_EQ(chosen("layernorm_linear", 16, bf16, kH100), "ln_panel");
  EXPECT_EQ(chosen("layernorm_linear", 17, bf16, kH100), "ln_cluster");
  EXPECT_EQ(chosen("layernorm_linear", 64, bf16, kH100), "ln_cluster");
  EXPECT_EQ(chosen("layernorm_linear", 96, bf16, kH100), "ln_cluster");
  EXPECT_EQ(chosen("layernorm_linear", 97, bf16, kH100), "ln_wgmma");
  EXPECT_EQ(chosen("layernorm_linear", 256, bf16, kH100), "ln_wgmma");
  EXPECT_EQ(chosen("layernorm_linear", 16384, bf16, kH100), "ln_wgmma");
  EXPECT_EQ(chosen("layernorm_linear", 1, fp32, kH100), "ln_panel");
  EXPECT_EQ(chosen("layernorm_linear", 16, fp32, kH100), "ln_panel");
  EXPECT_EQ(chosen("layernorm_linear", 1023, fp32, kH100), "ln_tile");
  EXPECT_EQ(chosen("layernorm_linear", 1024, fp32, kH100), "ln_mma");
  EXPECT_EQ(chosen("layernorm_linear", 16384, fp32, kH100), "ln_mma");
  EXPECT_EQ(chosen("layernorm_linear", 64, bf16, kA100), "ln_panel");
  EXPECT_EQ(chosen("layernorm_linear", 1023, bf16, kA100), "ln_mma_folded");
  EXPECT_EQ(chosen("layernorm_linear", 256, bf16, kH100NoWgmma), "ln_mma_folded");
  EXPECT_EQ(chosen("layernorm_linear", 256, bf16, kH100), "ln_wgmma");
  EXPECT_EQ(chosen("layernorm_linear", 1024, bf16, kA100), "ln_mma_folded");
  EXPECT_EQ(chosen("layernorm_linear", 4096, bf16, kA100), "ln_mma_folded");
  EXPECT_EQ(chosen("layernorm_linear", 4097, bf16, kA100), "ln_mma_rows");
  EXPECT_EQ(chosen("layernorm_linear", 16384, bf16, kA100), "ln_mma_rows");
  EXPECT_EQ(chosen("layernorm_linear", 16384, bf16, kH100NoWgmma), "ln_mma_rows");
  EXPECT_NE(chosen("layernorm_linear", 16384, bf16, kV100), "ln_mma_rows");  // mma.sync: sm_80
}

TEST(Variants, TheReasonNamesTheSizeTheVariantAndWhatItDoes) {
  const Lesson* ffn = find_lesson("ffn");
  ASSERT_NE(ffn, nullptr);
  const VariantChoice c = ffn->choose_variant(2, 0, {16, 0}, Precision::bf16, kH100NoWgmma);
  EXPECT_EQ(c.name, "ffn_cluster");
  EXPECT_NE(c.reason.find("at 16 tokens in bf16 on compute capability 9.0 (132 SMs)"),
            std::string::npos)
      << c.reason;
  EXPECT_NE(c.reason.find("runs ffn_cluster: clusters of 8"), std::string::npos) << c.reason;
  // ffn_small is first in the table and prefers 16 tokens, but this build has no sm_90a.
  EXPECT_NE(c.reason.find("ffn_small needs a build with the sm_90a"), std::string::npos)
      << c.reason;
  ASSERT_GE(c.index, 0);
  EXPECT_EQ(ffn->info().levels[2].variants[c.index].name, "ffn_cluster");
  // Levels and launches without variants have no choice to make.
  EXPECT_EQ(ffn->choose_variant(0, 0, {16, 0}, Precision::fp32, kH100).index, -1);
}

TEST(Variants, FusedLevelsListAtLeastThreeVariantsWithTheirKernelFunctions) {
  for (const char* id : {"ffn", "layernorm_linear"}) {
    const Lesson* lesson = find_lesson(id);
    ASSERT_NE(lesson, nullptr);
    const auto& variants = lesson->info().levels.back().variants;
    EXPECT_GE(variants.size(), 3u) << id;
    for (const VariantInfo& v : variants) {
      EXPECT_FALSE(v.what.empty()) << v.name;
      EXPECT_FALSE(v.function.empty()) << v.name;
      // The last variant runs everywhere: the table always has a kernel to run.
    }
    EXPECT_EQ(variants.back().range.min_cc, 0) << id;
    EXPECT_EQ(variants.back().range.max_size, 0) << id;
  }
}

// gpt2_decode's level 4: the cluster step at one new token on an sm_90 build with the sm_90a
// kernels, without the key passes up to a cache of 2K and with them past it; the task list at
// more tokens, on other GPUs and in other builds.
TEST(Variants, Gpt2DecodeMegakernelChoosesClustersAtOneTokenOnHopper) {
  const Lesson* l = find_lesson("gpt2_decode");
  ASSERT_NE(l, nullptr);
  auto at = [&](int64_t cache, int64_t tokens, const GpuFacts& gpu) {
    return l->choose_variant(4, 0, {cache, tokens}, Precision::bf16, gpu).name;
  };
  EXPECT_EQ(at(512, 1, kH100), "clusters");
  EXPECT_EQ(at(2048, 1, kH100), "clusters");
  EXPECT_EQ(at(2049, 1, kH100), "clusters_long");
  EXPECT_EQ(at(8192, 1, kH100), "clusters_long");  // (its keys stream through the buffer)
  EXPECT_EQ(at(8192, 2, kH100), "task_list");
  EXPECT_EQ(at(512, 2, kH100), "task_list");
  EXPECT_EQ(at(512, 1, kH100NoWgmma), "task_list");
  EXPECT_EQ(at(512, 1, kA100), "task_list");
  const auto& variants = l->info().levels[4].variants;
  EXPECT_EQ(variant_of_kernel(variants, "megakernel",
                              "void fl::gpt2::(anonymous namespace)::clustered_step("
                              "fl::gpt2::DecodeArgs, fl::gpt2::cluster_step::StepArgs)"),
            "clusters");
  EXPECT_EQ(variant_of_kernel(variants, "megakernel",
                              "void fl::gpt2::(anonymous namespace)::clustered_step_long("
                              "fl::gpt2::DecodeArgs, fl::gpt2::cluster_step::StepArgs)"),
            "clusters_long");
  EXPECT_EQ(variant_of_kernel(variants, "megakernel",
                              "void fl::gpt2::(anonymous namespace)::megakernel<true, false, 3>("
                              "fl::gpt2::DecodeArgs)"),
            "task_list");
}

TEST(Variants, CuptiNamesMapToTheirVariant) {
  const Lesson* ffn = find_lesson("ffn");
  ASSERT_NE(ffn, nullptr);
  const auto& variants = ffn->info().levels[2].variants;
  EXPECT_EQ(variant_of_kernel(variants, "ffn_fused", "ffn_small_kernel<16>"), "ffn_small");
  EXPECT_EQ(variant_of_kernel(variants, "ffn_fused",
                              "void fl::(anonymous namespace)::ffn_cluster_kernel<float, 16, "
                              "true>(fl::FfnArgs<float>, fl::ClusterPlan<float, 16>)"),
            "ffn_cluster");
  EXPECT_EQ(variant_of_kernel(variants, "ffn_fused", "ffn_fused_kernel<float, 64, 64, true, true>"),
            "ffn_split");
  EXPECT_EQ(variant_of_kernel(variants, "gemm_up", "ffn_small_kernel<16>"), "");
  EXPECT_EQ(variant_of_kernel(variants, "ffn_fused", "gelu_kernel<float>"), "");
  // A variant's second kernel, named after its first (the stem, a part, "_kernel").
  EXPECT_EQ(variant_of_kernel(variants, "ffn_fused",
                              "void fl::ffn_hidden_slice_exchange_kernel<__nv_bfloat16, 16>("
                              "fl::SliceArgs<__nv_bfloat16>)"),
            "ffn_hidden_slice");
  EXPECT_EQ(variant_of_kernel(variants, "ffn_fused", "ffn_hidden_slice_helper<float>"), "");
  EXPECT_EQ(variant_of_kernel(variants, "gemm_up", "ffn_hidden_slice_exchange_kernel<float, 8>"),
            "");
}

#ifndef FUSIONLAB_REPLAY_ONLY
// The lessons' own tables also check the shape: C = 100 is no multiple of 32 (ffn_small) or 64
// (ln_cluster). The replay-only build's catalog carries the ranges only.
TEST(Variants, TheTablesShapeChecksMoveTheChoiceOn) {
  const Lesson* ffn = find_lesson("ffn");
  const Lesson* ln = find_lesson("layernorm_linear");
  ASSERT_NE(ffn, nullptr);
  ASSERT_NE(ln, nullptr);
  EXPECT_EQ(ffn->choose_variant(2, 0, {16, 100}, Precision::bf16, kH100).name, "ffn_cluster");
  EXPECT_EQ(ln->choose_variant(2, 0, {64, 100}, Precision::bf16, kH100).name, "ln_stream");
  // In fp32 at C = 768 the panel (64 rows x C) does not fit shared memory at 64 tokens: the
  // stream kernel runs, up to its 256 tokens; at C = 256 the panel fits up to 256 tokens.
  EXPECT_EQ(ln->choose_variant(2, 0, {64, 0}, Precision::fp32, kH100).name, "ln_stream");
  EXPECT_EQ(ln->choose_variant(2, 0, {256, 0}, Precision::fp32, kH100).name, "ln_stream");
  EXPECT_EQ(ln->choose_variant(2, 0, {257, 0}, Precision::fp32, kH100).name, "ln_tile");
  EXPECT_EQ(ln->choose_variant(2, 0, {256, 256}, Precision::fp32, kH100).name, "ln_panel");
}
#endif

// ---- the machinery, on a table of our own ------------------------------------------------------

class VariantWorkspace final : public LevelWorkspace<VariantWorkspace> {
 public:
  explicit VariantWorkspace(int64_t size) {  // 0: states no shape (a workspace's mistake)
    if (size > 0) set_where({size, 8, 4}, Precision::fp32, "rows");
    set_gpu(kH100);
  }
  static const LevelTable<VariantWorkspace>& levels();

  Status fill_inputs(uint64_t, cudaStream_t) override { return Status::Ok(); }
  Status poison_outputs(cudaStream_t) override { return Status::Ok(); }
  Status check(cudaStream_t, CheckResult*) override { return Status::Ok(); }
  Status download(cudaStream_t, std::vector<HostTensor>*, std::vector<HostTensor>*) override {
    return Status::Ok();
  }

  std::vector<std::string> ran;
  std::vector<int> shared;  // chosen_gpu_shared_optin() as each launch saw it
  bool small_fits = true;
};

const LevelTable<VariantWorkspace>& VariantWorkspace::levels() {
  using Ws = VariantWorkspace;
  static const LevelTable<Ws> table = {
      {"fused",
       "one kernel",
       "everything",
       {{"both",
         nullptr,
         [](const Dims& d) {
           return Textbook{d.s, d.s, 0};
         },
         {{"small",
           "few rows",
           "small_kernel",
           {90, 0, false, {}, 100, 1, 100},
           [](Ws& w, cudaStream_t) {
             if (!w.small_fits) return Status::Unsupported("its clusters do not fit");
             w.ran.push_back("small");
             w.shared.push_back(chosen_gpu_shared_optin());
             return Status::Ok();
           },
           {},
           {}},
          {"sm100_only",
           "a newer GPU's",
           "new_kernel",
           {100, 0, false, {}, 0, 1, 0},
           [](Ws& w, cudaStream_t) {
             w.ran.push_back("sm100_only");
             return Status::Ok();
           },
           {},
           {}},
          {"any",
           "everywhere",
           "any_kernel",
           {},
           [](Ws& w, cudaStream_t) {
             w.ran.push_back("any");
             w.shared.push_back(chosen_gpu_shared_optin());
             return Status::Ok();
           },
           {},
           {}}}}}},
  };
  return table;
}

TEST(Variants, TheWorkspaceRunsTheChoiceAndRecordsIt) {
  VariantWorkspace few(10), many(1000);
  ASSERT_TRUE(few.launch(0, 0, nullptr).ok());
  ASSERT_TRUE(many.launch(0, 0, nullptr).ok());
  EXPECT_EQ(few.ran, std::vector<std::string>{"small"});
  EXPECT_EQ(few.variant_ran(0, 0), "small");
  EXPECT_EQ(many.ran, std::vector<std::string>{"any"});  // small takes 100 rows at most
  EXPECT_EQ(many.variant_ran(0, 0), "any");
  EXPECT_EQ(many.variant_ran(0, 1), "");
}

// A workspace that never states its shape would fail every shape check and fall back to its last
// variant silently; it fails with one line instead.
TEST(Variants, AWorkspaceThatStatesNoShapeIsAnErrorNotAFallback) {
  VariantWorkspace ws(0);
  const Status st = ws.launch(0, 0, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "both: the workspace states no shape for its variants (set_where)");
  EXPECT_TRUE(ws.ran.empty());
}

TEST(Variants, AVariantThatFindsItCannotRunHandsOverToTheNextChoice) {
  VariantWorkspace ws(10);
  ws.small_fits = false;
  ASSERT_TRUE(ws.launch(0, 0, nullptr).ok());
  EXPECT_EQ(ws.ran, std::vector<std::string>{"any"});
  EXPECT_EQ(ws.variant_ran(0, 0), "any");
  // Forced, it fails with its reason instead.
  ASSERT_TRUE(ws.force_variant("both", "small").ok());
  const Status st = ws.launch(0, 0, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "small: its clusters do not fit");
}

TEST(Variants, AForcedVariantRunsOrIsRefusedWithOneLine) {
  VariantWorkspace ws(10);
  ASSERT_TRUE(ws.force_variant("both", "any").ok());
  ASSERT_TRUE(ws.launch(0, 0, nullptr).ok());
  EXPECT_EQ(ws.variant_ran(0, 0), "any");
  ASSERT_TRUE(ws.force_variant("both", "sm100_only").ok());
  const Status st = ws.launch(0, 0, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "sm100_only cannot run here: needs compute capability 10.0 or newer; this GPU is 9.0");
  EXPECT_EQ(st.message().find('\n'), std::string::npos);
  // Names the table does not have are refused when forced; "" gives the choice back.
  EXPECT_FALSE(ws.force_variant("both", "nope").ok());
  EXPECT_FALSE(ws.force_variant("nope", "any").ok());
  ASSERT_TRUE(ws.force_variant("both", "").ok());
  ASSERT_TRUE(ws.launch(0, 0, nullptr).ok());
  EXPECT_EQ(ws.variant_ran(0, 0), "small");
}

TEST(Variants, ChosenAsAnOlderGpuTheWorkspaceRunsThatGpusChoiceHere) {
  VariantWorkspace ws(10);
  ws.choose_as(86);  // an sm_86 card cannot run `small` (sm_90): the table hands over to `any`
  ASSERT_TRUE(ws.launch(0, 0, nullptr).ok());
  EXPECT_EQ(ws.variant_ran(0, 0), "any");
  // A forced variant still wins, and 0 gives the choice back to this GPU.
  ASSERT_TRUE(ws.force_variant("both", "small").ok());
  ASSERT_TRUE(ws.launch(0, 0, nullptr).ok());
  EXPECT_EQ(ws.variant_ran(0, 0), "small");
  ASSERT_TRUE(ws.force_variant("both", "").ok());
  ws.choose_as(0);
  ASSERT_TRUE(ws.launch(0, 0, nullptr).ok());
  EXPECT_EQ(ws.variant_ran(0, 0), "small");
  EXPECT_EQ(ws.ran, (std::vector<std::string>{"any", "small", "small"}));
  // The launch chosen as the sm_86 card saw that card's shared memory; the forced one and this
  // GPU's own choice saw none, and nothing is left set after a launch.
  EXPECT_EQ(ws.shared, (std::vector<int>{99 * 1024, 0, 0}));
  EXPECT_EQ(chosen_gpu_shared_optin(), 0);
}

// The opt-in shared memory a block gets, by compute capability, as `--choose-as` hands it to
// the kernels whose form depends on it; scopes nest and restore.
TEST(Variants, ChosenGpuSharedMemoryByComputeCapability) {
  EXPECT_EQ(shared_optin_of_cc(70), 96 * 1024);
  EXPECT_EQ(shared_optin_of_cc(75), 64 * 1024);
  EXPECT_EQ(shared_optin_of_cc(80), 163 * 1024);
  EXPECT_EQ(shared_optin_of_cc(86), 99 * 1024);
  EXPECT_EQ(shared_optin_of_cc(89), 99 * 1024);
  EXPECT_EQ(shared_optin_of_cc(90), 227 * 1024);
  EXPECT_EQ(shared_optin_of_cc(61), 0);
  EXPECT_EQ(chosen_gpu_shared_optin(), 0);
  {
    const ChosenGpuSharedOptin outer(shared_optin_of_cc(80));
    EXPECT_EQ(chosen_gpu_shared_optin(), 163 * 1024);
    {
      const ChosenGpuSharedOptin inner(0);
      EXPECT_EQ(chosen_gpu_shared_optin(), 0);
    }
    EXPECT_EQ(chosen_gpu_shared_optin(), 163 * 1024);
  }
  EXPECT_EQ(chosen_gpu_shared_optin(), 0);
}

// A range's prefer_by_inner moves the preferred sizes for long rows: the last entry the row
// length reaches wins, shorter rows keep prefer_from .. prefer_to, and the words say so.
TEST(Variants, PreferredSizesMayDependOnTheRowLength) {
  VariantInfo v{"launch", "wide", "", "", {}, {}};
  v.range.prefer_from = 2048;
  v.range.prefer_by_inner = {{128, 512, 0}, {256, 1, 64}};
  auto preferred = [&](int64_t s, int64_t i) {
    return variant_preferred(v, Where{{s, i, 2}, Precision::bf16, kH100});
  };
  EXPECT_FALSE(preferred(1024, 64));
  EXPECT_TRUE(preferred(2048, 64));
  EXPECT_FALSE(preferred(511, 128));
  EXPECT_TRUE(preferred(512, 128));
  EXPECT_TRUE(preferred(512, 255));
  EXPECT_TRUE(preferred(64, 256));
  EXPECT_FALSE(preferred(65, 256));
  EXPECT_FALSE(preferred(4096, 300));
  EXPECT_EQ(variant_where(v, "tokens", "head size d"),
            "every GPU; preferred from 2048 tokens, head size d 128+ from 512 tokens, head size d "
            "256+ at 1-64 tokens");
}

// A variant preferred only past the sizes it takes (kept as a measured form) is said to run
// only when forced, not "preferred from" a size it cannot take; the lesson's ffn_two_phase is one.
TEST(Variants, AVariantPreferredPastItsSizesIsSaidToRunOnlyWhenForced) {
  VariantInfo v{"launch", "measured", "", "", {}, {}};
  v.range.min_cc = 80;
  v.range.max_size = 64;
  v.range.prefer_from = 65;
  EXPECT_EQ(variant_where(v, "tokens"),
            "compute capability 8.0+, up to 64 tokens; preferred nowhere (runs when forced: bench "
            "--variant)");
  for (int64_t tokens : {1, 64}) {
    EXPECT_FALSE(variant_preferred(v, Where{{tokens, 768, 2}, Precision::bf16, kH100}));
  }
  v.range.prefer_from = 64;  // preferred at its last size: said as before
  EXPECT_EQ(variant_where(v, "tokens"),
            "compute capability 8.0+, up to 64 tokens; preferred from 64 tokens");
  const Lesson* ffn = find_lesson("ffn");
  ASSERT_NE(ffn, nullptr);
  int found = 0;
  for (const VariantInfo& info : ffn->info().levels[2].variants) {
    if (info.name != "ffn_two_phase") continue;
    ++found;
    EXPECT_NE(variant_where(info, "tokens").find("preferred nowhere"), std::string::npos);
  }
  EXPECT_EQ(found, 1);
}

}  // namespace
}  // namespace fl
