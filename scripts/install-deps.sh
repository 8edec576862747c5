#!/usr/bin/env bash
# Installs the Debian packages commscript needs to build and test (run as root, or with sudo).
# CUDA and NCCL are optional and not installed here: the build finds them when present.
# Gloo is optional too, but a Debian package, so it is installed.
#
#   scripts/install-deps.sh [--slurm] [--browser] [--prometheus] [--all]
#
# Without options: what the build and most tests need (help2man for the man page included).
# The optional groups bring what some tests need, which skip without it (CI installs them all,
# and fails instead of skipping: .ci/run):
#   --slurm       Slurm (slurmctld, slurmd, slurm-client) and munge: tests/e2e/test_slurm.py and
#                 scripts/slurm_cluster.sh (a cluster of network-namespace nodes on this machine)
#   --browser     Chromium (about 120 MB to download, 410 MB on disk): report.html opened in a
#                 headless browser (scale_html_chromium)
#   --prometheus  Prometheus (the server and promtool): the metrics test
#   --all         all three
# Installing slurmctld, slurmd, munge or prometheus starts no daemon here (no init system in
# the container); the tests start their own, with their own configuration.
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
      python3-mpi4py  # the embedding tests of the Python module
      help2man)       # commscript.1 from --help (the .deb's man page)
for arg in "$@"; do
  case "$arg" in
    --slurm) pkgs+=(slurmctld slurmd slurm-client munge) ;;
    --browser) pkgs+=(chromium) ;;
    --prometheus) pkgs+=(prometheus) ;;
    --all) pkgs+=(slurmctld slurmd slurm-client munge chromium prometheus) ;;
    *) echo "install-deps.sh: unknown option $arg (--slurm, --browser, --prometheus, --all)" >&2; exit 1 ;;
  esac
done
missing=()
for p in "${pkgs[@]}"; do  # (a package removed but not purged is not installed)
  [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
