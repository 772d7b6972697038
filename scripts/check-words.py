#!/usr/bin/env python3
"""Docs and comments speak of the project, not of how its work was organised.

Lists every line of README.md, docs/, kernels/, model/, app/, viz/ and scripts/ (or of the files
given) that dates or attributes something by a work session, an issue number or a helper instead
of by UTC date and GPU: "this session", "the seventh session", "later issues", "(issue 14)",
"helper B". The app's own sessions (session files, session JSON, saving a session) are not
matched. Exit status 1 when anything is found.

  python3 scripts/check-words.py              the project's docs and sources
  python3 scripts/check-words.py FILE...      only these files
"""
import os
import re
import sys

# Ordinals only: "the last session" or "the previous session" may be the app's own (a saved one).
ORDINAL = (r"first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|"
           r"twelfth|thirteenth|fourteenth|fifteenth")
WORDS = re.compile(
    r"\bthis session\b"
    rf"|\b(?:{ORDINAL}) session\b(?! (?:file|json|format|recording))"
    r"|\bsessions? of work\b|\bwork session"
    r"|\bsession note"
    r"|\b(?:later|future|earlier|previous|other) issues?\b"
    r"|\bissues? #?\d+|\bthe issue's\b|\b(?:this|the) issue (?:asks|says|measured|wants|requires)"
    r"|\bhelpers? [A-Z]\b"
    r"|\b(?:a|another|the other) helper\b(?! (?:function|that|which|for|to|of|in))",
    re.IGNORECASE)
FOLDERS = ["README.md", "docs", "kernels", "model", "app", "viz", "scripts"]
TEXT = (".md", ".h", ".cpp", ".cu", ".cuh", ".py", ".sh", ".txt", ".cmake", ".fls", ".json",
        ".desktop", ".in")


def files(root):
    for entry in FOLDERS:
        path = os.path.join(root, entry)
        if os.path.isfile(path):
            yield path
        for folder, _, names in os.walk(path):
            for name in sorted(names):
                if name.endswith(TEXT) or name == "CMakeLists.txt":
                    yield os.path.join(folder, name)


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    paths = sys.argv[1:] or [p for p in files(root) if os.path.abspath(p) != os.path.abspath(__file__)]
    found = 0
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.readlines()
        except OSError as e:
            print(f"check-words: cannot read {path}: {e}", file=sys.stderr)
            return 2
        for n, line in enumerate(lines, 1):
            for m in WORDS.finditer(line):
                found += 1
                print(f"{os.path.relpath(path, root)}:{n}: '{m.group(0)}': {line.strip()[:120]}")
    if found:
        print(f"check-words: {found} place(s) date or attribute by work session, issue or helper; "
              "say the UTC date and GPU, or what the thing is, instead", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
