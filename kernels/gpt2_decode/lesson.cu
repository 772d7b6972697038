// Lesson 11, gpt2_decode: one decode step of GPT-2 small (model.h) for 1-16 new tokens against a
// KV cache of s positions (the size slider, 16 to 8K), bf16 weights and cache.
//
// The ladder, and what each rung removes:
//   0 per-op        17 launches a block (per_op.cu), 205 in all: every op's output goes to
//                   HBM and the GPU drains and refills at each of the 205 boundaries
//   1 fused         5 launches a block (fused.cu), 61 in all: LayerNorm in the products'
//                   prologues, bias / GELU / residual / cache append in their epilogues,
//                   attention one kernel
//   2 graph         level 1 captured once as a CUDA graph and replayed: the launch calls go,
//                   the drain and refill at each kernel boundary stay
//   3 graph + PDL   the graph with programmatic dependent launch (sm_90+; elsewhere it runs as
//                   level 2): each kernel loads its weights while the previous one drains
//   4 megakernel    one persistent launch (megakernel.cu): a block per SM runs a host-built
//                   task list, waits on counters in global memory, and prefetches the next
//                   task's weights while it waits
// The bytes every level must move are the same ~170 MB of weights plus 2 x 12 x s x 768 x 2 B of
// cache; the levels differ in how much of the time the weight stream is running. At t = 1, s =
// 512 that is 189 MB, ~63 us at 3 TB/s, against 205 launches of a few microseconds each.
#include <algorithm>
#include <memory>
#include <string>

#include "kernels/catalog.h"
#include "kernels/gpt2_decode/hooks.h"
#include "kernels/gpt2_decode/launch.h"
#include "kernels/level_table.h"
#include "kernels/workspace.cuh"

namespace fl {
namespace gpt2 {
namespace {

constexpr uint64_t kWeightSeed = 0x6770743264656373ull;  // the weights never change
constexpr double kTolerance = 1e-2;                      // bf16 cache rows; fp32 activations

class DecodeWorkspace final : public LevelWorkspace<DecodeWorkspace> {
 public:
  DecodeWorkspace(int cache, int tokens) : cache_(cache), tokens_(tokens) {}
  static const LevelTable<DecodeWorkspace>& levels();

  Status allocate() {
    const int64_t t = tokens_, positions = cache_ + tokens_;
    const int64_t cache_elements = int64_t(kLayers) * kHeads * positions * kHeadDim;
    FL_TRY(weights_.allocate(kWeightElements * 2));
    FL_TRY(k_cache_.allocate(cache_elements * 2));
    FL_TRY(v_cache_.allocate(cache_elements * 2));
    for (DeviceBuffer* b : {&x_in_, &x_, &q_, &y_, &xn_, &att_, &tmp_}) FL_TRY(b->allocate(t * kC * 4));
    FL_TRY(qkv_.allocate(t * 3 * kC * 4));
    FL_TRY(h_.allocate(t * kF * 4));
    FL_TRY(scores_.allocate(t * kHeads * positions * 4));
    FL_TRY(check_.allocate(CheckScratch::bytes(tokens_, cache_)));
    FL_TRY(sums_.allocate(sizeof(ErrorSums)));
    int sms = 0;
    FL_TRY(megakernel_limits(&buffer_bytes_, &sms));
    FL_TRY(plan(sms));
    args_ = DecodeArgs{weights_.as<bf16>(), k_cache_.as<bf16>(), v_cache_.as<bf16>(),
                       x_in_.as<float>(),   x_.as<float>(),      q_.as<float>(),
                       partials_.as<float>(), h_.as<float>(),    y_.as<float>(),
                       xn_.as<float>(),     qkv_.as<float>(),    att_.as<float>(),
                       tmp_.as<float>(),    scores_.as<float>(), cache_,
                       tokens_,             list_.splits};
    return Status::Ok();
  }

