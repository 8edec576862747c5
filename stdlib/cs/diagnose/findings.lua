-- cs.diagnose.findings: what localisation could not say, as findings (not culprits: those are
-- cs.rules' slow_host / slow_rank / slow_link): too noisy, under-measured, undecided, and a rank
-- at the end of slow links to several hosts. Pure: reads the verdict (loc) only.
local evidence = require "cs.evidence"
local M = {}

-- A rank at the end of slow links to several hosts (loc.rank_links): a not_confirmed warning,
-- or, when loc.unconfirmed (cs.evidence.unconfirmed) already warns of its host, a line of that
-- warning: one warning for one place (the 4096-rank model: a flapping host warned intermittent
-- and three of its ranks warned apart, each slow alone with ranks on 2 hosts).
local function rank_link_findings(loc, out)
  -- a warning on the host, else on the rank itself, takes the line
  local host_warning, rank_warning = evidence.host_warnings(loc.unconfirmed)
  for _, x in ipairs(loc.rank_links or {}) do
    local list = {}
    for _, l in ipairs(x.links) do list[#list + 1] = ("%d-%d (%.1fx)"):format(l.a, l.b, l.ratio or 0) end
    local hw = host_warning[x.host] or rank_warning[x.rank]
    if hw then
      hw.evidence = hw.evidence or {}
      hw.evidence.rank_links = hw.evidence.rank_links or {}
      table.insert(hw.evidence.rank_links, { rank = x.rank, links = x.links })
      hw.message = ("%s; %s %d measured slow alone with ranks on %d hosts (%s)"):format(hw.message,
        hw == rank_warning[x.rank] and "rank" or "its rank", x.rank, #x.links,
        table.concat(list, ", "))
    elseif x.turns then
      out[#out + 1] = { rule = "not_confirmed", severity = "warn", subject = { rank = x.rank, host = x.host },
        message = ("rank %d (host %s): measured slow alone in every round with ranks on %d hosts (%s), each of them good with others, and fine with others: the rank, stopped by turns (OS jitter, a noisy neighbour, a CPU quota)"):format(
          x.rank, tostring(x.host), x.hosts or #x.links, table.concat(list, ", ")),
        evidence = { links = x.links, rank = x.rank, alone = true, turns = true },
        remedy = "look at that rank's CPU (quotas, noisy neighbours, OS jitter) and its host's link counters, then measure again" }
    elseif x.alone then
      out[#out + 1] = { rule = "not_confirmed", severity = "warn", subject = { rank = x.rank, host = x.host },
        message = ("rank %d (host %s): measured slow alone with ranks on %d hosts (%s), each of them good with others, and good with nobody; no other rank of its host was measured beside it: the rank, stopped by turns (OS jitter, a noisy neighbour, a CPU quota), or its host"):format(
          x.rank, tostring(x.host), x.hosts or #x.links, table.concat(list, ", ")),
        evidence = { links = x.links, rank = x.rank, alone = true },
        remedy = "look at that rank's CPU (quotas, noisy neighbours, OS jitter) and its host's link counters, then measure again" }
    else
      out[#out + 1] = { rule = "not_confirmed", severity = "warn", subject = { rank = x.rank, host = x.host },
        message = ("rank %d (host %s): its pairs with ranks on %d hosts measured slow alone (%s) while its other re-tested pairs were not: a link joins two hosts, so not those links; the rank, stopped by turns (OS jitter, a noisy neighbour, a CPU quota), or its host's link"):format(
          x.rank, tostring(x.host), #x.links, table.concat(list, ", ")),
        evidence = { links = x.links, rank = x.rank },
        remedy = "look at that rank's CPU (quotas, noisy neighbours, OS jitter) and its host's link counters, then measure again" }
    end
  end
end

-- findings(loc) -> the localisation's own findings (not a culprit: what the verdict could not
--   say): too noisy to localise (warn), hosts under-measured (info), suspects left undecided by
--   the budget (info), a rank at the end of slow links to several hosts (warn "not_confirmed",
--   loc.rank_links; added to its host's warning instead when loc.unconfirmed warns of the host).
--   Culprits are cs.rules' slow_host / slow_rank / slow_link.
function M.findings(loc)
  local out = {}
  if not loc then return out end
  if loc.noisy then
    out[#out + 1] = { rule = "localisation_noisy", severity = "warn", subject = { stage = "localisation" }, message = loc.noisy.message,
                      evidence = { cv = loc.noisy.cv, kind = loc.noisy.kind, max_cv = loc.noisy.max_cv,
                                   references = loc.references },
                      remedy = "run fewer ranks per host (or bind them to distinct cores) and measure again" }
  end
  if loc.under_measured and #loc.under_measured > 0 then
    local names = {}
    for _, u in ipairs(loc.under_measured) do names[#names + 1] = ("%s (%d of %d)"):format(u.host, u.partners, u.needed) end
    out[#out + 1] = { rule = "localisation_under_measured", severity = "info", subject = { stage = "localisation" },
                      message = ("under-measured, no host verdict on: %s other hosts measured"):format(table.concat(names, ", ")),
                      evidence = { hosts = loc.under_measured }, remedy = "use a longer --tier or a larger --budget" }
  end
  rank_link_findings(loc, out)
  local budget, either = {}, {}
  for _, u in ipairs(loc.undecided or {}) do
    if u.either then either[#either + 1] = ("rank %d or host %s"):format(u.rank, u.either) end
    if u.why == "budget" then
      budget[#budget + 1] = u.host or (u.rank and ("rank " .. u.rank)) or (u.pair and ("link " .. u.pair[1] .. "-" .. u.pair[2]))
    end
  end
  if #budget > 0 then
    out[#out + 1] = { rule = "localisation_undecided", severity = "info", subject = { stage = "localisation" },
                      message = ("suspects left undecided, the budget ran out: %s"):format(table.concat(budget, ", ")),
                      evidence = { undecided = loc.undecided }, remedy = "use a longer --tier or a larger --budget" }
  end
  if #either > 0 then
    out[#out + 1] = { rule = "localisation_undecided", severity = "info", subject = { stage = "localisation" },
                      message = ("slow, but no other rank of its host was shown good beside it: %s"):format(table.concat(either, ", ")),
                      evidence = { undecided = loc.undecided },
                      remedy = "measure again with a longer --tier: a good rank of that host tells the rank from the host" }
  end
  return out
end

return M
