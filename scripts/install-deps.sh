#!/usr/bin/env bash
# Installs the Debian packages commscript needs to build and test (run as root, or with sudo).
# CUDA and NCCL are optional and not installed here: the build finds them when present.
# Gloo is optional too, but a Debian package, so it is installed.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
pkgs=(build-essential cmake pkg-config git
      libluajit-5.1-dev luajit
      libopenmpi-dev openmpi-bin
      libtomlplusplus-dev nlohmann-json3-dev libcli11-dev catch2 libssl-dev zlib1g-dev libhwloc-dev
      lua-unit python3
      libgloo-dev     # --backend gloo (optional at build time, like NCCL)
      python3-mpi4py)  # the embedding tests of the Python module
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
