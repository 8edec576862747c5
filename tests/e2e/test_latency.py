"""latency end to end under mpirun -np 2 and 3: osu_latency / osu_bw's definitions (the counts
per size around --large, sizes from 0 B, the loop figure next to the sampled pass), every
record's fields, and the table rank 0 prints."""
import re
import unittest

import cs_e2e

# Small counts so the test is quick; the switch at --large is what is checked.
ARGS = ["latency", "--min", "0", "--max", "16K", "--large", "4K", "--iters", "300", "--iters-large", "40",
        "--warmup", "7", "--warmup-large", "3", "--samples", "50", "--window", "4", "--bw-iters", "6",
        "--bw-iters-large", "5", "--bw-warmup", "2", "--bw-warmup-large", "1"]
SIZES = [0] + [2 ** k for k in range(0, 15)]  # 0, 1, 2, ... 16K


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class Latency(cs_e2e.TestCase):

    def check_records(self, results, pairs):
        self.assertEqual([(tuple(x["pair"]), x["bytes"]) for x in results],
                         [(p, s) for p in pairs for s in SIZES])
        for x in results:
            where = repr(x)
            large = x["bytes"] > 4096
            self.assertEqual(x["kind"], "p2p", where)
            self.assertEqual(x["timing"], "loop", where)
            self.assertEqual(x["iters"], 40 if large else 300, where)
            self.assertEqual(x["warmup"], 3 if large else 7, where)
            self.assertEqual(x["samples"], 40 if large else 50, where)  # at most the iterations
            for k in ("latency_us", "iter_mean_us", "min_us", "p50_us", "p99_us", "max_us", "cv",
                      "peer_latency_us"):
                self.assertTrue(is_number(x[k]), "%s in %s" % (k, where))
            self.assertGreater(x["latency_us"], 0, where)
            self.assertGreater(x["peer_latency_us"], 0, where)
            self.assertLessEqual(x["min_us"], x["p50_us"], where)
            self.assertLessEqual(x["p50_us"], x["p99_us"], where)
            self.assertLessEqual(x["p99_us"], x["max_us"], where)
            self.assertLessEqual(x["min_us"], x["iter_mean_us"], where)
            self.assertLessEqual(x["iter_mean_us"], x["max_us"], where)
            if x["bytes"] == 0:
                self.assertNotIn("bw_GBps", x, "no bandwidth at 0 B: " + where)
            else:
                self.assertGreater(x["bw_GBps"], 0, where)
                self.assertAlmostEqual(x["bw_MBps"], x["bw_GBps"] * 1000, delta=1e-9 * x["bw_MBps"])
                self.assertEqual(x["window"], 4, where)
                self.assertEqual(x["bw_iters"], 5 if large else 6, where)
                self.assertEqual(x["bw_warmup"], 1 if large else 2, where)

    def check_table(self, stdout, results):
        rows = [l.split() for l in stdout.splitlines() if re.match(r"^\d+\s", l)]
        self.assertEqual(len(rows), len(results), stdout[-3000:])
        for row, x in zip(rows, results):
            self.assertEqual(int(row[0]), x["bytes"], row)
            self.assertLessEqual(abs(float(row[1]) - x["latency_us"]), 0.0051, row)  # the loop figure
            self.assertLessEqual(abs(float(row[2]) - x["p50_us"]), 0.0051, row)
            if x["bytes"] == 0:
                self.assertEqual(row[5], "-", row)
            else:
                self.assertLessEqual(abs(float(row[5]) - x["bw_MBps"]), 0.0051, row)

    def test_np2(self):
        r = self.cs(ARGS, np=2, timeout=120)
        self.assertExit(r, cs_e2e.OK)
        rep = r.report()
        self.assertEqual(rep["recipe"]["version"], cs_e2e.declared_version("latency"))
        self.check_records(rep["results"], [(0, 1)])
        self.assertEqual(rep["results"], r.results_lines())
        self.check_table(r.stdout, rep["results"])

    def test_np3_all_pairs(self):
        r = self.cs(ARGS + ["--pairs", "all", "--no-bw"], np=3, timeout=120)
        self.assertExit(r, cs_e2e.OK)
        res = r.report()["results"]
        self.assertEqual([(tuple(x["pair"]), x["bytes"]) for x in res],
                         [(p, s) for p in [(0, 1), (0, 2), (1, 2)] for s in SIZES])
        for x in res:
            self.assertNotIn("bw_GBps", x)
            self.assertGreater(x["latency_us"], 0)

    def test_idle_ranks_outlast_a_short_timeout(self):
        """Rank 2 waits while the pair 0-1 measures every size; that wait (here several times
        --timeout 1) is not a hang: the idle ranks' deadline covers the pair's whole run."""
        r = self.cs(["--timeout", "1", "latency", "--min", "1", "--max", "64K", "--iters", "30000",
                     "--iters-large", "3000", "--no-bw"], np=3, timeout=150)
        self.assertExit(r, cs_e2e.OK)
        res = r.report()["results"]
        self.assertEqual(sorted({tuple(x["pair"]) for x in res}), [(0, 1), (0, 2)])
        # the pair's run really outlasted the 1 s deadline, else this test proves nothing
        self.assertGreater(r.report()["run"]["duration_s"], 2.0)

    def test_osu_defaults(self):
        """--help shows OSU's counts as the defaults."""
        r = self.cs(["latency", "--help"], out=False)
        self.assertExit(r, cs_e2e.OK)
        text = r.stdout + r.stderr
        for flag, default in (("--iters", "10000"), ("--iters-large", "1000"), ("--warmup", "100"),
                              ("--warmup-large", "10"), ("--window", "64"), ("--bw-iters", "100"),
                              ("--bw-iters-large", "20"), ("--bw-warmup", "10"), ("--bw-warmup-large", "2"),
                              ("--max", "4M"), ("--min", "0"), ("--large", "8K")):
            m = re.search(r"(?m)^\s*" + re.escape(flag) + r" .*\(default: ([^)]*)\)$", text)
            self.assertTrue(m, "no %s in --help:\n%s" % (flag, text))
            self.assertEqual(m.group(1), default, flag)


if __name__ == "__main__":
    cs_e2e.main()
