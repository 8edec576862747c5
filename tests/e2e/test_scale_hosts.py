"""full_diag's budgets on network-namespace hosts (issue 11): one host's link throttled by tc tbf,
the quick tier with --max 64K, at 4 and 8 hosts x 2 ranks: the slow host is named, nobody else,
and the run ends within the quick tier's budget (60 s) plus start and report. To keep CI short
the run gets --budget 20 (CS_SCALE_HOSTS_BUDGET): a slow host named within 20 s is named within
the tier's 60; the stages' total (which may overrun the short budget by the round in progress)
is checked against the tier's budget.

Hosts come from scripts/netns_hosts.sh with its own names (CS_NETNS_PREFIX=cs-sr: cs-sr-h0.TAG
...) and subnet 10.78.0.0/24, so it never meets e2e_multihost's set; mpirun reaches them through
scripts/rsh_netns.sh. Every link runs at BASE_RATE, the slow host's at RATE.

Also runnable by hand, one configuration at a time (prints the per-stage times):
    python3 tests/e2e/test_scale_hosts.py --hosts 8 --slots 2
Needs root, iproute2, tc, unshare and Open MPI; skipped with the reason otherwise."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

import cs_e2e

NETNS = os.path.join(cs_e2e.REPO, "scripts", "netns_hosts.sh")
AGENT = os.path.join(cs_e2e.REPO, "scripts", "rsh_netns.sh")
SUBNET = "10.78.0.0/24"
RATE = "100mbit"
BASE_RATE = "1gbit"
SLOW_HOST = 2
TIER_BUDGET_S = 60  # the quick tier's
# The run's budget (--budget): the slow host named within it is named within the tier's; shorter
# keeps the test within CI's time.
BUDGET_S = int(os.environ.get("CS_SCALE_HOSTS_BUDGET", "20"))
SLACK_S = 25       # mpirun's start on namespace hosts, the report, the orteds' exit
TAG = str(os.getpid())


def env():
    return cs_e2e._env({"CS_NETNS_TAG": TAG, "CS_NETNS_SUBNET": "10.78.0", "CS_NETNS_PREFIX": "cs-sr"})


def netns(*args, timeout=90):
    return subprocess.run(["bash", NETNS] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout, universal_newlines=True, env=env())


def why_not():
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "needs root (ip netns, veth, tc)"
    for tool in ("ip", "tc", "unshare", "bash"):
        if not shutil.which(tool):
            return "%s is not installed" % tool
    try:
        v = subprocess.run([cs_e2e.MPIRUN, "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=30, universal_newlines=True)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "%s --version failed: %s" % (cs_e2e.MPIRUN, e)
    if "Open MPI" not in v.stdout + v.stderr:
        return "the launch flags are Open MPI's; %s is not Open MPI" % cs_e2e.MPIRUN
    if not os.path.exists(cs_e2e.BIN):
        return "no commscript binary at %s" % cs_e2e.BIN
    return None


def hosts_up(n):
    """n namespace hosts, host SLOW_HOST's link throttled (removed again when this fails)."""
    r = netns("up", str(n), "--rate", BASE_RATE, "--throttle", str(SLOW_HOST), RATE)
    if r.returncode != 0:
        netns("down")
        raise RuntimeError("netns_hosts.sh up failed:\n" + r.stdout + r.stderr)


