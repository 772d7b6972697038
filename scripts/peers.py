#!/usr/bin/env python3
"""What PyTorch would do: measures every lesson's function as PyTorch runs it, on this GPU.

Run on the GPU machine (its PyTorch and Triton): for every lesson at the recording grid's sizes
(scripts/gpu-check.sh's defaults) and in fp32 and bf16 it times
  eager        the formula as plain PyTorch ops (one kernel or more per op),
  compile      torch.compile(the same function), default mode,
  cuda_graph   the eager ops captured once in a CUDA graph and replayed,
  sdpa         F.scaled_dot_product_attention for the attention lesson: its default backend
               (cuDNN attention on an H100 in bf16) and, pinned with sdpa_kernel, its
               FlashAttention-2 (bf16) and memory-efficient (fp32 and bf16) backends,
with cold L2 (a read pass over 3x the L2 before every repetition, as `bench --cache cold`) and
the median of the repetitions, and checks each peer's output against a float64 evaluation of
the lesson's formula on the same inputs (relative L2 error, the lesson's tolerance). It writes
a peer file (docs/SESSION_FORMAT.md, "Peer files") that the app shows beside our levels.

Timing: the GPU's kernel records (CUPTI, through torch.profiler), per repetition the span from
the first kernel's start to the last one's end, launch gaps included as the GPU sees them: the
same quantity as our chain time. A GPU spin before each call lets the host enqueue all of it
first, so Python's host overhead is not in it (a CUDA graph then saves only the GPU's own gaps).

  python3 scripts/peers.py --out assets/recordings/h100-2026-11-27/peers.json
  python3 scripts/peers.py --lessons gelu_scale --precisions fp32 --sizes 1M,16M --out /tmp/p.json
"""
import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

# The recording grid (scripts/gpu-check.sh): sizes along each lesson's axis and its row length.
ELEMENTWISE = "1K,4K,16K,64K,256K,1M,4M,16M,64M"
ROWS = "2,16,128,1365,4K,16K,64K,256K"
SOFTMAX = "2,16,128,2K,16K,192K,512K"
GEMM = "1,4,16,64,256,1K,4K,16K"
ATTENTION = "64,256,512,1K,2K,4K,8K"  # sequence length T, B = 16384 / T sequences of 12 heads
LESSONS = {  # id: (default sizes, row length, relative-L2 tolerance fp32, bf16)
    "relu_scale": (ELEMENTWISE, 0, 1e-6, 1e-2),
    "gelu_scale": (ELEMENTWISE, 0, 1e-5, 1e-2),
    "bias_gelu": (ROWS, 768, 1e-5, 1e-2),
    "residual_layernorm": (ROWS, 768, 1e-5, 1e-2),
    "scale_mask_softmax": (SOFTMAX, 512, 1e-5, 1e-2),
    "linear_gelu": (GEMM, 768, 5e-4, 2e-2),
    "layernorm_linear": (GEMM, 768, 5e-4, 2e-2),
    "ffn": (GEMM, 768, 5e-4, 2e-2),
    "attention": (ATTENTION, 64, 2e-5, 1e-2),
    "attention_residual_layernorm": (ATTENTION, 768, 5e-4, 2e-2),
}
LABELS = {"eager": "PyTorch eager", "compile": "torch.compile", "cuda_graph": "eager in a CUDA graph",
          "sdpa": "F.scaled_dot_product_attention",
          "sdpa_flash": "SDPA FlashAttention-2 backend", "sdpa_efficient": "SDPA memory-efficient backend"}
SDPA_PEERS = ("sdpa", "sdpa_flash", "sdpa_efficient")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip()
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


# ---- the lessons' functions, written as a PyTorch user would --------------------------------
def gelu(x):
    return F.gelu(x, approximate="tanh")


