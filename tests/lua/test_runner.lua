-- LuaUnit tests of stdlib/cs/runner.lua: recipe declarations, loading, the sandbox, version
-- requirements, the report object and the exit code a run asks for.
-- Run: commscript --backend self --trusted tests/lua/test_runner.lua
local cs = require "commscript"
local lu = require "luaunit"
local runner = require "cs.runner"

local recipe = cs.recipe {
  name = "test_runner",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.runner",
}

local COMM  -- ctx.comm of this run (set in recipe.run)

local function raises(f, ...)
  local ok, err = pcall(f, ...)
  lu.assertFalse(ok, "expected an error, got none")
  return err
end

-- An input error {code = 1, message}; returns the message.
local function input_error(f, ...)
  local err = raises(f, ...)
  lu.assertEquals(type(err), "table", "expected an error object, got: " .. tostring(err))
  lu.assertEquals(err.code, cs.exit.bad_input)
  return err.message
end

local function chunk(src, name)
  local f, why = loadstring(src, "=" .. (name or "snippet"))
  assert(f, why)
  return f
end

local GOOD = [[
local cs = require "commscript"
local r = cs.recipe { name = "snippet", version = "1.2.3", requires = ">=0.1, <1.0", summary = "s",
                      options = { n = { 3, "a number" } } }
function r.run(ctx) end
%s
return r
]]

local function good(extra) return GOOD:format(extra or "") end

-- ---------------------------------------------------------------------------------------------
TestDeclare = {}

function TestDeclare:test_valid()
  local r = runner.declare { name = "a.b-c_1", version = "0.0.1", summary = "x",
                             options = { iters = { 5, "h" } } }
  lu.assertEquals(r.name, "a.b-c_1")
  lu.assertEquals(r.version, "0.0.1")
  lu.assertEquals(r.summary, "x")
  lu.assertEquals(r.options.iters.type, "int")
  lu.assertEquals(r.options.iters.default, 5)
end

function TestDeclare:test_summary_defaults_to_empty()
  lu.assertEquals(runner.declare { name = "a", version = "1.0.0" }.summary, "")
end

function TestDeclare:test_not_a_table()
  lu.assertStrContains(input_error(runner.declare, "bw"), "cs.recipe expects a table")
end

function TestDeclare:test_bad_names()
  for _, n in ipairs { "has space", "", "a/b", "x;y" } do
    lu.assertStrContains(input_error(runner.declare, { name = n, version = "1.0.0" }), "'name' must be a string", n)
  end
  lu.assertStrContains(input_error(runner.declare, { version = "1.0.0" }), "'name' must be a string")
  lu.assertStrContains(input_error(runner.declare, { name = 5, version = "1.0.0" }), "'name' must be a string")
end

function TestDeclare:test_bad_versions()
  lu.assertEquals(input_error(runner.declare, { name = "a", version = "1.0" }),
    "cs.recipe: 'version' must be \"x.y.z\" (got 1.0)")
  lu.assertStrContains(input_error(runner.declare, { name = "a", version = "v1.0.0" }), "(got v1.0.0)")
  lu.assertStrContains(input_error(runner.declare, { name = "a", version = "1.0.0-rc1" }), "(got 1.0.0-rc1)")
  lu.assertStrContains(input_error(runner.declare, { name = "a" }), "(got nil)")
  lu.assertStrContains(input_error(runner.declare, { name = "a", version = 1 }), "'version' must be")
end

function TestDeclare:test_unknown_field_is_named()
  lu.assertEquals(input_error(runner.declare, { name = "a", version = "1.0.0", optoins = {} }),
    "cs.recipe: unknown field 'optoins' (name, version, requires, summary, options)")
  lu.assertStrContains(input_error(runner.declare, { name = "a", version = "1.0.0", run = function() end }),
    "unknown field 'run'")
end

function TestDeclare:test_requires_and_options_types()
  lu.assertStrContains(input_error(runner.declare, { name = "a", version = "1.0.0", requires = 0.1 }),
    "'requires' must be a string")
  lu.assertStrContains(input_error(runner.declare, { name = "a", version = "1.0.0", options = "x" }),
    "'options' must be a table")
end

