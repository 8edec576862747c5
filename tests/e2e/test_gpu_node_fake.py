"""full_diag --backend nccl judging a GPU node, on the host-side GPU stand-in (tests/fake_gpu,
-DCOMMSCRIPT_FAKE_GPU=ON; label fake_gpu): a healthy one-GPU run and a healthy 8-GPU NVSwitch
node warn of nothing (one rank leaves the bandwidth part out instead of scoring 0; the GPU path
is the reference, not the CPU's memcpy; the stand-in runs on the host's clock since the lead's
rewrite, so its latency and stability parts, hence the band, follow the host's load and are not
asserted); each link fault the stand-in's NVML plants
(a gen3 x8 link, an NVLink down, a GPU on the far NUMA node) is named alone with its GPU's bus
id (the stand-in's copies run at the host's memcpy speed, so full_diag reports them without
judging them against the links there; tests/lua/test_topo_gpu.lua checks that judgement); an unmodified NVIDIA CUDA image environment gives no warning and
one info line naming the image's NCCL and the loaded one."""
import os
import unittest

import cs_e2e

FAKE_DIR = os.environ.get("FAKE_GPU_DIR") or os.path.join(os.path.dirname(cs_e2e.BIN), "fake_gpu")
ARGS = ["--backend", "nccl", "full_diag", "--max", "4K", "--copy_bytes", "256K"]
# The variables NVIDIA's CUDA 12.8 runtime image sets (its Dockerfile's ENV lines), NCCL 2.28.3
# packaged; the stand-in's NCCL is 2.28.9 (what the process loads).
CONTAINER = {
    "NVARCH": "x86_64", "NVIDIA_REQUIRE_CUDA": "cuda>=12.8 brand=tesla,driver>=470,driver<471",
    "NV_CUDA_CUDART_VERSION": "12.8.90-1", "NV_CUDA_COMPAT_PACKAGE": "cuda-compat-12-8", "CUDA_VERSION": "12.8.1",
    "NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
    "NV_CUDA_LIB_VERSION": "12.8.1-1", "NV_NVTX_VERSION": "12.8.90-1", "NV_LIBNPP_VERSION": "12.3.3.100-1",
    "NV_LIBNPP_PACKAGE": "libnpp-12-8=12.3.3.100-1", "NV_LIBCUSPARSE_VERSION": "12.5.8.93-1",
    "NV_LIBCUBLAS_PACKAGE_NAME": "libcublas-12-8", "NV_LIBCUBLAS_VERSION": "12.8.4.1-1",
    "NV_LIBCUBLAS_PACKAGE": "libcublas-12-8=12.8.4.1-1", "NV_LIBNCCL_PACKAGE_NAME": "libnccl2",
    "NV_LIBNCCL_PACKAGE_VERSION": "2.28.3-1", "NCCL_VERSION": "2.28.3-1",
    "NV_LIBNCCL_PACKAGE": "libnccl2=2.28.3-1+cuda12.8", "NV_LIBNCCL_DEV_PACKAGE_NAME": "libnccl-dev",
    "NV_LIBNCCL_DEV_PACKAGE_VERSION": "2.28.3-1", "NV_LIBNCCL_DEV_PACKAGE": "libnccl-dev=2.28.3-1+cuda12.8",
    "NVIDIA_PRODUCT_NAME": "CUDA",
}


def env(extra=None):
    e = {"LD_LIBRARY_PATH": FAKE_DIR + ":" + os.environ.get("LD_LIBRARY_PATH", ""), "FAKE_GPU_STRICT": "1",
         "FAKE_GPU_BUSBW_GBPS": "100"}
    e.update(extra or {})
    return e


