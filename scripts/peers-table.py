#!/usr/bin/env python3
"""docs/PERFORMANCE.md's "versus PyTorch" tables, from a recording folder and its peer file.

For every lesson and precision of the peer file: our level 0 and top level (the recording's
cold-L2 medians) beside PyTorch eager, torch.compile and the eager ops in a CUDA graph at the
same sizes, and the ratio "ours vs compile" (compile's time / our top level's: above 1.0 we are
faster). Prints Markdown.

  python3 scripts/peers-table.py assets/recordings/h100-2026-11-23
"""
import glob
import json
import os
import sys


def human(n):
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    folder = sys.argv[1]
    peers = json.load(open(os.path.join(folder, "peers.json")))
    ours = {}  # (lesson, precision, size) -> {level: median us}
    levels = {}
    for path in glob.glob(os.path.join(folder, "*_cold.json")):
        for m in json.load(open(path))["measurements"]:
            if m["cache"] != "cold":
                continue
            key = (m["lesson"], m["precision"], m["size"])
            ours.setdefault(key, {})[m["level"]] = m["chain_time_us"]["median"]
            levels[m["lesson"]] = max(levels.get(m["lesson"], 0), m["level"])
    dev, sw = peers["device"], peers["software"]
    print(f"Peers measured {peers['created_utc'][:10]} on {dev['name']} (driver {dev['driver']}), "
          f"PyTorch {sw['torch']}, Triton {sw['triton']}, CUDA {sw['cuda']}; cold L2, medians; "
          f"copy bandwidth {dev['copy_gbps']} GB/s in the same run. Our columns are the shipped "
          f"recording's. \"vs compile\" = torch.compile's time / our top level's (above 1.00x "
          f"ours is faster).\n")
    by = {}
    for s in peers["series"]:
        by.setdefault((s["lesson"], s["precision"]), {})[s["peer"]] = {p["size"]: p for p in s["points"]}
    for (lesson, precision), series in by.items():
        top = levels.get(lesson)
        if top is None:
            continue
        print(f"**{lesson}, {precision}** (µs)\n")
        print("| size | ours level 0 | ours top | eager | compile | CUDA graph | vs compile |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        sizes = sorted(set().union(*(pts.keys() for pts in series.values())))
        for size in sizes:
            mine = ours.get((lesson, precision, size), {})
            cell = lambda peer: f"{series[peer][size]['median_us']:.2f}" if size in series.get(peer, {}) else "–"
            l0, lt = mine.get(0), mine.get(top)
            ratio = (f"{series['compile'][size]['median_us'] / lt:.2f}x"
                     if lt and size in series.get("compile", {}) else "–")
            print(f"| {human(size)} | {l0:.2f} | {lt:.2f} | {cell('eager')} | {cell('compile')} | "
                  f"{cell('cuda_graph')} | {ratio} |" if l0 and lt else
                  f"| {human(size)} | – | – | {cell('eager')} | {cell('compile')} | {cell('cuda_graph')} | – |")
        print()


if __name__ == "__main__":
    main()
