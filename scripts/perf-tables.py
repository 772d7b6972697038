#!/usr/bin/env python3
"""The measured tables of docs/PERFORMANCE.md and README.md, written from the shipped recordings.

Reads a recording folder (default: the newest under assets/recordings/, the one the app opens
without a GPU), its peer file (peers.json, PyTorch's times) when there is one, and the lesson
catalog (assets/lessons/catalog.json) for titles, units and level names. Rewrites every
generated section of the two files, the text between

    <!-- generated: NAME -->
    <!-- end generated -->

and leaves everything else as it is. Sections:

    readme-summary     README's "Measured" table: a row per lesson (bf16, cold L2)
    summary            PERFORMANCE.md's summary: the same, fp32 and bf16
    lesson ID          PERFORMANCE.md's tables of one lesson: every recorded size, level,
                       precision and cache mode, the top level's kernels, the peers
    variants ID        the kernel variants the catalog declares for one lesson, and where each
                       runs
    other-recordings   a summary of every other folder under assets/recordings/

A lesson that is recorded but has no `lesson ID` section in PERFORMANCE.md gets one (a heading
and the section) above the line `<!-- new lesson sections go above this line -->`; a section
whose lesson is not recorded says so. Figures that come from elsewhere (Nsight Compute, latency,
soaks) are written by hand outside the generated sections, with GPU, driver, date and command.

  python3 scripts/perf-tables.py                      rewrite the sections from the recordings
  python3 scripts/perf-tables.py --check              exit 1 (and show the difference) when a
                                                      committed table is not what the recordings say
  python3 scripts/perf-tables.py --recordings DIR --root ROOT   another folder or checkout
"""
import argparse
import difflib
import glob
import json
import os
import re
import sys

BEGIN = re.compile(r"^<!-- generated: (.+?) -->$")
END = "<!-- end generated -->"
NEW_LESSONS = "<!-- new lesson sections go above this line -->"
PEER_ORDER = ["eager", "compile", "cuda_graph", "sdpa", "sdpa_flash", "sdpa_efficient"]
PEER_NAMES = {"eager": "eager", "compile": "torch.compile", "cuda_graph": "CUDA graph",
              "sdpa": "SDPA", "sdpa_flash": "SDPA flash", "sdpa_efficient": "SDPA efficient"}
VERSUS = ["compile", "sdpa", "sdpa_flash"]  # the peers the top level is measured against
# Library kernels named by their library, not their generated names.
LIBRARY = re.compile(r"^(nvjet|cutlass|sm\d+_xmma|Kernel2|gemmSN|globalKernel|splitKreduce|"
                     r"gemv|kernel$|cublas|ampere_|sm\d+_)")
LEVEL = 0.03  # within 3% either way, two levels are "level"
COMPUTE_BOUND = 100.0  # FLOP per textbook byte above which a level is rated in TFLOP/s


# ---- reading

def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"perf-tables: cannot read {path}: {e}")


def recording_folders(root):
    return sorted(d for d in glob.glob(os.path.join(root, "assets", "recordings", "*"))
                  if os.path.isdir(d))


def newest_folder(root):
    folders = recording_folders(root)
    if not folders:
        sys.exit(f"perf-tables: no recording folder under {root}/assets/recordings")

    def newest(d):  # as the app picks (app/gui/backend_choice.cpp): the latest session file's
        # date, of equal dates the later folder name
        stamps = [data.get("created_utc", "") for data in map(load_json, glob.glob(
            os.path.join(d, "*.json"))) if data.get("format") == "fusionlab-session"]
        return max(stamps or [""]), d
    return max(folders, key=newest)


