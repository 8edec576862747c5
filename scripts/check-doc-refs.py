#!/usr/bin/env python3
"""Every Markdown file the sources and docs cite is in this repository, and every #anchor they
cite is a heading of that file.

Scans the tracked files of stdlib/, recipes/, engine/, bindings/, include/, python/, examples/,
scripts/, cmake/, docs/ and README.md for references to Markdown files
(docs/nccl.md#internal-variables, (lua-api.md#csenv), ../README.md). A reference resolves next to
the citing file, then from the repository's root, then (a bare name in a source comment) as a
file of docs/. Exit 1 naming each reference to a file that is not here (the project's research
notes once were cited this way) or to a heading the file does not have. tests/ is not scanned: it
cites other projects' files. The anchors env findings build at run time (cs.env.registry) are
checked by tests/lua/test_env_combos.lua.
"""
import os
import re
import subprocess
import sys

SCANNED = ["stdlib", "recipes", "engine", "bindings", "include", "python", "examples", "scripts", "cmake", "docs",
           "README.md", "CMakeLists.txt"]
REF = re.compile(r"(?<![\w/.-])((?:\.\./)*(?:[\w.-]+/)*[\w.-]+\.md)(#[\w-]+)?")


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation other than - and _ dropped, spaces -> -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen, fenced = set(), {}, False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.lstrip().startswith("```"):
                    fenced = not fenced
                    continue
                m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if m:
                    s = slug(m.group(1))
                    n = seen.get(s, 0)
                    seen[s] = n + 1
                    found.add(s if n == 0 else "%s-%d" % (s, n))
        cache[path] = found
    return cache[path]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    os.chdir(root)
    files = subprocess.run(["git", "ls-files", "--"] + SCANNED, check=True, capture_output=True,
                           text=True).stdout.split()
    bad, count = [], 0
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for no, line in enumerate(lines, 1):
            for m in REF.finditer(line):
                ref, anchor = m.group(1), m.group(2)
                count += 1
                tries = [os.path.normpath(os.path.join(os.path.dirname(path), ref)), os.path.normpath(ref)]
                if "/" not in ref:
                    tries.append(os.path.join("docs", ref))
                target = next((t for t in tries if os.path.isfile(t)), None)
                if target is None:
                    bad.append("%s:%d: %s is not a file of this repository" % (path, no, ref))
                elif anchor and anchor[1:] not in anchors(target):
                    bad.append("%s:%d: %s%s: %s has no such heading" % (path, no, ref, anchor, target))
    if bad:
        print("check-doc-refs: references to documents or headings that are not here:", file=sys.stderr)
        for b in bad:
            print("  " + b, file=sys.stderr)
        return 1
    print("check-doc-refs: %d references to Markdown files, all found" % count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
