-- The environment audit: lint NCCL_* / TORCH_NCCL_* / UCX_* variables against how the
-- libraries really read them (../shared/reference/faults-and-nccl-env.md §1.4-1.7, §2.2; the
-- data is in cs.env_registry). Pure functions over plain tables except where noted (nccl_conf
-- reads files, interfaces reads /proc/net/dev): no communication.
--
--   audit(vars, opts)             -> findings for a table NAME -> value
--   nccl_conf(opts)               -> the NCCL config files as NCCL applies them, and their findings
--   full_audit(vars, opts)        -> audit of the environment NCCL ends up with (env + conf files)
--   snapshot(vars)                -> the NCCL_/TORCH_NCCL_/TORCH_FR_/UCX_/OMPI_/CUDA_ subset
--   compare(per_rank_snapshots)   -> findings for variables that differ between ranks
--   dedupe(per_rank_findings)     -> one finding per distinct finding, with the ranks listed
--   format_table(findings, n)     -> lines of the table env_audit prints
--   collect(ctx, opts)            -> all of the above over a job (collective), as env_audit runs it
--   strtoll(s [, base])           -> glibc's strtoll(s, &end, base), as NCCL_PARAM parses
--
-- A finding is { severity, subject = { variable = NAME }, message, evidence = { value =,
-- parsed_as =, source =, rule =, ... }, remedy }. Severities:
--   error  NCCL reads the value differently from what it says, or ignores it, so the setting
--          silently does not do what it was written for: 4M read as 4, true read as 0, an
--          invalid NCCL_DEBUG level, a case-mismatched P2P level, NCCL_P2P_DISABLE other than 1,
--          an unknown NCCL_ALGO token (an init error since 2.24), a name that no NCCL reads
--          (folklore such as NCCL_TIMEOUT, or a likely typo of a real name), an interface
--          filter that matches no interface of this host, NCCL_CONF_FILE with '~'.
--   warn   works but is probably not what was meant, or will stop working: deprecated and
--          removed names, internal (undocumented) names (§1.7 says "warn rather than error"),
--          out-of-range values, trailing text that strtoll drops without changing the number,
--          contradicting variables, PyTorch's legacy NCCL_* aliases, unknown NCCL_* names.
--   info   worth knowing: debugging variables (env.rst: not for production), plugin-owned
--          names, legacy numeric levels, empty values (the default applies), shadowed conf lines.
-- A correct configuration produces no warn and no error.
local R = require "cs.env_registry"

local M = {}
M.registry = R

-- ---------------------------------------------------------------------------------------------
-- small helpers
-- ---------------------------------------------------------------------------------------------
local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

