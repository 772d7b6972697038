// The megakernel's options (lesson 11, gpt2_decode; model.h has the shapes and the task list):
// how level 4 moves a task's bytes, what its tasks wait for and how a layer's stages are cut,
// each at the lesson's value, with what the others measured; and the lesson's constants that the
// task list (model.h's TaskListShape) shares with them. Plain C++ (no CUDA header), as model.h.
#pragma once

namespace fl {
namespace gpt2 {

constexpr int kMinSplitKeys = 64;  // the lesson's floor on keys per attention split
// Attention's loads predicated in the lesson (levels 1-3, and the megakernel's default:
// MegakernelOptions::branch_free_keys).
constexpr bool kBranchFreeKeys = true;

// Rows a warp of the one-token kernel's qkv and MLP products holds at once (MegakernelOptions::
// one_token_kernel; linear_slice's kRowsAtOnce): 3, so that a slice of 24 rows (the lesson's
// qkv slices and MLP slices at 132 blocks) is one pass of the eight warps, not two of two rows
// (the second with a row of zeros). 2: linear_slice's own choice, as the other instance runs.
// The environment's FL_DECODE_ONE_TOKEN_ROWS=2 or 3 picks the other compiled instance for a
// measurement (host side: the kernel has no branch on it). 3 in the lesson (H100, 2026-11-27
// 18:30 UTC, one build, three rounds): the step 182.4-182.6 -> 176.9-177.1 us at a cache of 512,
// 214.4-214.7 -> 208.4-208.6 at 2K; the qkv and MLP tasks' compute 0.89 / 0.90 -> 0.62 us.
constexpr int kOneTokenRowsAtOnce = 3;

// Rows of the lesson's qkv slices (MegakernelOptions::qkv_rows).
constexpr int kLessonQkvRows = 24;
// Rows of the lesson's qkv slices where attention goes apart (MegakernelOptions::
// apart_qkv_rows; 0: off).
constexpr int kLessonApartQkvRows = 0;
// The one-token kernel's residual spread (MegakernelOptions::residual_spread).
constexpr int kLessonResidualSpread = 4;
// proj by head reads its splits' flagged rows, no count between them (MegakernelOptions::
// proj_reads_rows).
constexpr bool kLessonProjReadsRows = true;
// attention reads q and the step's new keys and values as flagged words, no count between qkv
// and attention (MegakernelOptions::qkv_words).
constexpr bool kLessonQkvWords = true;

// How the megakernel moves a task's bytes and what its attention tasks wait for. The lesson runs
// the defaults (bulk copies and the batched combine); the others stay as options so that each can
// be measured against the form before it on the same build (Gpt2DecodeGpu.MegakernelVariants;
// docs/PERFORMANCE.md has what they gave).
struct MegakernelOptions {
  // sm_90: a task's weights (or cached keys and values) come as one or two TMA bulk copies that
  // one thread issues, counted on an mbarrier; the load queue stays free for the running task's
  // own reads. false, or below sm_90: 16-byte cp.async from every thread. (In the chain's
  // skeleton, stage_wait_bench, a bulk copy in flight while a block releases its count made the
  // release's fence 1.18 us a stage, against 0.39 with cp.async: the skeleton 3.34 against 2.86
  // us a stage, H100, 2026-11-27; the lesson's step was faster with bulk copies, 2026-11-26.)
  bool bulk_copies = true;
  // sm_90: the tasks this many places ahead in a block's list are asked into L2 (a bulk
  // prefetch, one instruction a range) so DRAM streams ahead of the dependency chain; 0: off.
  // Measured and left off: on the one-token instance (H100, 2026-11-27) 1 / 2 ahead took the
  // step at a cache of 512 from 211.9 to 235.0 / 233.2 us (its tasks' inputs and compute got
  // longer).
  int l2_ahead = 0;
  // The tasks of these kinds (bit k: TaskKind k; kAllTaskKinds every one) have their large
  // ranges (weights, or cached keys and values) copied into shared memory once their wait is
  // over (thread 0 issues the bulk copies right after the count it polls is seen), from L2
  // where l2_ahead asked them, instead of during the task before: no such bytes land in the SM
  // while that task computes, releases its count and polls (the small parameters still come
  // before the wait). The copy's L2 round trip is then on the chain. Measured and left off
  // (H100, 2026-11-27, cache 512 / 2K): every kind with L2 1 ahead 262.2 / 318.4 us against
  // the lesson's 211.9 / 241.9 (the releases got shorter, MLP 0.92 -> 0.60 us, but an MLP
  // slice's copy after its wait took 2.1 us), attention only 230.4 / 276.6 (no L2), all but the
  // MLP's 247.6 / 292.3; in the chain's skeleton (stage_wait_bench) 3.44 us a stage against 2.88
  // (cp.async one ahead) and 3.33 (TMA one ahead). 0: off. The one-token
  // copy-timings instance only (runs_one_token_copy_timings; the other ignores it); not with
  // early_copies.
  int copies_after_wait = 0;
  bool head_waits = false;  // TaskListShape::head_waits
  // proj's split combine asks for every split's max, sum and partial o, and the task's residual
  // slice, in one batch (a half-warp an item, 16-byte loads) instead of the maxima first and
  // then four splits of o at a time.
  bool batched_combine = true;
  // The next task's copies start once the running task's inputs are in shared memory instead
  // of before its wait (meant to keep the bulk copies off the inputs' way into the SM; it made
  // the step slower: the copies then land while the task computes and releases its count).
  bool copies_after_inputs = false;
  // Attention in one pass (attention.cuh: each warp's running max, sum and P V, one barrier)
  // instead of three (scores, softmax, P V). Levels 1-3 run the one-pass form.
  bool one_pass_attention = true;
  // The dependency wait spins on relaxed loads and orders the task's reads after the count
  // with one acquire fence, instead of an acquire load each spin. The fence is a MEMBAR.ALL.GPU
  // (sm_90 SASS), the acquire load a strong load and an L1 invalidate: in the skeleton of the
  // chain (tests/gpu/stage_wait_bench.cu, H100, 2026-11-27) it took 0.37 us a stage longer. No
  // other arrival or wait form measured there (atom, fences, sleeps, counts a line apart, a tree
  // of counters, Hopper clusters meeting first) was faster than release_add and wait_count.
  bool relaxed_poll = false;
  // Fewest keys in an attention split (attention_splits): at 64, a cache of 512 gets 9 splits
  // a head (108 tasks on 132 blocks); at 32 it gets 11 (132 tasks, shorter ones). Levels 1-3
  // run the same splits.
  int min_split_keys = kMinSplitKeys;
  // The stage cuts below were measured and left off (docs/PERFORMANCE.md): each made the step
  // slower. The last split of each head to finish (a ticket counter says which) combines the
  // head's splits into its 64 outputs, so proj reads 768 values, not every split's sums
  // (kCombinesHead); proj got shorter, but attention longer by more (the ticket's and the
  // merge's round trips on its last split).
  bool head_combine = false;
  // The block whose count completes a stage knows it (an atom that returns the count instead of
  // a red) and starts its next task on that stage without polling the counter. The stage's
  // first task then starts sooner, not its last-ending one; every release takes longer.
  bool skip_own_poll = false;
  // The MLP's adds go into this many copies of the next residual (task i into copy i mod n;
  // the readers add the copies up), so fewer tasks add into the same floats
  // (1..kMaxResidualCopies). The MLP's release got shorter,
  // LN1's and proj's loads longer (measured with proj by rows).
  int residual_copies = 1;
  // Which thread issues the bulk copies: 0 is the thread that releases the counts; another
  // (a lane of warp 1) was to keep the release from waiting on them with copies_after_inputs.
  // It changed nothing: the copies landing during a task slow its compute and its release
  // whichever thread issued them.
  int copy_thread = 0;
  // The options below were measured against the lesson's form and left off: each made the step
  // slower or changed nothing (docs/PERFORMANCE.md has the figures and what the timeline showed).
  // Attention and proj as one stage where a head's cached keys and values fit a block's two
  // weight buffers (kProjects): kProjParts tasks a head, each the whole head's softmax and
  // its kProjRows outputs of proj added into the residual, so a layer is three stages, not four.
  // A whole head's softmax on one SM took longer than the stage it saves.
  bool fused_proj = false;
  // linear_slice holds up to four rows a warp (not two) where a slice has more than 16 rows,
  // so a slice of 18-32 rows is one pass.
  bool wide_rows = false;
  // proj in kProjApartTasks slices on the blocks that hold no attention task of the layer (at
  // caches where heads x splits leaves that many free), so no proj task waits for its block to
  // finish an attention task first. proj's last task started sooner, but ran longer.
  bool proj_apart = false;
  // sm_90: the task after next starts its weight copy (TMA) as soon as the running task has
  // read its weights (qkv and proj after their products, attention after its keys), not once
  // the task before the next has ended; its small parameters follow as before. The copies then
  // land while the task writes its outputs, which took longer.
  bool early_copies = false;
  // The next task's copies start once the running task is done (its count released), so no
  // copy lands while a task runs; they land while the block waits for its next task's count.
  // proj's stage got shorter, the MLP's longer (its 72 KB slices then arrive late). On the
  // one-token instance too (H100, 2026-11-27): 246.1 us at a cache of 512 against 211.9 (with
  // L2 2 ahead 249.0), though in the chain's skeleton a TMA copy asked after the release was
  // 17% faster than one ahead (2.76 against 3.33 us a stage, L2 2 ahead).
  bool copies_after_task = false;
  // copies_after_task where the next task is not an MLP slice (whose 72 KB must start before
  // the wait to arrive in time): its copies still start before the running task's wait. The
  // MLP's stage got shorter, the other three longer (their bytes then arrive late).
  bool copies_after_task_but_mlp = false;
  // Attention's key and value loads predicated instead of branched (attention.cuh's
  // key_pair_predicated): a batch's sixteen loads issue back to back before any is used. On in
  // the lesson; attention's compute got shorter (not as short as the loads alone predicted).
  bool branch_free_keys = kBranchFreeKeys;
  // The attention splits follow the grid: at most blocks / kHeads a head (one round of tasks),
  // however long a split gets; the keys of a split past one buffer's worth are read from global
  // memory (attention.cuh's branch-free loads) instead of more splits (off: at most
  // kMaxSplitLength keys a split, so a cache of 4K took 13 splits a head, two rounds of tasks
  // on 132 blocks). Levels 1-3 keep kMaxSplitLength either way. The one-pass attention only.
  bool grid_splits = true;
  // The rounds of attention tasks the splits may fill on the grid (1..4): at 2, up to
  // 2 x blocks / kHeads splits a head, so a split at 8K holds 373 keys, not 745 (most of them
  // then in shared memory), at the price of a second round of tasks.
  int split_rounds = 1;
  // Each block keeps its next task descriptors in shared memory (kWindow of them, the next half
  // copied by cp.async while a task runs) instead of reading each from global memory when its
  // turn comes (meant to take an L2 round trip out of the loop between a task's end and the
  // next one's wait, on the path of a block still busy with the stage before). That stretch
  // stayed ~1.0 us a task: the read was not what it spent; the step within the GPU's drift.
  // Beside poll first and proj by head it made the step slower at every cache.
  bool task_window = false;
  // Thread 0 reads its task and asks for the count as soon as its block's task before is done;
  // the next task's copies come from the other warps meanwhile (the TMA copies from lane 0 of
  // warp 1, the small parameters from warps 1 on). On in the lesson: off, thread 0 issued them
  // before its poll, ~0.5 us a task on the path of a block still busy with the stage before.
  bool poll_first = true;
  // The count's release and the task's records by lane 0 of warp 2, so that thread 0 goes on to
  // the next task's poll while the release's fence drains (not with skip_own_poll). Faster than
  // thread 0 issuing the copies, slower than poll first and with it: every task's inputs got
  // longer (the release's traffic lands on them).
  bool release_warp = false;
  // proj cut along its input by head instead of along its output rows (kHeadProj): 48 tasks a
  // layer, each one head's 64 values times the head's 64 columns of Wproj for a quarter of the
  // outputs (24 KB, Wproj regrouped as fused_proj has it), added into the residuals with red.add
  // (their starting values written by the qkv tasks after their product). A proj task then
  // waits only for its own head's splits and combines only theirs (9 x 66 floats at a cache of
  // 512, not 108 x 66), where a row slice waits for every split of the stage and combines them
  // all. Not with head waits (proj then goes by rows: tasks.cpp says why).
  bool head_proj = true;
  // The step's end (on in the lesson): the final norm's gamma and beta copied into shared
  // memory with its task's small parameters (not read from DRAM after its wait), its count not
  // released (nothing waits on it), and the counters zeroed for the next launch by the final
  // norm's block right after its wait (every other task has released its count by then, and
  // none reads one again) instead of by the last block out, after an atomic round trip, one
  // store at a time.
  bool quick_tail = true;
  // Rows of a qkv slice (a multiple of 6 up to kMaxSliceRows; 0: about one slice a block, 18
  // rows at 132 blocks). The lesson's 24 (96 tasks at 132 blocks) leave blocks free of qkv for
  // the attention tasks after them.
  int qkv_rows = kLessonQkvRows;
  // Attention apart from qkv: qkv in slices of this many rows (a multiple of 6 up to
  // kMaxSliceRows: 48 rows are 48 tasks) and the attention splits on the blocks those leave
  // free, (blocks - qkv tasks) / kHeads a head (7 at 132 blocks), so that no attention task
  // waits for its block to finish a qkv task first; proj's tasks then follow on the qkv blocks.
  // Only where a split's keys then fit a buffer (kMaxSplitLength); elsewhere qkv_rows and the
  // grid splits. 0: off. Measured and left off: attention's stage got shorter, but a longer
  // split takes two passes of the warps over its keys, the longer qkv slices took longer, and the
  // MLP's release grew (its slices then start together).
  int apart_qkv_rows = kLessonApartQkvRows;
  // The one-token kernel's residual after each MLP spread out (1, 2 or 4): each 8 floats (a
  // 32-byte sector) at the start of 8 x residual_spread floats, so that at 4 the MLP's 128
  // tasks, each adding 768 values into the same residual (red.add), spread their adds over 96
  // lines of L2 instead of 24 (the readers load the same sectors). The other kernel runs 1.
  // 4 in the lesson: the MLP's release, which waits for its adds, got shorter.
  int residual_spread = kLessonResidualSpread;
  // The lesson's form at one token runs an instance of the megakernel compiled for it (on in
  // the lesson): the options the kernel reads (but quick_tail) at their lesson values and t = 1
  // are constants there, so the other forms' branches and the loops over up to 16 tokens are
  // not in its code (a third of the other instance's, with two thirds of its registers).
  bool one_token_kernel = true;
  // Proj in attention's last split (kProjectsLast; with proj by head): a head's splits take a
  // ticket, the last one combines the head and adds its share of proj into the residuals, so a
  // layer is three dependent stages (qkv, attention + proj, the MLP), not four. 1: its 96 KB of
  // Wproj read from wherever they are; 2: each split first asks L2 for its share of them; 3: as
  // 2, the splits' sums read with the ticket in one burst (split_rows.cuh; the one-token
  // kernel's, the other runs 2). The task list's, so both instances of the kernel run it. 0: off.
  // Measured and left off (1, 2, 3): the fused stage was shorter than attention's and proj's,
  // but the qkv and MLP stages longer; 3's burst took nothing off the last split.
  int last_split_proj = 0;
  // proj by head without the count between attention and proj (the task list's, so both
  // instances run it; with proj by head, not with last_split_proj): each split writes its partial
  // row (o, max, sum) as flagged 64-bit words (split_rows.cuh: the float and layer + 1 in one
  // relaxed store) and releases no count; a proj task waits for the qkv stage's count instead
  // (the residuals' starting values it adds into; by then long complete, and known to a block
  // whose task before waited for it) and loads its head's rows until every word carries its
  // layer's flag. Off the chain: the late split's release (whose fence waits for its block's next
  // copies in flight, an MLP slice's 72 KB) and proj's poll before its loads (one L2 round trip).
  // Every word is written every layer, so a word's flag is never a stale layer's. On in the
  // lesson: the step 207.5 -> 200.0 / 237.8 -> 235.8 us at a cache of 512 / 2K (H100,
  // 2026-11-27 09:33 UTC; 209.2 -> 200.6 / 239.7 -> 237.8 at 09:41), attention's stage 5.46 ->
  // 3.92 us, proj's 2.85 -> 3.46 (its last task now waits for the late split's words itself).
  bool proj_reads_rows = kLessonProjReadsRows;
  // No count between qkv and attention either (the task list's, so both instances run it; beside
  // proj reading rows, with attention in one pass and branch-free keys): each qkv task also
  // writes its q, k and v values as flagged 64-bit words (split_rows.cuh's qkv words: the float,
  // k and v rounded to bf16 as the cache holds them, and layer + 1 in one relaxed store), [head]
  // [token][q 64, k 64, v 64]; an attention split waits on no counter and loads its head's q
  // words, and the split holding the step's new positions their keys and values too, until each
  // carries its layer's flag (the new keys then come from shared memory, not from the cache the
  // same qkv tasks write). Off the chain: the last qkv task's release (its fence) and the
  // split's poll before its loads; a split waits only for its own head's qkv slices (its q in
  // 3 or 4 of the 96 24-row slices, the new keys and values in as many more each). proj still needs
  // the qkv count (the residuals' starting values it adds into): its thread 0 waits for it inside
  // the task while warps 1-7 load the rows (no poll before the task; it knew the count from its
  // split before). The qkv tasks still write q and the cache (the next steps and levels 1-3 read
  // them). Every word is rewritten every layer, so a stale flag is never the awaited one (as
  // proj_reads_rows).
  bool qkv_words = kLessonQkvWords;
};
constexpr int kMaxResidualCopies = 8;
constexpr int kAllTaskKinds = 0x1f;  // MegakernelOptions::copies_after_wait: every TaskKind
// Whether a step with these options at `tokens` tokens runs the one-token instance: every option
// the kernel reads at its lesson value, where one_token_kernel asks for it.
bool runs_one_token_kernel(const MegakernelOptions& options, int tokens);
// Whether a step with these options at `tokens` tokens runs the one-token instance that reads
// when the copies go (l2_ahead, copies_after_wait, copies_after_task, copies_after_task_but_mlp,
// copies_after_inputs) at run time: those options off the lesson's values, every other as
// runs_one_token_kernel asks. (So that they are measured against the lesson's form on the
// same instance, not the other one.)
bool runs_one_token_copy_timings(const MegakernelOptions& options, int tokens);

}  // namespace gpt2
}  // namespace fl
