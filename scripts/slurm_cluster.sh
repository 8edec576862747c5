#!/usr/bin/env bash
# A real Slurm cluster on this one machine, for trying commscript under srun/sbatch and for its
# e2e test (tests/e2e/test_slurm.py). Debian's packages (scripts/install-deps.sh --slurm, or
# apt-get install slurmctld slurmd slurm-client munge): munged, slurmctld and one slurmd per
# host, each host a network namespace of scripts/netns_hosts.sh with its own host name and
# address. Needs root, iproute2, tc and unshare.
#
#   scripts/slurm_cluster.sh up [N] [--rate RATE] [--throttle HOST_INDEX RATE]
#       Brings up N nodes (default 4), slm-h0..slm-h{N-1} at SUBNET.1..N, and the controller's
#       namespace slm-launch (SUBNET.254), which also holds munged; waits until every node is
#       idle. --rate RATE limits every node's link (the fabric's speed, e.g. 1gbit; unlimited, the
#       veths run at memory speed and the nodes' ranks compete for this machine's cores);
#       --throttle I RATE limits node I's link instead, in both directions (a tbf qdisc on both
#       ends of its veth: scripts/netns_hosts.sh). Removes any leftover of the same set first.
#       Prints the variables to export for the client commands (SLURM_CONF).
#   scripts/slurm_cluster.sh run COMMAND...
#       Runs COMMAND (srun, sbatch, squeue, scancel, sinfo, ...) in the controller's namespace
#       with SLURM_CONF set (and SLURM_PMIX_FENCE=tree unless set: see run()), e.g.
#         scripts/slurm_cluster.sh run srun -N 4 --mpi=pmix build/commscript full_diag
#   scripts/slurm_cluster.sh kill-node I [--slurmd-only]
#       The node fails: SIGKILL to every process of node I (its slurmd, slurmstepd and tasks).
#       --slurmd-only: to its slurmd alone (the step's processes on it go on; slurmctld declares
#       the node DOWN after SlurmdTimeout, 6 s here, and ends the job's steps elsewhere).
#   scripts/slurm_cluster.sh revive I
#       Ends what is left on node I, starts its slurmd again, waits until every node is idle.
#   scripts/slurm_cluster.sh down [--stale]
#       Ends every daemon and task (they all live in the set's namespaces), removes the
#       namespaces and the state directory. Idempotent. --stale: instead, removes every set
#       whose SLM_TAG is the pid of no running process (what a killed test left).
#   scripts/slurm_cluster.sh status
#       sinfo and squeue.
# Environment:
#   SLM_TAG     sets apart concurrent sets (the namespaces are slm-h0.TAG, ...; the state directory
#               /tmp/slm-cluster.TAG). The test uses its pid. [A-Za-z0-9_] only.
#   SLM_SUBNET  the first three octets of the /24 (default 10.86.0).
#   SLM_DIR     the state directory (configuration, munge key and socket, logs, spool).
# Everything (logs included) lives in SLM_DIR: slurmctld.log, slurmd-slm-hI.log, munged.log.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TAG=${SLM_TAG:-}
[[ "$TAG" =~ ^[A-Za-z0-9_]*$ ]] || { echo "slurm_cluster.sh: bad SLM_TAG '$TAG'" >&2; exit 1; }
SFX=${TAG:+.$TAG}
SUBNET=${SLM_SUBNET:-10.86.0}
DIR=${SLM_DIR:-/tmp/slm-cluster$SFX}
export CS_NETNS_PREFIX=slm CS_NETNS_SUBNET=$SUBNET CS_NETNS_TAG=$TAG
LAUNCH=slm-launch$SFX
export CG=$DIR/cg  # in_ns's mount point for a moment

die() { echo "slurm_cluster.sh: $*" >&2; exit 1; }

in_ns() {  # NS HOSTNAME COMMAND...: COMMAND in namespace NS with its own host name
  local ns=$1 name=$2
  shift 2
  # As `ip netns exec`, a sysfs of the namespace's own (the topology stage lists its NICs), but
  # with the machine's /sys/fs/cgroup kept under it (slurmd needs it), in a mount namespace of
  # its own: nothing is mounted or changed outside.
  nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private -- sh -c '
    hostname "$0" && mount --rbind /sys/fs/cgroup "$CG" && mount -t sysfs sysfs /sys &&
    mount --rbind "$CG" /sys/fs/cgroup && umount -l "$CG" && exec "$@"' "$name" "$@"
}

write_conf() {  # N
  local n=$1 i
  cat >"$DIR/slurm.conf" <<EOF
# Written by scripts/slurm_cluster.sh: a test cluster, everything as root under $DIR.
ClusterName=slm
SlurmctldHost=slm-launch($SUBNET.254)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$DIR/munge.sock
CredType=cred/munge
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/spool/%n
# Per node: srun --mpi=pmix makes spmix_appdir_* there, and the nodes share one file system.
TmpFS=$DIR/tmp/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
# A node that stops answering is DOWN after 6 s; a cancelled job gets SIGKILL 3 s after SIGTERM.
SlurmdTimeout=6
SlurmctldTimeout=10
KillWait=3
MessageTimeout=5
InactiveLimit=0
MinJobAge=60
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  for ((i = 0; i < n; i++)); do
    echo "NodeName=slm-h$i NodeAddr=$SUBNET.$((i + 1)) CPUs=$(nproc) State=UNKNOWN" >>"$DIR/slurm.conf"
  done
}

