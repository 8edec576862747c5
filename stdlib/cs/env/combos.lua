-- cs.env.combos, part 3 of 5 of cs.env: one variable (which checks apply to an NCCL_*, TORCH_NCCL_*, TORCH_FR_*
-- or UCX_* name), the combination rules over the whole set, and audit(vars, opts). Pure
-- functions. [key] in comments: the section of docs/nccl.md cs.env.registry.SECTIONS names.
local R = require "cs.env.registry"
local P = require "cs.env.parse"
local C = require "cs.env.checks"
local trim, set_of, fmt_num, show, has_prefix, version_lt, FALSE_WORDS = P.internal.trim, P.internal.set_of,
  P.internal.fmt_num, P.internal.show, P.internal.has_prefix, P.internal.version_lt, P.internal.FALSE_WORDS
local finding, var_ctx, in_list, list_text, NCCL_AUDIT = C.internal.finding, C.internal.var_ctx, C.internal.in_list,
  C.internal.list_text, C.internal.NCCL_AUDIT
local SEV_RANK = C.SEV_RANK
local M = {}

-- ---------------------------------------------------------------------------------------------
-- one variable
-- ---------------------------------------------------------------------------------------------
local nccl_names
local function all_nccl_names()
  if not nccl_names then
    nccl_names = {}
    for k, e in pairs(R.nccl) do if not e.removed then nccl_names[#nccl_names + 1] = k end end
  end
  return nccl_names
end

local function names_of(t)
  local l = {}
  for k in pairs(t) do l[#l + 1] = k end
  return l
end

local function audit_nccl(c)
  local name, v, opts = c.name, c.value, c.opts
  local e = R.nccl[name]
  if not e and R.container[name] then
    c.entry = { src = "not_core" }  -- set by NVIDIA's images: cs.env.checks.container_facts says what it means
    return
  end
  if not e then
    local nn = R.not_nccl[name]
    if nn then
      c.entry = nn
      c.add("error", "not-nccl-" .. nn.kind, ("%s: %s"):format(name, nn.message), nn.remedy,
        { parsed_as = "ignored", replacement = nn.by })
      return
    end
    local alias = R.pytorch_alias[name]
    if alias then
      c.entry = { src = "not_core, pytorch" }
      c.add("warn", "pytorch-alias",
        ("%s is not read by NCCL: PyTorch reads it as a deprecated alias of %s (and warns)"):format(name, alias),
        ("rename it to %s"):format(alias), { parsed_as = "ignored by NCCL", replacement = alias })
      return
    end
    local pl = R.plugin[name]
    if not pl then
      for _, pp in ipairs(R.plugin_prefixes) do if has_prefix(name, pp.prefix) then pl = pp end end
    end
    if pl then
      c.entry = pl
      c.add("info", "plugin-owned", ("%s is not read by core NCCL but by %s"):format(name, pl.plugin), "", {})
      return
    end
    c.entry = { src = "not_core" }  -- "Any other NCCL_* name is unknown to the audit"
    local s = P.suggest(name, all_nccl_names(), "NCCL_")
    if s then
      c.add("error", "unknown-typo",
        ("%s is not an NCCL variable (no NCCL up to %s reads it); did you mean %s?"):format(name, R.NCCL_LATEST, s),
        ("rename it to %s"):format(s), { parsed_as = "ignored", suggestion = s })
    else
      c.add("warn", "unknown",
        ("%s is not an NCCL variable: it is neither documented nor read by NCCL up to %s"):format(name, R.NCCL_LATEST),
        "remove it, or check the name against the NCCL documentation (env.rst)", { parsed_as = "ignored" })
    end
    return
  end
  c.entry = e
  local ver = opts.nccl_version
  if e.removed then
    if ver and not version_lt(e.removed.last, ver) then return end  -- still read by this version
    c.add("warn", "removed",
      ("%s has no effect: NCCL stopped reading it after %s%s"):format(name, e.removed.last,
        e.removed.note and (" (" .. e.removed.note .. ")") or ""),
      e.removed.by and ("use %s instead"):format(e.removed.by) or ("remove %s"):format(name),
      { parsed_as = "ignored", last_read = e.removed.last, replacement = e.removed.by })
    return
  end
  if ver and e.since and version_lt(ver, e.since) then
    c.add("warn", "since",
      ("%s is not read by NCCL %s: it first appears in NCCL %s"):format(name, ver, e.since),
      ("upgrade NCCL to %s or later, or remove %s"):format(e.since, name), { parsed_as = "ignored", since = e.since })
    return
  end
  if e.deprecated and not (ver and version_lt(ver, e.deprecated.since)) then
    c.add("warn", "deprecated",
      ("%s is deprecated since NCCL %s in favour of %s%s"):format(name, e.deprecated.since, e.deprecated.by,
        e.deprecated.note and (" (" .. e.deprecated.note .. ")") or ""),
      ("use %s instead"):format(e.deprecated.by), { replacement = e.deprecated.by, deprecated_since = e.deprecated.since })
  end
  if e.status == "internal" then
    c.add("warn", "internal",
      ("%s is undocumented (an internal NCCL parameter, read since %s): its meaning may change between versions"):format(name, e.since),
      "keep it only if NCCL support told you to set it", { since = e.since })
  elseif e.status == "debug" then
    c.add("info", "debug-variable",
      ("%s is a debugging variable: NCCL's docs advise against keeping it set in production"):format(name),
      "remove it once the issue it works around is solved", {})
  elseif e.status == "experimental" then
    c.add("info", "experimental", ("%s is experimental"):format(name), "", {})
  end
  local f = e.type and NCCL_AUDIT[e.type]
  if f then f(c) end
end

local PBOOL = set_of { "0", "1", "true", "false", "yes", "no", "y", "n", "t", "f" }

local function audit_torch(c)
  local name, v, opts = c.name, c.value, c.opts
  local e = R.torch[name]
  if not e then
    local s = P.suggest(name, names_of(R.torch), "TORCH_")
    if s or opts.strict then
      c.add(opts.strict and "warn" or "info", "unknown-torch",
        ("%s is not a PyTorch ProcessGroupNCCL variable this audit knows%s"):format(name, s and ("; did you mean " .. s .. "?") or ""),
        s and ("rename it to %s"):format(s) or "check the name against PyTorch's torch_nccl_environment_variables", { suggestion = s })
    end
    return
  end
  c.entry = e
  if e.deprecated then
    c.add("warn", "deprecated", ("%s is deprecated: %s"):format(name, e.deprecated.note or ("use " .. e.deprecated.by)),
      ("use %s instead"):format(e.deprecated.by), { replacement = e.deprecated.by })
  elseif e.older_name then
    c.add("info", "older-name", ("%s is the older name of %s"):format(name, e.alias_of), ("use %s"):format(e.alias_of),
      { replacement = e.alias_of })
  end
  if e.type == "int" then
    local p = P.parse_int(v, 10)
    if p.kind ~= "ok" then
      c.add("warn", "torch-int", ("%s=%s is not an integer"):format(name, show(v)), ("%s takes an integer%s"):format(name,
        e.default and (" (default " .. e.default .. ")") or ""), { parsed_as = p.value })
      return
    end
    if e.values and not in_list(p.value, e.values) then
      c.add("warn", "int-values", ("%s=%s is not one of %s%s"):format(name, show(v), list_text(e.values),
        e.meaning and (" (" .. e.meaning .. ")") or ""), ("use one of %s"):format(list_text(e.values)), { parsed_as = p.value })
    elseif (e.min and p.value < e.min) or (e.max and p.value > e.max) then
      c.add("warn", "int-range", ("%s=%s is below %s"):format(name, show(v), fmt_num(e.min)), ("use a value >= %s"):format(fmt_num(e.min)),
        { parsed_as = p.value })
    end
    if name == "TORCH_NCCL_ASYNC_ERROR_HANDLING" and p.value == 0 then
      -- [pytorch]: the watchdog's reaction to a timeout depends on it; 0 = none.
      c.add("warn", "torch-no-error-handling",
        ("%s=0: on a collective timeout the watchdog neither aborts the communicator nor tears down the process, so a stuck rank can hang the job"):format(name),
        ("leave %s unset (default 3) or use 1"):format(name), { parsed_as = 0 })
    end
  elseif e.type == "pbool" then
    -- Which spellings PyTorch accepts is not documented: 0/1 and the usual words pass ([pytorch]).
    if not PBOOL[trim(v):lower()] then
      c.add("warn", "torch-bool", ("%s=%s is not a boolean (0 or 1)"):format(name, show(v)), ("write %s=0 or %s=1"):format(name, name),
        {})
    elseif name == "TORCH_NCCL_ENABLE_MONITORING" and (trim(v) == "0" or FALSE_WORDS[trim(v):lower()]) then
      c.add("info", "torch-no-monitoring",
        ("%s=%s turns off the heartbeat monitor: a stuck watchdog is no longer detected"):format(name, show(v)), "", {})
    end
  end
end

local function audit_ucx(c)
  local name, opts = c.name, c.opts
  if R.ucx[name] then return end
  local s = P.suggest(name, names_of(R.ucx), "UCX_")
  if s then
    c.add(opts.strict and "warn" or "info", "unknown-ucx", ("%s is not a common UCX variable; did you mean %s?"):format(name, s),
      ("rename it to %s (ucx_info -f lists every UCX variable)"):format(s), { suggestion = s })
  elseif opts.strict then
    c.add("warn", "unknown-ucx", ("%s is not a common UCX variable (not in the audit's list)"):format(name),
      "check it with ucx_info -f (UCX_WARN_UNUSED_ENV_VARS=y makes UCX report unused ones)", {})
  end
end

-- Audits one variable (no combination rules). Returns a list of findings.
function M.audit_var(name, value, opts)
  opts = opts or {}
  local out = {}
  local c = var_ctx(name, value, nil, opts, out)
  if has_prefix(name, "NCCL_") then audit_nccl(c)
  elseif has_prefix(name, "TORCH_NCCL_") or has_prefix(name, "TORCH_FR_") then audit_torch(c)
  elseif has_prefix(name, "UCX_") then audit_ucx(c) end
  return out
end

-- ---------------------------------------------------------------------------------------------
-- combination rules (over the whole set)
-- ---------------------------------------------------------------------------------------------
local function int_of(vars, name)
  local v = vars[name]
  if v == nil then return nil end
  local p = P.parse_int(v)
  if p.kind == "empty" then return nil end
  return p.value
end

local function combos(vars, opts, out)
  local function add(sev, name, rule, msg, remedy, ev)
    ev = ev or {}
    ev.value, ev.rule = vars[name], rule
    ev.source = (opts.sources and opts.sources[name]) or opts.source or "environment"
    out[#out + 1] = finding(sev, name, msg, ev, remedy)
  end
  -- [reading]: NCCL_P2P_DISABLE=1 overrides NCCL_P2P_LEVEL.
  if int_of(vars, "NCCL_P2P_DISABLE") == 1 and vars.NCCL_P2P_LEVEL then
    add("warn", "NCCL_P2P_LEVEL", "p2p-level-overridden",
      ("NCCL_P2P_LEVEL=%s has no effect: NCCL_P2P_DISABLE=1 overrides it"):format(vars.NCCL_P2P_LEVEL),
      "remove one of the two", { other = "NCCL_P2P_DISABLE" })
  end
  if int_of(vars, "NCCL_P2P_DISABLE") == 1 and opts.nvlink then
    add("warn", "NCCL_P2P_DISABLE", "p2p-disabled-nvlink",
      "NCCL_P2P_DISABLE=1 on a host whose GPUs are connected by NVLink: traffic goes through shared memory or the network instead",
      "remove NCCL_P2P_DISABLE unless it works around a known fault", {})
  end
  -- [documented]: NRINGS aliases are ignored when NCHANNELS is set; with *_CTAS the most restrictive wins.
  for _, mm in ipairs { "MAX", "MIN" } do
    local rings, chans, ctas = "NCCL_" .. mm .. "_NRINGS", "NCCL_" .. mm .. "_NCHANNELS", "NCCL_" .. mm .. "_CTAS"
    if vars[rings] and vars[chans] then
      add("warn", rings, "alias-ignored", ("%s=%s is ignored: %s is set (%s)"):format(rings, vars[rings], chans, vars[chans]),
        ("remove %s (and use %s)"):format(rings, ctas), { other = chans })
    end
    local old = vars[chans] and chans or (vars[rings] and rings)
    if old and vars[ctas] then
      add("info", old, "both-channels-ctas",
        ("both %s=%s and %s=%s are set: the most restrictive value wins"):format(old, vars[old], ctas, vars[ctas]),
        ("keep only %s"):format(ctas), { other = ctas })
    end
  end
  for _, pair in ipairs { { "NCCL_MIN_CTAS", "NCCL_MAX_CTAS" }, { "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS" } } do
    local lo, hi = int_of(vars, pair[1]), int_of(vars, pair[2])
    if lo and hi and lo > hi then
      add("warn", pair[1], "min-above-max", ("%s=%s is above %s=%s"):format(pair[1], vars[pair[1]], pair[2], vars[pair[2]]),
        ("make %s <= %s"):format(pair[1], pair[2]), { other = pair[2] })
    end
  end
  -- [documented]: NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD <= 64.
  local nt, ns = int_of(vars, "NCCL_SOCKET_NTHREADS"), int_of(vars, "NCCL_NSOCKS_PERTHREAD")
  if nt and ns and nt * ns > 64 then
    add("warn", "NCCL_NSOCKS_PERTHREAD", "socket-threads-product",
      ("NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD = %s x %s = %s, above NCCL's limit of 64"):format(fmt_num(nt), fmt_num(ns), fmt_num(nt * ns)),
      "lower one of them so that the product is at most 64", { other = "NCCL_SOCKET_NTHREADS" })
  end
  -- IB disabled while IB is selected or configured.
  if int_of(vars, "NCCL_IB_DISABLE") == 1 then
    if vars.NCCL_NET and vars.NCCL_NET:upper() == "IB" then
      add("warn", "NCCL_NET", "net-ib-disabled", "NCCL_NET=IB forces the IB network while NCCL_IB_DISABLE=1 disables it",
        "remove one of the two", { other = "NCCL_IB_DISABLE" })
    end
    if vars.NCCL_IB_HCA then
      add("info", "NCCL_IB_HCA", "ib-hca-disabled", ("NCCL_IB_HCA=%s has no effect: NCCL_IB_DISABLE=1"):format(vars.NCCL_IB_HCA),
        "remove NCCL_IB_HCA or NCCL_IB_DISABLE", { other = "NCCL_IB_DISABLE" })
    end
  end
  -- [reading]: NCCL_ENV_PLUGIN (2.28) can supply values instead of the environment.
  local ep = vars.NCCL_ENV_PLUGIN
  if ep and ep ~= "" and ep ~= "none" then
    add("info", "NCCL_ENV_PLUGIN", "env-plugin",
      ("NCCL_ENV_PLUGIN=%s: NCCL (2.28+) can take parameter values from this plugin instead of the environment, which this audit cannot see"):format(ep),
      "to see the values NCCL really uses: NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ENV, or NCCL_PARAM_DUMP_ALL=1 (2.30.3+)", {})
  end
  -- NCCL_CHECK_POINTERS (deprecated) together with its replacement.
  if vars.NCCL_CHECK_POINTERS and vars.NCCL_CHECK_MODE then
    add("info", "NCCL_CHECK_POINTERS", "both-check", "both NCCL_CHECK_POINTERS and NCCL_CHECK_MODE are set",
      "keep only NCCL_CHECK_MODE", { other = "NCCL_CHECK_MODE" })
  end
  -- Logging options without a log level: nothing is logged (NCCL_DEBUG unset means no logging).
  if not vars.NCCL_DEBUG then
    for _, n in ipairs { "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_DEBUG_TIMESTAMP_LEVELS", "NCCL_DEBUG_TIMESTAMP_FORMAT" } do
      if vars[n] then
        add("info", n, "debug-without-level", ("%s is set but NCCL_DEBUG is not: NCCL logs nothing"):format(n),
          "set NCCL_DEBUG=WARN (or INFO) too", { other = "NCCL_DEBUG" })
      end
    end
  end
  -- [pytorch]: a PyTorch alias set together with its TORCH_NCCL_ name, to another value.
  for alias, real in pairs(R.pytorch_alias) do
    if vars[alias] and vars[real] and vars[alias] ~= vars[real] then
      add("warn", alias, "alias-conflict", ("%s=%s and %s=%s disagree"):format(alias, vars[alias], real, vars[real]),
        ("remove %s"):format(alias), { other = real })
    end
  end
  for name, e in pairs(R.torch) do
    if e.alias_of and vars[name] and vars[e.alias_of] and vars[name] ~= vars[e.alias_of] then
      add("warn", name, "alias-conflict", ("%s=%s and %s=%s disagree"):format(name, vars[name], e.alias_of, vars[e.alias_of]),
        ("remove %s"):format(name), { other = e.alias_of })
    end
  end
end

local function sort_findings(l)
  for i, f in ipairs(l) do f._i = i end
  table.sort(l, function(a, b)
    if a.severity ~= b.severity then return SEV_RANK[a.severity] > SEV_RANK[b.severity] end
    local va, vb = a.subject.variable or "", b.subject.variable or ""
    if va ~= vb then return va < vb end
    return a._i < b._i
  end)
  for _, f in ipairs(l) do f._i = nil end
  return l
end
M.sort_findings = sort_findings

local function is_audited(name)
  for _, p in ipairs(R.AUDITED_PREFIXES) do if has_prefix(name, p) then return true end end
  return false
end

-- audit(vars, opts) -> findings, sorted by severity then variable.
-- opts: nccl_version ("2.21.5": enables the since/removed/version-range rules), strict (unknown
-- TORCH_NCCL_/UCX_ names warn), sources (NAME -> where it was set; default "environment"),
-- interfaces (this host's network interfaces: NCCL_SOCKET_IFNAME must match one), hcas (its
-- RDMA devices), file_exists (function(path) -> true | false [, why] | nil when not checked, for
-- tests; default cs.env.checks.file_exists), nvlink (GPUs connected by NVLink, from the topology),
-- per_var_only (skip the combination rules), libraries (the NCCL and
-- CUDA this process loaded, report.json commscript.backends.nccl: container_facts compares them
-- with an NVIDIA image's).
function M.audit(vars, opts)
  opts = opts or {}
  local out = {}
  local names = {}
  for k in pairs(vars) do if type(k) == "string" and is_audited(k) then names[#names + 1] = k end end
  table.sort(names)
  for _, n in ipairs(names) do
    local fs = M.audit_var(n, tostring(vars[n]), opts)
    -- "a debugging variable" is noise next to a real problem with the same variable.
    local serious = false
    for _, f in ipairs(fs) do if f.severity ~= "info" then serious = true end end
    for _, f in ipairs(fs) do
      if not (serious and f.evidence.rule == "debug-variable") then out[#out + 1] = f end
    end
  end
  if not opts.per_var_only then
    combos(vars, opts, out)
    for _, f in ipairs(C.container_facts(vars, opts)) do out[#out + 1] = f end
  end
  return sort_findings(out)
end


-- Shared with the other parts of cs.env (not part of its API).
M.internal = { is_audited = is_audited }

return M
