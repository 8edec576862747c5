"""Metrics a scraper reads (docs/monitoring.md), end to end with a real Prometheus server:

- examples/prometheus/commscript.rules.yml passes `promtool check rules`, and its numbers are
  soak's defaults;
- Prometheus (on 127.0.0.1, a free port, its own storage, scraping every second, the rules
  loaded) scrapes a 2-rank soak run through --metrics-listen; the values read back through its
  HTTP API (/api/v1/query) are the numbers of report.json's results at the scrape's interval;
- a delay planted on rank 1 part-way through makes the latency rule fire (/api/v1/alerts), on the
  collective and size that soak's own latency finding names, and not before the delay began;
- the --metrics file at the end holds the final values (run finished, its exit code, every
  measurement), renamed into place (no .tmp left).
- --metrics-listen refuses garbage, the wildcard address and a port already taken (exit 1), and
  a --metrics file in no directory is exit 6, before anything runs.

Needs Debian's `prometheus` package (prometheus, promtool): without it the test exits 77
(ctest: skipped), or 1 when CS_REQUIRE_PROMETHEUS=1 (.ci/run). About 35 s on a loaded 2-core host."""
import calendar
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import unittest
import urllib.parse
import urllib.request

import cs_e2e

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
RULES = os.path.join(cs_e2e.REPO, "examples", "prometheus", "commscript.rules.yml")
SOAK = os.path.join(cs_e2e.REPO, "recipes", "soak.lua")
SKIP = 77

DURATION, INTERVAL = 16, 1
# One op+size (every measurement counts for the same latency streak); rank 1 waits 250 ms in each
# operation from its operation number AFTER on (1-3 s into the run); the latency threshold is
# fixed at 120 ms, so that only the delay is over it (a loaded 2-core host reached 120 ms p50s).
DELAY_MS, AFTER, THRESHOLD_US = 250, 300, 120000


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get_json(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode())


