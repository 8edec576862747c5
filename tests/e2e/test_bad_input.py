"""Bad input end to end: every case exits 1 quickly (no hang), says why on stderr, and says it
once even under mpirun -np 2. Also the informational commands (--version, --list, --help,
--check)."""
import os
import re
import unittest

import cs_e2e

NP = 2
MAX_S = 15  # a refusal takes a moment, never a hang


class BadInput(cs_e2e.TestCase):

    def refused(self, args, *patterns, np=NP, out=True):
        """Runs ARGS, expects exit 1 within MAX_S and exactly one commscript error line on
        stderr, matching every regex in PATTERNS; returns that line."""
        r = self.cs(args, np=np, out=out, timeout=60)
        self.assertExit(r, cs_e2e.BAD_INPUT, max_s=MAX_S)
        lines = r.cs_error_lines()
        self.assertEqual(len(lines), 1, "expected the message exactly once\n" + r.describe())
        for p in patterns:
            self.assertRegex(lines[0], p, r.describe())
        self.assertNotIn("stack traceback", r.stderr, "bad input is not a crash: no traceback\n" + r.describe())
        self.assertNotIn("Out of bounds", r.stdout, "nothing may run on bad input\n" + r.describe())
        return lines[0]

    # ---- config ----
    def test_malformed_toml(self):
        cfg = self.write("bad.toml", '[options]\niters = 3\nthis is not toml\n')
        line = self.refused(["--config", cfg, "bw_sweep"])
        self.assertIn(cfg + ":3:", line)
        self.assertRegex(line, re.escape(cfg) + r":3:\d+: ")

    def test_malformed_toml_value(self):
        cfg = self.write("bad2.toml", '[options]\nmin = "8"\nmax = [1, \n')
        self.refused(["--config", cfg, "bw_sweep"], re.escape(cfg) + r":\d+:\d+: ")

    def test_unknown_toml_section(self):
        cfg = self.write("unk.toml", '[options]\niters = 3\n\n[bogus]\nx = 1\n')
        self.refused(["--config", cfg, "bw_sweep"], re.escape(cfg) + r":4:\d+: ", r"unknown section 'bogus'")

    def test_missing_config_file(self):
        missing = os.path.join(self.tmp, "nope.toml")
        self.refused(["--config", missing, "bw_sweep"], re.escape(missing), r"cannot open")

    def test_unknown_option_in_config(self):
        cfg = self.write("opt.toml", '[options]\nbogus = 3\n')
        self.refused(["--config", cfg, "bw_sweep"], r"unknown option 'bogus", r"bw_sweep")

    # ---- recipe options ----
    def test_unknown_recipe_option(self):
        self.refused(["bw_sweep", "--bogus"], r"unknown option '--bogus' for recipe bw_sweep", r"--iters")

    def test_option_not_a_number(self):
        self.refused(["bw_sweep", "--iters", "abc"], r"--iters", r"'abc' is not a number")

    def test_option_not_a_size(self):
        self.refused(["bw_sweep", "--min", "12Q"], r"--min", r"'12Q' is not a size")

    def test_option_not_a_choice(self):
        self.refused(["bw_sweep", "--dtype", "float8"], r"--dtype", r"float8", r"float32")

    def test_option_below_minimum(self):
        self.refused(["bw_sweep", "--iters", "0"], r"--iters", r"minimum")

    def test_option_needs_value(self):
        self.refused(["bw_sweep", "--iters"], r"--iters", r"needs a value")

    def test_size_too_large_to_allocate(self):
        r = self.cs(["bw_sweep", "--max", "64T", "--iters", "1", "--warmup", "0"], np=NP, timeout=60)
        self.assertExit(r, cs_e2e.BAD_INPUT, max_s=MAX_S)
        lines = r.cs_error_lines()
        self.assertEqual(len(lines), 1, "expected the message exactly once\n" + r.describe())
        self.assertRegex(lines[0], r"--max 64T", r.describe())
        self.assertRegex(lines[0], r"memory", r.describe())
        self.assertNotIn("Out of bounds", r.stdout)
        self.assertEqual(r.results_lines(), [], "no result may be taken before the refusal")

    def test_min_above_max(self):
        self.refused(["bw_sweep", "--min", "1M", "--max", "8"], r"--min", r"--max")

    def test_avg_on_integers(self):
        self.refused(["bw_sweep", "--dtype", "int32", "--op", "avg", "--max", "64"], r"avg", r"int32")

    # ---- the recipe itself ----
    def test_missing_recipe_file(self):
        missing = os.path.join(self.tmp, "no_such_recipe.lua")
        self.refused([missing], re.escape(missing), r"not found")

    def test_unknown_bundled_recipe(self):
        self.refused(["no_such_recipe"], r"no_such_recipe", r"not found", r"--list")

    def test_recipe_syntax_error(self):
        path = self.recipe("syn", "  local x = = 3")  # run() starts on line 3
        self.refused([path], re.escape(path) + r":4: ")

    def test_recipe_without_run(self):
        path = self.write("norun.lua", 'local cs = require "commscript"\n'
                                       'return cs.recipe { name = "norun", version = "0.1.0" }\n')
        self.refused([path], r"norun", r"recipe.run")

    def test_recipe_version_out_of_range(self):
        path = self.recipe("future", "", decl_extra=', requires = ">=9.0"')
        self.refused([path], r"future", r">=9\.0", r"this is commscript \d+\.\d+")

    def test_recipe_bad_declaration(self):
        path = self.write("baddecl.lua", 'local cs = require "commscript"\n'
                                         'local r = cs.recipe { name = "baddecl", version = "one" }\n'
                                         'function r.run(ctx) end\nreturn r\n')
        self.refused([path], r"version")

    # ---- the command line ----
    def test_set_without_equals(self):
        """`--set foo RECIPE`: the --set value is refused, naming it; RECIPE stays the recipe."""
        self.refused(["--set", "foo", "bw_sweep"], r"--set 'foo'", r"key=value")

    def test_set_unknown_section(self):
        self.refused(["--set", "bogus.x=1", "--backend", "mpi", "bw_sweep"], r"--set 'bogus.x=1'",
                     r"unknown section 'bogus'")

    def test_no_recipe(self):
        self.refused([], r"no recipe given")

    def test_unknown_commscript_flag(self):
        self.refused(["--bogus-flag", "bw_sweep"], r"--bogus-flag")

    def test_bad_backend(self):
        self.refused(["--backend", "carrier-pigeon", "bw_sweep"], r"carrier-pigeon|--backend", np=None)

    def test_negative_timeout(self):
        self.refused(["--timeout", "-3", "bw_sweep"], r"--timeout|-3", np=None)

    def test_check_with_bad_option(self):
        self.refused(["--check", "bw_sweep", "--iters", "abc"], r"--iters", r"'abc' is not a number", np=None,
                     out=False)

    def test_check_with_bad_option_np2(self):
        self.refused(["--check", "bw_sweep", "--bogus"], r"--bogus", out=False)

    # ---- informational commands: exit 0 ----
    def test_version(self):
        r = self.cs(["--version"], out=False, timeout=30)
        self.assertExit(r, cs_e2e.OK, max_s=MAX_S)
        self.assertRegex(r.stdout, r"commscript \d+\.\d+\.\d+")
        self.assertIn("MPI", r.stdout)
        self.assertIn("LuaJIT", r.stdout)

    def test_list(self):
        r = self.cs(["--list"], out=False, timeout=30)
        self.assertExit(r, cs_e2e.OK, max_s=MAX_S)
        # Every bundled recipe, each with the version its file declares.
        for name in sorted(os.listdir(os.path.join(cs_e2e.REPO, "recipes"))):
            if not name.endswith(".lua"):
                continue
            with open(os.path.join(cs_e2e.REPO, "recipes", name)) as f:
                version = re.search(r'version\s*=\s*"([0-9.]+)"', f.read()).group(1)
            self.assertRegex(r.stdout, r"(?m)^%s\s+%s\s+\S" % (re.escape(name[:-4]), re.escape(version)))
        self.assertNotIn("does not load", r.stdout)
        # The README's and docs/reference.md's copies of the list are the list (three had gone stale).
        rows = [l for l in r.stdout.splitlines()[1:] if l.strip()]
        for doc in ("README.md", os.path.join("docs", "reference.md")):
            with open(os.path.join(cs_e2e.REPO, doc)) as f:
                text = f.read()
            for row in rows:
                self.assertIn("    " + row + "\n", text, "%s: its recipe list differs from --list" % doc)

    def test_recipe_help(self):
        r = self.cs(["bw_sweep", "--help"], out=False, timeout=30)
        self.assertExit(r, cs_e2e.OK, max_s=MAX_S)
        for opt in ("--ops", "--min", "--max", "--iters", "--warmup", "--dtype", "--op"):
            self.assertRegex(r.stdout, r"(?m)^\s+" + re.escape(opt) + r"\b", opt)
        self.assertIn("allreduce", r.stdout)

    def test_recipe_help_np2_prints_once(self):
        r = self.cs(["bw_sweep", "--help"], np=NP, out=False, timeout=30)
        self.assertExit(r, cs_e2e.OK, max_s=MAX_S)
        self.assertEqual(len(re.findall(r"(?m)^\s+--ops\b", r.stdout)), 1, r.describe())

    def test_check_ok(self):
        r = self.cs(["--check", "recipes/bw_sweep.lua"], out=False, cwd=cs_e2e.REPO, timeout=30)
        self.assertExit(r, cs_e2e.OK, max_s=MAX_S)
        self.assertIn("bw_sweep", r.stdout)
        path = os.path.join(cs_e2e.REPO, "recipes", "bw_sweep.lua")
        r = self.cs(["--check", path, "--ops", "all", "--max", "1M"], out=False, timeout=30)
        self.assertExit(r, cs_e2e.OK, max_s=MAX_S)
        self.assertIn("bw_sweep", r.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "commscript-runs")), "--check must run nothing")

    def test_check_bad_recipe(self):
        path = self.recipe("syn2", "  local = 1")
        self.refused(["--check", path], re.escape(path) + r":4: ", np=None, out=False)

    def test_commscript_help(self):
        r = self.cs(["--help"], out=False, timeout=30)
        self.assertExit(r, cs_e2e.OK, max_s=MAX_S)
        self.assertIn("--config", r.stdout)
        self.assertIn("exit codes", r.stdout)


if __name__ == "__main__":
    cs_e2e.main()
