-- LuaUnit tests of cs.tensor (bindings/bind_tensor.cpp): construction, get/set/fill, slices
-- (views), fill_pattern's values, and the argument errors ("bad argument #n to 'f' (...)").
-- Run: commscript --backend self --trusted tests/lua/test_tensor.lua
local cs = require "commscript"
local lu = require "luaunit"

local recipe = cs.recipe {
  name = "test_tensor",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.tensor",
}

-- Runs f (which must NOT tail-call the function under test, or Lua loses its name) and
-- returns the error message.
local function error_of(f)
  local ok, err = pcall(f)
  lu.assertFalse(ok, "expected an error, got none")
  return tostring(err)
end

-- The engine's pattern (engine/pattern.cpp), for checking fill_pattern's values.
local function pattern_value(rank, index0, op, salt)
  salt = salt or 0
  if op == "prod" then return ((rank + index0 + salt) % 4 == 0) and 2 or 1 end
  return 1 + (rank * 13 + index0 * 7 + salt * 5) % 9
end

TestTensorBasics = {}

function TestTensorBasics:test_construct_positional()
  local t = cs.tensor("float32", 4)
  lu.assertEquals(t:dtype(), "float32")
  lu.assertEquals(t:count(), 4)
  lu.assertEquals(#t, 4)
  lu.assertEquals(t:bytes(), 16)
  lu.assertEquals(tostring(t), "tensor<float32>[4]")
end

function TestTensorBasics:test_construct_table()
  local t = cs.tensor { dtype = "int64", count = 3 }
  lu.assertEquals(t:dtype(), "int64")
  lu.assertEquals(t:bytes(), 24)
  lu.assertEquals(cs.tensor({ count = 2 }):dtype(), "float32", "float32 is the default dtype")
end

function TestTensorBasics:test_every_dtype_size()
  local size = { int8 = 1, uint8 = 1, int32 = 4, uint32 = 4, int64 = 8, uint64 = 8, float16 = 2, bfloat16 = 2,
                 float32 = 4, float64 = 8 }
  lu.assertEquals(#cs.dtypes, 10)
  for _, d in ipairs(cs.dtypes) do
    lu.assertEquals(cs.tensor(d, 10):bytes(), 10 * size[d], d)
    lu.assertEquals(cs.dtype_size(d), size[d], d)
  end
end

-- float16 and bfloat16 hold their bit patterns; values pass through Lua as doubles, rounded to
-- nearest even on the way in.
function TestTensorBasics:test_16bit_floats_round_on_set()
  local h = cs.tensor("float16", 4)
  h:set(1, 1.5)
  h:set(2, 0.1)      -- nearest float16: 0x2e66
  h:set(3, 65504)    -- the largest float16
  h:set(4, 2049)     -- a tie between 2048 and 2050: to the even 2048
  lu.assertEquals(h:to_table(), { 1.5, 0.0999755859375, 65504, 2048 })
  lu.assertEquals(tostring(h), "tensor<float16>[4]")
  h:set(1, 70000)
  lu.assertEquals(h:get(1), math.huge, "past the largest float16: infinity")
  local b = cs.tensor("half", 1)
  lu.assertEquals(b:dtype(), "float16", "half is an alias")
  local bf = cs.tensor { dtype = "bfloat16", count = 3 }
  bf:set(1, 0.1)     -- nearest bfloat16: 0x3dcd
  bf:set(2, 257)     -- a tie between 256 and 258: to the even 256
  bf:set(3, -3e38)
  lu.assertEquals(bf:get(1), 0.10009765625)
  lu.assertEquals(bf:get(2), 256)
  lu.assertTrue(bf:get(3) < -2.99e38 and bf:get(3) > -3.01e38)
  lu.assertEquals(bf:fill(-7):to_table(), { -7, -7, -7 })
  lu.assertEquals(cs.tensor("bf16", 4):fill_pattern(0):to_table(), { 1, 8, 6, 4 })
end

function TestTensorBasics:test_zero_initialised()
  local t = cs.tensor("float64", 5)
  lu.assertEquals(t:to_table(), { 0, 0, 0, 0, 0 })
end

function TestTensorBasics:test_empty_tensor()
  local t = cs.tensor("int32", 0)
  lu.assertEquals(t:count(), 0)
  lu.assertEquals(t:to_table(), {})
end

function TestTensorBasics:test_get_set_one_based()
  local t = cs.tensor("float64", 3)
  t:set(1, 1.5)
  t:set(3, -2.25)
  lu.assertEquals(t:get(1), 1.5)
  lu.assertEquals(t:get(2), 0)
  lu.assertEquals(t:get(3), -2.25)
  lu.assertEquals(t:to_table(), { 1.5, 0, -2.25 })
end

function TestTensorBasics:test_float32_rounds()
  local t = cs.tensor("float32", 1)
  t:set(1, 0.1)
  lu.assertNotEquals(t:get(1), 0.1)
  lu.assertAlmostEquals(t:get(1), 0.1, 1e-7)
  t:set(1, 16777217)  -- 2^24 + 1 is not a float32
  lu.assertEquals(t:get(1), 16777216)
end

function TestTensorBasics:test_integer_dtypes_store_integers()
  local t = cs.tensor("int32", 2)
  t:set(1, 7)
  t:set(2, -7)
  lu.assertEquals(t:to_table(), { 7, -7 })
  local u = cs.tensor("uint8", 1)
  u:set(1, 255)
  lu.assertEquals(u:get(1), 255)
end

function TestTensorBasics:test_fill_returns_self()
  local t = cs.tensor("int32", 4)
  lu.assertIs(t:fill(3), t)
  lu.assertEquals(t:to_table(), { 3, 3, 3, 3 })
end

TestTensorSlice = {}

function TestTensorSlice:test_slice_is_a_view()
  local t = cs.tensor("float32", 6)
  local s = t:slice(2, 3)  -- elements 2, 3, 4
  lu.assertEquals(s:count(), 3)
  lu.assertEquals(s:dtype(), "float32")
  s:fill(9)
  lu.assertEquals(t:to_table(), { 0, 9, 9, 9, 0, 0 })
  s:set(1, 5)
  lu.assertEquals(t:get(2), 5)
  t:set(4, 7)
  lu.assertEquals(s:get(3), 7)
end

function TestTensorSlice:test_slice_of_slice()
  local t = cs.tensor("int32", 10)
  local s = t:slice(3, 6):slice(2, 2)  -- elements 4, 5 of t
  s:fill(1)
  lu.assertEquals(t:to_table(), { 0, 0, 0, 1, 1, 0, 0, 0, 0, 0 })
end

function TestTensorSlice:test_slice_to_the_end_and_empty()
  local t = cs.tensor("int8", 4)
  lu.assertEquals(t:slice(4, 1):count(), 1)
  lu.assertEquals(t:slice(5, 0):count(), 0)
  lu.assertEquals(t:slice(1, 4):count(), 4)
end

function TestTensorSlice:test_slice_keeps_the_storage_alive()
  local s
  do
    local t = cs.tensor("float64", 1000)
    t:fill(2)
    s = t:slice(500, 2)
  end
  collectgarbage()
  collectgarbage()
  lu.assertEquals(s:to_table(), { 2, 2 })
end

function TestTensorSlice:test_slice_out_of_range()
  local t = cs.tensor("float32", 4)
  local m = error_of(function() local _ = t:slice(3, 5) end)
  lu.assertStrContains(m, "outside a tensor of 4 elements")
  lu.assertStrContains(error_of(function() local _ = t:slice(6, 0) end), "outside a tensor of 4 elements")
end

TestTensorPattern = {}

function TestTensorPattern:test_values_sum()
  local t = cs.tensor("int32", 12)
  lu.assertIs(t:fill_pattern(0), t)
  for i = 1, 12 do lu.assertEquals(t:get(i), pattern_value(0, i - 1, "sum"), "element " .. i) end
  lu.assertEquals(cs.tensor("float32", 4):fill_pattern(0):to_table(), { 1, 8, 6, 4 })
end

function TestTensorPattern:test_rank_and_salt_change_values()
  local a = cs.tensor("float64", 9):fill_pattern(0):to_table()
  local b = cs.tensor("float64", 9):fill_pattern(1):to_table()
  local c = cs.tensor("float64", 9):fill_pattern(0, "sum", 1):to_table()
  lu.assertNotEquals(a, b)
  lu.assertNotEquals(a, c)
  for i = 1, 9 do
    lu.assertEquals(b[i], pattern_value(1, i - 1, "sum"))
    lu.assertEquals(c[i], pattern_value(0, i - 1, "sum", 1))
  end
end

function TestTensorPattern:test_prod_pattern_is_ones_and_twos()
  local t = cs.tensor("float32", 8):fill_pattern(3, "prod")
  for i = 1, 8 do lu.assertEquals(t:get(i), pattern_value(3, i - 1, "prod"), "element " .. i) end
  lu.assertEquals(t:get(2), 2)  -- (3 + 1) % 4 == 0
end

function TestTensorPattern:test_values_in_range_for_every_dtype()
  for _, d in ipairs(cs.dtypes) do
    local t = cs.tensor(d, 50):fill_pattern(5, "max", 7)
    for i = 1, 50 do
      local v = t:get(i)
      lu.assertTrue(v >= 1 and v <= 9 and v % 1 == 0, d .. " element " .. i .. " = " .. v)
    end
  end
end

function TestTensorPattern:test_pattern_of_a_slice_starts_at_its_first_element()
  local t = cs.tensor("int32", 6)
  t:slice(3, 3):fill_pattern(0)
  lu.assertEquals(t:to_table(), { 0, 0, 1, 8, 6, 0 })
end

TestTensorErrors = {}

function TestTensorErrors:test_get_out_of_range()
  local t = cs.tensor("float32", 4)
  lu.assertStrContains(error_of(function() local _ = t:get(5) end), "bad argument #1 to 'get' (index 5 out of range 1..4)")
  lu.assertStrContains(error_of(function() local _ = t:get(0) end), "bad argument #1 to 'get' (index 0 out of range 1..4)")
  lu.assertStrContains(error_of(function() local _ = t:get(-1) end), "bad argument #1 to 'get' (index -1 out of range")
end

function TestTensorErrors:test_get_non_integer_and_non_number()
  local t = cs.tensor("float32", 4)
  lu.assertStrContains(error_of(function() local _ = t:get(1.5) end),
    "bad argument #1 to 'get' (integer expected, got non-integer number)")
  lu.assertStrContains(error_of(function() local _ = t:get("x") end), "bad argument #1 to 'get' (number expected, got string)")
  lu.assertStrContains(error_of(function() local _ = t:get() end), "bad argument #1 to 'get' (number expected, got no value)")
end

function TestTensorErrors:test_set_errors()
  local t = cs.tensor("float32", 4)
  lu.assertStrContains(error_of(function() t:set(1) end), "bad argument #2 to 'set' (number expected, got no value)")
  lu.assertStrContains(error_of(function() t:set(9, 1) end), "bad argument #1 to 'set' (index 9 out of range 1..4)")
  lu.assertStrContains(error_of(function() t:set(1, "abc") end), "bad argument #2 to 'set' (number expected, got string)")
end

function TestTensorErrors:test_fill_errors()
  local t = cs.tensor("float32", 4)
  lu.assertStrContains(error_of(function() t:fill("a") end), "bad argument #1 to 'fill' (number expected, got string)")
  lu.assertStrContains(error_of(function() t:fill() end), "bad argument #1 to 'fill' (number expected, got no value)")
end

function TestTensorErrors:test_slice_errors()
  local t = cs.tensor("float32", 4)
  lu.assertStrContains(error_of(function() local _ = t:slice(0, 2) end),
    "bad argument #1 to 'slice' (first index must be at least 1)")
  lu.assertStrContains(error_of(function() local _ = t:slice(1, -1) end),
    "bad argument #2 to 'slice' (non-negative count expected)")
  lu.assertStrContains(error_of(function() local _ = t:slice(1) end), "bad argument #2 to 'slice' (number expected, got no value)")
end

function TestTensorErrors:test_fill_pattern_errors()
  local t = cs.tensor("float32", 4)
  lu.assertStrContains(error_of(function() t:fill_pattern(-1) end),
    "bad argument #1 to 'fill_pattern' (non-negative rank expected)")
  lu.assertStrContains(error_of(function() t:fill_pattern() end), "bad argument #1 to 'fill_pattern' (number expected")
  lu.assertStrContains(error_of(function() t:fill_pattern(0, "bogus") end), "unknown reduction 'bogus'")
end

function TestTensorErrors:test_method_on_a_non_tensor()
  local t = cs.tensor("float32", 4)
  lu.assertStrContains(error_of(function() local _ = t.get(nil, 1) end),
    "bad argument #1 to 'get' (commscript.tensor expected, got nil)")
  lu.assertStrContains(error_of(function() local _ = t.count({}) end), "commscript.tensor expected, got table")
end

function TestTensorErrors:test_constructor_errors()
  lu.assertStrContains(error_of(function() local _ = cs.tensor("float32", -1) end),
    "bad argument #2 to 'tensor' (non-negative count expected)")
  lu.assertStrContains(error_of(function() local _ = cs.tensor("float32") end),
    "bad argument #2 to 'tensor' (number expected, got no value)")
  lu.assertStrContains(error_of(function() local _ = cs.tensor { dtype = "float32", count = -1 } end),
    "bad argument #1 to 'tensor' (field 'count': non-negative integer expected)")
  lu.assertStrContains(error_of(function() local _ = cs.tensor { dtype = "float32" } end),
    "bad argument #1 to 'tensor' (field 'count': non-negative integer expected)")
  lu.assertStrContains(error_of(function() local _ = cs.tensor { dtype = "float32", cnt = 1 } end),
    "bad argument #1 to 'tensor' (unknown field 'cnt'; known: dtype, count)")
  lu.assertStrContains(error_of(function() local _ = cs.tensor { dtype = 4, count = 1 } end),
    "bad argument #1 to 'tensor' (field 'dtype': string expected, got number)")
end

-- A dtype named by the recipe is API misuse, a recipe error (exit 2), like any other bad
-- argument; only user input (command line, config, recipe options) is exit 1.
function TestTensorErrors:test_unknown_dtype_is_a_recipe_error()
  local ok, err = pcall(function() local _ = cs.tensor("float8", 4) end)
  lu.assertFalse(ok)
  lu.assertEquals(type(err), "table")
  lu.assertEquals(err.code, cs.exit.runtime)
  lu.assertStrContains(err.message, "unknown dtype 'float8' (expected one of int8, uint8, int32, uint32, int64, "
    .. "uint64, float16, bfloat16, float32, float64)")
  lu.assertStrContains(err.message, "test_tensor.lua:", "the message names the calling line")
end

function TestTensorErrors:test_metatable_is_locked()
  local t = cs.tensor("float32", 1)
  lu.assertEquals(getmetatable(t), "tensor")
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestTensorBasics", TestTensorBasics },
    { "TestTensorSlice", TestTensorSlice },
    { "TestTensorPattern", TestTensorPattern },
    { "TestTensorErrors", TestTensorErrors },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
