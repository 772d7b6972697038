// The megakernel's task list (model.h), built on the host: which block runs which slice of
// which layer, in what order, and which dependency counter each task waits on and bumps.
//
// Stages per block: qkv -> attention -> proj -> mlp, then the next layer. Each matrix stage is
// cut into about one slice per block (so a stage's weights stream through every SM at once; qkv
// into slices of MegakernelOptions::qkv_rows, 24 in the lesson: 96 tasks at 132 blocks, which
// leaves blocks free of qkv for the attention tasks dealt after them) and
// no slice (with its small parameters) is larger than the shared memory kept for one task's
// weights, so a block can hold its current slice while the next one arrives. The MLP is cut
// along its width: a task computes its rows of h and adds their share of h Wout to the next
// residual at once, so the MLP is one stage, not two (four dependent stages a layer). Slices
// start on even rows (a bias slice is copied in 4-byte pieces), MLP slices on multiples of 8
// (Wout's columns in 16-byte pieces). Tasks are dealt round-robin from a cursor that carries
// on across stages, so the blocks that got one slice more in one stage are not the same ones
// in the next. The attention stage has one task per (head, split), at most blocks / 12 splits
// a head (one round of tasks; a split longer than a buffer reads its last keys from global
// memory), where levels 1-3 cap a split at 320 keys. With head combines (an option) the
// attention stage has one ticket counter a head beside its count: the last split of a head to
// take its ticket combines the head. With proj by head (the lesson's form) proj is cut along
// its input: kProjParts tasks a head, each waiting on its own head's counter (the head's
// attention splits bump it) and adding its head's share of kProjRows outputs into the
// residuals, whose starting values the qkv tasks write. With attention apart (an option) qkv
// takes fewer, longer slices and the splits a head are cut so that both stages fit the grid
// once: no attention task follows a qkv task of its layer on the same block.
// With proj reading rows (the lesson's form, beside proj by head) a proj task waits for the
// layer's qkv count (the residuals' starting values it adds into), not its head's splits: it
// loads their flagged rows until each carries the layer's flag, and the splits bump nothing.
// With attention reading qkv words (beside proj reading rows) an attention task waits on no
// counter: it loads its head's flagged q (and new k and v) words as the qkv tasks write them.
// With proj in attention's last split (an option, beside proj by head) there are no proj
// tasks: the splits of a head take tickets from the head's counter, the last one adds the head's
// share of proj, and bumps the layer's one proj count, which the MLP's tasks wait on (kHeads).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "kernels/gpt2_decode/model.h"

namespace fl {
namespace gpt2 {

const char* task_kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::qkv:
      return "ln1+qkv";
    case TaskKind::attention:
      return "attention";
    case TaskKind::proj:
      return "proj";
    case TaskKind::mlp:
      return "ln2+mlp";
    case TaskKind::final_norm:
      return "ln_f";
  }
  return "?";
}

const char* probe_slot_name(int slot) {
  static const char* const names[kProbeSlots] = {"counter", "copy",    "inputs",
                                                 "compute", "outputs", "release"};
  return slot >= 0 && slot < kProbeSlots ? names[slot] : "?";
}

int attention_splits(int positions, int blocks, int min_keys, int max_keys) {
  const int longest = std::max(1, max_keys);
  const int by_length = (positions + longest - 1) / longest;
  const int by_blocks = std::max(1, blocks / kHeads);
  const int floor = std::max(1, min_keys);
  const int by_minimum = std::max(1, (positions + floor - 1) / floor);
  return std::min(kMaxSplits, std::max(by_length, std::min(by_blocks, by_minimum)));
}

int split_length(int positions, int splits) {
  return (positions + splits - 1) / splits;
}

namespace {

struct Stage {
  TaskKind kind;
  int rows;  // output rows of the matrix (0: not a matrix stage)
  int k;     // its input length
  int step;  // a slice's rows are a multiple of this
};

constexpr Stage kStages[kStagesPerLayer] = {{TaskKind::qkv, 3 * kC, kC, 2},
                                            {TaskKind::attention, 0, 0, 1},
                                            {TaskKind::proj, kC, kC, 2},
                                            {TaskKind::mlp, kF, kC, 8}};

// Rows a slice of `stage` takes: about one slice per block, within the buffer (an MLP slice
// keeps its Wout columns too where the even share fits).
int slice_rows(const Stage& stage, int blocks, int buffer_bytes) {
  const int row_bytes = stage.k * 2;  // bf16
  const int fit =
      std::max(stage.step, std::min(kMaxSliceRows, (buffer_bytes - kExtrasBytes) / row_bytes) /
                               stage.step * stage.step);
  const int share = (stage.rows + blocks - 1) / blocks;
  return std::min(fit, (share + stage.step - 1) / stage.step * stage.step);
}

}  // namespace

