"""The control plane with heartbeats aggregated per host, end to end on one machine: 4 ranks
grouped as 2 "hosts" (COMMSCRIPT_CONTROL_HOST per rank: h0 = ranks 0, 1; h1 = ranks 2, 3), so that
rank 2 leads h1 and relays rank 3's heartbeats to rank 0. A hang on the relayed rank is named
exactly, with every flight recorder collected through the relay; a dead host leader is named;
and when rank 0 dies under --launcher env, the other ranks say so naming that launcher, not
mpirun."""
import os
import re
import subprocess
import sys
import time
import unittest

import cs_e2e
import launch_env

NP = 4
# Each rank's "host" from its MPI rank.
AS_HOSTS = ["sh", "-c", 'COMMSCRIPT_CONTROL_HOST=h$((OMPI_COMM_WORLD_RANK / 2)) exec "$0" "$@"']


class TwoHosts(cs_e2e.TestCase):

    def run_hosts(self, args, timeout=90):
        return cs_e2e.run_prefixed(self, AS_HOSTS, args, NP, timeout)

    def test_relayed_hang_is_named(self):
        r = self.run_hosts(["chaos_hang"])
        self.assertExit(r, cs_e2e.TIMEOUT)
        lines = [l for l in r.stderr.splitlines() if l.startswith("timeout:")]
        self.assertEqual(len(lines), 1, r.describe())
        self.assertIn("missing ranks: 3 (host h1, ", lines[0])
        inc = r.report()["incidents"][0]
        self.assertEqual([m["rank"] for m in inc["missing"]], [3], inc["line"])
        self.assertEqual(inc["arrived"], [0, 1, 2])
        # DUMP reached rank 3 through its host's relay, and its flight recorder came back.
        self.assertEqual(len(inc["flight_recorder"]), NP, inc["flight_recorder"])
        self.assertEqual({s["host"] for s in inc["ranks"]}, {"h0", "h1"})

    def test_dead_leader_is_named(self):
        r = self.run_hosts(["--set", 'chaos=[{kind="exit", ranks=[2], status=7, after=3}]', "bw_sweep", "--max",
                            "1K", "--ops", "allreduce"])
        self.assertExit(r, 7)
        died = [i for i in r.report()["incidents"] if i["kind"] == "rank_died"]
        self.assertEqual(len(died), 1, r.describe())
        self.assertEqual([d["rank"] for d in died[0]["dead_ranks"]], [2])
        self.assertEqual(died[0]["dead_ranks"][0]["host"], "h1")
        self.assertIn("mpirun ends the job", died[0]["message"])


    def test_relayed_rank_busy_in_lua_is_named_with_its_line(self):
        # Rank 3 (relayed through h1's leader) spins in a tight Lua loop that LuaJIT would compile;
        # the others wait in the next all-reduce until its 3 s deadline. The verdict names rank 3
        # as busy in Lua at the loop's line, through the relay.
        path = self.recipe("spin", """  local t = cs.tensor("float32", 8)
  ctx.comm:allreduce(t, t)
  if ctx.rank == 3 then
    local x = 0
    while true do x = (x + 1) % 7 end
  end
  ctx.comm:allreduce(t, t)
  return 0""")
        r = self.run_hosts(["--timeout", "3", path])
        self.assertExit(r, cs_e2e.TIMEOUT)
        lines = [l for l in r.stderr.splitlines() if l.startswith("timeout:")]
        self.assertEqual(len(lines), 1, r.describe())
        # spin.lua: 1 require, 2 declaration, 3 function, 4 local t, 5 allreduce, 6 if, 7 local x, 8 while
        self.assertRegex(lines[0], r"missing ranks: 3 \(host h1, busy in Lua at %s:8 for [2-9] s "
                         r"\(last: allreduce #1 on world\)\)" % re.escape(path), r.describe())
        inc = r.report()["incidents"][0]
        self.assertEqual([m["rank"] for m in inc["missing"]], [3], inc["line"])
        self.assertEqual(inc["missing"][0]["state"], "busy in Lua")
        self.assertEqual(inc["missing"][0]["lua"]["site"], "%s:8" % path)


class AcrossCommunicators(cs_e2e.TestCase):

    def test_split_communicator_timeout_names_its_culprit_only(self):
        """world split in two (ranks 0, 2 / 1, 3); rank 2 spins in Lua before its half's
        all-reduce, rank 0 waits for it there, ranks 1 and 3 finish theirs and wait in the world's
        barrier. Before: the verdict on the split all-reduce named ranks 1 and 3 (members of the
        other half, waiting elsewhere), and the one on the barrier named rank 0 too. Now only
        rank 2 is missing; rank 0 is listed as waiting on its half for rank 2."""
        path = self.recipe("halves", """  local sub = ctx.comm:split(ctx.rank % 2)
  local t = cs.tensor("float32", 8)
  if ctx.rank == 2 then
    local x = 0
    while true do x = (x + 1) % 7 end
  end
  sub:allreduce(t, t)
  ctx.comm:barrier()
  return 0""")
        r = self.cs(["--timeout", "3", path], np=4, timeout=90)
        self.assertExit(r, cs_e2e.TIMEOUT)
        inc = [i for i in r.report()["incidents"] if i["kind"] == "timeout"]
        self.assertEqual(len(inc), 1, r.describe())
        self.assertEqual([m["rank"] for m in inc[0]["missing"]], [2], inc[0]["line"])
        self.assertEqual(inc[0]["missing"][0]["state"], "busy in Lua", inc[0])
        if inc[0]["comm"] == "world":
            self.assertEqual([w["rank"] for w in inc[0]["waiting"]], [0], inc[0])
            self.assertIn("waiting elsewhere for them: rank 0 in allreduce", inc[0]["line"])


class RankZeroLostWithoutMpirun(cs_e2e.TestCase):

    def test_names_the_launcher(self):
        r = cs_e2e.run(["--backend", "gloo", "--check", "bw_sweep"])
        if "built without Gloo" in r.stderr:
            self.skipTest("built without Gloo")
        cmd = [cs_e2e.BIN, "--out", os.path.join(self.tmp, "out"), "--backend", "gloo", "--launcher", "env",
               "--timeout", "20", "--set", 'chaos=[{kind="exit", ranks=[0], kill=true, after=3}]',
               "bw_sweep", "--max", "1K", "--ops", "allreduce", "--iters", "50"]
        res, wall = launch_env.launch(cmd, 3, timeout=90, cwd=self.tmp, env=cs_e2e._env())
        describe = "\n".join("--- rank %d rc %s\n%s\n%s" % (i, rc, o[-1500:], e[-1500:])
                             for i, (rc, o, e) in enumerate(res))
        self.assertEqual(res[0][0], -9, "rank 0 was not SIGKILLed\n" + describe)
        for rank in (1, 2):
            rc, _, err = res[rank]
            self.assertIsNotNone(rc, "rank %d hung\n%s" % (rank, describe))
            self.assertIn("rank %d: lost the coordinator (rank 0" % rank, err, describe)
            self.assertIn("--launcher env", err, describe)
            self.assertNotIn("mpirun", err, describe)


if __name__ == "__main__":
    cs_e2e.main()
