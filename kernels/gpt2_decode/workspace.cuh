// The gpt2_decode workspace (lesson.cu has the lesson): the step's device buffers for one cache
// length and token count, the weights from a fixed seed (and the megakernel's Wout transposed), the
// megakernel's task list and plan, the graphs of levels 2 and 3 (captured on first use), and the
// fp64 check. Its level table is levels.cu.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kernels/gpt2_decode/hooks.h"
#include "kernels/gpt2_decode/launch.h"
#include "kernels/gpt2_decode/split_rows.cuh"
#include "kernels/level_table.h"
#include "kernels/workspace.cuh"

namespace fl {
namespace gpt2 {

constexpr uint64_t kWeightSeed = 0x6770743264656373ull;  // the weights never change
constexpr double kTolerance = 1e-2;                      // bf16 cache rows; fp32 activations

class DecodeWorkspace final : public LevelWorkspace<DecodeWorkspace> {
 public:
  DecodeWorkspace(int cache, int tokens) : cache_(cache), tokens_(tokens) {
    set_where({cache, tokens, 2}, Precision::bf16, "cached tokens");  // (level 4's variants)
  }
  static const LevelTable<DecodeWorkspace>& levels();

  Status allocate() {
    const int64_t t = tokens_, positions = cache_ + tokens_;
    const int64_t cache_elements = int64_t(kLayers) * kHeads * positions * kHeadDim;
    FL_TRY(weights_.allocate(kWeightElements * 2));
    FL_TRY(w_out_t_.allocate(int64_t(kLayers) * kF * kC * 2));
    FL_TRY(w_proj_t_.allocate(int64_t(kLayers) * kC * kC * 2));
    FL_TRY(k_cache_.allocate(cache_elements * 2));
    FL_TRY(v_cache_.allocate(cache_elements * 2));
    for (DeviceBuffer* b : {&x_in_, &x_, &q_, &y_, &xn_, &att_, &tmp_})
      FL_TRY(b->allocate(t * kC * 4));
    FL_TRY(x_mlp_.allocate(kMaxResidualCopies * t * kC * 4));  // its copies (megakernel_options.h)
    FL_TRY(qkv_.allocate(t * 3 * kC * 4));
    FL_TRY(h_.allocate(t * kF * 4));
    FL_TRY(scores_.allocate(t * kHeads * positions * 4));
    FL_TRY(check_.allocate(CheckScratch::bytes(tokens_, cache_)));
    FL_TRY(sums_.allocate(sizeof(ErrorSums)));
    int sms = 0;
    FL_TRY(megakernel_limits(&buffer_bytes_, &sms));
    FL_TRY(plan(sms));
    args_ = DecodeArgs{weights_.as<bf16>(),
                       k_cache_.as<bf16>(),
                       v_cache_.as<bf16>(),
                       x_in_.as<float>(),
                       x_.as<float>(),
                       q_.as<float>(),
                       partials_.as<float>(),
                       h_.as<float>(),
                       y_.as<float>(),
                       xn_.as<float>(),
                       qkv_.as<float>(),
                       att_.as<float>(),
                       tmp_.as<float>(),
                       scores_.as<float>(),
                       cache_,
                       tokens_,
                       fused_splits_};
    return Status::Ok();
  }