class Prom:
    """A Prometheus server of the test's own."""

    def __init__(self, tmp, target_port):
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        conf = os.path.join(tmp, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                    "rule_files:\n  - %s\n"
                    "scrape_configs:\n  - job_name: commscript\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % (json.dumps(RULES), target_port))
        self.log = open(os.path.join(tmp, "prometheus.log"), "w")
        self.p = subprocess.Popen([PROMETHEUS, "--config.file=" + conf, "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
                                   "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
                                  stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, limit=30):
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit:
            if self.p.poll() is not None:
                raise AssertionError("prometheus exited with %s" % self.p.returncode)
            try:
                with urllib.request.urlopen(self.base + "/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError("prometheus not ready after %d s" % limit)

    def query(self, q, at=None):
        args = {"query": q}
        if at is not None:
            args["time"] = repr(at)
        d = get_json(self.base + "/api/v1/query?" + urllib.parse.urlencode(args))
        assert d["status"] == "success", d
        return d["data"]["result"]

    def alerts(self):
        return get_json(self.base + "/api/v1/alerts")["data"]["alerts"]

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.log.close()


def soak_defaults():
    """soak's option defaults for the three rules, read from recipes/soak.lua."""
    with open(SOAK) as f:
        text = f.read()
    util = float(re.search(r"util_min = \{ ([\d.]+),", text).group(1))
    rate = float(re.search(r"error_rate_max = \{ ([\d.]+),", text).group(1))
    return util, rate


class Prometheus(cs_e2e.TestCase):

    def test_rules_pass_promtool_with_soaks_numbers(self):
        p = subprocess.run([PROMTOOL, "check", "rules", RULES], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.assertEqual(p.returncode, 0, p.stdout.decode())
        self.assertIn("SUCCESS: 3 rules found", p.stdout.decode())
        util, rate = soak_defaults()
        with open(RULES) as f:
            rules = f.read()
        self.assertIn("commscript_latency_over_threshold_consecutive >= 3", rules)  # cs.alerts' consecutive
        self.assertIn("commscript_bandwidth_utilisation_max_ratio < %g" % util, rules)
        self.assertIn("> %g" % rate, rules)

    def test_scraped_values_and_the_latency_alert(self):
        mport = free_port()
        prom = Prom(self.tmp, mport)
        self.addCleanup(prom.stop)
        prom.wait_ready()
        out, mfile = self.new_out(), os.path.join(self.tmp, "soak.prom")
        chaos = '[{kind="delay", ranks=[1], ms=%d, after=%d}]' % (DELAY_MS, AFTER)
        cmd = [cs_e2e.MPIRUN, "-np", "2", "--oversubscribe", cs_e2e.BIN, "--out", out, "--timeout", "30",
               "--metrics", mfile, "--metrics-listen", "127.0.0.1:%d" % mport, "--set", "chaos=" + chaos,
               "soak", "--duration", str(DURATION), "--interval", str(INTERVAL), "--ops", "allreduce",
               "--min", "4K", "--max", "4K", "--iters", "3", "--warmup", "0", "--latency-threshold-us", str(THRESHOLD_US)]
        run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.tmp,
                               env=cs_e2e._env(), start_new_session=True)
        firing = {}
        while run.poll() is None:
            for a in prom.alerts():
                if a["labels"]["alertname"] == "CommscriptLatencyOverThreshold" and a["state"] == "firing":
                    firing.setdefault((a["labels"]["collective"], a["labels"]["message_size"]), a)
            time.sleep(0.5)
        stdout, stderr = (x.decode("utf-8", "replace") for x in run.communicate())
        describe = "rc %s\n%s\n%s" % (run.returncode, stdout[-3000:], stderr[-3000:])
        self.assertEqual(run.returncode, 0, describe)
        with open(os.path.join(out, "report.json")) as f:
            rep = json.load(f)

        # ---- the latency alert: fired in Prometheus for what soak's own finding names, after the delay
        lat = [f for f in rep["findings"] if f.get("kind") == "latency"]
        self.assertTrue(lat, "soak fired no latency alert\n" + describe)
        named = {(f["subject"]["op"], str(f["subject"]["bytes"])) for f in lat}
        self.assertTrue(firing, "Prometheus' latency alert never fired; soak's findings: %s" % named)
        self.assertTrue(set(firing) <= named, "fired %s, soak named %s" % (sorted(firing), sorted(named)))
        delays = sorted(c["time"] for c in rep["chaos"] if c["kind"] == "delay")
        self.assertTrue(delays, "no delay was injected")
        for a in firing.values():
            active = a["activeAt"]  # RFC 3339, UTC
            t = calendar.timegm(time.strptime(active[:19], "%Y-%m-%dT%H:%M:%S"))
            self.assertGreaterEqual(t + 1, delays[0], "the alert was active before the delay began: %s" % a)

        # ---- the values of the last scrape, against report.json's results of those intervals
        rng = prom.query("commscript_soak_intervals_total[5m]")
        self.assertEqual(len(rng), 1, rng)
        ts, k = rng[0]["values"][-1]
        k = int(float(k))
        self.assertGreaterEqual(k, DURATION - 3, "the scrapes stopped early: %s" % rng[0]["values"])
        self.assertEqual(rng[0]["metric"]["recipe"], "soak")
        seen = [r for r in rep["results"] if r["interval"] < k]
        total = prom.query("commscript_measurements_total", at=ts)
        self.assertEqual(float(total[0]["value"][1]), len(seen))
        last = {}
        for r in seen:
            last[(r["op"], str(r["bytes"]))] = r
        checks = [("commscript_bus_bandwidth_bytes_per_second", "busbw", 1e9),
                  ("commscript_collective_exec_time_seconds", "time_us", 1e-6),
                  ('commscript_collective_iteration_seconds{quantile="0.99"}', "p99_us", 1e-6),
                  ('commscript_collective_iteration_seconds{quantile="0.5"}', "p50_us", 1e-6),
                  ("commscript_wrong_elements", "wrong", 1)]
        for q, field, scale in checks:
            got = prom.query(q, at=ts)
            self.assertEqual({(s["metric"]["collective"], s["metric"]["message_size"]) for s in got}, set(last), q)
            for s in got:
                m = s["metric"]
                r = last[(m["collective"], m["message_size"])]
                self.assertEqual(m["nranks"], "2")
                self.assertTrue(math.isclose(float(s["value"][1]), r[field] * scale, rel_tol=1e-12),
                                "%s %s: Prometheus %s, report %s x %g" % (q, m, s["value"][1], r[field], scale))
        alerts_total = prom.query('commscript_alerts_total{alert="latency"}[5m]')
        self.assertGreaterEqual(float(alerts_total[0]["values"][-1][1]), 1)

        # ---- the file: the final values, whole
        with open(mfile) as f:
            text = f.read()
        self.assertFalse(os.path.exists(mfile + ".tmp"))
        self.assertIn('commscript_run_finished{recipe="soak"} 1\n', text)
        self.assertIn('commscript_run_exit_code{recipe="soak"} 0\n', text)
        self.assertIn('commscript_measurements_total{recipe="soak"} %d\n' % rep["soak"]["measurements"], text)
        self.assertIn('commscript_alerts_total{alert="latency",recipe="soak"} %d\n'
                      % rep["soak"]["alerts_by_kind"]["latency"], text)
        self.assertIn('commscript_soak_intervals_total{recipe="soak"} %d\n' % DURATION, text)
        # ---- the endpoint ended with the run
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", mport), timeout=1).close()

    def test_listen_refusals(self):
        for addr, why in [("garbage", "not ADDRESS:PORT"), ("0.0.0.0:%d" % free_port(), "not every interface"),
                          ("127.0.0.1:99999", "not 1..65535"), ("example.org:80", "not an IPv4 address")]:
            r = self.cs(["--metrics-listen", addr, "soak", "--duration", "1"], np=2, timeout=60)
            self.assertExit(r, cs_e2e.BAD_INPUT)
            self.assertIn(why, r.stderr)
            self.assertFalse(os.path.exists(os.path.join(r.out_dir, "report.json")), "it ran")
        for args, why in [(["--metrics-listen", ""], "'' is not ADDRESS:PORT"),
                          (["--metrics", self.tmp], "is not a file name"), (["--metrics", ""], "is not a file name")]:
            r = self.cs(args + ["soak", "--duration", "1"], timeout=60)
            self.assertExit(r, cs_e2e.BAD_INPUT)
            self.assertIn(why, r.stderr)
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        self.addCleanup(taken.close)
        r = self.cs(["--metrics-listen", "127.0.0.1:%d" % taken.getsockname()[1], "soak", "--duration", "1"],
                    np=2, timeout=60)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("cannot listen there", r.stderr)
        # a --metrics file that cannot be written: exit 6, as every unwritable output, before it runs
        r = self.cs(["--metrics", os.path.join(self.tmp, "no", "such", "dir", "x.prom"), "soak", "--duration", "1"],
                    np=2, timeout=60)
        self.assertExit(r, 6)
        self.assertIn("cannot write it", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(r.out_dir, "report.json")), "it ran")


if __name__ == "__main__":
    if not (PROMETHEUS and PROMTOOL):
        # CI (.ci/run) installs it and sets CS_REQUIRE_PROMETHEUS=1: a skip there is a failure
        required = os.environ.get("CS_REQUIRE_PROMETHEUS") == "1"
        print("prometheus/promtool not installed (apt-get install prometheus): %s"
              % ("FAILED (CS_REQUIRE_PROMETHEUS=1)" if required else "skipped"))
        sys.exit(1 if required else SKIP)
    cs_e2e.main()
