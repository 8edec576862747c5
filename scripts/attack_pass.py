#!/usr/bin/env python3
"""The adversarial pass (issue 30, deliverable 8): thousands of hostile attempts against the
commscript binary and libcommscript, across the twenty classes of issue 20 and the seven of issue 30
(docs/security.md, "The adversarial pass"), each under a timeout, each checked for the documented
outcome: no crash (a signal, an abort's message), no hang, the documented exit code, report.json
present (and agreeing with the exit code) where the contract says so, nothing leaked.

    scripts/attack_pass.py [--bin build/commscript] [--attempts 2000] [--seed 1] [--jobs 2]
                           [--quick] [--table] [--json FILE] [--only 30.4,20.16]

Most attempts are a --check or a run on --backend self (0.1-0.5 s); a few classes need seconds
each (a deadline to pass, two ranks, a job to attack) and get a fixed few. --quick is a fixed,
small pass (about 60 s on 2 cores) for ctest. Prints a line per failed attempt (its class, variant
and a reproducer command), then the table by class; exit 1 when any attempt failed in a class this
tree is expected to hold (--expect-fail lists classes not expected to hold, none by default:
their failures are reported, not counted).

Nothing here writes outside a temporary directory (--keep keeps it). Needs: the built tree (the
binary; build/tests/embed/embed_handles for class 30.6), mpirun for the few two-rank attempts.
"""
import argparse
import collections
import concurrent.futures
import dataclasses
import gzip
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

try:
    import tomllib
except ImportError:  # Python < 3.11: the TOML checks are skipped
    tomllib = None

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OK, BAD_INPUT, RUNTIME, HEALTH, CORRUPTION, TIMEOUT, OUTPUT = 0, 1, 2, 3, 4, 5, 6
CRASH_WORDS = ("Segmentation fault", "double free", "free(): ", "malloc(): ", "core dumped", "terminate called",
               "Assertion `", "stack smashing", "AddressSanitizer", "EnforceNotMet")

# id -> (title, the test that covers it)
CLASSES = collections.OrderedDict([
    ("20.1", ("work inside C is bounded (patterns, copy loops, a FIFO as NCCL_CONF_FILE)",
              "e2e_attack_limits test_c_functions_and_top_level_end_at_the_deadline")),
    ("20.2", ("site rule files are bounded", "e2e_attack_limits test_rule_file_loops_end_with_exit_5")),
    ("20.3", ("chaos hang/delay on --backend self ends at the deadline",
              "e2e_attack_limits test_chaos_hang_and_delay_on_self_end_at_the_deadline")),
    ("20.4", ("a SIGSTOPped rank is named", "e2e_attack_limits test_stopped_rank_0_is_named_alone, e2e_reliability")),
    ("20.5", ("limits no pcall/xpcall/coroutine swallows",
              "e2e_attack_limits test_limits_through_pcall_xpcall_and_coroutines")),
    ("20.6", ("error objects with hostile metatables", "e2e_attack_limits test_error_objects_with_hostile_metatables")),
    ("20.7", ("no file read outside the allow-list, no contents copied out",
              "e2e_attack_limits test_sandbox_reads_no_arbitrary_file, "
              "e2e_attack_fs test_rule_files_only_from_given_paths")),
    ("20.8", ("read-only engine tables (cs.exit, cs.array)", "e2e_attack_limits test_engine_tables_are_read_only")),
    ("20.9", ("the replay environment is an allow-list", "e2e_attack_io test_replay_env_is_an_allow_list")),
    ("20.10", ("deadlines outside the range are refused",
               "e2e_attack_limits test_deadlines_outside_the_range_are_refused")),
    ("20.11", ("depth limits on JSON and TOML inputs", "e2e_attack_io test_deeply_nested_inputs_are_refused")),
    ("20.12", ("point-to-point sides that disagree", "e2e_attack_io test_p2p_sides_that_disagree")),
    ("20.13", ("comm:set_timeout outside the range", "e2e_attack_limits test_deadlines_outside_the_range_are_refused")),
    ("20.14", ("a full disk: every output checked, exit 6", "e2e_attack_io test_disk_full_outputs_exit_6")),
    ("20.15", ("an unwritable --out exits 6", "e2e_attack_io test_unwritable_out_exits_6")),
    ("20.16", ("special files as --replay/--baseline/--config", "e2e_attack_io test_special_files_are_refused_by_type")),
    ("20.17", ("commscript's own Gloo reports replay", "e2e_attack_io test_replay_of_a_gloo_report")),
    ("20.18", ("one exit code end to end (huge error messages)",
               "e2e_attack_io test_huge_error_message_keeps_the_exit_code")),
    ("20.19", ("strangers at the Gloo store", "e2e_rogue_peer test_store_admits_only_the_job")),
    ("20.20", ("strangers at the coordinator", "e2e_rogue_peer")),
    ("30.1", ("triage: customer strings never become code", "e2e_triage_inputs test_names_stay_data")),
    ("30.2", ("each stage its own view of the stdlib",
              "e2e_sandbox_escapes test_rule_file_cannot_erase_another_stages_findings, lua_runner TestWorlds")),
    ("30.3", ("exit codes a sandbox may use are 1-5",
              "e2e_sandbox_escapes test_sandbox_chaos_exit_status_is_1_to_5, "
              "test_chaos_exit_leaves_report_json_with_its_code")),
    ("30.4", ("no file-system oracle; no FIFO holds a rank", "e2e_attack_fs")),
    ("30.5", ("a top-level busy loop: exit 2 in every mode, with report.json",
              "e2e_sandbox_escapes test_busy_top_level_exits_2_in_every_mode_with_a_report")),
    ("30.6", ("C handles survive misuse", "embed_handles")),
    ("30.7", ("triage's memory at most 4x its input + 64 MiB",
              "e2e_triage_inputs test_memory_within_four_times_the_input")),
])
# Classes whose fixes are on other branches, run and reported but not counted (--expect-fail).
# None since the merge of issue 30's branches: every class counts.
ELSEWHERE = ()


@dataclasses.dataclass
class Attempt:
    cls: str
    variant: str
    argv: list = None               # the command (None: `custom` runs instead)
    env: dict = None
    timeout: float = 20.0           # the attempt's wall-clock limit (over it: "hang")
    codes: tuple = (OK,)            # the documented exit codes
    out: str = None                 # --out directory given, whose report.json is checked
    report: bool = False            # report.json must exist there and agree with the exit code
    needles: tuple = ()             # must appear in stdout + stderr
    absent: tuple = ()              # must not appear in stdout or stderr
    leak: tuple = ()                # must appear nowhere: stdout, stderr, report.json (a secret's text)
    max_s: float = None             # must end within (a prompt refusal)
    check: object = None            # f(rc, stdout, stderr) -> "" or why it failed
    custom: object = None           # f() -> "" or why it failed (attempts that are not one command)
    cwd: str = None