  // (Re)builds level 4's task list for `blocks` blocks, and levels 1-3's attention splits.
  Status plan(int blocks) {
    // (qkv words: with the one-pass attention's branch-free keys only)
    const bool words =
        options_.qkv_words && options_.one_pass_attention && options_.branch_free_keys;
    shape_ = TaskListShape{blocks,
                           tokens_,
                           cache_,
                           buffer_bytes_,
                           options_.head_waits,
                           options_.min_split_keys,
                           options_.head_combine,
                           options_.fused_proj && options_.residual_copies == 1,
                           options_.proj_apart,
                           options_.grid_splits && options_.one_pass_attention,
                           options_.split_rounds,
                           options_.head_proj && options_.residual_copies == 1,
                           options_.qkv_rows,
                           options_.apart_qkv_rows,
                           options_.last_split_proj,
                           options_.proj_reads_rows && options_.one_pass_attention,
                           words};
    list_ = build_decode_tasks(shape_);
    // Levels 1-3 keep at most kMaxSplitLength keys a split (their attention reads every key from
    // global memory; the cap is the megakernel's buffer's, kept so that they stay as measured).
    fused_splits_ = attention_splits(cache_ + tokens_, blocks, options_.min_split_keys);
    FL_TRY(tasks_.allocate(list_.tasks.size() * sizeof(DecodeTask)));
    FL_TRY(block_begin_.allocate(list_.block_begin.size() * sizeof(int)));
    FL_TRY(counters_.allocate((list_.counters + 1) * sizeof(unsigned)));
    const int splits = std::max(list_.splits, fused_splits_);
    FL_TRY(partials_.allocate(int64_t(tokens_) * kHeads * splits * kPartStride * 4));
    if (uses_rows()) {  // the splits' flagged rows, zeroed (split_rows.cuh)
      FL_TRY(rows_.allocate(int64_t(tokens_) * kHeads * list_.splits * kRowWords * 8));
      FL_CUDA_TRY(cudaMemset(rows_.get(), 0, rows_.bytes()));
    }
    if (list_.qkv_words) {  // q, k and v as flagged words, zeroed (split_rows.cuh)
      FL_TRY(words_.allocate(int64_t(tokens_) * kHeads * kQkvWords * 8));
      FL_CUDA_TRY(cudaMemset(words_.get(), 0, words_.bytes()));
    }
    FL_CUDA_TRY(
        cudaMemcpy(tasks_.get(), list_.tasks.data(), tasks_.bytes(), cudaMemcpyHostToDevice));
    FL_CUDA_TRY(cudaMemcpy(block_begin_.get(), list_.block_begin.data(), block_begin_.bytes(),
                           cudaMemcpyHostToDevice));
    FL_CUDA_TRY(cudaMemset(counters_.get(), 0, counters_.bytes()));
    mega_.tasks = tasks_.as<DecodeTask>();
    mega_.block_begin = block_begin_.as<int>();
    mega_.counters = counters_.as<unsigned>();
    mega_.counter_count = list_.counters;
    mega_.blocks = blocks;
    mega_.weight_buffer_bytes = buffer_bytes_;
    mega_.options = options_;
    args_.partials = partials_.as<float>();
    args_.splits = fused_splits_;  // level 4's are the task list's (run_megakernel)
    drop_graphs();                 // they hold the old pointers and splits
    return Status::Ok();
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    if (!weights_filled_) {
      FL_TRY(fill_weights(stream));
      FL_TRY(launch_transpose_w_out(weights_.as<bf16>(), w_out_t_.as<bf16>(), stream));
      FL_TRY(launch_regroup_w_proj(weights_.as<bf16>(), w_proj_t_.as<bf16>(), stream));
      weights_filled_ = true;
    }
    const int64_t cache_elements = k_cache_.bytes() / 2;
    FL_TRY(fill_uniform(x_in_.as<float>(), int64_t(tokens_) * kC, seed, -1.f, 1.f, stream));
    FL_TRY(fill_uniform(k_cache_.as<bf16>(), cache_elements, seed + 1, -2.f, 2.f, stream));
    return fill_uniform(v_cache_.as<bf16>(), cache_elements, seed + 2, -1.f, 1.f, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    const int64_t t = tokens_;
    FL_TRY(poison_elements<float>({{&y_, t * kC},
                                   {&x_, t * kC},
                                   {&x_mlp_, kMaxResidualCopies * t * kC},
                                   {&q_, t * kC},
                                   {&h_, t * kF},
                                   {&qkv_, t * 3 * kC},
                                   {&att_, t * kC},
                                   {&xn_, t * kC},
                                   {&tmp_, t * kC}},
                                  stream));
    // The step's own cache rows (positions s..s+t-1 of every layer and head) are outputs too.
    const int64_t positions = cache_ + tokens_;
    for (DeviceBuffer* c : {&k_cache_, &v_cache_}) {
      FL_CUDA_TRY(cudaMemset2DAsync(c->as<bf16>() + int64_t(cache_) * kHeadDim,
                                    positions * kHeadDim * 2, 0xFF, t * kHeadDim * 2,
                                    kLayers * kHeads, stream));
    }
    return Status::Ok();
  }

  Status check(cudaStream_t stream, CheckResult* result) override {
    double* base = check_.as<double>();
    const int64_t tc = int64_t(tokens_) * kC;
    CheckScratch c{base,          base + tc,      base + 2 * tc, base + 5 * tc,
                   base + 6 * tc, base + 10 * tc, nullptr};
    c.y = c.scores + int64_t(tokens_) * kHeads * (cache_ + tokens_);  // CheckScratch::bytes
    return run_check(
        sums_, kTolerance, stream,
        [&](ErrorSums* sums) { return check_step(args_, c, sums, stream); }, result);
  }

  // Inputs: x (t x C), the weights, the K and V caches (positions >= s are the step's outputs
  // and are not read by the reference). Output: y (t x C).
  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    std::vector<HostTensor> first, second;
    FL_TRY(
        download_tensors<float>({{"x", x_in_.as<float>(), int64_t(tokens_) * kC}}, stream, &first));
    const int64_t cache_elements = k_cache_.bytes() / 2;
    FL_TRY(download_tensors<bf16>({{"weights", weights_.as<bf16>(), kWeightElements},
                                   {"k_cache", k_cache_.as<bf16>(), cache_elements},
                                   {"v_cache", v_cache_.as<bf16>(), cache_elements}},
                                  stream, &second));
    *inputs = std::move(first);
    for (HostTensor& h : second) inputs->push_back(std::move(h));
    return download_outputs(stream, outputs);
  }
  Status download_outputs(cudaStream_t stream, std::vector<HostTensor>* outputs) override {
    return download_tensors<float>({{"y", y_.as<float>(), int64_t(tokens_) * kC}}, stream, outputs);
  }

