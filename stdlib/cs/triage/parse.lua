-- cs.triage.parse: recognises and reads the artifacts a customer sends (docs/triage.md), each as
-- its writer writes it:
--   * PyTorch Flight Recorder dumps, pickle (FlightRecorder::dump -> pickle_str) or JSON
--     (FlightRecorder::dump_json), versions "2.x" (torch/csrc/distributed/c10d/FlightRecorder*.hpp);
--     the rank comes from the file name's trailing digits, as fr_trace's loader takes it;
--   * text logs: the ProcessGroupNCCL watchdog's "Watchdog caught collective operation timeout:
--     WorkNCCL(SeqNum=..., OpType=..., NumelIn=..., NumelOut=..., Timeout(ms)=...)" lines and its
--     "last enqueued/completed NCCL work" lines; NCCL_DEBUG=INFO/WARN lines (version, init,
--     channels and transports, trees, network, "set by environment", WARN); exported variables;
--     nccl-tests' text output;
--   * NCCL RAS's JSON (src/ras/client_support.cc, rasDumpCommsToJSON) and nccl-tests' -J JSON
--     (src/util.cu, JSON_FILE_VERSION 2).
-- Every record keeps `at`, the "file:line" (or "file: entry N") it came from. Bad input raises
-- cs.raise(cs.exit.bad_input, ...) naming the file.
local native = require "commscript.native"
local is_limit = require("cs.sandbox").is_limit

local M = {}

local function bad(msg)
  local e = setmetatable({ code = native.exit_codes.bad_input, message = msg },
    { __tostring = function(x) return x.message end })
  error(e, 0)
end
M.bad = bad

local NULL = native.null
local function nn(v) if v == NULL then return nil end return v end

-- ---------------------------------------------------------------- helpers

local function is_int(v) return type(v) == "number" and v == math.floor(v) and v == v end

local function numel(shape)
  local n = 1
  if type(shape) ~= "table" then return nil end
  for _, d in ipairs(shape) do
    if not is_int(d) or d < 0 then return nil end
    n = n * d
  end
  return n
end
M.numel = numel

-- Sum of the elements of a list of shapes ([[2,3],[4]] -> 10).
function M.total(shapes)
  local n = 0
  for _, s in ipairs(shapes or {}) do n = n + (numel(s) or 0) end
  return n
end

