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

-- The verdict's defaults (docs/lua-api.md, cs.diagnose.localise): args override each.
--   samples      re-measurements of every suspect pair and of every reference pair, interleaved
--   factor       a host is slow at max(factor, ...) (below); rank_factor for a rank (its pairs
--                with each of two partners: one rank alone, descheduled on a busy machine, looks
--                1.5x slow for seconds), link_factor for a link (the same: its two ends shown
--                good with others are what tells a link from a rank or a host; at 2 a 480 Mbit
--                link on a 1 Gbit fabric, 1.9-2.1x alone, could never be named)
--   min_samples  fewer than this (the budget ran out) and the suspect is undecided, not named,
--                unless each of its pairs was over `overwhelm` x (and 1 + 2 x margin x the CV)
--                in every one of at least 2 rounds: then those rounds decide; a rank its host's
--                re-test pointed to gets min_samples rounds past the budget
--   margin       a suspect is slow when its median ratio to the references exceeds
--                max(factor, 1 + margin x the references' CV): the references' own spread
--   max_cv       references noisier than this show nobody good (no link is named), and a run
--                that names nobody says "too noisy to localise"
--   screen       the screening's factor: hosts and ranks whose pattern median is this many
--                times the fleet's are re-tested (lower than `factor`: pairs measured many at
--                once dilute a fault that pairs measured alone show; the verdict decides);
--                screen_link the same for links (1.75: a 496 Mbit link measured 2.06x in the
--                pattern, under 2x of one end's own median, and was never re-tested)
--   min_host_partners  other hosts a host needs pairs with for a host verdict
--   max_suspects ranks and links re-tested at most (the worst first); the rest are counted
--   rescreen     more link suspects than max_suspects: the pairs over this factor in the
--                pattern (at most rescreen_per_rank x ranks of them, the worst first) are
--                measured again, many at once, in stages (rescreen()), and the max_suspects
--                slowest over all their samples are re-tested
--   references   reference pairs of each path kind measured in every round (distinct good ranks
--                where there are enough); a round's reference is their median
M.VERDICT = { samples = 5, min_samples = 3, margin = 3, max_cv = 0.75, factor = 1.5, link_factor = 1.5, rank_factor = 1.5, screen = 1.3,
              max_samples = 15, open = 1.2, overwhelm = 4, references = 4,
              screen_link = 1.75,
              min_host_partners = 3, max_suspects = 32, rescreen = 1.5, rescreen_per_rank = 32 }

local function opt(args, k) local v = args[k]; if v == nil then v = M.VERDICT[k] end; return v end

-- The robust coefficient of variation of a list: 1.4826 x MAD / median (a normal's CV; one
-- spike does not move it).
function M.robust_cv(list)
  if #list < 2 then return 0 end
  local m = median(list)
  if not m or m <= 0 then return 1e9 end
  local d = {}
  for i, x in ipairs(list) do d[i] = math.abs(x - m) end
  return 1.4826 * median(d) / m
end

-- The spread the verdict trusts: the larger of the robust CV and the plain CV with the single
-- largest value left out (one spike is tolerated; broad noise, which the MAD of a few samples
-- can miss, is not).
function M.spread(list)
  local r = M.robust_cv(list)
  local s = {}
  for i, x in ipairs(list) do s[i] = x end
  table.sort(s)
  if #s >= 4 then s[#s] = nil end
  if #s < 2 then return r end
  local sum, sq = 0, 0
  for _, x in ipairs(s) do sum = sum + x end
  local mean = sum / #s
  if mean <= 0 then return 1e9 end
  for _, x in ipairs(s) do sq = sq + (x - mean) ^ 2 end
  return math.max(r, math.sqrt(sq / (#s - 1)) / mean)
end

-- P(X >= m) for X ~ Binomial(k, 1/2): how likely m of k rounds above the threshold would be if
-- the suspect were as fast as the references (each round a coin flip at worst).
local function sign_tail(m, k)
  local p, c = 0, 1
  for i = 0, k do
    if i >= m then p = p + c end
    c = c * (k - i) / (i + 1)
  end
  return p / 2 ^ k
end

-- One number per unordered pair a < b of n ranks (a set's key).
local function pair_key(n, a, b) return a * (n + 1) + b end

-- A pair slow against both of its ends' own medians is a link suspect even when an end is a
-- rank suspect (localize leaves those out: a slow rank's pairs are slow, but not slower than
-- its others; a slow link's are, and noise that made its end a suspect must not hide it).
local function more_link_suspects(n, values, loc, link_factor)
  local fleet = loc.fleet_median
  if fleet and fleet > 0 then
    local listed = {}
    for _, l in ipairs(loc.pairs) do listed[pair_key(n, l.a, l.b)] = true end
    for _, p in ipairs(values) do
      local a, b = math.min(p[1], p[2]), math.max(p[1], p[2])
      local own = math.max(loc.scores[a + 1] or 0, loc.scores[b + 1] or 0) * fleet
      if p[3] > link_factor * fleet and p[3] > link_factor * own and not listed[pair_key(n, a, b)] then
        loc.pairs[#loc.pairs + 1] = { a = a, b = b, value = p[3], score = p[3] / fleet }
        listed[pair_key(n, a, b)] = true
      end
    end
  end
end

-- The hosts measured with fewer than min_host_partners other hosts (under-measured: no host
-- verdict on them), from the distinct other hosts each host has pairs with.
local function under_measured(values, rank_hosts, names, min_host_partners)
  local under = {}
  if #names >= 3 then
    local need = math.min(min_host_partners or M.VERDICT.min_host_partners, #names - 1)
    local seen, count = {}, {}
    for _, h in ipairs(names) do seen[h], count[h] = {}, 0 end
    for _, p in ipairs(values) do
      local ha, hb = rank_hosts[p[1] + 1], rank_hosts[p[2] + 1]
      if ha ~= hb then
        if not seen[ha][hb] then seen[ha][hb] = true; count[ha] = count[ha] + 1 end
        if not seen[hb][ha] then seen[hb][ha] = true; count[hb] = count[hb] + 1 end
      end
    end
    for _, h in ipairs(names) do
      if count[h] < need then under[#under + 1] = { host = h, partners = count[h], needed = need } end
    end
  end
  return under
end

-- Ranks sorted in place by their screening score (scores[rank + 1]), the lowest first, ties by rank.
local function best_first(ranks, scores)
  table.sort(ranks, function(x, y)
    local sx, sy = scores[x + 1] or 0, scores[y + 1] or 0
    if sx ~= sy then return sx < sy end
    return x < y
  end)
end

-- More link suspects than max_suspects: the ones narrow.run keeps of a wider list (the screened
-- links, and every other pair over narrow.floor with no end a rank suspect's nor on a suspect
-- host, at most narrow.per_rank x n, the worst first), with a pool of good ranks for references.
local function narrow_links(n, values, rank_hosts, loc, bad_host, links, narrow)
  local sus_rank, wide, listed = {}, {}, {}
  for _, r in ipairs(loc.ranks) do sus_rank[r.rank] = true end
  for i, l in ipairs(links) do wide[i] = l; listed[pair_key(n, math.min(l.a, l.b), math.max(l.a, l.b))] = true end
  local fleet = loc.fleet_median or 0
  for _, p in ipairs(values) do
    local a, b = math.min(p[1], p[2]), math.max(p[1], p[2])
    if p[3] > narrow.floor * fleet and not sus_rank[a] and not sus_rank[b] and not listed[pair_key(n, a, b)]
      and not bad_host[rank_hosts[a + 1]] and not bad_host[rank_hosts[b + 1]] then
      wide[#wide + 1] = { a = a, b = b, value = p[3], score = p[3] / fleet }
    end
  end
  table.sort(wide, function(x, y) return x.score > y.score end)
  for i = #wide, narrow.per_rank * n + 1, -1 do wide[i] = nil end
  local pool = {}  -- ranks a rescreen round's references may use: no suspect's, best first
  for r = 0, n - 1 do
    if not sus_rank[r] and not bad_host[rank_hosts[r + 1]] then pool[#pool + 1] = r end
  end
  best_first(pool, loc.scores)
  loc.rescreen = { screened = #links, candidates = #wide }
  return narrow.run(wide, pool, loc.rescreen)
end

-- suspects(n, values, rank_hosts, factor, link_factor [, min_host_partners, max_suspects,
--   narrow]) -> host_sus, loc,
--   order, bad_host, under. The screening of a pattern (no verdict yet): host suspects
--   (localize_hosts, plus every host that is one end of slow links to two or more other hosts:
--   such links are that host's evidence, not links), rank and link suspects (localize), the
--   ranks trusted as partners and references (outside every suspect, ends of suspect links
--   included), best score first, and the hosts with pairs to fewer than min_host_partners other
--   hosts (under-measured: no host verdict on them). At most max_suspects links are kept; with
--   more, narrow = { floor, per_rank, run(wide, pool, info) -> kept } chooses them from the
--   pairs over floor (localise: rescreen()), loc.rescreen its numbers.
-- force = { hosts = {h...}, ranks = {r...} }: suspects whatever the screen says (cs.evidence.force:
-- the matrix's rows and columns far off, the ranks the collectives waited for); a host only
-- with 3 hosts or more (a host verdict needs two others), else its ranks.
local function add_forced(force, host_sus, loc, rank_hosts)
  if not force then return end
  local have, nhosts, ranks_of = {}, 0, {}
  for r, h in ipairs(rank_hosts) do
    if not ranks_of[h] then ranks_of[h] = {}; nhosts = nhosts + 1 end
    table.insert(ranks_of[h], r - 1)
  end
  for _, h in ipairs(host_sus) do have[h.host] = true end
  local ranks = {}
  for _, r in ipairs(force.ranks or {}) do ranks[#ranks + 1] = r end
  for _, h in ipairs(force.hosts or {}) do
    if ranks_of[h] and nhosts < 3 then
      for _, r in ipairs(ranks_of[h]) do ranks[#ranks + 1] = r end
    elseif ranks_of[h] and not have[h] then
      host_sus[#host_sus + 1] = { host = h, ranks = ranks_of[h], score = 0, median = 0, reference = loc.fleet_median or 0,
                                  forced = true }
      have[h] = true
    end
  end
  local listed = {}
  for _, r in ipairs(loc.ranks) do listed[r.rank] = true end
  for _, r in ipairs(ranks) do
    if r >= 0 and r < #rank_hosts and not listed[r] and not have[rank_hosts[r + 1]] then
      local score = loc.scores[r + 1] or 0
      loc.ranks[#loc.ranks + 1] = { rank = r, score = score, median = score * (loc.fleet_median or 0), forced = true }
      listed[r] = true
    end
  end
end

function M.suspects(n, values, rank_hosts, factor, link_factor, min_host_partners, max_suspects, narrow, force)
  local host_sus = M.localize_hosts(values, rank_hosts, { factor = factor })
  local loc = M.localize(n, values, { factor = factor, link_factor = link_factor })
  add_forced(force, host_sus, loc, rank_hosts)
  local bad_host, bad_rank = {}, {}
  for _, h in ipairs(host_sus) do bad_host[h.host] = h; h.links = {} end
  -- a suspect host's evidence: its slowest pairs with other hosts (at most 16)
  if #host_sus > 0 then
    for _, p in ipairs(values) do
      local ha, hb = rank_hosts[p[1] + 1], rank_hosts[p[2] + 1]
      local h = ha ~= hb and (bad_host[ha] or bad_host[hb])
      if h and p[3] > factor * h.reference then h.links[#h.links + 1] = { p[1], p[2], p[3] } end
    end
    for _, h in ipairs(host_sus) do
      table.sort(h.links, function(x, y) return x[3] > y[3] end)
      for i = #h.links, 17, -1 do h.links[i] = nil end
    end
  end
  local ranks_of, names = {}, {}
  for r, h in ipairs(rank_hosts) do
    if not ranks_of[h] then ranks_of[h] = {}; names[#names + 1] = h end
    table.insert(ranks_of[h], r - 1)
  end
  more_link_suspects(n, values, loc, link_factor)
  -- slow links grouped by host: a host at one end of slow links to 2+ other hosts is the suspect
  local by_host = {}
  for _, l in ipairs(loc.pairs) do
    local ha, hb = rank_hosts[l.a + 1], rank_hosts[l.b + 1]
    if ha ~= hb then
      for _, e in ipairs { { ha, hb }, { hb, ha } } do
        local g = by_host[e[1]] or { others = {}, count = 0, links = {} }
        if not g.others[e[2]] then g.others[e[2]] = true; g.count = g.count + 1 end
        g.links[#g.links + 1] = l
        by_host[e[1]] = g
      end
    end
  end
  local inter_pairs = {}  -- host -> its measured pairs with other hosts
  if next(by_host) then
    for _, p in ipairs(values) do
      local ha, hb = rank_hosts[p[1] + 1], rank_hosts[p[2] + 1]
      if ha ~= hb then
        inter_pairs[ha] = (inter_pairs[ha] or 0) + 1
        inter_pairs[hb] = (inter_pairs[hb] or 0) + 1
      end
    end
  end
  for _, h in ipairs(names) do
    local g = by_host[h]
    -- slow with 2+ other hosts, in at least a quarter of its pairs with other hosts (noise makes a
    -- few slow pairs anywhere at scale; a slow host makes most of its pairs slow)
    if g and g.count >= 2 and 4 * #g.links >= (inter_pairs[h] or 0) and not bad_host[h] then
      local e = { host = h, ranks = ranks_of[h], score = 0, median = 0, reference = loc.fleet_median or 0, links = {},
                  from_links = true }
      for _, l in ipairs(g.links) do e.score = math.max(e.score, l.score); e.median = math.max(e.median, l.value) end
      host_sus[#host_sus + 1] = e
      bad_host[h] = e
    end
  end
  local links = {}
  for _, l in ipairs(loc.pairs) do
    local ha, hb = bad_host[rank_hosts[l.a + 1]], bad_host[rank_hosts[l.b + 1]]
    if ha or hb then
      for _, h in pairs { ha or false, hb or false } do  -- (ipairs would stop at a nil ha)
        if h then
          h.links[#h.links + 1] = { l.a, l.b, l.value }
          h.link_suspects = h.link_suspects or {}
          table.insert(h.link_suspects, l)  -- judged as links if the host is cleared
        end
      end
    else
      links[#links + 1] = l
    end
  end
  -- the links re-tested: the worst max_suspects (their ends are no one's partner or reference);
  -- with more than that and narrow (rescreen()), the ones it keeps of a wider list
  table.sort(links, function(x, y) return x.score > y.score end)
  local cap, screened = max_suspects or M.VERDICT.max_suspects, #links
  if narrow and #links > cap then links = narrow_links(n, values, rank_hosts, loc, bad_host, links, narrow) end
  loc.skipped_links = math.max(screened - cap, 0)
  if loc.rescreen then loc.skipped_links = screened - math.min(#links, cap) end
  for i = #links, cap + 1, -1 do links[i] = nil end
  loc.pairs = links
  for _, r in ipairs(loc.ranks) do bad_rank[r.rank] = true end
  for _, l in ipairs(links) do bad_rank[l.a], bad_rank[l.b] = true, true end
  local order = {}
  for r = 0, n - 1 do
    if not bad_rank[r] and not bad_host[rank_hosts[r + 1]] then order[#order + 1] = r end
  end
  best_first(order, loc.scores)
  local under = under_measured(values, rank_hosts, names, min_host_partners)
  return host_sus, loc, order, bad_host, under
end

-- Up to `count` reference pairs of good ranks (`order`, best first) on the same host or on
-- different hosts, using distinct ranks where there are enough. O(n).
local function reference_pairs(order, rank_hosts, same_host, count)
  local out, used = {}, {}
  for _ = 1, count do
    local rest = {}
    for _, r in ipairs(order) do if not used[r] then rest[#rest + 1] = r end end
    local p = M.reference_pair(rest, rank_hosts, same_host)
    if not p then break end
    local a, b = rest[p[1]], rest[p[2]]
    out[#out + 1] = { a, b }
    used[a], used[b] = true, true
  end
  if #out == 1 then  -- not enough ranks for two disjoint pairs: a second pair sharing one rank
    local a = out[1][1]
    for _, r in ipairs(order) do
      if r ~= a and r ~= out[1][2] and (rank_hosts[r + 1] == rank_hosts[a + 1]) == same_host then
        out[2] = { math.min(a, r), math.max(a, r) }
        break
      end
    end
  end
  return out
end

-- Good partners of rank r: the first of `order` on r's host (same = true), or on other hosts
-- than r's and than those in `avoid` (a set of hosts), `count` of them on distinct hosts.
local function partners(order, rank_hosts, r, same, count, avoid)
  local out, hosts = {}, {}
  local hr = rank_hosts[r + 1]
  for _, g in ipairs(order) do
    local hg = rank_hosts[g + 1]
    if g ~= r and (hg == hr) == same and not (avoid and avoid[hg]) and (same or not hosts[hg]) then
      out[#out + 1] = g
      hosts[hg] = true
      if #out >= count then break end
    end
  end
  return out
end

-- The verdict's parts (cs.diagnose.localise below): each takes the verdict's state `c` (the
-- options, rank_hosts, the measure, the trusted ranks `order`, the result `out`, `retests`).

local function kind(c, a, b) return c.rank_hosts[a + 1] == c.rank_hosts[b + 1] and "intra" or "inter" end

-- The threshold of a pair judged at factor f after n rounds. The first look (n <= samples):
-- max(f, 1 + margin x cv), cv the references' spread per sample, with all rounds but one above
-- it (all, below `samples` rounds): a verdict clear without statistics. The second look (more
-- rounds): max(f x (1 + SE), 1 + margin x SE), SE the standard error of the effect (a median
-- over n rounds against the references' median: 1.2533 x cv x sqrt(1/n + 1/(refs x n)), cv
-- robust): significantly above the references, and a standard error above f (an effect of 1.54 +- 0.1 is not shown to be
-- over 1.5: on namespace hosts such a pair was an innocent mate of a slow rank).
local function threshold(c, p, f)
  local n = #(p.ratios or {})
  if n <= c.K then return math.max(f, 1 + c.margin * (p.cv or 0)) end
  local se = 1.2533 * (p.cv or 0) * math.sqrt(1 / n + 1 / ((p.refs or 1) * n))
  return math.max(f * (1 + se), 1 + c.margin * se)
end

-- A pair's effect: its median over the references' (statistics), else its median ratio.
local function effect_of(p) return p.effect or median(p.ratios or {}) or 0 end

-- The statistics of one pair at threshold T: slow / good, and the numbers. Slow: the effect
-- above T, and in the first look all rounds but one above T (every one when the budget cut
-- them below `samples`: 2 of 3 is no evidence, and with nine suspects one innocent link at
-- 1.83x had it), in the second 60 % of the rounds slower than the references (the median's
-- test is the decision; this keeps one run of spikes from making it). Good: the effect below the
-- plain factor (not the noise-widened T: noise must not make a slow pair look good), with
-- references quiet enough to say so.
local function judge(c, p, T)
  local q = p.ratios or {}
  local above, over = 0, 0
  for _, x in ipairs(q) do
    if x > T then above = above + 1 end
    if x > 1 then over = over + 1 end
  end
  local eff = effect_of(p)
  local n = #q
  local rounds_ok = n < c.K and above == n or n == c.K and above >= n - 1 or n > c.K and over >= math.ceil(0.6 * n)
  return { slow = p.decidable and eff > T and rounds_ok,
           good = p.decidable and p.quiet and eff < c.factor,
           pair = { p[1], p[2] }, samples_us = p.samples, median_us = median(p.samples), ratio = eff,
           above = above, rounds = n, threshold = T }
end

-- A pair whose verdict more rounds could change: not slow yet, its median above `open` (a
-- fault's ratio, diluted by noise); a mate or a link's end that must be shown good, its median
-- between `open` and twice the factor.
local function open_pair(c, p)
  if not p.decidable then return false end
  local m = effect_of(p)
  if p.mate or p.is_end then return m >= c.open and m < 2 * c.factor end  -- good or not?
  return not judge(c, p, threshold(c, p, p.f or c.factor)).slow and m >= c.open
end

-- a phase's references in the report (the last phase that measured), and whether they were
-- too noisy for a verdict (reported if nobody is named)
local function record_references(c, ph)
  local out = c.out
  for k, ps in pairs(ph.refs) do
    local per, cv = ph.ref_round[k], ph.cv[k]
    if #per > 0 or not out.references[k] then
      out.references[k] = { pairs = {}, cv = cv, median_us = median(per), samples = per }
      for _, p in ipairs(ps) do table.insert(out.references[k].pairs, { a = p[1], b = p[2], samples_us = p.samples }) end
    end
    if cv > c.max_cv and (not out.noisy or cv > out.noisy.cv) then
      out.noisy = { cv = cv, kind = k, max_cv = c.max_cv, samples = #per * #ps }
    end
  end
end

-- A pair over `floor` in every one of at least k rounds.
local function every_round_over(p, k, floor)
  local q = p.ratios or {}
  if #q < k then return false end
  for _, x in ipairs(q) do if x <= floor then return false end end
  return true
end

-- A pair over its threshold (its first look's) in every round it had, at least one.
local function above_all(c, p) return every_round_over(p, 1, threshold(c, p, p.f or c.factor)) end

-- A pair over max(overwhelm, 1 + 2 x margin x cv) in every one of at least 2 rounds.
local function overwhelming(c, p)
  return every_round_over(p, 2, math.max(c.overwhelm, 1 + 2 * c.margin * (p.cv or 0)))
end

-- A phase's statistics: the references of each kind per round their median (of up to
-- `references` pairs: the faster of two would be biased low, making good pairs look slow; the
-- mean of two carries either one's spike, making slow pairs look good: on namespace hosts a
-- 383 Mbit link measured 2.4x alone came out 1.57x against the mean of two), their spread
-- (each pair's samples over its own median, pooled); each pair of the subjects `which`: its
-- ratios to its kind's references, round by round, and its effect.
local function statistics(c, ph, which)
  for k, ps in pairs(ph.refs) do
    local rounds, per, pooled = {}, {}, {}
    for _, p in ipairs(ps) do
      local m = median(p.samples)
      for r, x in ipairs(p.samples) do
        rounds[r] = rounds[r] or {}
        table.insert(rounds[r], x)
        if m and m > 0 then pooled[#pooled + 1] = x / m end
      end
    end
    for r, xs in ipairs(rounds) do per[r] = median(xs) end
    if #ps == 2 then
      -- two reference pairs: a round's median would be their mean, carrying either one's spike;
      -- each round takes the one nearer (in ratio) to the median of all their samples instead,
      -- which keeps a round that slowed both (namespace hosts, 8 x 2 ranks, two references
      -- spiking to 1.6x in 2 of 5 rounds each: a 480 Mbit link, 2.1x alone, came out 1.43x and
      -- its ends 0.63x). The median of all their samples for every round instead named a link
      -- on one loaded host where whole rounds slowed (chaos_slow --factor 1, 4 ranks).
      local all = {}
      for _, p in ipairs(ps) do for _, x in ipairs(p.samples) do all[#all + 1] = x end end
      local level = median(all)
      for r, xs in ipairs(rounds) do
        if #xs == 2 and level and level > 0 and xs[1] > 0 and xs[2] > 0 then
          per[r] = math.abs(math.log(xs[1] / level)) <= math.abs(math.log(xs[2] / level)) and xs[1] or xs[2]
        end
      end
    end
    ph.ref_round[k], ph.cv[k], ph.rcv[k] = per, M.spread(pooled), M.robust_cv(pooled)
  end
  for _, s in ipairs(which) do
    for _, p in ipairs(s.pairs) do
      local k = kind(c, p[1], p[2])
      local rr = ph.ref_round[k]
      local q = {}
      if rr then for r, x in ipairs(p.samples) do if rr[r] and rr[r] > 0 then q[#q + 1] = x / rr[r] end end end
      p.kind, p.ratios, p.ref_rounds = k, q, rr
      -- the effect: the pair's median over its kind's references' median, the same rounds (a
      -- median of per-round ratios would carry the references' spikes: their per-round mean
      -- is not robust)
      local same = {}
      if rr then for r = 1, #p.samples do same[r] = rr[r] end end
      local rm = median(same)
      p.effect = rm and rm > 0 and #q > 0 and median(p.samples) / rm or nil
      p.cv = #q > c.K and ph.rcv[k] or ph.cv[k]
      p.refs = #ph.refs[k]
      p.decidable = rr ~= nil and #q >= c.kmin
      p.quiet = ph.cv[k] <= c.max_cv
    end
    -- Cut by the budget before min_samples, a suspect whose every pair was over `overwhelm`
    -- (and 1 + 2 x margin x cv) in each of at least 2 rounds is decided on those rounds, its
    -- mate and ends with it: a 12x slow rank is not left "undecided" (namespace hosts, a rank at
    -- 68 Mbit: the sweep and pattern it slowed had spent the budget).
    local strong, any = true, false
    for _, p in ipairs(s.pairs) do
      if not (p.mate or p.is_end) then
        any = true
        strong = strong and overwhelming(c, p)
      end
    end
    if any and strong then
      for _, p in ipairs(s.pairs) do
        if not p.decidable and #p.ratios >= 2 then p.decidable, p.early = true, true end
      end
    end
  end
end

-- The references spread evenly through a round's pairs, not all at its start: where a pair
-- stands in a round can matter on a loaded host, and the rounds' rotation by 3 kept adjacent
-- references together near one end of the round for most rounds (namespace hosts, 8 x 2
-- ranks: a slow link's own ends measured 0.64-0.75x the references, and the link 1.55x
-- instead of about 2).
local function interleave(refs, subjects)
  local out, nr, ns = {}, #refs, #subjects
  local j = 1
  for i, r in ipairs(refs) do
    out[#out + 1] = r
    for _ = j, math.floor(i * ns / nr) do out[#out + 1] = subjects[j]; j = j + 1 end
  end
  for k = j, ns do out[#out + 1] = subjects[k] end
  return out
end

-- One round of a phase over `list` (the order rotating: no pair always first); false when the
-- budget is spent.
local function round(c, ph, list, forced)
  local batch, idx = {}, {}
  for i = 1, #list do
    local j = (i - 1 + ph.rounds * 3) % #list + 1
    batch[i], idx[i] = { list[j][1], list[j][2] }, j
  end
  local v = c.measure(batch, forced)
  if not v then c.retests.cut = true; return false end
  for i, j in ipairs(idx) do table.insert(list[j].samples, v[i]) end
  c.retests.run = c.retests.run + #batch
  ph.rounds = ph.rounds + 1
  return true
end

-- One phase: subjects (each with pairs {a, b}, each pair's factor f), references for the kinds
-- they need, `samples` interleaved rounds; then the subjects still open get up to max_samples
-- rounds in all, with the references, and one more look (two looks in all: a verdict re-judged
-- after every round would sooner or later find noise above any threshold). Leaves on each
-- subject pair its ratio statistics.
local function run_phase(c, subjects, must)
  if #subjects == 0 then return end
  local ph = { refs = {}, ref_round = {}, cv = {}, rcv = {}, rounds = 0 }
  local kinds, refl, all = {}, {}, {}
  for _, s in ipairs(subjects) do for _, p in ipairs(s.pairs) do kinds[kind(c, p[1], p[2])] = true end end
  for _, k in ipairs { "inter", "intra" } do
    if kinds[k] then
      ph.refs[k] = reference_pairs(c.order, c.rank_hosts, k == "intra", c.references)
      for _, p in ipairs(ph.refs[k]) do p.ref = k; refl[#refl + 1] = p end
    end
  end
  local subj = {}
  for _, s in ipairs(subjects) do for _, p in ipairs(s.pairs) do subj[#subj + 1] = p end end
  all = interleave(refl, subj)
  for _, p in ipairs(all) do p.samples = {} end
  c.retests.planned = c.retests.planned + c.K * #all
  local forced = must == true and c.kmin or tonumber(must) or 0
  for k = 1, c.K do
    if not round(c, ph, all, k <= forced) then break end
  end
  statistics(c, ph, subjects)
  local active, list = {}, {}
  if ph.rounds == c.K then
    for _, s in ipairs(subjects) do
      local o, slow, lagging = false, false, false
      for _, p in ipairs(s.pairs) do
        o = o or open_pair(c, p)
        if not (p.mate or p.is_end) and p.decidable then
          if judge(c, p, threshold(c, p, p.f or c.factor)).slow then slow = true
          elseif effect_of(p) >= 1 then lagging = true end
        end
      end
      -- a rank split: one of its pairs slow, another slower than the references but not yet slow
      -- (below `open`): more rounds decide it (1024 ranks in the model: a 2x rank's second pair
      -- came out 1.198x in 5 rounds beside 2.4x, and was left at that). A host split is an
      -- answer (a rank of it, not the host), not a reason for more rounds.
      if o or (slow and lagging and s.what == "rank") then active[#active + 1] = s end
    end
  end
  if #active > 0 then
    local more = {}
    for _, s in ipairs(active) do for _, p in ipairs(s.pairs) do more[#more + 1] = p end end
    list = interleave(refl, more)
    c.retests.extended = (c.retests.extended or 0) + #active
    for _ = c.K + 1, c.max_samples do
      c.retests.planned = c.retests.planned + #list
      if not round(c, ph, list, false) then break end
    end
    statistics(c, ph, active)  -- the others keep the statistics of their own rounds
  end
  c.retests.rounds = c.retests.rounds + ph.rounds
  record_references(c, ph)
end

-- A suspect's verdict on its entry (pairs, threshold, margin, rounds, confidence), and in short
-- in out.tested, named or not (report.json's localisation.tested: why someone was not named).
local function verdict(c, entry, judged, T, extra)
  local above, total = 0, 0
  for _, j in ipairs(judged) do above, total = above + j.above, total + j.rounds end
  entry.verdict = { pairs = judged, threshold = T, margin = c.margin, reference_cv = judged[1] and judged[1].cv,
                    rounds = judged[1] and judged[1].rounds or 0,
                    confidence = 1 - sign_tail(above, total) }
  local short = { host = entry.host, rank = entry.rank, pair = entry.a and { entry.a, entry.b } or nil,
                  threshold = T, pairs = {} }
  local function add(j, shown)
    table.insert(short.pairs, { a = j.pair[1], b = j.pair[2], ratio = j.ratio, above = j.above, rounds = j.rounds, median_us = j.median_us,
                                slow = j.slow or false, good = j.good or false, shown_good = shown })
  end
  for _, j in ipairs(judged) do add(j, nil) end
  for _, j in ipairs(extra or {}) do add(j, true) end
  c.out.tested[#c.out.tested + 1] = short
end

local function undecided(c, what)
  what.why = what.why or (c.retests.cut and "budget" or "noise")
  c.out.undecided[#c.out.undecided + 1] = what
end

-- 1. hosts: every suspect host against good ranks on two other hosts (its ranks in turn)
local function host_tests(c, host_sus)
  local tests = {}
  for _, h in ipairs(host_sus) do
    local ps = {}
    local others = partners(c.order, c.rank_hosts, h.ranks[1], false, 2, c.bad_host)
    for i, g in ipairs(others) do
      local r = h.ranks[(i - 1) % #h.ranks + 1]
      ps[#ps + 1] = { math.min(r, g), math.max(r, g), f = c.factor }
    end
    if #ps > 0 then tests[#tests + 1] = { entry = h, pairs = ps } else undecided(c, { host = h.host, why = "no good partner" }) end
  end
  return tests
end

-- The retest summary of a named host (or of a host named from its ranks): its partners' hosts
local function partner_hosts(c, retest)
  local ph = {}
  for _, g in ipairs(retest.partners) do ph[#ph + 1] = c.rank_hosts[g + 1] end
  retest.partner_host = table.concat(ph, " and ")
end

-- A host named when every one of its pairs is slow; a host whose one rank is slow while
-- another is shown good makes that rank a suspect of phase 2 (one pair is not a rank verdict:
-- a rank descheduled for a few rounds on an oversubscribed machine looks like that). Returns
-- the set of named hosts.
local function judge_hosts(c, tests, loc)
  local named = {}
  for _, t in ipairs(tests) do
    local judged, all_slow, decidable = {}, true, true
    local T = threshold(c, t.pairs[1], c.factor)
    for _, p in ipairs(t.pairs) do
      local j = judge(c, p, T)
      j.cv = p.cv
      judged[#judged + 1] = j
      all_slow = all_slow and j.slow
      decidable = decidable and p.decidable
    end
    local h = t.entry
    local function rank_of(j, mine)  -- the pair's rank on h (mine) or its partner
      local on_h = c.bad_host[c.rank_hosts[j.pair[1] + 1]] == h
      if mine then return on_h and j.pair[1] or j.pair[2] end
      return on_h and j.pair[2] or j.pair[1]
    end
    verdict(c, h, judged, T)
    if all_slow then
      local v = judged[1]
      h.retest = { rank = v.pair[1], partners = {}, partner_host = nil, value = v.median_us,
                   reference = c.out.references.inter and c.out.references.inter.median_us }
      for _, j in ipairs(judged) do h.retest.partners[#h.retest.partners + 1] = rank_of(j, false) end
      partner_hosts(c, h.retest)
      c.out.hosts[#c.out.hosts + 1] = h
      named[h.host] = true
    else
      local slow, good, strong, good_ratio = {}, 0, false, nil
      for i, j in ipairs(judged) do
        if j.slow then
          slow[#slow + 1] = rank_of(j, true)
          strong = overwhelming(c, t.pairs[i])
        elseif j.good then
          good, good_ratio = good + 1, math.min(good_ratio or j.ratio, j.ratio)
        end
      end
      if #slow == 1 and good >= 1 and #h.ranks >= 2 then
        local e
        for _, s in ipairs(loc.ranks) do if s.rank == slow[1] then e = s end end
        if not e then
          e = { rank = slow[1], score = h.score, median = h.median }
          table.insert(loc.ranks, 1, e)  -- measured evidence: before the screening's suspects
        end
        e.from_host_test = h.host
        e.host_mate_ratio = good_ratio  -- its host's other ranks shown good there, at this ratio
        e.overwhelming = strong or nil
      elseif not decidable then
        undecided(c, { host = h.host })
      end
    end
  end
  return named
end

-- A suspect host not named is cleared: its ranks (other than suspects) become partners, the
-- least trusted, its suspect ranks are judged as ranks (one slow rank can make its host look
-- slow on the screening) and its slow links return as link suspects (not those its re-test
-- showed good).
local function clear_hosts(c, host_sus, loc, named_host, htests)
  local suspect_rank = {}
  for _, s in ipairs(loc.ranks) do suspect_rank[s.rank] = true end
  for _, l in ipairs(loc.pairs) do suspect_rank[l.a], suspect_rank[l.b] = true, true end
  local returned, seen_link, n = {}, {}, #c.rank_hosts
  -- the pairs the host re-tests showed good: no link suspects (their ends stay partners)
  local good_pair = {}
  for _, t in ipairs(htests) do
    for _, p in ipairs(t.pairs) do
      if judge(c, p, threshold(c, p, c.factor)).good then
        good_pair[pair_key(n, p[1], p[2])] = true
      end
    end
  end
  local function add(l, h)
    local ba, bb = c.bad_host[c.rank_hosts[l.a + 1]], c.bad_host[c.rank_hosts[l.b + 1]]
    local other = ba ~= h and ba or bb ~= h and bb
    local key = pair_key(n, l.a, l.b)
    if not seen_link[key] and not good_pair[key] and not (other and named_host[other.host]) then
      seen_link[key] = true
      returned[#returned + 1] = l
      suspect_rank[l.a], suspect_rank[l.b] = true, true
      return true
    end
  end
  for _, l in ipairs(loc.pairs) do seen_link[pair_key(n, l.a, l.b)] = true end
  for _, h in ipairs(host_sus) do
    if not named_host[h.host] then
      for _, l in ipairs(h.link_suspects or {}) do add(l, h) end
      -- its slowest evidence pairs over screen_link x the fleet (at most 2), but none of a rank
      -- its re-test pointed to (that rank explains them): a host slow only towards another
      -- host is a slow link between them (namespace hosts: a 480 Mbit link made its end's ranks
      -- rank suspects, so its pairs were no link suspects, and the host, good with the others,
      -- was cleared)
      local fleet, added, pointed = loc.fleet_median or 0, 0, {}
      for _, r in ipairs(loc.ranks) do if r.from_host_test == h.host then pointed[r.rank] = true end end
      for _, e in ipairs(h.links or {}) do
        if added >= 2 or not (fleet > 0 and e[3] > c.screen_link * fleet) then break end
        local a, b = math.min(e[1], e[2]), math.max(e[1], e[2])
        if not (pointed[a] or pointed[b]) and add({ a = a, b = b, value = e[3], score = e[3] / fleet }, h) then added = added + 1 end
      end
    end
  end
  for _, h in ipairs(host_sus) do
    if not named_host[h.host] then
      c.bad_host[h.host] = nil
      for _, r in ipairs(h.ranks) do if not suspect_rank[r] then c.order[#c.order + 1] = r end end
    end
  end
  if #returned > 0 then  -- their ends are no one's partner
    local kept = {}
    for _, r in ipairs(c.order) do if not suspect_rank[r] then kept[#kept + 1] = r end end
    c.order = kept
    for _, l in ipairs(returned) do loc.pairs[#loc.pairs + 1] = l end
    table.sort(loc.pairs, function(x, y) return x.score > y.score end)
  end
end

-- A rank's re-test: against good ranks on two other hosts, and a mate (a good rank of its host)
-- against a third: a rank slow with both partners beside a good mate is the rank, not its host
-- nor a link; with one other host, against one partner; on a single host, against two of its host.
local function rank_test(c, s)
  local r, rh = s.rank, c.rank_hosts
  local ps, mate = {}, nil
  local function pair(x, y, f) return { math.min(x, y), math.max(x, y), f = f } end
  local others = partners(c.order, rh, r, false, 3, nil)
  for _, g in ipairs(c.order) do
    if g ~= r and rh[g + 1] == rh[r + 1] then mate = g; break end
  end
  if #others >= 1 then
    ps[1] = pair(r, others[1], c.rank_factor)
    if others[2] then ps[2] = pair(r, others[2], c.rank_factor) end
    if mate then
      ps[#ps + 1] = pair(mate, others[3] or others[2] or others[1])
      ps[#ps].mate = true
    end
  else
    for _, g in ipairs(partners(c.order, rh, r, true, 2, nil)) do ps[#ps + 1] = pair(r, g, c.rank_factor) end
  end
  if #ps > 0 then return { entry = s, what = "rank", pairs = ps, same_host = #others == 0 } end
end

-- A link's re-test: the link, and each end against a good rank placed as the other end was
-- (same host or not), away from the other end's host. nil: no good partner for an end.
local function link_test(c, l)
  local a, b, rh = l.a, l.b, c.rank_hosts
  local same = rh[a + 1] == rh[b + 1]
  local ga = partners(c.order, rh, a, same, 1, not same and { [rh[b + 1]] = true } or nil)[1]
  local gb = partners(c.order, rh, b, same, 1, not same and { [rh[a + 1]] = true } or nil)[1]
  if not (ga and gb) then return nil end
  return { entry = l, what = "link",
           pairs = { { math.min(a, b), math.max(a, b), f = c.link_factor },
                     { math.min(a, ga), math.max(a, ga), is_end = true },
                     { math.min(b, gb), math.max(b, gb), is_end = true } } }
end

-- 2. ranks and links outside the named hosts, the worst first, at most max_suspects each.
local function rank_link_tests(c, loc, named_host)
  local tests, skipped, nlinks = {}, loc.skipped_links, 0
  for _, s in ipairs(loc.ranks) do
    if not named_host[c.rank_hosts[s.rank + 1]] then
      if #tests >= c.cap then skipped = skipped + 1 else tests[#tests + 1] = rank_test(c, s) end
    end
  end
  for _, l in ipairs(loc.pairs) do
    if nlinks >= c.cap then skipped = skipped + 1 else
      local t = link_test(c, l)
      if t then nlinks = nlinks + 1; tests[#tests + 1] = t
      else undecided(c, { pair = { l.a, l.b }, why = "no good partner for its ends" }) end
    end
  end
  c.out.suspects.skipped = skipped
  return tests
end

-- A rank named when slow with each partner and its mate shown good; or, for a rank its host's
-- re-test pointed to (its mate good there), its mate's pair at most 1/MATE_FAR of each of its
-- own: no host makes one rank 12x slow and the other 1.6x (namespace hosts: a rank at 68 Mbit
-- was left "the rank or its host" beside a mate at 1.62x, 3 rounds the budget allowed). Without
-- a mate in its re-test (none left: an end of a link suspect), its host's re-test's good mate
-- counts (verdict.host_mate, for group_ranks) when every pair of the rank is at least MATE_FAR
-- x the mate's, or HOST_MATE_FAR x when the mate measured below `open` (namespace hosts, 4 x 2
-- ranks: a rank at 2.65-2.95x beside a mate at 1.03x was left "the rank or its host"; a weak
-- tbf on a host made its ranks 3x and 1.45x, "good" but not clearly: that is no slow rank).
local MATE_FAR = 3
local HOST_MATE_FAR = 2

-- A rank slow by its pairs together, in the second look: every pair's effect above the plain
-- factor, and the effect over all its pairs' samples (their median over the references') above
-- the threshold of that many samples (its SE: 1.2533 x cv x sqrt(1/(pairs x n) + 1/(refs x n)))
-- with 60 % of them slower than the references. A slow rank makes each of its pairs slow by the
-- same factor, so their samples estimate one effect (the scale model, CV 0.35 with 10 % spikes:
-- a 2.2x rank at 2.34x with one partner and 1.71x with the other against 1.75, not named).
local function pooled_slow(c, t, judged)
  local ps, samples, refs, kinds = {}, {}, nil, {}
  for _, p in ipairs(t.pairs) do if not p.mate then ps[#ps + 1] = p; kinds[p.kind or ""] = true end end
  if #ps < 2 or #judged ~= #ps then return false end
  local n = #(ps[1].ratios or {})
  local k1 = next(kinds)
  if next(kinds, k1) or n <= c.K then return false end  -- one path kind, second look only
  local q, over = {}, 0
  for i, p in ipairs(ps) do
    if not p.decidable or #(p.ratios or {}) ~= n or judged[i].ratio <= c.rank_factor then return false end
    for _, x in ipairs(p.samples) do samples[#samples + 1] = x end
    for _, x in ipairs(p.ratios) do q[#q + 1] = x; if x > 1 then over = over + 1 end end
    refs = p.refs
  end
  local same = {}
  local rr = ps[1].ref_rounds
  if not rr then return false end
  for r = 1, n do same[r] = rr[r] end
  local rm = median(same)
  if not (rm and rm > 0) then return false end
  local eff = median(samples) / rm
  local se = 1.2533 * (ps[1].cv or 0) * math.sqrt(1 / (#ps * n) + 1 / ((refs or 1) * n))
  local T = math.max(c.rank_factor * (1 + se), 1 + c.margin * se)
  t.pooled = { effect = eff, threshold = T, samples = #q }
  return eff > T and over >= math.ceil(0.6 * #q)
end
local function judge_rank(c, t)
  local e = t.entry
  local T = threshold(c, t.pairs[1], c.rank_factor)
  local judged, all_slow, all_good, decidable, mate = {}, true, true, true, nil
  for _, p in ipairs(t.pairs) do
    local j = judge(c, p, threshold(c, p, p.mate and c.factor or c.rank_factor))
    j.cv = p.cv
    decidable = decidable and p.decidable
    if p.mate then mate = j else
      judged[#judged + 1] = j
      all_slow = all_slow and j.slow
      all_good = all_good and j.good
    end
  end
  t.cleared = all_good and #judged > 0 or nil  -- good with every partner: its slow pairs were links
  if not all_slow then all_slow = pooled_slow(c, t, judged) end
  local function far(x, k)  -- every pair of the rank at least k x
    if not (e.from_host_test and x and x > 0) then return false end
    for _, j in ipairs(judged) do if j.ratio < k * x then return false end end
    return true
  end
  if mate and not mate.good then all_slow = all_slow and far(mate.ratio, MATE_FAR) end  -- shown good, or far less slow
  verdict(c, e, judged, T, { mate })
  e.verdict.mate = mate
  e.verdict.pooled = t.pooled  -- pooled_slow's numbers, where it judged them (second look)
  e.verdict.from_host_test = e.from_host_test
  local hm = e.host_mate_ratio
  e.verdict.host_mate = not mate and (far(hm, MATE_FAR) or hm and hm < c.open and far(hm, HOST_MATE_FAR)) or nil
  e.verdict.same_host = t.same_host or nil  -- its partners on its own host: not its host's fault
  if all_slow then
    local j = judged[1]
    e.partner = j.pair[1] == e.rank and j.pair[2] or j.pair[1]
    e.partners, e.values = {}, {}
    for i, x in ipairs(judged) do
      e.partners[i], e.values[i] = x.pair[1] == e.rank and x.pair[2] or x.pair[1], x.median_us
    end
    e.value = j.median_us
    local ref = c.out.references[t.pairs[1].kind]
    e.reference = ref and ref.median_us
    c.out.ranks[#c.out.ranks + 1] = e
  elseif not decidable then
    undecided(c, { rank = e.rank })
  end
end

-- Whether an end's own rank re-test came out slow with a partner other than the link's other end
-- (`not_good`: rank -> its slow partners): a slow rank is not its links.
local function blocked(not_good, r, other)
  for x in pairs(not_good[r] or {}) do if x ~= other then return true end end
  return false
end

-- A link named when slow (at link_factor) while both ends are shown good with others by the
-- same rounds, and neither end's own rank re-test came out slow with anyone else (`not_good`).
local function judge_link(c, t, not_good)
  local e = t.entry
  local link = judge(c, t.pairs[1], threshold(c, t.pairs[1], c.link_factor))
  link.cv = t.pairs[1].cv
  local ea = judge(c, t.pairs[2], threshold(c, t.pairs[2], c.factor))
  local eb = judge(c, t.pairs[3], threshold(c, t.pairs[3], c.factor))
  ea.cv, eb.cv = t.pairs[2].cv, t.pairs[3].cv
  verdict(c, e, { link }, link.threshold, { ea, eb })
  e.verdict.ends = { ea, eb }
  if link.slow and ea.good and eb.good and not blocked(not_good, e.a, e.b) and not blocked(not_good, e.b, e.a) then
    e.retest = link.median_us
    local ref = c.out.references[t.pairs[1].kind]
    e.reference = ref and ref.median_us
    c.out.links[#c.out.links + 1] = e
  elseif not (t.pairs[1].decidable and t.pairs[2].decidable and t.pairs[3].decidable) then
    undecided(c, { pair = { e.a, e.b } })
  end
end

-- Ranks whose own re-test (against other ranks) came out at the factor or above: rank -> the
-- partners it was slow with. No same round shows such a rank good.
local function slow_partners(c, tests)
  local out = {}
  for _, t in ipairs(tests) do
    if t.what == "rank" then
      local r = t.entry.rank
      for _, p in ipairs(t.pairs) do
        if not p.mate and effect_of(p) >= c.factor then
          out[r] = out[r] or {}
          out[r][p[1] == r and p[2] or p[1]] = true
        end
      end
    end
  end
  return out
end

-- Links a re-test pointed to: a pair a host or rank re-test measured slow while that host or
-- rank was not named (its other pair good) and neither end is named (at most 2, not already a
-- link suspect). A rank slow with one partner and good with another is neither a slow rank nor
-- nothing: on namespace hosts a 383 Mbit link between hosts 3 and 5 came out as host 5's pair
-- with a rank of host 3, and a 480 Mbit one as rank 13's pair with its partner on the far host.
local function pointed_links(c, htests, tests)
  local named, seen, out, n = {}, {}, {}, #c.rank_hosts
  for _, r in ipairs(c.out.ranks) do named[r.rank] = true end
  for _, h in ipairs(c.out.hosts) do for _, r in ipairs(h.ranks) do named[r] = true end end
  for _, t in ipairs(tests) do if t.what == "link" then seen[pair_key(n, t.entry.a, t.entry.b)] = true end end
  local function consider(p, f)
    if #out >= 2 or p.mate or p.is_end or not p.decidable or named[p[1]] or named[p[2]] then return end
    local a, b = math.min(p[1], p[2]), math.max(p[1], p[2])
    if seen[pair_key(n, a, b)] or not judge(c, p, threshold(c, p, f)).slow then return end
    seen[pair_key(n, a, b)] = true
    local t = link_test(c, { a = a, b = b, value = median(p.samples), score = p.effect, pointed = true })
    if t then out[#out + 1] = t end
  end
  for _, t in ipairs(htests) do for _, p in ipairs(t.pairs) do consider(p, c.factor) end end
  for _, t in ipairs(tests) do
    if t.what == "rank" then for _, p in ipairs(t.pairs) do consider(p, c.rank_factor) end end
  end
  return out
end

-- A rank suspect its re-test cleared (good with every partner) was a suspect because of some of
-- its pattern pairs: its slowest over screen_link x the fleet (at most 2, none of a named
-- rank or host, none already re-tested as a link) are re-tested as links (namespace hosts, 8 x 2
-- ranks, one pair per host pair: a 480 Mbit link, 2.04x in the pattern, made its end a rank
-- suspect, so it was no link suspect; the rank was cleared and the link never re-tested).
local function cleared_rank_links(c, tests, already)
  local fleet = c.loc.fleet_median or 0
  local cleared, named, seen, n = {}, {}, {}, #c.rank_hosts
  for _, t in ipairs(tests) do if t.what == "rank" and t.cleared then cleared[t.entry.rank] = true end end
  if not next(cleared) or fleet <= 0 then return {} end
  for _, r in ipairs(c.out.ranks) do named[r.rank] = true end
  for _, h in ipairs(c.out.hosts) do for _, r in ipairs(h.ranks) do named[r] = true end end
  for _, t in ipairs(tests) do if t.what == "link" then seen[pair_key(n, t.entry.a, t.entry.b)] = true end end
  for _, t in ipairs(already) do seen[pair_key(n, t.entry.a, t.entry.b)] = true end
  local cands = {}
  for _, p in ipairs(c.values) do
    local a, b = math.min(p[1], p[2]), math.max(p[1], p[2])
    if (cleared[a] or cleared[b]) and p[3] > c.screen_link * fleet and not named[a] and not named[b]
      and not seen[pair_key(n, a, b)] then
      cands[#cands + 1] = { a = a, b = b, value = p[3], score = p[3] / fleet, pointed = true }
    end
  end
  table.sort(cands, function(x, y) return x.score > y.score end)
  local out = {}
  for _, l in ipairs(cands) do
    if #out >= 2 then break end
    local t = link_test(c, l)
    if t then out[#out + 1] = t; seen[pair_key(n, l.a, l.b)] = true end
  end
  return out
end

local function count_ranks(rank_hosts, h)
  local k = 0
  for _, x in ipairs(rank_hosts) do if x == h then k = k + 1 end end
  return k
end

-- Two or more ranks of one host slow each: the host is (one finding, the ranks its evidence). A
-- rank slow alone is named only beside a good rank of its host (in its own re-test, or, far
-- less slow than it, in its host's, which pointed to it), or alone on its host, or slow with
-- partners of its own host (then its host is no explanation).
local function group_ranks(c, loc)
  local out, rh = c.out, c.rank_hosts
  local by_host, kept = {}, {}
  for _, r in ipairs(out.ranks) do
    local h = rh[r.rank + 1]
    by_host[h] = by_host[h] or {}
    table.insert(by_host[h], r)
  end
  for _, r in ipairs(out.ranks) do
    local h = rh[r.rank + 1]
    local group = by_host[h]
    local alone = #group < 2
    if alone and not (r.verdict.mate or r.verdict.host_mate or r.verdict.same_host) and count_ranks(rh, h) > 1 then
      -- no rank of its host shown good beside it: the rank or its host, the re-tests cannot say
      undecided(c, { rank = r.rank, either = h, why = "no good rank of its host beside it: the rank or its host" })
    elseif alone then kept[#kept + 1] = r elseif group[1] == r then
      local ranks = {}
      for q, x in ipairs(rh) do if x == h then ranks[#ranks + 1] = q - 1 end end
      local worst = group[1]
      local e = { host = h, ranks = ranks, score = worst.score, median = worst.median,
                  reference = loc.fleet_median or 0, from_ranks = true, links = {},
                  retest = { rank = worst.rank, partners = {}, partner_host = "", value = worst.value,
                             reference = worst.reference },
                  verdict = { ranks = group, threshold = worst.verdict.threshold, margin = c.margin,
                              confidence = worst.verdict.confidence, rounds = worst.verdict.rounds } }
      for _, x in ipairs(group) do
        e.verdict.confidence = math.min(e.verdict.confidence, x.verdict.confidence)
        table.insert(e.retest.partners, x.partner)
      end
      partner_hosts(c, e.retest)
      out.hosts[#out.hosts + 1] = e
    end
  end
  out.ranks = kept
end

-- Rounds of disjoint pairs ({a, b} entries) covering `list`, first fit, in list order.
local function disjoint_rounds(list)
  local rounds, busy = {}, {}
  for _, p in ipairs(list) do
    local r = 1
    while busy[r] and (busy[r][p.a] or busy[r][p.b]) do r = r + 1 end
    if not busy[r] then busy[r], rounds[r] = {}, {} end
    busy[r][p.a], busy[r][p.b] = true, true
    table.insert(rounds[r], p)
  end
  return rounds, busy
end

-- Up to `count` reference pairs of each kind in `kinds` from the ranks of `pool` (best first)
-- that `busy` (a round's ranks) leaves free.
local function free_references(c, pool, busy, kinds, count)
  local out, used = {}, {}
  for k in pairs(kinds) do
    for _ = 1, count do
      local a, b
      for _, r in ipairs(pool) do
        if not busy[r] and not used[r] then
          if not a then a = r
          elseif (c.rank_hosts[r + 1] == c.rank_hosts[a + 1]) == (k == "intra") then b = r; break end
        end
      end
      if not b then break end
      used[a], used[b] = true, true
      out[#out + 1] = { a = math.min(a, b), b = math.max(a, b), ref = k }
    end
  end
  return out
end

-- The rescreen: more link suspects than max_suspects (at scale, noise alone makes thousands:
-- 1024 ranks, CV 0.35, a tenth of the samples spiking 2.5x, about 10,000 pairs over 1.75x in one
-- pattern), so one pattern sample cannot rank a 2-3x link among them: the model's such links
-- were below the 32 re-tested in 3 of 8 seeds. `wide` (the pairs over `rescreen`, the worst
-- first) is measured again in stages, each stage's pairs many at once in rounds of disjoint
-- pairs (measure(batch, false, true)) with up to two reference pairs of good free ranks in each
-- round: 2 samples each in the first stage, 4 in the later ones, keeping the slowest
-- sixteenth (at least max_suspects) by the mean log ratio over all of a pair's samples (the
-- pattern's to the fleet median, a stage's to the median of its references of the same path
-- kind), until max_suspects are left. A budget cut keeps the ranking so far. Noise that
-- made a good pair slow once rarely does so again; a slow link stays slow. Returns the kept
-- pairs, the slowest first (score: their mean ratio), and fills `info` (stages, cut).
local function rescreen(c, wide, pool, info)
  for _, p in ipairs(wide) do p.lsum, p.k, p.pattern_score = math.log(math.max(p.score, 1e-9)), 1, p.score end
  local function rank(list) table.sort(list, function(x, y) return x.lsum / x.k > y.lsum / y.k end) end
  info.stages = {}
  local list = wide
  while #list > c.cap do
    local reps = #info.stages == 0 and 2 or 4
    local rounds, busy = disjoint_rounds(list)
    local kinds = {}
    for _, p in ipairs(list) do p.kind = kind(c, p.a, p.b); kinds[p.kind] = true end
    local st = { pairs = #list, rounds = #rounds * reps, samples = reps, references = 0 }
    info.stages[#info.stages + 1] = st
    local cut = false
    for _ = 1, reps do
      local refs, got = {}, {}
      for i, r in ipairs(rounds) do
        local batch, entries = {}, {}
        for _, p in ipairs(r) do entries[#entries + 1] = p end
        for _, q in ipairs(free_references(c, pool, busy[i], kinds, 2)) do entries[#entries + 1] = q end
        for j, p in ipairs(entries) do batch[j] = { p.a, p.b } end
        local v = c.measure(batch, false, true)
        if not v then cut = true; break end
        c.retests.rescreened = (c.retests.rescreened or 0) + #batch
        for j, p in ipairs(entries) do
          if p.ref then refs[p.ref] = refs[p.ref] or {}; table.insert(refs[p.ref], v[j]); st.references = st.references + 1
          elseif v[j] and v[j] > 0 then got[#got + 1] = { p, v[j] } end
        end
      end
      -- each pass's samples over its references' median (without references of a kind: the
      -- median of the pass's own samples of it, nearly all of good pairs)
      local norm, own = {}, {}
      for _, g in ipairs(got) do own[g[1].kind] = own[g[1].kind] or {}; table.insert(own[g[1].kind], g[2]) end
      for k in pairs(kinds) do norm[k] = median(refs[k] or {}) or median(own[k] or {}) end
      for _, g in ipairs(got) do
        local m = norm[g[1].kind]
        if m and m > 0 then g[1].lsum, g[1].k = g[1].lsum + math.log(g[2] / m), g[1].k + 1 end
      end
      if cut then break end
    end
    rank(list)
    if cut then info.cut = true; break end
    local keep = math.max(c.cap, math.ceil(#list / 16))
    local next_list = {}
    for i = 1, math.min(keep, #list) do next_list[i] = list[i] end
    list = next_list
  end
  rank(list)
  for _, p in ipairs(list) do p.score, p.samples_rescreen = math.exp(p.lsum / p.k), p.k - 1 end
  info.kept = math.min(#list, c.cap)
  return list
end

-- localise(values, rank_hosts, args, measure) -> { hosts, ranks, links, suspects, retests,
--   references, under_measured, noisy, undecided }: the one localisation (cs.p2p.localise runs
--   it on rank 0 with a collective measure; scripts/scale_model.lua with a model).
-- values: the pattern's pairs {a, b, us}, larger is worse. rank_hosts: per rank (1-based) its host.
-- measure(batch, must) -> list of us, one per pair {a, b} of batch (each pair measured alone, in
--   order), or nil when the budget is spent (must: the first min_samples rounds of the host
--   verdicts, which run regardless). Called O(samples) times per phase. measure(batch, false,
--   true): the rescreen's round, disjoint pairs measured at once.
-- The screening (suspects()) says whom to re-test; the verdict is a statistical decision:
--   1. hosts first: every suspect host's ranks against good ranks on two other hosts, and
--      reference pairs of good ranks across hosts, re-measured `samples` times, interleaved
--      (each round measures every pair once, the order rotating). A host is named when every
--      one of its pairs is slow (below); its slow links are its evidence, not findings.
--   2. then ranks and links outside the named hosts: a rank against a good rank on its own host
--      and one on another; a link (a, b) together with a against a good rank where b was, and b
--      likewise. A rank is named when slow with each partner; a link when it is slow (at
--      link_factor) while both of its ends are shown good with others by the same rounds.
--   Slow: the median over rounds of (pair / references of the same kind in that round) exceeds
--   T = max(factor, 1 + margin x cv) with cv the references' robust CV, in all rounds but at
--   most one (in all of them when the budget cut them below `samples`). Good: that median below
--   T and at most half the rounds above it, with references
--   no noisier than max_cv. The finding carries the samples, medians, cv, T, the margin and a
--   confidence (1 - the sign test's p-value). References with cv above max_cv: nothing is shown
--   good (no link named); when nobody is named, `noisy` says the run was too noisy to localise.
function M.localise(values, rank_hosts, args, measure)
  local c = { rank_hosts = rank_hosts, measure = measure, retests = { planned = 0, run = 0, cut = false, rounds = 0 } }
  for _, k in ipairs { "factor", "link_factor", "rank_factor", "margin", "max_cv", "max_samples", "open", "overwhelm", "references" } do
    c[k] = opt(args, k)
  end
  c.K, c.kmin, c.cap, c.screen_link = opt(args, "samples"), opt(args, "min_samples"), opt(args, "max_suspects"), opt(args, "screen_link")
  local narrow = measure and { floor = opt(args, "rescreen"), per_rank = opt(args, "rescreen_per_rank"),
                               run = function(wide, pool, info) return rescreen(c, wide, pool, info) end } or nil
  local host_sus, loc, order, bad_host, under = M.suspects(#rank_hosts, values, rank_hosts, opt(args, "screen"), opt(args, "screen_link"),
    opt(args, "min_host_partners"), c.cap, narrow, args.force)
  c.order, c.bad_host, c.loc, c.values = order, bad_host, loc, values
  local out = { hosts = {}, ranks = {}, links = {}, references = {}, undecided = {}, under_measured = under, tested = {},
                suspects = { hosts = #host_sus, ranks = #loc.ranks, links = #loc.pairs + loc.skipped_links, rescreen = loc.rescreen } }
  c.out = out
  -- 1. hosts
  local htests = host_tests(c, host_sus)
  run_phase(c, htests, true)
  local named_host = judge_hosts(c, htests, loc)
  -- 2. ranks and links
  clear_hosts(c, host_sus, loc, named_host, htests)
  local tests = rank_link_tests(c, loc, named_host)
  -- a rank its host's re-test showed overwhelming (a pair over `overwhelm` in every round) first,
  -- with 2 rounds the budget does not cut (the two decide it: statistics), then the rest; a rank
  -- its host's re-test pointed to that the budget then cut before min_samples gets min_samples
  -- rounds of its own the budget does not cut, as do 2 more suspects whose pair was above its
  -- threshold in every round the budget let it have. Such a suspect slows every round it is in,
  -- and the rounds before had spent the budget (namespace hosts: a rank at 68 Mbit, and one at
  -- 345 Mbit after a pattern round stalled for 27 s, were left undecided with their host's
  -- re-test already pointing at them; a 383 Mbit link at 1.9x got 2 rounds)
  local strong, rest = {}, {}
  for _, t in ipairs(tests) do
    if t.entry.overwhelming then strong[#strong + 1] = t else rest[#rest + 1] = t end
  end
  run_phase(c, strong, 2)
  run_phase(c, rest, false)
  local cut, promising = {}, 0
  for _, t in ipairs(rest) do
    local p = t.pairs[1]
    if not p.decidable then
      if t.entry.from_host_test and t.what == "rank" then cut[#cut + 1] = t
      elseif promising < 2 and above_all(c, p) then cut[#cut + 1] = t; promising = promising + 1 end
    end
  end
  run_phase(c, cut, true)
  local not_good = slow_partners(c, tests)
  for _, t in ipairs(tests) do
    if t.what == "rank" then judge_rank(c, t) else judge_link(c, t, not_good) end
  end
  -- the links those re-tests pointed to, with min_samples rounds the budget does not cut
  local pointed = pointed_links(c, htests, tests)
  for _, t in ipairs(cleared_rank_links(c, tests, pointed)) do pointed[#pointed + 1] = t end
  run_phase(c, pointed, true)
  for _, t in ipairs(pointed) do judge_link(c, t, not_good) end
  group_ranks(c, loc)
  -- References noisier than max_cv: a suspect is still named when its effect clears the
  -- threshold their spread sets (1 + margin x cv), but nothing is shown good (no link is named)
  -- and when nobody is named the finding says that the run was too noisy, not that it is healthy.
  if out.noisy and #out.hosts + #out.ranks + #out.links > 0 then out.noisy = nil end
  if out.noisy then
    out.noisy.message = ("measurements too noisy to localise: CV %.2f of the %s-host reference pairs (at most %.2f for a verdict)"):format(
      out.noisy.cv, out.noisy.kind == "intra" and "same" or "cross", c.max_cv)
  end
  out.retests = c.retests
  return out
end

-- findings(loc) -> the localisation's own findings (not a culprit: what the verdict could not
--   say): too noisy to localise (warn), hosts under-measured (info), suspects left undecided by
--   the budget (info). Culprits are cs.rules' slow_host / slow_rank / slow_link.
function M.findings(loc)
  local out = {}
  if not loc then return out end
  if loc.noisy then
    out[#out + 1] = { rule = "localisation_noisy", severity = "warn", subject = { stage = "localisation" }, message = loc.noisy.message,
                      evidence = { cv = loc.noisy.cv, kind = loc.noisy.kind, max_cv = loc.noisy.max_cv,
                                   references = loc.references },
                      remedy = "run fewer ranks per host (or bind them to distinct cores) and measure again" }
  end
  if loc.under_measured and #loc.under_measured > 0 then
    local names = {}
    for _, u in ipairs(loc.under_measured) do names[#names + 1] = ("%s (%d of %d)"):format(u.host, u.partners, u.needed) end
    out[#out + 1] = { rule = "localisation_under_measured", severity = "info", subject = { stage = "localisation" },
                      message = ("under-measured, no host verdict on: %s other hosts measured"):format(table.concat(names, ", ")),
                      evidence = { hosts = loc.under_measured }, remedy = "use a longer --tier or a larger --budget" }
  end
  local budget, either = {}, {}
  for _, u in ipairs(loc.undecided or {}) do
    if u.either then either[#either + 1] = ("rank %d or host %s"):format(u.rank, u.either) end
    if u.why == "budget" then
      budget[#budget + 1] = u.host or (u.rank and ("rank " .. u.rank)) or (u.pair and ("link " .. u.pair[1] .. "-" .. u.pair[2]))
    end
  end
  if #budget > 0 then
    out[#out + 1] = { rule = "localisation_undecided", severity = "info", subject = { stage = "localisation" },
                      message = ("suspects left undecided, the budget ran out: %s"):format(table.concat(budget, ", ")),
                      evidence = { undecided = loc.undecided }, remedy = "use a longer --tier or a larger --budget" }
  end
  if #either > 0 then
    out[#out + 1] = { rule = "localisation_undecided", severity = "info", subject = { stage = "localisation" },
                      message = ("slow, but no other rank of its host was shown good beside it: %s"):format(table.concat(either, ", ")),
                      evidence = { undecided = loc.undecided },
                      remedy = "measure again with a longer --tier: a good rank of that host tells the rank from the host" }
  end
  return out
end

return M
