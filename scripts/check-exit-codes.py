#!/usr/bin/env python3
"""The exit codes are written once, in engine/core/error.hpp; the public C header and the Python
module must say the same (ctest exit_codes_public). Reads error.hpp with a parser of its own (not
cmake/exit_codes.cmake's), then
  - commscript.h and the headers it includes with quotes (found beside it or in --include DIRs):
    every ExitCode `name = N` must be `CS_EXIT_NAME = N`, and no other CS_EXIT_ code may exist;
  - the Python module (imported from --python DIR; COMMSCRIPT_LIBRARY names the library it
    loads): commscript.EXIT_CODES must be error.hpp's {name: N}, and commscript.EXIT_NAME each N.

    check-exit-codes.py ROOT --include BUILD/include/commscript --python BUILD/python
"""
import argparse
import importlib
import os
import re
import sys


def engine_codes(error_hpp):
    text = open(error_hpp, encoding="utf-8").read()
    block = re.search(r"enum class ExitCode\b[^{]*\{(.*?)\};", text, re.S)
    if not block:
        sys.exit("check-exit-codes: no enum class ExitCode in %s" % error_hpp)
    body = re.sub(r"//[^\n]*", "", block.group(1))
    codes = {}
    for item in body.split(","):
        m = re.fullmatch(r"\s*(\w+)\s*=\s*(\w+)\s*", item)
        if m and m.group(2).isdigit():  # `old = new` is an alias of a code listed already
            codes[m.group(1)] = int(m.group(2))
    return codes


def header_text(path, include_dirs, seen):
    if path in seen:
        return ""
    seen.add(path)
    text = open(path, encoding="utf-8").read()
    for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
        for d in [os.path.dirname(path)] + include_dirs:
            if os.path.exists(os.path.join(d, name)):
                text += header_text(os.path.join(d, name), include_dirs, seen)
                break
        else:
            print("check-exit-codes: %s includes \"%s\", found in none of %s" % (path, name, include_dirs))
    return text


def compare(what, expected, got):
    problems = []
    for name, code in expected.items():
        if name not in got:
            problems.append("%s: %s (%d) is missing" % (what, name, code))
        elif got[name] != code:
            problems.append("%s: %s is %s, error.hpp says %d" % (what, name, got[name], code))
    problems += ["%s: %s (%s) is not in error.hpp" % (what, n, got[n]) for n in got if n not in expected]
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--include", action="append", default=[])
    ap.add_argument("--python", required=True)
    a = ap.parse_args()
    codes = engine_codes(os.path.join(a.root, "engine", "core", "error.hpp"))
    header = header_text(os.path.join(a.root, "include", "commscript", "commscript.h"), a.include, set())
    code = re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", header, flags=re.S))  # the comments say codes too
    c_codes = {m.group(1).lower(): int(m.group(2), 0) for m in re.finditer(r"\bCS_EXIT_(\w+)\s*=\s*(-?\w+)", code)}
    problems = compare("commscript.h", codes, c_codes)
    sys.path.insert(0, a.python)
    try:
        mod = importlib.import_module("commscript")
        py = dict(getattr(mod, "EXIT_CODES", {}))
        py_names = {n[5:].lower(): getattr(mod, n) for n in dir(mod) if n.startswith("EXIT_") and n != "EXIT_CODES"}
        problems += compare("python commscript.EXIT_CODES", codes, py)
        problems += compare("python commscript.EXIT_*", codes, py_names)
    except ImportError as e:
        problems.append("python: import commscript from %s: %s" % (a.python, e))
    for p in problems:
        print("check-exit-codes: " + p)
    print("check-exit-codes: %d codes in error.hpp (%s): %s" % (
        len(codes), ", ".join("%s %d" % kv for kv in codes.items()), "FAILED" if problems else "passed"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