class Pass:
    """Holds the binary, the scratch directory and what every attempt shares."""

    def __init__(self, args, work):
        self.bin = os.path.abspath(args.bin)
        self.build = os.path.dirname(self.bin)
        self.work = work
        self.rng = random.Random(args.seed)
        self.mpirun = shutil.which("mpirun") or shutil.which("mpiexec")
        self.n = 0
        self.fifo = self.path("shared.fifo")
        os.mkfifo(self.fifo)
        self.ok_recipe = self.recipe("ok", "  return 0")
        self.base = None

    # ---- files ----
    def path(self, name):
        return os.path.join(self.work, name)

    def fresh(self, stem="a"):
        self.n += 1
        d = self.path("%s%05d" % (stem, self.n))
        os.makedirs(d)
        return d

    def write(self, path, text, mode="w"):
        with open(path, mode) as f:
            f.write(text)
        return path

    def recipe(self, name, body, top="", decl=""):
        return self.write(self.path(name + ".lua"), 'local cs = require "commscript"\n' + top +
                          'local recipe = cs.recipe { name = "%s", version = "0.1.0"%s }\n' % (name, decl) +
                          "function recipe.run(ctx)\n" + body + "\nend\nreturn recipe\n")

    def cmd(self, *args, out=None, np=None):
        c = [self.bin] + (["--out", out] if out else []) + list(args)
        return [self.mpirun, "-np", str(np), "--oversubscribe"] + c if np else c

    def base_report(self):
        """A report.json of ok.lua on --backend self, recorded once (what replays mutate)."""
        if self.base is None:
            out = self.fresh("base")
            subprocess.run(self.cmd("--backend", "self", self.ok_recipe, out=out), env=env_for(), cwd=self.work,
                           capture_output=True, timeout=60)
            with open(os.path.join(out, "report.json")) as f:
                self.base = json.load(f)
        return json.loads(json.dumps(self.base))


def env_for(extra=None):
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    env.setdefault("COMMSCRIPT_JOB_TOKEN", "attack-pass-" + os.urandom(8).hex())
    for k in list(env):
        if k.startswith("NCCL_"):
            del env[k]
    env.update(extra or {})
    return env


# ---------------------------------------------------------------------------------------------
# running one attempt
# ---------------------------------------------------------------------------------------------
def run_command(a):
    """(rc or None when it hung, stdout, stderr, seconds)."""
    t0 = time.monotonic()
    p = subprocess.Popen(a.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         env=env_for(a.env), cwd=a.cwd, start_new_session=True)
    try:
        out, err = p.communicate(timeout=a.timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = p.communicate()
        rc = None
    return rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), time.monotonic() - t0


