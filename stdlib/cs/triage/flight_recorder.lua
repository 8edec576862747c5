-- cs.triage.flight_recorder: the Flight Recorder analysis (docs/triage.md), as PyTorch's fr_trace
-- does it (torch/distributed/flight_recorder/components/builder.py build_collectives, utils.py
-- check_current_entry_match/error_analysis, types.py Op.match): traces aligned by record_id,
-- matched per process group by collective_seq_id; the first sequence number a member rank never
-- reached is "not all ranks joining" with its missing ranks, the first whose op, sizes, dtypes or
-- state differ is a mismatch naming the culprit; fr_trace pairs nothing after a group's first
-- problem, nor do we. analyse(dumps, diag) fills diag.groups. Pure functions over the dumps
-- cs.triage.parse read.
local P = require "cs.triage.parse"
local N = require "cs.triage.names"

local M = {}

local bad = P.bad
local fr_type, sorted_keys = N.fr_type, N.sorted_keys

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
  rec.op = N.op_of(rec.name)
  rec.numel_in, rec.numel_out = P.total(rec.in_sizes), P.total(rec.out_sizes)
  rec.dtype = N.dtype_of(rec.in_dtypes[1] or rec.out_dtypes[1])
  rec.count = N.count_of(rec, group_size)
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

M.analyse = analyse_fr

return M
