"""scripts/compare_anchors.sh's arithmetic, on measurements written here (--tables DIR): the
ratios per round and their medians, the verdicts against issue 10's targets, and the
state-for-state table, which must not let a commscript that is slower in either of Open MPI's
two small-message states pass. No MPI, no build: the script only reads DIR/measurements.txt."""
import os
import re
import statistics
import subprocess
import tempfile
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(REPO, "scripts", "compare_anchors.sh")


def tables(rows):
    """rows: (round, tool, op, bytes, us); returns the script's stdout."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "measurements.txt"), "w") as f:
            for r in rows:
                f.write("%d %s %s %d %.6f\n" % r)
        p = subprocess.run(["bash", SCRIPT, "--tables", d], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=60)
        if p.returncode != 0:
            raise AssertionError("compare_anchors --tables failed: %s" % p.stderr)
        return p.stdout


def state_line(out, op):
    lines = [l for l in out.splitlines() if l.split()[:2] == [op, "1.03"]]
    assert len(lines) == 1, out
    return lines[0]


def eight_b(plain, plain1, cs, cs1, rounds=3):
    rows = []
    for r in range(1, rounds + 1):
        k = 1 + 0.01 * (r - 2)  # a drift that each round shares
        for tool, v in (("plain", plain), ("plain1", plain1), ("cs", cs), ("cs1", cs1)):
            rows.append((r, tool, "allreduce", 8, v * k))
    return rows


class StateForState(unittest.TestCase):

    def test_same_state_within_target_is_met(self):
        # plain 0.50 (fast), plain+1 0.60; commscript 0.61 (its run lands slow), cs+1 0.51 (fast).
        out = tables(eight_b(0.50, 0.60, 0.61, 0.51))
        line = state_line(out, "allreduce")
        self.assertIn("met (larger median of the closer pairing %.3f)" % max(0.61 / 0.60, 0.51 / 0.50), line)
        # The literal ratio is still printed and judged above it.
        lit = [l for l in out.splitlines() if l.split()[:3] == ["allreduce", "8", "B"] and "MISSED" in l]
        self.assertEqual(len(lit), 1, out)
        self.assertIn("%.3f" % (0.61 / 0.50), lit[0])

    def test_slower_in_one_state_is_missed(self):
        # commscript 10 % slower than the plain loop in each state: neither pairing passes.
        out = tables(eight_b(0.50, 0.60, 0.66, 0.55))
        line = state_line(out, "allreduce")
        worst = min(max(0.66 / 0.50, 0.55 / 0.60), max(0.66 / 0.60, 0.55 / 0.50))
        self.assertIn("MISSED (larger median of the closer pairing %.3f)" % worst, line)

    def test_ratios_are_medians_of_per_round_ratios(self):
        rows = []
        cs = [0.52, 0.70, 0.51]
        pl = [0.50, 0.50, 0.51]
        for r in range(3):
            rows += [(r + 1, "plain", "sendrecv", 8, pl[r]), (r + 1, "cs", "sendrecv", 8, cs[r])]
        out = tables(rows)
        ratios = [c / p for c, p in zip(cs, pl)]
        want = "%.3f/%.3f/%.3f" % (min(ratios), statistics.median(ratios), max(ratios))
        line = [l for l in out.splitlines() if re.match(r"\s+sendrecv\s+8 B\s+-", l)]
        self.assertTrue(line and want in line[0], out)


if __name__ == "__main__":
    unittest.main()