def judge_report(a, rc):
    if not a.out:
        return ""
    p = os.path.join(a.out, "report.json")
    if not os.path.exists(p):
        return "no report.json" if a.report else ""
    try:
        with open(p, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        rep = json.loads(text)
    except (OSError, ValueError) as e:
        return "report.json unreadable: %s" % e
    got = rep.get("run", {}).get("exit_code")
    if a.report and got != rc:
        return "report.json says exit_code %r, the process %r" % (got, rc)
    for n in a.leak:
        if n in text:
            return "report.json holds %r" % n
    return ""


def judge(a, rc, out, err, secs):
    """'' when the attempt ended as documented, else why not."""
    if rc is None:
        return "hang (over %.0f s)" % a.timeout
    both = out + err
    if rc < 0 or rc in (128 + signal.SIGSEGV, 128 + signal.SIGABRT, 128 + signal.SIGBUS, 139, 134):
        return "crash (status %d)" % rc
    for w in CRASH_WORDS:
        if w in both:
            return "crash (%r)" % w
    if rc not in a.codes:
        return "exit %d, documented %s (%s)" % (rc, "/".join(map(str, a.codes)), last_line(err))
    if a.max_s is not None and secs > a.max_s:
        return "took %.1f s, documented under %.0f s" % (secs, a.max_s)
    for n in a.needles:
        if n not in both:
            return "no %r in its output (%s)" % (n, last_line(err or out))
    for n in a.absent + a.leak:
        if n in both:
            return "%r in its output" % n
    if a.check:
        why = a.check(rc, out, err)
        if why:
            return why
    return judge_report(a, rc)


def last_line(text):
    """The first of commscript's own lines (its message), else the last line."""
    lines = [l for l in text.strip().splitlines() if l.strip() and "report written" not in l]
    own = [l for l in lines if l.startswith("commscript:")]
    return ((own or lines[-1:] or [""])[0])[:200]


def attempt_once(a):
    t0 = time.monotonic()
    try:
        if a.custom:
            why = a.custom()
        else:
            why = judge(a, *run_command(a))
    except Exception as e:  # noqa: BLE001  (a broken attempt is a failure of the pass, said as such)
        why = "the attempt itself failed: %r" % e
    return why, time.monotonic() - t0


def reproducer(a):
    if not a.argv:
        return "(custom attempt: %s)" % a.variant
    env = " ".join("%s=%s" % (k, shell_quote(v)) for k, v in (a.env or {}).items())
    cmd = " ".join(shell_quote(x) for x in a.argv)
    text = (env + " " if env else "") + cmd
    return text if len(text) < 600 else text[:600] + "... (%d chars)" % len(text)


def shell_quote(s):
    s = str(s)
    if s and all(c.isalnum() or c in "/._-=:,+@%" for c in s):
        return s
    return "'" + s.replace("'", "'\\''") + "'"


# ---------------------------------------------------------------------------------------------
# hostile files
# ---------------------------------------------------------------------------------------------
def special_file(P, kind):
    """A path of the given hostile kind (made under a fresh directory when it must be made)."""
    d = P.fresh("sp")
    p = os.path.join(d, "f")
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "dir":
        os.makedirs(p)
    elif kind == "symlink-fifo":
        os.symlink(P.fifo, p)
    elif kind == "symlink-loop":
        os.symlink(p + "2", p)
        os.symlink(p, p + "2")
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(p)
        s.close()
    elif kind == "sparse-huge":
        with open(p, "wb") as f:
            f.truncate((1 << 30) + 4096)
    elif kind == "sparse-17M":
        with open(p, "wb") as f:
            f.truncate(17 << 20)
    elif kind == "binary":
        P.write(p, os.urandom(P.rng.randint(1, 4096)), "wb")
    elif kind == "empty":
        P.write(p, "")
    elif kind == "missing":
        pass
    else:  # a system path: /dev/zero, /proc/self/mem ...
        return kind
    return p


SYSTEM_PATHS = ["/dev/zero", "/dev/null", "/dev/urandom", "/proc/self/mem", "/proc/self/environ", "/proc/1/environ",
                "/etc/shadow", "/etc/passwd", "/proc/self/fd/0", "/sys/kernel/notes"]
MADE_KINDS = ["fifo", "dir", "symlink-fifo", "symlink-loop", "socket", "sparse-huge", "binary", "empty", "missing"]


def lua_str(s):
    return json.dumps(s)  # a JSON string is a Lua string for the characters used here


# ---------------------------------------------------------------------------------------------
# issue 20's classes
# ---------------------------------------------------------------------------------------------
SELF = ["--backend", "self"]
CATASTROPHIC = 'local s, p = string.rep("a", 40), string.rep("a*", 40) .. "b"\n'


def c20_1(P, n):
    out = []
    for i in range(n):
        if i == 0:  # a catastrophic pattern in run(): exit 5 at deadline + 12 s
            r = P.recipe("cat%d" % i, "  local x = s:match(p)", top=CATASTROPHIC)
            o = P.fresh()
            out.append(Attempt("20.1", "catastrophic string.match in run", P.cmd(*SELF, "--timeout", "1", r, out=o),
                               timeout=40, codes=(TIMEOUT,), out=o, report=True, needles=("timeout: busy",)))
            continue
        kind = P.rng.choice(["fifo", "symlink-fifo", "socket", "dir", "/dev/zero", "/proc/self/mem", "sparse-huge"])
        path = special_file(P, kind)
        call = P.rng.choice(["cs.env.nccl_conf{}", "cs.env.full_audit(cs.environ())", "cs.env.audit(cs.environ())"])
        r = P.recipe("c1_%d" % i, "  local x = %s" % call)
        o = P.fresh()
        out.append(Attempt("20.1", "NCCL_CONF_FILE=%s, %s" % (kind, call), P.cmd(*SELF, "--timeout", "1", r, out=o),
                           env={"NCCL_CONF_FILE": path}, codes=(OK,), out=o, report=True, max_s=8))
    return out


def c20_2(P, n):
    r = P.recipe("ev", '  local ok, e = pcall(cs.rules.evaluate, {}, {{id="s", severity="info", '
                       'check=function() while true do end end}})\n  print("caught", ok)')
    o = P.fresh()
    return [Attempt("20.2", "pcall(cs.rules.evaluate) over a looping check", P.cmd(*SELF, "--timeout", "1", r, out=o),
                    timeout=40, codes=(TIMEOUT,), out=o, report=True, absent=("caught",))][:n]


def c20_3(P, n):
    r = P.recipe("ar", "  local t = cs.tensor('float32', 4)\n  for i = 1, 5 do ctx.comm:allreduce(t, t) end")
    out = []
    for i in range(n):
        kind = P.rng.choice(["hang", "delay", "jitter", "short"])
        rule = {"hang": '[{kind="hang", ranks=[0], after=%d}]' % P.rng.randint(0, 3),
                "delay": '[{kind="delay", ranks=[0], ms=%d}]' % P.rng.randint(5000, 3600000),  # 1 h: the most
                "jitter": '[{kind="delay", ranks=[0], ms=%d, jitter_ms=%d}]' % (P.rng.randint(5000, 60000),
                                                                               P.rng.randint(1, 5000)),
                "short": '[{kind="delay", ranks=[0], ms=%d, limit=1}]' % P.rng.randint(1, 200)}[kind]
        o = P.fresh()
        out.append(Attempt("20.3", "chaos=" + rule, P.cmd(*SELF, "--timeout", "1", "--set", "chaos=" + rule, r, out=o),
                           timeout=30, codes=(OK,) if kind == "short" else (TIMEOUT,), out=o, report=True, max_s=15))
    return out


def c20_4(P, n):
    """SIGSTOP of rank 1 of 2 in a barrier loop: exit 5, the report names rank 1 alone."""
    def go():
        r = P.recipe("stop", '  ctx.comm:barrier()\n  if ctx.rank == 0 then print("looping") end\n'
                             '  local t0 = cs.now()\n  while cs.now() - t0 < 60 do ctx.comm:barrier() end')
        o = P.fresh()
        p = subprocess.Popen(P.cmd("--timeout", "3", r, out=o, np=2), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env_for(), cwd=P.work, start_new_session=True)
        try:
            if b"looping" not in p.stdout.readline():
                return "no 'looping' line"
            time.sleep(1.0)
            pid = rank_pid(o, 1)
            if pid is None:
                return "no process for rank 1"
            os.kill(pid, signal.SIGSTOP)
            p.communicate(timeout=60)
            os.kill(pid, signal.SIGCONT) if os.path.exists("/proc/%d" % pid) else None
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            return "hang (no verdict 60 s after the SIGSTOP)"
        if p.returncode != TIMEOUT:
            return "exit %s, documented 5" % p.returncode
        with open(os.path.join(o, "report.json")) as f:
            inc = [i for i in json.load(f)["incidents"] if i["kind"] == "timeout"]
        named = sorted(m["rank"] for i in inc for m in i.get("missing", []))
        return "" if named == [1] else "the verdict names ranks %s" % named
    return [Attempt("20.4", "SIGSTOP of rank 1 of 2", custom=go)][:n] if P.mpirun else []


def rank_pid(out, rank):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % pid) as f:
                if f.read().strip() != "commscript":
                    continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if ("OMPI_COMM_WORLD_RANK=%d" % rank).encode() in env and out.encode() in cmd:
            return int(pid)
    return None


def c20_5(P, n):
    wrappers = ["pcall(f)", "xpcall(f, function(e) return e end)", "coroutine.wrap(function() return pcall(f) end)()",
                "select(2, coroutine.resume(coroutine.create(f)))", "pcall(pcall, f)",
                "xpcall(f, function(e) return f() end)"]
    payloads = {"table bomb": "local t = {} for i = 1, 1e9 do t[i] = {i} end",
                "string bomb": "local s = 'x' for i = 1, 64 do s = s .. s end",
                "C stack": "local function g(s) return (s:gsub('.', g)) end g('ab')"}
    out = []
    for i in range(n):
        w = P.rng.choice(wrappers)
        name, code = P.rng.choice(list(payloads.items()))
        r = P.recipe("l%d" % i, "  local function f() %s end\n  print('caught', %s)\n  return 0" % (code, w))
        o = P.fresh()
        # the limit is sticky: whatever the wrapper returned, the run ends 2 (pcall(pcall, f) returns true)
        out.append(Attempt("20.5", "%s through %s" % (name, w), P.cmd(*SELF, "--timeout", "5", r, out=o),
                           env={"COMMSCRIPT_LUA_MEMORY": "64M"}, timeout=30, codes=(RUNTIME,), out=o, report=True,
                           max_s=20))
    return out


def c20_6(P, n):
    fields = {"__index": ["function() while true do end end", "function() error('inner') end"],
              "__tostring": ["function() while true do end end", "function() error('inner') end", "function() return {} end"],
              "__concat": ["function() while true do end end"], "__len": ["function() while true do end end"],
              "__eq": ["function() while true do end end"], "__call": ["function() while true do end end"]}
    out = []
    for i in range(n):
        mt = ", ".join("%s=%s" % (k, P.rng.choice(v)) for k, v in fields.items() if P.rng.random() < 0.5) or \
            "__index=function() while true do end end"
        code = P.rng.choice([None, None, 2, 3, 4])
        obj = "{code=%d}" % code if code else "{}"
        r = P.recipe("e%d" % i, "  error(setmetatable(%s, {%s}))" % (obj, mt))
        o = P.fresh()
        out.append(Attempt("20.6", "error(setmetatable(%s, {%s}))" % (obj, mt), P.cmd(*SELF, "--timeout", "1", r, out=o),
                           timeout=30, codes=(code or RUNTIME,), out=o, report=True, max_s=10,
                           absent=("error in error handling",), needles=("e%d.lua:" % i,)))
    return out


