"""The elastic recipes end to end: protocol_compare (every backend of the run over the same ranks,
one table, winner and crossovers recomputed here from the results' times and bytes), and
elastic_drill beyond one drop (a second drop asked for in the config, thresholds from the config
producing findings, the timeline in report.html)."""
import json
import os
import re
import unittest

import cs_e2e
import launch_env
import test_gloo

GLOO = test_gloo.GLOO


def busbw_factor(op, n):
    return {"allreduce": 2.0 * (n - 1) / n, "allgather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
            "alltoall": (n - 1) / n}.get(op, 1.0)


@unittest.skipUnless(GLOO, "built without Gloo")
class ProtocolCompare(cs_e2e.TestCase):

    def compare(self, np, ops="allreduce"):
        r = self.cs(["protocol_compare", "--ops", ops, "--min", "1K", "--max", "256K", "--factor", "16",
                     "--iters", "5", "--warmup", "1"], np=np, timeout=120)
        self.assertExit(r, cs_e2e.OK)
        rep = r.report()
        p = rep["protocol_compare"]
        self.assertEqual(p["ranks"], np)
        self.assertEqual(p["backends"][:2], ["mpi", "gloo"], p)
        backends = p["backends"]
        # Every result: one backend's bench, its busbw recomputed from time and bytes.
        by = {}
        for x in rep["results"]:
            self.assertIn(x["backend"], backends)
            self.assertEqual(x["ranks"], np)
            self.assertEqual(x["wrong"], 0, x)
            algbw = x["bytes"] / (x["time_us"] * 1e3)
            self.assertAlmostEqual(x["algbw"], algbw, delta=1e-6 + 1e-6 * algbw)
            self.assertAlmostEqual(x["busbw"], algbw * busbw_factor(x["op"], np), delta=1e-6 + 1e-6 * algbw)
            by[(x["op"], x["bytes"], x["backend"])] = x
        wanted_ops = ops.split(",")
        self.assertEqual([t["op"] for t in p["tables"]], wanted_ops)
        for t in p["tables"]:
            self.assertEqual([row["bytes"] for row in t["rows"]], [1024, 16384, 262144])
            prev, crossings = None, []
            for row in t["rows"]:
                times = {}
                for b in backends:
                    res = by[(t["op"], row["bytes"], b)]
                    cell = row["by"][b]
                    self.assertEqual(cell["time_us"], res["time_us"])
                    self.assertEqual(cell["busbw"], res["busbw"])
                    times[b] = res["time_us"]
                winner = min(backends, key=lambda b: times[b])
                self.assertEqual(row["winner"], winner, row)
                if prev and prev[1] != winner:
                    crossings.append({"from": prev[1], "to": winner, "below": prev[0], "at": row["bytes"]})
                prev = (row["bytes"], winner)
            self.assertEqual(t["crossovers"], crossings)
        # One info finding per collective naming the winner at the largest size.
        infos = [f for f in rep["findings"] if f["severity"] == "info"]
        self.assertEqual(len(infos), len(wanted_ops), rep["findings"])
        # The table in the log: one line per size, the winner last.
        lines = [ln for ln in r.stdout.splitlines() if re.match(r"^\s+\d+[KM]?\s", ln)]
        self.assertEqual(len(lines), 3 * len(wanted_ops), r.stdout)
        # report.html shows the table: every backend's column and every winner.
        with open(r.path("report.html")) as f:
            html = f.read()
        self.assertIn('id="protocols"', html)
        for b in backends:
            self.assertIn("%s time us" % b, html)
        return rep

    def test_2_ranks(self):
        self.compare(2, ops="allreduce,allgather")

    def test_4_ranks(self):
        self.compare(4)

    def test_unknown_backend_refused(self):
        r = self.cs(["protocol_compare", "--backends", "mpi,fast"], np=2)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("fast", r.stderr)

    def test_open_from_a_recipe(self):
        # cs.comm.open gives a communicator of the other backend with the same rank numbering.
        body = ("local g = cs.comm.open('gloo')\n"
                "assert(g:backend() == 'gloo' and g:rank() == ctx.rank and g:size() == ctx.size)\n"
                "assert(cs.comm.open('mpi') and cs.comm.open(ctx.backend):backend() == ctx.backend)\n"
                "local ok, e = pcall(cs.comm.open, 'carrier-pigeon')\n"
                "assert(not ok and tostring(e):find('not a backend'), tostring(e))\n"
                "ctx.log('avail %s', table.concat(cs.comm.available(), ','))")
        r = self.cs([self.recipe("open_gloo", body)], np=2)
        self.assertExit(r, cs_e2e.OK)
        self.assertIn("avail mpi,gloo", r.stdout)

    def test_without_mpi_only_gloo(self):
        out = os.path.join(self.tmp, "out")
        res, _ = launch_env.launch([cs_e2e.BIN, "--out", out, "--backend", "gloo", "--launcher", "env",
                                    "protocol_compare", "--backends", "mpi"], 2, timeout=60, cwd=self.tmp,
                                   env=cs_e2e._env())
        self.assertEqual([rc for rc, _, _ in res], [1, 1], res)
        self.assertIn("not available in this run", res[0][2] + res[1][2])