function TestDeclare:test_bad_option_declaration_is_an_input_error()
  lu.assertStrContains(input_error(runner.declare, { name = "a", version = "1.0.0", options = { n = { help = "x" } } }),
    "option 'n': no default")
end

-- ---------------------------------------------------------------------------------------------
TestLoad = {}

function TestLoad:test_good_recipe_loads_sandboxed_and_trusted()
  for _, trusted in ipairs { false, true } do
    local r = runner.load(chunk(good()), trusted)
    lu.assertEquals(r.name, "snippet")
    lu.assertEquals(r.version, "1.2.3")
    lu.assertEquals(type(r.run), "function")
    lu.assertEquals(r.options.n.default, 3)
  end
end

function TestLoad:test_no_recipe_declared()
  lu.assertStrContains(input_error(runner.load, chunk("local x = 1"), false), "declares no recipe")
end

function TestLoad:test_no_run_function()
  local src = [[local r = require("commscript").recipe { name = "norun", version = "1.0.0" } return r]]
  lu.assertEquals(input_error(runner.load, chunk(src), false), "recipe norun defines no function recipe.run(ctx)")
  local src2 = [[local r = require("commscript").recipe { name = "norun", version = "1.0.0" } r.run = 5 return r]]
  lu.assertStrContains(input_error(runner.load, chunk(src2), false), "defines no function recipe.run")
end

function TestLoad:test_bad_declaration_while_loading()
  local src = [[local r = require("commscript").recipe { name = "x", version = "1" } function r.run() end return r]]
  lu.assertStrContains(input_error(runner.load, chunk(src), false), "'version' must be")
end

function TestLoad:test_returned_table_not_declared()
  lu.assertStrContains(input_error(runner.load, chunk("return { run = function() end }"), false),
    "declares no recipe")
end

function TestLoad:test_returns_other_table_than_declared()
  local src = [[local r = require("commscript").recipe { name = "x", version = "1.0.0" }
    function r.run() end return { run = r.run }]]
  lu.assertStrContains(input_error(runner.load, chunk(src), false), "returns something other than the recipe")
end

function TestLoad:test_two_declarations_refused()
  local src = [[local cs = require("commscript"); cs.recipe { name = "a", version = "1.0.0" }
    local r = cs.recipe { name = "b", version = "1.0.0" } function r.run() end return r]]
  lu.assertStrContains(input_error(runner.load, chunk(src), false), "more than one recipe")
end

function TestLoad:test_declaration_does_not_leak_between_loads()
  runner.load(chunk(good()), false)
  lu.assertStrContains(input_error(runner.load, chunk("local y = 2"), false), "declares no recipe")
end

-- ---------------------------------------------------------------------------------------------
TestSandbox = {}

local function sandboxed_error(body)
  local err = raises(runner.load, chunk(good(body)), false)
  return tostring(type(err) == "table" and err.message or err)
end

function TestSandbox:test_os_execute_refused()
  local m = sandboxed_error([[os.execute("true")]])
  lu.assertStrContains(m, "os.execute is not available in the sandbox")
  lu.assertStrContains(m, "--trusted")
end

function TestSandbox:test_os_exit_and_remove_refused()
  lu.assertStrContains(sandboxed_error([[os.exit(0)]]), "os.exit is not available in the sandbox")
  lu.assertStrContains(sandboxed_error([[os.remove("/tmp/x")]]), "os.remove is not available in the sandbox")
end

function TestSandbox:test_io_refused()
  lu.assertStrContains(sandboxed_error([[io.write("x")]]),
    "undeclared global 'io' (not available in the sandbox; --trusted lifts it)")
end

function TestSandbox:test_loaders_and_debug_refused()
  for _, g in ipairs { "loadstring", "load", "dofile", "package", "debug", "setfenv", "getfenv", "ffi" } do
    lu.assertStrContains(sandboxed_error(("local x = %s"):format(g)),
      ("undeclared global '%s' (not available in the sandbox"):format(g))
  end
end

function TestSandbox:test_undeclared_global_read()
  lu.assertStrContains(sandboxed_error([[local x = not_declared_anywhere]]), "undeclared global 'not_declared_anywhere'")