def run_diag(n, slots, out_dir, timeout):
    """full_diag quick --max 64K on the first n hosts x slots ranks (hosts_up first). Returns
    (cs_e2e.Run, placement rank -> host)."""
    argv = ["bash", NETNS, "run", cs_e2e.MPIRUN,
            "--mca", "plm_rsh_agent", AGENT, "--mca", "plm_rsh_no_tree_spawn", "1",
            "--mca", "rtc", "^hwloc", "--mca", "btl", "tcp,self",
            "--mca", "btl_tcp_if_include", SUBNET, "--mca", "oob_tcp_if_include", SUBNET,
            "--mca", "mpi_yield_when_idle", "1", "-x", "OMPI_MCA_rtc=^hwloc", "--oversubscribe",
            "--host", ",".join("cs-sr-h%d:%d" % (i, slots) for i in range(n)), "-np", str(n * slots),
            cs_e2e.BIN, "--out", out_dir, "full_diag", "--tier", "quick", "--max", "64K",
            "--budget", str(BUDGET_S)]
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env(), start_new_session=True)
    timed_out = False
    try:
        so, se = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        hang = snapshot(out_dir)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        so, se = p.communicate()
    run = cs_e2e.Run(argv, None if timed_out else p.returncode, so.decode("utf-8", "replace"),
                     se.decode("utf-8", "replace"), time.monotonic() - t0, out_dir, timed_out)
    run.hang = hang if timed_out else ""
    return run, {k: "cs-sr-h%d" % (k // slots) for k in range(n * slots)}


def snapshot(out_dir):
    """What a hung run's ranks are doing, for the failure message (a hang here has been seen once
    in CI and never by hand): each rank's main-thread stack (gdb, when installed) and, per host,
    the TCP sockets that hold unsent or unread bytes or retransmit. Also written to
    OUT/hang.txt."""
    lines = []
    ranks = {}
    for pid in subprocess.run(["pgrep", "-f", "commscript --out " + out_dir], stdout=subprocess.PIPE,
                              universal_newlines=True).stdout.split():
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                envs = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
        except OSError:
            continue
        if b"OMPI_COMM_WORLD_RANK" in envs:  # a rank, not mpirun or the namespace wrapper
            ranks[pid] = envs[b"OMPI_COMM_WORLD_RANK"].decode()
    gdbs = {}
    if shutil.which("gdb"):  # all at once: the ranks stay where they are for a few seconds
        gdbs = {pid: subprocess.Popen(["timeout", "15", "gdb", "-batch", "-p", pid, "-ex", "bt 14"],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
                for pid in ranks}
    for pid, rank in ranks.items():
        frames = "(no gdb)"
        if pid in gdbs:
            bt = gdbs[pid].communicate()[0]
            frames = " < ".join(m.group(1) for m in re.finditer(r"^#\d+\s+(?:0x\S+ in )?(\S+)", bt, re.M))
        lines.append("rank %s pid %s: %s" % (rank, pid, frames or "(no stack)"))
    lines.sort(key=lambda l: int(l.split()[1]))
    for i in range(8):
        ns = "cs-sr-h%d.%s" % (i, TAG)
        ss = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tnoi"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, universal_newlines=True).stdout.splitlines()
        busy = []
        for head, info in zip(ss[1::2], ss[2::2]):
            f = head.split()
            if len(f) >= 5 and (f[1] != "0" or f[2] != "0" or "retrans:" in info or "unacked" in info):
                busy.append("  %s -> %s recvq %s sendq %s |%s" % (f[3], f[4], f[1], f[2], info.strip()[:160]))
        lines.append("host cs-sr-h%d: %d busy socket(s)" % (i, len(busy)))
        lines.extend(busy[:12])
    text = "\n".join(lines)
    try:
        with open(os.path.join(out_dir, "hang.txt"), "w") as f:
            f.write(text + "\n")
    except OSError:
        pass
    return text


def named_hosts(rep, placement):
    named = set()
    for f in rep.get("findings", []):
        if f.get("severity") not in ("warn", "error"):
            continue
        s = f.get("subject") or {}
        if isinstance(s.get("host"), str):
            named.add(s["host"])
        named.update(h for h in (s.get("hosts") or []) if isinstance(h, str))
        ranks = ([s["rank"]] if isinstance(s.get("rank"), int) else []) + list(s.get("ranks") or []) + \
            list(s.get("pair") or [])
        named.update(placement.get(r, "rank %s" % r) for r in ranks if isinstance(r, int))
    return named


def summary(run, rep):
    stages = [(s["name"], round(s["seconds"], 2)) for s in (rep.get("cost") or {}).get("stages", [])]
    plan = (rep.get("matrix") or {}).get("plan")
    return "stages: %s\nplan: %s\nfindings: %s\n%s" % (
        stages, plan, [(f.get("severity"), f.get("subject"), f.get("message")) for f in rep.get("findings", [])],
        run.describe(2500))


class ScaleHosts(cs_e2e.TestCase):

    @classmethod
    def setUpClass(cls):
        reason = why_not()
        if reason:
            raise unittest.SkipTest(reason)
        netns("down", "--stale")
        # One set of 8 hosts for both tests (the 4-host run uses the first 4): setting up and
        # removing namespaces is a good part of the test's time on a loaded machine.
        hosts_up(8)

    @classmethod
    def tearDownClass(cls):
        r = netns("down")
        if r.returncode != 0:
            raise RuntimeError("netns_hosts.sh down failed:\n" + r.stdout + r.stderr)

    def check(self, n, slots):
        run, placement = run_diag(n, slots, self.new_out(), BUDGET_S + SLACK_S + 30)
        if run.timed_out:
            # Seen once in CI (8 x 2, 16 ranks on 2 cores over veths), never in 21 runs by hand:
            # a few ranks waited in a barrier that the others had left, for over 30 s. Print what
            # the ranks were doing, then try once more; a second hang fails the test.
            sys.stderr.write("\nfirst run hung; what the ranks were doing:\n%s\n%s\n" % (run.hang, run.describe(1500)))
            run, placement = run_diag(n, slots, self.new_out(), BUDGET_S + SLACK_S + 30)
        self.assertFalse(run.timed_out, "hung\n" + run.describe() + "\n--- what the ranks were doing ---\n" + run.hang)
        self.assertIn(run.rc, (cs_e2e.OK, cs_e2e.HEALTH), run.describe())
        rep = run.report()
        slow = "cs-sr-h%d" % SLOW_HOST
        self.assertEqual(named_hosts(rep, placement), {slow}, "expected exactly %s\n%s" % (slow, summary(run, rep)))
        # the recipe's own clock: within the quick tier's budget (the run's own, shorter budget
        # may be overrun by the round or re-test in progress at its deadline)
        stages = rep["cost"]["stages"]
        total = sum(s["seconds"] for s in stages)
        self.assertLess(total, TIER_BUDGET_S, summary(run, rep))
        self.assertLess(run.elapsed, TIER_BUDGET_S + SLACK_S, summary(run, rep))
        print("%d hosts x %d: named %s; stages %.1f s (budget %d s), run %.1f s" % (n, slots, slow, total, BUDGET_S,
                                                                                run.elapsed))
        return run, rep

    def test_slow_host_named_4x2(self):
        self.check(4, 2)

    def test_slow_host_named_8x2(self):
        self.check(8, 2)


def main_by_hand(argv):
    import argparse
    import tempfile
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--slots", type=int, default=2)
    a = ap.parse_args(argv)
    reason = why_not()
    if reason:
        print("skipped:", reason)
        return 0
    out = tempfile.mkdtemp(prefix="cs-scale-hosts-")
    netns("down", "--stale")
    try:
        hosts_up(a.hosts)
        run, placement = run_diag(a.hosts, a.slots, out, BUDGET_S + SLACK_S + 30)
    finally:
        netns("down")
    rep = run.report() if os.path.exists(run.path("report.json")) else {}
    print(json.dumps({"hosts": a.hosts, "slots": a.slots, "rc": run.rc, "wall_s": round(run.elapsed, 1),
                      "named": sorted(named_hosts(rep, placement)),
                      "plan": (rep.get("matrix") or {}).get("plan"),
                      "stages": [(s["name"], round(s["seconds"], 2)) for s in (rep.get("cost") or {}).get("stages", [])],
                      "out": out}))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("--hosts"):
        sys.exit(main_by_hand(sys.argv[1:]))
    cs_e2e.main()