bool uses_fused_proj(const TaskListShape& shape) {
  return shape.fused_proj && !shape.head_waits && !shape.head_combine &&
         fused_proj_fits(shape.cache, shape.weight_buffer_bytes);
}

// Not with head waits: a proj task adds into columns whose starting values a qkv task of
// another head writes, which an attention task waiting for its own head's rows does not wait for.
bool uses_head_proj(const TaskListShape& shape) {
  return shape.head_proj && !uses_fused_proj(shape) && !shape.head_combine && !shape.proj_apart &&
         !shape.head_waits && head_proj_fits(shape.weight_buffer_bytes);
}

DecodeTaskList build_decode_tasks(const TaskListShape& shape) {
  const int blocks = std::max(1, shape.blocks);
  DecodeTaskList list;
  // Grid splits: one round of attention tasks on the grid, however long a split gets (the keys
  // past a buffer come from global memory); otherwise at most kMaxSplitLength keys a split.
  const int rounds = std::max(1, shape.split_rounds);
  list.splits = attention_splits(shape.cache + shape.tokens, blocks * rounds, shape.min_split_keys,
                                 shape.grid_splits ? kMaxPositions : kMaxSplitLength);
  list.fused_proj = uses_fused_proj(shape);
  list.head_proj = uses_head_proj(shape);
  list.last_split_proj = list.head_proj && shape.last_split_proj > 0;
  list.proj_reads_rows = list.head_proj && !list.last_split_proj && shape.proj_reads_rows;
  list.qkv_words = list.proj_reads_rows && shape.qkv_words;
  // With attention and proj fused, the qkv slices go to the blocks the fused tasks leave free
  // (when there are enough), so those copy their keys and values while the qkv stage runs.
  const int fused_tasks = kHeads * kProjParts;
  const int qkv_blocks =
      list.fused_proj && blocks > fused_tasks + kHeads ? blocks - fused_tasks : blocks;
  // With proj apart, attention's tasks then proj's fill the blocks once: proj's go where the
  // dealing cursor stands after attention's, on blocks without an attention task.
  list.proj_apart =
      shape.proj_apart && !list.fused_proj && kHeads * list.splits + kProjApartTasks <= blocks;
  // Attention apart from qkv: qkv in apart_qkv_rows-row slices and one round of splits on the
  // blocks those leave free, where a split's keys then fit a buffer (the cursor deals a stage's
  // tasks after the stage before's, so the two stages fill the grid once, and proj's tasks
  // then land on the qkv blocks).
  int qkv_rows = shape.qkv_rows;
  if (shape.apart_qkv_rows > 0 && !list.fused_proj && !list.proj_apart) {
    const int rows =
        std::min(shape.apart_qkv_rows, slice_rows(kStages[0], 1, shape.weight_buffer_bytes));
    const int qkv_tasks = (kStages[0].rows + rows - 1) / rows;
    const int splits = std::min(list.splits, (blocks - qkv_tasks) / kHeads);
    if (splits >= 1 && split_length(shape.cache + shape.tokens, splits) <= kMaxSplitLength) {
      list.splits = splits;
      list.attention_apart = true;
      qkv_rows = rows;
    }
  }
  std::vector<std::vector<DecodeTask>> per_block(blocks);
  int cursor = 0;
  auto deal = [&](const DecodeTask& task) {
    per_block[cursor].push_back(task);
    cursor = (cursor + 1) % blocks;
  };
  uint16_t waited = kNoCounter;  // the counter of the stage before
  uint16_t waited_target = 0;
  uint16_t head_targets[kHeads] = {};  // with head waits: qkv tasks bumping each head's counter
  uint16_t qkv_counter = kNoCounter, qkv_target = 0;  // the layer's qkv count (proj reads rows)
  for (int layer = 0; layer < kLayers; ++layer) {
    for (int st = 0; st < kStagesPerLayer; ++st) {
      const Stage& stage = kStages[st];
      // done by attention (fused, or its last split a head)
      if ((list.fused_proj || list.last_split_proj) && stage.kind == TaskKind::proj) continue;
      const bool per_head = shape.head_waits && stage.kind == TaskKind::qkv;
      DecodeTask task;
      task.kind = static_cast<uint8_t>(stage.kind);
      task.layer = static_cast<uint8_t>(layer);
      task.wait_counter = waited;
      task.wait_target = waited_target;
      const bool combines = shape.head_combine && stage.kind == TaskKind::attention;
      task.flags = per_head ? kBumpsHeads : combines ? kCombinesHead : 0;
      if (list.fused_proj && stage.kind == TaskKind::qkv) task.flags = kInitsResidual;
      const bool by_head = list.head_proj && stage.kind != TaskKind::mlp;
      if (by_head) {  // qkv starts the residuals, attention counts per head, proj by head
        const uint8_t last =
            kProjectsLast | (shape.last_split_proj >= 2 ? kPrefetchesProj : uint8_t(0));
        task.flags |= stage.kind == TaskKind::qkv ? kInitsResidual
                      : stage.kind == TaskKind::attention
                          ? (list.last_split_proj ? last : kBumpsHead)
                          : kHeadProj;
      }
      const bool head_counters = by_head && stage.kind == TaskKind::attention;
      // (proj in the last split: the heads' tickets, then the MLP's count)
      const bool tickets = head_counters && list.last_split_proj;
      task.done_counter = static_cast<uint16_t>(list.counters);
      list.counters += tickets                     ? kHeads + 1
                       : per_head || head_counters ? kHeads
                       : combines                  ? 1 + kHeads
                                                   : 1;
      uint16_t count = 0;
      if (by_head && stage.kind == TaskKind::proj) {  // (head, part): its head's counter
        const uint16_t head_base = waited;
        task.count = kProjRows;
        for (int unit = 0; unit < kHeads * kProjParts; ++unit) {
          task.first = unit;
          task.wait_counter = static_cast<uint16_t>(head_base + unit / kProjParts);
          task.wait_target = static_cast<uint16_t>(list.splits);
          if (list.proj_reads_rows)  // the residuals' starts; its head's rows it loads itself
            task.wait_counter = qkv_counter, task.wait_target = qkv_target;
          deal(task);
          ++count;
        }
      } else if (stage.rows == 0 && list.fused_proj) {  // attention and proj: (head, part)
        task.flags = kProjects;
        task.count = 1;
        for (int unit = 0; unit < fused_tasks; ++unit) {
          task.first = unit;
          deal(task);
          ++count;
        }
      } else if (stage.rows == 0) {  // attention: one task per (head, split)
        const uint16_t head_base = waited;
        if (list.qkv_words) task.wait_counter = kNoCounter, task.wait_target = 0;  // (words)
        for (int unit = 0; unit < kHeads * list.splits; ++unit) {
          task.first = unit;
          task.count = 1;
          if (shape.head_waits) {  // its own head's counter
            task.wait_counter = static_cast<uint16_t>(head_base + unit / list.splits);
            task.wait_target = head_targets[unit / list.splits];
          }
          deal(task);
          ++count;
        }
      } else {
        const int stage_blocks = stage.kind == TaskKind::qkv                       ? qkv_blocks
                                 : stage.kind == TaskKind::proj && list.proj_apart ? kProjApartTasks
                                                                                   : blocks;
        // qkv_rows (not with fused proj, whose qkv slices fill the blocks it leaves free),
        // within the buffer.
        const int fit = slice_rows(stage, 1, shape.weight_buffer_bytes);
        const bool set_rows = stage.kind == TaskKind::qkv && qkv_rows > 0 && !list.fused_proj;
        const int rows = set_rows ? std::min(fit, qkv_rows)
                                  : slice_rows(stage, stage_blocks, shape.weight_buffer_bytes);
        for (int h = 0; h < kHeads; ++h) head_targets[h] = 0;
        for (int first = 0; first < stage.rows; first += rows) {
          task.first = first;
          task.count = static_cast<uint16_t>(std::min(rows, stage.rows - first));
          int head_a = 0, head_b = 0;
          heads_of_rows(first, task.count, &head_a, &head_b);
          ++head_targets[head_a];
          if (head_b != head_a) ++head_targets[head_b];
          deal(task);
          ++count;
        }
      }
      waited = static_cast<uint16_t>(task.done_counter + (tickets ? kHeads : 0));
      if (stage.kind == TaskKind::qkv) qkv_counter = waited, qkv_target = count;
      // with head combines or proj in the last split, one count a head
      waited_target = combines || tickets ? kHeads : count;
    }
  }
  DecodeTask norm;
  norm.kind = static_cast<uint8_t>(TaskKind::final_norm);
  norm.layer = kLayers - 1;
  norm.wait_counter = waited;
  norm.wait_target = waited_target;
  norm.done_counter = static_cast<uint16_t>(list.counters++);
  norm.count = 1;
  deal(norm);

  list.block_begin.push_back(0);
  for (const auto& tasks : per_block) {
    list.tasks.insert(list.tasks.end(), tasks.begin(), tasks.end());
    list.block_begin.push_back(static_cast<int>(list.tasks.size()));
  }
  return list;
}

