#!/usr/bin/env python3
"""Rogue clients against a running job's control plane (issue 20, classes 19-20; docs/security.md):
a process that lacks the job's secret cannot join, forge, read or exhaust anything, and the job
it attacked finishes with its report and its own exit code."""
import json
import os
import socket
import struct
import subprocess
import time

import cs_e2e
import launch_env


def frame(tag, data):
    data = data.encode() if isinstance(data, str) else data
    return tag.encode() + struct.pack("!I", len(data)) + data


def read_reply(s, timeout=2.0):
    """The store's first reply frame (tag, data), or None when the connection closed or said nothing."""
    s.settimeout(timeout)
    buf = b""
    try:
        while len(buf) < 5:
            chunk = s.recv(4096)
            if not chunk:
                return None
            buf += chunk
        n = struct.unpack("!I", buf[1:5])[0]
        while len(buf) < 5 + n:
            chunk = s.recv(4096)
            if not chunk:
                return None
            buf += chunk
        return buf[0], buf[5:5 + n]
    except (socket.timeout, OSError):
        return None


def status_of(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def listening_ports(pid):
    """The TCP ports process PID listens on (IPv4)."""
    inodes = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if t.startswith("socket:["):
                inodes.add(t[8:-1])
    except OSError:
        return []
    ports = []
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            p = line.split()
            if p[3] == "0A" and p[9] in inodes:
                ports.append(int(p[1].split(":")[1], 16))
    return ports


def connect(port, timeout=2.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return s


class RoguePeer(cs_e2e.TestCase):

    def test_store_admits_only_the_job(self):
        # A 3-rank world whose rank 2 starts late: meanwhile a rogue (1) says hello as the missing
        # rank 2, (2) reads world/0 and overwrites it, (3) opens 8 connections announcing 64 MiB
        # frames (rank 0's memory measured), (4) opens 200 idle connections (rank 0's threads
        # counted), (5) says a duplicate hello as rank 1. Then the real rank 2 joins: the job
        # ends 0 with its report.
        r = cs_e2e.run(["--backend", "gloo", "--check", "bw_sweep"])
        if "built without Gloo" in r.stderr:
            self.skipTest("built without Gloo")
        path = self.recipe("rv", "ctx.comm:barrier()\n  ctx.comm:barrier()\n  return 0")
        port = launch_env.free_port()
        out = os.path.join(self.tmp, "out")
        token = "rogue-test-token-" + os.urandom(8).hex()
        cmd = [cs_e2e.BIN, "--out", out, "--backend", "gloo", "--launcher", "env", "--timeout", "40", path]

        def start(rank):
            e = cs_e2e._env({"RANK": str(rank), "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1",
                             "MASTER_PORT": str(port), "COMMSCRIPT_JOB_TOKEN": token})
            for k in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMIX_RANK"):
                e.pop(k, None)
            return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, cwd=self.tmp,
                                    start_new_session=True)

        procs = [start(0), start(1)]
        self.addCleanup(lambda: [p.kill() for p in procs if p.poll() is None])
        for _ in range(200):  # rank 0's store listening
            try:
                connect(port).close()
                break
            except OSError:
                time.sleep(0.05)
        time.sleep(0.5)  # rank 1 has joined
        root = procs[0].pid

        # (1) a forged hello as the missing rank 2, (5) a duplicate hello as rank 1.
        for rank in ("2", "1"):
            s = connect(port)
            s.sendall(frame("H", rank) + frame("\0", "3"))
            replies = [read_reply(s), read_reply(s)]  # (a store that challenges says so first)
            s.close()
            self.assertNotIn((0, b""), replies, "the store accepted a hello without the job's secret")
        # (2) write a key and read it back; overwrite world/0.
        s = connect(port)
        s.sendall(frame("S", "rogue/k") + frame("\0", "stolen") + frame("G", "rogue/k") + frame("\0", ""))
        got = [read_reply(s), read_reply(s), read_reply(s)]
        s.close()
        self.assertNotIn((0, b"stolen"), got, "the store served a rogue's key back")
        s = connect(port)
        s.sendall(frame("S", "world/0") + frame("\0", "garbage"))
        s.close()

        # (3) 8 connections announcing 64 MiB frames, 1 MiB of each sent.
        rss0 = status_of(root, "VmRSS")
        big = []
        for _ in range(8):
            s = connect(port)
            try:
                s.sendall(b"S" + struct.pack("!I", 64 << 20) + b"\0" * (1 << 20))
            except OSError:
                pass  # dropped while sending: what should happen
            big.append(s)
        time.sleep(1.0)
        grown_kb = status_of(root, "VmRSS") - rss0
        for s in big:
            s.close()
        self.assertLess(grown_kb, 64 * 1024, "rank 0 grew by %d kB for 8 rogue frames" % grown_kb)

        # (4) 200 idle connections.
        threads0 = status_of(root, "Threads")
        idle = []
        for _ in range(200):
            try:
                idle.append(connect(port))
            except OSError:
                break
        time.sleep(0.5)
        threads = status_of(root, "Threads")
        for s in idle:
            s.close()
        self.assertLess(threads - threads0, 40, "200 idle connections made %d threads" % (threads - threads0))

        procs.append(start(2))
        res = []
        for p in procs:
            try:
                o, e = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                o, e = p.communicate()
            res.append((p.returncode, o.decode(errors="replace"), e.decode(errors="replace")))
        describe = "\n".join("--- rank %d rc %s\n%s" % (i, rc, err[-2000:]) for i, (rc, _, err) in enumerate(res))
        self.assertEqual([rc for rc, _, _ in res], [0, 0, 0], describe)
        self.assertIn("refused a connection", res[0][2], describe)
        with open(os.path.join(out, "report.json")) as f:
            rep = json.load(f)
        self.assertEqual(rep["run"]["exit_code"], 0)
        self.assertEqual(rep["run"]["ranks"], 3)

    def test_wrong_token_is_not_admitted(self):
        # Variations: a process of the job with another token; no token at all (refused before
        # it connects); a token file readable by others.
        r = cs_e2e.run(["--backend", "gloo", "--check", "bw_sweep"])
        if "built without Gloo" in r.stderr:
            self.skipTest("built without Gloo")
        path = self.recipe("rv", "ctx.comm:barrier()\n  return 0")
        out = os.path.join(self.tmp, "out")
        cmd = [cs_e2e.BIN, "--out", out, "--backend", "gloo", "--launcher", "env", "--timeout", "8", path]
        res, _ = launch_env.launch(cmd, 2, timeout=40, cwd=self.tmp, env=cs_e2e._env(),
                                   per_rank_env=lambda r: {"COMMSCRIPT_JOB_TOKEN": "token-of-rank-%d-0123456789" % r})
        self.assertEqual(res[1][0], cs_e2e.BAD_INPUT, res)
        self.assertIn("did not admit", res[1][2])
        env = cs_e2e._env()
        env.pop("COMMSCRIPT_JOB_TOKEN", None)
        env.update({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"})
        p = subprocess.run(cmd, env=env, cwd=self.tmp, capture_output=True, timeout=30)
        self.assertEqual(p.returncode, cs_e2e.BAD_INPUT, p.stderr)
        self.assertIn(b"no job token", p.stderr)
        tf = self.write("token", "0123456789abcdef0123\n")
        os.chmod(tf, 0o644)
        env["COMMSCRIPT_JOB_TOKEN_FILE"] = tf
        p = subprocess.run(cmd, env=env, cwd=self.tmp, capture_output=True, timeout=30)
        self.assertEqual(p.returncode, cs_e2e.BAD_INPUT, p.stderr)
        self.assertIn(b"readable or writable by others", p.stderr)

    def test_coordinator_admits_only_the_job(self):
        # Under mpirun (shared memory only: rank 0 listens on nothing but the coordinator), a
        # rogue finds rank 0's listening ports and sends the reproducer `RELAY 0 evilhost` +
        # `FWD 1 ERR 4 "forged..."`, a forged HELLO of rank 1 and a forged ERR; and 100 idle
        # connections. The job ends 0 and report.json holds nothing forged.
        body = ('cs.chaos.inject { kind = "delay", ranks = { 1 }, ms = 400 }\n'
                '  for i = 1, 10 do ctx.comm:barrier() end\n  return 0')
        path = self.recipe("cv", body)
        out = os.path.join(self.tmp, "out")
        cmd = [cs_e2e.MPIRUN, "-np", "2", "--oversubscribe", "--mca", "btl", "self,vader", cs_e2e.BIN, "--out", out,
               path]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cs_e2e._env(), cwd=self.tmp,
                             start_new_session=True)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        root, ports = None, []
        for _ in range(150):
            root = root or cs_e2e.rank_pid(out, 0)
            ports = listening_ports(root) if root else []
            if ports:
                break
            time.sleep(0.05)
        self.assertTrue(ports, "rank 0 listens on no port")
        forged = (b'RELAY 0 evilhost\nFWD 1 ERR 4 "forged by a rogue client"\nHELLO 1 evilhost 1\n'
                  b'ERR 4 "forged by a rogue client"\n')
        for port in ports:
            try:
                s = connect(port)
                s.sendall(forged)
                s.close()
            except OSError:
                pass
        idle = []
        for port in ports:
            for _ in range(100):
                try:
                    idle.append(connect(port))
                except OSError:
                    break
        try:
            o, e = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        for s in idle:
            s.close()
        err = e.decode(errors="replace")
        self.assertEqual(p.returncode, 0, err[-3000:])
        with open(os.path.join(out, "report.json")) as f:
            text = f.read()
        self.assertNotIn("forged", text)
        self.assertNotIn("evilhost", text)
        self.assertEqual(json.loads(text)["run"]["exit_code"], 0)


if __name__ == "__main__":
    cs_e2e.main()
