// Level 4 of gpt2_decode: the whole decode step as one persistent launch, one block per SM.
//
// The host builds the step as a task list (tasks.cpp: a slice of a product, an attention head's
// split, a head's share of proj, the final norm), dealt to the blocks in stage order: four
// dependent stages a layer (qkv, attention, proj, mlp), since an MLP task adds its slice's share
// of h Wout straight into the next residual (red.add) instead of waiting for all of h. proj is
// cut by head (attention_proj.cuh): a proj task waits only for its own head's splits (a counter
// a head), combines only theirs and adds its head's share of 192 outputs into the residuals,
// whose starting values the qkv tasks write after their product (stored from inside the
// LayerNorm prologue they made every qkv task's inputs longer); with last_split_proj (an option,
// last_proj.cuh) a head's last attention split adds its share of proj instead, three stages a
// layer. The attention splits follow the
// grid (at most blocks / 12 a head: one round of tasks); a split's keys past one buffer's worth
// are read from global memory in the same predicated loads (attention.cuh). Each block runs its own
// list with one short loop, whose steps 1 and 2 run side by side:
//   1. warps 1-7 start copying the NEXT task's weight slice with its small parameters
//      (LayerNorm's gamma and beta, the bias slice), or for attention its cached keys and
//      values, into the other of two shared-memory buffers (copies.cuh: TMA bulk copies from
//      warp 1's lane 0 on sm_90, cp.async before), so bytes keep streaming while this task
//      waits and nothing after the wait goes to DRAM,
//   2. meanwhile thread 0 waits until this task's inputs are complete (a counter in global
//      memory reaches its target: the input stage's task count; it spins on acquire loads), so
//      a block still busy with the stage before (a stage's late starter) asks for its count as
//      soon as its task before is done, not after issuing the copies (~0.5 us a task),
//   3. wait for this task's own bytes (issued one task earlier), run the task's device
//      function (run_task.cuh; the same ops as the fused level: ops.cuh, attention.cuh; a proj
//      task asks for its head's splits' sums in one batch, one round trip to L2; with
//      proj_reads_rows, an option, it waits for no count but loads its head's splits' flagged
//      rows until every word carries its layer's flag, and the splits release nothing; with
//      qkv_words, an option, an attention split waits for no count either but loads its head's
//      flagged q (and new k, v) words as the qkv tasks write them, and proj's thread 0 waits for
//      qkv's count inside the task while warps 1-7 load the rows),
//   4. bump its counter (one red.release: the block's writes are visible before the count is;
//      counters.cuh), and record the task (phases.h) and, when a measurement asks, where its
//      time went.
// At one token the lesson's form runs an instance of the kernel compiled for it
// (MegakernelOptions::one_token_kernel): t = 1 and every option a constant, so the loops over
// up to 16 tokens and the other forms' branches are not in its code (about a third of the other
// instance's instructions, two thirds of its registers): each task's phases are shorter, the
// copies and the round trips unchanged. Its qkv and MLP products take three rows a warp at once
// (kOneTokenRowsAtOnce), so a slice of 24 rows is one pass of the eight warps, not two.
// Its residual after each MLP is spread out (residual_spread:
// a 128-byte line a 32-byte sector), so the MLP's 128 x 192 red.adds a layer land on 96 lines of
// L2, not 24, and the MLP's release, which waits for them, is shorter.
// Bulk copies take no load-queue slots, so a task's own loads (its critical path) do not queue
// behind the next task's weights as cp.async's 16-byte copies did. run_task is forced inline:
// as a call it left the kernel a 544-byte stack frame in local memory and every task ~1.7x
// slower (keep `ptxas -v` at no spills).
// Options measured one at a time and left off (docs/PERFORMANCE.md has what each gave): head
// waits, relaxed poll, L2 prefetch ahead, copies after the inputs or after the task (or all but
// the MLP's), head combine, skip own poll, residual copies, the copy thread, attention and proj
// fused, wide rows, proj apart, early copies, the task window, splits capped at one buffer or
// in two rounds, the release by warp 2, the copies before the poll, proj by rows, the residuals'
// starts in qkv's prologue, a descriptor ring (thread 0's copy of a later descriptor in flight
// made each release's fence wait for it), attention apart from qkv (apart_qkv_rows), proj in
// attention's last split (last_split_proj), the copies after the task's own wait
// (copies_after_wait, by task kind: the one-token kernel's copy-timings instance, which reads
// when the copies go at run time so that those options are timed on the one-token kernel), and
// beside proj reading rows (on in the lesson) 18- or 36-row qkv slices and 32-key splits; the
// one-token kernel's copies by cp.async from warps 1-7 instead of TMA (+21 us at a cache of 512),
// and its qkv and MLP products with their LayerNorm folded in (the row's statistics summed beside
// the products, W g and W b beside the row's loads: +16 us at a cache of 512).
// The final norm's block zeroes the counters for the next launch once its wait is over (every
// other task has released its count: MegakernelOptions::quick_tail; off, the last block out
// does). No block waits on a task later in its own list's stage order, so any number of
// co-resident blocks finishes (the partial-grid test runs on a few).
//
// Napkin math (t = 1, H100, copy roof ~3.06 TB/s): the step must read 170.1 MB of weights and
// 2 x 12 x s x 768 x 2 B of cache: 189.0 MB at s = 512 (61.8 us at the roof, 100 us at 60% of
// it) and 245.6 MB at 2K (80.4 us; 124 us at 65%). A block's share is ~1.4 MB at s = 512, ~29 KB
// a stage of 48 on average (an MLP slice 72 KB): at 1/132 of the roof, 23 GB/s an SM, a 72 KB
// slice takes ~3 us to arrive, so the copies must run a task or more ahead of the chain. The
// chain itself is 48 stages of L2 round trips (the count's release, the acquire that sees it,
// the inputs' loads, ~0.5-0.7 us each): 3-4 round trips a stage is ~2 us, 100 us a step. At
// 4K a split holds 373 keys (320 of them in the 80 KB buffer, 53 from DRAM), at 8K 745 (425).
// proj by head: 48 tasks a layer, each 24 KB of Wproj (regrouped: one contiguous run) and 9 x
// 66 floats of its head's sums at s = 512 (a row slice of proj read all 108 splits', 29 KB).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/gpt2_decode/copies.cuh"
#include "kernels/gpt2_decode/counters.cuh"
#include "kernels/gpt2_decode/launch.h"
#include "kernels/gpt2_decode/probes.cuh"
#include "kernels/gpt2_decode/run_task.cuh"
#include "kernels/phases.cuh"

