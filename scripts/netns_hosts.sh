#!/usr/bin/env bash
# Several "hosts" on this one machine, joined by real links, for multi-host tests of commscript
# (tests/e2e/test_multihost.py). Needs root, iproute2 (ip netns, veth, bridge) and tc.
#
#   scripts/netns_hosts.sh up N [--slots S] [--rate RATE] [--throttle HOST_INDEX RATE]
#                              [--throttle-link I J RATE]
#       Creates (after removing any leftovers of the same set, so `up` is idempotent):
#         cs-sw       a "switch" namespace holding the bridge br0 (stp off, forward delay 0);
#         cs-h0..cs-h{N-1}  one namespace per host, lo up, one veth `cs-eth` (10.77.0.(I+1)/24)
#                     whose peer `p-hI` is a port of br0 in cs-sw;
#         cs-launch   the launcher's namespace, veth `cs-eth` (10.77.0.254/24, peer `p-launch`)
#                     on the same bridge: mpirun runs there (see `run`), so that the orted of
#                     every host can reach it and the root namespace is never touched.
#       The veth pairs are created directly inside cs-sw with their peer in the host's namespace:
#       no interface, address, route or qdisc is ever added to the root namespace. IPv6 is off in
#       these namespaces (only the 10.77.0.0/24 test subnet exists there).
#       --throttle I RATE  limits host I's link to RATE (a tc rate: 100mbit, 1gbit, ...) in both
#                   directions with a tbf qdisc on the egress of both ends of its veth (cs-eth in
#                   cs-hI: what the host sends; p-hI in cs-sw: what it receives).
#       --throttle-link I J RATE  limits the path between hosts I and J alone to RATE in both
#                   directions (a slow link; every other path of I and J keeps its speed): an htb
#                   qdisc on cs-eth in cs-hI with a class for J's address at RATE (the rest
#                   unlimited there: --rate still holds at the receiving hosts' switch ports), and
#                   the same in cs-hJ for I's address.
#       --rate RATE the same limit on every host's link (the fabric's speed; --throttle overrides
#                   it for its host). Unlimited, the veths run at memory speed and the ranks of
#                   different "hosts" compete for this machine's cores: a pair whose two ranks
#                   share a core is then several times slower than the others. A rate at which the
#                   transfer time dominates (1gbit for 256 KB messages) makes that noise small.
#                   The launcher's link is never limited.
#       --slots S   slots per host in the printed hostfile (default 1).
#       Prints a hostfile on stdout: one `cs-hI slots=S` line per host.
#   scripts/netns_hosts.sh shape [--rate RATE] [--throttle HOST_INDEX RATE] [--throttle-link I J RATE]
#       Reshapes the links of the set that is up, in place: removes every qdisc of its hosts'
#       links, then applies the options as `up` does (no option: every link unlimited). Faster
#       than a new `up` between runs that differ only in their throttles.
#   scripts/netns_hosts.sh down [--stale]
#       Ends the processes left in the set's namespaces (by pid, from `ip netns pids`: orted
#       daemonizes, so an interrupted mpirun can leave them), then removes the namespaces (and so
#       their veths, bridge and qdiscs). Idempotent. --stale: instead, removes every tagged set
#       (see CS_NETNS_TAG) whose tag is the pid of no running process.
#   scripts/netns_hosts.sh run COMMAND...
#       Runs COMMAND in the launcher's namespace with the hostname `cs-launch` (its own UTS
#       namespace), keeping the environment. This is where mpirun goes:
#         scripts/netns_hosts.sh run mpirun --mca plm_rsh_agent "$PWD/scripts/rsh_netns.sh" ...
#       (the full command line is in scripts/rsh_netns.sh and tests/e2e/test_multihost.py).
#   scripts/netns_hosts.sh status
#       Lists the set's namespaces, addresses and qdiscs.
# Environment:
#   CS_NETNS_TAG     sets apart concurrent sets (two test runs at once): the namespaces are then
#                    named cs-h0.TAG, cs-sw.TAG, cs-launch.TAG (the hostnames stay cs-hI; every
#                    set has its own bridge, so they can all use the same subnet). rsh_netns.sh
#                    reads it too (mpirun passes its environment to the agent). A pid as the tag
#                    lets `down --stale` clean up after a killed run. [A-Za-z0-9_] only.
#   CS_NETNS_SUBNET  the first three octets of the /24 used (default 10.77.0).
#   CS_NETNS_PREFIX  the names' prefix (default cs: cs-h0.., cs-sw, cs-launch), so that another
#                    test's set (e.g. CS_NETNS_PREFIX=cs-sr, subnet 10.78.0) never meets this one.
set -euo pipefail