def c20_7(P, n):
    out = []
    for i in range(n):
        mark = "SECRET%08d" % P.rng.randint(0, 10 ** 8)
        d = P.fresh("sec")
        fmt = P.rng.choice(["NCCL_TOKEN=%s\n", "root:%s:0:0\n", "%s %s\n", '{"k": "%s"}\n', "NCCL_DEBUG=%s\n"])
        secret = P.write(os.path.join(d, P.rng.choice(["s.txt", "s.lua", ".nccl.conf", "nccl.conf"])),
                         fmt.replace("%s", mark))
        call = P.rng.choice([
            "cs.env.nccl_conf{extra={%s}}" % lua_str(secret), "cs.env.nccl_conf{home=%s}" % lua_str(d),
            "cs.env.nccl_conf{system_file=%s}" % lua_str(secret),
            "cs.env.nccl_conf{env={NCCL_CONF_FILE=%s}}" % lua_str(secret),
            "cs.env.full_audit({NCCL_CONF_FILE=%s})" % lua_str(secret),
            "select(2, pcall(cs.rules.load, {%s}))" % lua_str(secret)])
        r = P.recipe("r7_%d" % i, "  print(cs.json.encode(%s))\n  return 0" % call)
        o = P.fresh()
        out.append(Attempt("20.7", call.replace(secret, "SECRET_FILE"), P.cmd(*SELF, r, out=o), codes=(OK,), out=o,
                           report=True, leak=(mark,)))
    return out


def c20_8(P, n):
    writes = ["cs.exit.health = 0", "cs.exit.corruption = 0", "rawset(cs.exit, 'health', 0)",
              "setmetatable(cs.exit, nil)", "getmetatable(cs.exit).__newindex = nil",
              "getmetatable(cs.array{}).__jsontype = 'object'", "cs.exit.ok = 9", "table.insert(cs.exit, 1)",
              "for k in pairs(cs.exit) do cs.exit[k] = 0 end", "debug.setmetatable(cs.exit, nil)"]
    out = []
    for i in range(n):
        w = "; ".join(P.rng.sample(writes, P.rng.randint(1, 3)))
        body = ("  pcall(function() %s end)\n" % w +
                "  if cs.exit.health ~= 3 or cs.exit.corruption ~= 4 or cs.exit.ok ~= 0 then error('cs.exit changed') end\n"
                "  if cs.json.encode(cs.array{}) ~= '[]' then error('cs.array changed') end\n  return 0")
        r = P.recipe("w%d" % i, body)
        o = P.fresh()
        out.append(Attempt("20.8", w, P.cmd(*SELF, r, out=o), codes=(OK,), out=o, report=True))
    return out


