"""Recipe runtime errors end to end: a Lua error on one rank or on all of them stops the whole
job with exit 2 (no hang), the message is printed once with the rank and file:line, results
taken before the failure stay in results.jsonl; engine errors name the operation; the recipe
sandbox refuses os.execute, io, ffi and undeclared globals unless --trusted."""
import os
import re
import unittest

import cs_e2e

MAX_S = 10


class RuntimeErrors(cs_e2e.TestCase):

    def one_error_line(self, r, *patterns):
        lines = r.cs_error_lines()
        self.assertEqual(len(lines), 1, "expected the error exactly once\n" + r.describe())
        for p in patterns:
            self.assertRegex(lines[0], p, r.describe())
        return lines[0]

    def test_error_on_one_rank_while_others_wait(self):
        # Line 4 is the first line of run(): the error() call is on line 9.
        path = self.recipe("fail_rank1",
                           "  ctx.report:result { step = 1, rank = ctx.rank }\n"         # 4
                           "  ctx.report:result { step = 2, rank = ctx.rank }\n"         # 5
                           "  ctx.comm:barrier()\n"                                      # 6
                           "  if ctx.rank == 1 then\n"                                   # 7
                           "    local x = 1\n"                                           # 8
                           "    error('rank one gives up')\n"                            # 9
                           "  end\n"                                                     # 10
                           "  local t = cs.tensor('float32', 1024)\n"                    # 11
                           "  ctx.comm:allreduce(t, t)\n"                                # 12
                           "  ctx.comm:barrier()")
        r = self.cs([path], np=4, timeout=60)
        self.assertExit(r, cs_e2e.RUNTIME, max_s=MAX_S)
        line = self.one_error_line(r, r"rank 1\b", re.escape(path) + r":9: ", r"rank one gives up")
        self.assertEqual(r.stderr.count("rank one gives up"), 1, r.describe())
        # What rank 0 took before the failure is kept, one line each, as taken.
        self.assertEqual(r.results_lines(), [{"step": 1, "rank": 0}, {"step": 2, "rank": 0}])

    def test_error_on_one_rank_leaves_a_report(self):
        """The failure of a rank other than 0 is recorded in report.json (exit_code 2, an incident)."""
        path = self.recipe("fail_rank1b",
                           "  ctx.report:result { step = 1 }\n"
                           "  ctx.comm:barrier()\n"
                           "  if ctx.rank == 1 then error('rank one gives up') end\n"
                           "  ctx.comm:barrier()")
        r = self.cs([path], np=2, timeout=60)
        self.assertExit(r, cs_e2e.RUNTIME, max_s=MAX_S)
        self.assertTrue(os.path.exists(r.path("report.json")), "no report.json\n" + r.describe())
        rep = r.report()
        self.assertEqual(rep["run"]["exit_code"], 2)
        self.assertTrue(any("rank one gives up" in i.get("message", "") for i in rep["incidents"]), rep["incidents"])

    def test_error_on_all_ranks(self):
        path = self.recipe("fail_all",
                           "  ctx.report:result { step = 1 }\n"   # 4
                           "  ctx.comm:barrier()\n"               # 5
                           "  error('everyone gives up')")        # 6
        r = self.cs([path], np=4, timeout=60)
        self.assertExit(r, cs_e2e.RUNTIME, max_s=MAX_S)
        self.one_error_line(r, re.escape(path) + r":6: ", r"everyone gives up")
        self.assertEqual(r.stderr.count("everyone gives up"), 1, r.describe())
        self.assertEqual(r.results_lines(), [{"step": 1}])
        rep = r.report()
        self.assertEqual(rep["run"]["exit_code"], 2)
        self.assertEqual(rep["results"], [{"step": 1}])
        self.assertTrue(any("everyone gives up" in i.get("message", "") for i in rep["incidents"]), rep["incidents"])

    def test_error_without_mpirun(self):
        path = self.recipe("fail_self", "  ctx.report:result { step = 1 }\n  error({})")
        r = self.cs(["--backend", "self", path], timeout=30)
        self.assertExit(r, cs_e2e.RUNTIME, max_s=MAX_S)
        self.assertEqual(len(r.cs_error_lines()), 1, r.describe())
        self.assertEqual(r.results_lines(), [{"step": 1}])

    def test_error_in_the_middle_of_a_sweep_keeps_results(self):
        # A recipe that benches a few sizes, then fails: every result taken is in results.jsonl.
        path = self.recipe("sweep_then_fail",
                           "  for _, b in ipairs({ 8, 64, 512 }) do\n"
                           "    ctx.report:result(ctx.comm:bench { op = 'allreduce', bytes = b, iters = 2, warmup = 0 })\n"
                           "  end\n"
                           "  error('after three results')")
        r = self.cs([path], np=2, timeout=60)
        self.assertExit(r, cs_e2e.RUNTIME, max_s=MAX_S)
        self.assertEqual([x["bytes"] for x in r.results_lines()], [8, 64, 512])
        self.assertTrue(all(x["wrong"] == 0 for x in r.results_lines()))

    def test_engine_error_names_the_operation(self):
        path = self.recipe("small_recv",
                           "  local s = cs.tensor('float32', 16)\n"   # 4
                           "  local r = cs.tensor('float32', 4)\n"    # 5
                           "  ctx.comm:allreduce(s, r)")              # 6
        r = self.cs([path], np=2, timeout=60)
        self.assertFalse(r.timed_out, r.describe())
        self.assertNotEqual(r.rc, 0, r.describe())
        self.assertLess(r.elapsed, MAX_S, r.describe())
        self.one_error_line(r, r"allreduce", re.escape(path) + r":6: ", r"4 elements", r"16")

    def test_engine_error_exit_code(self):
        """A recipe misusing the engine at run time is a recipe runtime error: exit 2."""
        path = self.recipe("small_recv2",
                           "  local s = cs.tensor('float32', 16)\n"
                           "  local r = cs.tensor('float32', 4)\n"
                           "  ctx.comm:allreduce(s, r)")
        r = self.cs([path], np=2, timeout=60)
        self.assertExit(r, cs_e2e.RUNTIME, max_s=MAX_S)

    def test_bad_rank_argument(self):
        path = self.recipe("bad_root",
                           "  local t = cs.tensor('float32', 4)\n"
                           "  ctx.comm:broadcast(t, t, 7)")            # 5
        r = self.cs([path], np=2, timeout=60)
        self.assertFalse(r.timed_out, r.describe())
        self.assertIn(r.rc, (cs_e2e.BAD_INPUT, cs_e2e.RUNTIME), r.describe())
        self.one_error_line(r, r"root", r"\b7\b", re.escape(path) + r":5: ")


