#!/usr/bin/env python3
"""Lists the functions in app/ and viz/ that are longer than a limit ("no function over
~80 lines outside drawing code that is a flat list of ImGui calls"), and exits 1 if there are any.

    scripts/check-function-length.py [--max 80] [--all] [PATH...]

PATH defaults to app/ and viz/ (their .cpp, .cu, .h and .cuh files). --all lists every function
with its length, longest first, whatever the limit.

How it reads C++: it blanks comments, string and character literals (raw strings too) and
preprocessor lines, then follows the braces. A brace opened outside any function starts a
function body when the text before it (back to the previous `;`, `{` or `}`) ends with a closing
parenthesis and optional qualifiers (`const`, `override`, `noexcept`, `-> T`, ...) and is not a
control statement, a class, or an initializer (`= {`); braces inside a body belong to that
body, so lambdas and local blocks count towards the function that holds them. The length is the
number of lines from the line where the signature begins to the closing brace. (Constructors
whose members are initialized with braces, `a_{x}`, would be misread; app/ and viz/ use `a_(x)`.)

A function that is really a flat list of ImGui calls (one widget after another, no logic worth
splitting) may be exempted by a comment on the line just above its signature:
    // function-length: flat list of ImGui calls
The exemption is deliberate and visible in review; the check lists exempted functions with --all.
"""
import argparse
import os
import re
import sys

EXEMPT_MARK = "function-length: flat list of ImGui calls"
QUALIFIERS = re.compile(
    r"\)\s*(?:(?:const|override|final|noexcept(?:\s*\([^()]*\))?|mutable|volatile|&&|&|try)\s*)*"
    r"(?:->\s*[\w:<>,\s*&]+)?$")
CONTROL = re.compile(r"^(?:if|for|while|switch|catch|else\s+if)\b")


def blank_code(text):
    """The text with comments, literals and preprocessor lines replaced by spaces (newlines kept,
    so line numbers stay right)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            # A preprocessor line, with its continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = False
        if c == "\n":
            line_start = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and i + 1 < n and text[i + 1] == '"' and (i == 0 or not
                                                                 (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if m is None:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i + m.end())
            end = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:end]))
            i = end
        elif c in "\"'":
            # A digit separator (1'000'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum() \
                    and re.match(r"[0-9a-fA-FxX']", text[i - 1]):
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, last line, exempt) of each function body defined in the file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        raw = f.read()
    code = blank_code(raw)
    raw_lines = raw.split("\n")
    found = []
    stack = []  # kinds of the open braces: "scope" (namespace, class, extern), "func", "other"
    current = None  # (name, first line, exempt) of the function being read
    header_start = 0  # where the text before the next brace begins
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == ";" and "func" not in stack:
            header_start = i + 1
        elif c == "{":
            if "func" in stack:
                stack.append("other")
                continue
            header = " ".join(code[header_start:i].split())
            kind = classify(header)
            if kind == "func":
                first = code.count("\n", 0, skip_space(code, header_start)) + 1
                above = raw_lines[first - 2] if first >= 2 else ""
                current = (function_name(header), first, EXEMPT_MARK in above)
            stack.append(kind)
            header_start = i + 1
        elif c == "}":
            kind = stack.pop() if stack else "scope"
            if kind == "func" and "func" not in stack:
                found.append((current[0], current[1], line, current[2]))
            if "func" not in stack:
                header_start = i + 1
    return found


def skip_space(code, i):
    while i < len(code) and code[i] in " \t\n":
        i += 1
    return i


def classify(header):
    """What a brace opened outside any function starts, from the text before it."""
    if re.search(r"\bnamespace\b", header) or re.match(r'^extern\s*""', header):
        return "scope"
    if re.search(r"\b(class|struct|union|enum)\b", header) and not header.endswith(")"):
        return "scope"
    if header.endswith("=") or CONTROL.match(header):
        return "other"
    # Constructors with member initializers (`Foo::Foo(int x) : a_(x), b_(y)`) end with `)` too.
    return "func" if QUALIFIERS.search(header) else "other"


def function_name(header):
    m = re.search(r"([~\w:]+(?:operator\s*\S+?)?)\s*\(", header)
    return m.group(1) if m else header[:40]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max", type=int, default=80)
    parser.add_argument("--all", action="store_true")
    parser.add_argument("paths", nargs="*")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = args.paths or [os.path.join(root, "app"), os.path.join(root, "viz")]
    files = []
    for p in paths:
        if os.path.isdir(p):
            for dirpath, _, names in os.walk(p):
                files += [os.path.join(dirpath, n) for n in names
                          if n.endswith((".cpp", ".cu", ".h", ".cuh"))]
        else:
            files.append(p)
    rows = []
    for path in sorted(files):
        for name, first, last, exempt in functions(path):
            rows.append((last - first + 1, os.path.relpath(path, root), first, name, exempt))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    too_long = [r for r in rows if r[0] > args.max and not r[4]]
    for length, path, first, name, exempt in rows:
        if args.all or (length > args.max and not exempt):
            note = "  (exempt: flat list of ImGui calls)" if exempt else ""
            print(f"{length:5d}  {path}:{first}  {name}{note}")
    if too_long:
        print(f"{len(too_long)} function(s) over {args.max} lines", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
