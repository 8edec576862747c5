"""soak end to end under mpirun -np 4: a healthy run (exit 0, no warn/error finding, results with
increasing t, a summary line per interval), a run with a delayed rank (a latency alert finding),
a run with a corrupting rank (exit 4 and an error finding) and one with a hung rank (exit 5:
timeouts end the job).

The latency thresholds are derived from the run's own first interval (3 x its p50), so a job
elsewhere on a small shared host that makes everything several times slower mid-run is, to the
recipe, a real latency degradation. The healthy case therefore tries up to HEALTHY_TRIES runs and
needs one without warnings; every try must still exit 0 with no error finding."""
import re
import sys
import unittest

import cs_e2e

NP = 4
HEALTHY_TRIES = 3
SUMMARY = re.compile(r"^\[soak\] interval (\d+) \(t=([\d.]+)s\): (\d+) measurements \((\d+) calls\) \| (.*) \| "
                     r"wrong (\d+) \| alerts (\d+)$", re.M)


def findings(rep, *severities):
    return [f for f in rep["findings"] if f["severity"] in severities]


class Soak(cs_e2e.TestCase):

    def soak(self, args, chaos=None, timeout=40):
        pre = ["--timeout", "20"]
        if chaos:
            pre += ["--set", "chaos=" + chaos]
        return self.cs(pre + ["soak"] + args, np=NP, timeout=timeout)

    def check_results(self, r, duration, interval):
        rep = r.report()
        self.assertEqual(rep["recipe"]["name"], "soak")
        self.assertEqual(rep["recipe"]["version"], cs_e2e.declared_version("soak"))
        res = rep["results"]
        self.assertGreater(len(res), 10, r.describe())
        self.assertEqual(res, r.results_lines())
        ts = [x["t"] for x in res]
        self.assertTrue(all(b > a for a, b in zip(ts, ts[1:])), "t does not increase: %s" % ts[:50])
        self.assertGreaterEqual(ts[0], 0)
        self.assertLess(ts[-1], duration)
        for x in res:
            self.assertEqual(x["kind"], "soak")
            self.assertEqual(x["ranks"], NP)
            self.assertEqual(x["interval"], int(x["t"] // interval), x)
            for k in ("op", "bytes", "p50_us", "p99_us", "busbw", "wrong", "iters"):
                self.assertIn(k, x)
        s = rep["soak"]
        self.assertEqual(s["measurements"], len(res))
        return rep

    def check_summaries(self, r, n_intervals, measurements):
        lines = SUMMARY.findall(r.stdout)
        self.assertEqual([int(m[0]) for m in lines], list(range(n_intervals)), r.describe())
        self.assertEqual(sum(int(m[2]) for m in lines), measurements)
        for m in lines:
            for op in ("allreduce", "allgather", "broadcast", "alltoall"):
                if int(m[2]) >= 8:
                    self.assertRegex(m[4], r"%s p50 [\d.]+(?:us|ms|s) p99 [\d.]+(?:us|ms|s) busbw [\d.]+ GB/s@" % op)
        return lines

    # ---------------------------------------------------------------- healthy
    def test_healthy(self):
        tries = []
        for _ in range(HEALTHY_TRIES):
            r = self.soak(["--duration", "4", "--interval", "2"])
            self.assertExit(r, cs_e2e.OK, max_s=30)
            rep = self.check_results(r, 4, 2)
            self.check_summaries(r, 2, len(rep["results"]))
            self.assertEqual(findings(rep, "error"), [], r.describe())
            self.assertEqual(rep["soak"]["wrong"], 0)
            self.assertEqual(rep["soak"]["error_rate"], 0)
            self.assertIn("# soak done:", r.stdout)
            warns = findings(rep, "warn")
            tries.append([f["message"] for f in warns])
            if not warns:
                break
            sys.stderr.write("healthy soak try %d had warnings (retrying): %s\n" % (len(tries), tries[-1]))
        self.assertEqual(tries[-1], [], "a warning in every one of %d healthy runs: %s" % (len(tries), tries))

    # ---------------------------------------------------------------- a slow rank
    def test_delay_fires_a_latency_alert(self):
        # Rank 2 sleeps 30 ms before each of its operations once ~50 measurements (8 operations
        # each: warmup, barrier, 5 timed, check) have run with it on time: the first interval's
        # thresholds come from those, then every measurement of both op+sizes takes ~30 ms.
        r = self.soak(["--duration", "5", "--interval", "1", "--ops", "allreduce,allgather",
                       "--min", "1K", "--max", "1K"],
                      chaos='[{kind="delay", ranks=[2], ms=30, after=400}]')
        self.assertExit(r, cs_e2e.OK, max_s=30)   # warnings do not change the exit code
        rep = self.check_results(r, 5, 1)
        lat = [f for f in findings(rep, "warn") if "latency over" in f["message"]]
        self.assertTrue(lat, "no latency alert\n" + r.describe())
        f = lat[0]
        self.assertIn(f["subject"]["op"], ("allreduce", "allgather"))
        self.assertEqual(f["subject"]["bytes"], 1024)
        ev = f["evidence"]
        self.assertEqual(len(ev["values_us"]), 3)
        self.assertTrue(all(v > ev["threshold_us"] for v in ev["values_us"]), ev)
        self.assertTrue(all(v > 25000 for v in ev["values_us"]), ev)   # the 30 ms delay
        self.assertLess(ev["threshold_us"], 25000, ev)                  # derived before it began
        self.assertTrue(f["remedy"])
        self.assertIn("# ALERT [warn] ", r.stdout)
        self.assertEqual(findings(rep, "error"), [])
        self.assertGreaterEqual(rep["soak"]["alerts_by_kind"]["latency"], 1)
        self.assertTrue(any(c["kind"] == "delay" and c["rank"] == 2 for c in rep["chaos"]), "no delay fired")
        lines = SUMMARY.findall(r.stdout)
        self.assertGreaterEqual(int(lines[-1][6]), 1, "the summaries do not count the alert")

    # ---------------------------------------------------------------- a corrupting rank
    def test_corrupt_exits_4_with_an_error_finding(self):
        r = self.soak(["--duration", "2", "--interval", "1", "--max", "64K"],
                      chaos='[{kind="corrupt", ranks=[1], after=400}]')
        self.assertExit(r, cs_e2e.CORRUPTION, max_s=30)
        rep = self.check_results(r, 2, 1)
        self.assertEqual(rep["run"]["exit_code"], cs_e2e.CORRUPTION)
        errs = findings(rep, "error")
        self.assertEqual(len(errs), 1, rep["findings"])
        e = errs[0]
        self.assertEqual(e["subject"], {"ranks": [1]})
        self.assertGreater(e["evidence"]["error_rate"], 0.05)
        self.assertEqual(e["evidence"]["errors"], sum(1 for x in rep["results"] if x["wrong"] > 0))
        self.assertEqual(e["evidence"]["measurements"], len(rep["results"]))
        self.assertTrue(all(x["wrong_ranks"] == [1] for x in rep["results"] if x["wrong"] > 0))
        self.assertIn("# ALERT [error] ", r.stdout)
        lines = SUMMARY.findall(r.stdout)
        self.assertEqual(sum(int(m[5]) for m in lines), rep["soak"]["wrong"])
        self.assertGreater(rep["soak"]["wrong"], 0)

    # ---------------------------------------------------------------- a hung rank
    def test_hang_ends_the_job_with_exit_5(self):
        # Timeouts are not survivable (no error rate to count): the deadline ends every rank.
        r = self.cs(["--timeout", "3", "--set", 'chaos=[{kind="hang", ranks=[1], after=100}]',
                     "soak", "--duration", "20", "--interval", "1"], np=NP, timeout=40)
        self.assertExit(r, cs_e2e.TIMEOUT, max_s=25)
        self.assertIn("missing ranks: 1", r.stderr + r.stdout)
        rep = r.report()
        self.assertEqual(rep["run"]["exit_code"], cs_e2e.TIMEOUT)
        self.assertTrue(any(i.get("kind") == "timeout" for i in rep["incidents"]), rep["incidents"])
        # what was measured before the hang is kept
        lines = r.results_lines()
        self.assertGreater(len(lines), 0)
        self.assertTrue(all(x["kind"] == "soak" and x["wrong"] == 0 for x in lines))


if __name__ == "__main__":
    cs_e2e.main()