namespace fl {
namespace gpt2 {
namespace {

constexpr int kWorkBytes = kActFloats * 4;  // activations or attention scores (48 KB)
// With task_window, the task descriptors a block keeps in shared memory: its list's tasks
// [r, r + kWindow) once task r (r - begin a multiple of kWindow / 2) has started.
constexpr int kWindow = 32;
constexpr int kSumsBytes = kSumsFloats * 4;  // a chunk's sums before their epilogues

// When a block starts copying its next task's bytes (megakernel's loop says which applies).
enum class NextCopies { none, before_wait, after_inputs, after_attention, after_task };

// kOneToken: the instance for the lesson's form at one token (MegakernelOptions::
// one_token_kernel): t = 1, the options the kernel reads (but quick_tail) at their lesson
// values, and the flags of the other forms' tasks cleared, all constants in its code.
// kCopyTimings (with kOneToken): the options that say when the copies go read as given
// (runs_one_token_copy_timings), so that they are measured on the one-token instance.
// kRowsAtOnce: the qkv and MLP products' rows a warp at a time (kOneTokenRowsAtOnce; 0 in the
// other instance: linear_slice's choice).
template <bool kOneToken, bool kCopyTimings = false, int kRowsAtOnce = 0>
__global__ void __launch_bounds__(kThreads, 1)
    megakernel(DecodeArgs a, const DecodeTask* tasks, const int* block_begin, unsigned* counters,
               int counter_count, int buffer_bytes, MegakernelOptions options, PhaseSink phases) {
  if (kOneToken) {  // (the parameters changed in place: the other instance reads them as given)
    const MegakernelOptions given = options;
    options = MegakernelOptions{};
    options.quick_tail = given.quick_tail;
    if (kCopyTimings) {
      options.l2_ahead = given.l2_ahead, options.copies_after_wait = given.copies_after_wait;
      options.copies_after_task = given.copies_after_task;
      options.copies_after_task_but_mlp = given.copies_after_task_but_mlp;
      options.copies_after_inputs = given.copies_after_inputs;
    }
    a.tokens = 1, a.residual_copies = 1, a.two_residuals = true;
    a.branch_free_keys = kBranchFreeKeys;
  }
  // The flags a task of the lesson's form may carry (kOneToken).
  constexpr uint8_t kOneTokenFlags =
      kInitsResidual | kBumpsHead | kHeadProj | kProjectsLast | kPrefetchesProj;
  extern __shared__ __align__(16) char smem[];
  __shared__ uint64_t landed[2];  // a buffer's TMA bytes are in (bulk copies)
  // Task k at (k - begin) mod kWindow; raw storage, since DecodeTask has member initializers.
  __shared__ __align__(16) unsigned char window_bytes[kWindow * sizeof(DecodeTask)];
  DecodeTask* window = reinterpret_cast<DecodeTask*>(window_bytes);
  // The loop's stamps of a task (model.h's ProbeStamp: thread 0's, the copier's), kept here
  // rather than in registers across the task; a pair, by the task's parity, so that the thread
  // that records task i reads its own while thread 0 stamps task i + 1 (release_warp).
  __shared__ uint64_t stamps[2][kProbeStamps];
  float* work = reinterpret_cast<float*>(smem);
  float* sums = reinterpret_cast<float*>(smem + kWorkBytes);
  char* buffers[2] = {smem + kWorkBytes + kSumsBytes,
                      smem + kWorkBytes + kSumsBytes + buffer_bytes};
  const bool bulk = kBulkBuild && options.bulk_copies;
  const int ahead = options.l2_ahead, lane = threadIdx.x & 31;
  const bool prefetcher = ahead > 0 && threadIdx.x / 32 == 1;  // warp 1 asks L2
  if (bulk && threadIdx.x == 0) {
    hopper::barrier_init(&landed[0], 1);
    hopper::barrier_init(&landed[1], 1);
    hopper::barrier_init_fence();
  }
  const int begin = block_begin[blockIdx.x], end = block_begin[blockIdx.x + 1];
  const bool windowed = options.task_window;
  for (int k = threadIdx.x; windowed && k < kWindow && begin + k < end; k += kThreads)
    window[k] = tasks[begin + k];
  __syncthreads();
  auto task_at = [&](int k) { return windowed ? window[(k - begin) % kWindow] : tasks[k]; };
  // poll_first: warp 0 issues none of the copies (warp 1's lane 0 the TMA ones); release_warp:
  // warp 2's lane 0 releases the counts and records the tasks.
  const bool poll_first = options.poll_first, probing = a.probes != nullptr;
  const int copier = poll_first ? 32 : options.copy_thread, first_copier = poll_first ? 32 : 0;
  const int leader = options.release_warp && !options.skip_own_poll ? 64 : 0;
  auto issue = [&](const DecodeTask& t, int b, CopyPart part, uint64_t* marks) {  // into buffer b
    issue_copies(a, t, buffers[b], buffer_bytes, bulk, &landed[b], copier, part, first_copier,
                 marks);
  };
  bool large_in_flight = false;  // the next task's large ranges were issued early
  // copies_after_wait: the large ranges of a task of those kinds once its wait is over (thread
  // 0), its small parameters before the wait (below); the tasks after the first asked into L2
  // from the start, and only those. The copy-timings instance only (in the other one it cost
  // spills: 255 registers); not with early copies.
  const unsigned after_kinds =
      kCopyTimings && !options.early_copies ? unsigned(options.copies_after_wait) : 0u;
  auto after_wait_of = [&](int k) { return ((after_kinds >> task_at(k).kind) & 1u) != 0; };
  auto prefetch = [&](int k) {
    if (after_kinds == 0 || after_wait_of(k)) prefetch_task_l2(a, tasks[k], buffer_bytes, lane);
  };
  if (begin < end && !after_wait_of(begin)) issue(task_at(begin), 0, kCopyAll, nullptr);
  for (int k = begin + (after_kinds ? 1 : 2); prefetcher && k <= begin + ahead && k < end; ++k)
    prefetch(k);
  unsigned known[2] = {kNoCounter, 0};  // thread 0: a counter and a count it is known to hold
  unsigned parity = 0;                  // bit b: the phase of buffer b's next wait (bulk)
  if (threadIdx.x == 0) stamps[0][kStampBefore] = phase_clock();
  int cur = 0;  // the buffer of the running task's bytes
  for (int i = begin; i < end; ++i) {
    uint64_t* st = stamps[(i - begin) & 1];
    DecodeTask task = task_at(i);
    if (kOneToken) task.flags &= kOneTokenFlags;
    // Where and when the next task's bytes go: the other buffer, before this task's wait (the
    // lesson's form; the options and fused attention tasks as the header says).
    const bool fused = task.flags & kProjects, has_next = i + 1 < end;
    const bool next_fused = !kOneToken && has_next && (task_at(i + 1).flags & kProjects);
    const int next = fused || next_fused ? 0 : cur ^ 1;
    const bool next_mlp = has_next && task_at(i + 1).kind == uint8_t(TaskKind::mlp);
    const bool after_task =
        options.copies_after_task || (options.copies_after_task_but_mlp && !next_mlp);
    const bool after_wait = after_kinds != 0 && after_wait_of(i);
    const bool next_after_wait = after_kinds != 0 && has_next && after_wait_of(i + 1);
    const NextCopies when = !has_next || next_after_wait  ? NextCopies::none
                            : next_fused || after_task    ? NextCopies::after_task
                            : fused                       ? NextCopies::after_attention
                            : options.copies_after_inputs ? NextCopies::after_inputs
                                                          : NextCopies::before_wait;
    auto issue_next = [&](NextCopies at) {
      if (when == at)
        issue(task_at(i + 1), next, large_in_flight ? kCopySmall : kCopyAll,
              probing && at == NextCopies::before_wait ? st + kStampIssueFrom : nullptr);
    };
    // Early copies (an option, bulk copies only): the task after next, into this task's buffer
    // once this task has read its weights, where both it and the next one run the plain way.
    const bool may_early = bulk && options.early_copies && when == NextCopies::before_wait &&
                           i + 2 < end && !(task_at(i + 2).flags & kProjects);
    bool early = false;
    auto issue_early = [&] {
      if (may_early && clear_of_extras(a, task_at(i + 2), buffer_bytes)) {
        issue(task_at(i + 2), cur, kCopyLarge, nullptr);
        early = true;
      }
    };
    if (probing && threadIdx.x == 0) st[kStampRead] = phase_clock();
    if (probing && threadIdx.x == copier && when != NextCopies::before_wait)
      st[kStampIssueFrom] = st[kStampIssueLarge] = st[kStampIssueDone] = phase_clock();
    // (this task's small parameters first: the next task's group stays the newest)
    if (after_wait) issue(task, cur, kCopySmall, nullptr);  // (threads first_copier on)
    if (poll_first && threadIdx.x < 32) {
      if (when == NextCopies::before_wait) cp_async_commit();  // (empty: one group a task)
    } else {
      issue_next(NextCopies::before_wait);
    }
    if (prefetcher && i + 1 + ahead < end) prefetch(i + 1 + ahead);
    if (threadIdx.x == 0) st[kStampAsked] = phase_clock();
    const bool known_done = task.wait_counter == known[0] && known[1] >= task.wait_target;
    // (with qkv words a proj task waits for its count inside the task, beside its rows' loads)
    const bool in_task = a.qkv_words != nullptr && task.kind == uint8_t(TaskKind::proj);
    if (threadIdx.x == 0 && task.wait_counter != kNoCounter && !known_done && !in_task) {
      wait_count(counters + task.wait_counter, task.wait_target, options.relaxed_poll);
      known[0] = task.wait_counter, known[1] = task.wait_target;  // (counts only grow)
    }
    if (threadIdx.x == 0) st[kStampSeen] = phase_clock();
    if (after_wait) {  // this task's large ranges, now (from L2 where l2_ahead asked them)
      if (!bulk) __syncthreads();  // (every thread's cp.async: after thread 0's wait)
      issue_copies(a, task, buffers[cur], buffer_bytes, bulk, &landed[cur], 0, kCopyLarge);
      if (!bulk) cp_async_commit();
    }
    if (when == NextCopies::before_wait && (bulk || !after_wait))
      cp_async_wait_all_but_newest();  // the next task's group is the newest
    else
      cp_async_wait_all();
    if (bulk) hopper::wait(&landed[cur], (parity >> cur) & 1u);
    parity ^= 1u << cur;
    __syncthreads();
    if (threadIdx.x == 0) st[kStampStarted] = phase_clock();
    // The window's next half, by cp.async in the next copies' group (in by the task after next;
    // read no sooner than kWindow / 2 - 2 tasks on): no task read waits on L2 after the poll.
    const int half = kWindow / 2, at = i + half + static_cast<int>(threadIdx.x);
    if (windowed && i > begin && (i - begin) % half == 0 && threadIdx.x < half && at < end)
      cp_async16(&window[(at - begin) % kWindow], &tasks[at]);
    // quick_tail: the final norm's block zeroes every counter for the next launch (its wait
    // saw the last MLP stage complete: every other task has released its count and read its
    // last one).
    const bool last_task = options.quick_tail && task.kind == uint8_t(TaskKind::final_norm);
    for (int c = threadIdx.x; last_task && c <= counter_count; c += kThreads) counters[c] = 0;
    const bool counts = run_task<kOneToken, kRowsAtOnce>(
        a, task, buffers[cur], buffer_bytes, work, sums, counters, options,
        [&] { issue_next(NextCopies::after_inputs); },
        [&] { issue_next(NextCopies::after_attention); }, issue_early);
    __syncthreads();  // the outputs are written and the task's buffers free for the next copies
    const uint64_t written = phase_clock();
    if (threadIdx.x == leader) {
      // (probes: the next task's bulk copy, in flight unless it goes after this task or none)
      const bool copying = bulk && when != NextCopies::none && when != NextCopies::after_task;
      const uint64_t* next_bar = copying ? &landed[next] : nullptr;
      probe_next_copy(a, st, next_bar, (parity >> next) & 1u, false);
      if (counts && !last_task) count_done(task, a.splits, counters, options.skip_own_poll, known);
      const uint64_t ended = phase_clock();
      probe_next_copy(a, st, next_bar, (parity >> next) & 1u, true);
      const uint64_t started = st[kStampStarted];
      phase_record(phases, task.kind, started, ended, static_cast<uint32_t>(i),
                   static_cast<uint32_t>(started - st[kStampAsked]));
      probe_task(a, task.kind, i, st, written, ended);
    }
    // (after the instruments: their own time stays out of the next task's)
    if (threadIdx.x == 0) stamps[(i + 1 - begin) & 1][kStampBefore] = phase_clock();
    issue_next(NextCopies::after_task);  // (thread 0: after the count's release)
    cur = next;
    large_in_flight = early;
  }
  // The last block out resets every counter (none is read after its block's last wait; the
  // barrier orders warp 2's last release, release_warp, before the block's count); with
  // quick_tail the final norm's block did.
  if (options.quick_tail) return;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(counters + counter_count, 1u) == gridDim.x - 1) {
      for (int c = 0; c <= counter_count; ++c) counters[c] = 0;
      __threadfence();
    }
  }
}

// The one-token kernel's rows a warp at a time: kOneTokenRowsAtOnce unless
// FL_DECODE_ONE_TOKEN_ROWS says 2 or 3 (a measurement of the other form on the same build; read
// at each launch, so that a test may time both forms in one process).
int one_token_rows_at_once() {
  const char* env = std::getenv("FL_DECODE_ONE_TOKEN_ROWS");
  if (env != nullptr && (std::strcmp(env, "2") == 0 || std::strcmp(env, "3") == 0))
    return env[0] - '0';
  return kOneTokenRowsAtOnce;
}

}  // namespace

