-- The recipe lifecycle, driven by the C++ CLI: load (declare only), validate, resolve options,
-- run with a ctx, and reduce the outcome to an exit code. Not for recipes to call.
local native = require "commscript.native"
local options = require "cs.options"
local EXIT = require "cs.exit"  -- the exit codes, one read-only table (not commscript.lua: it requires the runner)
local sandbox = require "cs.sandbox"
local M = {}

local function bad(msg) error({ code = EXIT.bad_input, message = msg }, 0) end

-- Captured before any recipe runs: what the engine calls through this module must not change
-- when a recipe changes the (shared) cs.options table.
local options_resolve, options_help, options_normalise = options.resolve, options.help, options.normalise

local declared  -- the recipe declared by the chunk being loaded
local declared_count = 0

function M.declare(decl, level)
  if type(decl) ~= "table" then bad("cs.recipe expects a table { name=, version=, ... }") end
  local allowed = { name = true, version = true, requires = true, summary = true, options = true }
  for k in pairs(decl) do
    if not allowed[k] then bad(("cs.recipe: unknown field '%s' (name, version, requires, summary, options)"):format(tostring(k))) end
  end
  if type(decl.name) ~= "string" or not decl.name:match("^[%w_%-%.]+$") then
    bad("cs.recipe: 'name' must be a string of letters, digits, '_', '-' or '.'")
  end
  if type(decl.version) ~= "string" or not decl.version:match("^%d+%.%d+%.%d+$") then
    bad(("cs.recipe: 'version' must be \"x.y.z\" (got %s)"):format(tostring(decl.version)))
  end
  if decl.requires ~= nil and type(decl.requires) ~= "string" then bad("cs.recipe: 'requires' must be a string like \">=0.1, <1.0\"") end
  if decl.options ~= nil and type(decl.options) ~= "table" then bad("cs.recipe: 'options' must be a table") end
  local r = { name = decl.name, version = decl.version, requires = decl.requires,
              summary = decl.summary or "", options = {} }
  for n, spec in pairs(decl.options or {}) do r.options[n] = options_normalise(n, spec) end
  declared = r
  declared_count = declared_count + 1
  return r
end

local function end_budget()
  native.budget(nil)
  jit.on()
end

-- Seconds the top level of a recipe file may run (it only declares; a few ms is usual).
M.top_level_budget_s = 10

