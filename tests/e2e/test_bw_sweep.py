"""bw_sweep end to end: under mpirun -np 1/2/3/4 and --backend self, every collective over a
small size range; the report.json, results.jsonl and the stdout table are checked against an
independent recomputation of the nccl-tests arithmetic (bytes, algbw, busbw factors)."""
import hashlib
import math
import os
import re
import unittest

import cs_e2e

ALL_OPS = ["allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "alltoall",
           "gather", "scatter", "sendrecv"]
# Collectives whose per-rank count is 1/n of the message (nccl-tests: size = count*elem*n).
GROUPED = {"allgather", "reduce_scatter", "alltoall", "gather", "scatter"}
REDUCING = {"allreduce", "reduce", "reduce_scatter"}
ROOTED = {"broadcast", "reduce", "gather", "scatter"}
ELEM = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
        "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}

MIN, MAX, ITERS, WARMUP = 8, 64 * 1024, 5, 1
SWEEP_ARGS = ["--ops", "all", "--min", "8", "--max", "64K", "--iters", str(ITERS), "--warmup", str(WARMUP)]

TOP_KEYS = ["commscript", "recipe", "run", "env", "topology", "results", "findings", "scorecard",
            "chaos", "incidents"]
NUMERIC = ["bytes", "count", "time_us", "time_rank_min_us", "time_rank_max_us", "algbw", "busbw", "busbw_factor",
           "wrong", "samples", "iter_mean_us", "min_us", "p50_us", "p95_us", "p99_us", "max_us", "stdev_us", "cv",
           "avg_p50_us", "avg_p99_us", "avg_max_us", "avg_cv",
           "ranks", "root", "iters", "warmup", "slowest_rank"]


def busbw_factor(op, n):
    """nccl-tests' bus bandwidth factors (doc/PERFORMANCE.md), computed here on their own."""
    if op == "allreduce":
        return 2.0 * (n - 1) / n
    if op in GROUPED:
        return (n - 1) / n
    return 1.0  # broadcast, reduce, sendrecv


def sweep_sizes(lo, hi, factor=2):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def expected_rows(n, dtype, inplace=True):
    """[(op, count, bytes, placement)] in the order bw_sweep takes them."""
    elem = ELEM[dtype]
    rows = []
    for op in ALL_OPS:
        for size in sweep_sizes(MIN, MAX):
            count = size // elem // (n if op in GROUPED else 1)
            if count == 0:
                continue
            nbytes = count * elem * (n if op in GROUPED else 1)
            for placement in (["out-of-place", "in-place"] if inplace else ["out-of-place"]):
                rows.append((op, count, nbytes, placement))
    return rows


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def close(a, b, rel=1e-6, abs_tol=1e-12):
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_tol)


