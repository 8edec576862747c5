"""commscript's bw_sweep next to nccl-tests, per op and size (tests/gpu/run.sh, step 6).

    compare_nccl_tests.py WORK RESULTS_JSONL TOL MIN_BYTES OPS [DTYPES]

WORK holds nt-<op>.log, the output of nccl-tests' <op>_perf with -d float, and nt-<op>-<dtype>.log
for the other DTYPES (comma list of commscript dtypes, default float32: float16 is nccl-tests'
-d half, bfloat16 its -d bfloat16); RESULTS_JSONL is commscript's results.jsonl of the same
sweep (every dtype in one run, told apart by its dtype field). Prints busbw (GB/s, out-of-place) side by side with the ratio
commscript / nccl-tests; exits 1 when a size >= MIN_BYTES is missing on one side or its ratio is
outside 1 +- TOL, or when nothing was compared."""
import json
import os
import sys


def nccl_tests_busbw(text):
    """{size: out-of-place busbw} from an nccl-tests table. Its data rows are
    size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
    (redop 'none' and root '-1' where they do not apply)."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 9 and f[0].isdigit() and f[1].isdigit():
            try:
                out[int(f[0])] = float(f[7])
            except ValueError:
                pass
    return out


def commscript_busbw(lines, op, dtype):
    out = {}
    for line in lines:
        r = json.loads(line)
        if r.get("op") == op and r.get("dtype", "float32") == dtype and r.get("placement") == "out-of-place" \
                and "busbw" in r:
            out[int(r["bytes"])] = float(r["busbw"])
    return out


def main(argv):
    work, jsonl, tol, min_bytes, ops = argv[1], argv[2], float(argv[3]), int(argv[4]), argv[5].split(",")
    dtypes = argv[6].split(",") if len(argv) > 6 and argv[6] else ["float32"]
    lines = open(jsonl).read().splitlines() if os.path.exists(jsonl) else []
    bad, rows = 0, 0
    print("%-15s %-9s %12s %12s %12s %8s" % ("op", "dtype", "bytes", "nccl-tests", "commscript", "cs/nt"))
    for dtype, op in [(d, o) for d in dtypes for o in ops]:
        path = os.path.join(work, "nt-%s.log" % op if dtype == "float32" else "nt-%s-%s.log" % (op, dtype))
        nt = nccl_tests_busbw(open(path).read()) if os.path.exists(path) else {}
        cs = commscript_busbw(lines, op, dtype)
        for size in sorted(set(nt) | set(cs)):
            a, b = nt.get(size), cs.get(size)
            ratio = b / a if a and b is not None else None
            flag = ""
            if size >= min_bytes and (ratio is None or abs(ratio - 1) > tol):
                flag = "  <-- missing on one side" if ratio is None and (a is None or b is None) else \
                    "  <-- beyond +-%g%%" % (tol * 100)
                bad += 1
            rows += 1
            print("%-15s %-9s %12d %12s %12s %8s%s" % (op, dtype, size, "-" if a is None else "%.2f" % a,
                                                        "-" if b is None else "%.2f" % b,
                                                        "-" if ratio is None else "%.3f" % ratio, flag))
    print("busbw in GB/s (1e9 B/s), out-of-place; sizes below %d B shown, not judged" % min_bytes)
    return 0 if rows and not bad else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
