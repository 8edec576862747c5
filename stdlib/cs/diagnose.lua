-- Turning measurements into culprits. Pure functions over plain tables: no communication.
--
-- stragglers(rank_times, opts) -> list of { rank, lateness, score }
--   rank_times: per rank (1-based list, entry i is rank i-1) the mean time it spent in a
--   collective. A rank that arrives late waits the least (the others wait for it), so its
--   lateness is the median time minus its own. Flagged when lateness exceeds both
--   opts.rel (default 0.3) x the median and opts.mads (default 5) x the median absolute
--   deviation of the others.
--
-- localize(n, pair_values, opts) -> { ranks = {...}, pairs = {...}, scores = {...} }
--   pair_values: list of { a, b, value } where larger is worse (time). Each rank is scored by
--   the median of its pairs over the median of the ranks' medians. A rank whose score exceeds
--   opts.factor (default 1.5) is a suspect; a pair whose value exceeds opts.link_factor
--   (default 2) x the reference while neither of its ranks is a suspect is a slow link.
local stats = require "cs.stats"
local M = {}

local median = stats.median
M.median = median  -- the same function as cs.stats.median (kept: recipes call it)

function M.stragglers(times, opts)
  opts = opts or {}
  local rel, mads = opts.rel or 0.3, opts.mads or 5
  local n = #times
  if n < 3 then return {} end  -- two ranks: who waited for whom is symmetric enough to mislead
  local med = median(times)
  local out = {}
  for i, t in ipairs(times) do
    local others = {}
    for j, u in ipairs(times) do if j ~= i then others[#others + 1] = u end end
    local om = median(others)
    local dev = {}
    for k, u in ipairs(others) do dev[k] = math.abs(u - om) end
    local mad = median(dev)
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

function M.localize(n, pair_values, opts)
  opts = opts or {}
  local factor, link_factor = opts.factor or 1.5, opts.link_factor or 2
  local per = {}
  for r = 0, n - 1 do per[r] = {} end
  for _, p in ipairs(pair_values) do
    table.insert(per[p[1]], p[3])
    table.insert(per[p[2]], p[3])
  end
  -- The reference is the median of the per-rank medians: with 4 ranks half of all pairs touch
  -- one bad rank, which would drag a plain median of the pairs towards it.
  local rank_medians, medians = {}, {}
  for r = 0, n - 1 do
    rank_medians[r] = median(per[r])
    if rank_medians[r] then medians[#medians + 1] = rank_medians[r] end
  end
  local fleet = median(medians)
  local result = { ranks = {}, pairs = {}, scores = {}, fleet_median = fleet }
  if not fleet or fleet <= 0 then return result end
  local suspect = {}
  for r = 0, n - 1 do
    local m = rank_medians[r]
    local score = m and m / fleet or 0
    result.scores[r + 1] = score
    if m and #per[r] >= 2 and score > factor then
      suspect[r] = true
      result.ranks[#result.ranks + 1] = { rank = r, score = score, median = m }
    end
  end
  for _, p in ipairs(pair_values) do
    if p[3] > link_factor * fleet and not suspect[p[1]] and not suspect[p[2]] then
      result.pairs[#result.pairs + 1] = { a = p[1], b = p[2], value = p[3], score = p[3] / fleet }
    end
  end
  table.sort(result.ranks, function(x, y) return x.score > y.score end)
  return result
end

-- localize_hosts(pair_values, rank_hosts, opts) -> list of { host, ranks, score, median, reference }
--   Like localize(), one level up: only pairs between different hosts count; a host is scored
--   by the median of its pairs with other hosts over the median of the hosts' medians. Needs
--   at least 3 hosts (with 2, nothing tells which end is slow).
function M.localize_hosts(pair_values, rank_hosts, opts)
  opts = opts or {}
  local factor = opts.factor or 1.5
  local per, ranks_of, names = {}, {}, {}
  for r, h in ipairs(rank_hosts) do
    if not ranks_of[h] then ranks_of[h] = {}; per[h] = {}; names[#names + 1] = h end
    table.insert(ranks_of[h], r - 1)
  end
  if #names < 3 then return {} end
  for _, p in ipairs(pair_values) do
    local ha, hb = rank_hosts[p[1] + 1], rank_hosts[p[2] + 1]
    if ha ~= hb then
      table.insert(per[ha], p[3])
      table.insert(per[hb], p[3])
    end
  end
  local medians, by = {}, {}
  for _, h in ipairs(names) do
    by[h] = median(per[h])
    if by[h] then medians[#medians + 1] = by[h] end
  end
  local ref = median(medians)
  local out = {}
  if not ref or ref <= 0 then return out end
  for _, h in ipairs(names) do
    if by[h] and by[h] / ref > factor then
      out[#out + 1] = { host = h, ranks = ranks_of[h], score = by[h] / ref, median = by[h], reference = ref }
    end
  end
  table.sort(out, function(x, y) return x.score > y.score end)
  return out
end

return M