SUBNET=${CS_NETNS_SUBNET:-10.77.0}
TAG=${CS_NETNS_TAG:-}
[[ "$TAG" =~ ^[A-Za-z0-9_]*$ ]] || { echo "netns_hosts.sh: bad CS_NETNS_TAG '$TAG'" >&2; exit 1; }
P=${CS_NETNS_PREFIX:-cs}
[[ "$P" =~ ^[a-z][a-z0-9-]{0,7}$ ]] || { echo "netns_hosts.sh: bad CS_NETNS_PREFIX '$P'" >&2; exit 1; }
SFX=${TAG:+.$TAG}
SW=$P-sw$SFX
LAUNCH=$P-launch$SFX
BR=br0
IF=cs-eth

die() { echo "netns_hosts.sh: $*" >&2; exit 1; }

all_ns() { ip netns list 2>/dev/null | awk '{print $1}'; }

ours() {  # the namespaces of this set (and only those)
  all_ns | grep -E "^($P-h[0-9]+|$P-sw|$P-launch)${SFX//./\\.}\$" || true
}

remove() {  # NS...: end the processes inside, delete the namespaces (switch last)
  local ns pid
  for ns in "$@"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
  done
  for ns in "$@"; do [[ "$ns" == "$P-sw"* ]] || ip netns del "$ns" 2>/dev/null || true; done
  for ns in "$@"; do [[ "$ns" != "$P-sw"* ]] || ip netns del "$ns" 2>/dev/null || true; done
}

