-- cs.triage.watchdog: the analysis of ProcessGroupNCCL watchdog lines when no Flight Recorder
-- dump came (docs/triage.md): the groups, their last collective per rank and the verdict.
-- analyse(texts, diag, world) fills diag.groups. Pure functions over what cs.triage.parse read.
local N = require "cs.triage.names"

local M = {}

local sorted_keys = N.sorted_keys

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
  local rec = { seq = w.seq, name = name, profiling_name = "nccl:" .. name, op = N.op_of(name), numel_in = w.numel_in,
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

M.analyse = analyse_watchdog

return M
