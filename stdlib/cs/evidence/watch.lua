-- cs.evidence.watch: a part of cs.evidence (docs/stdlib.md): the watch's schedule and its rule,
-- a host slow in some of its samples alone while the samples without it were not. Pure: no
-- communication (cs.watch measures).
-- schedule(rank_hosts, cycle) -> { {from, to}, ... }: one cycle's samples, measured one at a
--   time: each host (in order of first rank) streams from one of its ranks (in turn) to a rank
--   (in turn) of another host, that host shifting each cycle (every other host in n - 1 cycles).
--   A host sends in its own sample and receives in another's: one way of each, every cycle.
-- judge(samples, rank_hosts, loc) -> findings: samples { {cycle, from, to, start, seconds, us} }
--   (us: the time one message takes at the sample's rate); loc: the verdict (hosts, ranks, links
--   named; unconfirmed: the warnings already given). A warn "not_confirmed" (intermittent) for a
--   host, or one rank of it, slow in some of its samples (WATCH).
local stats = require "cs.stats"
local M = {}

-- Why: the pattern measures pairs many at once, and where the fabric (or, on namespace hosts, two
-- shared CPUs) holds each stream under a host's fault rate anyway, a flapping host's on phases
-- do not show. Truth harness seed 800 (8 x 1, h7 receiving at 107 Mbit, on 2.7 s, off 3.0 s): none
-- of its 13 pair directions in on phases was under a third of the fleet's rate. Alone, the same
-- host's re-tests in on phases were slow in 3 of 3, 16 of 17, 6 of 8 (the twenty-third stop's
-- flap runs), but the re-tests last a second or two and measure suspects only. The watch samples
-- every host alone, in turn, for `seconds` (full_diag's --watch) after localisation.
-- A host's sample is slow at `factor` x the median of the samples without it. The host is
-- warned when at least `min` of its samples were, `share` of them or more (of its sends, or of
-- its receives, when all the slow ones went that way: count()), with partners on
-- `partners` hosts or more, while the samples without it that slow were at most `others` x its
-- count; not a host named slow or at a named link's end (its samples are the verdict's). On one
-- rank of it when all its slow samples were that rank's, in `cycles` cycles or more, and its
-- other ranks' samples in the same span (at least `mates` of them) were all fast: a rank
-- stopped by turns; a host's link slows all its ranks.
-- `min` is 2 (3 until the twenty-ninth stop, with 2 beside the host the pattern's spike count
-- puts first). Two slow samples with partners on 2 hosts and none slow without the host (`others`
-- a quarter of 2) are what a flap's on phases leave in 8 s: a slow sample takes a second or more
-- and ends the phase it is in (truth harness seed 2361, 8 x 1, h7 at 55 Mbit on 1.5 s of every
-- 5.2: 2 samples at 17x and 10x, no other slow, the pattern's spike count 3 against the next
-- host's 2; seed 2228 alike). Replayed over the 658 kept harness reports with watch samples (97
-- healthy runs, 97 flaps, 464 other faults): `min` 2 warns those two hosts and nobody else.
-- When the pattern's spike count puts the same host first (cs.evidence.spikes: SPIKE.min slow
-- directions or more, over_next x the next host's, partners on 2+ hosts; loc.pattern_spikes),
-- the warning says so.
M.WATCH = { seconds = 8, factor = 3, min = 2, share = 0.1, partners = 2, others = 0.25, cycles = 2,
            mates = 2, max_ranks = 64 }
local SPIKE = require("cs.evidence.spikes").SPIKE

-- whether the pattern's spike count puts host h first (WATCH above)
local function pattern_first(h, loc)
  local s = loc.pattern_spikes or {}
  local top, second = s[1], s[2]
  return top ~= nil and top.host == h and (top.slow or 0) >= SPIKE.min and (top.partners or 0) >= SPIKE.partners
    and (not second or top.slow >= SPIKE.over_next * (second.slow or 0))
end

