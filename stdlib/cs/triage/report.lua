-- cs.triage.report: what a diagnosis says. lines(diag): the text recipes/triage.lua prints;
-- findings(diag): report findings, each with evidence.at = "file:line"; failure(diag): the group
-- a repro reproduces; verdict_line and rec_text, which cs.triage.repro writes into its comments.
-- Pure functions.
local P = require "cs.triage.parse"
local N = require "cs.triage.names"

local M = {}

local ranks_text, sorted_keys = N.ranks_text, N.sorted_keys

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
