#!/usr/bin/env bash
# commscript's headline time against a plain MPI loop (scripts/anchors/plain_loop.c: nothing but
# the MPI call in the timed loop), and against the OSU micro-benchmarks and the Intel MPI
# Benchmarks where checkouts of them are given, size by size, in alternating runs. A benchmark,
# not a test: it prints tables and exits 0 unless something fails to build or run. When to run
# it: docs/timing.md ("Comparing with a plain loop").
#
#   scripts/compare_anchors.sh [--rounds 5] [--sizes 8,64,...] [--ops allreduce,sendrecv,latency]
#                              [--netns N] [--before BINARY] [--osu DIR] [--imb DIR] [--no-states]
#                              [--control] [--tcp-cc ALGO] [--warmup-per-10 K] [--work DIR]
#   scripts/compare_anchors.sh --tables DIR      (the tables again, from the run that used --work DIR)
#
# --sizes   bytes per rank (default 8,64,512,4096,32768,262144,1048576,4194304,16777216,67108864:
#           8 B to 64 MiB). Iterations per size, the same for every tool: min(5000, max(10,
#           200 MiB / size)) (5000 up to 32 KiB, 200 at 1 MiB, 50 at 4 MiB, 10 at 64 MiB);
#           warm-up a tenth (at least 5).
# --warmup-per-10 K  warm-up K tenths of the iterations instead of one (at least 5), the same
#           for every tool. With --netns (4 ranks on 2 cores) a launch's first ~0.3 s of
#           spinning runs slower, more so in a process whose ranks slept just before (as
#           commscript's do in their set-up waits); K=10 warms up for as long as the loop
#           lasts, past that (docs/timing.md, "The thirty-first stop").
# --ops     allreduce (default), sendrecv (a ring), latency (osu_latency's ping-pong; 2 ranks;
#           latency.lua's and OSU's counts: 10000 round trips up to 8 KiB, 1000 above).
# --rounds  rounds (default 5). Each round runs every size once with every tool, one launch per
#           tool and size, the tools' order rotating from size to size and round to round, so
#           that the runs compared are next to each other in time. Each table cell is the median
#           over rounds; each ratio is taken within a round and shown as its median (min-max).
# --netns N the ranks on N network-namespace "hosts" of this machine over TCP (Open MPI's tcp
#           btl; scripts/netns_hosts.sh, set up and removed here, names prefixed
#           CS_NETNS_PREFIX, default "tim"), one rank per host. Without it: NP ranks (default 2)
#           on this host, Open MPI's shared memory.
# --tcp-cc  with --netns, the hosts' TCP congestion control (default: cubic where the kernel
#           allows it, else reno; "host": this machine's own, often bbr). BBR paces each
#           connection by its estimate of the path, and on these veths with 4 ranks sharing 2
#           cores its launches fall into clusters a third apart (docs/timing.md); a loss-based
#           algorithm sends as fast as the receiver reads, as on most clusters' TCP.
# --before  a second commscript binary measured in the same rounds (e.g. the tree before a
#           change): its own column and ratio.
# --osu/--imb  an OMB source tree (7.x) / a clone of intel/mpi-benchmarks, built in place when
#           their binaries are missing (their code is never copied into this repository). Debian
#           12 packages neither. OSU's allreduce times each iteration with a barrier between
#           iterations; IMB prints t_avg with its own repetitions (min(1000, 40 MiB / size)).
# --no-states  skips the runs in Open MPI's second small-message state (below).
# --control the plain loop a second time in each round, as one more tool ("plain again"): the
#           table's "plain / plain" is the same program against itself, what this host's spread
#           alone makes of a ratio at each size (an A/A run). A miss of cs / plain within that
#           spread is the host's, not commscript's.
#
# Open MPI's shared-memory path (vader) settles into one of two steady states for small
# messages, by the parity of earlier one-directional messages (docs/timing.md): a plain loop
# reads ~0.49 us (8 B all-reduce, 2 ranks) after MPI_Init and ~0.59 us after one extra broadcast.
# Up to 4 KiB (allreduce, sendrecv; not with --netns) each program therefore also runs after one
# more one-byte broadcast ("plain+1": plain_loop --prior-bcasts 1; "cs+1":
# scripts/anchors/after_bcast.lua), and the ratio judged there is the closer same-state pairing
# (cs/plain with cs+1/plain+1, or cs/plain+1 with cs+1/plain: the larger median of the pair, the
# smaller of the two pairs).
#
# Environment: BUILD_DIR (build), NP (2), MPIRUN (mpirun), NICE (ranks under nice -n NICE), CPUS
# (mpirun under taskset -c CPUS), RT (mpirun and ranks under chrt -f RT). Every tool gets the same
# treatment. The load average is printed before, after and after each round: read the ratios
# with it on a shared host.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
BUILD_DIR=${BUILD_DIR:-build}
NP=${NP:-2}
MPIRUN=${MPIRUN:-mpirun}
OSU="" IMB="" BEFORE="" ROUNDS=5 WARMUP10=1 WORK="" TABLES_ONLY="" NETNS=0 STATES=1 CONTROL=0 TCP_CC=""
SIZES_ARG=8,64,512,4096,32768,262144,1048576,4194304,16777216,67108864
OPS_ARG=allreduce
while [[ $# -gt 0 ]]; do
  case "$1" in
    --osu) OSU=$(cd "$2" && pwd); shift 2 ;;
    --imb) IMB=$(cd "$2" && pwd); shift 2 ;;
    --before) BEFORE=$(realpath "$2"); shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --warmup-per-10) WARMUP10=$2; shift 2 ;;
    --sizes) SIZES_ARG=$2; shift 2 ;;
    --ops) OPS_ARG=$2; shift 2 ;;
    --netns) NETNS=$2; shift 2 ;;
    --no-states) STATES=0; shift ;;
    --control) CONTROL=1; shift ;;
    --tcp-cc) TCP_CC=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --tables) TABLES_ONLY=1; WORK=$2; shift 2 ;;
    -h|--help) sed -n '2,61p' "$0"; exit 0 ;;
    *) echo "compare_anchors: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
