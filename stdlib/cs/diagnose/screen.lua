-- cs.diagnose.screen: the screening of a pattern, whom localisation re-tests (no verdict yet).
-- screen_pairs scores ranks and pairs, screen_hosts hosts, from the pattern's pair values;
-- suspects() adds the evidence the caller forces and narrows the link suspects to what the
-- re-tests can take. Pure functions over plain tables: no communication (suspects' `narrow.run`,
-- the caller's, may measure: cs.diagnose.localise gives it the rescreen).
local stats = require "cs.stats"
local J = require "cs.diagnose.judge"
local M = {}

local median = stats.median
-- The median of a list of our own, reordered in place (no copy, no sort: the screening's
-- lists hold every pair twice, a million values at 1024 ranks).
local median_own = stats.median_inplace
local VERDICT = J.VERDICT

-- screen_pairs(n, pair_values, opts) -> { ranks = {...}, pairs = {...}, scores = {...}, fleet_median }
--   pair_values: list of { a, b, value } where larger is worse (time). Each rank is scored by
--   the median of its pairs over the median of the ranks' medians. A rank whose score exceeds
--   opts.factor (default 1.5) is a suspect; a pair whose value exceeds opts.link_factor
--   (default 2) x the reference while neither of its ranks is a suspect is a slow link.
function M.screen_pairs(n, pair_values, opts)
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

-- screen_hosts(pair_values, rank_hosts, opts) -> list of { host, ranks, score, median, reference }
--   Like screen_pairs(), one level up: only pairs between different hosts count; a host is scored
--   by the median of its pairs with other hosts over the median of the hosts' medians. Needs
--   at least 3 hosts (with 2, nothing tells which end is slow).
function M.screen_hosts(pair_values, rank_hosts, opts)
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

-- One number per unordered pair a < b of n ranks (a set's key).
local function pair_key(n, a, b) return a * (n + 1) + b end

-- A pair slow against both of its ends' own medians is a link suspect even when an end is a
-- rank suspect (screen_pairs leaves those out: a slow rank's pairs are slow, but not slower than
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

-- A host pair every one of whose rank pairs (2 or more) is HOST_PAIR x the hosts pairs' median
-- (each host pair's median pair value) or slower is a link suspect, its slowest pair standing for
-- it, when none of its pairs is one already and neither host is a suspect: at most HOST_PAIR_MAX,
-- the slowest first. A pair's value is its slower direction, and on a crowded fabric noise makes
-- one of two directions slow often, so a link under 2x is no slower than the fleet's noisy pairs
-- one by one; but all of a host pair's pairs slow together is no noise (truth harness seed 1926,
-- 8 x 2, a 101 Mbit link between h0 and h2 in a pattern held to 0.01-0.05 GB/s by the 2 cores:
-- its 4 pairs at 1.55-1.7x the host pairs' median, the next host pair's fastest pair at 0.87x;
-- no pair over screen_link, and nothing was re-tested). Over 3499 healthy host pairs of 281 kept
-- namespace reports with 2 ranks a host, 6 had every pair over 1.5x (at most 1.75x); the link
-- re-test clears such a pair.
M.HOST_PAIR, M.HOST_PAIR_MAX = 1.5, 2
local function host_pair_links(n, values, rank_hosts, loc, bad_host)
  local index, nh = {}, 0  -- host -> its number: a host pair's key is a number (16 384 ranks: 2 M pairs)
  for _, h in ipairs(rank_hosts) do if not index[h] then nh = nh + 1; index[h] = nh end end
  local function key(ha, hb)
    local x, y = index[ha], index[hb]
    return math.min(x, y) * (nh + 1) + math.max(x, y)
  end
  local by, keys = {}, {}
  for _, p in ipairs(values) do
    local ha, hb = rank_hosts[p[1] + 1], rank_hosts[p[2] + 1]
    if ha ~= hb then
      local k = key(ha, hb)
      if not by[k] then by[k] = { ha = ha, hb = hb, values = {}, worst = p, best = p[3] }; keys[#keys + 1] = k end
      local g = by[k]
      g.values[#g.values + 1] = p[3]
      if p[3] > g.worst[3] then g.worst = p end
      if p[3] < g.best then g.best = p[3] end
    end
  end
  if #keys < 3 then return end
  local medians = {}
  for i, k in ipairs(keys) do medians[i] = median(by[k].values) end
  local fleet = median(medians)
  if not fleet or fleet <= 0 then return end
  local listed = {}
  for _, l in ipairs(loc.pairs) do
    local ha, hb = rank_hosts[l.a + 1], rank_hosts[l.b + 1]
    if ha ~= hb then listed[key(ha, hb)] = true end
  end
  local cands = {}
  for _, k in ipairs(keys) do
    local g = by[k]
    if #g.values >= 2 and g.best >= M.HOST_PAIR * fleet and not listed[k] and not bad_host[g.ha] and not bad_host[g.hb] then
      cands[#cands + 1] = g
    end
  end
  table.sort(cands, function(x, y) return x.best > y.best end)
  for i = 1, math.min(#cands, M.HOST_PAIR_MAX) do
    local p = cands[i].worst
    local a, b = math.min(p[1], p[2]), math.max(p[1], p[2])
    loc.pairs[#loc.pairs + 1] = { a = a, b = b, value = p[3], score = p[3] / (loc.fleet_median or fleet),
                                  host_pair = { score = cands[i].best / fleet, pairs = #cands[i].values } }
  end
end

-- The hosts measured with fewer than min_host_partners other hosts (under-measured: no host
-- verdict on them), from the distinct other hosts each host has pairs with.
local function under_measured(values, rank_hosts, names, min_host_partners)
  local under = {}
  if #names >= 3 then
    local need = math.min(min_host_partners or VERDICT.min_host_partners, #names - 1)
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
--   (screen_hosts, plus every host that is one end of slow links to two or more other hosts:
--   such links are that host's evidence, not links), rank and link suspects (screen_pairs), the
--   ranks trusted as partners and references (outside every suspect, ends of suspect links
--   included), best score first, and the hosts with pairs to fewer than min_host_partners other
--   hosts (under-measured: no host verdict on them). At most max_suspects links are kept; with
--   more, narrow = { floor, per_rank, run(wide, pool, info) -> kept } chooses them from the
--   pairs over floor (localise: rescreen()), loc.rescreen its numbers.
-- force = { hosts = {h...}, ranks = {r...} }: suspects whatever the screen says (cs.evidence.force:
-- the matrix's rows and columns far off, the ranks the collectives waited for); a host only
-- with 3 hosts or more (a host verdict needs two others), else its ranks.
-- A forced host the screen did not find carries its own numbers (its pairs' median over the
-- hosts' median, as screen_hosts scores every host): a forced host read "its pairs take 0.0x the
-- fleet's median (0.0 vs 60883.1 us)" (truth harness seed 1881).
local function add_forced(force, host_sus, loc, rank_hosts, values)
  if not force then return end
  local scored = {}
  if force.hosts and #force.hosts > 0 then
    for _, h in ipairs(M.screen_hosts(values or {}, rank_hosts, { factor = 0 })) do scored[h.host] = h end
  end
  local have, nhosts, ranks_of = {}, 0, {}
  for r, h in ipairs(rank_hosts) do
    if not ranks_of[h] then ranks_of[h] = {}; nhosts = nhosts + 1 end
    table.insert(ranks_of[h], r - 1)
  end
  for _, h in ipairs(host_sus) do have[h.host] = h end
  local ranks = {}
  for _, r in ipairs(force.ranks or {}) do ranks[#ranks + 1] = r end
  for _, h in ipairs(force.hosts or {}) do
    -- a forced host the screen found too is forced all the same (cap_hosts keeps the forced first)
    if have[h] and have[h] ~= true then have[h].forced = true end
    if ranks_of[h] and nhosts < 3 then
      for _, r in ipairs(ranks_of[h]) do ranks[#ranks + 1] = r end
    elseif ranks_of[h] and not have[h] then
      local x = scored[h] or {}
      host_sus[#host_sus + 1] = { host = h, ranks = ranks_of[h], score = x.score or 0, median = x.median or 0,
                                  reference = x.reference or loc.fleet_median or 0, forced = true }
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

-- A host verdict needs good ranks on two other hosts (its partners, and the reference pairs
-- between them): with more suspects than hosts - 2 none can be judged, and every one was left
-- "noise" (namespace hosts, 4 x 2 ranks, link seed 57: a noisy pattern made 3 of the 4 hosts
-- suspects, the slow link's pairs went with them and were never decided). The worst hosts - 2
-- stay suspects (the forced ones first: the matrix's own evidence); the others
-- (loc.untested_hosts) are screened as ranks and links, as any others. At most max_suspects
-- too: each host verdict's first rounds are not cut by the budget, and a pattern of 4096 ranks
-- cut at 30 rounds by the quick tier's budget made 510 of 512 hosts suspects (the scale model,
-- --budget 60: 3102 pairs re-tested alone, 22 minutes).
local function cap_hosts(host_sus, bad_host, loc, nhosts, max_suspects)
  local keep = math.min(nhosts - 2, max_suspects or math.huge)
  if keep < 1 or #host_sus <= keep then return end
  table.sort(host_sus, function(x, y)
    if (x.forced or false) ~= (y.forced or false) then return x.forced or false end
    return x.score > y.score
  end)
  loc.untested_hosts = {}
  for i = #host_sus, keep + 1, -1 do
    table.insert(loc.untested_hosts, 1, host_sus[i].host)
    bad_host[host_sus[i].host] = nil
    host_sus[i] = nil
  end
end

function M.suspects(n, values, rank_hosts, factor, link_factor, min_host_partners, max_suspects, narrow, force)
  local host_sus = M.screen_hosts(values, rank_hosts, { factor = factor })
  local loc = M.screen_pairs(n, values, { factor = factor, link_factor = link_factor })
  add_forced(force, host_sus, loc, rank_hosts, values)
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
  host_pair_links(n, values, rank_hosts, loc, bad_host)
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
  cap_hosts(host_sus, bad_host, loc, #names, max_suspects)
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
  local cap, screened = max_suspects or VERDICT.max_suspects, #links
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

M.pair_key, M.best_first = pair_key, best_first

return M
