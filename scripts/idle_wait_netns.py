#!/usr/bin/env python3
"""What ranks waiting in barriers cost a pair measured alone, on namespace hosts (docs/timing.md,
"Ranks that wait"): 8 hosts at 1 Gbit, 16 ranks on this machine's cores; ranks 0 and 1 on two
hosts, the others spread over the rest. Runs tests/bench/idle_wait_pair.lua (the pair with the
others in one long wait, then with a barrier of all ranks after every sample, as full_diag's
re-tests do) once per binary given, and prints its lines. Needs root, iproute2, tc and Open MPI.

  scripts/idle_wait_netns.py [--runs 2] [--bytes 256K] BINARY [BINARY...]
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import truth_harness as T  # noqa: E402  (its namespace hosts and launch flags)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--bytes", default="256K")
    ap.add_argument("binaries", nargs="+")
    a = ap.parse_args(argv)
    reason = T.why_not(a.binaries[0], "mpirun")
    if reason:
        print("idle_wait_netns.py: %s" % reason, file=sys.stderr)
        return 1
    ns = T.Namespaces()
    ns.netns("down", "--stale")
    ns.up(8, {"kind": "none"})
    bench = os.path.join(T.REPO, "tests", "bench", "idle_wait_pair.lua")
    slots = list(enumerate([1, 1, 3, 3, 2, 2, 2, 2]))
    try:
        for _ in range(a.runs):
            for b in a.binaries:
                argv = T.launch_argv(ns, "mpirun", slots) + [b, "--out", "/tmp/cs-idle-wait", bench, "--bytes", a.bytes]
                p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                                   env=ns.env(), timeout=120)
                lines = [l for l in p.stdout.splitlines() if l.startswith("idle_wait_pair:")]
                print("%s: %s" % (b, lines[0] if lines else "failed (exit %s): %s" % (p.returncode, p.stderr[-500:])),
                      flush=True)
    finally:
        ns.down()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