-- Runs the recipe chunk (declarations only) and returns the recipe. `bundled`: one of
-- commscript's own recipes (embedded in the binary), sandboxed all the same, whose chaos may end
-- a rank with any status (chaos_exit's 99; see cs.sandbox.env).
function M.load(chunk, trusted, bundled)
  declared, declared_count = nil, 0
  if not trusted then setfenv(chunk, sandbox.env("a sandboxed recipe", bundled)) end
  -- The recipe file's own functions run in the interpreter: LuaJIT's profiler (which names a rank
  -- "busy in Lua at file:line") and the engine's hooks see compiled code only when it leaves its
  -- trace, so a tight compiled loop in run() was invisible. The stdlib keeps the JIT.
  jit.off(chunk, true)
  -- The top level only declares: it runs under a time budget (an endless loop there hung
  -- --list, --help and --check). The budget's hook runs in the interpreter only, so the JIT is
  -- off meanwhile (and its traces flushed, so no compiled loop escapes the check).
  -- (No pcall here: errors keep the recipe's file:line from the engine's handler; every later
  -- entry point ends the budget again, in case a failed load is not the end of this state.)
  jit.flush()
  jit.off()
  native.budget(M.top_level_budget_s)
  local ret = chunk()
  end_budget()
  local r = declared
  if r == nil then bad("the file declares no recipe (call cs.recipe{...})") end
  if declared_count > 1 then bad("the file declares more than one recipe (cs.recipe called " .. declared_count .. " times)") end
  if ret ~= nil and ret ~= r then bad("the file returns something other than the recipe cs.recipe declared") end
  if type(rawget(r, "run")) ~= "function" then bad(("recipe %s defines no function recipe.run(ctx)"):format(r.name)) end
  return r
end

function M.check_requires(r)
  end_budget()
  if r.requires then
    local ok, inside = pcall(native.version_satisfies, r.requires)
    if not ok then bad(("recipe %s: %s"):format(r.name, tostring(inside))) end
    if not inside then
      bad(("recipe %s %s requires commscript %s, this is commscript %s"):format(r.name, r.version, r.requires, native.version))
    end
  end
end

function M.options(r, config_options, argv)
  end_budget()
  return options_resolve(r.options, config_options, argv, r.name)
end

function M.help(...)
  end_budget()
  return options_help(...)
end

-- ---- the report object recipes see as ctx.report ----
local SEVERITY = { info = true, warn = true, error = true }

local function new_report(state)
  local rep = {}
  function rep:result(t)
    if type(t) ~= "table" then error("bad argument #1 to 'result' (table expected)", 2) end
    if type(t.wrong) == "number" and t.wrong > 0 then state.wrong = state.wrong + t.wrong end
    native.report_result(t)
  end
  function rep:finding(f)
    if type(f) ~= "table" then error("bad argument #1 to 'finding' (table expected)", 2) end
    if not SEVERITY[f.severity] then error("finding: severity must be info, warn or error", 2) end
    if type(f.message) ~= "string" then error("finding: message (string) expected", 2) end
    if f.subject == nil then error("finding: subject expected (rank, host, pair or variable)", 2) end
    local item = { severity = f.severity, subject = f.subject, message = f.message,
                   evidence = f.evidence or {}, remedy = f.remedy or "", rule = f.rule, kind = f.kind }
    if f.severity == "error" then state.errors = state.errors + 1 end
    native.report_add("findings", item)
  end
  function rep:set(key, value) native.report_set(key, value) end
  function rep:get(key) return native.report_get(key) end
  rep.dir = native.report_dir()
  return rep
end

-- The job's hosts: hosts[r + 1] is rank r's host name, and how many distinct hosts there are.
-- Collective (one allgather): every rank builds its ctx.
local function job_hosts(comm, host)
  local hosts = comm:allgather_value(host)
  local seen, n = {}, 0
  for _, h in ipairs(hosts) do
    if not seen[h] then seen[h], n = true, n + 1 end
  end
  return hosts, n
end

-- Runs recipe.run(ctx); returns the exit code its outcome asks for (0, 3 or 4).
function M.run(r, comm, opt, info)
  end_budget()
  -- Files the user named in the recipe's options (the command line, the config; never a default
  -- the recipe declared): cs.env may read them (see cs.env.conf).
  for k, v in pairs(opt) do
    local d = r.options[k]
    if type(v) == "string" and v ~= "" and d and d.default ~= v then native.allow_file(v) end
  end
  local state = { wrong = 0, errors = 0 }
  local rank = comm:rank()
  require("cs.progress").rank = rank
  local host = native.hostname()
  local hosts, nhosts = job_hosts(comm, host)
  local ctx = {
    rank = rank, size = comm:size(), comm = comm, opt = opt,
    report = new_report(state), host = host, hosts = hosts, nhosts = nhosts, out_dir = native.report_dir(),
    seed = info.seed, config = native.config(), recipe = { name = r.name, version = r.version },
    backend = comm:backend(), baseline = info.baseline, fail_below = info.fail_below,
  }
  -- Prints on rank 0 only (print() prints on every rank).
  function ctx.log(fmt, ...)
    if rank == 0 then
      io.stdout:write(select("#", ...) > 0 and fmt:format(...) or tostring(fmt), "\n")
      io.stdout:flush()
    end
  end
  r.run(ctx)
  if state.wrong > 0 then return EXIT.corruption end
  if state.errors > 0 then return EXIT.health end
  -- --fail-below: the recipe's scorecard (report key "scorecard", field total) decides.
  if info.fail_below then
    local sc = native.report_get("scorecard")
    local total = type(sc) == "table" and sc.total
    if type(total) ~= "number" then
      error({ code = EXIT.bad_input, message = ("--fail-below: recipe %s computes no scorecard"):format(r.name) }, 0)
    end
    if total < info.fail_below then
      ctx.log("score %.1f is below --fail-below %.1f", total, info.fail_below)
      return EXIT.health
    end
  end
  return EXIT.ok
end

return M