local function set_of(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

local function fmt_num(n)
  if type(n) ~= "number" then return tostring(n) end
  if n == math.floor(n) and math.abs(n) < 2 ^ 63 then return ("%.0f"):format(n) end
  return ("%.17g"):format(n)
end
M.fmt_num = fmt_num

-- How a value appears in a message: as is, or quoted when empty or with blanks at either end.
local function show(v)
  if v == "" or v:match("^%s") or v:match("%s$") then return ("'%s'"):format(v) end
  return v
end

local function version_parts(v)
  local t = {}
  for d in tostring(v):gmatch("%d+") do t[#t + 1] = tonumber(d) end
  return t
end

-- a < b for dotted versions ("2.3" = "2.3.0").
function M.version_lt(a, b)
  local x, y = version_parts(a), version_parts(b)
  for i = 1, math.max(#x, #y) do
    local p, q = x[i] or 0, y[i] or 0
    if p ~= q then return p < q end
  end
  return false
end
local version_lt = M.version_lt

local function has_prefix(s, p) return s:sub(1, #p) == p end

-- Optimal string alignment distance (Levenshtein plus adjacent transpositions).
function M.distance(a, b)
  local la, lb = #a, #b
  if la == 0 then return lb end
  if lb == 0 then return la end
  local d = {}
  for i = 0, la do d[i] = { [0] = i } end
  for j = 0, lb do d[0][j] = j end
  for i = 1, la do
    local ca = a:byte(i)
    for j = 1, lb do
      local cb = b:byte(j)
      local cost = ca == cb and 0 or 1
      local v = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if i > 1 and j > 1 and ca == b:byte(j - 1) and a:byte(i - 1) == cb then
        v = math.min(v, d[i - 2][j - 2] + 1)
      end
      d[i][j] = v
    end
  end
  return d[la][lb]
end

-- The closest candidate within a distance that grows with the name's length (case-insensitive;
-- `strip` is a common prefix left out of the length). Ties go to the first in sorted order.
function M.suggest(name, candidates, strip)
  local up = name:upper()
  local core = strip and has_prefix(up, strip) and up:sub(#strip + 1) or up
  local limit = math.max(1, math.min(3, math.floor(#core / 5)))
  local best, bestd
  local sorted = {}
  for _, c in ipairs(candidates) do sorted[#sorted + 1] = c end
  table.sort(sorted)
  for _, c in ipairs(sorted) do
    if c:upper() ~= up then
      local d = M.distance(up, c:upper())
      if d <= limit and (not bestd or d < bestd) then best, bestd = c, d end
    end
  end
  return best, bestd
end

-- ---------------------------------------------------------------------------------------------
-- strtoll, as glibc does it (§1.4: NCCL_PARAM parses with strtoll(str, NULL, 0))
-- ---------------------------------------------------------------------------------------------
local LLMAX = 9223372036854775807  -- LLONG_MAX (rounded to a double)

-- Returns value, endpos (index of the first character not consumed; 1 when no conversion),
-- base used, overflow (clamped to LLONG_MIN/MAX), digits (the digit text converted).
function M.strtoll(s, base)
  base = base or 0
  local i, n = 1, #s
  while i <= n and s:sub(i, i):match("^[ \t\n\v\f\r]$") do i = i + 1 end
  local neg = false
  local c = s:sub(i, i)
  if c == "+" or c == "-" then neg = c == "-"; i = i + 1 end
  local b = base
  if (b == 0 or b == 16) and s:sub(i, i) == "0" and s:sub(i + 1, i + 1):lower() == "x"
      and s:sub(i + 2, i + 2):match("^%x$") then
    b, i = 16, i + 2
  elseif b == 0 then
    b = s:sub(i, i) == "0" and 8 or 10
  end
  local start, v = i, 0
  while i <= n do
    local d = tonumber(s:sub(i, i), 36)
    if not d or d >= b then break end
    v = v * b + d
    i = i + 1
  end
  if i == start then return 0, 1, b, false, "" end
  local overflow = v > LLMAX
  if overflow then v = LLMAX end
  return neg and -v or v, i, b, overflow, s:sub(start, i - 1)
end

local TRUE_WORDS = set_of { "true", "yes", "on", "y", "t", "enable", "enabled" }
local FALSE_WORDS = set_of { "false", "no", "off", "n", "f", "disable", "disabled" }
local SIZE_POW = { k = 1, m = 2, g = 3, t = 4 }

-- Classifies how strtoll reads `raw`: { kind, value, intended, rest }.
-- kind: ok | empty | trailing_space | size_suffix | exponent | fraction | octal | word_true |
--       word_false | nonnumeric | trailing | overflow
function M.parse_int(raw, base)
  if raw == "" then return { kind = "empty" } end
  local v, endpos, b, overflow, digits = M.strtoll(raw, base or 0)
  local rest = raw:sub(endpos)
  if digits == "" then
    local w = trim(raw):lower()
    if TRUE_WORDS[w] then return { kind = "word_true", value = 0, intended = 1, rest = raw } end
    if FALSE_WORDS[w] then return { kind = "word_false", value = 0, intended = 0, rest = raw } end
    return { kind = "nonnumeric", value = 0, rest = raw }
  end
  if overflow then return { kind = "overflow", value = v, rest = rest } end
  local t = trim(raw)
  if rest == "" then
    if b == 8 and #digits > 1 then
      local dec = tonumber(t, 10)
      if dec and dec ~= v then return { kind = "octal", value = v, intended = dec } end
    end
    return { kind = "ok", value = v }
  end
  if rest:match("^%s+$") then return { kind = "trailing_space", value = v, rest = rest } end
  local unit = b ~= 16 and rest:match("^([kKmMgGtT])[iI]?[bB]?%s*$")
  if unit then
    local dec = b == 8 and tonumber(digits, 10) or math.abs(v)
    local sign = v < 0 and -1 or 1
    return { kind = "size_suffix", value = v, intended = sign * dec * 1024 ^ SIZE_POW[unit:lower()], rest = rest }
  end
  if rest:match("^[eE][+-]?%d+%s*$") or rest:match("^%.%d*[eE][+-]?%d+%s*$") then
    return { kind = "exponent", value = v, intended = tonumber(t), rest = rest }
  end
  if rest:match("^%.%d*%s*$") then return { kind = "fraction", value = v, intended = tonumber(t), rest = rest } end
  if b == 8 and rest:match("^[89]") then
    return { kind = "octal", value = v, intended = tonumber(t, 10), rest = rest }
  end
  return { kind = "trailing", value = v, rest = rest }
end

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
      ev.reference = c.entry.src == "ext" and "not in the reference (UCX docs)" or ("faults-and-nccl-env.md §" .. c.entry.src)
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
  local p = M.parse_int(c.value, base)
  local st = check_int_parse(c, p)
  if st == "skip" or st == "error" then return end
  local n = p.value
  local ev = { parsed_as = n }
  if e.exactly_one then
    -- §1.4: only strtol(...) == 1 disables P2P.
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
    -- §1.5 NCCL_IB_TIMEOUT: 0 or >= 32 means an infinite timeout.
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
    local d = M.distance(tok:upper(), v:upper())
    if (has_prefix(tok:upper(), v:upper()) or has_prefix(v:upper(), tok:upper())) then d = math.min(d, 1) end
    if d <= math.max(1, math.floor(#v / 2)) and (not bestd or d < bestd) then best, bestd = v, d end
  end
  return best
end

local ENUM_HINTS = { NCCL_DEBUG = { WARNING = "WARN", DEBUG = "INFO" } }  -- §1.6

local function audit_enum(c)
  local e, name, v, opts = c.entry, c.name, c.value, c.opts
  if v == "" then
    c.add("info", "empty", ("%s is set but empty: NCCL uses the default (%s)"):format(name, e.default or "none"),
      ("unset %s, or give it a value"):format(name), { parsed_as = "default" })
    return
  end
  if e.legacy and v:match("^%s*[-+]?%d") then
    local p = M.parse_int(v)
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
        ("%s=%s: the documented spelling is %s (the reference does not say whether NCCL matches case-insensitively)"):format(name, show(v), m),
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

-- ---- P2P / GDR levels (ncclGetLevel, §1.4) ----
local function audit_level(c)
  local name, v = c.name, c.value
  if v == "" then
    c.add("info", "empty", ("%s is set but empty: NCCL chooses the level itself"):format(name), ("unset %s"):format(name),
      { parsed_as = "auto" })
    return
  end
  for _, l in ipairs(R.LEVELS) do if v == l then return end end
  if v:match("^%d") then
    local n = M.strtoll(v, 0)
    local old = math.min(n, 4)
    local lvl = R.LEGACY_LEVELS[old]
    local p = M.parse_int(v)
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

-- ---- NCCL_ALGO / NCCL_PROTO (§1.4) ----
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

local function file_exists(path)
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end
M.file_exists = file_exists

local function audit_path(c)
  local e, name, v, opts = c.entry, c.name, c.value, c.opts
  if v == "" then return end
  if e.no_tilde and v:sub(1, 1) == "~" then
    c.add("error", "path-tilde", ("%s=%s: NCCL does not expand '~', so it opens a path that starts with a literal '~'"):format(name, show(v)),
      ("write the full path: %s=%s"):format(name, "$HOME" .. v:sub(2)), {})
    return
  end
  local exists = opts.file_exists or file_exists
  if e.must_exist and not exists(v) then
    local extra = name == "NCCL_CONF_FILE" and " (and ~/.nccl.conf is not read either: NCCL_CONF_FILE replaces it)" or ""
    c.add("warn", "path-missing", ("%s=%s does not exist on this host: NCCL silently ignores it%s"):format(name, show(v), extra),
      ("point %s at an existing file, or unset it"):format(name), {})
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
      c.entry = { src = "1.6, 2.2" }
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
    c.entry = { src = "1.5-1.7 (not listed)" }
    local s = M.suggest(name, all_nccl_names(), "NCCL_")
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
    local s = M.suggest(name, names_of(R.torch), "TORCH_")
    if s or opts.strict then
      c.add(opts.strict and "warn" or "info", "unknown-torch",
        ("%s is not a PyTorch ProcessGroupNCCL variable the reference knows%s"):format(name, s and ("; did you mean " .. s .. "?") or ""),
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
    local p = M.parse_int(v, 10)
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
      -- §2.1/2.2: the watchdog's reaction to a timeout depends on it; 0 = none.
      c.add("warn", "torch-no-error-handling",
        ("%s=0: on a collective timeout the watchdog neither aborts the communicator nor tears down the process, so a stuck rank can hang the job"):format(name),
        ("leave %s unset (default 3) or use 1"):format(name), { parsed_as = 0 })
    end
  elseif e.type == "pbool" then
    -- Which spellings PyTorch accepts is not in the reference: 0/1 and the usual words pass.
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
  local s = M.suggest(name, names_of(R.ucx), "UCX_")
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
  local p = M.parse_int(v)
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
  -- §1.4: NCCL_P2P_DISABLE=1 overrides NCCL_P2P_LEVEL.
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
  -- §1.5: NRINGS aliases are ignored when NCHANNELS is set; with *_CTAS the most restrictive wins.
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
  -- §1.5: NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD <= 64.
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
  -- §1.4: NCCL_ENV_PLUGIN (2.28) can supply values instead of the environment.
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
  -- §2.2: a PyTorch alias set together with its TORCH_NCCL_ name, to another value.
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
-- RDMA devices), file_exists (function(path) -> bool, for tests), nvlink (GPUs connected by
-- NVLink, from the topology), per_var_only (skip the combination rules).
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
  if not opts.per_var_only then combos(vars, opts, out) end
  return sort_findings(out)
end

-- ---------------------------------------------------------------------------------------------
-- NCCL's configuration files (§1.4)
-- ---------------------------------------------------------------------------------------------
-- What the reference says (§1.4, "Where values come from"): NCCL reads first $NCCL_CONF_FILE
-- (2.23+) or else ~/.nccl.conf, then /etc/nccl.conf. So NCCL_CONF_FILE *replaces* the user file
-- (both are never read). Lines are NAME=value, '#' starts a comment. Files are applied with
-- setenv(name, value, 0): the real environment wins over the user file, which wins over
-- /etc/nccl.conf; and within one file the first line for a name wins. NCCL_CONF_FILE itself is
-- read from the environment before any file, so setting it inside a file does nothing.
-- Not from the reference (from how setEnvFile copies the line): NCCL does not trim blanks or
-- strip quotes, so "NCCL_DEBUG = WARN" sets a variable named "NCCL_DEBUG ".

-- Parses the text of one file: entries { name, value, line } and findings about the lines.
function M.parse_conf(text, path)
  local entries, out = {}, {}
  local first = {}
  local ln = 0
  local function add(sev, name, rule, msg, remedy, ev)
    ev = ev or {}
    ev.source, ev.rule = ("%s:%d"):format(path, ln), rule
    ev.reference = "faults-and-nccl-env.md §1.4"
    out[#out + 1] = finding(sev, name, msg, ev, remedy)
  end
  for line in (text .. "\n"):gmatch("(.-)\r?\n") do
    ln = ln + 1
    if line:match("^%s*$") or line:match("^%s*#") then
      -- blank or comment
    else
      local name, value = line:match("^([^=]*)=(.*)$")
      if not name then
        add("warn", "(" .. path .. ")", "conf-no-equals", ("line %d of %s is not NAME=value: NCCL skips it"):format(ln, path),
          "write NAME=value", { line_text = line })
      else
        local clean = trim(name):gsub("^export%s+", "")
        if clean ~= name then
          add("error", clean, "conf-blanks-in-name",
            ("line %d of %s sets a variable named '%s' (NCCL neither trims blanks nor reads shell syntax), so %s is not set"):format(
              ln, path, name, clean),
            ("write %s=%s with no blanks around the name"):format(clean, trim(value)), { line_text = line })
        elseif value:match("^%s") or value:match("%s$") then
          add("warn", name, "conf-blanks-in-value",
            ("line %d of %s: the value of %s has blanks around it, which NCCL keeps"):format(ln, path, name),
            ("write %s=%s"):format(name, trim(value)), { line_text = line })
        end
        if value:match("^%s*\".*\"%s*$") or value:match("^%s*'.*'%s*$") then
          add("warn", clean, "conf-quotes", ("line %d of %s: NCCL keeps the quotes in the value of %s"):format(ln, path, clean),
            ("write %s=%s without quotes"):format(clean, trim(value):sub(2, -2)), { line_text = line })
        end
        if value:find("%s#") then
          add("warn", clean, "conf-inline-comment",
            ("line %d of %s: a '#' after the value of %s may be taken as part of the value"):format(ln, path, clean),
            "put comments on their own line", { line_text = line })
        end
        if clean == name then
          if first[name] then
            add("warn", name, "conf-duplicate",
              ("line %d of %s sets %s again: NCCL keeps the first value (line %d)"):format(ln, path, name, first[name]),
              "keep one line per variable", { line_text = line })
          else
            first[name] = ln
            entries[#entries + 1] = { name = name, value = value, line = ln }
          end
        end
      end
    end
  end
  return entries, out
end

local function read_file(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local t = f:read("*a")
  f:close()
  -- A directory opens but does not read.
  if t == nil then return nil end
  return t
end

-- nccl_conf(opts) -> {
--   files     = { { path, role = "NCCL_CONF_FILE" | "user" | "system" | "extra", exists, applied, entries } },
--   effective = { NAME = { value, source = "path:line" } }  values NCCL takes from the files,
--   merged    = the environment NCCL ends up with (env + effective),
--   sources   = NAME -> "environment" or "path:line" for every name of merged,
--   file_findings = findings about the files and their lines (shadowing, duplicates, syntax),
--   findings  = file_findings + the audit of the values NCCL takes from the files }
-- opts: env (default cs.environ()), home (default env.HOME), system_file (default
-- /etc/nccl.conf), extra (list of paths audited as conf files though NCCL does not read them
-- unless NCCL_CONF_FILE names them), nccl_version, and audit options.
function M.nccl_conf(opts)
  opts = opts or {}
  local env = opts.env or require("commscript").environ()
  local ver = opts.nccl_version
  local files = {}
  local conf = env.NCCL_CONF_FILE
  local use_conf_var = conf ~= nil and conf ~= "" and not (ver and version_lt(ver, "2.23"))
  if use_conf_var then
    files[#files + 1] = { path = conf, role = "NCCL_CONF_FILE" }
  else
    local home = opts.home or env.HOME
    if home and home ~= "" then files[#files + 1] = { path = home .. "/.nccl.conf", role = "user" } end
  end
  files[#files + 1] = { path = opts.system_file or "/etc/nccl.conf", role = "system" }
  local applied_paths = {}
  for _, f in ipairs(files) do f.applied = true; applied_paths[f.path] = true end
  for _, p in ipairs(opts.extra or {}) do
    if not applied_paths[p] then files[#files + 1] = { path = p, role = "extra", applied = false } end
  end

  local file_findings, effective, sources, merged = {}, {}, {}, {}
  for k, v in pairs(env) do merged[k] = v; sources[k] = opts.sources and opts.sources[k] or "environment" end
  local extra_vars, extra_sources = {}, {}
  for _, f in ipairs(files) do
    local text = read_file(f.path)
    f.exists = text ~= nil
    f.entries = {}
    if text then
      local entries, fs = M.parse_conf(text, f.path)
      f.entries = entries
      for _, x in ipairs(fs) do file_findings[#file_findings + 1] = x end
      for _, en in ipairs(entries) do
        local src = ("%s:%d"):format(f.path, en.line)
        local function shadow(by_what, by_value)
          if by_value ~= en.value then
            file_findings[#file_findings + 1] = finding("info", en.name,
              ("%s sets %s=%s, but %s (%s) wins"):format(src, en.name, show(en.value), by_what, show(by_value)),
              { value = en.value, source = src, rule = "conf-shadowed", effective = by_value, reference = "faults-and-nccl-env.md §1.4" },
              ("remove the line if the %s value is the one you want"):format(by_what))
          end
        end
        if not f.applied then
          extra_vars[en.name], extra_sources[en.name] = en.value, src
        elseif en.name == "NCCL_CONF_FILE" then
          file_findings[#file_findings + 1] = finding("warn", en.name,
            ("%s sets NCCL_CONF_FILE: NCCL reads that variable from the environment before any file, so it has no effect here"):format(src),
            { value = en.value, source = src, rule = "conf-file-in-file", reference = "faults-and-nccl-env.md §1.4" },
            "export NCCL_CONF_FILE in the environment instead")
        elseif env[en.name] ~= nil then
          shadow("the environment", env[en.name])
        elseif effective[en.name] then
          shadow(effective[en.name].source, effective[en.name].value)
        else
          effective[en.name] = { value = en.value, source = src }
          merged[en.name], sources[en.name] = en.value, src
        end
      end
    elseif f.role == "extra" then
      file_findings[#file_findings + 1] = finding("warn", "(" .. f.path .. ")", ("%s cannot be read"):format(f.path),
        { source = f.path, rule = "conf-unreadable" }, "check the path")
    end
    if f.role == "extra" and f.exists then
      file_findings[#file_findings + 1] = finding("info", "(" .. f.path .. ")",
        ("%s is audited as an NCCL config file, but NCCL reads it only if NCCL_CONF_FILE names it"):format(f.path),
        { source = f.path, rule = "conf-extra" }, ("export NCCL_CONF_FILE=%s to make NCCL read it"):format(f.path))
    end
  end

  local aopts = {}
  for k, v in pairs(opts) do aopts[k] = v end
  -- The values NCCL takes from the files, audited with their source.
  local from_files, fsrc = {}, {}
  for k, e in pairs(effective) do from_files[k], fsrc[k] = e.value, e.source end
  aopts.sources, aopts.per_var_only = fsrc, true
  local findings = {}
  for _, x in ipairs(file_findings) do findings[#findings + 1] = x end
  for _, x in ipairs(M.audit(from_files, aopts)) do findings[#findings + 1] = x end
  -- Files NCCL does not read: every line, on its own (combination rules included).
  if next(extra_vars) then
    aopts.sources, aopts.per_var_only = extra_sources, false
    for _, x in ipairs(M.audit(extra_vars, aopts)) do findings[#findings + 1] = x end
  end
  return { files = files, effective = effective, merged = merged, sources = sources,
           file_findings = sort_findings(file_findings), findings = sort_findings(findings),
           extra_vars = extra_vars, extra_sources = extra_sources }
end

-- The audit of what NCCL ends up with: the environment plus the config files, each value with
-- its source, plus the findings about the files themselves. opts as for audit and nccl_conf
-- (opts.conf = false skips the files).
function M.full_audit(vars, opts)
  opts = opts or {}
  if opts.conf == false then return M.audit(vars, opts), nil end
  local copts = {}
  for k, v in pairs(opts) do copts[k] = v end
  copts.env = vars
  local conf = M.nccl_conf(copts)
  local aopts = {}
  for k, v in pairs(opts) do aopts[k] = v end
  aopts.sources = conf.sources
  local out = {}
  for _, x in ipairs(conf.file_findings) do out[#out + 1] = x end
  for _, x in ipairs(M.audit(conf.merged, aopts)) do out[#out + 1] = x end
  if next(conf.extra_vars) then
    aopts.sources = conf.extra_sources
    for _, x in ipairs(M.audit(conf.extra_vars, aopts)) do out[#out + 1] = x end
  end
  return sort_findings(out), conf
end

-- ---------------------------------------------------------------------------------------------
-- snapshot and cross-rank comparison
-- ---------------------------------------------------------------------------------------------
local function secret(name)
  return name:find("precondition_transports") or name:find("SECRET") or name:find("TOKEN") or name:find("PASSWORD")
end

function M.snapshot(vars)
  local s = {}
  for k, v in pairs(vars) do
    if type(k) == "string" and not secret(k) then
      for _, p in ipairs(R.SNAPSHOT_PREFIXES) do
        if has_prefix(k, p) then s[k] = v; break end
      end
    end
  end
  return s
end

-- Variables that differ between ranks by design (launcher bookkeeping, one GPU per rank).
local function per_rank_by_design(name)
  if name == "CUDA_VISIBLE_DEVICES" then return true end
  if has_prefix(name, "OMPI_MCA_") then
    local p = name:sub(10)
    return has_prefix(p, "orte_") or has_prefix(p, "ess") or has_prefix(p, "pmix") or has_prefix(p, "prte_")
      or p == "initial_wdir" or has_prefix(p, "shmem_")
  end
  if has_prefix(name, "OMPI_") then return true end  -- OMPI_COMM_WORLD_*, OMPI_ARGV, OMPI_COMMAND ...
  return false
end

-- Settings that change which algorithm, protocol, channels, buffers or transports a
-- communicator uses: ranks that disagree on them can mismatch and hang (our judgment; the
-- reference calls differing env "a classic cause of hangs", scorecard.md §1).
M.MUST_AGREE = set_of {
  "NCCL_ALGO", "NCCL_PROTO", "NCCL_BUFFSIZE", "NCCL_LL_BUFFSIZE", "NCCL_LL128_BUFFSIZE", "NCCL_NTHREADS",
  "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_MAX_CTAS", "NCCL_MIN_CTAS", "NCCL_MAX_NRINGS", "NCCL_MIN_NRINGS",
  "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE", "NCCL_NET", "NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL",
  "NCCL_CROSS_NIC", "NCCL_COLLNET_ENABLE", "NCCL_NVLS_ENABLE", "NCCL_PXN_DISABLE", "NCCL_P2P_NET_CHUNKSIZE",
  "NCCL_CHUNK_SIZE", "NCCL_RUNTIME_CONNECT", "NCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_SPLIT_DATA_ON_QPS",
  "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD", "NCCL_MNNVL_ENABLE", "NCCL_PAT_ENABLE",
}

local function compare_severity(name)
  if per_rank_by_design(name) then return nil end
  if has_prefix(name, "NCCL_") then
    if M.MUST_AGREE[name] then return "error" end
    if has_prefix(name, "NCCL_DEBUG") then return "info" end
    return "warn"
  end
  if has_prefix(name, "TORCH_NCCL_") or has_prefix(name, "TORCH_FR_") or has_prefix(name, "UCX_")
      or has_prefix(name, "OMPI_MCA_") then return "warn" end
  return "info"
end

-- "0-3,5,7-8"
function M.rank_ranges(ranks)
  local s = {}
  for i, r in ipairs(ranks) do s[i] = r end
  table.sort(s)
  local out, i = {}, 1
  while i <= #s do
    local j = i
    while j < #s and s[j + 1] == s[j] + 1 do j = j + 1 end
    out[#out + 1] = j > i and ("%d-%d"):format(s[i], s[j]) or tostring(s[i])
    i = j + 1
  end
  return table.concat(out, ",")
end

-- compare(snapshots [, opts]) -> findings. snapshots[r + 1] is rank r's snapshot (NAME ->
-- value); opts.hosts[r + 1] its host (named in the evidence). One finding per variable that is
-- not the same on every rank (unset counts as a value); subject.ranks lists the ranks outside
-- the largest group, or every rank when no group is larger than all others.
function M.compare(snaps, opts)
  opts = opts or {}
  local names, seen = {}, {}
  for _, s in ipairs(snaps) do
    for k in pairs(s) do if not seen[k] then seen[k] = true; names[#names + 1] = k end end
  end
  table.sort(names)
  local out = {}
  for _, name in ipairs(names) do
    local sev = compare_severity(name)
    if sev then
      local groups, order = {}, {}
      for i, s in ipairs(snaps) do
        local v = s[name]
        local key = v == nil and "\0unset" or ("=" .. v)
        if not groups[key] then groups[key] = { value = v, ranks = {} }; order[#order + 1] = key end
        local g = groups[key]
        g.ranks[#g.ranks + 1] = i - 1
      end
      if #order > 1 then
        -- Largest group first (the majority), then by first rank.
        table.sort(order, function(a, b)
          local ga, gb = groups[a], groups[b]
          if #ga.ranks ~= #gb.ranks then return #ga.ranks > #gb.ranks end
          return ga.ranks[1] < gb.ranks[1]
        end)
        local parts, values, minority = {}, {}, {}
        for gi, key in ipairs(order) do
          local g = groups[key]
          local rs = M.rank_ranges(g.ranks)
          parts[#parts + 1] = ("%s on rank%s %s"):format(g.value == nil and "unset" or ("'" .. g.value .. "'"),
            #g.ranks > 1 and "s" or "", rs)
          local hosts
          if opts.hosts then
            local hs, hseen = {}, {}
            for _, r in ipairs(g.ranks) do
              local h = opts.hosts[r + 1]
              if h and not hseen[h] then hseen[h] = true; hs[#hs + 1] = h end
            end
            hosts = hs
          end
          values[#values + 1] = { value = g.value, set = g.value ~= nil, ranks = g.ranks, hosts = hosts }
          if gi > 1 then for _, r in ipairs(g.ranks) do minority[#minority + 1] = r end end
        end
        table.sort(minority)
        -- No strict majority: every rank is involved (which side is "wrong" is unknown).
        if #groups[order[1]].ranks == #groups[order[2]].ranks then
          minority = {}
          for i = 1, #snaps do minority[i] = i - 1 end
        end
        out[#out + 1] = {
          severity = sev,
          subject = { variable = name, ranks = minority },
          message = ("%s differs between ranks: %s"):format(name, table.concat(parts, "; ")),
          evidence = { values = values, rule = "differs-between-ranks", ranks = #snaps },
          remedy = sev == "error"
            and "give every rank the same value (a communicator whose ranks disagree on it can mismatch or hang)"
            or "give every rank the same value (export it from the launcher, e.g. mpirun -x NAME)",
        }
      end
    end
  end
  return sort_findings(out)
end

-- ---------------------------------------------------------------------------------------------
-- merging per-rank findings
-- ---------------------------------------------------------------------------------------------
-- dedupe(per_rank, opts) -> findings. per_rank[r + 1] is rank r's list of findings. The same
-- finding (severity, variable, message, remedy) on several ranks becomes one, with
-- subject.ranks listing them (and subject.hosts when opts.hosts is given).
function M.dedupe(per_rank, opts)
  opts = opts or {}
  local by, order = {}, {}
  for i, list in ipairs(per_rank) do
    for _, f in ipairs(list) do
      local subj = type(f.subject) == "table" and f.subject or { variable = tostring(f.subject) }
      local key = table.concat({ f.severity, tostring(subj.variable), f.message, f.remedy or "" }, "\0")
      local m = by[key]
      if not m then
        local s = {}
        for k, v in pairs(subj) do s[k] = v end
        m = { severity = f.severity, subject = s, message = f.message, evidence = f.evidence or {}, remedy = f.remedy or "",
              _ranks = {} }
        by[key] = m
        order[#order + 1] = m
      end
      m._ranks[#m._ranks + 1] = i - 1
    end
  end
  local out = {}
  for _, m in ipairs(order) do
    m.subject.ranks = m._ranks
    if opts.hosts then
      local hs, seen = {}, {}
      for _, r in ipairs(m._ranks) do
        local h = opts.hosts[r + 1]
        if h and not seen[h] then seen[h] = true; hs[#hs + 1] = h end
      end
      m.subject.hosts = hs
    end
    m._ranks = nil
    out[#out + 1] = m
  end
  return sort_findings(out)
end

-- ---------------------------------------------------------------------------------------------
-- the table env_audit prints
-- ---------------------------------------------------------------------------------------------
local function cut(s, n)
  s = tostring(s)
  if #s <= n then return s end
  return s:sub(1, n - 3) .. "..."
end

-- format_table(findings, nranks) -> list of lines: severity, variable, value, ranks, message,
-- and the remedy on the line below.
function M.format_table(findings, nranks)
  local rows = {}
  local w = { 8, 8, 5, 5 }
  for _, f in ipairs(findings) do
    local ev = f.evidence or {}
    local ranks = f.subject.ranks
    local rtext = "-"
    if ranks and #ranks > 0 then
      rtext = (nranks and #ranks == nranks and nranks > 1) and "all" or M.rank_ranges(ranks)
    end
    local value = ev.value
    if value == nil and ev.values then value = "(differs)" end
    local remedy = f.remedy or ""
    -- Where a value that is not from the process environment was set (a conf file line, the
    -- run's config [env]).
    if type(ev.source) == "string" and ev.source ~= "environment" and not f.message:find(ev.source, 1, true) then
      remedy = remedy .. (remedy ~= "" and " " or "") .. "(set at " .. ev.source .. ")"
    end
    local row = { f.severity, tostring(f.subject.variable or "?"), cut(value == nil and "-" or show(tostring(value)), 24), rtext,
                  f.message, remedy }
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

-- ---------------------------------------------------------------------------------------------
-- the whole audit over a job (collective: every rank calls it)
-- ---------------------------------------------------------------------------------------------
-- collect(ctx, opts) -> { findings, counts = {error, warn, info}, files, audited, from_files,
-- hosts, nhosts }. Every rank audits its own environment and NCCL config files (full_audit),
-- the results are gathered with ctx.comm:allgather_value, the same finding on several ranks
-- becomes one with the ranks listed (dedupe), and variables that differ between ranks are
-- added (compare). Every rank returns the same findings, so reporting them on every rank gives
-- every rank the same exit code. opts: nccl_version, strict, extra (conf files), host_checks
-- (default true: NCCL_SOCKET_IFNAME / NCCL_IB_HCA against this host), vars (default
-- cs.environ()). `files`, `audited` and `from_files` are rank 0's.
function M.collect(ctx, opts)
  opts = opts or {}
  local vars = opts.vars or require("commscript").environ()
  local sources = {}
  local cfg_env = type(ctx.config) == "table" and ctx.config.env
  if type(cfg_env) == "table" then
    for k in pairs(cfg_env) do if vars[k] ~= nil then sources[k] = "config [env]" end end
  end
  for k in pairs(vars) do sources[k] = sources[k] or "environment" end
  local aopts = { nccl_version = opts.nccl_version, strict = opts.strict, sources = sources, extra = opts.extra,
                  home = opts.home, system_file = opts.system_file, nvlink = opts.nvlink }
  if opts.host_checks ~= false then
    aopts.interfaces = M.interfaces()
    aopts.hcas = M.rdma_devices()
  end
  local findings, conf = M.full_audit(vars, aopts)

  local files = {}
  for _, f in ipairs(conf.files) do
    files[#files + 1] = { path = f.path, role = f.role, exists = f.exists, applied = f.applied, entries = #f.entries }
  end
  local from_files, audited = 0, 0
  for _ in pairs(conf.effective) do from_files = from_files + 1 end
  for k in pairs(conf.merged) do if is_audited(k) then audited = audited + 1 end end

  local all = ctx.comm:allgather_value { host = ctx.host, findings = findings, snapshot = M.snapshot(conf.merged),
                                         files = files, audited = audited, from_files = from_files }
  local per_rank, snaps, hosts, nhosts, seen = {}, {}, {}, 0, {}
  for i, a in ipairs(all) do
    per_rank[i], snaps[i], hosts[i] = a.findings or {}, a.snapshot or {}, a.host
    if not seen[a.host] then seen[a.host] = true; nhosts = nhosts + 1 end
  end
  local merged = M.dedupe(per_rank, { hosts = hosts })
  for _, f in ipairs(M.compare(snaps, { hosts = hosts })) do merged[#merged + 1] = f end
  merged = sort_findings(merged)
  local counts = { error = 0, warn = 0, info = 0 }
  for _, f in ipairs(merged) do counts[f.severity] = counts[f.severity] + 1 end
  return { findings = merged, counts = counts, files = all[1].files or {}, audited = all[1].audited or 0,
           from_files = all[1].from_files or 0, hosts = hosts, nhosts = nhosts }
end

-- ---------------------------------------------------------------------------------------------
-- what this host has (reads /proc and /sys; for the recipe, not for tests)
-- ---------------------------------------------------------------------------------------------
-- Network interface names from /proc/net/dev (nil when it cannot be read).
function M.interfaces(path)
  local text = read_file(path or "/proc/net/dev")
  if not text then return nil end
  local l = {}
  for line in text:gmatch("[^\n]+") do
    local n = line:match("^%s*([^%s:|]+):")
    if n then l[#l + 1] = n end
  end
  table.sort(l)
  return l
end

-- RDMA device names, from /sys/class/infiniband_verbs/uverbsN/ibdev (no directory listing, so
-- no fork from an MPI process). nil when this host has no verbs class at all (nothing to check
-- against), {} when it has the class but no device.
function M.rdma_devices(root)
  root = root or "/sys/class/infiniband_verbs"
  local d = io.open(root, "r")
  if not d then return nil end
  d:close()
  local l, seen = {}, {}
  for i = 0, 63 do
    local f = io.open(("%s/uverbs%d/ibdev"):format(root, i), "r")
    if f then
      local name = (f:read("*l") or ""):match("^%s*(.-)%s*$")
      f:close()
      if name ~= "" and not seen[name] then seen[name] = true; l[#l + 1] = name end
    end
  end
  table.sort(l)
  return l
end

return M
