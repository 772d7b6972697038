// GPT-2 small's decode step as data (lesson 11, gpt2_decode): the shapes, where each weight sits
// in the one weight buffer, the fp64 CPU reference, and the megakernel's task list (its options:
// megakernel_options.h). Plain C++ (no CUDA header): the command line prints the task list, the
// timeline names a task from it, and the CPU tests check it without a GPU.
//
// One decode step: t new tokens (1..16) whose hidden states x (t x C) enter block 0, against a KV
// cache of s earlier positions per layer. Each of the 12 pre-LN blocks does
//   a = LN1(x);  q, k, v = a Wqkv + bqkv;  k, v appended to the cache at positions s..s+t-1
//   x += Attention(q, cache) Wproj + bproj        (12 heads of 64, token j sees positions <= s+j)
//   x += GELU_tanh(LN2(x) Wfc + bfc) Wout + bout
// and the step ends with y = LN_f(x). Weights and the cache are bf16; the activations (a few KB)
// stay fp32 at every level.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/gpt2_decode/megakernel_options.h"

namespace fl {
namespace gpt2 {

constexpr int kC = 768;          // hidden size
constexpr int kHeads = 12;       // attention heads
constexpr int kHeadDim = 64;     // kC / kHeads
constexpr int kF = 4 * kC;       // MLP width
constexpr int kLayers = 12;      // transformer blocks
constexpr int kMaxTokens = 16;   // new tokens per step
constexpr int kMaxCache = 8192;  // cached positions (the size slider)
constexpr double kLnEps = 1e-5;

// Offsets (in elements) inside one block's weights, in storage order. Matrices are stored one
// output row after another ([N][K]), so a slice of outputs is one contiguous run of bytes.
struct LayerLayout {
  static constexpr int64_t ln1_g = 0;
  static constexpr int64_t ln1_b = ln1_g + kC;
  static constexpr int64_t w_qkv = ln1_b + kC;  // [3C][C]: q rows, then k rows, then v rows
  static constexpr int64_t b_qkv = w_qkv + int64_t(3) * kC * kC;
  static constexpr int64_t w_proj = b_qkv + 3 * kC;  // [C][C]
  static constexpr int64_t b_proj = w_proj + int64_t(kC) * kC;
  static constexpr int64_t ln2_g = b_proj + kC;
  static constexpr int64_t ln2_b = ln2_g + kC;
  static constexpr int64_t w_fc = ln2_b + kC;  // [4C][C]
  static constexpr int64_t b_fc = w_fc + int64_t(kF) * kC;
  static constexpr int64_t w_out = b_fc + kF;  // [C][4C]
  static constexpr int64_t b_out = w_out + int64_t(kC) * kF;
  static constexpr int64_t size = b_out + kC;
};
constexpr int64_t kFinalLnG = int64_t(kLayers) * LayerLayout::size;  // LN_f's gamma, then beta
constexpr int64_t kWeightElements = kFinalLnG + 2 * kC;              // ~85.1M (170 MB in bf16)

// ---- the megakernel's task list ---------------------------------------------------------------

// What a task does. Its order is the order of a block's stages (and the timeline's phase names).
enum class TaskKind : uint8_t {
  qkv = 0,        // LN1 of x, then a slice of q|k|v rows; k and v go into the cache
  attention = 1,  // one head over one split of the cache: partial softmax sums
  proj = 2,       // combine the heads' partial sums, a slice of Wproj, + bias, + residual
  mlp = 3,        // LN2 of x, a slice of h = GELU(. Wfc + bfc), and that slice's share of h Wout
                  // added into the next residual (split over the MLP's width: no stage between)
  final_norm = 4  // y = LN_f(x)
};
constexpr int kTaskKinds = 5;
constexpr int kStagesPerLayer = 4;  // qkv .. mlp
const char* task_kind_name(TaskKind kind);

// One task, as the device reads it (16 bytes). Dependencies are counters in global memory: one
// per (layer, stage), bumped once by every task of that stage when its outputs are written; a
// task waits until its input stage's counter reaches that stage's task count. With head waits
// (TaskListShape::head_waits) the qkv stage has one counter per head instead: a qkv task bumps
// the counter of each head its rows belong to (kBumpsHeads), and an attention task waits only
// for its own head's q, k and v rows, not for the whole stage.
struct DecodeTask {
  uint8_t kind = 0;
  uint8_t layer = 0;
  uint16_t wait_counter = 0;  // kNoCounter: nothing to wait for
  uint16_t wait_target = 0;
  uint8_t flags = 0;  // kBumpsHeads, kCombinesHead
  uint8_t reserved = 0;
  uint32_t first = 0;         // first output row of the slice, or head * splits + split
  uint16_t count = 0;         // output rows of the slice (1 for attention and the norm)
  uint16_t done_counter = 0;  // bumped when the task's outputs are written (kBumpsHeads: the
                              // first of kHeads counters, head h's at done_counter + h)
};
static_assert(sizeof(DecodeTask) == 16, "the device reads 16-byte tasks");
constexpr uint16_t kNoCounter = 0xFFFF;
constexpr uint8_t kBumpsHeads = 1;
// With head combines (TaskListShape::head_combine) an attention task first takes a ticket from
// its head's ticket counter (done_counter + 1 + head); the head's last split to finish merges
// the head's partial sums into its 64 outputs and alone bumps done_counter, whose target is
// then kHeads: proj reads 768 values instead of every split's sums.
constexpr uint8_t kCombinesHead = 2;
// With attention and proj as one stage (TaskListShape::fused_proj): an attention task with
// kProjects takes a whole head (every key, no splits) and its share of proj: the head's 64
// outputs times kProjRows rows of Wproj's head columns, added (red.add) into the residual and
// the next layer's residual; first = head * kProjParts + part. Its qkv tasks carry
// kInitsResidual: each writes its share of both residuals' starting values (x + bproj, and
// x + bproj + bout), columns [2 * (first / 6), 2 * ((first + count) / 6)), after its product.
constexpr uint8_t kProjects = 4;
constexpr uint8_t kInitsResidual = 8;
// With proj by head (TaskListShape::head_proj): a proj task with kHeadProj takes one head's
// kProjRows outputs of proj (first = head * kProjParts + part): it waits for its head's splits
// only, combines them (64 values a token), multiplies them by its part of Wproj's head columns
// and adds the product into the residuals (red.add), as a fused task does; the qkv tasks carry
// kInitsResidual. Its head's attention tasks carry kBumpsHead: each bumps its head's counter,
// done_counter + first / splits, whose target is the splits a head.
constexpr uint8_t kHeadProj = 16;
constexpr uint8_t kBumpsHead = 32;
// With proj in attention's last split (TaskListShape::last_split_proj): no proj tasks. An
// attention task with kProjectsLast takes its head's ticket (done_counter + head) once its
// partial sums are written; the head's last split combines the head and adds its 64 outputs
// times the head's 64 columns of Wproj (all 768 outputs, 96 KB) into the residuals, then bumps
// done_counter + kHeads, the MLP's counter (target kHeads). With kPrefetchesProj each split
// first asks L2 for its share of those 96 KB (which split is last is not known ahead).
constexpr uint8_t kProjectsLast = 64;
constexpr uint8_t kPrefetchesProj = 128;
constexpr int kProjParts = 4;               // tasks a head (fused: each the head's softmax)
constexpr int kProjRows = kC / kProjParts;  // proj outputs a task adds
constexpr int kProjSliceBytes = kProjRows * kHeadDim * 2;  // its Wproj part (24 KB)
// Whether a step over `cache` cached positions fits the fused stage: the head's cached keys
// and values and the Wproj part in both of a block's weight buffers at once.
constexpr bool fused_proj_fits(int cache, int buffer_bytes) {
  return int64_t(cache) * kHeadDim * 2 * 2 + kProjSliceBytes <= 2 * int64_t(buffer_bytes);
}
// The heads whose rows [first, first + count) of Wqkv's output a qkv slice holds (q, k and v
// rows of head h are the 64-row blocks h, 12 + h and 24 + h; a slice of at most 64 rows touches
// one or two blocks): the first and the last, equal when it touches one.
constexpr void heads_of_rows(int first, int count, int* head_a, int* head_b) {
  *head_a = (first / kHeadDim) % kHeads;
  *head_b = ((first + count - 1) / kHeadDim) % kHeads;
}

constexpr int kMaxSliceRows = 64;  // rows of a product task (its sums wait in shared memory)
// A product task's small parameters, copied with its weights to the end of its buffer:
// LayerNorm's gamma and beta (C each), the slice's bias, and proj's slice of b_out (the MLP's
// sum starts from it).
constexpr int kExtrasBytes = 2 * kC * 2 + 2 * kMaxSliceRows * 2;
// An MLP task holds its rows of Wfc and, when they fit beside them, the same columns of Wout.
constexpr bool mlp_wout_fits(int rows, int buffer_bytes) {
  return 2 * rows * kC * 2 + kExtrasBytes <= buffer_bytes;
}

struct TaskListShape {
  int blocks = 132;                     // persistent blocks (one per SM)
  int tokens = 1;                       // new tokens t
  int cache = 512;                      // cached positions s
  int weight_buffer_bytes = 80 * 1024;  // shared memory for one task's weights
  bool head_waits = false;              // attention waits for its own head's qkv rows only
  int min_split_keys = kMinSplitKeys;   // attention_splits' floor on keys per split
  bool head_combine = false;            // the last split of a head combines it (MegakernelOptions)
  bool fused_proj = false;              // attention and proj one stage (where it fits)
  bool proj_apart = false;              // proj on the blocks attention leaves free
  bool grid_splits = true;              // splits follow the grid (MegakernelOptions)
  int split_rounds = 1;                 // rounds of attention tasks on the grid (the same)
  bool head_proj = true;                // proj cut by head (MegakernelOptions::head_proj)
  int qkv_rows = kLessonQkvRows;        // rows of a qkv slice (MegakernelOptions::qkv_rows)
  int apart_qkv_rows = kLessonApartQkvRows;  // attention apart from qkv (the same)
  int last_split_proj = 0;  // proj in attention's last split (MegakernelOptions; >= 2: prefetched)
  bool proj_reads_rows = kLessonProjReadsRows;  // proj reads flagged rows (MegakernelOptions)
  bool qkv_words = kLessonQkvWords;  // attention reads flagged qkv words (MegakernelOptions)
};
// Whether proj by head fits: a task's part of Wproj (24 KB) in one weight buffer.
constexpr bool head_proj_fits(int buffer_bytes) {
  return kProjSliceBytes <= buffer_bytes;
}
// With proj apart (MegakernelOptions::proj_apart): proj is cut into this many slices of 32 rows,
// dealt to blocks that hold no attention task of the layer (where heads x splits leaves them).
constexpr int kProjApartTasks = 24;

// Every task, grouped by block (block b runs tasks[block_begin[b] .. block_begin[b + 1]) in
// order: each block's list is in stage order, which is what makes the schedule deadlock-free on
// any number of co-resident blocks).
struct DecodeTaskList {
  std::vector<DecodeTask> tasks;
  std::vector<int> block_begin;  // blocks + 1 entries
  int counters = 0;              // dependency counters (the kernel adds one "blocks done" count)
  int splits = 0;                // attention splits per head
  bool fused_proj = false;       // attention and proj one stage (TaskListShape::fused_proj)
  bool proj_apart = false;       // proj on blocks without attention (TaskListShape::proj_apart)
  bool head_proj = false;        // proj cut by head (TaskListShape::head_proj)
  bool attention_apart = false;  // attention on the blocks qkv leaves free (apart_qkv_rows)
  bool last_split_proj = false;  // proj in attention's last split (TaskListShape's)
  // proj by head waits on its head's flagged rows, not a count (TaskListShape::proj_reads_rows):
  // its tasks wait on no counter and the splits release none.
  bool proj_reads_rows = false;
  // attention waits on no counter: it loads its head's flagged q, k and v words
  // (TaskListShape::qkv_words, beside proj_reads_rows); proj waits for qkv's count in its task.
  bool qkv_words = false;
};

// Attention splits per head for a step over `positions` = s + t keys on `blocks` blocks: enough
// to give every block work, at most `max_keys` keys each, and no split under `min_keys`
// keys (TaskListShape::min_split_keys, 64 unless an option asks for fewer). Levels 1-3 cap a
// split at kMaxSplitLength: its cached keys and values (320 x 2 x 128 B = 80 KB) fit one of the
// megakernel's weight buffers, and 8K + 16 positions need 26 splits: the combine takes up to 32.
// The megakernel's grid splits (MegakernelOptions::grid_splits) pass kMaxPositions: never more
// splits than the grid holds in one round.
constexpr int kMaxSplitLength = 320;
constexpr int kMaxSplits = 32;
constexpr int kMaxPositions = kMaxCache + kMaxTokens;
static_assert(kMaxPositions <= kMaxSplits * kMaxSplitLength, "the combine holds 32 splits");
int attention_splits(int positions, int blocks, int min_keys = kMinSplitKeys,
                     int max_keys = kMaxSplitLength);
int split_length(int positions, int splits);  // keys per split (the last one may be shorter)

DecodeTaskList build_decode_tasks(const TaskListShape& shape);

// Shared memory the megakernel keeps besides its two weight buffers: the activations or the
// attention scores (48 KB), a chunk's sums (4 KB), and 1 KB of slack.
constexpr int kMegakernelFixedSharedBytes = 48 * 1024 + 4 * 1024 + 1024;
constexpr int kMaxWeightBufferBytes = 80 * 1024;
// One weight buffer on a GPU that gives a block `smem_optin` bytes of shared memory (an H100:
// 227 KB, so 80 KB); 0 when two buffers of eight rows of Wfc and the extras (15 KB) do not fit.
int weight_buffer_bytes_for(int smem_optin);
// The task list a GPU of `sms` SMs and `smem_optin` bytes of shared memory per block runs for a
// step: what a recording's task records (PhaseRecord::arg) index, rebuilt without a GPU.
TaskListShape task_shape_for(int sms, int smem_optin, int tokens, int cache);
// The shared memory a block may opt in to on a GPU of compute capability major.minor (the CUDA
// programming guide's table: 227 KB on sm_90, 163 KB on sm_80 and sm_87, 99 KB on sm_86 and
// sm_89, 96 KB on sm_70, 64 KB on sm_75), for rebuilding a recorded GPU's task list.
int smem_optin_for(int cc_major, int cc_minor);
// Names a task record's `arg` (its index in the task list) for the phase timeline's hover, on a
// GPU of `sms` SMs and that compute capability, at `tokens` new tokens and `cache` positions:
// "layer 3 ln2+fc rows 48-71 (of 3072)". The list is built once, when the namer is made.
// `recorded_tasks` is how many tasks the recording's records name (0: not known). A list of
// another length was not the one that ran (a recording made by a build with another task list):
// then the namer is empty, and the hover names no task rather than the wrong one.
std::function<std::string(uint32_t)> task_namer(int sms, int cc_major, int cc_minor, int tokens,
                                                int cache, size_t recorded_tasks = 0);

// "layer 3 fc rows 48-71 (of 3072)", "layer 0 attention head 5 keys 0-46": the timeline's hover
// text and the command line's listing.
std::string describe_task(const DecodeTask& task, const TaskListShape& shape, int splits);

// The listing `fusionlab lessons --tasks gpt2_decode` prints: one line per block.
std::string format_task_list(const DecodeTaskList& list, const TaskListShape& shape);

// Where a megakernel task's time goes, measured on request (an instrument for the timeline's
// breakdown, off in the lesson): per task kind, the summed nanoseconds of each slot and the
// task count, kProbeSlots + 1 words a kind.
// With probes on, each task also leaves its stamps (kProbeStamps words a task, after the
// blocks' marks, ProbeStamp's order).
enum ProbeSlot {
  kProbeCounter,  // waiting for the input stage's counter
  kProbeCopy,     // then for the task's own bytes (and the block's barrier)
  kProbeInputs,   // the prologue: loading the inputs other tasks wrote (LayerNorm, combine, q)
  kProbeCompute,  // the products or the attention math, from shared memory
  kProbeOutputs,  // epilogues, the MLP's down product and its adds, the stores, the barrier
  kProbeRelease,  // the counter's release (the block's writes made visible first)
  kProbeSlots
};
const char* probe_slot_name(int slot);
constexpr int kProbeSums = kTaskKinds * (kProbeSlots + 1);  // the sums, then each block's marks
// A task's stamps: thread 0's, in time order (kProbeOrdered of them): its block's task before
// was done (its count released and records written, by thread 0; with release_warp, the
// barrier after that task), it had read its descriptors, asked for its counter, saw it, started
// (its bytes in), had its inputs, had computed, had written its outputs, released its count (the
// thread that releases); then the copier's issue of the next task's copies in this task's loop
// (before its poll, or later as the options say): begun, the large ranges issued, committed;
// then the releasing thread's look at the next task's bulk copy (kStampNextCopy: bit 0 one in
// flight into its buffer, bit 1 landed just before the release, bit 2 just after) and when the
// release began (after that look; the release ends at kStampEnded).
enum ProbeStamp {
  kStampBefore,
  kStampRead,
  kStampAsked,
  kStampSeen,
  kStampStarted,
  kStampInputs,
  kStampComputed,
  kStampWritten,
  kStampEnded,
  kStampIssueFrom,
  kStampIssueLarge,
  kStampIssueDone,
  kStampNextCopy,
  kStampReleaseFrom,
  kProbeStamps
};
constexpr int kProbeOrdered = kStampEnded + 1;
constexpr int probe_words(int blocks, int tasks) {
  return kProbeSums + blocks * kProbeSlots + tasks * kProbeStamps;
}

// ---- the cluster step's records (cluster_step.cu: level 4's clusters and clusters_long) -------
// A record a block a stage, phase 0 the head stage, 1 the MLP stage, 2 the final norm; its arg
// is kClusterRecord | stage << 20 | layer << 12 | what: for a head stage the block's place
// (head * 8 + its rank in the head's cluster), for an MLP stage its first group of 8 rows of h
// (bits 0-8) and its groups less one (bits 9-10).
constexpr uint32_t kClusterRecord = 1u << 30;
constexpr uint32_t cluster_record_arg(int stage, int layer, int what) {
  return kClusterRecord | uint32_t(stage) << 20 | uint32_t(layer) << 12 | uint32_t(what);
}
// "layer 3 head 5, block 2 of 8: q, k, v rows 16-23, keys 128-191, proj outputs 192-383 (dims
// 0-31)", "layer 3 MLP rows 96-119 of h (of 3072)", "ln_f (final LayerNorm)".
std::string describe_cluster_record(uint32_t arg, int cache);

// ---- the fp64 CPU reference -----------------------------------------------------------------

// y (t x C) from x (t x C), the weights (kWeightElements) and the caches ([layer][head][s + t]
// [64]: positions below s are read, the rest are the step's own keys and values, recomputed here).
std::vector<double> reference_step(const std::vector<double>& x, const std::vector<double>& weights,
                                   const std::vector<double>& k_cache,
                                   const std::vector<double>& v_cache, int tokens, int cache);

double gelu_tanh(double v);

}  // namespace gpt2
}  // namespace fl
