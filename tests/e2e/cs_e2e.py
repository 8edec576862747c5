"""Shared helpers of the end-to-end tests: run the commscript binary (alone or under
mpirun -np N --oversubscribe) with a wall-clock limit, in a temporary directory, and read
what it wrote (report.json, results.jsonl).

Environment (set by ctest, see CMakeLists.txt; defaults let a file run on its own):
  COMMSCRIPT_BIN  the commscript binary (default: <repo>/build/commscript)
  MPIRUN          the MPI launcher (default: mpirun on PATH)
"""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

BIN = os.environ.get("COMMSCRIPT_BIN") or os.path.join(REPO, "build", "commscript")
MPIRUN = os.environ.get("MPIRUN") or shutil.which("mpirun") or shutil.which("mpiexec") or "mpirun"

# The exit codes of the contract.
OK, BAD_INPUT, RUNTIME, HEALTH, CORRUPTION, TIMEOUT, INTERNAL = 0, 1, 2, 3, 4, 5, 70

# Wall-clock limit of one call unless a test asks for another.
DEFAULT_TIMEOUT = 90


_JOB_TOKEN = "cs-e2e-" + os.urandom(16).hex()


def _env(extra=None):
    env = dict(os.environ)
    # OpenMPI refuses to run as root without these (ctest sets them too).
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    # --launcher env/slurm needs the job's secret (docs/security.md): one per test process.
    env.setdefault("COMMSCRIPT_JOB_TOKEN", _JOB_TOKEN)
    # No stray NCCL_* from the caller's shell in the env snapshot the tests compare.
    for k in list(env):
        if k.startswith("NCCL_"):
            del env[k]
    if extra:
        env.update(extra)
    return env


class Run:
    """The outcome of one commscript call."""

    def __init__(self, argv, rc, stdout, stderr, elapsed, out_dir, timed_out):
        self.argv, self.rc, self.stdout, self.stderr = argv, rc, stdout, stderr
        self.elapsed, self.out_dir, self.timed_out = elapsed, out_dir, timed_out

    def __repr__(self):
        return "Run(rc=%s, %.1fs, %s)" % (self.rc, self.elapsed, " ".join(self.argv))

    def describe(self, limit=4000):
        """For assertion messages."""
        return "command: %s\nrc: %s (%.1f s%s)\n--- stdout (tail) ---\n%s\n--- stderr (tail) ---\n%s" % (
            " ".join(self.argv), self.rc, self.elapsed, ", TIMED OUT" if self.timed_out else "",
            self.stdout[-limit:], self.stderr[-limit:])

    # ---- what commscript itself printed (mpirun adds its own banners) ----
    def cs_lines(self, stream="stderr"):
        text = self.stderr if stream == "stderr" else self.stdout
        return [l for l in text.splitlines() if l.startswith("commscript:")]

    def cs_error_lines(self):
        """commscript's own stderr lines, less the 'report written' notice."""
        return [l for l in self.cs_lines() if "report written to" not in l]

    # ---- outputs ----
    def path(self, name):
        return os.path.join(self.out_dir, name)

    def report(self):
        with open(self.path("report.json"), "rb") as f:
            return json.loads(f.read().decode("utf-8"))

    def results_lines(self):
        p = self.path("results.jsonl")
        if not os.path.exists(p):
            return []
        with open(p, "rb") as f:
            text = f.read().decode("utf-8")
        return [json.loads(l) for l in text.splitlines() if l.strip()]


def spin_body(every=500):
    """A recipe body that all-reduces forever, reporting a "tick" result every `every` calls: a
    run to kill or interrupt while it measures. Its all-reduce is line 6 of TestCase.recipe's file
    (1 require, 2 declaration, 3 function, 4 local t, 5 for)."""
    return """  local t = cs.tensor("float32", 8)
  for i = 1, 1e9 do
    ctx.comm:allreduce(t, t)
    if i %% %d == 0 then ctx.report:result { kind = "tick", i = i } end
  end
  return 0""" % every


