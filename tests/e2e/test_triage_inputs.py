#!/usr/bin/env python3
"""triage on hostile inputs (issue 30, classes 1 and 7; issue 33's frictions), through the binary.

- Names stay data: process-group names made of every byte 0-255, 1 MB of ']]\\n"', a [[chaos]]
  table after a newline; directory names with every byte 1-255 but '/', newlines, ']]', '--[[',
  '\"\"\"', "'''" and `os.execute` after a newline. Each generated repro.lua loads in luajit with only
  `require` reachable and holds the name exactly in GROUPS; `commscript --trusted --check` on it
  runs nothing of the name (no file appears); repro.toml parses (Python's tomllib and the
  engine's toml++ through --check) with one [[chaos]] table and the variable's value as data.
- Memory: a gzip bomb, a dump of 7.5 million values and a 12 MB pickle of 4 million ints are
  refused (exit 1) with the process's peak RSS (wait4's ru_maxrss) within 4 x the file + 64 MiB.
- `commscript triage FILE DIR` (positional paths) reads what `--paths FILE,DIR` reads; a repro
  run on another number of ranks than it was written for exits 1 saying `--ranks N`.
About 25 s on 2 busy cores.
"""
import os
import pickle
import resource
import shutil
import struct
import subprocess
import sys
import tomllib
import unittest

import cs_e2e
from cs_e2e import BAD_INPUT, HEALTH

FIX = os.path.join(cs_e2e.REPO, "tests", "fixtures", "triage")
sys.path.insert(0, FIX)
import make_fixtures  # noqa: E402  (tests/fixtures/triage/make_fixtures.py: the entries' shape)

LUAJIT = shutil.which("luajit")
MIB = 1 << 20


class Raw(bytes):
    """A str of the pickle given as raw bytes (any bytes, valid UTF-8 or not)."""


def mini_pickle(obj):
    """Protocol 2 pickle of dicts, lists, tuples, str (Raw: raw bytes), int, float, bool, None,
    with the opcodes Python's pickler uses for them (no memo)."""
    out = bytearray(b"\x80\x02")

    def w(o):
        if o is None:
            out.extend(b"N")
        elif o is True or o is False:
            out.extend(b"\x88" if o else b"\x89")
        elif isinstance(o, int):
            out.extend(b"J" + struct.pack("<i", o) if -2**31 <= o < 2**31 else b"\x8a\x08" + struct.pack("<q", o))
        elif isinstance(o, float):
            out.extend(b"G" + struct.pack(">d", o))
        elif isinstance(o, (str, Raw)):
            b = bytes(o) if isinstance(o, Raw) else o.encode()
            out.extend(b"X" + struct.pack("<I", len(b)) + b)
        elif isinstance(o, dict):
            out.extend(b"}(")
            for k, v in o.items():
                w(k)
                w(v)
            out.extend(b"u")
        elif isinstance(o, (list, tuple)):
            out.extend(b"](")
            for v in o:
                w(v)
            out.extend(b"e")
        else:
            raise TypeError(o)

    w(obj)
    out.extend(b".")
    return bytes(out)


def toml_text(b):
    """What repro.toml's basic string holds for bytes b: valid UTF-8 as itself, any other byte as
    its Latin-1 character (triage_repro.lua's toml_str)."""
    out, i = [], 0
    while i < len(b):
        for n in (4, 3, 2, 1):
            try:
                out.append(b[i:i + n].decode("utf-8"))
                i += n
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append(chr(b[i]))
            i += 1
    return "".join(out)


# Loads repro.lua with only `require "commscript"` reachable; prints the globals its top level
# touched, then GROUPS[1].name and .desc and RANKS, as hex.
CHECK_LUA = r"""
local f = assert(io.open(arg[1], "rb")); local text = f:read("*a"); f:close()
local chunk = assert(loadstring(text, "=repro.lua"))
local touched = {}
local stub = { recipe = function(d) return { decl = d } end }
setfenv(chunk, setmetatable({}, { __index = function(_, k)
  touched[#touched + 1] = k
  if k == "require" then return function() return stub end end
end, __newindex = function(_, k) touched[#touched + 1] = "=" .. tostring(k) end }))
local recipe = chunk()
local up = {}
for i = 1, 100 do
  local n, v = debug.getupvalue(recipe.run, i)
  if not n then break end
  up[n] = v
end
local function hex(s) return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end)) end
print(table.concat(touched, ","))
print(hex(up.GROUPS[1].name)); print(hex(up.GROUPS[1].desc)); print(up.RANKS)
"""


