-- Elastic drill: a steady all-reduce load, one rank SIGKILLed (chaos exit with kill = true), and
-- the survivors' recovery timeline: time to detect the drop, to revoke, to a working shrunk
-- communicator, busbw before and after, and whether any checked data came out wrong.
-- Needs a backend that survives drops (--backend gloo, launched with --launcher env: under
-- mpirun the launcher ends the whole job when a rank dies).
local cs = require "commscript"

local recipe = cs.recipe {
  name = "elastic_drill",
  version = "1.0.1",
  requires = ">=0.1, <1.0",
  summary = "drop a rank under load; time detect / revoke / shrink; busbw before and after",
  options = {
    victim = { -1, "rank that is SIGKILLed (-1: the last; not 0, which serves the store)" },
    bytes = { default = "256K", help = "all-reduce message size", type = "size" },
    iters = { 20, "timed iterations of each busbw measurement", min = 1 },
    steady = { 5, "all-reduces of the steady load before the drop", min = 1 },
    deadline = { 5, "deadline of each operation, s", type = "number", min = 0.1 },
    max_detect_s = { -1, "finding when detection takes longer (-1: deadline + 1)", type = "number" },
    max_recover_s = { 2, "finding when a working shrunk communicator takes longer after detection, s",
                      type = "number", min = 0 },
  },
}

local function max_of(list)
  local m = -math.huge
  for _, v in ipairs(list) do if v > m then m = v end end
  return m
end

function recipe.run(ctx)
  local o, comm = ctx.opt, ctx.comm
  if ctx.size < 2 then cs.raise(cs.exit.bad_input, "elastic_drill needs at least 2 ranks", 0) end
  local victim = o.victim < 0 and ctx.size - 1 or o.victim
  if victim >= ctx.size then cs.raise(cs.exit.bad_input, ("--victim %d is not a rank"):format(victim), 0) end
  if victim == 0 then
    cs.raise(cs.exit.bad_input, "--victim 0: rank 0 serves the store the survivors rebuild through; drop another rank", 0)
  end
  -- A backend that cannot survive a drop says why, before anything is dropped.
  local ok, err = pcall(comm.survivors, comm)
  if not ok then cs.raise(cs.exit.bad_input, "elastic_drill: " .. tostring(err), 0) end
  local max_detect = o.max_detect_s >= 0 and o.max_detect_s or o.deadline + 1
  comm:set_timeout(o.deadline)

  ctx.log("# commscript elastic_drill %s: %d ranks, backend %s, victim rank %d, %s all-reduce, deadline %g s",
    recipe.version, ctx.size, ctx.backend, victim, cs.format_size(o.bytes), o.deadline)
  local before = comm:bench { op = "allreduce", bytes = o.bytes, iters = o.iters, warmup = 2 }
  ctx.log("# before: busbw %.3f GB/s, %.1f us, #wrong %d", before.busbw, before.time_us, before.wrong)

  -- The steady load; the victim kills itself before its (steady)-th all-reduce.
  local count = cs.count_for_bytes("allreduce", o.bytes, "float32", ctx.size)
  local send, recv = comm:tensor("float32", count), comm:tensor("float32", count)  -- GPU memory under nccl
  cs.chaos.inject { kind = "exit", kill = true, ranks = { victim }, after = comm:seq() + o.steady }
  local t_fail, t_detect, lost
  for i = 1, o.steady + 10 do
    send:fill_pattern(ctx.rank, "sum", i)
    t_fail = cs.now()
    local good, e = pcall(comm.allreduce, comm, send, recv)
    if not good then
      t_detect, lost = cs.now(), e
      break
    end
  end
  if not t_detect then
    error(("drill failed: rank %d was SIGKILLed, yet every all-reduce on rank %d completed"):format(victim, ctx.rank))
  end
  if type(lost) ~= "table" or lost.kind ~= "ranks_lost" then error(lost, 0) end  -- not a drop: a real failure
  comm:revoke()  -- releases survivors still blocked with this rank
  local t_revoke = cs.now()
  local shrunk = comm:shrink { exclude = lost.gone }
  -- The first good collective on the shrunk communicator, checked.
  send:fill_pattern(shrunk:rank(), "sum", 7)
  shrunk:allreduce(send, recv)
  local first_wrong = shrunk:check("allreduce", recv, { salt = 7 })
  local t_working = cs.now()
  local after = shrunk:bench { op = "allreduce", bytes = o.bytes, iters = o.iters, warmup = 2 }

  -- Everyone's timeline; the slowest survivor counts.
  local detect = max_of(shrunk:allgather_value(t_detect - t_fail))
  local revoke = max_of(shrunk:allgather_value(t_revoke - t_detect))
  local working = max_of(shrunk:allgather_value(t_working - t_detect))
  local wrong_first = 0
  for _, w in ipairs(shrunk:allgather_value(first_wrong)) do wrong_first = wrong_first + w end
  local gone = lost.gone
  ctx.log("# drop of rank %d: gone %s; detect %.3f s, revoke %.3f s, working shrunk communicator %.3f s after "
    .. "detection (%d ranks)", victim, table.concat(gone, ","), detect, revoke, working, shrunk:size())
  ctx.log("# after: busbw %.3f GB/s, %.1f us, #wrong %d (first collective: %d)", after.busbw, after.time_us,
    after.wrong, wrong_first)

  local drill = {
    victim = victim, gone = gone, survivors = shrunk:size(), detect_s = detect, revoke_s = revoke,
    working_s = working, busbw_before = before.busbw, busbw_after = after.busbw,
    wrong_after = after.wrong + wrong_first, data_lost = (after.wrong + wrong_first) > 0,
    max_detect_s = max_detect, max_recover_s = o.max_recover_s,
    timeline = { { event = "drop", t = 0 }, { event = "detected", t = detect },
                 { event = "revoked", t = detect + revoke }, { event = "working", t = detect + working } },
  }
  ctx.report:set("drill", drill)
  before.phase, after.phase = "before", "after"
  before.wrong, after.wrong = before.wrong, after.wrong + wrong_first
  ctx.report:result(before)
  ctx.report:result(after)
  if #gone ~= 1 or gone[1] ~= victim then
    ctx.report:finding { severity = "error", subject = { rank = victim },
      message = ("the survivors named ranks {%s} gone; rank %d was dropped"):format(table.concat(gone, ","), victim) }
  end
  if detect > max_detect then
    ctx.report:finding { severity = "error", subject = { rank = victim },
      message = ("detecting the drop took %.2f s (threshold %.2f s)"):format(detect, max_detect),
      evidence = { detect_s = detect }, remedy = "lower the operation deadline; check the transport's keepalive" }
  end
  if working > o.max_recover_s then
    ctx.report:finding { severity = "error", subject = { rank = victim },
      message = ("a working shrunk communicator took %.2f s after detection (threshold %.2f s)"):format(working,
        o.max_recover_s), evidence = { working_s = working } }
  end
end

return recipe