  // (Re)builds level 4's task list for `blocks` blocks; the fused attention uses the same splits.
  Status plan(int blocks) {
    shape_ = TaskListShape{blocks, tokens_, cache_, buffer_bytes_};
    list_ = build_decode_tasks(shape_);
    FL_TRY(tasks_.allocate(list_.tasks.size() * sizeof(DecodeTask)));
    FL_TRY(block_begin_.allocate(list_.block_begin.size() * sizeof(int)));
    FL_TRY(counters_.allocate((list_.counters + 1) * sizeof(unsigned)));
    FL_TRY(partials_.allocate(int64_t(tokens_) * kHeads * list_.splits * kPartStride * 4));
    FL_CUDA_TRY(cudaMemcpy(tasks_.get(), list_.tasks.data(), tasks_.bytes(), cudaMemcpyHostToDevice));
    FL_CUDA_TRY(cudaMemcpy(block_begin_.get(), list_.block_begin.data(), block_begin_.bytes(),
                           cudaMemcpyHostToDevice));
    FL_CUDA_TRY(cudaMemset(counters_.get(), 0, counters_.bytes()));
    mega_.tasks = tasks_.as<DecodeTask>();
    mega_.block_begin = block_begin_.as<int>();
    mega_.counters = counters_.as<unsigned>();
    mega_.counter_count = list_.counters;
    mega_.blocks = blocks;
    mega_.weight_buffer_bytes = buffer_bytes_;
    args_.partials = partials_.as<float>();
    args_.splits = list_.splits;
    drop_graphs();  // they hold the old pointers and splits
    return Status::Ok();
  }

  Status fill_inputs(uint64_t seed, cudaStream_t stream) override {
    if (!weights_filled_) {
      FL_TRY(fill_weights(stream));
      weights_filled_ = true;
    }
    const int64_t cache_elements = k_cache_.bytes() / 2;
    FL_TRY(fill_uniform(x_in_.as<float>(), int64_t(tokens_) * kC, seed, -1.f, 1.f, stream));
    FL_TRY(fill_uniform(k_cache_.as<bf16>(), cache_elements, seed + 1, -2.f, 2.f, stream));
    return fill_uniform(v_cache_.as<bf16>(), cache_elements, seed + 2, -1.f, 1.f, stream);
  }

