#!/usr/bin/env python3
"""Lesson 9's flash levels against PyTorch's SDPA backends, as a Markdown table.

Reads `fusionlab bench --lesson attention --csv` files and `scripts/peers.py --lessons attention`
peer files (one pair per head size d, same GPU and call) and prints, per T: each flash level's
median time and TFLOP/s (causal: 2 B H T^2 d with B = 16384 / T, H = 12), SDPA's default backend
(cuDNN on an H100 in bf16) and its FlashAttention-2 backend, and the ratios (> 1: ours faster).

  python3 scripts/attention-table.py --bench b64.csv b128.csv --peers p64.json p128.json
"""
import argparse
import csv
import json


def tflops(t_len, dim, us):
    return 2.0 * (16384 // t_len) * 12 * t_len * t_len * dim / (us * 1e-6) / 1e12 if us else 0.0


def variants_table(paths, peer_paths):
    """Level 2's variants (one bench CSV per forced variant) against SDPA: per precision and d,
    each variant's time and TFLOP/s, SDPA's backends, and each variant's ratio to FA2 (bf16) or
    to the memory-efficient backend (fp32)."""
    ours = {}  # (precision, d, T, variant) -> median us
    for path in paths:
        with open(path) as f:
            for row in csv.DictReader(f):
                if row["lesson"] == "attention" and row["level"] == "2" and \
                        row["correct"] in ("1", "true", "yes"):
                    ours[(row["precision"], int(row["inner"]), int(row["size"]),
                          row["variant"])] = float(row["chain_time_median_us"])
    peers = {}  # (precision, d, T, peer) -> median us
    for path in peer_paths:
        with open(path) as f:
            for s in json.load(f)["series"]:
                for p in s["points"]:
                    if s["lesson"] == "attention" and p.get("passed", True):
                        peers[(s["precision"], int(p["inner"]), int(p["size"]), s["peer"])] = \
                            float(p["median_us"])
    for prec, dim in sorted({k[:2] for k in ours}):
        variants = sorted({k[3] for k in ours if k[:2] == (prec, dim)})
        sdpa = ["sdpa", "sdpa_flash", "sdpa_efficient"] if prec == "bf16" else ["sdpa_efficient"]
        ref = "sdpa_flash" if prec == "bf16" else "sdpa_efficient"
        print(f"\n{prec}, d = {dim}: level 2 variants, us (TFLOP/s); ratio = {ref} / ours\n")
        print("| T | " + " | ".join(variants + sdpa) + " | " +
              " | ".join(f"{v} vs {ref}" for v in variants) + " |")
        print("|---" * (1 + 2 * len(variants) + len(sdpa)) + "|")
        for t_len in sorted({k[2] for k in ours if k[:2] == (prec, dim)}):
            cell = lambda us: f"{us:.1f} ({tflops(t_len, dim, us):.0f})" if us else "-"
            mine = [ours.get((prec, dim, t_len, v), 0.0) for v in variants]
            theirs = [peers.get((prec, dim, t_len, p), 0.0) for p in sdpa]
            base = peers.get((prec, dim, t_len, ref), 0.0)
            ratios = [f"{base / us:.2f}x" if us and base else "-" for us in mine]
            print(f"| {t_len} | " + " | ".join(cell(u) for u in mine + theirs) + " | " +
                  " | ".join(ratios) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", nargs="+", required=True)
    ap.add_argument("--peers", nargs="+", required=True)
    ap.add_argument("--variants", action="store_true",
                    help="level 2's variants (bench CSVs with --variant forced) instead")
    args = ap.parse_args()
    if args.variants:
        variants_table(args.bench, args.peers)
        return
    ours = {}  # (d, T, level) -> (median us, variant)
    for path in args.bench:
        with open(path) as f:
            for row in csv.DictReader(f):
                if row["lesson"] != "attention" or row["correct"] not in ("1", "true", "yes"):
                    continue
                key = (int(row["inner"]), int(row["size"]), int(row["level"]))
                ours[key] = (float(row["chain_time_median_us"]), row["variant"] or "-")
    peers = {}  # (d, T, peer) -> median us
    for path in args.peers:
        with open(path) as f:
            doc = json.load(f)
        for s in doc["series"]:
            for p in s["points"]:
                if s["lesson"] == "attention" and s["precision"] == "bf16" and p.get("passed", True):
                    peers[(int(p["inner"]), int(p["size"]), s["peer"])] = float(p["median_us"])
    for dim in sorted({k[0] for k in ours}):
        print(f"\nbf16, d = {dim}, causal, B T = 16384, H = 12 (times in us, TFLOP/s in brackets)\n")
        print("| T | flash L2 | Hopper flash L3 (variant) | SDPA cuDNN | SDPA FA2 | L3 vs cuDNN |"
              " L3 vs FA2 | L2 vs FA2 |")
        print("|---|---|---|---|---|---|---|---|")
        for t_len in sorted({k[1] for k in ours if k[0] == dim}):
            l2, _ = ours.get((dim, t_len, 2), (0.0, ""))
            l3, variant = ours.get((dim, t_len, 3), (0.0, ""))
            cudnn = peers.get((dim, t_len, "sdpa"), 0.0)
            fa2 = peers.get((dim, t_len, "sdpa_flash"), 0.0)
            cell = lambda us: f"{us:.1f} ({tflops(t_len, dim, us):.0f})" if us else "-"
            ratio = lambda a, b: f"{b / a:.2f}x" if a and b else "-"
            print(f"| {t_len} | {cell(l2)} | {cell(l3)} {variant} | {cell(cudnn)} | {cell(fa2)} |"
                  f" {ratio(l3, cudnn)} | {ratio(l3, fa2)} | {ratio(l2, fa2)} |")


if __name__ == "__main__":
    main()
