"""full_diag's cost model, counted by the engine (report.json "cost", cs.stages) and checked at
2, 3 and 4 ranks (docs/scale-cost.md):
  * topology and environment: gathered to rank 0, so another rank sends one record and receives
    nothing, while rank 0 receives n - 1 of them;
  * sweep: one collective bench per (op, size) measured, one 1-value decision per size;
  * pattern: the full plan at this size, n - 1 rounds (n for odd n; the first one measured by
    the probe stage), each rank sending its own row once (O(rounds)), receiving O(1);
  * localisation: re-tests O(suspects), the verdict broadcast;
  * no communicator made by split (pairs measure on the world), none left unfreed;
  * no stage's per-rank control-plane traffic on ranks other than 0 grows with n.
Also the sampled plan on one host of 4 ranks with a budget too small for the full plan."""
import os

import cs_e2e

STAGES = ["topology", "links", "environment", "cpu", "probe", "bandwidth sweep", "pattern", "localisation", "scorecard", "rules"]
QUICK_OPS = ["allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall"]
SIZES = [8 << i for i in range(8)]  # 8 .. 1K


# Engine operations of one comm:bench in the quick tier: 3 warm-up, a barrier, 20 timed, a
# barrier, 20 sampled, 1 checked.
BENCH_OPS = 3 + 1 + 20 + 1 + 20 + 1
# One pair in one round of the pattern: ping-pong (10 warm-up + 50 timed + 50 sampled round trips
# of 2 operations), two streams ((4 warm-up + 1 timed) x (4 sends + 1 ack): 4 MB drained, 1 MB
# timed, 256K x 4 an iteration); localisation's value is the streams' (full_diag 1.4.0), no
# exchange of its own; on one host all of it 3 times (the best kept: ranks share CPUs there).
PAIR_OPS = 3 * (2 * (10 + 50 + 50) + 2 * (4 + 1) * (4 + 1))


def rounds_full(n):
    return n - 1 if n % 2 == 0 else n


def pattern_ops(n):
    """Rank 0's operations in the full plan: a barrier per round, PAIR_OPS per round it is paired
    (every round for even n; n - 1 of the n rounds for odd n)."""
    return rounds_full(n) + (n - 1) * PAIR_OPS