  ~DecodeWorkspace() override { drop_graphs(); }

  // Levels 2 and 3: the chain captured once per workspace, then replayed.
  Status replay(cudaStream_t s, bool pdl) {
    cudaGraphExec_t& exec = graphs_[pdl ? 1 : 0];
    if (exec == nullptr) {
      FL_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      const Status chain = fused_chain(s, pdl);
      cudaGraph_t graph = nullptr;
      const cudaError_t ended = cudaStreamEndCapture(s, &graph);
      FL_TRY(chain);
      FL_CUDA_TRY(ended);
      const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      if (made != cudaSuccess) exec = nullptr;
      FL_CUDA_TRY(made);
    }
    FL_CUDA_TRY(cudaGraphLaunch(exec, s));
    return Status::Ok();
  }

  // Level 4's launch. With the engine's phase sink on (Workspace::set_phase_sink) every task
  // writes its record there, named by task kind; otherwise into set_phases' sink, if any.
  Status run_megakernel(cudaStream_t s) {
    MegakernelPlan plan = mega_;
    if (phase_sink().on()) {
      plan.phases = phase_sink();
      std::vector<std::string> kinds;
      for (int k = 0; k < kTaskKinds; ++k) kinds.push_back(task_kind_name(TaskKind(k)));
      declare_phases(std::move(kinds));
    }
    DecodeArgs a = args_;
    a.splits = list_.splits;
    a.x_mlp = x_mlp_.as<float>();  // level 4's residual after each MLP (device.cuh)
    a.residual_copies = options_.residual_copies;
    a.residual_spread = options_.residual_spread;  // (the one-token kernel only: launch.h)
    a.w_out_t = w_out_t_.as<bf16>();
    a.w_proj_t = w_proj_t_.as<bf16>();
    a.two_residuals = list_.fused_proj || list_.head_proj;  // proj adds into the residuals
    a.branch_free_keys = options_.branch_free_keys;
    a.rows = uses_rows() ? rows_.as<unsigned long long>() : nullptr;
    a.qkv_words = list_.qkv_words ? words_.as<unsigned long long>() : nullptr;
    a.probes = probes_;
    if (phase_sink().on() && probes_ == nullptr && std::getenv("FL_DECODE_PROBE_DUMP") != nullptr)
      return launch_and_dump_probes(a, plan, s);
    return launch_megakernel(a, plan, s);
  }

  // Level 4's cluster step (launch.h), where it runs: one new token and 12 clusters of 8 resident
  // (Status::Unsupported otherwise: the table then runs the next variant). key_passes: the kernel
  // built with the key passes (variant "clusters_long"), else the one for caches whose keys fit.
  Status run_cluster_variant(bool key_passes, cudaStream_t s) {
    if (cluster_.clusters < 0) FL_TRY(cluster_step_clusters(&cluster_.clusters));
    if (tokens_ != 1 || cluster_.clusters == 0)
      return Status::Unsupported("the cluster step needs one new token and 12 clusters of 8");
    DecodeArgs a = args_;
    a.w_out_t = w_out_t_.as<bf16>();
    a.w_proj_t = w_proj_t_.as<bf16>();
    return run_cluster_step(a, key_passes, s);
  }