def c20_9(P, n):
    pools = ["OMPI_MCA_mpi_abort_delay", "OMPI_MCA_btl", "OMPI_MCA_pml", "PMIX_MCA_gds", "MPICH_ASYNC_PROGRESS",
             "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "COMMSCRIPT_STDLIB", "COMMSCRIPT_LUA_MEMORY", "PATH",
             "LUA_PATH", "LUA_CPATH", "PYTHONPATH", "HOME", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN"]
    out = []
    for i in range(n):
        rep = P.base_report()
        names = P.rng.sample(pools, P.rng.randint(1, 4)) + ["X_%d_UNKNOWN" % P.rng.randint(0, 999)]
        rep["run"]["config"] = {"env": {k: P.rng.choice(["-1", "/nonexistent/evil.so", "x" * 300, ""]) for k in names}}
        rp = P.write(os.path.join(P.fresh("rp"), "report.json"), json.dumps(rep))
        o = P.fresh()

        def dropped(rc, so, se, names=names):
            line = [l for l in se.splitlines() if "not applying" in l]
            miss = [k for k in names if not line or k not in line[0]]
            return "applied from the replay: %s" % ", ".join(miss) if miss else ""
        out.append(Attempt("20.9", "replay env " + ",".join(names), P.cmd(*SELF, "--replay", rp, out=o), codes=(OK,),
                           out=o, report=True, check=dropped))
    return out


def c20_10(P, n):
    bad = ["1e-400", "5e-324", "-1", "nan", "inf", "-inf", "1e10", "604801", "1e-4", "abc", "1e308", "0x", "--1",
           "1e-9", "9e999"]
    out = []
    for i in range(n):
        if P.rng.random() < 0.3:
            v, codes = "%.3f" % P.rng.uniform(0.001, 604800), (OK,)
        else:
            v, codes = P.rng.choice(bad), (BAD_INPUT,)
        how = P.rng.choice(["--timeout", "--set", "--config"])
        if how == "--config":
            conf = P.write(os.path.join(P.fresh("cf"), "c.toml"), "[run]\ntimeout = %s\n" % v)
            args = ["--config", conf]
        else:
            args = ["--timeout", v] if how == "--timeout" else ["--set", "run.timeout=" + v]
        out.append(Attempt("20.10", "%s %s" % (how, v), P.cmd(*SELF, *args, "--check", P.ok_recipe), codes=codes,
                           max_s=10))
    return out


def deep_text(rng, depth, kind):
    if kind == "array":
        return "[" * depth + "]" * depth
    if kind == "object":
        return '{"a":' * depth + "1" + "}" * depth
    opens = "".join(rng.choice(['[', '{"a":']) for _ in range(min(depth, 5000)))
    closes = "".join("]" if c == "[" else "}" for c in reversed([o[0] for o in _split_opens(opens)]))
    return opens + ("1" if opens.endswith(":") else "") + closes


def _split_opens(s):
    i, out = 0, []
    while i < len(s):
        if s[i] == "[":
            out.append("[")
            i += 1
        else:
            out.append("{")
            i += 5
    return out


def c20_11(P, n):
    out = []
    for i in range(n):
        depth = P.rng.choice([129, 200, 1000, 5000, 100000, 300000])
        where = P.rng.choice(["replay", "baseline", "config", "set", "replay-field"])
        kind = P.rng.choice(["array", "object", "mixed"])
        d = P.fresh("deep")
        if where in ("replay", "baseline"):
            f = P.write(os.path.join(d, "r.json"), '{"schema":' + deep_text(P.rng, depth, kind) + "}")
            args = ["--replay", f] if where == "replay" else ["--baseline", f, P.ok_recipe]
        elif where == "replay-field":
            rep = P.base_report()
            rep["recipe"]["options"] = "@"
            f = P.write(os.path.join(d, "r.json"), json.dumps(rep).replace('"@"', deep_text(P.rng, depth, "array")))
            args = ["--replay", f]
        elif where == "config":
            f = P.write(os.path.join(d, "c.toml"), "[options]\nx = " + "[" * depth + "]" * depth + "\n")
            args = ["--config", f, P.ok_recipe]
        else:
            args = ["--set", "options.x=" + "[" * min(depth, 50000) + "]" * min(depth, 50000), P.ok_recipe]
        o = P.fresh()
        out.append(Attempt("20.11", "%s %s %d deep" % (where, kind, depth), P.cmd(*SELF, *args, out=o),
                           codes=(BAD_INPUT,), timeout=40, max_s=20))
    return out


def c20_12(P, n):
    body = ('  local c, me = ctx.comm, ctx.comm:rank()\n'
            '  if me == 0 then c:send(cs.tensor(ctx.opt.a, ctx.opt.n), 1) else c:recv(cs.tensor(ctx.opt.b, ctx.opt.m), 0) end\n'
            '  return 0')
    r = P.recipe("p2p", body, decl=', options = { a = { "float32", "" }, b = { "float32", "" }, n = { 10, "" }, '
                                   'm = { 10, "" } }')
    out = []
    for i in range(n if P.mpirun else 0):
        a, b = P.rng.choice(["float32", "int32", "float64", "int8"]), P.rng.choice(["float32", "int32", "float64"])
        nn, m = P.rng.choice([100000, 1024, 3]), P.rng.choice([10, 1, 77])
        o = P.fresh()
        out.append(Attempt("20.12", "send %d %s, recv %d %s" % (nn, a, m, b),
                           P.cmd("--timeout", "3", r, "--a", a, "--b", b, "--n", str(nn), "--m", str(m), out=o, np=2),
                           timeout=60, codes=(TIMEOUT, RUNTIME), out=o, report=True, needles=("desync",)))
    return out


def c20_13(P, n):
    r = P.recipe("st", "  ctx.comm:set_timeout(tonumber(ctx.opt.v))\n  ctx.comm:barrier()\n  return 0",
                 decl=', options = { v = { "1", "" } }')
    out = []
    for i in range(n):
        v = P.rng.choice(["1e10", "inf", "1e12", "1e19", "1e-9", "-1", "nan", "0.5", "10", "604800", "604801", "1e308",
                          "-inf", "0.001", "0.0009"])
        f = float(v)
        good = 0.001 <= f <= 604800
        out.append(Attempt("20.13", "set_timeout(%s)" % v, P.cmd(*SELF, r, "--v", v, out=P.fresh()),
                           codes=(OK,) if good else (RUNTIME,), absent=("timeout:",),
                           needles=() if good else ("between 0.001 and 604800",)))
    return out


def c20_14(P, n):
    one = P.recipe("one", 'ctx.report:result{kind = "x", value = 1}\n  return 0')
    out = []
    for i in range(n):
        name = P.rng.choice(["report.html", "report.json.tmp", "results.jsonl"])
        o = P.fresh()
        os.symlink("/dev/full", os.path.join(o, name))
        out.append(Attempt("20.14", "%s on /dev/full" % name, P.cmd(*SELF, one, out=o), codes=(OUTPUT,), out=o,
                           report=name != "report.json.tmp", needles=("No space left on device",)))
    return out


def c20_15(P, n):
    out = []
    for i in range(n):
        d = P.fresh("uw")
        f = P.write(os.path.join(d, "file"), "x")
        loop = os.path.join(d, "loop")
        os.symlink(loop + "2", loop)
        os.symlink(loop, loop + "2")
        o = P.rng.choice(["/proc/self/x%d" % i, f, os.path.join(f, "sub"), os.path.join(loop, "x"),
                          os.path.join(d, "a/" * P.rng.randint(2050, 2200)), "/sys/x%d" % i, "/dev/null/x",
                          "/proc/1/x"])
        out.append(Attempt("20.15", "--out " + (o if len(o) < 80 else o[:60] + "..."), P.cmd(*SELF, P.ok_recipe, out=o),
                           codes=(OUTPUT,), needles=("--out",)))
    return out


def c20_16(P, n):
    out = []
    for i in range(n):
        kind = P.rng.choice(MADE_KINDS + ["sparse-17M", "/dev/zero", "/dev/null", "/dev/urandom", "/proc/self/mem",
                                          "/proc/self/environ", "/proc/self/maps"])
        path = special_file(P, kind)
        opt = P.rng.choice(["--replay", "--baseline"] + ([] if kind == "empty" else ["--config"]))  # "": a valid TOML
        args = [opt, path] + ([] if opt == "--replay" else [P.ok_recipe])
        out.append(Attempt("20.16", "%s %s" % (opt, kind), P.cmd(*SELF, *args, out=P.fresh()), codes=(BAD_INPUT,),
                           timeout=30, max_s=10))
    return out


def c20_17(P, n):
    out = []
    for i in range(n):
        rep = P.base_report()
        rep["run"]["backend"] = "gloo"
        if P.rng.random() < 0.5:
            rep["run"]["ranks"] = P.rng.choice([1, 2, 4])
        rp = P.write(os.path.join(P.fresh("g"), "report.json"), json.dumps(rep))
        o = P.fresh()
        out.append(Attempt("20.17", "a gloo report replayed on self", P.cmd(*SELF, "--replay", rp, out=o), codes=(OK,),
                           out=o, report=True))
    return out


def c20_18(P, n):
    r = P.recipe("huge", 'error(string.rep("x", tonumber(ctx.opt.n)))', decl=', options = { n = { "10", "" } }')
    out = []
    for i in range(n):
        size = P.rng.choice([1, 1000, 65536, 70000, 1 << 20, 10 << 20, 50 << 20])
        np = 2 if (i == 0 and P.mpirun) else None
        o = P.fresh()

        def short_message(rc, so, se):
            return "stderr of %d bytes" % len(se) if len(se) > (1 << 20) else ""
        out.append(Attempt("20.18", "error of %d bytes%s" % (size, " on 2 ranks" if np else ""),
                           P.cmd(*([] if np else SELF), r, "--n", str(size), out=o, np=np), timeout=90,
                           codes=(RUNTIME,), out=o, report=True, check=short_message))
    return out


def listening_ports(pid):
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if t.startswith("socket:["):
            inodes.add(t[8:-1])
    ports = []
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            x = line.split()
            if x[3] == "0A" and x[9] in inodes:
                ports.append(int(x[1].split(":")[1], 16))
    return ports


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def challenges(port):
    """Whether the listener on `port` opens with a challenge (the coordinator, a relay): Gloo's own
    pair listeners say nothing first and are out of scope (docs/security.md, "Not covered")."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.settimeout(1)
            return s.recv(5).startswith(b"CHAL")
    except OSError:
        return False


def rogue_payloads(rng):
    forged = b'RELAY 0 evilhost\nFWD 1 ERR 4 "FORGED_BY_ROGUE"\n'
    return [forged, b"H" + b"\0\0\0\x012" + b"\0\0\0\0\x013", b"S\xff\xff\xff\xff" + os.urandom(64),
            os.urandom(rng.randint(1, 600)), b"\0" * 300, b"GET / HTTP/1.0\r\n\r\n", b"CHAL x\nPROOF y\n" + forged]


def c20_19_20(P, cls, n):
    """A 2-process job on --launcher env --backend gloo; rogue connections to its store (20.19) or
    to rank 0's other listeners (20.20) with forged and random bytes: the job ends 0 with its
    report, and nothing forged reaches report.json."""
    # a fixed count of barriers (a loop until a time would end on each rank after its own count)
    r = P.recipe("rv", "  for i = 1, 40 do\n    local t = cs.now()\n    while cs.now() - t < 0.05 do end\n"
                       "    ctx.comm:barrier()\n  end\n  return 0")

    def go(seed):
        rng = random.Random(seed)
        port, o, token = free_port(), P.fresh(), "attack-token-" + os.urandom(8).hex()
        procs = [subprocess.Popen(P.cmd("--backend", "gloo", "--launcher", "env", "--timeout", "30", r, out=o),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=P.work, start_new_session=True,
                                  env=env_for({"RANK": str(k), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                                               "MASTER_PORT": str(port), "COMMSCRIPT_JOB_TOKEN": token}))
                 for k in (0, 1)]
        try:
            time.sleep(1.0)
            ports = [port] if cls == "20.19" else [q for q in listening_ports(procs[0].pid) if q != port and challenges(q)]
            for q in ports:
                for data in rogue_payloads(rng):
                    try:
                        with socket.create_connection(("127.0.0.1", q), timeout=1) as s:
                            s.sendall(data)
                            s.settimeout(0.3)
                            s.recv(256)
                    except OSError:
                        pass
            rcs = [p.wait(timeout=60) for p in procs]
        except subprocess.TimeoutExpired:
            return "hang (the attacked job did not end)"
        finally:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
        if rcs != [0, 0]:
            return "exit codes %s, documented 0" % rcs
        text = open(os.path.join(o, "report.json")).read() if os.path.exists(os.path.join(o, "report.json")) else None
        if text is None:
            return "no report.json"
        return "a forged message reached report.json" if "FORGED_BY_ROGUE" in text or "evilhost" in text else ""
    return [Attempt(cls, "rogue connections, seed %d" % i, custom=lambda i=i: go(i)) for i in range(n)]


# ---------------------------------------------------------------------------------------------
# issue 30's classes
# ---------------------------------------------------------------------------------------------
HOSTILE_NAMES = ['a\nos.execute("touch MARK")\n--', "]]os.execute('touch MARK')--[[", '"""\n[[chaos]]\nkind="exit"\n',
                 'x"\n[[chaos]]\nkind = "exit"\nstatus = 70\n#', "\x00\x01\x1b[31m\x7f", "]=]]==]", "\\u0000\\",
                 "'; os.exit(70) --", "a" * 5000, "\r\n[run]\ntimeout=1e-400\n", "é€\U0001f600", "--[==[", "$(touch MARK)"]


