#!/usr/bin/env bash
# Builds, on a Debian build machine, a relocatable GPU kit: everything tests/gpu/run.sh needs on a
# GPU machine that has no MPI, no LuaJIT, no Debian packages and no network (Ubuntu 24.04, the CUDA
# runtime in the toolkit's standard place, NVML beside the driver, NCCL only inside a Python
# environment). The kit holds:
#   bin/commscript, bin/commscript_unit_tests   stripped, built with CUDA/NCCL (opened at run time)
#   lib/                                         the non-system libraries they link (ldd): Open MPI,
#                                                LuaJIT, Gloo, toml++, hwloc, ... and libcommscript.so
#   python/commscript                            the embedding module (ctypes over libcommscript.so)
#   nccl-tests/*_perf                            nccl-tests built with nvcc for KIT_ARCH (static cudart)
#   run.sh, compare_nccl_tests.py, torch_copies.py, KIT   the checks (tests/gpu/run.sh) and what was built
#   check_cost.lua                               the check-cost benchmark (tests/bench), run by run.sh
#
#   scripts/gpu-kit.sh [KIT_DIR]     default build-kit/commscript-gpu-kit
# Environment: KIT_ARCH (CUDA architectures, default "90": H100/H200), NCCL_TESTS_SRC (a checkout of
# github.com/NVIDIA/nccl-tests, or a bare git directory of it; without it the kit has no
# nccl-tests and run.sh says so), BUILD_DIR (default build-gpu-kit), JOBS, KIT_MAX_MIB (60).
# Run it on the GPU machine as `KIT_DIR/run.sh`; see docs/nccl.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KIT=${1:-$ROOT/build-kit/commscript-gpu-kit}
BUILD=${BUILD_DIR:-$ROOT/build-gpu-kit}
JOBS=${JOBS:-$(nproc)}
ARCH=${KIT_ARCH:-90}
MAX_MIB=${KIT_MAX_MIB:-60}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

die() {
  echo "gpu-kit: $*" >&2
  exit 1
}
[ -x "$CUDA_HOME/bin/nvcc" ] || die "no nvcc under CUDA_HOME=$CUDA_HOME (the kit's nccl-tests are built with it)"
[ -f "$CUDA_HOME/include/nccl.h" ] || die "no nccl.h under $CUDA_HOME/include (NCCL's headers build the NCCL backend)"

mkdir -p "$ROOT/build-kit"
echo "==> commscript (RelWithDebInfo, stripped below; CUDA/NCCL) in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOMMSCRIPT_WITH_CUDA=ON -DCOMMSCRIPT_FAKE_GPU=OFF \
  ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} >"$ROOT/build-kit/cmake.log" 2>&1 ||
  { tail -20 "$ROOT/build-kit/cmake.log"; die "cmake failed"; }
cmake --build "$BUILD" -j"$JOBS" --target commscript_cli commscript_unit_tests commscript_shared >"$ROOT/build-kit/make.log" 2>&1 ||
  { tail -30 "$ROOT/build-kit/make.log"; die "build failed"; }
grep -q 'COMMSCRIPT_HAVE_NCCL' "$BUILD/CMakeCache.txt" 2>/dev/null || true

rm -rf "$KIT"
mkdir -p "$KIT/bin" "$KIT/lib" "$KIT/python" "$KIT/nccl-tests"
strip -o "$KIT/bin/commscript" "$BUILD/commscript"
strip -o "$KIT/bin/commscript_unit_tests" "$BUILD/tests/unit/commscript_unit_tests"
so=$(readlink -f "$BUILD/libcommscript.so")
strip -o "$KIT/lib/$(basename "$so")" "$so"
(cd "$KIT/lib" && ln -sf "$(basename "$so")" libcommscript.so.1 && ln -sf libcommscript.so.1 libcommscript.so)
cp -r "$BUILD/python/commscript" "$KIT/python/"  # the build's copy: with its generated _exit_codes.py
find "$KIT/python" -name __pycache__ -prune -exec rm -rf {} +

