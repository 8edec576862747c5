#!/usr/bin/env python3
"""Localisation's precision and recall, measured (docs/scale.md, "Does localisation tell the
truth"): plant a fault at random, run the diagnosis, compare who was named with what was planted.
A benchmark, not a CI test (tests/e2e/test_truth_netns.py runs a few fixed cases of it).

  scripts/truth_harness.py netns [--seeds 30] [--first-seed 1] [--hosts 4,8] [--slots 1,2]
        [--tiers quick,standard] [--recipe full_diag|p2p_matrix] [--jsonl FILE] [--timeout 240]
        [--budgets Q,S] [--only SHAPE,...]
    Per seed (its own random.Random(seed)): a host count, ranks per host and a tier from the
    lists; a fault shape by turn (seed % 7: bucket, link, flap, stutter, cpu, two, none = a
    healthy run) planted from outside commscript (scripts/plant.py), its place and parameters
    drawn: a tbf token bucket of 16 KB-4 MB at 50-120 Mbit on a host's sending, receiving or both
    directions (on two hosts for "two"; switched on and off every 1.5-4 s for "flap"); an htb
    limit on the path between two hosts (link); a rank stopped (SIGSTOP) for 50-80 % of every
    50-200 ms (stutter) or held by a cgroup v1 CFS quota to 10-40 % of the CPU share it gets anyway
    (2 CPUs / ranks: a quota above that starves nobody) (cpu). Every other
    path runs at 1 Gbit. Hosts are network namespaces (scripts/netns_hosts.sh: names
    cs-tr-h0.PID.., subnet 10.80.0.0/24), mpirun reaches them with scripts/rsh_netns.sh (btl
    tcp,self). full_diag runs --max 64K with --budget 20 (quick) or 60 (standard; --budgets Q,S)
    (its pairs are the tier's: 256K, 1M); p2p_matrix --bytes 256K.
  scripts/truth_harness.py model [--seeds 30] [--ranks 1024] [--hosts 128] [--cv C]
        [--spikes P] [--spike X] [--plan auto|full|sampled] [--kind SHAPE]
    The same shapes, drawn by the same choose(), in scripts/scale_model.sh's synthetic job
    (model_args: a rate is a factor 1000/rate on a faulty direction, the direction, the bucket,
    flapping on and off by the model's clock; the rank shapes' factors fitted to namespace runs),
    scored as a namespace run is, plus the analysis time of each run and the projected seconds to
    the verdict (the model's clock: culprit_s).

Prints one JSON line per run (and appends it to --jsonl), then the table: runs, precision (runs
naming no innocent host, rank or link / runs), recall (runs naming the planted fault / runs with
a fault), recall where the fault was visible (its pairs at least 1.5x the others in the
pattern's own measurements) and recall where the fault, measured alone after the run with the
hosts still up (scripts/truth_alone.lua: its pairs and two others on three hosts, each pair alone,
as the re-tests measure), is at least the verdict's factor 1.5x, per fault kind, with the counts.
A rank of a host with one rank is that host: naming either is right. Needs root, iproute2, tc,
unshare and Open MPI for `netns`."""
import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plant  # noqa: E402  (scripts/plant.py: the faults planted from outside)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETNS = os.path.join(REPO, "scripts", "netns_hosts.sh")
AGENT = os.path.join(REPO, "scripts", "rsh_netns.sh")
KINDS = ("bucket", "link", "flap", "stutter", "cpu", "two", "none")
HOST_KINDS = ("bucket", "flap", "two")
RANK_KINDS = ("stutter", "cpu")
BURSTS = (16384, 65536, 262144, 1048576, 4194304)
BASE_RATE = "1gbit"
BUDGETS = {"quick": 20, "standard": 60}  # full_diag --budget per tier (--budgets changes them)