done
die() { echo "compare_anchors: $*" >&2; exit 1; }
[[ "$ROUNDS" =~ ^[0-9]+$ && "$ROUNDS" -ge 1 ]] || die "--rounds must be a positive integer"
[[ "$NETNS" =~ ^[0-9]+$ ]] || die "--netns takes a number of hosts"
[[ "$WARMUP10" =~ ^[0-9]+$ && "$WARMUP10" -le 100 ]] || die "--warmup-per-10 takes 0..100"
IFS=, read -r -a SIZES <<<"$SIZES_ARG"
for s in "${SIZES[@]}"; do [[ "$s" =~ ^[1-9][0-9]*$ && $((s % 4)) -eq 0 ]] || die "--sizes: '$s' is not a positive multiple of 4 bytes"; done
IFS=, read -r -a OPS <<<"$OPS_ARG"
for o in "${OPS[@]}"; do [[ " allreduce sendrecv latency " == *" $o "* ]] || die "--ops: '$o' is not allreduce, sendrecv or latency"; done
[[ -z "$BEFORE" || -x "$BEFORE" ]] || die "--before: $BEFORE is not an executable"
(( NETNS > 0 )) && NP=$NETNS && STATES=0
if [[ -z "$WORK" ]]; then WORK=$(mktemp -d "${TMPDIR:-/tmp}/compare_anchors.XXXXXX"); fi
OUT="$WORK/measurements.txt"
if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

iters_of() { local n=$(( 209715200 / $1 )); (( n > 5000 )) && n=5000; (( n < 10 )) && n=10; echo "$n"; }
warmup_of() { local w=$(( $1 * WARMUP10 / 10 )); (( w < 5 )) && w=5; echo "$w"; }
lat_iters_of() { if (( $1 > 8192 )); then echo 1000; else echo 10000; fi; }
lat_warmup_of() { if (( $1 > 8192 )); then echo 10; else echo 100; fi; }
states_at() { [[ "$STATES" == 1 && "$1" -le 4096 && "$2" != latency ]]; }

