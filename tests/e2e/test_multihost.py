"""commscript across several "hosts" joined by real links: network namespaces cs-h0..cs-hN-1 on a
bridge (scripts/netns_hosts.sh), one host's link throttled with tc tbf to 100 Mbit/s in both
directions, mpirun reaching every host's orted through an rsh agent (scripts/rsh_netns.sh) that
enters the host's namespace under the host's own hostname. mpirun itself runs in a launcher
namespace on the same bridge (cs-launch, 10.77.0.254): the root namespace is never touched.

  * a throttled host (cs-h2) is named by the diagnosis, and nobody else (4 hosts x 1 rank, and
    3 hosts x 2 ranks where the two ranks of the slow host must both be attributed to it);
  * a healthy 4-host run names nobody (several runs);
  * the heartbeat coordinator works across hosts: a rank hung on cs-h3 (4 x 1; and on cs-h2 with
    3 x 2) ends the job with exit 5 and is named with its rank and host, every rank's heartbeat
    having reached rank 0 on cs-h0 (over the bridge, and over loopback from cs-h0's other rank).

Needs root, iproute2 (ip netns, veth, bridge), tc, unshare and Open MPI; skipped with the
reason otherwise. Everything is removed afterwards (also on failure), and leftovers of an earlier
run are removed first. The namespaces carry this process's pid as a tag (cs-h0.PID, ...), so that
concurrent runs do not meet; the hostnames are cs-h0... in every run.

The 4+ "hosts" share this machine's few cores, which real hosts do not:
  * ranks are run with mpi_yield_when_idle, so that a busy-polling rank does not starve the rank of
    another host on its core (without it a healthy pair was measured 200x slower than the others);
  * every link is limited to BASE_RATE (a 1 Gbit/s fabric; the throttled host gets RATE, 10x
    less). Unlimited, the veths move 256 KB in ~0.1 ms at memory speed, and a pair whose two
    ranks happen to share a core (the scheduler's choice, sticky for seconds) is 3-15x slower than
    the others, retest included: healthy runs then named that round's two pairs as slow links in
    about 1 run of 4 on a loaded 2-core machine. At 1 Gbit/s the transfer (~4 ms) dominates."""
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

import cs_e2e

NETNS = os.path.join(cs_e2e.REPO, "scripts", "netns_hosts.sh")
AGENT = os.path.join(cs_e2e.REPO, "scripts", "rsh_netns.sh")
SUBNET = "10.77.0.0/24"
RATE = "100mbit"    # the throttled host's link
BASE_RATE = "1gbit"  # every other link: see below
SLOW_HOST = 2
HEALTHY_RUNS = 3

# The diagnosis run. TODO(full_diag): recipes/full_diag.lua is the intended recipe; the fallbacks
# below (recipes/p2p_matrix.lua, else the inline INLINE_RECIPE) only exist for a tree without it.
FULL_DIAG = os.path.join(cs_e2e.REPO, "recipes", "full_diag.lua")
P2P_MATRIX = os.path.join(cs_e2e.REPO, "recipes", "p2p_matrix.lua")

# Pairwise sendrecv times (round robin, fastest of 3), localisation, suspects re-tested alone,
# each confirmed culprit reported with subject.host.
INLINE_RECIPE = r'''local cs = require "commscript"
local recipe = cs.recipe { name = "mh_pairs", version = "0.1.0" }
function recipe.run(ctx)
  local hosts = ctx.comm:allgather_value(ctx.host)
  local args = { op = "sendrecv", bytes = 262144, iters = 10, repeats = 3 }
  local measured = cs.p2p.round_robin(ctx, args)
  for _, p in ipairs(measured) do
    ctx.report:result { kind = "pair", a = p[1], b = p[2], hosts = { hosts[p[1] + 1], hosts[p[2] + 1] }, min_us = p[3] }
  end
  local loc = cs.diagnose.screen_pairs(ctx.size, measured, { factor = 1.5, link_factor = 3 })
  local suspects, is_suspect, good = {}, {}, {}
  for _, s in ipairs(loc.ranks) do suspects[#suspects + 1] = s.rank; is_suspect[s.rank] = true end
  for r = 0, ctx.size - 1 do if not is_suspect[r] then good[#good + 1] = r end end
  table.sort(good, function(x, y) return (loc.scores[x + 1] or 0) < (loc.scores[y + 1] or 0) end)
  for _, c in ipairs(cs.p2p.confirm(ctx, suspects, good, args, 1.5)) do
    ctx.report:finding { severity = "warn", subject = { rank = c.rank, host = hosts[c.rank + 1] },
      message = ("rank %d on %s is slow with every partner (%.1f us alone vs %.1f us)"):format(
        c.rank, hosts[c.rank + 1], c.value, c.reference), remedy = "check its link" }
  end
  for _, p in ipairs(loc.pairs) do
    ctx.report:finding { severity = "warn", subject = { pair = { p.a, p.b }, hosts = { hosts[p.a + 1], hosts[p.b + 1] } },
      message = ("link %d-%d is slow"):format(p.a, p.b), remedy = "check the link" }
  end
end
return recipe
'''