class Namespaces:
    """A set of namespace hosts of its own (prefix, subnet, tag), for a harness or a test."""

    def __init__(self, prefix="cs-tr", subnet="10.80.0", tag=None):
        self.prefix, self.subnet, self.tag = prefix, subnet, tag or str(os.getpid())

    def env(self, extra=None):
        e = dict(os.environ)
        e.update({"CS_NETNS_TAG": self.tag, "CS_NETNS_SUBNET": self.subnet, "CS_NETNS_PREFIX": self.prefix,
                  "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
        e.update(extra or {})
        return e

    def netns(self, *args, timeout=120):
        return subprocess.run(["bash", NETNS] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout, universal_newlines=True, env=self.env())

    def up(self, n, fault):
        """n hosts at BASE_RATE, a slow link's htb in place (the other shapes: plant.Planter)."""
        args = ["up", str(n), "--rate", BASE_RATE]
        if fault["kind"] == "link":
            args += ["--throttle-link", str(fault["hosts"][0]), str(fault["hosts"][1]), fault["rate"]]
        r = self.netns(*args)
        if r.returncode != 0:
            self.netns("down")
            raise RuntimeError("netns_hosts.sh up failed:\n" + r.stdout + r.stderr)

    def down(self):
        return self.netns("down")

    def host(self, i):
        return "%s-h%d" % (self.prefix, i)


def why_not(binary, mpirun):
    """None when namespace runs can work here, else the reason."""
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "needs root (ip netns, veth, tc)"
    for tool in ("ip", "tc", "unshare", "bash"):
        if not shutil.which(tool):
            return "%s is not installed" % tool
    try:
        v = subprocess.run([mpirun, "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
                           universal_newlines=True)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "%s --version failed: %s" % (mpirun, e)
    if "Open MPI" not in v.stdout + v.stderr:
        return "the launch flags are Open MPI's; %s is not Open MPI" % mpirun
    if not os.path.exists(binary):
        return "no commscript binary at %s" % binary
    return None


def placement(sizes):
    """rank -> host index, for hosts of sizes[i] ranks (mpirun --host h0:s0,h1:s1,... by slot)."""
    out = []
    for i, s in enumerate(sizes):
        out += [i] * s
    return out


def choose(seed, hosts_choices, slots_choices, tiers, kind=None, cpus=None):
    """The seeded configuration of one run: hosts, ranks per host, tier, fault (its shape by turn,
    seed % 7, its parameters drawn: scripts/plant.py). cpus: the CPUs all the ranks share (the
    namespace hosts share this machine's), None when each rank has a CPU of its own (the model)."""
    rnd = random.Random(seed)
    n, slots, tier = rnd.choice(hosts_choices), rnd.choice(slots_choices), rnd.choice(tiers)
    kind = kind or KINDS[seed % len(KINDS)]
    # 50-120 Mbit: the 1 Gbit veths of this 2-core machine carry 160-240 Mbit per stream under
    # load (docs/scale.md), so a limit above that slows nothing and is no fault here
    rate_mbit = rnd.randint(50, 120)
    fault = {"kind": kind, "rate": "%dmbit" % rate_mbit, "rate_mbit": rate_mbit}
    sizes = [slots] * n
    if kind in HOST_KINDS:
        fault["burst"] = rnd.choice(BURSTS)
        fault["dir"] = rnd.choice(("send", "recv", "both"))
        if kind == "two":
            fault["hosts"] = sorted(rnd.sample(range(n), 2))
        else:
            fault["host"] = rnd.randrange(n)
        if kind == "flap":
            fault["on_s"] = round(rnd.uniform(1.5, 4.0), 1)
            fault["off_s"] = round(rnd.uniform(1.5, 4.0), 1)
    elif kind == "link":
        fault["hosts"] = sorted(rnd.sample(range(n), 2))
    elif kind in RANK_KINDS:
        fault["rank"] = rnd.randrange(n * slots)
        if kind == "stutter":
            fault["every_ms"] = rnd.randint(50, 200)
            fault["stop_ms"] = round(fault["every_ms"] * rnd.uniform(0.5, 0.8))
        else:
            # 10-40 % of the CPU share the rank gets anyway (2 cores for 4-16 ranks spinning at
            # once: 0.125-0.5 of a CPU each): a quota above that share starves nobody here
            share = 1.0 if cpus is None else min(1.0, float(cpus) / (n * slots))
            fault["of_share"] = round(rnd.uniform(0.1, 0.4), 2)
            fault["quota"] = round(max(0.01, share * fault["of_share"]), 3)
    for k in ("rate", "rate_mbit"):
        if kind in RANK_KINDS + ("none",):
            fault.pop(k)
    return {"seed": seed, "hosts": n, "slots": slots, "sizes": sizes, "tier": tier, "fault": fault}


def named_of(rep, where, ns):
    """Who the report names: hosts, ranks, links (host index pairs and rank pairs), stragglers,
    and whether localisation said it was too noisy."""
    host_index = {ns.host(i): i for i in range(64)}
    out = {"hosts": [], "ranks": [], "links": [], "stragglers": [], "noisy": None, "other": [], "unconfirmed": []}
    for f in rep.get("findings", []):
        s, rule = f.get("subject") or {}, f.get("rule")
        if rule == "slow_host":
            out["hosts"].append(host_index.get(s.get("host"), s.get("host")))
        elif rule in ("slow_rank", "starved_rank"):
            out["ranks"].append(s.get("rank"))
        elif rule == "slow_link":
            out["links"].append(sorted(s.get("pair") or []))
        elif rule == "straggler":
            out["stragglers"].append(s.get("rank"))
        elif rule == "localisation_noisy":
            out["noisy"] = f.get("message")
        elif rule == "not_confirmed" and f.get("severity") in ("warn", "error"):  # info blames nobody
            out["unconfirmed"].append(host_index.get(s.get("host"), s.get("host")) if s.get("rank") is None
                                      else ("rank", s.get("rank")))
        elif f.get("severity") in ("warn", "error") and (s.get("rank") is not None or s.get("host") or s.get("pair")):
            out["other"].append(rule)
    return out


def score(cfg, named, where):
    """(correct, innocent): the planted fault named (None for a healthy run); someone else named
    (hosts, ranks, links, stragglers and other findings with a rank/host subject all count)."""
    f = cfg["fault"]
    sizes = cfg["sizes"]
    ok_hosts, ok_ranks, ok_links = set(), set(), set()
    planted = []  # each planted fault's set of right answers (hosts, ranks): all must be named
    if f["kind"] in HOST_KINDS:
        for h in (f["hosts"] if f["kind"] == "two" else [f["host"]]):
            right = {("h", h)}
            if sizes[h] == 1:
                right.update(("r", r) for r, x in enumerate(where) if x == h)
            planted.append(right)
    elif f["kind"] in RANK_KINDS:
        right = {("r", f["rank"])}
        if sizes[where[f["rank"]]] == 1:
            right.add(("h", where[f["rank"]]))
        planted.append(right)
    for right in planted:
        ok_hosts.update(x for k, x in right if k == "h")
        ok_ranks.update(x for k, x in right if k == "r")
    link_hosts = tuple(f["hosts"]) if f["kind"] == "link" else None
    said = {("h", h) for h in named["hosts"]} | {("r", r) for r in named["ranks"]}
    # an intermittent fault (a flapping host, a rank stopped by turns) may be named as such: a
    # "not confirmed" warning naming it
    if f["kind"] in ("flap", "stutter"):
        said |= {("r", u[1]) if isinstance(u, (list, tuple)) else ("h", u) for u in named.get("unconfirmed", [])}
    correct = bool(planted) and all(right & said for right in planted)
    innocent = []
    for h in named["hosts"]:
        if h not in ok_hosts:
            innocent.append("host %s" % h)
    for r in named["ranks"]:
        if r not in ok_ranks:
            innocent.append("rank %s" % r)
    for u in named.get("unconfirmed", []):
        k, x = ("r", u[1]) if isinstance(u, (list, tuple)) else ("h", u)
        if x not in (ok_ranks if k == "r" else ok_hosts):
            innocent.append("not confirmed %s %s" % (k, x))
    # a straggler on the slow host, or the slow rank, is late because of the fault: not innocent
    # (and not the localisation's verdict either)
    for r in named["stragglers"]:
        if r not in ok_ranks and not (isinstance(r, int) and r < len(where) and where[r] in ok_hosts):
            innocent.append("straggler %s" % r)
    for a, b in named["links"]:
        if link_hosts and tuple(sorted((where[a], where[b]))) == link_hosts:
            correct = True
        else:
            innocent.append("link %s-%s" % (a, b))
    innocent += ["finding %s" % o for o in named["other"]]
    if f["kind"] == "none":
        correct = None  # nothing to find: a healthy run is judged by precision alone (innocent == [])
    return correct, innocent


def on_phases(log, end):
    """A flap's on intervals (monotonic seconds) from the planter's log [(t, "host I on|off")]."""
    iv, cur = [], None
    for t, what in log:
        if what.endswith(" on") and cur is None:
            cur = t
        elif what.endswith(" off") and cur is not None:
            iv.append((cur, t))
            cur = None
    if cur is not None:
        iv.append((cur, end))
    return iv


def flap_visible(cfg, rep, where, on):
    """A flap's visibility in the pattern: the fleet's median rate (pairs on two hosts) over the
    median of the flapping host's directions the fault shapes (its sends, receives or both) in
    the rounds that ran at least half in an on phase (report.json matrix.clocks, rank 0's
    monotonic clock, the same as the planter's). A pair's best single exchange (min_us) hides a
    fault that is off part of the time. None without clocks or such rounds."""
    f, m = cfg["fault"], rep.get("matrix") or {}
    clocks = m.get("clocks")
    passes = m.get("passes") or ([m["values"]] if m.get("values") else [])
    if not isinstance(clocks, dict) or not on or len(passes) != len(clocks.get("passes", [])):
        return None
    d, fleet, mine = f.get("dir", "both"), [], []
    for bw, rounds in zip(passes, clocks["passes"]):
        vals = [x for a, row in enumerate(bw) for b, x in enumerate(row) if x and where[a] != where[b]]
        if not vals:
            continue
        fleet.append(statistics.median(vals))
        for start, secs, flat in rounds:
            t0 = clocks["origin"] + start
            inside = sum(max(0.0, min(t0 + secs, y) - max(t0, x)) for x, y in on)
            if secs <= 0 or inside < 0.5 * secs:
                continue
            for i in range(0, len(flat) - 1, 2):
                for s, r in ((flat[i], flat[i + 1]), (flat[i + 1], flat[i])):
                    shaped = (where[s] == f["host"] and d in ("send", "both")) or (where[r] == f["host"] and d in ("recv", "both"))
                    if where[s] != where[r] and shaped and bw[s][r]:
                        mine.append(bw[s][r])
    if not fleet or not mine:
        return None
    return round(statistics.median(fleet) / statistics.median(mine), 2)


def visible(cfg, rep, where):
    """How much slower the planted fault made its pairs in the pattern (the report's pair results):
    the median of the faulty pairs over the median of the others of the same kind (same host or
    not); None when no pair showed it (a fault the pattern never measured). A flap's: flap_visible."""
    f = cfg["fault"]
    if f["kind"] == "flap":
        return flap_visible(cfg, rep, where, rep.get("_on"))
    pairs = [(r["a"], r["b"], r["min_us"]) for r in rep.get("results", []) if r.get("kind") == "pair" and "min_us" in r]

    def hit(a, b):
        if f["kind"] in HOST_KINDS:
            return bool({where[a], where[b]} & set(f["hosts"] if f["kind"] == "two" else [f["host"]]))
        if f["kind"] in RANK_KINDS:
            return f["rank"] in (a, b)
        if f["kind"] == "link":
            return sorted((where[a], where[b])) == f["hosts"]
        return False

    def med(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2] if xs else None
    if f["kind"] == "none" or not pairs:
        return None
    inter = cfg["hosts"] > 1 and f["kind"] not in RANK_KINDS
    bad = [v for a, b, v in pairs if hit(a, b) and (where[a] != where[b] or not inter)]
    good = [v for a, b, v in pairs if not hit(a, b) and (where[a] != where[b] or not inter)]
    if not bad or not good:
        return None
    return round(med(bad) / med(good), 2)


def launch_argv(ns, mpirun, slots):
    """mpirun over namespace hosts through the rsh agent (btl tcp on the hosts' subnet), with
    `slots` [(host index, ranks)] in that order: rank numbers follow it."""
    subnet = ns.subnet + ".0/24"
    return ["bash", NETNS, "run", mpirun,
            "--mca", "plm_rsh_agent", AGENT, "--mca", "plm_rsh_no_tree_spawn", "1",
            "--mca", "rtc", "^hwloc", "--mca", "btl", "tcp,self",
            "--mca", "btl_tcp_if_include", subnet, "--mca", "oob_tcp_if_include", subnet,
            "--mca", "mpi_yield_when_idle", "1", "-x", "OMPI_MCA_rtc=^hwloc", "--oversubscribe",
            "--host", ",".join("%s:%d" % (ns.host(h), k) for h, k in slots), "-np", str(sum(k for _, k in slots))]


def run_netns(cfg, ns, binary, mpirun, recipe, out_dir, timeout):
    """One namespace run of cfg (ns.up first). Returns (rc or None on timeout, seconds, report or {})."""
    n, sizes = cfg["hosts"], cfg["sizes"]
    argv = launch_argv(ns, mpirun, [(i, sizes[i]) for i in range(n)])
    if os.environ.get("COMMSCRIPT_STDLIB"):
        argv += ["-x", "COMMSCRIPT_STDLIB"]
    argv += [binary, "--out", out_dir]
    if recipe == "full_diag":
        argv += ["full_diag", "--tier", cfg["tier"], "--max", "64K", "--budget",
                 str(BUDGETS[cfg["tier"]])]
    else:
        # 256K: a tbf or htb bucket (64 KB, netns_hosts.sh) lets a 64K message through at full
        # speed after an idle moment; the pair times would hide the fault
        argv += ["p2p_matrix", "--bytes", "256K", "--iters", "1", "--lat_iters", "5", "--repeats", "1", "--window", "1"]
    t0 = time.monotonic()
    planter = plant.Planter(ns, cfg["fault"], placement(sizes), BASE_RATE, binary).start()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=ns.env(), start_new_session=True)
    try:
        so, se = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        so, se = p.communicate()
        rc = None
    finally:
        planter.stop()
    elapsed = time.monotonic() - t0
    # the run's output and the planting's times (from the launch), for reading a miss
    with open(os.path.join(out_dir, "run.log"), "w") as fh:
        fh.write(so.decode("utf-8", "replace") + se.decode("utf-8", "replace"))
        fh.write("launched at monotonic %.3f s\n" % t0)
        for t, what in planter.log:
            fh.write("planted %.2f s: %s\n" % (t - t0, what))
    planted = [x[1] for x in planter.log]
    rep = {}
    path = os.path.join(out_dir, "report.json")
    if os.path.exists(path):
        with open(path) as fh:
            rep = json.load(fh)
    rep["_planted"] = planted[:6] + ["... %d more" % (len(planted) - 6)] if len(planted) > 6 else planted
    rep["_on"] = on_phases(planter.log, time.monotonic())
    return rc, elapsed, rep, (so + se).decode("utf-8", "replace")[-3000:]


def alone(cfg, ns, binary, mpirun, timeout=120):
    """The planted fault measured alone, with the hosts still up (scripts/truth_alone.lua): three
    ranks on three hosts, the fault's end(s) on ranks 0 and 1 (a link: its two hosts; a host or a
    rank: the fault's host and two others, the slow rank as rank 0 under the same chaos), each pair
    measured alone as full_diag's re-tests measure it (the tier's pair size). Returns
    {"ratio": the faulty pairs' median over the others', "samples_us": [...]}, or None (a healthy
    run, or fewer than 3 hosts)."""
    f, n = cfg["fault"], cfg["hosts"]
    if f["kind"] == "none" or n < 3:
        return None
    where = placement(cfg["sizes"])
    if f["kind"] == "link":
        ends = list(f["hosts"])
    else:
        ends = [f["host"] if f["kind"] == "host" else where[f["rank"]]]
    hosts = ends + [h for h in range(n) if h not in ends][:3 - len(ends)]
    out_dir = tempfile.mkdtemp(prefix="cs-truth-alone-")
    argv = launch_argv(ns, mpirun, [(h, 1) for h in hosts]) + [binary, "--out", out_dir]
    if f["kind"] == "rank":
        argv += ["--set", 'chaos=[{kind="slow", ranks=[0], factor=%g, ops=["sendrecv"]}]' % f["factor"]]
    argv += [os.path.join(REPO, "scripts", "truth_alone.lua"), "--bytes", "256K" if cfg["tier"] == "quick" else "1M"]
    try:
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ns.env(),
                       timeout=timeout)
        with open(os.path.join(out_dir, "report.json")) as fh:
            s = json.load(fh)["alone"]["samples_us"]
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return None
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)

    def med(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2] if xs else None
    # pairs 0-1, 0-2, 1-2: a link is 0-1 (the others share one end each); a host or rank is on
    # rank 0, so 0-1 and 0-2 are faulty and 1-2 is not
    bad, good = (s[0], s[1] + s[2]) if f["kind"] == "link" else (s[0] + s[1], s[2])
    mb, mg = med(bad), med(good)
    return {"ratio": round(mb / mg, 2) if mb and mg else None, "samples_us": s}