# The three inputs of issue 30's class 7, into the directory argv[1]:
# a gzip bomb: 640 MiB of zeros in 0.6 MB (each MiB compressed alone after a full flush, so one
# block repeats; the trailer is never reached: 512 MiB is the limit); a Flight Recorder-shaped
# dump whose entries are 7.5 million ints (37.5 MB); a 12 MB list of 4 million ints (BININT2).
GEN_INPUTS = r"""
import os, pickle, sys, zlib
d = sys.argv[1]
c = zlib.compressobj(9, zlib.DEFLATED, 16 + 15)
zero = bytes(1 << 20)
head = c.compress(zero) + c.flush(zlib.Z_FULL_FLUSH)
block = c.compress(zero) + c.flush(zlib.Z_FULL_FLUSH)
with open(os.path.join(d, "bomb_rank_0.gz"), "wb") as f:
    f.write(head + block * 639 + c.flush())
with open(os.path.join(d, "values_rank_0"), "wb") as f:
    pickle.dump({"version": "2.10", "pg_config": {}, "entries": list(range(10**5, 10**5 + 7500000))}, f, protocol=4)
with open(os.path.join(d, "ints_rank_0"), "wb") as f:
    pickle.dump([256 + i % 65000 for i in range(4000000)], f, protocol=4)
"""


def all_bytes_but_slash(lo, hi):
    return bytes(b for b in range(lo, hi) if b != ord("/"))


