-- What the run's own matrix says, held against localisation's verdict (docs/scale.md, "The
-- statistic that decides"). Pure functions over plain tables: no communication.
--
-- off(bw, rank_hosts, factor, passes, clocks) -> { ranks = {...}, hosts = {...}, fleet_send, fleet_recv, worst,
--   spiky, spikes, explained, slow_ranks } (passes: the pattern's passes' bw, all counted for spiky; default { bw };
--   clocks: each pass's round times, cs.p2p.matrix's { clock, ran }, for spiky's wall-time share;
--   explained: 0-based ranks off one way only because their partners are off the other way;
--   slow_ranks: each 0-based rank's pair directions under the spike rule's cut, over the passes;
--   spikes: the three most spiky hosts' counts, ev.spiky or not, for the report)
--   bw[a][b]: GB/s rank a-1 sent to b-1 streaming (cs.p2p.matrix). Each rank's send rate is the
--   median of its row over ranks of other hosts (every other rank on one host), its receive rate
--   the median of its column (none with fewer than min(MIN_PAIRS, possible) partners on other
--   hosts: one noisy sample is no row); the fleet's, the median of those. A rank is off when the fleet's
--   rate is at least `factor` (OFF_FACTOR) times its own in either direction; a host when all
--   its ranks are off (several ranks), its entry then standing for them. worst: the rank with
--   the lowest rate either way (the scorecard's balance names the same kind of rank), re-tested
--   when WORST_FACTOR off.
-- direction(entry) -> "sending" | "receiving" | "both": which way an entry's rates are slow.
-- force(ev, stragglers) -> { ranks = {r...}, hosts = {h...} }: the suspects localisation must
--   re-test whatever its screen says (the matrix's off rows and columns, the ranks the sweep's
--   collectives waited for, the worst rank, a host with far more slow pair directions than the
--   others: ev.spiky).
-- annotate(loc, ev): the direction and rates of each named host and rank (entry.direction,
--   entry.send_gbs, entry.recv_gbs, entry.fleet_gbs).
-- shared_cpus(findings, oversubscribed) -> findings: those on a host with more ranks than CPUs as info.
-- host_warnings(findings) -> { [host] = its first not_confirmed warning on the host alone },
--   { [rank] = its first on the rank }: where a rank's warning joins its host's, or its own (here
--   and cs.diagnose.findings).
-- unconfirmed(ev, loc, rank_hosts, bytes) -> findings for what the evidence showed and the verdict
--   did not name: never silence (rule "not_confirmed", warn: maybe intermittent); and for a host
--   or rank the re-tests found slow in some rounds only (intermittent). A named link at a spiky
--   host that was not named leaves loc.links for an info finding: the host's flap explains it.
local stats = require "cs.stats"
local spike_rule = require "cs.evidence.spikes"
local flap_rule = require "cs.evidence.flap"
local watch_rule = require "cs.evidence.watch"
local named, link_end = flap_rule.internal.named, flap_rule.internal.link_end
local M = {}

M.spikes, M.flap, M.watch = spike_rule, flap_rule, watch_rule  -- the package's parts (docs/stdlib.md)
M.SPIKE = spike_rule.SPIKE  -- the pattern's spike rule (cs.evidence.spikes)
M.FLAP = flap_rule.FLAP    -- the re-tests' flap rule (cs.evidence.flap)
M.WATCH = watch_rule.WATCH  -- the watch's rule (cs.evidence.watch)

M.OFF_FACTOR = 3      -- a matrix row or column this many times off the fleet's median is a suspect
M.MIN_PAIRS = 3       -- a rank's rate needs this many measured partners on other hosts (or all it has)
M.DIRECTION = 1.5     -- one direction at least this much slower, the other not: that direction
M.WORST_FACTOR = 1.5  -- the worst rank is re-tested when at least this far off (the verdict's factor)

local median = stats.median

local function largest(xs)
  local m = xs[1]
  for i = 2, #xs do if xs[i] > m then m = xs[i] end end
  return m
end

local function rates(bw, rank_hosts)
  local n, hosts = #rank_hosts, {}
  for _, h in ipairs(rank_hosts) do hosts[h] = true end
  local one_host = next(hosts, next(hosts)) == nil
  -- each row's measured entries only (pairs): a sampled plan's rows are sparse, and a scan of
  -- n x n cells was minutes at 16 384 ranks (scripts/scale_model.sh)
  local s, r = {}, {}
  for a = 1, n do s[a], r[a] = {}, {} end
  for a = 1, n do
    for b, x in pairs(bw[a] or {}) do
      if type(b) == "number" and r[b] and a ~= b and x and (one_host or rank_hosts[a] ~= rank_hosts[b]) then
        s[a][#s[a] + 1] = x
        r[b][#r[b] + 1] = x
      end
    end
  end
  -- a rank with fewer partners than min(MIN_PAIRS, the ranks it could pair with) has no rate: a
  -- reduced plan (host_plan) gives some ranks one pair, whose one noisy sample is no row
  local count = {}
  for _, h in ipairs(rank_hosts) do count[h] = (count[h] or 0) + 1 end
  local send, recv, send_best, recv_best = {}, {}, {}, {}
  for a = 1, n do
    local need = math.min(M.MIN_PAIRS, one_host and n - 1 or n - count[rank_hosts[a]])
    if #s[a] >= need then send[a], send_best[a] = median(s[a]), largest(s[a]) end
    if #r[a] >= need then recv[a], recv_best[a] = median(r[a]), largest(r[a]) end
  end
  return send, recv, send_best, recv_best
end

local function values(t, n)
  local out = {}
  for i = 1, n do if t[i] then out[#out + 1] = t[i] end end
  return out
end

local function ratio(fleet, own) return (fleet and own and own > 0) and fleet / own or nil end

function M.direction(e)
  local s, r = e.send_ratio or 1, e.recv_ratio or 1
  if s >= M.DIRECTION and r < M.DIRECTION then return "sending" end
  if r >= M.DIRECTION and s < M.DIRECTION then return "receiving" end
  return "both"
end

-- A rank's rates on one basis: "median" (its row's and column's medians against the fleet's
-- medians) or "best" (its fastest pair each way against the fleet's upper quartile of those: a pair runs
-- no faster than its slower end, so a rank's best pair bounds it; when half the hosts are slow,
-- every rank's median is a slow pair's and only the best tells them apart: 2 of 4 hosts at 100
-- Mbit, every median 0.012 GB/s, the good hosts' best 0.07-0.1, the slow hosts' 0.012).
local function basis_entry(ev, a, rank_hosts, best)
  local s, r = (best and ev.send_best or ev.send)[a], (best and ev.recv_best or ev.recv)[a]
  local fs, fr = best and ev.fleet_send_best or ev.fleet_send, best and ev.fleet_recv_best or ev.fleet_recv
  local e = { rank = a - 1, host = rank_hosts[a], send_gbs = s, recv_gbs = r, fleet_send = fs, fleet_recv = fr,
              send_ratio = ratio(fs, s), recv_ratio = ratio(fr, r), basis = best and "best" or "median" }
  e.ratio = math.max(e.send_ratio or 0, e.recv_ratio or 0)
  e.direction = M.direction(e)
  return e
end

-- the median basis, unless only the best one sets the rank off (ev.factor)
local function rank_entry(ev, a, rank_hosts)
  local m, b = basis_entry(ev, a, rank_hosts, false), basis_entry(ev, a, rank_hosts, true)
  return (m.ratio < (ev.factor or M.OFF_FACTOR) and b.ratio >= (ev.factor or M.OFF_FACTOR)) and b or m
end

-- several ranks' entries as one (a host's): the medians of their rates, ratios and fleets
local function merged(entries, fields)
  local h = fields
  for _, k in ipairs { "send_gbs", "recv_gbs", "send_ratio", "recv_ratio", "fleet_send", "fleet_recv" } do
    local xs = {}
    for _, e in ipairs(entries) do xs[#xs + 1] = e[k] end
    h[k] = median(xs)
  end
  h.ratio = math.max(h.send_ratio or 0, h.recv_ratio or 0)
  h.direction = M.direction(h)
  for _, e in ipairs(entries) do
    if h.basis == nil or h.basis == e.basis then h.basis = e.basis else h.basis = "median"; break end
  end
  return h
end

-- the hosts whose every rank is off (with at least two ranks), merged into one entry each
local function off_hosts(ev, rank_hosts)
  local by = {}
  for _, e in ipairs(ev.ranks) do
    by[e.host] = by[e.host] or {}
    table.insert(by[e.host], e)
  end
  local count = {}
  for _, h in ipairs(rank_hosts) do count[h] = (count[h] or 0) + 1 end
  local hosts, ranks = {}, {}
  for _, e in ipairs(ev.ranks) do
    local group = by[e.host]
    if count[e.host] >= 2 and #group == count[e.host] then
      if group[1] == e then
        local list = {}
        for _, x in ipairs(group) do list[#list + 1] = x.rank end
        hosts[#hosts + 1] = merged(group, { host = e.host, ranks = list })
      end
    else
      ranks[#ranks + 1] = e
    end
  end
  return hosts, ranks
end

-- A rank off one way only because its partners are off the other way is explained by them, not
-- a suspect: two of 4 hosts (1 rank each) sending at 76 Mbit made the two good ranks' receive
-- medians theirs (2 of 3 senders), all 4 ranks were off and forced, and no good rank was left to
-- re-test with: nobody named (truth harness seed 117, 8.4x in the pattern). Explained when the
-- rank's pairs that way with partners not off the other way (at least one) are all within
-- `factor` of the fleet's rate: a rank with a fault of its own keeps a slow pair with a good
-- partner. Returns { [a] = true } (1-based).
local function explained_away(ev, bw, rank_hosts, entries, factor)
  local out, n = {}, #rank_hosts
  local one_host = true
  for a = 2, n do one_host = one_host and rank_hosts[a] == rank_hosts[1] end
  local function off(e, way) return (e[way .. "_ratio"] or 0) >= factor end
  for a = 1, n do
    local e = entries[a]
    local way = off(e, "recv") and not off(e, "send") and "recv" or off(e, "send") and not off(e, "recv") and "send"
    -- on the medians only: a rank off by its best pair is off with every partner (seed 26: two
    -- hosts at 119 Mbit, 2.8x on the median, 4.7x on the best pair, were "explained")
    if way and e.basis == "median" then
      local other = way == "recv" and "send" or "recv"
      local fleet = way == "recv" and e.fleet_recv or e.fleet_send
      local seen, ok = 0, fleet ~= nil
      for b = 1, n do
        if b ~= a and (one_host or rank_hosts[b] ~= rank_hosts[a]) and not off(entries[b], other) then
          local x = way == "recv" and (bw[b] or {})[a] or (bw[a] or {})[b]
          if type(x) == "number" then
            seen = seen + 1
            ok = ok and x > 0 and fleet / x < factor
          end
        end
      end
      if ok and seen > 0 then out[a] = true end
    end
  end
  return out
end

function M.off(bw, rank_hosts, factor, passes, clocks)
  factor = factor or M.OFF_FACTOR
  local n = #rank_hosts
  local ev = { ranks = {}, hosts = {}, factor = factor }
  ev.send, ev.recv, ev.send_best, ev.recv_best = rates(bw, rank_hosts)
  ev.fleet_send, ev.fleet_recv = median(values(ev.send, n)), median(values(ev.recv, n))
  -- the fleet's best: the upper quartile of the ranks' best pairs (the median of 4 ranks' bests,
  -- 2 of them on slow hosts, was halfway between a slow host's and a good one's: 2.5x)
  local function q3(xs) return #xs > 0 and stats.percentile(xs, 75) or nil end
  ev.fleet_send_best, ev.fleet_recv_best = q3(values(ev.send_best, n)), q3(values(ev.recv_best, n))
  local lowest, entries = nil, {}
  for a = 1, n do entries[a] = rank_entry(ev, a, rank_hosts) end
  local explained = explained_away(ev, bw, rank_hosts, entries, factor)
  for a = 1, n do
    local e = entries[a]
    if e.ratio >= factor and not explained[a] then ev.ranks[#ev.ranks + 1] = e end
    if e.ratio > 0 and not explained[a] and (not lowest or e.ratio > lowest.ratio) then lowest = e end
  end
  ev.worst = lowest
  ev.explained = {}
  for a = 1, n do if explained[a] then ev.explained[#ev.explained + 1] = a - 1 end end
  ev.hosts, ev.ranks = off_hosts(ev, rank_hosts)
  ev.spiky, ev.spikes, ev.slow_ranks = spike_rule.spiky(passes or { bw }, rank_hosts, clocks)
  return ev
end

function M.force(ev, stragglers)
  local f, seen = { ranks = {}, hosts = {} }, {}
  local hs = {}
  for _, h in ipairs(ev.hosts) do hs[h.host] = true; f.hosts[#f.hosts + 1] = h.host; for _, r in ipairs(h.ranks) do seen[r] = true end end
  for _, h in ipairs(ev.spiky or {}) do if not hs[h.host] then f.hosts[#f.hosts + 1] = h.host end end
  local function add(r) if r and not seen[r] then seen[r] = true; f.ranks[#f.ranks + 1] = r end end
  for _, e in ipairs(ev.ranks) do add(e.rank) end
  for _, s in ipairs(stragglers or {}) do add(s.rank) end
  if ev.worst and ev.worst.ratio >= M.WORST_FACTOR then add(ev.worst.rank) end
  return f
end

-- ways(ev, rank_hosts) -> { [rank] = "sending" | "receiving" }: the way the evidence found each
-- off rank slow (its own entry, else its host's, else its spiky host's), where it found one way
-- only. The re-tests stream a pair of such a rank that way (cs.p2p.retest_from): the matrix's
-- slower way of each pair is one sample, and noise picked the wrong one (truth harness seed 418,
-- h2 receiving at 88 Mbit: its pair 4-11 0.0082 GB/s out of h2 and 0.0105 in, re-tested out of
-- h2, unshaped, 1.02x; h2 cleared and its rank 5 named alone).
function M.ways(ev, rank_hosts)
  local ways = {}
  local function set(r, w) if ways[r] == nil and (w == "sending" or w == "receiving") then ways[r] = w end end
  for _, e in ipairs(ev.ranks or {}) do set(e.rank, e.direction) end
  for _, h in ipairs(ev.hosts or {}) do for _, r in ipairs(h.ranks or {}) do set(r, h.direction) end end
  for _, h in ipairs(ev.spiky or {}) do
    for a, x in ipairs(rank_hosts or {}) do if x == h.host then set(a - 1, h.way) end end
  end
  return ways
end

-- the evidence entry of a host or rank, if any (a host's ranks' own entries when it has none)
local function rates_of(ev, rank_hosts, host, rank)
  for _, h in ipairs(ev.hosts) do if h.host == host then return h end end
  if rank then return rank_entry(ev, rank + 1, rank_hosts) end
  local group = {}
  for a, h in ipairs(rank_hosts) do
    if h == host then group[#group + 1] = rank_entry(ev, a, rank_hosts) end
  end
  return merged(group, {})
end

function M.annotate(loc, ev, rank_hosts)
  for _, list in ipairs { loc.hosts or {}, loc.ranks or {} } do
    for _, x in ipairs(list) do
      local e = rates_of(ev, rank_hosts, x.host or rank_hosts[x.rank + 1], x.host == nil and x.rank or nil)
      x.direction, x.send_gbs, x.recv_gbs = e.direction, e.send_gbs, e.recv_gbs
      x.fleet_gbs = { send = e.fleet_send or ev.fleet_send, recv = e.fleet_recv or ev.fleet_recv }
    end
  end
end

-- what the re-tests found for a host or rank (report's localisation.tested): the slowest of its
-- pairs as a ratio to the references and as GB/s (bytes per message / median us)
local function retested(loc, host, rank, bytes)
  local best
  for _, t in ipairs(loc.tested or {}) do
    if (host and t.host == host) or (rank and t.rank == rank) then
      for _, p in ipairs(t.pairs or {}) do
        if not p.shown_good and p.ratio and (p.rounds or 0) > 0 and (not best or p.ratio > best.ratio) then
          best = { ratio = p.ratio, gbs = p.median_us and p.median_us > 0 and bytes / p.median_us / 1e3 or nil }
        end
      end
    end
  end
  return best
end


local function rate_text(e)
  local d, best = e.direction, e.basis == "best" and "its best pair " or ""
  local fleet = e.basis == "best" and "the fleet's best" or "the fleet"
  if d == "sending" then return ("%ssends at %.3g GB/s (%s: %.3g)"):format(best, e.send_gbs, fleet, e.fleet_send) end
  if d == "receiving" then return ("%sreceives at %.3g GB/s (%s: %.3g)"):format(best, e.recv_gbs, fleet, e.fleet_recv) end
  return ("%ssends at %.3g and receives at %.3g GB/s (%s: %.3g, %.3g)"):format(best, e.send_gbs or 0, e.recv_gbs or 0,
    fleet, e.fleet_send or 0, e.fleet_recv or 0)
end

-- links: the named slow links at the subject ("a-b"), which explain it (info explained_by_links)
local function unconfirmed_finding(e, what, subject, rt, loc, links)
  local after, severity = nil, "warn"
  if rt then
    after = ("re-tested alone: %.2fx the reference pairs%s"):format(rt.ratio, rt.gbs and (", %.3g GB/s"):format(rt.gbs) or "")
  else
    local why = "not re-tested"
    for _, u in ipairs(loc.undecided or {}) do
      if (e.host and u.host == e.host) or (e.rank and u.rank == e.rank) then why = "re-test left undecided (" .. tostring(u.why) .. ")" end
    end
    after, severity = why, "info"  -- not measured again: what the pattern showed, no more
  end
  -- off by its best pair only: a bound from a few pairs (a sampled plan gave a healthy rank of
  -- 8 x 2 hosts 3.0x, cleared 1.01x re-tested), re-tested but not warned about
  if e.basis == "best" then severity = "info" end
  local f = { rule = "not_confirmed", severity = severity, subject = subject,
           message = ("%s %s in the pattern, %.1fx off; %s: not confirmed, maybe intermittent"):format(what, rate_text(e), e.ratio, after),
           evidence = { pattern = { send_gbs = e.send_gbs, recv_gbs = e.recv_gbs, fleet_send_gbs = e.fleet_send,
                                    fleet_recv_gbs = e.fleet_recv, ratio = e.ratio, direction = e.direction },
                        retest = rt or false },
           remedy = "measure again (a longer --tier); watch that host's link counters for flaps or bursts of drops" }
  if links and #links > 0 then
    f.rule, f.severity, f.remedy, f.evidence.links = "explained_by_links", "info", nil, links
    f.message = ("%s %s in the pattern, %.1fx off; %s: at the named slow link%s %s, which explain%s it"):format(what, rate_text(e),
      e.ratio, after, #links > 1 and "s" or "", table.concat(links, ", "), #links > 1 and "" or "s")
  end
  return f
end

-- A host or rank the re-tests measured slow in some rounds and not in others (every one of its
-- pairs above the threshold in at least INTERMITTENT.above of INTERMITTENT.rounds or more
-- rounds, too few for a verdict): intermittent, not silence.
M.INTERMITTENT = { above = 2, rounds = 4 }

local function intermittent(loc, rank_hosts, out, seen)
  for _, t in ipairs(loc.tested or {}) do
    local subject = t.host or t.rank
    local host = t.host or (t.rank and rank_hosts[t.rank + 1])
    if subject ~= nil and t.pair == nil and not seen[subject] and not seen[host] and not named(loc, t.host, t.rank)
        and not link_end(loc, rank_hosts, t.host, t.rank) then
      local n, worst = 0, nil
      for _, p in ipairs(t.pairs or {}) do
        if not p.shown_good then
          -- slow in every round is no intermittence (a 11x pair, 11 of 11 rounds, left undecided by
          -- the budget, was called intermittent)
          local some = p.above >= M.INTERMITTENT.above and p.above < p.rounds and p.rounds >= M.INTERMITTENT.rounds
          if not some then n = -1; break end
          n = n + 1
          if not worst or p.ratio > worst.ratio then worst = p end
        end
      end
      if n > 0 then
        seen[subject], seen[host] = true, true
        local what = t.host and ("host " .. t.host) or ("rank %d (host %s)"):format(t.rank, tostring(rank_hosts[t.rank + 1]))
        -- info, not a warning: a host whose pairs were above the threshold in 5 of 15 rounds at a
        -- median of 1.25x was the end of a named slow link (e2e_truth_netns), not intermittent
        out[#out + 1] = { rule = "not_confirmed", severity = "info",
          subject = t.host and { host = t.host } or { rank = t.rank, host = rank_hosts[t.rank + 1] },
          message = ("%s: intermittent; its pairs re-tested alone were above the threshold (%.2fx) in %d of %d rounds, not in the others (median %.2fx): not confirmed as slow"):format(
            what, t.threshold or 0, worst.above, worst.rounds, worst.ratio),
          evidence = { retest = t, intermittent = true },
          remedy = "watch that host's link for flaps (carrier changes, FEC and CRC counters) and measure again" }
      end
    end
  end
end

local function spikes(ev, loc, rank_hosts, out, seen)
  for _, h in ipairs(ev.spiky or {}) do
    if not seen[h.host] and not named(loc, h.host, nil) and not link_end(loc, rank_hosts, h.host, nil) then
      seen[h.host] = true
      out[#out + 1] = { rule = "not_confirmed", severity = "warn", subject = { host = h.host },
        message = ("host %s: intermittent%s; %d of its %d pair directions in the pattern ran under a third of the fleet's median rate%s (%.0f %% of its transfer time%s), with partners on %d hosts (no other host more than %d), and its re-tests did not find it slow: a link that flaps or drops in bursts"):format(
          h.host, h.way == "both" and "" or (" " .. h.way), h.n, h.total,
          h.way == "both" and "" or (", " .. h.way), 100 * (h.time_share or 0),
          h.wall_share and (", of the rounds it took part in %.0f %% of the time"):format(100 * h.wall_share) or "", h.partners, h.next),
        evidence = { intermittent = true, direction = h.way, spikes = h.n, directions = h.total, partners = h.partners, next = h.next,
                     time_share = h.time_share, wall_share = h.wall_share, with = h.with, need = h.need },
        remedy = "watch that host's link for flaps (carrier changes, FEC and CRC counters, pause frames) and measure again" }
    end
  end
end

-- shared_cpus(findings, oversubscribed): the not_confirmed findings on a host that runs more
-- ranks than it has CPUs become info, saying why: there a rank waiting for a CPU is slow in one
-- measurement and not in the next (4 ranks on 2 CPUs: one rank's column 3.8x off in the pattern,
-- 0.95-1.15x re-tested, in 2 of 11 healthy runs), as the slow_link rule does for such a host.
function M.shared_cpus(findings, oversubscribed)
  for _, f in ipairs(findings or {}) do
    local h = f.subject and f.subject.host
    if f.rule == "not_confirmed" and h and (oversubscribed or {})[h] then
      f.severity = "info"
      f.message = f.message .. ("; host %s runs more ranks than it has CPUs, so its ranks wait for a CPU by turns"):format(h)
      f.remedy = "bind ranks to distinct cores (mpirun --bind-to core) or run fewer ranks per host, then measure again"
    end
  end
  return findings
end

-- A link named at a host the pattern found spiky (its slow directions with partners on several
-- hosts, at most one_partner of them with one) and the verdict did not name: the host's flap,
-- caught slow in a link's few re-test rounds and not in its ends' (truth harness seed 16: host h7
-- on 1.5 s, off 3.6 s; link 6-15 named 9.5x on 2 rounds cut by the budget, three more of h7's
-- pairs 46x in 1 of 2). A link of its own is slow with one partner only: that host is not spiky.
-- But several named links of the host, all to one other host, which has the most of the host's
-- slow directions, are the link between the two (truth harness seeds 904 and 1856, 8 x 2, a link
-- h5-h6 at 79 Mbit: all 4 rank pairs of the two hosts named 2.1-4.4x, 5 of h5's 7 slow directions
-- with h6, and the 4 explained away as h5's flap, h5 warned and the link unnamed). Over 497 kept
-- namespace reports links were explained so in 3 runs: those two (4 links each to one host) and
-- a flap's (seed 835, one link).
local function link_between(h, links, rank_hosts, with)
  local other
  for _, l in ipairs(links) do
    local o = rank_hosts[l.a + 1] == h and rank_hosts[l.b + 1] or rank_hosts[l.a + 1]
    if other ~= nil and o ~= other then return false end
    other = o
  end
  if #links < 2 or other == nil then return false end
  local mine = (with or {})[other] or 0
  for _, k in pairs(with or {}) do
    if k > mine then return false end
  end
  return true
end

local function flap_links(ev, loc, rank_hosts, out)
  local spiky = {}
  for _, h in ipairs(ev.spiky or {}) do
    if not named(loc, h.host, nil) then spiky[h.host] = h end
  end
  if next(spiky) == nil then return end
  local function spiky_end(l)
    return spiky[rank_hosts[l.a + 1]] and rank_hosts[l.a + 1] or (spiky[rank_hosts[l.b + 1]] and rank_hosts[l.b + 1])
  end
  local at = {}
  for _, l in ipairs(loc.links or {}) do
    local h = spiky_end(l)
    if h then at[h] = at[h] or {}; table.insert(at[h], l) end
  end
  for h, links in pairs(at) do
    if link_between(h, links, rank_hosts, spiky[h].with) then spiky[h] = nil end
  end
  local keep = {}
  for _, l in ipairs(loc.links or {}) do
    local h = spiky_end(l)
    if h then
      out[#out + 1] = { rule = "explained_by_intermittent_host", severity = "info", subject = { pair = { l.a, l.b }, host = h },
        message = ("link %d-%d measured slow (%.1fx) at host %s, whose pair directions in the pattern were slow with partners on %d hosts: its flap, not this link's fault"):format(
          l.a, l.b, l.score or 0, tostring(h), spiky[h].partners),
        evidence = { link = l, intermittent_host = h },
        remedy = "see the finding on host " .. tostring(h) }
    else
      keep[#keep + 1] = l
    end
  end
  loc.links = keep
end

-- A rank's not_confirmed warning on a host that has its own (a flap seen on one of its ranks'
-- rows, 3x off in the pattern, and on the host's slow directions): one warning for one place,
-- the host's, with the rank's words and numbers (evidence.ranks). Truth harness seed 1724 (4 x 2,
-- h1 sending at 52 Mbit behind a 4 MB bucket, on 2.8 s, off 1.6 s): h1 warned intermittent
-- sending, and its rank 3 warned apart, 6.7x off in the pattern and 1.04x re-tested, an innocent
-- by the harness's score though on the right host. Over 435 kept namespace reports a rank's
-- warning stood beside its host's in that run and in one of 8 x 1 (seed 1234, a flap too).
function M.host_warnings(findings)
  local by, by_rank = {}, {}
  for _, f in ipairs(findings or {}) do
    local sj = f.subject or {}
    if f.rule == "not_confirmed" and f.severity == "warn" then
      if sj.rank ~= nil then by_rank[sj.rank] = by_rank[sj.rank] or f
      elseif sj.host ~= nil then by[sj.host] = by[sj.host] or f end
    end
  end
  return by, by_rank
end

local function fold_ranks(out)
  local host_warning, keep = M.host_warnings(out), {}
  for _, f in ipairs(out) do
    local sj = f.subject or {}
    local hw = f.rule == "not_confirmed" and f.severity == "warn" and sj.rank ~= nil and host_warning[sj.host]
    if hw then
      hw.evidence = hw.evidence or {}
      hw.evidence.ranks = hw.evidence.ranks or {}
      table.insert(hw.evidence.ranks, { rank = sj.rank, message = f.message, evidence = f.evidence })
      hw.message = ("%s; and %s"):format(hw.message, f.message)
    else
      keep[#keep + 1] = f
    end
  end
  return keep
end

-- the named slow links at a rank ("a-b"): a rank off in the pattern at an end of named links
-- (their verdicts showed it good with others) is explained by them, as info (truth harness seed
-- 2339, 4 x 2, a 56 Mbit link h1-h3: rank 3 received 4.0x off the fleet through its two pairs
-- over the link, 1.00x re-tested, and was warned about beside the four named links)
local function links_at(loc, rank)
  local at = {}
  for _, l in ipairs(loc.links or {}) do
    if l.a == rank or l.b == rank then at[#at + 1] = ("%d-%d"):format(l.a, l.b) end
  end
  return at
end

function M.unconfirmed(ev, loc, rank_hosts, bytes)
  local out, seen = {}, {}
  flap_links(ev, loc, rank_hosts, out)
  for _, h in ipairs(ev.hosts) do
    if not named(loc, h.host, nil) then
      local any = false
      for _, r in ipairs(h.ranks) do any = any or named(loc, nil, r) end
      if not any then
        seen[h.host] = true
        out[#out + 1] = unconfirmed_finding(h, "host " .. h.host, { host = h.host, ranks = h.ranks },
          retested(loc, h.host, nil, bytes), loc)
      end
    end
  end
  for _, e in ipairs(ev.ranks) do
    if not named(loc, rank_hosts[e.rank + 1], e.rank) then
      seen[e.rank] = true
      out[#out + 1] = unconfirmed_finding(e, ("rank %d (host %s)"):format(e.rank, e.host), { rank = e.rank, host = e.host },
        retested(loc, nil, e.rank, bytes), loc, links_at(loc, e.rank))
    end
  end
  -- a rank off one way only because its partners are off the other way: said, never silent
  for _, r in ipairs(ev.explained or {}) do
    if not seen[r] and not named(loc, rank_hosts[r + 1], r) then
      local e = rank_entry(ev, r + 1, rank_hosts)
      out[#out + 1] = { rule = "explained_by_partners", severity = "info", subject = { rank = r, host = rank_hosts[r + 1] },
        message = ("rank %d (host %s) %s in the pattern, %.1fx off: only with partners that are slow %s themselves, which explains it"):format(
          r, tostring(rank_hosts[r + 1]), e.direction == "sending" and ("sends at %.3g GB/s"):format(e.send_gbs or 0)
            or ("receives at %.3g GB/s"):format(e.recv_gbs or 0), e.ratio, e.direction == "sending" and "receiving" or "sending"),
        evidence = { ratio = e.ratio, direction = e.direction } }
    end
  end
  local pointed = {}  -- the hosts the pattern's evidence forces (off or spiky)
  for _, h in ipairs(M.force(ev, {}).hosts) do pointed[h] = true end
  flap_rule.flapping(loc, rank_hosts, out, seen, pointed, ev.slow_ranks)
  spikes(ev, loc, rank_hosts, out, seen)
  intermittent(loc, rank_hosts, out, seen)
  return fold_ranks(out)
end

return M
