"""full_diag --backend nccl judging a GPU node, on the host-side GPU stand-in (tests/fake_gpu,
-DCOMMSCRIPT_FAKE_GPU=ON; label fake_gpu): a healthy one-GPU run and a healthy 8-GPU NVSwitch
node score "good" with no warning (one rank leaves the bandwidth part out instead of scoring 0;
the GPU path is the reference, not the CPU's memcpy); each link fault the stand-in's NVML plants
(a gen3 x8 link, an NVLink down, a GPU on the far NUMA node) and a slow pinned copy is named
alone with its GPU's bus id; an unmodified NVIDIA CUDA image environment gives no warning and
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
         "FAKE_GPU_COPY_GBPS": "50", "FAKE_GPU_BUSBW_GBPS": "100"}
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

    def test_one_gpu_scores_good_without_the_bandwidth_part(self):
        r, rep = self.diag(extra={"FAKE_GPU_COUNT": "1", "FAKE_GPU_TOPO": "pcie"})
        self.assertEqual(self.serious(rep), [])
        card = rep["scorecard"]
        self.assertIn(card["band"], ("good", "excellent"))
        self.assertNotIn("bandwidth", [p["name"] for p in card["parts"]])  # not scored 0
        self.assertEqual([x["name"] for x in card["left_out"]], ["bandwidth"])
        self.assertIn("one rank", card["left_out"][0]["why"])
        self.assertRegex(r.stdout, r"bandwidth +left out \(weight 0\.30 re-spread")
        self.assertIn("full_diag 1.2.1: tier quick, 1 rank on 1 host,", r.stdout)  # not "1 ranks"
        with open(os.path.join(r.out_dir, "report.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertIn("left out, its weight re-spread over the others:</i> one rank", page)
        self.assertIn('<svg class="hostdraw"', page)  # the host drawn, not dumped

    def test_nvswitch_node_scores_good_against_the_gpu_path(self):
        # 8 GPUs on NVSwitches (NVLink4 x18, 450 GB/s one way); copies and busbw as an H100's
        r, rep = self.diag(np=4, extra={"FAKE_GPU_COPY_GBPS": "400", "FAKE_GPU_BUSBW_GBPS": "370"})
        self.assertEqual(self.serious(rep), [])
        card = rep["scorecard"]
        self.assertIn(card["band"], ("good", "excellent"))
        bw = [p for p in card["parts"] if p["name"] == "bandwidth"][0]
        self.assertAlmostEqual(bw["reference"]["busbw_gbps"], 400.0, delta=0.5)  # the measured copy, not memcpy
        self.assertAlmostEqual(bw["reference"]["nominal_gbps"], 450.0, delta=0.5)
        self.assertIn("NVLink4 x18 through NVSwitch", bw["reference"]["source"])
        self.assertIn("measured GPU->GPU copy", bw["reference"]["source"])

    def planted(self, extra, kind, gpu, bdf):
        r, rep = self.diag(extra=extra)
        bad = self.serious(rep)
        self.assertEqual(len(bad), 1 if kind != "pcie_copy" else 2, [f["message"] for f in bad])
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

    def test_a_slow_pinned_copy_is_named_against_its_link(self):
        f = self.planted({"FAKE_GPU_COUNT": "1", "FAKE_GPU_TOPO": "pcie", "FAKE_GPU_COPY_GBPS": "20"},
                         "pcie_copy", 0, "0000:18:00.0")
        self.assertIn("pinned host->GPU copy 20.0 GB/s, below 70 % of its PCIe gen5 x16's 63.0 GB/s", f[0]["message"]
                      + f[1]["message"])

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
