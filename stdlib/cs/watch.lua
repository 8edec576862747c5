-- cs.watch: every host's samples alone, in turn, over a few seconds (full_diag's watch stage):
-- what a flap the pattern's crowded rounds hid looks like alone. Collective: all ranks call run
-- with the same arguments; rank 0 decides when it stops and holds the samples. The schedule and
-- the rule are cs.evidence.watch's (pure).
-- run(ctx, args) -> samples (rank 0; nil elsewhere), cycles: args.seconds (rank 0's clock: the
--   cycle that starts before it ends is finished), args.bytes, window, iters, warmup (one way
--   streamed as cs.p2p.stream_from: the time one message of args.bytes takes at its rate, us);
--   each sample { cycle, from, to, start (s from the first), seconds (its stream and the barrier
--   after it, rank 0's clock), us }. args.each(samples, cycles) on rank 0 after every cycle (to
--   keep what was measured in the report should the run be killed).
-- report(samples, cycles, seconds, n) -> report.json's watch section: seconds, cycles and, up to
--   cs.p2p.PASSES_MAX_RANKS ranks, the samples as [cycle, from, to, start, seconds, us].
local native = require "commscript.native"
local p2p = require "cs.p2p"
local W = require "cs.evidence.watch"
local M = {}

-- one cycle: its samples one at a time, the ranks not in one waiting at its barrier
local function cycle_samples(ctx, batch, args, origin)
  local mine, times = {}, {}
  for i, p in ipairs(batch) do
    local t = native.now()
    if ctx.rank == p[1] or ctx.rank == p[2] then
      local v = p2p.stream_from(ctx.comm, ctx.rank, ctx.rank == p[1] and p[2] or p[1], p[1], args)
      if ctx.rank == p[1] then mine[#mine + 1] = { i, v } end
    end
    ctx.comm:barrier()
    times[i] = { t - origin, native.now() - t }
  end
  return ctx.comm:gather_value(mine, 0), times
end

function M.run(ctx, args)
  local samples, cycle, origin = {}, 0, native.now()
  local stop = origin + (args.seconds or W.WATCH.seconds)
  while true do
    if not ctx.comm:broadcast_value(ctx.rank == 0 and native.now() < stop, 0) then break end
    local batch = W.schedule(ctx.hosts, cycle)
    local all, times = cycle_samples(ctx, batch, args, origin)
    if ctx.rank == 0 then
      local us = {}
      for _, list in ipairs(all) do for _, v in ipairs(list) do us[v[1]] = v[2] end end
      for i, p in ipairs(batch) do
        samples[#samples + 1] = { cycle = cycle, from = p[1], to = p[2], start = times[i][1], seconds = times[i][2],
                                  us = us[i] or false }
      end
    end
    cycle = cycle + 1
    if ctx.rank == 0 and args.each then args.each(samples, cycle) end
  end
  return ctx.rank == 0 and samples or nil, cycle
end

function M.report(samples, cycles, seconds, n)
  local out = { seconds = seconds, cycles = cycles, count = #(samples or {}) }
  if n <= p2p.PASSES_MAX_RANKS then
    out.samples = {}
    for i, s in ipairs(samples or {}) do out.samples[i] = { s.cycle, s.from, s.to, s.start, s.seconds, s.us } end
  end
  return out
end

return M
