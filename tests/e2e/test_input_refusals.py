"""Issue 13, "every input refused cleanly": numbers range-checked where they are parsed, the
config and a baseline type-checked before anything is measured, a replayed report validated
field by field, a recipe's own error code never turning a failure into exit 0, engine-owned
report sections refused with the report still written, C-stack depth and the top level's time
bounded, and bool flags / unknown options answered with how to write them."""
import json
import os
import unittest

import cs_e2e

FAST_S = 15  # refusals come before anything is measured


class Numbers(cs_e2e.TestCase):

    def refused(self, args, *needles):
        r = self.cs(args, out=False)
        self.assertExit(r, cs_e2e.BAD_INPUT, max_s=FAST_S)
        for n in needles:
            self.assertIn(n, r.stderr, r.describe())
        return r

    def test_timeout(self):
        for v, msg in (("1e10", "beyond the longest deadline"), ("1e300", "beyond the longest deadline"),
                       ("inf", "not a finite number"), ("nan", "not a finite number"),
                       ("1e-300", "below the shortest deadline"), ("-1", "must not be negative")):
            self.refused(["--timeout", v, "--check", "bw_sweep"], msg)
        r = self.cs(["--timeout", "0", "--check", "bw_sweep"], out=False)
        self.assertExit(r, cs_e2e.OK)

    def test_run_timeout_nan_in_config(self):
        cfg = self.write("c.toml", "[run]\ntimeout = nan\n")
        self.refused(["--config", cfg, "--check", "bw_sweep"], "run.timeout must be a finite number")
        cfg = self.write("c2.toml", "[run]\ntimeout = 1e12\n")
        self.refused(["--config", cfg, "--check", "bw_sweep"], "run.timeout 1e+12 s is beyond the longest deadline")

    def test_seed_and_fail_below(self):
        self.refused(["--seed", "-1", "--check", "bw_sweep"], "--seed: must not be negative")
        self.refused(["--fail-below", "nan", "--check", "bw_sweep"], "not a finite number")

    def test_recipe_numbers(self):
        self.refused(["--check", "bw_sweep", "--iters", "4294967297"], "above the maximum")
        self.refused(["--check", "bw_sweep", "--iters", "3000000000"], "above the maximum")
        self.refused(["--check", "bw_sweep", "--factor", "nan"], "is not a finite number")
        self.refused(["--check", "bw_sweep", "--factor", "inf"], "is not a finite number")


class Config(cs_e2e.TestCase):

    def refused_config(self, text, needle):
        cfg = self.write("c.toml", text)
        r = self.cs(["--backend", "self", "--config", cfg, "full_diag"], timeout=60)
        self.assertExit(r, cs_e2e.BAD_INPUT, max_s=FAST_S)
        self.assertIn(needle, r.stderr, r.describe())
        self.assertEqual(r.results_lines(), [], "nothing may be measured before the refusal")

    def test_rules_not_a_table(self):
        self.refused_config("rules = 5\n", "[rules] must be a table")

    def test_rules_files_type(self):
        self.refused_config("[rules]\nfiles = 5\n", "rules.files must be a file name or a list of them")

    def test_threshold_not_a_number(self):
        self.refused_config('[thresholds]\nbusbw_min_gbps = "x"\n', "thresholds.busbw_min_gbps must be a finite number")

    def test_bandwidth_reference_zero(self):
        self.refused_config("[scorecard]\nbandwidth_reference_gbps = 0\n",
                            "scorecard.bandwidth_reference_gbps must be > 0")

    def test_set_checked_too(self):
        r = self.cs(["--backend", "self", "--set", "thresholds.busbw_min_gbps=nan", "full_diag"], timeout=60)
        self.assertExit(r, cs_e2e.BAD_INPUT, max_s=FAST_S)
        self.assertIn("thresholds.busbw_min_gbps must be a finite number", r.stderr, r.describe())

    def test_options_not_a_table(self):
        r = self.cs(["--backend", "self", "--set", "options=5", "--check", "bw_sweep"], out=False)
        self.assertExit(r, cs_e2e.BAD_INPUT, max_s=FAST_S)
        self.assertIn("[options] must be a table", r.stderr, r.describe())

    def test_option_values_of_another_type(self):
        # Found by fuzz_options: a size option given a bool or a table through --set ended in
        # "options.lua:82: bad argument #1 to 'parse_size'", a nested list became "table: 0x...".
        for v, msg in (("options.max=true", "option --max: boolean is not a size"),
                       ("options.max=[1,2]", "option --max: table is not a size"),
                       ("options.ops=[[1]]", "option --ops: a list of words is expected, got a nested table")):
            r = self.cs(["--set", v, "--check", "bw_sweep"], out=False)
            self.assertExit(r, cs_e2e.BAD_INPUT, max_s=FAST_S)
            self.assertIn(msg, r.stderr, r.describe())
            self.assertNotIn(".lua:", r.stderr, r.describe())

    def test_baseline_whose_results_are_numbers(self):
        b = self.write("b.json", json.dumps({"schema": "commscript.report/1", "results": [1, 2, 3]}))
        r = self.cs(["--backend", "self", "--baseline", b, "full_diag"], timeout=60)
        self.assertExit(r, cs_e2e.BAD_INPUT, max_s=FAST_S)
        self.assertIn("field results[0] must be an object", r.stderr, r.describe())