  Status poison_outputs(cudaStream_t stream) override {
    const int64_t t = tokens_;
    FL_TRY(poison_elements<float>({{&y_, t * kC}, {&x_, t * kC}, {&q_, t * kC}, {&h_, t * kF},
                                   {&qkv_, t * 3 * kC}, {&att_, t * kC}, {&xn_, t * kC},
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
    return run_check(sums_, kTolerance, stream,
                     [&](ErrorSums* sums) { return check_step(args_, c, sums, stream); }, result);
  }

  // Inputs: x (t x C), the weights, the K and V caches (positions >= s are the step's outputs
  // and are not read by the reference). Output: y (t x C).
  Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                  std::vector<HostTensor>* outputs) override {
    std::vector<HostTensor> first, second;
    FL_TRY(download_tensors<float>({{"x", x_in_.as<float>(), int64_t(tokens_) * kC}}, stream, &first));
    const int64_t cache_elements = k_cache_.bytes() / 2;
    FL_TRY(download_tensors<bf16>({{"weights", weights_.as<bf16>(), kWeightElements},
                                   {"k_cache", k_cache_.as<bf16>(), cache_elements},
                                   {"v_cache", v_cache_.as<bf16>(), cache_elements}},
                                  stream, &second));
    *inputs = std::move(first);
    for (HostTensor& h : second) inputs->push_back(std::move(h));
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

  const DecodeArgs& args() const { return args_; }
  const MegakernelPlan& mega() const { return mega_; }
  const DecodeTaskList& task_list() const { return list_; }
  const TaskListShape& task_shape() const { return shape_; }
  void set_phases(const PhaseSink& sink) { mega_.phases = sink; }

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
  bool weights_filled_ = false;
  DeviceBuffer weights_, k_cache_, v_cache_, x_in_, x_, q_, y_, xn_, att_, tmp_, qkv_, h_, scores_;
  DeviceBuffer partials_, check_, sums_, tasks_, block_begin_, counters_;
  DecodeArgs args_{};
  TaskListShape shape_;
  DecodeTaskList list_;
  MegakernelPlan mega_;
  cudaGraphExec_t graphs_[2] = {nullptr, nullptr};
};

// ---- the level table --------------------------------------------------------------------------
// s = cached positions, t = i new tokens, b = 2 (bf16 weights and cache); activations are fp32.
// Each launch's textbook bytes: the weights it reads once, the activations it reads and writes.

using Ws = DecodeWorkspace;
using Row = LaunchRow<Ws>;

Textbook product(const Dims& d, int64_t k, int64_t n) {  // a t x K by K x N product
  return {n * k * d.b + d.i * k * 4, d.i * n * 4, 2.0 * d.i * n * k};
}
Textbook rows(const Dims& d, int64_t n, int64_t in_rows, int64_t params, double flops) {
  return {in_rows * d.i * n * 4 + params * d.b, d.i * n * 4, flops * d.i * n};
}
// The cache a head reads: s + t keys or values of C per layer.
int64_t cache_bytes(const Dims& d) { return (d.s + d.i) * kC * d.b; }
int64_t score_bytes(const Dims& d) { return d.i * kHeads * (d.s + d.i) * 4; }

std::string named(int layer, const char* op) { return "L" + std::to_string(layer) + " " + op; }

std::vector<Row> per_op_rows() {
  std::vector<Row> out;
  for (int l = 0; l < kLayers; ++l) {
    auto add = [&](const char* op, std::function<Status(Ws&, cudaStream_t)> run,
                   std::function<Textbook(const Dims&)> tb) { out.push_back({named(l, op), run, tb}); };
    add("ln1", [l](Ws& w, cudaStream_t s) { return launch_layernorm(w.args(), l, Norm::ln1, s); },
        [](const Dims& d) { return rows(d, kC, 1, 2 * kC, 8); });
    add("qkv", [l](Ws& w, cudaStream_t s) { return launch_gemv(w.args(), l, Matrix::qkv, s); },
        [](const Dims& d) { return product(d, kC, 3 * kC); });
    add("qkv bias", [l](Ws& w, cudaStream_t s) { return launch_add_bias(w.args(), l, Matrix::qkv, s); },
        [](const Dims& d) { return rows(d, 3 * kC, 1, 3 * kC, 1); });
    add("kv append", [l](Ws& w, cudaStream_t s) { return launch_kv_append(w.args(), l, s); },
        [](const Dims& d) { return Textbook{d.i * 2 * kC * 4, d.i * 2 * kC * d.b, 0}; });
    add("scores", [l](Ws& w, cudaStream_t s) { return launch_attention_scores(w.args(), l, s); },
        [](const Dims& d) {
          return Textbook{d.i * kC * 4 + cache_bytes(d), score_bytes(d), 2.0 * d.i * (d.s + d.i) * kC};
        });
    add("softmax", [](Ws& w, cudaStream_t s) { return launch_attention_softmax(w.args(), s); },
        [](const Dims& d) { return Textbook{score_bytes(d), score_bytes(d), 5.0 * d.i * kHeads * (d.s + d.i)}; });
    add("P V", [l](Ws& w, cudaStream_t s) { return launch_attention_pv(w.args(), l, s); },
        [](const Dims& d) {
          return Textbook{score_bytes(d) + cache_bytes(d), d.i * kC * 4, 2.0 * d.i * (d.s + d.i) * kC};
        });
    add("proj", [l](Ws& w, cudaStream_t s) { return launch_gemv(w.args(), l, Matrix::proj, s); },
        [](const Dims& d) { return product(d, kC, kC); });
    add("proj bias", [l](Ws& w, cudaStream_t s) { return launch_add_bias(w.args(), l, Matrix::proj, s); },
        [](const Dims& d) { return rows(d, kC, 1, kC, 1); });
    add("residual", [l](Ws& w, cudaStream_t s) { return launch_residual(w.args(), l == 0, s); },
        [](const Dims& d) { return rows(d, kC, 2, 0, 1); });
    add("ln2", [l](Ws& w, cudaStream_t s) { return launch_layernorm(w.args(), l, Norm::ln2, s); },
        [](const Dims& d) { return rows(d, kC, 1, 2 * kC, 8); });
    add("fc", [l](Ws& w, cudaStream_t s) { return launch_gemv(w.args(), l, Matrix::fc, s); },
        [](const Dims& d) { return product(d, kC, kF); });
    add("fc bias", [l](Ws& w, cudaStream_t s) { return launch_add_bias(w.args(), l, Matrix::fc, s); },
        [](const Dims& d) { return rows(d, kF, 1, kF, 1); });
    add("gelu", [](Ws& w, cudaStream_t s) { return launch_gelu(w.args(), s); },
        [](const Dims& d) { return rows(d, kF, 1, 0, 8); });
    add("out", [l](Ws& w, cudaStream_t s) { return launch_gemv(w.args(), l, Matrix::out, s); },
        [](const Dims& d) { return product(d, kF, kC); });
    add("out bias", [l](Ws& w, cudaStream_t s) { return launch_add_bias(w.args(), l, Matrix::out, s); },
        [](const Dims& d) { return rows(d, kC, 1, kC, 1); });
    add("residual", [](Ws& w, cudaStream_t s) { return launch_residual(w.args(), false, s); },
        [](const Dims& d) { return rows(d, kC, 2, 0, 1); });
  }
  out.push_back({"ln_f", [](Ws& w, cudaStream_t s) { return launch_layernorm(w.args(), 0, Norm::final_norm, s); },
                 [](const Dims& d) { return rows(d, kC, 1, 2 * kC, 8); }});
  return out;
}

// The fused kernels' textbook traffic, one block's five launches.
Textbook fused_qkv(const Dims& d) {
  Textbook t = product(d, kC, 3 * kC);
  t.read += (3 * kC + 2 * kC) * d.b;  // bias, LayerNorm's gamma and beta
  t.written = d.i * kC * 4 + d.i * 2 * kC * d.b;  // q, and k and v into the cache
  return t;
}
Textbook fused_attention(const Dims& d) {
  return {d.i * kC * 4 + 2 * cache_bytes(d), d.i * kC * 4, 4.0 * d.i * (d.s + d.i) * kC};
}
Textbook fused_proj(const Dims& d) {
  Textbook t = product(d, kC, kC);
  t.read += kC * d.b + d.i * kC * 4;  // bias, residual
  return t;
}
Textbook fused_fc(const Dims& d) {
  Textbook t = product(d, kC, kF);
  t.read += (kF + 2 * kC) * d.b;
  return t;
}
Textbook fused_out(const Dims& d) {
  Textbook t = product(d, kF, kC);
  t.read += kC * d.b + d.i * kC * 4;
  return t;
}
Textbook final_norm(const Dims& d) { return rows(d, kC, 1, 2 * kC, 8); }

Textbook sum_of(std::initializer_list<Textbook> parts, int times = 1) {
  Textbook out;
  for (const Textbook& p : parts) {
    out.read += p.read * times;
    out.written += p.written * times;
    out.flops += p.flops * times;
  }
  return out;
}
Textbook whole_chain(const Dims& d) {  // levels 2 and 3: level 1's 61 launches
  const Textbook layer = sum_of({fused_qkv(d), fused_attention(d), fused_proj(d), fused_fc(d), fused_out(d)}, kLayers);
  return sum_of({layer, final_norm(d)});
}
Textbook megakernel_traffic(const Dims& d) {  // weights, the cache, x in, y and new rows out
  const Textbook chain = whole_chain(d);
  return {kWeightElements * d.b + kLayers * 2 * d.s * kC * d.b + d.i * kC * 4,
          d.i * kC * 4 + kLayers * d.i * 2 * kC * d.b, chain.flops};
}

std::vector<Row> fused_rows() {
  std::vector<Row> out;
  for (int l = 0; l < kLayers; ++l) {
    out.push_back({named(l, "ln1+qkv"),
                   [l](Ws& w, cudaStream_t s) { return launch_fused(w.args(), l, Matrix::qkv, s, false); }, fused_qkv});
    out.push_back({named(l, "attention"),
                   [l](Ws& w, cudaStream_t s) { return launch_attention(w.args(), l, s, false); }, fused_attention});
    out.push_back({named(l, "proj"),
                   [l](Ws& w, cudaStream_t s) { return launch_fused(w.args(), l, Matrix::proj, s, false); }, fused_proj});
    out.push_back({named(l, "ln2+fc"),
                   [l](Ws& w, cudaStream_t s) { return launch_fused(w.args(), l, Matrix::fc, s, false); }, fused_fc});
    out.push_back({named(l, "out"),
                   [l](Ws& w, cudaStream_t s) { return launch_fused(w.args(), l, Matrix::out, s, false); }, fused_out});
  }
  out.push_back({"ln_f", [](Ws& w, cudaStream_t s) { return launch_layernorm(w.args(), 0, Norm::final_norm, s); },
                 final_norm});
  return out;
}

}  // namespace

const LevelTable<DecodeWorkspace>& DecodeWorkspace::levels() {
  static const LevelTable<Ws> table = {
      {"per-op",
       "every LayerNorm, product, bias, attention step, residual and GELU its own launch: 205 "
       "launches, a drain and a refill at each",
       "each kernel's own tile; every op's output goes to HBM and back",
       per_op_rows()},
      {"fused",
       "LayerNorm in the products' prologues, bias, GELU and residual in their epilogues, "
       "attention one kernel: 61 launches",
       "normalized rows, attention scores and the products' sums stay on chip",
       fused_rows()},
      {"graph",
       "the fused level captured once as a CUDA graph and replayed: no launch calls, the "
       "kernel boundaries stay",
       "as the fused level",
       {{"graph (61 kernels)", [](Ws& w, cudaStream_t s) { return w.replay(s, false); }, whole_chain}}},
      {"graph+PDL",
       "the graph with programmatic dependent launch: each kernel loads its weights while the "
       "previous one drains (sm_90+; on older GPUs it runs as the graph level)",
       "as the fused level",
       {{"graph+PDL (61 kernels)", [](Ws& w, cudaStream_t s) { return w.replay(s, pdl_supported()); },
         whole_chain}}},
      {"megakernel",
       "one persistent launch, a block per SM running a task list with dependency counters, "
       "prefetching the next task's weights while it waits",
       "every activation (x, q, attention partials, the MLP's h) is read from L2 by the next "
       "task; only weights and the cache come from HBM",
       {{"megakernel", [](Ws& w, cudaStream_t s) { return launch_megakernel(w.args(), w.mega(), s); },
         megakernel_traffic}}},
  };
  return table;
}

// ---- the lesson -------------------------------------------------------------------------------
namespace {

class Gpt2Decode final : public LevelLesson<DecodeWorkspace> {
 public:
  Gpt2Decode()
      : LevelLesson("gpt2_decode", "GPT-2 decode step",
                    "y = LN_f(Block_12(...Block_1(x))), each Block: x += Attn(LN1 x; KV cache) "
                    "Wproj; x += GELU(LN2 x Wfc) Wout;  C = 768, 12 heads, bf16",
                    SizeAxis{"cached tokens", 16, kMaxCache, 512, "new tokens", 1, kMaxTokens},
                    {Precision::bf16}) {}

  int64_t workspace_bytes(Shape shape, Precision) const override {
    shape = resolve(shape);
    const int64_t t = shape.inner, positions = shape.size + shape.inner;
    return kWeightElements * 2 + 2 * int64_t(kLayers) * kHeads * positions * kHeadDim * 2 +
           t * (8 * kC + 3 * kC + kF + kHeads * positions) * 4 +
           t * kHeads * 64 * kPartStride * 4 + CheckScratch::bytes(int(t), int(shape.size));
  }

  Status create_workspace(Shape shape, Precision p, std::unique_ptr<Workspace>* out) const override {
    shape = resolve(shape);
    if (p != Precision::bf16) return Status::Error("gpt2_decode runs in bf16 only");
    if (shape.size < 1 || shape.size > kMaxCache) {
      return Status::Error("gpt2_decode: the cache holds 1 to " + std::to_string(kMaxCache) +
                           " tokens (asked for " + std::to_string(shape.size) + ")");
    }
    if (shape.inner < 1 || shape.inner > kMaxTokens) {
      return Status::Error("gpt2_decode: a step takes 1 to " + std::to_string(kMaxTokens) +
                           " new tokens (asked for " + std::to_string(shape.inner) + ")");
    }
    auto ws = std::make_unique<DecodeWorkspace>(int(shape.size), int(shape.inner));
    FL_TRY(ws->allocate());
    *out = std::move(ws);
    return Status::Ok();
  }

  // inputs: x (t x C), weights, k_cache, v_cache.
  std::vector<HostTensor> reference(const std::vector<HostTensor>& in) const override {
    const int t = static_cast<int>(in.at(0).values.size() / kC);
    const int64_t per_layer = int64_t(kLayers) * kHeads * kHeadDim;
    const int cache = static_cast<int>(in.at(2).values.size() / per_layer) - t;
    return {{"y", reference_step(in[0].values, in[1].values, in[2].values, in[3].values, t, cache)}};
  }

  double tolerance(Precision) const override { return kTolerance; }
};

DecodeWorkspace* as_decode(const Workspace& ws) {
  return dynamic_cast<DecodeWorkspace*>(const_cast<Workspace*>(&ws));
}

}  // namespace

const DecodeTaskList* megakernel_tasks(const Workspace& ws, TaskListShape* shape) {
  DecodeWorkspace* d = as_decode(ws);
  if (d == nullptr) return nullptr;
  if (shape != nullptr) *shape = d->task_shape();
  return &d->task_list();
}

Status set_megakernel_phases(Workspace& ws, const PhaseSink& sink) {
  DecodeWorkspace* d = as_decode(ws);
  if (d == nullptr) return Status::Error("not a gpt2_decode workspace");
  d->set_phases(sink);
  return Status::Ok();
}

Status set_megakernel_blocks(Workspace& ws, int blocks) {
  DecodeWorkspace* d = as_decode(ws);
  if (d == nullptr) return Status::Error("not a gpt2_decode workspace");
  int buffer = 0, sms = 0;
  FL_TRY(megakernel_limits(&buffer, &sms));
  if (blocks < 1 || blocks > sms) {
    return Status::Error("the megakernel runs on 1 to " + std::to_string(sms) + " blocks");
  }
  return d->plan(blocks);
}

}  // namespace gpt2

using Gpt2DecodeLesson = gpt2::Gpt2Decode;
FL_DEFINE_LESSON(gpt2_decode, Gpt2DecodeLesson);

}  // namespace fl
