"""The GPU side end to end on a machine without a usable GPU: `--backend nccl` and the
gpu_copy_bw recipe refuse with exit 1, name the host, say it once and never hang; --version
reports NCCL and CUDA; the cs.gpu module answers without a driver. In a build without CUDA/NCCL
the same commands say that it was not built. On a machine with an NVIDIA GPU the no-device
cases are skipped (tests/gpu/run.sh covers that machine)."""
import json
import os
import re
import shutil
import socket
import subprocess
import unittest

import cs_e2e

NP = 2
MAX_S = 10  # a refusal takes a moment, never a hang
HOST = socket.gethostname()


def _version_text():
    r = cs_e2e.run(["--version"], timeout=30)
    return r.stdout if r.rc == 0 else ""


VERSION = _version_text()
BUILT_WITH_NCCL = "NCCL: header " in VERSION


def _has_gpu():
    if os.path.exists("/dev/nvidia0"):
        return True
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
            return out.returncode == 0 and "GPU " in out.stdout
        except (OSError, subprocess.SubprocessError):
            return False
    return False


HAS_GPU = _has_gpu()


class NoDevice(cs_e2e.TestCase):

    def refused(self, args, pattern, np=NP):
        """Runs ARGS, expects exit 1 within MAX_S and exactly one commscript error line that
        matches PATTERN; returns it."""
        r = self.cs(args, np=np, timeout=60)
        self.assertExit(r, cs_e2e.BAD_INPUT, max_s=MAX_S)
        lines = r.cs_error_lines()
        self.assertEqual(len(lines), 1, "expected the message exactly once\n" + r.describe())
        self.assertRegex(lines[0], pattern, r.describe())
        self.assertNotIn("stack traceback", r.stderr, r.describe())
        self.assertNotIn("Segmentation", r.stderr, r.describe())
        self.assertNotIn("Out of bounds", r.stdout, "nothing may run\n" + r.describe())
        return lines[0]

    def test_version_names_nccl_and_cuda(self):
        self.assertTrue(VERSION, "commscript --version failed")
        if not BUILT_WITH_NCCL:
            self.assertIn("NCCL/CUDA: not built", VERSION)
            return
        self.assertRegex(VERSION, r"(?m)^NCCL: header \d+\.\d+\.\d+, library \d+\.\d+\.\d+$")
        self.assertRegex(VERSION, r"(?m)^CUDA: runtime \d+\.\d+, driver (\d+\.\d+|none \(no driver\))$")
        if not HAS_GPU:
            self.assertIn("driver none (no driver)", VERSION)

    @unittest.skipIf(HAS_GPU, "this machine has an NVIDIA GPU: the no-device path does not apply")
    def test_bw_sweep_backend_nccl_refuses_without_device(self):
        if BUILT_WITH_NCCL:
            pattern = (r"^commscript: --backend nccl: no usable CUDA device on host " + re.escape(HOST) +
                       r" \(cudaGetDeviceCount: .+\)$")
        else:
            pattern = r"^commscript: --backend nccl: this commscript was built without CUDA/NCCL$"
        self.refused(["--backend", "nccl", "bw_sweep", "--max", "1K"], pattern)

    @unittest.skipIf(HAS_GPU, "this machine has an NVIDIA GPU: the no-device path does not apply")
    def test_gpu_copy_bw_refuses_without_device(self):
        pattern = (r"gpu_copy_bw: no usable CUDA device on host " + re.escape(HOST) +
                   r" \(cudaGetDeviceCount: .+\)$")
        self.refused(["gpu_copy_bw"], pattern)
        # One process, no MPI: the same refusal.
        self.refused(["--backend", "self", "gpu_copy_bw"], pattern, np=None)

    @unittest.skipUnless(BUILT_WITH_NCCL, "built without CUDA/NCCL")
    def test_chaos_corrupt_is_refused_with_nccl(self):
        self.refused(["--backend", "nccl", "--set", 'chaos=[{kind="corrupt"}]', "bw_sweep"],
                     r"chaos kind 'corrupt' is not supported with --backend nccl", np=None)

    def test_gpu_copy_bw_is_listed_and_documents_its_options(self):
        r = self.cs(["--list"], out=False)
        self.assertExit(r, cs_e2e.OK)
        self.assertRegex(r.stdout, r"(?m)^gpu_copy_bw\s+%s\s+host<->GPU" % re.escape(cs_e2e.declared_version("gpu_copy_bw")))
        r = self.cs(["gpu_copy_bw", "--help"], out=False)
        self.assertExit(r, cs_e2e.OK)
        for opt in ("--bytes", "--loops", "--samples", "--peer"):
            self.assertIn(opt, r.stdout)

    @unittest.skipIf(HAS_GPU, "this machine has an NVIDIA GPU: the no-device path does not apply")
    def test_cs_gpu_module_answers_without_a_driver(self):
        # A sandboxed recipe may require "cs.gpu"; without a device it gets {} and the reason.
        path = self.recipe("gpu_probe", """
  local gpu = require "cs.gpu"
  local t, why = gpu.topology()
  local n, nwhy = gpu.device_count()
  ctx.report:set("probe", { empty = next(t) == nil, why = why, n = n, nwhy = nwhy })
""")
        r = self.cs(["--backend", "self", path])
        self.assertExit(r, cs_e2e.OK, max_s=MAX_S)
        probe = r.report()["probe"]
        self.assertTrue(probe["empty"], probe)
        self.assertEqual(probe["n"], 0)
        if BUILT_WITH_NCCL:
            self.assertRegex(probe["why"], r"^no usable CUDA device \(cudaGetDeviceCount: .+\)$")
            self.assertRegex(probe["nwhy"], r"cudaError\w+: ")  # after what it means (no driver, old driver)
        else:
            self.assertEqual(probe["why"], "built without CUDA")
            self.assertEqual(probe["nwhy"], "built without CUDA")


if __name__ == "__main__":
    cs_e2e.main()
