#!/usr/bin/env bash
# The GPU suite: what only a machine with an NVIDIA GPU can check. Builds commscript with
# CUDA/NCCL (COMMSCRIPT_WITH_CUDA=ON) into $BUILD_DIR (default build-gpu), then runs
#   1. the hidden [gpu] unit tests: device tensors, every collective on a one-rank NCCL
#      communicator with the result checked, CUDA-event vs host-clock timing, a receive nobody
#      sends (timeout, ncclCommAbort, the operation named), host buffers refused, copy bandwidth
#      and GPU topology;
#   2. bw_sweep --backend nccl --ops all on one rank (and on every GPU when there are several),
#      in float32 and again in float16 and bfloat16 (--dtypes), checked: exit 0 and
#      "Out of bounds values : 0";
#   3. gpu_copy_bw (host<->GPU, GPU<->GPU);
#   4. CUDA-event vs host timing through the CLI (COMMSCRIPT_TIMING=event|host);
#   5. a hang under --backend nccl (chaos hang on rank 1 of 2: two GPUs, or two ranks on one GPU
#      when NCCL allows it) ends with exit 5 and a timeout incident instead of hanging;
#   6. with an nccl-tests checkout given (first argument, or NCCL_TESTS_SRC): builds it (MPI=1),
#      runs all_reduce_perf, all_gather_perf, reduce_scatter_perf, broadcast_perf, reduce_perf,
#      alltoall_perf and sendrecv_perf and commscript's bw_sweep on the same ranks, sizes and
#      iterations, for each of CMP_DTYPES (default "float32 float16 bfloat16": nccl-tests' -d
#      float, half, bfloat16), and prints busbw side by side per dtype, op and size (out-of-place)
#      with the ratio commscript / nccl-tests; a ratio outside 1 +- CMP_TOL (0.10) at a size >=
#      CMP_MIN_BYTES (1048576: below it both are latency-bound and noisy) fails the check;
# and prints a summary. Exit 0 when nothing failed. Without an NVIDIA GPU it prints
# "no NVIDIA GPU: skipped" and exits 0.
#
#   tests/gpu/run.sh [NCCL_TESTS_SRC]   (BUILD_DIR=..., JOBS=..., KEEP=1 keeps the run directories,
#                                        CMP_NP ranks for the side by side: default every GPU, max 8)
#   e.g. git clone https://github.com/NVIDIA/nccl-tests /tmp/nccl-tests && tests/gpu/run.sh /tmp/nccl-tests
set -u

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "no NVIDIA GPU: skipped"
  exit 0
fi

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc)}
NGPU=$(nvidia-smi -L | grep -c '^GPU ')
WORK=$(mktemp -d /tmp/cs-gpu-XXXXXX)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=$(command -v mpirun || command -v mpiexec || echo mpirun)
CS=$BUILD/commscript

RESULTS=()  # "STATUS|name|detail"
FAILED=0
record() {  # status name detail
  RESULTS+=("$1|$2|$3")
  [ "$1" = FAIL ] && FAILED=1
  printf '==> %-4s %s: %s\n' "$1" "$2" "$3"
}

summary() {
  echo
  echo "GPU suite summary ($NGPU GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | sed 's/^ *//' | paste -sd ';' -))"
  printf '%-6s %-28s %s\n' status check detail
  for r in "${RESULTS[@]}"; do
    IFS='|' read -r st name detail <<<"$r"
    printf '%-6s %-28s %s\n' "$st" "$name" "$detail"
  done
  [ "${KEEP:-0}" = 1 ] && echo "run directories kept in $WORK" || rm -rf "$WORK"
  exit $FAILED
}

# A field of the results.jsonl of a run: the first line with op=$2 and inplace=false.
jsonl_time() {  # dir op
  python3 - "$1/results.jsonl" "$2" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("op") == sys.argv[2] and not r.get("inplace"):
        print(r["time_us"]); break
PY
}

# ---- build ----
echo "==> building into $BUILD"
if ! { cmake -S "$ROOT" -B "$BUILD" -DCOMMSCRIPT_WITH_CUDA=ON >"$WORK/cmake.log" 2>&1 &&
       make -C "$BUILD" -j"$JOBS" >"$WORK/make.log" 2>&1; }; then
  tail -30 "$WORK/cmake.log" "$WORK/make.log"
  record FAIL build "see the log above"
  KEEP=1 summary
fi
record PASS build "$("$CS" --version | grep -E '^(NCCL|CUDA):' | paste -sd ';' -)"

# ---- 1. unit tests that need a GPU ----
if "$BUILD/tests/unit/commscript_unit_tests" "[gpu]" -s >"$WORK/unit.log" 2>&1; then
  record PASS "unit [gpu]" "$(tail -2 "$WORK/unit.log" | head -1)"
