#!/usr/bin/env python3
"""Summarises the counter-phase experiment of scripts/gpu-check.sh (stage `counters`).

For every (profiler kept enabled?, drain kernel, lesson, size, level): the chain's DRAM bytes
(read + written, CUPTI range profiler) against the textbook count, and the counter phase's
wall time per level. Inputs: counters_<keep>_<drain>_<lesson>.csv (bench --csv) and .err
(FL_TRACE_PHASES lines) in the results folder given as the only argument.
"""
import collections
import csv
import glob
import os
import re
import sys


def main(folder):
    rows = []
    for path in sorted(glob.glob(os.path.join(folder, "counters_*_*_*.csv"))):
        keep, drain, lesson = re.match(r"counters_([a-z0-9]+)_([a-z]+)_(\w+)\.csv", os.path.basename(path)).groups()
        chains = collections.OrderedDict()
        with open(path) as f:
            for r in csv.DictReader(f):
                key = (r["size"], r["level"])
                c = chains.setdefault(key, {"text": 0, "dram": 0, "missing": False})
                c["text"] += int(r["textbook_bytes_read"]) + int(r["textbook_bytes_written"])
                if r["dram_read_bytes"] == "" or r["dram_write_bytes"] == "":
                    c["missing"] = True
                else:
                    c["dram"] += int(r["dram_read_bytes"]) + int(r["dram_write_bytes"])
        err = path[:-4] + ".err"
        phase_ms, drained = [], []
        if os.path.exists(err):
            for line in open(err):
                m = re.search(r"\[phase\] counter phase \(level\)\s+([\d.]+) ms", line)
                if m:
                    phase_ms.append(float(m.group(1)))
                m = re.search(r"drain\(\w+\) rd (\d+) wr (\d+)", line)  # already in the CSV's last launch
                if m:
                    drained.append(int(m.group(2)))
        for i, ((size, level), c) in enumerate(chains.items()):
            ms = phase_ms[i] if i < len(phase_ms) else float("nan")
            dw = drained[i] if i < len(drained) else 0
            ratio = "n/a" if c["missing"] else "%+.1f%%" % (100.0 * (c["dram"] / c["text"] - 1.0))
            rows.append((keep, drain, lesson, size, level, ratio, "%.1f" % (dw / 1e6), "%.1f" % ms))
    print("counter phase: chain DRAM rd+wr vs textbook, by drain kernel and profiler enabling")
    print("%-5s %-6s %-20s %8s %5s %10s %12s %10s" % ("keep", "drain", "lesson", "size", "level",
                                                     "dram/text", "drain wr MB", "phase ms"))
    for r in rows:
        print("%-5s %-6s %-20s %8s %5s %10s %12s %10s" % r)


if __name__ == "__main__":
    main(sys.argv[1])