class Recording:
    """Every measurement of one folder, keyed (lesson, mode, size, level); a mode is (precision,
    cache, inner), inner the row length (0 for element-wise lessons; attention's head size)."""

    def __init__(self, folder):
        self.folder = folder
        self.points = {}
        self.device = None
        self.stamps = []
        self.lesson_stamps = {}  # lesson -> the created_utc of the files that record it
        for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
            data = load_json(path)
            if data.get("format") != "fusionlab-session":
                continue
            self.device = self.device or data.get("device", {})
            self.stamps.append(data.get("created_utc", ""))
            for m in data.get("measurements", []):
                stamps = self.lesson_stamps.setdefault(m["lesson"], [])
                if data.get("created_utc", "") not in stamps:
                    stamps.append(data.get("created_utc", ""))
                key = (m["lesson"], (m["precision"], m["cache"], m.get("inner", 0)), m["size"],
                       m["level"])
                self.points[key] = m  # a later file wins, as in the app's replay
        peer_path = os.path.join(folder, "peers.json")
        self.peers = load_json(peer_path) if os.path.exists(peer_path) else None
        self.peer_points = {}  # (lesson, precision, inner, peer) -> {size: point}
        for s in (self.peers or {}).get("series", []):
            for p in s["points"]:
                if p.get("passed", True):
                    key = (s["lesson"], s["precision"], p.get("inner", 0), s["peer"])
                    self.peer_points.setdefault(key, {})[p["size"]] = p

    def lessons(self):
        return sorted({k[0] for k in self.points})

    def top(self, lesson):
        return max(k[3] for k in self.points if k[0] == lesson)

    def sizes(self, lesson, mode):
        return sorted({k[2] for k in self.points if k[:2] == (lesson, mode)})

    def modes(self, lesson):
        """bf16 cold, fp32 cold, fp32 warm, then any other; each inner in turn."""
        order = ["bf16 cold", "fp32 cold", "fp32 warm", "bf16 warm"]
        rank = lambda m: (order.index(f"{m[0]} {m[1]}") if f"{m[0]} {m[1]}" in order else 9, m)
        return sorted({k[1] for k in self.points if k[0] == lesson}, key=rank)

    def mode(self, lesson, precision, cache, inner):
        """The recorded mode of this precision and cache: at `inner` if recorded, else the first."""
        have = [m for m in self.modes(lesson) if m[:2] == (precision, cache)]
        return next((m for m in have if m[2] == inner), have[0] if have else None)

    def get(self, lesson, mode, size, level):
        return self.points.get((lesson, mode, size, level))

    def peers_of(self, lesson, mode):
        return {k[3] for k in self.peer_points if k[:3] == (lesson, mode[0], mode[2])}

    def peer(self, lesson, mode, peer, size):
        return self.peer_points.get((lesson, mode[0], mode[2], peer), {}).get(size)


# ---- figures of one measurement

def correct(m):
    """The measurement if its output passed the fp64 check: no ratio is shown for a wrong one."""
    return m if m and m.get("check", {}).get("passed", True) else None


def median(m):
    return m["chain_time_us"]["median"]


def textbook_bytes(m):
    return sum(l["textbook_bytes_read"] + l["textbook_bytes_written"] for l in m["launches"])


def flops(m):
    return sum(l.get("textbook_flops", 0) for l in m["launches"])


def pct_copy(m):
    copy = m.get("chain_copy_gbps") or 0
    return 100.0 * textbook_bytes(m) / (median(m) * 1e3) / copy if copy else None


def dram_vs_textbook(m):
    """The bytes CUPTI's counters saw reach DRAM over the textbook bytes, when counted."""
    if m.get("counters_status") != "measured":
        return "–"
    dram = sum(l.get("counters", {}).get("dram_read_bytes", 0) +
               l.get("counters", {}).get("dram_write_bytes", 0) for l in m["launches"])
    return ratio(dram, textbook_bytes(m))


def rate(m):
    """% of copy bandwidth, or TFLOP/s where the level is compute-bound."""
    if flops(m) > COMPUTE_BOUND * textbook_bytes(m):
        return f"{flops(m) / (median(m) * 1e6):.0f} TFLOP/s"
    p = pct_copy(m)
    return f"{p:.0f}%" if p is not None else "–"