bool runs_one_token_kernel(const MegakernelOptions& o, int tokens) {
  // A new option is added below too (the one-token instance holds the lesson's value of every
  // option that is not the task list's, but residual_spread, which only it reads).
  // (last_split_proj, proj_reads_rows and qkv_words are the task list's: both instances run
  // them.)
  static_assert(sizeof(MegakernelOptions) == 80, "an option the one-token kernel must compare");
  const MegakernelOptions d;
  return o.one_token_kernel && tokens == 1 && o.bulk_copies == d.bulk_copies &&
         o.l2_ahead == d.l2_ahead && o.copies_after_wait == d.copies_after_wait &&
         o.head_waits == d.head_waits && o.batched_combine == d.batched_combine &&
         o.copies_after_inputs == d.copies_after_inputs &&
         o.one_pass_attention == d.one_pass_attention && o.relaxed_poll == d.relaxed_poll &&
         o.head_combine == d.head_combine && o.skip_own_poll == d.skip_own_poll &&
         o.residual_copies == d.residual_copies && o.copy_thread == d.copy_thread &&
         o.fused_proj == d.fused_proj && o.wide_rows == d.wide_rows &&
         o.proj_apart == d.proj_apart && o.early_copies == d.early_copies &&
         o.copies_after_task == d.copies_after_task &&
         o.copies_after_task_but_mlp == d.copies_after_task_but_mlp &&
         o.branch_free_keys == d.branch_free_keys && o.grid_splits == d.grid_splits &&
         o.task_window == d.task_window && o.poll_first == d.poll_first &&
         o.release_warp == d.release_warp && o.head_proj == d.head_proj;
}