def culprit_s(rep):
    """Seconds from the run's start to the end of localisation (its verdict) or of the watch after
    it (its warning), from the report's stage costs; None without them."""
    total, end = 0.0, None
    for s in (rep.get("cost") or {}).get("stages", []):
        total += s["seconds"]
        if s["name"] in ("localisation", "watch"):
            end = round(total, 1)
    return end


def netns_seed(cfg, ns, binary, mpirun, recipe, timeout, keep):
    """Set up, run and score one seed; the hosts are taken down again."""
    out_dir = tempfile.mkdtemp(prefix="cs-truth-")
    try:
        ns.up(cfg["hosts"], cfg["fault"])
        rc, elapsed, rep, tail = run_netns(cfg, ns, binary, mpirun, recipe, out_dir, timeout)
        truth = alone(cfg, ns, binary, mpirun) if cfg["fault"]["kind"] == "link" else None
    finally:
        ns.down()
    where = placement(cfg["sizes"])
    named = named_of(rep, where, ns)
    correct, innocent = score(cfg, named, where)
    refs = (rep.get("localisation") or {}).get("references") or {}
    row = dict(cfg, recipe=recipe, rc=rc, wall_s=round(elapsed, 1), named=named, correct=correct, innocent=innocent,
               visible=visible(cfg, rep, where), alone=truth,
               reference_samples={k: [p.get("samples_us") for p in (v.get("pairs") or [])] for k, v in refs.items()},
               localisation={k: (rep.get("localisation") or {}).get(k) for k in ("suspects", "retests", "tested", "undecided")},
               plan=(rep.get("matrix") or {}).get("plan"),
               stages=[(s["name"], round(s["seconds"], 2)) for s in (rep.get("cost") or {}).get("stages", [])],
               culprit_s=culprit_s(rep), planted=rep.pop("_planted", None))
    rep.pop("_on", None)
    if rc not in (0, 3):
        row["tail"] = tail
    if keep:
        row["out"] = out_dir
    else:
        shutil.rmtree(out_dir, ignore_errors=True)
    return row


