#!/usr/bin/env bash
# Builds commscript against MPICH (the project must build with both OpenMPI and MPICH) without
# installing MPICH system-wide: Debian's libmpich packages are unpacked into a scratch
# directory, so the OpenMPI used by the tests stays the system's MPI. Compile and link only.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
work=$(realpath -m "${1:-$top/build-mpich}")  # absolute: cmake resolves relative paths elsewhere
mkdir -p "$work/debs" "$work/root"
(cd "$work/debs" && apt-get download libmpich-dev libmpich12 >/dev/null 2>&1 ||
  { echo "check-mpich-build: cannot download Debian's libmpich packages" >&2; exit 1; })
for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$work/root"; done
root=$work/root/usr
cmake -S "$top" -B "$work/build" -DCOMMSCRIPT_WITH_CUDA=OFF -DCOMMSCRIPT_BUILD_TESTS=OFF \
  -DMPI_C_COMPILER=/nonexistent -DMPI_C_HEADER_DIR="$root/include/x86_64-linux-gnu/mpich" \
  -DMPI_C_LIB_NAMES=mpich -DMPI_mpich_LIBRARY="$root/lib/x86_64-linux-gnu/libmpich.so" >/dev/null
cmake --build "$work/build" -j"$(nproc)"
grep -q "include/x86_64-linux-gnu/mpich" "$work/build/engine/CMakeFiles/commscript_comm.dir/flags.make"
libs=$(LD_LIBRARY_PATH="$root/lib/x86_64-linux-gnu" ldd "$work/build/commscript")  # no pipe: pipefail + grep -q
case "$libs" in *"libmpich.so.12 => $root"*) ;; *) echo "check-mpich-build: not linked against MPICH" >&2; exit 1 ;; esac
echo "check-mpich-build: commscript builds and links against MPICH ($(ls "$work"/debs | tr '\n' ' '))"
