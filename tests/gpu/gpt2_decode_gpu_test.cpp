// gpt2_decode on the GPU: every level against the fp64 CPU reference at random configurations
// (1-16 new tokens, odd cache lengths), the graph levels replayed twice, the megakernel on a
// partial grid (fewer blocks than tasks: it must neither deadlock nor read a value left from
// the run before), its task records (one per task, in phases.h's layout), and (on request) its
// copy options timed against each other.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include "app/measure/live_backend.h"
#include "kernels/catalog.h"
#include "kernels/gpt2_decode/hooks.h"
#include "tests/support/level_gpu_test.h"

namespace fl {
namespace {

// The megakernel's option sets measured against each other (MegakernelVariants) and checked
// (every level's test, the partial grid): the form before the stage cuts, each cut alone, and
// together. The lesson's default is one of them.
struct Variant {
  const char* name;
  gpt2::MegakernelOptions options;
};
std::vector<Variant> option_sets() {
  gpt2::MegakernelOptions before;  // the form of the one-pass attention, every cut off
  before.skip_own_poll = before.head_combine = false;
  before.fused_proj = before.wide_rows = before.proj_apart = before.early_copies = false;
  before.l2_ahead = 0;
  before.copies_after_task = before.copies_after_task_but_mlp = false;
  before.branch_free_keys = false;
  before.residual_copies = 1;
  before.copy_thread = 0;
  before.copies_after_inputs = false;
  before.poll_first = false;  // (these sets were measured with thread 0 issuing the copies)
  before.head_proj = false;   // (and with proj cut by rows)
  std::vector<Variant> sets = {{"before (one pass, probes)", before}};
  auto with = [&](const char* name, auto change) {
    gpt2::MegakernelOptions o = before;
    change(o);
    sets.push_back({name, o});
  };
  with("+ skip own poll", [](gpt2::MegakernelOptions& o) { o.skip_own_poll = true; });
  with("+ 4 residual copies", [](gpt2::MegakernelOptions& o) { o.residual_copies = 4; });
  with("+ head combine", [](gpt2::MegakernelOptions& o) { o.head_combine = true; });
  with("+ copies by warp 1 after inputs", [](gpt2::MegakernelOptions& o) {
    o.copy_thread = 32;
    o.copies_after_inputs = true;
  });
  with("+ skip, copies, combine", [](gpt2::MegakernelOptions& o) {
    o.skip_own_poll = o.head_combine = true;
    o.residual_copies = 4;
  });
  with("+ skip, copies, combine, warp 1 after inputs", [](gpt2::MegakernelOptions& o) {
    o.skip_own_poll = o.head_combine = true;
    o.residual_copies = 4;
    o.copy_thread = 32;
    o.copies_after_inputs = true;
  });
  with("+ skip, combine",
       [](gpt2::MegakernelOptions& o) { o.skip_own_poll = o.head_combine = true; });
  with("+ wide rows", [](gpt2::MegakernelOptions& o) { o.wide_rows = true; });
  with("+ fused proj", [](gpt2::MegakernelOptions& o) { o.fused_proj = true; });
  with("+ fused proj, wide rows",
       [](gpt2::MegakernelOptions& o) { o.fused_proj = o.wide_rows = true; });
  with("+ proj apart", [](gpt2::MegakernelOptions& o) { o.proj_apart = true; });
  with("+ early copies", [](gpt2::MegakernelOptions& o) { o.early_copies = true; });
  with("+ proj apart, early copies",
       [](gpt2::MegakernelOptions& o) { o.proj_apart = o.early_copies = true; });
  with("+ L2 prefetch 1 ahead", [](gpt2::MegakernelOptions& o) { o.l2_ahead = 1; });
  with("+ copies after task", [](gpt2::MegakernelOptions& o) { o.copies_after_task = true; });
  with("+ copies after task, proj apart",
       [](gpt2::MegakernelOptions& o) { o.copies_after_task = o.proj_apart = true; });
  with("+ branch-free keys", [](gpt2::MegakernelOptions& o) { o.branch_free_keys = true; });
  with("+ copies after task but MLP",
       [](gpt2::MegakernelOptions& o) { o.copies_after_task_but_mlp = true; });
  with("+ branch-free keys, after task but MLP",
       [](gpt2::MegakernelOptions& o) { o.branch_free_keys = o.copies_after_task_but_mlp = true; });
  with("+ fused proj, branch-free keys",
       [](gpt2::MegakernelOptions& o) { o.fused_proj = o.branch_free_keys = true; });
  with("+ fused proj, branch-free, after task but MLP", [](gpt2::MegakernelOptions& o) {
    o.fused_proj = o.branch_free_keys = o.copies_after_task_but_mlp = true;
  });
  return sets;
}
// The sets added after the stage cuts (every level's test runs these; the partial grid all).
std::vector<Variant> newer_sets() {
  const std::vector<Variant> all = option_sets();
  std::vector<Variant> sets = {all.front()};
  sets.insert(sets.end(), all.begin() + 8, all.end());
  return sets;
}
// The sets MegakernelVariants timed before the newer options below (each partial grid runs
// them): the lesson's form (proj by head), the form before it (proj by rows: every proj task
// waits for the whole attention stage and combines every split), attention waiting for its own
// head's qkv rows only (head waits, which takes proj by rows: tasks.cpp), and beside proj by
// head 32-key splits (a split for every block at 512) and the task window (thread 0's
// descriptor read from shared memory); head waits with 32-key splits.
std::vector<Variant> proj_sets() {
  gpt2::MegakernelOptions lesson, rows, waits, short_splits, window, both;
  rows.head_proj = false;
  waits.head_waits = both.head_waits = true;
  short_splits.min_split_keys = both.min_split_keys = 32;
  window.task_window = true;
  return {{"the lesson's (proj by head)", lesson}, {"proj by rows (the form before)", rows},
          {"head waits (proj by rows)", waits},    {"proj by head, 32-key splits", short_splits},
          {"proj by head, task window", window},   {"head waits, 32-key (proj by rows)", both}};
}
// The sets MegakernelVariants times: the newer options of the loop and the list, alone and
// together, against the form before them (proj by head, the kernel for every option and token
// count, the tail as before, 18-row qkv slices at 132 blocks).
std::vector<Variant> timed_sets() {
  gpt2::MegakernelOptions lesson, before, other_kernel;
  before.quick_tail = before.one_token_kernel = false;
  before.qkv_rows = 0;
  other_kernel.one_token_kernel = false;
  auto with = [&](auto change) {
    gpt2::MegakernelOptions o = before;
    change(o);
    return o;
  };
  using O = gpt2::MegakernelOptions;
  return {{"the lesson's", lesson},
          {"before (proj by head)", before},
          {"+ one-token kernel", with([](O& o) { o.one_token_kernel = true; })},
          {"+ one-token kernel, quick tail",
           with([](O& o) { o.one_token_kernel = o.quick_tail = true; })},
          {"+ one-token kernel, quick tail, 36-row qkv", with([](O& o) {
             o.one_token_kernel = o.quick_tail = true;
             o.qkv_rows = 36;
           })},
          {"+ one-token kernel, 24-row qkv", with([](O& o) {
             o.one_token_kernel = true;
             o.qkv_rows = 24;
           })},
          {"the lesson's, the other kernel", other_kernel},
          {"+ one-token kernel, quick tail, 30-row qkv", with([](O& o) {
             o.one_token_kernel = o.quick_tail = true;
             o.qkv_rows = 30;
           })}};
}

// The sets MegakernelVariants times with FL_DECODE_VARIANTS=apart: attention apart from qkv
// (MegakernelOptions::apart_qkv_rows: qkv in longer slices, the splits on the blocks qkv leaves
// free) at 48, 42 and 36 rows (7, 6 and 5 splits a head at 132 blocks), and 48-row qkv slices
// with the grid's splits (not apart), against the lesson's.
std::vector<Variant> apart_sets() {
  gpt2::MegakernelOptions lesson, apart48, apart42, apart36, rows48;
  lesson.apart_qkv_rows = 0;
  apart48.apart_qkv_rows = 48, apart42.apart_qkv_rows = 42, apart36.apart_qkv_rows = 36;
  rows48.apart_qkv_rows = 0, rows48.qkv_rows = 48;
  return {{"the form before (24-row qkv)", lesson},
          {"+ attention apart, 48-row qkv", apart48},
          {"+ attention apart, 42-row qkv", apart42},
          {"+ attention apart, 36-row qkv", apart36},
          {"+ 48-row qkv, not apart", rows48}};
}

// The sets MegakernelVariants times with FL_DECODE_VARIANTS=spread: the one-token kernel's
// residual spread 4 and 2 times (MegakernelOptions::residual_spread) against dense.
std::vector<Variant> spread_sets() {
  gpt2::MegakernelOptions dense, spread4, spread2;
  dense.residual_spread = 1, spread4.residual_spread = 4, spread2.residual_spread = 2;
  return {{"dense residual (the form before)", dense},
          {"+ residual spread 4", spread4},
          {"+ residual spread 2", spread2}};
}

// The sets MegakernelVariants times with FL_DECODE_VARIANTS=lastproj: proj in attention's last
// split (MegakernelOptions::last_split_proj: three stages a layer), its Wproj read as it comes
// (1) or asked into L2 by every split first (2), and with the splits' sums read in one burst
// beside the ticket (3), against the lesson's proj by head.
std::vector<Variant> last_proj_sets() {
  gpt2::MegakernelOptions lesson, last, prefetched, burst;
  lesson.last_split_proj = 0, last.last_split_proj = 1, prefetched.last_split_proj = 2;
  burst.last_split_proj = 3;
  return {{"proj by head (the form before)", lesson},
          {"+ proj in the last split", last},
          {"+ proj in the last split, L2 asked", prefetched},
          {"+ last split, L2 asked, one burst", burst}};
}

// The sets MegakernelVariants times with FL_DECODE_VARIANTS=rows: proj by head reading its
// head's flagged rows (MegakernelOptions::proj_reads_rows: no count between attention and proj)
// against the lesson's.
std::vector<Variant> rows_sets() {
  gpt2::MegakernelOptions lesson, rows;
  lesson.proj_reads_rows = false, rows.proj_reads_rows = true;
  return {{"proj by head (the form before)", lesson}, {"+ proj reads rows", rows}};
}
// FL_DECODE_VARIANTS=rows times these too: beside proj reading rows, qkv in about a slice a
// block (18 rows) or 36-row slices, and 32-key splits (11 a head at 512).
std::vector<Variant> rows_timed_sets() {
  std::vector<Variant> sets = rows_sets();
  gpt2::MegakernelOptions rows18, rows36, keys32;
  rows18.qkv_rows = 0, rows36.qkv_rows = 36, keys32.min_split_keys = 32;
  sets.insert(sets.end(), {{"+ rows, 18-row qkv", rows18},
                           {"+ rows, 36-row qkv", rows36},
                           {"+ rows, 32-key splits", keys32}});
  return sets;
}

// The sets MegakernelVariants times with FL_DECODE_VARIANTS=words: attention reading its head's
// flagged q, k and v words (MegakernelOptions::qkv_words: no count between qkv and attention)
// beside proj reading rows, against proj reading rows alone.
std::vector<Variant> words_sets() {
  gpt2::MegakernelOptions rows, words;
  rows.proj_reads_rows = true, rows.qkv_words = false;
  words.proj_reads_rows = true, words.qkv_words = true;
  return {{"proj reads rows (the form before)", rows}, {"+ attention reads qkv words", words}};
}

// The sets MegakernelVariants times with FL_DECODE_VARIANTS=l2: when a task's bytes come into
// the SM, each on the one-token instance (runs_one_token_copy_timings): the L2 prefetch ahead
// with the copies one task ahead as in the lesson, the copies after the task's own wait (from L2
// where prefetched, copies_after_wait), after the task before (copies_after_task, but the MLP's)
// and after its inputs, against the lesson's.
std::vector<Variant> copy_timing_sets() {
  using O = gpt2::MegakernelOptions;
  auto with = [](int after_wait, int l2_ahead) {
    O o;
    o.copies_after_wait = after_wait, o.l2_ahead = l2_ahead;
    return o;
  };
  constexpr int kAll = gpt2::kAllTaskKinds, kAttention = 1 << int(gpt2::TaskKind::attention);
  constexpr int kProj = 1 << int(gpt2::TaskKind::proj), kMlp = 1 << int(gpt2::TaskKind::mlp);
  O after_task_l2 = with(0, 2), after_task, but_mlp, after_inputs;
  after_task_l2.copies_after_task = after_task.copies_after_task = true;
  but_mlp.copies_after_task_but_mlp = true;
  after_inputs.copies_after_inputs = true;
  return {{"the lesson's", O{}},
          {"+ L2 1 ahead", with(0, 1)},
          {"+ L2 2 ahead", with(0, 2)},
          {"+ after wait, L2 1 ahead", with(kAll, 1)},
          {"+ after wait, L2 2 ahead", with(kAll, 2)},
          {"+ after wait, L2 4 ahead", with(kAll, 4)},
          {"+ after wait, no L2", with(kAll, 0)},
          {"+ attention after wait, L2 1 ahead", with(kAttention, 1)},
          {"+ attention after wait, no L2", with(kAttention, 0)},
          {"+ attention, proj after wait, L2 1", with(kAttention | kProj, 1)},
          {"+ all but MLP after wait, L2 1", with(kAll & ~kMlp, 1)},
          {"+ after task, L2 2 ahead", after_task_l2},
          {"+ after task", after_task},
          {"+ after task but MLP", but_mlp},
          {"+ after inputs", after_inputs}};
}

// Runs level 4 on poisoned outputs and checks y on the GPU (fp64); returns y.
#define EXPECT_CHECKED_STEP(ws, out)                                                              \
  do {                                                                                            \
    ASSERT_TRUE((ws).poison_outputs(stream_).ok());                                               \
    ASSERT_TRUE(run((ws), 4).ok());                                                               \
    CheckResult gpu_;                                                                             \
    ASSERT_TRUE((ws).check(stream_, &gpu_).ok());                                                 \
    EXPECT_TRUE(gpu_.passed) << "rel " << gpu_.rel_l2_error << " non-finite " << gpu_.non_finite; \
    (out) = output(ws);                                                                           \
  } while (0)

class Gpt2DecodeGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const DeviceFacts device = query_device();
    if (!device.usable) GTEST_FAIL() << "gpu test without a GPU: " << device.unusable_reason;
    if (device.cc_major < 8) GTEST_SKIP() << "bf16 needs compute capability 8.0";
    lesson_ = find_lesson("gpt2_decode");
    ASSERT_NE(lesson_, nullptr);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  Status run(Workspace& ws, int level) {
    for (size_t k = 0; k < lesson_->info().levels[level].launches.size(); ++k)
      FL_TRY(ws.launch(level, static_cast<int>(k), stream_));
    if (cudaStreamSynchronize(stream_) != cudaSuccess || cudaGetLastError() != cudaSuccess)
      return Status::Error("the launch failed on the GPU");
    return Status::Ok();
  }
  std::vector<double> output(Workspace& ws) {  // (y only: not the weights and cache)
    std::vector<HostTensor> out;
    EXPECT_TRUE(ws.download_outputs(stream_, &out).ok());
    return out.at(0).values;
  }
  static double rel(const std::vector<double>& a, const std::vector<double>& ref) {
    return relative_l2_error(a, ref);
  }
  // A workspace at `shape` with inputs from `seed`, and the fp64 CPU reference of its output.
  void prepare(Shape shape, uint64_t seed, std::unique_ptr<Workspace>* ws,
               std::vector<double>* ref) {
    const Status made = lesson_->create_workspace(shape, Precision::bf16, ws);
    ASSERT_TRUE(made.ok()) << made.message();
    ASSERT_TRUE((*ws)->fill_inputs(seed, stream_).ok());
    std::vector<HostTensor> in, out;
    ASSERT_TRUE((*ws)->download(stream_, &in, &out).ok());
    *ref = lesson_->reference(in).at(0).values;
  }
  // At a cache of 133 and 1 and 3 tokens: the lesson's step on the full grid, then `options` on
  // each of `blocks` blocks, each step twice with other inputs (checked by the GPU's fp64
  // check), the second against the full grid's step. FL_DECODE_SMALL=1 (what compute-sanitizer
  // runs): 1 token on 2 blocks.
  void check_partial_grids(const gpt2::MegakernelOptions& options, std::vector<int> blocks) {
    const bool small = std::getenv("FL_DECODE_SMALL") != nullptr;
    for (int tokens : {1, 3}) {
      if (small && tokens > 1) break;
      std::unique_ptr<Workspace> ws;
      ASSERT_TRUE(lesson_->create_workspace(Shape{133, tokens}, Precision::bf16, &ws).ok());
      ASSERT_TRUE(ws->fill_inputs(5, stream_).ok());
      ASSERT_TRUE(run(*ws, 4).ok());
      const std::vector<double> full = output(*ws);
      ASSERT_TRUE(gpt2::set_megakernel_options(*ws, options).ok());
      for (int b : blocks) {
        if (small && b != 2) continue;
        SCOPED_TRACE(std::to_string(b) + " blocks, " + std::to_string(tokens) + " tokens");
        ASSERT_TRUE(gpt2::set_megakernel_blocks(*ws, b).ok());
        for (uint64_t seed : {uint64_t(77), uint64_t(5)}) {
          ASSERT_TRUE(ws->fill_inputs(seed, stream_).ok());
          std::vector<double> y;
          EXPECT_CHECKED_STEP(*ws, y);
        }
        EXPECT_LT(rel(output(*ws), full), 1e-5);  // seed 5 again: the full grid's step
      }
    }
  }
  const Lesson* lesson_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// Six configurations (five fixed, odd and uneven; one random), one set of inputs each, every
// level run on poisoned outputs and compared with the CPU reference and with the GPU's check.
TEST_F(Gpt2DecodeGpu, EveryLevelMatchesTheCpuReference) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<Shape> shapes = {{37, 1}, {129, 3}, {515, 16}, {1001, 7}, {2047, 5}};
  shapes.push_back({int64_t(rng() % 3000) | 1, int64_t(rng() % 16) + 1});
  for (const Shape& shape : shapes) {
    SCOPED_TRACE("cache " + std::to_string(shape.size) + " tokens " + std::to_string(shape.inner));
    std::unique_ptr<Workspace> ws;
    std::vector<double> ref;
    ASSERT_NO_FATAL_FAILURE(prepare(shape, rng(), &ws, &ref));
    for (int level = 0; level < lesson_->level_count(); ++level) {
      SCOPED_TRACE("level " + std::to_string(level));
      ASSERT_TRUE(ws->poison_outputs(stream_).ok());
      const Status ran = run(*ws, level);
      ASSERT_TRUE(ran.ok()) << ran.message();
      const double cpu = rel(output(*ws), ref);
      CheckResult gpu;
      ASSERT_TRUE(ws->check(stream_, &gpu).ok());
      EXPECT_LE(cpu, lesson_->tolerance(Precision::bf16));
      EXPECT_TRUE(gpu.passed) << "GPU check: rel " << gpu.rel_l2_error;
      EXPECT_EQ(gpu.non_finite, 0);
      EXPECT_NEAR(gpu.rel_l2_error, cpu, 0.05 * cpu + 1e-9);
      std::printf("gpt2_decode cache %lld tokens %lld level %d: rel error %.3g (GPU check %.3g)\n",
                  (long long)shape.size, (long long)shape.inner, level, cpu, gpu.rel_l2_error);
    }
    // Level 4 again with the newer option sets (the default is one of them; the partial grid
    // runs every set), attention apart from qkv and the residual's spreads (one token).
    std::vector<Variant> sets = newer_sets();
    for (const std::vector<Variant>& more : {apart_sets(), spread_sets()})
      sets.insert(sets.end(), more.begin() + 1, more.end());
    for (const Variant& v : sets) {
      SCOPED_TRACE(std::string("level 4, ") + v.name);
      ASSERT_TRUE(gpt2::set_megakernel_options(*ws, v.options).ok());
      ASSERT_TRUE(ws->poison_outputs(stream_).ok());
      ASSERT_TRUE(run(*ws, 4).ok());
      EXPECT_LE(rel(output(*ws), ref), lesson_->tolerance(Precision::bf16));
    }
  }
}

// The graphs are captured once and read the buffers at replay: new inputs, new outputs.
TEST_F(Gpt2DecodeGpu, GraphLevelsReplayWithFreshInputs) {
  std::unique_ptr<Workspace> ws;
  ASSERT_TRUE(lesson_->create_workspace(Shape{301, 2}, Precision::bf16, &ws).ok());
  for (int level : {2, 3}) {
    for (int rep = 0; rep < 3; ++rep) {
      SCOPED_TRACE("level " + std::to_string(level) + " replay " + std::to_string(rep));
      ASSERT_TRUE(ws->fill_inputs(1000 + rep, stream_).ok());
      ASSERT_TRUE(ws->poison_outputs(stream_).ok());
      ASSERT_TRUE(run(*ws, level).ok());
      CheckResult gpu;
      ASSERT_TRUE(ws->check(stream_, &gpu).ok());
      EXPECT_TRUE(gpu.passed) << "rel " << gpu.rel_l2_error << " non-finite " << gpu.non_finite;
    }
  }
}

// Every option's other form than the lesson's.
gpt2::MegakernelOptions other_options() {
  gpt2::MegakernelOptions o;
  o.batched_combine = !o.batched_combine;
  o.copies_after_inputs = !o.copies_after_inputs;
  o.one_pass_attention = !o.one_pass_attention;
  o.relaxed_poll = !o.relaxed_poll;
  o.min_split_keys = o.min_split_keys == 32 ? 64 : 32;
  o.skip_own_poll = !o.skip_own_poll;
  o.head_combine = !o.head_combine;
  o.residual_copies = o.residual_copies == 1 ? 3 : 1;
  o.copy_thread = o.copy_thread == 0 ? 32 : 0;
  o.fused_proj = !o.fused_proj;
  o.wide_rows = !o.wide_rows;
  o.proj_apart = !o.proj_apart;
  o.early_copies = !o.early_copies;
  o.copies_after_task_but_mlp = !o.copies_after_task_but_mlp;
  o.branch_free_keys = !o.branch_free_keys;
  o.grid_splits = !o.grid_splits;
  o.task_window = !o.task_window;
  o.poll_first = !o.poll_first;
  o.release_warp = !o.release_warp;
  o.head_proj = !o.head_proj;
  o.quick_tail = !o.quick_tail;
  o.one_token_kernel = !o.one_token_kernel;
  o.qkv_rows = o.qkv_rows == 0 ? 36 : 0;
  return o;
}
// The same with proj by head kept (the options that turn it off kept at the lesson's): proj
// by head beside every other option's other form.
gpt2::MegakernelOptions other_options_by_head() {
  gpt2::MegakernelOptions o = other_options(), lesson;
  o.head_combine = lesson.head_combine;
  o.fused_proj = lesson.fused_proj;
  o.proj_apart = lesson.proj_apart;
  o.residual_copies = lesson.residual_copies;
  o.head_proj = true;
  return o;
}

// Grid splits (MegakernelOptions::grid_splits) longer than a buffer: at a cache of 4001 a full
// grid of 132 blocks takes 11 splits of 364 keys (44 of them from global memory), 2 blocks one
// split of 4003 keys; each checked in fp64 and against capped splits (13 of at most 320 keys,
// all in shared memory).
TEST_F(Gpt2DecodeGpu, MegakernelSplitsPastItsBuffer) {
  std::unique_ptr<Workspace> ws;
  ASSERT_TRUE(lesson_->create_workspace(Shape{4001, 2}, Precision::bf16, &ws).ok());
  ASSERT_TRUE(ws->fill_inputs(41, stream_).ok());
  gpt2::MegakernelOptions capped;
  capped.grid_splits = false;
  ASSERT_TRUE(gpt2::set_megakernel_options(*ws, capped).ok());
  std::vector<double> reference, y;
  EXPECT_CHECKED_STEP(*ws, reference);
  const gpt2::DecodeTaskList* list = gpt2::megakernel_tasks(*ws);
  ASSERT_NE(list, nullptr);
  const int blocks = static_cast<int>(list->block_begin.size() - 1);
  EXPECT_EQ(list->splits, gpt2::attention_splits(4003, blocks));
  ASSERT_TRUE(gpt2::set_megakernel_options(*ws, gpt2::MegakernelOptions{}).ok());
  for (int grid : {blocks, 2}) {
    SCOPED_TRACE(std::to_string(grid) + " blocks");
    ASSERT_TRUE(gpt2::set_megakernel_blocks(*ws, grid).ok());
    list = gpt2::megakernel_tasks(*ws);
    ASSERT_NE(list, nullptr);
    EXPECT_LE(list->splits * gpt2::kHeads, std::max(grid, gpt2::kHeads));
    EXPECT_CHECKED_STEP(*ws, y);
    EXPECT_LT(rel(y, reference), 1e-5);
  }
}

// A split past its buffer at a small configuration (2 blocks: one split of 349 keys, 29 from
// global memory), what compute-sanitizer runs beside MegakernelSmall.
TEST_F(Gpt2DecodeGpu, MegakernelSplitsPastItsBufferSmall) {
  std::unique_ptr<Workspace> ws;
  ASSERT_TRUE(lesson_->create_workspace(Shape{347, 2}, Precision::bf16, &ws).ok());
  ASSERT_TRUE(ws->fill_inputs(43, stream_).ok());
  ASSERT_TRUE(gpt2::set_megakernel_blocks(*ws, 2).ok());
  const gpt2::DecodeTaskList* list = gpt2::megakernel_tasks(*ws);
  ASSERT_NE(list, nullptr);
  EXPECT_EQ(list->splits, 1);
  std::vector<double> y;
  EXPECT_CHECKED_STEP(*ws, y);
}

// Fewer blocks than tasks: 1, 2, 5 and 17 blocks run the same step (each block holds many
// tasks of every stage). Two runs each with different inputs: a stale value from the first
// run, or a counter not reset, would fail the second run's check or hang it.
TEST_F(Gpt2DecodeGpu, MegakernelOnAPartialGrid) {
  std::unique_ptr<Workspace> ws;
  ASSERT_TRUE(lesson_->create_workspace(Shape{133, 3}, Precision::bf16, &ws).ok());
  ASSERT_TRUE(ws->fill_inputs(5, stream_).ok());
  ASSERT_TRUE(run(*ws, 4).ok());
  const std::vector<double> full = output(*ws);
  // The lesson's options, the other forms of each option (the plain combine, the other copy
  // start, the other poll, 32-key splits, the stage cuts: the same sums), then every measured
  // option set.
  const int grids[] = {1, 2, 5, 17};
  std::vector<Variant> sets = {{"the lesson's", gpt2::MegakernelOptions{}},
                               {"the other options", other_options()},
                               {"the other options, proj by head", other_options_by_head()}};
  for (const Variant& v : option_sets()) sets.push_back(v);
  const std::vector<Variant> older = proj_sets(), timed = timed_sets();
  sets.insert(sets.end(), older.begin() + 1, older.end());  // (the first is the lesson's)
  for (size_t k : {1, 4}) sets.push_back(timed.at(k));      // the tail off, 18- and 36-row qkv
  const std::vector<Variant> last = last_proj_sets();
  sets.push_back(last.at(2));  // proj in the last split (Wproj asked into L2)
  for (size_t k = 0; k < 4 * sets.size(); ++k) {
    const int blocks = grids[k % 4];
    const gpt2::MegakernelOptions options = sets[k / 4].options;
    SCOPED_TRACE(std::to_string(blocks) + " blocks, " + sets[k / 4].name);
    ASSERT_TRUE(gpt2::set_megakernel_options(*ws, options).ok());
    ASSERT_TRUE(gpt2::set_megakernel_blocks(*ws, blocks).ok());
    gpt2::TaskListShape shape;
    const gpt2::DecodeTaskList* list = gpt2::megakernel_tasks(*ws, &shape);
    ASSERT_NE(list, nullptr);
    EXPECT_GT(list->tasks.size(), size_t(blocks) * 10);
    for (uint64_t seed : {uint64_t(77), uint64_t(5)}) {
      ASSERT_TRUE(ws->fill_inputs(seed, stream_).ok());
      ASSERT_TRUE(ws->poison_outputs(stream_).ok());
      ASSERT_TRUE(run(*ws, 4).ok());
      CheckResult gpu;
      ASSERT_TRUE(ws->check(stream_, &gpu).ok());
      EXPECT_TRUE(gpu.passed) << "rel " << gpu.rel_l2_error << " non-finite " << gpu.non_finite;
    }
    // Seed 5 again: the same step as the full grid's (only the attention splits differ).
    EXPECT_LT(rel(output(*ws), full), 1e-5);
  }
  // One token (the one-token kernel where the options are the lesson's), the same way: the
  // lesson's, the one-token kernel with 18-row qkv and no quick tail, with 36-row qkv, the
  // lesson's on the other kernel, and the residual dense and spread 4 times.
  const std::vector<Variant> spread = spread_sets();
  const std::vector<Variant> ones = {timed.at(0),  timed.at(2),  timed.at(4), timed.at(6),
                                     spread.at(0), spread.at(1), last.at(1),  last.at(2)};
  std::unique_ptr<Workspace> one;
  ASSERT_TRUE(lesson_->create_workspace(Shape{133, 1}, Precision::bf16, &one).ok());
  ASSERT_TRUE(one->fill_inputs(5, stream_).ok());
  ASSERT_TRUE(run(*one, 4).ok());
  const std::vector<double> full_one = output(*one);
  for (size_t k = 0; k < 4 * ones.size(); ++k) {
    const int blocks = grids[k % 4];
    SCOPED_TRACE(std::to_string(blocks) + " blocks, one token, " + ones[k / 4].name);
    ASSERT_TRUE(gpt2::set_megakernel_options(*one, ones[k / 4].options).ok());
    ASSERT_TRUE(gpt2::set_megakernel_blocks(*one, blocks).ok());
    for (uint64_t seed : {uint64_t(77), uint64_t(5)}) {
      ASSERT_TRUE(one->fill_inputs(seed, stream_).ok());
      ASSERT_TRUE(one->poison_outputs(stream_).ok());
      ASSERT_TRUE(run(*one, 4).ok());
      CheckResult gpu;
      ASSERT_TRUE(one->check(stream_, &gpu).ok());
      EXPECT_TRUE(gpu.passed) << "rel " << gpu.rel_l2_error << " non-finite " << gpu.non_finite;
    }
    EXPECT_LT(rel(output(*one), full_one), 1e-5);
  }
}

// The chain of a run's task records, stage by stage: each stage's length, when its first task
// started and when its last-ending one did, and where that task's block came from.
void print_chain(const std::vector<PhaseRecord>& records, const gpt2::DecodeTaskList& list,
                 uint64_t first, double span) {
  // The chain, stage by stage (stage = layer x 4 + kind; the final norm last).
  const int stages = gpt2::kLayers * gpt2::kStagesPerLayer + 1;
  std::vector<uint64_t> min_start(stages, UINT64_MAX), max_end(stages, 0), crit_start(stages, 0);
  std::vector<size_t> crit(stages, 0);  // the record of each stage's last-ending task
  auto stage_of = [&](const PhaseRecord& r) {
    const gpt2::DecodeTask& t = list.tasks.at(r.arg);
    return t.kind == uint8_t(gpt2::TaskKind::final_norm) ? stages - 1
                                                         : t.layer * gpt2::kStagesPerLayer + t.kind;
  };
  std::map<uint32_t, std::vector<size_t>> by_block;  // each block's records in start order
  for (size_t i = 0; i < records.size(); ++i) {
    const PhaseRecord& r = records[i];
    const int st = stage_of(r);
    min_start[st] = std::min(min_start[st], r.start_ns);
    if (r.end_ns > max_end[st]) max_end[st] = r.end_ns, crit_start[st] = r.start_ns, crit[st] = i;
    by_block[r.block].push_back(i);
  }
  for (auto& [block, list_of] : by_block)
    std::sort(list_of.begin(), list_of.end(),
              [&](size_t x, size_t y) { return records[x].start_ns < records[y].start_ns; });
  // The stage before each (with attention and proj fused, a layer has no proj stage).
  std::vector<int> before_of(stages, -1);
  for (int st = 1, last = max_end[0] != 0 ? 0 : -1; st < stages; ++st) {
    before_of[st] = last;
    if (max_end[st] != 0) last = st;
  }
  // Where a stage's last-ending task came from: its block's task before it (the stage before's
  // last-ending one? a task of the stage before?), and the block's gap between the two.
  int same = 0, adjacent = 0, counted = 0;
  double gap = 0, early = 0;
  for (int st = 1; st < stages; ++st) {
    const int b = before_of[st];
    if (max_end[st] == 0 || b < 0) continue;
    const PhaseRecord& c = records[crit[st]];
    const std::vector<size_t>& mine = by_block[c.block];
    const auto at = std::find(mine.begin(), mine.end(), crit[st]);
    if (at == mine.begin()) continue;
    const PhaseRecord& prev = records[*(at - 1)];
    ++counted;
    same += *(at - 1) == crit[b];
    adjacent += stage_of(prev) == b;
    gap += (double(c.start_ns) - double(prev.end_ns)) / 1e3;
    early += (double(max_end[b]) - double(prev.end_ns)) / 1e3;
  }
  double k_stage[gpt2::kTaskKinds] = {}, k_hop[gpt2::kTaskKinds] = {},
         k_late[gpt2::kTaskKinds] = {}, k_run[gpt2::kTaskKinds] = {};
  int k_count[gpt2::kTaskKinds] = {};
  for (int st = 1; st < stages; ++st) {
    const int kind =
        st == stages - 1 ? int(gpt2::TaskKind::final_norm) : st % gpt2::kStagesPerLayer;
    if (max_end[st] == 0 || before_of[st] < 0) continue;
    const uint64_t before = max_end[before_of[st]];
    k_stage[kind] += (max_end[st] - before) / 1e3;
    k_hop[kind] += (double(min_start[st]) - double(before)) / 1e3;
    k_late[kind] += (double(crit_start[st]) - double(before)) / 1e3;
    k_run[kind] += (max_end[st] - crit_start[st]) / 1e3;
    ++k_count[kind];
  }
  std::printf("  chain: %d stages from %.1f us (the first stage's end) to %.1f us\n", stages - 1,
              (max_end[0] - first) / 1e3, span);
  for (int kind = 0; kind < gpt2::kTaskKinds; ++kind) {
    if (k_count[kind] == 0) continue;
    const int n = k_count[kind];
    std::printf(
        "  stage %-10s x%2d: mean %.2f us: first task started %.2f us after the stage before "
        "ended, the last-ending one at %.2f us and ran %.2f us\n",
        gpt2::task_kind_name(gpt2::TaskKind(kind)), n, k_stage[kind] / n, k_hop[kind] / n,
        k_late[kind] / n, k_run[kind] / n);
  }
  if (counted > 0)
    std::printf(
        "  a stage's last-ending task: its block's task before was the stage before's "
        "last-ending one in %d of %d stages, a task of the stage before in %d; it started %.2f us "
        "after its block's task before ended, which ended %.2f us before the stage before did\n",
        same, counted, adjacent, gap / counted, early / counted);
}

// The timeline's breakdown of one run's task records, per block: running tasks, waiting on a
// dependency counter or the task's copy, and idle (between tasks, or done before the last
// block); then per task kind, how many and their mean time running and waiting, and the bytes
// each copies (weights, or an attention split's cached keys and values); then the chain: per
// stage (a layer's tasks of one kind) from the end of the stage before to its own end, how soon
// its first task started (the hop: seeing the count, the barrier) and when its last-ending task
// started and how long it ran.
void print_breakdown(const std::string& label, const std::vector<PhaseRecord>& records,
                     const gpt2::DecodeTaskList& list, const gpt2::TaskListShape& shape) {
  const int blocks = static_cast<int>(list.block_begin.size() - 1);
  if (records.empty()) return;
  uint64_t busy = 0, waited = 0, first = UINT64_MAX, last = 0;
  for (const PhaseRecord& r : records) {
    busy += r.end_ns - r.start_ns;
    waited += r.wait_ns;
    first = std::min(first, r.start_ns - r.wait_ns);
    last = std::max(last, r.end_ns);
  }
  const double span = (last - first) / 1e3;
  auto bytes_of = [&](const gpt2::DecodeTask& t) -> double {
    switch (gpt2::TaskKind(t.kind)) {
      case gpt2::TaskKind::proj:
        if (t.flags & gpt2::kHeadProj) return gpt2::kProjSliceBytes;
        return t.count * gpt2::kC * 2.0;
      case gpt2::TaskKind::qkv:
        return t.count * gpt2::kC * 2.0;
      case gpt2::TaskKind::mlp:
        return t.count * gpt2::kC * 4.0;
      case gpt2::TaskKind::attention: {
        const int positions = shape.cache + shape.tokens;
        const int len = gpt2::split_length(positions, list.splits);
        const int f = std::min(positions, int(t.first % list.splits) * len);
        const int e = std::min(positions, f + len);
        return std::max(0, std::min(e, shape.cache) - f) * 4.0 * gpt2::kHeadDim;
      }
      default:
        return 0.0;
    }
  };
  double all_bytes = 0;
  for (const gpt2::DecodeTask& t : list.tasks) all_bytes += bytes_of(t);
  std::printf(
      "%s: %zu tasks over %.1f us; per block: running %.1f us, waiting %.1f us, idle %.1f us; "
      "%.1f MB copied, %.0f GB/s over the span (%.1f GB/s a block)\n",
      label.c_str(), records.size(), span, busy / 1e3 / blocks, waited / 1e3 / blocks,
      span - (busy + waited) / 1e3 / blocks, all_bytes / 1e6, all_bytes / span / 1e3,
      all_bytes / span / 1e3 / blocks);
  for (int kind = 0; kind < gpt2::kTaskKinds; ++kind) {
    uint64_t k_busy = 0, k_wait = 0, k_n = 0;
    double k_bytes = 0;
    for (const PhaseRecord& r : records) {
      if (r.phase != kind) continue;
      ++k_n;
      k_busy += r.end_ns - r.start_ns;
      k_wait += r.wait_ns;
      k_bytes += bytes_of(list.tasks.at(r.arg));
    }
    if (k_n == 0) continue;
    std::printf("  %-10s %5llu tasks: mean %.2f us running, %.2f us waiting, %.1f KB copied\n",
                gpt2::task_kind_name(gpt2::TaskKind(kind)), (unsigned long long)k_n,
                k_busy / 1e3 / k_n, k_wait / 1e3 / k_n, k_bytes / 1e3 / k_n);
  }
  print_chain(records, list, first, span);
}

// The probes (model.h's ProbeSlot): per task kind, mean microseconds a task in each slot; then
// per kind, averaged over the layers, the slots of each stage's last-ending task (the one that
// sets the stage's end) and of its first-starting one: when its block's task before ended
// (against the stage before's end), the loop and the next task's copies ("issue"), the counter
// (and when it was seen, against the stage before's end), the own bytes, inputs, compute,
// outputs and release.
void print_probes(const std::vector<unsigned long long>& all, const gpt2::DecodeTaskList& list) {
  if (all.size() < size_t(gpt2::kProbeSums)) return;
  for (int kind = 0; kind < gpt2::kTaskKinds; ++kind) {
    const unsigned long long* k = all.data() + kind * (gpt2::kProbeSlots + 1);
    if (k[gpt2::kProbeSlots] == 0) continue;
    std::printf("  probes %-10s", gpt2::task_kind_name(gpt2::TaskKind(kind)));
    for (int s = 0; s < gpt2::kProbeSlots; ++s)
      std::printf(" %s %.2f", gpt2::probe_slot_name(s), k[s] / 1e3 / k[gpt2::kProbeSlots]);
    std::printf(" us\n");
  }
  const int blocks = static_cast<int>(list.block_begin.size() - 1);
  const size_t n = list.tasks.size(), at = gpt2::kProbeSums + size_t(blocks) * gpt2::kProbeSlots;
  if (all.size() < at + n * gpt2::kProbeStamps) return;
  auto stamp = [&](size_t task, int s) { return double(all[at + task * gpt2::kProbeStamps + s]); };
  std::vector<bool> opens(n, false);  // the first task of its block's list
  for (int b = 0; b < blocks; ++b)
    if (list.block_begin[b] < list.block_begin[b + 1]) opens[list.block_begin[b]] = true;
  // When task i's block ended its task before (released its count), and was done with it.
  auto before_ended = [&](size_t i) {
    return opens[i] ? stamp(i, gpt2::kStampBefore) : stamp(i - 1, gpt2::kStampEnded);
  };
  const int stages = gpt2::kLayers * gpt2::kStagesPerLayer + 1;
  std::vector<size_t> last(stages, n), first(stages, n);
  for (size_t i = 0; i < n; ++i) {
    const gpt2::DecodeTask& t = list.tasks[i];
    const int st = t.kind == uint8_t(gpt2::TaskKind::final_norm)
                       ? stages - 1
                       : t.layer * gpt2::kStagesPerLayer + t.kind;
    if (last[st] == n || stamp(i, gpt2::kStampEnded) > stamp(last[st], gpt2::kStampEnded))
      last[st] = i;
    if (first[st] == n || stamp(i, gpt2::kStampStarted) < stamp(first[st], gpt2::kStampStarted))
      first[st] = i;
  }
  // [kind][which: 0 last-ending, 1 first-starting][0 before, 1 read, 2 counter, 3 seen,
  // 4.. copy, inputs, compute, outputs, release, 9 instruments, 10 issue (read to asked),
  // 11 the copier's start after the task before, 12 its large ranges, 13 its small parameters,
  // 14 its commit against the count's being seen]
  constexpr int kCols = 15;
  double sum[gpt2::kTaskKinds][2][kCols] = {};
  int count[gpt2::kTaskKinds] = {};
  for (int st = 1; st < stages; ++st) {
    if (last[st] == n || last[st - 1] == n) continue;
    const double before_end = stamp(last[st - 1], gpt2::kStampEnded);
    const int kind = list.tasks[last[st]].kind;
    ++count[kind];
    for (int w = 0; w < 2; ++w) {
      const size_t i = w == 0 ? last[st] : first[st];
      auto d = [&](int from, int to) { return (stamp(i, to) - stamp(i, from)) / 1e3; };
      double* out = sum[kind][w];
      out[0] += (before_ended(i) - before_end) / 1e3;
      out[1] += d(gpt2::kStampBefore, gpt2::kStampRead);
      out[9] += (stamp(i, gpt2::kStampBefore) - before_ended(i)) / 1e3;
      out[10] += d(gpt2::kStampRead, gpt2::kStampAsked);
      out[2] += d(gpt2::kStampAsked, gpt2::kStampSeen);
      out[3] += (stamp(i, gpt2::kStampSeen) - before_end) / 1e3;
      for (int s = 1; s < gpt2::kProbeSlots; ++s)
        out[3 + s] += d(gpt2::kStampAsked + s, gpt2::kStampAsked + s + 1);
      out[11] += d(gpt2::kStampBefore, gpt2::kStampIssueFrom);
      out[12] += d(gpt2::kStampIssueFrom, gpt2::kStampIssueLarge);
      out[13] += d(gpt2::kStampIssueLarge, gpt2::kStampIssueDone);
      out[14] += d(gpt2::kStampSeen, gpt2::kStampIssueDone);
    }
  }
  for (int kind = 0; kind < gpt2::kTaskKinds; ++kind) {
    if (count[kind] == 0) continue;
    for (int w = 0; w < 2; ++w) {
      const double* v = sum[kind][w];
      const double c = count[kind];
      std::printf(
          "  %s %-10s x%2d: its block's task before ended %+.2f us from the stage before's end; "
          "instruments %.2f, read %.2f, issue %.2f, counter %.2f (seen %+.2f), copy %.2f, inputs "
          "%.2f, compute %.2f, outputs %.2f, release %.2f us; copier from %+.2f: large %.2f, "
          "small %.2f, done %+.2f us from seen\n",
          w == 0 ? "last-ending   " : "first-starting", gpt2::task_kind_name(gpt2::TaskKind(kind)),
          count[kind], v[0] / c, v[9] / c, v[1] / c, v[10] / c, v[2] / c, v[3] / c, v[4] / c,
          v[5] / c, v[6] / c, v[7] / c, v[8] / c, v[11] / c, v[12] / c, v[13] / c, v[14] / c);
    }
  }
}

// Runs level 4 once with its probes on; returns every probe word (empty on a failure).
std::vector<unsigned long long> run_probes(Workspace& ws, cudaStream_t stream,
                                           const gpt2::DecodeTaskList& list) {
  const int words = gpt2::probe_words(static_cast<int>(list.block_begin.size() - 1),
                                      static_cast<int>(list.tasks.size()));
  unsigned long long* probes = nullptr;
  std::vector<unsigned long long> host;
  if (cudaMalloc(reinterpret_cast<void**>(&probes), words * 8) != cudaSuccess ||
      cudaMemset(probes, 0, words * 8) != cudaSuccess ||
      !gpt2::set_megakernel_probes(ws, probes).ok() || !ws.launch(4, 0, stream).ok() ||
      cudaStreamSynchronize(stream) != cudaSuccess) {
    ADD_FAILURE() << "the probed run failed";
  } else {
    host.resize(words);
    EXPECT_EQ(cudaMemcpy(host.data(), probes, host.size() * 8, cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  EXPECT_TRUE(gpt2::set_megakernel_probes(ws, nullptr).ok());
  cudaFree(probes);
  return host;
}

// Runs level 4 once with its task records on; returns them (empty on a failure, which the
// caller's expectations report).
std::vector<PhaseRecord> record_tasks(Workspace& ws, cudaStream_t stream, unsigned n) {
  PhaseRecord* records = nullptr;
  unsigned* count = nullptr;
  std::vector<PhaseRecord> host;
  if (cudaMalloc(reinterpret_cast<void**>(&records), n * sizeof(PhaseRecord)) != cudaSuccess ||
      cudaMalloc(reinterpret_cast<void**>(&count), sizeof(unsigned)) != cudaSuccess ||
      cudaMemset(count, 0, sizeof(unsigned)) != cudaSuccess ||
      !gpt2::set_megakernel_phases(ws, PhaseSink{records, count, n}).ok() ||
      !ws.launch(4, 0, stream).ok() || cudaStreamSynchronize(stream) != cudaSuccess) {
    ADD_FAILURE() << "the recorded run failed";
  } else {
    unsigned written = 0;
    host.resize(n);
    EXPECT_EQ(cudaMemcpy(&written, count, sizeof(unsigned), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), records, n * sizeof(PhaseRecord), cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(written, n);
  }
  EXPECT_TRUE(gpt2::set_megakernel_phases(ws, PhaseSink{}).ok());
  cudaFree(records);
  cudaFree(count);
  return host;
}

// One record per task: its kind, its index, an SM, an end after its start.
TEST_F(Gpt2DecodeGpu, MegakernelRecordsEveryTask) {
  std::unique_ptr<Workspace> ws;
  ASSERT_TRUE(lesson_->create_workspace(Shape{511, 1}, Precision::bf16, &ws).ok());
  const gpt2::DecodeTaskList* list = gpt2::megakernel_tasks(*ws);
  ASSERT_NE(list, nullptr);
  const unsigned n = static_cast<unsigned>(list->tasks.size());
  ASSERT_TRUE(ws->fill_inputs(9, stream_).ok());
  const std::vector<PhaseRecord> host = record_tasks(*ws, stream_, n);
  ASSERT_EQ(host.size(), n);
  std::set<uint32_t> seen;
  for (const PhaseRecord& r : host) {
    ASSERT_LT(r.arg, n);
    EXPECT_TRUE(seen.insert(r.arg).second) << "task " << r.arg << " recorded twice";
    EXPECT_EQ(r.phase, list->tasks[r.arg].kind);
    EXPECT_GE(r.end_ns, r.start_ns);
  }
  gpt2::TaskListShape shape;
  gpt2::megakernel_tasks(*ws, &shape);
  print_breakdown("megakernel at cache 511, 1 token", host, *list, shape);
  // The probes: every kind's tasks counted once each, a slot's time within the step's.
  const std::vector<unsigned long long> probes = run_probes(*ws, stream_, *list);
  ASSERT_EQ(probes.size(), size_t(gpt2::probe_words(shape.blocks, int(n))));
  unsigned long long counted = 0;
  for (int kind = 0; kind < gpt2::kTaskKinds; ++kind)
    counted += probes[kind * (gpt2::kProbeSlots + 1) + gpt2::kProbeSlots];
  EXPECT_EQ(counted, n);
  // Every task left its stamps, in order (its block's task before ended before it asked).
  const size_t at = gpt2::kProbeSums + size_t(shape.blocks) * gpt2::kProbeSlots;
  for (size_t i = 0; i < n; ++i) {
    const unsigned long long* st = probes.data() + at + i * gpt2::kProbeStamps;
    for (int s = 0; s + 1 < gpt2::kProbeOrdered; ++s)
      ASSERT_LE(st[s], st[s + 1]) << "task " << i << " stamp " << s;
    ASSERT_NE(st[0], 0u) << "task " << i;
    // the release's start between the outputs written and its end; a copy landed stays landed
    EXPECT_LE(st[gpt2::kStampWritten], st[gpt2::kStampReleaseFrom]) << "task " << i;
    EXPECT_LE(st[gpt2::kStampReleaseFrom], st[gpt2::kStampEnded]) << "task " << i;
    const unsigned long long copy = st[gpt2::kStampNextCopy];
    EXPECT_TRUE((copy & 2) == 0 || (copy & 5) == 5) << "task " << i << " copy " << copy;
  }
  print_probes(probes, *list);
}

// The megakernel's copy options (model.h's MegakernelOptions) against each other and against
// level 3 (graph + PDL) in one run, one change at a time: set FL_DECODE_VARIANTS=1
// (scripts/gpt2-decode-check.sh's `variants` stage; FL_DECODE_VARIANTS=apart, spread, lastproj,
// burst or l2 times apart_sets(), spread_sets(), last_proj_sets() or all of it but its mode 1,
// or copy_timing_sets() instead of timed_sets(); rows and words: rows_timed_sets(),
// words_sets()). Each variant is checked first (the fp64 GPU check at 1 and 16 tokens), then
// timed: the median of back-to-back steps by CUDA events (each step reads its 170 MB of weights
// in the same order and L2 holds 50 MB, so they come from DRAM), and its task records'
// breakdown at cache 512.
TEST_F(Gpt2DecodeGpu, MegakernelVariants) {
  if (std::getenv("FL_DECODE_VARIANTS") == nullptr)
    GTEST_SKIP() << "FL_DECODE_VARIANTS not set (a measurement, not a check)";
  // The first form again at the end says how far the GPU drifted over the run.
  const std::string which = std::getenv("FL_DECODE_VARIANTS");
  std::vector<Variant> variants = which == "apart"                          ? apart_sets()
                                  : which == "spread"                       ? spread_sets()
                                  : which == "lastproj" || which == "burst" ? last_proj_sets()
                                  : which == "l2"                           ? copy_timing_sets()
                                  : which == "rows"                         ? rows_timed_sets()
                                  : which == "words"                        ? words_sets()
                                                                            : timed_sets();
  if (which == "burst") variants.erase(variants.begin() + 1);  // (the last split: 2 and 3)
  variants.push_back({"the first form again (drift)", variants.front().options});
  cudaEvent_t start = nullptr, stop = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  auto median_us = [&](Workspace& ws, int level, int reps) {
    std::vector<float> ms;
    for (int r = 0; r < reps + 3; ++r) {
      EXPECT_EQ(cudaEventRecord(start, stream_), cudaSuccess);
      EXPECT_TRUE(ws.launch(level, 0, stream_).ok());
      EXPECT_EQ(cudaEventRecord(stop, stream_), cudaSuccess);
      EXPECT_EQ(cudaEventSynchronize(stop), cudaSuccess);
      float t = 0;
      EXPECT_EQ(cudaEventElapsedTime(&t, start, stop), cudaSuccess);
      if (r >= 3) ms.push_back(t);  // three warm-up steps
    }
    std::sort(ms.begin(), ms.end());
    return 1e3 * ms[ms.size() / 2];
  };
  std::unique_ptr<Workspace> check16;
  ASSERT_TRUE(lesson_->create_workspace(Shape{515, 16}, Precision::bf16, &check16).ok());
  ASSERT_TRUE(check16->fill_inputs(21, stream_).ok());
  std::vector<int> caches = {512, 2048};
  if (const char* list_of = std::getenv("FL_DECODE_CACHES")) {  // "512,2048,4096"
    caches.clear();
    for (const char* c = list_of; *c != 0;) {
      char* end = nullptr;
      const long v = std::strtol(c, &end, 10);
      if (end == c || v < 16 || v > gpt2::kMaxCache) break;
      caches.push_back(int(v));
      c = *end == ',' ? end + 1 : end;
    }
  }
  for (int cache : caches) {
    std::unique_ptr<Workspace> ws;
    ASSERT_TRUE(lesson_->create_workspace(Shape{cache, 1}, Precision::bf16, &ws).ok());
    ASSERT_TRUE(ws->fill_inputs(cache, stream_).ok());
    const double graph = median_us(*ws, 2, 50);
    std::printf(
        "cache %d, 1 token: graph %.1f us, graph+PDL %.1f us (median of 50, back to back)\n", cache,
        graph, median_us(*ws, 3, 50));
    for (const Variant& v : variants) {
      SCOPED_TRACE(v.name);
      for (Workspace* w : {ws.get(), check16.get()}) {
        ASSERT_TRUE(gpt2::set_megakernel_options(*w, v.options).ok());
        ASSERT_TRUE(w->poison_outputs(stream_).ok());
        ASSERT_TRUE(run(*w, 4).ok());
        CheckResult gpu;
        ASSERT_TRUE(w->check(stream_, &gpu).ok());
        EXPECT_TRUE(gpu.passed) << "rel " << gpu.rel_l2_error << " non-finite " << gpu.non_finite;
      }
      std::printf("cache %d, 1 token: megakernel %-34s %.1f us\n", cache, v.name,
                  median_us(*ws, 4, 50));
      // The breakdown of the lesson's form at every cache, of the others at 512.
      if (&v == &variants.back() || (&v != &variants.front() && cache != 512)) continue;
      gpt2::TaskListShape shape;
      const gpt2::DecodeTaskList* list = gpt2::megakernel_tasks(*ws, &shape);
      ASSERT_NE(list, nullptr);
      print_breakdown(std::string("  timeline, ") + v.name,
                      record_tasks(*ws, stream_, static_cast<unsigned>(list->tasks.size())), *list,
                      shape);
      print_probes(run_probes(*ws, stream_, *list), *list);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

// A step for Hugging Face transformers' GPT2Model to redo (tests/gpu/gpt2_transformers.sh
// sets FL_GPT2_STEP_DIR): the inputs (x, the weights, the caches) and every level's y, as raw
// little-endian float32 files and a meta.json; gpt2_transformers_check.py loads the weights into
// GPT2Model and compares. Skipped without the variable.
constexpr int kMaxStepTokens = 16;
TEST_F(Gpt2DecodeGpu, WritesAStepForTransformers) {
  const char* dir = std::getenv("FL_GPT2_STEP_DIR");
  if (dir == nullptr) GTEST_SKIP() << "FL_GPT2_STEP_DIR not set (gpt2_transformers.sh sets it)";
  // 3 new tokens (level 4: the task list), or FL_GPT2_STEP_TOKENS (1: level 4's cluster step on
  // an sm_90 build)
  const char* tokens = std::getenv("FL_GPT2_STEP_TOKENS");
  const Shape shape{
      203, tokens != nullptr ? std::max(1, std::min(kMaxStepTokens, std::atoi(tokens))) : 3};
  std::unique_ptr<Workspace> ws;
  ASSERT_TRUE(lesson_->create_workspace(shape, Precision::bf16, &ws).ok());
  ASSERT_TRUE(ws->fill_inputs(std::random_device{}(), stream_).ok());
  auto write = [&](const std::string& name, const std::vector<double>& values) {
    std::vector<float> f(values.begin(), values.end());  // bf16 and fp32 values: exact
    FILE* out = std::fopen((std::string(dir) + "/" + name + ".f32").c_str(), "wb");
    ASSERT_NE(out, nullptr) << name;
    EXPECT_EQ(std::fwrite(f.data(), sizeof(float), f.size(), out), f.size());
    EXPECT_EQ(std::fclose(out), 0);
  };
  for (int level = 0; level < lesson_->level_count(); ++level) {
    ASSERT_TRUE(ws->poison_outputs(stream_).ok());
    ASSERT_TRUE(run(*ws, level).ok());
    write("y_level" + std::to_string(level), output(*ws));
  }
  std::vector<HostTensor> in, out;
  ASSERT_TRUE(ws->download(stream_, &in, &out).ok());
  for (const HostTensor& t : in) write(t.name, t.values);
  FILE* meta = std::fopen((std::string(dir) + "/meta.json").c_str(), "w");
  ASSERT_NE(meta, nullptr);
  std::fprintf(meta, "{\"cache\": %lld, \"tokens\": %lld, \"levels\": %d, \"tolerance\": %g}\n",
               (long long)shape.size, (long long)shape.inner, lesson_->level_count(),
               lesson_->tolerance(Precision::bf16));
  EXPECT_EQ(std::fclose(meta), 0);
}

// The megakernel once at a small configuration: what compute-sanitizer runs
// (scripts/gpt2-decode-check.sh: memcheck, racecheck, synccheck).
TEST_F(Gpt2DecodeGpu, MegakernelSmall) {
  std::unique_ptr<Workspace> ws;
  ASSERT_TRUE(lesson_->create_workspace(Shape{19, 2}, Precision::bf16, &ws).ok());
  ASSERT_TRUE(ws->fill_inputs(3, stream_).ok());
  // The lesson's options, every other option's other form, every stage cut at once with the
  // copies from warp 1 after the inputs, and the newer forms: proj apart with early copies,
  // copies after the task, attention and proj fused with branch-free keys; the counts released
  // by warp 2; proj by rows (the form before proj by head), head waits (by rows),
  // and proj by head beside every other option's other form (ten sets: racecheck, ~40 s);
  // then the lesson's at one token (the one-token kernel).
  const std::vector<Variant> sets = option_sets();
  gpt2::MegakernelOptions release;
  release.release_warp = true;
  for (const gpt2::MegakernelOptions& options :
       {gpt2::MegakernelOptions{}, other_options(), sets.at(6).options, sets.at(13).options,
        sets.at(16).options, sets.at(21).options, release, proj_sets().at(1).options,
        proj_sets().at(2).options, other_options_by_head(), last_proj_sets().at(1).options,
        last_proj_sets().at(2).options, rows_sets().at(1).options}) {
    ASSERT_TRUE(gpt2::set_megakernel_options(*ws, options).ok());
    ASSERT_TRUE(ws->poison_outputs(stream_).ok());
    ASSERT_TRUE(run(*ws, 4).ok());
    CheckResult gpu;
    ASSERT_TRUE(ws->check(stream_, &gpu).ok());
    EXPECT_TRUE(gpu.passed) << "rel " << gpu.rel_l2_error << " non-finite " << gpu.non_finite;
  }
  // One token: the lesson's (the one-token kernel; MegakernelOneToken runs the others), and
  // proj reading rows on the full grid and on 2 blocks.
  std::unique_ptr<Workspace> one;
  ASSERT_TRUE(lesson_->create_workspace(Shape{23, 1}, Precision::bf16, &one).ok());
  ASSERT_TRUE(one->fill_inputs(4, stream_).ok());
  for (int set = 0; set < 3; ++set) {
    SCOPED_TRACE("one token, set " + std::to_string(set));
    if (set > 0) ASSERT_TRUE(gpt2::set_megakernel_options(*one, rows_sets().at(1).options).ok());
    if (set == 2) ASSERT_TRUE(gpt2::set_megakernel_blocks(*one, 2).ok());
    ASSERT_TRUE(one->poison_outputs(stream_).ok());
    ASSERT_TRUE(run(*one, 4).ok());
    CheckResult gpu;
    ASSERT_TRUE(one->check(stream_, &gpu).ok());
    EXPECT_TRUE(gpu.passed) << "rel " << gpu.rel_l2_error << " non-finite " << gpu.non_finite;
  }
}

// proj by head reading its head's flagged rows (MegakernelOptions::proj_reads_rows) against
// the fp64 CPU reference at odd configurations (1, 16 and 7 tokens: the one-token kernel and the
// other), beside the lesson's form on the same inputs; then on partial grids of 2, 5 and 17
// blocks at 1 and 3 tokens, each step twice with other inputs (the rows' flags of the step
// before are in the buffer), against the full grid's step. FL_DECODE_SMALL=1 (what
// compute-sanitizer runs): caches 23 and 19 at 1 and 2 tokens, 2 blocks at 1 token.
TEST_F(Gpt2DecodeGpu, MegakernelProjReadsRows) {
  const bool small = std::getenv("FL_DECODE_SMALL") != nullptr;
  std::mt19937_64 rng(std::random_device{}());
  const std::vector<Shape> shapes =
      small ? std::vector<Shape>{Shape{23, 1}, Shape{19, 2}}
            : std::vector<Shape>{Shape{37, 1}, Shape{515, 16}, Shape{1001, 7}};
  for (const Shape& shape : shapes) {
    SCOPED_TRACE("cache " + std::to_string(shape.size) + " tokens " + std::to_string(shape.inner));
    std::unique_ptr<Workspace> ws;
    std::vector<double> ref;
    ASSERT_NO_FATAL_FAILURE(prepare(shape, rng(), &ws, &ref));
    for (const Variant& v : rows_sets()) {
      SCOPED_TRACE(v.name);
      ASSERT_TRUE(gpt2::set_megakernel_options(*ws, v.options).ok());
      const gpt2::DecodeTaskList* list = gpt2::megakernel_tasks(*ws);
      ASSERT_NE(list, nullptr);
      EXPECT_EQ(list->proj_reads_rows, v.options.proj_reads_rows);
      for (int again = 0; again < 2; ++again) {  // (the second over the first's rows)
        ASSERT_TRUE(ws->poison_outputs(stream_).ok());
        ASSERT_TRUE(run(*ws, 4).ok());
        const double cpu = rel(output(*ws), ref);
        EXPECT_LE(cpu, lesson_->tolerance(Precision::bf16));
        std::printf("gpt2_decode cache %lld tokens %lld %s: rel error %.3g\n",
                    (long long)shape.size, (long long)shape.inner, v.name, cpu);
      }
    }
  }
  ASSERT_NO_FATAL_FAILURE(check_partial_grids(rows_sets().at(1).options, {2, 5, 17}));
}

// Attention reading its head's flagged q, k and v words (MegakernelOptions::qkv_words) against
// the fp64 CPU reference at odd configurations (1, 16 and 7 tokens: the one-token kernel and the
// other; at 16 tokens and a cache of 515 the last two splits hold new positions; at 4001 the last
// split reads keys past its buffer from global memory before the new ones), beside proj
// reading rows alone on the same inputs, each step twice (the words' flags of the step before
// are in the buffer); then on partial grids of 1, 2, 5 and 17 blocks at 1 and 3 tokens, each
// step twice with other inputs, against the full grid's step. FL_DECODE_SMALL=1 (what
// compute-sanitizer runs): caches 23 and 19 at 1 and 2 tokens, 2 blocks at 1 token.
TEST_F(Gpt2DecodeGpu, MegakernelQkvWords) {
  const bool small = std::getenv("FL_DECODE_SMALL") != nullptr;
  std::mt19937_64 rng(std::random_device{}());
  const std::vector<Shape> shapes =
      small ? std::vector<Shape>{Shape{23, 1}, Shape{19, 2}}
            : std::vector<Shape>{Shape{37, 1}, Shape{515, 16}, Shape{1001, 7}, Shape{4001, 2}};
  for (const Shape& shape : shapes) {
    SCOPED_TRACE("cache " + std::to_string(shape.size) + " tokens " + std::to_string(shape.inner));
    std::unique_ptr<Workspace> ws;
    std::vector<double> ref;
    ASSERT_NO_FATAL_FAILURE(prepare(shape, rng(), &ws, &ref));
    std::vector<double> before;
    for (const Variant& v : words_sets()) {
      SCOPED_TRACE(v.name);
      ASSERT_TRUE(gpt2::set_megakernel_options(*ws, v.options).ok());
      const gpt2::DecodeTaskList* list = gpt2::megakernel_tasks(*ws);
      ASSERT_NE(list, nullptr);
      EXPECT_EQ(list->qkv_words, v.options.qkv_words);
      for (int again = 0; again < 2; ++again) {  // (the second over the first's words)
        ASSERT_TRUE(ws->poison_outputs(stream_).ok());
        ASSERT_TRUE(run(*ws, 4).ok());
        const double cpu = rel(output(*ws), ref);
        EXPECT_LE(cpu, lesson_->tolerance(Precision::bf16));
        std::printf("gpt2_decode cache %lld tokens %lld %s: rel error %.3g\n",
                    (long long)shape.size, (long long)shape.inner, v.name, cpu);
      }
      // The same sums (the words hold the values the cache and q hold) but for the order of
      // the residuals' red.adds, which differs from step to step: 1.02e-5 at 23 x 1.
      if (before.empty())
        before = output(*ws);
      else
        EXPECT_LT(rel(output(*ws), before), 1e-4);
    }
  }
  ASSERT_NO_FATAL_FAILURE(check_partial_grids(words_sets().at(1).options, {2, 1, 5, 17}));
}

// When the copies go, on the one-token instance (copy_timing_sets(); copies_after_wait takes a
// task's bytes after its wait): the lesson's, every kind after its wait (L2 1 ahead, and none),
// attention's only, all but the MLP's and the copies after the task, at one token at odd caches
// against the fp64 CPU reference, then on partial grids (5 and 2 blocks: many tasks a block,
// each copied after its own wait) by the GPU's fp64 check, each step again with other inputs.
// FL_DECODE_SMALL=1: cache 23, the full grid and 2 blocks, four sets (what compute-sanitizer
// runs). (Each CPU reference downloads the 170 MB of weights: ~1 s.)
TEST_F(Gpt2DecodeGpu, MegakernelCopyTimings) {
  const bool small = std::getenv("FL_DECODE_SMALL") != nullptr;
  const std::vector<Variant> all = copy_timing_sets();
  std::vector<Variant> sets = {all.at(0), all.at(3), all.at(6), all.at(7)};
  if (!small) sets.insert(sets.end(), {all.at(10), all.at(11)});
  std::vector<std::pair<int, int>> runs = {{23, 0}};  // cache, blocks (0: the full grid)
  if (!small) runs.insert(runs.end(), {{37, 0}, {515, 0}, {2047, 0}, {23, 5}});
  runs.push_back({23, 2});
  std::mt19937_64 rng(7);
  for (const auto& [cache, grid] : runs) {
    std::unique_ptr<Workspace> ws;
    ASSERT_TRUE(lesson_->create_workspace(Shape{cache, 1}, Precision::bf16, &ws).ok());
    const uint64_t seed = rng(), other = rng();
    ASSERT_TRUE(ws->fill_inputs(seed, stream_).ok());
    std::vector<double> ref;
    if (grid == 0) {
      std::vector<HostTensor> in, out;
      ASSERT_TRUE(ws->download(stream_, &in, &out).ok());
      ref = lesson_->reference(in).at(0).values;
    }
    for (const Variant& v : sets) {
      const std::string name =
          "cache " + std::to_string(cache) + ", grid " + std::to_string(grid) + ", " + v.name;
      SCOPED_TRACE(name);
      std::printf("copy timings: %s\n", name.c_str());
      std::fflush(stdout);
      ASSERT_TRUE(gpt2::set_megakernel_options(*ws, v.options).ok());
      if (grid != 0) ASSERT_TRUE(gpt2::set_megakernel_blocks(*ws, grid).ok());
      EXPECT_EQ(gpt2::runs_one_token_copy_timings(v.options, 1), &v != &sets.front());
      for (const uint64_t inputs : {seed, other}) {
        if (inputs == other && grid == 0) break;  // (again on the partial grids only)
        ASSERT_TRUE(ws->fill_inputs(inputs, stream_).ok());
        ASSERT_TRUE(ws->poison_outputs(stream_).ok());
        ASSERT_TRUE(run(*ws, 4).ok());
        CheckResult gpu;
        ASSERT_TRUE(ws->check(stream_, &gpu).ok());
        EXPECT_TRUE(gpu.passed) << "rel " << gpu.rel_l2_error << " non-finite " << gpu.non_finite;
        if (grid == 0) EXPECT_LE(rel(output(*ws), ref), lesson_->tolerance(Precision::bf16));
      }
    }
  }
}

// One token at a small configuration: the form before, the one-token kernel without the quick
// tail, with 36-row qkv, and the lesson's on the other kernel; the residual dense and spread 4
// and 2 times (residual_spread); then the lesson's on 2 blocks,
// twice with other inputs (the final norm's block zeroed the counters for the second launch).
TEST_F(Gpt2DecodeGpu, MegakernelOneToken) {
  std::unique_ptr<Workspace> one;
  ASSERT_TRUE(lesson_->create_workspace(Shape{23, 1}, Precision::bf16, &one).ok());
  ASSERT_TRUE(one->fill_inputs(4, stream_).ok());
  const std::vector<Variant> timed = timed_sets();
  for (size_t k : {size_t(1), size_t(2), size_t(4), size_t(6)}) {
    SCOPED_TRACE(timed.at(k).name);
    ASSERT_TRUE(gpt2::set_megakernel_options(*one, timed.at(k).options).ok());
    ASSERT_TRUE(one->poison_outputs(stream_).ok());
    ASSERT_TRUE(run(*one, 4).ok());
    CheckResult gpu;
    ASSERT_TRUE(one->check(stream_, &gpu).ok());
    EXPECT_TRUE(gpu.passed) << "rel " << gpu.rel_l2_error << " non-finite " << gpu.non_finite;
  }
  std::vector<Variant> more = spread_sets();  // the residual dense and spread out, proj in the
  const std::vector<Variant> last = last_proj_sets();  // last split (on 2 blocks too, below)
  more.insert(more.end(), last.begin() + 1, last.end());
  for (const Variant& v : more) {
    SCOPED_TRACE(v.name);
    ASSERT_TRUE(gpt2::set_megakernel_options(*one, v.options).ok());
    ASSERT_TRUE(one->poison_outputs(stream_).ok());
    ASSERT_TRUE(run(*one, 4).ok());
    CheckResult gpu;
    ASSERT_TRUE(one->check(stream_, &gpu).ok());
    EXPECT_TRUE(gpu.passed) << "rel " << gpu.rel_l2_error << " non-finite " << gpu.non_finite;
  }
  for (const gpt2::MegakernelOptions& options :
       {gpt2::MegakernelOptions{}, last.at(2).options, last.at(3).options}) {
    ASSERT_TRUE(gpt2::set_megakernel_options(*one, options).ok());
    ASSERT_TRUE(gpt2::set_megakernel_blocks(*one, 2).ok());
    for (uint64_t seed : {uint64_t(6), uint64_t(7)}) {
      ASSERT_TRUE(one->fill_inputs(seed, stream_).ok());
      ASSERT_TRUE(one->poison_outputs(stream_).ok());
      ASSERT_TRUE(run(*one, 4).ok());
      CheckResult gpu;
      ASSERT_TRUE(one->check(stream_, &gpu).ok());
      EXPECT_TRUE(gpu.passed) << "seed " << seed << " rel " << gpu.rel_l2_error;
    }
  }
}

// Proj in attention's last split (MegakernelOptions::last_split_proj) against the fp64 CPU
// reference at odd configurations (1, 16 and 7 tokens), beside the lesson's form on the same
// inputs: the residual's starting values (x + bproj, x + bproj + bout) and the heads' adds.
TEST_F(Gpt2DecodeGpu, MegakernelLastSplitProjMatchesTheCpuReference) {
  std::mt19937_64 rng(std::random_device{}());
  for (const Shape& shape : {Shape{37, 1}, Shape{515, 16}, Shape{1001, 7}}) {
    SCOPED_TRACE("cache " + std::to_string(shape.size) + " tokens " + std::to_string(shape.inner));
    std::unique_ptr<Workspace> ws;
    std::vector<double> ref;
    ASSERT_NO_FATAL_FAILURE(prepare(shape, rng(), &ws, &ref));
    for (const Variant& v : last_proj_sets()) {
      SCOPED_TRACE(v.name);
      ASSERT_TRUE(gpt2::set_megakernel_options(*ws, v.options).ok());
      gpt2::TaskListShape shape_of;
      const gpt2::DecodeTaskList* list = gpt2::megakernel_tasks(*ws, &shape_of);
      ASSERT_NE(list, nullptr);
      EXPECT_EQ(list->last_split_proj, v.options.last_split_proj > 0);
      ASSERT_TRUE(ws->poison_outputs(stream_).ok());
      ASSERT_TRUE(run(*ws, 4).ok());
      const double cpu = rel(output(*ws), ref);
      EXPECT_LE(cpu, lesson_->tolerance(Precision::bf16));
      CheckResult gpu;
      ASSERT_TRUE(ws->check(stream_, &gpu).ok());
      EXPECT_TRUE(gpu.passed) << "GPU check: rel " << gpu.rel_l2_error;
      std::printf("gpt2_decode cache %lld tokens %lld %s: rel error %.3g (GPU check %.3g)\n",
                  (long long)shape.size, (long long)shape.inner, v.name, cpu, gpu.rel_l2_error);
    }
  }
}

// The one-token kernel's residual dense and spread 4 times (MegakernelOptions::residual_spread)
// on partial grids of 2, 5 and 17 blocks, twice each with other inputs, against the full grid's
// dense step (~6 s: what a short re-check runs beside MegakernelOneToken).
TEST_F(Gpt2DecodeGpu, MegakernelSpreadOnAPartialGrid) {
  std::unique_ptr<Workspace> one;
  ASSERT_TRUE(lesson_->create_workspace(Shape{133, 1}, Precision::bf16, &one).ok());
  ASSERT_TRUE(one->fill_inputs(5, stream_).ok());
  const std::vector<Variant> sets = spread_sets();
  ASSERT_TRUE(gpt2::set_megakernel_options(*one, sets.at(0).options).ok());
  ASSERT_TRUE(run(*one, 4).ok());
  const std::vector<double> full = output(*one);
  for (size_t s : {size_t(0), size_t(1)}) {
    for (int blocks : {2, 5, 17}) {
      SCOPED_TRACE(std::to_string(blocks) + " blocks, " + sets[s].name);
      ASSERT_TRUE(gpt2::set_megakernel_options(*one, sets[s].options).ok());
      ASSERT_TRUE(gpt2::set_megakernel_blocks(*one, blocks).ok());
      for (uint64_t seed : {uint64_t(77), uint64_t(5)}) {
        ASSERT_TRUE(one->fill_inputs(seed, stream_).ok());
        std::vector<double> y;
        EXPECT_CHECKED_STEP(*one, y);
      }
      EXPECT_LT(rel(output(*one), full), 1e-5);  // seed 5 again: the full grid's step
    }
  }
}

// Proj by head where a qkv slice's sums leave no room for its starting values' raw values (16
// tokens, 50-row slices on 5 blocks: qkv in about a slice a block, not the lesson's 24 rows):
// the task loads them again after its product.
TEST_F(Gpt2DecodeGpu, MegakernelStartsWithoutRoom) {
  std::unique_ptr<Workspace> ws;
  ASSERT_TRUE(lesson_->create_workspace(Shape{37, 16}, Precision::bf16, &ws).ok());
  ASSERT_TRUE(ws->fill_inputs(9, stream_).ok());
  gpt2::MegakernelOptions per_block;
  per_block.qkv_rows = 0;
  ASSERT_TRUE(gpt2::set_megakernel_options(*ws, per_block).ok());
  ASSERT_TRUE(gpt2::set_megakernel_blocks(*ws, 5).ok());
  gpt2::TaskListShape shape;
  const gpt2::DecodeTaskList* list = gpt2::megakernel_tasks(*ws, &shape);
  ASSERT_NE(list, nullptr);
  ASSERT_TRUE(list->head_proj);
  int without_room = 0;  // count x t sums and (c1 - c0) x t raw values past 1024 floats
  for (const gpt2::DecodeTask& task : list->tasks) {
    const int columns = 2 * ((task.first + task.count) / 6) - 2 * (task.first / 6);  // ops.cuh
    if (task.kind == uint8_t(gpt2::TaskKind::qkv) && (task.count + columns) * 16 > 1024)
      ++without_room;
  }
  EXPECT_GT(without_room, 0);
  std::vector<double> y;
  EXPECT_CHECKED_STEP(*ws, y);
}

}  // namespace
}  // namespace fl
