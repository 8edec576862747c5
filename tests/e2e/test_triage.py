#!/usr/bin/env python3
"""triage (recipes/triage.lua): a customer's artifacts -> a diagnosis per process group and a
repro (repro.lua + repro.toml) that reproduces it. Fixtures: tests/fixtures/triage (synthetic,
following their writers' source; see the README there).

What fr_trace (torch/distributed/flight_recorder, builder.py build_collectives + utils.py
error_analysis) reports on the same dumps (run on them: test_same_verdict_as_fr_trace, where the
PyTorch source is on the machine; recorded in docs/triage.md):
  fr_missing/ (and fr_missing_json/): "Not all ranks joining collective, sequence number: 6",
      group info 0:default_pg, collective nccl:_all_gather_base, "missing ranks: {2}".
  fr_size_mismatch/: "Collective sequence number: 5 has errors", collective nccl:all_reduce,
      "Culprit rank 1; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[4096]]'
      does not match found input sizes: '[[2048]]'" (with rank 0's dump read first).
"""
import gzip
import json
import os
import pickle
import re

import subprocess
import sys
import unittest

import cs_e2e
from cs_e2e import BAD_INPUT, HEALTH, OK, TIMEOUT

FIX = os.path.join(cs_e2e.REPO, "tests", "fixtures", "triage")
sys.path.insert(0, FIX)
import fr_trace_compare  # noqa: E402  (tests/fixtures/triage/fr_trace_compare.py)


def pytorch_source():
    """A directory holding torch/distributed/flight_recorder/: $FR_TRACE_SRC (a PyTorch checkout),
    else an installed PyTorch that has it (2.5+; Debian 12's 1.13 has not)."""
    cands = [os.environ.get("FR_TRACE_SRC")]
    try:
        p = subprocess.run([sys.executable, "-c", "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))"],
                           capture_output=True, text=True, timeout=60)
        cands.append(p.stdout.strip() if p.returncode == 0 else None)
    except (OSError, subprocess.TimeoutExpired):
        pass
    return fr_trace_compare.find_source(cands)


def fx(*names):
    return ",".join(os.path.join(FIX, n) for n in names)


