// gpt2_decode's level table (lesson.cu has the ladder's rationale): each level's launches, their
// launchers on the workspace's buffers and their textbook traffic.
#include <functional>
#include <string>
#include <vector>

#include "kernels/gpt2_decode/workspace.cuh"

namespace fl {
namespace gpt2 {
namespace {

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
int64_t cache_bytes(const Dims& d) {
  return (d.s + d.i) * kC * d.b;
}
int64_t score_bytes(const Dims& d) {
  return d.i * kHeads * (d.s + d.i) * 4;
}

std::string named(int layer, const char* op) {
  return "L" + std::to_string(layer) + " " + op;
}

std::vector<Row> per_op_rows() {
  std::vector<Row> out;
  for (int l = 0; l < kLayers; ++l) {
    auto add = [&](const char* op, std::function<Status(Ws&, cudaStream_t)> run,
                   std::function<Textbook(const Dims&)> tb) {
      out.push_back({named(l, op), run, tb});
    };
    add(
        "ln1", [l](Ws& w, cudaStream_t s) { return launch_layernorm(w.args(), l, Norm::ln1, s); },
        [](const Dims& d) { return rows(d, kC, 1, 2 * kC, 8); });
    add(
        "qkv", [l](Ws& w, cudaStream_t s) { return launch_gemv(w.args(), l, Matrix::qkv, s); },
        [](const Dims& d) { return product(d, kC, 3 * kC); });
    add(
        "qkv bias",
        [l](Ws& w, cudaStream_t s) { return launch_add_bias(w.args(), l, Matrix::qkv, s); },
        [](const Dims& d) { return rows(d, 3 * kC, 1, 3 * kC, 1); });
    add(
        "kv append", [l](Ws& w, cudaStream_t s) { return launch_kv_append(w.args(), l, s); },
        [](const Dims& d) {
          return Textbook{d.i * 2 * kC * 4, d.i * 2 * kC * d.b, 0};
        });
    add(
        "scores", [l](Ws& w, cudaStream_t s) { return launch_attention_scores(w.args(), l, s); },
        [](const Dims& d) {
          return Textbook{d.i * kC * 4 + cache_bytes(d), score_bytes(d),
                          2.0 * d.i * (d.s + d.i) * kC};
        });
    add(
        "softmax", [](Ws& w, cudaStream_t s) { return launch_attention_softmax(w.args(), s); },
        [](const Dims& d) {
          return Textbook{score_bytes(d), score_bytes(d), 5.0 * d.i * kHeads * (d.s + d.i)};
        });
    add(
        "P V", [l](Ws& w, cudaStream_t s) { return launch_attention_pv(w.args(), l, s); },
        [](const Dims& d) {
          return Textbook{score_bytes(d) + cache_bytes(d), d.i * kC * 4,
                          2.0 * d.i * (d.s + d.i) * kC};
        });
    add(
        "proj", [l](Ws& w, cudaStream_t s) { return launch_gemv(w.args(), l, Matrix::proj, s); },
        [](const Dims& d) { return product(d, kC, kC); });
    add(
        "proj bias",
        [l](Ws& w, cudaStream_t s) { return launch_add_bias(w.args(), l, Matrix::proj, s); },
        [](const Dims& d) { return rows(d, kC, 1, kC, 1); });
    add(
        "residual", [l](Ws& w, cudaStream_t s) { return launch_residual(w.args(), l == 0, s); },
        [](const Dims& d) { return rows(d, kC, 2, 0, 1); });
    add(
        "ln2", [l](Ws& w, cudaStream_t s) { return launch_layernorm(w.args(), l, Norm::ln2, s); },
        [](const Dims& d) { return rows(d, kC, 1, 2 * kC, 8); });
    add(
        "fc", [l](Ws& w, cudaStream_t s) { return launch_gemv(w.args(), l, Matrix::fc, s); },
        [](const Dims& d) { return product(d, kC, kF); });
    add(
        "fc bias",
        [l](Ws& w, cudaStream_t s) { return launch_add_bias(w.args(), l, Matrix::fc, s); },
        [](const Dims& d) { return rows(d, kF, 1, kF, 1); });
    add(
        "gelu", [](Ws& w, cudaStream_t s) { return launch_gelu(w.args(), s); },
        [](const Dims& d) { return rows(d, kF, 1, 0, 8); });
    add(
        "out", [l](Ws& w, cudaStream_t s) { return launch_gemv(w.args(), l, Matrix::out, s); },
        [](const Dims& d) { return product(d, kF, kC); });
    add(
        "out bias",
        [l](Ws& w, cudaStream_t s) { return launch_add_bias(w.args(), l, Matrix::out, s); },
        [](const Dims& d) { return rows(d, kC, 1, kC, 1); });
    add(
        "residual", [](Ws& w, cudaStream_t s) { return launch_residual(w.args(), false, s); },
        [](const Dims& d) { return rows(d, kC, 2, 0, 1); });
  }
  out.push_back(
      {"ln_f",
       [](Ws& w, cudaStream_t s) { return launch_layernorm(w.args(), 0, Norm::final_norm, s); },
       [](const Dims& d) { return rows(d, kC, 1, 2 * kC, 8); }});
  return out;
}

// The fused kernels' textbook traffic, one block's five launches.
Textbook fused_qkv(const Dims& d) {
  Textbook t = product(d, kC, 3 * kC);
  t.read += (3 * kC + 2 * kC) * d.b;              // bias, LayerNorm's gamma and beta
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
Textbook final_norm(const Dims& d) {
  return rows(d, kC, 1, 2 * kC, 8);
}

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
  const Textbook layer =
      sum_of({fused_qkv(d), fused_attention(d), fused_proj(d), fused_fc(d), fused_out(d)}, kLayers);
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
    out.push_back(
        {named(l, "ln1+qkv"),
         [l](Ws& w, cudaStream_t s) { return launch_fused(w.args(), l, Matrix::qkv, s, false); },
         fused_qkv});
    out.push_back({named(l, "attention"),
                   [l](Ws& w, cudaStream_t s) { return launch_attention(w.args(), l, s, false); },
                   fused_attention});
    out.push_back(
        {named(l, "proj"),
         [l](Ws& w, cudaStream_t s) { return launch_fused(w.args(), l, Matrix::proj, s, false); },
         fused_proj});
    out.push_back(
        {named(l, "ln2+fc"),
         [l](Ws& w, cudaStream_t s) { return launch_fused(w.args(), l, Matrix::fc, s, false); },
         fused_fc});
    out.push_back(
        {named(l, "out"),
         [l](Ws& w, cudaStream_t s) { return launch_fused(w.args(), l, Matrix::out, s, false); },
         fused_out});
  }
  out.push_back(
      {"ln_f",
       [](Ws& w, cudaStream_t s) { return launch_layernorm(w.args(), 0, Norm::final_norm, s); },
       final_norm});
  return out;
}

// Level 4's three kernels, in the table's order: the cluster step where it runs (one new token on
// an sm_90 build with 12 clusters of 8 resident), built without the key passes up to a cache of
// 2K and with them past it; else the task list.
std::vector<VariantRow<Ws>> megakernel_variants() {
  VariantRange clusters;
  clusters.min_cc = 90, clusters.max_cc = 90, clusters.wgmma_build = true;
  clusters.precisions = {Precision::bf16};
  // One new token: from 2 on preferred nowhere (an empty range), so that the replay-only build's
  // choice, which has no shape checks, is the task list's too.
  clusters.prefer_by_inner = {{2, 2, 1}};
  // Without the key passes up to 2K, where a block's 256 keys fit its head buffer (266 on an
  // H100; where they do not, its launcher says so and the table takes clusters_long); the
  // passes' code, never run there, slows the step (docs/PERFORMANCE.md, lesson 11).
  VariantRange fits = clusters;
  fits.prefer_to = 2048;
  const auto one_token = [](const Dims& d) {
    return d.i == 1 ? std::string() : std::string("the cluster step runs one new token");
  };
  return {
      {"clusters",
       "each head a cluster of 8 blocks (its q, k, v rows, a split of its keys and a piece of "
       "proj a block; the values through distributed shared memory), every block an MLP slice "
       "(its partial sums added up inside the cluster): two grid-wide waits a layer",
       "clustered_step",
       fits,
       [](Ws& w, cudaStream_t s) { return w.run_cluster_variant(false, s); },
       one_token,
       {"head", "mlp", "final norm"}},
      {"clusters_long",
       "the cluster step with the keys past a block's head buffer streamed through it in passes "
       "(TMA), for the caches whose keys outgrow it",
       "clustered_step_long",
       clusters,
       [](Ws& w, cudaStream_t s) { return w.run_cluster_variant(true, s); },
       one_token,
       {"head", "mlp", "final norm"}},
      {"task_list",
       "a task list dealt to one block an SM, dependency counters in global memory: four stages "
       "a layer (qkv, attention, proj by head, MLP)",
       "megakernel",
       VariantRange{},
       [](Ws& w, cudaStream_t s) { return w.run_megakernel(s); },
       {},
       {}},
  };
}

}  // namespace

const LevelTable<DecodeWorkspace>& DecodeWorkspace::levels() {
  static const LevelTable<Ws> table = {
      {"per-op",
       "every LayerNorm, product, bias, attention step, residual and GELU its own launch: 205 "
       "launches, a drain and a refill at each",
       "each kernel's own tile; every op's output goes to HBM and back", per_op_rows()},
      {"fused",
       "LayerNorm in the products' prologues, bias, GELU and residual in their epilogues, "
       "attention one kernel: 61 launches",
       "normalized rows, attention scores and the products' sums stay on chip", fused_rows()},
      {"graph",
       "the fused level captured once as a CUDA graph and replayed: no launch calls, the "
       "kernel boundaries stay",
       "as the fused level",
       {{"graph (61 kernels)", [](Ws& w, cudaStream_t s) { return w.replay(s, false); },
         whole_chain}}},
      {"graph+PDL",
       "the graph with programmatic dependent launch: each kernel loads its weights while the "
       "previous one drains (sm_90+; on older GPUs it runs as the graph level)",
       "as the fused level",
       {{"graph+PDL (61 kernels)",
         [](Ws& w, cudaStream_t s) { return w.replay(s, pdl_supported()); }, whole_chain}}},
      {"megakernel",
       "one persistent launch, a block per SM, all 12 layers: at one new token on sm_90 each "
       "head a cluster of 8 blocks (two grid-wide waits a layer, the head's values through "
       "distributed shared memory); elsewhere a task list with dependency counters (four stages "
       "a layer); each block prefetching its next weights while it waits",
       "the MLP's h never leaves its SM; q, k, v and the attention partials stay in the head's "
       "cluster (clusters) or go through L2 (task list); only weights and the cache come from "
       "HBM",
       {{"megakernel", nullptr, megakernel_traffic, megakernel_variants()}}},
  };
  return table;
}

}  // namespace gpt2
}  // namespace fl
