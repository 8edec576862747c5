"""--launcher env across network-namespace hosts (launch_env_netns.py: cs-el-PID-h0..h3, each its
own hostname, joined by a bridge at 1 Gbit/s; no mpirun): the gloo sweep over every collective
checked (#wrong = 0, busbw recomputed from time and bytes), and the elastic drill (a rank
SIGKILLed on its host, the survivors on the others detect, shrink and go on) within its targets.
Needs root, iproute2 and unshare; skipped with the reason otherwise. The namespaces carry this
process's pid, so concurrent runs do not meet, and are removed afterwards (also on failure)."""
import json
import os
import unittest

import cs_e2e
import launch_env_netns
import test_gloo

WHY = launch_env_netns.usable() if test_gloo.GLOO else "built without Gloo"
N = 4
RATE = "1gbit"


@unittest.skipIf(WHY, WHY)
class NetnsHosts(cs_e2e.TestCase):

    @classmethod
    def setUpClass(cls):
        launch_env_netns.down_stale()

    def launch(self, args, timeout=100):
        out = os.path.join(self.tmp, "out")
        res, wall = launch_env_netns.launch([cs_e2e.BIN, "--out", out, "--backend", "gloo", "--launcher", "env"]
                                            + args, N, rate=RATE, timeout=timeout, cwd=self.tmp, env=cs_e2e._env())
        path = os.path.join(out, "report.json")
        self.assertTrue(os.path.exists(path), self.describe(res))
        with open(path) as f:
            return res, json.load(f), wall

    def describe(self, res):
        return "\n".join("--- rank %d rc %s\n%s\n%s" % (r, rc, o[-2000:], e[-2000:]) for r, (rc, o, e) in enumerate(res))

    def test_sweep_all_ops(self):
        res, rep, _ = self.launch(["bw_sweep", "--ops", "all", "--min", "1K", "--max", "256K", "--factor", "16",
                                   "--iters", "3", "--warmup", "1", "--no-inplace"])
        self.assertEqual([rc for rc, _, _ in res], [0] * N, self.describe(res))
        self.assertEqual(rep["run"]["hosts"], N)
        self.assertEqual(sorted(rep["topology"]["hosts"]), ["cs-el-h%d" % i for i in range(N)])
        self.assertEqual(rep["run"]["launcher"]["master_addr"], "10.79.0.1")
        ops = set()
        for x in rep["results"]:
            self.assertEqual(x["wrong"], 0, x)
            self.assertEqual(x["ranks"], N)
            algbw = x["bytes"] / (x["time_us"] * 1e3)
            self.assertAlmostEqual(x["algbw"], algbw, delta=1e-6 + 1e-6 * algbw)
            ops.add(x["op"])
        self.assertEqual(len(ops), 9, ops)
        # 256 KiB all-reduce over a 1 Gbit/s link cannot beat the link: busbw <= 0.125 GB/s (+ slack
        # for the tbf burst).
        big = [x for x in rep["results"] if x["op"] == "allreduce" and x["bytes"] == 262144]
        self.assertEqual(len(big), 1)
        self.assertLess(big[0]["busbw"], 0.2, big[0])

    def test_drill(self):
        deadline = 3.0
        res, rep, wall = self.launch(["elastic_drill", "--deadline", str(deadline), "--bytes", "64K"])
        self.assertEqual([rc for rc, _, _ in res], [0, 0, 0, -9], self.describe(res))
        d = rep["drill"]
        self.assertEqual((d["victim"], d["gone"], d["survivors"]), (3, [3], 3))
        self.assertLessEqual(d["detect_s"], deadline + 1, d)
        self.assertLessEqual(d["working_s"], 2.0, d)
        self.assertEqual(d["wrong_after"], 0, d)
        self.assertEqual(rep["run"]["hosts"], N)
        self.assertEqual(rep["run"]["exit_code"], 0)
        print("netns drill: detect %.3f s, revoke %.3f s, working %.3f s, busbw %.4f -> %.4f GB/s, wall %.1f s"
              % (d["detect_s"], d["revoke_s"], d["working_s"], d["busbw_before"], d["busbw_after"], wall))


if __name__ == "__main__":
    cs_e2e.main()