def make_case(lesson, size, inner, dtype, gen):
    """Inputs (on the GPU, in `dtype`) and the function, with the ranges our lessons draw from."""
    def uniform(shape, lo, hi):
        return (torch.rand(shape, generator=gen, device="cuda", dtype=torch.float32) * (hi - lo) + lo).to(dtype)

    if lesson == "relu_scale":
        return (uniform((size,), -4, 4),), lambda x: 0.5 * torch.relu(x)
    if lesson == "gelu_scale":
        return (uniform((size,), -4, 4),), lambda x: 0.5 * gelu(x)
    if lesson == "bias_gelu":
        return (uniform((size, inner), -3, 3), uniform((inner,), -0.5, 0.5)), lambda x, b: gelu(x + b)
    if lesson == "residual_layernorm":
        def fn(x, r, g, b):
            h = x + r
            return h, F.layer_norm(h, (h.shape[-1],), g, b, eps=1e-5)
        return (uniform((size, inner), -2, 2), uniform((size, inner), -2, 2),
                uniform((inner,), 0.5, 1.5), uniform((inner,), -0.5, 0.5)), fn
    if lesson == "scale_mask_softmax":
        def fn(s):  # rows of L keys; row r is query r % L; keys after the query are masked
            q = torch.arange(s.shape[0], device=s.device) % s.shape[1]
            j = torch.arange(s.shape[1], device=s.device)
            return torch.softmax((s * 0.125).masked_fill(j[None, :] > q[:, None], float("-inf")), dim=-1)
        return (uniform((size, inner), -4, 4),), fn
    if lesson == "attention":  # B x H x T x d, B = 16384 / T, H = 12, d = inner; causal
        shape = (max(1, 16384 // size), 12, size, inner)
        bound = math.sqrt(3.0)  # unit-variance scores after the 1/sqrt(d) scale, as our lesson
        def fn(q, k, v):
            s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
            j = torch.arange(s.shape[-1], device=s.device)
            return torch.softmax(s.masked_fill(j[None, :] > j[:, None], float("-inf")), dim=-1) @ v
        return (uniform(shape, -bound, bound), uniform(shape, -bound, bound), uniform(shape, -1, 1)), fn
    c = inner
    w_bound = lambda fan_in: 1.7 / math.sqrt(fan_in)
    if lesson == "attention_residual_layernorm":  # B x T x C, B = 16384 / T, 12 heads; causal
        def fn(x, g1, be1, w_qkv, b_qkv, w_proj, b_proj, g2, be2):
            b, t, c = x.shape
            qkv = torch.addmm(b_qkv, F.layer_norm(x, (c,), g1, be1, eps=1e-5).view(b * t, c), w_qkv)
            q, k, v = qkv.view(b, t, 3, 12, c // 12).permute(2, 0, 3, 1, 4)
            s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // 12))
            j = torch.arange(t, device=x.device)
            o = torch.softmax(s.masked_fill(j[None, :] > j[:, None], float("-inf")), dim=-1) @ v
            h = x + torch.addmm(b_proj, o.transpose(1, 2).reshape(b * t, c), w_proj).view(b, t, c)
            return h, F.layer_norm(h, (c,), g2, be2, eps=1e-5)
        gamma = lambda: uniform((c,), 0.5, 1.5)
        beta = lambda: uniform((c,), -0.5, 0.5)
        return (uniform((max(1, 16384 // size), size, c), -1, 3), gamma(), beta(),
                uniform((c, 3 * c), -w_bound(c), w_bound(c)), uniform((3 * c,), -0.5, 0.5),
                uniform((c, c), -w_bound(c), w_bound(c)), uniform((c,), -0.5, 0.5),
                gamma(), beta()), fn
    x = uniform((size, c), -2, 2)
    if lesson == "linear_gelu":
        return (x, uniform((c, 4 * c), -w_bound(c), w_bound(c)), uniform((4 * c,), -0.5, 0.5)), \
            lambda x, w, b: gelu(torch.addmm(b, x, w))
    if lesson == "layernorm_linear":
        def fn(x, g, be, w, b):
            return torch.addmm(b, F.layer_norm(x, (x.shape[-1],), g, be, eps=1e-5), w)
        return (x, uniform((c,), 0.5, 1.5), uniform((c,), -0.5, 0.5),
                uniform((c, 3 * c), -w_bound(c), w_bound(c)), uniform((3 * c,), -0.5, 0.5)), fn
    if lesson == "ffn":
        def fn(x, w1, b1, w2, b2):
            return torch.addmm(b2, gelu(torch.addmm(b1, x, w1)), w2)
        return (x, uniform((c, 4 * c), -w_bound(c), w_bound(c)), uniform((4 * c,), -0.5, 0.5),
                uniform((4 * c, c), -w_bound(4 * c), w_bound(4 * c)), uniform((c,), -0.5, 0.5)), fn
    raise ValueError(lesson)


def as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def rel_l2_error(outs, refs):
    """Our lessons' measure: ||out - ref|| / ||ref||, the reference's RMS counted as >= 1e-3."""
    err2 = ref2 = 0.0
    count = 0
    for o, r in zip(outs, refs):
        d = o.double() - r
        err2 += float((d * d).sum())
        ref2 += float((r * r).sum())
        count += r.numel()
    ref2 = max(ref2, count * 1e-6)
    return math.sqrt(err2 / ref2)


# ---- timing -----------------------------------------------------------------------------------
class Timer:
    """Chain times from the GPU's own kernel records (CUPTI, through torch.profiler): per
    repetition, the first kernel's start to the last kernel's end, as our `bench` measures a
    level. Each repetition: a read pass over 3x the L2 (cold), a GPU spin (the host enqueues the
    call meanwhile, so its Python overhead stays out), the call, a short spin that ends it."""

    def __init__(self, l2_bytes):
        self.flush = torch.empty(3 * l2_bytes // 4, dtype=torch.float32, device="cuda")
        self.flush.fill_(1.0)

    def median(self, call, reps, spin_us=2000):
        # The spin must outlast the host's enqueueing of the whole call, which the profiler slows
        # down (with 100 us, eager calls of two ops sometimes waited ~180 us for their second op).
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                self.flush.sum()
                torch.cuda._sleep(int(spin_us * 2000))
                call()
                torch.cuda._sleep(1)
            torch.cuda.synchronize()
        events = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                        key=lambda e: e.time_range.start)
        times, inside, first, last = [], False, None, None
        for e in events:
            if "spin" in e.name:  # spins alternate: one opens a repetition's call, one closes it
                if inside and first is not None:
                    times.append(last - first)
                inside, first, last = not inside, None, None
            elif inside:
                first = e.time_range.start if first is None else first
                last = max(last or 0.0, e.time_range.end)
        if len(times) != reps:
            raise RuntimeError(f"found {len(times)} of {reps} repetitions in the kernel records")
        times.sort()
        if times[int(0.8 * (len(times) - 1))] > 2 * times[int(0.2 * (len(times) - 1))]:
            print(f"  warning: a spread over 2x between p20 and p80 ({times[0]:.1f}..{times[-1]:.1f} us)",
                  flush=True)
        pick = lambda q: times[min(len(times) - 1, int(q * (len(times) - 1) + 0.5))]
        return {"median_us": round(pick(0.5), 3), "p20_us": round(pick(0.2), 3),
                "p80_us": round(pick(0.8), 3), "count": len(times)}


def copy_gbps(timer):
    """Copy bandwidth over 1 GiB moved (512 MiB read + 512 MiB written), cold, like our roof."""
    src = torch.empty(1 << 27, dtype=torch.float32, device="cuda").fill_(1.0)
    dst = torch.empty_like(src)
    t = timer.median(lambda: dst.copy_(src), 20)["median_us"]
    return round((2 << 29) / (t * 1e-6) / 1e9, 1)


def measure(lesson, precision, sizes, inner, timer, reps, peers, compiled, log):
    series = {p: [] for p in peers}
    tol = LESSONS[lesson][2 if precision == "fp32" else 3]
    gen = torch.Generator(device="cuda")
    for size in sizes:
        gen.manual_seed(size * 7919 + len(lesson))
        inputs, fn = make_case(lesson, size, inner, DTYPES[precision], gen)
        refs = reference(lesson, fn, inputs)
        for peer in peers:
            if peer in SDPA_PEERS:
                call = sdpa_call(lesson, peer, precision, inputs)
                if call is None:
                    continue
            elif peer == "eager":
                call = lambda: fn(*inputs)
            elif peer == "compile":
                call = lambda: compiled[lesson](*inputs)
            elif peer == "cuda_graph":
                call = graph_replay(fn, inputs)
            elif peer != "eager" and peer not in SDPA_PEERS:
                continue
            outs = as_tuple(call())  # also compiles / warms up
            torch.cuda.synchronize()
            err = rel_l2_error(outs, refs)
            point = {"size": size, "inner": inner}
            point.update(timer.median(call, reps))
            point.update({"rel_l2_error": float(f"{err:.3g}"), "passed": err <= tol})
            series[peer].append(point)
            log(f"{lesson:20s} {precision} {size:>9d} {peer:10s} {point['median_us']:10.2f} us"
                f"  err {err:.2e}{'' if err <= tol else '  FAILED'}")
        del inputs, refs
    return [{"lesson": lesson, "precision": precision, "peer": p, "label": LABELS[p], "points": pts}
            for p, pts in series.items() if pts]


def reference(lesson, fn, inputs):
    """The formula in float64; attention one head at a time, its sublayer one sequence at a time
    (the T x T scores in float64 would not fit at long T)."""
    if lesson == "attention_residual_layernorm":  # a sequence at a time, for the same reason
        x, params = inputs[0], [t.double() for t in inputs[1:]]
        outs = [fn(x[b:b + 1].double(), *params) for b in range(x.shape[0])]
        return tuple(torch.cat([o[i] for o in outs]) for i in range(2))
    if lesson != "attention":
        return as_tuple(fn(*(t.double() for t in inputs)))
    q, k, v = inputs
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            out[b, h] = fn(q[b, h].double(), k[b, h].double(), v[b, h].double())
    return (out,)


def sdpa_call(lesson, peer, precision, inputs):
    """F.scaled_dot_product_attention (causal) with its default backend or one pinned; None where
    the backend cannot run this lesson or precision (FlashAttention-2 takes no fp32)."""
    if lesson != "attention" or (peer == "sdpa_flash" and precision == "fp32"):
        return None
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"sdpa_flash": SDPBackend.FLASH_ATTENTION,
               "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION}.get(peer)

    def call():
        if backend is None:
            return F.scaled_dot_product_attention(*inputs, is_causal=True)
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(*inputs, is_causal=True)
    return call


def graph_replay(fn, inputs):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside capture (allocator, cuBLAS workspaces)
        fn(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = fn(*inputs)

    def replay():
        graph.replay()
        return static_out
    return replay


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="peer file to write (JSON)")
    ap.add_argument("--lessons", default=",".join(LESSONS))
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--sizes", help="override every lesson's sizes, e.g. 1M,16M")
    ap.add_argument("--peers", default="eager,compile,cuda_graph")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--inner", type=int, help="override the row length (attention: head size d)")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as in our lessons
    torch.backends.cudnn.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    timer = Timer(props.L2_cache_size)
    log = lambda line: print(line, flush=True)
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip().splitlines()[0]
    peers = args.peers.split(",")
    lessons = args.lessons.split(",")
    # torch.compile with static shapes (a kernel specialised per size, as for a model with fixed
    # shapes), compiled afresh per lesson and precision; the recompile limit must cover a grid.
    torch._dynamo.config.cache_size_limit = 64
    if hasattr(torch._dynamo.config, "recompile_limit"):
        torch._dynamo.config.recompile_limit = 64
    started = time.time()
    gbps = copy_gbps(timer)
    log(f"{props.name}: copy {gbps} GB/s; torch {torch.__version__}")
    series = []
    for lesson in lessons:
        sizes = [parse_size(s) for s in (args.sizes or LESSONS[lesson][0]).split(",")]
        for precision in args.precisions.split(","):
            torch._dynamo.reset()
            fn = make_case(lesson, 2, LESSONS[lesson][1], torch.float32, torch.Generator(device="cuda"))[1]
            compiled = {lesson: torch.compile(fn, dynamic=False)}
            inner = args.inner or LESSONS[lesson][1]
            lesson_peers = peers + [p for p in SDPA_PEERS if lesson == "attention" and p not in peers]
            series += measure(lesson, precision, sizes, inner, timer, args.reps, lesson_peers,
                              compiled, log)
    import triton
    doc = {
        "format": "fusionlab-peers",
        "schema_version": 1,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": {"name": props.name, "compute_capability": f"{props.major}.{props.minor}",
                   "sm_count": props.multi_processor_count, "driver": driver, "copy_gbps": gbps},
        "software": {"torch": torch.__version__.split("+")[0], "triton": triton.__version__,
                     "cuda": torch.version.cuda, "python": platform.python_version()},
        "timing": "cupti_activity",
        "cache": "cold",
        "series": series,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(args.out)), suffix=".tmp")
    with os.fdopen(fd, "w") as f:  # written whole, then renamed: never half a file
        json.dump(doc, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, args.out)
    failed = [f"{s['lesson']} {s['precision']} {s['peer']} {p['size']}" for s in series
              for p in s["points"] if not p["passed"]]
    log(f"wrote {args.out}: {len(series)} series in {time.time() - started:.0f} s"
        + (f"; {len(failed)} points over tolerance: {', '.join(failed[:5])}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
