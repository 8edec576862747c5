"""commscript under a real Slurm (Debian's slurmctld, slurmd, srun, sbatch, scancel and munge):
scripts/slurm_cluster.sh brings up 4 nodes, each a network-namespace host with its own host name
(slm-h0..slm-h3) and address, one slurmd each, on 1 Gbit/s links; slm-h2's link is throttled to
100 Mbit/s. Then:

  * srun -N 4 --ntasks-per-node=1 --mpi=pmix commscript full_diag: the report names the 4 nodes
    and exactly slm-h2 as slow;
  * sbatch examples/slurm/full_diag.sbatch: the same from the batch script, its output in
    full_diag-<jobid>.out and the report in commscript-runs/full_diag-<jobid>/ (no node but
    slm-h2 named);
  * scancel of the job (SIGTERM, then SIGKILL after KillWait) and of the step with
    --signal=TERM: exit 143, the report says SIGTERM ended the run; scancel of the step
    without a signal is Slurm's SIGKILL to every process of the step: exit 137, nothing left to
    write a report, results.jsonl kept;
  * a node's slurmd killed mid-run: slurmctld declares the node DOWN (SlurmdTimeout, 6 s here)
    and ends the step on the others with SIGTERM: exit 143, srun names the node, the report
    says SIGTERM ended the run, the other nodes' ranks wrote their flight records (the rank on
    the failed node was never signalled: it still runs there); the whole node killed (slurmd, slurmstepd and the rank): rank 0
    names the dead rank and its host at once (incident rank_died), then the same exit 143;
  * --backend gloo --launcher slurm under srun --mpi=none (the store on the first node), and
    with the SLURM_* variables alone, without srun.

Needs root, iproute2, tc, nsenter/unshare, Open MPI and the Slurm and munge packages
(scripts/install-deps.sh --slurm); skipped with the reason otherwise, a failure instead when
CS_REQUIRE_SLURM=1 (.ci/run). About 2.5 minutes. srun runs with --kill-on-bad-exit (a rank that
crashes ends the step, as under mpirun); SLURM_PMIX_FENCE=tree; a launch that crashed inside
MPI_Init all the same (init_crash) is tried once more, with a note on stderr. Everything (daemons, tasks, namespaces, state
directory) is removed at the end, also after a failure; `scripts/slurm_cluster.sh down --stale`
removes what a killed run left."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest

import cs_e2e

CLUSTER = os.path.join(cs_e2e.REPO, "scripts", "slurm_cluster.sh")
SBATCH = os.path.join(cs_e2e.REPO, "examples", "slurm", "full_diag.sbatch")
NODES = ["slm-h%d" % i for i in range(4)]
SLOW = 2  # slm-h2's link: 100 Mbit/s, the others 1 Gbit/s
SUBNET = "10.86.0"
NEEDED = ("ip", "tc", "nsenter", "unshare", "munged", "mungekey", "slurmctld", "slurmd", "srun", "sbatch",
          "scancel", "squeue", "sinfo")


def why_not():
    if os.geteuid() != 0:
        return "needs root (network namespaces, slurmd)"
    missing = [c for c in NEEDED if not shutil.which(c)]
    if missing:
        return "not installed: %s (scripts/install-deps.sh --slurm)" % ", ".join(missing)
    if not os.path.exists(cs_e2e.BIN):
        return "no commscript binary at " + cs_e2e.BIN
    return None


def env(extra=None):
    e = cs_e2e._env(extra)
    e["SLM_TAG"] = str(os.getpid())
    # The ranks busy-poll less on this 2-core machine; TCP between the namespace hosts. Slurm's
    # tree algorithm for every PMIx fence (docs/launching.md: with its default, a ring for the
    # modex fence, about 1 launch in 16 crashed a rank inside MPI_Init).
    e.update({"OMPI_MCA_mpi_yield_when_idle": "1", "OMPI_MCA_btl": "tcp,self",
              "OMPI_MCA_btl_tcp_if_include": SUBNET + ".0/24", "SLURM_PMIX_FENCE": "tree"})
    return e


def cluster(*args, timeout=60, cwd=None, extra=None):
    return subprocess.run(["bash", CLUSTER] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout, cwd=cwd, env=env(extra), stdin=subprocess.DEVNULL)


def down():
    cluster("down", timeout=60)


def init_crash(stdout, stderr):
    """A rank crashed inside MPI_Init (Open MPI's TCP BTL handed an MPI message that arrived
    during the modex fence to a callback not registered yet: `call *NULL`; about 1 launch in 16
    with Slurm's default fences, none in 60 with SLURM_PMIX_FENCE=tree, docs/launching.md): the
    recipe never started (no "# commscript" header)."""
    return "Segmentation fault" in stderr and "# commscript" not in stdout


def on_sigterm(signum, frame):  # ctest's timeout: still tear down (tearDownClass, class cleanups)
    raise KeyboardInterrupt("SIGTERM")


class Slurm(cs_e2e.TestCase):

    @classmethod
    def setUpClass(cls):
        reason = why_not()
        if reason:
            if os.environ.get("CS_REQUIRE_SLURM") == "1":
                raise RuntimeError("CS_REQUIRE_SLURM=1 and the Slurm test cannot run: " + reason)
            raise unittest.SkipTest(reason)
        signal.signal(signal.SIGTERM, on_sigterm)
        cluster("down", "--stale")
        cls.addClassCleanup(down)  # also when `up` fails half-way
        r = cluster("up", "4", "--rate", "1gbit", "--throttle", str(SLOW), "100mbit", timeout=90)
        if r.returncode != 0:
            raise RuntimeError("slurm_cluster.sh up failed:\n" + r.stdout + r.stderr)

    # ---- running things in the cluster ----
    def srun(self, args, timeout=120, extra=None):
        """`srun -K ARGS` from the controller's namespace, cwd self.tmp; a cs_e2e.Run (its out_dir
        None). Once more after Open MPI's crash in MPI_Init (init_crash), saying so."""
        for attempt in (1, 2):
            r = self.slurm_cmd(["srun", "--kill-on-bad-exit=1"] + list(args), timeout, extra)
            if attempt == 1 and r.rc not in (None, 0) and init_crash(r.stdout, r.stderr):
                print("\nnote: Open MPI crashed in MPI_Init (retrying once):\n" + r.stderr[-1500:], file=sys.stderr)
                continue
            return r

    def slurm_cmd(self, argv, timeout=120, extra=None):
        t0 = time.monotonic()
        try:
            p = cluster("run", *argv, timeout=timeout, cwd=self.tmp, extra=extra)
            return cs_e2e.Run(argv, p.returncode, p.stdout, p.stderr, time.monotonic() - t0, None, False)
        except subprocess.TimeoutExpired as e:
            return cs_e2e.Run(argv, None, str(e.stdout or ""), str(e.stderr or ""), time.monotonic() - t0, None, True)

    def start_srun(self, name, out, recipe_args):
        """srun -K -J NAME ... commscript --out OUT RECIPE_ARGS in the background, once the ranks are
        measuring (results.jsonl has 3 lines): the Popen. Once more after Open MPI's crash in
        MPI_Init (init_crash)."""
        argv = ["bash", CLUSTER, "run", "srun", "--kill-on-bad-exit=1", "-J", name, "-N", "4",
                "--ntasks-per-node=1", "--mpi=pmix", cs_e2e.BIN, "--out", out] + recipe_args
        for attempt in (1, 2):
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.tmp,
                                 env=env(), stdin=subprocess.DEVNULL, start_new_session=True)
            self.addCleanup(lambda p=p: p.poll() is None and os.killpg(p.pid, signal.SIGKILL))
            ended = self.wait_measuring(p, out)
            if ended is None:
                return p
            if attempt == 1 and init_crash(*ended):
                print("\nnote: Open MPI crashed in MPI_Init (retrying once):\n" + ended[1][-1500:], file=sys.stderr)
                continue
            self.fail("srun ended (rc %s) before it measured anything:\n%s\n%s" % (p.returncode, ended[0], ended[1]))

    def wait_measuring(self, p, out, lines=3, limit=40):
        """Until results.jsonl in OUT has LINES lines (the ranks are in their loop): None; or srun's
        (stdout, stderr) when it ended before."""
        path = os.path.join(out, "results.jsonl")
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit:
            if p.poll() is not None:
                return p.communicate()
            if os.path.exists(path):
                with open(path) as f:
                    if f.read().count("\n") >= lines:
                        return None
            time.sleep(0.2)
        self.fail("no %d results in %s after %d s" % (lines, path, limit))

    def job_id(self, name):
        r = self.slurm_cmd(["squeue", "-h", "-n", name, "-o", "%i"], timeout=20)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertRegex(r.stdout.strip(), r"^\d+$", r.describe())
        return r.stdout.strip()

    def finish(self, p, timeout=60):
        try:
            so, se = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            so, se = p.communicate()
            self.fail("srun did not end within %d s:\n%s\n%s" % (timeout, so[-3000:], se[-3000:]))
        return p.returncode, so, se

    def report(self, out, what):
        path = os.path.join(out, "report.json")
        self.assertTrue(os.path.exists(path), "no report.json after %s" % what)
        return cs_e2e.Run([], 0, "", "", 0, out, False).report()

    # ---- reading the findings (test_multihost.py's rule: warn/error findings naming a host) ----
    def named_hosts(self, rep):
        named = set()
        for f in rep.get("findings", []):
            s = f.get("subject") or {}
            if f.get("severity") in ("warn", "error") and isinstance(s.get("host"), str):
                named.add(s["host"])
        return named

    def check_full_diag(self, rep, describe, exactly=True):
        """The report names the 4 nodes, and slm-h2 (exactly=True) or nobody else (exactly=False: the
        batch job, whose point is Slurm's mechanics; one strict check of the localisation is enough
        on a shared 2-core machine)."""
        hosts = rep.get("topology", {}).get("hosts", {})
        self.assertEqual(sorted(hosts), NODES, describe)
        self.assertEqual({h: v.get("ranks") for h, v in hosts.items()},
                         {h: [i] for i, h in enumerate(NODES)}, describe)
        self.assertEqual(rep["run"]["launcher"]["kind"], "mpi", describe)  # srun --mpi=pmix: PMIx ranks
        findings = [(f.get("severity"), f.get("subject"), f.get("message")) for f in rep.get("findings", [])]
        named = self.named_hosts(rep)
        if exactly:
            self.assertEqual(named, {NODES[SLOW]}, "%s\nfindings: %s" % (describe, findings))
        else:
            self.assertLessEqual(named, {NODES[SLOW]}, "%s\nfindings: %s" % (describe, findings))

    # ---- tests (in this order: the last ones take nodes down) ----
    def test_1_srun_pmix_full_diag(self):
        out = self.new_out()
        r = self.srun(["-N", "4", "--ntasks-per-node=1", "--mpi=pmix", cs_e2e.BIN, "--out", out,
                       "full_diag", "--tier", "quick", "--max", "64K"], timeout=150)
        self.assertIn(r.rc, (cs_e2e.OK, cs_e2e.HEALTH), r.describe())
        self.assertIn("4 ranks on 4 hosts", r.stdout, r.describe())
        self.check_full_diag(self.report(out, "srun"), r.describe(2500))

    def sbatch(self):
        """sbatch --wait the example: (Run, job id, the job's output). Once more after Open MPI's
        crash in MPI_Init (init_crash)."""
        for attempt in (1, 2):
            r = self.slurm_cmd(["sbatch", "--wait", "--parsable", SBATCH, "--tier", "quick", "--max", "64K"],
                               timeout=150, extra={"COMMSCRIPT": cs_e2e.BIN})
            job = r.stdout.strip().split(";")[0]
            self.assertRegex(job, r"^\d+$", r.describe())
            log = os.path.join(self.tmp, "full_diag-%s.out" % job)  # --output=%x-%j.out
            self.assertTrue(os.path.exists(log), "no %s: %s" % (log, os.listdir(self.tmp)))
            with open(log) as f:
                text = f.read()
            if attempt == 1 and r.rc != 0 and init_crash(text, text):
                print("\nnote: Open MPI crashed in MPI_Init (retrying once):\n" + text[-1500:], file=sys.stderr)
                continue
            return r, job, text

    def test_2_sbatch_full_diag(self):
        r, job, text = self.sbatch()
        self.assertIn(r.rc, (cs_e2e.OK, cs_e2e.HEALTH), r.describe() + text[-3000:])  # sbatch --wait: the job's exit code
        out = os.path.join(self.tmp, "commscript-runs", "full_diag-" + job)
        self.assertIn("report written to %s/report.json" % out, text, text[-3000:])
        self.assertIn("full_diag on 4 nodes (slm-h[0-3])", text, text[-3000:])
        self.check_full_diag(self.report(out, "sbatch"), text[-2500:], exactly=False)

    def check_sigterm(self, cancel_argv, name):
        out = self.new_out()
        p = self.start_srun(name, out, ["soak", "--duration", "60", "--max", "4K"])
        job = self.job_id(name)
        r = self.slurm_cmd([a.replace("JOB", job) for a in cancel_argv], timeout=20)
        self.assertEqual(r.rc, 0, r.describe())
        rc, so, se = self.finish(p)
        describe = "rc %s\n%s\n%s" % (rc, so[-2000:], se[-3000:])
        self.assertEqual(rc, 128 + signal.SIGTERM, describe)  # every task's exit status: 143
        rep = self.report(out, "scancel")
        self.assertEqual(rep["run"]["exit_code"], 143, describe)
        inc = [i for i in rep["incidents"] if i.get("kind") == "killed"]
        self.assertTrue(inc, describe)
        self.assertEqual(inc[0]["signal"], "SIGTERM", inc[0])
        self.assertIn("the run was interrupted", inc[0]["message"], inc[0])
        self.assertIn("commscript: SIGTERM: the run was interrupted", se, describe)
        # Every rank wrote its own flight record on the way out.
        self.assertEqual(sorted(os.listdir(os.path.join(out, "flight"))), ["rank-%d.json" % i for i in range(4)])

    def test_3_scancel_job(self):
        self.check_sigterm(["scancel", "JOB"], "cs_cancel_job")

    def test_3_scancel_step_term(self):
        self.check_sigterm(["scancel", "--signal=TERM", "JOB.0"], "cs_cancel_term")

    def test_4_scancel_step_kill(self):
        """Slurm's step cancel without a signal is SIGKILL to every process of the step, commscript's
        guardians too (they are its descendants): no process is left to write a report."""
        out = self.new_out()
        p = self.start_srun("cs_cancel_kill", out, ["soak", "--duration", "60", "--max", "4K"])
        job = self.job_id("cs_cancel_kill")
        r = self.slurm_cmd(["scancel", job + ".0"], timeout=20)
        self.assertEqual(r.rc, 0, r.describe())
        rc, so, se = self.finish(p)
        self.assertEqual(rc, 128 + signal.SIGKILL, "rc %s\n%s" % (rc, se[-3000:]))
        self.assertIn("task 0: Killed", se)
        # What was measured before the kill is on disk, line by line.
        with open(os.path.join(out, "results.jsonl")) as f:
            self.assertGreaterEqual(f.read().count("\n"), 3)

    def test_5_slurmd_killed(self):
        """Node 3's slurmd dies mid-run (its step's processes go on): slurmctld declares the node DOWN
        and ends the step on the other nodes with SIGTERM. srun names the node; the report says
        SIGTERM ended the run, and ranks 0-2 wrote their flight records (rank 3, on the node
        that lost its slurmd, was never signalled: it is still running there)."""
        self.addCleanup(cluster, "revive", "3", timeout=60)
        out = self.new_out()
        p = self.start_srun("cs_slurmd_killed", out, ["soak", "--duration", "60", "--max", "4K"])
        r = cluster("kill-node", "3", "--slurmd-only")
        self.assertEqual(r.returncode, 0, r.stderr)
        rc, so, se = self.finish(p, timeout=60)
        describe = "rc %s\n%s\n%s" % (rc, so[-2000:], se[-3000:])
        self.assertEqual(rc, 143, describe)
        self.assertIn("Node failure on slm-h3", se, describe)
        rep = self.report(out, "the slurmd's death")
        inc = [i for i in rep["incidents"] if i.get("kind") == "killed"]
        self.assertTrue(inc, describe)
        self.assertEqual(inc[0]["signal"], "SIGTERM", inc[0])
        self.assertEqual(sorted(os.listdir(os.path.join(out, "flight"))), ["rank-%d.json" % i for i in range(3)])

    def test_6_node_killed(self):
        """Node 3 dies whole (slurmd, slurmstepd and rank 3 SIGKILLed): rank 0 names rank 3 and its host
        at once; Slurm ends the others when it declares the node DOWN."""
        self.addCleanup(cluster, "revive", "3", timeout=60)
        out = self.new_out()
        p = self.start_srun("cs_node_killed", out, ["soak", "--duration", "60", "--max", "4K"])
        r = cluster("kill-node", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        rc, so, se = self.finish(p, timeout=60)
        describe = "rc %s\n%s\n%s" % (rc, so[-2000:], se[-3000:])
        self.assertEqual(rc, 143, describe)
        # rank 0 names rank 3 and its host: as dead (its heartbeats stopped), or as killed by SIGKILL
        # when its guardian's word arrives first (both seen under load)
        self.assertRegex(se, r"commscript: rank 3 \(host slm-h3, pid \d+\) (died during the run|was killed by SIGKILL)",
                         describe)
        rep = self.report(out, "the node's death")
        died = [i for i in rep["incidents"] if i.get("kind") == "rank_died"]
        if died:
            self.assertEqual([(d["rank"], d["host"]) for d in died[0]["dead_ranks"]], [(3, "slm-h3")], died[0])
        else:
            self.assertIn('"slm-h3"', json.dumps(rep["incidents"]), describe)

    def test_7_srun_gloo_launcher_slurm(self):
        """srun without PMIx: --launcher slurm (SLURM_PROCID, SLURM_NTASKS), the store on the first
        node's address."""
        out = self.new_out()
        r = self.srun(["-N", "4", "--ntasks-per-node=1", "--mpi=none", cs_e2e.BIN, "--out", out,
                       "--backend", "gloo", "bw_sweep", "--max", "4K", "--iters", "3"], timeout=90,
                      extra={"MASTER_ADDR": SUBNET + ".1", "MASTER_PORT": "29511"})
        self.assertExit(r, cs_e2e.OK)
        rep = self.report(out, "srun --mpi=none")
        self.assertEqual(rep["run"]["launcher"]["kind"], "slurm", r.describe())
        self.assertTrue(rep["run"]["launcher"]["detected"], r.describe())
        self.assertEqual(sorted(rep["topology"]["hosts"]), NODES, r.describe())

    def test_8_launcher_slurm_variables_only(self):
        """No srun at all: two processes with the SLURM_* variables a step would have."""
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        out = self.new_out()
        procs = []
        for rank in range(2):
            e = env({"SLURM_PROCID": str(rank), "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0", "SLURM_LOCALID": str(rank),
                     "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
            procs.append(subprocess.Popen([cs_e2e.BIN, "--out", out, "--backend", "gloo", "bw_sweep", "--max", "4K",
                                           "--iters", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True, env=e, cwd=self.tmp, start_new_session=True))
        outs = [self.finish(p, timeout=60) for p in procs]
        self.assertEqual([o[0] for o in outs], [0, 0], outs)
        rep = self.report(out, "--launcher slurm")
        self.assertEqual(rep["run"]["launcher"]["kind"], "slurm")
        self.assertEqual(rep["run"]["launcher"]["master_port"], port)


if __name__ == "__main__":
    cs_e2e.main()
