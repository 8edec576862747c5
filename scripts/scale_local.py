#!/usr/bin/env python3
"""full_diag at many ranks on this one machine (oversubscribed), for issue 11's "here, for real":
runs `mpirun -np N --oversubscribe commscript full_diag --tier quick --max SIZE` once per N and
prints one JSON line each: exit code, wall seconds, the per-stage seconds of report.json's
`cost` section, and `tail_s`, the time from the end of localisation (rank 0 printing
"== scorecard") to the end of the run (mpirun's exit), as this script saw rank 0's output.

    python3 scripts/scale_local.py --ranks 32 64 [--max 1K] [--bin build/commscript]

Environment: MPIRUN (default mpirun on PATH). Ranks yield when idle (mpi_yield_when_idle).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def one(binary, n, max_size, timeout):
    out = tempfile.mkdtemp(prefix="cs-scale-local-")
    mpirun = os.environ.get("MPIRUN") or shutil.which("mpirun") or "mpirun"
    argv = [mpirun, "--oversubscribe", "--mca", "mpi_yield_when_idle", "1", "-np", str(n), binary, "--out", out,
            "full_diag", "--tier", "quick", "--max", max_size]
    env = dict(os.environ)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env["OMPI_MCA_mpi_yield_when_idle"] = "1"
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    marks = {}
    lines = []

    def read():
        for raw in p.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            lines.append(line)
            if line.startswith("== "):
                marks.setdefault(line[3:].split(" (")[0], time.monotonic() - t0)

    th = threading.Thread(target=read, daemon=True)
    th.start()
    err = b""
    try:
        _, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        p.kill()
        rc = None
    th.join(5)
    wall = time.monotonic() - t0
    stages = {}
    try:
        with open(os.path.join(out, "report.json"), "rb") as f:
            rep = json.loads(f.read().decode("utf-8"))
        for s in rep.get("cost", {}).get("stages", []):
            stages[s["name"]] = round(s["seconds"], 2)
        plan = (rep.get("matrix") or {}).get("plan")
        duration = rep.get("run", {}).get("duration_s")
    except (OSError, ValueError):
        plan, duration = None, None
    tail = round(wall - marks["scorecard"], 2) if "scorecard" in marks else None
    return {"ranks": n, "rc": rc, "wall_s": round(wall, 1), "run_duration_s": duration, "tail_s": tail,
            "stages_s": stages, "plan": plan and {k: plan.get(k) for k in ("kind", "rounds_run", "rounds_planned",
                                                                            "rounds_full", "round_s")},
            "marks_s": {k: round(v, 2) for k, v in marks.items()}, "out": out,
            "stderr_tail": err.decode("utf-8", "replace")[-600:] if rc else ""}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--max", default="1K")
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "commscript"))
    ap.add_argument("--timeout", type=int, default=400)
    a = ap.parse_args()
    worst = 0
    for n in a.ranks:
        r = one(a.bin, n, a.max, a.timeout)
        print(json.dumps(r), flush=True)
        if r["rc"] != 0:
            worst = 1
    return worst


if __name__ == "__main__":
    sys.exit(main())
