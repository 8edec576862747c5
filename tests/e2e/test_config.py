"""Configuration end to end: [options] in a TOML file set recipe options, --set overrides the
file, the recipe's command line overrides both (checked in report.json recipe.options); [env]
values are exported on every rank and appear in report.json env; [run] sets seed/timeout."""
import unittest

import cs_e2e

SMALL = ["--ops", "allreduce", "--min", "8", "--max", "32", "--warmup", "0"]

CONFIG = """\
# an e2e config
[options]
iters = 3
warmup = 2
max = "1K"
dtype = "int32"
ops = ["allreduce", "broadcast"]
inplace = false

[run]
seed = 42
"""


class Config(cs_e2e.TestCase):

    def options_of(self, r):
        self.assertExit(r, cs_e2e.OK)
        return r.report()["recipe"]["options"]

    def test_options_from_toml(self):
        cfg = self.write("c.toml", CONFIG)
        r = self.cs(["--config", cfg, "bw_sweep"], np=2)
        o = self.options_of(r)
        self.assertEqual(o["iters"], 3)
        self.assertEqual(o["warmup"], 2)
        self.assertEqual(o["max"], 1024)
        self.assertEqual(o["dtype"], "int32")
        self.assertEqual(o["ops"], ["allreduce", "broadcast"])
        self.assertIs(o["inplace"], False)
        self.assertEqual(o["min"], 8)  # the default
        rep = r.report()
        self.assertEqual(rep["run"]["seed"], 42)
        self.assertEqual(rep["run"]["config"]["options"]["iters"], 3)
        # ... and the run used them.
        res = rep["results"]
        self.assertEqual({x["op"] for x in res}, {"allreduce", "broadcast"})
        self.assertEqual({x["dtype"] for x in res}, {"int32"})
        self.assertEqual({x["iters"] for x in res}, {3})
        self.assertEqual({x["placement"] for x in res}, {"out-of-place"})
        self.assertEqual(max(x["bytes"] for x in res), 1024)

    # Most tests put another commscript option between the last --set and the recipe, so that
    # they test the precedence on their own; test_set_right_before_the_recipe tests that form.
    def test_set_overrides_toml(self):
        cfg = self.write("c.toml", CONFIG)
        r = self.cs(["--config", cfg, "--set", "iters=4", "--set", "options.dtype=float64", "--backend", "mpi",
                     "bw_sweep"], np=2)
        o = self.options_of(r)
        self.assertEqual(o["iters"], 4)
        self.assertEqual(o["dtype"], "float64")
        self.assertEqual(o["warmup"], 2)  # from the file

    def test_set_right_before_the_recipe(self):
        """`--set k=v RECIPE ...`: --set takes one value; RECIPE is the recipe, not a second --set."""
        cfg = self.write("c.toml", CONFIG)
        r = self.cs(["--config", cfg, "--set", "iters=4", "bw_sweep", "--max", "64"], np=2)
        o = self.options_of(r)
        self.assertEqual(o["iters"], 4)
        self.assertEqual(o["max"], 64)
        r = self.cs(["--backend", "self", "--set=iters=5", "bw_sweep"] + SMALL)
        self.assertEqual(self.options_of(r)["iters"], 5)

    def test_command_line_overrides_set_and_toml(self):
        cfg = self.write("c.toml", CONFIG)
        r = self.cs(["--config", cfg, "--set=iters=4", "--set=warmup=1", "--backend", "mpi", "bw_sweep", "--iters", "6",
                     "--dtype", "float32", "--ops", "broadcast"], np=2)
        o = self.options_of(r)
        self.assertEqual(o["iters"], 6)        # command line > --set > file
        self.assertEqual(o["warmup"], 1)       # --set > file
        self.assertEqual(o["dtype"], "float32")
        self.assertEqual(o["ops"], ["broadcast"])
        self.assertEqual(o["max"], 1024)       # file
        self.assertEqual({x["iters"] for x in r.report()["results"]}, {6})

    def test_set_without_config_file(self):
        r = self.cs(["--set=iters=2", "--set=run.seed=7", "--backend", "self", "bw_sweep"] + SMALL)
        o = self.options_of(r)
        self.assertEqual(o["iters"], 2)
        self.assertEqual(r.report()["run"]["seed"], 7)

    def test_seed_flag_overrides_run_section(self):
        cfg = self.write("c.toml", CONFIG)
        r = self.cs(["--backend", "self", "--config", cfg, "--seed", "9", "bw_sweep"] + SMALL)
        self.assertExit(r, cs_e2e.OK)
        self.assertEqual(r.report()["run"]["seed"], 9)

    def test_run_timeout_from_toml(self):
        cfg = self.write("t.toml", "[run]\ntimeout = 33.5\n")
        r = self.cs(["--backend", "self", "--config", cfg, "bw_sweep"] + SMALL)
        self.assertExit(r, cs_e2e.OK)
        self.assertEqual(r.report()["run"]["timeout_s"], 33.5)
        r = self.cs(["--backend", "self", "--config", cfg, "--timeout", "12", "bw_sweep"] + SMALL)
        self.assertExit(r, cs_e2e.OK)
        self.assertEqual(r.report()["run"]["timeout_s"], 12)

    def test_env_section_in_report(self):
        cfg = self.write("e.toml", '[env]\nNCCL_DEBUG = "WARN"\nNCCL_E2E_NUMBER = 7\nNCCL_E2E_FLAG = true\n'
                                   '\n[options]\niters = 2\n')
        r = self.cs(["--config", cfg, "bw_sweep"] + SMALL, np=2)
        self.assertExit(r, cs_e2e.OK)
        env = r.report()["env"]
        self.assertEqual(env.get("NCCL_DEBUG"), "WARN", env)
        self.assertEqual(env.get("NCCL_E2E_NUMBER"), "7", env)
        self.assertEqual(env.get("NCCL_E2E_FLAG"), "1", env)
        self.assertEqual(r.report()["run"]["config"]["env"]["NCCL_DEBUG"], "WARN")

    def test_env_set_override_reaches_every_rank(self):
        cfg = self.write("e.toml", '[env]\nNCCL_DEBUG = "WARN"\nNCCL_E2E_KEEP = "kept"\n')
        path = self.recipe("env_probe",
                           "  local mine = { os.getenv('NCCL_DEBUG') or 'unset', os.getenv('NCCL_E2E_KEEP') or 'unset' }\n"
                           "  local all = ctx.comm:allgather_value(mine)\n"
                           "  ctx.report:result { env = all }")
        r = self.cs(["--config", cfg, "--set=env.NCCL_DEBUG=INFO", "--backend", "mpi", path], np=3)
        self.assertExit(r, cs_e2e.OK)
        self.assertEqual(r.results_lines(), [{"env": [["INFO", "kept"]] * 3}])
        env = r.report()["env"]
        self.assertEqual(env.get("NCCL_DEBUG"), "INFO", env)
        self.assertEqual(env.get("NCCL_E2E_KEEP"), "kept", env)

    def test_config_option_with_bad_value(self):
        cfg = self.write("b.toml", '[options]\niters = "many"\n')
        r = self.cs(["--config", cfg, "bw_sweep"], np=2)
        self.assertExit(r, cs_e2e.BAD_INPUT, max_s=15)
        lines = r.cs_error_lines()
        self.assertEqual(len(lines), 1, r.describe())
        self.assertRegex(lines[0], r"--iters.*'many'.*config")

    def test_env_section_must_be_flat(self):
        cfg = self.write("f.toml", '[env]\nNCCL_DEBUG = ["a", "b"]\n')
        r = self.cs(["--config", cfg, "bw_sweep"], np=2)
        self.assertExit(r, cs_e2e.BAD_INPUT, max_s=15)
        lines = r.cs_error_lines()
        self.assertEqual(len(lines), 1, r.describe())
        self.assertRegex(lines[0], r"f\.toml:2:\d+: .*NCCL_DEBUG")


if __name__ == "__main__":
    cs_e2e.main()
