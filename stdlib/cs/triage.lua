-- cs.triage: from a customer's artifacts to a diagnosis per process group (docs/triage.md).
--   load(paths)                  -> artifacts (files and directories; cs.triage_parse reads each)
--   diagnose(artifacts [, opts]) -> diagnosis {groups, nccl, env, ras, tests, world, ...}
--   lines(diagnosis)             -> the text printed by recipes/triage.lua
--   findings(diagnosis)          -> report findings, each with evidence.at = "file:line"
-- The Flight Recorder analysis follows PyTorch's fr_trace (torch/distributed/flight_recorder/
-- components/builder.py build_collectives, utils.py check_current_entry_match/error_analysis,
-- types.py Op.match): traces aligned by record_id, matched per process group by
-- collective_seq_id; the first sequence number a member rank never reached is "not all ranks
-- joining" with its missing ranks, the first whose op, sizes, dtypes or state differ is a
-- mismatch naming the culprit; fr_trace pairs nothing after a group's first problem, nor do we.
local native = require "commscript.native"
local P = require "cs.triage_parse"

local M = {}

local bad = P.bad

-- ---------------------------------------------------------------- names

-- The op of a Flight Recorder profiling name ("nccl:_all_gather_base", "nccl:send 0->1") or a
-- watchdog OpType ("_ALLGATHER_BASE"), as commscript calls it (nil for point-to-point).
function M.op_of(name)
  local n = tostring(name):gsub("^%w+:", ""):gsub(" .*$", ""):lower():gsub("_", "")
  if n:find("allgather", 1, true) then return "allgather" end
  if n:find("reducescatter", 1, true) then return "reduce_scatter" end
  if n:find("alltoall", 1, true) then return "alltoall" end
  if n:find("allreduce", 1, true) then return "allreduce" end
  if n:find("broadcast", 1, true) then return "broadcast" end
  if n:find("barrier", 1, true) then return "barrier" end
  if n:find("reduce", 1, true) then return "reduce" end
  if n:find("gather", 1, true) then return "gather" end
  if n:find("scatter", 1, true) then return "scatter" end
  if n:find("coalesced", 1, true) then return "coalesced" end
  return nil  -- send, recv, unknown
end

-- fr_trace's op type (types.py Op: the profiling name after "nccl:" up to a space).
local function fr_type(profiling_name)
  return (profiling_name:match("^[^:]*:([^ ]+)") or profiling_name)
end

-- c10::toString(ScalarType) -> commscript dtype.
local DTYPES = { Float = "float32", Double = "float64", Half = "float16", BFloat16 = "bfloat16", Int = "int32",
  Long = "int64", Byte = "uint8", Char = "int8", Bool = "uint8", Short = "int32", UInt32 = "uint32", UInt64 = "uint64" }
function M.dtype_of(torch_dtype)
  return DTYPES[torch_dtype] or "float32"
end

-- The element count commscript's call takes (lua-api.md, Collectives) for a record.
function M.count_of(rec, group_size)
  local op = rec.op
  local nin = rec.numel_in or P.total(rec.in_sizes)
  local nout = rec.numel_out or P.total(rec.out_sizes)
  if op == "allgather" then
    if rec.in_sizes and #rec.in_sizes > 0 then return P.numel(rec.in_sizes[1]) end
    return nin
  elseif op == "reduce_scatter" then
    if rec.out_sizes and #rec.out_sizes > 0 then return P.numel(rec.out_sizes[1]) end
    return nout
  elseif op == "scatter" then
    return nout
  elseif op == "alltoall" then  -- per peer
    return math.floor(nin / math.max(1, group_size))
  elseif op == "barrier" then
    return 0
  end
  return nin
end

local function ranks_text(list)
  local c = require "cs.text"
  return c.ranges(list)
end

local sorted_keys = require("cs.text").sorted_keys

-- ---------------------------------------------------------------- loading

