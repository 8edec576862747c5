-- The `cs` table recipes get from `require "commscript"`.
-- Built on commscript.native (the C++ engine); knows nothing of MPI.
local native = require "commscript.native"

local cs = {
  version = native.version,
  dtypes = native.dtypes,            -- {"int8", ..., "float64"}
  collectives = native.collectives,  -- {"allreduce", ..., "sendrecv"}
  tensor = native.tensor,            -- cs.tensor(dtype, count) / cs.tensor{dtype=, count=}
  parse_size = native.parse_size,    -- "64K" -> 65536, nil when not a size
  format_size = native.format_size,  -- 65536 -> "64K"
  busbw_factor = native.busbw_factor,
  algbw_bytes = native.algbw_bytes,
  count_for_bytes = native.count_for_bytes,
  dtype_size = native.dtype_size,
  now = native.now,                  -- steady clock, seconds
  hostname = native.hostname,
  environ = native.environ,          -- the process environment as a table
  memory_available = native.memory_available,
  copy_bandwidth = native.copy_bandwidth,  -- GB/s of a host memcpy: the shared-memory ceiling
  traffic = native.traffic,          -- this process's operation and control-plane counters (cs.stages)
  sha256 = native.sha256,
  json = { encode = native.json_encode, decode = native.json_decode, null = native.null },
  array = native.array,              -- cs.array(t): t is a list in JSON even when empty
  comm = native.comm,                -- cs.comm.available(), cs.comm.open("gloo"): other backends, same ranks
  chaos = native.chaos,              -- cs.chaos.inject{kind=, ranks=, ...}, cs.chaos.clear(), cs.chaos.fired()
}

-- The choices of an option that names collectives: "all", then every name of cs.collectives.
cs.collective_choices = { "all" }
for _, o in ipairs(native.collectives) do cs.collective_choices[#cs.collective_choices + 1] = o end

-- A list option's value with "all" in it replaced by the whole list `all` (default cs.collectives).
function cs.expand_all(list, all)
  for _, o in ipairs(list) do
    if o == "all" then return all or native.collectives end
  end
  return list
end

-- Exit codes of the contract, read-only: one table in Lua (stdlib/cs/exit.lua).
cs.exit = require "cs.exit"
-- A copy of the codes as a plain table (pairs() sees nothing through the read-only proxy).
function cs.exit_codes() local c = {} for k, v in pairs(native.exit_codes) do c[k] = v end return c end

local error_mt = { __tostring = function(e) return rawget(e, "message") end, __metatable = "commscript: read-only" }

-- Raises an error that carries an exit code. `level` as for error(): 1 = the caller of raise.
function cs.raise(code, message, level)
  level = level or 1
  if level > 0 then
    local info = debug.getinfo(level + 1, "Sl")
    if info and info.currentline and info.currentline > 0 then
      message = info.short_src .. ":" .. info.currentline .. ": " .. message
    end
  end
  error(setmetatable({ code = code, message = message }, error_mt), 0)
end

-- Declares a recipe (the whole top level of a recipe file is declarations).
-- cs.recipe{ name=, version="x.y.z", requires=">=a.b, <c.d", summary=, options={...} }
function cs.recipe(decl)
  return require("cs.runner").declare(decl, 2)
end

-- Lazily loaded stdlib modules: cs.stats, cs.sweep, cs.bwtable, cs.progress, cs.topo ...
-- A name that is no module is nil; a module that fails to load raises its own error.
setmetatable(cs, {
  __index = function(t, k)
    -- Only plain names of embedded, non-internal modules (cs.sandbox's rule): cs["../x"] and
    -- cs.runner are nil, and nothing reaches LuaJIT's file searchers.
    -- A part of a package is a field of its package's module (cs.triage.repro), not cs["triage.repro"].
    if type(k) ~= "string" or k:find(".", 1, true) or not require("cs.sandbox").allowed("cs." .. k) then return nil end
    local ok, mod = pcall(require, "cs." .. k)
    if ok then rawset(t, k, mod); return mod end
    if tostring(mod):find("no module 'cs." .. k .. "' in commscript's stdlib", 1, true) then return nil end
    error(mod, 2)
  end,
})

return cs