  const DecodeArgs& args() const { return args_; }
  const MegakernelPlan& mega() const { return mega_; }
  const DecodeTaskList& task_list() const { return list_; }
  const TaskListShape& task_shape() const { return shape_; }
  void set_phases(const PhaseSink& sink) { mega_.phases = sink; }
  void set_probes(unsigned long long* probes) { probes_ = probes; }
  // Level 4's copy options (megakernel_options.h); the task list is rebuilt (head waits change its
  // counters).
  Status set_options(const MegakernelOptions& options) {
    options_ = options;
    return plan(mega_.blocks);
  }

 private:
  Status fill_weights(cudaStream_t stream) {
    bf16* w = weights_.as<bf16>();
    uint64_t seed = kWeightSeed;
    auto fill = [&](int64_t at, int64_t n, float lo, float hi) {
      return fill_uniform(w + at, n, seed++, lo, hi, stream);
    };
    for (int layer = 0; layer < kLayers; ++layer) {
      const int64_t L = int64_t(layer) * LayerLayout::size;
      using LL = LayerLayout;
      FL_TRY(fill(L + LL::ln1_g, kC, 0.8f, 1.2f));
      FL_TRY(fill(L + LL::ln1_b, kC, -0.1f, 0.1f));
      FL_TRY(fill(L + LL::w_qkv, 3 * kC * kC, -0.035f, 0.035f));
      FL_TRY(fill(L + LL::b_qkv, 3 * kC, -0.02f, 0.02f));
      FL_TRY(fill(L + LL::w_proj, kC * kC, -0.035f, 0.035f));
      FL_TRY(fill(L + LL::b_proj, kC, -0.02f, 0.02f));
      FL_TRY(fill(L + LL::ln2_g, kC, 0.8f, 1.2f));
      FL_TRY(fill(L + LL::ln2_b, kC, -0.1f, 0.1f));
      FL_TRY(fill(L + LL::w_fc, kF * kC, -0.035f, 0.035f));
      FL_TRY(fill(L + LL::b_fc, kF, -0.02f, 0.02f));
      FL_TRY(fill(L + LL::w_out, kC * kF, -0.035f, 0.035f));
      FL_TRY(fill(L + LL::b_out, kC, -0.02f, 0.02f));
    }
    FL_TRY(fill(kFinalLnG, kC, 0.8f, 1.2f));
    return fill(kFinalLnG + kC, kC, -0.1f, 0.1f);
  }

  // FL_DECODE_PROBE_DUMP=PREFIX (a measurement): while the engine's phase sink is on, each
  // launch runs with its probes on and writes every probe word (probe_words: the sums, the
  // blocks' marks, each task's stamps) to PREFIX-<cache>.bin, so that the pass's last launch
  // (the one whose task records are kept) leaves its tasks' stamps beside its records.
  Status launch_and_dump_probes(DecodeArgs a, const MegakernelPlan& plan, cudaStream_t s) {
    const int blocks = static_cast<int>(list_.block_begin.size()) - 1;
    const size_t words = probe_words(blocks, static_cast<int>(list_.tasks.size()));
    if (probe_dump_.bytes() != words * 8) FL_TRY(probe_dump_.allocate(words * 8));
    FL_CUDA_TRY(cudaMemsetAsync(probe_dump_.get(), 0, words * 8, s));
    a.probes = probe_dump_.as<unsigned long long>();
    FL_TRY(launch_megakernel(a, plan, s));
    return dump_words(a.probes, words, std::getenv("FL_DECODE_PROBE_DUMP"), s);
  }

  // `words` 64-bit words at `device`, once the stream is done, into PREFIX-<cache>.bin (the
  // measurements' dumps above and below).
  Status dump_words(const unsigned long long* device, size_t words, const std::string& prefix,
                    cudaStream_t s) {
    std::vector<unsigned long long> host(words);
    FL_CUDA_TRY(cudaMemcpyAsync(host.data(), device, words * 8, cudaMemcpyDeviceToHost, s));
    FL_CUDA_TRY(cudaStreamSynchronize(s));
    const std::string path = prefix + "-" + std::to_string(cache_) + ".bin";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return Status::Error("cannot write " + path);
    const size_t wrote = std::fwrite(host.data(), 8, words, f);
    std::fclose(f);
    return wrote == words ? Status::Ok() : Status::Error("short write to " + path);
  }