local function hosts_of(rank_hosts)
  local order, ranks = {}, {}
  for r, h in ipairs(rank_hosts) do
    if not ranks[h] then ranks[h], order[#order + 1] = {}, h end
    table.insert(ranks[h], r - 1)
  end
  return order, ranks
end

function M.schedule(rank_hosts, cycle)
  local order, ranks = hosts_of(rank_hosts)
  local n, out = #order, {}
  if n < 2 then return out end
  local shift = 1 + cycle % (n - 1)
  for i, h in ipairs(order) do
    local o = order[(i - 1 + shift) % n + 1]
    local mine, theirs = ranks[h], ranks[o]
    out[i] = { mine[cycle % #mine + 1], theirs[(cycle + 1) % #theirs + 1] }
  end
  return out
end

-- the samples whose slowness the verdict already says (a named host or rank at an end, a rank
-- at slow links to several hosts, or a named link's two hosts), and the hosts not to warn again
-- (named, at a named link, warned)
local function set_aside(loc, rank_hosts)
  local hosts, ranks, links, warned = {}, {}, {}, {}
  for _, h in ipairs(loc.hosts or {}) do hosts[h.host] = true end
  for _, r in ipairs(loc.ranks or {}) do ranks[r.rank] = true end
  for _, x in ipairs(loc.rank_links or {}) do  -- warned by cs.diagnose.findings already
    ranks[x.rank] = true
    if x.host ~= nil then warned[x.host] = true end
  end
  for _, l in ipairs(loc.links or {}) do
    local a, b = rank_hosts[l.a + 1], rank_hosts[l.b + 1]
    links[tostring(a) .. "\0" .. tostring(b)], links[tostring(b) .. "\0" .. tostring(a)] = true, true
    warned[a], warned[b] = true, true
  end
  for _, f in ipairs(loc.unconfirmed or {}) do  -- warnings only: an info blames nobody (seed 1255)
    local s = f.subject or {}
    if f.severity == "warn" or f.severity == "error" then
      if s.host ~= nil then warned[s.host] = true end
      if s.rank ~= nil and rank_hosts[s.rank + 1] ~= nil then warned[rank_hosts[s.rank + 1]] = true end
    end
  end
  return function(s)
    local ha, hb = rank_hosts[s.from + 1], rank_hosts[s.to + 1]
    return hosts[ha] or hosts[hb] or ranks[s.from] or ranks[s.to] or links[tostring(ha) .. "\0" .. tostring(hb)]
  end, hosts, warned
end

-- host h's count: its samples, the slow ones (at factor x the median of those without it), their
-- partner hosts and ranks of h, and the samples without it that slow. Per direction too (h's
-- sends, its receives): a fault that shapes one direction slows at most the half of h's samples
-- that go that way, and the share is of those (truth harness seed 1899, 4 x 1, h1 sending at
-- 86 Mbit on 1.7 s of every 5.3: 3 of its 29 sends at 11.5x, 3 cycles in a row, were 3 of 58
-- samples, under the share, and nothing at all was said).
local function count(kept, rank_hosts, h)
  local own, without = {}, {}
  for _, s in ipairs(kept) do
    local mine = rank_hosts[s.from + 1] == h or rank_hosts[s.to + 1] == h
    table.insert(mine and own or without, s)
  end
  local xs = {}
  for i, s in ipairs(without) do xs[i] = s.us end
  local ref = stats.median(xs)
  local c = { host = h, n = #own, slow = {}, with = {}, partners = 0, others = 0, ref = ref,
              dirs = { sending = { n = 0, slow = 0 }, receiving = { n = 0, slow = 0 } } }
  c.own = own
  if not ref or ref <= 0 then return c end
  local cut = M.WATCH.factor * ref
  for _, s in ipairs(own) do
    local d = c.dirs[rank_hosts[s.from + 1] == h and "sending" or "receiving"]
    d.n = d.n + 1
    if s.us >= cut then
      d.slow = d.slow + 1
      c.slow[#c.slow + 1] = s
      local o = rank_hosts[s.from + 1] == h and rank_hosts[s.to + 1] or rank_hosts[s.from + 1]
      if not c.with[o] then c.partners = c.partners + 1 end
      c.with[o] = (c.with[o] or 0) + 1
    end
  end
  for _, s in ipairs(without) do if s.us >= cut then c.others = c.others + 1 end end
  return c
end

-- the direction all of c's slow samples went ("sending", "receiving"), or nil
local function one_way(c)
  for _, k in ipairs { "sending", "receiving" } do
    if #c.slow > 0 and c.dirs[k].slow == #c.slow then return k end
  end
end

-- c's slow samples over its samples: of one direction when they all went that way
local function share_of(c)
  local d = one_way(c)
  local n = d and c.dirs[d].n or c.n
  return n > 0 and #c.slow / n or 0
end

-- the one rank of c's host all of whose slow samples were its, in WATCH.cycles cycles or more,
-- its host's other ranks' samples in the same span at least WATCH.mates and all fast; else nil
local function one_rank(c, rank_hosts)
  local r, cycles, first, last = nil, {}, math.huge, -math.huge
  for _, s in ipairs(c.slow) do
    local mine = rank_hosts[s.from + 1] == c.host and s.from or s.to
    if r ~= nil and mine ~= r then return nil end
    r, cycles[s.cycle] = mine, true
    first, last = math.min(first, s.start), math.max(last, s.start)
  end
  local k = 0
  for _ in pairs(cycles) do k = k + 1 end
  if r == nil or k < M.WATCH.cycles then return nil end
  local mates = 0
  for _, s in ipairs(c.own) do
    local mine = rank_hosts[s.from + 1] == c.host and s.from or s.to
    if mine ~= r and s.start >= first and s.start <= last then mates = mates + 1 end
  end
  return mates >= M.WATCH.mates and r or nil
end

local function finding(c, r, samples_s)
  local what = r and ("rank %d (host %s)"):format(r, tostring(c.host)) or ("host " .. tostring(c.host))
  local way = one_way(c)
  local of = way and ("%d of its %d samples %s"):format(#c.slow, c.dirs[way].n, way) or ("%d of its %d samples"):format(#c.slow, c.n)
  return { rule = "not_confirmed", severity = "warn", subject = r and { rank = r, host = c.host } or { host = c.host },
    message = ("%s: intermittent; %s alone in the watch (%.1f s, every host in turn) took %.0fx or more the median of the samples without it (%.3g ms a message), with partners on %d hosts, the samples without it %d so: %s"):format(
      what, of, samples_s, M.WATCH.factor, c.ref / 1e3, c.partners, c.others,
      r and "a rank stopped by turns (OS jitter, a noisy neighbour, a CPU quota); its host's other ranks were not slow then"
        or "a link that flaps or drops in bursts, or a rank stopped by turns"),
    evidence = { intermittent = true, watch = true, slow = #c.slow, samples = c.n, others = c.others, with = c.with,
                 reference_us = c.ref, rank = r, need = M.WATCH.min, direction = way,
                 direction_samples = way and c.dirs[way].n or nil },
    remedy = r and "look at that rank's CPU (quotas, noisy neighbours, OS jitter) and its host's link counters, then measure again"
      or "watch that host's link for flaps (carrier changes, FEC and CRC counters, pause frames) and measure again" }
end

function M.judge(samples, rank_hosts, loc)
  loc = loc or {}
  local aside, named, warned = set_aside(loc, rank_hosts)
  local kept, hosts, seen, span = {}, {}, {}, 0
  for _, s in ipairs(samples or {}) do
    span = math.max(span, (s.start or 0) + (s.seconds or 0))
    if type(s.us) == "number" and s.us > 0 and not aside(s) then
      kept[#kept + 1] = s
      for _, r in ipairs { s.from, s.to } do
        local h = rank_hosts[r + 1]
        if h ~= nil and not seen[h] then seen[h], hosts[#hosts + 1] = true, h end
      end
    end
  end
  local top
  for _, h in ipairs(hosts) do
    if not named[h] then
      local c = count(kept, rank_hosts, h)
      if not top or #c.slow > #top.slow then top = c end
    end
  end
  if not top then return {} end
  if warned[top.host] or #top.slow < M.WATCH.min or share_of(top) < M.WATCH.share
      or top.partners < M.WATCH.partners or top.others > M.WATCH.others * #top.slow then
    return {}
  end
  local f = finding(top, one_rank(top, rank_hosts), span)
  if pattern_first(top.host, loc) then
    f.evidence.pattern_spikes = loc.pattern_spikes[1]
    f.message = f.message .. ("; the pattern too: %d of its %d pair directions under a third of the fleet's rate, with partners on %d hosts"):format(
      loc.pattern_spikes[1].slow, loc.pattern_spikes[1].of or 0, loc.pattern_spikes[1].partners)
  end
  return { f }
end

return M
