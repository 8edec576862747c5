"""--backend gloo end to end: bw_sweep --ops all under mpirun (MPI only tells the ranks where
rank 0's store is) checked like the mpi sweep; launch without mpirun (--launcher env, torchrun's
variables, processes started by launch_env.py); bad launcher input; the elastic drill (a rank
SIGKILLed, the survivors shrink and go on); and a backend that cannot survive a drop refusing."""
import json
import os
import sys
import unittest

import cs_e2e
import launch_env
import test_bw_sweep


def _versions_say_gloo():
    r = cs_e2e.run(["--backend", "gloo", "--check", "bw_sweep"])
    return "built without Gloo" not in r.stderr


GLOO = _versions_say_gloo()


@unittest.skipUnless(GLOO, "built without Gloo")
class GlooSweep(cs_e2e.TestCase):
    # The same checks as the mpi sweep (rows, #wrong = 0, algbw/busbw arithmetic, table).
    sweep = test_bw_sweep.BwSweep.sweep
    check_all = test_bw_sweep.BwSweep.check_all
    check_report = test_bw_sweep.BwSweep.check_report
    check_results = test_bw_sweep.BwSweep.check_results
    check_jsonl = test_bw_sweep.BwSweep.check_jsonl
    check_table = test_bw_sweep.BwSweep.check_table

    def test_all_ops_2_ranks(self):
        self.sweep(2, backend="gloo")

    def test_all_ops_4_ranks(self):
        self.sweep(4, backend="gloo")

    def test_3_ranks_float64_max(self):
        # Not a power of two (Gloo's ring and halving-doubling algorithms take other paths).
        self.sweep(3, dtype="float64", redop="max", backend="gloo")

    def test_int8_prod(self):
        self.sweep(2, dtype="int8", redop="prod", backend="gloo")

    def test_16bit_floats_refused(self):
        # No float16/bfloat16 reductions here: refused before the sweep (exit 1), saying what to use.
        for dt in ("float16", "bfloat16"):
            with self.subTest(dtype=dt):
                r = self.cs(["--backend", "gloo", "bw_sweep", "--dtypes", "float32," + dt, "--max", "64",
                             "--iters", "2", "--warmup", "0"], np=2, timeout=120)
                self.assertExit(r, cs_e2e.BAD_INPUT)
                self.assertIn("dtype %s is not supported by --backend gloo: commscript's Gloo backend has no "
                              "float16/bfloat16 reductions; use --backend nccl for them, or float32 on gloo" % dt,
                              r.stderr)
                self.assertEqual(r.report()["results"], [])


def env_cmd(*args):
    return [cs_e2e.BIN] + list(args)


