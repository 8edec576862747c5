#!/usr/bin/env bash
# Every bundled recipe with --backend nccl on the GPU stand-in (a build configured with
# -DCOMMSCRIPT_FAKE_GPU=ON), at the given rank counts: exit code, wall time and #wrong (the sum of
# the "wrong" fields of report.json's results), as a Markdown table. No real GPU is involved.
#
#   scripts/fake_gpu_table.sh [BUILD_DIR (build-fake)] [RANKS ("1 2 4")]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-fake}
RANKS=${2:-1 2 4}
CS=$BUILD/commscript
export LD_LIBRARY_PATH=$BUILD/fake_gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export FAKE_GPU_STRICT=1
WORK=$(mktemp -d /tmp/cs-fake-table-XXXXXX)
# Options that keep each run short; the recipes' own defaults otherwise.
args_for() {
  case $1 in
    bw_sweep) echo "--ops all --max 64K --iters 3 --warmup 1" ;;
    latency) echo "--max 4K" ;;
    p2p_matrix) echo "--bytes 16K --lat_iters 5 --repeats 1" ;;
    full_diag) echo "--max 64K" ;;
    soak) echo "--duration 3" ;;
    gpu_copy_bw) echo "--bytes 1M" ;;
    *) echo "" ;;
  esac
}
echo "| recipe | ranks | exit | time (s) | #wrong |"
echo "|---|---|---|---|---|"
for f in "$ROOT"/recipes/*.lua; do
  r=$(basename "$f" .lua)
  for np in $RANKS; do
    out=$WORK/$r-$np
    t0=$(date +%s.%N)
    # shellcheck disable=SC2046
    timeout 300 mpirun --oversubscribe -np "$np" "$CS" --backend nccl --timeout 20 --out "$out" "$r" \
      $(args_for "$r") >"$out.log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    wrong=$(python3 -c "import json,sys
try:
    rep = json.load(open(sys.argv[1]))
except Exception:
    print('-'); sys.exit()
print(sum(int(x.get('wrong', 0) or 0) for x in rep.get('results', []) if isinstance(x, dict)))" "$out/report.json")
    printf '| %s | %d | %d | %.1f | %s |\n' "$r" "$np" "$rc" "$(echo "$t1 - $t0" | bc)" "$wrong"
  done
done
echo
echo "logs and reports in $WORK"
