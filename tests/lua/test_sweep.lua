-- LuaUnit tests of stdlib/cs/sweep.lua (nccl-tests -b/-e/-f/-i size sweeps).
-- Run: commscript --backend self --trusted tests/lua/test_sweep.lua
local cs = require "commscript"
local lu = require "luaunit"

local recipe = cs.recipe {
  name = "test_sweep",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.sweep",
}

local function error_of(f, ...)
  local ok, err = pcall(f, ...)
  lu.assertFalse(ok, "expected an error, got none")
  return tostring(err)
end

TestSweepFactor = {}

function TestSweepFactor:test_strings_doubling()
  lu.assertEquals(cs.sweep.sizes { min = "8", max = "64", factor = 2 }, { 8, 16, 32, 64 })
end

function TestSweepFactor:test_suffixes()
  lu.assertEquals(cs.sweep.sizes { min = "1K", max = "8K" }, { 1024, 2048, 4096, 8192 })
  lu.assertEquals(cs.sweep.sizes { min = "512K", max = "2M", factor = 4 }, { 524288, 2097152 })
end

function TestSweepFactor:test_numbers()
  lu.assertEquals(cs.sweep.sizes { min = 1, max = 16, factor = 4 }, { 1, 4, 16 })
end

function TestSweepFactor:test_max_not_reached_is_not_added()
  lu.assertEquals(cs.sweep.sizes { min = 8, max = 100, factor = 2 }, { 8, 16, 32, 64 })
end

function TestSweepFactor:test_default_factor_is_two()
  lu.assertEquals(cs.sweep.sizes { min = 2, max = 32 }, { 2, 4, 8, 16, 32 })
end

function TestSweepFactor:test_fractional_factor_floors_and_always_advances()
  -- 1*1.5 = 1.5 -> 1 would not advance, so 2; 3*1.5 = 4.5 -> 4; 4 -> 6; 6 -> 9; 9 -> 13 > 10
  lu.assertEquals(cs.sweep.sizes { min = 1, max = 10, factor = 1.5 }, { 1, 2, 3, 4, 6, 9 })
end

function TestSweepFactor:test_zero_min()
  lu.assertEquals(cs.sweep.sizes { min = 0, max = 8 }, { 0, 1, 2, 4, 8 })
end

function TestSweepFactor:test_single_size()
  lu.assertEquals(cs.sweep.sizes { min = "4K", max = "4K" }, { 4096 })
  lu.assertEquals(cs.sweep.sizes { min = "4K" }, { 4096 })
  lu.assertEquals(cs.sweep.sizes {}, { 8 })
end

function TestSweepFactor:test_default_min_is_8()
  lu.assertEquals(cs.sweep.sizes { max = "32" }, { 8, 16, 32 })
end

function TestSweepFactor:test_large_sweep_length()
  local s = cs.sweep.sizes { min = "8", max = "8G", factor = 2 }
  lu.assertEquals(#s, 31)
  lu.assertEquals(s[#s], 8 * 2 ^ 30)
end

TestSweepStep = {}

function TestSweepStep:test_additive()
  lu.assertEquals(cs.sweep.sizes { min = "1K", max = "4K", step = "1K" }, { 1024, 2048, 3072, 4096 })
  lu.assertEquals(cs.sweep.sizes { min = 10, max = 35, step = 10 }, { 10, 20, 30 })
end

function TestSweepStep:test_step_zero()
  lu.assertStrContains(error_of(cs.sweep.sizes, { min = 8, max = 16, step = 0 }), "step must be at least 1 byte")
end

TestSweepErrors = {}

function TestSweepErrors:test_min_above_max()
  lu.assertStrContains(error_of(cs.sweep.sizes, { min = "64", max = "8" }), "sweep: min (64) is larger than max (8)")
  lu.assertStrContains(error_of(cs.sweep.sizes, { min = "2M", max = "1M" }), "min (2M) is larger than max (1M)")
end

function TestSweepErrors:test_bad_sizes_are_named()
  lu.assertStrContains(error_of(cs.sweep.sizes, { min = "8", max = "x" }), "sweep: max 'x' is not a size")
  lu.assertStrContains(error_of(cs.sweep.sizes, { min = "eight", max = "64" }), "sweep: min 'eight' is not a size")
  lu.assertStrContains(error_of(cs.sweep.sizes, { min = -8, max = "64" }), "sweep: min '-8' is not a size")
end

function TestSweepErrors:test_factor_must_exceed_one()
  lu.assertStrContains(error_of(cs.sweep.sizes, { min = 8, max = 64, factor = 1 }), "factor must be a number above 1")
  lu.assertStrContains(error_of(cs.sweep.sizes, { min = 8, max = 64, factor = "2" }), "factor must be a number above 1")
end

function TestSweepErrors:test_error_points_at_the_caller()
  local line = debug.getinfo(1, "l").currentline + 1
  local msg = error_of(function() local _ = cs.sweep.sizes { min = "8", max = "x" } end)
  lu.assertStrContains(msg, "test_sweep.lua:" .. line .. ":")
end

-- bandwidth_bound: the early stop of full_diag's sweep.
TestSweepBound = {}

-- results at `sizes` whose time doubles with the size from t0 us: busbw is the same at each
local function ramp(sizes, t0)
  local rs = {}
  for i, b in ipairs(sizes) do
    local t = t0 * 2 ^ (i - 1)
    rs[i] = { bytes = b, time_us = t, busbw = b / t / 1e3 }
  end
  return rs
end

function TestSweepBound:test_large_sizes_doubling_are_bound()
  lu.assertTrue(cs.sweep.bandwidth_bound(ramp({ 65536, 131072, 262144 }, 50)))
end

-- A healthy 2-core CI run: all-reduce at 32, 64, 128 B took 40, 80, 160 us in a noisy phase;
-- the sweep stopped there as bandwidth-bound and never measured 256 B-256 KiB.
function TestSweepBound:test_small_sizes_are_never_bound()
  lu.assertFalse(cs.sweep.bandwidth_bound(ramp({ 32, 64, 128 }, 40)))
  lu.assertFalse(cs.sweep.bandwidth_bound(ramp({ 16384, 32768, 65536 }, 40)))
end

function TestSweepBound:test_flat_time_is_not_bound()
  local rs = ramp({ 65536, 131072, 262144 }, 50)
  rs[3].time_us = rs[2].time_us * 1.5          -- under 1.6x for a doubling
  rs[3].busbw = rs[3].bytes / rs[3].time_us / 1e3
  lu.assertFalse(cs.sweep.bandwidth_bound(rs))
end

function TestSweepBound:test_spread_busbw_is_not_bound()
  local rs = ramp({ 65536, 131072, 262144 }, 50)
  rs[3].time_us = rs[2].time_us * 1.7
  rs[3].busbw = rs[3].bytes / rs[3].time_us / 1e3  -- 2/1.7: 18 % above the others
  lu.assertFalse(cs.sweep.bandwidth_bound(rs))
  lu.assertFalse(cs.sweep.bandwidth_bound({ rs[1], rs[2] }))  -- too few
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestSweepFactor", TestSweepFactor },
    { "TestSweepStep", TestSweepStep },
    { "TestSweepErrors", TestSweepErrors },
    { "TestSweepBound", TestSweepBound },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
