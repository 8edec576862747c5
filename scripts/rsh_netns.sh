#!/usr/bin/env bash
# The rsh/ssh agent that lets mpirun start its daemons on the namespace "hosts" of
# scripts/netns_hosts.sh. Open MPI calls it as it would call ssh:
#   rsh_netns.sh [ssh options] HOST COMMAND...
# e.g. `rsh_netns.sh -x cs-h2 orted -mca ess "env" ...` or with a `PATH=...; export PATH; ...`
# prefix. It runs COMMAND in HOST's network namespace, in a UTS namespace of its own whose
# hostname is HOST (so gethostname() there is HOST: Open MPI's per-host session directories
# under /tmp stay apart, and commscript names the host), keeping the environment it was given:
#   ip netns exec NS unshare --uts sh -c 'hostname HOST; eval COMMAND'
# Like ssh, the words of COMMAND are joined with spaces and given to a shell (orted's command
# line is written for that: quoted arguments, `;`-separated assignments).
#
# HOST: cs-hI (the namespace of the same name, cs-hI.TAG when CS_NETNS_TAG is set: see
# netns_hosts.sh), or its address on the test subnet (CS_NETNS_SUBNET.I+1, default 10.77.0.I+1),
# optionally user@HOST. Any other host is refused.
# ssh options are accepted and ignored: flags (-x, -T, -n, -q, -4, ... also combined: -xT) and
# options with a value (-o OPT, -oOPT, -p PORT, -l USER, -i FILE, -F FILE, ...).
#
# Use (mpirun itself runs in the launcher namespace, see netns_hosts.sh `run`):
#   scripts/netns_hosts.sh up 4 --rate 1gbit --throttle 2 100mbit
#   scripts/netns_hosts.sh run mpirun --mca plm_rsh_agent "$PWD/scripts/rsh_netns.sh" \
#     --mca plm_rsh_no_tree_spawn 1 --mca rtc ^hwloc --mca btl tcp,self \
#     --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
#     --mca mpi_yield_when_idle 1 -x OMPI_MCA_rtc=^hwloc --oversubscribe \
#     --host cs-h0:1,cs-h1:1,cs-h2:1,cs-h3:1 -np 4 "$PWD/build/commscript" full_diag
#   scripts/netns_hosts.sh down
# (no_tree_spawn: only the launcher calls this agent, and orted is told to --daemonize; rtc
# ^hwloc: orted may crash in hwloc's shared-memory topology code; yield_when_idle: the "hosts"
# share this machine's cores.)
# CS_RSH_NETNS_TRACE=FILE appends every call (the argv) to FILE, for debugging.
set -euo pipefail

SUBNET=${CS_NETNS_SUBNET:-10.77.0}
P=${CS_NETNS_PREFIX:-cs}  # the names' prefix (netns_hosts.sh)
[[ "$P" =~ ^[a-z][a-z0-9-]{0,7}$ ]] || { echo "rsh_netns.sh: bad CS_NETNS_PREFIX '$P'" >&2; exit 255; }
TAG=${CS_NETNS_TAG:-}
if [[ -n "${CS_RSH_NETNS_TRACE:-}" ]]; then printf '%q ' "$0" "$@" >>"$CS_RSH_NETNS_TRACE"; echo >>"$CS_RSH_NETNS_TRACE"; fi

while [[ $# -gt 0 ]]; do
  case "$1" in
    --) shift; break ;;
    -[BbcDEeFIiJLlmOopQRSWw]) shift; [[ $# -gt 0 ]] && shift ;;  # option and its value
    -?*) shift ;;                                                  # flag(s), or -oVALUE
    *) break ;;
  esac
done
[[ $# -ge 1 ]] || { echo "rsh_netns.sh: usage: rsh_netns.sh [options] HOST COMMAND..." >&2; exit 255; }
host=${1##*@}
shift

name=""
if [[ "$host" =~ ^$P-h[0-9]+$ ]]; then
  name=$host
elif [[ "$host" == "$SUBNET".* && "${host##*.}" =~ ^[0-9]+$ ]] && (( ${host##*.} >= 1 && ${host##*.} <= 200 )); then
  name=$P-h$(( ${host##*.} - 1 ))
fi
ns=${name:+$name${TAG:+.$TAG}}
if [[ -z "$ns" ]] || ! ip netns list | awk '{print $1}' | grep -qx "$ns"; then
  echo "rsh_netns.sh: unknown host '$host' (no namespace ${ns:-for it}; run scripts/netns_hosts.sh up N)" >&2
  exit 255
fi
[[ $# -ge 1 ]] || { echo "rsh_netns.sh: no command for $host" >&2; exit 255; }

# As ssh does: the remaining words, joined with spaces, are one shell command line.
exec ip netns exec "$ns" unshare --uts -- sh -c 'hostname "$0" && eval "$1"' "$name" "$*"
