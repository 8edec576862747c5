-- Detection self-test: delay one rank's arrival at every all-reduce and check that the
-- straggler analysis names that rank and no other.
local cs = require "commscript"

local recipe = cs.recipe {
  name = "chaos_delay",
  version = "1.1.0",
  requires = ">=0.1, <1.0",
  summary = "self-test: a delayed rank must be named as the straggler, and no other",
  options = cs.selftest.options {
    rank = "rank to delay",
    ms = { 20, "delay before each all-reduce, in ms (0: inject nothing, expect nobody named)", type = "number", min = 0 },
    bytes = { default = "64K", help = "all-reduce size", type = "size" },
    iters = { 10, "timed iterations", min = 1 },
  },
}

function recipe.run(ctx)
  if ctx.size < 3 then
    cs.raise(cs.exit.bad_input, "chaos_delay needs at least 3 ranks (a straggler stands out against the others)", 0)
  end
  local target = ctx.opt.rank < 0 and ctx.size - 1 or ctx.opt.rank
  if target >= ctx.size then cs.raise(cs.exit.bad_input, ("--rank %d is not a rank"):format(target), 0) end
  local hosts = ctx.hosts

  -- --ms 0 injects nothing: then nobody may be named (the false-positive check).
  local injected = ctx.opt.ms > 0 and { target } or {}
  if ctx.opt.ms > 0 then cs.chaos.inject { kind = "delay", ranks = { target }, ms = ctx.opt.ms, ops = { "allreduce" } } end
  local r = ctx.comm:bench { op = "allreduce", bytes = ctx.opt.bytes, iters = ctx.opt.iters, warmup = 2 }
  cs.chaos.clear()
  r.kind = "chaos_delay"
  ctx.report:result(r)

  local named = {}
  for _, s in ipairs(cs.diagnose.stragglers(r.rank_mean_us)) do
    named[#named + 1] = s.rank
    ctx.report:finding {
      severity = "warn",
      subject = { rank = s.rank, host = hosts[s.rank + 1] },
      message = ("rank %d arrives %.0f us late at each all-reduce (the others wait for it)"):format(s.rank, s.lateness),
      evidence = { lateness_us = s.lateness, others_median_us = s.median, rank_mean_us = r.rank_mean_us },
      remedy = "look at what runs on that rank between collectives (CPU binding, noisy neighbours, data loading)",
    }
  end
  local correct = #named == #injected and (#named == 0 or named[1] == target)
  ctx.report:result { kind = "selftest", fault = "delay", injected = cs.array(injected), named = cs.array(named),
                      correct = correct }
  ctx.log("chaos_delay: injected %s, named %s: %s", #injected > 0 and ("rank " .. target) or "nothing",
    #named > 0 and table.concat(named, ",") or "none", correct and "ok" or "FAILED")
  if not correct then
    ctx.report:finding {
      severity = "error", subject = { rank = target },
      message = ("self-test failed: delayed %s, the straggler analysis named %s"):format(
        #injected > 0 and ("rank " .. target) or "nobody", #named > 0 and table.concat(named, ",") or "nobody"),
      evidence = { rank_mean_us = r.rank_mean_us }, remedy = "a detection bug: report it with this report.json",
    }
  end
end

return recipe
