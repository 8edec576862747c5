-- Elastic drill: a steady all-reduce load, one rank SIGKILLed (chaos exit with kill = true), and
-- the survivors' recovery timeline: time to detect the drop, to revoke, to a working shrunk
-- communicator, busbw before and after, and whether any checked data came out wrong.
-- With drops = 2 (an option, also from the config's [options]) the survivors run the load again
-- and lose a second rank. report.json `drill` holds the timeline of each drop; report.html draws it.
-- Needs a backend that survives drops (--backend gloo, launched with --launcher env: under
-- mpirun the launcher ends the whole job when a rank dies, so the drill refuses to run there).
local cs = require "commscript"

local recipe = cs.recipe {
  name = "elastic_drill",
  version = "1.1.3",
  requires = ">=0.1, <1.0",
  summary = "drop a rank under load; time detect / revoke / shrink; busbw before and after",
  options = {
    victim = { -1, "rank that is SIGKILLed (-1: the last; not 0, which serves the store)" },
    drops = { 1, "how many drops, one after the other (2: the survivors of the first lose another rank)",
              min = 1, max = 2 },
    victim2 = { -1, "world rank SIGKILLed by the second drop (-1: the last survivor)" },
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

local function index_of(list, v)
  for i, x in ipairs(list) do if x == v then return i end end
  return nil
end

-- One drop on `comm` (whose rank i is world rank members[i + 1]): the steady load, `victim`
-- (a world rank) SIGKILLed, detection, revoke, shrink and the first checked all-reduce on the
-- shrunk communicator, then busbw on it. Returns the shrunk communicator, its members and the
-- drop's record (times are the slowest survivor's).
local function drop(ctx, comm, members, victim, k, before)
  local o = ctx.opt
  local count = cs.count_for_bytes("allreduce", o.bytes, "float32", comm:size())
  local send, recv = comm:tensor("float32", count), comm:tensor("float32", count)  -- GPU memory under nccl
  cs.chaos.inject { kind = "exit", kill = true, ranks = { victim }, after = comm:seq() + o.steady }
  local t_fail, t_detect, lost
  for i = 1, o.steady + 10 do
    send:fill_pattern(comm:rank(), "sum", i)
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
  local n = cs.count_for_bytes("allreduce", o.bytes, "float32", shrunk:size())
  local s2, r2 = shrunk:tensor("float32", n), shrunk:tensor("float32", n)
  s2:fill_pattern(shrunk:rank(), "sum", 7)
  shrunk:allreduce(s2, r2)
  local first_wrong = shrunk:check("allreduce", r2, { salt = 7 })
  local t_working = cs.now()
  local after = shrunk:bench { op = "allreduce", bytes = o.bytes, iters = o.iters, warmup = 2 }

  local gone, kept = {}, {}
  for _, r in ipairs(lost.gone) do gone[#gone + 1] = members[r + 1] end
  for i, w in ipairs(members) do
    if not index_of(lost.gone, i - 1) then kept[#kept + 1] = w end
  end
  local detect = max_of(shrunk:allgather_value(t_detect - t_fail))
  local revoke = max_of(shrunk:allgather_value(t_revoke - t_detect))
  local working = max_of(shrunk:allgather_value(t_working - t_detect))
  local wrong_first = 0
  for _, w in ipairs(shrunk:allgather_value(first_wrong)) do wrong_first = wrong_first + w end
  ctx.log("# drop %d, of rank %d: gone %s; detect %.3f s, revoke %.3f s, working shrunk communicator %.3f s after "
    .. "detection (%d ranks)", k, victim, table.concat(gone, ","), detect, revoke, working, shrunk:size())
  ctx.log("# after: busbw %.3f GB/s, %.1f us, #wrong %d (first collective: %d)", after.busbw, after.time_us,
    after.wrong, wrong_first)
  after.phase = k == 1 and "after" or "after" .. k
  after.wrong = after.wrong + wrong_first
  after.drop = k
  ctx.report:result(after)
  return shrunk, kept, {
    drop = k, victim = victim, gone = gone, survivors = shrunk:size(), detect_s = detect, revoke_s = revoke,
    working_s = working, busbw_before = before.busbw, busbw_after = after.busbw, time_us_before = before.time_us,
    time_us_after = after.time_us, wrong_after = after.wrong, data_lost = after.wrong > 0,
    timeline = { { event = "drop", t = 0 }, { event = "detected", t = detect },
                 { event = "revoked", t = detect + revoke }, { event = "working", t = detect + working } },
  }, after
end

function recipe.run(ctx)
  local o, comm = ctx.opt, ctx.comm
  if ctx.size < 2 then cs.raise(cs.exit.bad_input, "elastic_drill needs at least 2 ranks", 0) end
  if o.drops == 2 and ctx.size < 3 then
    cs.raise(cs.exit.bad_input, ("--drops 2 needs at least 3 ranks (the job has %d)"):format(ctx.size), 0)
  end
  local victim = o.victim < 0 and ctx.size - 1 or o.victim
  if victim >= ctx.size then cs.raise(cs.exit.bad_input, ("--victim %d is not a rank"):format(victim), 0) end
  if victim == 0 then
    cs.raise(cs.exit.bad_input, "--victim 0: rank 0 serves the store the survivors rebuild through; drop another rank", 0)
  end
  local victim2
  if o.drops == 2 then
    victim2 = o.victim2
    if victim2 < 0 then
      victim2 = ctx.size - 1
      if victim2 == victim then victim2 = victim2 - 1 end
    end
    if victim2 >= ctx.size then cs.raise(cs.exit.bad_input, ("--victim2 %d is not a rank"):format(victim2), 0) end
    if victim2 == 0 or victim2 == victim then
      cs.raise(cs.exit.bad_input, ("--victim2 %d: the second drop needs a rank other than 0 (the store) and the "
        .. "first victim %d"):format(victim2, victim), 0)
    end
  end
  -- A backend that cannot survive a drop says why, before anything is dropped.
  local ok, err = pcall(comm.survivors, comm)
  if not ok then cs.raise(cs.exit.bad_input, "elastic_drill: " .. tostring(err), 0) end
  -- Gloo survives a drop, mpirun does not: it ends every rank when one is SIGKILLed, and the end of
  -- the run gathers over MPI (no ULFM). `mpi` is available beside ctx.comm only under mpirun.
  for _, b in ipairs(cs.comm.available()) do
    if b == "mpi" then
      cs.raise(cs.exit.bad_input, ("elastic_drill: --backend %s under mpirun cannot survive a drop (mpirun ends "
        .. "every rank when one is SIGKILLed, and the run's end gathers over MPI, which has no ULFM here); launch "
        .. "with --launcher env or slurm (docs/launching.md)"):format(ctx.backend), 0)
    end
  end
  local max_detect = o.max_detect_s >= 0 and o.max_detect_s or o.deadline + 1
  comm:set_timeout(o.deadline)

  ctx.log("# commscript elastic_drill %s: %s, backend %s, victim rank %d%s, %s all-reduce, deadline %g s",
    recipe.version, cs.text.plural(ctx.size, "rank"), ctx.backend, victim, victim2 and (" then rank " .. victim2) or "",
    cs.format_size(o.bytes), o.deadline)
  local before = comm:bench { op = "allreduce", bytes = o.bytes, iters = o.iters, warmup = 2 }
  ctx.log("# before: busbw %.3f GB/s, %.1f us, #wrong %d", before.busbw, before.time_us, before.wrong)
  before.phase = "before"
  ctx.report:result(before)

  local members = {}
  for r = 0, ctx.size - 1 do members[#members + 1] = r end
  local drops, cur = {}, comm
  for k, v in ipairs({ victim, victim2 }) do
    local rec
    cur, members, rec, before = drop(ctx, cur, members, v, k, before)
    rec.max_detect_s, rec.max_recover_s = max_detect, o.max_recover_s
    drops[#drops + 1] = rec
  end

  -- The first drop's figures at the top level (as in 1.0), every drop under `drops`.
  local drill = {}
  for key, val in pairs(drops[1]) do drill[key] = val end
  drill.drop = nil
  drill.drops = drops
  drill.max_detect_s, drill.max_recover_s = max_detect, o.max_recover_s
  drill.survivors = drops[#drops].survivors
  drill.survivors_first = drops[1].survivors
  drill.wrong_after, drill.data_lost = 0, false
  for _, d in ipairs(drops) do
    drill.wrong_after = drill.wrong_after + d.wrong_after
    drill.data_lost = drill.data_lost or d.data_lost
  end
  ctx.report:set("drill", drill)
  for _, d in ipairs(drops) do
    if #d.gone ~= 1 or d.gone[1] ~= d.victim then
      ctx.report:finding { severity = "error", subject = { rank = d.victim },
        message = ("drop %d: the survivors named ranks {%s} gone; rank %d was dropped"):format(d.drop,
          table.concat(d.gone, ","), d.victim) }
    end
    if d.detect_s > max_detect then
      ctx.report:finding { severity = "error", subject = { rank = d.victim },
        message = ("drop %d: detecting the drop of rank %d took %.2f s (threshold %.2f s)"):format(d.drop, d.victim,
          d.detect_s, max_detect),
        evidence = { drop = d.drop, detect_s = d.detect_s, threshold_s = max_detect },
        remedy = "lower the operation deadline; check the transport's keepalive" }
    end
    if d.working_s > o.max_recover_s then
      ctx.report:finding { severity = "error", subject = { rank = d.victim },
        message = ("drop %d: a working shrunk communicator took %.2f s after detection (threshold %.2f s)"):format(
          d.drop, d.working_s, o.max_recover_s),
        evidence = { drop = d.drop, working_s = d.working_s, threshold_s = o.max_recover_s } }
    end
  end
end

return recipe
