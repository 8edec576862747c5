-- cs.triage.diagnosis: from files to a diagnosis (docs/triage.md). load(paths) reads the files
-- and directories named on the command line (each recognised by cs.triage.parse); diagnose(arts)
-- gathers what they say (NCCL facts, the world, the environment) and runs the Flight Recorder or
-- the watchdog analysis and the environment audit on it. Reads only files named on the command line.
local native = require "commscript.native"
local P = require "cs.triage.parse"
local FR, WD = require "cs.triage.flight_recorder", require "cs.triage.watchdog"

local M = {}

local bad = P.bad
local analyse_fr, analyse_watchdog = FR.analyse, WD.analyse

-- Files and directories -> artifacts. A directory contributes the files under it; each file is
-- recognised by its content.
function M.load(paths)
  if type(paths) ~= "table" or #paths == 0 then
    bad("triage: no artifacts given (--paths FILE_OR_DIR[,...]: watchdog/NCCL logs, Flight Recorder dumps, NCCL RAS or nccl-tests output)")
  end
  local files, seen = {}, {}
  for _, p in ipairs(paths) do
    local kind = native.triage_kind(p)
    if kind == "directory" then
      local list = native.triage_list(p)
      if #list == 0 then bad(p .. ": an empty directory") end
      for _, f in ipairs(list) do if not seen[f] then seen[f] = true; files[#files + 1] = f end end
    elseif kind == "file" then
      if not seen[p] then seen[p] = true; files[#files + 1] = p end
    else
      bad(p .. ": no such file or directory")
    end
  end
  -- Memory is what triage watches (docs/triage.md, "Memory"): the collector starts a cycle when
  -- the heap has grown by a tenth since the last one (Lua's default waits for it to double),
  collectgarbage("setpause", 110)
  collectgarbage("setstepmul", 1000)  -- and ends it before the heap grows much more
  local out = {}
  for _, f in ipairs(files) do out[#out + 1] = P.read(f) end
  return out
end

function M.diagnose(arts, opts)
  opts = opts or {}
  local diag = { groups = {}, nccl = { transports = {}, hosts = {}, net = {}, rings = {}, trees = {}, warns = {}, comms = {} },
    env = {}, env_at = {}, files = {}, counts = {}, ras = {}, tests = {} }
  local dumps, texts = {}, {}
  for _, a in ipairs(arts) do
    diag.counts[a.kind] = (diag.counts[a.kind] or 0) + 1
    diag.files[#diag.files + 1] = { path = a.path, kind = a.kind, encoding = a.encoding, rank = a.rank,
      recognised = a.recognised }
    if a.kind == "fr" then dumps[#dumps + 1] = a
    elseif a.kind == "text" then texts[#texts + 1] = a
    elseif a.kind == "ras" then diag.ras[#diag.ras + 1] = a
    elseif a.kind == "nccl_tests" then diag.tests[#diag.tests + 1] = a.tests end
    for k, v in pairs(a.env or {}) do
      if diag.env[k] ~= nil and diag.env[k] ~= v then
        diag.env_conflicts = diag.env_conflicts or {}
        diag.env_conflicts[#diag.env_conflicts + 1] = { name = k, a = diag.env[k], a_at = diag.env_at[k], b = v, b_at = a.env_at[k] }
      end
      diag.env[k] = v
      diag.env_at[k] = a.env_at[k]
    end
  end
  -- NCCL facts from the logs
  local world
  for _, t in ipairs(texts) do
    local nc = t.nccl
    for _, v in ipairs(nc.versions) do
      if not diag.nccl.version then diag.nccl.version, diag.nccl.version_at = v.version, v.at
      elseif v.version ~= diag.nccl.version then
        diag.nccl.version_mismatch = diag.nccl.version_mismatch or { a = diag.nccl.version, a_at = diag.nccl.version_at, b = v.version, b_at = v.at }
      end
    end
    for tr, at in pairs(nc.transports) do diag.nccl.transports[tr] = diag.nccl.transports[tr] or at end
    for h in pairs(nc.hosts) do diag.nccl.hosts[h] = true end
    for _, k in ipairs({ "net", "rings", "trees", "warns", "comms" }) do
      for _, x in ipairs(nc[k]) do table.insert(diag.nccl[k], x) end
    end
    if t.tests then diag.tests[#diag.tests + 1] = t.tests end
  end
  for _, c in ipairs(diag.nccl.comms) do
    if not world or c.nranks > world then world = c.nranks; diag.world_at = c.at end
  end
  for _, r in ipairs(diag.ras) do
    diag.nccl.version = diag.nccl.version or r.nccl_version
    diag.nccl.version_at = diag.nccl.version_at or r.path
  end
  for _, t in ipairs(diag.tests) do
    diag.nccl.version = diag.nccl.version or t.nccl_version
  end
  -- the world: --world, else NCCL's nranks, else the highest rank seen + 1
  if opts.world and opts.world > 0 then world = opts.world; diag.world_at = "--world" end
  local maxrank = -1
  for _, d in ipairs(dumps) do
    if d.rank > maxrank then maxrank = d.rank end
    for _, g in ipairs(d.groups) do for _, r in ipairs(g.ranks) do if r > maxrank then maxrank = r end end end
  end
  for _, t in ipairs(texts) do
    for _, w in ipairs(t.watchdog) do if w.rank > maxrank then maxrank = w.rank end end
    for _, p in ipairs(t.progress) do if p.rank > maxrank then maxrank = p.rank end end
  end
  if not world and maxrank >= 0 then world = maxrank + 1; diag.world_at = "the highest rank seen" end
  if world and world > P.MAX_RANKS then
    bad(("triage: a world of %s ranks (%s): more than the %d triage reads"):format(tostring(world), tostring(diag.world_at), P.MAX_RANKS))
  end
  diag.world = world
  if #dumps > 0 then analyse_fr(dumps, diag) end
  local has_wd = false
  for _, t in ipairs(texts) do if #t.watchdog > 0 then has_wd = true end end
  if has_wd and #dumps == 0 then analyse_watchdog(texts, diag, world)
  elseif has_wd then diag.watchdog_seen = true end
  -- the environment audit (cs.env), on what the artifacts show
  local n = 0
  for _ in pairs(diag.env) do n = n + 1 end
  if n > 0 then
    local env = require "cs.env"
    local ver = diag.nccl.version and diag.nccl.version:match("^(%d+%.%d+%.%d+)")
    diag.env_findings = env.audit(diag.env, { nccl_version = ver, sources = diag.env_at })
  else
    diag.env_findings = {}
  end
  local recognised = #diag.groups + #diag.ras + #diag.tests + n
  for _ in pairs(diag.nccl.transports) do recognised = recognised + 1 end
  recognised = recognised + #diag.nccl.comms + #diag.nccl.warns + (diag.nccl.version and 1 or 0)
  if recognised == 0 then
    bad("triage: nothing recognised in " .. #arts .. " file(s): no watchdog line, Flight Recorder dump, NCCL log line, NCCL RAS or nccl-tests output")
  end
  return diag
end

return M
