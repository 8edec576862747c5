#!/usr/bin/env bash
# Where commscript's timed loop spends its time next to the plain MPI loop, function by function:
# profiles both programs' ranks during their headline loops (perf record -a) and prints, per
# function, nanoseconds per call (its share of the ranks' samples x the time per call) in each
# and the difference. This is how issue 34 found Open MPI's libnbc progress callback in
# commscript's loops (docs/timing.md). A diagnostic, not a test: not registered with ctest.
#
#   scripts/profile_compare.sh [--bytes 8] [--iters 12000000] [--wait 3] [--window 2] [--after-bcast]
#
# --bytes      all-reduce size (float32 elements = bytes / 4)
# --iters      calls in each program's loop: make the loop last well past --wait + --window
# --wait S     seconds from the launch to the start of the profile (past start-up and warm-up)
# --window S   seconds profiled
# --after-bcast  commscript one broadcast later (scripts/anchors/after_bcast.lua): the same small-
#              message state as the plain loop (Open MPI's two states, docs/timing.md)
# Environment: BUILD_DIR (build), NP (2), MPIRUN (mpirun). Needs perf and mpicc. The host should
# be otherwise idle: the profile is system-wide.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
NP=${NP:-2}
MPIRUN=${MPIRUN:-mpirun}
BYTES=8 ITERS=12000000 WAIT=3 WINDOW=2 AFTER=0
WORK=""
die() {
  echo "profile_compare: $*" >&2
  [[ -n "$WORK" ]] && rm -rf "$WORK"
  exit 1
}
while (($#)); do
  case "$1" in
    --bytes) BYTES=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --wait) WAIT=$2; shift 2 ;;
    --window) WINDOW=$2; shift 2 ;;
    --after-bcast) AFTER=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) die "unknown option $1 (--help)" ;;
  esac
done
[[ "$BYTES" =~ ^[0-9]+$ && "$ITERS" =~ ^[0-9]+$ ]] || die "--bytes and --iters take whole numbers"
[[ "$WAIT" =~ ^[0-9.]+$ && "$WINDOW" =~ ^[0-9.]+$ ]] || die "--wait and --window take seconds"
command -v perf >/dev/null || die "perf is not installed (apt-get install linux-perf)"
CS=$(realpath "$BUILD_DIR/commscript" 2>/dev/null) || die "no $BUILD_DIR/commscript (set BUILD_DIR)"
[[ $(id -u) -eq 0 ]] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WORK=$(mktemp -d /tmp/profile_compare.XXXXXX)
mpicc -O2 -o "$WORK/plain_loop" scripts/anchors/plain_loop.c
warm=$((ITERS / 100 + 1))

# profile NAME COMM CMD...: CMD in the background, perf over the window, then wait for CMD.
profile() {
  local name=$1 comm=$2 pid
  shift 2
  "$@" >"$WORK/$name.out" 2>&1 &
  pid=$!
  sleep "$WAIT"
  perf record -a -o "$WORK/$name.data" -- sleep "$WINDOW" >/dev/null 2>&1
  wait "$pid" || die "$name failed: $(tail -3 "$WORK/$name.out")"
  perf report -i "$WORK/$name.data" --comm "$comm" --sort dso,sym --stdio 2>/dev/null |
    awk '/^ *[0-9.]+%/ { p = $1; sub(/%/, "", p); $1 = ""; sub(/^ /, ""); print p "\t" $0 }' >"$WORK/$name.sym"
  # Shares are of all samples: the ranks must have been busy for the whole window.
  local busy
  busy=$(awk -F'\t' '{ s += $1 } END { printf "%d", s }' "$WORK/$name.sym")
  ((busy >= 90)) || die "$name: its ranks hold $busy % of the window's samples, not ~100 %: the loop ended before the window (raise --iters) or started after it (raise --wait), or the host is busy"
}

profile plain plain_loop "$MPIRUN" -np "$NP" --oversubscribe "$WORK/plain_loop" allreduce "$BYTES:$ITERS:$warm"
recipe=(bw_sweep)
((AFTER)) && recipe=(--trusted scripts/anchors/after_bcast.lua)
# --samples 1: after the headline loop one sampled call, so the window sees the headline loop.
profile cs commscript "$MPIRUN" -np "$NP" --oversubscribe "$CS" --out "$WORK/cs" "${recipe[@]}" --ops allreduce \
  --min "$BYTES" --max "$BYTES" --iters "$ITERS" --warmup "$warm" --samples 1 --no-inplace

python3 - "$WORK" "$BYTES" <<'EOF'
import json, sys
work, nbytes = sys.argv[1], sys.argv[2]
def shares(name):
    out = {}
    for line in open(f"{work}/{name}.sym"):
        p, k = line.rstrip("\n").split("\t", 1)
        out[k.strip()] = out.get(k.strip(), 0.0) + float(p)
    return out
plain_us = float(open(f"{work}/plain.out").read().split()[3])
cs_us = json.loads(open(f"{work}/cs/results.jsonl").readline())["time_us"]
P, C = shares("plain"), shares("cs")
rows = sorted(((C.get(k, 0) * cs_us * 10 - P.get(k, 0) * plain_us * 10, P.get(k, 0) * plain_us * 10,
                C.get(k, 0) * cs_us * 10, k) for k in set(P) | set(C)), reverse=True)
print(f"all-reduce {nbytes} B: plain loop {plain_us:.3f} us, commscript {cs_us:.3f} us per call "
      f"({cs_us / plain_us:.3f}x); ns per call by function (share of samples x time per call)")
print(f"{'cs - plain':>10} {'plain':>8} {'cs':>8}  function")
for row in rows[:15] + [None] + rows[-5:]:
    if row is None:
        print(f"{'...':>10}")
    else:
        print(f"{row[0]:+10.1f} {row[1]:8.1f} {row[2]:8.1f}  {row[3]}")
EOF
echo "(profiles and outputs: $WORK)"