def sh(args, timeout=60):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                          universal_newlines=True)


def why_not():
    """None when the multi-host setup can run here, else the reason to skip."""
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "needs root (ip netns, veth, tc)"
    for tool in ("ip", "tc", "unshare", "bash"):
        if not shutil.which(tool):
            return "%s is not installed" % tool
    r = sh(["ip", "netns", "list"])
    if r.returncode != 0:
        return "`ip netns` is unavailable: %s" % r.stderr.strip()
    try:
        v = sh([cs_e2e.MPIRUN, "--version"], timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "%s --version failed: %s" % (cs_e2e.MPIRUN, e)
    if "Open MPI" not in v.stdout + v.stderr:
        return "the launch flags (plm_rsh_agent, btl tcp) are Open MPI's; %s is not Open MPI" % cs_e2e.MPIRUN
    if not os.path.exists(cs_e2e.BIN):
        return "no commscript binary at %s" % cs_e2e.BIN
    return None


# This run's own set of namespaces (cs-h0.TAG, ...): concurrent runs (ctest in several build
# directories) do not meet; `down --stale` removes the sets of runs that were killed.
TAG = str(os.getpid())


def env():
    return cs_e2e._env({"CS_NETNS_TAG": TAG})


def netns(*args, timeout=60):
    return subprocess.run(["bash", NETNS] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout, universal_newlines=True, env=env())


def hosts_down():
    netns("down")


class MultiHost(cs_e2e.TestCase):

    @classmethod
    def setUpClass(cls):
        reason = why_not()
        if reason:
            raise unittest.SkipTest(reason)
        netns("down", "--stale")  # leftovers of killed runs
        hosts_down()
        r = netns("up", "1")
        hosts_down()
        if r.returncode != 0:
            raise unittest.SkipTest("cannot create network namespaces here: " + (r.stderr or r.stdout).strip())

    @classmethod
    def tearDownClass(cls):
        hosts_down()

    # ---- setup ----
    def hosts_up(self, n, slots=1, throttle=None):
        """Creates n hosts (slots ranks each) on BASE_RATE links, host `throttle`'s limited to RATE;
        all removed at cleanup."""
        self.addCleanup(hosts_down)  # also when `up` fails half-way
        args = ["up", str(n), "--slots", str(slots), "--rate", BASE_RATE]
        if throttle is not None:
            args += ["--throttle", str(throttle), RATE]
        r = netns(*args)
        self.assertEqual(r.returncode, 0, "netns_hosts.sh %s failed:\n%s%s" % (" ".join(args), r.stdout, r.stderr))
        self.assertEqual(r.stdout.split("\n")[:n], ["cs-h%d slots=%d" % (i, slots) for i in range(n)], r.stdout)
        self.placement = {}  # rank -> host (Open MPI fills each host's slots in order)
        for rank in range(n * slots):
            self.placement[rank] = "cs-h%d" % (rank // slots)

    def mpirun_argv(self, n, slots, args, out_dir):
        """The command line that runs commscript on the namespace hosts."""
        return ["bash", NETNS, "run", cs_e2e.MPIRUN,
                "--mca", "plm_rsh_agent", AGENT,
                "--mca", "plm_rsh_no_tree_spawn", "1",   # only the launcher calls the agent
                "--mca", "rtc", "^hwloc",               # (orted may crash in hwloc's shmem topology)
                "--mca", "btl", "tcp,self",
                "--mca", "btl_tcp_if_include", SUBNET,
                "--mca", "oob_tcp_if_include", SUBNET,
                "--mca", "mpi_yield_when_idle", "1",
                "-x", "OMPI_MCA_rtc=^hwloc",
                "--oversubscribe",
                "--host", ",".join("cs-h%d:%d" % (i, slots) for i in range(n)),
                "-np", str(n * slots),
                cs_e2e.BIN, "--out", out_dir] + list(args)

    def mh(self, n, slots, args, timeout=90):
        """Runs commscript ARGS on n hosts x slots ranks; a cs_e2e.Run."""
        out = self.new_out()
        argv = self.mpirun_argv(n, slots, args, out)
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd=self.tmp, env=env(), start_new_session=True)
        timed_out = False
        try:
            so, se = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the group this call started; the orteds in the
            except ProcessLookupError:           # namespaces are ended by `down`
                pass
            so, se = p.communicate()
        return cs_e2e.Run(argv, None if timed_out else p.returncode, so.decode("utf-8", "replace"),
                          se.decode("utf-8", "replace"), time.monotonic() - t0, out, timed_out)

    def diagnosis_args(self):
        if os.path.exists(FULL_DIAG):
            # --max 64K: the sweep through a 100 Mbit/s link stays short; the pattern and
            # localisation stages use the tier's own 256K pairs.
            return ["full_diag", "--tier", "quick", "--max", "64K"]
        if os.path.exists(P2P_MATRIX):  # TODO(full_diag): only until recipes/full_diag.lua exists
            return ["p2p_matrix"]
        return [self.write("mh_pairs.lua", INLINE_RECIPE)]  # TODO(full_diag): likewise

    # ---- reading the findings ----
    def named_hosts(self, rep):
        """The hosts the warn/error findings name (info findings, e.g. "ranks not bound to CPUs",
        describe a host without blaming it), and the findings naming them."""
        named, by = set(), []
        for f in rep.get("findings", []):
            if f.get("severity") not in ("warn", "error"):
                continue
            s = f.get("subject") or {}
            hs = set()
            if isinstance(s.get("host"), str):
                hs.add(s["host"])
            hs.update(h for h in (s.get("hosts") or []) if isinstance(h, str))
            ranks = ([s["rank"]] if isinstance(s.get("rank"), int) else []) + list(s.get("ranks") or []) + \
                list(s.get("pair") or [])
            hs.update(self.placement.get(r, "rank %s" % r) for r in ranks if isinstance(r, int))
            if hs:
                named |= hs
                by.append(f)
        return named, by

    def summary(self, r, rep):
        pairs = ["%s-%s %.0fus" % (x.get("a"), x.get("b"), x.get("min_us", x.get("bw_gbps", 0)))
                 for x in rep.get("results", []) if x.get("kind") == "pair"]
        return "findings: %s\npairs: %s\n%s" % (
            [(f.get("severity"), f.get("subject"), f.get("message")) for f in rep.get("findings", [])],
            ", ".join(pairs), r.describe(2500))

    def check_throttle_took(self, rep, slow_ranks, r):
        """The matrix (when the recipe records one) shows the throttled links at about RATE."""
        m = rep.get("matrix")
        if not m or not m.get("values"):
            return
        slow, fast = [], []
        for a, row in enumerate(m["values"]):
            for b, v in enumerate(row):
                if a != b and v is not None and not (a in slow_ranks and b in slow_ranks):  # not on one host
                    (slow if a in slow_ranks or b in slow_ranks else fast).append(v)
        if not slow or not fast:
            return
        # 100 Mbit/s = 0.0125 GB/s; the other links run at up to 1 Gbit/s = 0.125 GB/s (the
        # pairs of one host go over its loopback and are left out).
        # Two ranks of a host share its link, hence the medians.
        self.assertLess(max(slow), 0.02, "a throttled link is faster than %s (tc did not take?)\n%s"
                        % (RATE, self.summary(r, rep)))
        med = lambda v: sorted(v)[len(v) // 2]
        self.assertGreater(med(fast), 2 * med(slow), "the throttled links are not the slow ones\n" + self.summary(r, rep))

    def check_only_slow_host_named(self, n, slots):
        self.hosts_up(n, slots, throttle=SLOW_HOST)
        r = self.mh(n, slots, self.diagnosis_args(), timeout=100)
        self.assertFalse(r.timed_out, "hung\n" + r.describe())
        self.assertIn(r.rc, (cs_e2e.OK, cs_e2e.HEALTH), r.describe())
        rep = r.report()
        slow_host = "cs-h%d" % SLOW_HOST
        slow_ranks = [k for k, h in self.placement.items() if h == slow_host]
        self.check_throttle_took(rep, slow_ranks, r)
        named, by = self.named_hosts(rep)
        self.assertEqual(named, {slow_host}, "expected exactly %s to be named\n%s" % (slow_host, self.summary(r, rep)))
        # The finding names the host by name (subject.host), not only through its ranks.
        self.assertTrue(any((f.get("subject") or {}).get("host") == slow_host for f in by), self.summary(r, rep))
        return r, rep

    # ---- tests ----
    def test_throttled_host_is_named_4x1(self):
        self.check_only_slow_host_named(4, 1)

    def test_throttled_host_is_named_3x2(self):
        """Two ranks per host: cs-h2's ranks 4 and 5 talk over loopback among themselves (fast) and
        over the throttled link to everyone else; the host is named, the other hosts are not."""
        r, rep = self.check_only_slow_host_named(3, 2)
        topo = rep.get("topology", {}).get("hosts")
        if isinstance(topo, dict):  # host -> ranks, or host -> { ranks = ..., ... } (cs.topo)
            ranks = {h: v.get("ranks") if isinstance(v, dict) else v for h, v in topo.items()}
            self.assertEqual(ranks, {"cs-h0": [0, 1], "cs-h1": [2, 3], "cs-h2": [4, 5]}, r.describe())

    def test_healthy_hosts_name_nobody(self):
        self.hosts_up(4)
        for i in range(HEALTHY_RUNS):
            r = self.mh(4, 1, self.diagnosis_args(), timeout=90)
            self.assertExit(r, cs_e2e.OK)
            rep = r.report()
            named, _ = self.named_hosts(rep)
            self.assertEqual(named, set(), "healthy run %d of %d named somebody\n%s" % (i + 1, HEALTHY_RUNS, self.summary(r, rep)))
            self.assertEqual([f for f in rep["findings"] if f["severity"] == "error"], [], self.summary(r, rep))

    def check_hang(self, n, slots, rank):
        """RANK stops after 3 operations: the coordinator on rank 0 (cs-h0) names it with its host,
        having heard every rank's heartbeat: over the bridge from the other hosts, over loopback
        from cs-h0's other rank."""
        self.hosts_up(n, slots)
        host = self.placement[rank]
        r = self.mh(n, slots, ["--timeout", "3", "--set", 'chaos=[{kind="hang", ranks=[%d], after=3}]' % rank,
                               "bw_sweep", "--max", "1K", "--iters", "3"], timeout=60)
        self.assertExit(r, cs_e2e.TIMEOUT, max_s=40)
        self.assertRegex(r.stderr, r"missing ranks: %d \(host %s" % (rank, host), r.describe())
        rep = r.report()
        self.assertEqual(rep["run"]["exit_code"], cs_e2e.TIMEOUT)
        inc = [i for i in rep["incidents"] if i.get("kind") == "timeout"]
        self.assertTrue(inc, r.describe())
        self.assertEqual([(m["rank"], m["host"]) for m in inc[0]["missing"]], [(rank, host)], inc[0])
        # Every rank said HELLO from its own host: the heartbeats crossed the namespaces.
        seen = {x["rank"]: (x["host"], x["state"]) for x in inc[0].get("ranks", [])}
        self.assertEqual({k: v[0] for k, v in seen.items()}, self.placement, inc[0])
        self.assertTrue(all(v[1] != "never connected" for v in seen.values()), inc[0])
        # Rank 0 listened on its bridge address alone (the job's address), not on every interface.
        self.assertNotIn("listening on every interface", r.stderr, r.describe())

    def test_hang_on_another_host_is_named(self):
        self.check_hang(4, 1, 3)

    def test_hang_on_another_host_is_named_3x2(self):
        self.check_hang(3, 2, 5)


if __name__ == "__main__":
    cs_e2e.main()
