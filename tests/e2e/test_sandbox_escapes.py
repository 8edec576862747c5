"""The sandbox escapes of issue 13, one test each: a sandboxed recipe (or a site rule file it
loads) must not run code outside the sandbox. Each escape writes a marker file when it works;
the test checks that the marker is absent and that the refusal says why. Each of these tests
failed before the fix (cs.sandbox, the embedded loader and text-only loading in lua_vm.cpp)."""
import concurrent.futures
import json
import os
import shutil
import subprocess
import unittest

import cs_e2e

# Module code that proves it ran outside the sandbox: io is not available inside it.
EVIL_LUA = 'local f = io.open("MARKER", "w"); f:write("escaped"); f:close(); return {}\n'

EVIL_C = r"""
#include <stdio.h>
int luaopen_cs_evilc(void* L) { FILE* f = fopen("MARKER", "w"); if (f) { fputs("escaped", f); fclose(f); } (void)L; return 0; }
"""


def given(path):
    """An environment that gives the run `path`: a sandboxed recipe loads only rule files the run
    was given (its command line, options, environment or config; docs/sandbox.md "Files")."""
    return {"CS_TEST_RULE_FILE": path}


class Escapes(cs_e2e.TestCase):

    def marker(self):
        return os.path.join(self.tmp, "MARKER")

    def assertNotEscaped(self, r):
        self.assertFalse(os.path.exists(self.marker()), "the sandbox was escaped\n" + r.describe())

    def evil_module(self, rel="cs/evil.lua", text=EVIL_LUA):
        p = os.path.join(self.tmp, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text.replace("MARKER", self.marker()))
        return p

    # ---- require of a cs.* name that is not embedded ----
    def test_require_cs_name_does_not_load_from_the_working_directory(self):
        self.evil_module()
        path = self.recipe("req_cwd", '  local m = require "cs.evil"')
        r = self.cs(["--backend", "self", path])
        self.assertExit(r, cs_e2e.RUNTIME)
        self.assertNotEscaped(r)
        self.assertIn("no module 'cs.evil' in commscript's stdlib", r.stderr, r.describe())

    def test_require_cs_name_at_top_level_under_check(self):
        self.evil_module()
        path = self.recipe("req_top", "", top='local m = require "cs.evil"\n')
        r = self.cs(["--check", path], out=False)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertNotEscaped(r)

    def test_require_cs_name_does_not_load_a_c_module(self):
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if not cc:
            self.skipTest("no C compiler to build the module")
        src = self.write("evilc.c", EVIL_C.replace("MARKER", self.marker()))
        os.makedirs(os.path.join(self.tmp, "cs"), exist_ok=True)
        subprocess.run([cc, "-shared", "-fPIC", "-o", os.path.join(self.tmp, "cs", "evilc.so"), src], check=True)
        path = self.recipe("req_so", '  local m = require "cs.evilc"')
        r = self.cs(["--backend", "self", path])
        self.assertExit(r, cs_e2e.RUNTIME)
        self.assertNotEscaped(r)
        self.assertIn("no module 'cs.evilc' in commscript's stdlib", r.stderr, r.describe())

    def test_lua_path_and_cpath_are_not_searched(self):
        self.evil_module("lp/cs/evil.lua")
        path = self.recipe("req_path", '  local m = require "cs.evil"')
        r = self.cs(["--backend", "self", path], env={"LUA_PATH": os.path.join(self.tmp, "lp", "?.lua") + ";;",
                                 "LUA_CPATH": os.path.join(self.tmp, "lp", "?.so") + ";;"})
        self.assertExit(r, cs_e2e.RUNTIME)
        self.assertNotEscaped(r)

    def test_lazy_cs_index_does_not_load_from_the_working_directory(self):
        self.evil_module()
        path = self.recipe("lazy", '  assert(cs.evil == nil, "cs.evil is not a module")\n'
                                   '  assert(cs.runner == nil and cs.sandbox == nil, "engine internals are hidden")')
        r = self.cs(["--backend", "self", path])
        self.assertExit(r, cs_e2e.OK)
        self.assertNotEscaped(r)

    def test_engine_internals_cannot_be_required(self):
        path = self.recipe("internal", '  local r = require "cs.runner"')
        r = self.cs(["--backend", "self", path])
        self.assertExit(r, cs_e2e.RUNTIME)
        self.assertIn("require 'cs.runner' is not allowed in a sandboxed recipe", r.stderr, r.describe())

    def test_rule_file_require_does_not_load_from_the_working_directory(self):
        self.evil_module()
        rules = self.write("site_rules.lua", 'local m = require "cs.evil"\nreturn {}\n')
        path = self.recipe("rules_req", '  require("cs.rules").load { %r }' % rules)
        r = self.cs(["--backend", "self", path], env=given(rules))
        self.assertIn(r.rc, (cs_e2e.BAD_INPUT, cs_e2e.RUNTIME), r.describe())
        self.assertNotEscaped(r)
        self.assertIn("no module 'cs.evil' in commscript's stdlib", r.stderr, r.describe())

    # ---- bytecode ----
    def bytecode_of(self, lua_text, name):
        """LuaJIT bytecode of LUA_TEXT, made by `commscript --trusted` itself (string.dump)."""
        src = self.write(name + ".src", lua_text)
        out = os.path.join(self.tmp, name + ".luac")
        maker = self.write("make_%s.lua" % name,
                           'local cs = require "commscript"\n'
                           'local r = cs.recipe { name = "mk", version = "0.1.0" }\n'
                           'local f = assert(io.open(%r)); local text = f:read("*a"); f:close()\n'
                           'local o = assert(io.open(%r, "wb")); o:write(string.dump(assert(loadstring(text, "=x")))); o:close()\n'
                           'function r.run(ctx) end\nreturn r\n' % (src, out))
        r = self.cs(["--trusted", "--backend", "self", maker], out=True)
        self.assertExit(r, cs_e2e.OK)
        with open(out, "rb") as f:
            self.assertEqual(f.read(1), b"\x1b")
        return out

    BYTECODE_RECIPE = ('local cs = require "commscript"\n'
                       'local r = cs.recipe { name = "bc", version = "0.1.0" }\n'
                       'function r.run(ctx) end\nreturn r\n')

    def test_bytecode_recipe_is_refused(self):
        bc = self.bytecode_of(self.BYTECODE_RECIPE, "recipe")
        for args in (["--backend", "self", bc], ["--check", bc], [bc, "--help"]):
            r = self.cs(args, out=False)
            self.assertExit(r, cs_e2e.BAD_INPUT)
            self.assertIn("precompiled Lua bytecode is refused", r.stderr, r.describe())
        # --trusted lifts it
        r = self.cs(["--trusted", "--backend", "self", bc])
        self.assertExit(r, cs_e2e.OK)

    def test_mutated_bytecode_recipe_is_refused_not_crashed(self):
        """A mutated bytecode file (the crash found by mutation) is refused before LuaJIT reads it."""
        bc = self.bytecode_of(self.BYTECODE_RECIPE, "recipe")
        with open(bc, "rb") as f:
            data = bytearray(f.read())
        for i in range(5, len(data), 7):
            data[i] ^= 0x5A
        mutated = os.path.join(self.tmp, "mutated.lua")
        with open(mutated, "wb") as f:
            f.write(bytes(data))
        r = self.cs(["--check", mutated], out=False)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("precompiled Lua bytecode is refused", r.stderr, r.describe())

    def test_bytecode_rule_file_is_refused(self):
        bc = self.bytecode_of('local f = io.open(%r, "w") f:write("x") f:close() return {}\n' % self.marker(), "rules")
        path = self.recipe("rules_bc", '  require("cs.rules").load { %r }' % bc)
        r = self.cs(["--backend", "self", path], env=given(bc))
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertNotEscaped(r)
        self.assertIn("precompiled bytecode is refused", r.stderr, r.describe())

    # ---- the engine's own Lua ----
    def test_recipe_cannot_replace_the_report_renderer(self):
        # The writes fail (cs.html is read-only, issue 30); caught, the run goes on.
        path = self.recipe("html", '  local pwn = function() return "<script>pwned()</script>" end\n'
                                   '  local a, e1 = pcall(function() require("cs.html").render = pwn end)\n'
                                   '  local b, e2 = pcall(function() cs.html.render = pwn end)\n'
                                   '  print(a, e1)\n  print(b, e2)')
        r = self.cs(["--backend", "self", path])
        self.assertExit(r, cs_e2e.OK)
        self.assertEqual(r.stdout.count("cs.html is read-only: assignment to field 'render'"), 2, r.describe())
        with open(r.path("report.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertNotIn("pwned", page)
        self.assertIn("<html", page.lower())

    def test_replay_does_not_apply_loader_variables_without_trusted(self):
        # A stdlib directory whose runner escapes: COMMSCRIPT_STDLIB would swap the whole stdlib.
        self.evil_module("evil_stdlib/cs/runner.lua")
        path = self.recipe("replay_env", "")
        r = self.cs(["--backend", "self", path])
        self.assertExit(r, cs_e2e.OK)
        rep = r.report()
        rep["run"]["config"]["env"] = {"COMMSCRIPT_STDLIB": os.path.join(self.tmp, "evil_stdlib"),
                                       "LD_PRELOAD": "/nonexistent/evil.so", "LUA_PATH": "/x/?.lua",
                                       "NCCL_NET_PLUGIN": "evil", "NCCL_DEBUG": "WARN"}
        rp = self.write("report.json", json.dumps(rep))
        r = self.cs(["--replay", rp], env={"COMMSCRIPT_STDLIB": ""})
        self.assertExit(r, cs_e2e.OK)
        self.assertNotEscaped(r)
        self.assertRegex(r.stderr, r"not applying COMMSCRIPT_STDLIB, LD_PRELOAD, LUA_PATH, NCCL_NET_PLUGIN from the "
                                   r"report's \[env\]", r.describe())
        env = r.report()["env"]
        self.assertEqual(env.get("NCCL_DEBUG"), "WARN", "the configuration variables still apply")
        self.assertNotIn("evil_stdlib", env.get("COMMSCRIPT_STDLIB", ""))

    # ---- shared standard tables ----
    def test_rule_file_gets_its_own_string_table(self):
        rules = self.write("site_rules.lua",
                           'string.rep = function() return "pwned" end\n'
                           'table.concat = function() return "pwned" end\n'
                           'return {}\n')
        path = self.recipe("rules_string",
                           '  require("cs.rules").load { %r }\n'
                           '  assert(("a"):rep(3) == "aaa", "method call changed: " .. tostring(("a"):rep(3)))\n'
                           '  assert(string.rep("a", 3) == "aaa", "string.rep changed")\n'
                           '  assert(table.concat({"a", "b"}) == "ab", "table.concat changed")' % rules)
        r = self.cs(["--backend", "self", path], env=given(rules))
        self.assertExit(r, cs_e2e.OK)

    def test_recipe_cannot_change_the_engines_string_table(self):
        path = self.recipe("recipe_string",
                           '  string.format = function() return "pwned" end\n'
                           '  assert(("%d"):format(3) == "3", "the process-wide string table changed")\n'
                           '  assert(getmetatable("") == nil, "the string metatable is hidden")')
        r = self.cs(["--backend", "self", path])
        self.assertExit(r, cs_e2e.OK)
        # the engine's own formatting (report, summary) still works
        self.assertEqual(r.report()["recipe"]["name"], "recipe_string")

    # ---- each stage its own view of the stdlib (issue 30, class 2) ----
    # A site rule file that changed a module full_diag's other stages call erased their verdict:
    # with NCCL_PROTO=bogus (an error finding of the environment stage, exit 3) the run exited 0.
    # Each attack fails on the code before the fix; each is tried under pcall, so that whatever
    # is refused, the run goes on to its verdict.
    ERASERS = {
        # replace the environment stage's function in the module
        "module_function": 'cs.env.collect = function() return { findings = {}, audited = 0 } end',
        # a sub-table of a module: make the bogus protocol a known one
        "sub_table": 'table.insert(require("cs.env.registry").PROTOS, "bogus")',
        # the metatable of the findings collector: add() that reports nothing
        "object_metatable": 'local c = cs.findings.collector({ report = { finding = function() end } })\n'
                            'getmetatable(c).add = function(_, list) return list end',
        # the raw writers
        "rawset": 'rawset(require("cs.env"), "collect", function() return { findings = {}, audited = 0 } end)',
    }

    def test_rule_file_cannot_erase_another_stages_findings(self):
        for name, attack in self.ERASERS.items():
            with self.subTest(name):
                rules = self.write("erase_%s.lua" % name,
                                   'local cs = require "commscript"\npcall(function()\n%s\nend)\nreturn {}\n' % attack)
                r = self.cs(["--backend", "self", "--timeout", "5", "--set", 'rules.files="%s"' % rules,
                             "full_diag", "--budget", "2"], env={"NCCL_PROTO": "bogus"})
                self.assertExit(r, cs_e2e.HEALTH)
                self.assertIn("[error] NCCL_PROTO=bogus: unknown protocol 'bogus'", r.stdout, r.describe())
                found = [f for f in r.report()["findings"] if f["subject"].get("variable") == "NCCL_PROTO"]
                self.assertEqual([f["severity"] for f in found], ["error"], r.describe())

    def test_writing_a_module_fails_naming_the_module_and_the_line(self):
        rules = self.write("writer.lua", 'local cs = require "commscript"\n'
                                         'cs.diagnose.findings = function() return {} end\nreturn {}\n')
        r = self.cs(["--backend", "self", "--set", 'rules.files="%s"' % rules, "full_diag", "--budget", "2"])
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("rule file %s: %s:2: cs.diagnose is read-only: assignment to field 'findings'" % (rules, rules),
                      r.stderr, r.describe())
        self.assertEqual(r.report()["run"]["exit_code"], cs_e2e.BAD_INPUT, r.describe())
        # A recipe: the same refusal, a runtime error at its line; rawset and table.insert too.
        for name, body in (("assign", '  require("cs.findings").collector = nil'),
                           ("rawset", '  rawset(cs, "env", {})'),
                           ("insert", '  table.insert(cs.stats, 1)'),
                           ("setmetatable", '  setmetatable(cs.stats, {})')):
            with self.subTest(name):
                path = self.recipe("w_" + name, body)
                r = self.cs(["--backend", "self", path])
                self.assertExit(r, cs_e2e.RUNTIME)
                self.assertIn("w_%s.lua:4:" % name, r.stderr, r.describe())
                self.assertRegex(r.stderr, r"(read-only|protected metatable)", r.describe())

    # ---- a busy top level (issue 30, class 5) ----
    def test_busy_top_level_exits_2_in_every_mode_with_a_report(self):
        """`while true do end` at a recipe's top level: exit 2 past the 10 s budget under --check,
        --help, a run and a run of 2 ranks under mpirun; the runs leave report.json saying so (a
        run exited 1 without one). About 12 s: the four run at once."""
        path = self.write("busy.lua", 'local cs = require "commscript"\nwhile true do end\n'
                                      'local r = cs.recipe { name = "busy", version = "0.1.0" }\n'
                                      'function r.run(ctx) end\nreturn r\n')
        calls = {"check": (["--check", path], {"out": False}), "help": ([path, "--help"], {"out": False}),
                 "run": (["--backend", "self", path], {}), "mpi": ([path], {"np": 2})}
        with concurrent.futures.ThreadPoolExecutor(len(calls)) as ex:
            futs = {n: ex.submit(self.cs, a, timeout=60, **kw) for n, (a, kw) in calls.items()}
            rs = {n: f.result() for n, f in futs.items()}
        for name, r in rs.items():
            with self.subTest(name):
                self.assertExit(r, cs_e2e.RUNTIME, 10 + 2 + 10)
                self.assertIn("busy.lua:2: the recipe's top level ran for more than 10 s", r.stderr, r.describe())
                if name in ("run", "mpi"):
                    rep = r.report()
                    self.assertEqual(rep["run"]["exit_code"], cs_e2e.RUNTIME, r.describe())
                    self.assertEqual(rep["recipe"]["name"], "busy")
                    self.assertEqual([i["kind"] for i in rep["incidents"]], ["error"], r.describe())
                    self.assertIn("top level ran for more than 10 s", rep["incidents"][0]["message"])

    # ---- exit codes a sandbox may use: 1-5 (issue 30, class 3) ----
    def test_sandbox_chaos_exit_status_is_1_to_5(self):
        """A sandboxed recipe or rule file that plants a chaos exit with a code the engine keeps
        (6, 70, 0, the default 99, kill = true: 137) is refused: the recipe with exit 2, the rule
        file with exit 1 at its load, each naming the status; report.json agrees. Before, the rank
        ended with 70 (the recipe) and the rule file's run left a guardian's partial report with
        exit_code null."""
        refused = {"s70": "status = 70", "s6": "status = 6", "s0": "status = 0", "absent": "",
                   "kill": "status = 3, kill = true", "frac": "status = 2.5"}
        for name, fields in refused.items():
            with self.subTest(name):
                inject = 'cs.chaos.inject { kind = "exit"%s }' % (", " + fields if fields else "")
                path = self.recipe("x_" + name, "  %s\n  ctx.comm:barrier()" % inject)
                r = self.cs(["--backend", "self", path])
                self.assertExit(r, cs_e2e.RUNTIME)
                self.assertIn("x_%s.lua:4: cs.chaos.inject: an exit may end a sandboxed run with status 1-5 only"
                              % name, r.stderr, r.describe())
                self.assertEqual(r.report()["run"]["exit_code"], cs_e2e.RUNTIME)
        rules = self.write("x_rules.lua", 'local cs = require "commscript"\n'
                                          'cs.chaos.inject { kind = "exit", status = 70 }\nreturn {}\n')
        r = self.cs(["--backend", "self", "--set", 'rules.files="%s"' % rules, "full_diag", "--budget", "2"])
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("rule file %s: %s:2: cs.chaos.inject: an exit may end a sandboxed run with status 1-5 only, "
                      "not status 70" % (rules, rules), r.stderr, r.describe())
        rep = r.report()
        self.assertEqual(rep["run"]["exit_code"], cs_e2e.BAD_INPUT, r.describe())
        self.assertNotIn("partial", rep["run"])

    def test_replay_claiming_a_bundled_recipe_is_bound_too(self):
        """Bundled recipes (chaos_exit's 99) are not bound to 1-5; a replayed report that says
        `bundled` of a source that is not the embedded file's is."""
        path = self.recipe("bundled_claim", "  ctx.comm:barrier()")
        r = self.cs(["--backend", "self", path])
        self.assertExit(r, cs_e2e.OK)
        rep = r.report()
        rep["recipe"]["bundled"] = True
        rep["recipe"]["file"] = "recipes/chaos_exit.lua"
        rep["recipe"]["source"] = rep["recipe"]["source"].replace(
            "ctx.comm:barrier()", 'cs.chaos.inject { kind = "exit", status = 70 }\n  ctx.comm:barrier()')
        rp = self.write("claim.json", json.dumps(rep))
        r = self.cs(["--replay", rp])
        self.assertExit(r, cs_e2e.RUNTIME)
        self.assertIn("an exit may end a sandboxed run with status 1-5 only, not status 70", r.stderr, r.describe())

    def test_chaos_exit_leaves_report_json_with_its_code(self):
        """A chaos exit the sandbox may plant (status 4, from a rule file at its load) ends the run
        with 4, and report.json says 4 (with an incident naming the injection) before the
        process ends; --trusted lifts the 1-5 bound (70). Before: exit_code null, partial."""
        rules = self.write("x4.lua", 'local cs = require "commscript"\n'
                                     'cs.chaos.inject { kind = "exit", status = 4 }\nreturn {}\n')
        trusted = self.recipe("x70", '  cs.chaos.inject { kind = "exit", status = 70 }\n  ctx.comm:barrier()')
        for name, args, code in (("rule_file", ["--set", 'rules.files="%s"' % rules, "full_diag", "--budget", "2"], 4),
                                 ("trusted", ["--trusted", trusted], 70)):
            with self.subTest(name):
                r = self.cs(["--backend", "self"] + args)
                self.assertExit(r, code)
                self.assertIn("chaos: rank 0 (host ", r.stderr, r.describe())
                self.assertIn("exits with status %d before " % code, r.stderr, r.describe())
                rep = r.report()
                self.assertEqual(rep["run"]["exit_code"], code, r.describe())
                self.assertNotIn("partial", rep["run"], r.describe())
                self.assertIn("an injected exit", rep["incidents"][0]["message"], r.describe())

    def test_a_forged_limit_chooses_no_exit_code(self):
        """An error object that only says limit = true is no engine limit: a rule's check that
        raised {limit = true, code = 4} passed every pcall and ended full_diag with 4 (data
        corruption); now it is that rule's failure (exit 2, naming it). A recipe's own pcall
        catches one."""
        rules = self.write("spoof.lua", 'return { { id = "spoof", severity = "info", '
                                        'check = function() error({ limit = true, code = 4, message = "x" }) end } }\n')
        r = self.cs(["--backend", "self", "--set", 'rules.files="%s"' % rules, "full_diag", "--budget", "2"])
        self.assertExit(r, cs_e2e.RUNTIME)
        self.assertIn("rule spoof failed: x", r.stderr, r.describe())
        path = self.recipe("spoof_pcall", '  print("caught", pcall(error, { limit = true, code = 4 }))')
        r = self.cs(["--backend", "self", path])
        self.assertExit(r, cs_e2e.OK)
        self.assertIn("caught\tfalse", r.stdout, r.describe())

    # ---- chaos naming a rank the job does not have (issue 33) ----
    def test_chaos_naming_a_rank_outside_the_job_is_refused(self):
        """--set chaos=, [[chaos]] (1 rank, and 2 ranks under mpirun): exit 1 before anything runs
        (no report.json), naming the rank and the job's size; cs.chaos.inject in a recipe: exit 1
        at the call. Before, all three ran and exited 0 (the chaos never fired)."""
        cfg = self.write("c5.toml", '[[chaos]]\nkind = "delay"\nranks = [5]\nms = 1\n')
        path = self.recipe("c_ranks", "  ctx.comm:barrier()")
        for name, args, np, size in (("set", ["--backend", "self", "--set", 'chaos=[{kind="hang", ranks=[1]}]'], None,
                                      "it runs 1 rank (rank 0)"),
                                     ("config", ["--config", cfg], 2, "it runs 2 ranks (0-1)")):
            with self.subTest(name):
                r = self.cs(args + [path], np=np)
                self.assertExit(r, cs_e2e.BAD_INPUT)
                rank = 1 if name == "set" else 5
                self.assertEqual(r.stderr.count("'ranks' names rank %d, which this job does not have: %s" % (rank, size)),
                                 1, r.describe())
                self.assertFalse(os.path.exists(r.path("report.json")), "nothing may run\n" + r.describe())
        inj = self.recipe("c_inject", '  cs.chaos.inject { kind = "delay", ranks = { 3 }, ms = 1 }')
        r = self.cs(["--backend", "self", inj])
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("c_inject.lua:4:", r.stderr, r.describe())
        self.assertIn("'ranks' names rank 3, which this job does not have: it runs 1 rank", r.stderr, r.describe())


if __name__ == "__main__":
    cs_e2e.main()
