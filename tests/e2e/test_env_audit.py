"""env_audit end to end: the recipe as a plain linter (--backend self) and under mpirun: a clean
environment exits 0 with no warning, misread values (NCCL_BUFFSIZE=4M, NCCL_DEBUG=WARNING) are
error findings naming the variable (exit 3), NCCL's config files are audited with their source,
and a variable that differs between ranks (MPMD launch) is named with its ranks."""
import os
import re
import signal
import subprocess
import time
import unittest

import cs_e2e

# Prefixes the audit looks at: removed from the caller's environment so that the tests see
# only what they set.
AUDITED = ("NCCL_", "TORCH_NCCL_", "TORCH_FR_", "UCX_")


class EnvAudit(cs_e2e.TestCase):

    def setUp(self):
        super().setUp()
        # An empty home: no ~/.nccl.conf from the machine running the tests.
        self.home = os.path.join(self.tmp, "home")
        os.makedirs(self.home)

    def env(self, extra=None):
        e = cs_e2e._env()
        for k in list(e):
            if k.startswith(AUDITED):
                del e[k]
        e["HOME"] = self.home
        e.update(extra or {})
        return e

    def launch(self, cmd, env, timeout=cs_e2e.DEFAULT_TIMEOUT):
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd=self.tmp, env=env, start_new_session=True)
        timed_out = False
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        return out, err, p.returncode, timed_out, time.monotonic() - t0

    def audit(self, args=(), env=None, np=None):
        """commscript [--backend self] env_audit ARGS with exactly the audited variables in ENV."""
        out_dir = self.new_out()
        cmd = [cs_e2e.BIN, "--out", out_dir]
        if np is None:
            cmd += ["--backend", "self"]
        cmd += ["env_audit"] + list(args)
        if np is not None:
            cmd = [cs_e2e.MPIRUN, "-np", str(np), "--oversubscribe"] + cmd
        out, err, rc, timed_out, elapsed = self.launch(cmd, self.env(env))
        return cs_e2e.Run(cmd, None if timed_out else rc, out.decode("utf-8", "replace"),
                          err.decode("utf-8", "replace"), elapsed, out_dir, timed_out)

    def findings(self, r, variable=None):
        fs = r.report()["findings"]
        if variable is not None:
            fs = [f for f in fs if isinstance(f["subject"], dict) and f["subject"].get("variable") == variable]
        return fs

    def no_system_conf(self):
        if os.path.exists("/etc/nccl.conf"):
            self.skipTest("/etc/nccl.conf exists on this machine: its settings are part of every audit")

    # ---- the plain linter ----
    def test_clean_environment(self):
        self.no_system_conf()
        r = self.audit()
        self.assertExit(r, cs_e2e.OK, max_s=20)
        self.assertEqual(self.findings(r), [], r.describe())
        self.assertIn("no findings", r.stdout)
        rep = r.report()
        self.assertEqual(rep["recipe"]["name"], "env_audit")
        # the version the recipe file declares (bumped when its output changes)
        with open(os.path.join(cs_e2e.REPO, "recipes", "env_audit.lua")) as f:
            declared = re.search(r'^\s*version = "(\d+\.\d+\.\d+)"', f.read(), re.M).group(1)
        self.assertEqual(rep["recipe"]["version"], declared)
        self.assertEqual(rep["env_audit"]["counts"], {"error": 0, "warn": 0, "info": 0})

    def test_realistic_good_settings_give_no_warning(self):
        self.no_system_conf()
        good = {
            "NCCL_DEBUG": "WARN", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1",
            "NCCL_IB_GID_INDEX": "3", "NCCL_IB_TIMEOUT": "22", "NCCL_IB_RETRY_CNT": "7", "NCCL_NET_GDR_LEVEL": "PHB",
            "NCCL_CROSS_NIC": "0", "NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "4",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "600",
            "TORCH_FR_BUFFER_SIZE": "2000", "UCX_TLS": "rc,cuda_copy", "UCX_NET_DEVICES": "mlx5_0:1",
        }
        r = self.audit(["--nccl-version", "2.27.3", "--no-host-checks"], env=good)
        self.assertExit(r, cs_e2e.OK, max_s=20)
        bad = [f for f in self.findings(r) if f["severity"] != "info"]
        self.assertEqual(bad, [], r.describe())

    def test_misread_values_are_errors(self):
        r = self.audit(env={"NCCL_BUFFSIZE": "4M", "NCCL_DEBUG": "WARNING"})
        self.assertExit(r, cs_e2e.HEALTH, max_s=20)
        buf = self.findings(r, "NCCL_BUFFSIZE")
        self.assertEqual(len(buf), 1, r.describe())
        self.assertEqual(buf[0]["severity"], "error")
        self.assertEqual(buf[0]["evidence"]["value"], "4M")
        self.assertEqual(buf[0]["evidence"]["parsed_as"], 4)
        self.assertEqual(buf[0]["evidence"]["source"], "environment")
        self.assertIn("4194304", buf[0]["remedy"])
        # the facts behind the finding, in this repository: a heading of docs/nccl.md
        self.assertEqual(buf[0]["evidence"]["reference"], "docs/nccl.md#the-variables-nccl-documents")
        with open(os.path.join(cs_e2e.REPO, "docs", "nccl.md")) as f:
            self.assertIn("\n### The variables NCCL documents\n", f.read())
        self.assertEqual(buf[0]["subject"]["ranks"], [0])
        dbg = self.findings(r, "NCCL_DEBUG")
        self.assertEqual(len(dbg), 1, r.describe())
        self.assertEqual(dbg[0]["severity"], "error")
        self.assertIn("WARN", dbg[0]["remedy"])
        # the table on stdout
        self.assertRegex(r.stdout, r"error\s+NCCL_BUFFSIZE\s+4M\s+0\s+NCCL_BUFFSIZE=4M is read as 4")
        self.assertRegex(r.stdout, r"error\s+NCCL_DEBUG\s+WARNING")
        self.assertIn("2 errors", r.stdout)
        self.assertEqual(r.report()["run"]["exit_code"], cs_e2e.HEALTH)

    def test_only_warnings_exit_0(self):
        r = self.audit(env={"NCCL_IB_TIMEOUT": "22s", "NCCL_MAX_NCHANNELS": "8"})
        self.assertExit(r, cs_e2e.OK, max_s=20)
        sev = {f["subject"]["variable"]: f["severity"] for f in self.findings(r)}
        self.assertEqual(sev, {"NCCL_IB_TIMEOUT": "warn", "NCCL_MAX_NCHANNELS": "warn"})

    def test_folklore_and_typo(self):
        r = self.audit(env={"NCCL_TIMEOUT": "1800", "NCCL_SOCKET_IFNAM": "eth0", "NCCL_P2P_LEVEL": "nvl"})
        self.assertExit(r, cs_e2e.HEALTH, max_s=20)
        self.assertIn("did you mean NCCL_SOCKET_IFNAME?", self.findings(r, "NCCL_SOCKET_IFNAM")[0]["message"])
        self.assertEqual(self.findings(r, "NCCL_TIMEOUT")[0]["severity"], "error")
        self.assertIn("NCCL_P2P_LEVEL=NVL", self.findings(r, "NCCL_P2P_LEVEL")[0]["remedy"])

    def test_strict(self):
        self.no_system_conf()
        r = self.audit(env={"UCX_SOME_RARE_KNOB": "y"})
        self.assertExit(r, cs_e2e.OK, max_s=20)
        self.assertEqual(self.findings(r), [])
        r = self.audit(["--strict"], env={"UCX_SOME_RARE_KNOB": "y"})
        self.assertExit(r, cs_e2e.OK, max_s=20)
        self.assertEqual([f["severity"] for f in self.findings(r, "UCX_SOME_RARE_KNOB")], ["warn"])

    def test_bad_nccl_version_option(self):
        r = self.audit(["--nccl-version", "new"])
        self.assertExit(r, cs_e2e.BAD_INPUT, max_s=20)
        self.assertIn("--nccl-version 'new' is not a version", r.stderr)

    def test_nccl_version_gates_names(self):
        r = self.audit(["--nccl-version", "2.23.4"], env={"NCCL_RAS_ENABLE": "1"})
        self.assertExit(r, cs_e2e.OK, max_s=20)
        f = self.findings(r, "NCCL_RAS_ENABLE")
        self.assertEqual(len(f), 1, r.describe())
        self.assertIn("first appears in NCCL 2.24", f[0]["message"])
        self.assertEqual(r.report()["env_audit"]["nccl_version"], "2.23.4")

    # ---- config files ----
    def test_conf_file_values_carry_their_source(self):
        conf = self.write("site.conf", "# site\nNCCL_DEBUG=WARN\nNCCL_BUFFSIZE=4M\n")
        r = self.audit(env={"NCCL_CONF_FILE": conf})
        self.assertExit(r, cs_e2e.HEALTH, max_s=20)
        f = self.findings(r, "NCCL_BUFFSIZE")
        self.assertEqual(len(f), 1, r.describe())
        self.assertEqual(f[0]["evidence"]["source"], conf + ":3")
        self.assertEqual(self.findings(r, "NCCL_DEBUG"), [])
        files = r.report()["env_audit"]["conf_files"]
        self.assertEqual(files[0], {"path": conf, "role": "NCCL_CONF_FILE", "exists": True, "applied": True, "entries": 2})

    def test_environment_beats_conf_file(self):
        with open(os.path.join(self.home, ".nccl.conf"), "w") as f:
            f.write("NCCL_BUFFSIZE=4M\n")
        r = self.audit(env={"NCCL_BUFFSIZE": "8388608"})
        self.assertExit(r, cs_e2e.OK, max_s=20)
        fs = self.findings(r, "NCCL_BUFFSIZE")
        rules = sorted(f["evidence"]["rule"] for f in fs)
        self.assertIn("conf-shadowed", rules, r.describe())
        self.assertNotIn("int-size-suffix", rules)
        # without the environment's value the file's is what NCCL reads
        r = self.audit()
        self.assertExit(r, cs_e2e.HEALTH, max_s=20)
        f = [x for x in self.findings(r, "NCCL_BUFFSIZE") if x["evidence"]["rule"] == "int-size-suffix"]
        self.assertEqual(f[0]["evidence"]["source"], os.path.join(self.home, ".nccl.conf") + ":1")

    def test_conf_option_audits_an_extra_file(self):
        conf = self.write("candidate.conf", "NCCL_DEBUG=WARNING\nNCCL_IB_TIMEOUT = 22\n")
        r = self.audit(["--conf", conf])
        self.assertExit(r, cs_e2e.HEALTH, max_s=20)
        rules = {(f["subject"]["variable"], f["evidence"]["rule"]) for f in self.findings(r)}
        self.assertIn(("NCCL_DEBUG", "enum-invalid"), rules)
        self.assertIn(("NCCL_IB_TIMEOUT", "conf-blanks-in-name"), rules)
        self.assertIn(("(%s)" % conf, "conf-extra"), rules)

    def test_config_env_section_is_the_source(self):
        cfg = self.write("c.toml", '[env]\nNCCL_DEBUG = "WARNING"\n')
        r = self.audit_with_config(cfg)
        self.assertExit(r, cs_e2e.HEALTH, max_s=20)
        f = self.findings(r, "NCCL_DEBUG")
        self.assertEqual(f[0]["evidence"]["source"], "config [env]", r.describe())

    def audit_with_config(self, cfg):
        out_dir = self.new_out()
        cmd = [cs_e2e.BIN, "--out", out_dir, "--config", cfg, "--backend", "self", "env_audit"]
        out, err, rc, timed_out, elapsed = self.launch(cmd, self.env())
        return cs_e2e.Run(cmd, None if timed_out else rc, out.decode(), err.decode(), elapsed, out_dir, timed_out)

    # ---- under mpirun ----
    def test_same_finding_on_every_rank_is_reported_once(self):
        r = self.audit(env={"NCCL_BUFFSIZE": "4M"}, np=2)
        self.assertExit(r, cs_e2e.HEALTH, max_s=60)
        f = self.findings(r, "NCCL_BUFFSIZE")
        self.assertEqual(len(f), 1, r.describe())
        self.assertEqual(f[0]["subject"]["ranks"], [0, 1])
        self.assertRegex(r.stdout, r"error\s+NCCL_BUFFSIZE\s+4M\s+all\s")
        # the table is printed once (rank 0)
        self.assertEqual(r.stdout.count("# commscript env_audit"), 1)

    def test_variable_differing_between_ranks_is_named(self):
        """MPMD launch: rank 0 gets NCCL_ALGO=Ring, rank 1 does not."""
        out_dir = self.new_out()
        cs = [cs_e2e.BIN, "--out", out_dir, "env_audit"]
        cmd = ([cs_e2e.MPIRUN, "--oversubscribe", "-np", "1", "env", "NCCL_ALGO=Ring", "NCCL_IB_HCA=mlx5_0"] + cs +
               [":", "-np", "1", "env", "NCCL_IB_HCA=mlx5_1"] + cs)
        out, err, rc, timed_out, elapsed = self.launch(cmd, self.env())
        r = cs_e2e.Run(cmd, None if timed_out else rc, out.decode(), err.decode(), elapsed, out_dir, timed_out)
        self.assertExit(r, cs_e2e.HEALTH, max_s=60)
        algo = [f for f in self.findings(r, "NCCL_ALGO") if f["evidence"].get("rule") == "differs-between-ranks"]
        self.assertEqual(len(algo), 1, r.describe())
        self.assertEqual(algo[0]["severity"], "error")  # ranks that disagree on the algorithm can hang
        self.assertIn("'Ring' on rank 0", algo[0]["message"])
        self.assertIn("unset on rank 1", algo[0]["message"])
        values = {(v.get("value"), tuple(v["ranks"])) for v in algo[0]["evidence"]["values"]}
        self.assertEqual(values, {("Ring", (0,)), (None, (1,))})
        hca = [f for f in self.findings(r, "NCCL_IB_HCA") if f["evidence"].get("rule") == "differs-between-ranks"]
        self.assertEqual(len(hca), 1, r.describe())
        self.assertEqual(hca[0]["severity"], "warn")
        self.assertIn("'mlx5_0' on rank 0; 'mlx5_1' on rank 1", hca[0]["message"])
        self.assertEqual(hca[0]["subject"]["ranks"], [0, 1])  # no majority: both ranks are named
        # launcher bookkeeping (OMPI_COMM_WORLD_RANK, OMPI_ARGV ...) is not a difference
        others = [f for f in self.findings(r) if f["evidence"].get("rule") == "differs-between-ranks"
                  and f["subject"]["variable"] not in ("NCCL_ALGO", "NCCL_IB_HCA")]
        self.assertEqual(others, [], r.describe())
        self.assertRegex(r.stdout, r"error\s+NCCL_ALGO\s+\(differs\)\s+all\s+NCCL_ALGO differs between ranks")


if __name__ == "__main__":
    cs_e2e.main()