class Triage(cs_e2e.TestCase):
    def triage(self, paths, *extra, out=None):
        out = out or self.new_out()
        r = cs_e2e.run(["--backend", "self", "recipes/triage.lua", "--paths", paths] + list(extra),
                       out_dir=out, cwd=cs_e2e.REPO, timeout=60)
        return r, out

    def repro(self, out, np, *extra, timeout=60):
        # a short deadline where the fault is planted (the wait is the test's cost), a generous
        # one without it (4 ranks share 2 busy cores)
        deadline = "10" if "chaos=[]" in extra else "2"
        return cs_e2e.run(["--timeout", deadline, "--config", os.path.join(out, "repro.toml")] + list(extra) +
                          [os.path.join(out, "repro.lua")], np=np, out_dir=self.new_out(), cwd=self.tmp,
                          timeout=timeout)

    # (1) the seed's scenario: ALLGATHER_BASE watchdog lines of ranks 0, 1, 3; rank 2 never arrives
    def test_watchdog_missing_rank_and_repro(self):
        r, out = self.triage(fx("watchdog_allgather.log"))
        self.assertExit(r, HEALTH)
        self.assertIn("rank(s) 2 never joined #58 _all_gather_base", r.stdout, r.describe())
        self.assertIn("NCCL 2.21.5+cuda12.4; transports NET/IB/GDRDMA, P2P/IPC", r.stdout)
        self.assertIn("2 host(s): gpu-a, gpu-b", r.stdout)
        rep = json.load(open(os.path.join(out, "report.json")))
        f = [x for x in rep["findings"] if x.get("kind") == "triage.missing"]
        self.assertEqual(len(f), 1, rep["findings"])
        self.assertEqual(f[0]["subject"], {"ranks": [2]})
        self.assertTrue(any(re.search(r"watchdog_allgather\.log:\d+$", a) for a in f[0]["evidence"]["at"]), f[0])
        # the env audit ran on what the logs show (NCCL_IB_TIMEOUT=40 is out of NCCL's range)
        env = [x for x in rep["findings"] if isinstance(x.get("subject"), dict) and x["subject"].get("variable")]
        self.assertTrue(any(x["subject"]["variable"] == "NCCL_IB_TIMEOUT" for x in env), env)
        self.assertIn("timeout = 600", open(os.path.join(out, "repro.toml")).read())
        # the repro at 4 ranks: exit 5 naming rank 2 and the all-gather
        rr = self.repro(out, 4)
        self.assertExit(rr, TIMEOUT)
        self.assertRegex(rr.stdout + rr.stderr, r"timeout: allgather #\d+ .*missing ranks: 2\b")
        # without the planted fault the fabric alone does not hang: exit 0
        rr = self.repro(out, 4, "--set", "chaos=[]")
        self.assertExit(rr, OK)
        self.assertIn("the failure did not reproduce", rr.stdout)

    # (2) Flight Recorder dumps, rank 2 missing from collective 6; pickle, then JSON (one gzip)
    def test_fr_missing_rank_as_fr_trace(self):
        for d in ("fr_missing", "fr_missing_json"):
            r, out = self.triage(fx(d))
            self.assertExit(r, HEALTH)
            self.assertIn("fr_trace says: Not all ranks joining collective, sequence number: 6; group info: 0:default_pg; "
                          "collective: nccl:_all_gather_base; missing ranks: {2}", r.stdout, r.describe())
            self.assertIn("rank 2: last completed #5 all_reduce", r.stdout)
            self.assertIn("rank 0: last completed #5 all_reduce in [[1024]] out [[1024]] Float; in flight #6 _all_gather_base", r.stdout)
            if d == "fr_missing":
                rr = self.repro(out, 4)
                self.assertExit(rr, TIMEOUT)
                self.assertRegex(rr.stdout + rr.stderr, r"timeout: allgather #6 .*missing ranks: 2\b")
            else:  # the same job as JSON (one file gzip): the same repro
                self.assertEqual(open(os.path.join(out, "repro.toml")).read(), repro_toml)
            repro_toml = open(os.path.join(out, "repro.toml")).read()
    # (2b) 8 ranks in tensor-parallel pairs and the world; rank 6 never joins its pair's
    # all-reduce #3. Scaled to 4 ranks the pair {6, 7} stays a pair (ranks 2, 3 here).
    def test_fr_tp_pair_scaled(self):
        r, out = self.triage(fx("fr_tp_missing"), "--ranks", "4")
        self.assertExit(r, HEALTH)
        self.assertIn("fr_trace says: Not all ranks joining collective, sequence number: 3; group info: 1:tp; "
                      "collective: nccl:all_reduce; missing ranks: {6}", r.stdout, r.describe())
        lua = open(os.path.join(out, "repro.lua")).read()
        self.assertIn("0->0, 1->1, 6->2, 7->3", lua)
        self.assertIn('{ name = "1", desc = "tp", ranks = { 2, 3 } },  -- [3] customer ranks 6, 7', lua)
        rr = self.repro(out, 4)
        self.assertExit(rr, TIMEOUT)
        text = rr.stdout + rr.stderr
        inc = [i for i in json.load(open(rr.path("report.json")))["incidents"] if i.get("kind") == "timeout"][0]
        missing = [{"rank": m["rank"], "detail": m["detail"]} for m in inc["missing"]]
        # rank 2 (customer rank 6) never arrived: it is not in any operation
        self.assertIn({"rank": 2, "detail": "no progress, not in an operation (last: allgather #3)"}, missing)
        if re.search(r"timeout: barrier #\d+ \(0B, world\)", text):
            # Under load the other pair's world barrier can expire first; that verdict also lists
            # rank 3, which waits for rank 2 in the pair's all-reduce (a known defect of the
            # verdict across communicators: docs/triage.md).
            return
        self.assertRegex(text, r"timeout: allreduce #3 \S+ world/s3\.c0\)")
        self.assertEqual(inc["arrived"], [3])

    # (3) Flight Recorder dumps, rank 1 all-reduces half the elements of the others at collective 5
    def test_fr_size_mismatch_as_fr_trace(self):
        r, out = self.triage(fx("fr_size_mismatch"))
        self.assertExit(r, HEALTH)
        self.assertIn("Collective sequence number: 5 has errors; collective: nccl:all_reduce; error msg: Culprit rank 1; "
                      "Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[4096]]' does not match found input "
                      "sizes: '[[2048]]'", r.stdout, r.describe())
        toml = open(os.path.join(out, "repro.toml")).read()
        self.assertIn('kind = "desync"', toml)
        self.assertIn("factor = 0.5", toml)
        rr = self.repro(out, 4)
        self.assertExit(rr, TIMEOUT)
        self.assertRegex(rr.stdout + rr.stderr, r"desync: allreduce #5 .*rank 1 at .*count=2048")

    # (1b) fr_trace itself, run on the same dumps (its package copied unchanged, two empty parent
    # packages as the only shim: fr_trace_compare.py), must reach the same verdict as triage:
    # the kind, the sequence number, the group, the collective, the missing or culprit ranks and
    # the error type. Skipped where no PyTorch source is on the machine.
    def test_same_verdict_as_fr_trace(self):
        src = pytorch_source()
        if not src:
            raise unittest.SkipTest("no PyTorch source with torch/distributed/flight_recorder/ here: set FR_TRACE_SRC to a "
                                    "PyTorch checkout (or install PyTorch 2.5+) to run fr_trace on the fixtures")
        # fr_trace's loader reads pickles only: the JSON set goes to it as the same documents
        # pickled (json.load -> pickle.dump, nothing else changed), to triage as JSON
        as_pickles = os.path.join(self.tmp, "fr_missing_json.pickled")
        os.mkdir(as_pickles)
        for f in sorted(os.listdir(os.path.join(FIX, "fr_missing_json"))):
            opener = gzip.open if f.endswith(".gz") else open
            with opener(os.path.join(FIX, "fr_missing_json", f), "rt") as fin:
                doc = json.load(fin)
            with open(os.path.join(as_pickles, re.sub(r"\.json(\.gz)?$", "", f)), "wb") as fout:
                pickle.dump(doc, fout, protocol=2)
        for d in ("fr_missing", "fr_missing_json", "fr_size_mismatch", "fr_tp_missing"):
            fr = fr_trace_compare.run(src, as_pickles if d == "fr_missing_json" else os.path.join(FIX, d))
            self.assertEqual(fr["rc"], 0, d + ":\n" + fr["log"])
            self.assertTrue(fr["verdicts"], d + ": fr_trace concluded nothing:\n" + fr["log"])
            want = fr["verdicts"][0]
            r, out = self.triage(fx(d))
            self.assertExit(r, HEALTH)
            with open(os.path.join(out, "report.json")) as f:
                groups = [g for g in json.load(f)["triage"]["groups"] if g["verdict"] in ("missing", "mismatch")]
            self.assertEqual(len(groups), 1, groups)
            g = groups[0]
            got = {"kind": g["verdict"], "seq": g["seq"], "group": g["name"] + ":" + g["desc"], "collective": "nccl:" + g["op"]}
            if g["verdict"] == "missing":
                got["missing"] = g["culprits"]
            else:
                got["culprits"], got["errors"] = g["culprits"], [g["mismatch"]]
            self.assertEqual(got, want, d + ": triage vs fr_trace\n" + fr["log"])
        # every collective matched and completed: fr_trace concludes nothing, triage finds no
        # missing or mismatched rank (its slow-rank warning is from durations fr_trace ignores)
        fr = fr_trace_compare.run(src, os.path.join(FIX, "fr_slow"))
        self.assertEqual((fr["rc"], fr["verdicts"]), (0, []), fr["log"])
        r, out = self.triage(fx("fr_slow"))
        self.assertExit(r, OK)
        with open(os.path.join(out, "report.json")) as f:
            self.assertEqual([g["verdict"] for g in json.load(f)["triage"]["groups"]], ["slow"])

    # (3b) a slow rank: every collective completed, rank 3's calls 0.3 ms, the others' 40 ms
    # (duration_ms: they waited for it). triage names it (a warning), plants a 40 ms delay on
    # it, and the repro names the same rank (exit 3); without the delay nobody is late (exit 0).
    def test_fr_slow_rank_and_repro(self):
        r, out = self.triage(fx("fr_slow"))
        self.assertExit(r, OK)
        self.assertIn("rank(s) 3 arrive late at every collective: the others waited 40.2 ms longer in each", r.stdout, r.describe())
        with open(os.path.join(out, "report.json")) as f:
            fs = [x for x in json.load(f)["findings"] if x.get("kind") == "triage.slow"]
        self.assertEqual([(x["severity"], x["subject"]) for x in fs], [("warn", {"ranks": [3]})])
        with open(os.path.join(out, "repro.toml")) as f:
            toml = f.read()
        self.assertIn('kind = "delay"\nranks = [3]\nops = ["allreduce", "allgather"]\nms = 40', toml)
        rr = self.repro(out, 4, timeout=90)
        self.assertExit(rr, HEALTH)
        self.assertRegex(rr.stdout, r"slow: rank\(s\) 3 \(\d+\.\d ms a collective\) arrive late", rr.describe())
        rr = self.repro(out, 4, "--set", "chaos=[]", timeout=90)
        self.assertExit(rr, OK)
        self.assertIn("the slow rank did not reproduce", rr.stdout)

    # (3c) point-to-point records are replayed: sends 0->1 (512), 2->3 (256), 1->2 (128) around
    # the collectives, then rank 2 never joins all-reduce #3. Its hang rule counts its own
    # send and receive on the communicator (comm:seq()), so it still lands on that all-reduce.
    def test_fr_p2p_replayed(self):
        r, out = self.triage(fx("fr_p2p_missing"))
        self.assertExit(r, HEALTH)
        with open(os.path.join(out, "repro.lua")) as f:
            lua = f.read()
        sends = re.findall(r'op = "send", from = (\d+), to = (\d+), count = (\d+)', lua)
        self.assertEqual(sends, [("0", "1", "512"), ("2", "3", "256"), ("1", "2", "128")], lua)
        with open(os.path.join(out, "repro.toml")) as f:
            self.assertIn('kind = "hang"\nranks = [2]\nops = ["allreduce"]\nafter = 4', f.read())
        rr = self.repro(out, 4)
        self.assertExit(rr, TIMEOUT)
        self.assertRegex(rr.stdout + rr.stderr, r"timeout: allreduce #\d+ .*missing ranks: 2\b")
        rr = self.repro(out, 4, "--set", "chaos=[]")
        self.assertExit(rr, OK)
        self.assertIn("all 6 operation(s) completed on every rank: the failure did not reproduce", rr.stdout)

    # other formats: NCCL RAS JSON and nccl-tests -J, mixed with a log
    # (2c) a real dump: PyTorch 2.11 + NCCL 2.28.9 on one H200, one rank, six collectives done.
    # A one-rank job has nothing between ranks to reproduce: no repro, exit 0 (it once failed
    # with "--ranks must be at least 2", exit 1, on this very dump).
    def test_real_one_rank_dump(self):
        r, out = self.triage(fx("real_h200_torch211/nccl_trace_rank_0"))
        self.assertExit(r, OK)
        self.assertIn("rank 0: last completed #6 broadcast in [[1048576]] out [[1048576]] Float; in flight nothing",
                      r.stdout, r.describe())
        self.assertIn("every collective matched on every rank", r.stdout)
        self.assertIn("== NCCL 2.28.9", r.stdout)
        self.assertIn("== repro: none (the artifacts show a job of 1 rank: a repro needs 2 or more)", r.stdout)
        self.assertFalse(os.path.exists(os.path.join(out, "repro.lua")))
        # asking for a one-rank repro is still a usage error
        r, _ = self.triage(fx("real_h200_torch211/nccl_trace_rank_0"), "--ranks", "1")
        self.assertExit(r, BAD_INPUT)

    def test_ras_and_nccl_tests(self):
        r, out = self.triage(fx("ras.json", "nccl_tests.json"))
        self.assertExit(r, HEALTH)
        self.assertIn("NCCL RAS communicator 0x7c1f2e3d4b5a6978: 3 of 4 ranks responded; missing 2 (dead)", r.stdout)
        self.assertIn("#wrong 3", r.stdout)
        rep = json.load(open(os.path.join(out, "report.json")))
        kinds = {f.get("kind") for f in rep["findings"]}
        self.assertTrue({"triage.ras_missing", "triage.ras_behind", "triage.nccl_tests_wrong"} <= kinds, kinds)
        self.assertIn("repro: none", r.stdout)

    # (4) bad input: a clear message and exit 1, never a crash or a hang
    def test_bad_input(self):
        cases = {
            "bad/truncated_rank_0": "truncated",
            "bad/corrupted_rank_0": "pickle: ",
            "bad/hostile_rank_0": "opcode GLOBAL",
            "bad/stackglobal_rank_0": "opcode STACK_GLOBAL",
            "bad/deep_rank_0": "nested deeper than 64",
            "bad/huge_rank_0": "a string of 4294967295 bytes",
            "bad/laughs_rank_0": "values",
            "bad/cycle_rank_0": "nested deeper than 64",
            "bad/corrupt_rank_0.gz": "gzip data is corrupt",
            "bad/truncgz_rank_0.gz": "gzip data is truncated",
            "bad/deep.json": "nested deeper than 64",
            "bad/other.json": "no known kind",
            "bad/truncated_rank_1.json": "not valid JSON",
            "bad/mixed": "dumps of different versions cannot be matched",
            "bad/future_rank_0": "reads versions 2.x",
            "no_such_file": "no such file or directory",
        }
        for name, msg in cases.items():
            r, _ = self.triage(fx(name))
            self.assertExit(r, BAD_INPUT)
            self.assertIn(msg, r.stderr, name + "\n" + r.describe())
            self.assertNotIn("Traceback", r.stderr)
        self.assertFalse(os.path.exists("/tmp/pwn"))

    def test_reads_only_named_paths(self):
        # a recipe reads only what --paths names: not /etc/hostname, not its --config file, not
        # the working directory given as --out
        cfg = self.write("c.toml", "[options]\n")
        p = self.recipe("peek", 'require("cs.triage").load({ ctx.opt.what })',
                        decl_extra=', options = { what = { "", "x" }, paths = { {}, "x", type = "list" } }')
        for what in ("/etc/hostname", cfg, os.path.join(self.tmp, "c.toml")):
            r = cs_e2e.run(["--backend", "self", "--config", cfg, p, "--what", what], out_dir=self.tmp, cwd=self.tmp)
            self.assertExit(r, BAD_INPUT)
            self.assertIn(what + ": not named on the command line", r.stderr)
        r = cs_e2e.run(["--backend", "self", p, "--what", cfg, "--paths", self.tmp], out_dir=self.new_out(), cwd=self.tmp)
        self.assertExit(r, OK)


if __name__ == "__main__":
    cs_e2e.main()