def c30_1(P, n):
    """triage over dumps whose process-group name (and directory) carries hostile text: the repro it
    writes parses, passes --check, every tenth runs on 4 ranks (exit 5, the planted hang), and
    nothing of the name runs (MARK is never created)."""
    src = os.path.join(REPO, "tests", "fixtures", "triage", "fr_missing_json")

    def go(i):
        rng = random.Random(i)
        name = rng.choice(HOSTILE_NAMES) + ("".join(chr(rng.randint(1, 255)) for _ in range(rng.randint(0, 8))))
        d = P.fresh("tri")
        mark = os.path.join(d, "MARK")
        name = name.replace("MARK", mark)
        dump = os.path.join(d, "dumps")
        os.makedirs(dump)
        for f in os.listdir(src):
            data = open(os.path.join(src, f), "rb").read()
            data = gzip.decompress(data) if f.endswith(".gz") else data
            data = data.replace(b'"default_pg"', json.dumps(name).encode())
            open(os.path.join(dump, f.replace(".gz", "")), "wb").write(data)
        o = os.path.join(d, "out")
        a = Attempt("30.1", "triage", P.cmd(*SELF, "recipes/triage.lua", "--paths", dump, out=o), timeout=60,
                    codes=(OK, HEALTH, BAD_INPUT), cwd=REPO)
        why = judge(a, *run_command(a))
        if why or not os.path.exists(os.path.join(o, "repro.lua")):
            return why
        if tomllib:
            try:
                conf = tomllib.loads(open(os.path.join(o, "repro.toml"), encoding="utf-8").read())
            except (ValueError, UnicodeDecodeError) as e:
                return "repro.toml does not parse: %s" % e
            if any(c.get("kind") == "exit" for c in conf.get("chaos", [])):
                return "repro.toml holds an exit chaos rule from the name"
        chk = Attempt("30.1", "check", P.cmd("--trusted", "--check", "--config", os.path.join(o, "repro.toml"),
                                             os.path.join(o, "repro.lua")), codes=(OK,), cwd=d)
        why = judge(chk, *run_command(chk))
        if not why and i % 10 == 0 and P.mpirun:
            why = run_repro(o, d)
        return why or ("the name ran as code (MARK created)" if os.path.exists(mark) else "")

    def run_repro(o, d):
        """Every tenth repro also runs, sandboxed, on the 4 ranks it was written for: rank 2 never
        joins collective 6 (the planted hang), so exit 5 at the 2 s deadline, with its report."""
        ro = os.path.join(d, "run")
        run = Attempt("30.1", "run", P.cmd("--timeout", "2", "--config", os.path.join(o, "repro.toml"),
                                           os.path.join(o, "repro.lua"), out=ro, np=4),
                      timeout=90, codes=(TIMEOUT,), out=ro, report=True, cwd=d)
        return judge(run, *run_command(run))
    return [Attempt("30.1", "hostile process-group name #%d" % i, custom=lambda i=i: go(i)) for i in range(n)]


STDLIB_TARGETS = [("cs.env", "audit"), ("cs.env", "full_audit"), ("cs.findings", "add"), ("cs.stats", "median"),
                  ("cs.rules", "evaluate"), ("cs.exit", "health"), ("cs.html", "render"), ("cs.topo", "collect"),
                  ("cs.options", "parse"), ("cs.scorecard", "score"), ("cs.diagnose", "localise"), ("cs.text", "wrap")]


