-- cs.diagnose: turning measurements into culprits (docs/stdlib.md, docs/lua-api.md). The code
-- is in the package's parts (stdlib/cs/diagnose/), each one job; this module re-exports what
-- recipes call:
--   cs.diagnose.lateness  stragglers, straggler_vote: the ranks a collective waited for (pure)
--   cs.diagnose.screen    screen_pairs, screen_hosts: whom localisation re-tests (pure)
--   cs.diagnose.partners  reference_pair, good_partner: who measures with whom (pure)
--   cs.diagnose.judge     VERDICT (the verdict's defaults) and the statistics of re-tests (pure)
--   cs.diagnose.verdicts  the re-tests built and judged (pure)
--   cs.diagnose.findings  findings: what localisation could not say (pure)
--   cs.diagnose.rounds    the re-tests' rounds, measured through the caller's measure function
--   cs.diagnose.localise  localisation's driver: screening, rounds, verdicts in order
-- Localisation's one entry point for recipes is cs.p2p.localise (collective; it runs
-- cs.diagnose.localise on rank 0). Nothing here communicates except through a measure function.
local stats = require "cs.stats"

local M = { median = stats.median }  -- the same function as cs.stats.median (kept: recipes call it)
for part, names in pairs { lateness = { "stragglers", "straggler_vote" }, screen = { "screen_pairs", "screen_hosts" },
                           partners = { "reference_pair", "good_partner" }, judge = { "VERDICT" }, findings = { "findings" } } do
  local m = require("cs.diagnose." .. part)
  for _, n in ipairs(names) do M[n] = m[n] end
end

-- Deprecated names, kept for this release only (docs/lua-api.md, cs.diagnose): the screening
-- was called localize / localize_hosts, and the driver cs.diagnose.localise (now
-- require("cs.diagnose.localise").localise; recipes call cs.p2p.localise).
M.localize = M.screen_pairs
M.localize_hosts = M.screen_hosts
M.localise = require("cs.diagnose.localise").localise

return M