  // The cluster step's launch: its counts and sums zeroed once, then by the step itself; with the
  // engine's phase sink on, a record a block a stage (phases "head", "mlp", "final norm").
  Status run_cluster_step(const DecodeArgs& a, bool key_passes, cudaStream_t s) {
    if (cluster_counts_.bytes() == 0) {
      FL_TRY(cluster_counts_.allocate(kClusterStepCounts * sizeof(unsigned)));
      FL_TRY(cluster_sums_.allocate(kClusterStepSums * sizeof(float)));
      FL_CUDA_TRY(cudaMemsetAsync(cluster_counts_.get(), 0, cluster_counts_.bytes(), s));
      FL_CUDA_TRY(cudaMemsetAsync(cluster_sums_.get(), 0, cluster_sums_.bytes(), s));
    }
    ClusterStepPlan plan;
    plan.counts = cluster_counts_.as<unsigned>();
    plan.sums = cluster_sums_.as<float>();
    plan.clusters = cluster_.clusters;
    // FL_CLUSTER_CLUSTERS=N (a test's): fewer clusters than fit, at least the 12 heads'.
    if (const char* env = std::getenv("FL_CLUSTER_CLUSTERS")) {
      const int n = std::atoi(env);
      if (n >= kHeads && n < plan.clusters) plan.clusters = n;
    }
    if (phase_sink().on()) plan.phases = phase_sink();
    const char* prefix = std::getenv("FL_DECODE_CLUSTER_STAMPS");
    if (prefix == nullptr) return launch_cluster_step(a, plan, key_passes, s);
    // FL_DECODE_CLUSTER_STAMPS=PREFIX (a measurement): every launch leaves its blocks' stage
    // times in PREFIX-<cache>.bin (the last launch's stay; scripts/cluster-stamps.py reads them).
    const size_t words = size_t(plan.clusters) * 8 * kClusterStepStamps;  // (the blocks run)
    if (cluster_stamps_.bytes() != words * 8) FL_TRY(cluster_stamps_.allocate(words * 8));
    plan.stamps = cluster_stamps_.as<unsigned long long>();
    FL_TRY(launch_cluster_step(a, plan, key_passes, s));
    return dump_words(plan.stamps, words, prefix, s);
  }

  // Levels 1 and 3's chain of 61 launches (with or without programmatic dependent launch).
  Status fused_chain(cudaStream_t s, bool pdl) {
    for (int layer = 0; layer < kLayers; ++layer) {
      FL_TRY(launch_fused(args_, layer, Matrix::qkv, s, pdl));
      FL_TRY(launch_attention(args_, layer, s, pdl));
      FL_TRY(launch_fused(args_, layer, Matrix::proj, s, pdl));
      FL_TRY(launch_fused(args_, layer, Matrix::fc, s, pdl));
      FL_TRY(launch_fused(args_, layer, Matrix::out, s, pdl));
    }
    return launch_layernorm(args_, 0, Norm::final_norm, s, pdl);
  }

  void drop_graphs() {
    for (cudaGraphExec_t& g : graphs_) {
      if (g != nullptr) cudaGraphExecDestroy(g);
      g = nullptr;
    }
  }

  int cache_, tokens_;
  int buffer_bytes_ = 0;
  int fused_splits_ = 1;  // levels 1-3's attention splits (the megakernel's: list_.splits)
  bool weights_filled_ = false;
  DeviceBuffer weights_, w_out_t_, w_proj_t_, k_cache_, v_cache_, x_in_, x_, x_mlp_, q_, y_, xn_,
      att_, tmp_, qkv_, h_;
  DeviceBuffer scores_;
  DeviceBuffer partials_, rows_, words_, check_, sums_, tasks_, block_begin_, counters_;
  bool uses_rows() const {  // last_split_proj 3, or proj reads rows (megakernel_options.h)
    return (list_.last_split_proj && options_.last_split_proj >= 3 &&
            options_.one_pass_attention) ||
           list_.proj_reads_rows;
  }
  DecodeArgs args_{};
  TaskListShape shape_;
  DecodeTaskList list_;
  MegakernelPlan mega_;
  MegakernelOptions options_;
  unsigned long long* probes_ = nullptr;  // level 4's probes (hooks.h), when measured
  DeviceBuffer probe_dump_;               // FL_DECODE_PROBE_DUMP's probes
  DeviceBuffer cluster_counts_, cluster_sums_, cluster_stamps_;  // the cluster step's (launch.h)
  struct {
    int clusters = -1;  // the cluster step's clusters on this GPU (-1: not asked yet)
  } cluster_;
  cudaGraphExec_t graphs_[2] = {nullptr, nullptr};
};

}  // namespace gpt2
}  // namespace fl