def c30_2(P, n):
    """A recipe writes into a stdlib module (replaces, removes, rawsets a function; swaps the
    metatable): the module another stage sees must not change."""
    out = []
    for i in range(n):
        mod, key = P.rng.choice(STDLIB_TARGETS)
        how = P.rng.choice(["m.%s = function() return {} end" % key, "rawset(m, %s, 0)" % lua_str(key),
                            "setmetatable(m, {__index=function() return 0 end})", "m.%s = nil" % key])
        body = ("  local m = require(%s)\n  local before, mt = m[%s], getmetatable(m)\n  pcall(function() %s end)\n"
                "  local m2 = require(%s)\n  if m2[%s] ~= before or getmetatable(m2) ~= mt then error('MODULE_CHANGED') end\n"
                "  return 0") % (lua_str(mod), lua_str(key), how, lua_str(mod), lua_str(key))
        r = P.recipe("m%d" % i, body)
        out.append(Attempt("30.2", "%s: %s" % (mod, how), P.cmd(*SELF, r, out=P.fresh()), codes=(OK,),
                           absent=("MODULE_CHANGED",)))
    return out


def c30_3(P, n):
    out = []
    for i in range(n):
        code = P.rng.choice([0, 6, 70, 71, 255, 256, -1, 1, 2, 3, 4, 5, 128, 137])
        how = P.rng.choice(["chaos", "error"])
        if how == "chaos":
            body = ("  cs.chaos.inject{kind='exit', ranks={0}, status=%d}\n  local t = cs.tensor('float32', 4)\n"
                    "  ctx.comm:allreduce(t, t)\n  return 0" % code)
        else:
            body = "  error({code=%d, message='coded'})" % code
        o = P.fresh()
        legal = 1 <= code <= 5
        out.append(Attempt("30.3", "%s with code %d" % (how, code), P.cmd(*SELF, P.recipe("x%d" % i, body), out=o),
                           codes=(code,) if legal else (BAD_INPUT, RUNTIME), out=o, report=True))
    return out


ORACLE_CALLS = {
    "audit": "cs.env.audit({NCCL_TOPO_FILE = p})",
    "audit_conf": "cs.env.audit({NCCL_CONF_FILE = p})",
    "full_audit": "(cs.env.full_audit({NCCL_CONF_FILE = p}))",
    "file_exists": "{cs.env.file_exists(p)}",
    "topo": "{pcall(cs.topo.collect, ctx, {sysfs_root = p})}",
    "nccl_conf": "cs.env.nccl_conf{extra = {p}}.file_findings",
}


def oracle_recipe(P, call, path):
    """A recipe that prints ANSWER <what `call` said about `path`, with the path blanked>. The path
    is in the recipe's source: not on the command line, not an option, not in the environment."""
    body = ('  local p = %s\n  local t = %s\n'
            '  local s = cs.json.encode(t):gsub(p:gsub("%%p", "%%%%%%0"), "P")\n'
            '  print("ANSWER " .. s)\n  return 0') % (lua_str(path), ORACLE_CALLS[call])
    P.n += 1
    return P.recipe("or%05d" % P.n, body)


def c30_4(P, n):
    """Hostile paths a recipe passes (not given to the run): one answer whatever is there, at once;
    the same paths given in the environment to env_audit: checked for real, without blocking."""
    answers = {}
    # not /root (HOME names it: given) nor /etc (a part of /etc/nccl.conf, which the answer names)
    kinds = MADE_KINDS + ["/dev/zero", "/dev/null", "/proc/self/mem", "/proc/1/environ", "/etc/shadow", "/etc/passwd",
                          "/etc/ssh", "/var/log"]
    out = []
    for i in range(n):
        kind = P.rng.choice(kinds)
        path = special_file(P, kind)
        if P.rng.random() < 0.2:  # given: in the environment, audited by env_audit
            var = P.rng.choice(["NCCL_CONF_FILE", "NCCL_TOPO_FILE"])
            o = P.fresh()
            out.append(Attempt("30.4", "env_audit with %s=%s" % (var, kind),
                               P.cmd(*SELF, "--timeout", "1", "env_audit", out=o), env={var: path},
                               codes=(OK, HEALTH), out=o, report=True, max_s=8))
            continue
        call = P.rng.choice(sorted(ORACLE_CALLS))

        def same(rc, so, se, call=call, kind=kind):
            got = [l for l in so.splitlines() if l.startswith("ANSWER ")]
            if not got:
                return "no answer"
            first = answers.setdefault(call, (kind, got[0]))
            if first[1] == got[0]:
                return ""
            return "answers %s for %s, %s for %s" % (got[0][:160], kind, first[1][:160], first[0])
        out.append(Attempt("30.4", "%s of %s" % (call, kind),
                           P.cmd(*SELF, "--timeout", "1", oracle_recipe(P, call, path), out=P.fresh()),
                           codes=(OK,), max_s=8, check=same, timeout=30))
    return out


def c30_5(P, n):
    top = P.write(P.path("busy.lua"), 'local cs = require "commscript"\nwhile true do end\n')
    o = P.fresh()
    return [Attempt("30.5", "a top-level busy loop, run", P.cmd(*SELF, top, out=o), timeout=40, codes=(RUNTIME,), out=o,
                    report=True, max_s=20),
            Attempt("30.5", "a top-level busy loop, --check", P.cmd(*SELF, "--check", top), timeout=40,
                    codes=(RUNTIME,), max_s=20)][:n]


def c30_6(P, n):
    exe = os.path.join(P.build, "tests", "embed", "embed_handles")
    if not os.path.exists(exe):
        return [Attempt("30.6", "embed_handles not built", custom=lambda: "no %s" % exe)]
    src = os.path.join(REPO, "tests", "embed")
    pre = [P.mpirun, "-np", "1"] if P.mpirun else []
    return [Attempt("30.6", "random handle calls, seed %d" % i, pre + [exe, src, "fuzz", str(i + 1), "150"],
                    timeout=60, codes=(OK,), needles=("handles fuzz: passed",), cwd=P.fresh("h")) for i in range(n)]


MAXRSS = ("import os, subprocess, sys\np = subprocess.Popen(sys.argv[1:])\n_, st, ru = os.wait4(p.pid, 0)\n"
          "sys.stderr.write('\\nATTACK_MAXRSS_KB=%d\\n' % ru.ru_maxrss)\n"
          "sys.exit(os.waitstatus_to_exitcode(st) % 256)\n")


def triage_inputs(P):
    """(name, directory, input bytes): a gzip bomb (about 1 MB inflating to 1 GiB) and a 12 MB
    list of integers."""
    import zlib
    d = P.fresh("mem")
    bomb = os.path.join(d, "bomb")
    os.makedirs(bomb)
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    zero = b"\0" * (1 << 20)
    with open(os.path.join(bomb, "nccl_trace_rank_0.json.gz"), "wb") as f:
        for _ in range(1024):
            f.write(c.compress(zero))
        f.write(c.flush())
    ints = os.path.join(d, "ints")
    os.makedirs(ints)
    with open(os.path.join(ints, "nccl_trace_rank_0.json"), "w") as f:
        f.write("[" + ",".join(str(x % 100000) for x in range(2000000)) + "]")
    size = lambda p: sum(os.path.getsize(os.path.join(p, f)) for f in os.listdir(p))  # noqa: E731
    return [("gzip bomb", bomb, size(bomb)), ("12 MB of integers", ints, size(ints))]