-- Files and directories -> artifacts. A directory contributes the files under it; each file is
-- recognised by its content.
function M.load(paths)
  if type(paths) ~= "table" or #paths == 0 then
    bad("triage: no artifacts given (--paths FILE_OR_DIR[,...]: watchdog/NCCL logs, Flight Recorder dumps, NCCL RAS or nccl-tests output)")
  end
  local files, seen = {}, {}
  for _, p in ipairs(paths) do
    local kind = native.triage_kind(p)
    if kind == "directory" then
      local list = native.triage_list(p)
      if #list == 0 then bad(p .. ": an empty directory") end
      for _, f in ipairs(list) do if not seen[f] then seen[f] = true; files[#files + 1] = f end end
    elseif kind == "file" then
      if not seen[p] then seen[p] = true; files[#files + 1] = p end
    else
      bad(p .. ": no such file or directory")
    end
  end
  -- Memory is what triage watches (docs/triage.md, "Memory"): the collector starts a cycle when
  -- the heap has grown by a tenth since the last one (Lua's default waits for it to double),
  collectgarbage("setpause", 110)
  collectgarbage("setstepmul", 1000)  -- and ends it before the heap grows much more
  local out = {}
  for _, f in ipairs(files) do out[#out + 1] = P.read(f) end
  return out
end

-- ---------------------------------------------------------------- Flight Recorder analysis

-- The record of an entry is the entry's own table, given the record's fields (a second table
-- per entry took a third of triage's memory on large dumps; docs/triage.md, "Memory").
local function fr_record(e, path, idx, group_size)
  local rec = e
  rec.seq, rec.name = e.collective_seq_id, fr_type(e.profiling_name)
  rec.in_sizes, rec.out_sizes, rec.in_dtypes, rec.out_dtypes = e.input_sizes, e.output_sizes, e.input_dtypes, e.output_dtypes
  rec.timeout_ms = type(e.timeout_ms) == "number" and e.timeout_ms or nil
  rec.p2p = e.is_p2p == true or (e.profiling_name:find(":send ", 1, true) or e.profiling_name:find(":recv ", 1, true)) ~= nil
  rec.time = type(e.time_created_ns) == "number" and e.time_created_ns or nil
  rec.at = ("%s: entry %d (record_id %d)"):format(path, idx - 1, e.record_id)
  -- duration_ms: the GPU time of the call, inserted by the writer only once measured
  local d = e.duration_ms
  if type(d) == "number" and d == d and d >= 0 and d < 1e12 then rec.duration = d end
  if rec.p2p then
    -- ProcessGroupNCCL's names: "nccl:send 0->1" (group ranks: me -> peer), "nccl:recv 1<-0"
    local a, b = e.profiling_name:match(":send (%d+)%->(%d+)$")
    if a then rec.p2p_kind, rec.src_local, rec.dst_local = "send", tonumber(a), tonumber(b) end
    a, b = e.profiling_name:match(":recv (%d+)<%-(%d+)$")
    if a then rec.p2p_kind, rec.dst_local, rec.src_local = "recv", tonumber(a), tonumber(b) end
  end
  rec.op = M.op_of(rec.name)
  rec.numel_in, rec.numel_out = P.total(rec.in_sizes), P.total(rec.out_sizes)
  rec.dtype = M.dtype_of(rec.in_dtypes[1] or rec.out_dtypes[1])
  rec.count = M.count_of(rec, group_size)
  return rec
end

local function set_of(list)
  local s = {}
  for _, x in ipairs(list) do s[x] = true end
  return s
end

local function same_list(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if type(a[i]) == "table" then
      if type(b[i]) ~= "table" or not same_list(a[i], b[i]) then return false end
    elseif a[i] ~= b[i] then return false end
  end
  return true
end

local function dtype_set_eq(a, b)
  local sa, sb = set_of(a), set_of(b)
  for k in pairs(sa) do if not sb[k] then return false end end
  for k in pairs(sb) do if not sa[k] then return false end end
  return true
end

-- fr_trace's Op.match for collectives (types.py): the first difference, as fr_trace names it.
local function match(a, b, pg_size)
  if a.name ~= b.name then
    return "COLLECTIVE_TYPE_MISMATCH", ("Expected collective type: '%s' does not match found collective type: '%s'"):format(a.name, b.name)
  end
  local t = a.name
  if t ~= "all_to_all" and t ~= "scatter" and not same_list(a.in_sizes, b.in_sizes) then
    return "SIZE_OR_SYNTAX_MISMATCH", ("Expected input sizes: '%s' does not match found input sizes: '%s'"):format(
      P.shapes_text(a.in_sizes), P.shapes_text(b.in_sizes))
  end
  if t ~= "all_to_all" and t ~= "gather" and not same_list(a.out_sizes, b.out_sizes) then
    return "SIZE_OR_SYNTAX_MISMATCH", ("Expected output sizes: '%s' does not match found output sizes: '%s'"):format(
      P.shapes_text(a.out_sizes), P.shapes_text(b.out_sizes))
  end
  if (t == "all_reduce" or t == "allreduce_coalesced") and not same_list(a.in_sizes, b.out_sizes) then
    return "SIZE_OR_SYNTAX_MISMATCH", ("Expected input sizes: '%s' does not match found output sizes: '%s'"):format(
      P.shapes_text(a.in_sizes), P.shapes_text(b.out_sizes))
  end
  if (t == "all_gather" or t == "all_gather_base" or t == "all_gather_into_tensor_coalesced")
      and P.numel(b.out_sizes[1] or {}) ~= P.numel(a.in_sizes[1] or {}) * pg_size then
    return "SIZE_OR_SYNTAX_MISMATCH", ("Found input numel '%d * pg size %d' does not match output numel '%d'"):format(
      P.numel(b.in_sizes[1] or {}) or 0, pg_size, P.numel(b.out_sizes[1] or {}) or 0)
  end
  if (t == "reduce_scatter" or t == "_reduce_scatter_base" or t == "reduce_scatter_tensor_coalesced")
      and P.numel(b.in_sizes[1] or {}) ~= P.numel(a.out_sizes[1] or {}) * pg_size then
    return "SIZE_OR_SYNTAX_MISMATCH", ("Found input numel '%d' does not match output numel '%d * pg size %d'"):format(
      P.numel(b.in_sizes[1] or {}) or 0, P.numel(b.out_sizes[1] or {}) or 0, pg_size)
  end
  local dt = false
  if t ~= "scatter" and t ~= "gather" and t ~= "broadcast" and not dtype_set_eq(a.in_dtypes, a.out_dtypes)
      and a.in_sizes[1] and a.out_sizes[1] then dt = true end
  if t ~= "scatter" and t ~= "broadcast" and not dtype_set_eq(a.in_dtypes, b.in_dtypes) and a.in_sizes[1] and b.in_sizes[1] then dt = true end
  if t ~= "gather" and not dtype_set_eq(a.out_dtypes, b.out_dtypes) and a.out_sizes[1] and b.out_sizes[1] then dt = true end
  if dt then
    return "COLLECTIVE_DTYPE_MISMATCH", ("Expected dtypes: '%s' does not match found dtypes: '%s'"):format(
      table.concat(a.in_dtypes, ","), table.concat(b.in_dtypes, ","))
  end
  if a.state ~= b.state then
    return "COLLECTIVE_STATE_MISMATCH", ("Expected state: '%s' does not match found state: '%s'"):format(a.state, b.state)
  end
  return nil
end

local function signature(r)
  local parts = { r.name, P.shapes_text(r.in_sizes), P.shapes_text(r.out_sizes), table.concat(r.in_dtypes or {}, ","),
    table.concat(r.out_dtypes or {}, ","), r.state or "" }
  return table.concat(parts, "|")
end

-- The record most ranks agree on (ties: the lowest rank's), among `present` = {rank = rec}.
local function majority(present)
  local votes, first = {}, {}
  for _, r in ipairs(sorted_keys(present)) do
    local s = signature(present[r])
    votes[s] = (votes[s] or 0) + 1
    if not first[s] then first[s] = r end
  end
  local best, bestn, bestr
  for s, n in pairs(votes) do
    if not best or n > bestn or (n == bestn and first[s] < bestr) then best, bestn, bestr = s, n, first[s] end
  end
  return present[bestr], bestr
end

-- Flight Recorder dumps of different versions cannot be matched: the one version, or bad().
local function fr_version(dumps)
  local version
  for _, d in ipairs(dumps) do
    if version and d.version ~= version then
      bad(("%s: Flight Recorder version %s, but %s has %s: dumps of different versions cannot be matched (fr_trace refuses them too)"):format(
        d.path, d.version, dumps[1].path, version))
    end
    version = version or d.version
  end
  return version
end

-- The dumps by rank (bad() on two of one rank), and the first record_id every rank still holds.
local function fr_by_rank(dumps)
  local by_rank = {}
  for _, d in ipairs(dumps) do
    if by_rank[d.rank] then bad(("%s and %s: two dumps of rank %d"):format(by_rank[d.rank].path, d.path, d.rank)) end
    by_rank[d.rank] = d
  end
  -- align_trace_from_beginning: drop entries older than the newest first record_id.
  local start = 0
  for _, d in pairs(by_rank) do
    if d.entries[1] and d.entries[1].record_id > start then start = d.entries[1].record_id end
  end
  return by_rank, start
end

-- The process groups of every dump (key name|sorted ranks), validated across ranks as
-- build_groups_memberships does; their keys in the order first seen.
local function fr_groups(by_rank, version)
  local groups, order = {}, {}
  for _, r in ipairs(sorted_keys(by_rank)) do
    for _, g in ipairs(by_rank[r].groups) do
      local ranks = {}
      for i, x in ipairs(g.ranks) do ranks[i] = x end
      table.sort(ranks)
      local key = g.name .. "|" .. table.concat(ranks, ",")
      local G = groups[key]
      if not G then
        G = { key = key, name = g.name, desc = g.desc, ranks = ranks, source = "flight recorder", per_rank = {},
              entries = {}, dumped = {}, nodump = {}, version = version }
        groups[key] = G
        order[#order + 1] = key
      elseif G.desc ~= g.desc then
        bad(("%s: process group %s is '%s' there but '%s' in another dump"):format(by_rank[r].path, g.name, g.desc, G.desc))
      end
    end
  end
  return groups, order
end

-- The group a rank means by a name: the one of its pg_config that holds it.
local function fr_group_key(by_rank, rank, name)
  for _, g in ipairs(by_rank[rank].groups) do
    if g.name == name then
      local ranks = {}
      for i, x in ipairs(g.ranks) do ranks[i] = x end
      table.sort(ranks)
      return name .. "|" .. table.concat(ranks, ",")
    end
  end
  return nil
end

-- Every entry from `start` on, as a record, into its group's entries of its rank.
local function fr_assign_entries(by_rank, groups, start)
  for _, r in ipairs(sorted_keys(by_rank)) do
    local d = by_rank[r]
    for i, e in ipairs(d.entries) do
      if e.record_id >= start then
        local key = fr_group_key(by_rank, r, e.process_group[1])
        if not key then
          bad(("%s: entry %d is on process group %s, which its pg_config does not list"):format(d.path, i - 1, e.process_group[1]))
        end
        local G = groups[key]
        G.entries[r] = G.entries[r] or {}
        table.insert(G.entries[r], fr_record(e, d.path, i, #G.ranks))
      end
    end
  end
end

-- Per rank of G: last completed, first in flight (collectives only; p2p counted apart). Returns
-- the sequence numbers seen (sorted) and per rank its first record of each.
local function fr_rank_progress(G)
  local seqs, seqset = {}, {}
  local at_seq = {}  -- rank -> seq -> first record of that seq
  for _, r in ipairs(G.dumped) do
    local pr = { p2p = 0 }
    G.per_rank[r] = pr
    at_seq[r] = {}
    for _, rec in ipairs(G.entries[r] or {}) do
      if rec.p2p then
        pr.p2p = pr.p2p + 1
      elseif rec.name ~= "coalesced" then
        if rec.timeout_ms then G.timeout_ms = G.timeout_ms or rec.timeout_ms end
        if rec.state == "completed" then pr.last = rec
        elseif not pr.inflight then pr.inflight = rec end
        if not at_seq[r][rec.seq] then at_seq[r][rec.seq] = rec end
        if not seqset[rec.seq] then seqset[rec.seq] = true; seqs[#seqs + 1] = rec.seq end
      end
    end
  end
  table.sort(seqs)
  return seqs, at_seq
end

-- Matches sequence numbers in order and stops at the first problem (G.verdict: missing or
-- mismatch, with fr_trace's words); returns the sequence of reference records matched.
local function fr_match(G, seqs, at_seq)
  local size = #G.ranks
  local sequence = {}
  for _, s in ipairs(seqs) do
    local present, missing = {}, {}
    for _, r in ipairs(G.dumped) do
      if at_seq[r][s] then present[r] = at_seq[r][s] else missing[#missing + 1] = r end
    end
    local ref, refrank = majority(present)
    sequence[#sequence + 1] = ref
    if #missing > 0 then
      local joined = sorted_keys(present)
      G.verdict = { kind = "missing", seq = s, rec = ref, ranks = missing, joined = joined,
        fr_trace = ("Not all ranks joining collective, sequence number: %d; group info: %s; collective: %s; missing ranks: {%s}"):format(
          s, G.desc ~= "undefined" and (G.name .. ":" .. G.desc) or G.name, ref.profiling_name, table.concat(missing, ", ")) }
      break
    end
    local errors = {}
    for _, r in ipairs(sorted_keys(present)) do
      if r ~= refrank then
        local kind, detail = match(ref, present[r], size)
        if kind then errors[#errors + 1] = { rank = r, kind = kind, detail = detail, rec = present[r] } end
      end
    end
    if #errors > 0 then
      local culprits = {}
      for _, e in ipairs(errors) do culprits[#culprits + 1] = e.rank end
      local msgs = {}
      for _, e in ipairs(errors) do msgs[#msgs + 1] = ("Culprit rank %d; Error type: %s, %s"):format(e.rank, e.kind, e.detail) end
      G.verdict = { kind = "mismatch", seq = s, rec = ref, ranks = culprits, errors = errors, mismatch = errors[1].kind,
        fr_trace = ("Collective sequence number: %d has errors; collective: %s; error msg: %s"):format(
          s, ref.profiling_name, table.concat(msgs, "; ")) }
      break
    end
  end
  return sequence
end

-- Point-to-point transfers (replayed by the repro): each send a dumped rank recorded, and
-- each receive from a rank without a dump; group ranks -> global ranks as fr_trace's Op
-- does (the sorted member list). `after` = the collective sequence number the transfer
-- followed (the writer records the group's current collective_seq_id with it).
local function fr_p2p(G, by_rank)
  G.p2p = {}
  for _, r in ipairs(G.dumped) do
    for _, rec in ipairs(G.entries[r] or {}) do
      if rec.p2p_kind then
        local src, dst = G.ranks[rec.src_local + 1], G.ranks[rec.dst_local + 1]
        local mine = rec.p2p_kind == "send" and src == r or rec.p2p_kind == "recv" and dst == r and not by_rank[src]
        if src and dst and src ~= dst and mine then
          local sizes = rec.p2p_kind == "send" and rec.in_sizes or rec.out_sizes
          G.p2p[#G.p2p + 1] = { src = src, dst = dst, count = P.total(sizes) or 0, rec = rec, after = rec.seq }
        end
      end
    end
  end
end

-- No problem in the matched sequence: undecided (dumps missing), stuck or ok.
local function fr_verdict_unmatched(G, sequence)
  local last = sequence[#sequence]
  if #G.nodump > 0 then
    G.verdict = { kind = "undecided", ranks = G.nodump, seq = last and last.seq,
      fr_trace = ("We cannot decide what's wrong with this collective entry because we missed FR dumps from ranks ({%s})"):format(
        table.concat(G.nodump, ", ")) }
  elseif last and last.state ~= "completed" then
    G.verdict = { kind = "stuck", seq = last.seq, rec = last, ranks = {},
      fr_trace = "No errors found for this collective entry, There could be some other reasons why we see collective timeout." }
  else
    G.verdict = { kind = "ok", ranks = {} }
  end
end

-- A slow rank: every collective matched and completed, but one rank's calls took much less
-- time than the others' (duration_ms: the others waited in the call for it). The same
-- test as commscript's own straggler analysis (cs.diagnose.stragglers) on the mean
-- duration per rank over the collectives every rank completed with a duration.
local function fr_slow_rank(G, seqs, at_seq, sequence)
  if G.verdict.kind == "ok" and #G.dumped >= 3 and #G.nodump == 0 then
    local sums, n = {}, 0
    for _, s in ipairs(seqs) do
      local all = true
      for _, r in ipairs(G.dumped) do
        local rec = at_seq[r][s]
        if not (rec and rec.state == "completed" and rec.duration) then all = false end
      end
      if all then
        n = n + 1
        for _, r in ipairs(G.dumped) do sums[r] = (sums[r] or 0) + at_seq[r][s].duration end
      end
    end
    if n >= 3 then
      local times = {}
      for i, r in ipairs(G.dumped) do times[i] = sums[r] / n * 1000 end
      local st = require("cs.diagnose").stragglers(times)
      if #st > 0 then
        local ranks, means = {}, {}
        for _, x in ipairs(st) do ranks[#ranks + 1] = G.dumped[x.rank + 1] end
        table.sort(ranks)
        for i, r in ipairs(G.dumped) do means[#means + 1] = ("%d: %.2f ms"):format(r, times[i] / 1000) end
        local last = sequence[#sequence]
        G.verdict = { kind = "slow", ranks = ranks, seq = last.seq, rec = last, collectives = n,
          lateness_ms = st[1].lateness / 1000, median_ms = st[1].median / 1000, means = table.concat(means, ", ") }
      end
    end
  end
end

local function analyse_fr(dumps, diag)
  local version = fr_version(dumps)
  local by_rank, start = fr_by_rank(dumps)
  local groups, order = fr_groups(by_rank, version)
  fr_assign_entries(by_rank, groups, start)
  for _, key in ipairs(order) do
    local G = groups[key]
    for _, r in ipairs(G.ranks) do
      if by_rank[r] then G.dumped[#G.dumped + 1] = r else G.nodump[#G.nodump + 1] = r end
    end
    local seqs, at_seq = fr_rank_progress(G)
    local sequence = fr_match(G, seqs, at_seq)
    G.sequence = sequence
    fr_p2p(G, by_rank)
    if not G.verdict then fr_verdict_unmatched(G, sequence) end
    fr_slow_rank(G, seqs, at_seq, sequence)
    G.world_hint = #G.ranks
    diag.groups[#diag.groups + 1] = G
  end
  diag.fr_version = version
  for _, d in ipairs(dumps) do
    if d.nccl_version and d.nccl_version ~= "" then
      diag.nccl.version = diag.nccl.version or d.nccl_version
      diag.nccl.version_at = diag.nccl.version_at or d.path
    end
  end
end

-- ---------------------------------------------------------------- watchdog analysis

local OPTYPE_NAMES = { ALLREDUCE = "all_reduce", _ALLGATHER_BASE = "_all_gather_base", ALLGATHER = "all_gather",
  _REDUCE_SCATTER_BASE = "_reduce_scatter_base", REDUCE_SCATTER = "reduce_scatter", BROADCAST = "broadcast",
  REDUCE = "reduce", ALLTOALL_BASE = "all_to_all_single", ALLTOALL = "all_to_all", BARRIER = "barrier",
  GATHER = "gather", SCATTER = "scatter", SEND = "send", RECV = "recv", COALESCED = "coalesced" }

-- The watchdog lines of every text by group (its latest timeout per rank; the order groups were
-- first seen) and the progress lines by group and rank.
local function watchdog_groups(texts)
  local by_group, order = {}, {}
  local progress = {}
  for _, t in ipairs(texts) do
    for _, w in ipairs(t.watchdog) do
      local G = by_group[w.group]
      if not G then
        G = { key = "wd:" .. w.group, name = w.group, desc = w.desc, source = "watchdog", timeouts = {}, per_rank = {} }
        by_group[w.group] = G
        order[#order + 1] = w.group
      end
      local prev = G.timeouts[w.rank]
      if not prev or w.seq > prev.seq then G.timeouts[w.rank] = w end
    end
    for _, p in ipairs(t.progress) do
      progress[p.group] = progress[p.group] or {}
      progress[p.group][p.rank] = p
    end
  end
  return by_group, order, progress
end

-- A watchdog line's collective as a Flight Recorder-like record.
local function watchdog_record(w)
  local name = OPTYPE_NAMES[w.optype] or w.optype:lower()
  local rec = { seq = w.seq, name = name, profiling_name = "nccl:" .. name, op = M.op_of(name), numel_in = w.numel_in,
    numel_out = w.numel_out, in_sizes = { { w.numel_in } }, out_sizes = { { w.numel_out } }, in_dtypes = {}, out_dtypes = {},
    dtype = "float32", state = "started", timeout_ms = w.timeout_ms, at = w.at, ran_ms = w.ran_ms, optype = w.optype }
  return rec
end

-- Watchdog lines name only the collective that timed out: the repro runs it a few times
-- (the calls before it, of the same shape) and fails on the last, as the customer's did.
local function watchdog_sequence(best, seq)
  local reps = math.min(seq, 4)
  local sequence = {}
  for i = 1, reps - 1 do
    local c = {}
    for k, x in pairs(best) do c[k] = x end
    c.seq, c.state, c.at = seq - reps + i, "completed", best.at .. " (its shape, the calls before it)"
    sequence[i] = c
  end
  sequence[reps] = best
  return sequence
end

local function analyse_watchdog(texts, diag, world)
  local by_group, order, progress = watchdog_groups(texts)
  for _, gname in ipairs(order) do
    local G = by_group[gname]
    -- the collective most ranks timed out in (ties: the later one)
    local votes = {}
    for _, w in pairs(G.timeouts) do votes[w.seq] = (votes[w.seq] or 0) + 1 end
    local seq, n = nil, -1
    for s, c in pairs(votes) do if c > n or (c == n and s > seq) then seq, n = s, c end end
    local rec_of = watchdog_record
    -- expected ranks: the world for the default group, else the ranks that reported
    local ranks = {}
    if (G.desc == "default_pg" or G.name == "0") and world then
      for r = 0, world - 1 do ranks[#ranks + 1] = r end
    else
      ranks = sorted_keys(G.timeouts)
    end
    G.ranks = ranks
    local at_n = {}
    for r, w in pairs(G.timeouts) do if w.seq == seq then at_n[r] = rec_of(w) end end
    local votes2, best, bestn = {}, nil, -1
    for _, r in ipairs(sorted_keys(at_n)) do
      local rec = at_n[r]
      local s = rec.optype .. "|" .. tostring(rec.numel_in) .. "|" .. tostring(rec.numel_out)
      votes2[s] = (votes2[s] or 0) + 1
      if votes2[s] > bestn then best, bestn = rec, votes2[s] end
    end
    local missing, culprits, errors = {}, {}, {}
    for _, r in ipairs(ranks) do
      local pr = {}
      G.per_rank[r] = pr
      local p = progress[gname] and progress[gname][r]
      local w = G.timeouts[r]
      if w then
        pr.inflight = rec_of(w)
        local last = p and p.completed or (w.seq - 1)
        pr.last = { seq = last, name = p and p.completed and "(collective)" or "(inferred: the one before)", at = p and p.at or w.at }
      elseif p then
        pr.last = { seq = p.completed, name = "(collective)", at = p.at }
        if p.enqueued and p.enqueued > (p.completed or -1) then pr.inflight_seq = p.enqueued end
      end
      if not at_n[r] then
        missing[#missing + 1] = r
      elseif at_n[r].optype ~= best.optype then
        culprits[#culprits + 1] = r
        errors[#errors + 1] = { rank = r, kind = "COLLECTIVE_TYPE_MISMATCH", rec = at_n[r],
          detail = ("OpType=%s where the others have %s"):format(at_n[r].optype, best.optype) }
      elseif at_n[r].numel_in ~= best.numel_in or at_n[r].numel_out ~= best.numel_out then
        culprits[#culprits + 1] = r
        errors[#errors + 1] = { rank = r, kind = "SIZE_OR_SYNTAX_MISMATCH", rec = at_n[r],
          detail = ("NumelIn=%s NumelOut=%s where the others have NumelIn=%s NumelOut=%s"):format(
            tostring(at_n[r].numel_in), tostring(at_n[r].numel_out), tostring(best.numel_in), tostring(best.numel_out)) }
      end
    end
    G.timeout_ms = best.timeout_ms
    local joined = {}
    for _, r in ipairs(sorted_keys(at_n)) do joined[#joined + 1] = r end
    if #missing > 0 then
      G.verdict = { kind = "missing", seq = seq, rec = best, ranks = missing, joined = joined }
    elseif #errors > 0 then
      G.verdict = { kind = "mismatch", seq = seq, rec = best, ranks = culprits, errors = errors, mismatch = errors[1].kind }
    else
      G.verdict = { kind = "stuck", seq = seq, rec = best, ranks = {} }
    end
    G.sequence = watchdog_sequence(best, seq)
    G.timeouts = nil
    diag.groups[#diag.groups + 1] = G
  end
end

-- ---------------------------------------------------------------- the whole diagnosis

function M.diagnose(arts, opts)
  opts = opts or {}
  local diag = { groups = {}, nccl = { transports = {}, hosts = {}, net = {}, rings = {}, trees = {}, warns = {}, comms = {} },
    env = {}, env_at = {}, files = {}, counts = {}, ras = {}, tests = {} }
  local dumps, texts = {}, {}
  for _, a in ipairs(arts) do
    diag.counts[a.kind] = (diag.counts[a.kind] or 0) + 1
    diag.files[#diag.files + 1] = { path = a.path, kind = a.kind, encoding = a.encoding, rank = a.rank,
      recognised = a.recognised }
    if a.kind == "fr" then dumps[#dumps + 1] = a
    elseif a.kind == "text" then texts[#texts + 1] = a
    elseif a.kind == "ras" then diag.ras[#diag.ras + 1] = a
    elseif a.kind == "nccl_tests" then diag.tests[#diag.tests + 1] = a.tests end
    for k, v in pairs(a.env or {}) do
      if diag.env[k] ~= nil and diag.env[k] ~= v then
        diag.env_conflicts = diag.env_conflicts or {}
        diag.env_conflicts[#diag.env_conflicts + 1] = { name = k, a = diag.env[k], a_at = diag.env_at[k], b = v, b_at = a.env_at[k] }
      end
      diag.env[k] = v
      diag.env_at[k] = a.env_at[k]
    end
  end
  -- NCCL facts from the logs
  local world
  for _, t in ipairs(texts) do
    local nc = t.nccl
    for _, v in ipairs(nc.versions) do
      if not diag.nccl.version then diag.nccl.version, diag.nccl.version_at = v.version, v.at
      elseif v.version ~= diag.nccl.version then
        diag.nccl.version_mismatch = diag.nccl.version_mismatch or { a = diag.nccl.version, a_at = diag.nccl.version_at, b = v.version, b_at = v.at }
      end
    end
    for tr, at in pairs(nc.transports) do diag.nccl.transports[tr] = diag.nccl.transports[tr] or at end
    for h in pairs(nc.hosts) do diag.nccl.hosts[h] = true end
    for _, k in ipairs({ "net", "rings", "trees", "warns", "comms" }) do
      for _, x in ipairs(nc[k]) do table.insert(diag.nccl[k], x) end
    end
    if t.tests then diag.tests[#diag.tests + 1] = t.tests end
  end
  for _, c in ipairs(diag.nccl.comms) do
    if not world or c.nranks > world then world = c.nranks; diag.world_at = c.at end
  end
  for _, r in ipairs(diag.ras) do
    diag.nccl.version = diag.nccl.version or r.nccl_version
    diag.nccl.version_at = diag.nccl.version_at or r.path
  end
  for _, t in ipairs(diag.tests) do
    diag.nccl.version = diag.nccl.version or t.nccl_version
  end
  -- the world: --world, else NCCL's nranks, else the highest rank seen + 1
  if opts.world and opts.world > 0 then world = opts.world; diag.world_at = "--world" end
  local maxrank = -1
  for _, d in ipairs(dumps) do
    if d.rank > maxrank then maxrank = d.rank end
    for _, g in ipairs(d.groups) do for _, r in ipairs(g.ranks) do if r > maxrank then maxrank = r end end end
  end
  for _, t in ipairs(texts) do
    for _, w in ipairs(t.watchdog) do if w.rank > maxrank then maxrank = w.rank end end
    for _, p in ipairs(t.progress) do if p.rank > maxrank then maxrank = p.rank end end
  end
  if not world and maxrank >= 0 then world = maxrank + 1; diag.world_at = "the highest rank seen" end
  if world and world > P.MAX_RANKS then
    bad(("triage: a world of %s ranks (%s): more than the %d triage reads"):format(tostring(world), tostring(diag.world_at), P.MAX_RANKS))
  end
  diag.world = world
  if #dumps > 0 then analyse_fr(dumps, diag) end
  local has_wd = false
  for _, t in ipairs(texts) do if #t.watchdog > 0 then has_wd = true end end
  if has_wd and #dumps == 0 then analyse_watchdog(texts, diag, world)
  elseif has_wd then diag.watchdog_seen = true end
  -- the environment audit (cs.env), on what the artifacts show
  local n = 0
  for _ in pairs(diag.env) do n = n + 1 end
  if n > 0 then
    local env = require "cs.env"
    local ver = diag.nccl.version and diag.nccl.version:match("^(%d+%.%d+%.%d+)")
    diag.env_findings = env.audit(diag.env, { nccl_version = ver, sources = diag.env_at })
  else
    diag.env_findings = {}
  end
  local recognised = #diag.groups + #diag.ras + #diag.tests + n
  for _ in pairs(diag.nccl.transports) do recognised = recognised + 1 end
  recognised = recognised + #diag.nccl.comms + #diag.nccl.warns + (diag.nccl.version and 1 or 0)
  if recognised == 0 then
    bad("triage: nothing recognised in " .. #arts .. " file(s): no watchdog line, Flight Recorder dump, NCCL log line, NCCL RAS or nccl-tests output")
  end
  return diag
end

-- ---------------------------------------------------------------- text

local function rec_text(rec)
  if not rec then return "none" end
  if rec.name and rec.name:sub(1, 1) == "(" then return ("#%s %s"):format(tostring(rec.seq), rec.name) end
  local s = ("#%d %s"):format(rec.seq, rec.name)
  if rec.in_dtypes and #rec.in_dtypes > 0 then
    s = s .. (" in %s out %s %s"):format(P.shapes_text(rec.in_sizes), P.shapes_text(rec.out_sizes), table.concat(rec.in_dtypes, ","))
  elseif rec.numel_in then
    s = s .. (" NumelIn=%d NumelOut=%d"):format(rec.numel_in, rec.numel_out or 0)
  end
  if rec.state and rec.state ~= "completed" then s = s .. " (" .. rec.state .. ")" end
  return s
end
M.rec_text = rec_text

-- The verdict of a group in one line.
function M.verdict_line(G)
  local v = G.verdict
  local name = G.desc and G.desc ~= "undefined" and (G.name .. " (" .. G.desc .. ")") or G.name
  if v.kind == "missing" then
    return ("process group %s: rank(s) %s never joined %s; rank(s) %s waited in it"):format(
      name, ranks_text(v.ranks), rec_text(v.rec):gsub(" %(%a+%)$", ""), ranks_text(v.joined))
  elseif v.kind == "mismatch" then
    local parts = {}
    for _, e in ipairs(v.errors) do parts[#parts + 1] = ("rank %d: %s"):format(e.rank, e.detail) end
    return ("process group %s: %s at #%d %s: %s"):format(name, v.mismatch, v.seq, v.rec.name, table.concat(parts, "; "))
  elseif v.kind == "stuck" then
    return ("process group %s: every rank joined #%d %s and it never completed: no rank to blame in the trace (the fabric or NCCL itself?)"):format(
      name, v.seq, v.rec.name)
  elseif v.kind == "undecided" then
    return ("process group %s: no dump from rank(s) %s: cannot decide (fr_trace cannot either)"):format(name, ranks_text(v.ranks))
  elseif v.kind == "slow" then
    return ("process group %s: rank(s) %s arrive late at every collective: the others waited %.1f ms longer in each (mean duration_ms over %d collectives: %s)"):format(
      name, ranks_text(v.ranks), v.lateness_ms, v.collectives, v.means)
  end
  return ("process group %s: every collective matched on every rank"):format(name)
end

function M.lines(diag)
  local L = {}
  local kinds = {}
  for _, k in ipairs({ "fr", "text", "ras", "nccl_tests" }) do
    if diag.counts[k] then
      kinds[#kinds + 1] = ("%d %s"):format(diag.counts[k], ({ fr = "Flight Recorder dump(s)", text = "log(s)", ras = "NCCL RAS report(s)",
        nccl_tests = "nccl-tests JSON" })[k])
    end
  end
  L[#L + 1] = ("# triage: %d file(s): %s; world %s"):format(#diag.files, table.concat(kinds, ", "),
    diag.world and (diag.world .. " ranks (" .. tostring(diag.world_at) .. ")") or "unknown")
  for _, G in ipairs(diag.groups) do
    L[#L + 1] = ("== process group %s%s, ranks %s, timeout %s, from the %s"):format(G.name,
      G.desc and G.desc ~= "undefined" and (" (" .. G.desc .. ")") or "", ranks_text(G.ranks or {}),
      G.timeout_ms and (("%g s"):format(G.timeout_ms / 1000)) or "?", G.source)
    for _, r in ipairs(G.ranks or {}) do
      local pr = G.per_rank[r]
      if not pr then
        L[#L + 1] = ("  rank %d: no dump"):format(r)
      else
        local inflight = pr.inflight and rec_text(pr.inflight) or (pr.inflight_seq and ("#" .. pr.inflight_seq .. " (enqueued)")) or "nothing"
        L[#L + 1] = ("  rank %d: last completed %s; in flight %s"):format(r, rec_text(pr.last), inflight)
      end
    end
    L[#L + 1] = "  verdict: " .. M.verdict_line(G)
    if G.verdict.fr_trace then L[#L + 1] = "  fr_trace says: " .. G.verdict.fr_trace end
  end
  if diag.watchdog_seen then L[#L + 1] = "  (watchdog lines seen too; the Flight Recorder dumps are the ones analysed)" end
  local nc = diag.nccl
  local tr = sorted_keys(nc.transports)
  local hosts = sorted_keys(nc.hosts)
  if nc.version or #tr > 0 or #nc.comms > 0 then
    L[#L + 1] = ("== NCCL %s; transports %s; %s"):format(nc.version or "(version not in the logs)",
      #tr > 0 and table.concat(tr, ", ") or "none logged",
      #hosts > 0 and (#hosts .. " host(s): " .. table.concat(hosts, ", ")) or "hosts not logged")
    for _, x in ipairs(nc.net) do L[#L + 1] = "  network: " .. x.line .. "  [" .. x.at .. "]"; break end
    if #nc.rings > 0 then L[#L + 1] = ("  rings: %d channel line(s), e.g. %s  [%s]"):format(#nc.rings, nc.rings[1].line, nc.rings[1].at) end
    if #nc.trees > 0 then L[#L + 1] = ("  trees: %s  [%s]"):format(nc.trees[1].line, nc.trees[1].at) end
    for _, w in ipairs(nc.warns) do L[#L + 1] = "  NCCL WARN " .. w.message .. "  [" .. w.at .. "]" end
  end
  for _, r in ipairs(diag.ras) do
    for _, c in ipairs(r.comms) do
      local miss = {}
      for _, m in ipairs(c.missing) do miss[#miss + 1] = m.rank .. (m.dead and " (dead)" or m.unresponsive and " (unresponsive)" or "") end
      L[#L + 1] = ("== NCCL RAS communicator %s: %d of %s ranks responded%s  [%s]"):format(c.hash, #c.ranks, tostring(c.size),
        #miss > 0 and ("; missing " .. table.concat(miss, ", ")) or "", c.at)
    end
  end
  for _, t in ipairs(diag.tests) do
    local wrong, cv = 0, nil
    for _, row in ipairs(t.rows) do
      wrong = wrong + (row.wrong or 0) + (row.ip_wrong or 0)
      if row.i_cv and (not cv or row.i_cv > cv) then cv = row.i_cv end
    end
    L[#L + 1] = ("== nccl-tests %s: %d size(s), avg busbw %s GB/s, #wrong %d%s  [%s]"):format(t.program or "", #t.rows,
      t.avg_busbw and tostring(t.avg_busbw.value) or "?", wrong, cv and (", worst per-iteration cv %.1f%%"):format(cv) or "", t.at)
  end
  if #diag.env_findings > 0 then
    L[#L + 1] = ("== environment: %d finding(s) of the env audit"):format(#diag.env_findings)
    for _, f in ipairs(diag.env_findings) do
      L[#L + 1] = ("  [%s] %s  [%s]"):format(f.severity, f.message, tostring(f.evidence and f.evidence.source))
    end
  end
  return L
end

-- ---------------------------------------------------------------- findings

local function group_name(G)
  return G.desc and G.desc ~= "undefined" and (G.name .. ":" .. G.desc) or G.name
end

function M.findings(diag)
  local F = {}
  for _, G in ipairs(diag.groups) do
    local v = G.verdict
    local at = {}
    if v.rec and v.rec.at then at[#at + 1] = v.rec.at end
    for _, e in ipairs(v.errors or {}) do at[#at + 1] = e.rec.at end
    for _, r in ipairs(v.ranks or {}) do
      local pr = G.per_rank[r]
      if pr and pr.last and pr.last.at then at[#at + 1] = pr.last.at end
    end
    local sev = (v.kind == "ok") and "info" or "error"
    if v.kind == "undecided" or v.kind == "slow" then sev = "warn" end  -- slow: the job ran, late
    F[#F + 1] = {
      severity = sev, kind = "triage." .. v.kind,
      subject = #(v.ranks or {}) > 0 and { ranks = v.ranks } or "job",
      message = M.verdict_line(G),
      evidence = { group = group_name(G), group_ranks = G.ranks, seq = v.seq, op = v.rec and v.rec.name,
        numel_in = v.rec and v.rec.numel_in, numel_out = v.rec and v.rec.numel_out, timeout_ms = G.timeout_ms,
        fr_trace = v.fr_trace, mismatch = v.mismatch, lateness_ms = v.lateness_ms, at = at, source = G.source },
      remedy = v.kind == "missing" and "look at what the missing rank(s) were doing instead (their stack in the dump, their own log); run repro.lua to check the fabric alone"
        or v.kind == "mismatch" and "the ranks called different collectives at the same sequence number: a bug in the training code (a rank-dependent branch or shape)"
        or v.kind == "stuck" and "every rank arrived: check the fabric with repro.lua run without chaos, then full_diag"
        or v.kind == "slow" and "look at what the late rank(s) do between collectives (data loading, CPU binding, a noisy neighbour, clocks); run repro.lua without chaos to see whether the fabric alone makes them late"
        or "",
    }
  end
  local nc = diag.nccl
  if nc.version_mismatch then
    local m = nc.version_mismatch
    F[#F + 1] = { severity = "error", subject = "job", kind = "triage.nccl_version",
      message = ("NCCL versions differ between the logs: %s and %s"):format(m.a, m.b),
      evidence = { at = { m.a_at, m.b_at } }, remedy = "run one NCCL build on every rank" }
  end
  for _, w in ipairs(nc.warns) do
    F[#F + 1] = { severity = "warn", subject = w.host or "job", kind = "triage.nccl_warn", message = "NCCL WARN " .. w.message,
      evidence = { at = { w.at } }, remedy = "" }
  end
  for _, r in ipairs(diag.ras) do
    for _, c in ipairs(r.comms) do
      if #c.missing > 0 then
        local ranks = {}
        for _, m in ipairs(c.missing) do ranks[#ranks + 1] = m.rank end
        F[#F + 1] = { severity = "error", subject = { ranks = ranks }, kind = "triage.ras_missing",
          message = ("NCCL RAS: communicator %s is missing rank(s) %s"):format(c.hash, ranks_text(ranks)),
          evidence = { at = { c.at } }, remedy = "the missing ranks' processes died or hang outside NCCL" }
      end
      -- ranks behind the others in some collective's count
      local ops = {}
      for _, rk in ipairs(c.ranks) do for op in pairs(rk.counts) do ops[op] = true end end
      for _, op in ipairs(sorted_keys(ops)) do
        local maxc = 0
        for _, rk in ipairs(c.ranks) do local v = tonumber(rk.counts[op]) or 0; if v > maxc then maxc = v end end
        local behind = {}
        for _, rk in ipairs(c.ranks) do if (tonumber(rk.counts[op]) or 0) < maxc then behind[#behind + 1] = rk.rank end end
        if #behind > 0 and #behind < #c.ranks then
          F[#F + 1] = { severity = "error", subject = { ranks = behind }, kind = "triage.ras_behind",
            message = ("NCCL RAS: communicator %s: rank(s) %s ran fewer %s operations than the others (%d)"):format(
              c.hash, ranks_text(behind), op, maxc), evidence = { at = { c.at } },
            remedy = "the ranks behind never called the collective the others wait in" }
        end
      end
      for _, rk in ipairs(c.ranks) do
        if rk.async_error ~= 0 then
          F[#F + 1] = { severity = "error", subject = rk.rank, kind = "triage.ras_error",
            message = ("NCCL RAS: communicator %s, rank %d reports asynchronous error %s"):format(c.hash, rk.rank, tostring(rk.async_error)),
            evidence = { at = { c.at } }, remedy = "" }
        end
      end
    end
  end
  for _, t in ipairs(diag.tests) do
    for _, row in ipairs(t.rows) do
      local w = (row.wrong or 0) + (row.ip_wrong or 0)
      if w > 0 then
        F[#F + 1] = { severity = "error", subject = "job", kind = "triage.nccl_tests_wrong",
          message = ("nccl-tests: %d wrong element(s) at size %d"):format(w, row.size or 0), evidence = { at = { row.at } },
          remedy = "data corruption: localise it with full_diag" }
      end
    end
    if t.avg_busbw and t.avg_busbw.failed then
      F[#F + 1] = { severity = "error", subject = "job", kind = "triage.nccl_tests_bw",
        message = ("nccl-tests: average bus bandwidth %s GB/s is below NCCL_TESTS_MIN_BW"):format(tostring(t.avg_busbw.value)),
        evidence = { at = { t.avg_busbw.at } }, remedy = "run full_diag to localise the slow link" }
    end
  end
  for _, f in ipairs(diag.env_findings or {}) do
    local c = {}
    for k, v in pairs(f) do c[k] = v end
    c.evidence = {}
    for k, v in pairs(f.evidence or {}) do c.evidence[k] = v end
    c.evidence.at = { tostring(f.evidence and f.evidence.source) }
    F[#F + 1] = c
  end
  return F
end

-- The failure to plant, from the first group with a verdict to reproduce (nil: none).
-- A rank to blame (missing, mismatch) comes before a group where everyone waits (stuck): the
-- ranks stuck elsewhere wait for the one that broke.
function M.failure(diag)
  for _, kinds in ipairs({ { missing = true, mismatch = true }, { stuck = true }, { slow = true } }) do
    for _, G in ipairs(diag.groups) do
      if kinds[G.verdict.kind] then return G end
    end
  end
  return nil
end

return M
