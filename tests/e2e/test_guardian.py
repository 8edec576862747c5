"""Each rank's guardian (docs/guardian.md): when a rank is killed outright (SIGKILL, which no
handler sees), its guardian process writes what the rank no longer can. Rank 0's writes
report.json from the header, results.jsonl and every rank's flight recorder; any rank's names its
last operation and recipe file:line, or where its Lua code was busy.

  rank 0 SIGKILL   report.json (partial) with the incident and every measured result, and
                   report.html naming the incident; mpirun's exit status 137 (the dead rank's, as
                   documented); no hang
  rank 2 SIGKILL   the coordinator's death line names the last operation and file:line
  busy in Lua      a rank killed while in an endless (JIT-able) Lua loop: "busy in Lua at file:line"
  output removed   the output directory removed mid-run: exit 6 and the message, no crash
  memory limit     a table bomb ends with the Lua memory limit message, exit 2, report.json
                   (and --iters/--samples beyond the limit are refused before allocating, exit 1)
"""
import json
import re
import os
import shutil
import signal
import subprocess
import time

import cs_e2e

NP = 4
SPIN = cs_e2e.spin_body(500)
# Line 6 of the recipe: the all-reduce (cs_e2e.spin_body).
SPIN_LINE = 6

BUSY = """  local t = cs.tensor("float32", 8)
  ctx.comm:allreduce(t, t)
  ctx.report:result { kind = "before", rank = ctx.rank }
  if ctx.rank == 2 then
    local x = 0
    while true do x = (x + 1) % 7 end
  end
  ctx.comm:allreduce(t, t)
  return 0"""
BUSY_LINE = 9