Status megakernel_limits(int* weight_buffer_bytes, int* blocks) {
  int device = 0, optin = 0, sms = 0;
  FL_CUDA_TRY(cudaGetDevice(&device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  FL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  static_assert(kWorkBytes + kSumsBytes + 1024 == kMegakernelFixedSharedBytes, "model.h's count");
  const int buffer = weight_buffer_bytes_for(optin);
  if (buffer == 0) {
    return Status::Error(
        "the megakernel needs " + std::to_string(kWorkBytes + kSumsBytes + 2 * kF * 2) +
        " bytes of shared memory per block; this GPU offers " + std::to_string(optin));
  }
  *weight_buffer_bytes = buffer;
  *blocks = sms;
  return Status::Ok();
}

Status launch_megakernel(const DecodeArgs& a, const MegakernelPlan& plan, cudaStream_t s) {
  if (a.w_out_t == nullptr || a.x_mlp == nullptr)
    return Status::Error("the megakernel needs Wout transposed and its residual buffer");
  const int smem = kWorkBytes + kSumsBytes + 2 * plan.weight_buffer_bytes;
  // The one-token instance where the step is the lesson's form (the list's two residuals and
  // proj by head included) at one token; its copy-timings instance where only when the
  // copies go differs from it.
  const bool lesson_args =
      a.two_residuals && a.residual_copies == 1 && a.branch_free_keys == kBranchFreeKeys;
  const bool one = runs_one_token_kernel(plan.options, a.tokens) && lesson_args;
  const bool timings = runs_one_token_copy_timings(plan.options, a.tokens) && lesson_args;
  // (2 rows a warp is the instance with linear_slice's own choice, 0)
  constexpr int kRows = kOneTokenRowsAtOnce == 2 ? 0 : kOneTokenRowsAtOnce;
  constexpr int kOtherRows = kRows == 0 ? 3 : 0;
  const bool other_rows = one_token_rows_at_once() != kOneTokenRowsAtOnce;
  auto kernel = one && !other_rows ? megakernel<true, false, kRows>
                : one              ? megakernel<true, false, kOtherRows>
                : timings          ? megakernel<true, true, kRows>
                                   : megakernel<false, false>;
  DecodeArgs args = a;     // the residual spread out in the one-token kernel only
  if (!one && !timings) {  // (and the splits' rows but where proj reads them)
    args.residual_spread = 1;
    if (!plan.options.proj_reads_rows || plan.options.last_split_proj != 0) args.rows = nullptr;
  }
  FL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kernel<<<plan.blocks, kThreads, smem, s>>>(args, plan.tasks, plan.block_begin, plan.counters,
                                             plan.counter_count, plan.weight_buffer_bytes,
                                             plan.options, plan.phases);
  FL_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpt2
}  // namespace fl