class TriageInputs(cs_e2e.TestCase):
    def triage(self, *args, out=None, timeout=90):
        out = out or self.new_out()
        return cs_e2e.run(["--backend", "self", "triage"] + list(args), out_dir=out, cwd=self.tmp,
                          timeout=timeout), out

    def job(self, root, dirs, pg, desc, env_value):
        """The dumps of a 4-rank job (rank 2 never joins #6) under root/dirs..., the process group
        named `pg` (desc `desc`), an env file setting NCCL_SOCKET_IFNAME and NCCL_NET_PLUGIN."""
        d = os.fsencode(root)
        for x in dirs:
            d = os.path.join(d, x)
        os.makedirs(d)
        for rank in range(4):
            entries = []
            for seq in range(1, (5 if rank == 2 else 6) + 1):
                name, i, o = make_fixtures.training_step(seq)
                e = make_fixtures.fr_entry(seq - 1, (Raw(pg), Raw(desc)), seq, name, i, o, "Float",
                                           "completed" if seq < 6 else "started")
                e["process_group"] = [Raw(pg), Raw(desc)]
                e.pop("frames")
                entries.append(e)
            dump = make_fixtures.fr_dump(entries, [0, 1, 2, 3], 5)
            dump["pg_config"] = {Raw(pg): {"name": Raw(pg), "desc": Raw(desc), "ranks": "[0, 1, 2, 3]"}}
            dump["pg_status"] = {}
            with open(os.path.join(d, b"nccl_trace_rank_%d" % rank), "wb") as f:
                f.write(mini_pickle(dump))
        with open(os.path.join(d, b"env.sh"), "wb") as f:
            f.write(b"export NCCL_SOCKET_IFNAME=" + env_value + b"\nexport NCCL_NET_PLUGIN=" + env_value + b"\n")

    def check_repro(self, out, pg, desc, env_value):
        lua, toml = os.path.join(out, "repro.lua"), os.path.join(out, "repro.toml")
        if LUAJIT:
            script = os.path.join(self.tmp, "check.lua")
            with open(script, "w") as f:
                f.write(CHECK_LUA)
            p = subprocess.run([LUAJIT, script, lua], capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr[-2000:])
            touched, name, d, ranks = p.stdout.decode().split("\n")[:4]
            self.assertEqual(touched, "require", "repro.lua's top level reached other globals")
            self.assertTrue(bytes.fromhex(name) == pg and bytes.fromhex(d) == desc, "GROUPS does not hold the name")
            self.assertEqual(ranks, "4")
        # --trusted --check runs the file's top level with os and io: nothing of a name may run
        canary = os.path.join(self.tmp, "PWNED")
        r = cs_e2e.run(["--trusted", "--check", "--config", toml, lua], cwd=self.tmp, timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertFalse(os.path.exists(canary), "a name ran as code under --trusted --check")
        with open(toml, "rb") as f:
            doc = tomllib.load(f)
        self.assertEqual(len(doc["chaos"]), 1, doc.get("chaos"))
        self.assertEqual(doc["chaos"][0]["kind"], "hang")
        self.assertEqual(doc["chaos"][0]["ranks"], [2])
        self.assertEqual(doc["env"]["NCCL_SOCKET_IFNAME"], toml_text(env_value))
        self.assertNotIn("NCCL_NET_PLUGIN", doc["env"])  # a plugin path stays commented out
        self.assertEqual(set(doc), {"run", "env", "chaos"})

    def test_names_stay_data(self):
        every = bytes(range(256))
        hostile_env = every.replace(b"\n", b"").replace(b"\r", b"").replace(b"\0", b"")
        code = b'x\nos.execute("touch PWNED")\n--'
        toml_chaos = b'"\n[[chaos]]\nkind = "exit"\ncode = 70\n#'
        cases = [
            # directory names with every byte 1-255 but '/', the group named with every byte 0-255
            ([b"a" + all_bytes_but_slash(1, 128), b"b" + all_bytes_but_slash(128, 256)], every, every, hostile_env),
            # code after a newline in the directory, 1 MB of ]]\n" as the group's name
            ([code, b"]]--[[\n]=]\"\"\"'''"], b']]\n"' * (MIB // 4), toml_chaos, b"eth0]]--[["),
            # a [[chaos]] table after a newline in the group's name and a directory's
            ([b"'''\n[[chaos]]\nkind = \"exit\"\n"], toml_chaos, b"--[[", b'a"b\\c'),
        ]
        for i, (dirs, pg, desc, env_value) in enumerate(cases):
            with self.subTest(case=i):
                root = os.path.join(self.tmp, "arts%d" % i)
                self.job(root, dirs, pg, desc, env_value)
                r, out = self.triage("--paths", root)
                self.assertExit(r, HEALTH)
                self.check_repro(out, pg, desc, env_value)

    def peak_rss(self, path):
        """Runs triage on `path`: its exit code, stderr and peak RSS in bytes (wait4)."""
        p = subprocess.Popen([cs_e2e.BIN, "--out", self.new_out(), "--backend", "self", "triage", "--paths", path],
                             cwd=self.tmp, env=cs_e2e._env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        with p.stderr:
            err = p.stderr.read().decode("utf-8", "replace")
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        return p.returncode, err, ru.ru_maxrss * 1024

    def test_memory_within_four_times_the_input(self):
        # written by another Python process: this one stays small, since a child's ru_maxrss also
        # counts the memory it had before its exec (a fork of this process)
        subprocess.run([sys.executable, "-c", GEN_INPUTS, self.tmp], check=True, timeout=120)
        bomb, values, ints = (os.path.join(self.tmp, n) for n in ("bomb_rank_0.gz", "values_rank_0", "ints_rank_0"))
        for path, why in ((bomb, "inflates past 512 MiB"), (values, "more than 5000000 values"),
                          (ints, "Flight Recorder version nil")):
            with self.subTest(path=os.path.basename(path)):
                rc, err, peak = self.peak_rss(path)
                self.assertEqual(rc, BAD_INPUT, err[-2000:])
                self.assertIn(why, err)
                bound = 4 * os.path.getsize(path) + 64 * MIB
                self.assertLessEqual(peak, bound, "peak RSS %.0f MiB, bound %.0f MiB" % (peak / MIB, bound / MIB))

    def test_positional_paths(self):
        fm = os.path.join(FIX, "fr_missing")
        rank0 = os.path.join(fm, "nccl_trace_rank_0")
        others = [os.path.join(fm, "nccl_trace_rank_%d" % r) for r in (1, 2, 3)]
        r, out = self.triage(rank0, "--last", "8", *others)
        self.assertExit(r, HEALTH)
        files = [f["path"] for f in r.report()["triage"]["files"]]
        self.assertEqual(files, [rank0] + others)
        r2, _ = self.triage("--paths", ",".join([rank0] + others), "--last", "8")
        self.assertEqual([f["path"] for f in r2.report()["triage"]["files"]], files)
        # a directory, and a positional word mixed with --paths
        r3, _ = self.triage(fm)
        self.assertExit(r3, HEALTH)
        self.assertEqual(len(r3.report()["triage"]["files"]), 4)
        # what is named neither way stays unreadable
        r4, _ = self.triage("--paths", rank0, "--last", others[0])
        self.assertExit(r4, BAD_INPUT)

    def test_repro_refuses_another_number_of_ranks(self):
        r, out = self.triage("--paths", os.path.join(FIX, "fr_missing"))
        self.assertExit(r, HEALTH)
        r2 = cs_e2e.run(["--timeout", "10", "--config", os.path.join(out, "repro.toml"), os.path.join(out, "repro.lua")],
                        np=2, out_dir=self.new_out(), cwd=self.tmp, timeout=90)
        self.assertExit(r2, BAD_INPUT)
        # the repro's own check, or (its chaos names a rank the smaller job lacks) the engine's chaos
        # check before anything runs: either says how to write it again for 2 ranks
        self.assertTrue("written for 4 ranks, not 2" in r2.stderr or "which this job does not have" in r2.stderr, r2.stderr)
        self.assertIn("--ranks 2", r2.stderr)


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    unittest.main()