class Guardian(cs_e2e.TestCase):

    @staticmethod
    def load(path):
        with open(path) as f:
            return json.load(f)

    def kill_run(self, body, rank, wait, sig=signal.SIGKILL, np=NP):
        """Starts BODY on NP ranks, waits until WAIT(out) is true, sends SIG to RANK; returns
        (rc, stderr, out, seconds from the kill to the end)."""
        path = self.recipe("victim", body)
        out = self.new_out()
        cmd = [cs_e2e.MPIRUN, "-np", str(np), "--oversubscribe", cs_e2e.BIN, "--out", out, path]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.tmp,
                             env=cs_e2e._env(), start_new_session=True)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60 and not wait(out):
            time.sleep(0.1)
        pid = cs_e2e.rank_pid(out, rank)
        self.assertIsNotNone(pid, "rank %d not found" % rank)
        t_kill = time.monotonic()
        os.kill(pid, sig)
        try:
            _, err = p.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            self.fail("mpirun did not end after rank %d was killed" % rank)
        return p.returncode, err.decode("utf-8", "replace"), out, time.monotonic() - t_kill

    @staticmethod
    def results_written(out, lines=3):
        p = os.path.join(out, "results.jsonl")
        try:
            with open(p) as f:
                return f.read().count("\n") >= lines
        except OSError:
            return False

    def test_rank0_sigkill_leaves_the_report(self):
        rc, err, out, secs = self.kill_run(SPIN, 0, self.results_written)
        self.assertEqual(rc, 128 + signal.SIGKILL, err)  # mpirun passes the dead rank's status on
        self.assertLess(secs, 20, err)
        with open(os.path.join(out, "report.json")) as f:
            rep = json.load(f)
        with open(os.path.join(out, "results.jsonl")) as f:
            measured = [json.loads(l) for l in f.read().splitlines() if l.strip()]
        self.assertGreaterEqual(len(measured), 3)
        self.assertEqual(rep["results"], measured)  # everything measured, nothing more
        self.assertTrue(rep["run"]["partial"])
        self.assertEqual(rep["recipe"]["name"], "victim")  # the header rank 0 sent its guardian
        self.assertEqual(rep["run"]["ranks"], NP)
        died = [i for i in rep["incidents"] if i["kind"] == "rank_died"]
        self.assertEqual(len(died), 1, rep["incidents"])
        inc = died[0]
        self.assertEqual(inc["rank"], 0)
        self.assertEqual(inc["detected_by"], "guardian")
        self.assertTrue(inc["site"].endswith("victim.lua:%d" % SPIN_LINE), inc)
        last = inc["in_flight"] or inc["last_completed"]
        self.assertEqual(last["op"], "allreduce")
        self.assertGreater(last["seq"], 1000)  # results every 500 allreduces, 3 lines at least
        # Every rank's flight recorder is named (mpirun ended the others, which wrote theirs).
        self.assertEqual(sorted(r["rank"] for r in inc["ranks"]), list(range(NP)), inc["ranks"])
        self.assertIn("rank 0 (host ", err)
        self.assertIn("partial report written to %s" % os.path.join(out, "report.json"), err)
        with open(os.path.join(out, "flight", "rank-0.json")) as f:
            fr = json.load(f)
        self.assertEqual(fr["state"], "died")
        self.assertEqual(fr["ops"][-1]["seq"], last["seq"])
        # report.html too: rank 0's guardian renders it from the report.json it wrote, in a fresh
        # sandboxed Lua state in a child it bounds in time.
        with open(os.path.join(out, "report.html")) as f:
            page = f.read()
        self.assertIn("rank_died", page)
        self.assertIn("rank 0 (host %s, pid %d)" % (inc["host"], inc["dead_ranks"][0]["pid"]), page)
        self.assertIn("victim", page)
        self.assertNotIn("report.html not written", err)
        self.assertFalse(os.path.exists(os.path.join(out, "report.html.guardian.tmp")))

    def test_rank_killed_inside_a_timed_loop_names_its_call_in_the_loop(self):
        # comm:bench's headline loop is one flight-recorder record for all its calls: the death
        # line names the call the rank died in and the one before it, not the operation before
        # the loop ("last completed: barrier #2" until this test).
        body = """  ctx.comm:barrier()
  ctx.report:result { kind = "looping" }
  ctx.comm:bench { op = "allreduce", bytes = 8, iters = 100000000, warmup = 0, samples = 1 }
  return 0"""
        def looping_a_second(o):
            if not self.results_written(o, 1):
                return False
            time.sleep(1.0)
            return True
        rc, err, out, secs = self.kill_run(body, 2, looping_a_second)
        self.assertEqual(rc, 128 + signal.SIGKILL, err)
        self.assertLess(secs, 20, err)
        died = [i for i in self.load(os.path.join(out, "report.json"))["incidents"] if i["kind"] == "rank_died"]
        self.assertEqual(len(died), 1, err)
        msg, inc = died[0]["message"], died[0]
        m = re.search(r" in allreduce #(\d+) on world \(call (\d+) of a timed loop that had run for [\d.]+ s\); "
                      r"last completed: #(\d+), the call before it", msg)
        self.assertTrue(m, msg)
        seq, call, before = (int(g) for g in m.groups())
        # ops #1 and #2 are the barriers before the loop; a second into it, far past its first call
        self.assertEqual(seq, call + 2, msg)
        self.assertEqual(before, seq - 1, msg)
        self.assertGreater(call, 100, msg)
        self.assertEqual(inc["in_flight"]["seq"], seq, inc)
        self.assertEqual(inc["in_flight"]["loop_calls"], call, inc)

    def test_other_rank_sigkill_names_its_last_operation(self):
        rc, err, out, secs = self.kill_run(SPIN, 2, self.results_written)
        self.assertEqual(rc, 128 + signal.SIGKILL, err)
        self.assertLess(secs, 20, err)
        rep = self.load(os.path.join(out, "report.json"))
        died = [i for i in rep["incidents"] if i["kind"] == "rank_died"]
        self.assertEqual(len(died), 1, rep["incidents"])
        msg = died[0]["message"]
        # How it ended is named when the guardian still saw the kernel's status (docs/guardian.md):
        # both forms occur, depending on who reaps the rank first.
        self.assertRegex(msg, r"^rank 2 \(host .*, pid \d+\) (was killed by SIGKILL|ended without a goodbye)")
        self.assertRegex(msg, r"(in|last completed:) allreduce #\d+ on world")
        self.assertIn("victim.lua:%d" % SPIN_LINE, msg)
        self.assertIn(msg, err)
        self.assertEqual(self.load(os.path.join(out, "flight", "rank-2.json"))["state"], "died")

    def test_rank_busy_in_lua_is_named(self):
        def spinning(out):
            # rank 2 reported, then ran into its loop: give the profiler a few samples
            if not self.results_written(out, 1):
                return False
            time.sleep(3)
            return True
        rc, err, out, _ = self.kill_run(BUSY, 2, spinning)
        self.assertEqual(rc, 128 + signal.SIGKILL, err)
        rep = self.load(os.path.join(out, "report.json"))
        died = [i for i in rep["incidents"] if i["kind"] == "rank_died"]
        self.assertEqual(len(died), 1, rep["incidents"])
        # The recipe's own functions run in the interpreter, so LuaJIT's profiler sees the loop.
        msg = died[0]["message"]
        self.assertIn("busy in Lua at %s:%d" % (os.path.join(self.tmp, "victim.lua"), BUSY_LINE), msg)


