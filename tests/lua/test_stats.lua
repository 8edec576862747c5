-- LuaUnit tests of stdlib/cs/stats.lua (nearest-rank percentiles, summary from the engine).
-- Run: commscript --backend self --trusted tests/lua/test_stats.lua
local cs = require "commscript"
local lu = require "luaunit"

local recipe = cs.recipe {
  name = "test_stats",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.stats",
}

local EPS = 1e-12

local function error_of(f, ...)
  local ok, err = pcall(f, ...)
  lu.assertFalse(ok, "expected an error, got none")
  return tostring(err)
end

TestPercentile = {}

-- The nearest-rank method's textbook example: {15, 20, 35, 40, 50}.
function TestPercentile:test_nearest_rank()
  local l = { 15, 20, 35, 40, 50 }
  lu.assertEquals(cs.stats.percentile(l, 5), 15)
  lu.assertEquals(cs.stats.percentile(l, 30), 20)
  lu.assertEquals(cs.stats.percentile(l, 40), 20)
  lu.assertEquals(cs.stats.percentile(l, 50), 35)
  lu.assertEquals(cs.stats.percentile(l, 100), 50)
end

function TestPercentile:test_p0_is_the_minimum()
  lu.assertEquals(cs.stats.percentile({ 3, 1, 2 }, 0), 1)
end

function TestPercentile:test_unsorted_input_is_not_modified()
  local l = { 9, 1, 5, 3, 7 }
  lu.assertEquals(cs.stats.percentile(l, 60), 5)
  lu.assertEquals(l, { 9, 1, 5, 3, 7 })
end

function TestPercentile:test_p99_of_100_values()
  local l = {}
  for i = 100, 1, -1 do l[#l + 1] = i end
  lu.assertEquals(cs.stats.percentile(l, 99), 99)
  lu.assertEquals(cs.stats.percentile(l, 99.5), 100)
  lu.assertEquals(cs.stats.percentile(l, 1), 1)
  lu.assertEquals(cs.stats.percentile(l, 1.01), 2)
end

function TestPercentile:test_empty_is_nil()
  lu.assertNil(cs.stats.percentile({}, 50))
  lu.assertNil(cs.stats.median({}))
  lu.assertNil(cs.stats.mean({}))
end

function TestPercentile:test_bad_p()
  lu.assertStrContains(error_of(cs.stats.percentile, { 1, 2 }, 101), "percentile: p must be in [0, 100]")
  lu.assertStrContains(error_of(cs.stats.percentile, { 1, 2 }, -1), "percentile: p must be in [0, 100]")
  lu.assertStrContains(error_of(cs.stats.percentile, { 1, 2 }, "50"), "percentile: p must be in [0, 100]")
end

function TestPercentile:test_median_is_the_mean_of_the_middle_two()
  lu.assertEquals(cs.stats.median({ 3, 1, 2 }), 2)
  lu.assertEquals(cs.stats.median({ 4, 1, 3, 2 }), 2.5)
  lu.assertEquals(cs.stats.median({ 1, 2, 3, 10 }), 2.5)
  lu.assertEquals(cs.stats.median({ 7 }), 7)
  -- percentile stays nearest-rank: p50 of an even list is the lower middle value
  lu.assertEquals(cs.stats.percentile({ 1, 2, 3, 10 }, 50), 2)
  local l = { 5, 1, 4 }
  cs.stats.median(l)
  lu.assertEquals(l, { 5, 1, 4 }, "the input is not sorted in place")
end

-- One definition of a percentile (docs/lua-api.md, "Median and percentiles"): the Lua percentile
-- and the engine's summary (comm:bench's p50/p95/p99) give the same value, even and odd sizes,
-- ties and the sizes where p / 100 * n falls near a whole number.
function TestPercentile:test_lua_percentile_is_the_engines()
  local seed = 7
  local function rnd() seed = (seed * 1103515245 + 12345) % 2147483648; return seed % 1000 end
  for _, n in ipairs({ 1, 2, 3, 4, 10, 20, 99, 100, 101, 200, 1000 }) do
    local l = {}
    for i = 1, n do l[i] = rnd() / 8 end
    local s = cs.stats.summary(l)
    for _, p in ipairs({ 50, 95, 99 }) do
      lu.assertEquals(cs.stats.percentile(l, p), s["p" .. p], ("n %d, p%d"):format(n, p))
    end
  end
  local even = cs.stats.summary({ 1, 2, 3, 10 })
  lu.assertEquals(even.p50, 2)  -- the nearest rank, where the median is 2.5
  lu.assertEquals(cs.stats.median({ 1, 2, 3, 10 }), 2.5)
