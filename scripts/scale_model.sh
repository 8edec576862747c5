#!/usr/bin/env bash
# full_diag's analysis stages at scale, on a synthetic result set (docs/scale.md): runs
# scripts/scale_model.lua with the commscript binary on the self backend (one process, no MPI)
# and prints ONE JSON line: per-stage analysis seconds, report.json and report.html bytes, the
# planted culprits and who was named.
#   scripts/scale_model.sh --ranks 1024 --hosts 128 [--plan auto|full|sampled] [--seed 1]
#                          [--out DIR] [--check] [--max-analysis-s S] [--max-html-bytes B]
#                          [--max-json-bytes 200000000] [--time wall|cpu]
#                          [--plant all|bucket|two|link|flap|stutter|cpu|none] [--factor F] [--dir send|recv|both]
#                          [--burst BYTES] [--on_s S] [--off_s S] [--cpu_stream F] [--cv C] [--spikes P] [--spike X]
#                          [--round_s S] [--retest_s S] [--pre_s S] [--budget S] [--results yes|no]
# --plant and the fault's shape (--factor, --dir, --burst, --on_s, --off_s, --cpu_stream), the noise
# (--cv, --spikes, --spike), the clock (--round_s, --retest_s, --pre_s: the projected time to the
# verdict, "projection" in the line) and --results are scale_model.lua's options (docs/scale.md,
# "The scale model with users' fault shapes"; scripts/truth_harness.py model runs it over seeds).
# --check: exit 1 unless the planted are named and nobody else ("exact"), all analysis (stragglers,
# localisation, scorecard, rules, report sections, report.json write, report.html render) took
# at most --max-analysis-s seconds (wall-clock, or with --time cpu the process's CPU seconds:
# steadier on a shared machine) and the files are within their byte limits (defaults: the
# targets, 5 s and report.html 5 MB up to 1024 ranks, 60 s and no report.html limit above;
# report.json 200 MB; --max-html-bytes 0: no limit).
# Environment: COMMSCRIPT (the binary; default build/commscript).
# Stages: *_s inside the recipe; report_json_s from the recipe's end to the engine's "report
# written" line (report.html is rendered on another thread meanwhile); report_html_s from there
# to the process's exit (the rest of the page, and freeing the report). analysis_s is their sum;
# analysis_cpu_s the same in CPU seconds (cpu: per stage). load_avg: the 1, 5 and 15 minute
# load averages at the start and the end (the machine may be shared: wall-clock seconds are
# comparable only at a low load). within_targets: analysis_s <= 5 s and report.html <= 5 MB up to
# 1024 ranks; above, analysis_s <= 60 s and report.json <= 200 MB (docs/scale.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin=${COMMSCRIPT:-$root/build/commscript}
ranks=1024 hosts=128 plan=auto seed=1 out="" check=0 timing=wall
max_s="" max_html="" max_json=200000000
model=()
usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks) ranks=${2:?}; shift 2 ;;
    --hosts) hosts=${2:?}; shift 2 ;;
    --plan) plan=${2:?}; shift 2 ;;
    --seed) seed=${2:?}; shift 2 ;;
    --plant|--factor|--cv|--spikes|--spike|--results|--dir|--burst|--on_s|--off_s|--cpu_stream|--round_s|--retest_s|--pre_s|--budget)
      model+=("$1" "${2:?}"); shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --check) check=1; shift ;;
    --time) timing=${2:?}; shift 2 ;;
    --max-analysis-s) max_s=${2:?}; shift 2 ;;
    --max-html-bytes) max_html=${2:?}; shift 2 ;;
    --max-json-bytes) max_json=${2:?}; shift 2 ;;
    -h|--help) usage ;;
    *) echo "scale_model.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
# the documented targets (docs/scale.md): 5 s and report.html <= 5 MB up to 1024 ranks; above,
# 60 s and no limit on report.html (it groups hosts); report.json <= 200 MB at any size
if (( ranks <= 1024 )); then max_s=${max_s:-5} max_html=${max_html:-5000000}
else max_s=${max_s:-60} max_html=${max_html:-0}; fi
[[ -x "$bin" ]] || { echo "scale_model.sh: no commscript binary at $bin (build it, or set COMMSCRIPT)" >&2; exit 1; }
tmp=""
if [[ -z "$out" ]]; then tmp=$(mktemp -d); out="$tmp/out"; fi
trap '[[ -n "$tmp" ]] && rm -rf "$tmp"' EXIT