# The model's shapes (scripts/scale_model.lua --plant) are the namespace harness's (KINDS), drawn
# by choose() with the same parameters; model_args() turns a drawn fault into the model's options.
# A rate limit of R Mbit on a 1 Gbit fabric is a factor 1000/R on a faulty direction's time (2-20).
# The rank shapes have no rate: their factors on the streams are fitted to namespace runs
# (docs/scale.md, "The scale model with users' fault shapes"): a rank stopped stop_ms of every
# every_ms made its pairs 0.72-1.57x the others in the pattern (median 1.2 over 8 runs: the kernel
# presumably keeps the sockets moving while the process is stopped), modelled as 1 + STUTTER_STREAM x
# stop/every (1.12-1.2); a rank held to a CPU quota q (0.06-0.2) made them 0.84-2.15x (median 1.0
# over 8 runs), modelled as 1 + CPU_STREAM / q (1.1-1.33), and arrives late in the sweep's
# collectives by the same factor (no straggler was voted in those runs).
STUTTER_STREAM = 0.25
CPU_STREAM = 0.02


def model_args(f):
    """scripts/scale_model.sh's options for a fault drawn by choose()."""
    kind = f["kind"]
    out = ["--plant", kind]
    if "rate_mbit" in f:
        out += ["--factor", "%.2f" % max(2.0, min(20.0, 1000.0 / f["rate_mbit"]))]
    if kind in HOST_KINDS:
        out += ["--dir", f["dir"], "--burst", str(f["burst"])]
    if kind == "flap":
        out += ["--on_s", str(f["on_s"]), "--off_s", str(f["off_s"])]
    if kind == "stutter":
        out += ["--factor", "%.3f" % (1 + STUTTER_STREAM * f["stop_ms"] / f["every_ms"])]
    if kind == "cpu":
        x = 1 + CPU_STREAM / f["quota"]
        out += ["--factor", "%.2f" % x, "--cpu_stream", "%.2f" % x]
    return out