def kernels(m, variants=()):
    """What ran: each launch's variant when the recording names it, else the variant whose kernel
    function CUPTI named (the catalog's variants), else CUPTI's kernel names."""
    names = [l["variant"] for l in m["launches"] if l.get("variant")]
    if not names:
        for r in m.get("records", []):
            name = r["kernel"].split("<")[0].split("(")[0].strip().split(" ")[-1].split("::")[-1]
            variant = next((v["name"] for v in variants if v.get("function") == name), None)
            names.append(variant or ("cuBLASLt" if LIBRARY.match(name) else name))
    return " + ".join(dict.fromkeys(names)) or "–"


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "–"


def human(n):
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def short_gpu(name):
    return name.replace("NVIDIA ", "")


def day(stamp):
    return stamp[:10]


# ---- the catalog

class Catalog:
    def __init__(self, root):
        path = os.path.join(root, "assets", "lessons", "catalog.json")
        data = load_json(path) if os.path.exists(path) else {"lessons": []}
        self.order = [l["id"] for l in data["lessons"]]
        self.info = {l["id"]: l for l in data["lessons"]}

    def number(self, lesson):
        return self.order.index(lesson) + 1 if lesson in self.order else None

    def title(self, lesson):
        return self.info.get(lesson, {}).get("title", lesson)

    def unit(self, lesson):
        return self.info.get(lesson, {}).get("size_axis", {}).get("unit", "size")

    def inner(self, lesson):
        return self.info.get(lesson, {}).get("size_axis", {}).get("inner_default", 0)

    def inner_name(self, lesson):
        return self.info.get(lesson, {}).get("size_axis", {}).get("inner_name") or "row length"

    def variants(self, lesson, level=None):
        """The kernel variants the catalog declares (for one level, or every level's)."""
        levels = self.info.get(lesson, {}).get("levels", [])
        return [dict(v, level=l["level"]) for l in levels for v in l.get("variants", [])
                if level is None or l["level"] == level]

    def level_name(self, lesson, level):
        for l in self.info.get(lesson, {}).get("levels", []):
            if l["level"] == level:
                return l["name"]
        return ""

    def ordered(self, lessons):
        known = [l for l in self.order if l in lessons]
        return known + sorted(set(lessons) - set(known))


# ---- the sections

def crossover(rec, lesson, mode, unit):
    """Where the top level beats the level below it (by more than LEVEL), is level with it, or is
    slower, as stretches of the recorded sizes."""
    top = rec.top(lesson)
    wins = []
    for size in rec.sizes(lesson, mode):
        a, b = (correct(rec.get(lesson, mode, size, l)) for l in (top, top - 1))
        if a and b:
            r = median(b) / median(a)
            wins.append((size, "faster" if r >= 1 + LEVEL else "slower" if r <= 1 - LEVEL else
                         "level"))
    if not wins:
        return "–", []
    runs = []  # [won, first size, last size] for each stretch of consecutive sizes
    for size, won in wins:
        if runs and runs[-1][0] == won:
            runs[-1][2] = size
        else:
            runs.append([won, size, size])
    if len(runs) == 1:
        return f"{runs[0][0]} at every size", wins
    if len(runs) == 2:
        first, second = runs
        return f"{first[0]} up to {human(first[2])}, {second[0]} from {human(second[1])} {unit}", wins
    span = lambda r: human(r[1]) if r[1] == r[2] else f"{human(r[1])}-{human(r[2])}"
    parts = [f"{word} at " + ", ".join(span(r) for r in runs if r[0] == word)
             for word in ("faster", "level", "slower") if any(r[0] == word for r in runs)]
    return "; ".join(parts) + f" {unit}", wins


def headline_sizes(rec, lesson, mode):
    """The largest size; for a lesson with a crossover, the smallest as well."""
    sizes = rec.sizes(lesson, mode)
    _, wins = crossover(rec, lesson, mode, "")
    crosses = len({w for _, w in wins} - {"level"}) > 1
    return [sizes[0], sizes[-1]] if crosses and len(sizes) > 1 else sizes[-1:]


