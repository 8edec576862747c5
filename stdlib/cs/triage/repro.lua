-- cs.triage.repro: writes repro.lua + repro.toml from a cs.triage diagnosis (docs/triage.md).
-- repro.lua holds the process groups (rank lists) and the collective sequence as plain Lua data
-- and replays them; repro.toml holds the customer's timeout and environment and plants the
-- observed failure as [[chaos]] (a rank that never arrives: hang; a size desync: desync with a
-- factor; another op: desync with op). `--set 'chaos=[]'` runs it without the fault, to see
-- whether the fabric alone reproduces it.
local P = require "cs.triage.parse"
local N, T = require "cs.triage.names", require "cs.triage.report"

local M = {}
local bad = P.bad

-- ---------------------------------------------------------------- the one writer
-- Every value from the artifacts that reaches repro.lua or repro.toml (names, descriptions,
-- file paths, op names, verdict lines, variables) goes through lua_str or toml_str, and only
-- there; comments hold fixed text or such a quoted value, never raw input: a newline, "]]" or
-- "--[[" in a customer's process-group name or directory name stays data (issue 30, class 1).

-- A Lua string literal of any bytes: printable ASCII as itself, except " and \, and every other
-- byte (control, DEL, non-ASCII) as \ddd with three digits (so a digit after it stays a digit).
-- The literal is ASCII on one line: it cannot end a comment or a string early.
local function lua_str(s)
  return '"' .. tostring(s):gsub('[%z\1-\31"\\\127-\255]', function(c) return ("\\%03d"):format(c:byte()) end) .. '"'
end

-- The code point of the valid UTF-8 sequence at s[i] (no overlong forms, no surrogates, at most
-- U+10FFFF) and its length, or nil.
local function utf8_at(s, i)
  local c = s:byte(i)
  local n, min, cp
  if c >= 0xc2 and c <= 0xdf then n, min, cp = 2, 0x80, c - 0xc0
  elseif c >= 0xe0 and c <= 0xef then n, min, cp = 3, 0x800, c - 0xe0
  elseif c >= 0xf0 and c <= 0xf4 then n, min, cp = 4, 0x10000, c - 0xf0
  else return nil end
  for k = 1, n - 1 do
    local b = s:byte(i + k)
    if not b or b < 0x80 or b > 0xbf then return nil end
    cp = cp * 64 + (b - 0x80)
  end
  if cp < min or cp > 0x10ffff or (cp >= 0xd800 and cp <= 0xdfff) then return nil end
  return cp, n
end

local TOML_ESC = { ['"'] = '\\"', ["\\"] = "\\\\" }

