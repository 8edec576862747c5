-- cs.evidence.spikes: a part of cs.evidence (docs/stdlib.md): the pattern's spike rule, a host
-- whose pair directions ran far under the fleet's rate in more passes than any other host's
-- (ev.spiky, ev.spikes of cs.evidence.off). Pure: no communication.
-- spiky(passes, rank_hosts) -> { {host, way, n, total, partners, next, time_share, with} } (at most
--   one; with: its slow directions' count by partner host),
--   and the three hosts with the most such directions { {host, slow, of, partners, time_share} },
--   and each rank's such directions (sent or received) over the passes { [rank, 0-based] = n }
local stats = require "cs.stats"
local M = {}

local median = stats.median

-- A host whose pair directions fall far under the fleet's rate in the pattern more often than any
-- other host's, with partners on several hosts, while its median rate stays near the fleet's: a
-- link that flaps (on 2.3 s, off 2.7 s at 67 Mbit: 12 of host h0's 52 directions under a third of
-- the fleet's median, no other host more than 4; healthy runs at most 1). Re-tested, and a
-- warning naming it intermittent when the re-tests do not name it slow.
-- The next host's count leaves out its directions with the top host (each slow direction is a
-- send of one host and a receive of another: with 4 hosts a flapping host's partners shared its
-- count, 7 slow, one partner 3 of them, 2.3x, under over_next, and nobody was named). A top host
-- whose slow directions are mostly (one_partner) with one host is the end of a link, not a
-- flapping host. Counted both ways together, at a tenth: counted per way, healthy hosts of 4 x 2
-- ranks on this 2-core machine had 9 of 60 and 5 of 36 receives slow (2 of 18 healthy runs
-- warned), as many as a receive-side flap (5 of 30); `way` says which way most of them went.
-- Or few but deep: a flap's slow transfers take long, so few of them fall in its on phases. A
-- receive-side flap at 55 Mbit (truth harness seed 58, 4 x 1 ranks, on 2.4 s / off 2.2 s) had 6
-- of its 66 directions slow, 9 %, but they took 56 % of its transfer time (each direction
-- weighing fleet median / rate, at most max_weight). A host is also spiky when its slow
-- directions took time_share of its time. Over 18 namespace runs (9 healthy, 9 flapping) healthy
-- hosts spent at most 15 % of their time in slow directions, flapping ones 34-60 %; at 0.45 the
-- crowded host above (9 of 60 receives, at the 8x of the test) stays out.
-- Or few but alone: every slow direction of the run is one host's (no other host has one
-- without it), in 2 passes or more. A slow direction of noise is some host's send or receive, so
-- it falls on a given one of H hosts with chance 2/H; all n of them on one host, by chance, about
-- H (2/H)^n. At most `chance` (0.01: 5 at 8 hosts, 9 at 4) it is spiky however few: seed 219 (8
-- x 1, h5 receiving at 63 Mbit, on 2.2 s, off 2.7 s) had 5 of 56 directions slow in 4 passes,
-- 35 % of its time, partners on 4 hosts, no other host slow without it, and nobody was named.
-- Directions of one stall are not independent (a healthy 8 x 2 run: 4 sends of one rank in its
-- one pass), hence the 2 passes, and H counts at most `max_hosts` (8, the most measured here):
-- with more, (2/H)^n would let the floor fall to `min` alone. Over 1,042 kept namespace reports
-- this adds seed 219's flap and no healthy host.
-- Or slow for a share of the pattern's clock: each pass's rounds timed (cs.p2p.matrix's clock), a
-- host is spiky when rounds in which it had a slow direction took wall_share of the time of the
-- rounds it took part in, wall_rounds of them in 2 passes or more, and every other host's share
-- without its directions with this one is under 1 / over_next of it. Counting directions samples
-- a flap by rounds, and a round in an on phase lasts longer (its streams crawl), so the on
-- phases hold fewer rounds than their share of the time: over 8 flap runs of the twenty-third
-- stop, 0.10-0.46 of the flapping host's rounds fell in on phases at duties of 0.41-0.59, while
-- the rounds' time in on phases was 0.36-0.60 of the whole. Seed 723 (4 x 1, h1 receiving at 74
-- Mbit, on 2.7 s, off 3.2 s) had 6 of 72 directions slow (under the tenth), in rounds that took
-- 41 % of the clock, next host 0 %, and nobody was named. Over 119 runs with clocks the path's
-- conditions held on planted hosts (or a starved rank's) only; a healthy 4 x 2 host reached 30 %
-- (9 directions), kept out by the next host's 24 %; a flap's partners without its directions 21 %.
M.SPIKE = { below = 1 / 3, min = 4, share = 0.1, time_share = 0.45, max_weight = 20, over_next = 2.5, partners = 2,
            one_partner = 0.75, one_way = 0.75, chance = 0.01, alone_passes = 2, max_hosts = 8, wall_share = 0.3,
            wall_rounds = 3 }

-- the fewest slow directions all on one of `hosts` hosts that chance puts there at most
-- SPIKE.chance of the time (5 at 8 hosts, 9 at 4; nil with 2 hosts or fewer)
local function alone_floor(hosts)
  local h = math.min(hosts, M.SPIKE.max_hosts)
  if h <= 2 then return nil end
  local n = M.SPIKE.min
  while h * (2 / h) ^ n > M.SPIKE.chance do n = n + 1 end
  return n
end

-- adds to by[host] one pass's pair directions of that host and those under cut (sends and
-- receives counted apart too), and their time weights (fleet / x: time, the fleet's as 1); to
-- ranks[rank] (0-based) the directions under cut that rank sent or received
local function count_spikes(bw, rank_hosts, fleet, by, pass, ranks)
  local cut = fleet * M.SPIKE.below
  for a = 1, #rank_hosts do
    for b, x in pairs(bw[a] or {}) do
      if type(b) == "number" and a ~= b and x and rank_hosts[b] ~= rank_hosts[a] then
        local w = x > 0 and math.min(M.SPIKE.max_weight, fleet / x) or M.SPIKE.max_weight
        if x < cut then ranks[a - 1], ranks[b - 1] = (ranks[a - 1] or 0) + 1, (ranks[b - 1] or 0) + 1 end
        for _, e in ipairs { { a, b, "sending" }, { b, a, "receiving" } } do
          local h, other = rank_hosts[e[1]], rank_hosts[e[2]]
          local c = by[h] or { host = h, n = 0, total = 0, partners = {}, count = 0, ways = {}, time = 0, slow_time = 0,
                               passes = {}, in_passes = 0 }
          by[h], c.total, c.time = c, c.total + 1, c.time + w
          if x < cut then
            c.n, c.slow_time = c.n + 1, c.slow_time + w
            if not c.passes[pass] then c.passes[pass], c.in_passes = true, c.in_passes + 1 end
            c.ways[e[3]] = (c.ways[e[3]] or 0) + 1
            if not c.partners[other] then c.count = c.count + 1 end
            c.partners[other] = (c.partners[other] or 0) + 1
          end
        end
      end
    end
  end
  return by
end

-- adds to by[host].rounds one pass's rounds (clock: cs.p2p.matrix's { clock, ran }) that host
-- took part in with another host: { seconds, { [other host] = true } for its directions under cut }
local function wall_rounds(bw, rank_hosts, cut, clock, by)
  for k, t in ipairs(clock and clock.clock or {}) do
    local took = {}
    for _, p in ipairs(clock.ran and clock.ran[k] or {}) do
      local a, b = p[1] + 1, p[2] + 1
      local ha, hb = rank_hosts[a], rank_hosts[b]
      if ha ~= nil and hb ~= nil and ha ~= hb then
        took[ha], took[hb] = took[ha] or {}, took[hb] or {}
        for _, e in ipairs { { a, b }, { b, a } } do
          local x = bw[e[1]] and bw[e[1]][e[2]]
          if x and x < cut then took[ha][hb], took[hb][ha] = true, true end
        end
      end
    end
    for h, slow in pairs(took) do
      local c = by[h]
      if c then c.rounds[#c.rounds + 1] = { t[2] - t[1], slow } end
    end
  end
end

-- the share of host c's rounds' seconds in which it had a slow direction with a host other than `but`
local function wall_share(c, but)
  local all, slow = 0, 0
  for _, r in ipairs(c.rounds) do
    all = all + r[1]
    for o in pairs(r[2]) do
      if o ~= but then slow = slow + r[1]; break end
    end
  end
  return all > 0 and slow / all or 0
end

local function spike_counts(passes, rank_hosts, clocks)
  local one_host, all = true, {}
  for a = 2, #rank_hosts do one_host = one_host and rank_hosts[a] == rank_hosts[1] end
  for _, bw in ipairs(passes) do
    for a = 1, #rank_hosts do
      for b, x in pairs(bw[a] or {}) do
        if type(b) == "number" and a ~= b and x and rank_hosts[b] ~= rank_hosts[a] then all[#all + 1] = x end
      end
    end
  end
  if one_host or #all == 0 then return nil end
  local fleet, by, ranks = median(all), {}, {}
  for i, bw in ipairs(passes) do count_spikes(bw, rank_hosts, fleet, by, i, ranks) end
  for _, c in pairs(by) do c.rounds = {} end
  for i, bw in ipairs(passes) do wall_rounds(bw, rank_hosts, fleet * M.SPIKE.below, clocks and clocks[i], by) end
  for _, c in pairs(by) do c.wall = #c.rounds > 0 and wall_share(c) or nil end  -- nil: no clock
  return by, ranks
end

-- the wall path: top's rounds with a slow direction took SPIKE.wall_share of its rounds' time,
-- SPIKE.wall_rounds of them, over_next times any other host's share without top's directions
local function wall_spiky(top, list)
  local share, slow_rounds = top.wall or 0, 0
  for _, r in ipairs(top.rounds) do if next(r[2]) ~= nil then slow_rounds = slow_rounds + 1 end end
  if share < M.SPIKE.wall_share or slow_rounds < M.SPIKE.wall_rounds or top.in_passes < M.SPIKE.alone_passes then
    return nil, share
  end
  for i = 2, #list do
    if M.SPIKE.over_next * wall_share(list[i], top.host) > share then return nil, share end
  end
  return M.SPIKE.min, share
end

function M.spiky(passes, rank_hosts, clocks)
  local by, ranks = spike_counts(passes, rank_hosts, clocks)
  local list = {}
  for _, c in pairs(by or {}) do list[#list + 1] = c end
  table.sort(list, function(x, y) return x.n > y.n or (x.n == y.n and tostring(x.host) < tostring(y.host)) end)
  local top, next_n, most = list[1], 0, 0
  if not top then return {}, nil, ranks or {} end
  local seen = {}  -- the most spiky hosts' counts, for report.json (why a host was or was not)
  for i = 1, math.min(3, #list) do
    local c = list[i]
    seen[i] = { host = c.host, slow = c.n, of = c.total, partners = c.count, time_share = c.time > 0 and c.slow_time / c.time or 0,
                wall_share = c.wall }
  end
  for i = 2, #list do next_n = math.max(next_n, list[i].n - (list[i].partners[top.host] or 0)) end
  for _, k in pairs(top.partners) do most = math.max(most, k) end
  local hosts = 0
  for _ in pairs(by) do hosts = hosts + 1 end
  -- need: the fewest directions the path that fired warns on (cs.detour.explain takes out the
  -- warning when a starved rank's directions brought it there)
  local floor, need = alone_floor(hosts), M.SPIKE.min
  if top.n >= M.SPIKE.share * top.total then
    need = math.max(need, math.ceil(M.SPIKE.share * top.total))
  elseif top.slow_time < M.SPIKE.time_share * top.time then
    need = next_n == 0 and top.in_passes >= M.SPIKE.alone_passes and floor and top.n >= floor and floor or nil
    need = need or wall_spiky(top, list)
  end
  if not need or top.n < M.SPIKE.min or top.n < M.SPIKE.over_next * next_n
      or top.count < M.SPIKE.partners or most > M.SPIKE.one_partner * top.n then
    return {}, seen, ranks
  end
  local way = "both"
  for _, w in ipairs { "sending", "receiving" } do
    if (top.ways[w] or 0) >= M.SPIKE.one_way * top.n then way = w end
  end
  return { { host = top.host, way = way, n = top.n, total = top.total, partners = top.count, next = next_n,
             time_share = top.slow_time / top.time, wall_share = top.wall, with = top.partners, need = need } }, seen, ranks
end

return M
