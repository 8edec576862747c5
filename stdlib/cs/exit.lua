-- Exit codes of the contract (docs/reference.md, "Exit codes"): the one table in Lua, a copy of
-- the engine's list (engine/core/error.hpp, kExitCodes): ok, bad_input, runtime, health,
-- corruption, hang_or_desync (also as timeout, its older name), output, internal. Recipes read it
-- as cs.exit (stdlib/commscript.lua); the runner requires it here, so that the runner and
-- commscript.lua do not require each other.
-- Read-only: the runner and cs.rules decide exit codes from it, and every recipe and rule file
-- shares this table (a rule file that set cs.exit.health = 0 made a failed run exit 0).
local native = require "commscript.native"

local codes = {}
for name, code in pairs(native.exit_codes) do codes[name] = code end
-- A userdata: rawset cannot write into it either.
local exit = newproxy(true)
local mt = getmetatable(exit)
mt.__index = codes
mt.__newindex = function(_, k) error(("cs.exit is read-only (assignment to cs.exit.%s)"):format(tostring(k)), 2) end
mt.__tostring = function() return "cs.exit (read-only)" end
mt.__metatable = "commscript: read-only"
return exit
