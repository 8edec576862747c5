-- Detection self-test: flip bits in one rank's all-reduce results and check that the result
-- check names that rank (exit 4: data corruption).
local cs = require "commscript"

local recipe = cs.recipe {
  name = "chaos_corrupt",
  version = "1.0.0",
  requires = ">=0.1, <1.0",
  summary = "self-test: a rank whose results are corrupted must be named (exit 4)",
  options = cs.selftest.options {
    rank = "rank whose results are corrupted",
    elements = { 4, "elements flipped per operation", min = 1 },
    bytes = { default = "64K", help = "all-reduce size", type = "size" },
  },
}

function recipe.run(ctx)
  local target = ctx.opt.rank < 0 and ctx.size - 1 or ctx.opt.rank
  if target >= ctx.size then cs.raise(cs.exit.bad_input, ("--rank %d is not a rank"):format(target), 0) end
  cs.chaos.inject { kind = "corrupt", ranks = { target }, ops = { "allreduce" }, elements = ctx.opt.elements }
  local r = ctx.comm:bench { op = "allreduce", bytes = ctx.opt.bytes, iters = 3, warmup = 1, check = true }
  cs.chaos.clear()
  r.kind = "chaos_corrupt"
  ctx.report:result(r)  -- wrong > 0: the run exits 4
  if r.wrong > 0 then
    ctx.report:finding {
      severity = "error", subject = { ranks = r.wrong_ranks },
      message = ("all-reduce results were wrong on rank(s) %s: %d elements"):format(table.concat(r.wrong_ranks, ","), r.wrong),
      evidence = { wrong = r.wrong, ranks = r.wrong_ranks, bytes = r.bytes },
      remedy = "silent data corruption: take the rank out of service, check its memory (ECC) and links",
    }
  end
  local correct = #r.wrong_ranks == 1 and r.wrong_ranks[1] == target
  ctx.report:result { kind = "selftest", fault = "corrupt", injected = { target }, named = r.wrong_ranks, correct = correct }
  ctx.log("chaos_corrupt: injected rank %d, wrong data on rank(s) %s: %s", target,
    #r.wrong_ranks > 0 and table.concat(r.wrong_ranks, ",") or "none", correct and "ok" or "FAILED")
end

return recipe
