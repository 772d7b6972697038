#!/usr/bin/env python3
"""PyTorch's GPT-2-small decode step on this GPU: the peer of lesson 11 (gpt2_decode).

The same shapes as the lesson (C = 768, 12 heads of 64, 12 pre-LN blocks, 4C MLP with tanh
GELU, final LayerNorm, no LM head), bf16 weights and KV cache, random weights, 1 new token
against a cache of s positions. Each step writes the new token's keys and values into the
preallocated cache and attends over s + 1 positions with F.scaled_dot_product_attention, as a
static-cache decoder does. Two ways of running it:
  eager       the step as plain PyTorch ops, launched from Python each time
  cuda_graph  the same ops captured once in a CUDA graph and replayed
Timing: scripts/peers.py's timer, the same quantity as our chain time: the GPU's own kernel
records (CUPTI, through torch.profiler), per repetition the first kernel's start to the last
one's end, cold L2 (a read pass over 3x the L2 before every repetition, as `bench --cache
cold`), a GPU spin first so that Python's launch time stays out (eager's host time is printed
apart, from CUDA events: at decode it is most of eager's step). Each output is checked against
the step evaluated in float64 (relative L2 error within 2e-2, TOLERANCE below). The kernel count
comes from torch.profiler.

  python3 scripts/pytorch_decode.py --caches 512,2048 --json out.json --peers peers-decode.json
  python3 scripts/pytorch_decode.py --peers-out peers-decode.json   (scripts/gpu-check.sh: the grid)

--peers writes a peer file (docs/SESSION_FORMAT.md, "Peer files": lesson gpt2_decode, bf16,
series eager and cuda_graph, size = cache length, inner = new tokens) that `bench --peers`, the
window's speedup plot and export-csv read beside our levels.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402  (the peer files' timer, copy bandwidth, error measure, graph replay)

C, H, D, LAYERS = 768, 12, 64, 12
# PyTorch keeps the residual stream in bf16 (the lesson keeps activations in fp32): 12 layers of
# it land at ~1e-2 from float64 (H100, 2026-11-26: 1.01e-2 at cache 512), so the peer's check
# uses the bf16 tolerance of the transformer lessons in scripts/peers.py.
TOLERANCE = 2e-2
EAGER_SPIN_US = 12000


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


def host_time_us(run, flush, reps):
    """Eager's step as the host sees it (CUDA events around the Python call)."""
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


def reference_step(layers, lnf, k_cache, v_cache, x, cache):
    """The same step in float64 (copies: the step writes its keys and values into the cache)."""
    d = lambda t: t.double()
    return decode_step(d(x), [{k: d(v) for k, v in p.items()} for p in layers], tuple(map(d, lnf)),
                       d(k_cache).clone(), d(v_cache).clone(), cache)


def write_peer_file(path, props, gbps, points):
    """docs/SESSION_FORMAT.md's peer file, written whole and renamed (never half a file)."""
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip().splitlines()[0]
    labels = {"eager": "PyTorch eager", "cuda_graph": "PyTorch decode in a CUDA graph"}
    doc = {
        "format": "fusionlab-peers",
        "schema_version": 1,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": {"name": props.name, "compute_capability": f"{props.major}.{props.minor}",
                   "sm_count": props.multi_processor_count, "driver": driver, "copy_gbps": gbps},
        "software": {"torch": torch.__version__.split("+")[0], "triton": "",
                     "cuda": torch.version.cuda, "python": platform.python_version()},
        "timing": "cupti_activity",
        "cache": "cold",
        "series": [{"lesson": "gpt2_decode", "precision": "bf16", "peer": peer,
                    "label": labels[peer], "points": pts} for peer, pts in points.items() if pts],
    }
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--caches", default="16,64,256,512,1024,2048,4096,8192",
                    help="cache lengths (default: the recording grid of scripts/gpu-check.sh)")
    ap.add_argument("--tokens", type=int, default=1)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--json", default="", help="a summary table (JSON)")
    ap.add_argument("--peers", "--peers-out", dest="peers", default="",
                    help="a peer file to write (docs/SESSION_FORMAT.md)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("pytorch_decode: no CUDA GPU", file=sys.stderr)
        return 1
    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(device)
    timer = peers.Timer(props.L2_cache_size)
    gbps = peers.copy_gbps(timer) if args.peers else 0.0
    rows, points, failed = [], {"eager": [], "cuda_graph": []}, 0
    print(f"PyTorch {torch.__version__} on {props.name}; bf16, {args.tokens} token(s), cold L2, "
          f"median of {args.reps} (GPU kernel span; eager host time from CUDA events)")
    print(f"{'cache':>6} {'eager us':>10} {'host us':>10} {'graph us':>10} {'kernels':>8} "
          f"{'err eager':>10} {'err graph':>10}")
    for cache in [int(c) for c in args.caches.split(",")]:
        layers, lnf, kc, vc, x = make_model(cache, args.tokens, torch.bfloat16, device)
        with torch.no_grad():
            ref = reference_step(layers, lnf, kc, vc, x, cache)
            step = lambda: decode_step(x, layers, lnf, kc, vc, cache)
            for _ in range(3):
                step()
            err_eager = peers.rel_l2_error((step(),), (ref,))
            # The spin outlasts the host's enqueueing of eager's ~170 launches (~3.5 ms from
            # Python), so its span is the GPU's own, as for every peer.
            eager = timer.median(step, args.reps, spin_us=EAGER_SPIN_US)
            host_us = host_time_us(step, timer.flush, args.reps)
            kernels = kernel_count(step)
            replay = peers.graph_replay(lambda: step(), ())
            err_graph = peers.rel_l2_error((replay(),), (ref,))
            graph = timer.median(replay, args.reps)
        for peer, timing, err in (("eager", eager, err_eager), ("cuda_graph", graph, err_graph)):
            point = {"size": cache, "inner": args.tokens}
            point.update(timing)
            point.update({"rel_l2_error": float(f"{err:.3g}"), "passed": err <= TOLERANCE})
            points[peer].append(point)
            failed += 0 if point["passed"] else 1
        print(f"{cache:>6} {eager['median_us']:>10.1f} {host_us:>10.1f} {graph['median_us']:>10.1f} "
              f"{kernels:>8} {err_eager:>10.2e} {err_graph:>10.2e}")
        rows.append(dict(cache=cache, tokens=args.tokens, eager_us=eager["median_us"],
                         eager_host_us=host_us, graph_us=graph["median_us"], kernels=kernels,
                         rel_l2_error_eager=err_eager, rel_l2_error_graph=err_graph))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(gpu=props.name, torch=torch.__version__, rows=rows), f, indent=1)
    if args.peers:
        write_peer_file(args.peers, props, gbps, points)
        print(f"wrote {args.peers} (copy {gbps} GB/s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