bool runs_one_token_copy_timings(const MegakernelOptions& o, int tokens) {
  const MegakernelOptions d;
  MegakernelOptions lesson_copies = o;
  lesson_copies.l2_ahead = d.l2_ahead, lesson_copies.copies_after_wait = d.copies_after_wait;
  lesson_copies.copies_after_task = d.copies_after_task;
  lesson_copies.copies_after_task_but_mlp = d.copies_after_task_but_mlp;
  lesson_copies.copies_after_inputs = d.copies_after_inputs;
  return !runs_one_token_kernel(o, tokens) && runs_one_token_kernel(lesson_copies, tokens);
}

int weight_buffer_bytes_for(int smem_optin) {
  const int buffer =
      std::min(kMaxWeightBufferBytes, ((smem_optin - kMegakernelFixedSharedBytes) / 2) & ~15);
  return buffer >= 8 * kC * 2 + kExtrasBytes ? buffer : 0;
}

TaskListShape task_shape_for(int sms, int smem_optin, int tokens, int cache) {
  return TaskListShape{sms, tokens, cache, weight_buffer_bytes_for(smem_optin)};
}

int smem_optin_for(int cc_major, int cc_minor) {
  if (cc_major >= 9) return 232448;
  if (cc_major == 8) return (cc_minor == 0 || cc_minor == 7) ? 166912 : 101376;
  if (cc_major == 7) return cc_minor >= 5 ? 65536 : 98304;
  return 49152;
}

