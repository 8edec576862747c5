#!/usr/bin/env python3
"""Faults planted from outside commscript, on namespace hosts (scripts/netns_hosts.sh), shaped as
users meet them rather than as the detector expects (docs/scale.md, "Does localisation tell the
truth"). Used by scripts/truth_harness.py and tests/e2e/test_truth_netns.py. Needs root.

Shapes (a fault is a dict; "kind" picks the shape):
  bucket  {"host": I, "rate": "120mbit", "burst": bytes, "dir": "send"|"recv"|"both"}
          a tbf token bucket on host I's link: "send" on the egress of its veth (what it sends),
          "recv" on its switch port (what it receives), "both" on both. Buckets of 16 KB - 4 MB.
  two     {"hosts": [I, J], ...bucket's fields}: the same bucket on two hosts at once.
  link    {"hosts": [I, J], "rate": ...}: htb on the path between hosts I and J alone
          (netns_hosts.sh --throttle-link).
  flap    {"host": I, "rate", "burst", "dir", "on_s": s, "off_s": s}: host I's bucket on for on_s,
          off for off_s, over and over (an intermittent fault: a flapping optic, a bursty uplink).
  stutter {"rank": R, "stop_ms": ms, "every_ms": ms}: rank R's process stopped (SIGSTOP) for
          stop_ms of every every_ms, from outside (OS jitter, a noisy neighbour).
  cpu     {"rank": R, "quota": fraction}: rank R's process in a cgroup v1 `cpu` group with a CFS
          quota of fraction x one CPU (a data loader or a wrong cgroup starving it); its network
          untouched.
  none    a healthy run.
A Planter is started after `netns_hosts.sh up` and before the run (the rank shapes find their
process by OMPI_COMM_WORLD_RANK in the host's namespace once it exists), and stopped after it."""
import os
import signal
import subprocess
import threading
import time

IF = "cs-eth"
CGROUP_CPU = "/sys/fs/cgroup/cpu"


def tbf_args(rate, burst):
    # latency bounds the queue (as netns_hosts.sh does); burst is the bucket in bytes
    return ["tbf", "rate", rate, "burst", str(int(burst)), "latency", "50ms"]


class Planter:
    """Plants fault (see the module's doc) on the namespace set ns (truth_harness.Namespaces),
    whose links run at base_rate (tbf, netns_hosts.sh --rate)."""

    def __init__(self, ns, fault, where=None, base_rate="1gbit", binary=None):
        self.ns, self.fault, self.base = ns, fault, base_rate
        self.binary = os.path.realpath(binary) if binary else None  # the ranks' executable
        self.where = where  # rank -> host index (the rank shapes look for it there)
        self.stop_ev = threading.Event()
        self.threads = []
        self.log = []  # what was done, with times (the run's record of the planting)
        self.cgroup = None

    # -- names of the set's namespaces (netns_hosts.sh: P-hI.TAG, P-sw.TAG)
    def host_ns(self, i):
        return "%s-h%d.%s" % (self.ns.prefix, i, self.ns.tag)

    def switch_ns(self):
        return "%s-sw.%s" % (self.ns.prefix, self.ns.tag)

    def tc(self, netns, dev, qdisc):
        subprocess.run(["tc", "-n", netns, "qdisc", "replace", "dev", dev, "root"] + qdisc, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=20)

    def bucket(self, host, on):
        """host's link: the fault's bucket (on) or the fabric's base rate (off), per direction."""
        f = self.fault
        d = f.get("dir", "both")
        fault_q = tbf_args(f["rate"], f.get("burst", 65536))
        base_q = tbf_args(self.base, 65536)
        self.tc(self.host_ns(host), IF, fault_q if on and d in ("send", "both") else base_q)
        self.tc(self.switch_ns(), "p-h%d" % host, fault_q if on and d in ("recv", "both") else base_q)
        self.log.append((round(time.monotonic(), 3), "host %d %s" % (host, "on" if on else "off")))

    def start(self):
        k = self.fault["kind"]
        if k == "bucket":
            self.bucket(self.fault["host"], True)
        elif k == "two":
            for h in self.fault["hosts"]:
                self.bucket(h, True)
        elif k == "flap":
            self.bucket(self.fault["host"], True)
            self.spawn(self.flap)
        elif k == "stutter":
            self.spawn(self.stutter)
        elif k == "cpu":
            self.spawn(self.starve)
        return self

    def spawn(self, fn):
        t = threading.Thread(target=fn, daemon=True)
        t.start()
        self.threads.append(t)

    def flap(self):
        on = True
        while not self.stop_ev.wait(self.fault["on_s"] if on else self.fault["off_s"]):
            on = not on
            try:
                self.bucket(self.fault["host"], on)
            except (subprocess.SubprocessError, OSError):
                return  # the hosts are gone

    def rank_pid(self, timeout=60):
        """The pid of the fault's rank: a process of the ranks' executable in its host's namespace
        whose environment says OMPI_COMM_WORLD_RANK=R."""
        want = ("OMPI_COMM_WORLD_RANK=%d" % self.fault["rank"]).encode()
        netns = self.host_ns(self.where[self.fault["rank"]])
        deadline = time.monotonic() + timeout
        while not self.stop_ev.is_set() and time.monotonic() < deadline:
            r = subprocess.run(["ip", "netns", "pids", netns], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               universal_newlines=True)
            for pid in r.stdout.split():
                try:
                    if self.binary and os.path.realpath("/proc/%s/exe" % pid) != self.binary:
                        continue
                    with open("/proc/%s/environ" % pid, "rb") as fh:
                        if want in fh.read().split(b"\0"):
                            return int(pid)
                except OSError:
                    continue
            time.sleep(0.05)
        return None

    def stutter(self):
        pid = self.rank_pid()
        if pid is None:
            return
        self.log.append((round(time.monotonic(), 3), "stutter pid %d" % pid))
        stop_s, every_s = self.fault["stop_ms"] / 1e3, self.fault["every_ms"] / 1e3
        try:
            while not self.stop_ev.is_set():
                os.kill(pid, signal.SIGSTOP)
                time.sleep(stop_s)
                os.kill(pid, signal.SIGCONT)
                if self.stop_ev.wait(max(every_s - stop_s, 0.001)):
                    break
        except ProcessLookupError:
            return
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def starve(self):
        pid = self.rank_pid()
        if pid is None:
            return
        path = os.path.join(CGROUP_CPU, "cs-plant-%s" % self.ns.tag)
        os.makedirs(path, exist_ok=True)
        self.cgroup = path
        period = 100000
        with open(os.path.join(path, "cpu.cfs_period_us"), "w") as fh:
            fh.write(str(period))
        with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as fh:
            fh.write(str(int(period * self.fault["quota"])))
        # every thread of the process (cgroup.procs moves them all)
        with open(os.path.join(path, "cgroup.procs"), "w") as fh:
            fh.write(str(pid))
        self.log.append((round(time.monotonic(), 3), "cpu quota %.3f pid %d" % (self.fault["quota"], pid)))

    def stop(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(timeout=10)
        if self.cgroup:
            # the processes are gone (or moved back to the root group) before the group is removed
            try:
                with open(os.path.join(self.cgroup, "cgroup.procs")) as fh:
                    pids = fh.read().split()
                for p in pids:
                    with open(os.path.join(CGROUP_CPU, "cgroup.procs"), "w") as fh:
                        fh.write(p)
            except OSError:
                pass
            for _ in range(50):
                try:
                    os.rmdir(self.cgroup)
                    break
                except OSError:
                    time.sleep(0.1)
