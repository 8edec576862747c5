#!/usr/bin/env bash
# Runs each libFuzzer target of tests/fuzz for a fixed time (default 20 s each).
#   scripts/fuzz.sh [SECONDS] [BUILD_DIR]
# Builds them first in BUILD_DIR (default build-fuzz) with clang: CC=clang CXX=clang++ and
# -DCOMMSCRIPT_FUZZ=ON. Corpora are kept in BUILD_DIR/corpus/<target>; a crash leaves
# crash-* files in BUILD_DIR/artifacts and fails the script (turn each into a regression test).
# FUZZ_SEED (default 1) fixes libFuzzer's random seed so a CI run explores the same way each time;
# FUZZ_SEED=0 picks a fresh seed (long local runs: FUZZ_SEED=0 scripts/fuzz.sh 600).
# FUZZ_TARGETS (default all) picks some: FUZZ_TARGETS="fuzz_env fuzz_options" scripts/fuzz.sh 600.
# The targets' stdout (--help texts) is closed (-close_fd_mask=1).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
dir=${2:-build-fuzz}
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is needed (apt-get install clang)" >&2; exit 1; }
if [ ! -f "$dir/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCOMMSCRIPT_FUZZ=ON -DCOMMSCRIPT_BUILD_TESTS=OFF \
    -DCOMMSCRIPT_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
targets=(${FUZZ_TARGETS:-fuzz_config fuzz_size fuzz_replay fuzz_pickle fuzz_options fuzz_env})
cmake --build "$dir" --target "${targets[@]}" -j "${JOBS:-2}"
mkdir -p "$dir/artifacts"
status=0
for t in "${targets[@]}"; do
  mkdir -p "$dir/corpus/$t"
  seeds=()
  [ -d "tests/fuzz/seeds/$t" ] && seeds=("tests/fuzz/seeds/$t")
  echo "== $t: ${secs} s"
  if ! "$dir/tests/fuzz/$t" -max_total_time="$secs" -seed="${FUZZ_SEED:-1}" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -close_fd_mask=1 \
      -artifact_prefix="$dir/artifacts/$t-" "$dir/corpus/$t" "${seeds[@]}" 2>"$dir/$t.log"; then
    echo "fuzz.sh: $t found a failure (see $dir/$t.log and $dir/artifacts/)" >&2
    tail -40 "$dir/$t.log" >&2
    status=1
  else
    grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs" "$dir/$t.log" | tail -1 || true
  fi
done
exit $status
