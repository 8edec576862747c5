-- cs.diagnose.grouping: a part of cs.diagnose (docs/stdlib.md): the judged re-tests' ranks and
-- links grouped into what they are (group_ranks: two slow ranks of one host are the host;
-- links_at_one_rank: slow links at one rank to several hosts are the rank's; slow_alone: a rank
-- slow with good partners on several hosts that no verdict names is warned; slow_by_turns: one
-- slow in every round with partners on 3+ hosts, fine with others, is warned). Runs after
-- cs.diagnose.verdicts has judged every re-test (cs.diagnose.localise). Pure: no communication.
local J, V = require "cs.diagnose.judge", require "cs.diagnose.verdicts"
local M = {}

local threshold, judge = J.threshold, J.judge
local undecided, partner_hosts = V.undecided, V.partner_hosts

local function count_ranks(rank_hosts, h)
  local k = 0
  for _, x in ipairs(rank_hosts) do if x == h then k = k + 1 end end
  return k
end

-- Ranks no re-test of their own named, that the re-tests measured slow (at rank_factor) with
-- partners on 2 hosts or more besides their own, each partner shown good by some pair of the
-- same rounds, and that no pair showed good: rank -> { partners = {{rank, ratio}...}, hosts = n }.
-- A link re-test's end is such a rank when it is slow with the link's far end and with the good
-- rank it was set against (truth harness seed 1881, 8 x 2, two hosts sending at 113 Mbit: rank 6
-- of h3 at 8.4x with rank 9 of h4 and rank 12 of h6, both good elsewhere at 1.0x, in 4 of 4 rounds).
-- slow_with(c, all_tests, class, min_hosts, bad_if_good) -> rank -> { partners = {{rank, ratio}...},
-- hosts = n }: the ranks some pair measured slow (class(p) -> "slow" | "good" | nil, its ratio)
-- with partners on min_hosts other hosts or more, each partner good in a pair without that rank;
-- bad_if_good: not a rank that some pair showed good. slow_elsewhere and slow_by_turns.
local function slow_with(c, all_tests, class, min_hosts, bad_if_good)
  local rh, slow, good_with = c.rank_hosts, {}, {}
  for _, tests in ipairs(all_tests) do
    for _, t in ipairs(tests) do
      for _, p in ipairs(t.pairs) do
        local k, ratio = class(p)
        if k == "slow" then slow[#slow + 1] = { p[1], p[2], ratio }
        elseif k == "good" then
          good_with[p[1]] = good_with[p[1]] or {}; good_with[p[1]][p[2]] = true
          good_with[p[2]] = good_with[p[2]] or {}; good_with[p[2]][p[1]] = true
        end
      end
    end
  end
  local function good_without(o, r)
    for x in pairs(good_with[o] or {}) do if x ~= r then return true end end
    return false
  end
  local out = {}
  for _, x in ipairs(slow) do
    for _, e in ipairs { { x[1], x[2] }, { x[2], x[1] } } do
      local r, o = e[1], e[2]
      if rh[o + 1] ~= rh[r + 1] and good_without(o, r) and not (bad_if_good and good_with[r]) then
        local s = out[r] or { partners = {}, hosts = 0, seen = {} }
        out[r] = s
        s.partners[#s.partners + 1] = { rank = o, ratio = x[3] }
        if not s.seen[rh[o + 1]] then s.seen[rh[o + 1]], s.hosts = true, s.hosts + 1 end
      end
    end
  end
  for r, s in pairs(out) do
    if s.hosts < min_hosts then out[r] = nil else s.seen = nil end
  end
  return out
end

local function slow_elsewhere(c, all_tests)
  return slow_with(c, all_tests, function(p)
    if not p.decidable then return nil end
    local j = judge(c, p, threshold(c, p, c.rank_factor))
    return j.slow and "slow" or j.good and "good" or nil, j.ratio
  end, 2, true)
end

-- Two or more ranks of one host slow each: the host is (one finding, the ranks its evidence). A
-- rank its own re-test named counts with the ranks of its host that other re-tests measured
-- slow (slow_elsewhere: the link re-tests' ends; verdict.slow_elsewhere lists them). A rank slow
-- alone is named only beside a good rank of its host (in its own re-test, or, far less slow
-- than it, in its host's, which pointed to it), or alone on its host, or slow with partners of
-- its own host (then its host is no explanation). all_tests: the lists of re-tests run.
local function group_ranks(c, loc, all_tests)
  local out, rh = c.out, c.rank_hosts
  local by_host, kept, named = {}, {}, {}
  for _, r in ipairs(out.ranks) do
    local h = rh[r.rank + 1]
    by_host[h] = by_host[h] or {}
    table.insert(by_host[h], r)
    named[r.rank] = true
  end
  local also = {}  -- host -> the ranks other re-tests measured slow, not named by their own
  c.slow_elsewhere, c.all_tests = slow_elsewhere(c, all_tests or {}), all_tests or {}
  for r, s in pairs(c.slow_elsewhere) do
    local h = rh[r + 1]
    if by_host[h] and not named[r] then
      also[h] = also[h] or {}
      table.insert(also[h], { rank = r, partners = s.partners })
    end
  end
  for _, x in pairs(also) do table.sort(x, function(a, b) return a.rank < b.rank end) end
  for _, r in ipairs(out.ranks) do
    local h = rh[r.rank + 1]
    local group = by_host[h]
    local alone = #group + #(also[h] or {}) < 2
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
      e.verdict.slow_elsewhere = also[h]
      for _, x in ipairs(also[h] or {}) do
        for _, p in ipairs(x.partners) do table.insert(e.retest.partners, p.rank) end
      end
      partner_hosts(c, e.retest)
      out.hosts[#out.hosts + 1] = e
    end
  end
  out.ranks = kept
end

-- A rank the re-tests measured slow with shown-good partners on 2+ other hosts and good with
-- nobody (slow_elsewhere), that no verdict names (no named rank, on no named host, not already
-- at slow links: rank_links), the only such rank of its host: a not_confirmed warning on it
-- (out.rank_links, `alone`). Its host's other ranks were not measured beside it, so no rank
-- verdict (the rank or its host), but silence is wrong (truth harness seed 2061, 8 x 2, rank 10
-- stopped 47 of every 68 ms: the link re-tests 6-10 and 10-12 measured it 3.2x and 2.1x with
-- ranks 6 and 12 and 1.9-2.1x with the good rank 15 set against it, 5 of 5 rounds each, while
-- 6-15 and 12-15 were 1.0x; no link was named, its end being slow, and nothing was said). Over
-- the ~600 kept namespace reports every rank this takes was the planted rank.
local function warn_alone(c, se, mark)
  local out, rh = c.out, c.rank_hosts
  local skip, named_host, per_host = {}, {}, {}
  for _, r in ipairs(out.ranks) do skip[r.rank] = true end
  for _, x in ipairs(out.rank_links or {}) do skip[x.rank] = true end
  for _, l in ipairs(out.links) do skip[l.a], skip[l.b] = true, true end
  for _, h in ipairs(out.hosts) do named_host[h.host] = true end
  for r in pairs(se) do per_host[rh[r + 1]] = (per_host[rh[r + 1]] or 0) + 1 end
  local add = {}
  for r, s in pairs(se) do
    local h = rh[r + 1]
    if not skip[r] and not named_host[h] and per_host[h] == 1 then
      local best = {}
      for _, p in ipairs(s.partners) do best[p.rank] = math.max(best[p.rank] or 0, p.ratio or 0) end
      local links = {}
      for o, ratio in pairs(best) do links[#links + 1] = { a = math.min(r, o), b = math.max(r, o), ratio = ratio } end
      table.sort(links, function(x, y) return x.ratio > y.ratio end)
      add[#add + 1] = { rank = r, host = h, links = links, alone = true, hosts = s.hosts, turns = mark }
    end
  end
  table.sort(add, function(x, y) return x.rank < y.rank end)
  for _, x in ipairs(add) do
    out.rank_links = out.rank_links or {}
    out.rank_links[#out.rank_links + 1] = x
  end
end
local function slow_alone(c) warn_alone(c, c.slow_elsewhere or {}, nil) end

-- A rank stopped by turns: the re-tests measured it `overwhelm` x (4) its references or more in
-- every round they had (2 or more, budget-cut ones too) with partners on BY_TURNS.hosts (3) other
-- hosts, each of them good elsewhere (under `factor` in every round of a pair without it), while
-- it was fine with others (its timed stream fell into its stops or never). No verdict names it,
-- nor its host, it is at no named link and is the only such rank of its host: a not_confirmed
-- warning on it (out.rank_links, `turns`). Truth harness seed 2341 (8 x 2, quick, rank 2 stopped
-- 60 of every 109 ms): the link re-tests' ends measured it 7.5-7.8x with ranks 1, 13 and 15 and
-- 4.0x with 8 in 2 of 2 rounds, 1.0x with 4, 7, 9 and 12; the budget cut every re-test at 2 rounds
-- and nothing was said. Over the 780 kept namespace reports this takes that rank only.
M.BY_TURNS = { hosts = 3 }
local function slow_by_turns(c)
  local function every(p, f)  -- each of 2+ rounds' ratios passes f
    local q = p.ratios or {}
    if #q < 2 then return false end
    for _, x in ipairs(q) do if not f(x) then return false end end
    return true
  end
  local function high(x) return x >= c.overwhelm end
  local function low(x) return x < c.factor end
  local se = slow_with(c, c.all_tests or {}, function(p)
    if every(p, high) then return "slow", J.effect_of(p) end
    if every(p, low) then return "good" end
  end, M.BY_TURNS.hosts, false)
  warn_alone(c, se, true)
end

-- A link joins two hosts: named links at one rank as slow as each other (within LINKS_AT_RANK x
-- of its slowest) whose other ends are on 2 hosts or more are that rank's, not links' (truth
-- harness seed 1200, 8 x 2, rank 6 stopped 58 of every 114 ms: its re-tests start when it runs,
-- so each pair's timed stream fell in its stops every round or never; links 6-14 and 4-6 at 7.6x
-- and 7.3x in 4 of 4 rounds, its end pair 6-10 in 1 of 4, and both links named). An 11x link
-- beside a 1.6x pair at one end is two faults (seed 36). Over the kept namespace reports of the
-- twenty-third and twenty-fourth stops every other run naming several links named one host
-- pair's. Those links leave out.links for out.rank_links ({rank, host, links = {{a, b, ratio}}}),
-- which findings() says.
M.LINKS_AT_RANK = 2
local function link_ratio(l) return l.verdict and l.verdict.pairs and l.verdict.pairs[1] and l.verdict.pairs[1].ratio or 0 end

local function links_at_one_rank(c)
  local out, rh = c.out, c.rank_hosts
  local top = {}
  for _, l in ipairs(out.links) do
    for _, r in ipairs { l.a, l.b } do top[r] = math.max(top[r] or 0, link_ratio(l)) end
  end
  local hosts = {}  -- rank -> the hosts of the other ends of its links as slow as its slowest
  for _, l in ipairs(out.links) do
    for _, e in ipairs { { l.a, l.b }, { l.b, l.a } } do
      if link_ratio(l) * M.LINKS_AT_RANK >= top[e[1]] then
        hosts[e[1]] = hosts[e[1]] or { n = 0 }
        local h = rh[e[2] + 1]
        if not hosts[e[1]][h] then hosts[e[1]][h], hosts[e[1]].n = true, hosts[e[1]].n + 1 end
      end
    end
  end
  local at, keep = {}, {}
  for _, l in ipairs(out.links) do
    local r
    for _, x in ipairs { l.a, l.b } do
      if r == nil and hosts[x] and hosts[x].n >= 2 and link_ratio(l) * M.LINKS_AT_RANK >= top[x] then r = x end
    end
    if r == nil then keep[#keep + 1] = l else
      at[r] = at[r] or { rank = r, host = rh[r + 1], links = {} }
      table.insert(at[r].links, { a = l.a, b = l.b, ratio = link_ratio(l) })
    end
  end
  out.links = keep
  local ranks = {}
  for r in pairs(at) do ranks[#ranks + 1] = r end
  table.sort(ranks)
  for _, r in ipairs(ranks) do
    out.rank_links = out.rank_links or {}
    out.rank_links[#out.rank_links + 1] = at[r]
  end
end

M.group_ranks, M.slow_elsewhere, M.slow_alone, M.links_at_one_rank = group_ranks, slow_elsewhere, slow_alone, links_at_one_rank
M.slow_by_turns = slow_by_turns

return M