end

function TestSandbox:test_global_assignment()
  lu.assertStrContains(sandboxed_error([[counter = 1]]), "assignment to undeclared global 'counter' (use local)")
end

function TestSandbox:test_require_outside_stdlib_refused()
  lu.assertStrContains(sandboxed_error([[require "luaunit"]]),
    "require 'luaunit' is not allowed in a sandboxed recipe (only commscript and its cs.* modules; --trusted lifts it)")
  lu.assertStrContains(sandboxed_error([[require "commscript.native"]]), "is not allowed in a sandboxed recipe")
  lu.assertStrContains(sandboxed_error([[require "cs.stats.x"]]), "is not allowed in a sandboxed recipe")
  -- a package's parts are one level deep; nothing under a part, no empty names
  lu.assertStrContains(sandboxed_error([[require "cs.diagnose.screen.x"]]), "is not allowed in a sandboxed recipe")
  lu.assertStrContains(sandboxed_error([[require "cs.diagnose..screen"]]), "is not allowed in a sandboxed recipe")
  lu.assertStrContains(sandboxed_error([[require "cs.runner.x"]]), "is not allowed in a sandboxed recipe")
end

-- Every package folder's parts can be required sandboxed (sandbox.PACKAGES follows the folders),
-- and each package's module, which re-exports them, loads there too.
function TestSandbox:test_package_parts_are_allowed()
  local r = runner.load(chunk(good([[
r.probe = { type(require("cs.diagnose.screen").screen_pairs), type(require("cs.triage.repro").build),
            type(require("cs.topo.gpu").reference), type(require("cs.env.registry").is_secret),
            type(require("cs.html.util")), require("cs.diagnose").screen_hosts == require("cs.diagnose.screen").screen_hosts }
]])), false)
  lu.assertEquals(r.probe, { "function", "function", "function", "function", "table", true })
  for p in pairs(require("cs.sandbox").PACKAGES) do
    lu.assertEquals(type(require("cs." .. p)), "table", p)
  end
end

function TestSandbox:test_allowed_things_work()
  local r = runner.load(chunk(good([[
local st = require "cs.stats"
local t = {}
for i = 1, 3 do table.insert(t, math.floor(i * 1.5)) end
r.probe = { st.median(t), string.format("%02d", 7), os.time() > 0, type(os.getenv("HOME")), pcall(error, "e") }
]])), false)
  lu.assertEquals(r.probe[1], 3)
  lu.assertEquals(r.probe[2], "07")
  lu.assertEquals(r.probe[3], true)
  lu.assertEquals(r.probe[5], false)
end

function TestSandbox:test_sandbox_libraries_are_copies()
  runner.load(chunk(good([[string.evil = true; table.evil = true; math.pi = 3]])), false)
  lu.assertNil(rawget(string, "evil"))
  lu.assertNil(rawget(table, "evil"))
  lu.assertAlmostEquals(math.pi, 3.14159265, 1e-6)
end

-- Strings share one metatable whose __index is the host's real `string` table: a sandboxed recipe
-- must not be able to reach it (and through it, patch string.match so that the sandbox's
-- require whitelist lets "ffi" through).
function TestSandbox:test_string_metatable_does_not_reach_the_host()
  local real_match, real_string = string.match, {}
  for k, v in pairs(string) do real_string[k] = v end
  local ok, r = pcall(runner.load, chunk(good([[
local mt = getmetatable("")
local S = type(mt) == "table" and mt.__index or nil
r.probe = { reached = type(S) == "table" and S ~= string }
if r.probe.reached then
  local m = S.match
  S.match = function() return true end
  r.probe.ffi = pcall(require, "ffi")
  S.match = m
end
]])), false)
  -- Whatever happened, put the host's string library back as it was.
  for k in pairs(string) do if real_string[k] == nil then string[k] = nil end end
  for k, v in pairs(real_string) do string[k] = v end
  lu.assertIs(string.match, real_match)
  lu.assertTrue(ok, tostring(type(r) == "table" and r.message or r))
  lu.assertIsFalse(r.probe.ffi == true, "a sandboxed recipe loaded ffi by patching string.match through getmetatable('')")
  lu.assertIsFalse(r.probe.reached, "getmetatable('').__index is the host's string table")