wait_idle() {  # N: until sinfo shows N idle nodes (30 s)
  local n=$1 idle
  for _ in $(seq 150); do
    idle=$(in_ns "$LAUNCH" slm-launch env SLURM_CONF="$DIR/slurm.conf" sinfo -h -N -t idle -o %N 2>/dev/null | wc -l)
    [[ "$idle" -eq "$n" ]] && return 0
    sleep 0.2
  done
  in_ns "$LAUNCH" slm-launch env SLURM_CONF="$DIR/slurm.conf" sinfo -N >&2 || true
  die "the $n nodes did not become idle within 30 s (logs: $DIR/*.log)"
}

up() {
  local n=4 i shape=()
  if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then n=$1; shift; fi
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --throttle) [[ $# -ge 3 ]] || die "--throttle needs HOST_INDEX RATE"; shape+=(--throttle "$2" "$3"); shift 3 ;;
      --rate) [[ $# -ge 2 ]] || die "--rate needs a value"; shape+=(--rate "$2"); shift 2 ;;
      *) die "unknown option: $1" ;;
    esac
  done
  (( n >= 1 && n <= 16 )) || die "N must be 1..16"
  for c in munged mungekey slurmctld slurmd srun; do
    command -v "$c" >/dev/null || die "$c not found: scripts/install-deps.sh --slurm (Debian: slurmctld slurmd slurm-client munge)"
  done
  down
  mkdir -p "$DIR/ctld" "$DIR/spool" "$CG"
  chmod 700 "$DIR"
  mungekey --create --keyfile="$DIR/munge.key" --force >/dev/null
  chmod 600 "$DIR/munge.key"
  write_conf "$n"
  "$HERE/netns_hosts.sh" up "$n" "${shape[@]}" >/dev/null
  # munged runs as root here (--force): the key, socket and logs are in $DIR, not /etc/munge.
  in_ns "$LAUNCH" slm-launch munged --force --key-file="$DIR/munge.key" --socket="$DIR/munge.sock" \
    --pid-file="$DIR/munged.pid" --log-file="$DIR/munged.log" --seed-file="$DIR/munged.seed"
  in_ns "$LAUNCH" slm-launch slurmctld -f "$DIR/slurm.conf" -i
  for ((i = 0; i < n; i++)); do
    mkdir -p "$DIR/spool/slm-h$i" "$DIR/tmp/slm-h$i"
    in_ns "slm-h$i$SFX" "slm-h$i" slurmd -f "$DIR/slurm.conf" -N "slm-h$i"
  done
  wait_idle "$n"
  echo "export SLURM_CONF=$DIR/slurm.conf"
}

down() {
  "$HERE/netns_hosts.sh" down  # kills every process inside the set's namespaces: daemons and tasks
  rm -rf "$DIR"
}

node_ns() {  # I: the namespace of node I, which must exist
  [[ "${1:-}" =~ ^[0-9]+$ ]] || die "not a node index: '${1:-}'"
  ip netns list | awk '{print $1}' | grep -qx "slm-h$1$SFX" || die "no node $1 (slm-h$1$SFX)"
  echo "slm-h$1$SFX"
}

kill_node() {  # I [--slurmd-only]
  local ns pid
  ns=$(node_ns "${1:-}")
  if [[ "${2:-}" == "--slurmd-only" ]]; then
    pid=$(cat "$DIR/slurmd-slm-h$1.pid" 2>/dev/null) || die "no pid file for slm-h$1's slurmd"
    kill -9 "$pid"
    return 0
  fi
  [[ $# -eq 1 ]] || die "usage: kill-node I [--slurmd-only]"
  for pid in $(ip netns pids "$ns"); do kill -9 "$pid" 2>/dev/null || true; done
}

revive() {  # I: what is left on node I ended, its slurmd started again, until every node is idle
  local ns pid n
  ns=$(node_ns "${1:-}")
  for pid in $(ip netns pids "$ns"); do kill -9 "$pid" 2>/dev/null || true; done
  in_ns "$ns" "slm-h$1" slurmd -f "$DIR/slurm.conf" -N "slm-h$1"
  n=$(grep -c '^NodeName=' "$DIR/slurm.conf")
  wait_idle "$n"  # ReturnToService=2: a DOWN node is back once its slurmd registers
}

stale() {  # the sets of killed runs (SLM_TAG a pid that no longer runs): namespaces and state
  local d tag
  CS_NETNS_TAG="" "$HERE/netns_hosts.sh" down --stale
  for d in /tmp/slm-cluster.*; do
    [[ -d "$d" ]] || continue
    tag=${d##*.}
    [[ "$tag" =~ ^[0-9]+$ ]] && ! kill -0 "$tag" 2>/dev/null && rm -rf "$d"
  done
  return 0
}

run() {
  [[ $# -ge 1 ]] || die "usage: run COMMAND..."
  [[ -f "$DIR/slurm.conf" ]] || die "no cluster: run \`up\` first"
  # SLURM_PMIX_FENCE=tree unless set: with Slurm 22.05's default (a ring for a fence with data),
  # about 1 srun --mpi=pmix launch in 16 crashed a rank in MPI_Init here (docs/launching.md).
  SLURM_CONF="$DIR/slurm.conf" SLURM_PMIX_FENCE=${SLURM_PMIX_FENCE:-tree} in_ns "$LAUNCH" slm-launch "$@"
}

[[ $(id -u) -eq 0 ]] || die "needs root"
cmd=${1:-}
[[ $# -gt 0 ]] && shift
case "$cmd" in
  up) up "$@" ;;
  down) if [[ "${1:-}" == "--stale" ]]; then stale; else down; fi ;;
  run) run "$@" ;;
  kill-node) kill_node "$@" ;;
  revive) revive "$@" ;;
  status) run sh -c 'sinfo -N; squeue' ;;
  *) die "usage: $0 up [N] [--rate RATE] [--throttle I RATE] | run COMMAND... | kill-node I [--slurmd-only] | revive I | down [--stale] | status" ;;
esac