# ------------------------------------------------------------------ tables
print_tables() {
python3 - "$OUT" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(dict)  # (tool, op, bytes) -> {round: us}
for line in open(sys.argv[1]):
    r, tool, op, b, us = line.split()
    v[(tool, op, int(b))][int(r)] = float(us)
med = statistics.median

def ratios(a, b, op, size):
    x, y = v.get((a, op, size), {}), v.get((b, op, size), {})
    return [x[r] / y[r] for r in sorted(set(x) & set(y)) if y[r] > 0]

def us(tool, op, b):
    d = v.get((tool, op, b))
    return "%.2f" % med(d.values()) if d else "-"

def rtext(rs):
    return "%.3f (%.3f-%.3f)" % (med(rs), min(rs), max(rs)) if rs else "-"

def size_name(b):
    return "%d B" % b if b < 1024 else "%d KiB" % (b >> 10) if b < 1 << 20 else "%d MiB" % (b >> 20)

def judged(op, b):
    """The ratio judged: cs/plain, or at small sizes the closer same-state pairing."""
    a, a1 = ratios("cs", "plain", op, b), ratios("cs1", "plain1", op, b)
    c, d = ratios("cs", "plain1", op, b), ratios("cs1", "plain", op, b)
    if not (a and a1 and c and d):
        return (med(a), "cs/plain") if a else (None, "")
    same, cross = max(med(a), med(a1)), max(med(c), med(d))
    return (same, "(cs~plain)") if same <= cross else (cross, "(cs~plain+1)")

ops = [o for o in ("allreduce", "sendrecv", "latency") if any(k[1] == o for k in v)]
has = lambda t: any(k[0] == t for k in v)
for op in ops:
    sizes = sorted({k[2] for k in v if k[1] == op})
    cols = ["size", "plain us", "cs us"] + (["cs before us"] if has("csb") else []) + \
        (["OSU us"] if has("osu") else []) + (["IMB us"] if has("imb") else []) + \
        ["cs / plain", "judged", "<= 1.03"] + (["before / plain"] if has("csb") else []) + \
        (["plain / plain"] if has("plainb") else []) + (["plain+1 us", "cs+1 us"] if has("plain1") else [])
    print()
    print("%s: us per call, median over rounds; ratios within a round, median (min-max) over rounds" % op)
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for b in sizes:
        j, how = judged(op, b)
        row = [size_name(b), us("plain", op, b), us("cs", op, b)]
        row += [us("csb", op, b)] if has("csb") else []
        row += [us("osu", op, b)] if has("osu") else []
        row += [us("imb", op, b)] if has("imb") else []
        row += [rtext(ratios("cs", "plain", op, b)), "-" if j is None else "%.3f %s" % (j, how),
                "-" if j is None else ("yes" if j <= 1.03 else "NO")]
        row += [rtext(ratios("csb", "plain", op, b))] if has("csb") else []
        row += [rtext(ratios("plainb", "plain", op, b))] if has("plainb") else []
        row += [us("plain1", op, b), us("cs1", op, b)] if has("plain1") else []
        print("| " + " | ".join(row) + " |")
print()
print("plain: scripts/anchors/plain_loop.c (buffers written before the loop), whole loop / iterations, mean over"
      " ranks; cs: bw_sweep's time_us (latency: latency.lua's latency_us), the same method; judged: cs/plain,"
      " or up to 4 KiB the closer same-state pairing of cs, cs+1, plain and plain+1 (Open MPI's two"
      " small-message states, docs/timing.md): (cs~plain) cs/plain with cs+1/plain+1, (cs~plain+1)"
      " cs/plain+1 with cs+1/plain, the larger median of the two ratios." +
      (" plain / plain: the plain loop's second launch in the round over its first (--control)." if has("plainb") else ""))
PY
}

if [[ -n "$TABLES_ONLY" ]]; then
  [[ -s "$OUT" ]] || die "no measurements in $OUT"
  print_tables
  exit 0
fi
mkdir -p "$WORK"
: >"$OUT"

# ------------------------------------------------------------------ builds
if [[ -n "$OSU" ]]; then
  OSU_AR="$OSU/c/mpi/collective/blocking/osu_allreduce"
  OSU_LAT="$OSU/c/mpi/pt2pt/standard/osu_latency"
  if [[ ! -x "$OSU_AR" || ! -x "$OSU_LAT" ]]; then
    echo "# building OSU micro-benchmarks in $OSU" >&2
    ( cd "$OSU"
      [[ -x configure ]] || autoreconf -fi >"$WORK/osu-autoreconf.log" 2>&1
      [[ -f Makefile ]] || ./configure CC=mpicc CXX=mpicxx >"$WORK/osu-configure.log" 2>&1
      for d in c/util c/mpi/pt2pt/standard c/mpi/collective/blocking; do make -C "$d" -j2 >>"$WORK/osu-make.log" 2>&1; done
    ) || die "building OSU failed; see $WORK/osu-*.log"
  fi
fi
if [[ -n "$IMB" && ! -x "$IMB/IMB-MPI1" ]]; then
  echo "# building IMB-MPI1 in $IMB" >&2
  make -C "$IMB" -j2 IMB-MPI1 CC=mpicc CXX=mpicxx CPPFLAGS="-DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1" \
    >"$WORK/imb-make.log" 2>&1 || die "building IMB failed; see $WORK/imb-make.log"
