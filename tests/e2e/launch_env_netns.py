"""torchrun-style launch (RANK, WORLD_SIZE, MASTER_ADDR, ...; no mpirun) across network-namespace
"hosts" on this machine: one namespace per host, each with its own hostname and one veth link to a
bridge in a switch namespace. The root namespace is never touched.

    python3 launch_env_netns.py N [--rate RATE] -- commscript ARGS...

Names: cs-el-TAG-sw (the bridge br0, ports p0..pN-1) and cs-el-TAG-h0..hN-1 (interface eth0,
10.79.0.(I+1)/24, hostname cs-el-hI); TAG is this process's pid, so concurrent runs never meet,
and `down_stale()` removes the sets of processes that are gone. Rank I runs on host I; rank 0's
store listens on 10.79.0.1 (MASTER_ADDR). --rate limits every host's link with a tbf qdisc in
both directions (a tc rate: 1gbit, 100mbit). Needs root, iproute2 and unshare."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import launch_env

PREFIX = "cs-el-"
SUBNET = "10.79.0"


def _ip(*args, ns=None, check=True):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["ip"] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), p.stderr.strip()))
    return p


def usable():
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("ip", "unshare", "tc"):
        if not shutil.which(tool):
            return "%s not found" % tool
    probe = "%sprobe-%d" % (PREFIX, os.getpid())
    p = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if p.returncode != 0:
        return "ip netns add failed: " + p.stderr.strip()
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def names(tag, n):
    return "%s%s-sw" % (PREFIX, tag), ["%s%s-h%d" % (PREFIX, tag, i) for i in range(n)]


def _all_ns():
    p = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [ln.split()[0] for ln in p.stdout.splitlines() if ln.strip()]


def down(tag):
    """Ends what runs in the set's namespaces (by pid) and removes them. Idempotent."""
    for ns in _all_ns():
        if ns.startswith("%s%s-" % (PREFIX, tag)):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def down_stale():
    """Removes every set whose tag is the pid of no running process."""
    for ns in _all_ns():
        m = re.match(re.escape(PREFIX) + r"(\d+)-", ns)
        if m and not os.path.exists("/proc/%s" % m.group(1)):
            down(m.group(1))


def up(tag, n, rate=None):
    """Creates the switch and N host namespaces; returns the host namespaces' names."""
    down(tag)
    sw, hosts = names(tag, n)
    subprocess.run(["ip", "netns", "add", sw], check=True, capture_output=True)
    _ip("link", "set", "lo", "up", ns=sw)
    _ip("link", "add", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0", ns=sw)
    _ip("link", "set", "br0", "up", ns=sw)
    for i, h in enumerate(hosts):
        subprocess.run(["ip", "netns", "add", h], check=True, capture_output=True)
        _ip("link", "set", "lo", "up", ns=h)
        # The veth is made inside the switch namespace with its peer in the host's.
        _ip("link", "add", "p%d" % i, "type", "veth", "peer", "name", "eth0", "netns", h, ns=sw)
        _ip("link", "set", "p%d" % i, "master", "br0", ns=sw)
        _ip("link", "set", "p%d" % i, "up", ns=sw)
        _ip("addr", "add", "%s.%d/24" % (SUBNET, i + 1), "dev", "eth0", ns=h)
        _ip("link", "set", "eth0", "up", ns=h)
        if rate:
            for ns, dev in ((h, "eth0"), (sw, "p%d" % i)):
                subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                                rate, "burst", "256kb", "latency", "50ms"], check=True, capture_output=True)
    return hosts


def launch(cmd, n, tag=None, rate=None, timeout=120, env=None, cwd=None, port=29500):
    """Runs `cmd` as N ranks, rank I on host I; returns ([(rc, stdout, stderr)] by rank, wall time).
    The namespaces are created first and removed afterwards, also on failure."""
    tag = str(tag or os.getpid())
    hosts = up(tag, n, rate)
    try:
        def wrap(r):
            # Its own UTS namespace: the process's hostname is its host's (report.json topology).
            return ["ip", "netns", "exec", hosts[r], "unshare", "--uts", "sh", "-c",
                    'hostname "$0" && exec "$@"', "cs-el-h%d" % r] + list(cmd)
        return launch_env.launch(cmd, n, port=port, addr="%s.1" % SUBNET, timeout=timeout, env=env, cwd=cwd,
                                 wrap=wrap)
    finally:
        down(tag)


def main(argv):
    if "--" not in argv or len(argv) < 3:
        sys.stderr.write(__doc__)
        return 1
    cut = argv.index("--")
    n = int(argv[1])
    rate = argv[argv.index("--rate") + 1] if "--rate" in argv[:cut] else None
    why = usable()
    if why:
        sys.stderr.write("launch_env_netns.py: %s\n" % why)
        return 1
    down_stale()
    results, wall = launch(argv[cut + 1:], n, rate=rate)
    worst = 0
    for rc, o, e in results:
        sys.stdout.write(o)
        sys.stderr.write(e)
        worst = max(worst, 124 if rc is None else (128 - rc if rc < 0 else rc))
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv))
