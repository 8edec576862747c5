-- cs.diagnose.judge: the statistics of re-test samples. The verdict's defaults (VERDICT), the
-- spread of the references, a pair's ratios to them round by round, its effect, the threshold it
-- is judged at and whether it is slow, good or still open. Pure functions over the verdict's
-- state `c` and the pairs' samples: no communication, no measuring (cs.diagnose.rounds measures).
local stats = require "cs.stats"
local M = {}

local median = stats.median

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
--                re-test pointed to gets min_samples rounds past the budget, as do the 2 worst
--                suspects at overwhelm x the fleet in the pattern that the budget left no round
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
--                slowest over all their samples are kept, then measured `rescreen_final`
--                times more the same way: only those whose median over these fresh samples is
--                at least `rescreen_keep` x their references are re-tested alone (the kept
--                were chosen as the slowest of thousands, so their own samples overstate them:
--                a healthy 4096-rank model run's kept 32 were 1.4-1.8x over those samples,
--                1.0-1.1x over fresh ones)
--   references   reference pairs of each path kind measured in every round (distinct good ranks
--                where there are enough); a round's reference is their median
M.VERDICT = { samples = 5, min_samples = 3, margin = 3, max_cv = 0.75, factor = 1.5, link_factor = 1.5, rank_factor = 1.5, screen = 1.3,
              max_samples = 15, open = 1.2, overwhelm = 4, references = 4,
              screen_link = 1.75,
              min_host_partners = 3, max_suspects = 32, rescreen = 1.5, rescreen_per_rank = 32, rescreen_final = 4,
              rescreen_keep = 1.3 }

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

-- The verdict's parts (cs.diagnose.localise, cs.diagnose.rounds, cs.diagnose.verdicts) each take
-- the verdict's state `c` (the options, rank_hosts, the measure, the trusted ranks `order`, the
-- result `out`, `retests`).

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

M.opt, M.sign_tail, M.kind, M.threshold, M.effect_of, M.judge = opt, sign_tail, kind, threshold, effect_of, judge
M.open_pair, M.above_all, M.overwhelming, M.statistics = open_pair, above_all, overwhelming, statistics

return M
