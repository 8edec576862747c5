#!/usr/bin/env python3
"""compare_nccl_tests.py on the tables of a real run (tests/fixtures/gpu/h200-1gpu: nccl-tests
2.19.6 and bw_sweep on one H200, NCCL 2.28.9, one rank, 8 B to 256 MiB, 20 iterations): which
sizes it judges, the ratio it computes, and its verdict."""
import io
import json
import os
import shutil
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_nccl_tests as cmp  # noqa: E402

FIX = os.path.join(HERE, "..", "fixtures", "gpu", "h200-1gpu")
OPS = "allreduce,allgather,reduce_scatter,broadcast,reduce,alltoall,sendrecv"


class FixtureCopy:
    """A temporary copy of the fixture, to edit: `with FixtureCopy() as (work, results): ...`."""

    def __enter__(self):
        self.work = tempfile.mkdtemp()
        for f in os.listdir(FIX):
            shutil.copy(os.path.join(FIX, f), self.work)
        return self.work, os.path.join(self.work, "bw_sweep.results.jsonl")

    def __exit__(self, *exc):
        shutil.rmtree(self.work)


def run(work, jsonl):
    out = io.StringIO()
    with redirect_stdout(out):
        rc = cmp.main(["x", work, jsonl, "0.10", "1048576", OPS, "float32"])
    rows = {}
    for line in out.getvalue().splitlines():
        f = line.split()
        if len(f) >= 8 and f[2].isdigit():
            rows[(f[0], int(f[2]))] = line
    return rc, rows


class CompareNcclTests(unittest.TestCase):
    def test_the_h200_run_fails_on_alltoall_only(self):
        # That run's alltoall went through ncclSend/ncclRecv; nccl-tests called ncclAlltoAll,
        # which NCCL 2.28 turns into one copy on one rank: 128.9 us against 154.4 at 256 MiB.
        rc, rows = run(FIX, os.path.join(FIX, "bw_sweep.results.jsonl"))
        self.assertEqual(rc, 1)
        flagged = sorted(k for k, v in rows.items() if "beyond" in v)
        self.assertEqual(flagged, [("alltoall", 1 << s) for s in (26, 27, 28)])
        # one rank: busbw is 0 on both sides, so the ratio is nccl-tests' time over ours
        self.assertIn("%.3f" % (128.9 / 154.4), rows[("alltoall", 1 << 28)])

    def test_launch_bound_sizes_are_shown_not_judged(self):
        # broadcast at 16 MiB: 10.9 us against 6.8 (1.6x) is per-call overhead, under 4x the
        # op's floor (~5 us); at 128 MiB (66 us) the size is judged
        _, rows = run(FIX, os.path.join(FIX, "bw_sweep.results.jsonl"))
        self.assertIn("not judged", rows[("broadcast", 1 << 24)])
        self.assertNotIn("not judged", rows[("broadcast", 1 << 27)])
        self.assertNotIn("beyond", rows[("broadcast", 1 << 27)])

    def test_alltoall_at_nccl_tests_speed_passes(self):
        with FixtureCopy() as (work, path):
            nt = cmp.nccl_tests_rows(open(os.path.join(FIX, "nt-alltoall.log")).read())
            lines = []
            for line in open(path):
                r = json.loads(line)
                if r["op"] == "alltoall" and r["bytes"] in nt:
                    r["time_us"] = nt[r["bytes"]][0] * 1.05  # 5 % slower: within 10 %
                lines.append(json.dumps(r))
            open(path, "w").write("\n".join(lines) + "\n")
            rc, rows = run(work, path)
            self.assertEqual(rc, 0, [v for v in rows.values() if "beyond" in v])

    def test_a_cut_results_line_is_skipped_not_a_traceback(self):
        with FixtureCopy() as (work, path):
            with open(path, "a") as f:
                f.write('{"op": "allreduce", "bytes": 2\n[1, 2]\n')  # a line cut short, a non-object
            rc, rows = run(work, path)
            self.assertEqual(rc, 1)  # the H200 run's alltoall, as before
            self.assertIn("beyond", rows[("alltoall", 1 << 28)])

    def test_a_missing_size_fails(self):
        with FixtureCopy() as (work, path):
            keep = [l for l in open(path) if not (json.loads(l)["op"] == "allreduce" and json.loads(l)["bytes"] == 1 << 28)]
            open(path, "w").write("".join(keep))
            _, rows = run(work, path)
            self.assertIn("missing on one side", rows[("allreduce", 1 << 28)])


if __name__ == "__main__":
    unittest.main()