class GpuNode(cs_e2e.TestCase):

    def diag(self, np=None, extra=None, args=()):
        r = self.cs(ARGS + list(args), np=np, timeout=120, env=env(extra))
        self.assertFalse(r.timed_out, r.describe())
        self.assertEqual(r.rc, cs_e2e.OK, r.describe())
        rep = r.report()
        self.assertTrue(rep["commscript"]["backends"]["nccl"]["fake"])
        return r, rep

    def serious(self, rep):
        return [f for f in rep.get("findings", []) if f["severity"] in ("warn", "error")]

    def test_one_gpu_leaves_the_bandwidth_part_out_and_warns_of_nothing(self):
        r, rep = self.diag(extra={"FAKE_GPU_COUNT": "1", "FAKE_GPU_TOPO": "pcie"})
        self.assertEqual(self.serious(rep), [])
        card = rep["scorecard"]
        self.assertNotIn("bandwidth", [p["name"] for p in card["parts"]])  # not scored 0
        self.assertEqual([x["name"] for x in card["left_out"]], ["bandwidth"])
        self.assertIn("one rank", card["left_out"][0]["why"])
        self.assertEqual(sorted(p["name"] for p in card["parts"]), ["latency", "stability"])
        self.assertAlmostEqual(sum(p["effective_weight"] for p in card["parts"]), 1.0)  # re-spread
        self.assertRegex(r.stdout, r"bandwidth +left out \(weight 0\.30 re-spread")
        banner = "full_diag %s: tier quick, 1 rank on 1 host," % cs_e2e.declared_version("full_diag")
        self.assertIn(banner, r.stdout)  # not "1 ranks"
        with open(os.path.join(r.out_dir, "report.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertIn("left out, its weight re-spread over the others:</i> one rank", page)
        self.assertIn('<svg class="hostdraw"', page)  # the host drawn, not dumped

    def test_nvswitch_node_warns_of_nothing_and_states_its_gpu_path(self):
        # 8 GPUs on NVSwitches (NVLink4 x18, 450 GB/s one way). The stand-in moves data at the
        # host's memcpy speed, so its copies are reported, not judged, and the bandwidth part is
        # left out saying why (tests/lua/test_topo_gpu.lua and test_scorecard.lua check the
        # judgement and the measured copy within the nominal).
        r, rep = self.diag(np=4)
        self.assertEqual(self.serious(rep), [])
        ref = rep["gpu_links"]["reference"]
        self.assertAlmostEqual(ref["gbps"], 450.0, delta=0.5)
        self.assertEqual(ref["scope"], "intra-node")
        self.assertIn("nominal NVLink4 x18 through NVSwitch = 450.0 GB/s one way (NVML)", ref["source"])
        card = rep["scorecard"]
        self.assertEqual([x["name"] for x in card["left_out"]], ["bandwidth"])
        self.assertIn("GPU stand-in", card["left_out"][0]["why"])
        self.assertEqual(len(rep["gpu_links"]["copies"]), 1)  # measured, for the report
        self.assertFalse(rep["gpu_links"]["judged"])
        self.assertIn("links: GPU stand-in: its copies run at the host's memcpy speed", r.stdout)

    def planted(self, extra, kind, gpu, bdf):
        r, rep = self.diag(extra=extra)
        bad = self.serious(rep)
        self.assertEqual(len(bad), 1, [f["message"] for f in bad])
        for f in bad:
            self.assertIn(bdf, f["message"])
            self.assertIn("host " + rep["topology"]["host_order"][0], f["message"])
            self.assertTrue(f["remedy"])
        return bad

    def test_a_downtrained_pcie_link_is_named_alone(self):
        f = self.planted({"FAKE_NVML_PCIE": "2:3:8"}, "pcie", 2, "0000:3a:00.0")
        self.assertIn("GPU 2 (Fake GPU 2", f[0]["message"])
        self.assertIn("gen3 x8 (max gen5 x16)", f[0]["message"])

    def test_an_nvlink_down_is_named_alone(self):
        f = self.planted({"FAKE_NVML_NVLINK_DOWN": "3:5"}, "nvlink_down", 3, "0000:5d:00.0")
        self.assertIn("NVLink 5 down: 17 of 18 links active", f[0]["message"])

    def test_a_gpu_on_the_far_numa_node_is_named_alone(self):
        f = self.planted({"FAKE_NVML_NUMA": "0:1"}, "gpu_numa", 0, "0000:18:00.0")
        self.assertIn("rank 0 uses GPU 0 (0000:18:00.0) on NUMA node 1", f[0]["message"])

    def test_an_nvidia_container_gives_one_info_line_and_no_warning(self):
        r, rep = self.diag(extra=dict(CONTAINER, FAKE_GPU_COUNT="1"))
        self.assertEqual(self.serious(rep), [])
        lines = [f for f in rep["findings"] if f.get("evidence", {}).get("rule") == "container"]
        self.assertEqual(len(lines), 1, rep["findings"])
        m = lines[0]["message"]
        self.assertIn("the image packages NCCL 2.28.3 (NCCL_VERSION=2.28.3-1", m)
        self.assertIn("this process loaded NCCL 2.28.9 from ", m)
        self.assertIn("image CUDA 12.8.1", m)
        self.assertEqual(sum(1 for l in r.stdout.splitlines() if "NCCL 2.28.3" in l), 1, r.stdout)


if __name__ == "__main__":
    unittest.main()
