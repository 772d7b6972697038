#!/usr/bin/env python3
"""PyTorch's GPT-2-small decode step on this GPU: the peer of lesson 11 (gpt2_decode).

The same shapes as the lesson (C = 768, 12 heads of 64, 12 pre-LN blocks, 4C MLP with tanh
GELU, final LayerNorm, no LM head), bf16 weights and KV cache, random weights, 1 new token
against a cache of s positions. Each step writes the new token's keys and values into the
preallocated cache and attends over s + 1 positions with F.scaled_dot_product_attention, as a
static-cache decoder does. Two ways of running it:
  eager       the step as plain PyTorch ops, launched from Python each time
  cuda_graph  the same ops captured once in a CUDA graph and replayed
Timing: CUDA events around the step (eager includes the host's launch time: at decode that is
the point), cold L2 (a read pass over 3x the L2 before every repetition, as `bench --cache
cold`), the median of the repetitions. The kernel count comes from torch.profiler.

  python3 scripts/pytorch_decode.py --caches 512,2048 --json out.json
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F

C, H, D, LAYERS = 768, 12, 64, 12


def make_model(cache, tokens, dtype, device):
    g = torch.Generator(device=device).manual_seed(0)

    def rand(*shape, lo=-0.035, hi=0.035):
        return (torch.rand(*shape, generator=g, device=device) * (hi - lo) + lo).to(dtype)

    layers = []
    for _ in range(LAYERS):
        layers.append(dict(
            ln1_w=rand(C, lo=0.8, hi=1.2), ln1_b=rand(C, lo=-0.1, hi=0.1),
            wqkv=rand(3 * C, C), bqkv=rand(3 * C, lo=-0.02, hi=0.02),
            wproj=rand(C, C), bproj=rand(C, lo=-0.02, hi=0.02),
            ln2_w=rand(C, lo=0.8, hi=1.2), ln2_b=rand(C, lo=-0.1, hi=0.1),
            wfc=rand(4 * C, C), bfc=rand(4 * C, lo=-0.02, hi=0.02),
            wout=rand(C, 4 * C), bout=rand(C, lo=-0.02, hi=0.02)))
    lnf = (rand(C, lo=0.8, hi=1.2), rand(C, lo=-0.1, hi=0.1))
    positions = cache + tokens
    k_cache = rand(LAYERS, H, positions, D, lo=-2, hi=2)
    v_cache = rand(LAYERS, H, positions, D, lo=-1, hi=1)
    x = (torch.rand(tokens, C, generator=g, device=device) * 2 - 1).to(dtype)
    return layers, lnf, k_cache, v_cache, x


def decode_step(x, layers, lnf, k_cache, v_cache, cache):
    t = x.shape[0]
    seen = cache + t
    mask = None
    if t > 1:  # token j sees positions 0..cache+j
        mask = torch.ones(t, seen, dtype=torch.bool, device=x.device).tril(diagonal=cache)
    for l, p in enumerate(layers):
        a = F.layer_norm(x, (C,), p["ln1_w"], p["ln1_b"])
        q, k, v = F.linear(a, p["wqkv"], p["bqkv"]).split(C, dim=-1)
        k_cache[l, :, cache:seen] = k.view(t, H, D).transpose(0, 1)
        v_cache[l, :, cache:seen] = v.view(t, H, D).transpose(0, 1)
        att = F.scaled_dot_product_attention(q.view(t, H, D).transpose(0, 1)[None],
                                             k_cache[l, :, :seen][None], v_cache[l, :, :seen][None],
                                             attn_mask=mask)
        x = x + F.linear(att[0].transpose(0, 1).reshape(t, C), p["wproj"], p["bproj"])
        h = F.gelu(F.linear(F.layer_norm(x, (C,), p["ln2_w"], p["ln2_b"]), p["wfc"], p["bfc"]),
                   approximate="tanh")
        x = x + F.linear(h, p["wout"], p["bout"])
    return F.layer_norm(x, (C,), lnf[0], lnf[1])


def time_it(run, flush, reps):
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        flush.max()  # a read pass over 3x L2: cold
        torch.cuda.synchronize()
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def kernel_count(run):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--caches", default="512,2048")
    ap.add_argument("--tokens", type=int, default=1)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("pytorch_decode: no CUDA GPU", file=sys.stderr)
        return 1
    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(device)
    flush = torch.empty(3 * props.L2_cache_size if hasattr(props, "L2_cache_size") else 150 << 20,
                        dtype=torch.uint8, device=device).fill_(1)
    rows = []
    print(f"PyTorch {torch.__version__} on {props.name}; bf16, {args.tokens} token(s), cold L2, "
          f"median of {args.reps}")
    print(f"{'cache':>6} {'eager us':>10} {'graph us':>10} {'kernels':>8}")
    for cache in [int(c) for c in args.caches.split(",")]:
        layers, lnf, kc, vc, x = make_model(cache, args.tokens, torch.bfloat16, device)
        with torch.no_grad():
            eager = lambda: decode_step(x, layers, lnf, kc, vc, cache)
            for _ in range(3):
                eager()
            eager_us = time_it(eager, flush, args.reps)
            kernels = kernel_count(eager)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    eager()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                y = decode_step(x, layers, lnf, kc, vc, cache)
            graph.replay()
            torch.cuda.synchronize()
            ok = torch.allclose(y.float(), eager().float(), rtol=2e-2, atol=2e-2)
            graph_us = time_it(graph.replay, flush, args.reps)
        print(f"{cache:>6} {eager_us:>10.1f} {graph_us:>10.1f} {kernels:>8}" +
              ("" if ok else "  (graph and eager outputs differ!)"))
        rows.append(dict(cache=cache, tokens=args.tokens, eager_us=eager_us, graph_us=graph_us,
                         kernels=kernels, graph_matches_eager=bool(ok)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(gpu=props.name, torch=torch.__version__, rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
