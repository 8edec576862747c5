"""scripts/compare_anchors.sh's arithmetic, on measurements written here (--tables DIR): the
ratios per round and their medians, the verdict against issue 34's target (1.03 at every size),
and the state-for-state judgement, which must not let a commscript that is slower in either of
Open MPI's two small-message states pass. No MPI, no build: the script only reads DIR/measurements.txt."""
import os
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


def row(out, op, size):
    """The cells of OP's table row for SIZE ("8 B"), by column name."""
    lines = out.splitlines()
    head = [i for i, l in enumerate(lines) if l.startswith(op + ":")]
    assert len(head) == 1, out
    cols = [c.strip() for c in lines[head[0] + 1].strip("|").split("|")]
    for l in lines[head[0] + 3:]:
        if not l.startswith("|"):
            break
        cells = [c.strip() for c in l.strip("|").split("|")]
        if cells[0] == size:
            return dict(zip(cols, cells))
    raise AssertionError("no %s row for %s in\n%s" % (op, size, out))


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
        r = row(tables(eight_b(0.50, 0.60, 0.61, 0.51)), "allreduce", "8 B")
        self.assertEqual(r["judged"], "%.3f (cs~plain+1)" % max(0.61 / 0.60, 0.51 / 0.50))
        self.assertEqual(r["<= 1.03"], "yes")
        # The literal ratio is still printed next to it.
        self.assertTrue(r["cs / plain"].startswith("%.3f " % (0.61 / 0.50)), r)

    def test_slower_in_one_state_is_missed(self):
        # commscript 10 % slower than the plain loop in each state: neither pairing passes.
        r = row(tables(eight_b(0.50, 0.60, 0.66, 0.55)), "allreduce", "8 B")
        worst = min(max(0.66 / 0.50, 0.55 / 0.60), max(0.66 / 0.60, 0.55 / 0.50))
        self.assertTrue(r["judged"].startswith("%.3f " % worst), r)
        self.assertEqual(r["<= 1.03"], "NO")

    def test_ratios_are_medians_of_per_round_ratios(self):
        rows = []
        cs = [0.52, 0.70, 0.51]
        pl = [0.50, 0.50, 0.51]
        for r in range(3):
            rows += [(r + 1, "plain", "sendrecv", 4194304, pl[r]), (r + 1, "cs", "sendrecv", 4194304, cs[r]),
                     (r + 1, "csb", "sendrecv", 4194304, 2 * pl[r])]
        r = row(tables(rows), "sendrecv", "4 MiB")
        ratios = [c / p for c, p in zip(cs, pl)]
        self.assertEqual(r["cs / plain"], "%.3f (%.3f-%.3f)" % (statistics.median(ratios), min(ratios), max(ratios)))
        self.assertEqual(r["judged"], "%.3f cs/plain" % statistics.median(ratios))
        self.assertEqual(r["<= 1.03"], "NO")
        self.assertEqual(r["before / plain"], "2.000 (2.000-2.000)")
        self.assertEqual(r["plain us"], "0.50")


if __name__ == "__main__":
    unittest.main()