@unittest.skipUnless(GLOO, "built without Gloo")
class DrillMore(cs_e2e.TestCase):

    def launch(self, n, args, timeout=120):
        out = os.path.join(self.tmp, "out")
        res, wall = launch_env.launch([cs_e2e.BIN, "--out", out] + args, n, timeout=timeout, cwd=self.tmp,
                                      env=cs_e2e._env())
        # A missing or partial report fails with every rank's output, not a bare exception.
        try:
            with open(os.path.join(out, "report.json")) as f:
                rep = json.load(f)
            with open(os.path.join(out, "report.html")) as f:
                html = f.read()
        except (OSError, ValueError) as e:
            self.fail("no readable report (%s)\n%s" % (e, self.describe(res)))
        if "drill" not in rep:
            self.fail("report.json has no drill section\n%s" % self.describe(res))
        return res, rep, html

    def describe(self, res):
        return "\n".join("--- rank %d rc %s\n%s\n%s" % (r, rc, o[-2000:], e[-2000:]) for r, (rc, o, e) in enumerate(res))

    def test_two_drops_from_config(self):
        deadline = 3.0
        cfg = self.write("drill.toml", "[options]\ndrops = 2\ndeadline = %g\n" % deadline)
        res, rep, html = self.launch(4, ["--backend", "gloo", "--launcher", "env", "--config", cfg, "elastic_drill"])
        rcs = [rc for rc, _, _ in res]
        self.assertEqual(rcs, [0, 0, -9, -9], self.describe(res))
        d = rep["drill"]
        self.assertEqual(len(d["drops"]), 2)
        first, second = d["drops"]
        self.assertEqual((first["victim"], first["gone"], first["survivors"]), (3, [3], 3))
        self.assertEqual((second["victim"], second["gone"], second["survivors"]), (2, [2], 2))
        for x in d["drops"]:
            self.assertLessEqual(x["detect_s"], deadline + 1, x)
            self.assertLessEqual(x["working_s"], 2.0, x)
            self.assertEqual(x["wrong_after"], 0, x)
            self.assertGreater(x["busbw_after"], 0)
            self.assertEqual([e["event"] for e in x["timeline"]], ["drop", "detected", "revoked", "working"])
            t = [e["t"] for e in x["timeline"]]
            self.assertEqual(t, sorted(t), x)
        # The second drop's "before" is the first drop's "after".
        self.assertEqual(second["busbw_before"], first["busbw_after"])
        self.assertEqual(d["survivors"], 2)
        self.assertEqual(rep["run"]["exit_code"], 0)
        self.assertEqual([f for f in rep["findings"] if f["severity"] == "error"], [])
        phases = sorted(x.get("phase") for x in rep["results"])
        self.assertEqual(phases, ["after", "after2", "before"])
        self.assertEqual([x["ranks"] for x in rep["results"] if x.get("phase") == "after2"], [2])
        # report.html: the drill section, one timeline per drop.
        self.assertIn('id="drill"', html)
        self.assertEqual(html.count('aria-label="drill timeline"'), 2)
        self.assertIn("drop 2: rank 2", html)

    def test_thresholds_from_config_make_findings(self):
        # Thresholds no drop can meet: both findings, exit 3 (an error finding), the numbers named.
        cfg = self.write("strict.toml", "[options]\nmax_detect_s = 0\nmax_recover_s = 0\ndeadline = 3\n")
        res, rep, html = self.launch(3, ["--backend", "gloo", "--launcher", "env", "--config", cfg, "elastic_drill"])
        rcs = [rc for rc, _, _ in res]
        self.assertEqual(rcs, [cs_e2e.HEALTH, cs_e2e.HEALTH, -9], self.describe(res))
        d = rep["drill"]
        msgs = [f["message"] for f in rep["findings"] if f["severity"] == "error"]
        self.assertEqual(len(msgs), 2, msgs)
        self.assertIn("detecting the drop of rank 2 took %.2f s (threshold 0.00 s)" % d["detect_s"], msgs[0])
        self.assertIn("took %.2f s after detection (threshold 0.00 s)" % d["working_s"], msgs[1])
        self.assertEqual(rep["run"]["exit_code"], cs_e2e.HEALTH)
        self.assertIn('class="hot"', html)

    def test_drops_2_needs_3_ranks(self):
        out = os.path.join(self.tmp, "out")
        res, _ = launch_env.launch([cs_e2e.BIN, "--out", out, "--backend", "gloo", "--launcher", "env",
                                    "elastic_drill", "--drops", "2"], 2, timeout=60, cwd=self.tmp, env=cs_e2e._env())
        self.assertEqual([rc for rc, _, _ in res], [1, 1], self.describe(res))
        self.assertIn("--drops 2 needs at least 3 ranks", res[0][2] + res[1][2])


if __name__ == "__main__":
    cs_e2e.main()
