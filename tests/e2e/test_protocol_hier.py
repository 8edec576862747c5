"""protocol_compare's hierarchical all-reduce variants at 4 ranks as 2 simulated hosts.

Each rank runs in a UTS namespace of its own (unshare --uts) whose hostname is a loopback address,
127.0.0.2 for ranks 0-1 and 127.0.0.3 for ranks 2-3: ctx.hosts sees two hosts of two ranks while
every process shares this machine's network, so MPI (shared memory) and Gloo (its store and pairs
reach "host" 127.0.0.2 over loopback) run as they do here. COMMSCRIPT_CONTROL_HOST groups the
control plane the same way (tests/e2e/test_coordinator.py). Checked:
  * every hierarchical variant (mpi and gloo inside and across) is timed and checked (#wrong 0),
    its busbw recomputed from its time and bytes; the winner of every size and the crossovers are
    recomputed here from the results' times, over the flat backends and the variants together;
  * a corruption planted in the all-gather of rank 3 (used by the hierarchical variants only) is
    found by the variants' check on rank 3 alone, and the run exits 4;
  * on one host the variants are left out, saying why.
Needs root (unshare) and Gloo; skipped with the reason otherwise."""
import json
import os
import subprocess
import time
import unittest

import cs_e2e
import test_gloo

NP = 4
AS_HOSTS = ["unshare", "--uts", "sh", "-c",
            'h=127.0.0.$((OMPI_COMM_WORLD_RANK / 2 + 2)); hostname "$h" && COMMSCRIPT_CONTROL_HOST=$h exec "$0" "$@"']


