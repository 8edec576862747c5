#!/usr/bin/env python3
"""No stdlib file is too long to hold one job: a Lua file of stdlib/ over 650 lines fails.

A module that grows past the limit has become two jobs: split it into a package folder
(stdlib/cs/<name>/, docs/stdlib.md) rather than raising the limit. Exit 1 naming each file over
it as path: N lines. Usage: check-file-length.py [repository root]
"""
import os
import sys

LIMIT = 650
DIRS = ["stdlib"]


def lua_files(root):
    for d in DIRS:
        for base, subdirs, files in os.walk(os.path.join(root, d)):
            subdirs.sort()
            for f in sorted(files):
                if f.endswith(".lua"):
                    yield os.path.relpath(os.path.join(base, f), root)


def main(argv):
    root = os.path.abspath(argv[0] if argv else os.path.join(os.path.dirname(__file__), ".."))
    errors, count = [], 0
    for path in lua_files(root):
        count += 1
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            n = sum(1 for _ in f)
        if n > LIMIT:
            errors.append("%s: %d lines (limit %d)" % (path, n, LIMIT))
    for e in errors:
        print(e)
    if count == 0:
        print("check-file-length: no Lua file under %s (wrong root?)" % ", ".join(DIRS))
        return 1
    if errors:
        print("check-file-length: %d file(s) over %d lines; split each into a package folder of "
              "files with one job each (docs/stdlib.md)" % (len(errors), LIMIT))
        return 1
    print("check-file-length: %d Lua files in %s, none over %d lines" % (count, ", ".join(DIRS), LIMIT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
