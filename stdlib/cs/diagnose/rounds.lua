-- cs.diagnose.rounds: the measuring of localisation. A phase's rounds (the subjects' pairs and
-- their references, interleaved, `samples` rounds, then more for the subjects still open) and the
-- rescreen's stages, each round handed to the caller's measure(batch, must [, together]) (the
-- communication is there: cs.p2p.localise's collective rounds, or a model). Leaves the samples
-- and their statistics (cs.diagnose.judge) on the pairs; judges nobody.
local stats = require "cs.stats"
local J = require "cs.diagnose.judge"
local P = require "cs.diagnose.partners"
local M = {}

local median = stats.median
local kind, judge, threshold, effect_of = J.kind, J.judge, J.threshold, J.effect_of
local open_pair, statistics = J.open_pair, J.statistics
local reference_pairs, disjoint_rounds, free_references = P.reference_pairs, P.disjoint_rounds, P.free_references

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
    local q = list[j]
    batch[i], idx[i] = { q[1], q[2], like = q.like, way_of = q.way_of, at = q.at }, j
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

-- One pass of a rescreen stage: every round of `rounds` (disjoint pairs) measured at once
-- (measure(batch, false, true)) with up to two reference pairs of good free ranks of each kind;
-- returns { {pair, ratio} } (each sample over the median of the pass's references of its path
-- kind; without references of a kind, the median of the pass's own samples of it, nearly all of
-- good pairs) and whether the budget cut the pass.
local function rescreen_pass(c, rounds, busy, pool, kinds, st)
  local refs, got, cut = {}, {}, false
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
  local norm, own, out = {}, {}, {}
  for _, g in ipairs(got) do own[g[1].kind] = own[g[1].kind] or {}; table.insert(own[g[1].kind], g[2]) end
  for k in pairs(kinds) do norm[k] = median(refs[k] or {}) or median(own[k] or {}) end
  for _, g in ipairs(got) do
    local m = norm[g[1].kind]
    if m and m > 0 then out[#out + 1] = { g[1], g[2] / m } end
  end
  return out, cut
end

-- One stage: `reps` passes over `list`; each sample's log ratio added to its pair's score.
-- Returns whether the budget cut it; `fresh` (optional) collects each pair's ratios.
local function rescreen_stage(c, list, pool, info, reps, fresh)
  local rounds, busy = disjoint_rounds(list)
  local kinds = {}
  for _, p in ipairs(list) do p.kind = kind(c, p.a, p.b); kinds[p.kind] = true end
  local st = { pairs = #list, rounds = #rounds * reps, samples = reps, references = 0, final = fresh and true or nil }
  info.stages[#info.stages + 1] = st
  for _ = 1, reps do
    local got, cut = rescreen_pass(c, rounds, busy, pool, kinds, st)
    for _, g in ipairs(got) do
      g[1].lsum, g[1].k = g[1].lsum + math.log(g[2]), g[1].k + 1
      if fresh then fresh[g[1]] = fresh[g[1]] or {}; table.insert(fresh[g[1]], g[2]) end
    end
    if cut then return true end
  end
  return false
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
-- made a good pair slow once rarely does so again; a slow link stays slow. Then the final stage:
-- rescreen_final fresh samples of the kept, and only those with a median ratio over them of at
-- least rescreen_keep stay (the slowest of thousands are chosen on their own samples, which
-- therefore overstate them; fresh ones do not: a healthy run's kept 32 links then cost 500
-- re-tests alone, 3.5 minutes of a 4096-rank run). Returns the kept pairs, the slowest first
-- (score: their mean ratio), and fills `info` (stages, cut, kept, cleared).
local function rescreen(c, wide, pool, info)
  for _, p in ipairs(wide) do p.lsum, p.k, p.pattern_score = math.log(math.max(p.score, 1e-9)), 1, p.score end
  local function rank(list) table.sort(list, function(x, y) return x.lsum / x.k > y.lsum / y.k end) end
  info.stages = {}
  local list = wide
  while #list > c.cap do
    local cut = rescreen_stage(c, list, pool, info, #info.stages == 0 and 2 or 4)
    rank(list)
    if cut then info.cut = true; break end
    local keep = math.max(c.cap, math.ceil(#list / 16))
    local next_list = {}
    for i = 1, math.min(keep, #list) do next_list[i] = list[i] end
    list = next_list
  end
  if not info.cut and c.rescreen_final > 0 then
    local fresh = {}
    info.cut = rescreen_stage(c, list, pool, info, c.rescreen_final, fresh) or nil
    if not info.cut then
      local kept = {}
      for _, p in ipairs(list) do
        if (median(fresh[p] or {}) or 0) >= c.rescreen_keep then kept[#kept + 1] = p end
      end
      info.cleared, list = #list - #kept, kept
    end
  end
  rank(list)
  for _, p in ipairs(list) do p.score, p.samples_rescreen = math.exp(p.lsum / p.k), p.k - 1 end
  info.kept = math.min(#list, c.cap)
  return list
end

M.run_phase, M.rescreen = run_phase, rescreen

return M