end

function TestSandbox:test_trusted_lifts_the_sandbox()
  local r = runner.load(chunk(good([[r.probe = { type(io.write), type(os.execute), type(loadstring) }]])), true)
  lu.assertEquals(r.probe, { "function", "function", "function" })
end

-- ---------------------------------------------------------------------------------------------
-- Each sandboxed chunk has its own instances of the stdlib behind read-only views (issue 30,
-- class 2): the attempts of an attacker, each of which must fail or stay in the chunk's own world.
TestWorlds = {}

local function probe(body)
  return runner.load(chunk(good(body)), false).probe
end

function TestWorlds:test_views_refuse_every_writer()
  local p = probe([[
local st = require "cs.stats"
local function msg(f, ...) local ok, e = pcall(f, ...) return ok and "no error" or tostring(e) end
r.probe = {
  assign = msg(function() st.median = nil end),
  assign_new = msg(function() st.evil = 1 end),
  through_cs = msg(function() cs.stats.median = nil end),
  module_field = msg(function() cs.stats = {} end),
  rawset = msg(rawset, st, "median", print),
  insert = msg(table.insert, st, 1),
  remove = msg(table.remove, st),
  sort = msg(table.sort, st),
  setmetatable = msg(setmetatable, st, {}),
  getmetatable = getmetatable(st),
  rawget = rawget(st, "median"),
  same = rawequal(require "cs.stats", st) and rawequal(cs.stats, st),
  works = st.median { 3, 1, 2 },
  co = coroutine.wrap(function() return msg(function() cs.env.audit = nil end) end)(),
}
]])
  lu.assertStrContains(p.assign, "cs.stats is read-only: assignment to field 'median'")
  lu.assertStrContains(p.assign, "snippet:")  -- the chunk's line
  lu.assertStrContains(p.assign_new, "cs.stats is read-only: assignment to field 'evil'")
  lu.assertStrContains(p.through_cs, "cs.stats is read-only")
  lu.assertStrContains(p.module_field, "commscript (cs) is read-only: assignment to field 'stats'")
  lu.assertStrContains(p.rawset, "rawset: cs.stats is read-only")
  lu.assertStrContains(p.insert, "table.insert: cs.stats is read-only")
  lu.assertStrContains(p.remove, "table.remove: cs.stats is read-only")
  lu.assertStrContains(p.sort, "table.sort: cs.stats is read-only")
  lu.assertStrContains(p.setmetatable, "cannot change a protected metatable")
  lu.assertEquals(p.getmetatable, "commscript: read-only module cs.stats")
  lu.assertNil(p.rawget)
  lu.assertTrue(p.same)
  lu.assertEquals(p.works, 2)
  lu.assertStrContains(p.co, "cs.env is read-only")
end