fi
mpicc -O2 -o "$WORK/plain_loop" scripts/anchors/plain_loop.c
if [[ ! -x "$BUILD_DIR/commscript" ]]; then
  [[ -f "$BUILD_DIR/CMakeCache.txt" ]] || cmake -S . -B "$BUILD_DIR" >/dev/null
  cmake --build "$BUILD_DIR" -j2 --target commscript_cli >/dev/null
fi
CS=$(realpath "$BUILD_DIR/commscript")

# ------------------------------------------------------------------ launching
NS_ARGS=()
if (( NETNS > 0 )); then
  export CS_NETNS_PREFIX=${CS_NETNS_PREFIX:-tim} CS_NETNS_SUBNET=${CS_NETNS_SUBNET:-10.93.0}
  hosts=()
  for ((i = 0; i < NETNS; i++)); do hosts+=("$CS_NETNS_PREFIX-h$i:1"); done
  # shellcheck disable=SC2054  # tcp,self is one argument
  NS_ARGS=(--mca plm_rsh_agent "$REPO/scripts/rsh_netns.sh" --mca plm_rsh_no_tree_spawn 1 --mca rtc ^hwloc
    --mca btl tcp,self --mca btl_tcp_if_include "$CS_NETNS_SUBNET.0/24" --mca oob_tcp_if_include
    "$CS_NETNS_SUBNET.0/24" --mca mpi_yield_when_idle 1 -x OMPI_MCA_rtc=^hwloc
    --host "$(IFS=,; echo "${hosts[*]}")")
  scripts/netns_hosts.sh down >/dev/null 2>&1 || true
  scripts/netns_hosts.sh up "$NETNS" >/dev/null
  trap 'scripts/netns_hosts.sh down >/dev/null 2>&1 || true' EXIT
  tag=${CS_NETNS_TAG:+.$CS_NETNS_TAG}  # netns_hosts.sh's names: PREFIX-hI[.TAG], PREFIX-launch[.TAG]
  allowed=$(ip netns exec "$CS_NETNS_PREFIX-h0$tag" sysctl -n net.ipv4.tcp_allowed_congestion_control)
  if [[ -z "$TCP_CC" ]]; then
    TCP_CC=reno
    [[ " $allowed " == *" cubic "* ]] && TCP_CC=cubic
  fi
  if [[ "$TCP_CC" != host ]]; then
    [[ " $allowed " == *" $TCP_CC "* ]] || die "--tcp-cc $TCP_CC: the kernel allows only: $allowed"
    for ns in "$CS_NETNS_PREFIX-launch$tag" $(for ((i = 0; i < NETNS; i++)); do echo "$CS_NETNS_PREFIX-h$i$tag"; done); do
      ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$TCP_CC"
    done
  fi
  echo "# $NETNS namespace hosts ($CS_NETNS_PREFIX-h0..), one rank each, tcp btl, links unlimited (veth)," \
    "TCP congestion control $(ip netns exec "$CS_NETNS_PREFIX-h0$tag" sysctl -n net.ipv4.tcp_congestion_control)"
fi

run_mpi() {
  local pre=()
  [[ -n "${RT:-}" ]] && pre+=(chrt -f "$RT")
  [[ -n "${CPUS:-}" ]] && pre+=(taskset -c "$CPUS")
  [[ -n "${NICE:-}" ]] && pre+=(nice -n "$NICE")
  if (( NETNS > 0 )); then
    "${pre[@]}" scripts/netns_hosts.sh run "$MPIRUN" "${NS_ARGS[@]}" --oversubscribe -np "$NP" "$@"
  else
    "${pre[@]}" "$MPIRUN" -np "$NP" --oversubscribe "$@"
  fi
}

# One line per measurement: ROUND TOOL OP BYTES VALUE_US
emit() { echo "$ROUND $*" >>"$OUT"; }

# cs_json FILE TOOL: the headline of each result of a commscript results.jsonl
cs_json() {
  python3 -c 'import json, sys
for line in open(sys.argv[1]):
    x = json.loads(line)
    print(sys.argv[2], "latency" if "latency_us" in x else x["op"], x["bytes"], x.get("latency_us", x.get("time_us")))' "$1" "$2"
}

tool_plain() {  # OP SIZE [TOOL NAME: plainb for --control's second launch]
  local op=$1 s=$2 it wu mode=$1 name=${3:-plain}
  [[ "$op" == latency ]] && mode=pingpong
  if [[ "$op" == latency ]]; then it=$(lat_iters_of "$s") wu=$(lat_warmup_of "$s"); else it=$(iters_of "$s") wu=$(warmup_of "$it"); fi
  run_mpi "$WORK/plain_loop" "$mode" "$s:$it:$wu" | while read -r _ _ b t _; do emit "$name" "$op" "$b" "$t"; done
  if [[ "$name" == plain ]] && states_at "$s" "$op"; then
    run_mpi "$WORK/plain_loop" --prior-bcasts 1 "$mode" "$s:$it:$wu" | while read -r _ _ b t _; do emit plain1 "$op" "$b" "$t"; done
  fi
}