# The libraries every GPU machine has (the C and C++ runtimes) stay; everything else comes along.
# CUDA, NCCL and NVML are opened at run time from the GPU machine, never bundled.
echo "==> libraries"
for f in "$KIT/bin/commscript" "$KIT/bin/commscript_unit_tests" "$so"; do
  ldd "$f" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  case $name in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux* | libstdc++.so.* | libgcc_s.so.*) ;;
    libcuda.so.* | libcudart.so.* | libnccl.so.* | libnvidia-ml.so.*) die "$name is linked, not opened at run time" ;;
    *) [ -e "$KIT/lib/$name" ] || strip -o "$KIT/lib/$name" "$(readlink -f "$path")" 2>/dev/null ||
         cp -L "$path" "$KIT/lib/$name" ;;
  esac
done

# nccl-tests with nvcc, single-process (MPI=0: -g GPUs per process), cudart linked statically so
# that the kit does not depend on the GPU machine's runtime version; NCCL from the machine.
NT=${NCCL_TESTS_SRC:-}
if [ -n "$NT" ]; then
  echo "==> nccl-tests for sm_$ARCH from $NT"
  src=$ROOT/build-kit/nccl-tests-src
  if [ -d "$NT/src" ]; then
    rm -rf "$src" && cp -r "$NT" "$src"
  else  # a bare git directory (the search tool's fetch gives one)
    rm -rf "$src" && mkdir -p "$src" && git --git-dir="$NT" archive HEAD | tar -x -C "$src"
  fi
  nh=$ROOT/build-kit/nccl-home
  mkdir -p "$nh/lib" && ln -sfn "$CUDA_HOME/include" "$nh/include"
  ln -sf "$CUDA_HOME/lib64/libnccl.so" "$nh/lib/libnccl.so"
  gencode=""
  for a in $ARCH; do gencode+=" -gencode=arch=compute_$a,code=sm_$a"; done
  make -C "$src" -j"$JOBS" MPI=0 CUDA_HOME="$CUDA_HOME" NCCL_HOME="$nh" CUDARTLIB=cudart_static \
    NVCC_GENCODE="$gencode" BUILDDIR="$src/build" >"$ROOT/build-kit/nccl-tests.make.log" 2>&1 ||
    { tail -30 "$ROOT/build-kit/nccl-tests.make.log"; die "nccl-tests build failed"; }
  for b in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
    strip -o "$KIT/nccl-tests/${b}_perf" "$src/build/${b}_perf"
  done
  ntv=$(sed -n 's/^#define NCCL_TESTS_VERSION "\(.*\)"/nccl-tests \1/p' "$src/src/common.h" 2>/dev/null | head -1)
  [ -n "$ntv" ] || ntv=$(git --git-dir="$NT" log -1 --format=%s 2>/dev/null || echo "nccl-tests")
else
  echo "==> no NCCL_TESTS_SRC: the kit has no nccl-tests (run.sh skips the side by side, saying so)"
  ntv=none
fi

cp "$ROOT/tests/gpu/run.sh" "$ROOT/tests/gpu/compare_nccl_tests.py" "$ROOT/tests/gpu/torch_copies.py" "$ROOT/tests/gpu/torch_fr_dump.py" "$ROOT/tests/bench/check_cost.lua" "$KIT/"
{
  echo "commscript $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "built $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), CUDA $("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), sm_$ARCH"
  echo "nccl-tests: $ntv"
} >"$KIT/KIT"

mib=$(du -sm "$KIT" | cut -f1)
echo "==> $KIT: ${mib} MiB"
ls -la "$KIT/bin" "$KIT/lib" | sed 's/^/    /'
[ "$mib" -lt "$MAX_MIB" ] || die "the kit is ${mib} MiB, over ${MAX_MIB} MiB"
echo "gpu-kit: ok ($KIT, ${mib} MiB); on the GPU machine: $KIT/run.sh"
