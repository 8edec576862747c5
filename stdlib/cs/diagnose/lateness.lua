-- cs.diagnose.lateness: the ranks a collective waited for (stragglers), from each rank's own
-- mean time in it, and a vote over several measurements so that one noisy one makes nobody a
-- straggler. Pure functions over plain tables: no communication. Recipes use cs.diagnose.
local stats = require "cs.stats"
local M = {}

local median = stats.median

-- The median of the sorted list s (length n) with the element at position p left out.
local function median_without(s, n, p)
  local m = n - 1
  if m == 0 then return nil end
  local function at(k) return k < p and s[k] or s[k + 1] end
  if m % 2 == 1 then return at((m + 1) / 2) end
  return (at(m / 2) + at(m / 2 + 1)) / 2
end

-- The position of value v in the sorted list s (v is one of its elements).
local function position(s, v)
  local lo, hi = 1, #s
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if s[mid] < v then lo = mid + 1 else hi = mid end
  end
  return lo
end

-- stragglers(rank_times, opts) -> list of { rank, lateness, score }
--   rank_times: per rank (1-based list, entry i is rank i-1) the mean time it spent in a
--   collective. A rank that arrives late waits the least (the others wait for it), so its
--   lateness is the median time minus its own. Flagged when lateness exceeds both
--   opts.rel (default 0.3) x the median and opts.mads (default 5) x the median absolute
--   deviation of the others.
-- O(n log n): the median of "the others" and their median absolute deviation, for every rank,
-- from one sorted copy. Leaving one element out of a sorted list moves its median by index
-- only, and that median takes at most three distinct values (the left-out element below, at or
-- above the middle), so the deviations are sorted once per distinct median. The same numbers as
-- computing each rank's others from scratch (O(n^2 log n): minutes at 8192 ranks).
function M.stragglers(times, opts)
  opts = opts or {}
  local rel, mads = opts.rel or 0.3, opts.mads or 5
  local n = #times
  if n < 3 then return {} end  -- two ranks: who waited for whom is symmetric enough to mislead
  local med = median(times)
  local s = {}
  for i = 1, n do s[i] = times[i] end
  table.sort(s)
  local devs = {}  -- om -> sorted |u - om| over all n values
  local out = {}
  for i = 1, n do
    local t = times[i]
    local om = median_without(s, n, position(s, t))
    if om ~= om then return {} end  -- a NaN time: nothing to compare against
    local d = devs[om]
    if not d then
      d = {}
      for k = 1, n do d[k] = math.abs(s[k] - om) end
      table.sort(d)
      devs[om] = d
    end
    local mad = median_without(d, n, position(d, math.abs(t - om)))
    local lateness = om - t
    if lateness > rel * om and lateness > mads * mad then
      out[#out + 1] = { rank = i - 1, lateness = lateness, score = om > 0 and lateness / om or 0, median = med }
    end
  end
  table.sort(out, function(a, b) return a.lateness > b.lateness end)
  return out
end

-- straggler_vote([opts]) -> a vote over several measurements: vote:add(rank_times) after each
-- (stragglers() of that measurement), vote:result() -> the ranks flagged in at least two
-- thirds of them, once at least opts.min_votes (default 3) measurements
-- voted: { rank, lateness = median lateness, median = median of the medians, score, sizes =
-- "k/n", op = opts.op }, by rank. One noisy measurement does not make a straggler.
function M.straggler_vote(opts)
  opts = opts or {}
  local min_votes = opts.min_votes or 3
  local vote = { n = 0, by_rank = {} }
  function vote:add(rank_times)
    self.n = self.n + 1
    for _, s in ipairs(M.stragglers(rank_times, opts)) do
      local v = self.by_rank[s.rank] or { n = 0, lateness = {}, median = {} }
      v.n = v.n + 1
      v.lateness[#v.lateness + 1] = s.lateness
      v.median[#v.median + 1] = s.median
      self.by_rank[s.rank] = v
    end
  end
  function vote:result()
    local out = {}
    for rank, v in pairs(self.by_rank) do
      if self.n >= min_votes and 3 * v.n >= 2 * self.n then  -- v.n >= ceil(2n/3), in integers
        local lateness, med = median(v.lateness), median(v.median)
        out[#out + 1] = { rank = rank, lateness = lateness, median = med, score = lateness / med, op = opts.op,
                          sizes = v.n .. "/" .. self.n }
      end
    end
    table.sort(out, function(a, b) return a.rank < b.rank end)
    return out
  end
  return vote
end

return M