cs_run() {  # TOOL BINARY OP SIZE
  local tool=$1 bin=$2 op=$3 s=$4 d="$WORK/$1-r$ROUND-$3-$4" it
  if [[ "$op" == latency ]]; then
    run_mpi "$bin" --out "$d" latency --min "$s" --max "$s" --no-bw >/dev/null 2>>"$WORK/commscript.log"
  else
    it=$(iters_of "$s")
    run_mpi "$bin" --out "$d" bw_sweep --ops "$op" --min "$s" --max "$s" --iters "$it" --warmup "$(warmup_of "$it")" \
      --no-inplace >/dev/null 2>>"$WORK/commscript.log"
  fi
  cs_json "$d/results.jsonl" "$tool" | while read -r t o b x; do emit "$t" "$o" "$b" "$x"; done
  if [[ "$tool" == cs ]] && states_at "$s" "$op"; then
    d="$WORK/cs1-r$ROUND-$op-$s"
    run_mpi "$bin" --trusted --out "$d" scripts/anchors/after_bcast.lua --ops "$op" --min "$s" --max "$s" \
      --iters "$it" --warmup "$(warmup_of "$it")" --no-inplace >/dev/null 2>>"$WORK/commscript.log"
    cs_json "$d/results.jsonl" cs1 | while read -r t o b x; do emit "$t" "$o" "$b" "$x"; done
  fi
}
tool_cs() { cs_run cs "$CS" "$@"; }
tool_plainb() { [[ "$CONTROL" == 0 ]] || tool_plain "$1" "$2" plainb; }
tool_csb() { [[ -z "$BEFORE" ]] || cs_run csb "$BEFORE" "$@"; }

tool_osu() {  # OP SIZE (allreduce and latency)
  [[ -n "$OSU" ]] || return 0
  local op=$1 s=$2 it
  if [[ "$op" == allreduce ]]; then
    it=$(iters_of "$s")
    run_mpi "$OSU_AR" -m "$s:$s" -i "$it" -x "$(warmup_of "$it")" -T mpi_float 2>/dev/null |
      awk -v s="$s" '$1 == s { print $2 }' | while read -r x; do emit osu allreduce "$s" "$x"; done
  elif [[ "$op" == latency ]]; then
    run_mpi "$OSU_LAT" -m "$s:$s" 2>/dev/null | awk -v s="$s" '$1 == s { print $2 }' |
      while read -r x; do emit osu latency "$s" "$x"; done
  fi
}

tool_imb() {  # OP SIZE
  [[ -n "$IMB" ]] || return 0
  local op=$1 s=$2 name
  case "$op" in allreduce) name=Allreduce ;; sendrecv) name=Sendrecv ;; latency) name=PingPong ;; esac
  echo "$s" >"$WORK/imb_len.txt"
  run_mpi "$IMB/IMB-MPI1" "$name" -msglen "$WORK/imb_len.txt" -npmin "$NP" 2>/dev/null |
    awk -v s="$s" -v lat="$([[ $op == latency ]] && echo 1)" '$1 == s { print (lat ? $3 : $5) }' |
    while read -r x; do emit imb "$op" "$s" "$x"; done
}

TOOLS=(plain cs csb osu imb plainb)
echo "# compare_anchors: $NP ranks, $ROUNDS rounds, ops ${OPS[*]}, sizes ${SIZES[*]} B, warm-up $WARMUP10/10 of the iterations (at least 5); work dir $WORK"
echo "# commscript: $CS${BEFORE:+; before: $BEFORE}; $(nproc) CPUs; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
LOADS=()
k=0
for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
  for op in "${OPS[@]}"; do
    [[ "$op" == latency && "$NP" != 2 ]] && continue
    for s in "${SIZES[@]}"; do
      # The tools' order rotates with every size and round: no tool always runs first.
      for ((j = 0; j < ${#TOOLS[@]}; j++)); do "tool_${TOOLS[$(( (j + k) % ${#TOOLS[@]} ))]}" "$op" "$s"; done
      k=$((k + 1))
    done
  done
  LOADS+=("$(cut -d' ' -f1 /proc/loadavg)")
  echo "# round $ROUND/$ROUNDS done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg); 1-min load after each round: ${LOADS[*]}"
print_tables
