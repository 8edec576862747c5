#!/usr/bin/env python3
"""An embedded Gloo world without MPI, as a torchrun job would have it: this script starts NP
copies of itself with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT (no mpirun), and
each runs bw_sweep through commscript.run(backend="gloo", launcher="env"). Every rank must get
exit code 0 and rank 0's report (backend gloo, launcher env, busbw results).

    PYTHONPATH=build/python COMMSCRIPT_LIBRARY=build/libcommscript.so python3 tests/embed/gloo_env.py [NP]
"""
import os
import socket
import subprocess
import sys


def child():
    import commscript
    rank = int(os.environ["RANK"])
    rep = commscript.run("bw_sweep", backend="gloo", launcher="env", deadline=60,
                         options={"ops": "allreduce,broadcast", "min": "1K", "max": "64K", "iters": 3},
                         out=os.environ["CS_TEST_OUT"])
    run = rep.doc.get("run", {})
    problems = []
    if rep.exit_code != 0:
        problems.append("exit code %d (%s)" % (rep.exit_code, rep.error))
    if run.get("backend") != "gloo":
        problems.append("report backend %r" % run.get("backend"))
    if run.get("launcher", {}).get("kind") != "env":
        problems.append("report launcher %r" % run.get("launcher"))
    if not [r for r in rep.results if r.get("busbw")]:
        problems.append("no busbw results in the report")
    if run.get("embedded", {}).get("communicator") != "launcher's world":
        problems.append("run.embedded %r" % run.get("embedded"))
    print("gloo_env: rank %d: %s" % (rank, "; ".join(problems) if problems else "ok"), flush=True)
    return 1 if problems else 0


def main():
    np = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    with socket.socket() as s:  # a free port for rank 0's store
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    token = os.environ.get("COMMSCRIPT_JOB_TOKEN") or "cs-embed-" + os.urandom(16).hex()  # the job's secret
    for r in range(np):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_"))}
        env.update(RANK=str(r), WORLD_SIZE=str(np), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(np),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), CS_TEST_CHILD="1", COMMSCRIPT_JOB_TOKEN=token,
                   CS_TEST_OUT=os.path.abspath("gloo-env-run"))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)], env=env))
    codes = [p.wait(timeout=240) for p in procs]
    print("gloo_env: exit codes %s: %s" % (codes, "passed" if codes == [0] * np else "FAILED"), flush=True)
    return 0 if codes == [0] * np else 1


if __name__ == "__main__":
    sys.exit(child() if os.environ.get("CS_TEST_CHILD") else main())
