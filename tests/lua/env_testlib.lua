-- Helpers shared by the tests of cs.env (tests/lua/test_env*.lua): audit with no host checks,
-- the findings of one rule, temporary files. Loaded with require "env_testlib" (the tests put
-- their own directory on package.path; they run --trusted).
local lu = require "luaunit"
local env = require "cs.env"
local H = {}

local NO_FILES = function() return false end

-- audit of one variable set (combination rules included); opts default to "no host checks".
local function audit(vars, opts)
  opts = opts or {}
  if opts.file_exists == nil then opts.file_exists = NO_FILES end
  return env.audit(vars, opts)
end

-- The findings of one rule.
local function with_rule(fs, rule)
  local l = {}
  for _, f in ipairs(fs) do if f.evidence.rule == rule then l[#l + 1] = f end end
  return l
end

-- Exactly one finding of `rule`, with `severity`, about `variable`; returns it.
local function one(fs, rule, severity, variable)
  local l = with_rule(fs, rule)
  local got = {}
  for _, f in ipairs(fs) do got[#got + 1] = f.severity .. " " .. f.evidence.rule .. " " .. tostring(f.subject.variable) end
  lu.assertEquals(#l, 1, ("expected one '%s' finding, got: %s"):format(rule, table.concat(got, "; ")))
  lu.assertEquals(l[1].severity, severity)
  if variable then lu.assertEquals(l[1].subject.variable, variable) end
  lu.assertEquals(type(l[1].message), "string")
  lu.assertEquals(type(l[1].remedy), "string")
  return l[1]
end

local function none(fs, rule)
  local l = with_rule(fs, rule)
  lu.assertEquals(#l, 0, ("unexpected '%s' finding: %s"):format(rule, l[1] and l[1].message or ""))
end

-- No finding of severity warn or error.
local function clean(fs)
  for _, f in ipairs(fs) do
    lu.assertEquals(f.severity, "info", ("unexpected %s: %s"):format(f.severity, f.message))
  end
end

local function nothing(fs)
  lu.assertEquals(#fs, 0, fs[1] and ("unexpected finding: " .. fs[1].message) or nil)
end

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  os.execute("mkdir -p '" .. d .. "'")
  return d
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

-- =============================================================================================

H.NO_FILES, H.audit, H.with_rule, H.one, H.none, H.clean, H.nothing, H.tmpdir, H.write =
  NO_FILES, audit, with_rule, one, none, clean, nothing, tmpdir, write
return H
