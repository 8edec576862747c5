"""Starts N commscript processes the way torchrun does, without torch and without mpirun:
each with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT.

    python3 launch_env.py N [--port P] -- commscript ARGS...

Exits with the highest exit status of the processes (a process killed by a signal counts as
128 + signal). Usable on its own and from the e2e tests (launch())."""
import os
import secrets
import signal
import socket
import subprocess
import sys
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def launch(cmd, n, port=None, addr="127.0.0.1", timeout=120, env=None, cwd=None, per_rank_env=None, wrap=None):
    """Runs `cmd` as N ranks; returns [(rc, stdout, stderr)] by rank (rc None when it ran past
    `timeout` and was killed) and the wall time. wrap(rank) -> the command line rank runs (default
    `cmd`; launch_env_netns.py runs it inside the rank's host namespace)."""
    port = port or free_port()
    procs = []
    t0 = time.monotonic()
    # The job's secret (docs/security.md): the caller's COMMSCRIPT_JOB_TOKEN, or one drawn for
    # this launch, the same for every rank.
    token = secrets.token_hex(32)
    for r in range(n):
        e = dict(os.environ if env is None else env)
        if "COMMSCRIPT_JOB_TOKEN" not in e and "COMMSCRIPT_JOB_TOKEN_FILE" not in e:
            e["COMMSCRIPT_JOB_TOKEN"] = token
        for k in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"):
            e.pop(k, None)
        e.update({"RANK": str(r), "WORLD_SIZE": str(n), "LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": str(n),
                  "MASTER_ADDR": addr, "MASTER_PORT": str(port)})
        if per_rank_env:
            e.update(per_rank_env(r))
        procs.append(subprocess.Popen(wrap(r) if wrap else cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, cwd=cwd,
                                      start_new_session=True))
    out = []
    for p in procs:
        left = max(1.0, timeout - (time.monotonic() - t0))
        try:
            o, er = p.communicate(timeout=left)
            out.append((p.returncode, o.decode("utf-8", "replace"), er.decode("utf-8", "replace")))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            o, er = p.communicate()
            out.append((None, o.decode("utf-8", "replace"), er.decode("utf-8", "replace")))
    return out, time.monotonic() - t0


def main(argv):
    if "--" not in argv or len(argv) < 3:
        sys.stderr.write(__doc__)
        return 1
    cut = argv.index("--")
    n = int(argv[1])
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv[:cut] else None
    results, _ = launch(argv[cut + 1:], n, port=port)
    worst = 0
    for r, (rc, o, e) in enumerate(results):
        sys.stdout.write(o)
        sys.stderr.write(e)
        code = 124 if rc is None else (128 - rc if rc < 0 else rc)
        worst = max(worst, code)
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv))
