-- The detection self-tests (chaos_hang, chaos_exit, chaos_desync ...): inject one fault on one
-- rank, then run all-reduces until the machinery that should catch it (the watchdog, the
-- coordinator, the result check) ends the job. A self-test that completes has failed.
--   selftest.options{ rank = "rank that hangs", after = "operations before it hangs", deadline = { 3 },
--                     ... }                -> the recipe's options: the ones every self-test shares
--                                          (--rank; --after, --deadline when named) and its own (...)
--   selftest.target(ctx [, min_ranks])  -> the rank --rank names (-1: the last); bad input
--                                          (exit 1) when there are too few ranks or no such rank
--   selftest.run(ctx, fault)            -> sets ctx.opt.deadline as the per-operation timeout,
--                                          injects fault (a cs.chaos.inject table: kind, and
--                                          status/op ...) on the target after ctx.opt.after
--                                          operations, runs all-reduces, and raises (exit 2,
--                                          naming the recipe's line) when every one completed
--   selftest.slow_outcome(loc, injected, rank_hosts, oversubscribed)
--                                       -> chaos_slow's judgement of a localisation (pure):
--                                          { named, links, shared_core_links, correct }
local cs = require "commscript"
local M = {}

-- Elements of the all-reduces the self-tests run.
M.ELEMENTS = 1024
-- Operations past the fault before the self-test gives up and says it failed.
M.EXTRA_OPS = 10

-- The options the self-tests share, declared once. t.rank: what the chosen rank does; t.after:
-- what --after counts (omitted: no --after); t.deadline: { default [, max = s] } (omitted: no
-- --deadline). Any other key of t is the recipe's own option, declared as cs.recipe takes it.
function M.options(t)
  local o = {}
  for k, v in pairs(t) do o[k] = v end
  o.rank = { -1, t.rank .. " (-1: the last)" }
  if t.after then o.after = { 5, t.after, min = 0 } end
  if t.deadline then
    o.deadline = { t.deadline[1], "deadline of each operation, s", type = "number", min = 0.1, max = t.deadline.max }
  end
  return o
end

function M.target(ctx, min_ranks)
  local name = ctx.recipe.name
  min_ranks = min_ranks or 2
  if ctx.size < min_ranks then cs.raise(cs.exit.bad_input, ("%s needs at least %d ranks"):format(name, min_ranks), 0) end
  local target = ctx.opt.rank < 0 and ctx.size - 1 or ctx.opt.rank
  if target >= ctx.size then cs.raise(cs.exit.bad_input, ("--rank %d is not a rank"):format(target), 0) end
  return target
end

function M.run(ctx, fault)
  local target = M.target(ctx)
  ctx.comm:set_timeout(ctx.opt.deadline)
  local inject = { ranks = { target }, after = ctx.comm:seq() + ctx.opt.after }
  -- fault.recv_elements: a larger receive buffer, for faults that call an operation with other
  -- counts (desync into an all-gather); not a chaos field
  for k, v in pairs(fault) do if k ~= "recv_elements" then inject[k] = v end end
  cs.chaos.inject(inject)
  -- on the communicator's own memory (the GPU under nccl)
  local t, r = ctx.comm:tensor("float32", M.ELEMENTS), ctx.comm:tensor("float32", fault.recv_elements or M.ELEMENTS)
  for _ = 1, ctx.opt.after + M.EXTRA_OPS do ctx.comm:allreduce(t, r) end
  cs.raise(cs.exit.runtime, ("self-test failed: rank %d was told to %s, yet every all-reduce completed"):format(
    target, fault.kind), 2)
end

-- chaos_slow's judgement of cs.p2p.localise's result `loc` when `injected` ({ rank } or {}) was
-- slowed. Correct: exactly the injected rank named (nobody when none), and no link named, except
-- a link between two ranks of a host in `oversubscribed` ({ [host] = true }: more ranks than
-- CPUs) that does not touch the injected rank. Two such ranks may share a core, and their
-- exchange then waits for the scheduler: a fact of the machine, which cs.rules reports as info
-- (CI, 4 ranks on 2 busy cores: a pair named at --factor 1). A link at the slowed rank is always
-- wrong: that is the rank-from-link distinction this self-test exists for.
function M.slow_outcome(loc, injected, rank_hosts, oversubscribed)
  local named = {}
  for _, r in ipairs(loc.ranks or {}) do named[#named + 1] = r.rank end
  for _, h in ipairs(loc.hosts or {}) do
    for _, r in ipairs(h.ranks) do named[#named + 1] = r end
  end
  local target = injected[1]
  local links, shared = 0, 0
  for _, l in ipairs(loc.links or {}) do
    local ha, hb = rank_hosts[l.a + 1], rank_hosts[l.b + 1]
    if ha and ha == hb and (oversubscribed or {})[ha] and l.a ~= target and l.b ~= target then
      shared = shared + 1
    else
      links = links + 1
    end
  end
  local correct = #named == #injected and (#named == 0 or named[1] == target) and links == 0
  return { named = named, links = links, shared_core_links = shared, correct = correct }
end

return M