end

function TestPercentile:test_one_median_in_the_stdlib()
  lu.assertIs(cs.diagnose.median, cs.stats.median)
end

-- median_inplace: the value median() gives, on lists with ties, even and odd sizes.
function TestPercentile:test_median_inplace_is_the_median()
  local x = 11
  local function u() x = (x * 1103515245 + 12345) % 2147483648; return x / 2147483648 end
  for t = 1, 3000 do
    local n = 1 + t % 60
    local a, b = {}, {}
    for i = 1, n do local v = u() < 0.3 and math.floor(u() * 4) or u(); a[i] = v; b[i] = v end
    lu.assertEquals(cs.stats.median_inplace(b), cs.stats.median(a), table.concat(a, ", "))
  end
  lu.assertNil(cs.stats.median_inplace {})
  lu.assertEquals(cs.stats.median_inplace { 1, 2, 3, 10 }, 2.5)
end

TestMeanRelative = {}

function TestMeanRelative:test_mean()
  lu.assertEquals(cs.stats.mean({ 1, 2, 3, 4 }), 2.5)
  lu.assertEquals(cs.stats.mean({ -1, 1 }), 0)
end

function TestMeanRelative:test_relative()
  lu.assertAlmostEquals(cs.stats.relative(110, 100), 0.1, EPS)
  lu.assertAlmostEquals(cs.stats.relative(50, 100), -0.5, EPS)
  lu.assertEquals(cs.stats.relative(0, 0), 0)
  lu.assertEquals(cs.stats.relative(1, 0), math.huge)
end

TestSummary = {}

function TestSummary:test_one_to_ten()
  local s = cs.stats.summary { 10, 9, 8, 7, 6, 5, 4, 3, 2, 1 }
  lu.assertEquals(s.n, 10)
  lu.assertEquals(s.min, 1)
  lu.assertEquals(s.max, 10)
  lu.assertAlmostEquals(s.mean, 5.5, EPS)
  lu.assertEquals(s.p50, 5)
  lu.assertEquals(s.p95, 10)
  lu.assertEquals(s.p99, 10)
  local stdev = math.sqrt(82.5 / 9)  -- sample stdev: sum of squared deviations 82.5, n-1 = 9
  lu.assertAlmostEquals(s.stdev, stdev, 1e-12)
  lu.assertAlmostEquals(s.cv, stdev / 5.5, 1e-12)
end

function TestSummary:test_single_value()
  local s = cs.stats.summary { 42 }
  lu.assertEquals(s.n, 1)
  lu.assertEquals(s.min, 42)
  lu.assertEquals(s.p99, 42)
  lu.assertEquals(s.stdev, 0)
end

function TestSummary:test_empty()
  local s = cs.stats.summary {}
  lu.assertEquals(s.n, 0)
end

function TestSummary:test_agrees_with_lua_percentile()
  local l, x = {}, 12345
  for i = 1, 257 do
    x = (x * 1103515245 + 12345) % 2147483648
    l[i] = x / 1000
  end
  local s = cs.stats.summary(l)
  lu.assertEquals(s.p50, cs.stats.percentile(l, 50))
  lu.assertEquals(s.p95, cs.stats.percentile(l, 95))
  lu.assertEquals(s.p99, cs.stats.percentile(l, 99))
  lu.assertEquals(s.min, cs.stats.percentile(l, 0))
  lu.assertEquals(s.max, cs.stats.percentile(l, 100))
  lu.assertAlmostEquals(s.mean, cs.stats.mean(l), 1e-9 * math.abs(s.mean))
end

function TestSummary:test_non_numbers_refused()
  lu.assertStrContains(error_of(cs.stats.summary, { 1, "a" }),
    "bad argument #1 to 'summary' (element 2: number expected, got string)")
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestPercentile", TestPercentile },
    { "TestMeanRelative", TestMeanRelative },
    { "TestSummary", TestSummary },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