def _can_unshare():
    try:
        return subprocess.run(["unshare", "--uts", "true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@unittest.skipUnless(test_gloo.GLOO, "built without Gloo")
@unittest.skipUnless(_can_unshare(), "unshare --uts is not permitted here (needs root)")
class Hierarchical(cs_e2e.TestCase):

    def run_hosts(self, args, timeout=90):
        return cs_e2e.run_prefixed(self, AS_HOSTS, args, NP, timeout)

    SIZES = ["--min", "1K", "--max", "64K", "--factor", "8", "--iters", "3", "--warmup", "1"]

    def test_variants_checked_and_winner_recomputed(self):
        r = self.run_hosts(["protocol_compare", "--backends", "mpi,gloo"] + self.SIZES)
        self.assertExit(r, cs_e2e.OK)
        rep = r.report()
        p = rep["protocol_compare"]
        names = ["hier:mpi/mpi", "hier:mpi/gloo", "hier:gloo/mpi", "hier:gloo/gloo"]
        self.assertEqual(p["backends"], ["mpi", "gloo"])
        self.assertEqual(p["variants"], ["mpi", "gloo"] + names)
        self.assertEqual([(h["name"], h["inside"], h["across"], h["hosts"], h["ranks_per_host"])
                          for h in p["hierarchical"]],
                         [(n, n[5:].split("/")[0], n.split("/")[1], 2, 2) for n in names])
        by = {}
        for x in rep["results"]:
            self.assertEqual(x["wrong"], 0, x)
            algbw = x["bytes"] / (x["time_us"] * 1e3)
            self.assertAlmostEqual(x["algbw"], algbw, delta=1e-9 + 1e-6 * algbw)
            self.assertAlmostEqual(x["busbw"], algbw * 2.0 * (NP - 1) / NP, delta=1e-9 + 1e-6 * algbw)
            if x["backend"].startswith("hier:"):
                self.assertEqual(x["kind"], "hierarchical")
                self.assertTrue(x["checked"])
                self.assertLessEqual(x["time_rank_min_us"], x["time_us"])
                self.assertLessEqual(x["time_us"], x["time_rank_max_us"])
            by[(x["bytes"], x["backend"])] = x
        (t,) = p["tables"]
        self.assertEqual(t["op"], "allreduce")
        self.assertEqual([row["bytes"] for row in t["rows"]], [1024, 8192, 65536])
        prev, crossings = None, []
        for row in t["rows"]:
            times = {b: by[(row["bytes"], b)]["time_us"] for b in p["variants"]}
            for b in p["variants"]:
                self.assertEqual(row["by"][b]["time_us"], times[b])
            winner = min(p["variants"], key=lambda b: times[b])
            self.assertEqual(row["winner"], winner, row)
            if prev and prev[1] != winner:
                crossings.append({"from": prev[1], "to": winner, "below": prev[0], "at": row["bytes"]})
            prev = (row["bytes"], winner)
        self.assertEqual(t["crossovers"], crossings)
        # The table names every variant; report.html shows their columns.
        for n in names:
            self.assertIn(n + " us", r.stdout)
        with open(r.path("report.html")) as f:
            html = f.read()
        for n in names:
            self.assertIn("%s time us" % n, html)

    def test_planted_corruption_is_found_by_the_hierarchical_check(self):
        r = self.run_hosts(["--set", 'chaos=[{kind="corrupt", ranks=[3], ops=["allgather"]}]', "protocol_compare",
                            "--backends", "mpi,gloo", "--hierarchical", "mpi/gloo"] + self.SIZES)
        self.assertExit(r, cs_e2e.CORRUPTION)
        rep = r.report()
        for x in rep["results"]:
            if x["backend"] == "hier:mpi/gloo":
                self.assertGreater(x["wrong"], 0, x)
                self.assertEqual(x["wrong_ranks"], [3], x)
            else:  # the flat all-reduces call no all-gather
                self.assertEqual(x["wrong"], 0, x)
        errors = [f for f in rep["findings"] if f["severity"] == "error"]
        self.assertEqual(len(errors), 3, errors)
        self.assertTrue(all("hier:mpi/gloo" in f["message"] for f in errors), errors)


@unittest.skipUnless(os.environ.get("FAKE_GPU_DIR"), "not the GPU stand-in build (FAKE_GPU_DIR unset)")
@unittest.skipUnless(_can_unshare(), "unshare --uts is not permitted here (needs root)")
class OnTheGpuStandIn(Hierarchical):
    """NCCL inside and across (device buffers) beside flat nccl and mpi; NCCL inside with MPI
    across is left out, saying why."""
    test_variants_checked_and_winner_recomputed = None
    test_planted_corruption_is_found_by_the_hierarchical_check = None

    def test_nccl_inside_and_across(self):
        r = self.run_hosts(["--backend", "nccl", "protocol_compare", "--backends", "nccl,mpi", "--hierarchical",
                            "nccl/nccl,nccl/mpi"] + self.SIZES)
        self.assertExit(r, cs_e2e.OK)
        rep = r.report()
        p = rep["protocol_compare"]
        self.assertEqual(p["variants"], ["nccl", "mpi", "hier:nccl/nccl"])
        self.assertEqual([s["backend"] for s in p["skipped"]], ["hier:nccl/mpi"])
        hier = [x for x in rep["results"] if x["backend"] == "hier:nccl/nccl"]
        self.assertEqual([x["bytes"] for x in hier], [1024, 8192, 65536])
        for x in rep["results"]:
            self.assertEqual(x["wrong"], 0, x)
        for row in p["tables"][0]["rows"]:
            self.assertEqual(row["winner"], min(p["variants"], key=lambda b: row["by"][b]["time_us"]))


@unittest.skipUnless(test_gloo.GLOO, "built without Gloo")
class OneHost(cs_e2e.TestCase):

    def test_left_out_saying_why(self):
        r = self.cs(["protocol_compare", "--backends", "mpi,gloo", "--hierarchical", "mpi/gloo", "--min", "1K",
                     "--max", "1K", "--iters", "2", "--warmup", "0"], np=2, timeout=90)
        self.assertExit(r, cs_e2e.OK)
        p = r.report()["protocol_compare"]
        self.assertEqual(p["variants"], ["mpi", "gloo"])
        self.assertIn({"backend": "hier:mpi/gloo", "reason": "the job runs on 1 host: nothing to split by host"},
                      p["skipped"])
        self.assertIn("hier:mpi/gloo: not compared: the job runs on 1 host", r.stdout)

    def test_bad_variant_is_refused(self):
        r = self.cs(["protocol_compare", "--backends", "mpi,gloo", "--hierarchical", "mpi-gloo", "--min", "1K",
                     "--max", "1K", "--iters", "2", "--warmup", "0"], np=2, timeout=90)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("--hierarchical mpi-gloo: inside/across pairs expected (such as nccl/mpi), or auto or none",
                      r.stderr)


if __name__ == "__main__":
    unittest.main()
