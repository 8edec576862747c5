-- Statistics over plain Lua lists of numbers (timed loops return theirs already summarised).
-- Median and percentiles are defined once, in docs/lua-api.md ("Median and percentiles"):
-- a percentile (p50 too) is the nearest rank, a measured value, as the engine's summary
-- (engine/core/stats.cpp); the median is the middle value or the mean of the two middle ones.
local native = require "commscript.native"
local M = {}

-- {n, min, mean, p50, p95, p99, max, stdev, cv}; nearest-rank percentiles, sample stdev.
M.summary = native.summary

-- The nearest-rank percentile: of the n values sorted, the ceil(p / 100 * n)-th (the first for
-- p = 0), as the engine's percentile_sorted. p50 of an even-sized list is the lower middle value,
-- not the median: percentile({1, 2, 3, 10}, 50) = 2.
function M.percentile(list, p)
  if type(p) ~= "number" or p < 0 or p > 100 then error("percentile: p must be in [0, 100]", 2) end
  local s = {}
  for i, v in ipairs(list) do s[i] = v end
  if #s == 0 then return nil end
  table.sort(s)
  local rank = math.ceil(p / 100 * #s)
  if rank < 1 then rank = 1 end
  return s[rank]
end

-- The median: the middle value, or the mean of the two middle values of an even-sized list
-- (median{1, 2, 3, 10} = 2.5, where p50 is 2). nil for an empty list. The one median of the stdlib: diagnose,
-- rules, alerts and the recipes use this one.
function M.median(list)
  local s = {}
  for i, v in ipairs(list) do s[i] = v end
  local n = #s
  if n == 0 then return nil end
  table.sort(s)
  if n % 2 == 1 then return s[(n + 1) / 2] end
  return (s[n / 2] + s[n / 2 + 1]) / 2
end

-- The k-th smallest of a[lo..hi], found in place (quickselect, median-of-three pivot): O(n)
-- on average where sorting is O(n log n). a is reordered.
local function select_k(a, k, lo, hi)
  while hi > lo do
    local x, y, z = a[lo], a[math.floor((lo + hi) / 2)], a[hi]
    local pivot
    if x < y then pivot = y < z and y or (x < z and z or x) else pivot = x < z and x or (y < z and z or y) end
    local i, j = lo, hi
    while i <= j do
      while a[i] < pivot do i = i + 1 end
      while a[j] > pivot do j = j - 1 end
      if i <= j then
        a[i], a[j] = a[j], a[i]
        i, j = i + 1, j - 1
      end
    end
    if k <= j then hi = j elseif k >= i then lo = i else return a[k] end
  end
  return a[k]
end

-- median_inplace(list): the same value as median(list), without the copy and the sort (the
-- analysis takes medians of a million values at 1024 ranks); list is reordered.
function M.median_inplace(a)
  local n = #a
  if n == 0 then return nil end
  local k = math.floor((n + 1) / 2)
  local m = select_k(a, k, 1, n)
  if n % 2 == 1 then return m end
  local up = a[k + 1]
  for i = k + 2, n do if a[i] < up then up = a[i] end end
  return (m + up) / 2
end

function M.mean(list)
  if #list == 0 then return nil end
  local sum = 0
  for _, v in ipairs(list) do sum = sum + v end
  return sum / #list
end

-- A bench result's bus bandwidth at its p50 time (busbw x mean time / p50 time): one
-- descheduled iteration can inflate a mean a hundredfold on a shared host, so comparisons with
-- a baseline (the scorecard's reference, the regression rule) use p50 (nearest rank). busbw when the
-- result has no p50.
function M.busbw_at_p50(r)
  if r.p50_us and r.p50_us > 0 and r.time_us then return r.busbw * r.time_us / r.p50_us end
  return r.busbw
end

-- Relative difference of `value` from `reference`: (value - reference) / reference.
function M.relative(value, reference)
  if reference == 0 then return value == 0 and 0 or math.huge end
  return (value - reference) / reference
end

return M
