-- Does every rank get the CPU it asks for? A detour probe (the HPC "selfish detour" / fixed work
-- quantum method): every rank spins on the clock at once, and whatever gap between two reads is
-- longer than DETOUR_S is time it did not run. A rank held to a fraction of a CPU by a cgroup
-- quota, stopped from outside (SIGSTOP, a debugger, a freezer) or crowded out by a noisy
-- neighbour runs a much smaller share of the probe's wall time than the others. Such a rank slows
-- every collective equally for everyone (all wait for it, and its own clock runs on while it is
-- stopped), so neither arrival times nor pair times single it out (docs/scale.md).
--
-- sample(seconds) -> fraction of the wall time this process ran, longest gap (s), and its gaps
--   of at least GAP.min_s: { count, seconds }. Not collective.
-- measure(ctx, args) -> on rank 0, per rank (1-based) the list of its samples' fractions, the
--   list of their longest gaps (s), and the list of their long gaps ({ count, seconds }, in
--   report.json's cpu.long); nil elsewhere. Collective: args.samples (5) probes of args.seconds
--   (0.25) each, every rank at once between two barriers.
-- judge(fractions, rank_hosts, opts) -> list of { rank, host, ran, fleet, ratio, above, samples, by }
--   (opts.gaps: measure's longest gaps, for a rank stopped from outside: M.GAP; opts.stops and
--   opts.seconds: measure's long gaps and the sample's length, for one stopped often: M.STOPS):
--   a rank is starved when its share of the whole probe (its samples' mean) is at most the
--   fleet's median share / opts.factor (FACTOR), and it ran less than the fleet's median by
--   SAMPLE_FACTOR in all samples but one. Judged on the whole probe, not sample by sample: a CFS
--   quota is enforced per period (100 ms by default), so a throttled rank's share of one short
--   sample swings with where the sample falls in the period (0.075-0.147 of a CPU for a 9 %
--   quota beside a fleet at 0.19-0.40: 1.4-4x per sample, 2.4x over the probe). The per-sample
--   condition keeps a healthy rank of a crowded host out (16 ranks on 2 cores: one at 1.9x over
--   the probe, but under 1.5x in 2 of 5 samples). Pure.
-- findings(starved) -> warn findings, rule "starved_rank".
-- explain(loc, starved, rank_hosts) -> info findings: the localisation's links with a starved
--   rank at one end, its named hosts holding a starved rank (with others), and its not_confirmed
--   findings on a starved rank or its host are taken out of loc (the starved_rank warning names
--   the cause): a rank stopped 60 % of the time made its pairs with one partner look like a slow
--   link that was named beside nothing (4 hosts x 2 ranks). Changes loc.
local stats = require "cs.stats"
local M = {}

M.DETOUR_S = 1e-4  -- a gap between two clock reads longer than this: the process did not run
M.FACTOR = 2       -- the fleet's median share of the CPU over a rank's, for "starved"
M.SAMPLE_FACTOR = 1.5   -- ... and in each sample but one, the fleet's median over the rank's
M.SAMPLES, M.SECONDS = 5, 0.25
-- Stopped from outside: on a crowded host the scheduler gives a rank that was stopped its time
-- back when it runs again (16 ranks on 2 cores: a rank stopped 131 of every 188 ms ran 1.9x under
-- the fleet, a healthy one up to 1.7x), but not the length of its gaps: a rank is also starved
-- when its longest gap is GAP.factor times the fleet's median longest gap and at least GAP.min_s
-- (longer than a scheduler's slices) in all samples but one, and the fleet's share over the
-- probe is at least GAP.share times its own (0.8: it ran at most 1.25x the fleet's share).
-- factor 2 since full_diag 1.5.1: a rank stopped 45 of every 58 ms beside 7 others on 2 cores had
-- gaps 2.5x the fleet's (at 3 it went unnamed). share 0.8 since 1.5.4: one stopped 76 of every
-- 127 ms beside 15 others got its time back (the fleet ran 1.07x, then 0.998x its share; at 1 the
-- second run went unnamed) but not its gaps (1.9-2.7x), and healthy ranks' shares spread
-- 0.68-1.16x around the fleet's in the same run. Replayed over 596 kept harness reports (4371
-- healthy ranks, up to 16 on 2 cores, healthy gaps up to 108 ms; 81 stopped ranks), these
-- settings name every stopped rank but seed 31's (33 of every 61 ms beside 7 others: gaps 1.4-2x
-- the fleet's, no more than a crowded rank's wait for its turn, 8 runs) and no healthy one: no
-- healthy rank's gaps were over 1.7x the fleet's in 4 of 5 samples, whatever its share.
M.GAP = { factor = 2, min_s = 0.02, share = 0.8 }
-- Stopped often (opts.stops, opts.seconds; since full_diag 1.5.5): a rank stopped for no longer
-- than a crowded rank waits for its turn is stopped more often: it is starved too when, in all
-- samples but one, it lost at least STOPS.share of the sample in gaps of GAP.min_s or more, and
-- STOPS.factor times the fleet's median such time. Harness seed 31 (33 of every 61 ms, 8 ranks on
-- 2 cores): 55-70 % of each sample in 4 such gaps, the fleet's median 13-34 %; healthy ranks
-- reached 67 % in one sample and 39 % in the others. Replayed over the 140 runs of the twentieth
-- stop's harness run (docs/scale.md): it names seed 31 and no healthy rank.
-- And its longest gaps are STOPS.gap times the fleet's median longest gap, in all samples but
-- one, as a stop from outside makes them (since full_diag 1.7.0): twenty-fifth stop, seed 1519
-- (8 ranks on 2 cores, nothing planted on the rank), a healthy rank lost 53-69 % of each sample
-- in stops beside the fleet's 26-52 %, but in gaps of 1.0-1.42x the fleet's longest (waiting for
-- its turn, not stopped), and was named. The stopped ranks this rule names had gaps of 1.0-3.6x
-- (seed 885), 1.15-2.2x (1319), 1.54-2.16x (1242) and 1.4-2x (seed 31). Replayed over 327 kept
-- harness reports (2884 healthy ranks, 84 stopped or starved): at any STOPS.gap from 1.2 to 1.4
-- the same 81 of the 84 are named as without it, and no healthy rank (1519's rank 4 was the one).
M.STOPS = { share = 0.4, factor = 1.5, gap = 1.25 }

function M.sample(seconds)
  local now = require("commscript.native").now
  local t0 = now()
  local last, lost, longest, n_long, s_long = t0, 0, 0, 0, 0
  while last - t0 < seconds do
    local t = now()
    local d = t - last
    if d > M.DETOUR_S then
      lost = lost + d
      if d > longest then longest = d end
      if d >= M.GAP.min_s then n_long, s_long = n_long + 1, s_long + d end
    end
    last = t
  end
  return 1 - lost / (last - t0), longest, { n_long, s_long }
end

function M.measure(ctx, args)
  args = args or {}
  local mine, gaps, long = {}, {}, {}
  for i = 1, args.samples or M.SAMPLES do
    ctx.comm:barrier()
    mine[i], gaps[i], long[i] = M.sample(args.seconds or M.SECONDS)
  end
  ctx.comm:barrier()
  local all = ctx.comm:gather_value({ mine, gaps, long }, 0)
  if ctx.rank ~= 0 then return nil end
  local shares, longest, stops = {}, {}, {}
  for r, x in ipairs(all) do shares[r], longest[r], stops[r] = x[1], x[2], x[3] end
  return shares, longest, stops
end

local function at(list, i)
  local out = {}
  for r, s in ipairs(list) do if s[i] then out[#out + 1] = s[i] end end
  return out
end

-- in how many samples x[i] is at least `factor` times fleet[i] (or under it: `under`)
local function count_off(x, fleet, factor, under, floor)
  local n = 0
  for i = 1, #fleet do
    if x[i] and fleet[i] then
      if under and fleet[i] >= factor * math.max(x[i], 1e-3) then n = n + 1 end
      if not under and x[i] >= math.max(factor * fleet[i], floor or 0) then n = n + 1 end
    end
  end
  return n
end

local function fleet_of(lists, k)
  local fleet = {}
  for i = 1, k do fleet[i] = stats.median(at(lists, i)) end
  return fleet
end

-- per rank, per sample: the seconds lost in gaps of at least GAP.min_s (measure's third list)
local function stop_times(stops)
  local out = {}
  for r, samples in ipairs(stops) do
    out[r] = {}
    for i, x in ipairs(samples) do out[r][i] = x[2] end
  end
  return out
end

function M.judge(fractions, rank_hosts, opts)
  opts = opts or {}
  local factor, gaps = opts.factor or M.FACTOR, opts.gaps
  local out = {}
  if not fractions or #fractions < 3 then return out end  -- two ranks: no fleet to compare with
  local k = #fractions[1]
  local fleet, shares = fleet_of(fractions, k), {}
  for r, s in ipairs(fractions) do shares[r] = stats.mean(s) end
  local fleet_all = stats.median(shares)
  local gap_fleet = gaps and #gaps == #fractions and fleet_of(gaps, k) or nil
  local stop_s = opts.stops and #opts.stops == #fractions and opts.seconds and stop_times(opts.stops) or nil
  local stop_fleet = stop_s and fleet_of(stop_s, k) or nil
  for r, s in ipairs(fractions) do
    local above = count_off(s, fleet, M.SAMPLE_FACTOR, true)
    local ran = shares[r]
    local ratio = ran and fleet_all and fleet_all / math.max(ran, 1e-3) or 0
    local long = gap_fleet and count_off(gaps[r], gap_fleet, M.GAP.factor, false, M.GAP.min_s) or 0
    local often = stop_fleet and count_off(stop_s[r], stop_fleet, M.STOPS.factor, false, M.STOPS.share * opts.seconds) or 0
    local starved = above >= k - 1 and ratio >= factor
    local stopped = long >= k - 1 and ratio >= M.GAP.share
    local held = gap_fleet and count_off(gaps[r], gap_fleet, M.STOPS.gap, false) or k
    local stops = often >= k - 1 and held >= k - 1
    if starved or stopped or stops then
      out[#out + 1] = { rank = r - 1, host = rank_hosts and rank_hosts[r], ran = ran, fleet = fleet_all, ratio = ratio,
                        above = above, samples = s, gaps = gaps and gaps[r] or nil, long_gaps = long,
                        stopped_s = stop_s and stop_s[r] or nil, stop_fleet = stop_fleet, often = often, seconds = opts.seconds,
                        by = starved and "share" or stopped and "gaps" or "stops" }
    end
  end
  return out
end

-- the finding's words for a rank named by its gaps or its stops
local function detail(s)
  if s.by == "gaps" then
    return (", stopped for %.0f ms at a time in %d"):format(1e3 * stats.median(s.gaps), s.long_gaps)
  elseif s.by == "stops" then
    return (", %.0f%% of each sample in stops of %.0f ms or more, the fleet's %.0f%%, in %d"):format(
      100 * stats.median(s.stopped_s) / s.seconds, 1e3 * M.GAP.min_s, 100 * stats.median(s.stop_fleet) / s.seconds, s.often)
  end
  return ""
end

function M.findings(starved)
  local out = {}
  for _, s in ipairs(starved or {}) do
    out[#out + 1] = {
      rule = "starved_rank", severity = "warn", subject = { rank = s.rank, host = s.host },
      message = ("rank %d%s ran %.0f%% of the time while every rank spun on the clock, the fleet's median %.0f%% (%.1fx over the probe, below the fleet in %d of %d samples%s): starved of CPU or stopped from outside"):format(
        s.rank, s.host and (" (host " .. tostring(s.host) .. ")") or "", 100 * s.ran, 100 * s.fleet, s.ratio, s.above, #s.samples,
        detail(s)),
      evidence = { ran = s.ran, fleet = s.fleet, ratio = s.ratio, samples = s.samples, factor = M.FACTOR, detour_s = M.DETOUR_S,
                   gaps_s = s.gaps, by = s.by },
      remedy = "check that rank's CPU quota and cgroup (cpu.cfs_quota_us, cpu.max), its binding, and what else runs on its cores",
    }
  end
  return out
end

local function starved_sets(starved, rank_hosts)
  local ranks, hosts = {}, {}
  for _, s in ipairs(starved or {}) do
    ranks[s.rank] = s
    local h = s.host or (rank_hosts and rank_hosts[s.rank + 1])
    if h ~= nil then hosts[h] = s end
  end
  return ranks, hosts
end

local function explained(subject, s, rank_hosts)
  return { rule = "explained_by_starved_rank", severity = "info", subject = subject,
    message = ("%s: rank %d%s is starved of CPU (the cpu stage), which explains it"):format(subject.what, s.rank,
      rank_hosts and (" (host " .. tostring(rank_hosts[s.rank + 1]) .. ")") or ""),
    evidence = { starved_rank = s.rank } }
end

-- keeps the entries of list that keep(x) accepts; the others go to drop(x)
local function filter(list, keep, drop)
  local out = {}
  for _, x in ipairs(list or {}) do
    if keep(x) then out[#out + 1] = x else drop(x) end
  end
  return out
end

-- An intermittent host's warning (cs.evidence: evidence.with, its slow directions or pairs by
-- partner host) whose slow ones went mostly (WITH_STARVED) to a starved rank's host: that rank's
-- stops, not the host's link (truth harness seed 87: rank 2 of h2 stopped 134 of every 189 ms,
-- h1 warned "intermittent receiving" for 4 slow directions, 3 of them with h2).
-- Or whose rule would not have fired without them (evidence.need, the fewest the rule warns on,
-- against the rule's own count, evidence.spikes or .pairs), when more of them went to the starved
-- rank's host than its fair share (1 / its partner hosts): CI's e2e run, rank 1 of h1 stopped 60
-- of every 100 ms, h2 warned for 4 slow directions, 2 of them with h1 and one each with h0 and
-- h3, where the spike rule needs 4. A flap slow with the starved rank's host no more than with
-- any other stays warned.
M.WITH_STARVED = 0.75
local function mostly_with(f, hosts)
  local e = (f or {}).evidence or {}
  local with = e.with
  if type(with) ~= "table" or not e.intermittent then return nil end
  local all, theirs, partners, s = 0, 0, 0, nil
  for h, k in pairs(with) do
    all, partners = all + k, partners + 1
    if hosts[h] then theirs, s = theirs + k, hosts[h] end
  end
  local count = tonumber(e.spikes or e.pairs) or all
  local short = theirs > 0 and type(e.need) == "number" and count - theirs < e.need and theirs * partners > all
  return all > 0 and (theirs >= M.WITH_STARVED * all or short) and s or nil
end

-- Or the pattern's spike rule alone (evidence.spikes: its slow directions, the re-tests finding
-- nothing) on another host while a rank was starved or stopped by turns: the pattern ran beside
-- that rank's stalls, and its spikes single out nobody. Truth harness seeds 1228 and 1557 (4 x 2,
-- rank 6 of h3 stopped 100 of every 139 ms and 87 of every 170 ms, named starved): h0 warned for
-- 5 of 24 directions (1 with h3), h1 for 10 of 72 (3 with h3), each cleared by its re-tests;
-- 1557's references, pairs without either host, had a CV of 1.49. Over 408 kept namespace
-- reports a spike warning stood beside a starved rank elsewhere in those two runs only, and in
-- no flap's. A flap the re-tests caught (evidence.pairs) stays warned; this one is said (info).
local function spikes_beside(f, ranks)
  local e, sj = (f or {}).evidence or {}, (f or {}).subject or {}
  if not e.intermittent or type(e.spikes) ~= "number" or sj.host == nil then return nil end
  local first
  for r, s in pairs(ranks) do
    if not first or r < first.rank then first = s end
  end
  return first
end

function M.explain(loc, starved, rank_hosts)
  local out = {}
  if not loc or not starved or #starved == 0 then return out end
  local ranks, hosts = starved_sets(starved, rank_hosts)
  loc.links = filter(loc.links, function(l) return not ranks[l.a] and not ranks[l.b] end, function(l)
    out[#out + 1] = explained({ what = ("link %d-%d"):format(l.a, l.b), pair = { l.a, l.b } }, ranks[l.a] or ranks[l.b], rank_hosts)
  end)
  loc.hosts = filter(loc.hosts, function(h) return not hosts[h.host] end, function(h)
    out[#out + 1] = explained({ what = "host " .. tostring(h.host), host = h.host }, hosts[h.host], rank_hosts)
  end)
  loc.unconfirmed = filter(loc.unconfirmed, function(f)
    local sj = f.subject or {}
    return not (sj.rank ~= nil and ranks[sj.rank]) and not (sj.rank == nil and sj.host ~= nil and hosts[sj.host])
  end, function() end)
  local keep = {}
  for _, f in ipairs(loc.unconfirmed or {}) do
    local s, beside = mostly_with(f, hosts), nil
    if not s then beside = spikes_beside(f, ranks) end
    if s then
      out[#out + 1] = explained({ what = "host " .. tostring(f.subject.host) .. " (intermittent)", host = f.subject.host }, s, rank_hosts)
    elseif beside then
      local e = f.evidence
      out[#out + 1] = { rule = "explained_by_starved_rank", severity = "info", subject = { host = f.subject.host },
        message = ("host %s (intermittent): %d of its %d pair directions in the pattern slow, its re-tests not, while rank %d%s was starved or stopped by turns (the cpu stage): not warned; measure again once that rank runs freely"):format(
          tostring(f.subject.host), e.spikes, e.directions or 0, beside.rank,
          rank_hosts and (" (host " .. tostring(rank_hosts[beside.rank + 1]) .. ")") or ""),
        evidence = { starved_rank = beside.rank, spikes = e.spikes, directions = e.directions, with = e.with } }
    else
      keep[#keep + 1] = f
    end
  end
  loc.unconfirmed = keep
  return out
end

return M