std::function<std::string(uint32_t)> task_namer(int sms, int cc_major, int cc_minor, int tokens,
                                                int cache, size_t recorded_tasks) {
  const TaskListShape shape =
      task_shape_for(sms, smem_optin_for(cc_major, cc_minor), tokens, cache);
  auto list = std::make_shared<const DecodeTaskList>(build_decode_tasks(shape));
  // (a recording of the cluster step names its records by themselves: model.h's kClusterRecord)
  if (recorded_tasks != 0 && recorded_tasks != list->tasks.size() &&
      recorded_tasks <= kClusterRecord)
    return {};
  return [list, shape](uint32_t index) -> std::string {
    if (index & kClusterRecord) return describe_cluster_record(index, shape.cache);
    if (index >= list->tasks.size()) return std::string();
    return describe_task(list->tasks[index], shape, list->splits);
  };
}

std::string describe_cluster_record(uint32_t arg, int cache) {
  const int stage = int(arg >> 20 & 3), layer = int(arg >> 12 & 255), what = int(arg & 4095);
  char text[200];
  if (stage == 0) {  // (cluster_step.cu's head stage: 8 blocks a head)
    const int head = what / 8, rank = what % 8, n = (cache + 7) / 8;
    const int first = std::min(cache, rank * n), last = std::min(cache, first + n) - 1;
    char keys[64];
    if (first > last) {
      std::snprintf(keys, sizeof(keys), "%s", rank == 7 ? "the new key" : "no keys");
    } else {
      std::snprintf(keys, sizeof(keys), "keys %d-%d%s", first, last,
                    rank == 7 ? " and the new one" : "");
    }
    std::snprintf(text, sizeof(text),
                  "layer %d head %d, block %d of 8: q, k, v rows %d-%d, %s, proj outputs %d-%d "
                  "(dims %d-%d)",
                  layer, head, rank, rank * 8, rank * 8 + 7, keys, (rank / 2) * kProjRows,
                  (rank / 2 + 1) * kProjRows - 1, (rank % 2) * 32, (rank % 2) * 32 + 31);
  } else if (stage == 1) {
    const int first = 8 * (what & 511), rows = 8 * ((what >> 9 & 3) + 1);
    std::snprintf(text, sizeof(text), "layer %d MLP rows %d-%d of h (of %d)", layer, first,
                  first + rows - 1, kF);
  } else {
    std::snprintf(text, sizeof(text), "ln_f (final LayerNorm)");
  }
  return text;
}

std::string describe_task(const DecodeTask& task, const TaskListShape& shape, int splits) {
  const TaskKind kind = static_cast<TaskKind>(task.kind);
  char text[160];
  if (kind == TaskKind::final_norm) {
    std::snprintf(text, sizeof(text), "ln_f (final LayerNorm, %d token%s)", shape.tokens,
                  shape.tokens == 1 ? "" : "s");
  } else if (kind == TaskKind::attention && (task.flags & kProjects)) {
    const int head = task.first / kProjParts, part = task.first % kProjParts;
    std::snprintf(text, sizeof(text), "layer %d attention+proj head %d (all %d keys) rows %d-%d",
                  task.layer, head, shape.cache + shape.tokens, part * kProjRows,
                  (part + 1) * kProjRows - 1);
  } else if (kind == TaskKind::proj && (task.flags & kHeadProj)) {
    const int head = task.first / kProjParts, part = task.first % kProjParts;
    std::snprintf(text, sizeof(text), "layer %d proj head %d rows %d-%d (of %d)", task.layer, head,
                  part * kProjRows, (part + 1) * kProjRows - 1, kC);
  } else if (kind == TaskKind::attention) {
    const int positions = shape.cache + shape.tokens;
    const int len = split_length(positions, std::max(1, splits));
    const int head = task.first / std::max(1, splits), split = task.first % std::max(1, splits);
    const int first = split * len, last = std::min(positions, first + len) - 1;
    if (first > last) {
      std::snprintf(text, sizeof(text), "layer %d attention head %d split %d (no keys)", task.layer,
                    head, split);
    } else {
      std::snprintf(text, sizeof(text), "layer %d attention head %d keys %d-%d", task.layer, head,
                    first, last);
    }
  } else {
    const int rows = kind == TaskKind::qkv ? 3 * kC : kind == TaskKind::mlp ? kF : kC;
    const int n =
        std::snprintf(text, sizeof(text), "layer %d %s rows %u-%u (of %d)", task.layer,
                      task_kind_name(kind), task.first, task.first + task.count - 1, rows);
    if ((task.flags & kInitsResidual) && n > 0 && n < int(sizeof(text))) {
      const int c0 = 2 * (int(task.first) / 6), c1 = 2 * (int(task.first + task.count) / 6);
      std::snprintf(text + n, sizeof(text) - n, ", residual cols %d-%d", c0, c1 - 1);
    }
  }
  return text;
}