down() {
  if [[ "${1:-}" == "--stale" ]]; then
    local ns tag
    for ns in $(all_ns | grep -E "^($P-h[0-9]+|$P-sw|$P-launch)\\.[0-9]+\$" || true); do
      tag=${ns##*.}
      kill -0 "$tag" 2>/dev/null || remove "$ns"
    done
    return 0
  fi
  remove $(ours)
  # `ip netns del` can leave the name behind for a moment while the namespace is still in use.
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    [[ -z "$(ours)" ]] && return 0
    sleep 0.2
    remove $(ours)
  done
  [[ -z "$(ours)" ]] || die "could not remove: $(ours | tr '\n' ' ')"
}

ns_base() {  # NS: lo up, IPv6 off
  local ns=$1
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 2>/dev/null || true
}

attach() {  # NS PORT ADDR: a veth from NS (named $IF there) to the bridge port PORT in $SW
  local ns=$1 port=$2 addr=$3
  ip -n "$SW" link add "$port" type veth peer name "$IF" netns "$ns"
  ip -n "$SW" link set "$port" master "$BR" up
  ip -n "$ns" addr add "$addr/24" dev "$IF"
  ip -n "$ns" link set "$IF" up
}

throttle() {  # I RATE: tbf on the egress of both ends of host I's link
  local i=$1 rate=$2
  # burst: 64 KB (a TSO segment; ~5 ms at 100mbit); latency bounds the queue.
  tc -n "$P-h$i$SFX" qdisc replace dev "$IF" root tbf rate "$rate" burst 64kb latency 50ms
  tc -n "$SW" qdisc replace dev "p-h$i" root tbf rate "$rate" burst 64kb latency 50ms
}

link_throttle() {  # I J RATE BASE: host I's egress towards host J's address at RATE (htb), the rest at BASE
  local i=$1 j=$2 rate=$3 base=${4:-10gbit} ns="$P-h$1$SFX"
  tc -n "$ns" qdisc replace dev "$IF" root handle 1: htb default 10
  tc -n "$ns" class add dev "$IF" parent 1: classid 1:10 htb rate "$base" burst 64kb quantum 60000
  tc -n "$ns" class add dev "$IF" parent 1: classid 1:20 htb rate "$rate" burst 64kb quantum 60000
  tc -n "$ns" filter add dev "$IF" parent 1: protocol ip prio 1 u32 match ip dst "$SUBNET.$((j + 1))/32" flowid 1:20
}

reachable() {  # ADDR: from the launcher, within ~5 s (no ping here: a TCP connection to a
  local out    # closed port, answered "refused" by the host's kernel, proves the path)
  for _ in $(seq 50); do
    out=$(ip netns exec "$LAUNCH" timeout 1 bash -c "exec 3<>/dev/tcp/$1/9" 2>&1) && return 0
    [[ "$out" == *refused* ]] && return 0
    sleep 0.1
  done
  return 1
}

# The options that shape the links (up and shape): sets O_SLOTS O_RATE O_T_HOST O_T_RATE O_L_A
# O_L_B O_L_RATE.
shape_opts() {  # N OPTIONS...
  local n=$1
  shift
  O_SLOTS=1 O_RATE="" O_T_HOST="" O_T_RATE="" O_L_A="" O_L_B="" O_L_RATE=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --slots) [[ $# -ge 2 ]] || die "--slots needs a value"; O_SLOTS=$2; shift 2 ;;
      --rate) [[ $# -ge 2 ]] || die "--rate needs a value"; O_RATE=$2; shift 2 ;;
      --throttle) [[ $# -ge 3 ]] || die "--throttle needs HOST_INDEX RATE"; O_T_HOST=$2; O_T_RATE=$3; shift 3 ;;
      --throttle-link) [[ $# -ge 4 ]] || die "--throttle-link needs I J RATE"; O_L_A=$2; O_L_B=$3; O_L_RATE=$4; shift 4 ;;
      *) die "unknown option: $1" ;;
    esac
  done
  if [[ -n "$O_T_HOST" ]]; then
    [[ "$O_T_HOST" =~ ^[0-9]+$ ]] && (( O_T_HOST < n )) || die "--throttle: no host $O_T_HOST"
  fi
  if [[ -n "$O_L_A" ]]; then
    [[ "$O_L_A" =~ ^[0-9]+$ && "$O_L_B" =~ ^[0-9]+$ ]] && (( O_L_A < n && O_L_B < n && O_L_A != O_L_B )) ||
      die "--throttle-link: $O_L_A $O_L_B is not a pair of hosts"
  fi
}

apply_shape() {  # N: the qdiscs of shape_opts on hosts 0..N-1
  local n=$1 i
  for ((i = 0; i < n; i++)); do
    if [[ -n "$O_T_HOST" ]] && (( i == O_T_HOST )); then
      throttle "$i" "$O_T_RATE"
    elif [[ -n "$O_RATE" ]]; then
      throttle "$i" "$O_RATE"
    fi
  done
  if [[ -n "$O_L_A" ]]; then  # after the tbfs: it replaces the host end's root qdisc
    # the rest of the two hosts' egress unlimited here: --rate still holds at the switch port of
    # every receiving host (an htb class at --rate slows more than the tbf does: the two hosts'
    # other paths would be slower than everyone's, a slow host rather than a slow link)
    link_throttle "$O_L_A" "$O_L_B" "$O_L_RATE" 10gbit
    link_throttle "$O_L_B" "$O_L_A" "$O_L_RATE" 10gbit
  fi
}

up() {
  [[ $# -ge 1 && "$1" =~ ^[0-9]+$ ]] || die "usage: up N [--slots S] [--rate RATE] [--throttle HOST_INDEX RATE] [--throttle-link I J RATE]"
  local n=$1 i
  shift
  (( n >= 1 && n <= 200 )) || die "N must be 1..200"
  shape_opts "$n" "$@"
  down
  ns_base "$SW"
  ip -n "$SW" link add "$BR" type bridge stp_state 0 forward_delay 0
  ip -n "$SW" link set "$BR" up
  for ((i = 0; i < n; i++)); do
    ns_base "$P-h$i$SFX"
    attach "$P-h$i$SFX" "p-h$i" "$SUBNET.$((i + 1))"
  done
  ns_base "$LAUNCH"
  attach "$LAUNCH" p-launch "$SUBNET.254"
  apply_shape "$n"
  for ((i = 0; i < n; i++)); do
    reachable "$SUBNET.$((i + 1))" || die "$P-h$i ($SUBNET.$((i + 1))) is not reachable from $LAUNCH"
  done
  for ((i = 0; i < n; i++)); do echo "$P-h$i slots=$O_SLOTS"; done
}

shape() {  # the set's links reshaped in place (no namespace re-made): every qdiscs removed, then the options'
  local n i
  n=$(ours | grep -c -E "^$P-h[0-9]+" || true)
  (( n >= 1 )) || die "no hosts: run \`up N\` first"
  shape_opts "$n" "$@"
  for ((i = 0; i < n; i++)); do
    tc -n "$P-h$i$SFX" qdisc del dev "$IF" root 2>/dev/null || true
    tc -n "$SW" qdisc del dev "p-h$i" root 2>/dev/null || true
  done
  apply_shape "$n"
}

status() {
  local ns
  for ns in $(ours); do
    echo "== $ns"
    ip -n "$ns" -br addr | grep -v '^lo ' || true
    tc -n "$ns" qdisc show | grep -E 'tbf|htb' || true
  done
}

run() {
  [[ $# -ge 1 ]] || die "usage: run COMMAND..."
  all_ns | grep -qx "$LAUNCH" || die "no $LAUNCH namespace: run \`up N\` first"
  exec ip netns exec "$LAUNCH" unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "$P-launch" "$@"
}

[[ $(id -u) -eq 0 ]] || die "needs root"
cmd=${1:-}
[[ $# -gt 0 ]] && shift
case "$cmd" in
  up) up "$@" ;;
  shape) shape "$@" ;;
  down) down "$@" ;;
  run) run "$@" ;;
  status) status ;;
  *) die "usage: $0 up N [--slots S] [--rate RATE] [--throttle HOST_INDEX RATE] [--throttle-link I J RATE] | shape [OPTIONS of up] | down [--stale] | run COMMAND... | status" ;;
esac