def summary_cells(rec, cat, lesson, precision, cache):
    unit = cat.unit(lesson)
    mode = rec.mode(lesson, precision, cache, cat.inner(lesson))
    if mode is None:
        return None
    top = rec.top(lesson)
    sizes = headline_sizes(rec, lesson, mode)
    at = lambda size, level: rec.get(lesson, mode, size, level)
    vs0, vsc, rates = [], [], []
    for s in sizes:
        t, z = correct(at(s, top)), correct(at(s, 0))
        vs0.append(ratio(median(z), median(t)) if t and z else "–")
        c, sdpa = (rec.peer(lesson, mode, p, s) for p in ("compile", "sdpa"))
        cell = ratio(c["median_us"], median(t)) if c and t else "–"
        vsc.append(cell + (f" (SDPA {ratio(sdpa['median_us'], median(t))})" if sdpa and t else ""))
        rates.append(rate(t) if t else "–")
    cross = crossover(rec, lesson, mode, unit)[0]
    j = " / ".join
    return [j(human(s) for s in sizes) + f" {unit}", j(vs0), j(vsc), j(rates), cross]


def lesson_label(cat, lesson):
    n = cat.number(lesson)
    return f"{n}. {lesson}" if n else lesson


def summary_table(rec, cat, modes, gpu_column=True):
    head = ["lesson", "recorded on" if gpu_column else None,
            "precision" if len(modes) > 1 else None, "size",
            "top vs level 0", "top vs torch.compile", "top: % of copy bandwidth (or TFLOP/s)",
            "top vs the level below it"]
    head = [h for h in head if h]
    rows = []
    for lesson in cat.ordered(rec.lessons()):
        for precision, cache in modes:
            cells = summary_cells(rec, cat, lesson, precision, cache)
            if cells is None:
                continue
            gpu = (f"{short_gpu(rec.device.get('name', '?'))}, "
                   f"{day(max(rec.lesson_stamps.get(lesson, rec.stamps)))}")
            rows.append([lesson_label(cat, lesson)] + ([gpu] if gpu_column else [])
                        + ([precision] if len(modes) > 1 else []) + cells)
    return table(head, rows)


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def span_text(stamps, dash):
    """'2026-11-27 01:58-19:19 UTC', or with both dates where the span crosses a day."""
    first, last = stamps[0][:16].replace("T", " "), stamps[-1][:16].replace("T", " ")
    if first == last:
        return f"{first} UTC"
    if first[:10] == last[:10]:
        return f"{first}{dash}{last[11:]} UTC"
    return f"{first} UTC to {last} UTC"


def device_line(rec):
    d = rec.device
    stamps = sorted(rec.stamps)
    counts = sorted(m.get("repetitions", 0) for m in rec.points.values())
    reps = f"{counts[0]}-{counts[-1]}" if counts[0] != counts[-1] else str(counts[0])
    span = span_text(stamps, "–")
    return (f"Recorded on an {d.get('name', '?')} (compute capability {d.get('compute_capability')}, "
            f"{d.get('sm_count')} SMs, {d.get('l2_bytes', 0) >> 20} MiB L2; CUDA runtime "
            f"{d.get('runtime_version', 0) // 1000}.{d.get('runtime_version', 0) % 1000 // 10}), "
            f"{span}, medians of {reps} repetitions a point, copy bandwidth "
            f"{d.get('roof_gbps', 0):.0f} GB/s over 1 GiB with a cold L2; "
            f"`{os.path.relpath(rec.folder, ROOT)}/`.")


def short_device_line(rec, lesson=None):
    stamps = sorted(rec.lesson_stamps.get(lesson, rec.stamps))
    return f"Recorded on an {rec.device.get('name', '?')}, {span_text(stamps, '-')}; medians in µs."


LEGEND = ("How to read the lesson tables: times are medians of the chain time (the first launch's "
          "start to the last launch's end) in µs; \"top vs Ln\" is level n's time over the top "
          "level's (above 1.00x the top level is faster); \"byte limit\" is level 0's textbook "
          "bytes over the top level's, the speedup fusion can reach when every kernel runs at copy "
          "speed; \"top: % of copy\" is the top level's textbook bytes per second against a copy "
          "of as many bytes in the same run (TFLOP/s where it does more than 100 FLOP a byte); "
          "\"DRAM / textbook bytes\" is what CUPTI's counters saw the top level read and write in "
          "DRAM over its textbook bytes (below 1 where data stays in L2; at a few KB a fixed few "
          "tens of KB of other traffic dominate); \"top runs\" names the kernels the top level "
          "launched at that size (its variants, where the recording names them).")