else
  grep -B3 -A12 'FAILED' "$WORK/unit.log" | head -80
  record FAIL "unit [gpu]" "$(tail -2 "$WORK/unit.log" | head -1)"
fi
grep -E 'CUDA events p50|never-matched recv' "$WORK/unit.log" | sed 's/^/    /'

# ---- 2. collectives through the CLI, checked ----
sweep() {  # name np extra-args...
  local name=$1 np=$2
  shift 2
  local out=$WORK/$name
  timeout 600 "$MPIRUN" -np "$np" --oversubscribe "$CS" --backend nccl --out "$out" bw_sweep --ops all \
    --max 64M --iters 5 --warmup 2 "$@" >"$out.log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ] && grep -q '^# Out of bounds values : 0 ' "$out.log"; then
    record PASS "$name" "$(grep '^# Avg bus bandwidth' "$out.log" | sed 's/^# *//')"
  else
    tail -20 "$out.log"
    record FAIL "$name" "exit $rc; $(grep '^# Out of bounds' "$out.log" | sed 's/^# *//')"
  fi
}
sweep "bw_sweep nccl 1 rank" 1
sweep "bw_sweep nccl 1 rank f16/bf16" 1 --dtypes float16,bfloat16
if [ "$NGPU" -ge 2 ]; then
  n=$((NGPU > 8 ? 8 : NGPU))
  sweep "bw_sweep nccl $n ranks" "$n"
  sweep "bw_sweep nccl $n ranks f16/bf16" "$n" --dtypes float16,bfloat16
  sweep "bw_sweep nccl $n ranks bf16 avg" "$n" --dtype bfloat16 --op avg --ops allreduce,reduce,reduce_scatter
else
  record SKIP "bw_sweep nccl n ranks" "one GPU only"
fi

# ---- 3. copy bandwidths ----
if timeout 600 "$CS" --backend self --out "$WORK/copy" gpu_copy_bw --bytes 64M >"$WORK/copy.log" 2>&1 &&
   grep -q 'memcpy CE CPU(row) -> GPU(column)' "$WORK/copy.log"; then
  record PASS gpu_copy_bw "pinned H2D GPU 0: $(awk '/CPU\(row\) -> GPU/{f=1} f&&$1=="pinned"{print $2; exit}' "$WORK/copy.log") GB/s"
  grep -A4 'GPU(row) -> GPU(column)' "$WORK/copy.log" | sed 's/^/    /'
else
  tail -20 "$WORK/copy.log"
  record FAIL gpu_copy_bw "see the log above"
fi

# ---- 4. CUDA events vs the host clock, through the CLI ----
for t in event host; do
  COMMSCRIPT_TIMING=$t timeout 300 "$MPIRUN" -np 1 "$CS" --backend nccl --out "$WORK/time-$t" bw_sweep \
    --ops allreduce --min 256M --max 256M --iters 20 --no-check >"$WORK/time-$t.log" 2>&1
done
ev=$(jsonl_time "$WORK/time-event" allreduce 2>/dev/null)
ho=$(jsonl_time "$WORK/time-host" allreduce 2>/dev/null)
if [ -n "$ev" ] && [ -n "$ho" ] && python3 -c "import sys; e,h=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if 0.5*h <= e <= 1.1*h else 1)" "$ev" "$ho"; then
  record PASS "event vs host timing" "allreduce 256M: events ${ev} us, host ${ho} us"
else
  record FAIL "event vs host timing" "allreduce 256M: events '${ev}' us, host '${ho}' us (expected events within 0.5-1.1 x host)"
fi

# ---- 5. a hang ends with a timeout, not a hung job ----
hang() {  # name extra-env...
  local name=$1
  shift
  local out=$WORK/hang
  rm -rf "$out"
  env "$@" timeout 180 "$MPIRUN" -np 2 --oversubscribe "$CS" --backend nccl --timeout 10 --out "$out" \
    --set 'chaos=[{kind="hang", ranks=[1], after=4}]' bw_sweep --ops allreduce --max 1M --iters 5 >"$out.log" 2>&1
  echo $?
}
if [ "$NGPU" -ge 2 ]; then
  rc=$(hang "2 GPUs")
  how="2 ranks on 2 GPUs"
else
  rc=$(hang "1 GPU" COMMSCRIPT_DEVICE=0)
  how="2 ranks on GPU 0"
fi
if [ "$rc" = 5 ] && python3 -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if any(i.get('kind')=='timeout' for i in r['incidents']) else 1)" "$WORK/hang/report.json" 2>/dev/null; then
  record PASS "timeout + abort (chaos hang)" "$how: exit 5, $(grep -m1 -E '^timeout:' "$WORK/hang.log" | cut -c1-120)"
