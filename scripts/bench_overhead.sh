#!/usr/bin/env bash
# commscript's per-operation overhead against a plain C++ MPI loop (tests/bench/overhead.cpp):
# builds build-bench/ (Release) when needed, then runs the benchmark on 2 ranks and prints the
# table. A benchmark, not a test: it is not registered with ctest.
#   scripts/bench_overhead.sh [--rounds 10] [--scale 1] [--verbose] [--side lua|direct|control]
#                             [--method headline|sampled]
# Environment:
#   BUILD_DIR  build directory (default build-bench)
#   NP         ranks (default 2; the targets were set for 2)
#   MPIRUN     launcher (default mpirun; Open MPI's --oversubscribe is passed)
#   NICE       run the ranks under `nice -n $NICE` (e.g. -10 as root) so that other processes on a
#              small shared host preempt them less; unset: normal priority
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-bench}
NP=${NP:-2}
MPIRUN=${MPIRUN:-mpirun}
BIN="$BUILD_DIR/tests/bench/commscript_overhead_bench"

if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]] || ! grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$BUILD_DIR/CMakeCache.txt"; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
make -C "$BUILD_DIR" -j"$(nproc)" commscript_overhead_bench >/dev/null

# Open MPI refuses to run as root without these; harmless otherwise.
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
cmd=("$MPIRUN" -np "$NP" --oversubscribe "$BIN" "$@")
if [[ -n "${NICE:-}" ]]; then
  echo "(ranks run under nice -n $NICE)"
  cmd=(nice -n "$NICE" "${cmd[@]}")
fi
exec "${cmd[@]}"
