#!/usr/bin/env python3
"""Embedded bw_sweep vs the command line, alternating in one session (a measurement, not a test):

    COMMSCRIPT_BIN=build/commscript COMMSCRIPT_LIBRARY=build/libcommscript.so \
      /usr/bin/python3 tests/embed/compare_busbw.py [ROUNDS] [NP]

Prints the busbw of each size for each round of each and the medians."""
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


cli, emb = [], []
with tempfile.TemporaryDirectory() as tmp:
    for i in range(ROUNDS):
        out = os.path.join(tmp, "cli%d" % i)
        subprocess.run(MPIRUN + [os.environ["COMMSCRIPT_BIN"], "--out", out, "bw_sweep"] + ARGS, env=ENV, check=True,
                       stdout=subprocess.DEVNULL)
        cli.append(busbw(os.path.join(out, "report.json")))
        out = os.path.join(tmp, "emb%d" % i)
        subprocess.run(MPIRUN + ["/usr/bin/python3", "-c", EMBED % out] + ARGS, env=ENV, check=True,
                       stdout=subprocess.DEVNULL)
        emb.append(busbw(os.path.join(out, "report.json")))
for size in sorted(cli[0]):
    c = [r[size] for r in cli]
    e = [r[size] for r in emb]
    print("%8d B  busbw GB/s  cli median %.3f %s  embedded median %.3f %s  ratio %.3f" %
          (size, statistics.median(c), ["%.2f" % x for x in c], statistics.median(e), ["%.2f" % x for x in e],
           statistics.median(e) / statistics.median(c)))
