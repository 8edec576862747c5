-- LuaUnit tests of cs.triage, cs.triage.parse and cs.triage.repro on in-memory artifacts (the
-- files of tests/fixtures/triage are run end to end by tests/e2e/test_triage.py).
-- Run: commscript --backend self --trusted tests/lua/test_triage.lua
local cs = require "commscript"
local lu = require "luaunit"
local T = require "cs.triage"
local P = require "cs.triage.parse"
local R = require "cs.triage.repro"

local recipe = cs.recipe {
  name = "test_triage",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.triage",
}

local function raised(f, ...)
  local ok, e = pcall(f, ...)
  lu.assertFalse(ok)
  return e
end

-- A Flight Recorder dump of `n` entries (as decoded from the pickle), rank from the name.
local function entry(rid, seq, name, i, o, state, dtype)
  return { record_id = rid, collective_seq_id = seq, p2p_seq_id = 0, profiling_name = "nccl:" .. name,
    input_sizes = i, output_sizes = o, input_dtypes = { dtype or "Float" }, output_dtypes = { dtype or "Float" },
    state = state, process_group = { "0", "default_pg" }, timeout_ms = 600000, is_p2p = false }
end
local function dump(rank, entries, ranks)
  return P.flight_recorder("trace_rank_" .. rank, { version = "2.10", entries = entries,
    pg_config = { ["0"] = { name = "0", desc = "default_pg", ranks = ranks or "[0, 1, 2]" } } }, "pickle")
end

TestNames = {}
function TestNames:test_op_of()
  lu.assertEquals(T.op_of("nccl:_allgather_base"), "allgather")
  lu.assertEquals(T.op_of("_ALLGATHER_BASE"), "allgather")
  lu.assertEquals(T.op_of("nccl:_reduce_scatter_base"), "reduce_scatter")
  lu.assertEquals(T.op_of("nccl:all_reduce"), "allreduce")
  lu.assertEquals(T.op_of("ALLTOALL_BASE"), "alltoall")
  lu.assertEquals(T.op_of("nccl:reduce"), "reduce")
  lu.assertNil(T.op_of("nccl:send 0->1"))
end
function TestNames:test_counts()
  lu.assertEquals(T.count_of({ op = "allgather", in_sizes = { { 256 } }, out_sizes = { { 1024 } } }, 4), 256)
  lu.assertEquals(T.count_of({ op = "reduce_scatter", in_sizes = { { 1024 } }, out_sizes = { { 256 } } }, 4), 256)
  lu.assertEquals(T.count_of({ op = "allreduce", in_sizes = { { 2, 3 }, { 4 } }, out_sizes = {} }, 4), 10)
  lu.assertEquals(T.count_of({ op = "alltoall", in_sizes = { { 1024 } }, out_sizes = { { 1024 } } }, 4), 256)
  lu.assertEquals(T.dtype_of("BFloat16"), "bfloat16")
end

