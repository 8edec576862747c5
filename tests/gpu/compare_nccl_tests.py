"""commscript's bw_sweep next to nccl-tests, per op and size (tests/gpu/run.sh, step 6).

    compare_nccl_tests.py WORK RESULTS_JSONL TOL MIN_BYTES OPS [DTYPES]

WORK holds nt-<op>.log, the output of nccl-tests' <op>_perf with -d float, and nt-<op>-<dtype>.log
for the other DTYPES (comma list of commscript dtypes, default float32: float16 is nccl-tests'
-d half, bfloat16 its -d bfloat16); RESULTS_JSONL is commscript's results.jsonl of the same
sweep (every dtype in one run, told apart by its dtype field). Prints busbw (GB/s, out-of-place) side by side with the ratio
commscript / nccl-tests, and the out-of-place time (us) of each; exits 1 when a size >= MIN_BYTES is missing on one side or its ratio is
outside 1 +- TOL, or when nothing was compared. Sizes whose nccl-tests time is under LAUNCH_X times
the op's smallest (per-call overhead, not bytes moved) are shown, not judged; with one rank, where
busbw is 0 by definition, the ratio is of speeds (nccl-tests' time over commscript's)."""
import json
import os
import sys

LAUNCH_X = 4  # a judged size takes at least this many times the op's per-call floor


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
        try:  # a killed run's last line may be cut short: it says nothing, the rest still counts
            r = json.loads(line)
        except ValueError:
            continue
        if not isinstance(r, dict):
            continue
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
        # Sizes whose time is per-call overhead (launch, group calls) rather than moving bytes are
        # shown, not judged: nccl-tests' time there is under LAUNCH_X x its median time over the op's 4 smallest
        # sizes (the per-call floor).
        small = sorted((k, v[0]) for k, v in ntr.items() if k > 0 and v[0] > 0)[:4]
        floor = sorted(t for _, t in small)[len(small) // 2] if small else 0
        for size in sorted(set(ntr) | set(csr)):
            ta, a = ntr.get(size, (None, None))
            tb, b = csr.get(size, (None, None))
            if a and b is not None:
                ratio = b / a
            elif a == 0 and b == 0 and ta and tb:  # one rank: busbw is 0 by definition; compare speed
                ratio = ta / tb
            else:
                ratio = None
            judged = size >= min_bytes and (ta is None or ta >= LAUNCH_X * floor)
            flag = ""
            if judged and (ratio is None or abs(ratio - 1) > tol):
                flag = "  <-- missing on one side" if ratio is None and (a is None or b is None) else \
                    "  <-- beyond +-%g%%" % (tol * 100)
                bad += 1
            elif not judged and size >= min_bytes:
                flag = "  (launch-bound: not judged)"
            rows += judged
            def f(v, fmt):
                return "-" if v is None else fmt % v
            print("%-15s %-9s %12d %10s %10s %10s %10s %8s%s" % (op, dtype, size, f(ta, "%.1f"), f(tb, "%.1f"),
                                                              f(a, "%.2f"), f(b, "%.2f"), f(ratio, "%.3f"), flag))
    print("time in us, busbw in GB/s (1e9 B/s), out-of-place; cs/nt is the busbw ratio (the time ratio nt/cs where "
          "busbw is 0: one rank); judged from %d B where nccl-tests' time is at least %dx its time at the op's smallest sizes"
          % (min_bytes, LAUNCH_X))
    return 0 if rows and not bad else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