def model_seed(seed, args):
    """One run of the scale model with the seed's fault: its shape by turn (seed % 7, as the
    namespace harness's), its parameters drawn by choose(); the model picks its place."""
    cfg = choose(seed, [args.hosts], [max(1, args.ranks // args.hosts)], ["quick"],
                 kind=args.kind if getattr(args, "kind", None) else None)
    f = cfg["fault"]
    cmd = [os.path.join(REPO, "scripts", "scale_model.sh"), "--ranks", str(args.ranks), "--hosts", str(args.hosts),
           "--plan", args.plan, "--seed", str(seed), "--time", "cpu", "--results", "no"] + model_args(f)
    for k in ("cv", "spikes", "spike", "budget"):
        v = getattr(args, k)
        if v is not None:
            cmd += ["--" + k, str(v)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=args.timeout)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if not lines:
        return {"seed": seed, "fault": f, "error": p.stderr[-2000:], "correct": False, "innocent": ["(no run)"]}
    r = json.loads(lines[-1])
    proj = r.get("projection") or {}
    return {"seed": seed, "ranks": args.ranks, "hosts": args.hosts, "fault": f, "model_args": model_args(f),
            "planted": r["planted"], "named": r["named"], "correct": r["correct"], "innocent": r["innocent"],
            "noisy": r.get("noisy"), "suspects": r.get("suspects"), "forced": r.get("forced"), "retests": r.get("retests"),
            "tested_planted": r.get("tested_planted"), "analysis_cpu_s": r.get("analysis_cpu_s"),
            "localisation_cpu_s": r["cpu"]["localisation_s"], "analysis_s": r.get("analysis_s"),
            "projection": proj, "culprit_s": round(proj["verdict_s"]) if proj.get("verdict_s") is not None else None}


def table(rows):
    """Precision and recall with their counts, over all runs and per fault kind."""
    lines = ["| fault | runs | precision (no innocent named) | recall (planted named) | recall where visible "
             "| recall where >= 1.5x alone | too noisy | median s to the verdict |",
             "|---|---|---|---|---|---|---|---|"]
    kinds = [k for k in KINDS if any(r["fault"]["kind"] == k for r in rows)]
    for kind in kinds + ["all"]:
        rs = [r for r in rows if kind == "all" or r["fault"]["kind"] == kind]
        if not rs:
            continue
        clean = sum(1 for r in rs if not r["innocent"])
        faulty = [r for r in rs if r["fault"]["kind"] != "none"]
        found = sum(1 for r in faulty if r["correct"])
        noisy = sum(1 for r in rs if (r.get("named") or {}).get("noisy") or r.get("noisy"))
        rec = ("%.2f (%d/%d)" % (found / len(faulty), found, len(faulty))) if faulty else "-"
        # visible: the fault made its pairs at least 1.5x slower in the pattern (a tbf above what
        # the CPU-bound veths carry anyway changes nothing); the model's faults all are
        vis = [r for r in faulty if r.get("visible") is None and "ranks" in r and "sizes" not in r
               or (r.get("visible") or 0) >= 1.5]
        vfound = sum(1 for r in vis if r["correct"])
        vrec = ("%.2f (%d/%d)" % (vfound / len(vis), vfound, len(vis))) if vis else "-"
        # shown alone: the fault's pairs measured alone (truth_alone.lua, as the re-tests measure)
        # at least the verdict's factor, 1.5x; the model's faults all are
        shown = [r for r in faulty if "sizes" not in r or ((r.get("alone") or {}).get("ratio") or 0) >= 1.5]
        afound = sum(1 for r in shown if r["correct"])
        arec = ("%.2f (%d/%d)" % (afound / len(shown), afound, len(shown))) if shown else "-"
        secs = sorted(r["culprit_s"] for r in rs if r.get("culprit_s") is not None)
        med = ("%.0f" % secs[len(secs) // 2]) if secs else "-"
        lines.append("| %s | %d | %.2f (%d/%d) | %s | %s | %s | %d | %s |" % (kind, len(rs), clean / len(rs), clean,
                                                                           len(rs), rec, vrec, arec, noisy, med))
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    a = sub.add_parser("netns")
    a.add_argument("--hosts", default="4,8")
    a.add_argument("--slots", default="1,2")
    a.add_argument("--tiers", default="quick,standard")
    a.add_argument("--recipe", default="full_diag", choices=("full_diag", "p2p_matrix"))
    a.add_argument("--timeout", type=int, default=240)
    a.add_argument("--keep", action="store_true", help="keep each run's output directory")
    a.add_argument("--budgets", default="20,60", help="full_diag --budget for the quick and standard tiers")
    a.add_argument("--only", help="run only the seeds whose shape (seed %% 7) is in this list, e.g. stutter,cpu,none")
    m = sub.add_parser("model")
    m.add_argument("--ranks", type=int, default=1024)
    m.add_argument("--hosts", type=int, default=128)
    m.add_argument("--plan", default="auto")
    m.add_argument("--cv", type=float)
    m.add_argument("--spikes", type=float)
    m.add_argument("--spike", type=float)
    m.add_argument("--budget", type=float, help="full_diag's --budget on the model's clock (default: none, the plan uncut)")
    m.add_argument("--timeout", type=int, default=900)
    m.add_argument("--kind", choices=KINDS, help="every seed this shape (default: by turn, seed %% 7)")
    for p in (a, m):
        p.add_argument("--seeds", type=int, default=30)
        p.add_argument("--first-seed", type=int, default=1)
        p.add_argument("--jsonl", help="append each run's line here")
    args = ap.parse_args(argv)
    binary = os.environ.get("COMMSCRIPT") or os.path.join(REPO, "build", "commscript")
    mpirun = os.environ.get("MPIRUN") or shutil.which("mpirun") or "mpirun"
    rows = []
    ns = None
    if args.mode == "netns":
        BUDGETS["quick"], BUDGETS["standard"] = (int(x) for x in args.budgets.split(","))
        reason = why_not(binary, mpirun)
        if reason:
            print("truth_harness.py: cannot run namespace hosts here: %s" % reason, file=sys.stderr)
            return 1
        ns = Namespaces()
        ns.netns("down", "--stale")
    try:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            if getattr(args, "only", None) and KINDS[seed % len(KINDS)] not in args.only.split(","):
                continue
            if args.mode == "netns":
                cfg = choose(seed, [int(x) for x in args.hosts.split(",")], [int(x) for x in args.slots.split(",")],
                             args.tiers.split(","), cpus=os.cpu_count())
                row = netns_seed(cfg, ns, binary, mpirun, args.recipe, args.timeout, args.keep)
            else:
                row = model_seed(seed, args)
            rows.append(row)
            line = json.dumps(row, sort_keys=True)
            print(line, flush=True)
            if args.jsonl:
                with open(args.jsonl, "a") as fh:
                    fh.write(line + "\n")
    finally:
        if ns:
            ns.down()
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
