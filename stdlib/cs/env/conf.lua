-- cs.env.conf, part 4 of 5 of cs.env: NCCL's configuration files (NCCL_CONF_FILE or ~/.nccl.conf, then
-- /etc/nccl.conf) parsed and applied as NCCL applies them, and full_audit: the audit of the
-- environment NCCL ends up with. Reads files.
local P = require "cs.env.parse"
local C = require "cs.env.checks"
local A = require "cs.env.combos"
local trim, show, version_lt = P.internal.trim, P.internal.show, P.internal.version_lt
local finding = C.internal.finding
local sort_findings = A.sort_findings
local M = {}
-- evidence.reference of the findings about the files: where docs/nccl.md says how NCCL reads them.
local READING = require("cs.env.registry").reference("reading")

-- ---------------------------------------------------------------------------------------------
-- NCCL's configuration files (docs/nccl.md#how-nccl-reads-a-variable)
-- ---------------------------------------------------------------------------------------------
-- Where values come from: NCCL reads first $NCCL_CONF_FILE
-- (2.23+) or else ~/.nccl.conf, then /etc/nccl.conf. So NCCL_CONF_FILE *replaces* the user file
-- (both are never read). Lines are NAME=value, '#' starts a comment. Files are applied with
-- setenv(name, value, 0): the real environment wins over the user file, which wins over
-- /etc/nccl.conf; and within one file the first line for a name wins. NCCL_CONF_FILE itself is
-- read from the environment before any file, so setting it inside a file does nothing.
-- From how setEnvFile copies the line: NCCL does not trim blanks or
-- strip quotes, so "NCCL_DEBUG = WARN" sets a variable named "NCCL_DEBUG ".

-- Parses the text of one file: entries { name, value, line } and findings about the lines.
function M.parse_conf(text, path)
  local entries, out = {}, {}
  local first = {}
  local ln = 0
  local function add(sev, name, rule, msg, remedy, ev)
    ev = ev or {}
    ev.source, ev.rule = ("%s:%d"):format(path, ln), rule
    ev.reference = READING
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
          "write NAME=value", { length = #line })
      else
        local clean = trim(name):gsub("^export%s+", "")
        if clean ~= name then
          add("error", clean, "conf-blanks-in-name",
            ("line %d of %s sets a variable named '%s' (NCCL neither trims blanks nor reads shell syntax), so %s is not set"):format(
              ln, path, name, clean),
            ("write %s=%s with no blanks around the name"):format(clean, trim(value)), { value = value })
        elseif value:match("^%s") or value:match("%s$") then
          add("warn", name, "conf-blanks-in-value",
            ("line %d of %s: the value of %s has blanks around it, which NCCL keeps"):format(ln, path, name),
            ("write %s=%s"):format(name, trim(value)), { value = value })
        end
        if value:match("^%s*\".*\"%s*$") or value:match("^%s*'.*'%s*$") then
          add("warn", clean, "conf-quotes", ("line %d of %s: NCCL keeps the quotes in the value of %s"):format(ln, path, clean),
            ("write %s=%s without quotes"):format(clean, trim(value):sub(2, -2)), { value = value })
        end
        if value:find("%s#") then
          add("warn", clean, "conf-inline-comment",
            ("line %d of %s: a '#' after the value of %s may be taken as part of the value"):format(ln, path, clean),
            "put comments on their own line", { value = value })
        end
        if clean == name then
          if first[name] then
            add("warn", name, "conf-duplicate",
              ("line %d of %s sets %s again: NCCL keeps the first value (line %d)"):format(ln, path, name, first[name]),
              "keep one line per variable", { value = value })
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

local native = require "commscript.native"

-- Regular files of at most 1 MiB (a FIFO, /dev/zero or a directory is not read): the text, or
-- nil and why.
local function read_file(path)
  return native.read_conf_file(path, 1048576)
end

-- The files a sandboxed recipe may have read: NCCL's own configuration files, as the process's
-- real environment names them ($NCCL_CONF_FILE, $HOME/.nccl.conf) and /etc/nccl.conf. Paths a
-- recipe passes (opts.extra, opts.home, opts.system_file, opts.env.NCCL_CONF_FILE) are read only
-- when they are one of these, a file the user named in the recipe's options (env_audit --conf
-- FILE), or under --trusted: cs.env.nccl_conf{extra={"/etc/shadow"}} put
-- the lines of any file into findings the recipe could copy out.
local function allowed_paths()
  local real = native.environ()
  local ok = { ["/etc/nccl.conf"] = true }
  if real.NCCL_CONF_FILE and real.NCCL_CONF_FILE ~= "" then ok[real.NCCL_CONF_FILE] = true end
  if real.HOME and real.HOME ~= "" then ok[real.HOME .. "/.nccl.conf"] = true end
  return ok
end
M.allowed_paths = allowed_paths

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
  local allowed = not native.trusted() and allowed_paths() or nil
  for _, f in ipairs(files) do
    local text, why
    if allowed and not allowed[f.path] and not native.file_allowed(f.path) then
      why = "not read: a sandboxed recipe reads only NCCL's own configuration files ($NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf; --trusted lifts it)"
      f.refused = true
    else
      text, why = read_file(f.path)
    end
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
              { value = en.value, source = src, rule = "conf-shadowed", effective = by_value, reference = READING },
              ("remove the line if the %s value is the one you want"):format(by_what))
          end
        end
        if not f.applied then
          extra_vars[en.name], extra_sources[en.name] = en.value, src
        elseif en.name == "NCCL_CONF_FILE" then
          file_findings[#file_findings + 1] = finding("warn", en.name,
            ("%s sets NCCL_CONF_FILE: NCCL reads that variable from the environment before any file, so it has no effect here"):format(src),
            { value = en.value, source = src, rule = "conf-file-in-file", reference = READING },
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
    elseif f.role == "extra" or f.refused or (why and why ~= "" and not why:find("No such file", 1, true)) then
      file_findings[#file_findings + 1] = finding("warn", "(" .. f.path .. ")", (f.refused and "%s %s" or "%s cannot be read (%s)"):format(f.path, tostring(why)),
        { source = f.path, rule = f.refused and "conf-not-allowed" or "conf-unreadable" },
        f.refused and "run with --trusted to audit other files" or "check the path")
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
  for _, x in ipairs(A.audit(from_files, aopts)) do findings[#findings + 1] = x end
  -- Files NCCL does not read: every line, on its own (combination rules included).
  if next(extra_vars) then
    aopts.sources, aopts.per_var_only = extra_sources, false
    for _, x in ipairs(A.audit(extra_vars, aopts)) do findings[#findings + 1] = x end
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
  if opts.conf == false then return A.audit(vars, opts), nil end
  local copts = {}
  for k, v in pairs(opts) do copts[k] = v end
  copts.env = vars
  local conf = M.nccl_conf(copts)
  local aopts = {}
  for k, v in pairs(opts) do aopts[k] = v end
  aopts.sources = conf.sources
  local out = {}
  for _, x in ipairs(conf.file_findings) do out[#out + 1] = x end
  for _, x in ipairs(A.audit(conf.merged, aopts)) do out[#out + 1] = x end
  if next(conf.extra_vars) then
    aopts.sources = conf.extra_sources
    for _, x in ipairs(A.audit(conf.extra_vars, aopts)) do out[#out + 1] = x end
  end
  return sort_findings(out), conf
end


return M
