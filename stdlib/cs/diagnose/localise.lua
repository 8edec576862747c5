-- cs.diagnose.localise: localisation's driver, the one place its steps run in order. The
-- screening (cs.diagnose.screen) says whom to re-test; the re-tests are built and judged by
-- cs.diagnose.verdicts, their rounds measured through the caller's `measure` function by
-- cs.diagnose.rounds: this module communicates only through `measure`. Recipes call
-- cs.p2p.localise, which runs it on rank 0 with a collective measure (scripts/scale_model.lua
-- runs it with a model).
local J = require "cs.diagnose.judge"
local S = require "cs.diagnose.screen"
local R = require "cs.diagnose.rounds"
local V = require "cs.diagnose.verdicts"
local G = require "cs.diagnose.grouping"
local M = {}

local opt, above_all = J.opt, J.above_all
local run_phase, rescreen = R.run_phase, R.rescreen
local host_tests, judge_hosts, clear_hosts, rank_link_tests = V.host_tests, V.judge_hosts, V.clear_hosts, V.rank_link_tests
local judge_rank, judge_link, slow_partners, pointed_links = V.judge_rank, V.judge_link, V.slow_partners, V.pointed_links
local cleared_rank_links, group_ranks = V.cleared_rank_links, G.group_ranks

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
  for _, k in ipairs { "factor", "link_factor", "rank_factor", "margin", "max_cv", "max_samples", "open", "overwhelm", "references", "rescreen_final", "rescreen_keep" } do
    c[k] = opt(args, k)
  end
  c.K, c.kmin, c.cap, c.screen_link = opt(args, "samples"), opt(args, "min_samples"), opt(args, "max_suspects"), opt(args, "screen_link")
  local narrow = measure and { floor = opt(args, "rescreen"), per_rank = opt(args, "rescreen_per_rank"),
                               run = function(wide, pool, info) return rescreen(c, wide, pool, info) end } or nil
  local host_sus, loc, order, bad_host, under = S.suspects(#rank_hosts, values, rank_hosts, opt(args, "screen"), opt(args, "screen_link"),
    opt(args, "min_host_partners"), c.cap, narrow, args.force)
  c.order, c.bad_host, c.loc, c.values = order, bad_host, loc, values
  local out = { hosts = {}, ranks = {}, links = {}, references = {}, undecided = {}, under_measured = under, tested = {},
                suspects = { hosts = #host_sus, ranks = #loc.ranks, links = #loc.pairs + loc.skipped_links, rescreen = loc.rescreen,
                              untested_hosts = loc.untested_hosts } }
  c.out = out
  -- 1. hosts
  local htests = host_tests(c, host_sus)
  run_phase(c, htests, true)
  local named_host = judge_hosts(c, htests, loc)
  -- 2. ranks and links
  clear_hosts(c, host_sus, loc, named_host, htests)
  V.readmit_link_ends(c, loc)
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
  -- ... and so do the 2 worst suspects whose pattern measurement was `overwhelm` x the fleet's
  -- (the screening's score), with no round at all: a fault that slow is no noise, and "the
  -- budget ran out" is no verdict on it (namespace hosts, quick tier: the 4 pairs of a 109 Mbit
  -- link at 9x in the pattern, its two ends cleared as hosts, left undecided)
  local cut, promising, glaring = {}, 0, 0
  for _, t in ipairs(rest) do
    local p = t.pairs[1]
    if not p.decidable then
      if t.entry.from_host_test and t.what == "rank" then cut[#cut + 1] = t
      elseif promising < 2 and above_all(c, p) then cut[#cut + 1] = t; promising = promising + 1
      elseif glaring < 2 and (t.entry.score or 0) >= c.overwhelm then cut[#cut + 1] = t; glaring = glaring + 1 end
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
  group_ranks(c, loc, { htests, tests, pointed })
  G.links_at_one_rank(c)
  G.slow_alone(c)
  G.slow_by_turns(c)
  -- References noisier than max_cv: a suspect is still named when its effect clears the
  -- threshold their spread sets (1 + margin x cv), but nothing is shown good (no link is named)
  -- and when nobody is named the finding says that the run was too noisy, not that it is healthy.
  if out.noisy and #out.hosts + #out.ranks + #out.links + #(out.rank_links or {}) > 0 then out.noisy = nil end
  if out.noisy then
    out.noisy.message = ("measurements too noisy to localise: CV %.2f of the %s-host reference pairs (at most %.2f for a verdict)"):format(
      out.noisy.cv, out.noisy.kind == "intra" and "same" or "cross", c.max_cv)
  end
  out.retests = c.retests
  return out
end

return M