def peers_measured_utc(peers, lesson=None):
    """When the peers of `lesson` were measured: a joined peer file lists its runs in
    `merged_from` (docs/SESSION_FORMAT.md, "Peer files"); otherwise the file's created_utc."""
    for part in peers.get("merged_from", []) if lesson else []:
        if lesson in part.get("lessons", []):
            return part["created_utc"]
    return peers["created_utc"]


def peers_line(rec):
    p = rec.peers
    if not p:
        return "No peer file in this recording folder: PyTorch's columns are empty."
    d, sw = p["device"], p["software"]
    return (f"Peers (`scripts/peers.py`): PyTorch {sw.get('torch')}, Triton {sw.get('triton')}, "
            f"CUDA {sw.get('cuda')}, on an {d.get('name')} (driver {d.get('driver')}), "
            f"{p['created_utc'][:16].replace('T', ' ')} UTC, cold L2, medians of each point's "
            f"repetitions; a separate run from ours, so a \"vs\" ratio spans two runs."
            + (" The file joins runs of several dates: each lesson's section gives its own."
               if p.get("merged_from") else ""))


def summary_section(rec, cat):
    return [device_line(rec), peers_line(rec), "",
            *summary_table(rec, cat, [("bf16", "cold"), ("fp32", "cold")], gpu_column=False), "",
            "Each ratio is a time over the top level's time at that size (above 1.00x the top "
            "level is faster); where the top level's advantage over the level below it changes "
            "sign, the smallest and the largest recorded sizes are both shown. Sections below: "
            "every size.", "", LEGEND]


def readme_section(rec, cat):
    return summary_table(rec, cat, [("bf16", "cold")])


def lesson_table(rec, cat, lesson, mode):
    unit = cat.unit(lesson)
    top = rec.top(lesson)
    levels = list(range(top + 1))
    have = rec.peers_of(lesson, mode) if mode[1] == "cold" else set()
    peers = [p for p in PEER_ORDER if p in have] + sorted(have - set(PEER_ORDER))
    head = [unit] + [f"L{l} µs" for l in levels] + ["top vs L0"]
    head += [f"top vs L{top - 1}"] if top >= 2 else []
    head += ["byte limit", "top: % of copy", "top: DRAM / textbook bytes", "top runs"]
    head += [f"{PEER_NAMES.get(p, p)} µs" for p in peers]
    versus = [p for p in VERSUS if p in peers]
    head += [f"top vs {PEER_NAMES[p]}" for p in versus]
    rows = []
    for size in rec.sizes(lesson, mode):
        ms = [rec.get(lesson, mode, size, l) for l in levels]
        cells = [human(size)]
        for m in ms:
            mark = "" if not m or correct(m) else " (wrong)"
            cells.append(f"{median(m):.2f}{mark}" if m else "–")
        ms = [correct(m) for m in ms]  # the ratios leave a wrong level out
        t = ms[-1]
        cells.append(ratio(median(ms[0]), median(t)) if ms[0] and t else "–")
        if top >= 2:
            cells.append(ratio(median(ms[-2]), median(t)) if ms[-2] and t else "–")
        cells.append(ratio(textbook_bytes(ms[0]), textbook_bytes(t)) if ms[0] and t else "–")
        cells.append(rate(t) if t else "–")
        cells.append(dram_vs_textbook(t) if t else "–")
        cells.append(kernels(t, cat.variants(lesson, top)) if t else "–")
        for p in peers:
            pt = rec.peer(lesson, mode, p, size)
            cells.append(f"{pt['median_us']:.2f}" if pt else "–")
        for p in versus:
            c = rec.peer(lesson, mode, p, size)
            cells.append(ratio(c["median_us"], median(t)) if c and t else "–")
        rows.append(cells)
    return table(head, rows)