class Replay(cs_e2e.TestCase):

    def good_report(self):
        r = self.cs(["--backend", "self", "bw_sweep", "--max", "64", "--iters", "2", "--warmup", "0"])
        self.assertExit(r, cs_e2e.OK)
        return r.report()

    def test_wrong_types_name_the_field(self):
        base = self.good_report()
        cases = [
            (("recipe", "source"), 5, "field recipe.source must be a string"),
            (("recipe", "source"), None, "field recipe.source must be a string"),
            (("recipe", "sha256"), 5, "field recipe.sha256 must be a string"),
            (("recipe", "file"), [], "field recipe.file must be a string"),
            (("recipe", "args"), [1], "field recipe.args[0] must be a string"),
            (("run", "ranks"), "x", "field run.ranks must be a non-negative integer"),
            (("run", "seed"), -1, "field run.seed must be a non-negative integer"),
            (("run", "timeout_s"), 1e300, "beyond the longest deadline"),
            (("run", "backend"), "tcp", "field run.backend must be one of"),
            (("run", "trusted"), "yes", "field run.trusted must be a boolean"),
            (("commscript", "version"), 1, "field commscript.version must be a string"),
            (("run", "config"), {"env": {"X": [1]}}, "env.X must be a string, number or boolean"),
        ]
        for (sec, key), value, needle in cases:
            rep = json.loads(json.dumps(base))
            rep[sec][key] = value
            p = self.write("bad.json", json.dumps(rep))
            r = self.cs(["--replay", p])
            self.assertExit(r, cs_e2e.BAD_INPUT, max_s=FAST_S)
            self.assertIn(needle, r.stderr, "%s.%s = %r\n%s" % (sec, key, value, r.describe()))