class OutputRemoved(cs_e2e.TestCase):

    def test_output_directory_removed_mid_run(self):
        path = self.recipe("victim", SPIN)
        out = self.new_out()
        cmd = [cs_e2e.MPIRUN, "-np", "2", "--oversubscribe", cs_e2e.BIN, "--out", out, path]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.tmp,
                             env=cs_e2e._env(), start_new_session=True)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60 and not Guardian.results_written(out):
            time.sleep(0.1)
        shutil.rmtree(out)
        try:
            _, err = p.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            self.fail("the run went on after its output directory was removed")
        err = err.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 6, err)  # outputs could not be written
        self.assertIn("results.jsonl was removed during the run", err)
        self.assertNotIn("Segmentation", err)


class MemoryLimit(cs_e2e.TestCase):

    def test_table_bomb_hits_the_limit(self):
        body = """  local t = {}
  for i = 1, 1e9 do t[i] = { i, i + 1, i + 2 } end
  return 0"""
        r = self.cs([self.recipe("bomb", body)], np=2, timeout=90, env={"COMMSCRIPT_LUA_MEMORY": "64M"})
        self.assertExit(r, cs_e2e.RUNTIME)
        self.assertRegex(r.stderr, r"commscript: rank \d: .*the recipe's Lua memory limit of 64 MiB was reached "
                                   r"\(COMMSCRIPT_LUA_MEMORY=64M\)")
        rep = r.report()
        self.assertEqual(rep["run"]["exit_code"], cs_e2e.RUNTIME)
        self.assertTrue(any("memory limit" in i.get("message", "") for i in rep["incidents"]), rep["incidents"])

    def test_iterations_beyond_the_limit_are_refused_before_allocating(self):
        # Issue 13: `--iters 1e9` under a cgroup limit ended in SIGKILL (the per-iteration samples
        # were never checked). They are now checked against the same limit before anything is
        # allocated or timed: exit 1, the report kept, nothing measured.
        env = {"COMMSCRIPT_LUA_MEMORY": "64M"}
        cases = ((["bw_sweep", "--min", "8", "--max", "8", "--no-inplace", "--iters", "10000000"],
                  r"bench: 10000000 per-iteration samples needs 534 MiB, which with the recipe's Lua heap \(\d+ MiB\) "
                  r"passes this rank's memory limit of 64 MiB \(COMMSCRIPT_LUA_MEMORY=64M\): fewer iterations or samples"),
                 (["latency", "--min", "8", "--max", "8", "--no-bw", "--iters", "10000000", "--samples", "10000000"],
                  r"pingpong: 10000000 per-iteration samples needs 153 MiB, .*memory limit of 64 MiB"))
        for args, msg in cases:
            r = self.cs(args, np=2, timeout=90, env=env)
            self.assertExit(r, cs_e2e.BAD_INPUT, max_s=30)
            self.assertRegex(r.stderr, msg)
            self.assertNotIn("Killed", r.stderr)
            rep = r.report()
            self.assertEqual(rep["run"]["exit_code"], cs_e2e.BAD_INPUT)
            self.assertEqual(r.results_lines(), [], "nothing may be measured before the refusal")

    def test_a_limit_that_is_not_a_size_is_named(self):
        r = self.cs([self.recipe("small", "  return 0")], np=1, timeout=60, env={"COMMSCRIPT_LUA_MEMORY": "lots"})
        self.assertExit(r, cs_e2e.OK)
        self.assertIn('COMMSCRIPT_LUA_MEMORY="lots" is not a size', r.stderr)

    def test_default_limit_is_the_ranks_share(self):
        # Without the variable the limit is the rank's share of MemAvailable / the cgroup: a
        # recipe that stays far below it runs as before.
        body = """  local t = {}
  for i = 1, 1e5 do t[i] = { i } end
  return 0"""
        r = self.cs([self.recipe("small", body)], np=2, timeout=90)
        self.assertExit(r, cs_e2e.OK)


if __name__ == "__main__":
    cs_e2e.main()
