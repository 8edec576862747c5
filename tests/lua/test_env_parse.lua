-- LuaUnit tests of cs.env.parse: glibc strtoll as NCCL_PARAM reads integers, distance, suggest, version_lt.
-- Run: commscript --backend self --trusted tests/lua/test_env_parse.lua
local cs = require "commscript"
local lu = require "luaunit"
local env = require "cs.env"
local R = require "cs.env.registry"
package.path = (debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "?.lua;" .. package.path
local H = require "env_testlib"
local NO_FILES, audit, with_rule, one, none, clean, nothing, tmpdir, write =
  H.NO_FILES, H.audit, H.with_rule, H.one, H.none, H.clean, H.nothing, H.tmpdir, H.write

local recipe = cs.recipe {
  name = "test_env_parse",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.env.parse",
}

-- =============================================================================================
TestStrtoll = {}

function TestStrtoll:test_decimal_hex_octal()
  lu.assertEquals({ env.strtoll("42") }, { 42, 3, 10, false, "42" })
  lu.assertEquals(env.strtoll("0x1A"), 26)
  lu.assertEquals(env.strtoll("0X1a"), 26)
  lu.assertEquals(env.strtoll("010"), 8)
  lu.assertEquals(env.strtoll("  -17"), -17)
  lu.assertEquals(env.strtoll("+5"), 5)
end

function TestStrtoll:test_stops_at_the_first_non_digit()
  local v, endpos = env.strtoll("4M")
  lu.assertEquals(v, 4)
  lu.assertEquals(endpos, 2)
  lu.assertEquals(env.strtoll("1e3"), 1)
  lu.assertEquals(env.strtoll("08"), 0)        -- octal: '8' is not an octal digit
  local v2, e2 = env.strtoll("0x")              -- no hex digit: "0" is converted, 'x' is left
  lu.assertEquals(v2, 0)
  lu.assertEquals(e2, 2)
end

function TestStrtoll:test_no_conversion()
  local v, endpos, _, _, digits = env.strtoll("true")
  lu.assertEquals(v, 0)
  lu.assertEquals(endpos, 1)
  lu.assertEquals(digits, "")
  lu.assertEquals(env.strtoll(""), 0)
end

function TestStrtoll:test_overflow_clamps()
  local v, _, _, overflow = env.strtoll("99999999999999999999")
  lu.assertTrue(overflow)
  lu.assertEquals(v, 9223372036854775807)
end

function TestStrtoll:test_base_10()
  lu.assertEquals(env.strtoll("010", 10), 10)
  lu.assertEquals(env.strtoll("0x10", 10), 0)
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestStrtoll", TestStrtoll },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
