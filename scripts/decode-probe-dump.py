#!/usr/bin/env python3
"""Reads the gpt2_decode megakernel's probe stamps of one cold step, as FL_DECODE_PROBE_DUMP
writes them (kernels/gpt2_decode/workspace.cuh: `fusionlab bench --lesson gpt2_decode --levels 4
--phases` with FL_DECODE_PROBE_DUMP=PREFIX leaves PREFIX-<cache>.bin, the stamps of the launch
whose task records the bench keeps), beside the task list the same build prints:

    fusionlab lessons --tasks gpt2_decode --sms 132 --cache 512 > tasks.txt
    scripts/decode-probe-dump.py PREFIX-512.bin tasks.txt [--over 1.0]

For each layer and task kind: the tasks' start and end against the step's first ask, the median
running time (started to ended) and the mean of the six slots (model.h's ProbeSlot: counter,
copy, inputs, compute, outputs, release); then each task that ran more than --over us past its
stage's median, with its block, its slots and its block's next task. With --release, instead:
for each layer and task kind, the release (the count's red.release, model.h's kStampReleaseFrom
to kStampEnded) by what the releasing thread saw of its block's next bulk copy (kStampNextCopy):
none in flight, landed before the release, landed during it, still in flight after it.
Microseconds throughout.
"""
import argparse
import re
import statistics
import struct

KINDS = ["ln1+qkv", "attention", "proj", "ln2+mlp", "ln_f"]
SLOTS = ["counter", "copy", "inputs", "compute", "outputs", "release"]
SUMS = len(KINDS) * (len(SLOTS) + 1)  # model.h's kProbeSums
STAMPS = 14                           # model.h's kProbeStamps: before, read, asked, seen, ...
ASKED, STARTED, WRITTEN, ENDED, NEXT_COPY, RELEASE_FROM = 2, 4, 7, 8, 12, 13
COPY_STATES = ["none", "before", "during", "after"]  # the next copy: none, landed before, ...


def read_tasks(path):
    """Task index -> (block, layer, kind, description) from `fusionlab lessons --tasks`."""
    tasks, block = {}, -1
    for line in open(path):
        m = re.match(r"block (\d+): \d+ tasks", line)
        if m:
            block = int(m.group(1))
            continue
        m = re.match(r"\s+#(\d+)\s+(.*?)\s+waits ", line)
        if not m:
            continue
        text = m.group(2)
        layer = re.match(r"layer (\d+) (\S+)", text)
        kind = KINDS.index(layer.group(2)) if layer else KINDS.index("ln_f")
        tasks[int(m.group(1))] = (block, int(layer.group(1)) if layer else 11, kind, text)
    return tasks


def read_stamps(path, blocks, count):
    raw = open(path, "rb").read()
    words = struct.unpack("<%dQ" % (len(raw) // 8), raw)
    at = SUMS + blocks * len(SLOTS)
    if len(words) != at + count * STAMPS:
        raise SystemExit("%s: %d words, not the %d of %d tasks on %d blocks" %
                         (path, len(words), at + count * STAMPS, count, blocks))
    return [words[at + i * STAMPS:at + (i + 1) * STAMPS] for i in range(count)]


def slots(st):
    return [(st[ASKED + s + 1] - st[ASKED + s]) / 1e3 for s in range(len(SLOTS))]


def report(tasks, stamps, over):
    t0 = min(st[ASKED] for st in stamps)
    stages = {}
    for i, (block, layer, kind, _) in tasks.items():
        stages.setdefault((layer, kind), []).append(i)
    for (layer, kind), ids in sorted(stages.items()):
        run = {i: (stamps[i][ENDED] - stamps[i][STARTED]) / 1e3 for i in ids}
        med = statistics.median(run.values())
        mean = [statistics.mean(slots(stamps[i])[s] for i in ids) for s in range(len(SLOTS))]
        print("layer %2d %-9s %3d tasks, start %7.2f-%7.2f, end %7.2f, running %.2f: %s" % (
            layer, KINDS[kind], len(ids), (min(stamps[i][STARTED] for i in ids) - t0) / 1e3,
            (max(stamps[i][STARTED] for i in ids) - t0) / 1e3,
            (max(stamps[i][ENDED] for i in ids) - t0) / 1e3, med,
            " ".join("%s %.2f" % (n, v) for n, v in zip(SLOTS, mean))))
        for i in sorted((i for i in ids if run[i] > med + over), key=lambda i: -run[i]):
            nxt = tasks.get(i + 1)
            print("    #%-5d block %3d ran %.2f: %s; next: %s" % (
                i, tasks[i][0], run[i], " ".join("%.2f" % v for v in slots(stamps[i])),
                nxt[3] if nxt and nxt[0] == tasks[i][0] else "-"))


def copy_state(st):
    bits = st[NEXT_COPY]
    if not bits & 1:
        return "none"
    return "before" if bits & 2 else "during" if bits & 4 else "after"


def release_report(tasks, stamps):
    """Per stage: the release's count, median and max by the next copy's state."""
    stages = {}
    for i, (_, layer, kind, _) in tasks.items():
        stages.setdefault((layer, kind), []).append(i)
    total = {}
    for (layer, kind), ids in sorted(stages.items()):
        cols = []
        for state in COPY_STATES:
            rel = [(stamps[i][ENDED] - stamps[i][RELEASE_FROM]) / 1e3 for i in ids
                   if copy_state(stamps[i]) == state]
            total.setdefault((kind, state), []).extend(rel)
            cols.append("%s %3d %s" % (state, len(rel), "med %.2f max %.2f" % (
                statistics.median(rel), max(rel)) if rel else "-" * 18))
        print("layer %2d %-9s %s" % (layer, KINDS[kind], " | ".join(cols)))
    for (kind, state), rel in sorted(total.items()):
        if rel:
            print("all %-9s %-6s %4d: median %.2f, mean %.2f, p90 %.2f, max %.2f, >2 us %d" % (
                KINDS[kind], state, len(rel), statistics.median(rel), statistics.mean(rel),
                sorted(rel)[int(0.9 * (len(rel) - 1))], max(rel), sum(r > 2 for r in rel)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dump")
    p.add_argument("tasks")
    p.add_argument("--over", type=float, default=1.0, help="list tasks this far past the median")
    p.add_argument("--release", action="store_true", help="the release by the next copy's state")
    a = p.parse_args()
    tasks = read_tasks(a.tasks)
    blocks = 1 + max(b for b, _, _, _ in tasks.values())
    stamps = read_stamps(a.dump, blocks, len(tasks))
    if a.release:
        release_report(tasks, stamps)
    else:
        report(tasks, stamps, a.over)


if __name__ == "__main__":
    main()
