-- The one sandbox of commscript: a sandboxed recipe (cs.runner) and every site rule file
-- (cs.rules) run their chunk with an environment from M.env. Engine-internal; not for recipes.
--
-- What the environment holds:
--  - the safe Lua globals (no os.execute, io, load*, dofile, ffi, debug, package, setfenv);
--  - its OWN copies of string, table, math, coroutine and bit: a chunk that replaces
--    string.rep changes its copy only, never the engine's nor another chunk's;
--  - os with clock/time/date/difftime/getenv only;
--  - require limited to "commscript" and the embedded cs.* modules (cs.x, and cs.x.y: a part of
--    a package folder stdlib/cs/x/, M.PACKAGES), minus the engine's own
--    (cs.runner, cs.sandbox); names that are not embedded never reach LuaJIT's file searchers
--    (the embedded loader refuses them, see bindings/lua/lua_vm.cpp);
--  - its OWN instances of those modules (a "world": each module's code run again for this
--    chunk, with a copy of commscript.native's tables), seen through read-only views: a write
--    into a module fails naming the module and the chunk's file:line, and what a chunk changes
--    in its own instances (a sub-table, an object's metatable) no other chunk sees. A site rule
--    file that replaced cs.env's audit erased full_diag's environment findings (issue 30);
--  - getmetatable that hides the process-wide string metatable.
-- Chunks are loaded as text only (no bytecode) unless --trusted: see lua_vm.cpp and M.loadfile.
local native = require "commscript.native"

local M = {}

-- Captured when the engine loads this module, before any recipe runs.
local real_require, real_getmetatable, setmetatable, rawget = require, getmetatable, setmetatable, rawget
local str_match, str_format, type, tostring, pairs, ipairs, error = string.match, string.format, type, tostring,
  pairs, ipairs, error
local loadstring = loadstring

-- Modules that are commscript's machinery, not a library for recipes.
M.internal = { ["cs.runner"] = true, ["cs.sandbox"] = true }

local SAFE = {
  "assert", "error", "ipairs", "next", "pairs", "pcall", "print", "select", "tonumber",
  "tostring", "type", "unpack", "xpcall", "rawequal", "rawget", "rawset", "setmetatable",
  "getmetatable", "_VERSION",
}

local HIDDEN = { os = 1, io = 1, ffi = 1, load = 1, loadstring = 1, loadfile = 1, dofile = 1, package = 1,
                 debug = 1, setfenv = 1, getfenv = 1, jit = 1, collectgarbage = 1, module = 1, newproxy = 1 }

-- The stdlib's packages: folders stdlib/cs/<name>/ of parts, each part the module cs.<name>.<part>
-- (docs/stdlib.md). A new folder is added here, or its parts cannot be required sandboxed.
M.PACKAGES = { diagnose = true, env = true, evidence = true, html = true, topo = true, triage = true }

-- True when `name` may be required from a sandbox: commscript, a module cs.x or a part cs.x.y of
-- a package, not the engine's own. Plain names only: no "cs..x", no deeper, no cs.stats.x.
function M.allowed(name)
  if name == "commscript" then return true end
  if type(name) ~= "string" or M.internal[name] then return false end
  if str_match(name, "^cs%.[%w_]+$") then return true end
  local package = str_match(name, "^cs%.([%w_]+)%.[%w_]+$")
  return package ~= nil and M.PACKAGES[package] == true
end

local real_pcall, real_xpcall = pcall, xpcall

-- An engine limit: an error object marked limit = true while the guard says a limit was hit
-- (native.limit_hit; a chunk can mark any table, or an engine error it caught, itself).
local limit_hit = native.limit_hit or function() return true end
local function is_limit(e) return type(e) == "table" and rawget(e, "limit") == true and limit_hit() end
M.is_limit = is_limit

local function pass_limits(ok, ...)
  if not ok and is_limit((...)) then error((...), 0) end
  return ok, ...
end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

-- ---- worlds: each chunk's own instances of the stdlib, behind read-only views ----
-- Modules every world shares: read-only already (cs.exit, a userdata), or holding what the
-- runner sets for every chunk (cs.progress.rank). The engine's own (M.internal) are shared too:
-- only stdlib code reaches them (cs.recipe calls cs.runner.declare).
local SHARED = { ["cs.exit"] = true, ["cs.progress"] = true }
-- Modules the engine registers in C (bind_core.cpp, bind_gpu.cpp): each world gets a copy of
-- their tables (the functions are the engine's).
local NATIVE = { ["commscript.native"] = true, ["cs.gpu"] = true }
local searchers = package.loaders
local real_next, real_rawset, setfenv, tbl_concat = next, rawset, setfenv, table.concat
local LOADING = {}

-- view -> { module = the world's instance, name = its module name }; views are per world.
local views = setmetatable({}, { __mode = "k" })

local function ours(name)
  return name == "commscript" or str_match(name, "^commscript%.") ~= nil or str_match(name, "^cs%.") ~= nil
end

-- A copy of t and of every table under it (the native module's lists and function tables), so
-- that no world shares a writable table with another or with the engine.
local function deep_copy(v, memo)
  if type(v) ~= "table" then return v end
  if memo[v] then return memo[v] end
  local c = {}
  memo[v] = c
  for k, x in real_next, v do c[deep_copy(k, memo)] = deep_copy(x, memo) end
  return c
end

-- The chunk of module `name` as require would load it (package.loaders: the embedded loader).
local function module_chunk(name)
  local tried = {}
  for _, searcher in ipairs(searchers) do
    local f = searcher(name)
    if type(f) == "function" then return f end
    if type(f) == "string" then tried[#tried + 1] = f end
  end
  error(str_format("module '%s' not found:%s", name, tbl_concat(tried)), 3)
end

local function module_name(name)
  return name == "commscript" and "commscript (cs)" or name
end

-- The read-only view of module `name` (its instance `m`) in `world`.
local function view_of(world, name, m)
  if type(m) ~= "table" then return m end
  local v = world.views[name]
  if v then return v end
  local shown = module_name(name)
  -- A field that is itself a module of this world (cs.env through cs) is seen through its view,
  -- kept in `seen` (a table lookup from then on: cs.text.plural in a loop went 2.3x slower).
  local seen = setmetatable({}, {
    __index = function(c, k)
      local x = m[k]
      local sub = type(x) == "table" and world.names[x]
      if not sub then return x end
      local sv = view_of(world, sub, x)
      real_rawset(c, k, sv)
      return sv
    end,
  })
  v = setmetatable({}, {
    __index = seen,
    __newindex = function(_, k)
      error(str_format("%s is read-only: assignment to field '%s' (each recipe and rule file has its own read-only "
        .. "view of commscript's modules; keep your own functions and values in locals)", shown, tostring(k)), 2)
    end,
    __metatable = "commscript: read-only module " .. name,
  })
  world.views[name] = v
  views[v] = { module = m, name = shown }
  return v
end

-- Exit codes a sandbox may end a run with (issue 30, class 3): those of a recipe's verdict or
-- error, 1-5. 0 is success, 6 an output the engine could not write, 70 the engine's own failure,
-- 128 + N a signal: the engine's to say.
local function exit_status_refused(rule)
  if type(rule) ~= "table" or rawget(rule, "kind") ~= "exit" then return nil end
  local kill, status = rawget(rule, "kill"), rawget(rule, "status")
  if kill ~= nil and kill ~= false then
    return "kill = true ends the process by a signal (exit 137)"
  end
  if type(status) ~= "number" or status ~= status or status < 1 or status > 5 or status % 1 ~= 0 then
    return str_format("status %s", status == nil and "absent (99)" or tostring(status))
  end
  return nil
end

-- cs.chaos.inject of a sandbox's world: an `exit` ends the rank with a status of 1-5 only.
local function checked_inject(inject)
  return function(rule, ...)
    local why = exit_status_refused(rule)
    if why then
      error(str_format("cs.chaos.inject: an exit may end a sandboxed run with status 1-5 only, not %s (0, 6, 70 "
        .. "and the signals' codes are the engine's; --trusted lifts it)", why), 2)
    end
    return inject(rule, ...)
  end
end

-- A world: module name -> this chunk's own instance. Its modules' code runs with an environment
-- whose require is this world's; the rest of their globals are the engine's. `own`: a chunk of
-- commscript's own (a bundled recipe), whose chaos exits are not limited.
local function new_world(own)
  local world = { loaded = {}, names = {}, views = {} }
  local menv = setmetatable({}, { __index = _G })
  local function wrequire(name)
    local m = world.loaded[name]
    if m == LOADING then error(str_format("loop or previous error loading module '%s'", tostring(name)), 2) end
    if m ~= nil then return m end
    if type(name) ~= "string" or M.internal[name] or SHARED[name] or not ours(name) then
      m = real_require(name)
    elseif NATIVE[name] then
      m = deep_copy(real_require(name), {})
      if type(m.chaos) == "table" and not own and not native.trusted() then
        m.chaos.inject = checked_inject(m.chaos.inject)
      end
    else
      local chunk = module_chunk(name)
      world.loaded[name] = LOADING
      setfenv(chunk, menv)
      m = chunk(name)
      if m == nil then m = true end
    end
    world.loaded[name] = m
    if type(m) == "table" then world.names[m] = name end
    return m
  end
  menv.require = wrequire
  world.require = wrequire
  return world
end

-- cs.array's metatable is one for the whole Lua state (the engine recognises it by identity,
-- and getmetatable gives it so that copies keep it): a field added to it (an __index or
-- __newindex) would change every list of every chunk and of the engine. New fields are refused;
-- rawset from a sandbox too (it is registered as a view of itself).
do
  local amt = real_getmetatable(native.array({}))
  if type(amt) == "table" and real_getmetatable(amt) == nil then
    setmetatable(amt, {
      __newindex = function(_, k)
        error(str_format("the metatable of cs.array is read-only (assignment to field '%s')", tostring(k)), 2)
      end,
      __metatable = "commscript: read-only (an engine metatable)",
    })
    views[amt] = { module = amt, name = "the metatable of cs.array" }
  end
end

-- Library functions that write raw, refused on a view (rawset would add a field to it).
local function refuse_views(f, fname)
  return function(t, ...)
    local v = views[t]
    if v then error(str_format("%s: %s is read-only", fname, v.name), 2) end
    return f(t, ...)
  end
end

-- next and pairs over a view walk the module (read-only: the values are what indexing gives).
local function view_next(t, k)
  local v = views[t]
  if not v then return real_next(t, k) end
  local nk = real_next(v.module, k)
  if nk == nil then return nil end
  return nk, t[nk]
end

-- A fresh environment for one chunk. `what` names the chunk's kind in messages ("a sandboxed
-- recipe", "a rule file"); `own`: commscript's own chunk (a bundled recipe).
function M.env(what, own)
  local env = {}
  for _, k in ipairs(SAFE) do env[k] = _G[k] end
  env.string, env.table, env.math, env.coroutine = copy(string), copy(table), copy(math), copy(coroutine)
  env.bit = copy(bit)
  -- Views of modules are read-only to the raw writers too; next and pairs walk them.
  env.rawset = refuse_views(real_rawset, "rawset")
  for _, f in ipairs { "insert", "remove", "sort" } do env.table[f] = refuse_views(table[f], "table." .. f) end
  env.next = view_next
  env.pairs = function(t)
    if views[t] then return view_next, t, nil end
    return pairs(t)
  end
  -- Engine limits (the Lua deadline with no operation, the C-stack guard, the top level's
  -- budget) are error objects with limit = true: the chunk's pcall, xpcall and coroutine.resume
  -- hand them on instead of swallowing them (a pcall around an endless loop, retried in a loop,
  -- never ended).
  env.pcall = function(f, ...) return pass_limits(real_pcall(f, ...)) end
  env.xpcall = function(f, handler, ...)
    return pass_limits(real_xpcall(f, function(e)
      if is_limit(e) then return e end
      return handler(e)
    end, ...))
  end
  local resume = env.coroutine.resume
  env.coroutine.resume = function(co, ...) return pass_limits(resume(co, ...)) end
  env.os = setmetatable({ clock = os.clock, time = os.time, date = os.date, difftime = os.difftime, getenv = os.getenv }, {
    __index = function(_, k)
      error(str_format("os.%s is not available in the sandbox (--trusted lifts it)", tostring(k)), 2)
    end,
  })
  local world = new_world(own)
  env.require = function(name)
    if M.allowed(name) then return view_of(world, name, world.require(name)) end
    error(str_format("require '%s' is not allowed in %s (only commscript and its cs.* modules; --trusted lifts it)",
      tostring(name), what), 2)
  end
  -- The string metatable is shared by the whole process: its __index is the real string
  -- library. Hiding it keeps a chunk from changing the functions the engine side relies on.
  env.getmetatable = function(v)
    if type(v) == "string" then return nil end
    return real_getmetatable(v)
  end
  env._G = env
  return setmetatable(env, {
    __newindex = function(_, k)
      error(str_format("assignment to undeclared global '%s' (use local)", tostring(k)), 2)
    end,
    __index = function(_, k)
      local hint = HIDDEN[k] and " (not available in the sandbox; --trusted lifts it)" or ""
      error(str_format("undeclared global '%s'%s", tostring(k), hint), 2)
    end,
  })
end

-- A load error without the file's text: LuaJIT's syntax errors quote the token they stopped at
-- ("near 'root:x:0:0:...'"), which would copy a line of any file named as a rule file into a
-- message a recipe can read.
function M.quiet_error(msg)
  msg = tostring(msg)
  local cut = msg:find(" near ", 1, true)
  if cut then msg = msg:sub(1, cut - 1) end
  return msg
end

-- Loads the file at `path` as a chunk named "@path": text only unless the run is --trusted
-- (precompiled LuaJIT bytecode is never verified and is a known way out of the VM).
-- Returns the function, or nil and a message.
function M.loadfile(path)
  -- Sandboxed, only a .lua file: cs.rules.load{"/etc/shadow"} from a recipe must not read (and
  -- quote in its errors) any file; and only a regular file of at most 4 MiB (a FIFO hung the
  -- rank, /dev/zero read without end).
  -- (*.luac too: read only to be refused as bytecode, with that message.)
  if not native.trusted() and not (type(path) == "string" and (path:sub(-4) == ".lua" or path:sub(-5) == ".luac")) then
    return nil, str_format("%s: not a .lua file (a rule file is Lua source named *.lua; --trusted lifts it)",
      tostring(path))
  end
  local src, err = native.read_conf_file(path, 4194304)
  if not src then return nil, str_format("%s: %s", tostring(path), tostring(err)) end
  if not native.trusted() and src:sub(1, 1) == "\27" then
    return nil, str_format("%s: precompiled bytecode is refused (only Lua source runs sandboxed; --trusted lifts it)",
      path)
  end
  return loadstring(src, "@" .. path, native.trusted() and "bt" or "t")
end

return M
