#!/usr/bin/env python3
"""Reads the cluster step's stage times (FL_DECODE_CLUSTER_STAMPS=PREFIX leaves
PREFIX-<cache>.bin: kernels/gpt2_decode/cluster_step.cuh's ClusterStamp, 19 words a layer a
block, globaltimer ns but kClock's SM cycles) and prints, a layer a line, the medians over the
blocks of each part of the two stages (us) and when the layer's last head count and last MLP
count were released, from the step's first stamp.

  scripts/cluster-stamps.py PREFIX-512.bin   (scripts/cluster-check.sh runs it on the lent GPU)
"""
import statistics
import struct
import sys

LAYERS, STAMPS, HEADS = 12, 19, 96
(START, SEEN, INPUTS, BYTES, ROWS, B1, SPLIT, B2, RELEASED, MSEEN, MBYTES, MNORMED, MHIDDEN,
 MRELEASED, LOOP, CLOCK, MSENT, MSUMS, MINPUTS) = range(19)


def main(path):
    data = open(path, "rb").read()
    words = struct.unpack("<%dQ" % (len(data) // 8), data)
    blocks = len(words) // (LAYERS * STAMPS)
    at = lambda b, l, k: words[(b * LAYERS + l) * STAMPS + k]
    t0 = min(at(b, 0, MSEEN) for b in range(blocks))
    t0 = min([t0] + [at(b, 0, START) for b in range(HEADS)])
    us = lambda v: v / 1000.0
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    print("%d blocks; medians over blocks, us; 'last' columns from the step's first stamp" % blocks)
    cols = ["wait", "x in", "bytes", "ln+rows", "rows in", "split", "splits in", "proj+rel",
            "| m wait", "m x", "m bytes", "m ln", "m fc", "m out", "m sums in", "m add+rel", "| last head",
            "last mlp"]
    print("layer " + " ".join("%8s" % c for c in cols))
    rates = [(at(b, LAYERS - 1, CLOCK) - at(b, 0, CLOCK)) /
             max(1, at(b, LAYERS - 1, MSEEN) - at(b, 0, MSEEN)) for b in range(blocks)]
    print("SM clock, layer 0 to 11's MLP count seen: median %.0f MHz (%.0f-%.0f)" %
          (1000 * med(rates), 1000 * min(rates), 1000 * max(rates)))
    loops = [med([us(at(b, l, LOOP) - at(b, l, B1)) for b in range(HEADS)]) for l in range(LAYERS)]
    print("split's key loop, us a layer: " + " ".join("%.2f" % v for v in loops))
    for l in range(LAYERS):
        h = range(HEADS)
        parts = [med([us(at(b, l, k + 1) - at(b, l, k)) for b in h]) for k in range(START, RELEASED)]
        mstart = lambda b: at(b, l, RELEASED) if b < HEADS else (
            at(b, l - 1, MRELEASED) if l > 0 else t0)
        m = [med([us(at(b, l, MSEEN) - mstart(b)) for b in range(blocks)]),
             med([us(at(b, l, MINPUTS) - at(b, l, MSEEN)) for b in range(blocks)]),
             med([us(at(b, l, MBYTES) - at(b, l, MINPUTS)) for b in range(blocks)]),
             med([us(at(b, l, MNORMED) - at(b, l, MBYTES)) for b in range(blocks)]),
             med([us(at(b, l, MHIDDEN) - at(b, l, MNORMED)) for b in range(blocks)]),
             med([us(at(b, l, MSENT) - at(b, l, MHIDDEN)) for b in range(blocks)]),
             med([us(at(b, l, MSUMS) - at(b, l, MSENT)) for b in range(blocks)]),
             med([us(at(b, l, MRELEASED) - at(b, l, MSUMS)) for b in range(blocks)])]
        last_h = us(max(at(b, l, RELEASED) for b in h) - t0)
        last_m = us(max(at(b, l, MRELEASED) for b in range(blocks)) - t0)
        print("%5d " % l + " ".join("%8.2f" % v for v in parts + m + [last_h, last_m]))


if __name__ == "__main__":
    main(sys.argv[1])