-- A TOML basic string of any bytes, in ASCII: " and \ escaped, every control character as
-- \uXXXX, valid UTF-8 as the \uXXXX or \UXXXXXXXX of its code point, and a byte that is not
-- part of valid UTF-8 as the code point of its value (TOML holds text, not bytes: such a byte
-- reads back as its Latin-1 character).
local function toml_str(s)
  s = tostring(s)
  if not s:find("[%z\1-\31\127-\255]") then return '"' .. s:gsub('["\\]', TOML_ESC) .. '"' end
  local out, i, n = {}, 1, #s
  while i <= n do
    local c = s:byte(i)
    if c >= 0x20 and c < 0x7f then
      out[#out + 1] = TOML_ESC[string.char(c)] or string.char(c)
      i = i + 1
    else
      local cp, len = nil, 1
      if c >= 0x80 then cp, len = utf8_at(s, i) end
      cp, len = cp or c, len or 1
      out[#out + 1] = cp > 0xffff and ("\\U%08X"):format(cp) or ("\\u%04X"):format(cp)
      i = i + len
    end
  end
  return '"' .. table.concat(out) .. '"'
end

-- A TOML key: bare when it is one of A-Za-z0-9_-, else quoted by toml_str.
local function toml_key(k)
  k = tostring(k)
  return k:match("^[%w_%-]+$") and k or toml_str(k)
end

-- A note from the artifacts for a comment or a `customer` field: at most `max` bytes of it
-- (the names a repro replays are kept whole, in GROUPS), quoted by `quote`.
local NOTE_MAX = 1000
local function note(quote, s, max)
  s = tostring(s)
  max = max or NOTE_MAX
  if #s > max then s = s:sub(1, max) .. ("... (%d bytes in all)"):format(#s) end
  return quote(s)
end

M.lua_str, M.toml_str = lua_str, toml_str

-- A list of ranks (numbers only: %d refuses anything else).
local function list(t)
  local p = {}
  for _, x in ipairs(t) do p[#p + 1] = ("%d"):format(x) end
  return table.concat(p, ", ")
end

-- Which customer ranks to keep at `n` ranks, keeping the group shapes where they fit: the ranks
-- the verdict names first, then whole groups, smallest first (a tensor-parallel pair stays a
-- pair), the failing group's before the others, then the lowest ranks.
local function select_ranks(world, n, named, groups, failing)
  local keep, seen = {}, {}
  local function add(r)
    if #keep < n and not seen[r] and r < world then seen[r] = true; keep[#keep + 1] = r end
  end
  for _, r in ipairs(named) do add(r) end
  local sub = {}
  for _, g in ipairs(groups) do
    if #g.ranks < world and #g.ranks > 1 then sub[#sub + 1] = g end
  end
  table.sort(sub, function(a, b)
    if #a.ranks ~= #b.ranks then return #a.ranks < #b.ranks end
    return a.ranks[1] < b.ranks[1]
  end)
  local function room_for(g)
    local need = 0
    for _, r in ipairs(g.ranks) do if not seen[r] then need = need + 1 end end
    return need > 0 and #keep + need <= n
  end
  -- complete the groups of the named ranks, then whole groups of the failing group's members
  for _, g in ipairs(sub) do
    local touches = false
    for _, r in ipairs(g.ranks) do if seen[r] then touches = true end end
    if touches and room_for(g) then for _, r in ipairs(g.ranks) do add(r) end end
  end
  for _, g in ipairs(sub) do
    if room_for(g) then for _, r in ipairs(g.ranks) do add(r) end end
  end
  for _, r in ipairs(failing and failing.ranks or {}) do add(r) end
  for r = 0, world - 1 do add(r) end
  table.sort(keep)
  local map = {}
  for i, r in ipairs(keep) do map[r] = i - 1 end
  return keep, map
end

-- The steps of build (below) share one table, b: the repro being built, each step filling its part.

-- the groups with a collective sequence, the failing one (G, its verdict v), the customer's
-- world, the repro's ranks (n) and the customer ranks it keeps (keep; map: customer rank -> here)
local function scope(diag, opts)
  local G = T.failure(diag)
  local groups_with_seq = {}
  for _, g in ipairs(diag.groups) do if g.sequence and #g.sequence > 0 then groups_with_seq[#groups_with_seq + 1] = g end end
  if #groups_with_seq == 0 then return nil, "no collective sequence in the artifacts (a watchdog line or a Flight Recorder dump is needed)" end
  G = G or groups_with_seq[1]
  local world = diag.world or 0
  for _, g in ipairs(diag.groups) do for _, r in ipairs(g.ranks or {}) do if r + 1 > world then world = r + 1 end end end
  local n = (opts.ranks and opts.ranks > 0) and opts.ranks or world
  if n > world then bad(("triage: --ranks %d is more than the customer's %d ranks (the repro scales down, keeping the group shapes)"):format(n, world)) end
  if n < 2 then
    -- a one-rank job (a single-GPU run's dump) has nothing between ranks to reproduce: no repro,
    -- not a usage error; asking for one rank is one
    if not (opts.ranks and opts.ranks > 0) then return nil, ("the artifacts show a job of %d rank: a repro needs 2 or more"):format(world) end
    bad("triage: --ranks must be at least 2")
  end
  local v = G.verdict
  local keep, map = select_ranks(world, n, v.ranks or {}, groups_with_seq, G)
  return { G = G, v = v, groups_with_seq = groups_with_seq, world = world, n = n, keep = keep, map = map }
end

-- the kept groups, mapped (b.groups: { g, ranks here, customer ranks }; b.gindex: group -> index)
local function map_groups(b)
  local G, map, groups_with_seq = b.G, b.map, b.groups_with_seq
  local groups, gindex = {}, {}
  for _, g in ipairs(groups_with_seq) do
    local ranks, cust = {}, {}
    for _, r in ipairs(g.ranks) do
      if map[r] then ranks[#ranks + 1] = map[r]; cust[#cust + 1] = r end
    end
    if #ranks > 0 then
      groups[#groups + 1] = { g = g, ranks = ranks, customer = cust }
      gindex[g] = #groups
    end
  end
  if not gindex[G] then bad("triage: the failing process group has none of the kept ranks") end
  b.groups, b.gindex = groups, gindex
end

-- does a repro rank (mapped) take part in item `it`?
local function takes_part(groups, it, r)
  if it.transfer then
    local g = groups[it.gi].ranks
    return g[it.from + 1] == r or g[it.to + 1] == r
  end
  for _, x in ipairs(groups[it.gi].ranks) do if x == r then return true end end
  return false
end

-- the window replayed (b.seq): every group's records up to the failure (b.fail_rec), in creation
-- order, the last opts.last of them; b.skipped coalescing records, b.unkept transfers left out
local function window(b, opts)
  local G, v, map, groups, gindex = b.G, b.v, b.map, b.groups, b.gindex
  -- the sequence: every group's records, up to the failure, in creation order
  local fail_rec = v.rec or G.sequence[#G.sequence]
  local items = {}
  for _, gr in ipairs(groups) do
    local stop = #gr.g.sequence
    for i, rec in ipairs(gr.g.sequence) do
      items[#items + 1] = { gi = gindex[gr.g], rec = rec, ord = i }
      if gr.g == G and rec == fail_rec then stop = i; break end
    end
    -- point-to-point transfers, after the collective they followed (untimed: by that position)
    for _, tr in ipairs(gr.g.p2p or {}) do
      local pos = 0
      for i, rec in ipairs(gr.g.sequence) do if rec.seq <= tr.after then pos = i end end
      if pos < stop or gr.g ~= G then items[#items + 1] = { gi = gindex[gr.g], rec = tr.rec, ord = pos + 0.5, transfer = tr } end
    end
  end
  local all_timed = true
  for _, it in ipairs(items) do if not it.rec.time then all_timed = false end end
  table.sort(items, function(a, b)
    if all_timed and a.rec.time ~= b.rec.time then return a.rec.time < b.rec.time end
    if a.gi ~= b.gi then return a.gi < b.gi end
    return a.ord < b.ord
  end)
  -- drop what came after the failure, keep the last `last`
  local fi
  for i, it in ipairs(items) do if it.rec == fail_rec then fi = i end end
  while #items > fi do table.remove(items) end
  local last = opts.last or 32
  local first = math.max(1, fi - last + 1)
  local seq = {}
  local skipped, unkept = 0, 0
  local function local_rank(gi, customer)
    local r = map[customer]
    for i, x in ipairs(groups[gi].ranks) do if x == r then return i - 1 end end
    return nil
  end
  for i = first, fi do
    local it = items[i]
    if it.transfer then
      it.from, it.to = local_rank(it.gi, it.transfer.src), local_rank(it.gi, it.transfer.dst)
      if it.from and it.to then seq[#seq + 1] = it else unkept = unkept + 1 end
    elseif it.rec.op and it.rec.op ~= "coalesced" then seq[#seq + 1] = it else skipped = skipped + 1 end
  end
  if #seq == 0 or seq[#seq].rec ~= fail_rec then bad("triage: the failing collective is point-to-point or coalesced; no repro written") end
  b.fail_rec, b.seq, b.skipped, b.unkept = fail_rec, seq, skipped, unkept
end

-- chaos: the failing call is the k-th operation on its group's communicator for a rank
-- (comm:seq() counts its sends and receives there too)
local function k_of(b, r)
  local k = 0
  for _, it in ipairs(b.seq) do if it.gi == b.gindex[b.G] and takes_part(b.groups, it, r) then k = k + 1 end end
  return k
end

-- the observed failure as chaos (b.chaos, before it is split by `after`), what is planted or
-- why nothing is (b.chaos_note), the failing op (b.op) and the slow rank(s) to check (b.slow)
local function plant(b)
  local G, v, map, seq, groups, gindex, fail_rec = b.G, b.v, b.map, b.seq, b.groups, b.gindex, b.fail_rec
  local k = 0
  for _, it in ipairs(seq) do if it.gi == gindex[G] and not it.transfer then k = k + 1 end end
  local op = fail_rec.op
  local chaos, chaos_note = nil, nil
  local slow = nil
  local function mapped(rs)
    local out = {}
    for _, r in ipairs(rs) do if map[r] then out[#out + 1] = map[r] end end
    return out
  end
  if v.kind == "missing" then
    chaos = { kind = "hang", ranks = mapped(v.ranks), ops = { op }, after = k - 1 }
    chaos_note = ("rank(s) %s never arrive at %s #%d, as customer rank(s) %s never joined %s #%d"):format(
      list(chaos.ranks), op, k, list(v.ranks), fail_rec.name, v.seq)
  elseif v.kind == "mismatch" then
    local e = v.errors[1]
    if e.kind == "SIZE_OR_SYNTAX_MISMATCH" then
      local gsize = #groups[gindex[G]].ranks
      local want = N.count_of(fail_rec, gsize)
      local got = N.count_of(e.rec, gsize)
      if want and got and want > 0 and got > 0 and want ~= got then
        local f = math.min(want, got) / math.max(want, got)
        chaos = { kind = "desync", ranks = mapped(v.ranks), ops = { op }, after = k - 1, factor = f }
        chaos_note = ("rank(s) %s call %s #%d with %g times the count of the others, as customer rank(s) %s did (%d vs %d elements)"):format(
          list(chaos.ranks), op, k, f, list(v.ranks), got, want)
      else
        chaos_note = "the customer's size mismatch does not change commscript's element count (shapes differ, counts agree): not planted"
      end
    elseif e.kind == "COLLECTIVE_TYPE_MISMATCH" and e.rec.op and e.rec.op ~= op then
      chaos = { kind = "desync", ranks = mapped(v.ranks), ops = { op }, after = k - 1, op = e.rec.op }
      chaos_note = ("rank(s) %s call %s instead of %s #%d, as customer rank(s) %s called %s"):format(
        list(chaos.ranks), e.rec.op, op, k, list(v.ranks), e.rec.name)
    else
      chaos_note = ("a %s has no commscript chaos kind: not planted; the repro runs the sequence as the majority called it"):format(e.kind)
    end
    if chaos and #chaos.ranks == 0 then chaos = nil; chaos_note = "the culprit ranks were not kept: not planted" end
  elseif v.kind == "stuck" then
    chaos_note = "every rank joined the last collective: nothing to plant; the repro asks whether the fabric alone hangs"
  elseif v.kind == "slow" then
    -- a delay before each collective of the slow rank(s), as late as the customer's were
    local ms = math.max(1, math.min(1000, math.floor(v.lateness_ms + 0.5)))
    local ops, seen = {}, {}
    for _, it in ipairs(seq) do
      if not it.transfer and not seen[it.rec.op] then seen[it.rec.op] = true; ops[#ops + 1] = it.rec.op end
    end
    chaos = { kind = "delay", ranks = mapped(v.ranks), ops = ops, ms = ms }
    slow = { group = gindex[G], ranks = chaos.ranks, customer = v.ranks, lateness_ms = v.lateness_ms }
    chaos_note = ("rank(s) %s wait %d ms before each collective, as customer rank(s) %s arrived %.1f ms late"):format(
      list(chaos.ranks), ms, list(v.ranks), v.lateness_ms)
    if #chaos.ranks == 0 then chaos, slow = nil, nil; chaos_note = "the slow ranks were not kept: not planted" end
  end
  b.op, b.chaos, b.chaos_note, b.slow = op, chaos, chaos_note, slow
end

-- the rules: one per distinct `after` of the planted ranks (their own point-to-point calls on
-- the failing group's communicator count in comm:seq())
local function chaos_rules(b)
  local chaos = b.chaos
  local rules = {}
  if chaos and chaos.after then
    local by_after, order = {}, {}
    for _, r in ipairs(chaos.ranks) do
      local a = k_of(b, r) - 1
      if not by_after[a] then
        local c = {}
        for key, x in pairs(chaos) do c[key] = x end
        c.ranks, c.after = {}, a
        by_after[a] = c
        order[#order + 1] = a
      end
      table.insert(by_after[a].ranks, r)
    end
    for _, a in ipairs(order) do rules[#rules + 1] = by_after[a] end
  elseif chaos then
    rules[1] = chaos
  end
  return rules
end

-- The rule counts per communicator: an earlier call of the same op on another group of a
-- planted rank, past `after` on its own communicator, would take the fault instead. A note in b.chaos_note.
local function warn_earlier_match(b)
  local chaos, chaos_note, seq, fail_rec, op, groups = b.chaos, b.chaos_note, b.seq, b.fail_rec, b.op, b.groups
  if chaos and chaos.after then
    local planted = {}
    for _, r in ipairs(chaos.ranks) do planted[r] = true end
    local count = {}
    for _, it in ipairs(seq) do
      if it.rec == fail_rec then break end
      local member = false
      for r in pairs(planted) do if takes_part(groups, it, r) then member = true end end
      if member then
        count[it.gi] = (count[it.gi] or 0) + 1
        if it.rec.op == op and not it.transfer and count[it.gi] > chaos.after then
          chaos_note = chaos_note .. (" (warning: the rule also matches %s #%d of group %s, which comes first: move that call, or the fault lands there)"):format(
            op, count[it.gi], groups[it.gi].g.name)
          break
        end
      end
    end
  end
  b.chaos_note = chaos_note
end

-- repro.lua after its data: a communicator per group, SEQUENCE replayed, SLOW checked
local RUNNER = [[

local function member(g, rank)
  for i, r in ipairs(g.ranks) do
    if r == rank then return i - 1 end
  end
  return nil
end

function recipe.run(ctx)
  -- The groups and the planted chaos name ranks of a job of RANKS ranks: on any other number
  -- the sequence would not be the customer's (a rank named by chaos may not even exist).
  if ctx.size ~= RANKS then
    cs.raise(cs.exit.bad_input, ("this repro was written for %d ranks, not %d: run it with mpirun -np %d, or write one for %d ranks by running triage again on the same artifacts with --ranks %d"):format(
      RANKS, ctx.size, RANKS, ctx.size, ctx.size))
  end
  -- One communicator per group, each split from the world (ranks outside a group get nil).
  local comms = {}
  for i, g in ipairs(GROUPS) do
    local key = member(g, ctx.rank)
    comms[i] = ctx.comm:split(key and 0 or -1, key or 0)
  end
  local buffers, fallback = {}, {}
  local function tensor(comm, dtype, count)
    if not comm:supports(dtype) then
      if not fallback[dtype] then
        fallback[dtype] = true
        ctx.log("%s is not supported by --backend %s: running float32 with the same element counts", dtype, comm:backend())
      end
      dtype = "float32"
    end
    local k = dtype .. ":" .. count
    buffers[k] = buffers[k] or {}
    local pool = buffers[k]
    pool.n = (pool.n or 0) % 2 + 1
    pool[pool.n] = pool[pool.n] or cs.tensor(dtype, math.max(count, 1))
    return pool[pool.n]
  end
  local waited, calls = 0, 0  -- seconds in the calls of SLOW's group, and how many
  for i, c in ipairs(SEQUENCE) do
    local comm = comms[c.group]
    if comm then
      local n, size = c.count, comm:size()
      local t0 = cs.now()
      if c.op == "send" then
        local me = comm:rank()
        if me == c.from then
          comm:send(tensor(comm, c.dtype, n), c.to)
        elseif me == c.to then
          comm:recv(tensor(comm, c.dtype, n), c.from)
        end
      elseif c.op == "barrier" then
        comm:barrier()
      elseif c.op == "allreduce" then
        comm:allreduce(tensor(comm, c.dtype, n), tensor(comm, c.dtype, n))
      elseif c.op == "allgather" then
        comm:allgather(tensor(comm, c.dtype, n), tensor(comm, c.dtype, n * size))
      elseif c.op == "reduce_scatter" then
        comm:reduce_scatter(tensor(comm, c.dtype, n * size), tensor(comm, c.dtype, n))
      elseif c.op == "alltoall" then
        comm:alltoall(tensor(comm, c.dtype, n * size), tensor(comm, c.dtype, n * size))
      elseif c.op == "broadcast" then
        local t = tensor(comm, c.dtype, n)
        comm:broadcast(t, t, 0)
      elseif c.op == "reduce" then
        comm:reduce(tensor(comm, c.dtype, n), tensor(comm, c.dtype, n), 0)
      elseif c.op == "gather" then
        comm:gather(tensor(comm, c.dtype, n), tensor(comm, c.dtype, n * size), 0)
      elseif c.op == "scatter" then
        comm:scatter(tensor(comm, c.dtype, n * size), tensor(comm, c.dtype, n), 0)
      else
        cs.raise(cs.exit.bad_input, ("SEQUENCE[%d]: unknown op '%s'"):format(i, tostring(c.op)))
      end
      if SLOW and c.group == SLOW.group and c.op ~= "send" then waited, calls = waited + (cs.now() - t0), calls + 1 end
    end
  end
  local named = {}
  if SLOW then
    -- time waiting for the others: the calls' time less the delay planted on this rank there
    local g = comms[SLOW.group]
    if g then
      for _, f in ipairs(cs.chaos.fired()) do
        if f.kind == "delay" and (f.comm == nil or f.comm == g:name()) then waited = waited - f.ms / 1000 end
      end
    end
    local all = ctx.comm:allgather_value(g and { member(GROUPS[SLOW.group], ctx.rank), waited } or false)
    local times = {}
    for _, x in ipairs(all) do if x then times[x[1] + 1] = x[2] * 1e6 end end
    local late = {}
    -- a straggler as commscript names one, and at least half as late as the customer's
    for _, s in ipairs(cs.diagnose.stragglers(times)) do
      local ms = s.lateness / 1000 / math.max(calls, 1)
      if ms >= SLOW.lateness_ms / 2 then
        late[#late + 1] = ("%d (%.1f ms a collective)"):format(GROUPS[SLOW.group].ranks[s.rank + 1], ms)
        named[#named + 1] = GROUPS[SLOW.group].ranks[s.rank + 1]
      end
    end
    if #named > 0 then
      table.sort(named)
      local msg = ("slow: rank(s) %s arrive late at the collectives of group %d: the others wait for them; the customer's slow rank(s): %s"):format(
        table.concat(late, ", "), SLOW.group, table.concat(SLOW.ranks, ", "))
      ctx.log("%s", msg)
      ctx.report:finding { severity = "error", kind = "repro.slow", subject = { ranks = named }, message = msg,
        evidence = { waited_us = times, customer_lateness_ms = SLOW.lateness_ms },
        remedy = "run without the planted delay (--set 'chaos=[]') to see whether the fabric alone makes them late" }
    else
      ctx.log("no rank arrives late: the slow rank did not reproduce")
    end
  end
  -- Every rank waits for the others here, so a rank done with its groups early is not taken
  -- for a missing one while another group is stuck.
  ctx.comm:barrier()
  if #named == 0 then ctx.log("all %d operation(s) completed on every rank: the failure did not reproduce", #SEQUENCE) end
end

return recipe]]

-- ---------------------------------------------------------------- repro.lua
local function repro_lua(b, opts)
  local G, v, n, world, keep, map, groups, seq = b.G, b.v, b.n, b.world, b.keep, b.map, b.groups, b.seq
  local fail_rec, skipped, unkept, timeout, chaos_note, slow = b.fail_rec, b.skipped, b.unkept, b.timeout, b.chaos_note, b.slow
  local L = {}
  local function w(fmt, ...) L[#L + 1] = select("#", ...) > 0 and fmt:format(...) or fmt end
  w("-- repro.lua: written by `commscript triage` from the customer's artifacts. Every text taken")
  w("-- from them is a quoted string here, in these comments too. The artifacts:")
  for i, s in ipairs(opts.sources or {}) do
    if i > 12 then w("--   ... and %d more", #opts.sources - 12); break end
    w("--   %s", note(lua_str, s))
  end
  w("-- What they show:")
  w("--   %s", note(lua_str, T.verdict_line(G)))
  if v.fr_trace then w("--   fr_trace: %s", note(lua_str, v.fr_trace)) end
  w("-- This recipe replays the last %d collective(s) before the failure on %d rank(s) (the customer ran %d; customer", #seq, n, world)
  w("-- rank -> rank here: %s).", (function()
    local p = {}
    for _, r in ipairs(keep) do p[#p + 1] = ("%d->%d"):format(r, map[r]) end
    return table.concat(p, ", ")
  end)())
  if skipped > 0 then w("-- %d coalescing record(s) in that window are left out.", skipped) end
  if unkept > 0 then w("-- %d point-to-point transfer(s) with a rank not kept here are left out.", unkept) end
  w("-- repro.toml sets the customer's timeout (%g s) and plants the failure as chaos:", timeout)
  w("--   %s", chaos_note and note(lua_str, chaos_note) or "nothing planted")
  w("-- Run it on %d ranks (it refuses any other number; exit 5 when it reproduces; --timeout 5 shortens the wait):", n)
  w("--   mpirun -np %d commscript --config repro.toml repro.lua", n)
  w("-- Without the planted fault (does the fabric alone reproduce it?):")
  w("--   mpirun -np %d commscript --config repro.toml --set 'chaos=[]' repro.lua", n)
  w("-- For another number of ranks, run triage again on the same artifacts with --ranks N.")
  w("-- GROUPS and SEQUENCE are plain data: edit them, and send the files back.")
  w("local cs = require \"commscript\"")
  w("")
  w("local recipe = cs.recipe {")
  w("  name = \"repro_triage\",")
  w("  version = \"1.0.0\",")
  w("  requires = \">=0.1, <1.0\",")
  w("  summary = %s,", lua_str("replay of a customer's collective sequence (" .. tostring(v.kind or "?") .. ")"))
  w("}")
  w("")
  w("-- The number of ranks this repro was written for (--ranks of triage).")
  w("local RANKS = %d", n)
  w("")
  w("-- Process groups: the ranks of this job in each (their customer ranks in the comment).")
  w("local GROUPS = {")
  for i, gr in ipairs(groups) do
    w("  { name = %s, desc = %s, ranks = { %s } },  -- [%d] customer ranks %s", lua_str(gr.g.name), lua_str(gr.g.desc or ""),
      list(gr.ranks), i, list(gr.customer))
  end
  w("}")
  w("")
  w("-- The collectives, oldest first: the group (an index into GROUPS), commscript's operation, the")
  w("-- element count of the call (lua-api.md, Collectives: allgather and reduce_scatter count one")
  w("-- rank's share, alltoall one peer's), the dtype, and what the customer's trace recorded.")
  w("-- op = \"send\" is a point-to-point transfer: rank `from` of the group's communicator sends")
  w("-- `count` elements to rank `to`, which receives them.")
  w("local SEQUENCE = {")
  for _, it in ipairs(seq) do
    local gsize = #groups[it.gi].ranks
    if it.transfer then
      w("  { group = %d, op = \"send\", from = %d, to = %d, count = %d, dtype = %s, customer = %s },", it.gi, it.from, it.to,
        it.transfer.count, lua_str(it.rec.dtype or "float32"), note(lua_str, ("%s (customer ranks %d -> %d) @ %s"):format(
          tostring(it.rec.profiling_name), it.transfer.src, it.transfer.dst, tostring(it.rec.at))))
    else
      -- alltoall keeps the customer's count per peer; the others their count per rank
      local c = N.count_of(it.rec, it.rec.op == "alltoall" and #groups[it.gi].g.ranks or gsize)
      local mark = it.rec == fail_rec and "  -- <- the failure" or ""
      w("  { group = %d, op = %s, count = %d, dtype = %s, customer = %s },%s", it.gi, lua_str(it.rec.op), c or 0,
        lua_str(it.rec.dtype or "float32"), note(lua_str, T.rec_text(it.rec) .. " @ " .. tostring(it.rec.at)), mark)
    end
  end
  w("}")
  w("")
  if slow then
    w("-- The customer's slow rank(s): the recipe measures how long each rank waits in the collectives of")
    w("-- this group (less the delay planted on it) and names the ranks the others wait for, when they")
    w("-- are at least half as late as the customer's (exit 3: reproduced).")
    w("local SLOW = { group = %d, ranks = { %s }, customer_ranks = { %s }, lateness_ms = %.3f }", slow.group, list(slow.ranks),
      list(slow.customer), slow.lateness_ms)
  else
    w("local SLOW = nil  -- the customer's trace shows no slow rank")
  end
  w(RUNNER)
  return table.concat(L, "\n") .. "\n"
end

-- ---------------------------------------------------------------- repro.toml
local function repro_toml(b, diag)
  local G, timeout, chaos, chaos_note, rules = b.G, b.timeout, b.chaos, b.chaos_note, b.rules
  local Tm = {}
  local function t(fmt, ...) Tm[#Tm + 1] = select("#", ...) > 0 and fmt:format(...) or fmt end
  t("# repro.toml: written by `commscript triage`; the config of repro.lua. Every text taken from")
  t("# the customer's artifacts is a quoted string here, in these comments too.")
  t("# %s", note(toml_str, T.verdict_line(G)))
  t("")
  t("[run]")
  t("# the customer's collective timeout (Timeout(ms)=%s); --timeout on the command line overrides it",
    type(G.timeout_ms) == "number" and ("%.17g"):format(G.timeout_ms) or "?")
  t("timeout = %g", timeout)
  t("seed = 1")
  local names = {}
  for k in pairs(diag.env) do
    if k:match("^NCCL_") or k:match("^TORCH_NCCL_") or k:match("^UCX_") then names[#names + 1] = k end
  end
  table.sort(names)
  if #names > 0 then
    t("")
    t("[env]")
    t("# recorded from the customer's job (read by NCCL; harmless on the MPI backend)")
    for _, k in ipairs(names) do
      local risky = k:match("PLUGIN") or k:match("FILE") or k:match("PATH") or k:match("LIB") or k:match("DIR")
      t("%s%s = %s  # %s", risky and "# " or "", toml_key(k), toml_str(diag.env[k]), note(toml_str, diag.env_at[k]))
    end
  end
  t("")
  if chaos then
    t("# The observed failure, planted:")
    t("#   %s", note(toml_str, chaos_note))
    t("# Remove the [[chaos]] table(s), or run with --set 'chaos=[]', to run the sequence without it.")
    for _, rule in ipairs(rules) do
      t("[[chaos]]")
      t("kind = %s", toml_str(rule.kind))
      t("ranks = [%s]", list(rule.ranks))
      local ops = {}
      for _, o in ipairs(rule.ops) do ops[#ops + 1] = toml_str(o) end
      t("ops = [%s]", table.concat(ops, ", "))
      if rule.after then t("after = %d", rule.after) end
      if rule.ms then t("ms = %d", rule.ms) end
      if rule.factor then
        local short = ("%.15g"):format(rule.factor)
        t("factor = %s", tonumber(short) == rule.factor and short or ("%.17g"):format(rule.factor))
      end
      if rule.op then t("op = %s", toml_str(rule.op)) end
    end
  else
    t("# No chaos planted:")
    t("#   %s", chaos_note and note(toml_str, chaos_note) or "no failure seen")
  end
  return table.concat(Tm, "\n") .. "\n"
end

-- build(diag, opts) -> { lua = text, toml = text, summary = {...} } or nil, why.
-- opts: ranks (0: the customer's), last (collectives kept before the failure), timeout (s; 0:
-- the customer's), sources (file list for the header).
function M.build(diag, opts)
  opts = opts or {}
  local b, why = scope(diag, opts)
  if not b then return nil, why end
  map_groups(b)
  window(b, opts)
  plant(b)
  b.rules = chaos_rules(b)
  warn_earlier_match(b)
  local G = b.G
  local t = (opts.timeout and opts.timeout > 0) and opts.timeout or (G.timeout_ms and G.timeout_ms / 1000) or 300
  if type(t) ~= "number" or t ~= t or t <= 0 then t = 300 end
  b.timeout = math.min(t, 7 * 86400)  -- the engine's longest deadline
  return { lua = repro_lua(b, opts), toml = repro_toml(b, diag),
    summary = { ranks = b.n, customer_ranks = b.world, collectives = #b.seq, chaos = b.rules[1], rules = b.rules, note = b.chaos_note,
      timeout = b.timeout, group = G.name, kind = b.v.kind } }
end

-- Writes repro.lua and repro.toml into `dir`; returns their paths.
function M.write(dir, built)
  local paths = {}
  for _, f in ipairs({ { "repro.lua", built.lua }, { "repro.toml", built.toml } }) do
    local p = dir .. "/" .. f[1]
    local h, err = io.open(p, "w")
    if not h then
      error(("triage: cannot write %s: %s"):format(p, tostring(err)), 0)  -- a runtime error: exit 2
    end
    h:write(f[2])
    h:close()
    paths[#paths + 1] = p
  end
  return paths
end

return M
