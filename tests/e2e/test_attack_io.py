#!/usr/bin/env python3
"""The contract under attack, inputs and outputs (issue 20, classes 9, 11, 12, 14-18): each test
runs the reproducer and the variations it names and checks the documented outcome (exit code,
message, report.json), never a hang, a crash or a silent 0."""
import json
import os
import subprocess
import tempfile

import cs_e2e

OUTPUT = 6  # docs/reference.md "Exit codes": an output could not be written

FAILING = 'error("boom from rank " .. ctx.comm:rank())'


def mpi_works():
    r = cs_e2e.run(["--version"], np=1, timeout=30)
    return r.rc == 0


class AttackIo(cs_e2e.TestCase):

    def base_report(self, body=FAILING, name="victim"):
        """A report.json of a recipe whose run is BODY (recorded with --backend self)."""
        path = self.recipe(name, body)
        r = self.cs(["--backend", "self", path])
        self.assertIn(r.rc, (cs_e2e.OK, cs_e2e.RUNTIME), r.describe())
        return r.report()

    # ---- class 9: the replay environment is an allow-list ----
    def test_replay_env_is_an_allow_list(self):
        # Variations: the MPI library's (OMPI_MCA_mpi_abort_delay=-1: "Looping forever", the
        # reproducer; OMPI_MCA_btl; PMIX_MCA_*; MPICH_*), the loader's (LD_PRELOAD, LD_LIBRARY_PATH),
        # commscript's own (COMMSCRIPT_STDLIB), an unknown name; NCCL_DEBUG is kept.
        rep = self.base_report()
        rep["run"]["backend"] = "mpi"
        dropped = ["OMPI_MCA_mpi_abort_delay", "OMPI_MCA_btl", "PMIX_MCA_gds", "MPICH_ASYNC_PROGRESS", "LD_PRELOAD",
                   "LD_LIBRARY_PATH", "COMMSCRIPT_STDLIB", "SOME_UNKNOWN_VAR"]
        env = {k: "x" for k in dropped}
        env["OMPI_MCA_mpi_abort_delay"] = "-1"
        env["OMPI_MCA_btl"] = "self,vader,tcp"
        env["LD_PRELOAD"] = "/nonexistent/evil.so"
        env["NCCL_DEBUG"] = "WARN"
        rep["run"]["config"] = {"env": env}
        rp = self.write("report.json", json.dumps(rep))
        r = self.cs(["--replay", rp], np=2, timeout=60)
        self.assertExit(r, cs_e2e.RUNTIME, max_s=45)
        line = [l for l in r.cs_lines() if "not applying" in l]
        self.assertTrue(line, r.describe())
        for k in dropped:
            self.assertIn(k, line[0], r.describe())
        self.assertIn("NCCL_*", line[0])
        self.assertNotIn("NCCL_DEBUG,", line[0])
        self.assertNotIn("Looping forever", r.stderr)
        self.assertEqual(r.report()["run"]["exit_code"], cs_e2e.RUNTIME)

    # ---- class 11: depth limits on every JSON and TOML input ----
    def test_deeply_nested_inputs_are_refused(self):
        # Variations: --replay and --baseline of {"schema":[[[...]]]} 100,000 deep; a valid
        # report with a validated field (recipe.options) 200,000 deep; objects nested
        # {"a":{"a":...}}; a --config TOML array 100,000 deep; --set of a deep TOML value.
        deep = '{"schema":' + "[" * 100000 + "]" * 100000 + "}"
        dp = self.write("deep.json", deep)
        good = self.base_report(body="")
        good["recipe"]["options"] = "@"
        deep_field = json.dumps(good).replace('"@"', "[" * 200000 + "]" * 200000)
        fp = self.write("deep_field.json", deep_field)
        objs = self.write("deep_obj.json", '{"a":' * 100000 + "1" + "}" * 100000)
        toml = self.write("deep.toml", "[options]\nx = " + "[" * 100000 + "]" * 100000 + "\n")
        ok = self.recipe("ok", "")
        cases = [["--replay", dp], ["--replay", fp], ["--replay", objs], ["--baseline", dp, "--backend", "self", ok],
                 ["--baseline", objs, "--backend", "self", ok], ["--config", toml, "--backend", "self", ok],
                 ["--set", "options.x=" + "[" * 50000 + "]" * 50000, "--backend", "self", ok]]
        for args in cases:
            r = self.cs(args, timeout=30)
            self.assertExit(r, cs_e2e.BAD_INPUT, max_s=20)
            self.assertTrue(r.cs_error_lines(), r.describe())
            self.assertRegex(r.stderr, "nested|nesting|depth|must be|unknown", r.describe())

    # ---- class 12: point-to-point sides that disagree ----
    def test_p2p_sides_that_disagree(self):
        # Variations: send of 100,000 float32 against a recv of 10 (mpi, gloo); pingpong,
        # pair_bench and stream with a different `bytes` on each side (mpi: pair_bench, stream;
        # gloo: pingpong); on Gloo a dtype mismatch of the same size (float32 vs int32).
        body = '''
  local c, me = ctx.comm, ctx.comm:rank()
  local k = ctx.opt.kind
  if k == "sendrecv" then
    if me == 0 then c:send(cs.tensor("float32", 100000), 1) else c:recv(cs.tensor("float32", 10), 0) end
  elseif k == "dtype" then
    if me == 0 then c:send(cs.tensor("float32", 16), 1) else c:recv(cs.tensor("int32", 16), 0) end
  elseif k == "pingpong" then
    c:pingpong{peer = 1 - me, bytes = me == 0 and 1000000 or 10, iters = 2, warmup = 0}
  elseif k == "pair" then
    c:pair_bench{peer = 1 - me, bytes = me == 0 and 1000000 or 10, iters = 2, warmup = 0}
  elseif k == "stream" then
    c:stream{peer = 1 - me, bytes = me == 0 and 1000000 or 10, iters = 2}
  end
  return 0'''
        path = self.recipe("p2p", body, decl_extra=', options = { kind = { "sendrecv", "what disagrees" } }')
        for backend, kind in [("mpi", "sendrecv"), ("mpi", "pair"), ("mpi", "stream"), ("gloo", "sendrecv"),
                              ("gloo", "pingpong"), ("gloo", "dtype")]:
            r = self.cs(["--backend", backend, "--timeout", "20", path, "--kind", kind], np=2, timeout=60)
            if backend == "gloo" and "built without Gloo" in r.stderr:
                continue
            self.assertExit(r, cs_e2e.TIMEOUT, max_s=40)
            self.assertNotIn("free()", r.stderr, r.describe())
            self.assertNotIn("malloc()", r.stderr, r.describe())
            self.assertNotIn("EnforceNotMet", r.stderr, r.describe())
            self.assertRegex(r.stderr, r"desync: .*rank [01].*rank [01]", r.describe())
            self.assertIn("p2p.lua:", r.stderr, r.describe())
            if kind != "dtype":
                self.assertRegex(r.stderr, r"(1000000|400000) bytes", r.describe())
            else:
                self.assertIn("int32", r.stderr, r.describe())
            # One exit code end to end: on Gloo the sender's own error (its peer left after the
            # desync, exit 2) reached report.json after the receiver's desync and overwrote its 5
            # (3 of 6 runs); the first outcome's code is the job's.
            self.assertEqual(r.report()["run"]["exit_code"], cs_e2e.TIMEOUT, r.describe())

    # ---- class 14: every write, flush and close of every output is checked ----
    def test_disk_full_outputs_exit_6(self):
        # Variations (a full disk, /dev/full): report.html, report.json (its temporary file) and
        # results.jsonl with a result in it; and a tmpfs too small for report.html when mounts
        # are allowed here.
        ok = self.recipe("ok", "")
        one = self.recipe("one", 'ctx.report:result{kind = "x", value = 1}\n  return 0')
        for name, recipe in [("report.html", ok), ("report.json.tmp", ok), ("results.jsonl", one)]:
            out = self.new_out()
            os.makedirs(out)
            os.symlink("/dev/full", os.path.join(out, name))
            r = cs_e2e.run(["--backend", "self", recipe], out_dir=out, cwd=self.tmp, timeout=30)
            self.assertExit(r, OUTPUT)
            self.assertRegex(r.stderr, "No space left on device", r.describe())
            if name != "report.json.tmp":
                self.assertEqual(r.report()["run"]["exit_code"], OUTPUT, r.describe())
        # The reproducer: a disk with room for report.json (one 4 KiB page) but not for
        # report.html (two): a 0-byte report.html and exit 0 before.
        mnt = tempfile.mkdtemp(prefix="cs-full-", dir=self.tmp)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt], capture_output=True).returncode:
            return
        self.addCleanup(subprocess.run, ["umount", "-l", mnt], capture_output=True)
        os.makedirs(os.path.join(mnt, "o"))
        filler = os.path.join(mnt, "filler")
        written = 0
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096) == 4096:
                written += 4096
        except OSError:
            pass
        os.ftruncate(fd, written - 4096)  # one page left
        os.close(fd)
        r = cs_e2e.run(["--backend", "self", ok], out_dir=os.path.join(mnt, "o"), cwd=self.tmp, timeout=30)
        self.assertExit(r, OUTPUT)
        self.assertRegex(r.stderr, "report.html: No space left on device", r.describe())
        self.assertFalse(os.path.exists(os.path.join(mnt, "o", "report.html")), "a partial report.html was left")
        self.assertEqual(r.report()["run"]["exit_code"], OUTPUT)

    # ---- class 15: an unwritable --out ----
    def test_unwritable_out_exits_6(self):
        # Variations: /proc/self/x, an existing file, a path under an existing file, a symlink
        # loop, a path over PATH_MAX, /sys, a read-only mount (when mounts are allowed here),
        # and under mpirun.
        ok = self.recipe("ok", "")
        afile = self.write("a_file", "x")
        loop = os.path.join(self.tmp, "loop1")
        os.symlink(os.path.join(self.tmp, "loop2"), loop)
        os.symlink(loop, os.path.join(self.tmp, "loop2"))
        outs = ["/proc/self/x", afile, os.path.join(afile, "sub"), os.path.join(loop, "x"),
                os.path.join(self.tmp, "a/" * 2100), "/sys/x"]
        ro = tempfile.mkdtemp(prefix="cs-ro-", dir=self.tmp)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", ro], capture_output=True).returncode == 0:
            self.addCleanup(subprocess.run, ["umount", "-l", ro], capture_output=True)
            outs.append(os.path.join(ro, "x"))
        for out in outs:
            r = cs_e2e.run(["--backend", "self", ok], out_dir=out, cwd=self.tmp, timeout=30)
            self.assertExit(r, OUTPUT)
            self.assertIn("--out", r.stderr, r.describe())
        r = cs_e2e.run([ok], np=2, out_dir="/proc/self/x", cwd=self.tmp, timeout=60)
        self.assertExit(r, OUTPUT)

    # ---- class 16: special files as inputs ----
    def test_special_files_are_refused_by_type(self):
        # Variations: /dev/zero as --replay and --baseline, a FIFO as --replay, --baseline and
        # --config, a directory as --config and --replay.
        ok = self.recipe("ok", "")
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        cases = [(["--replay", "/dev/zero"], "character device"), (["--baseline", "/dev/zero", ok], "character device"),
                 (["--replay", fifo], "FIFO"), (["--baseline", fifo, ok], "FIFO"), (["--config", fifo, ok], "FIFO"),
                 (["--config", self.tmp, ok], "directory"), (["--replay", self.tmp], "directory")]
        for args, kind in cases:
            r = self.cs(["--backend", "self"] + args, timeout=20)
            self.assertExit(r, cs_e2e.BAD_INPUT, max_s=10)
            self.assertIn(kind, r.stderr, r.describe())
            self.assertIn("only a regular file", r.stderr, r.describe())

    # ---- class 17: commscript's own Gloo reports replay ----
    def test_replay_of_a_gloo_report(self):
        # Variations: replayed on the recorded backend (gloo, under mpirun), and with --backend self.
        path = self.recipe("g", "ctx.comm:barrier()\n  return 0")
        r = self.cs(["--backend", "gloo", path], np=2, timeout=60)
        if "built without Gloo" in r.stderr:
            self.skipTest("built without Gloo")
        self.assertExit(r, cs_e2e.OK)
        self.assertEqual(r.report()["run"]["backend"], "gloo")
        rp = r.path("report.json")
        r2 = self.cs(["--replay", rp], np=2, timeout=60)
        self.assertExit(r2, cs_e2e.OK)
        self.assertEqual(r2.report()["run"]["backend"], "gloo")
        r3 = self.cs(["--backend", "self", "--replay", rp], timeout=30)
        self.assertExit(r3, cs_e2e.OK)

    # ---- class 18: one exit code end to end ----
    def test_huge_error_message_keeps_the_exit_code(self):
        # Variations: a 50 MiB error message on rank 1, and on rank 0.
        body = 'if ctx.comm:rank() == ctx.opt.rank then error(string.rep("x", 50 * 1024 * 1024)) end\n  return 0'
        path = self.recipe("huge", body, decl_extra=', options = { rank = { 1, "the failing rank" } }')
        for rank in ("1", "0"):
            r = self.cs([path, "--rank", rank], np=2, timeout=90)
            self.assertExit(r, cs_e2e.RUNTIME, max_s=60)
            rep = r.report()
            self.assertEqual(rep["run"]["exit_code"], cs_e2e.RUNTIME, r.describe(400))
            kinds = [i.get("kind") for i in rep["incidents"]]
            self.assertNotIn("killed", kinds, r.describe(400))
            err = [i for i in rep["incidents"] if i.get("kind") == "error"]
            self.assertTrue(err, kinds)
            self.assertLess(len(err[0]["message"]), 70000)
            self.assertIn("message truncated", err[0]["message"])
            self.assertLess(len(r.stderr), 1 << 20)


if __name__ == "__main__":
    cs_e2e.main()