def declared_version(recipe):
    """The version a shipped recipe declares in its cs.recipe header: tests compare the report
    with the file, so a version bump does not need a test edit (and a report that loses the
    declared version still fails)."""
    with open(os.path.join(REPO, "recipes", recipe + ".lua")) as f:
        return re.search(r'^\s*version\s*=\s*"(\d+\.\d+\.\d+)"', f.read(), re.M).group(1)


def run_prefixed(tc, prefix, args, np, timeout=90):
    """mpirun -np NP PREFIX... commscript --out OUT ARGS (a per-rank wrapper such as a simulated
    host name before the binary), as test case TC's Run."""
    out = tc.new_out()
    cmd = [MPIRUN, "-np", str(np), "--oversubscribe"] + prefix + [BIN, "--out", out] + args
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tc.tmp, env=_env(), timeout=timeout)
    return Run(cmd, p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"),
               time.monotonic() - t0, out, False)


def rank_pid(out, rank, pids=None):
    """The pid of commscript rank RANK (not its guardian, named cs-guardian), among PIDS (default:
    every process) and, unless OUT is None, the one writing into OUT."""
    for pid in (os.listdir("/proc") if pids is None else pids):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % pid) as f:
                if f.read().strip() != "commscript":
                    continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if ("OMPI_COMM_WORLD_RANK=%d" % rank).encode() in env and (out is None or out.encode() in cmd):
            return int(pid)
    return None


def run(args, np=None, timeout=DEFAULT_TIMEOUT, out_dir=None, cwd=None, env=None, stdin_text=""):
    """Runs `commscript ARGS` (under `mpirun -np NP --oversubscribe` when np is given).
    out_dir: when given, `--out OUT_DIR` is put before ARGS. The process group is killed when
    the call runs past `timeout` seconds (rc is then None and timed_out True)."""
    cmd = [BIN]
    if out_dir is not None:
        cmd += ["--out", out_dir]
    cmd += list(args)
    if np is not None:
        cmd = [MPIRUN, "-np", str(np), "--oversubscribe"] + cmd
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         cwd=cwd, env=_env(env), start_new_session=True)
    timed_out = False
    try:
        out, err = p.communicate(stdin_text.encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the group of the process this call started
        except ProcessLookupError:
            pass
        out, err = p.communicate()
    elapsed = time.monotonic() - t0
    return Run(cmd, None if timed_out else p.returncode, out.decode("utf-8", "replace"),
               err.decode("utf-8", "replace"), elapsed, out_dir, timed_out)


class TestCase(unittest.TestCase):
    """A TestCase with a temporary directory (self.tmp) that is also the cwd of every call, so
    that nothing is written into the repository."""

    maxDiff = 4000

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cs-e2e-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self._outs = 0

    def new_out(self):
        self._outs += 1
        return os.path.join(self.tmp, "out%d" % self._outs)

    def cs(self, args, np=None, out=True, timeout=DEFAULT_TIMEOUT, cwd=None, env=None):
        """Runs commscript; out=True gives it a fresh --out directory under self.tmp."""
        return run(args, np=np, timeout=timeout, out_dir=self.new_out() if out else None,
                   cwd=cwd or self.tmp, env=env)

    def write(self, name, text):
        p = os.path.join(self.tmp, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    def recipe(self, name, run_body, top="", decl_extra=""):
        """Writes a temporary recipe NAME.lua whose run(ctx) is RUN_BODY; returns its path.
        Line 1 is `local cs = ...`; TOP (if any) starts on line 2."""
        text = ('local cs = require "commscript"\n' + top +
                'local recipe = cs.recipe { name = "%s", version = "0.1.0"%s }\n' % (name, decl_extra) +
                "function recipe.run(ctx)\n" + run_body + "\nend\nreturn recipe\n")
        return self.write(name + ".lua", text)

    def assertExit(self, r, code, max_s=None):
        self.assertFalse(r.timed_out, "commscript hung\n" + r.describe())
        self.assertEqual(r.rc, code, "unexpected exit code\n" + r.describe())
        if max_s is not None:
            self.assertLess(r.elapsed, max_s, "took too long\n" + r.describe())


def main():
    unittest.main(verbosity=2)
