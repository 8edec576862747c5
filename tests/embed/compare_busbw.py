#!/usr/bin/env python3
"""Embedded bw_sweep vs the command line, alternating in one session (a measurement, not a test):

    COMMSCRIPT_BIN=build/commscript COMMSCRIPT_LIBRARY=build/libcommscript.so \
      /usr/bin/python3 tests/embed/compare_busbw.py [ROUNDS] [NP]

Each round runs both, the order swapped every round (CLI first in even rounds) so that a drift of
the machine's load falls on both alike. Prints, per size, the busbw of every run, the medians, and
the ratio embedded/CLI: the median of the per-round ratios and their spread (min..max, and the
ratio of the medians)."""
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
NP = sys.argv[2] if len(sys.argv) > 2 else "4"
ARGS = ["--ops", "allreduce", "--min", "64K", "--max", "4M", "--factor", "4", "--iters", "20", "--warmup", "5"]
HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = [os.environ.get("MPIRUN", "mpirun"), "--oversubscribe", "-np", NP]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           PYTHONPATH=os.path.join(HERE, "..", "..", "python"))
EMBED = """
import json, sys, commscript
rep = commscript.run("bw_sweep", options=dict(zip(sys.argv[1::2], sys.argv[2::2])), out=%r)
"""


def busbw(path):
    rep = json.load(open(path))
    assert rep["run"]["exit_code"] == 0, rep["run"]
    return {r["bytes"]: r["busbw"] for r in rep["results"]}


def run_cli(out):
    subprocess.run(MPIRUN + [os.environ["COMMSCRIPT_BIN"], "--out", out, "bw_sweep"] + ARGS, env=ENV, check=True,
                   stdout=subprocess.DEVNULL)
    return busbw(os.path.join(out, "report.json"))


def run_embedded(out):
    subprocess.run(MPIRUN + ["/usr/bin/python3", "-c", EMBED % out] + ARGS, env=ENV, check=True,
                   stdout=subprocess.DEVNULL)
    return busbw(os.path.join(out, "report.json"))


cli, emb = [], []
with tempfile.TemporaryDirectory() as tmp:
    for i in range(ROUNDS):
        order = [("cli", run_cli), ("emb", run_embedded)]
        if i % 2:
            order.reverse()
        for name, fn in order:
            (cli if name == "cli" else emb).append(fn(os.path.join(tmp, "%s%d" % (name, i))))
        print("round %d of %d done (%s first)" % (i + 1, ROUNDS, order[0][0]), file=sys.stderr, flush=True)
print("bw_sweep %s on %s ranks, %d rounds alternating; busbw in GB/s" % (" ".join(ARGS), NP, ROUNDS))
all_ratios = []
for size in sorted(cli[0]):
    c = [r[size] for r in cli]
    e = [r[size] for r in emb]
    ratios = [x / y for x, y in zip(e, c) if y > 0]
    all_ratios += ratios
    print("%8d B  cli median %7.3f %s\n           embedded median %7.3f %s\n"
          "           ratio emb/cli: median of per-round %.3f (min %.3f, max %.3f), of medians %.3f" %
          (size, statistics.median(c), ["%.2f" % x for x in c], statistics.median(e), ["%.2f" % x for x in e],
           statistics.median(ratios), min(ratios), max(ratios), statistics.median(e) / statistics.median(c)))
q = statistics.quantiles(all_ratios, n=4) if len(all_ratios) > 1 else [all_ratios[0]] * 3
print("all sizes: ratio emb/cli median %.3f, interquartile %.3f..%.3f, min %.3f, max %.3f (%d pairs)" %
      (statistics.median(all_ratios), q[0], q[2], min(all_ratios), max(all_ratios), len(all_ratios)))
