-- Detection self-test: slow down one rank's transfers and check that pairwise measurements
-- localise the slowness to that rank (not to a link, not to another rank).
local cs = require "commscript"

local recipe = cs.recipe {
  name = "chaos_slow",
  version = "1.0.0",
  requires = ">=0.1, <1.0",
  summary = "self-test: a slowed rank's links must be localised to it",
  options = {
    rank = { -1, "rank to slow down (-1: the last)" },
    factor = { 4, "its transfers take this many times as long (1: inject nothing, expect nobody named)",
               type = "number", min = 1 },
    bytes = { default = "256K", help = "sendrecv size per pair", type = "size" },
    iters = { 10, "timed iterations per pair", min = 1 },
    repeats = { 3, "measure every pair this many times, keep the fastest", min = 1 },
  },
}

function recipe.run(ctx)
  if ctx.size < 4 then cs.raise(cs.exit.bad_input, "chaos_slow needs at least 4 ranks to tell a rank from a link", 0) end
  local target = ctx.opt.rank < 0 and ctx.size - 1 or ctx.opt.rank
  if target >= ctx.size then cs.raise(cs.exit.bad_input, ("--rank %d is not a rank"):format(target), 0) end
  local hosts = ctx.comm:allgather_value(ctx.host)

  -- --factor 1 injects nothing: then nobody may be named (the false-positive check).
  local injected = ctx.opt.factor > 1 and { target } or {}
  if ctx.opt.factor > 1 then
    cs.chaos.inject { kind = "slow", ranks = { target }, factor = ctx.opt.factor, ops = { "sendrecv" } }
  end
  local args = { op = "sendrecv", bytes = ctx.opt.bytes, iters = ctx.opt.iters, repeats = ctx.opt.repeats }
  local measured = cs.p2p.round_robin(ctx, args)
  -- Links need a wider margin than ranks: pairs that share a core or a socket legitimately
  -- differ by up to ~2x on an oversubscribed host, while a slowed rank shows on all its pairs.
  local loc = cs.diagnose.localize(ctx.size, measured, { factor = 1.5, link_factor = 3 })
  -- Suspects are re-tested alone against known-good partners before they are named.
  local suspects, good = {}, {}
  for _, s in ipairs(loc.ranks) do suspects[#suspects + 1] = s.rank end
  local order = {}
  for r = 0, ctx.size - 1 do order[#order + 1] = r end
  table.sort(order, function(x, y) return (loc.scores[x + 1] or 0) < (loc.scores[y + 1] or 0) end)
  for _, r in ipairs(order) do
    local is_suspect = false
    for _, s in ipairs(suspects) do is_suspect = is_suspect or s == r end
    if not is_suspect then good[#good + 1] = r end
  end
  local confirmed = cs.p2p.confirm(ctx, suspects, good, args, 1.5)
  cs.chaos.clear()
  for _, p in ipairs(measured) do
    ctx.report:result { kind = "pair", op = "sendrecv", a = p[1], b = p[2], bytes = ctx.opt.bytes, min_us = p[3] }
  end
  for _, c in ipairs(confirmed) do
    ctx.report:result { kind = "retest", op = "sendrecv", rank = c.rank, partner = c.partner, min_us = c.value,
                        reference_us = c.reference }
  end

  local named = {}
  for _, c in ipairs(confirmed) do
    local s
    for _, x in ipairs(loc.ranks) do if x.rank == c.rank then s = x end end
    named[#named + 1] = s.rank
    ctx.report:finding {
      severity = "warn",
      subject = { rank = s.rank, host = hosts[s.rank + 1] },
      message = ("rank %d is slow with every partner: median pair time %.1f us, %.1fx the fleet's %.1f us; "
        .. "alone with rank %d: %.1f us against %.1f us between two good ranks"):format(
        s.rank, s.median, s.score, loc.fleet_median, c.partner, c.value, c.reference),
      evidence = { median_us = s.median, fleet_median_us = loc.fleet_median, score = s.score,
                   retest_us = c.value, retest_partner = c.partner, retest_reference_us = c.reference },
      remedy = "check that rank's NIC/PCIe link, CPU binding and host load",
    }
  end
  for _, p in ipairs(loc.pairs) do
    ctx.report:finding {
      severity = "warn", subject = { pair = { p.a, p.b } },
      message = ("link %d-%d is slow (%.1f us, %.1fx the fleet median) while both ranks are fine elsewhere"):format(
        p.a, p.b, p.value, p.score),
      evidence = { value_us = p.value, score = p.score }, remedy = "check the cable/switch port between them",
    }
  end
  local correct = #named == #injected and (#named == 0 or named[1] == target)
  ctx.report:result { kind = "selftest", fault = "slow", injected = cs.array(injected), named = cs.array(named),
                      correct = correct }
  ctx.log("chaos_slow: injected %s, localised to %s: %s", #injected > 0 and ("rank " .. target) or "nothing",
    #named > 0 and table.concat(named, ",") or "none", correct and "ok" or "FAILED")
  if not correct then
    ctx.report:finding {
      severity = "error", subject = { rank = target },
      message = ("self-test failed: slowed %s, localisation named ranks {%s} and %d links"):format(
        #injected > 0 and ("rank " .. target) or "nobody", table.concat(named, ","), #loc.pairs),
      evidence = { scores = loc.scores }, remedy = "a detection bug: report it with this report.json",
    }
  end
end

return recipe