function TestWorlds:test_next_and_pairs_walk_a_view()
  local p = probe([[
local n, fns = 0, 0
for k, v in pairs(cs.stats) do n = n + 1; if type(v) == "function" then fns = fns + 1 end end
local k1 = next(cs.stats)
local env_seen
for k, v in pairs(cs) do if k == "exit" then env_seen = v end end
r.probe = { n = n, fns = fns, first = k1 ~= nil, exit = env_seen == cs.exit, ipairs = #cs.collectives }
]])
  lu.assertTrue(p.n > 5 and p.fns > 5, "pairs over a module view sees its functions")
  lu.assertTrue(p.first)
  lu.assertTrue(p.exit)
  lu.assertEquals(p.ipairs, #cs.collectives)
end

-- What a chunk changes inside its own instances (a sub-table, an object's metatable, a field of
-- the native module's tables) no other chunk and not the engine sees.
function TestWorlds:test_changes_stay_in_the_chunks_own_world()
  local before = #require("cs.env.registry").PROTOS
  local col = require("cs.findings").collector({ report = { finding = function() end } })
  local add = getmetatable(col).add
  probe([[
table.insert(require("cs.env.registry").PROTOS, "bogus")
local c = cs.findings.collector({ report = { finding = function() end } })
getmetatable(c).add = function() end
cs.collectives[1] = "pwned"
cs.chaos.inject = function() end
cs.json.encode = function() return "pwned" end
]])
  lu.assertEquals(#require("cs.env.registry").PROTOS, before)
  lu.assertIs(getmetatable(col).add, add)
  lu.assertEquals(cs.collectives[1], "allreduce")
  lu.assertEquals(cs.json.encode({ 1 }), "[1]")
  lu.assertEquals(type(require("commscript.native").chaos.inject), "function")
  local p = probe([[r.probe = { protos = #require("cs.env.registry").PROTOS, first = cs.collectives[1],
                                json = cs.json.encode({ 1 }) }]])
  lu.assertEquals(p, { protos = before, first = "allreduce", json = "[1]" })
end

-- Nothing a chunk reaches from its modules (fields, sub-tables, metatables) is a table of the
-- engine: its global libraries, _G, package.loaded, or the engine's own module instances.
-- The names of the stdlib's modules a chunk may require (stdlib/cs/*.lua and the packages'
-- parts, stdlib/cs/<package>/*.lua, less the engine's).
local function module_names()
  local dir = debug.getinfo(1, "S").source:match("^@(.*)/tests/lua/") or "."
  local names = { '"commscript"' }
  for f in io.popen("cd " .. dir .. "/stdlib/cs && ls *.lua */*.lua"):lines() do
    local n = f:match("^(.+)%.lua$")
    if n and n ~= "runner" and n ~= "sandbox" then names[#names + 1] = '"cs.' .. n:gsub("/", ".") .. '"' end
  end
  return names
end

function TestWorlds:test_no_engine_table_is_reachable()
  local names = module_names()
  local p = probe(([[
local seen, list = {}, {}
local function walk(v)
  if type(v) ~= "table" or seen[v] then return end
  seen[v] = true
  list[#list + 1] = v
  for k, x in pairs(v) do walk(k); walk(x) end
  walk(getmetatable(v))
end
for _, name in ipairs { %s } do walk(require(name)) end
r.probe = list
]]):format(table.concat(names, ", ")))
  local engine = { _G, string, table, math, coroutine, package, package.loaded, io, os, debug, jit, bit }
  for name, m in pairs(package.loaded) do
    if type(m) == "table" and (name == "commscript" or name:match("^c[os]")) then engine[#engine + 1] = m end
  end
  lu.assertTrue(#names > 30, "the module list")
  lu.assertTrue(#p > 100, "the walk reached the modules")
  local reached = {}
  for _, t in ipairs(p) do reached[t] = true end
  for _, t in ipairs(engine) do
    lu.assertNil(reached[t], "a sandboxed chunk reaches a table of the engine")
  end
end

function TestWorlds:test_the_array_metatable_is_read_only()
  local p = probe([[
local mt = getmetatable(cs.array({}))
local function msg(f, ...) local ok, e = pcall(f, ...) return ok and "no error" or tostring(e) end
r.probe = { index = msg(function() mt.__index = function() return "pwned" end end),
            rawset = msg(rawset, mt, "__newindex", function() end),
            copy_keeps_it = getmetatable(setmetatable({}, mt)) == mt }
]])
  lu.assertStrContains(p.index, "the metatable of cs.array is read-only")
  lu.assertStrContains(p.rawset, "rawset: the metatable of cs.array is read-only")
  lu.assertTrue(p.copy_keeps_it)
  lu.assertNil(rawget(getmetatable(cs.array({})), "__index"))
end

-- No way back to code: no load/loadstring/dofile/getfenv/debug, and string.dump's bytecode has
-- nothing to run it.
function TestWorlds:test_no_loader_for_bytecode()
  for _, g in ipairs { "load", "loadstring", "dofile", "loadfile", "getfenv", "setfenv", "debug", "newproxy" } do
    lu.assertStrContains(sandboxed_error(("local x = %s"):format(g)), "undeclared global '" .. g .. "'")
  end
  -- (string.dump gives bytes, through the string methods too: nothing in a sandbox loads them.)
  local p = probe([[r.probe = { type(string.dump(require("cs.stats").median)), type(("").dump) }]])
  lu.assertEquals(p, { "string", "function" })
end

-- ---------------------------------------------------------------------------------------------
TestRequires = {}

local function with_requires(req)
  return { name = "rq", version = "1.0.0", requires = req }
end

function TestRequires:test_satisfied()
  runner.check_requires(with_requires(">=0.1, <1.0"))
  runner.check_requires(with_requires(">=" .. cs.version))
  runner.check_requires({ name = "rq", version = "1.0.0" })
end

function TestRequires:test_not_satisfied()
  lu.assertEquals(input_error(runner.check_requires, with_requires(">=99.0")),
    ("recipe rq 1.0.0 requires commscript >=99.0, this is commscript %s"):format(cs.version))
  lu.assertStrContains(input_error(runner.check_requires, with_requires("<" .. cs.version)), "requires commscript <")
end

function TestRequires:test_malformed_range()
  lu.assertStrContains(input_error(runner.check_requires, with_requires("garbage")), "recipe rq: ")
end

-- ---------------------------------------------------------------------------------------------
TestRun = {}

local function run_with(fn, opt)
  local r = runner.declare { name = "inner", version = "1.0.0" }
  r.run = fn
  return runner.run(r, COMM, opt or {}, { seed = 42 })
end

function TestRun:test_ctx()
  local seen
  lu.assertEquals(run_with(function(ctx) seen = ctx end, { x = 1 }), 0)
  lu.assertEquals(seen.rank, 0)
  lu.assertEquals(seen.size, 1)
  lu.assertEquals(seen.backend, "self")
  lu.assertEquals(seen.seed, 42)
  lu.assertEquals(seen.opt, { x = 1 })
  lu.assertEquals(seen.recipe, { name = "inner", version = "1.0.0" })
  lu.assertEquals(seen.comm, COMM)
  lu.assertEquals(type(seen.log), "function")
  lu.assertEquals(type(seen.report.result), "function")
  lu.assertEquals(seen.out_dir, seen.report.dir)
  lu.assertEquals(seen.hosts, { seen.host })
  lu.assertEquals(seen.nhosts, 1)
end

function TestRun:test_wrong_elements_exit_4()
  lu.assertEquals(run_with(function(ctx) ctx.report:result { probe = "inner", wrong = 2 } end), cs.exit.corruption)
end

function TestRun:test_error_finding_exit_3()
  lu.assertEquals(run_with(function(ctx)
    ctx.report:finding { severity = "error", subject = { rank = 0 }, message = "test finding (expected)" }
  end), cs.exit.health)
  lu.assertEquals(run_with(function(ctx)
    ctx.report:finding { severity = "warn", subject = { rank = 0 }, message = "test warning (expected)" }
  end), cs.exit.ok)
end

function TestRun:test_corruption_beats_health()
  lu.assertEquals(run_with(function(ctx)
    ctx.report:finding { severity = "error", subject = { rank = 0 }, message = "test finding (expected)" }
    ctx.report:result { probe = "inner", wrong = 1 }
  end), cs.exit.corruption)
end

function TestRun:test_finding_validation()
  local errs = {}
  run_with(function(ctx)
    local function try(f) local ok, e = pcall(ctx.report.finding, ctx.report, f); errs[#errs + 1] = ok and "" or tostring(e) end
    try { severity = "fatal", subject = 0, message = "m" }
    try { severity = "info", subject = 0 }
    try { severity = "info", message = "m" }
    try("text")
  end)
  lu.assertStrContains(errs[1], "severity must be info, warn or error")
  lu.assertStrContains(errs[2], "message (string) expected")
  lu.assertStrContains(errs[3], "subject expected")
  lu.assertStrContains(errs[4], "bad argument #1 to 'finding' (table expected)")
end

function TestRun:test_result_needs_a_table()
  local msg
  run_with(function(ctx) local ok, e = pcall(ctx.report.result, ctx.report, 5); msg = tostring(e) end)
  lu.assertStrContains(msg, "bad argument #1 to 'result' (table expected)")
end

function TestRun:test_set_get()
  run_with(function(ctx)
    ctx.report:set("test_runner_probe", { a = 1, b = { "x" } })
  end)
  local got
  run_with(function(ctx) got = ctx.report:get("test_runner_probe") end)
  lu.assertEquals(got, { a = 1, b = { "x" } })
end

function TestRun:test_errors_propagate()
  local err = raises(run_with, function() cs.raise(cs.exit.timeout, "late") end)
  lu.assertEquals(err.code, cs.exit.timeout)
  lu.assertStrContains(err.message, "late")
end

-- The contract's exit codes (docs/reference.md, "Exit codes"). cs.exit is built from the
-- engine's list, so a code the engine gains reaches Lua: cs.exit once lacked output = 6, and
-- report.html called exit 6 "unknown exit code".
TestExitCodes = {}

function TestExitCodes:test_every_code_of_the_contract()
  lu.assertEquals(cs.exit_codes(), { ok = 0, bad_input = 1, runtime = 2, health = 3, corruption = 4,
                                     hang_or_desync = 5, timeout = 5, output = 6, internal = 70 })
end

function TestExitCodes:test_timeout_is_the_old_name_of_hang_or_desync()
  -- 5 covers hangs, deadlines and desyncs: hang_or_desync says so; recipes that say timeout still work
  lu.assertEquals(cs.exit.hang_or_desync, 5)
  lu.assertEquals(cs.exit.timeout, cs.exit.hang_or_desync)
  local err = raises(run_with, function() cs.raise(cs.exit.hang_or_desync, "late") end)
  lu.assertEquals(err.code, 5)
end

function TestExitCodes:test_exit_table_is_read_only()
  -- Variations: an existing code, a new name, rawset on the proxy, setmetatable on it.
  lu.assertErrorMsgContains("read-only", function() cs.exit.health = 0 end)
  lu.assertErrorMsgContains("read-only", function() cs.exit.corruption = 0 end)
  lu.assertErrorMsgContains("read-only", function() cs.exit.new_code = 9 end)
  lu.assertError(function() rawset(cs.exit, "health", 0) end)
  lu.assertEquals(cs.exit.health, 3)
  lu.assertError(function() setmetatable(cs.exit, nil) end)
  lu.assertEquals(getmetatable(cs.exit), "commscript: read-only")
end

function TestExitCodes:test_engine_metatables_are_read_only()
  -- cs.array's metatable: changing its __jsontype (to "object", to nil) no longer changes how
  -- the engine writes an empty list; the error objects' metatable (cs.raise, the engine's
  -- errors) cannot be got or set at all.
  local amt = getmetatable(cs.array {})
  for _, v in ipairs({ "object", false, 0 }) do
    amt.__jsontype = v
    lu.assertEquals(cs.json.encode(cs.array {}), "[]")
    lu.assertEquals(cs.json.encode({ list = cs.array {} }), '{"list":[]}')
  end
  amt.__jsontype = "array"
  local ok, e = pcall(cs.raise, cs.exit.runtime, "x", 0)
  lu.assertFalse(ok)
  lu.assertEquals(type(getmetatable(e)), "string")
  lu.assertErrorMsgContains("protected metatable", function() setmetatable(e, {}) end)
  local ok2, e2 = pcall(cs.tensor, "nope", 4)
  lu.assertFalse(ok2)
  if type(e2) == "table" then lu.assertEquals(type(getmetatable(e2)), "string") end
end

function TestExitCodes:test_report_html_names_each_code()
  for name, code in pairs(cs.exit_codes()) do
    local page = require("cs.html").render { schema = "commscript.report/2", run = { exit_code = code } }
    lu.assertNotStrContains(page, "unknown exit code", "report.html has no meaning for cs.exit." .. name)
  end
  lu.assertStrContains(require("cs.html").render { run = { exit_code = cs.exit.output } },
    "the outputs could not be written")
end

function recipe.run(ctx)
  COMM = ctx.comm
  local lurunner = lu.LuaUnit.new()
  lurunner:setOutputType("text")
  local fails = lurunner:runSuiteByInstances {
    { "TestDeclare", TestDeclare },
    { "TestLoad", TestLoad },
    { "TestSandbox", TestSandbox },
    { "TestWorlds", TestWorlds },
    { "TestRequires", TestRequires },
    { "TestRun", TestRun },
    { "TestExitCodes", TestExitCodes },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