def lesson_section(rec, cat, lesson):
    if lesson not in rec.lessons():
        return [f"No recording of `{lesson}` in `{os.path.relpath(rec.folder, ROOT)}/` yet."]
    top = rec.top(lesson)
    names = ", ".join(f"L{l} = {cat.level_name(lesson, l) or '?'}" for l in range(top + 1))
    out = [f"Levels: {names}. {short_device_line(rec, lesson)} Columns as in the summary's legend."]
    modes = rec.modes(lesson)
    for mode in modes:
        tol = {m.get("check", {}).get("tolerance") for k, m in rec.points.items()
               if k[:2] == (lesson, mode)} - {None}
        within = (f" (every output checked against an fp64 reference: relative L2 error within "
                  f"{max(tol):g})") if tol else ""
        inner = (f", {cat.inner_name(lesson)} = {mode[2]}"
                 if len({m[2] for m in modes}) > 1 else "")
        out += ["", f"**{mode[0]}, {mode[1]} L2{inner}**{within}", ""]
        out += lesson_table(rec, cat, lesson, mode)
        if top >= 1:
            cross = crossover(rec, lesson, mode, cat.unit(lesson))[0]
            out += ["", f"Top level against level {top - 1 if top >= 2 else 0}: {cross}."]
    if any(rec.peers_of(lesson, m) for m in modes):
        p = rec.peers
        out += ["", f"Peers: PyTorch {p['software'].get('torch')} on an {p['device'].get('name')}, "
                f"{peers_measured_utc(p, lesson)[:16].replace('T', ' ')} UTC (a separate run; the summary says "
                "how they are measured)."]
    return out


# ---- rewriting the files