class ScaleCost(cs_e2e.TestCase):

    def run_diag(self, n):
        r = self.cs(["full_diag", "--max", "1K"], np=n, timeout=150)
        self.assertExit(r, cs_e2e.OK)
        rep = r.report()
        self.assertIn("cost", rep, r.describe())
        return r, rep

    def stage(self, rep, name):
        for s in rep["cost"]["stages"]:
            if s["name"] == name:
                return s
        self.fail("no stage %r in %s" % (name, [s["name"] for s in rep["cost"]["stages"]]))

    def test_counts_at_2_3_4_ranks(self):
        per_n = {}
        for n in (2, 3, 4):
            r, rep = self.run_diag(n)
            cost = rep["cost"]
            where = "n=%d\n%s" % (n, r.describe(1500))
            self.assertEqual(cost["ranks"], n)
            self.assertEqual([s["name"] for s in cost["stages"]], STAGES, where)
            # no communicator per round: nothing split, nothing left
            self.assertEqual(cost["comms_made"], 0, where)
            self.assertEqual(cost["comms_live"], 0, where)
            for s in cost["stages"]:
                self.assertGreaterEqual(s["seconds"], 0)
                for k in cost["counters"]:
                    self.assertGreaterEqual(s["rank0"][k], 0, (s["name"], k))
                    self.assertGreaterEqual(s["others_max"][k], 0, (s["name"], k))
                self.assertTrue(1 <= s["others_max_rank"]["ops"] < n, s)

            # topology and environment: one gather each; other ranks send one record, get nothing
            for name in ("topology", "environment"):
                s = self.stage(rep, name)
                self.assertEqual(s["others_max"]["value_calls"], 1, (name, where))
                self.assertEqual(s["others_max"]["value_received"], 0, (name, where))
                self.assertGreater(s["others_max"]["value_sent"], 0, (name, where))
                self.assertEqual(s["rank0"]["value_sent"], 0, (name, where))
                # rank 0 receives the n - 1 others' records (each about the size of one)
                self.assertGreaterEqual(s["rank0"]["value_received"], (n - 1) * 0.5 * s["others_max"]["value_sent"],
                                        (name, where))
                self.assertLessEqual(s["rank0"]["value_received"], (n - 1) * s["others_max"]["value_sent"], (name, where))
                self.assertEqual(s["rank0"]["ops"], 0, (name, where))  # no numbered operation

            # sweep: one bench per (op, size) measured, one decision broadcast per size looked at
            sw = self.stage(rep, "bandwidth sweep")
            results = [x for x in rep["results"] if x.get("kind") == "sweep"]
            self.assertEqual(sw["counts"]["collectives"], len(results), where)
            self.assertLessEqual(len(results), len(QUICK_OPS) * len(SIZES))
            self.assertGreaterEqual(len(results), len(QUICK_OPS) * (len(SIZES) - 3))  # 8, 16 B too small for some
            self.assertEqual(sw["others_max"]["value_calls"], len(QUICK_OPS) * len(SIZES), where)
            self.assertEqual(sw["others_max"]["value_sent"], 0, where)
            # engine operations: warm-up + timed loop + sampled pass + barriers per bench, the same on every rank
            self.assertEqual(sw["rank0"]["ops"], sw["others_max"]["ops"], where)
            self.assertEqual(sw["rank0"]["ops"], len(results) * BENCH_OPS, where)

            # pattern: the full plan
            pat = self.stage(rep, "pattern")
            plan = rep["matrix"]["plan"]
            self.assertEqual(plan["kind"], "full", where)
            self.assertEqual(pat["counts"]["rounds"], rounds_full(n), where)
            self.assertEqual(plan["rounds_run"], rounds_full(n), where)
            self.assertEqual(plan["rounds_full"], rounds_full(n), where)
            self.assertEqual(pat["info"]["plan"]["kind"], "full")
            # engine operations: a barrier per round, PAIR_OPS per round with a partner; round 1
            # is the probe's (measured there, not again), its ops the probe stage's
            probe = self.stage(rep, "probe")
            self.assertIn(probe["rank0"]["ops"], (1, 1 + PAIR_OPS), where)  # (odd n: rank 0 may sit out)
            self.assertEqual(probe["others_max"]["ops"], 1 + PAIR_OPS, where)
            self.assertEqual(probe["rank0"]["ops"] + pat["rank0"]["ops"], pattern_ops(n), where)
            if n % 2 == 0:  # every rank in every round
                self.assertEqual(pat["others_max"]["ops"], pattern_ops(n) - 1 - PAIR_OPS, where)
            # per round one decision from rank 0 (the plan after round 1, the deadline), then one
            # gather of the own row
            self.assertEqual(pat["others_max"]["value_calls"], rounds_full(n) + 1, where)
            self.assertEqual(pat["others_max"]["value_received"] > 0, True)
            self.assertEqual(pat["rank0"]["value_sent"] > 0, True)
            per_n[n] = {name: self.stage(rep, name)["others_max"] for name in STAGES}
            per_n[n]["pattern_rounds"] = rounds_full(n)
            # every pair measured: a full n x n matrix
            vals = rep["matrix"]["values"]
            self.assertEqual(sum(1 for a in range(n) for b in range(n) if a != b and vals[a][b] is not None),
                             n * (n - 1), where)

            # localisation: at 4 ranks it runs; its re-tests are the suspects' (a healthy run: few)
            loc = self.stage(rep, "localisation")
            if n >= 4:
                self.assertIn("retests", loc["info"], where)
                rt = loc["info"]["retests"]
                self.assertLessEqual(rt["run"], rt["planned"], where)
                self.assertEqual(loc["counts"].get("retests", 0), rt["run"], where)
                # broadcast of the plan, the gather of the values, the broadcast of the verdict,
                # plus one deadline check per optional re-test
                self.assertLessEqual(loc["others_max"]["value_calls"], 3 + rt["planned"], where)

        # nothing but rank 0 gets more per rank as n grows (topology, environment: the same
        # record; sweep: decisions; pattern: its row, O(rounds))
        for name in ("topology", "environment", "bandwidth sweep"):
            a, b = per_n[2][name], per_n[4][name]
            self.assertLessEqual(b["value_received"], a["value_received"] + 64, name)
            self.assertLessEqual(b["value_sent"], 1.25 * a["value_sent"] + 256, name)
        sent_per_round = [per_n[n]["pattern"]["value_sent"] / per_n[n]["pattern_rounds"] for n in (2, 3, 4)]
        self.assertLessEqual(max(sent_per_round), 2.5 * min(sent_per_round), sent_per_round)

    def test_spent_budget_still_runs_the_host_plan(self):
        """A budget spent by the sweep: the pattern runs the host-level plan (none on one host:
        no round), says so and why, and the run ends 0 with the sweep's cut-short finding."""
        r = self.cs(["full_diag", "--max", "1K", "--budget", "0.001"], np=4, timeout=150)
        self.assertExit(r, cs_e2e.OK)
        rep = r.report()
        plan = rep["matrix"]["plan"]
        self.assertEqual(plan["kind"], "hosts", plan)
        self.assertIn("spent", plan["reason"], plan)
        self.assertEqual(plan["rounds_run"], 0, plan)  # one host: no host pair
        self.assertEqual(self.stage(rep, "pattern")["counts"].get("rounds", 0), 0)
        self.assertTrue(any("sweep cut short" in f["message"] for f in rep["findings"]), rep["findings"])
        sweep = [x for x in rep["results"] if x.get("kind") == "sweep"]
        self.assertEqual(sweep, [])

    def test_bad_budget(self):
        r = self.cs(["full_diag", "--budget", "-1"], np=2, timeout=60)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("option --budget: -1 is below the minimum 0", r.stderr + r.stdout)


if __name__ == "__main__":
    cs_e2e.main()
