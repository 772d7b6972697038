#!/usr/bin/env python3
"""The SASS lines with the most warp-stall samples in an ncu report's source page
(`ncu -i REP --page source --csv --print-source sass > FILE`), with their stall reasons.

  scripts/ncu-top-sass.py FILE [N]
"""
import csv
import sys


def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def main(path, n):
    rows = list(csv.reader(open(path, errors="replace")))
    at = next(i for i, r in enumerate(rows) if any("Warp Stall Sampling (All" in c for c in r))
    head, body = rows[at], [r for r in rows[at + 1:] if len(r) == len(rows[at])]
    samples = next(j for j, c in enumerate(head) if "Warp Stall Sampling (All" in c)
    source = next((j for j, c in enumerate(head) if c in ("Source", "SASS")), 1)
    address = next((j for j, c in enumerate(head) if c == "Address"), 0)
    total = sum(num(r[samples]) for r in body) or 1.0
    print("%d lines, %.0f samples" % (len(body), total))
    for r in sorted(body, key=lambda r: -num(r[samples]))[:n]:
        print("%6.2f%%  %s  %s" % (100 * num(r[samples]) / total, r[address], r[source][:100]))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 50)