def rewrite(text, make, path):
    """Replaces the body of every generated section in `text` by make(name)."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        out.append(lines[i])
        m = BEGIN.match(lines[i].strip())
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == END), None)
        if end is None:
            sys.exit(f"perf-tables: {path}: '{lines[i].strip()}' has no '{END}' after it")
        out += make(m.group(1).strip()) + [""]  # a blank line ends a table before the marker
        out.append(END)
        i = end + 1
    return "\n".join(out)


def add_missing_lessons(text, rec, cat, path):
    present = set(re.findall(r"<!-- generated: lesson (\S+) -->", text))
    missing = [l for l in cat.ordered(rec.lessons()) if l not in present]
    if not missing:
        return text
    if NEW_LESSONS not in text:
        sys.exit(f"perf-tables: {path} has no section for {', '.join(missing)} and no line "
                 f"'{NEW_LESSONS}' to add one above")
    new = "".join(f"## {lesson_label(cat, l)}: {cat.title(l)}\n\n<!-- generated: lesson {l} -->\n"
                  f"{END}\n\n" for l in missing)
    return text.replace(NEW_LESSONS, new + NEW_LESSONS)


def variants_section(cat, lesson):
    rows = [[str(v["level"]), f"`{v.get('launch', '')}`",
             f"**{v['name']}**" + (f" (`{v['function']}`)" if v.get("function") else ""),
             v.get("what", ""), v.get("where", "")] for v in cat.variants(lesson)]
    if not rows:
        return ["Each level of this lesson runs one kernel per launch (no variants declared)."]
    return ["The kernel variants the level table declares (assets/lessons/catalog.json), and where "
            "each runs (the level table chooses by shape, precision and GPU; \"top runs\" in the "
            "tables below names the one that ran):", ""] + table(["level", "launch", "variant", "what it does differently",
                                       "where it runs"], rows)


def other_recordings_section(rec, cat):
    """A summary of every other folder under assets/recordings (other GPUs, dates or series)."""
    out = []
    for folder in recording_folders(ROOT):
        if os.path.abspath(folder) == os.path.abspath(rec.folder):
            continue
        other = Recording(folder)
        if not other.points:
            continue
        out += [f"**`{os.path.relpath(folder, ROOT)}/`**: {short_device_line(other)}", "",
                *summary_table(other, cat, [("bf16", "cold"), ("fp32", "cold")], False), ""]
    return out or ["No other recording folder under assets/recordings/."]


def portable_section(rec, cat):
    """The recording's portable series (its portable/ folder, `bench --choose-as`): per lesson
    and size, the top level as this GPU runs it and as an older GPU's choice of kernels runs it,
    each against level 1 and level 0 of its own run."""
    folder = os.path.join(rec.folder, "portable")
    port = Recording(folder) if os.path.isdir(folder) else None
    if not port or not port.points:
        return [f"No portable series in `{os.path.relpath(rec.folder, ROOT)}/portable/`."]
    ccs = {m.get("chosen_as_cc") for m in port.points.values()} - {None}
    cc = max(ccs) if ccs else 0
    out = [f"Kernels chosen as on compute capability {cc // 10}.{cc % 10} (`bench --choose-as "
           f"{cc // 10}.{cc % 10}`): what a GPU before Hopper runs, measured on this one. "
           f"{short_device_line(port)} Each ratio is of one run: \"here\" the recording's own "
           "levels, \"portable\" the portable run's top level against that run's level 0 and 1.",
           ""]
    head = ["lesson", "precision", "size", "top runs here", "here: top vs L1", "here: top vs L0",
            "portable top runs", "portable: top vs L1", "portable: top vs L0", "portable top µs"]
    rows = []
    for lesson in cat.ordered(port.lessons()):
        top = port.top(lesson)
        for mode in port.modes(lesson):
            for size in port.sizes(lesson, mode):
                def cells(r):
                    ms = [correct(r.get(lesson, mode, size, l)) for l in (0, 1, top)]
                    if not ms[2]:
                        return ["–"] * 3, None
                    return [kernels(ms[2], cat.variants(lesson, top)),
                            ratio(median(ms[1]), median(ms[2])) if ms[1] else "–",
                            ratio(median(ms[0]), median(ms[2])) if ms[0] else "–"], ms[2]
                here, _ = cells(rec)
                there, t = cells(port)
                rows.append([lesson, mode[0], f"{human(size)} {cat.unit(lesson)}"] + here + there +
                            [f"{median(t):.2f}" if t else "–"])
    return out + table(head, rows)


def make_section(rec, cat, path):
    def make(name):
        if name == "summary":
            return summary_section(rec, cat)
        if name == "readme-summary":
            return readme_section(rec, cat)
        if name.startswith("lesson "):
            return lesson_section(rec, cat, name.split(" ", 1)[1])
        if name.startswith("variants "):
            return variants_section(cat, name.split(" ", 1)[1])
        if name == "portable":
            return portable_section(rec, cat)
        if name == "other-recordings":
            return other_recordings_section(rec, cat)
        sys.exit(f"perf-tables: {path}: unknown generated section '{name}'")
    return make


ROOT = "."


def main():
    global ROOT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--recordings", help="recording folder (default: the newest under "
                    "ROOT/assets/recordings)")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when a file "
                    "differs from what the recordings make")
    args = ap.parse_args()
    ROOT = os.path.abspath(args.root)
    rec = Recording(os.path.abspath(args.recordings or newest_folder(ROOT)))
    if not rec.points:
        sys.exit(f"perf-tables: no measurements in {rec.folder}")
    cat = Catalog(ROOT)
    stale = []
    for rel in ("docs/PERFORMANCE.md", "README.md"):
        path = os.path.join(ROOT, rel)
        with open(path, encoding="utf-8") as f:
            old = f.read()
        new = old
        if rel == "docs/PERFORMANCE.md":
            new = add_missing_lessons(new, rec, cat, rel)
        new = rewrite(new, make_section(rec, cat, rel), rel)
        if new == old:
            continue
        stale.append(rel)
        if args.check:
            diff = difflib.unified_diff(old.split("\n"), new.split("\n"), f"{rel} (committed)",
                                        f"{rel} (from the recordings)", lineterm="", n=1)
            print("\n".join(list(diff)[:60]))
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
    if args.check and stale:
        print(f"perf-tables: {', '.join(stale)} differ from what {os.path.relpath(rec.folder, ROOT)} "
              "says: run python3 scripts/perf-tables.py and commit the result", file=sys.stderr)
        return 1
    if not args.check:
        print(f"perf-tables: {', '.join(stale) or 'nothing'} rewritten from "
              f"{os.path.relpath(rec.folder, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