@unittest.skipUnless(GLOO, "built without Gloo")
class LauncherEnv(cs_e2e.TestCase):

    def launch(self, n, args, timeout=120, per_rank_env=None):
        out = os.path.join(self.tmp, "out")
        res, wall = launch_env.launch(env_cmd("--out", out, *args), n, timeout=timeout, cwd=self.tmp,
                                      env=cs_e2e._env(), per_rank_env=per_rank_env)
        return res, wall, out

    def describe(self, res):
        return "\n".join("--- rank %d rc %s\n%s\n%s" % (r, rc, o[-2000:], e[-2000:]) for r, (rc, o, e) in enumerate(res))

    def test_bw_sweep_without_mpi(self):
        res, _, out = self.launch(3, ["--backend", "gloo", "--launcher", "env", "bw_sweep", "--ops",
                                      "allreduce,allgather,sendrecv", "--min", "8", "--max", "64K", "--iters", "3"])
        self.assertEqual([rc for rc, _, _ in res], [0, 0, 0], self.describe(res))
        with open(os.path.join(out, "report.json")) as f:
            rep = json.load(f)
        self.assertEqual(rep["run"]["ranks"], 3)
        self.assertEqual(rep["run"]["backend"], "gloo")
        self.assertEqual(rep["run"]["launcher"]["kind"], "env")
        self.assertFalse(rep["run"]["launcher"]["detected"])
        self.assertEqual(rep["run"]["launcher"]["size"], 3)
        self.assertTrue(rep["results"])
        for x in rep["results"]:
            self.assertEqual(x["wrong"], 0, x)
            self.assertEqual(x["ranks"], 3, x)
        # No MPI in this run: no OMPI_ variables reached the ranks from a launcher.
        self.assertNotIn("OMPI_COMM_WORLD_RANK", rep["env"].get("vars", rep["env"]))

    def test_auto_detects_env(self):
        res, _, out = self.launch(2, ["--backend", "gloo", "bw_sweep", "--ops", "allreduce", "--min", "8",
                                      "--max", "1K", "--iters", "2"])
        self.assertEqual([rc for rc, _, _ in res], [0, 0], self.describe(res))
        with open(os.path.join(out, "report.json")) as f:
            launcher = json.load(f)["run"]["launcher"]
        self.assertEqual(launcher["kind"], "env")
        self.assertTrue(launcher["detected"])

    def test_missing_and_inconsistent_variables(self):
        base = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"}
        cases = [({"MASTER_PORT": None}, "MASTER_PORT is not set"),
                 ({"RANK": None}, "RANK is not set"),
                 ({"RANK": "2"}, "RANK=2 is not below WORLD_SIZE=2"),
                 ({"MASTER_PORT": "x"}, "MASTER_PORT='x' is not an integer"),
                 ({"LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "2"}, "LOCAL_RANK=3 is not below LOCAL_WORLD_SIZE=2")]
        for change, msg in cases:
            env = dict(base)
            env.update(change)
            env = {k: v for k, v in env.items() if v is not None}
            full = cs_e2e._env(env)
            for k, v in change.items():
                if v is None:
                    full.pop(k, None)
            import subprocess
            p = subprocess.run(env_cmd("--backend", "gloo", "--launcher", "env", "bw_sweep"), env=full,
                               cwd=self.tmp, capture_output=True, timeout=30)
            err = p.stderr.decode()
            self.assertEqual(p.returncode, cs_e2e.BAD_INPUT, "%s: %s" % (change, err))
            self.assertIn(msg, err, change)

    def test_processes_that_disagree(self):
        # Each process read its own variables: rank 0's store refuses one whose WORLD_SIZE differs
        # from rank 0's or whose RANK another live process holds, and every rank ends with exit 1 and
        # that reason at once (before: Gloo's internal assertion, exit 70, or the setup deadline).
        cases = [(2, lambda r: {"WORLD_SIZE": "3"} if r == 1 else {},
                  "rank 1 (from 127.0.0.1) was started with a world of 3 ranks, rank 0 with 2"),
                 (3, lambda r: {"RANK": "1"} if r == 2 else {},
                  "two processes were started as rank 1 (from 127.0.0.1 and 127.0.0.1)")]
        for n, per_rank, msg in cases:
            with self.subTest(msg=msg):
                res, wall, _ = self.launch(n, ["--backend", "gloo", "--launcher", "env", "--timeout", "60", "bw_sweep",
                                               "--max", "1K"], timeout=90, per_rank_env=per_rank)
                self.assertEqual([rc for rc, _, _ in res], [cs_e2e.BAD_INPUT] * n, self.describe(res))
                for rc, _, err in res:
                    self.assertIn(msg, err, self.describe(res))
                self.assertLess(wall, 30, "the refusal waited for the deadline\n" + self.describe(res))

    def test_mpi_backend_needs_mpi(self):
        import subprocess
        env = cs_e2e._env({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29512"})
        p = subprocess.run(env_cmd("--backend", "mpi", "--launcher", "env", "bw_sweep"), env=env, cwd=self.tmp,
                           capture_output=True, timeout=30)
        self.assertEqual(p.returncode, cs_e2e.BAD_INPUT, p.stderr.decode())
        self.assertIn("only --backend gloo runs that way", p.stderr.decode())

    def test_elastic_drill_4_ranks(self):
        deadline = 3.0
        res, wall, out = self.launch(4, ["--backend", "gloo", "--launcher", "env", "elastic_drill",
                                         "--deadline", str(deadline)], timeout=90)
        rcs = [rc for rc, _, _ in res]
        self.assertEqual(rcs[:3], [0, 0, 0], self.describe(res))
        self.assertEqual(rcs[3], -9, "the victim was not SIGKILLed\n" + self.describe(res))
        with open(os.path.join(out, "report.json")) as f:
            rep = json.load(f)
        d = rep["drill"]
        self.assertEqual(d["victim"], 3)
        self.assertEqual(d["gone"], [3])
        self.assertEqual(d["survivors"], 3)
        self.assertLessEqual(d["detect_s"], deadline + 1, d)
        self.assertLessEqual(d["working_s"], 2.0, d)
        self.assertEqual(d["wrong_after"], 0, d)
        self.assertFalse(d["data_lost"])
        self.assertGreater(d["busbw_before"], 0)
        self.assertGreater(d["busbw_after"], 0)
        self.assertEqual(rep["run"]["exit_code"], 0)
        self.assertEqual([f for f in rep["findings"] if f["severity"] == "error"], [])
        after = [x for x in rep["results"] if x.get("phase") == "after"]
        self.assertEqual(len(after), 1)
        self.assertEqual(after[0]["ranks"], 3)
        self.assertEqual(after[0]["wrong"], 0)

    def test_shrink_refuses_live_ranks(self):
        body = ("local ok, e = pcall(ctx.comm.shrink, ctx.comm, { exclude = { 1 - ctx.rank } })\n"
                "if ok then error('shrink accepted a live rank') end\n"
                "error(e, 0)")
        path = self.recipe("shrink_live", body)
        res, _, _ = self.launch(2, ["--backend", "gloo", "--launcher", "env", path], timeout=60)
        self.assertEqual([rc for rc, _, _ in res], [1, 1], self.describe(res))
        self.assertIn("is alive", res[0][2] + res[1][2])


    def test_revoked_communicator_says_so(self):
        # After revoke() an operation (its call verification first) raises ranks_lost naming the
        # revoke; Gloo's own assertion on the closed connections ended the rank with exit 70 before.
        # shrink{} with nothing gone then gives every rank a working communicator, and the run's
        # end moves on to it: exit 0.
        body = ("ctx.comm:revoke()\n"
                "local ok, e = pcall(ctx.comm.barrier, ctx.comm)\n"
                "assert(not ok and type(e) == 'table' and e.kind == 'ranks_lost', tostring(e))\n"
                "ctx.log('revoked: %s', e.message)\n"
                "local s = ctx.comm:shrink {}\n"
                "assert(s:size() == ctx.size)\n"
                "s:barrier()\n"
                "ctx.log('shrunk: %d ranks', s:size())")
        path = self.recipe("revoked", body)
        res, _, _ = self.launch(2, ["--backend", "gloo", "--launcher", "env", "--timeout", "20", path], timeout=60)
        self.assertEqual([rc for rc, _, _ in res], [0, 0], self.describe(res))
        self.assertIn("the communicator was revoked; shrink it first", res[0][1], self.describe(res))
        self.assertIn("shrunk: 2 ranks", res[0][1], self.describe(res))

    def test_shrink_refuses_every_rank(self):
        body = ("local all = {}\n"
                "for r = 0, ctx.size - 1 do all[#all + 1] = r end\n"
                "ctx.comm:shrink { exclude = all }")
        path = self.recipe("shrink_all", body)
        res, _, _ = self.launch(2, ["--backend", "gloo", "--launcher", "env", path], timeout=60)
        self.assertEqual([rc for rc, _, _ in res], [1, 1], self.describe(res))
        for _, _, err in res:
            self.assertIn("shrink: the exclude list names every rank of communicator 'world' (0..1)", err)


@unittest.skipIf(GLOO, "built with Gloo")
class WithoutGloo(cs_e2e.TestCase):

    def test_backend_gloo_refused(self):
        r = self.cs(["--backend", "gloo", "bw_sweep"], np=2)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("--backend gloo: this commscript was built without Gloo (libgloo-dev)", r.stderr)


class NotSurvivable(cs_e2e.TestCase):

    def test_mpi_refuses_the_drill(self):
        r = self.cs(["elastic_drill"], np=2)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        # The refusal names the MPI library that was found (Open MPI 4.1 here: no ULFM).
        self.assertRegex(r.stderr, r"this MPI \((Open MPI|MPICH)[^)]*\) (has no ULFM|declares the ULFM extensions)")

    @unittest.skipUnless(GLOO, "built without Gloo")
    def test_gloo_under_mpirun_refuses_the_drill(self):
        # Gloo survives a drop; mpirun does not (it ends every rank): refused before any rank is killed.
        r = self.cs(["--backend", "gloo", "elastic_drill"], np=2)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("elastic_drill: --backend gloo under mpirun cannot survive a drop", r.stderr)
        self.assertIn("--launcher env", r.stderr)
        self.assertEqual(r.report()["results"], [])

    def test_chaos_kill_only_on_exit(self):
        cfg = self.write("kill.toml", '[[chaos]]\nkind = "delay"\nkill = true\n')
        r = self.cs(["--backend", "self", "--config", cfg, "bw_sweep"])
        self.assertEqual(r.rc, cs_e2e.BAD_INPUT, r.describe())
        self.assertIn("'kill' applies to exit only", r.stderr)


if __name__ == "__main__":
    cs_e2e.main()