class Sandbox(cs_e2e.TestCase):

    def sandboxed(self, name, body, *patterns, np=None):
        path = self.recipe(name, body + "\n  ctx.report:result { done = true }")
        args = [path] if np else ["--backend", "self", path]
        r = self.cs(args, np=np, timeout=60)
        self.assertExit(r, cs_e2e.RUNTIME, max_s=MAX_S)
        lines = r.cs_error_lines()
        self.assertEqual(len(lines), 1, r.describe())
        self.assertRegex(lines[0], re.escape(path) + r":4: ", r.describe())
        for p in patterns:
            self.assertRegex(lines[0], p, r.describe())
        self.assertEqual(r.results_lines(), [])
        return path

    def trusted(self, path, np=None):
        args = ["--trusted", path] if np else ["--backend", "self", "--trusted", path]
        r = self.cs(args, np=np, timeout=60)
        self.assertExit(r, cs_e2e.OK, max_s=MAX_S)
        self.assertEqual(r.results_lines()[-1], {"done": True})
        self.assertIs(r.report()["run"]["trusted"], True)
        return r

    def test_os_execute(self):
        marker = os.path.join(self.tmp, "executed")
        path = self.sandboxed("sb_exec", "  os.execute('touch %s')" % marker, r"execute",
                              r"sandbox|--trusted")
        self.assertFalse(os.path.exists(marker), "os.execute ran in the sandbox")
        self.trusted(path)
        self.assertTrue(os.path.exists(marker), "--trusted: os.execute did not run")

    def test_io_open(self):
        target = os.path.join(self.tmp, "written.txt")
        path = self.sandboxed("sb_io", "  local f = io.open('%s', 'w'); f:write('hi'); f:close()" % target,
                              r"'io'", r"sandbox|--trusted")
        self.assertFalse(os.path.exists(target))
        self.trusted(path)
        with open(target) as f:
            self.assertEqual(f.read(), "hi")

    def test_require_ffi(self):
        path = self.sandboxed("sb_ffi",
                              "  local ffi = require 'ffi'\n  ctx.report:result { int = ffi.sizeof('int') }",
                              r"require 'ffi'", r"--trusted")
        r = self.trusted(path)
        self.assertEqual(r.results_lines()[0], {"int": 4})

    def test_undeclared_global_np2(self):
        path = self.sandboxed("sb_global", "  leaked_value = 42", r"undeclared global 'leaked_value'", np=2)
        self.trusted(path, np=2)

    def test_replay_of_a_trusted_run_is_sandboxed(self):
        """Regression: --replay once lifted the sandbox when the report said trusted: a report is
        someone else's data."""
        marker = os.path.join(self.tmp, "replayed")
        path = self.recipe("sb_replay", "  os.execute('touch %s')\n  ctx.report:result { done = true }" % marker)
        r = self.trusted(path)
        os.remove(marker)
        r2 = self.cs(["--backend", "self", "--replay", r.path("report.json")], timeout=60)
        self.assertExit(r2, cs_e2e.RUNTIME, max_s=MAX_S)
        self.assertIn("the recorded run was --trusted", r2.stderr)
        self.assertFalse(os.path.exists(marker), "the replay ran os.execute without --trusted")
        r3 = self.cs(["--backend", "self", "--trusted", "--replay", r.path("report.json")], timeout=60)
        self.assertExit(r3, cs_e2e.OK, max_s=MAX_S)
        self.assertTrue(os.path.exists(marker))

    def test_reading_an_undeclared_global(self):
        self.sandboxed("sb_read", "  local x = no_such_thing + 1", r"undeclared global 'no_such_thing'")

    def test_getenv_is_allowed(self):
        path = self.recipe("sb_getenv", "  ctx.report:result { home = os.getenv('CS_E2E_PROBE') }")
        r = self.cs(["--backend", "self", path], env={"CS_E2E_PROBE": "probe-value"}, timeout=30)
        self.assertExit(r, cs_e2e.OK, max_s=MAX_S)
        self.assertEqual(r.results_lines(), [{"home": "probe-value"}])

    def test_sandbox_error_while_loading_is_bad_input(self):
        path = self.write("sb_load.lua", 'local cs = require "commscript"\n'
                                         'local f = io.open("/etc/hostname")\n'
                                         'local recipe = cs.recipe { name = "sb_load", version = "0.1.0" }\n'
                                         'function recipe.run(ctx) ctx.report:result { done = true } end\n'
                                         'return recipe\n')
        r = self.cs(["--backend", "self", path], timeout=30)
        self.assertExit(r, cs_e2e.BAD_INPUT, max_s=MAX_S)
        lines = r.cs_error_lines()
        self.assertEqual(len(lines), 1, r.describe())
        self.assertRegex(lines[0], re.escape(path) + r":2: .*'io'")
        self.trusted(path)

    def test_global_assignment_while_loading_np2(self):
        path = self.write("sb_loadglob.lua", 'local cs = require "commscript"\n'
                                             'oops = 1\n'
                                             'local recipe = cs.recipe { name = "sb_loadglob", version = "0.1.0" }\n'
                                             'function recipe.run(ctx) ctx.report:result { done = true } end\n'
                                             'return recipe\n')
        r = self.cs([path], np=2, timeout=30)
        self.assertExit(r, cs_e2e.BAD_INPUT, max_s=15)
        lines = r.cs_error_lines()
        self.assertEqual(len(lines), 1, r.describe())
        self.assertRegex(lines[0], re.escape(path) + r":2: .*undeclared global 'oops'")
        self.trusted(path, np=2)


if __name__ == "__main__":
    cs_e2e.main()