def c30_7(P, n):
    out = []
    for name, d, size in triage_inputs(P)[:n] if n else []:
        bound_kb = (4 * size + (64 << 20)) // 1024

        def within(rc, so, se, bound_kb=bound_kb):
            kb = [int(l.split("=")[1]) for l in se.splitlines() if l.startswith("ATTACK_MAXRSS_KB=")]
            if not kb:
                return "no memory measured"
            return "" if kb[0] <= bound_kb else "peak %d MiB, bound %d MiB" % (kb[0] >> 10, bound_kb >> 10)
        out.append(Attempt("30.7", "%s (%d bytes)" % (name, size),
                           [sys.executable, "-c", MAXRSS] + P.cmd(*SELF, "recipes/triage.lua", "--paths", d,
                                                                   out=P.fresh()),
                           timeout=120, codes=(OK, BAD_INPUT, HEALTH), cwd=REPO, check=within))
    return out


# ---------------------------------------------------------------------------------------------
# the plan, the run, the table
# ---------------------------------------------------------------------------------------------
# class -> (generator, weight of the cheap share, fixed count in --quick). Weight 0: a fixed count.
PLAN = collections.OrderedDict([
    ("20.1", (c20_1, 3, 3)), ("20.2", (c20_2, 0, 0)), ("20.3", (c20_3, 1, 2)), ("20.4", (c20_4, 0, 0)),
    ("20.5", (c20_5, 3, 3)), ("20.6", (c20_6, 4, 3)), ("20.7", (c20_7, 5, 4)), ("20.8", (c20_8, 5, 3)),
    ("20.9", (c20_9, 4, 3)), ("20.10", (c20_10, 8, 5)), ("20.11", (c20_11, 5, 3)), ("20.12", (c20_12, 0, 0)),
    ("20.13", (c20_13, 5, 3)), ("20.14", (c20_14, 3, 2)), ("20.15", (c20_15, 5, 3)), ("20.16", (c20_16, 10, 6)),
    ("20.17", (c20_17, 2, 1)), ("20.18", (c20_18, 2, 1)),
    ("20.19", (lambda P, n: c20_19_20(P, "20.19", n), 0, 0)), ("20.20", (lambda P, n: c20_19_20(P, "20.20", n), 0, 0)),
    ("30.1", (c30_1, 2, 2)), ("30.2", (c30_2, 6, 3)), ("30.3", (c30_3, 5, 3)), ("30.4", (c30_4, 18, 10)),
    ("30.5", (c30_5, 0, 0)), ("30.6", (c30_6, 2, 2)), ("30.7", (c30_7, 0, 0)),
])
# The slow attempts of a full pass (seconds each): a fixed few.
FIXED = {"20.1": 1, "20.2": 1, "20.4": 1, "20.12": 4, "20.19": 3, "20.20": 3, "30.5": 2, "30.7": 2}


def counts(args, only):
    """class -> how many attempts: --quick's fixed few, else the slow classes' fixed few and the
    rest of --attempts shared by weight (the rounding's remainder to the heaviest class)."""
    if args.quick:
        return {c: PLAN[c][2] for c in only}
    total_w = sum(PLAN[c][1] for c in only)
    cheap = max(0, args.attempts - sum(FIXED.get(c, 0) for c in only))
    k = {c: FIXED.get(c, 0) + (round(cheap * PLAN[c][1] / total_w) if total_w else 0) for c in only}
    if total_w:
        k[max(only, key=lambda c: PLAN[c][1])] += max(0, args.attempts - sum(k.values()))
    return k


def plan(P, args, only):
    attempts = []
    for c, k in counts(args, only).items():
        attempts += PLAN[c][0](P, k)
    return attempts


def run_all(attempts, jobs):
    results = []
    # the slow ones first, so that they overlap the many short ones
    order = sorted(attempts, key=lambda a: -(a.timeout if (a.custom or a.timeout > 30) else 0))
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        futs = {ex.submit(attempt_once, a): a for a in order}
        for f in concurrent.futures.as_completed(futs):
            a = futs[f]
            why, secs = f.result()
            results.append((a, why, secs))
            if why:
                print("FAIL %s %s: %s\n     %s" % (a.cls, a.variant[:120], why, reproducer(a)), flush=True)
    return results


def table(results, expect_fail=ELSEWHERE):
    by = collections.OrderedDict((c, [0, 0, collections.Counter()]) for c in CLASSES)
    for a, why, _ in results:
        b = by[a.cls]
        b[0] += 1
        if why:
            b[1] += 1
            b[2][re.sub(r"\d+", "N", why.split(" (")[0])[:60]] += 1  # SECRET123 and SECRET456 are one kind
    lines = ["| class | what | attempts | outcome | covered by |", "|---|---|---|---|---|"]
    for c, (n, bad, kinds) in by.items():
        if not n:
            continue
        title, test = CLASSES[c]
        if bad:
            outcome = "%d failed (%s)" % (bad, "; ".join("%s: %d" % kv for kv in kinds.most_common(3)))
        else:
            outcome = "all as documented"
        if c in expect_fail:
            outcome += "; expected to fail (--expect-fail)"
        lines.append("| %s | %s | %d | %s | %s |" % (c, title, n, outcome, test))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "commscript"))
    ap.add_argument("--attempts", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="a fixed small pass (about 60 s), for ctest")
    ap.add_argument("--only", default="", help="classes to run, e.g. 30.4,20.16")
    ap.add_argument("--expect-fail", default=",".join(ELSEWHERE),
                    help="classes not expected to hold: their failures are reported, not counted")
    ap.add_argument("--table", action="store_true", help="print the table as markdown")
    ap.add_argument("--json", help="write every attempt's outcome here")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = ap.parse_args()
    only = [c for c in CLASSES if not args.only or c in args.only.split(",")]
    work = tempfile.mkdtemp(prefix="cs-attack-")
    t0 = time.monotonic()
    try:
        P = Pass(args, work)
        attempts = plan(P, args, only)
        print("attack_pass: %d attempts, %d classes, %d jobs (%s)" % (len(attempts), len(only), args.jobs, work),
              flush=True)
        results = run_all(attempts, args.jobs)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    failed = [r for r in results if r[1]]
    expect_fail = [c for c in args.expect_fail.split(",") if c]
    counted = [r for r in failed if r[0].cls not in expect_fail]
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"class": a.cls, "variant": a.variant, "outcome": why or "ok", "seconds": round(s, 2),
                        "reproducer": reproducer(a)} for a, why, s in results], f, indent=1)
    print(table(results, expect_fail) if args.table else "")
    print("attack_pass: %d attempts in %.0f s: %d failed (%d in classes of --expect-fail)" % (
        len(results), time.monotonic() - t0, len(failed), len(failed) - len(counted)))
    print("attack_pass: %s" % ("FAILED" if counted else "passed"))
    return 1 if counted else 0


if __name__ == "__main__":
    sys.exit(main())