std::string format_task_list(const DecodeTaskList& list, const TaskListShape& shape) {
  std::string out;
  char line[200];
  std::snprintf(
      line, sizeof(line),
      "gpt2_decode megakernel: %zu tasks on %d blocks, %d token%s, cache %d, %s, "
      "%d dependency counters\n",
      list.tasks.size(), shape.blocks, shape.tokens, shape.tokens == 1 ? "" : "s", shape.cache,
      list.fused_proj ? "attention and proj one stage (a head's keys per task)"
                      : (std::to_string(list.splits) + " attention splits per head").c_str(),
      list.counters);
  out += line;
  out +=
      "(level 4's variant task_list; at 1 new token on an sm_90 build the table runs the variant "
      "clusters (clusters_long past a cache of 2K) instead: each head a cluster of 8 blocks, a "
      "head stage and an MLP stage a layer, cluster_step.cu)\n";
  if (list.head_proj && !list.proj_reads_rows)
    out += "proj by head: each head's splits counted apart, proj adds into x\n";
  if (list.last_split_proj)
    out += "proj in attention: a head's last split adds its share of proj\n";
  if (list.proj_reads_rows)
    out +=
        "proj by head, reading rows: a proj task waits for qkv's count and loads its head's "
        "flagged rows as they land (the splits count nothing), proj adds into x\n";
  if (list.qkv_words)
    out +=
        "attention reading qkv words: a split waits on no count and loads its head's flagged q "
        "(and new k, v) words as they land; proj waits for qkv's count inside its task\n";
  if (list.attention_apart) out += "attention apart: its splits on the blocks qkv leaves free\n";
  for (int b = 0; b + 1 < static_cast<int>(list.block_begin.size()); ++b) {
    std::snprintf(line, sizeof(line), "block %d: %d tasks\n", b,
                  list.block_begin[b + 1] - list.block_begin[b]);
    out += line;
    for (int i = list.block_begin[b]; i < list.block_begin[b + 1]; ++i) {
      const DecodeTask& task = list.tasks[i];
      std::string wait = "-", bumps = std::to_string(task.done_counter);
      if (task.wait_counter != kNoCounter) {
        wait = "counter " + std::to_string(task.wait_counter) +
               " >= " + std::to_string(task.wait_target);
      }
      if (task.flags & kCombinesHead) {  // its head's ticket; the last split bumps the count
        bumps = "ticket " + std::to_string(task.done_counter + 1 + task.first / list.splits) +
                ", last " + bumps;
      } else if (task.flags & kProjectsLast) {  // its head's ticket; the last split projects
        bumps = "ticket " + std::to_string(task.done_counter + task.first / list.splits) +
                ", last: proj, " + std::to_string(task.done_counter + kHeads);
      } else if ((task.flags & kBumpsHead) && list.proj_reads_rows) {  // its flagged row
        bumps = "a flagged row of head " + std::to_string(task.first / std::max(1, list.splits));
      } else if (task.flags & kBumpsHead) {  // its head's counter
        bumps = std::to_string(task.done_counter + task.first / std::max(1, list.splits));
      } else if (task.flags & kBumpsHeads) {  // the counters of the heads its rows belong to
        int head_a = 0, head_b = 0;
        heads_of_rows(static_cast<int>(task.first), task.count, &head_a, &head_b);
        bumps = std::to_string(task.done_counter + head_a);
        if (head_b != head_a) bumps += "," + std::to_string(task.done_counter + head_b);
      }
      std::snprintf(line, sizeof(line), "  #%-5d %-48s waits %-18s bumps %s\n", i,
                    describe_task(task, shape, list.splits).c_str(), wait.c_str(), bumps.c_str());
      out += line;
    }
  }
  return out;
}

}  // namespace gpt2
}  // namespace fl