local function shapes_text(shapes)
  local parts = {}
  for _, s in ipairs(shapes or {}) do
    local d = {}
    for _, x in ipairs(s) do d[#d + 1] = tostring(x) end
    parts[#parts + 1] = "[" .. table.concat(d, ", ") .. "]"
  end
  return "[" .. table.concat(parts, ", ") .. "]"
end
M.shapes_text = shapes_text

-- ---------------------------------------------------------------- Flight Recorder

-- The fields fr_trace reads (components/types.py Op/EntryState, builder.py), with their types.
local ENTRY_FIELDS = {
  record_id = "int", collective_seq_id = "int", p2p_seq_id = "int", profiling_name = "string",
  input_sizes = "shapes", output_sizes = "shapes", input_dtypes = "strings", output_dtypes = "strings",
  state = "string", process_group = "pair",
}

-- Every field of an entry triage reads: the engine builds only these of a dump's entries (a
-- dump's stack frames and the rest are never made into Lua tables; bind_triage.cpp).
local KEEP_FIELDS = { "seq_id", "timeout_ms", "time_created_ns", "duration_ms", "is_p2p" }
for k in pairs(ENTRY_FIELDS) do KEEP_FIELDS[#KEEP_FIELDS + 1] = k end
table.sort(KEEP_FIELDS)

local function check_entry(path, i, e)
  if type(e) ~= "table" then bad(("%s: entry %d is not a dict"):format(path, i)) end
  -- Dumps before version 2.2 number collectives as seq_id, and before 2.3 have no dtypes.
  if e.collective_seq_id == nil and is_int(e.seq_id) then e.collective_seq_id = e.seq_id end
  if e.p2p_seq_id == nil then e.p2p_seq_id = 0 end
  if e.input_dtypes == nil then e.input_dtypes = {} end
  if e.output_dtypes == nil then e.output_dtypes = {} end
  for k, want in pairs(ENTRY_FIELDS) do
    local v = e[k]
    local ok
    if want == "int" then ok = is_int(v)
    elseif want == "string" then ok = type(v) == "string"
    elseif want == "strings" then
      ok = type(v) == "table"
      if ok then for _, s in ipairs(v) do if type(s) ~= "string" then ok = false end end end
    elseif want == "shapes" then
      ok = type(v) == "table"
      if ok then for _, s in ipairs(v) do if numel(s) == nil then ok = false end end end
    elseif want == "pair" then
      ok = type(v) == "table" and type(v[1]) == "string" and type(v[2]) == "string"
    end
    if not ok then
      bad(("%s: entry %d: field '%s' is %s, not the %s a Flight Recorder dump has"):format(
        path, i, k, v == nil and "missing" or type(v), want == "pair" and "(name, desc) pair" or want))
    end
  end
  if not e.profiling_name:find(":", 1, true) then
    bad(("%s: entry %d: profiling_name '%s' is not '<backend>:<op>'"):format(path, i, e.profiling_name))
  end
end

-- The most ranks a job triage reads may have (the repro and its loops are sized by the world).
M.MAX_RANKS = 1048576

-- Parses pg_config's "ranks" (ranks_str: "[0, 1, 2]"): whole numbers 0 <= r < MAX_RANKS.
local function parse_ranks(path, s)
  local out = {}
  if type(s) == "table" then
    for i, r in ipairs(s) do out[i] = r end
  elseif type(s) ~= "string" or #s > 1000000 then
    bad(path .. ": pg_config ranks is not a list")
  else
    if not s:match("^%s*%[[%d,%s%-]*%]%s*$") then bad(("%s: pg_config ranks %q is not a list of ranks"):format(path, s:sub(1, 80))) end
    for d in s:gmatch("%-?%d+") do out[#out + 1] = tonumber(d) end
  end
  for _, r in ipairs(out) do
    if not is_int(r) or r < 0 or r >= M.MAX_RANKS then
      bad(("%s: pg_config ranks: %s is not a rank (a whole number from 0 to %d)"):format(path, tostring(r):sub(1, 40), M.MAX_RANKS - 1))
    end
  end
  return out
end

-- A decoded dump (pickle or JSON) -> { kind = "fr", path, rank, version, entries, groups, nccl_version }.
function M.flight_recorder(path, d, encoding)
  if type(d) ~= "table" then bad(path .. ": not a Flight Recorder dump (the top level is not a dict)") end
  local version = d.version
  if type(version) ~= "string" or not version:match("^%d+%.%d+$") then
    bad(("%s: Flight Recorder version %s is not 'major.minor'"):format(path, tostring(version)))
  end
  local major = tonumber(version:match("^(%d+)"))
  if major ~= 2 then
    bad(("%s: Flight Recorder dump version %s: this triage reads versions 2.x (the format of PyTorch 2.2 and later)"):format(path, version))
  end
  local base = path:match("([^/]+)$")
  local stem = base
  for _ = 1, 3 do stem = stem:gsub("%.gz$", ""):gsub("%.json$", ""):gsub("%.pkl$", ""):gsub("%.pickle$", "") end
  local digits = stem:match("(%d+)$")
  if not digits then
    bad(("%s: cannot tell the rank from the file name (PyTorch names dumps <prefix><rank>, e.g. nccl_trace_rank_3)"):format(path))
  end
  local rank = tonumber(digits)
  if rank >= M.MAX_RANKS then bad(("%s: rank %s (from the file name) is beyond %d"):format(path, digits:sub(1, 40), M.MAX_RANKS - 1)) end
  local entries = nn(d.entries) or {}
  if type(entries) ~= "table" then bad(path .. ": 'entries' is not a list") end
  for i, e in ipairs(entries) do check_entry(path, i, e) end
  local groups = {}
  local pgc = nn(d.pg_config) or {}
  if type(pgc) ~= "table" then bad(path .. ": 'pg_config' is not a dict") end
  for name, g in pairs(pgc) do
    if type(g) ~= "table" then bad(("%s: pg_config '%s' is not a dict"):format(path, tostring(name))) end
    groups[#groups + 1] = { name = tostring(name), desc = tostring(nn(g.desc) or "undefined"), ranks = parse_ranks(path, g.ranks) }
  end
  table.sort(groups, function(a, b) return a.name < b.name end)
  return { kind = "fr", path = path, rank = rank, version = version, encoding = encoding, entries = entries,
           groups = groups, nccl_version = nn(d.comm_lib_version) or nn(d.nccl_version), pg_status = nn(d.pg_status) }
end

-- ---------------------------------------------------------------- text logs

-- Lower-case short names of the watchdog's OpType (c10d::opTypeToString).
local function rank_of_line(line)
  return tonumber(line:match("%[Rank (%d+)%]") or line:match("%f[%w]Rank (%d+)%]") or line:match("^%[rank(%d+)%]"))
end

local function pg_of_line(line)
  local id, guid, desc = line:match("%[PG ID (%d+) PG GUID ([^%(%s]+)%(([^%)]*)%)")
  if id then return guid, desc end
  id, guid = line:match("%[PG ID (%d+) PG GUID ([^%s%]]+)")
  if id then return guid, "undefined" end
  id = line:match("[Pp]rocess [Gg]roup (%d+)")
  return id or "0", "default_pg"
end

local TRANSPORT_PAT = "via ([%w/_]+)"

-- One NCCL_DEBUG line's message (INFO or WARN): version, warnings, communicators, transports,
-- rings, trees, network, the variables NCCL says the environment set.
local function nccl_debug_line(out, host, sev, msg, at)
  local nc = out.nccl
  if host then nc.hosts[host] = true end
  local v = msg:match("^NCCL version ([%w%.%+%-]+)")
  if v then nc.versions[#nc.versions + 1] = { version = v, at = at } end
  if sev == "WARN" then nc.warns[#nc.warns + 1] = { message = msg, at = at, host = host } end
  local cr, cn = msg:match("rank (%d+) n[Rr]anks (%d+)")
  if cr and msg:find("comm 0x", 1, true) then
    local cid = msg:match("commId (0x%x+)") or msg:match("comm (0x%x+)")
    nc.comms[#nc.comms + 1] = { comm = cid, rank = tonumber(cr), nranks = tonumber(cn), host = host, at = at }
  end
  if msg:match("^Channel %d+/%d+ : %d+%[") or msg:match("^Channel %d+/%d+ : %d+%[%x+%] %-> ") then
    local t = msg:match(TRANSPORT_PAT)
    if t then
      t = t:gsub("/%d+", "")  -- NET/IB/0/GDRDMA -> NET/IB/GDRDMA
      if not nc.transports[t] then nc.transports[t] = at end
    end
  end
  local ring = msg:match("^Channel (%d+/%d+) :%s+([%d%s]+)$")
  if ring then nc.rings[#nc.rings + 1] = { line = msg, at = at } end
  if msg:match("^Trees ") then nc.trees[#nc.trees + 1] = { line = msg, at = at } end
  local net = msg:match("^NET/([%w]+) : Using (.*)$") or msg:match("^Using network (%w+)")
  if net then nc.net[#nc.net + 1] = { line = msg, at = at } end
  local ename, evalue = msg:match("^([A-Z][A-Z0-9_]+) set by environment to (.*)$")
  if ename then out.env[ename] = evalue; out.env_at[ename] = at end
end

-- One line of nccl-tests' text output, after its header: a device, a result row, the footer.
local function nccl_tests_line(tests, line, c1, at)
  local rk, host2, dev = line:match("^#%s+Rank%s+(%d+) Group%s+%d+ Pid%s+%d+ on%s+(%S+) device%s+(%d+)")
  if rk then tests.devices[#tests.devices + 1] = { rank = tonumber(rk), host = host2, device = tonumber(dev), at = at } end
  if c1 == 35 and line:find("i_min", 1, true) then tests.per_iter = true end  -- -I 1 columns
  local size, count, typ, redop, root, rest = line:match("^%s+(%d+)%s+(%d+)%s+(%w+)%s+(%w+)%s+(%-?%d+)%s+(.*)$")
  if size then
    local f = {}
    for w in rest:gmatch("%S+") do f[#f + 1] = w end
    tests.rows[#tests.rows + 1] = { at = at, size = tonumber(size), count = tonumber(count), type = typ, redop = redop,
      root = tonumber(root), time_us = tonumber(f[1]), algbw = tonumber(f[2]), busbw = tonumber(f[3]), wrong = tonumber(f[4]),
      -- with -I: time algbw busbw #wrong i_min i_max i_p99 i_cv% per half (util.cu writeResultHeader)
      ip_wrong = tonumber(f[tests.per_iter and 12 or 8]),
      i_p99 = tests.per_iter and tonumber(f[7]) or nil, i_cv = tests.per_iter and tonumber(f[8]) or nil }
  end
  local oob, oobv = line:match("^# Out of bounds values : (%d+) (%u+)")
  if oob then tests.out_of_bounds = { count = tonumber(oob), okay = oobv == "OK", at = at } end
  local avg, avgv = line:match("^# Avg bus bandwidth%s+: ([%d%.eE%+%-]+)%s*(%u*)")
  if avg then tests.avg_busbw = { value = tonumber(avg), failed = avgv == "FAILED", at = at } end
end

-- One text file: every line is offered to each reader below.
function M.text(path, data)
  local out = {
    kind = "text", path = path, watchdog = {}, progress = {}, nccl = { versions = {}, transports = {}, comms = {},
      warns = {}, net = {}, rings = {}, trees = {}, hosts = {} }, env = {}, env_at = {}, tests = nil, lines = 0,
  }
  local n = 0
  local tests
  for line in data:gmatch("([^\n]*)\n?") do
    n = n + 1
    if n > 20000000 then bad(path .. ": more than 20 million lines") end
    if #line > 0 then
      local at = path .. ":" .. n
      local has_nccl = line:find("NCCL", 1, true) ~= nil  -- every watchdog and NCCL line has it
      local c1 = line:byte(1)
      -- the watchdog's timeout line (ProcessGroupNCCL::WorkNCCL::checkTimeout / watchdog)
      local work = has_nccl and line:match("WorkNCCL%((.-)%)%s+ran for")
      if work then
        local w = {
          at = at, rank = rank_of_line(line), seq = tonumber(work:match("SeqNum=(%d+)")),
          optype = work:match("OpType=([%w_]+)"), numel_in = tonumber(work:match("NumelIn=(%-?%d+)")),
          numel_out = tonumber(work:match("NumelOut=(%-?%d+)")), timeout_ms = tonumber(work:match("Timeout%(ms%)=(%d+)")),
          ran_ms = tonumber(line:match("ran for (%d+) milliseconds")),
        }
        w.group, w.desc = pg_of_line(line)
        if w.rank and w.seq and w.optype then out.watchdog[#out.watchdog + 1] = w end
      end
      -- "... at work: 5, last enqueued NCCL work: 5, last completed NCCL work: 4."
      local enq = has_nccl and line:match("last enqueued NCCL work: (%-?%d+)")
      local comp = has_nccl and line:match("last completed NCCL work: (%-?%d+)")
      if enq or comp then
        local r = rank_of_line(line)
        if r then
          local g, desc = pg_of_line(line)
          out.progress[#out.progress + 1] = { at = at, rank = r, group = g, desc = desc,
            enqueued = tonumber(enq), completed = tonumber(comp) }
        end
      end
      -- NCCL_DEBUG lines: "host:pid:tid [dev] NCCL INFO ..." / "NCCL WARN ..."
      local host, sev, msg
      if has_nccl then
        host, sev, msg = line:match("^%s*([%w%.%-_]+):%d+:%d+ %[%d+%] NCCL (%u+) (.*)$")
        if not sev then sev, msg = line:match("NCCL (INFO) (.*)$") end
        if not sev then sev, msg = line:match("NCCL (WARN) (.*)$") end
      end
      if sev then nccl_debug_line(out, host, sev, msg, at) end
      -- exported variables (a job script's env dump)
      local ename, evalue
      if c1 == 101 or c1 == 32 or c1 == 9 then  -- 'e', ' ', tab: "export NAME=value"
        ename, evalue = line:match("^%s*export%s+([A-Z][A-Z0-9_]*)=(.*)$")
      elseif c1 >= 65 and c1 <= 90 then           -- 'A'..'Z': "NAME=value"
        ename, evalue = line:match("^([A-Z][A-Z0-9_]*)=(.*)$")
      end
      if ename and (ename:match("^NCCL_") or ename:match("^TORCH_") or ename:match("^UCX_")) then
        evalue = evalue:gsub("^[\"']", ""):gsub("[\"']%s*$", "")
        out.env[ename] = evalue
        out.env_at[ename] = at
      end
      -- nccl-tests' text output (src/util.cu: writeDeviceReport, writeBenchmarkLine*, writeResultFooter)
      local tv = c1 == 35 and line:match("^# nccl%-tests version (%S+)")
      if tv or (c1 == 35 and line:match("^# Collective test starting: ")) then
        tests = tests or { rows = {}, devices = {}, at = at }
        if tv then tests.version = tv; tests.nccl_library = tonumber(line:match("nccl%-library=(%d+)")) end
        tests.program = tests.program or line:match("^# Collective test starting: (%S+)")
      end
      if tests and (c1 == 35 or c1 == 32) then nccl_tests_line(tests, line, c1, at) end
    end
  end
  out.lines = n
  out.tests = tests
  local found = #out.watchdog + #out.progress + #out.nccl.versions + #out.nccl.comms + #out.nccl.warns
  for _ in pairs(out.env) do found = found + 1 end
  if tests then found = found + 1 end
  for _ in pairs(out.nccl.transports) do found = found + 1 end
  out.recognised = found
  return out
end

-- ---------------------------------------------------------------- JSON documents

local function bool_of(v)
  if v == true or v == "true" then return true end
  if v == false or v == "false" then return false end
  return nil
end

-- NCCL RAS (client_support.cc: jsonWriteHeader / jsonStartCommunicator / jsonWriteRankData /
-- jsonWriteMissingRank / jsonWriteFooter).
function M.ras(path, d)
  if type(d.communicators) ~= "table" then bad(path .. ": NCCL RAS JSON without a 'communicators' list") end
  local comms = {}
  for i, c in ipairs(d.communicators) do
    if type(c) ~= "table" or type(c.ranks) ~= "table" then bad(("%s: communicators[%d] has no 'ranks' list"):format(path, i - 1)) end
    local ranks, missing = {}, {}
    for _, r in ipairs(c.ranks) do
      if type(r) ~= "table" or not is_int(r.rank) then bad(("%s: communicators[%d]: a rank without a number"):format(path, i - 1)) end
      local st = type(r.status) == "table" and r.status or {}
      ranks[#ranks + 1] = { rank = r.rank, host = nn(r.host), pid = nn(r.pid), async_error = nn(st.async_error) or 0,
        abort = bool_of(st.abort_flag), counts = type(r.collective_counts) == "table" and r.collective_counts or {} }
    end
    for _, r in ipairs(type(c.missing_ranks) == "table" and c.missing_ranks or {}) do
      if type(r) == "table" and is_int(r.rank) then
        local st = type(r.status) == "table" and r.status or {}
        missing[#missing + 1] = { rank = r.rank, host = nn(r.host), dead = bool_of(st.considered_dead),
          unresponsive = bool_of(st.unresponsive) }
      end
    end
    comms[#comms + 1] = { hash = tostring(nn(c.hash) or i), size = nn(c.size), ranks = ranks, missing = missing,
      at = ("%s: communicators[%d]"):format(path, i - 1) }
  end
  return { kind = "ras", path = path, nccl_version = nn(d.nccl_version), comms = comms }
end

-- nccl-tests -J (util.cu: jsonOutputInit, writeDeviceReport, writeBenchmarkLine*, writeResultFooter).
function M.nccl_tests_json(path, d)
  local tests = { rows = {}, devices = {}, at = path, json = true, version = d.version }
  local v = nn(d.nccl_version)
  if is_int(v) then  -- NCCL_VERSION_CODE: major*10000 + minor*100 + patch (2.9 and later)
    tests.nccl_version = ("%d.%d.%d"):format(math.floor(v / 10000), math.floor(v / 100) % 100, v % 100)
  end
  for i, r in ipairs(type(d.results) == "table" and d.results or {}) do
    if type(r) == "table" then
      local oop = type(r.out_of_place) == "table" and r.out_of_place or {}
      local ip = type(r.in_place) == "table" and r.in_place or {}
      tests.rows[#tests.rows + 1] = { at = ("%s: results[%d]"):format(path, i - 1), size = nn(r.size), count = nn(r.count),
        type = nn(r.type), redop = nn(r.redop), root = tonumber(nn(r.root)), time_us = nn(oop.time) or nn(oop.cpu_time),
        algbw = nn(oop.alg_bw), busbw = nn(oop.bus_bw), wrong = tonumber(nn(oop.nwrong)), ip_wrong = tonumber(nn(ip.nwrong)),
        i_p99 = type(r.out_of_place_per_iter) == "table" and tonumber(nn(r.out_of_place_per_iter.p99_us)) or nil,
        i_cv = type(r.out_of_place_per_iter) == "table" and tonumber(nn(r.out_of_place_per_iter.cv_pct)) or nil }
    end
  end
  for _, dv in ipairs(type(d.config) == "table" and type(d.config.devices) == "table" and d.config.devices or {}) do
    if type(dv) == "table" then tests.devices[#tests.devices + 1] = { rank = nn(dv.rank), host = nn(dv.hostname), device = nn(dv.device) } end
  end
  local oob = nn(d.out_of_bounds)
  if type(oob) == "table" then tests.out_of_bounds = { count = nn(oob.count), okay = bool_of(oob.okay), at = path .. ": out_of_bounds" } end
  local avg = nn(d.average_bus_bandwidth)
  if type(avg) == "table" then
    tests.avg_busbw = { value = tonumber(nn(avg.bandwidth)), failed = bool_of(avg.okay) == false, at = path .. ": average_bus_bandwidth" }
  end
  local env, env_at = {}, {}
  for i, kv in ipairs(type(d.env) == "table" and d.env or {}) do
    local k, val = tostring(kv):match("^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
    if k then env[k] = val; env_at[k] = ("%s: env[%d]"):format(path, i - 1) end
  end
  tests.errors = type(d.errors) == "table" and d.errors or {}
  return { kind = "nccl_tests", path = path, tests = tests, env = env, env_at = env_at }
end

-- ---------------------------------------------------------------- detection

local MAX_JSON_DEPTH = 64

local function decode_json(path, data)
  if native.triage_json_depth(data, MAX_JSON_DEPTH + 1) > MAX_JSON_DEPTH then
    bad(("%s: JSON nested deeper than %d levels (no artifact triage reads is)"):format(path, MAX_JSON_DEPTH))
  end
  local ok, d = pcall(native.triage_json, data, KEEP_FIELDS)
  if not ok then
    if is_limit(d) then error(d, 0) end  -- engine limits pass (cs.sandbox: a table marked limit is not one)
    local m = type(d) == "table" and d.message or tostring(d)
    m = m:gsub("^.-json_decode: ", "")
    bad(("%s: not valid JSON (truncated or corrupt?): %s"):format(path, m))
  end
  return d
end

-- Calls an engine function on `path`'s data; its refusal (exit 1) is re-raised naming the file
-- instead of this module's line.
local function engine(path, f, ...)
  local ok, r, r2 = pcall(f, ...)
  if ok then return r, r2 end
  if is_limit(r) then error(r, 0) end
  local msg = type(r) == "table" and tostring(r.message) or tostring(r)
  msg = msg:gsub("^[^:]*triage_parse%.lua:%d+: ", "")
  if msg:sub(1, #path + 1) ~= path .. ":" then msg = path .. ": " .. msg end
  local code = type(r) == "table" and r.code or native.exit_codes.runtime
  error(setmetatable({ code = code, message = msg }, { __tostring = function(x) return x.message end }), 0)
end

-- Reads one file and returns its artifact table (kind = fr | text | ras | nccl_tests).
function M.read(path)
  -- a pickle comes back decoded (its bytes never reach Lua), anything else as its bytes
  local kind, data = engine(path, native.triage_load, path, KEEP_FIELDS)
  if kind == "pickle" then return M.flight_recorder(path, data, "pickle") end
  local first = data:match("^%s*(.)")
  -- A JSON document: an object, or an array of arrays/objects/strings (logs start with "[rank0]:"
  -- or "[2026-...]" too, so a '[' alone does not make JSON).
  local json_array = first == "[" and data:match("^%s*%[%s*[%[{\"%]]") ~= nil and data:match("%]%s*$") ~= nil
  if first == "{" or json_array then
    local d = decode_json(path, data)
    if type(d) ~= "table" or d[1] ~= nil then bad(path .. ": a JSON document that is not an object") end
    if d.pg_config ~= nil or (d.entries ~= nil and d.version ~= nil) then return M.flight_recorder(path, d, "json") end
    if d.communicators ~= nil then return M.ras(path, d) end
    if d.results ~= nil or (d.config ~= nil and d.nccl_version ~= nil) then return M.nccl_tests_json(path, d) end
    bad(path .. ": a JSON document of no known kind (not a Flight Recorder dump, NCCL RAS or nccl-tests -J output)")
  end
  if data:find("\0", 1, true) then
    bad(path .. ": binary data of no known kind (a Flight Recorder pickle starts with byte 0x80)")
  end
  return M.text(path, data)
end

return M