elif [ "$NGPU" -lt 2 ] && grep -qiE 'duplicate GPU|invalid usage' "$WORK/hang.log"; then
  record SKIP "timeout + abort (chaos hang)" "NCCL refuses two ranks on one GPU; the one-rank never-matched recv of 'unit [gpu]' covers the abort"
else
  tail -20 "$WORK/hang.log"
  record FAIL "timeout + abort (chaos hang)" "$how: exit $rc (expected 5 with a timeout incident)"
fi

# ---- 6. side by side with nccl-tests ----
NT_SRC=${1:-${NCCL_TESTS_SRC:-}}
if [ -z "$NT_SRC" ]; then
  record SKIP "nccl-tests side by side" "no nccl-tests checkout given (tests/gpu/run.sh PATH or NCCL_TESTS_SRC)"
  summary
fi
CMP_NP=${CMP_NP:-$((NGPU > 8 ? 8 : NGPU))}
CMP_TOL=${CMP_TOL:-0.10}
CMP_MIN_BYTES=${CMP_MIN_BYTES:-1048576}
CMP_MAX=${CMP_MAX:-256M}
CMP_DTYPES=${CMP_DTYPES:-float32 float16 bfloat16}
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")}
MPI_HOME=${MPI_HOME:-$(dirname "$(dirname "$(command -v mpicc || echo /usr/bin/mpicc)")")}
# The NCCL commscript loaded (its --version line names the path) builds nccl-tests too, so both
# run on the same library; NCCL_HOME overrides.
if [ -z "${NCCL_HOME:-}" ]; then
  lib=$("$CS" --version | sed -n 's/^NCCL:.* (\(\/[^)]*libnccl[^)]*\)).*/\1/p' | head -1)
  [ -n "$lib" ] && NCCL_HOME=$(dirname "$(dirname "$lib")")
fi
nt_make=(make -C "$NT_SRC" -j"$JOBS" MPI=1 MPI_HOME="$MPI_HOME" CUDA_HOME="$CUDA_HOME")
[ -n "${NCCL_HOME:-}" ] && nt_make+=(NCCL_HOME="$NCCL_HOME")
if ! "${nt_make[@]}" >"$WORK/nccl-tests-make.log" 2>&1; then
  tail -20 "$WORK/nccl-tests-make.log"
  record FAIL "nccl-tests build" "make in $NT_SRC failed (CUDA_HOME=$CUDA_HOME MPI_HOME=$MPI_HOME NCCL_HOME=${NCCL_HOME:-default})"
  summary
fi
NT_BIN=$NT_SRC/build
CMP_OPS="allreduce:all_reduce_perf allgather:all_gather_perf reduce_scatter:reduce_scatter_perf broadcast:broadcast_perf reduce:reduce_perf alltoall:alltoall_perf sendrecv:sendrecv_perf"
ops_csv=""
for pair in $CMP_OPS; do
  op=${pair%%:*}
  exe=${pair#*:}
  [ -x "$NT_BIN/$exe" ] || continue
  for dt in $CMP_DTYPES; do
    case $dt in
      float32) ntd=float log=$WORK/nt-$op.log ;;
      float16) ntd=half log=$WORK/nt-$op-$dt.log ;;
      *) ntd=$dt log=$WORK/nt-$op-$dt.log ;;
    esac
    # One GPU per process (-g 1), sum, the same sizes (x2), iterations and warm-up as below.
    timeout 600 "$MPIRUN" -np "$CMP_NP" --oversubscribe "$NT_BIN/$exe" -b 8 -e "$CMP_MAX" -f 2 -g 1 -n 20 -w 5 \
      -d "$ntd" -o sum >"$log" 2>&1 || echo "    $exe -d $ntd exited $?"
  done
  ops_csv+="${ops_csv:+,}$op"
done
dtypes_csv=$(echo $CMP_DTYPES | tr ' ' ',')
out=$WORK/cmp
timeout 900 "$MPIRUN" -np "$CMP_NP" --oversubscribe "$CS" --backend nccl --out "$out" bw_sweep --ops "$ops_csv" \
  --min 8 --max "$CMP_MAX" --iters 20 --warmup 5 --dtypes "$dtypes_csv" >"$out.log" 2>&1 ||
  echo "    commscript bw_sweep exited $?"
if python3 "$ROOT/tests/gpu/compare_nccl_tests.py" "$WORK" "$out/results.jsonl" "$CMP_TOL" "$CMP_MIN_BYTES" "$ops_csv" \
     "$dtypes_csv"; then
  record PASS "nccl-tests side by side" "$CMP_NP ranks, ops $ops_csv, dtypes $dtypes_csv: busbw within +-$CMP_TOL from $CMP_MIN_BYTES B"
else
  record FAIL "nccl-tests side by side" "$CMP_NP ranks: a size differs beyond +-$CMP_TOL (table above), or a side is missing"
fi

summary