python3 - "$bin" "$root/scripts/scale_model.lua" "$out" "$ranks" "$hosts" "$plan" "$seed" "$check" "$max_s" \
  "$max_html" "$max_json" "$timing" ${model[@]+"${model[@]}"} <<'EOF'
import json, os, subprocess, sys, threading, time
binary, script, out, ranks, hosts, plan, seed, check, max_s, max_html, max_json, timing = sys.argv[1:13]
model_args = sys.argv[13:]
time_key = "analysis_cpu_s" if timing == "cpu" else "analysis_s"
cmd = [binary, "--backend", "self", "--trusted", "--timeout", "3600", "--out", out, script, "--ranks", ranks, "--hosts", hosts,
       "--plan", plan, "--seed", seed] + model_args
env = dict(os.environ)  # COMMSCRIPT_STDLIB, when set, replaces the embedded stdlib (development)
t0 = time.monotonic()
load_start = [round(x, 2) for x in os.getloadavg()]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
marks, lines = {}, []
def read(stream):
    for line in stream:
        now = time.monotonic()
        lines.append(line.rstrip("\n"))
        if line.startswith("SCALE "):
            marks["scale"], marks["scale_line"] = now, line[6:]
        elif "report written to" in line:
            marks["json"] = now
threads = [threading.Thread(target=read, args=(s,)) for s in (p.stdout, p.stderr)]
for t in threads: t.start()
_, status, usage = os.wait4(p.pid, 0)
rc = os.waitstatus_to_exitcode(status)
p.returncode = rc
for t in threads: t.join()
t_end = time.monotonic()
if "scale_line" not in marks or "json" not in marks:
    sys.stderr.write("scale_model.sh: the run did not finish (exit %d):\n%s\n" % (rc, "\n".join(lines[-30:])))
    sys.exit(1)
r = json.loads(marks["scale_line"])
r["report_json_s"] = round(marks["json"] - marks["scale"], 3)
r["report_html_s"] = round(t_end - marks["json"], 3)
r["analysis_s"] = round(r["analysis_in_recipe_s"] + r["report_json_s"] + r["report_html_s"], 3)
# CPU seconds: the recipe's stages, then everything after the recipe (report.json and
# report.html) from the process's resource usage.
r["report_write_cpu_s"] = round(usage.ru_utime + usage.ru_stime - r["process_cpu_s"], 3)
r["analysis_cpu_s"] = round(r["analysis_in_recipe_cpu_s"] + r["report_write_cpu_s"], 3)
r["cpu"] = {k: round(v, 3) for k, v in r["cpu"].items()}
for k in list(r):
    if k.endswith("_s") and isinstance(r[k], float): r[k] = round(r[k], 3)
def size(name):
    path = os.path.join(out, name)
    return os.path.getsize(path) if os.path.exists(path) else -1
r["report_json_bytes"], r["report_html_bytes"] = size("report.json"), size("report.html")
r["exit_code"] = rc
r["load_avg"] = {"start": load_start, "end": [round(x, 2) for x in os.getloadavg()]}
if int(ranks) <= 1024:
    r["within_targets"] = r["analysis_s"] <= 5 and 0 < r["report_html_bytes"] <= 5000000
else:
    r["within_targets"] = r["analysis_s"] <= 60 and 0 < r["report_json_bytes"] <= 200000000
fails = []
if check == "1":
    if not r["exact"]: fails.append("named %s, planted %s" % (json.dumps(r["named"]), json.dumps(r["planted"])))
    if r[time_key] > float(max_s): fails.append("analysis took %.2f s (%s) > %s s" % (r[time_key], time_key, max_s))
    if not 0 < r["report_html_bytes"] <= (int(max_html) or r["report_html_bytes"]):
        fails.append("report.html is %d bytes (limit %s)" % (r["report_html_bytes"], max_html))
    if not 0 < r["report_json_bytes"] <= int(max_json):
        fails.append("report.json is %d bytes (limit %s)" % (r["report_json_bytes"], max_json))
    if rc != 0: fails.append("commscript exited %d" % rc)
    r["check"] = "failed" if fails else "passed"
print(json.dumps(r, sort_keys=True))
for f in fails: sys.stderr.write("scale_model.sh: FAILED: %s\n" % f)
sys.exit(1 if fails else 0)
EOF
