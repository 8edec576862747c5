-- Findings as recipes report and print them (the one printer of full_diag, soak and env_audit).
--   local found = findings.collector(ctx)   -- found:add(list) reports each finding
--                                           -- (ctx.report:finding) and keeps it: found.list,
--                                           -- found.counts = {error =, warn =, info =}
--   findings.print(ctx, list [, opts])      -- on rank 0: "[severity] message" and "-> remedy"
--       opts: heading (a line before, e.g. "#\n# findings"), empty (the line when the list is
--       empty, e.g. "none: healthy"), prefix (before each finding, default "  "), remedy (false:
--       leave the remedies out)
--   findings.table(list, nranks)            -- lines of a table: severity, variable, value,
--                                           -- ranks ("all" when every rank), message; remedy below
--   findings.counts(list)                   -- {error =, warn =, info =}
-- Findings produced identically on every rank are reported once (every rank calls
-- ctx.report:finding, only rank 0 writes): keep them deterministic.
local text = require "cs.text"
local M = {}

function M.counts(list)
  local c = { error = 0, warn = 0, info = 0 }
  for _, f in ipairs(list) do c[f.severity] = (c[f.severity] or 0) + 1 end
  return c
end

local Collector = {}
Collector.__index = Collector

function Collector:add(list)
  for _, f in ipairs(list or {}) do
    self.ctx.report:finding(f)
    self.list[#self.list + 1] = f
    self.counts[f.severity] = (self.counts[f.severity] or 0) + 1
  end
  return list
end

function M.collector(ctx)
  return setmetatable({ ctx = ctx, list = {}, counts = { error = 0, warn = 0, info = 0 } }, Collector)
end

function M.print(ctx, list, opts)
  opts = opts or {}
  local prefix = opts.prefix or "  "
  if opts.heading then ctx.log("%s", opts.heading) end
  if #list == 0 and opts.empty then ctx.log("%s%s", prefix, opts.empty) end
  for _, f in ipairs(list) do
    ctx.log("%s[%s] %s", prefix, f.severity, f.message)
    if opts.remedy ~= false and f.remedy and f.remedy ~= "" then
      ctx.log("%s       -> %s", prefix, f.remedy)
    end
  end
end

function M.table(list, nranks)
  local rows = {}
  local w = { 8, 8, 5, 5 }
  for _, f in ipairs(list) do
    local ev = f.evidence or {}
    local subject = type(f.subject) == "table" and f.subject or {}
    local ranks = subject.ranks
    local rtext = "-"
    if ranks and #ranks > 0 then
      rtext = (nranks and #ranks == nranks and nranks > 1) and "all" or text.ranges(ranks)
    end
    local value = ev.value
    if value == nil and ev.values then value = "(differs)" end
    local remedy = f.remedy or ""
    -- Where a value that is not from the process environment was set (a conf file line, the
    -- run's config [env]).
    if type(ev.source) == "string" and ev.source ~= "environment" and not f.message:find(ev.source, 1, true) then
      remedy = remedy .. (remedy ~= "" and " " or "") .. "(set at " .. ev.source .. ")"
    end
    local row = { f.severity, tostring(subject.variable or "?"),
                  text.cut(value == nil and "-" or text.show(tostring(value)), 24), rtext, f.message, remedy }
    for i = 1, 4 do w[i] = math.max(w[i], #row[i]) end
    rows[#rows + 1] = row
  end
  w[2] = math.min(w[2], 40)
  local fmt = ("%%-%ds  %%-%ds  %%-%ds  %%-%ds  %%s"):format(w[1], w[2], w[3], w[4])
  local lines = { fmt:format("severity", "variable", "value", "ranks", "finding") }
  for _, r in ipairs(rows) do
    lines[#lines + 1] = fmt:format(r[1], r[2], r[3], r[4], r[5])
    if r[6] and r[6] ~= "" then lines[#lines + 1] = (" "):rep(w[1] + 2) .. "-> " .. r[6] end
  end
  return lines
end

return M
