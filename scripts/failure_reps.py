#!/usr/bin/env python3
"""Repeats the failure scenarios of issue 13 N times and prints how many passed (the issue's
targets are 10 of 10):

  sigkill-rank0   kill -9 of rank 0 mid-run: report.json (its guardian's) with the rank_died
                  incident and every result of results.jsonl; mpirun ends (status 137)
  sigterm, sigint the signal to mpirun mid-run: report.json with the "killed" incident
  desync          ranks passing different counts to allreduce on 4 ranks: the desync line
                  within 5 s of the start, exit 5

usage: scripts/failure_reps.py [N] [SCENARIO...]   (COMMSCRIPT_BIN, MPIRUN as for the e2e tests)
Under load (many ranks on few cores) the times grow; each run is bounded.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import cs_e2e  # noqa: E402

NP = 4
SPIN = """local cs = require "commscript"
local recipe = cs.recipe { name = "spin", version = "0.1.0" }
function recipe.run(ctx)
  local t = cs.tensor("float32", 8)
  for i = 1, 1e9 do
    ctx.comm:allreduce(t, t)
    if i % 500 == 0 then ctx.report:result { kind = "tick", i = i } end
  end
  return 0
end
return recipe
"""
DESYNC = """local cs = require "commscript"
local recipe = cs.recipe { name = "mm", version = "0.1.0" }
function recipe.run(ctx)
  local n = ctx.rank == 2 and 16 or 8
  local t, r = cs.tensor("float32", n), cs.tensor("float32", n)
  ctx.comm:allreduce(t, r)
  return 0
end
return recipe
"""


def spin_and(tmp, how):
    """Starts the spin recipe, waits for 3 result lines, then ends it HOW; returns (ok, why)."""
    path = os.path.join(tmp, "spin.lua")
    with open(path, "w") as f:
        f.write(SPIN)
    out = os.path.join(tmp, "out")
    cmd = [cs_e2e.MPIRUN, "-np", str(NP), "--oversubscribe", cs_e2e.BIN, "--out", out, path]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp, env=cs_e2e._env(),
                         start_new_session=True)
    res = os.path.join(out, "results.jsonl")
    t0 = time.monotonic()
    while time.monotonic() - t0 < 90:
        try:
            with open(res) as f:
                if f.read().count("\n") >= 3:
                    break
        except OSError:
            pass
        time.sleep(0.1)
    if how == "sigkill-rank0":
        pid = cs_e2e.rank_pid(out, 0)
        if pid is None:
            p.kill()
            return False, "rank 0 not found"
        os.kill(pid, signal.SIGKILL)
    else:
        p.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
    try:
        _, err = p.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return False, "mpirun hung"
    err = err.decode("utf-8", "replace")
    try:
        with open(os.path.join(out, "report.json")) as f:
            rep = json.load(f)
        with open(res) as f:
            measured = [json.loads(l) for l in f.read().splitlines() if l.strip()]
    except (OSError, ValueError) as e:
        return False, "no valid report.json (%s); rc %s; %s" % (e, p.returncode, err[-300:])
    kind = "rank_died" if how == "sigkill-rank0" else "killed"
    if not any(i.get("kind") == kind for i in rep.get("incidents", [])):
        return False, "no %s incident: %s" % (kind, rep.get("incidents"))
    if how == "sigkill-rank0" and (rep["results"] != measured or p.returncode != 137):
        return False, "results %d vs %d lines, rc %s" % (len(rep["results"]), len(measured), p.returncode)
    return True, ""


def desync(tmp):
    path = os.path.join(tmp, "mm.lua")
    with open(path, "w") as f:
        f.write(DESYNC)
    r = cs_e2e.run([path], np=NP, timeout=60, out_dir=os.path.join(tmp, "out"), cwd=tmp)
    line_ok = any(l.startswith("desync:") or "desync:" in l for l in r.stderr.splitlines())
    if r.rc != cs_e2e.TIMEOUT or not line_ok:
        return False, "rc %s, desync line %s" % (r.rc, line_ok)
    if r.elapsed > 5 + 3:  # mpirun's own start is ~2-3 s here: the line within 5 s of it
        return False, "took %.1f s" % r.elapsed
    return True, ""


SCENARIOS = {
    "sigkill-rank0": lambda tmp: spin_and(tmp, "sigkill-rank0"),
    "sigterm": lambda tmp: spin_and(tmp, "sigterm"),
    "sigint": lambda tmp: spin_and(tmp, "sigint"),
    "desync": desync,
}


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    names = sys.argv[2:] or list(SCENARIOS)
    total_fail = 0
    for name in names:
        passed, notes = 0, []
        for i in range(n):
            tmp = tempfile.mkdtemp(prefix="cs-reps-")
            t0 = time.monotonic()
            try:
                ok, why = SCENARIOS[name](tmp)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            passed += ok
            if not ok:
                notes.append("run %d: %s" % (i + 1, why))
            print("  %-14s run %2d: %s (%.1f s)" % (name, i + 1, "ok" if ok else "FAIL", time.monotonic() - t0),
                  flush=True)
        total_fail += n - passed
        print("%-14s %d of %d" % (name, passed, n), flush=True)
        for note in notes:
            print("    " + note)
    return 1 if total_fail else 0


if __name__ == "__main__":
    sys.exit(main())
