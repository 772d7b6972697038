#!/usr/bin/env python3
"""scripts/perf-tables.py --check fails when a recording changes without its tables.

Works on a copy of what the script reads (README.md, docs/PERFORMANCE.md, the lesson catalog and
the newest recording folder) in a temporary folder:
  1. the committed copy passes the check;
  2. one median of one recording changed: the check fails and names the file;
  3. the tables re-made: the check passes again, and the changed figure is in them;
  4. without the peer file, and with a section for a lesson that has no recording, the script
     still writes every table (the peer columns left out, the section saying so).
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "perf-tables.py")


def run(root, *args):
    p = subprocess.run([sys.executable, SCRIPT, "--root", root, *args], capture_output=True,
                       text=True)
    return p.returncode, p.stdout + p.stderr


def expect(cond, what, output=""):
    if not cond:
        print(f"FAILED: {what}\n{output}")
        sys.exit(1)
    print(f"ok: {what}")


def newest(root):
    """The folder the script reads by default: the app's choice (latest session file)."""
    def stamp(d):
        files = [json.load(open(f)) for f in glob.glob(os.path.join(d, "*.json"))]
        return max([f.get("created_utc", "") for f in files
                    if f.get("format") == "fusionlab-session"] or [""]), d
    return max(glob.glob(os.path.join(root, "assets", "recordings", "*")), key=stamp)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for rel in ("README.md", "docs/PERFORMANCE.md", "assets/lessons/catalog.json"):
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)) or tmp, exist_ok=True)
            shutil.copy(os.path.join(ROOT, rel), os.path.join(tmp, rel))
        folder = newest(ROOT)
        copy = os.path.join(tmp, os.path.relpath(folder, ROOT))
        shutil.copytree(folder, copy)

        rc, out = run(tmp, "--check")
        expect(rc == 0, "the committed tables are what the committed recordings say", out)

        # 2. A recording changes: the top level of the file's first lesson, at its largest size
        # (a figure both PERFORMANCE's and README's tables show).
        path = sorted(p for p in glob.glob(os.path.join(copy, "*.json"))
                      if not p.endswith("peers.json"))[0]
        data = json.load(open(path))
        lesson = data["measurements"][0]["lesson"]
        ours = [m for m in data["measurements"] if m["lesson"] == lesson]
        top = max(m["level"] for m in ours)
        m = max((m for m in ours if m["level"] == top), key=lambda m: m["size"])
        m["chain_time_us"]["median"] *= 1.5
        new_median = f"{m['chain_time_us']['median']:.2f}"
        json.dump(data, open(path, "w"))
        rc, out = run(tmp, "--check")
        expect(rc == 1 and "docs/PERFORMANCE.md" in out and "README.md" in out,
               "a changed recording without its tables fails the check", out)

        # 3. The tables re-made from it pass, and show the new figure.
        rc, out = run(tmp)
        expect(rc == 0, "the script rewrites the tables", out)
        rc, out = run(tmp, "--check")
        expect(rc == 0, "the rewritten tables pass the check", out)
        text = open(os.path.join(tmp, "docs", "PERFORMANCE.md")).read()
        expect(f"| {new_median} |" in text, f"the changed median {new_median} is in the tables")

        # 4. No peer file, and a section for a lesson without a recording.
        os.remove(os.path.join(copy, "peers.json"))
        perf = os.path.join(tmp, "docs", "PERFORMANCE.md")
        with open(perf, "a") as f:
            f.write("\n## 99. not_yet\n\n<!-- generated: lesson not_yet -->\n<!-- end generated -->\n")
        rc, out = run(tmp)
        text = open(perf).read()
        expect(rc == 0 and "No recording of `not_yet`" in text and "torch.compile µs" not in text
               and "No peer file" in text, "no peer file and an unrecorded lesson are handled", out)
        readme = open(os.path.join(tmp, "README.md")).read()
        block = readme.split("<!-- generated: readme-summary -->")[1].split("<!-- end generated")[0]
        rows = [l for l in block.split("\n") if l.startswith("|")]
        expect(len(rows) <= 15, f"README's Measured table has {len(rows)} lines (at most 15)")


if __name__ == "__main__":
    main()
