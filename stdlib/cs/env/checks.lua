-- cs.env.checks, part 2 of 5 of cs.env: the checks of one value by its kind (integers as NCCL_PARAM reads them,
-- enums, P2P levels, NCCL_ALGO/PROTO, name lists, interface and HCA filters, paths, host:port,
-- CIDRs) and the finding they produce. Pure functions except file_exists. [key] in comments:
-- the section of docs/nccl.md cs.env.registry.SECTIONS names.
local R = require "cs.env.registry"
local P = require "cs.env.parse"
local trim, fmt_num, show, has_prefix, version_lt = P.internal.trim, P.internal.fmt_num, P.internal.show,
  P.internal.has_prefix, P.internal.version_lt
local M = {}
local fmt = string.format

-- ---------------------------------------------------------------------------------------------
-- findings
-- ---------------------------------------------------------------------------------------------
local function finding(sev, name, message, evidence, remedy)
  return { severity = sev, subject = { variable = name }, message = message, evidence = evidence or {},
           remedy = remedy or "" }
end

-- A per-variable audit context: collects findings with the common evidence filled in.
local function var_ctx(name, value, entry, opts, out)
  local c = { name = name, value = value, entry = entry, opts = opts }
  function c.add(sev, rule, message, remedy, extra)
    local ev = { value = value, source = (opts.sources and opts.sources[name]) or opts.source or "environment",
                 rule = rule }
    if c.entry and c.entry.src then
      ev.reference = R.reference(c.entry.src)
    end
    for k, v in pairs(extra or {}) do ev[k] = v end
    out[#out + 1] = finding(sev, name, message, ev, remedy)
  end
  return c
end

local SEV_RANK = { error = 3, warn = 2, info = 1 }
M.SEV_RANK = SEV_RANK

-- ---- integers (NCCL_PARAM) ----
local function check_int_parse(c, p, how)
  local name, v = c.name, c.value
  how = how or "NCCL parses integers with strtoll"
  local k = p.kind
  if k == "empty" then
    c.add("info", "empty", ("%s is set but empty: NCCL uses the default%s"):format(name,
      c.entry and c.entry.default and (" (" .. c.entry.default .. ")") or ""),
      ("unset %s, or give it a value"):format(name), { parsed_as = "default" })
    return "skip"
  elseif k == "ok" then
    return "ok"
  elseif k == "size_suffix" then
    c.add("error", "int-size-suffix",
      ("%s=%s is read as %s: %s, which stops at '%s' (%s is %s)"):format(name, show(v), fmt_num(p.value), how,
        trim(p.rest), trim(v), fmt_num(p.intended)),
      ("write the number itself: %s=%s"):format(name, fmt_num(p.intended)),
      { parsed_as = p.value, meant = p.intended })
    return "error"
  elseif k == "exponent" or (k == "fraction" and p.intended ~= math.floor(p.intended or 0)) then
    c.add("error", "int-" .. k,
      ("%s=%s is read as %s: %s, which stops at '%s'"):format(name, show(v), fmt_num(p.value), how, p.rest:sub(1, 1)),
      p.intended == math.floor(p.intended) and ("write %s=%s"):format(name, fmt_num(p.intended))
        or ("%s takes an integer"):format(name),
      { parsed_as = p.value, meant = p.intended })
    return "error"
  elseif k == "fraction" then
    c.add("warn", "int-fraction",
      ("%s=%s is read as %s: %s, which stops at '.'"):format(name, show(v), fmt_num(p.value), how),
      ("write %s=%s"):format(name, fmt_num(p.value)), { parsed_as = p.value })
    return "ok"
  elseif k == "octal" then
    c.add("error", "int-octal",
      ("%s=%s is read as %s: a leading 0 makes strtoll read octal%s"):format(name, show(v), fmt_num(p.value),
        p.rest and (" and stop at '" .. p.rest:sub(1, 1) .. "'") or ""),
      ("drop the leading zero: %s=%s"):format(name, fmt_num(p.intended)),
      { parsed_as = p.value, meant = p.intended })
    return "error"
  elseif k == "word_true" then
    c.add("error", "int-word",
      ("%s=%s is read as 0: %s and finds no number in '%s', the opposite of what it says"):format(name, show(v), how, trim(v)),
      ("write %s=1"):format(name), { parsed_as = 0, meant = 1 })
    return "error"
  elseif k == "word_false" then
    c.add("warn", "int-word",
      ("%s=%s is read as 0 only because %s and finds no number (any word reads as 0)"):format(name, show(v), how),
      ("write %s=0"):format(name), { parsed_as = 0 })
    return "ok"
  elseif k == "nonnumeric" then
    c.add("error", "int-nonnumeric",
      ("%s=%s is not a number: %s, finds no digits and reads 0, silently"):format(name, show(v), how),
      ("%s takes an integer%s"):format(name, c.entry and c.entry.default and (" (default " .. c.entry.default .. ")") or ""),
      { parsed_as = 0 })
    return "error"
  elseif k == "trailing" then
    c.add("warn", "int-trailing",
      ("%s=%s is read as %s: %s and ignores the trailing '%s'"):format(name, show(v), fmt_num(p.value), how, p.rest),
      ("write %s=%s"):format(name, fmt_num(p.value)), { parsed_as = p.value })
    return "ok"
  elseif k == "trailing_space" then
    c.add("info", "int-trailing-space", ("%s=%s has trailing blanks (read as %s)"):format(name, show(v), fmt_num(p.value)),
      "remove the blanks", { parsed_as = p.value })
    return "ok"
  elseif k == "overflow" then
    c.add("warn", "int-overflow", ("%s=%s is out of range: strtoll clamps it to %s"):format(name, show(v), fmt_num(p.value)),
      ("give %s a value in range"):format(name), { parsed_as = p.value })
    return "ok"
  end
  return "ok"
end

local function in_list(x, list)
  for _, y in ipairs(list) do if y == x then return true end end
  return false
end

local function list_text(list)
  local t = {}
  for i, x in ipairs(list) do t[i] = tostring(x) end
  return table.concat(t, ", ")
end

local function audit_int(c, base)
  local e, name, opts = c.entry, c.name, c.opts
  local p = P.parse_int(c.value, base)
  local st = check_int_parse(c, p)
  if st == "skip" or st == "error" then return end
  local n = p.value
  local ev = { parsed_as = n }
  if e.exactly_one then
    -- [reading]: only strtol(...) == 1 disables P2P.
    if n ~= 0 and n ~= 1 then
      c.add("error", "exactly-one",
        ("%s=%s does nothing: NCCL acts on it only when it is exactly 1, so P2P stays enabled"):format(name, show(c.value)),
        ("write %s=1 to disable P2P, or unset it"):format(name), ev)
    end
  elseif e.type == "bool" then
    if n ~= 0 and n ~= 1 then
      c.add("warn", "bool-range", ("%s=%s: the documented values are 0 and 1"):format(name, show(c.value)),
        ("write %s=0 or %s=1"):format(name, name), ev)
    end
  end
  if e.values and not in_list(n, e.values) then
    c.add("warn", "int-values", ("%s=%s is not one of the documented values %s"):format(name, show(c.value), list_text(e.values)),
      ("use one of %s"):format(list_text(e.values)), { parsed_as = n, accepted = e.values })
  end
  local max = e.max
  if e.max_before and opts.nccl_version and version_lt(opts.nccl_version, e.max_before[1]) then max = e.max_before[2] end
  if e.infinite and (n == 0 or n >= 32) then
    -- [documented] NCCL_IB_TIMEOUT: 0 or >= 32 means an infinite timeout.
    c.add("warn", "ib-timeout-infinite",
      ("%s=%s means an infinite IB timeout: a dead peer is never detected (4.096 us x 2^timeout; 0 or >= 32 = infinite)"):format(name, show(c.value)),
      ("use a value in 1-31 (the default is %s)"):format(e.default), ev)
  elseif (e.min and n < e.min) or (max and n > max) then
    c.add("warn", "int-range",
      ("%s=%s is outside the valid range %s-%s"):format(name, show(c.value), e.min and fmt_num(e.min) or "", max and fmt_num(max) or ""),
      ("use a value in %s-%s%s"):format(e.min and fmt_num(e.min) or "", max and fmt_num(max) or "",
        e.default and (" (default " .. e.default .. ")") or ""),
      { parsed_as = n, min = e.min, max = max })
  end
  if e.dynamic_since and n == -1 and opts.nccl_version and version_lt(opts.nccl_version, e.dynamic_since) then
    c.add("warn", "since-value", ("%s=-1 (dynamic GID selection) needs NCCL %s; NCCL %s does not have it"):format(
      name, e.dynamic_since, opts.nccl_version), "give the GID index explicitly", ev)
  end
  if e.pow2 and n > 0 then
    local x = n
    while x > 1 and x % 2 == 0 do x = x / 2 end
    if x ~= 1 then
      c.add("info", "pow2", ("%s=%s is not a power of 2 (NCCL advises powers of 2)"):format(name, show(c.value)),
        "use a power of 2", ev)
    end
  end
end

-- ---- enums ----
local function match_value(tok, values, case)
  for _, v in ipairs(values) do if v == tok then return v, "exact" end end
  for _, v in ipairs(values) do if v:upper() == tok:upper() then return v, "case" end end
  return nil
end

local function closest(tok, values, hints)
  if hints and hints[tok:upper()] then return hints[tok:upper()] end
  local best, bestd
  for _, v in ipairs(values) do
    local d = P.distance(tok:upper(), v:upper())
    if (has_prefix(tok:upper(), v:upper()) or has_prefix(v:upper(), tok:upper())) then d = math.min(d, 1) end
    if d <= math.max(1, math.floor(#v / 2)) and (not bestd or d < bestd) then best, bestd = v, d end
  end
  return best
end

local ENUM_HINTS = { NCCL_DEBUG = { WARNING = "WARN", DEBUG = "INFO" } }  -- common misspellings

local function audit_enum(c)
  local e, name, v, opts = c.entry, c.name, c.value, c.opts
  if v == "" then
    c.add("info", "empty", ("%s is set but empty: NCCL uses the default (%s)"):format(name, e.default or "none"),
      ("unset %s, or give it a value"):format(name), { parsed_as = "default" })
    return
  end
  if e.legacy and v:match("^%s*[-+]?%d") then
    local p = P.parse_int(v)
    local st = check_int_parse(c, p)
    if st == "error" then return end
    if p.value < e.legacy[1] or p.value > e.legacy[2] then
      c.add("warn", "enum-legacy-range", ("%s=%s: the legacy numeric values are %d-%d"):format(name, show(v), e.legacy[1], e.legacy[2]),
        ("use one of %s"):format(list_text(e.values)), { parsed_as = p.value, accepted = e.values })
    end
    return
  end
  local toks = e.combine and {} or { v }
  if e.combine then for t in (v .. e.combine):gmatch("(.-)%" .. e.combine) do toks[#toks + 1] = t end end
  for _, tok in ipairs(toks) do
    local m, how = match_value(tok, e.values, e.case)
    if m and how == "case" and e.case == "sensitive" then
      c.add("error", "enum-case",
        ("%s=%s is ignored: NCCL compares the value case-sensitively, so it falls back to the default (%s)"):format(name, show(v), e.default or "none"),
        ("write %s"):format(m), { parsed_as = "default", accepted = e.values })
    elseif m and how == "case" and e.case == nil then
      c.add("info", "enum-case-unstated",
        ("%s=%s: the documented spelling is %s (NCCL's docs do not say whether it matches case-insensitively)"):format(name, show(v), m),
        ("write %s"):format(m), { parsed_as = m, accepted = e.values })
    elseif not m then
      local s = closest(tok, e.values, ENUM_HINTS[name])
      c.add("error", "enum-invalid",
        ("%s=%s is not a value NCCL knows: it silently falls back to the default (%s). Valid: %s%s"):format(
          name, show(v), e.default or "none", list_text(e.values), e.case == "insensitive" and ", any case" or ""),
        s and ("did you mean %s=%s?"):format(name, s) or ("use one of %s"):format(list_text(e.values)),
        { parsed_as = "default", accepted = e.values, suggestion = s })
      return
    else
      if e.deprecated_values and e.deprecated_values[m] then
        c.add("warn", "deprecated-value", ("%s=%s is deprecated since NCCL %s"):format(name, m, e.deprecated_values[m]),
          ("unset %s (default %s)"):format(name, e.default or ""), { parsed_as = m, deprecated_since = e.deprecated_values[m] })
      end
      if e.undocumented_values and e.undocumented_values[m] then
        c.add("info", "undocumented-value", ("%s=%s is accepted but not documented"):format(name, show(v)), "", { parsed_as = m })
      end
    end
  end
  if e.names_since and opts.nccl_version and version_lt(opts.nccl_version, e.names_since) then
    c.add("warn", "since-value", ("%s=%s: the value names need NCCL %s; NCCL %s takes only the numbers %d-%d"):format(
      name, show(v), e.names_since, opts.nccl_version, e.legacy[1], e.legacy[2]), "use the numeric value", {})
  end
end

-- ---- P2P / GDR levels (ncclGetLevel, [reading]) ----
local function audit_level(c)
  local name, v = c.name, c.value
  if v == "" then
    c.add("info", "empty", ("%s is set but empty: NCCL chooses the level itself"):format(name), ("unset %s"):format(name),
      { parsed_as = "auto" })
    return
  end
  for _, l in ipairs(R.LEVELS) do if v == l then return end end
  if v:match("^%d") then
    local n = P.strtoll(v, 0)
    local old = math.min(n, 4)
    local lvl = R.LEGACY_LEVELS[old]
    local p = P.parse_int(v)
    if p.kind ~= "ok" then
      c.add("warn", "level-trailing", ("%s=%s is read as the legacy level %s (%s): the trailing text is ignored"):format(
        name, show(v), fmt_num(n), lvl), ("write %s=%s"):format(name, lvl), { parsed_as = lvl })
    else
      c.add("info", "level-legacy", ("%s=%s is a legacy numeric level, read as %s%s"):format(name, v, lvl,
        n > 4 and " (values above 4 mean SYS)" or ""), ("write %s=%s"):format(name, lvl), { parsed_as = lvl })
    end
    return
  end
  local m = match_value(v, R.LEVELS)
  if m then
    c.add("error", "level-case",
      ("%s=%s is ignored: NCCL matches the level names case-sensitively (strcmp), so it treats the variable as unset"):format(name, show(v)),
      ("write %s=%s"):format(name, m), { parsed_as = "unset", accepted = R.LEVELS })
  else
    c.add("error", "level-invalid",
      ("%s=%s is not a level: NCCL silently treats the variable as unset. Valid: %s (case-sensitive) or 0-4"):format(
        name, show(v), list_text(R.LEVELS)),
      "use one of " .. list_text(R.LEVELS), { parsed_as = "unset", accepted = R.LEVELS })
  end
end

-- ---- NCCL_ALGO / NCCL_PROTO ([reading]) ----
local function audit_algo(c)
  local e, name, v, opts = c.entry, c.name, c.value, c.opts
  if trim(v) == "" then
    c.add("info", "empty", ("%s is set but empty: NCCL chooses itself"):format(name), ("unset %s"):format(name), { parsed_as = "auto" })
    return
  end
  local other = name == "NCCL_ALGO" and R.PROTOS or R.ALGOS
  local other_name = name == "NCCL_ALGO" and "NCCL_PROTO" or "NCCL_ALGO"
  local per_function = v:find("[:;]") ~= nil
  if per_function and opts.nccl_version and version_lt(opts.nccl_version, e.per_function_since) then
    c.add("error", "algo-syntax-version",
      ("%s=%s uses the per-function syntax (func:list;...), which NCCL reads only from %s; NCCL %s does not"):format(
        name, show(v), e.per_function_since, opts.nccl_version),
      "use a plain list (it applies to every collective)", {})
    return
  end
  local segments = {}
  for seg in (v .. ";"):gmatch("(.-);") do segments[#segments + 1] = seg end
  local bad = {}
  for _, seg in ipairs(segments) do
    local list = seg
    local func, rest = seg:match("^%s*([^:]*):(.*)$")
    if func then
      list = rest
      if not match_value(trim(func), R.FUNCS) then
        bad[#bad + 1] = { tok = trim(func), what = "function", s = closest(trim(func), R.FUNCS) }
      end
    end
    list = trim(list):gsub("^%^", "")
    for tok in (list .. ","):gmatch("(.-),") do
      tok = trim(tok)
      if tok ~= "" and not match_value(tok, e.tokens) then
        local hint
        if match_value(tok, other) then hint = ("%s is for %s"):format(tok, other_name) end
        bad[#bad + 1] = { tok = tok, what = name == "NCCL_ALGO" and "algorithm" or "protocol",
                          s = closest(tok, e.tokens), hint = hint }
      end
    end
  end
  if #bad > 0 then
    local names, sugg = {}, {}
    for _, b in ipairs(bad) do
      names[#names + 1] = ("'%s'"):format(b.tok)
      if b.hint then sugg[#sugg + 1] = b.hint elseif b.s then sugg[#sugg + 1] = ("'%s' for '%s'"):format(b.s, b.tok) end
    end
    c.add("error", "algo-token",
      ("%s=%s: unknown %s %s; since NCCL 2.24 an unknown token is an error (no fallback to Ring), older versions ignore it"):format(
        name, show(v), bad[1].what, table.concat(names, ", ")),
      (#sugg > 0 and (table.concat(sugg, "; ") .. ". ") or "") .. "Valid (any case): " .. list_text(e.tokens) ..
        (per_function and "; functions: " .. list_text(R.FUNCS) or ""),
      { accepted = e.tokens })
  end
end

-- ---- comma lists of names, optional ^ (NCCL_DEBUG_SUBSYS, NCCL_DEBUG_TIMESTAMP_LEVELS) ----
local function audit_list(c)
  local e, name, v, opts = c.entry, c.name, c.value, c.opts
  local body = trim(v):gsub("^%^", "")
  local unknown, newer = {}, {}
  local known = {}
  for k in pairs(e.values) do known[#known + 1] = k end
  table.sort(known)
  for tok in (body .. ","):gmatch("(.-),") do
    tok = trim(tok)
    if tok ~= "" then
      local since = e.values[tok:upper()]
      if not since then unknown[#unknown + 1] = tok
      elseif opts.nccl_version and version_lt(opts.nccl_version, since) then newer[#newer + 1] = tok .. " (" .. since .. ")" end
    end
  end
  if #unknown > 0 then
    local s = closest(unknown[1], known)
    c.add("warn", "list-unknown",
      ("%s=%s: unknown name%s %s, which NCCL ignores"):format(name, show(v), #unknown > 1 and "s" or "", table.concat(unknown, ", ")),
      (s and ("did you mean %s? "):format(s) or "") .. "Known: " .. table.concat(known, ", "), { unknown = unknown, suggestion = s })
  end
  if #newer > 0 then
    c.add("warn", "since-value", ("%s=%s: %s not in NCCL %s"):format(name, show(v), table.concat(newer, ", "), opts.nccl_version),
      "drop the names this NCCL does not know", {})
  end
end

-- ---- NCCL_SOCKET_IFNAME: prefixes, ^ exclude, = exact ----
function M.parse_iflist(v)
  local s = trim(v)
  local r = { exclude = false, exact = false, items = {} }
  if s:sub(1, 1) == "^" then r.exclude, s = true, s:sub(2) end
  if s:sub(1, 1) == "=" then r.exact, s = true, s:sub(2) end
  for tok in (s .. ","):gmatch("(.-),") do r.items[#r.items + 1] = trim(tok) end
  return r
end

function M.iflist_matches(spec, ifname)
  for _, it in ipairs(spec.items) do
    local p = it:match("^([^:]*)")  -- an optional :port is not part of the name
    if p ~= "" and ((spec.exact and ifname == p) or (not spec.exact and has_prefix(ifname, p))) then return true end
  end
  return false
end

local function audit_iflist(c)
  local name, v, opts = c.name, c.value, c.opts
  local spec = M.parse_iflist(v)
  local empty = 0
  for _, it in ipairs(spec.items) do if it == "" then empty = empty + 1 end end
  if empty > 0 and #spec.items > 1 then
    c.add("warn", "iflist-empty-item", ("%s=%s has an empty entry"):format(name, show(v)), "remove the stray comma", {})
  end
  local ifs = opts.interfaces
  if type(ifs) ~= "table" or #ifs == 0 then return end
  local chosen = {}
  for _, i in ipairs(ifs) do
    local m = M.iflist_matches(spec, i)
    if (m and not spec.exclude) or (not m and spec.exclude) then chosen[#chosen + 1] = i end
  end
  if #chosen == 0 then
    c.add("error", "iflist-no-match",
      ("%s=%s matches no network interface of this host (%s): NCCL finds no socket interface and fails to bootstrap"):format(
        name, show(v), table.concat(ifs, ", ")),
      "name an interface this host has (prefix, or =exact)", { interfaces = ifs })
  end
end

-- ---- NCCL_IB_HCA: [^][=]hca[:port[:rail[:plane]]],... (max 32) ----
local function audit_hcalist(c)
  local name, v, opts = c.name, c.value, c.opts
  local spec = M.parse_iflist(v)
  if #spec.items > 32 then
    c.add("warn", "hca-too-many", ("%s names %d devices; NCCL takes at most 32"):format(name, #spec.items), "name fewer devices", {})
  end
  for _, it in ipairs(spec.items) do
    local dev, port = it:match("^([^:]*):?([^:]*)")
    if dev == "" then
      c.add("warn", "hca-empty-item", ("%s=%s has an empty entry"):format(name, show(v)), "remove the stray comma", {})
    elseif port ~= "" and not port:match("^%d+$") then
      c.add("warn", "hca-port", ("%s=%s: port '%s' of %s is not a number"):format(name, show(v), port, dev),
        "write device:port with a port number, e.g. mlx5_0:1", {})
    end
  end
  local hcas = opts.hcas
  if name == "NCCL_IB_HCA" and type(hcas) == "table" then
    if #hcas == 0 then
      c.add("info", "hca-none", ("%s is set but this host has no RDMA devices: NCCL will use sockets"):format(name),
        "check the host's InfiniBand/RoCE drivers (ibv_devinfo)", {})
    else
      local any = false
      for _, h in ipairs(hcas) do
        local m = M.iflist_matches(spec, h)
        if (m and not spec.exclude) or (not m and spec.exclude) then any = true end
      end
      if not any then
        c.add("error", "hca-no-match",
          ("%s=%s matches none of this host's RDMA devices (%s): NCCL cannot use InfiniBand here"):format(name, show(v), table.concat(hcas, ", ")),
          "name a device this host has (ibv_devinfo)", { devices = hcas })
      end
    end
  end
end

-- file_exists(path) -> true | false, why | nil, why: whether path is a regular file this process
-- can read (the engine's check: it never blocks on a FIFO nor opens a device). nil when it was not
-- checked: a sandboxed recipe learns about a path only when the run was given it (its command
-- line, its environment, the recipe's options), so the answer for any other path is the same
-- whether it is missing, unreadable or forbidden (issue 30, class 4).
local function file_exists(path)
  return require("commscript.native").probe_file(path)
end
M.file_exists = file_exists

local NOT_THERE = { ["cannot open: No such file or directory"] = true, ["cannot open: Not a directory"] = true }

local function audit_path(c)
  local e, name, v, opts = c.entry, c.name, c.value, c.opts
  if v == "" then return end
  if e.no_tilde and v:sub(1, 1) == "~" then
    c.add("error", "path-tilde", ("%s=%s: NCCL does not expand '~', so it opens a path that starts with a literal '~'"):format(name, show(v)),
      ("write the full path: %s=%s"):format(name, "$HOME" .. v:sub(2)), {})
    return
  end
  if not e.must_exist then return end
  local ok, why = (opts.file_exists or file_exists)(v)
  if ok == nil then
    c.add("info", "path-unchecked", ("%s=%s was not checked: %s"):format(name, show(v), (tostring(why):gsub("^not checked: ", ""))), "", {})
  elseif not ok and (why == nil or NOT_THERE[why]) then
    local extra = name == "NCCL_CONF_FILE" and " (and ~/.nccl.conf is not read either: NCCL_CONF_FILE replaces it)" or ""
    c.add("warn", "path-missing", ("%s=%s does not exist on this host: NCCL silently ignores it%s"):format(name, show(v), extra),
      ("point %s at an existing file, or unset it"):format(name), {})
  elseif not ok then
    local fifo = why:find("FIFO", 1, true) and ": NCCL's fopen of it waits for a writer" or ""
    c.add("warn", "path-unreadable", ("%s=%s cannot be read on this host (%s)%s"):format(name, show(v), why, fifo),
      ("point %s at a regular file this user can read, or unset it"):format(name), {})
  end
end

local function audit_hostport(c)
  local name, v = c.name, c.value
  local host, port = v:match("^%[([^%]]+)%]:(%d+)$")
  if not host then host, port = v:match("^([^:]+):(%d+)$") end
  if not host or tonumber(port) < 1 or tonumber(port) > 65535 then
    c.add("warn", "hostport", ("%s=%s is not host:port (or [ipv6]:port)"):format(name, show(v)),
      ("write %s=host:port"):format(name), {})
  end
end

local function audit_cidr(c)
  local name, v = c.name, c.value
  local a, b, cc, d, bits = v:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)/(%d+)$")
  local ok = false
  if a then
    ok = tonumber(bits) <= 32
    for _, x in ipairs { a, b, cc, d } do if tonumber(x) > 255 then ok = false end end
  else
    local addr, bits6 = v:match("^([%x:]+)/(%d+)$")
    ok = addr ~= nil and addr:find(":") ~= nil and tonumber(bits6) <= 128
  end
  if not ok then
    c.add("warn", "cidr", ("%s=%s is not an address range in CIDR form (e.g. 10.0.0.0/16)"):format(name, show(v)),
      ("write %s=address/prefix-length"):format(name), {})
  end
end

local function audit_netdevs(c)
  local name, v = c.name, c.value
  if v == "AUTO" or v == "ALL" then return end
  local n = v:match("^MAX:(%d+)$")
  if n and tonumber(n) >= 1 then return end
  c.add("warn", "netdevs", ("%s=%s: the documented values are AUTO, ALL and MAX:N"):format(name, show(v)),
    "use AUTO, ALL or MAX:N (N >= 1)", {})
end

local NCCL_AUDIT = {
  int = audit_int, bool = audit_int, enum = audit_enum, level = audit_level, algo = audit_algo,
  list = audit_list, iflist = audit_iflist, hcalist = audit_hcalist, path = audit_path,
  hostport = audit_hostport, cidr = audit_cidr, netdevs = audit_netdevs,
}


-- ---------------------------------------------------------------------------------------------
-- the container's libraries against the process's ([not_core]: cs.env.registry.container)
-- ---------------------------------------------------------------------------------------------
-- "2.28.3-1" / "2.28.3-1+cuda12.8" -> "2.28.3"
local function package_version(v)
  return v and tostring(v):match("^(%d+%.%d+[%.%d]*)") or nil
end
-- "12.4.1" / "13.0" -> {12, 4}
local function major_minor(v)
  local a, b = tostring(v or ""):match("^(%d+)%.(%d+)")
  return a and { tonumber(a), tonumber(b) } or nil
end

-- container_facts(vars, opts) -> findings. In an NVIDIA CUDA/NGC image (NCCL_VERSION or
-- NV_LIBNCCL_PACKAGE_VERSION, CUDA_VERSION with NVIDIA_REQUIRE_CUDA or NV_CUDA_CUDART_VERSION):
-- one info line naming the NCCL the image packages and the NCCL the process loaded (version and
-- path), and the image's CUDA against the runtime loaded and the driver; a warning only when the
-- driver is older than the runtime (CUDA calls then fail with cudaErrorInsufficientDriver).
-- opts.libraries: { library = loaded NCCL version or "not loaded: why", library_path,
-- cuda_runtime, cuda_driver } (report.json commscript.backends.nccl).
function M.container_facts(vars, opts)
  local img_nccl_raw = vars.NCCL_VERSION or vars.NV_LIBNCCL_PACKAGE_VERSION
  local img_cuda = vars.CUDA_VERSION
  local image = img_nccl_raw or (img_cuda and (vars.NVIDIA_REQUIRE_CUDA or vars.NV_CUDA_CUDART_VERSION))
  if not image then return {} end
  local lib = type(opts.libraries) == "table" and opts.libraries or {}
  local img_nccl = package_version(img_nccl_raw)
  local loaded = type(lib.library) == "string" and package_version(lib.library) or nil
  local parts, ev = {}, { rule = "container", reference = R.reference("not_core"), source = "environment",
                          image_nccl = img_nccl_raw, loaded_nccl = loaded, loaded_nccl_path = lib.library_path,
                          image_cuda = img_cuda, cuda_runtime = lib.cuda_runtime, cuda_driver = lib.cuda_driver }
  if img_nccl_raw then
    local var = vars.NCCL_VERSION and "NCCL_VERSION" or "NV_LIBNCCL_PACKAGE_VERSION"
    local where = lib.library_path and lib.library_path ~= "" and (" from " .. lib.library_path) or ""
    local l
    if loaded and img_nccl and loaded == img_nccl then
      l = fmt("this process loaded the same NCCL %s%s", loaded, where)
    elseif loaded then
      l = fmt("this process loaded NCCL %s%s, not the image's", loaded, where)
    else
      l = fmt("this process loaded no NCCL (%s)", tostring(lib.library or "no NCCL backend in this build"))
    end
    parts[#parts + 1] = fmt("the image packages NCCL %s (%s=%s, which NCCL itself does not read); %s",
      img_nccl or tostring(img_nccl_raw), var, tostring(img_nccl_raw), l)
  end
  local driver_old = false
  if img_cuda then
    local rt, drv = major_minor(lib.cuda_runtime), major_minor(lib.cuda_driver)
    local c = fmt("image CUDA %s (CUDA_VERSION)", img_cuda)
    if lib.cuda_runtime then c = c .. fmt(", CUDA runtime %s loaded", lib.cuda_runtime) end
    if lib.cuda_driver then c = c .. fmt(", driver supports CUDA %s", lib.cuda_driver) end
    if rt and drv then
      driver_old = drv[1] < rt[1] or (drv[1] == rt[1] and drv[2] < rt[2])
    end
    parts[#parts + 1] = c
  end
  local out = { finding("info", img_nccl_raw and (vars.NCCL_VERSION and "NCCL_VERSION" or "NV_LIBNCCL_PACKAGE_VERSION")
    or "CUDA_VERSION", "NVIDIA container image: " .. table.concat(parts, "; "), ev, "") }
  if driver_old then
    out[#out + 1] = finding("warn", "CUDA_VERSION",
      fmt("the CUDA driver (supports CUDA %s) is older than the CUDA runtime this process loaded (%s): CUDA calls "
        .. "fail with cudaErrorInsufficientDriver unless the image's forward-compatibility package applies",
        lib.cuda_driver, lib.cuda_runtime),
      { rule = "driver-older-than-runtime", source = "environment", cuda_runtime = lib.cuda_runtime,
        cuda_driver = lib.cuda_driver, reference = R.reference("not_core") },
      "upgrade the host's driver, or use an image (or a pip CUDA runtime) no newer than the driver supports")
  end
  return out
end

-- Shared with the other parts of cs.env (not part of its API).
M.internal = { finding = finding, var_ctx = var_ctx, in_list = in_list, list_text = list_text, NCCL_AUDIT = NCCL_AUDIT }

return M
