-- Detection self-test: delay one rank's arrival at every all-reduce and check that the
-- straggler analysis names that rank and no other. The analysis votes over --rounds
-- measurements (cs.diagnose.straggler_vote: late in two thirds of them): one measurement of 10
-- all-reduces on 4 ranks sharing 2 busy CPUs named ranks 1 and 0 with nothing injected (CI of
-- the twenty-second stop), as a rank descheduled for a few ms arrives late at them all.
local cs = require "commscript"

local recipe = cs.recipe {
  name = "chaos_delay",
  version = "1.2.0",
  requires = ">=0.1, <1.0",
  summary = "self-test: a delayed rank must be named as the straggler, and no other",
  options = cs.selftest.options {
    rank = "rank to delay",
    ms = { 20, "delay before each all-reduce, in ms (0: inject nothing, expect nobody named)", type = "number", min = 0 },
    bytes = { default = "64K", help = "all-reduce size", type = "size" },
    iters = { 10, "timed iterations per measurement", min = 1 },
    rounds = { 5, "measurements voted over (a straggler is late in two thirds of them)", min = 3 },
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
  local vote = cs.diagnose.straggler_vote { op = "allreduce" }
  local means = {}
  for i = 1, ctx.opt.rounds do
    local r = ctx.comm:bench { op = "allreduce", bytes = ctx.opt.bytes, iters = ctx.opt.iters, warmup = 2 }
    r.kind, r.round = "chaos_delay", i
    ctx.report:result(r)
    vote:add(r.rank_mean_us)
    means[i] = r.rank_mean_us
  end
  cs.chaos.clear()

  local named = {}
  for _, s in ipairs(vote:result()) do
    named[#named + 1] = s.rank
    ctx.report:finding {
      severity = "warn",
      subject = { rank = s.rank, host = hosts[s.rank + 1] },
      message = ("rank %d arrives %.0f us late at each all-reduce (the others wait for it), in %s measurements"):format(
        s.rank, s.lateness, s.sizes),
      evidence = { lateness_us = s.lateness, others_median_us = s.median, late_in = s.sizes, rank_mean_us = means },
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
      evidence = { rank_mean_us = means }, remedy = "a detection bug: report it with this report.json",
    }
  end
end

return recipe
