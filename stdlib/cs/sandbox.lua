-- The one sandbox of commscript: a sandboxed recipe (cs.runner) and every site rule file
-- (cs.rules) run their chunk with an environment from M.env. Engine-internal; not for recipes.
--
-- What the environment holds:
--  - the safe Lua globals (no os.execute, io, load*, dofile, ffi, debug, package, setfenv);
--  - its OWN copies of string, table, math, coroutine and bit: a chunk that replaces
--    string.rep changes its copy only, never the engine's nor another chunk's;
--  - os with clock/time/date/difftime/getenv only;
--  - require limited to "commscript" and the embedded cs.* modules, minus the engine's own
--    (cs.runner, cs.sandbox); names that are not embedded never reach LuaJIT's file searchers
--    (the embedded loader refuses them, see bindings/lua/lua_vm.cpp);
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

-- True when `name` may be required from a sandbox.
function M.allowed(name)
  if name == "commscript" then return true end
  return type(name) == "string" and str_match(name, "^cs%.[%w_]+$") ~= nil and not M.internal[name]
end

local real_pcall, real_xpcall = pcall, xpcall

local function is_limit(e) return type(e) == "table" and rawget(e, "limit") == true end

local function pass_limits(ok, ...)
  if not ok and is_limit((...)) then error((...), 0) end
  return ok, ...
end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

-- A fresh environment for one chunk. `what` names the chunk's kind in messages ("a sandboxed
-- recipe", "a rule file").
function M.env(what)
  local env = {}
  for _, k in ipairs(SAFE) do env[k] = _G[k] end
  env.string, env.table, env.math, env.coroutine = copy(string), copy(table), copy(math), copy(coroutine)
  env.bit = copy(bit)
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
  env.require = function(name)
    if M.allowed(name) then return real_require(name) end
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
