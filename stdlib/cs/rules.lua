-- Diagnosis rules: data plus functions, so a site can add its own without touching C++.
--
-- A rule is a table:
--   { id = "slow_host", severity = "warn" | "error" | "info",
--     check = function(run, rule) return { {subject=, message=, evidence=}, ... } end,
--     remedy = "what to do" }
-- `run` is what the diagnosis measured (see full_diag.lua): size, hosts, sweep (op -> list of
-- bench results), stragglers, localisation {ranks, hosts, links}, scorecard, baseline (an
-- earlier report.json, or nil), thresholds (the config's [thresholds]).
-- evaluate(run, rules) -> findings (ctx.report:finding's schema), in rule order.
-- load(paths) -> rules from site files: each file returns a list of rules; it runs with
-- cs.sandbox's environment: `require` limited to commscript's modules, the safe Lua globals
-- (no os, io, ffi, load), its own copies of string/table/math; source only, no bytecode.
local sandbox = require "cs.sandbox"
local native = require "commscript.native"
local stats = require "cs.stats"
local EXIT = require("commscript").exit
local median = stats.median
local M = {}

local function host_of(run, rank)
  return run.rank_hosts and run.rank_hosts[rank + 1] or nil
end

-- A rule's check over one list of the localisation's culprits (hosts, ranks, links): one
-- finding per entry, made by make(run, entry).
local function culprits(key, make)
  return function(run)
    local out = {}
    for _, x in ipairs((run.localisation or {})[key] or {}) do out[#out + 1] = make(run, x) end
    return out
  end
end

-- a slow rank's further partners: "; with rank 9 too (812.0 us)"
local function also(r)
  local out = {}
  for i = 2, #(r.partners or {}) do
    out[#out + 1] = ("; with rank %d too (%.1f us)"):format(r.partners[i], (r.values or {})[i] or 0)
  end
  return table.concat(out)
end

-- which way a named host or rank is slow, from the matrix's streams (cs.evidence.annotate):
-- "; slow sending: 0.035 GB/s against the fleet's 1.05"
local function direction(x)
  local d, f = x.direction, x.fleet_gbs or {}
  if d == "sending" and x.send_gbs and f.send then
    return ("; slow sending: %.3g GB/s against the fleet's %.3g"):format(x.send_gbs, f.send)
  elseif d == "receiving" and x.recv_gbs and f.recv then
    return ("; slow receiving: %.3g GB/s against the fleet's %.3g"):format(x.recv_gbs, f.recv)
  elseif d == "both" and x.send_gbs and x.recv_gbs and f.send and f.recv then
    return ("; slow both ways: sends %.3g, receives %.3g GB/s against the fleet's %.3g, %.3g"):format(x.send_gbs, x.recv_gbs,
      f.send, f.recv)
  end
  return ""
end

M.builtin = {
  {
    id = "corruption", severity = "error",
    remedy = "silent data corruption: take the named ranks out of service; check ECC errors, links and firmware",
    check = function(run)
      local out = {}
      for op, list in pairs(run.sweep or {}) do
        for _, r in ipairs(list) do
          if (r.wrong or 0) > 0 then
            out[#out + 1] = {
              subject = { ranks = r.wrong_ranks, op = op },
              message = ("%s %s (%s): %d wrong elements on rank(s) %s"):format(op, tostring(r.bytes), r.placement or "",
                r.wrong, table.concat(r.wrong_ranks or {}, ",")),
              evidence = { op = op, bytes = r.bytes, wrong = r.wrong, ranks = r.wrong_ranks },
            }
          end
        end
      end
      return out
    end,
  },
  {
    id = "straggler", severity = "warn",
    remedy = "look at what runs on that rank between collectives: CPU binding, noisy neighbours, data loading, throttling",
    check = function(run)
      local out = {}
      for _, s in ipairs(run.stragglers or {}) do
        out[#out + 1] = {
          subject = { rank = s.rank, host = host_of(run, s.rank) },
          message = ("rank %d arrives late: %.0f us after the others at each collective (%.0f%% of the op time)"):format(
            s.rank, s.lateness, 100 * s.score),
          evidence = { lateness_us = s.lateness, median_us = s.median, op = s.op, bytes = s.bytes },
        }
      end
      return out
    end,
  },
  {
    id = "slow_host", severity = "warn",
    remedy = "check the host's NIC (speed, errors, PCIe link), its switch port, and its load",
    check = culprits("hosts", function(_, h)
      return {
        subject = { host = h.host, ranks = h.ranks },
        message = ("host %s is slow with every other host: its pairs take %.1fx the fleet's median (%.1f vs %.1f us)%s%s"):format(
          h.host, h.score, h.median, h.reference, h.retest and (", confirmed alone against " .. h.retest.partner_host) or "",
          direction(h)),
        evidence = h,
      }
    end),
  },
  {
    id = "slow_rank", severity = "warn",
    remedy = "check that rank's binding (NUMA, CPU), its NIC/PCIe path and what else runs on it",
    check = culprits("ranks", function(run, r)
      return {
        subject = { rank = r.rank, host = host_of(run, r.rank) },
        message = ("rank %d is slow with every partner: %.1fx the fleet's median pair time; alone with rank %d it took %.1f us against %.1f us between two good ranks%s%s"):format(
          r.rank, r.score, r.partner or -1, r.value or 0, r.reference or 0, also(r), direction(r)),
        evidence = r,
      }
    end),
  },
  {
    id = "slow_link", severity = "warn",
    remedy = "the two ends are fine elsewhere: check the cable, transceiver and switch ports between them",
    check = culprits("links", function(run, l)
      local ha, hb = host_of(run, l.a), host_of(run, l.b)
      local f = {
        subject = { pair = { l.a, l.b }, hosts = { ha, hb } },
        message = ("link %d-%d is slow: %.1f us, %.1fx the fleet's median, while both ranks are fine with others"):format(
          l.a, l.b, l.value, l.score),
        evidence = l,
      }
      -- Two ranks of a host with more ranks than CPUs may share a core: their exchange waits
      -- for the scheduler, which is no fault of any link.
      if ha and ha == hb and (run.oversubscribed or {})[ha] then
        f.severity = "info"
        f.message = f.message .. ("; host %s runs more ranks than it has CPUs, so the two may share a core"):format(ha)
        f.remedy = "bind ranks to distinct cores (mpirun --bind-to core) or run fewer ranks per host, then measure again"
      end
      return f
    end),
  },
  {
    id = "baseline_regression", severity = "warn",
    remedy = "compare the two reports' topology and env sections: a changed setting, driver or cable is the usual cause",
    check = function(run)
      local base = run.baseline
      if type(base) ~= "table" or type(base.results) ~= "table" then return {} end
      local tol = (run.thresholds or {}).baseline_tolerance or 0.25
      -- Medians, not means: one descheduled iteration can inflate a mean a hundredfold on a
      -- shared host, so bandwidth is taken at the p50 time (busbw x mean / p50).
      local bw50 = stats.busbw_at_p50
      local function t50(r) return r.p50_us or r.time_us end
      local old = {}
      for _, r in ipairs(base.results) do
        if r.op and r.bytes and r.busbw then old[r.op .. "/" .. (r.placement or "") .. "/" .. r.bytes] = r end
      end
      local out = {}
      for op, list in pairs(run.sweep or {}) do
        -- Large messages: bandwidth ratio; small ones: time ratio. Medians over sizes, so one
        -- noisy size does not make a regression.
        local bw, lat = {}, {}
        for _, r in ipairs(list) do
          local o = old[op .. "/" .. (r.placement or "") .. "/" .. r.bytes]
          if o then
            if r.bytes >= 65536 and bw50(o) > 0 then bw[#bw + 1] = bw50(r) / bw50(o) end
            if r.bytes <= 1024 and t50(o) and t50(o) > 0 then lat[#lat + 1] = t50(r) / t50(o) end
          end
        end
        local b, l = median(bw), median(lat)
        if b and b < 1 - tol then
          out[#out + 1] = { subject = { op = op },
            message = ("%s bandwidth regressed: median %.0f%% of the baseline's at sizes >= 64K"):format(op, 100 * b),
            evidence = { median_ratio = b, tolerance = tol, sizes = #bw } }
        end
        if l and l > 1 + 2 * tol then
          out[#out + 1] = { subject = { op = op },
            message = ("%s small-message time regressed: median %.1fx the baseline's at sizes <= 1K"):format(op, l),
            evidence = { median_ratio = l, tolerance = 2 * tol, sizes = #lat } }
        end
      end
      return out
    end,
  },
  {
    id = "below_target", severity = "warn",
    remedy = "the site's own target ([thresholds] in the config) is not met: see the scorecard's bandwidth and latency parts",
    check = function(run)
      local t, out = run.thresholds or {}, {}
      local card = run.scorecard or {}
      for _, p in ipairs(card.parts or {}) do
        if p.name == "bandwidth" and t.busbw_min_gbps and p.measured.busbw_gbps < t.busbw_min_gbps then
          out[#out + 1] = { subject = { op = p.measured.op },
            message = ("bus bandwidth %.2f GB/s is below the target %.2f GB/s"):format(p.measured.busbw_gbps, t.busbw_min_gbps),
            evidence = { measured = p.measured, target_gbps = t.busbw_min_gbps } }
        end
        if p.name == "latency" and t.latency_max_us and p.measured.collective_us and p.measured.collective_us > t.latency_max_us then
          out[#out + 1] = { subject = { op = "allreduce" },
            message = ("small all-reduce takes %.2f us, above the target %.2f us"):format(p.measured.collective_us, t.latency_max_us),
            evidence = { measured_us = p.measured.collective_us, target_us = t.latency_max_us } }
        end
      end
      return out
    end,
  },
}

local SEVERITY = { info = true, warn = true, error = true }

-- An error value as text: a table's own message (read raw), never "table: 0x...".
local function error_text(e)
  if type(e) == "table" then
    local m = rawget(e, "message")
    return type(m) == "string" and m or "(an error object without a message)"
  end
  return tostring(e)
end

local function validate(rule, where)
  if type(rule) ~= "table" then error(("%s: a rule must be a table"):format(where), 0) end
  if type(rule.id) ~= "string" then error(("%s: a rule needs an id (string)"):format(where), 0) end
  if not SEVERITY[rule.severity] then error(("%s: rule %s: severity must be info, warn or error"):format(where, rule.id), 0) end
  if type(rule.check) ~= "function" then error(("%s: rule %s: check must be a function(run)"):format(where, rule.id), 0) end
end

function M.evaluate(run, rules)
  local findings = {}
  for _, rule in ipairs(rules or M.builtin) do
    validate(rule, "rules")
    local ok, hits = pcall(rule.check, run, rule)
    -- An engine limit (the Lua deadline, the C stack) is handed on as it is, never reworded; a
    -- table that only says limit = true is a rule's own error.
    if not ok and sandbox.is_limit(hits) then error(hits, 0) end
    if not ok then error(("rule %s failed: %s"):format(rule.id, error_text(hits)), 0) end
    for _, h in ipairs(hits or {}) do
      findings[#findings + 1] = {
        severity = h.severity or rule.severity, subject = h.subject or {}, message = h.message or rule.id,
        evidence = h.evidence or {}, remedy = h.remedy or rule.remedy or "", rule = rule.id,
      }
    end
  end
  return findings
end

-- Whether a sandboxed run may load the rule file at `path`: one the run was given (its command
-- line, the recipe's options, its environment: native.path_given, which --trusted makes true) or
-- one its config's [rules] files names (the engine's config, not a table the caller passes).
-- Issue 30, class 20.7: a recipe ran any readable .lua file as a rule file, and the error quoted
-- an identifier of it ("undeclared global 'hunter2'").
local function rule_file_given(path)
  if type(path) ~= "string" or path == "" then return false end
  if native.path_given(path) then return true end
  local files = ((native.config() or {}).rules or {}).files
  if type(files) == "string" then return files == path end
  for _, f in ipairs(type(files) == "table" and files or {}) do
    if f == path then return true end
  end
  return false
end

-- The refusal of a rule file the run was not given: the same whatever is at `path` (missing,
-- unreadable, forbidden, a secret), and nothing of it is read.
local function not_given(path)
  error({ code = EXIT.bad_input, message = ("rule file %s: not given to this run (a sandboxed recipe loads rule files "
    .. "named by the config's [rules] files, the command line, its options or its environment; --trusted lifts it)")
    :format(tostring(path)) }, 0)
end

-- Site rule files. Each returns a list of rules; they may use `cs` (require "commscript").
function M.load(paths)
  local out = {}
  for _, path in ipairs(paths or {}) do
    if not rule_file_given(path) then not_given(path) end
    -- The recipes' sandbox (cs.sandbox), with an environment of its own per file: no os, io,
    -- ffi or load; its own string/table/math copies; text chunks only unless --trusted.
    local chunk, err = sandbox.loadfile(path)
    if not chunk then error({ code = EXIT.bad_input, message = "rule file " .. sandbox.quiet_error(tostring(err)) }, 0) end
    local env = sandbox.env("a rule file")
    setfenv(chunk, env)
    -- A rule file's code (its top level and its check functions) runs in the interpreter, as a
    -- recipe's does: the engine's count hook bounds it (busy in Lua, exit 5) and the profiler
    -- names its line; compiled, `check = function() while true do end end` was never stopped.
    jit.off(chunk, true)
    local ok, list = pcall(chunk)
    if not ok and sandbox.is_limit(list) then error(list, 0) end
    if not ok then error({ code = EXIT.bad_input, message = ("rule file %s: %s"):format(path, error_text(list)) }, 0) end
    if type(list) ~= "table" then error({ code = EXIT.bad_input, message = ("rule file %s must return a list of rules"):format(path) }, 0) end
    for i, rule in ipairs(list) do
      local okv, verr = pcall(validate, rule, ("rule file %s, rule %d"):format(path, i))
      if not okv then error({ code = EXIT.bad_input, message = verr }, 0) end
      out[#out + 1] = rule
    end
  end
  return out
end

-- from_config(config) -> the built-in rules, then those of the site files the config's
-- [rules] files names (a string or a list). A broken rule file is bad input (exit 1): call this
-- before measuring.
function M.from_config(config)
  local list = {}
  for _, r in ipairs(M.builtin) do list[#list + 1] = r end
  local site = type(config) == "table" and (config.rules or {}).files
  if site then
    for _, r in ipairs(M.load(type(site) == "table" and site or { site })) do list[#list + 1] = r end
  end
  return list
end

return M
