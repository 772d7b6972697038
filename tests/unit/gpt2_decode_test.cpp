// gpt2_decode on the CPU: the megakernel's task list (every output row of every product in
// exactly one task, each block's list in stage order, the counters and their targets) and the
// fp64 reference at inputs whose answer is known.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>

#include "kernels/catalog.h"
#include "kernels/gpt2_decode/model.h"

namespace fl {
namespace gpt2 {
namespace {

int stage_of(const DecodeTask& t) {
  return t.kind == uint8_t(TaskKind::final_norm) ? kLayers * kStagesPerLayer
                                                 : t.layer * kStagesPerLayer + t.kind;
}

// The counter each stage's tasks bump: one per stage, with head waits kHeads for qkv, with
// head combines the attention count followed by kHeads tickets, with proj by head one
// attention count a head.
int first_counter_of(int stage, bool head_waits, bool combine, bool head_proj) {
  const int qkv = head_waits ? kHeads : 1;
  const int attention = combine ? 1 + kHeads : head_proj ? kHeads : 1;
  const int sizes[kStagesPerLayer] = {qkv, attention, 1, 1};
  const int layer = stage / kStagesPerLayer, within = stage % kStagesPerLayer;
  int at = layer * (qkv + attention + 2);
  for (int k = 0; k < within; ++k) at += sizes[k];
  return at;
}

void expect_well_formed(const TaskListShape& shape) {
  SCOPED_TRACE("blocks " + std::to_string(shape.blocks) + " tokens " +
               std::to_string(shape.tokens) + " cache " + std::to_string(shape.cache) +
               (shape.head_waits ? " head waits" : "") +
               (shape.head_combine ? " head combine" : ""));
  const bool hw = shape.head_waits, hc = shape.head_combine;
  const DecodeTaskList list = build_decode_tasks(shape);
  const bool hp = list.head_proj;
  EXPECT_EQ(hp, shape.head_proj && !hc && !shape.proj_apart && !shape.fused_proj && !hw &&
                    head_proj_fits(shape.weight_buffer_bytes));
  ASSERT_EQ(list.block_begin.size(), size_t(shape.blocks) + 1);
  EXPECT_EQ(list.block_begin.back(), int(list.tasks.size()));
  EXPECT_EQ(list.counters, kLayers * (kStagesPerLayer + (hw ? kHeads - 1 : 0) + (hc ? kHeads : 0) +
                                      (hp ? kHeads - 1 : 0)) +
                               1);
  auto counter_of = [&](int stage) { return first_counter_of(stage, hw, hc, hp); };
  // Rows covered once per (layer, matrix); attention units once per (layer, head, split).
  std::map<int, std::vector<int>> covered;  // stage -> hits per row / unit
  std::map<int, unsigned> tasks_in_stage;
  std::map<int, unsigned> head_bumps;  // counter -> qkv tasks bumping it
  for (const DecodeTask& t : list.tasks) {
    const int stage = stage_of(t);
    ++tasks_in_stage[stage];
    EXPECT_EQ(t.done_counter, counter_of(stage));
    const TaskKind kind = TaskKind(t.kind);
    const int qkv_flags = (hw ? kBumpsHeads : 0) | (hp ? kInitsResidual : 0);
    EXPECT_EQ(t.flags, kind == TaskKind::qkv               ? qkv_flags
                       : hc && kind == TaskKind::attention ? kCombinesHead
                       : hp && kind == TaskKind::attention ? kBumpsHead
                       : hp && kind == TaskKind::proj      ? kHeadProj
                                                           : 0);
    const bool by_head = hp && kind == TaskKind::proj;  // (head, part): one unit
    if (t.flags & kBumpsHeads) {
      // Each head whose q, k or v rows the slice holds, counted once per task.
      std::set<int> heads;
      for (uint32_t r = t.first; r < t.first + t.count; ++r) heads.insert((r / kHeadDim) % kHeads);
      for (int h : heads) ++head_bumps[t.done_counter + h];
    }
    const int units = kind == TaskKind::qkv          ? 3 * kC
                      : kind == TaskKind::mlp        ? kF
                      : kind == TaskKind::attention  ? kHeads * list.splits
                      : kind == TaskKind::final_norm ? 1
                      : by_head                      ? kHeads * kProjParts
                                                     : kC;
    auto& hits = covered[stage];
    hits.resize(units);
    const uint32_t span = by_head ? 1 : t.count;  // a (head, part), or rows
    for (uint32_t u = t.first; u < t.first + span; ++u) {
      ASSERT_LT(u, uint32_t(units));
      ++hits[u];
    }
    if (kind == TaskKind::qkv || (kind == TaskKind::proj && !by_head) || kind == TaskKind::mlp) {
      EXPECT_LE(t.count * kC * 2 + kExtrasBytes, shape.weight_buffer_bytes)
          << "a slice and its small parameters fit its buffer";
      // Bias slices are copied in 4-byte pieces, Wout's columns in 16-byte ones.
      const uint32_t step = kind == TaskKind::mlp ? 8 : 2;
      EXPECT_EQ(t.first % step, 0u);
      EXPECT_EQ(t.count % step, 0u);
    }
  }
  EXPECT_EQ(covered.size(), size_t(kLayers * kStagesPerLayer + 1));
  for (const auto& [stage, hits] : covered) {
    for (size_t u = 0; u < hits.size(); ++u)
      ASSERT_EQ(hits[u], 1) << "stage " << stage << " unit " << u;
  }
  // Each task waits for the whole previous stage (attention with head waits: for every qkv
  // task holding rows of its head; proj by head: for its head's splits); each block's list is
  // in stage order.
  for (const DecodeTask& t : list.tasks) {
    const int stage = stage_of(t);
    if (stage == 0) {
      EXPECT_EQ(t.wait_counter, kNoCounter);
    } else if (hw && TaskKind(t.kind) == TaskKind::attention) {
      const int head = int(t.first) / list.splits;
      EXPECT_EQ(t.wait_counter, counter_of(stage - 1) + head);
      EXPECT_EQ(t.wait_target, head_bumps[t.wait_counter]);
      EXPECT_GE(t.wait_target, 3u) << "q, k and v rows of the head";
    } else if (list.qkv_words && TaskKind(t.kind) == TaskKind::attention) {
      EXPECT_EQ(t.wait_counter, kNoCounter);  // (it loads its head's flagged qkv words)
    } else if (hp && list.proj_reads_rows && TaskKind(t.kind) == TaskKind::proj) {
      EXPECT_EQ(t.wait_counter, counter_of(stage - 2));  // qkv's (its head's rows: flagged)
      EXPECT_EQ(t.wait_target, tasks_in_stage[stage - 2]);
    } else if (hp && TaskKind(t.kind) == TaskKind::proj) {
      EXPECT_EQ(t.wait_counter, counter_of(stage - 1) + int(t.first) / kProjParts);
      EXPECT_EQ(t.wait_target, unsigned(list.splits));
    } else {
      EXPECT_EQ(t.wait_counter, counter_of(stage - 1));
      // With head combines only each head's last split counts: kHeads.
      const bool after_attention =
          stage % kStagesPerLayer == 2 && stage < kLayers * kStagesPerLayer;
      EXPECT_EQ(t.wait_target,
                hc && after_attention ? unsigned(kHeads) : tasks_in_stage[stage - 1]);
    }
  }
  for (int b = 0; b < shape.blocks; ++b) {
    for (int i = list.block_begin[b] + 1; i < list.block_begin[b + 1]; ++i)
      EXPECT_LE(stage_of(list.tasks[i - 1]), stage_of(list.tasks[i]));
  }
}

TEST(Gpt2DecodeTasks, EveryRowOnceInStageOrder) {
  for (int form = 0; form < 8; ++form) {
    const bool hw = form & 1, hc = form & 2, hp = form & 4;
    const int keys = kMinSplitKeys;
    for (TaskListShape shape : {TaskListShape{132, 1, 512, 80 * 1024, hw, keys, hc},
                                TaskListShape{132, 16, 8192, 80 * 1024, hw, keys, hc},
                                TaskListShape{1, 3, 37, 80 * 1024, hw, keys, hc},
                                TaskListShape{7, 5, 1001, 20 * 1024, hw, keys, hc},
                                // About the smallest buffer weight_buffer_bytes_for gives.
                                TaskListShape{114, 2, 16, 16 * 1024, hw, keys, hc}}) {
      shape.head_proj = hp;
      SCOPED_TRACE(hp ? "proj by head" : "proj by rows");
      expect_well_formed(shape);
    }
  }
}

// Proj by head (TaskListShape::head_proj, the lesson's form): per layer every (head, part) once,
// each waiting on its own head's counter for the head's splits, which bump only it; the qkv
// tasks' residual columns cover [0, C) once (the residuals' starting values). Off where a part
// of Wproj (24 KB) does not fit a buffer. (Counted: proj by head without proj_reads_rows.)
TEST(Gpt2DecodeTasks, ProjByHeadWaitsForItsHeadOnly) {
  for (TaskListShape shape :
       {TaskListShape{132, 1, 512, 80 * 1024}, TaskListShape{132, 1, 8192, 80 * 1024},
        TaskListShape{5, 3, 37, 80 * 1024}}) {
    shape.proj_reads_rows = false;
    SCOPED_TRACE("blocks " + std::to_string(shape.blocks) + " cache " +
                 std::to_string(shape.cache));
    const DecodeTaskList list = build_decode_tasks(shape);
    ASSERT_TRUE(list.head_proj);
    std::map<int, std::vector<int>> parts, columns;  // layer -> hits
    std::map<int, int> bumps;                        // counter -> attention tasks bumping it
    for (const DecodeTask& t : list.tasks)
      if (t.kind == uint8_t(TaskKind::attention))
        ++bumps[t.done_counter + int(t.first) / list.splits];
    for (const DecodeTask& t : list.tasks) {
      if (t.kind == uint8_t(TaskKind::proj)) {
        EXPECT_EQ(t.flags, kHeadProj);
        parts[t.layer].resize(kHeads * kProjParts);
        ASSERT_LT(t.first, uint32_t(kHeads * kProjParts));
        ++parts[t.layer][t.first];
        EXPECT_EQ(t.wait_target, unsigned(list.splits));
        EXPECT_EQ(bumps[t.wait_counter], list.splits) << "its head's splits, and only they";
      } else if (t.kind == uint8_t(TaskKind::qkv)) {
        columns[t.layer].resize(kC);
        for (int c = 2 * (int(t.first) / 6); c < 2 * (int(t.first + t.count) / 6); ++c)
          ++columns[t.layer][c];
      }
    }
    for (int layer = 0; layer < kLayers; ++layer) {
      for (int hits : parts[layer]) EXPECT_EQ(hits, 1);
      for (int hits : columns[layer]) EXPECT_EQ(hits, 1);
    }
    const std::string text = format_task_list(list, shape);
    EXPECT_NE(text.find("layer 11 proj head 11 rows 576-767 (of 768)"), std::string::npos);
    EXPECT_NE(text.find("proj by head"), std::string::npos);
  }
  TaskListShape rows{132, 1, 512, 80 * 1024};
  rows.head_proj = false;
  EXPECT_FALSE(build_decode_tasks(rows).head_proj);
  EXPECT_FALSE(build_decode_tasks({132, 1, 512, 23552}).head_proj);  // 99 KB GPUs: 23 KB buffers
  EXPECT_TRUE(head_proj_fits(56320));                                // A100
}

// Proj in attention's last split (TaskListShape::last_split_proj, beside proj by head): no proj
// tasks; each layer's attention tasks take tickets from their head's counter (splits of them a
// head) and bump one count a layer (the heads' last splits: kHeads), which every MLP task waits
// for; the qkv tasks' residual columns cover [0, C) once; with 2 the splits ask L2 for Wproj.
TEST(Gpt2DecodeTasks, LastSplitProjIsThreeStagesALayer) {
  for (int mode : {1, 2, 3}) {
    for (TaskListShape shape :
         {TaskListShape{132, 1, 512, 80 * 1024}, TaskListShape{132, 16, 8192, 80 * 1024},
          TaskListShape{5, 3, 37, 80 * 1024}, TaskListShape{1, 1, 16}}) {
      shape.last_split_proj = mode;
      SCOPED_TRACE("blocks " + std::to_string(shape.blocks) + " mode " + std::to_string(mode));
      const DecodeTaskList list = build_decode_tasks(shape);
      ASSERT_TRUE(list.head_proj);
      ASSERT_TRUE(list.last_split_proj);
      EXPECT_EQ(list.counters, kLayers * (1 + kHeads + 1 + 1) + 1);
      std::map<int, std::map<int, int>> tickets;  // layer -> ticket counter -> splits taking it
      std::map<int, int> count_of;                // layer -> the MLP's counter
      std::map<int, std::vector<int>> columns, units;
      for (const DecodeTask& t : list.tasks) {
        EXPECT_NE(t.kind, uint8_t(TaskKind::proj));
        if (t.kind == uint8_t(TaskKind::attention)) {
          EXPECT_EQ(t.flags, kProjectsLast | (mode >= 2 ? kPrefetchesProj : 0));
          ++tickets[t.layer][t.done_counter + int(t.first) / list.splits];
          count_of[t.layer] = t.done_counter + kHeads;
          units[t.layer].resize(kHeads * list.splits);
          ++units[t.layer].at(t.first);
        } else if (t.kind == uint8_t(TaskKind::qkv)) {
          columns[t.layer].resize(kC);
          for (int c = 2 * (int(t.first) / 6); c < 2 * (int(t.first + t.count) / 6); ++c)
            ++columns[t.layer][c];
        }
      }
      for (const DecodeTask& t : list.tasks) {
        if (t.kind == uint8_t(TaskKind::mlp)) {
          EXPECT_EQ(t.wait_counter, count_of[t.layer]);
          EXPECT_EQ(t.wait_target, kHeads);
        }
      }
      for (int layer = 0; layer < kLayers; ++layer) {
        ASSERT_EQ(tickets[layer].size(), size_t(kHeads));
        for (const auto& [counter, splits] : tickets[layer]) EXPECT_EQ(splits, list.splits);
        for (int hits : columns[layer]) EXPECT_EQ(hits, 1);
        for (int hits : units[layer]) EXPECT_EQ(hits, 1);
      }
      // Each block's list in stage order (nothing waits on a later task of its own block).
      for (int b = 0; b + 1 < int(list.block_begin.size()); ++b)
        for (int i = list.block_begin[b] + 1; i < list.block_begin[b + 1]; ++i)
          EXPECT_LE(stage_of(list.tasks[i - 1]), stage_of(list.tasks[i]));
      const std::string text = format_task_list(list, shape);
      EXPECT_NE(text.find("proj in attention"), std::string::npos);
      EXPECT_NE(text.find("last: proj"), std::string::npos);
    }
  }
}

// proj by head reading its head's rows (TaskListShape::proj_reads_rows): the same tasks as
// proj by head, but each proj task waits for its layer's qkv count (the residuals' starting
// values), not its head's splits; off with proj in the last split or proj by rows.
TEST(Gpt2DecodeTasks, ProjReadsRowsWaitsForQkvOnly) {
  for (TaskListShape shape :
       {TaskListShape{132, 1, 512, 80 * 1024}, TaskListShape{132, 16, 8192, 80 * 1024},
        TaskListShape{5, 3, 37, 80 * 1024}, TaskListShape{1, 1, 16}}) {
    SCOPED_TRACE("blocks " + std::to_string(shape.blocks));
    EXPECT_TRUE(build_decode_tasks(shape).proj_reads_rows);  // the lesson's
    shape.qkv_words = false;  // (attention's waits as proj by head's: QkvWords... below)
    shape.proj_reads_rows = false;
    const DecodeTaskList by_head = build_decode_tasks(shape);
    shape.proj_reads_rows = true;
    const DecodeTaskList list = build_decode_tasks(shape);
    ASSERT_TRUE(list.proj_reads_rows);
    ASSERT_EQ(list.tasks.size(), by_head.tasks.size());
    std::map<int, std::pair<int, int>> qkv;  // layer -> (its counter, its tasks)
    for (const DecodeTask& t : list.tasks) {
      if (t.kind != uint8_t(TaskKind::qkv)) continue;
      qkv[t.layer].first = t.done_counter;
      ++qkv[t.layer].second;
    }
    int proj = 0;
    for (size_t i = 0; i < list.tasks.size(); ++i) {
      const DecodeTask &t = list.tasks[i], &before = by_head.tasks[i];
      EXPECT_EQ(t.kind, before.kind);
      EXPECT_EQ(t.first, before.first);
      EXPECT_EQ(t.flags, before.flags);
      if (t.kind != uint8_t(TaskKind::proj)) {
        EXPECT_EQ(t.wait_counter, before.wait_counter);
        continue;
      }
      ++proj;
      EXPECT_EQ(t.wait_counter, qkv[t.layer].first);
      EXPECT_EQ(t.wait_target, qkv[t.layer].second);
    }
    EXPECT_EQ(proj, kLayers * kHeads * kProjParts);
    EXPECT_NE(format_task_list(list, shape).find("reading rows"), std::string::npos);
    shape.last_split_proj = 2;
    EXPECT_FALSE(build_decode_tasks(shape).proj_reads_rows);
    shape.last_split_proj = 0, shape.head_proj = false;
    EXPECT_FALSE(build_decode_tasks(shape).proj_reads_rows);
  }
}

// Attention reading qkv words (TaskListShape::qkv_words, beside proj reading rows): the same
// tasks as proj reading rows alone, but no attention task waits on a counter (proj still waits
// for qkv's count, inside its task); off without proj reading rows.
TEST(Gpt2DecodeTasks, QkvWordsAttentionWaitsForNoCounter) {
  for (TaskListShape shape :
       {TaskListShape{132, 1, 512, 80 * 1024}, TaskListShape{132, 16, 8192, 80 * 1024},
        TaskListShape{5, 3, 37, 80 * 1024}, TaskListShape{1, 1, 16}}) {
    SCOPED_TRACE("blocks " + std::to_string(shape.blocks));
    shape.proj_reads_rows = true, shape.qkv_words = false;
    const DecodeTaskList rows = build_decode_tasks(shape);
    shape.qkv_words = true;
    const DecodeTaskList list = build_decode_tasks(shape);
    ASSERT_TRUE(list.qkv_words);
    ASSERT_FALSE(rows.qkv_words);
    ASSERT_EQ(list.tasks.size(), rows.tasks.size());
    EXPECT_EQ(list.counters, rows.counters);
    int attention = 0;
    for (size_t i = 0; i < list.tasks.size(); ++i) {
      const DecodeTask &t = list.tasks[i], &before = rows.tasks[i];
      EXPECT_EQ(t.kind, before.kind);
      EXPECT_EQ(t.first, before.first);
      EXPECT_EQ(t.flags, before.flags);
      EXPECT_EQ(t.done_counter, before.done_counter);
      if (t.kind != uint8_t(TaskKind::attention)) {
        EXPECT_EQ(t.wait_counter, before.wait_counter);
        EXPECT_EQ(t.wait_target, before.wait_target);
        continue;
      }
      ++attention;
      EXPECT_EQ(t.wait_counter, kNoCounter);
    }
    EXPECT_EQ(attention, kLayers * kHeads * list.splits);
    EXPECT_NE(format_task_list(list, shape).find("qkv words"), std::string::npos);
    shape.proj_reads_rows = false;
    EXPECT_FALSE(build_decode_tasks(shape).qkv_words);
  }
}

// Attention and proj as one stage (TaskListShape::fused_proj): three stages a layer, every
// (head, part) once, the qkv tasks' residual columns covering [0, C) once, counters in step;
// on a full grid no block holds a qkv task and a fused task of one layer; off where a head's
// keys do not fit two buffers.
TEST(Gpt2DecodeTasks, FusedProjIsThreeStagesALayer) {
  for (const TaskListShape& shape :
       {TaskListShape{132, 1, 512, 80 * 1024}, TaskListShape{132, 16, 544, 80 * 1024},
        TaskListShape{5, 3, 37, 80 * 1024}, TaskListShape{1, 2, 19, 80 * 1024}}) {
    TaskListShape fused = shape;
    fused.fused_proj = true;
    SCOPED_TRACE("blocks " + std::to_string(shape.blocks) + " cache " +
                 std::to_string(shape.cache));
    const DecodeTaskList list = build_decode_tasks(fused);
    ASSERT_TRUE(list.fused_proj);
    EXPECT_EQ(list.counters, kLayers * 3 + 1);
    std::map<int, std::vector<int>> parts, columns;         // layer -> hits
    std::map<int, int> tasks_of;                            // done counter -> tasks bumping it
    std::map<int, std::set<int>> qkv_blocks, fused_blocks;  // layer -> blocks
    for (int b = 0; b < fused.blocks; ++b) {
      for (int i = list.block_begin[b]; i < list.block_begin[b + 1]; ++i) {
        const DecodeTask& t = list.tasks[i];
        ++tasks_of[t.done_counter];
        if (t.kind == uint8_t(TaskKind::qkv)) qkv_blocks[t.layer].insert(b);
        if (t.kind == uint8_t(TaskKind::attention)) fused_blocks[t.layer].insert(b);
        EXPECT_NE(t.kind, uint8_t(TaskKind::proj));
        if (t.kind == uint8_t(TaskKind::attention)) {
          EXPECT_EQ(t.flags, kProjects);
          parts[t.layer].resize(kHeads * kProjParts);
          ASSERT_LT(t.first, uint32_t(kHeads * kProjParts));
          ++parts[t.layer][t.first];
        } else if (t.kind == uint8_t(TaskKind::qkv)) {
          EXPECT_EQ(t.flags, kInitsResidual);
          columns[t.layer].resize(kC);
          for (int c = 2 * (int(t.first) / 6); c < 2 * (int(t.first + t.count) / 6); ++c)
            ++columns[t.layer][c];
          EXPECT_LE(2 * (int(t.first + t.count) / 6) - 2 * (int(t.first) / 6), kMaxSliceRows / 2);
        }
      }
    }
    for (int layer = 0; layer < kLayers; ++layer) {
      for (int hits : parts[layer]) EXPECT_EQ(hits, 1);
      for (int hits : columns[layer]) EXPECT_EQ(hits, 1);
    }
    for (const DecodeTask& t : list.tasks) {
      if (t.wait_counter != kNoCounter) {
        EXPECT_EQ(t.wait_target, unsigned(tasks_of[t.wait_counter]));
      }
    }
    for (int layer = 0; fused.blocks == 132 && layer < kLayers; ++layer) {
      for (int b : fused_blocks[layer]) {
        EXPECT_EQ(qkv_blocks[layer].count(b), 0u) << "block " << b;
      }
    }
    EXPECT_NE(format_task_list(list, fused).find("attention+proj head 11"), std::string::npos);
  }
  TaskListShape too_long{132, 1, 600, 80 * 1024};  // 600 x 256 B + 24 KB > 160 KB
  too_long.fused_proj = true;
  EXPECT_FALSE(build_decode_tasks(too_long).fused_proj);
  EXPECT_FALSE(fused_proj_fits(2048, 80 * 1024));
  EXPECT_TRUE(fused_proj_fits(544, 80 * 1024));
}

// Proj apart (TaskListShape::proj_apart): 24 proj slices of 32 rows on blocks that hold no
// attention task of the layer; off where heads x splits leaves too few blocks free.
TEST(Gpt2DecodeTasks, ProjApartAvoidsAttentionsBlocks) {
  TaskListShape shape{132, 1, 512, 80 * 1024};
  shape.proj_apart = true;
  const DecodeTaskList list = build_decode_tasks(shape);
  ASSERT_TRUE(list.proj_apart);
  std::map<int, std::set<int>> attention_blocks, proj_blocks;
  std::map<int, int> proj_rows;
  for (int b = 0; b < shape.blocks; ++b) {
    for (int i = list.block_begin[b]; i < list.block_begin[b + 1]; ++i) {
      const DecodeTask& t = list.tasks[i];
      if (t.kind == uint8_t(TaskKind::attention)) attention_blocks[t.layer].insert(b);
      if (t.kind != uint8_t(TaskKind::proj)) continue;
      proj_blocks[t.layer].insert(b);
      proj_rows[t.layer] += t.count;
      EXPECT_EQ(t.count, 32);
    }
  }
  for (int layer = 0; layer < kLayers; ++layer) {
    EXPECT_EQ(proj_blocks[layer].size(), size_t(kProjApartTasks));
    EXPECT_EQ(proj_rows[layer], kC);
    for (int b : proj_blocks[layer]) {
      EXPECT_EQ(attention_blocks[layer].count(b), 0u) << "block " << b;
    }
  }
  expect_well_formed(shape);
  shape.cache = 2048;  // 12 x 11 splits fill every block
  EXPECT_FALSE(build_decode_tasks(shape).proj_apart);
}

// A qkv slice's heads: q, k and v rows of head h are the 64-row blocks h, 12 + h, 24 + h.
TEST(Gpt2DecodeTasks, HeadsOfAQkvSlice) {
  int a = 0, b = 0;
  heads_of_rows(0, 18, &a, &b);
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 0);
  heads_of_rows(54, 18, &a, &b);  // rows 54-71: heads 0 and 1 of q
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  heads_of_rows(756, 18, &a, &b);  // rows 756-773: q of head 11, k of head 0
  EXPECT_EQ(a, 11);
  EXPECT_EQ(b, 0);
  heads_of_rows(2288, 16, &a, &b);  // the last rows: v of head 11
  EXPECT_EQ(a, 11);
  EXPECT_EQ(b, 11);
}

TEST(Gpt2DecodeTasks, SlicesSpreadOverTheBlocks) {
  TaskListShape per_block{132, 1, 512, 80 * 1024};
  per_block.qkv_rows = 0;  // about one slice a block
  const DecodeTaskList list = build_decode_tasks(per_block);
  // 3C / 132 -> 18 rows a qkv task: 128 tasks; 4C / 132 -> 24 rows an MLP task (its Wfc rows
  // and Wout columns, 72 KB, fit one 80 KB buffer): 128 tasks.
  int qkv = 0, mlp = 0;
  for (const DecodeTask& t : list.tasks) {
    qkv += t.kind == uint8_t(TaskKind::qkv) && t.layer == 0;
    mlp += t.kind == uint8_t(TaskKind::mlp) && t.layer == 0;
    if (t.kind == uint8_t(TaskKind::mlp)) EXPECT_TRUE(mlp_wout_fits(t.count, 80 * 1024));
  }
  EXPECT_EQ(qkv, 128);
  EXPECT_EQ(mlp, 128);
  // The lesson's 24-row qkv slices (kLessonQkvRows): 96 tasks, 36 blocks free of qkv; on 17
  // blocks, where a block's share (136 rows) outgrows the buffer, the buffer's most (50 rows).
  qkv = 0;
  for (const DecodeTask& t : build_decode_tasks({132, 1, 512, 80 * 1024}).tasks) {
    if (t.kind != uint8_t(TaskKind::qkv)) continue;
    qkv += t.layer == 0;
    EXPECT_EQ(t.count, 24);
  }
  EXPECT_EQ(qkv, 96);
  TaskListShape few{17, 1, 512, 80 * 1024};
  few.qkv_rows = 60;
  for (const DecodeTask& t : build_decode_tasks(few).tasks)
    if (t.kind == uint8_t(TaskKind::qkv)) EXPECT_LE(t.count, 50);
  // On a few blocks the MLP slices outgrow the buffer: their Wout columns stay in global memory.
  for (const DecodeTask& t : build_decode_tasks({17, 1, 512, 80 * 1024}).tasks)
    if (t.kind == uint8_t(TaskKind::mlp)) EXPECT_FALSE(mlp_wout_fits(t.count, 80 * 1024));
  EXPECT_EQ(attention_splits(513, 132), 9);    // 64 keys or more a split
  EXPECT_EQ(attention_splits(2049, 132), 11);  // one block per (head, split)
  EXPECT_EQ(attention_splits(8208, 132), 26);  // at most 320 keys a split
  EXPECT_EQ(attention_splits(17, 132), 1);
  EXPECT_EQ(attention_splits(513, 132, 32), 11);  // 32 keys or more: a split for every block
  EXPECT_EQ(attention_splits(513, 132, 64), 9);
  // Grid splits (the megakernel's): one round of tasks however long a split gets.
  EXPECT_EQ(attention_splits(4097, 132, 64, kMaxPositions), 11);  // 373 keys, not 13 of 316
  EXPECT_EQ(attention_splits(8208, 132, 64, kMaxPositions), 11);
  EXPECT_EQ(attention_splits(513, 132, 64, kMaxPositions), 9);
  EXPECT_EQ(attention_splits(8208, 2, 64, kMaxPositions), 1);
  EXPECT_EQ(attention_splits(8208, 1000, 64, kMaxPositions), kMaxSplits);  // the combine's 32
  TaskListShape shape{132, 1, 4096, 80 * 1024};
  EXPECT_EQ(build_decode_tasks(shape).splits, 11);
  shape.grid_splits = false;
  EXPECT_EQ(build_decode_tasks(shape).splits, 13);
  shape.grid_splits = true;
  shape.split_rounds = 2;  // two rounds of tasks: 22 splits of at most 373 keys at 8K
  shape.cache = 8192;
  EXPECT_EQ(build_decode_tasks(shape).splits, 22);
}

// Attention apart from qkv (apart_qkv_rows): at 132 blocks and a cache of 512, 48 qkv tasks of
// 48 rows and 7 splits a head; no block runs an attention task of a layer beside a qkv task of
// that layer, and every proj task runs on a block free of attention in its layer. At 4K a split
// of 7 would outgrow a buffer: the list is the lesson's (24-row qkv, the grid's splits).
TEST(Gpt2DecodeTasks, AttentionApartFromQkv) {
  TaskListShape shape{132, 1, 512, 80 * 1024};
  shape.apart_qkv_rows = 48;
  const DecodeTaskList list = build_decode_tasks(shape);
  EXPECT_TRUE(list.attention_apart);
  EXPECT_EQ(list.splits, 7);
  for (int layer = 0; layer < kLayers; ++layer) {
    int counts[kTaskKinds] = {};
    for (size_t b = 0; b + 1 < list.block_begin.size(); ++b) {
      bool ran[kTaskKinds] = {};
      for (int i = list.block_begin[b]; i < list.block_begin[b + 1]; ++i) {
        const DecodeTask& t = list.tasks[i];
        if (t.layer != layer || t.kind == uint8_t(TaskKind::final_norm)) continue;
        ran[t.kind] = true;
        ++counts[t.kind];
        if (t.kind == uint8_t(TaskKind::qkv)) EXPECT_EQ(t.count, 48);
      }
      EXPECT_FALSE(ran[int(TaskKind::qkv)] && ran[int(TaskKind::attention)]) << "block " << b;
      EXPECT_FALSE(ran[int(TaskKind::attention)] && ran[int(TaskKind::proj)]) << "block " << b;
    }
    EXPECT_EQ(counts[int(TaskKind::qkv)], 48);
    EXPECT_EQ(counts[int(TaskKind::attention)], 84);
    EXPECT_EQ(counts[int(TaskKind::proj)], 48);
  }
  shape.cache = 2048;  // 2049 keys in 7 splits of 293: in a buffer
  EXPECT_EQ(build_decode_tasks(shape).splits, 7);
  shape.cache = 4096;
  const DecodeTaskList far = build_decode_tasks(shape);
  EXPECT_FALSE(far.attention_apart);
  EXPECT_EQ(far.splits, 11);
  for (const DecodeTask& t : far.tasks)
    if (t.kind == uint8_t(TaskKind::qkv)) EXPECT_EQ(t.count, kLessonQkvRows);
  shape.cache = 512, shape.blocks = 3;  // a partial grid: qkv's tasks alone outnumber it
  EXPECT_FALSE(build_decode_tasks(shape).attention_apart);
}

// What the megakernel keeps per GPU, and the task list a recording's records index.
TEST(Gpt2DecodeTasks, WeightBuffersFollowTheGpusSharedMemory) {
  EXPECT_EQ(weight_buffer_bytes_for(232448), 80 * 1024);  // H100, H200: 227 KB
  EXPECT_EQ(weight_buffer_bytes_for(166912), 56320);      // A100: 163 KB
  EXPECT_EQ(weight_buffer_bytes_for(101376), 23552);      // 99 KB (sm_86, sm_89)
  EXPECT_EQ(weight_buffer_bytes_for(65536), 0);           // too little for 8 rows of Wfc
  const TaskListShape shape = task_shape_for(132, 232448, 1, 512);
  EXPECT_EQ(shape.weight_buffer_bytes, 80 * 1024);
  EXPECT_EQ(build_decode_tasks(shape).tasks.size(), 4561u);  // `lessons --tasks gpt2_decode`
  TaskListShape one_a_block = shape;  // qkv in about one slice a block: 18 rows, 128 tasks
  one_a_block.qkv_rows = 0;
  EXPECT_EQ(build_decode_tasks(one_a_block).tasks.size(), 4945u);
}

// The hover's namer rebuilds the list an H100 ran (132 SMs, 227 KB): task 0 and one past the end.
TEST(Gpt2DecodeTasks, NamesARecordedTaskByItsIndex) {
  const auto name = task_namer(132, 9, 0, 1, 512);
  EXPECT_EQ(name(0), "layer 0 ln1+qkv rows 0-23 (of 2304), residual cols 0-7");
  EXPECT_EQ(name(4561), "");
  // A recording whose records name another number of tasks ran another list: no names at all.
  EXPECT_TRUE(task_namer(132, 9, 0, 1, 512, 4561));
  EXPECT_FALSE(task_namer(132, 9, 0, 1, 512, 4945)) << "the list before 24-row qkv slices";
  EXPECT_FALSE(task_namer(132, 9, 0, 1, 512, 5905)) << "the list before proj by head";
  EXPECT_EQ(smem_optin_for(8, 0), 166912);
  EXPECT_EQ(weight_buffer_bytes_for(smem_optin_for(7, 5)), 0);  // 64 KB: no megakernel there
}

// The cluster step's records name themselves (model.h's kClusterRecord), whatever list the
// recording's GPU would build.
TEST(Gpt2DecodeTasks, NamesTheClusterStepsRecords) {
  const auto name = task_namer(132, 9, 0, 1, 512, cluster_record_arg(2, 0, 0) + 1);
  ASSERT_TRUE(name);
  EXPECT_EQ(name(cluster_record_arg(0, 3, 5 * 8 + 2)),
            "layer 3 head 5, block 2 of 8: q, k, v rows 16-23, keys 128-191, proj outputs 192-383 "
            "(dims 0-31)");
  EXPECT_EQ(name(cluster_record_arg(0, 0, 7)),
            "layer 0 head 0, block 7 of 8: q, k, v rows 56-63, keys 448-511 and the new one, proj "
            "outputs 576-767 (dims 32-63)");
  EXPECT_EQ(name(cluster_record_arg(1, 11, 12 | 2 << 9)),
            "layer 11 MLP rows 96-119 of h (of 3072)");
  EXPECT_EQ(name(cluster_record_arg(2, 0, 0)), "ln_f (final LayerNorm)");
  EXPECT_EQ(describe_cluster_record(cluster_record_arg(0, 1, 7), 5),
            "layer 1 head 0, block 7 of 8: q, k, v rows 56-63, the new key, proj outputs 576-767 "
            "(dims 32-63)");
}

// The one-token instance runs the lesson's form at one token only: any option the kernel
// reads at another value, or more tokens, takes the other instance; the list's options do not.
TEST(Gpt2DecodeTasks, TheOneTokenKernelRunsTheLessonsFormAtOneToken) {
  MegakernelOptions o;
  EXPECT_TRUE(runs_one_token_kernel(o, 1));
  EXPECT_FALSE(runs_one_token_kernel(o, 2));
  o.qkv_rows = 36, o.min_split_keys = 32, o.split_rounds = 2, o.quick_tail = false;
  EXPECT_TRUE(runs_one_token_kernel(o, 1));
  o.one_token_kernel = false;
  EXPECT_FALSE(runs_one_token_kernel(o, 1));
  auto other = [](auto change) {
    MegakernelOptions m;
    change(m);
    return runs_one_token_kernel(m, 1);
  };
  EXPECT_FALSE(other([](MegakernelOptions& m) { m.relaxed_poll = true; }));
  EXPECT_FALSE(other([](MegakernelOptions& m) { m.head_proj = false; }));
  EXPECT_FALSE(other([](MegakernelOptions& m) { m.residual_copies = 2; }));
  EXPECT_FALSE(other([](MegakernelOptions& m) { m.branch_free_keys = !m.branch_free_keys; }));
  EXPECT_FALSE(other([](MegakernelOptions& m) { m.task_window = true; }));
  EXPECT_FALSE(other([](MegakernelOptions& m) { m.copies_after_wait = kAllTaskKinds; }));
  EXPECT_FALSE(other([](MegakernelOptions& m) { m.l2_ahead = 2; }));
}

// Where only when the copies go differs from the lesson's, the one-token instance that reads
// those options at run time; with any other option changed too, the other instance.
TEST(Gpt2DecodeTasks, CopyTimingsRunTheOneTokenInstance) {
  MegakernelOptions o;
  EXPECT_FALSE(runs_one_token_copy_timings(o, 1));  // (the lesson's own instance)
  o.copies_after_wait = kAllTaskKinds, o.l2_ahead = 2;
  EXPECT_TRUE(runs_one_token_copy_timings(o, 1));
  EXPECT_FALSE(runs_one_token_copy_timings(o, 2));
  o.copies_after_wait = 0, o.l2_ahead = 0, o.copies_after_task_but_mlp = true;
  EXPECT_TRUE(runs_one_token_copy_timings(o, 1));
  o.relaxed_poll = true;
  EXPECT_FALSE(runs_one_token_copy_timings(o, 1));
}

TEST(Gpt2DecodeTasks, DescribesTasksForTheTimeline) {
  const TaskListShape shape{132, 1, 512, 80 * 1024};
  const DecodeTaskList list = build_decode_tasks(shape);
  EXPECT_EQ(describe_task(list.tasks[0], shape, list.splits),
            "layer 0 ln1+qkv rows 0-23 (of 2304), residual cols 0-7");
  DecodeTask att;
  att.kind = uint8_t(TaskKind::attention);
  att.layer = 3;
  att.first = 2 * list.splits + 1;  // head 2, split 1 of 9: keys 57..113
  EXPECT_EQ(describe_task(att, shape, list.splits), "layer 3 attention head 2 keys 57-113");
  const std::string text = format_task_list(list, shape);
  EXPECT_NE(text.find("block 131:"), std::string::npos);
  EXPECT_NE(text.find("ln_f"), std::string::npos);
}

// With every product's weights and biases zero, the blocks add nothing to x: y = LN_f(x), a
// row normalized to mean 0 and variance 1 (gamma 1, beta 0).
TEST(Gpt2DecodeReference, ZeroBlocksLeaveTheNormalizedInput) {
  const int t = 2, s = 3;
  std::vector<double> w(kWeightElements, 0.0);
  for (int c = 0; c < kC; ++c) w[kFinalLnG + c] = 1.0;
  for (int l = 0; l < kLayers; ++l) {
    for (int c = 0; c < kC; ++c) {
      w[l * LayerLayout::size + LayerLayout::ln1_g + c] = 1.0;
      w[l * LayerLayout::size + LayerLayout::ln2_g + c] = 1.0;
    }
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> x(t * kC), cache(size_t(kLayers) * kHeads * (s + t) * kHeadDim);
  for (double& v : x) v = u(rng);
  for (double& v : cache) v = u(rng);
  const std::vector<double> y = reference_step(x, w, cache, cache, t, s);
  for (int j = 0; j < t; ++j) {
    double mean = 0, var = 0;
    for (int c = 0; c < kC; ++c) mean += x[j * kC + c] / kC;
    for (int c = 0; c < kC; ++c) var += (x[j * kC + c] - mean) * (x[j * kC + c] - mean) / kC;
    for (int c = 0; c < kC; c += 97)
      EXPECT_NEAR(y[j * kC + c], (x[j * kC + c] - mean) / std::sqrt(var + kLnEps), 1e-12);
  }
}

// One head's attention by hand: with Wqkv = 0 but a bias that makes q = 0, every score is 0 and
// the output is the plain mean of the values the token sees (the step's own value rows are the
// v bias). Only head 0's values are nonzero; Wproj = identity carries them into x.
TEST(Gpt2DecodeReference, ZeroQueriesAverageTheValues) {
  const int t = 2, s = 3, positions = s + t;
  std::vector<double> w(kWeightElements, 0.0);
  for (int c = 0; c < kC; ++c) w[kFinalLnG + c] = 1.0;
  const int64_t L0 = 0;
  for (int c = 0; c < kC; ++c) w[L0 + LayerLayout::ln1_g + c] = 1.0;
  for (int d = 0; d < kHeadDim; ++d) w[L0 + LayerLayout::b_qkv + 2 * kC + d] = 0.5;  // new v rows
  for (int c = 0; c < kC; ++c) w[L0 + LayerLayout::w_proj + int64_t(c) * kC + c] = 1.0;
  std::vector<double> x(t * kC, 0.0), k(size_t(kLayers) * kHeads * positions * kHeadDim, 0.0);
  std::vector<double> v = k;
  for (int p = 0; p < s; ++p)
    for (int d = 0; d < kHeadDim; ++d) v[p * kHeadDim + d] = p + 1;  // layer 0, head 0
  // x = 0 in, so after layer 0: x_j[d < 64] = mean of v over positions 0..s+j; 0 elsewhere.
  // Layers 1-11 have LN gammas 0 and zero matrices: they add nothing. y = LN_f(x).
  const std::vector<double> y = reference_step(x, w, k, v, t, s);
  for (int j = 0; j < t; ++j) {
    const double mean_v = (1 + 2 + 3 + 0.5 * (j + 1)) / (s + j + 1);
    std::vector<double> row(kC, 0.0);
    for (int d = 0; d < kHeadDim; ++d) row[d] = mean_v;
    double mean = 0, var = 0;
    for (double r : row) mean += r / kC;
    for (double r : row) var += (r - mean) * (r - mean) / kC;
    EXPECT_NEAR(y[j * kC], (row[0] - mean) / std::sqrt(var + kLnEps), 1e-9);
    EXPECT_NEAR(y[j * kC + 100], (0 - mean) / std::sqrt(var + kLnEps), 1e-9);
  }
}

TEST(Gpt2DecodeLesson, SizeAxisAndRefusals) {
  const Lesson* lesson = find_lesson("gpt2_decode");
  ASSERT_NE(lesson, nullptr);
  const SizeAxis& axis = lesson->info().size_axis;
  EXPECT_EQ(axis.min, 16);
  EXPECT_EQ(axis.max, kMaxCache);
  EXPECT_EQ(axis.inner_max, kMaxTokens);
  ASSERT_EQ(lesson->level_count(), 5);
  EXPECT_EQ(lesson->info().levels[0].launches.size(), size_t(17 * kLayers + 1));
  EXPECT_EQ(lesson->info().levels[1].launches.size(), size_t(5 * kLayers + 1));
  EXPECT_EQ(lesson->info().levels[4].launches.size(), 1u);
  // The megakernel's textbook bytes: the weights, the cache once, x in, y and the new rows out.
  const auto mega = lesson->traffic(4, Shape{512, 1}, Precision::bf16);
  ASSERT_EQ(mega.size(), 1u);
  EXPECT_EQ(mega[0].bytes_read, kWeightElements * 2 + 12 * 2 * 512 * 768 * 2 + 768 * 4);
  EXPECT_EQ(mega[0].bytes_written, 768 * 4 + 12 * 2 * 768 * 2);
  std::unique_ptr<Workspace> ws;
  EXPECT_FALSE(lesson->create_workspace(Shape{512, 17}, Precision::bf16, &ws).ok());
  EXPECT_FALSE(lesson->create_workspace(Shape{9000, 1}, Precision::bf16, &ws).ok());
  EXPECT_FALSE(lesson->create_workspace(Shape{512, 1}, Precision::fp32, &ws).ok());
}

}  // namespace
}  // namespace gpt2
}  // namespace fl
