-- Detection self-test: slow down one rank's transfers and check that pairwise measurements
-- localise the slowness to that rank (not to a link, not to another rank).
local cs = require "commscript"

local recipe = cs.recipe {
  name = "chaos_slow",
  version = "1.1.5",
  requires = ">=0.1, <1.0",
  summary = "self-test: a slowed rank's links must be localised to it",
  options = cs.selftest.options {
    rank = "rank to slow down",
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
  local hosts = ctx.hosts

  -- --factor 1 injects nothing: then nobody may be named (the false-positive check).
  local injected = ctx.opt.factor > 1 and { target } or {}
  if ctx.opt.factor > 1 then
    cs.chaos.inject { kind = "slow", ranks = { target }, factor = ctx.opt.factor, ops = { "sendrecv" } }
  end
  local args = { op = "sendrecv", bytes = ctx.opt.bytes, iters = ctx.opt.iters, repeats = ctx.opt.repeats }
  local measured = cs.p2p.round_robin(ctx, args)
  -- Suspect ranks and links are re-measured alone against known-good ranks before they are named.
  local loc = cs.p2p.localise(ctx, measured, hosts, args)
  cs.chaos.clear()
  -- Which hosts run more ranks than CPUs: a link between two of their ranks is reported as info.
  local oversubscribed = cs.topo.oversubscribed(cs.topo.collect(ctx))
  for _, p in ipairs(measured) do
    ctx.report:result { kind = "pair", op = "sendrecv", a = p[1], b = p[2], bytes = ctx.opt.bytes, min_us = p[3] }
  end
  for _, f in ipairs(cs.rules.evaluate({ size = ctx.size, rank_hosts = hosts, localisation = loc,
                                         oversubscribed = oversubscribed })) do
    ctx.report:finding(f)
  end
  local out = cs.selftest.slow_outcome(loc, injected, hosts, oversubscribed)
  local named, correct = out.named, out.correct
  ctx.report:result { kind = "selftest", fault = "slow", injected = cs.array(injected), named = cs.array(named),
                      links = out.links, shared_core_links = out.shared_core_links, correct = correct }
  ctx.log("chaos_slow: injected %s, localised to %s%s%s: %s", #injected > 0 and ("rank " .. target) or "nothing",
    #named > 0 and table.concat(named, ",") or "none", out.links > 0 and (" and " .. out.links .. " link(s)") or "",
    out.shared_core_links > 0 and (" (and " .. out.shared_core_links .. " link(s) of ranks that may share a core)") or "",
    correct and "ok" or "FAILED")
  if not correct then
    ctx.report:finding {
      severity = "error", subject = { rank = target },
      message = ("self-test failed: slowed %s, localisation named ranks {%s} and %d links"):format(
        #injected > 0 and ("rank " .. target) or "nobody", table.concat(named, ","), out.links),
      evidence = { suspects = loc.suspects }, remedy = "a detection bug: report it with this report.json",
    }
  end
end

return recipe
