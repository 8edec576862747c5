"""examples/grafana/commscript.json: the dashboard parses as JSON, has panels with queries, and
every metric name its queries use is one commscript exports: the names are read from the
--metrics files of real runs (a soak, and a recipe with a scorecard), not from a list kept by
hand. About 6 s."""
import json
import os
import re

import cs_e2e

DASHBOARD = os.path.join(cs_e2e.REPO, "examples", "grafana", "commscript.json")
NAME = re.compile(r"\bcommscript_[a-zA-Z0-9_:]*")


def exported(path):
    names = set()
    with open(path) as f:
        for line in f:
            m = re.match(r"# TYPE (\S+) ", line)
            if m:
                names.add(m.group(1))
    return names


def exprs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "expr" and isinstance(v, str):
                yield v
            else:
                yield from exprs(v)
    elif isinstance(node, list):
        for v in node:
            yield from exprs(v)


class Dashboard(cs_e2e.TestCase):

    def exported_names(self):
        soak = os.path.join(self.tmp, "soak.prom")
        r = self.cs(["--backend", "self", "--metrics", soak, "soak", "--duration", "1.5", "--interval", "0.5",
                     "--min", "256K", "--max", "256K", "--latency-max-bytes", "256K"])
        self.assertExit(r, cs_e2e.OK)
        scored = os.path.join(self.tmp, "scored.prom")
        rec = self.recipe("scored", '  ctx.comm:bench { op = "allreduce", bytes = 1024 }\n'
                          '  ctx.report:set("scorecard", { total = 90, parts = { { name = "bandwidth", score = 90, weight = 1 } } })\n'
                          '  ctx.report:finding { severity = "info", subject = "job", message = "m" }')
        r = self.cs(["--backend", "self", "--metrics", scored, rec])
        self.assertExit(r, cs_e2e.OK)
        return exported(soak) | exported(scored)

    def test_parses_and_uses_only_exported_names(self):
        with open(DASHBOARD) as f:
            dash = json.load(f)
        self.assertTrue(dash["panels"])
        queries = list(exprs(dash))
        self.assertGreaterEqual(len(queries), len(dash["panels"]))
        names = self.exported_names()
        for need in ("commscript_bus_bandwidth_bytes_per_second", "commscript_latency_over_threshold_consecutive",
                     "commscript_score", "commscript_alerts_total"):
            self.assertIn(need, names)   # the runs export what the test is about
        used = {n for q in queries for n in NAME.findall(q)}
        self.assertTrue(used)
        self.assertEqual(used - names, set(), "the dashboard uses names commscript does not export")
        # and the panels between them show every family a soak exports
        self.assertEqual({n for n in names if n not in used} - {"commscript_run_info", "commscript_score_part_weight",
                                                                "commscript_algorithm_bandwidth_bytes_per_second"},
                         set(), "exported but on no panel")


if __name__ == "__main__":
    cs_e2e.main()
