"""commscript's bw_sweep next to nccl-tests, per op and size (tests/gpu/run.sh, step 6).

    compare_nccl_tests.py WORK RESULTS_JSONL TOL MIN_BYTES OPS [DTYPES]

WORK holds nt-<op>.log, the output of nccl-tests' <op>_perf with -d float, and nt-<op>-<dtype>.log
for the other DTYPES (comma list of commscript dtypes, default float32: float16 is nccl-tests'
-d half, bfloat16 its -d bfloat16); RESULTS_JSONL is commscript's results.jsonl of the same
sweep (every dtype in one run, told apart by its dtype field). Prints busbw (GB/s, out-of-place) side by side with the ratio
commscript / nccl-tests, and the out-of-place time (us) of each; exits 1 when a size >= MIN_BYTES is missing on one side or its ratio is
outside 1 +- TOL, or when nothing was compared."""
import json
import os
import sys


def nccl_tests_rows(text):
    """{size: (out-of-place time us, busbw)} from an nccl-tests table. Its data rows are
    size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
    (redop 'none' and root '-1' where they do not apply)."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 9 and f[0].isdigit() and f[1].isdigit():
            try:
                out[int(f[0])] = (float(f[5]), float(f[7]))
            except ValueError:
                pass
    return out


def nccl_tests_busbw(text):
    return {k: v[1] for k, v in nccl_tests_rows(text).items()}


def commscript_busbw(lines, op, dtype):
    out = {}
    for line in lines:
        r = json.loads(line)
        if r.get("op") == op and r.get("dtype", "float32") == dtype and r.get("placement") == "out-of-place" \
                and "busbw" in r:
            out[int(r["bytes"])] = (float(r.get("time_us", 0)), float(r["busbw"]))
    return out


def main(argv):
    work, jsonl, tol, min_bytes, ops = argv[1], argv[2], float(argv[3]), int(argv[4]), argv[5].split(",")
    dtypes = argv[6].split(",") if len(argv) > 6 and argv[6] else ["float32"]
    lines = open(jsonl).read().splitlines() if os.path.exists(jsonl) else []
    bad, rows = 0, 0
    print("%-15s %-9s %12s %10s %10s %10s %10s %8s" % ("op", "dtype", "bytes", "nt us", "cs us", "nt busbw",
                                                       "cs busbw", "cs/nt"))
    for dtype, op in [(d, o) for d in dtypes for o in ops]:
        path = os.path.join(work, "nt-%s.log" % op if dtype == "float32" else "nt-%s-%s.log" % (op, dtype))
        ntr = nccl_tests_rows(open(path).read()) if os.path.exists(path) else {}
        csr = commscript_busbw(lines, op, dtype)
        for size in sorted(set(ntr) | set(csr)):
            ta, a = ntr.get(size, (None, None))
            tb, b = csr.get(size, (None, None))
            ratio = b / a if a and b is not None else None
            flag = ""
            if size >= min_bytes and (ratio is None or abs(ratio - 1) > tol):
                flag = "  <-- missing on one side" if ratio is None and (a is None or b is None) else \
                    "  <-- beyond +-%g%%" % (tol * 100)
                bad += 1
            rows += 1
            def f(v, fmt):
                return "-" if v is None else fmt % v
            print("%-15s %-9s %12d %10s %10s %10s %10s %8s%s" % (op, dtype, size, f(ta, "%.1f"), f(tb, "%.1f"),
                                                              f(a, "%.2f"), f(b, "%.2f"), f(ratio, "%.3f"), flag))
    print("time in us, busbw in GB/s (1e9 B/s), out-of-place; sizes below %d B shown, not judged" % min_bytes)
    return 0 if rows and not bad else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