def recipe_sha256():
    with open(os.path.join(cs_e2e.REPO, "recipes", "bw_sweep.lua"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class BwSweep(cs_e2e.TestCase):

    def sweep(self, n, dtype="float32", redop="sum", backend=None):
        args = (["--backend", backend] if backend else []) + ["bw_sweep"] + SWEEP_ARGS
        if dtype != "float32":
            args += ["--dtype", dtype]
        if redop != "sum":
            args += ["--op", redop]
        r = self.cs(args, np=None if backend == "self" else n, timeout=120)
        self.assertExit(r, cs_e2e.OK)
        self.check_all(r, n, dtype, redop, backend or "mpi")
        return r

    # ---------------------------------------------------------------- the checks
    def check_all(self, r, n, dtype, redop, backend):
        rep = r.report()
        self.check_report(rep, r, n, dtype, redop, backend)
        self.check_results(rep["results"], n, dtype, redop)
        self.check_jsonl(rep["results"], r.results_lines())
        self.check_table(r.stdout, rep["results"], n)

    def check_report(self, rep, r, n, dtype, redop, backend):
        self.assertEqual(rep.get("schema"), "commscript.report/2")
        for k in TOP_KEYS:
            self.assertIn(k, rep, "report.json lacks top-level key %r" % k)
        run = rep["run"]
        self.assertEqual(run["ranks"], n)
        self.assertTrue(is_number(run["ranks"]))
        self.assertEqual(run["exit_code"], 0)
        self.assertTrue(is_number(run["exit_code"]))
        self.assertEqual(run["backend"], backend)
        self.assertIsInstance(run["trusted"], bool)
        self.assertFalse(run["trusted"])
        self.assertTrue(is_number(run["duration_s"]) and run["duration_s"] >= 0, run["duration_s"])
        self.assertTrue(is_number(run["seed"]))
        self.assertTrue(is_number(run["timeout_s"]))
        self.assertTrue(is_number(run["hosts"]) and run["hosts"] >= 1)

        rec = rep["recipe"]
        self.assertEqual(rec["name"], "bw_sweep")
        self.assertEqual(rec["version"], cs_e2e.declared_version("bw_sweep"))
        self.assertEqual(rec["sha256"], recipe_sha256(),
                         "recipe.sha256 is not the sha256 of recipes/bw_sweep.lua (stale build?)")
        self.assertIsInstance(rec["bundled"], bool)
        opts = rec["options"]
        self.assertEqual(opts["iters"], ITERS)
        self.assertEqual(opts["warmup"], WARMUP)
        self.assertEqual(opts["min"], MIN)
        self.assertEqual(opts["max"], MAX)
        self.assertEqual(opts["ops"], ["all"])
        self.assertEqual(opts["dtype"], dtype)
        self.assertEqual(opts["op"], redop)
        self.assertIs(opts["check"], True)
        self.assertIs(opts["inplace"], True)
        for k in ("iters", "warmup", "min", "max", "root", "factor"):
            self.assertTrue(is_number(opts[k]), "recipe.options.%s = %r is not a number" % (k, opts[k]))

        self.assertIsInstance(rep["commscript"]["version"], str)
        self.assertIsInstance(rep["env"], dict)
        self.assertIsInstance(rep["findings"], list)
        self.assertEqual([f for f in rep["findings"] if f.get("severity") == "error"], [])
        self.assertIsInstance(rep["incidents"], list)
        self.assertEqual(rep["incidents"], [])

    def check_results(self, results, n, dtype, redop):
        want = expected_rows(n, dtype)
        got = [(x.get("op"), x.get("count"), x.get("bytes"), x.get("placement")) for x in results]
        self.assertEqual(got, want, "results are not the expected (op, count, bytes, placement) rows")
        elem = ELEM[dtype]
        for x in results:
            where = "%s %s %s: %r" % (x["op"], x["bytes"], x["placement"], x)
            for k in NUMERIC:
                self.assertIn(k, x, where)
                self.assertTrue(is_number(x[k]), "%s is not a JSON number in %s" % (k, where))
            self.assertIsInstance(x["inplace"], bool, where)
            self.assertIsInstance(x["checked"], bool, where)
            self.assertEqual(x["inplace"], x["placement"] == "in-place", where)
            self.assertIs(x["checked"], True, where)
            self.assertEqual(x["wrong"], 0, where)
            self.assertEqual(x["ranks"], n, where)
            self.assertEqual(x["dtype"], dtype, where)
            self.assertEqual(x["iters"], ITERS, where)
            self.assertEqual(x["warmup"], WARMUP, where)
            self.assertEqual(x["redop"], redop if x["op"] in REDUCING else "none", where)
            self.assertEqual(x["root"], 0 if x["op"] in ROOTED else -1, where)
            self.assertEqual(x["samples"], ITERS, where)
            self.assertEqual(x["timing"], "loop", where)
            # The headline: each rank's loop time / iters; time_us is their mean, with the min and
            # the max over ranks around it.
            self.assertGreater(x["time_us"], 0, where)
            self.assertEqual(len(x["rank_time_us"]), n, where)
            self.assertTrue(all(is_number(t) and t > 0 for t in x["rank_time_us"]), where)
            self.assertTrue(close(x["time_us"], sum(x["rank_time_us"]) / n), where)
            self.assertEqual(x["time_rank_min_us"], min(x["rank_time_us"]), where)
            self.assertEqual(x["time_rank_max_us"], max(x["rank_time_us"]), where)
            self.assertLessEqual(x["time_rank_min_us"], x["time_us"], where)
            self.assertLessEqual(x["time_us"], x["time_rank_max_us"], where)
            # The sampled pass: its own distribution and per-rank means.
            self.assertGreaterEqual(x["cv"], 0, where)
            self.assertTrue(close(x["cv"], x["stdev_us"] / x["iter_mean_us"]), where)
            self.assertLessEqual(x["min_us"], x["p50_us"], where)
            self.assertLessEqual(x["p50_us"], x["p95_us"], where)
            self.assertLessEqual(x["p95_us"], x["p99_us"], where)
            self.assertLessEqual(x["p99_us"], x["max_us"], where)
            self.assertLessEqual(x["min_us"], x["iter_mean_us"], where)
            self.assertLessEqual(x["iter_mean_us"], x["max_us"], where)
            self.assertEqual(len(x["rank_mean_us"]), n, where)
            self.assertEqual(x["slowest_rank"], x["rank_mean_us"].index(max(x["rank_mean_us"])), where)
            # The same pass averaged over ranks per iteration: each iteration's mean is at most its
            # maximum and at least 1/n of it, so the order statistics are bounded the same way
            # (equal on one rank, up to the picosecond sums' rounding).
            for a, m in (("avg_p50_us", "p50_us"), ("avg_max_us", "max_us"), ("avg_p99_us", "p99_us")):
                self.assertLessEqual(x[a], x[m] + 1e-6, where + " " + a)
                self.assertGreaterEqual(x[a], x[m] / n - 1e-6, where + " " + a)
                if n == 1:
                    self.assertLessEqual(abs(x[a] - x[m]), 1e-6, where + " " + a)
            self.assertGreaterEqual(x["avg_cv"], 0, where)
            # algbw: bytes moved per nccl-tests / time
            moved = x["count"] * elem * (n if x["op"] in GROUPED else 1)
            self.assertEqual(x["bytes"], moved, where)
            algbw = moved / 1e9 / (x["time_us"] * 1e-6)  # from the headline time
            self.assertTrue(close(x["algbw"], algbw), "algbw %r != %r recomputed; %s" % (x["algbw"], algbw, where))
            f = busbw_factor(x["op"], n)
            self.assertTrue(close(x["busbw_factor"], f), "busbw_factor %r != %r; %s" % (x["busbw_factor"], f, where))
            self.assertTrue(close(x["busbw"], algbw * f),
                            "busbw %r != algbw*%r = %r; %s" % (x["busbw"], f, algbw * f, where))

    def test_wrong_ranks_is_a_list(self):
        """wrong_ranks lists ranks: it must be a JSON array even when empty (not {})."""
        r = self.cs(["--backend", "self", "bw_sweep", "--min", "8", "--max", "16", "--iters", "1",
                     "--warmup", "0"])
        self.assertExit(r, cs_e2e.OK)
        for x in r.report()["results"] + r.results_lines():
            if "wrong_ranks" in x:
                self.assertIsInstance(x["wrong_ranks"], list, "wrong_ranks is %r in %r" % (x["wrong_ranks"], x))

    def check_jsonl(self, results, lines):
        self.assertEqual(len(lines), len(results), "results.jsonl and report.json differ in length")
        for i, (a, b) in enumerate(zip(lines, results)):
            self.assertEqual(a, b, "results.jsonl line %d differs from report.json results[%d]" % (i + 1, i))

    def check_table(self, stdout, results, n):
        lines = stdout.splitlines()
        headers = [l for l in lines if l.startswith("#") and re.search(r"\bsize\b", l)]
        self.assertTrue(headers, "no table header in stdout:\n" + stdout[-3000:])
        cols = headers[0].lstrip("#").split()
        pos = 0
        for c in ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "i_p50", "i_p99",
                  "i_cv%", "time", "algbw", "busbw", "#wrong", "i_p50", "i_p99", "i_cv%"]:
            self.assertIn(c, cols[pos:], "header lacks %r after position %d: %s" % (c, pos, headers[0]))
            pos = cols.index(c, pos) + 1
        self.assertIn("out-of-place", stdout)
        self.assertIn("in-place", stdout)
        self.assertRegex(stdout, r"#\s*Out of bounds values\s*:\s*0 OK")
        m = re.search(r"#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)", stdout)
        self.assertTrue(m, "no 'Avg bus bandwidth' line")
        avg = sum(x["busbw"] for x in results) / len(results)
        self.assertLessEqual(abs(float(m.group(1)) - avg), 5e-5 + 1e-9 * avg, "avg busbw in the footer")

        # Every data row matches the two results (out-of-place, in-place) it shows.
        rows = [l.split() for l in lines if l.strip() and not l.startswith("#")
                and re.match(r"^\s+\d+\s+\d+\s", l)]
        self.assertEqual(len(rows), len(results) // 2, "table rows vs results")
        for i, row in enumerate(rows):
            oop, ip = results[2 * i], results[2 * i + 1]
            self.assertEqual((oop["placement"], ip["placement"]), ("out-of-place", "in-place"))
            self.assertEqual(int(row[0]), oop["bytes"], row)
            self.assertEqual(int(row[1]), oop["count"], row)
            self.assertEqual(row[2], oop["dtype"], row)
            self.assertEqual(row[3], oop["redop"], row)
            self.assertEqual(int(row[4]), oop["root"], row)
            for half, res in ((row[5:12], oop), (row[12:19], ip)):
                self.assertEqual(len(half), 7, row)
                # nccl-tests' precision: 2 decimals below 100 us, 1 below 10000, then none
                t = res["time_us"]
                tol = 0.0051 if t < 100 else 0.051 if t < 10000 else 0.51
                self.assertLessEqual(abs(float(half[0]) - t), tol, row)
                # 2 decimals, fewer when the number needs the column's width (an in-place no-op
                # on the self backend reads 11299.3 GB/s): half a unit of the last digit printed
                for cell, key in ((half[1], "algbw"), (half[2], "busbw")):
                    decimals = len(cell.split(".")[1]) if "." in cell else 0
                    self.assertLessEqual(decimals, 2, row)
                    self.assertLessEqual(abs(float(cell) - res[key]), 0.51 * 10 ** -decimals + 1e-9, row)
                self.assertEqual(int(half[3]), res["wrong"], row)

    # ---------------------------------------------------------------- the runs
    def test_self_backend(self):
        self.sweep(1, backend="self")

    def test_mpi_np1(self):
        self.sweep(1)

    def test_mpi_np2(self):
        self.sweep(2)

    def test_mpi_np4(self):
        self.sweep(4)

    def test_int8_max_np4(self):
        self.sweep(4, dtype="int8", redop="max")

    def test_float64_avg_np3(self):
        # 3 ranks: factors 4/3 and 2/3, counts that do not divide the sizes.
        self.sweep(3, dtype="float64", redop="avg")

    def test_float16_self(self):
        # The self backend copies: every 16-bit result is exact, checked like any other dtype.
        self.sweep(1, dtype="float16", backend="self")

    def test_bfloat16_avg_self(self):
        self.sweep(1, dtype="bfloat16", redop="avg", backend="self")

    def test_16bit_floats_refused_on_mpi(self):
        # MPI has no 16-bit floating-point type: refused before the sweep starts (exit 1), naming
        # the dtype, the backend and what to use instead; nothing measured.
        for args in (["--dtype", "float16"], ["--dtypes", "float32,bfloat16"]):
            with self.subTest(args=args):
                r = self.cs(["bw_sweep", "--max", "64", "--iters", "2", "--warmup", "0"] + args, np=2)
                self.assertExit(r, cs_e2e.BAD_INPUT)
                dt = args[1].split(",")[-1]
                self.assertIn("bw_sweep.lua:", r.stderr)
                self.assertIn("dtype %s is not supported by --backend mpi: MPI has no 16-bit floating-point type"
                              % dt, r.stderr)
                self.assertIn("use --backend nccl for float16/bfloat16, or float32 on mpi", r.stderr)
                self.assertEqual(r.report()["results"], [])
                self.assertNotIn("# allreduce", r.stdout)

    def test_16bit_float_operation_refused_on_mpi(self):
        # A recipe that skips comm:supports(): the operation itself is refused (exit 1), naming the
        # recipe line, the collective and the communicator; comm:supports() says the same.
        recipe = self.write("half_allreduce.lua", """
local cs = require "commscript"
local recipe = cs.recipe { name = "half_allreduce", version = "1.0.0", requires = ">=0.1, <1.0",
  summary = "a float16 all-reduce" }
function recipe.run(ctx)
  local ok, why = ctx.comm:supports("half")
  ctx.log("supports: %s %s", tostring(ok), why)
  ctx.log("float32: %s", tostring(ctx.comm:supports("float32")))
  local t = cs.tensor("float16", 8)
  ctx.comm:allreduce(t, t)
end
return recipe
""")
        r = self.cs(["--trusted", recipe], np=2)
        self.assertExit(r, cs_e2e.BAD_INPUT)
        self.assertIn("supports: false not supported by --backend mpi: MPI has no 16-bit", r.stdout)
        self.assertIn("float32: true", r.stdout)
        self.assertRegex(r.stderr, r"half_allreduce.lua:10: allreduce on communicator 'world': dtype float16 is not "
                         r"supported by --backend mpi")

    def test_results_jsonl_is_one_object_per_line(self):
        r = self.cs(["bw_sweep", "--ops", "allreduce,broadcast", "--min", "8", "--max", "64", "--iters", "2",
                     "--warmup", "0", "--no-inplace"], np=2)
        self.assertExit(r, cs_e2e.OK)
        with open(r.path("results.jsonl")) as f:
            text = f.read()
        self.assertTrue(text.endswith("\n"), "results.jsonl does not end with a newline")
        lines = text.splitlines()
        self.assertEqual(len(lines), 2 * 4)  # 2 ops x 4 sizes, out-of-place only
        for l in lines:
            self.assertTrue(l.startswith("{") and l.endswith("}"), l)
        self.assertEqual([x["placement"] for x in r.results_lines()], ["out-of-place"] * 8)

    def test_no_inplace_table_has_no_inplace_half(self):
        """--no-inplace: the in-place half is absent from the table (not blank columns)."""
        r = self.cs(["bw_sweep", "--ops", "allreduce", "--min", "8", "--max", "64", "--iters", "3",
                     "--warmup", "0", "--no-inplace"], np=2)
        self.assertExit(r, cs_e2e.OK)
        res = r.report()["results"]
        lines = r.stdout.splitlines()
        self.assertNotIn("in-place", r.stdout.replace("out-of-place", ""))
        header = [l for l in lines if l.startswith("#") and re.search(r"\bsize\b", l)][0]
        self.assertEqual(header.lstrip("#").split(),
                         ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                          "i_p50", "i_p99", "i_cv%"])
        rows = [l for l in lines if re.match(r"^\s+\d+\s+\d+\s", l)]
        self.assertEqual(len(rows), len(res))
        for row, x in zip(rows, res):
            self.assertEqual(len(row.split()), 12, row)
            self.assertEqual(row, row.rstrip(), "trailing blanks: %r" % row)
            self.assertEqual(len(row), len(header), "row and header widths: %r" % row)
            self.assertEqual(int(row.split()[0]), x["bytes"])


if __name__ == "__main__":
    cs_e2e.main()