class RecipeErrors(cs_e2e.TestCase):

    def test_error_code_never_exits_0(self):
        for code in ("256", "0", "0/0", "1e10", "-1", "'x'", "70"):
            p = self.recipe("code", "  error({ code = %s, message = 'custom failure' })" % code)
            r = self.cs(["--backend", "self", p])
            self.assertExit(r, cs_e2e.RUNTIME)
            self.assertIn("custom failure", r.stderr, r.describe())
        p = self.recipe("code3", "  error({ code = 3, message = 'health' })")
        self.assertExit(self.cs(["--backend", "self", p]), cs_e2e.HEALTH)

    def test_engine_owned_sections_refused_and_report_written(self):
        for key, value in (("run", "'x'"), ("incidents", "5"), ("results", "{}"), ("env", "1")):
            p = self.recipe("own", "  ctx.report:result { step = 1 }\n  ctx.report:set(%r, %s)" % (key, value))
            r = self.cs(["--backend", "self", p])
            self.assertExit(r, cs_e2e.RUNTIME)
            self.assertIn("report:set: section '%s' is written by the engine" % key, r.stderr, r.describe())
            rep = r.report()
            self.assertEqual(rep["run"]["exit_code"], 2)
            self.assertIsInstance(rep["incidents"], list)
            self.assertEqual(r.results_lines(), [{"step": 1}])

    def test_c_stack_overflow_is_a_recipe_error(self):
        body = ('  local function f(s) return (s:gsub(".", f)) end\n  f("ab")')
        p = self.recipe("cstack", body)
        r = self.cs(["--backend", "self", p], timeout=60)
        self.assertExit(r, cs_e2e.RUNTIME, max_s=30)
        self.assertIn("C stack overflow", r.stderr, r.describe())
        self.assertTrue(os.path.exists(r.path("report.json")), r.describe())
        # nested coroutines and a gsub with an __index table replacement
        for body in ('  local function f() return coroutine.wrap(f)() end\n  f()',
                     '  local t\n  t = setmetatable({}, { __index = function() return ("a"):gsub("a", t) end })\n'
                     '  local _ = t.x'):
            r = self.cs(["--backend", "self", self.recipe("cstack2", body)], timeout=60)
            self.assertExit(r, cs_e2e.RUNTIME, max_s=30)
            self.assertIn("C stack overflow", r.stderr, r.describe())

    def test_c_stack_overflow_at_top_level_under_check(self):
        p = self.recipe("cstack_top", "", top='local function f(s) return (s:gsub(".", f)) end\nf("ab")\n')
        r = self.cs(["--check", p], out=False, timeout=60)
        self.assertExit(r, cs_e2e.RUNTIME, max_s=30)
        self.assertIn("C stack overflow", r.stderr, r.describe())

    def test_endless_top_level_ends_under_check_and_help(self):
        p = self.recipe("endless", "", top="while true do end\n")
        for args in (["--check", p], [p, "--help"]):
            r = self.cs(args, out=False, timeout=60)
            self.assertExit(r, cs_e2e.RUNTIME, max_s=25)
            self.assertIn("top level ran for more than 10 s", r.stderr, r.describe())


class CommandLine(cs_e2e.TestCase):

    def test_bool_flag_with_a_separate_value(self):
        r = self.cs(["--check", "false", "bw_sweep"], out=False)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("--check is a flag and takes no separate value: write --check or --no-check (or --check=false)",
                      r.stderr, r.describe())
        r = self.cs(["--check=false", "--no-check", "--check", "bw_sweep"], out=False)
        self.assertExit(r, cs_e2e.OK)

    def test_unknown_option_did_you_mean(self):
        r = self.cs(["--chekc", "bw_sweep"], out=False)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("did you mean --check?", r.stderr, r.describe())
        r = self.cs(["--check", "bw_sweep", "--iter", "3"], out=False)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("did you mean --iters?", r.stderr, r.describe())

    def test_every_own_option_from_one_table(self):
        # --launcher, --no-verify and --baseline were missing from one list or another.
        r = self.cs(["--lancher", "env", "bw_sweep"], out=False)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("did you mean --launcher?", r.stderr, r.describe())
        r = self.cs(["--launcher", "mpi", "--check", "false", "bw_sweep"], out=False)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("--check is a flag and takes no separate value", r.stderr, r.describe())
        r = self.cs(["--no-verify", "no", "bw_sweep"], out=False)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("--no-verify is a flag and takes no separate value", r.stderr, r.describe())
        for opt in ("--no-verify", "--baseline"):
            r = self.cs(["--check", "bw_sweep", opt], out=False)
            self.assertExit(r, cs_e2e.BAD_INPUT)
            self.assertIn("commscript's own options go before the recipe", r.stderr, r.describe())


if __name__ == "__main__":
    cs_e2e.main()
