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

-- The median of a list of our own, reordered in place (no copy, no sort: the localisers'
-- lists hold every pair twice, a million values at 1024 ranks).
local median_own = stats.median_inplace

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

function M.localize(n, pair_values, opts)
  opts = opts or {}
  local factor, link_factor = opts.factor or 1.5, opts.link_factor or 2
  local per = {}
  for r = 0, n - 1 do per[r] = {} end
  for _, p in ipairs(pair_values) do
    local x, y = per[p[1]], per[p[2]]
    x[#x + 1] = p[3]
    y[#y + 1] = p[3]
  end
  -- The reference is the median of the per-rank medians: with 4 ranks half of all pairs touch
  -- one bad rank, which would drag a plain median of the pairs towards it.
  local rank_medians, medians = {}, {}
  local counts = {}
  for r = 0, n - 1 do
    counts[r] = #per[r]
    rank_medians[r] = median_own(per[r])
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
    if m and counts[r] >= 2 and score > factor then
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
      local x, y = per[ha], per[hb]
      x[#x + 1] = p[3]
      y[#y + 1] = p[3]
    end
  end
  local medians, by = {}, {}
  for _, h in ipairs(names) do
    by[h] = median_own(per[h])
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

-- reference_pair(order, rank_hosts, same_host) -> {i, j} | nil: the first pair (i < j, indices
--   into `order`, the least suspect ranks first) of two ranks on the same host (same_host) or on
--   different hosts. O(n), not a scan of all pairs.
function M.reference_pair(order, rank_hosts, same_host)
  if same_host then
    local first, best = {}, nil
    for j, r in ipairs(order) do
      local h = rank_hosts[r + 1]
      local i = first[h]
      if not i then first[h] = j
      elseif not best or i < best[1] then best = { i, j } end
    end
    return best
  end
  for i = 1, #order do
    for j = i + 1, #order do
      if rank_hosts[order[i] + 1] ~= rank_hosts[order[j] + 1] then return { i, j } end
    end
    return nil  -- every later rank shares order[i]'s host: no pair across hosts
  end
  return nil
end

-- good_partner(order, rank_hosts, r, want_other_host) -> rank | nil: the first rank of `order`
--   (least suspect first) other than r, on another host than r's (want_other_host) or on the same.
function M.good_partner(order, rank_hosts, r, want_other_host)
  for _, g in ipairs(order) do
    if g ~= r and (rank_hosts[g + 1] ~= rank_hosts[r + 1]) == want_other_host then return g end
  end
  return nil
end

-- localise(values, rank_hosts, args, measure) -> { hosts = {...}, ranks = {...}, links = {...},
--   suspects = { hosts =, ranks =, links = } }
--   Suspects from localize_hosts / localize over `values` ({a, b, us}, larger is worse), each
--   re-measured alone with measure(a, b) -> us against a reference pair of known-good ranks of
--   the same kind (same host or not), and named only when still args.factor (ranks, hosts;
--   default 1.5) or args.link_factor (links; default 3) times slower. Ranks and links on a
--   confirmed slow host are left to the host finding. rank_hosts: per rank (1-based) its host.
--   measure is called in the same order for the same input (cs.p2p.localise makes it a
--   collective re-test); re-tests are O(suspects), the rest O(pairs + n log n).
-- The suspects of a matrix and the ranks trusted as partners for re-tests: host suspects
-- (localize_hosts), rank/link suspects (localize), and every rank outside them ordered by its
-- score, best first (ties by rank); and the suspect hosts as a set. Shared by localise (one process) and cs.p2p's distributed plan.
function M.suspects(n, values, rank_hosts, factor, link_factor)
  local host_sus = M.localize_hosts(values, rank_hosts, { factor = factor })
  local loc = M.localize(n, values, { factor = factor, link_factor = link_factor })
  local bad_host, bad_rank = {}, {}
  for _, h in ipairs(host_sus) do bad_host[h.host] = true end
  for _, r in ipairs(loc.ranks) do bad_rank[r.rank] = true end
  local order = {}
  for r = 0, n - 1 do
    if not bad_rank[r] and not bad_host[rank_hosts[r + 1]] then order[#order + 1] = r end
  end
  table.sort(order, function(x, y)
    local sx, sy = loc.scores[x + 1] or 0, loc.scores[y + 1] or 0
    if sx ~= sy then return sx < sy end
    return x < y
  end)
  return host_sus, loc, order, bad_host
end

function M.localise(values, rank_hosts, args, measure)
  local D = M
  local n = #rank_hosts
  local factor, link_factor = args.factor or 1.5, args.link_factor or 3
  local host_sus, loc, order = D.suspects(n, values, rank_hosts, factor, link_factor)
  local refs = {}
  local function reference(same_host)
    local key = same_host and "intra" or "inter"
    if refs[key] == nil then
      refs[key] = false
      local p = M.reference_pair(order, rank_hosts, same_host)
      if p then
        local a, b = order[p[1]], order[p[2]]
        refs[key] = { value = measure(a, b, args), a = a, b = b }
      end
    end
    return refs[key] or nil
  end
  local function good_partner(r, want_other_host) return M.good_partner(order, rank_hosts, r, want_other_host) end
  local out = { hosts = {}, ranks = {}, links = {} }
  for _, h in ipairs(host_sus) do
    local r = h.ranks[1]
    local partner, ref = good_partner(r, true), reference(false)
    if partner and ref then
      local v = measure(r, partner, args)
      if v > factor * ref.value then
        h.retest = { rank = r, partner = partner, partner_host = rank_hosts[partner + 1], value = v, reference = ref.value }
        out.hosts[#out.hosts + 1] = h
      end
    end
  end
  local confirmed_host = {}
  for _, h in ipairs(out.hosts) do confirmed_host[h.host] = true end
  for _, s in ipairs(loc.ranks) do
    if not confirmed_host[rank_hosts[s.rank + 1]] then
      local partner = good_partner(s.rank, false) or good_partner(s.rank, true)
      local ref = partner and reference(rank_hosts[partner + 1] == rank_hosts[s.rank + 1])
      if partner and ref then
        local v = measure(s.rank, partner, args)
        if v > factor * ref.value then
          s.partner, s.value, s.reference = partner, v, ref.value
          out.ranks[#out.ranks + 1] = s
        end
      end
    end
  end
  for _, l in ipairs(loc.pairs) do
    if not confirmed_host[rank_hosts[l.a + 1]] and not confirmed_host[rank_hosts[l.b + 1]] then
      local ref = reference(rank_hosts[l.a + 1] == rank_hosts[l.b + 1])
      if ref then
        local v = measure(l.a, l.b, args)
        if v > link_factor * ref.value then
          l.retest, l.reference = v, ref.value
          out.links[#out.links + 1] = l
        end
      end
    end
  end
  out.suspects = { hosts = #host_sus, ranks = #loc.ranks, links = #loc.pairs }
  return out
end

return M