TestFr = {}
function TestFr:test_missing_rank_like_fr_trace()
  local d = {}
  for r = 0, 2 do
    local es = { entry(0, 1, "all_reduce", { { 8 } }, { { 8 } }, "completed") }
    if r ~= 1 then es[2] = entry(1, 2, "all_reduce", { { 8 } }, { { 8 } }, "started") end
    d[#d + 1] = dump(r, es)
  end
  local diag = T.diagnose(d)
  local v = diag.groups[1].verdict
  lu.assertEquals(v.kind, "missing")
  lu.assertEquals(v.ranks, { 1 })
  lu.assertEquals(v.seq, 2)
  lu.assertStrContains(v.fr_trace, "missing ranks: {1}")
end
function TestFr:test_culprit_is_the_odd_rank_even_when_it_is_rank_0()
  local d = {}
  for r = 0, 2 do
    local n = r == 0 and 4 or 8
    d[#d + 1] = dump(r, { entry(0, 1, "all_reduce", { { n } }, { { n } }, "started") })
  end
  local v = T.diagnose(d).groups[1].verdict
  lu.assertEquals(v.kind, "mismatch")
  lu.assertEquals(v.ranks, { 0 })
  lu.assertEquals(v.mismatch, "SIZE_OR_SYNTAX_MISMATCH")
end
function TestFr:test_dtype_and_type_mismatch()
  local d = {}
  for r = 0, 2 do
    d[#d + 1] = dump(r, { entry(0, 1, "all_reduce", { { 8 } }, { { 8 } }, "started", r == 2 and "Double" or "Float") })
  end
  lu.assertEquals(T.diagnose(d).groups[1].verdict.mismatch, "COLLECTIVE_DTYPE_MISMATCH")
  d = {}
  for r = 0, 2 do
    d[#d + 1] = dump(r, { entry(0, 1, r == 2 and "broadcast" or "all_reduce", { { 8 } }, { { 8 } }, "started") })
  end
  local diag = T.diagnose(d)
  lu.assertEquals(diag.groups[1].verdict.mismatch, "COLLECTIVE_TYPE_MISMATCH")
  local built = R.build(diag, {})
  lu.assertStrContains(built.toml, 'op = "broadcast"')
end
function TestFr:test_all_joined_and_stuck()
  local d = {}
  for r = 0, 2 do d[#d + 1] = dump(r, { entry(0, 1, "all_reduce", { { 8 } }, { { 8 } }, "started") }) end
  local diag = T.diagnose(d)
  lu.assertEquals(diag.groups[1].verdict.kind, "stuck")
  local built = R.build(diag, {})
  lu.assertNotStrContains(built.toml, "[[chaos]]")
end
function TestFr:test_refusals()
  local e = raised(P.flight_recorder, "x_rank_0", { version = "3.1", entries = {} })
  lu.assertEquals(e.code, cs.exit.bad_input)
  lu.assertStrContains(e.message, "reads versions 2.x")
  e = raised(P.flight_recorder, "norank", { version = "2.10", entries = {} })
  lu.assertStrContains(e.message, "cannot tell the rank")
  e = raised(P.flight_recorder, "t_rank_0", { version = "2.10", entries = { { record_id = "x" } } })
  lu.assertStrContains(e.message, "entry 1: field")
  local a, b = dump(0, {}), dump(1, {})
  b.version = "2.4"
  e = raised(T.diagnose, { a, b })
  lu.assertStrContains(e.message, "different versions")
end
function TestFr:test_scaling_keeps_the_missing_rank()
  local d = {}
  for r = 0, 7 do
    local es = { entry(0, 1, "_allgather_base", { { 4 } }, { { 32 } }, "completed") }
    if r ~= 6 then es[2] = entry(1, 2, "_allgather_base", { { 4 } }, { { 32 } }, "started") end
    d[#d + 1] = dump(r, es, "[0, 1, 2, 3, 4, 5, 6, 7]")
  end
  local built = R.build(T.diagnose(d), { ranks = 2 })
  lu.assertStrContains(built.lua, "6->1")
  lu.assertStrContains(built.toml, "ranks = [1]")
  lu.assertStrContains(built.toml, "after = 1")
  local e = raised(R.build, T.diagnose(d), { ranks = 16 })
  lu.assertStrContains(e.message, "more than the customer's 8 ranks")
end

function TestFr:test_two_groups_scaled_keep_their_shape()
  -- 8 ranks: tensor-parallel pairs {0,1} {2,3} {4,5} {6,7} (group "tp") and the world; rank 6
  -- never joins the pair's all-reduce #2. At 4 ranks the pair of rank 6 stays a pair.
  local d = {}
  for r = 0, 7 do
    local pair = r - r % 2
    local tp = { name = "1", desc = "tp", ranks = ("[%d, %d]"):format(pair, pair + 1) }
    local es = { entry(0, 1, "_allgather_base", { { 4 } }, { { 32 } }, "completed") }
    local e2 = entry(1, 1, "all_reduce", { { 8 } }, { { 8 } }, "completed")
    e2.process_group = { "1", "tp" }
    es[2] = e2
    if r ~= 6 then
      local e3 = entry(2, 2, "all_reduce", { { 8 } }, { { 8 } }, pair == 6 and "started" or "completed")
      e3.process_group = { "1", "tp" }
      es[3] = e3
    end
    local a = P.flight_recorder("t_rank_" .. r, { version = "2.10", entries = es,
      pg_config = { ["0"] = { name = "0", desc = "default_pg", ranks = "[0, 1, 2, 3, 4, 5, 6, 7]" }, ["1"] = tp } }, "pickle")
    d[#d + 1] = a
  end
  local diag = T.diagnose(d)
  local G = T.failure(diag)
  lu.assertEquals(G.desc, "tp")
  lu.assertEquals(G.ranks, { 6, 7 })
  lu.assertEquals(G.verdict.ranks, { 6 })
  local built = R.build(diag, { ranks = 4 })
  lu.assertStrContains(built.lua, "0->0, 1->1, 6->2, 7->3")
  lu.assertStrContains(built.lua, 'ranks = { 2, 3 } },  -- [')
  lu.assertStrContains(built.toml, "ranks = [2]")
  lu.assertStrContains(built.toml, "after = 1")
  lu.assertNotStrContains(built.toml, "warning")
end

TestText = {}
function TestText:test_watchdog_and_nccl_lines()
  local log = table.concat({
    "h1:1:1 [0] NCCL INFO comm 0xab rank 0 nranks 3 cudaDev 0 nvmlDev 0 busId 1 commId 0x1 - Init COMPLETE",
    "h1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
    "h1:1:1 [0] NCCL WARN NET/IB : Got completion with error 12",
    "[rank0]:[E1126 ProcessGroupNCCL.cpp:1] [PG ID 0 PG GUID 0(default_pg) Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=5, NumelOut=5, Timeout(ms)=1000) ran for 1002 milliseconds before timing out.",
    "[rank1]:[E1126 ProcessGroupNCCL.cpp:1] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=3, NumelOut=3, Timeout(ms)=1000) ran for 1002 milliseconds before timing out.",
    "[rank2]:[E1126 ProcessGroupNCCL.cpp:1] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=5, NumelOut=5, Timeout(ms)=1000) ran for 1002 milliseconds before timing out.",
  }, "\n")
  local a = P.text("log", log)
  lu.assertEquals(#a.watchdog, 3)
  local diag = T.diagnose({ a })
  lu.assertEquals(diag.world, 3)
  local v = diag.groups[1].verdict
  lu.assertEquals(v.kind, "mismatch")
  lu.assertEquals(v.ranks, { 1 })
  lu.assertEquals(diag.groups[1].per_rank[0].inflight.at, "log:4")
  lu.assertNotNil(diag.nccl.transports["P2P/IPC"])
  local kinds = {}
  for _, f in ipairs(T.findings(diag)) do kinds[f.kind] = f end
  lu.assertEquals(kinds["triage.nccl_warn"].evidence.at, { "log:3" })
  local built = R.build(diag, {})
  lu.assertStrContains(built.toml, "factor = 0.6")
  lu.assertStrContains(built.toml, "timeout = 1")
end
function TestText:test_nccl_tests_text_with_per_iteration_columns()
  -- util.cu's writeResultHeader / writeBenchmarkLine* with -I 1: 8 columns per half
  local out = table.concat({
    "# nccl-tests version 2.17.6 nccl-headers=22807 nccl-library=22807",
    "# Collective test starting: all_reduce_perf",
    "#  Rank  0 Group  0 Pid   4100 on      gpu-a device  0 [0000:18:00] NVIDIA H100 80GB HBM3",
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%",
    "     1048576        262144     float     sum      -1    40.20   26.08   39.12       0    39.10    44.00    43.90     2.10    40.00   26.21   39.32       5    39.00    45.00    44.50     3.40",
    "# Out of bounds values : 5 FAILED",
    "# Avg bus bandwidth    : 39.22 ",
  }, "\n")
  local a = P.text("t.log", out)
  lu.assertTrue(a.tests.per_iter)
  lu.assertEquals(a.tests.rows[1].wrong, 0)
  lu.assertEquals(a.tests.rows[1].ip_wrong, 5)
  lu.assertEquals(a.tests.rows[1].i_cv, 2.1)
  lu.assertEquals(a.tests.devices[1].host, "gpu-a")
  local diag = T.diagnose({ a })
  local kinds = {}
  for _, f in ipairs(T.findings(diag)) do kinds[f.kind] = f end
  lu.assertEquals(kinds["triage.nccl_tests_wrong"].evidence.at, { "t.log:5" })
end
function TestText:test_nothing_recognised()
  local e = raised(T.diagnose, { P.text("x", "hello\nworld\n") })
  lu.assertEquals(e.code, cs.exit.bad_input)
  lu.assertStrContains(e.message, "nothing recognised")
end

-- ---------------------------------------------------------------- the one writer (issue 30, class 1)
-- Customer strings reach repro.lua and repro.toml only as quoted data: each hostile name below
-- (every byte 0-255, "]]", "]=]", '"""', "'''", newlines, "--[[", code after a newline, a
-- [[chaos]] table after a newline, 1 MB of "]]\n\"") is a process group's name and desc, part of
-- an op's profiling name, the dump's directory, and a variable's value and file; each generated
-- repro.lua must load, run its top level touching no global but `require`, and hold the name
-- exactly in GROUPS; each repro.toml line must be a fixed header, a comment without control
-- characters or a key = value of the writer's. (tests/e2e/test_triage.py runs the same through
-- the binary, luajit, commscript --check and Python's tomllib.)
local function all_bytes()
  local b = {}
  for i = 0, 255 do b[#b + 1] = string.char(i) end
  return table.concat(b)
end
local HOSTILE = {
  all_bytes(), "]]", "]=]", "]==]", '"""', "'''", "\n", "\r\n", "--[[", "\\", "\\\n", "\0",
  "x\nos.exit(70)\n--", "x]]os.exit(70)--[[", '"\n[[chaos]]\nkind = "exit"\ncode = 70\n#',
  "\226\128\168\255\254\192\128\237\160\128", string.rep(']]\n"', 262144),
}

-- The dumps of a 3-rank job whose rank 1 never joins all-reduce #2, every name `s`.
local function hostile_diag(s)
  local d = {}
  local dir = s:gsub("/", "_"):sub(1, 200) .. "/"
  for r = 0, 2 do
    local function e(rid, seq, state)
      local x = entry(rid, seq, "all_reduce" .. s:gsub("[ /]", ""):sub(1, 300), { { 8 } }, { { 8 } }, state)
      x.process_group = { s, s }
      return x
    end
    local es = { e(0, 1, "completed") }
    if r ~= 1 then es[2] = e(1, 2, "started") end
    d[#d + 1] = P.flight_recorder(dir .. "trace_rank_" .. r, { version = "2.10", entries = es,
      pg_config = { [s] = { desc = s, ranks = "[0, 1, 2]" } } }, "pickle")
  end
  local v = s:gsub("[\r\n]", "")
  d[#d + 1] = P.text(dir .. "env.sh", "export NCCL_SOCKET_IFNAME=" .. v .. "\nexport NCCL_NET_PLUGIN=" .. v .. "\n")
  return T.diagnose(d), dir
end

-- Loads repro.lua and runs its top level with only `require "commscript"` reachable; returns
-- its upvalues by name (GROUPS, SEQUENCE, RANKS, ...), the globals it touched and the recipe.
local function load_repro(text)
  local chunk, err = loadstring(text, "=repro.lua")
  lu.assertNotNil(chunk, err)
  local touched = {}
  local stub = { recipe = function(decl) return { decl = decl } end }
  local env = setmetatable({}, {
    __index = function(_, k)
      touched[#touched + 1] = k
      if k == "require" then return function(name) assert(name == "commscript", name); return stub end end
      return nil
    end,
    __newindex = function(_, k) touched[#touched + 1] = "=" .. tostring(k) end })
  setfenv(chunk, env)
  local ok, recipe = pcall(chunk)
  lu.assertTrue(ok, tostring(recipe))
  local up = {}
  for i = 1, 100 do
    local name, v = debug.getupvalue(recipe.run, i)
    if not name then break end
    up[name] = v
  end
  return up, touched, recipe
end

local TOML_LINE = { "^$", "^%[run%]$", "^%[env%]$", "^%[%[chaos%]%]$", "^# [ -~]*$",
  '^[%w_]+ = "[ -~]*"  # "[ -~]*"$', '^# [%w_]+ = "[ -~]*"  # "[ -~]*"$', "^[%w_]+ = [%w%.%-%+]+$",
  '^[%w_]+ = "[%w_]+"$', "^ranks = %[[%d, ]*%]$", '^ops = %[[%w_", ]*%]$' }

TestWriter = {}
function TestWriter:test_quoting_functions_round_trip_every_byte()
  for _, s in ipairs(HOSTILE) do
    local q = R.lua_str(s)
    lu.assertNil(q:find("[%z\1-\31\127-\255]"))
    lu.assertEquals(loadstring("return " .. q)(), s)
    lu.assertNil(R.toml_str(s):find("[%z\1-\31\127-\255]"))
  end
  lu.assertEquals(R.toml_str('a"\\\n\0'), '"a\\"\\\\\\u000A\\u0000"')
  lu.assertEquals(R.toml_str("\195\169\240\159\152\128\255"), '"\\u00E9\\U0001F600\\u00FF"')
end
function TestWriter:test_hostile_names_stay_data()
  for i, s in ipairs(HOSTILE) do
    local diag, dir = hostile_diag(s)
    local built = R.build(diag, { sources = { dir .. "trace_rank_0", dir .. "env.sh" } })
    lu.assertNotNil(built, "name " .. i)
    local up, touched = load_repro(built.lua)
    lu.assertEquals(touched, { "require" }, "name " .. i)
    lu.assertEquals(up.RANKS, 3)
    lu.assertEquals(#up.GROUPS, 1)
    lu.assertTrue(up.GROUPS[1].name == s and up.GROUPS[1].desc == s, "name " .. i .. ": GROUPS does not hold it")
    lu.assertEquals(up.SEQUENCE[#up.SEQUENCE].op, "allreduce")
    local chaos = 0
    for line in built.toml:gmatch("([^\n]*)\n") do
      local fits = false
      for _, pat in ipairs(TOML_LINE) do if line:match(pat) then fits = true end end
      lu.assertTrue(fits, ("name %d: repro.toml line %q"):format(i, line:sub(1, 200)))
      if line == "[[chaos]]" then chaos = chaos + 1 end
    end
    lu.assertEquals(chaos, #built.summary.rules, "name " .. i)
    lu.assertStrContains(built.toml, "# NCCL_NET_PLUGIN = ")  -- a plugin path stays commented out
  end
end
function TestWriter:test_repro_refuses_another_number_of_ranks()
  local built = R.build(hostile_diag("pg"), {})
  local _, _, recipe = load_repro(built.lua)
  local raised_with
  for i = 1, 100 do
    local name = debug.getupvalue(recipe.run, i)
    if not name then break end
    if name == "cs" then
      debug.setupvalue(recipe.run, i, { exit = cs.exit, raise = function(code, msg)
        raised_with = { code = code, message = msg }
        error("raised", 0)
      end })
    end
  end
  lu.assertFalse(pcall(recipe.run, { size = 2, rank = 0 }))
  lu.assertEquals(raised_with.code, cs.exit.bad_input)
  lu.assertStrContains(raised_with.message, "written for 3 ranks, not 2")
  lu.assertStrContains(raised_with.message, "--ranks 2")
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestNames", TestNames },
    { "TestFr", TestFr },
    { "TestText", TestText },
    { "TestWriter", TestWriter },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
