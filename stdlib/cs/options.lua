-- Recipe options: declared as data, typed by their defaults (or an explicit type), filled from
-- defaults < the config's [options] (and --set) < the command line. Unknown options and bad
-- values are refused naming the option.
local native = require "commscript.native"
local text = require "cs.text"
local M = {}

local TYPES = { int = true, number = true, bool = true, string = true, list = true, size = true }

local function bad(msg) error({ code = native.exit_codes.bad_input, message = msg }, 0) end

-- Normalises one declaration: { default, help, type=, choices=, min=, max= }
function M.normalise(name, spec)
  if type(name) ~= "string" or not name:match("^[%a_][%w_]*$") then
    bad(("option name %s is not an identifier"):format(tostring(name)))
  end
  if type(spec) ~= "table" then
    bad(("option '%s': declaration must be a table { default, help }"):format(name))
  end
  local default = spec.default
  if default == nil then default = spec[1] end  -- (a and b or c) would lose a false default
  local d = {
    name = name,
    default = default,
    help = spec.help or spec[2] or "",
    type = spec.type,
    choices = spec.choices,
    min = spec.min,
    max = spec.max,
  }
  if d.default == nil then bad(("option '%s': no default"):format(name)) end
  if d.choices ~= nil and type(d.choices) ~= "table" then bad(("option '%s': choices must be a list"):format(name)) end
  for _, k in ipairs({ "min", "max" }) do
    local b = d[k]
    if b ~= nil and (type(b) ~= "number" or b ~= b) then bad(("option '%s': %s must be a number"):format(name, k)) end
  end
  if not d.type then
    local t = type(d.default)
    if t == "number" then d.type = (d.default % 1 == 0) and "int" or "number"
    elseif t == "boolean" then d.type = "bool"
    elseif t == "table" then d.type = "list"
    else d.type = "string" end
  end
  if not TYPES[d.type] then
    bad(("option '%s': unknown type '%s' (int, number, bool, string, list, size)"):format(name, tostring(d.type)))
  end
  -- The default itself must be a valid value.
  d.default = M.convert(d, d.default, "default")
  return d
end

local function split_list(s)
  local out = {}
  for item in tostring(s):gmatch("[^,]+") do
    item = item:match("^%s*(.-)%s*$")
    if item ~= "" then out[#out + 1] = item end
  end
  return out
end

local function in_choices(d, v)
  if not d.choices then return true end
  for _, c in ipairs(d.choices) do if c == v then return true end end
  return false
end

-- Converts a value from the command line (string) or the config (typed) to the option's type.
function M.convert(d, v, from)
  local function fail(why)
    bad(("option --%s: %s%s"):format(d.name:gsub("_", "-"), why, from and (" (from " .. from .. ")") or ""))
  end
  local t = d.type
  local out
  if t == "int" or t == "number" then
    local n = (type(v) == "number" or type(v) == "string") and tonumber(v) or nil
    if n == nil then fail(("'%s' is not a number"):format(tostring(v))) end
    -- tonumber accepts "nan", "inf" and "1e400": none is a value an option can mean.
    if n ~= n or n == math.huge or n == -math.huge then fail(("'%s' is not a finite number"):format(tostring(v))) end
    if t == "int" and n % 1 ~= 0 then fail(("'%s' is not an integer"):format(tostring(v))) end
    if t == "int" and math.abs(n) > 2 ^ 53 then fail(("'%s' is out of range (at most 2^53)"):format(tostring(v))) end
    out = n
  elseif t == "size" then
    -- A config value may be any TOML type; parse_size takes text or a number (found by fuzz_options:
    -- `--set options.max=true` was "bad argument #1 to 'parse_size'").
    if type(v) ~= "string" and type(v) ~= "number" then fail(("%s is not a size (like 8, 64K, 1M, 2G)"):format(type(v))) end
    local n = native.parse_size(v)
    if n == nil then fail(("'%s' is not a size (like 8, 64K, 1M, 2G)"):format(tostring(v))) end
    out = n
  elseif t == "bool" then
    if type(v) == "boolean" then out = v
    elseif v == "true" or v == "1" or v == "yes" or v == "on" then out = true
    elseif v == "false" or v == "0" or v == "no" or v == "off" then out = false
    else fail(("'%s' is not a boolean (true/false)"):format(tostring(v))) end
  elseif t == "list" then
    if type(v) == "table" then
      out = {}
      for i, x in ipairs(v) do
        -- (found by fuzz_options: [{x = 1}] became the item "table: 0x...")
        if type(x) == "table" then fail("a list of words is expected, got a nested table") end
        out[i] = tostring(x)
      end
    else
      out = split_list(v)
    end
    for _, x in ipairs(out) do
      if not in_choices(d, x) then
        fail(("'%s' is not one of %s"):format(x, table.concat(d.choices, ", ")))
      end
    end
    return out
  else
    if type(v) == "table" then fail("a string is expected, got a list") end
    out = tostring(v)
  end
  if not in_choices(d, out) then
    fail(("'%s' is not one of %s"):format(tostring(out), table.concat(d.choices, ", ")))
  end
  if d.min and type(out) == "number" and out < d.min then fail(("%s is below the minimum %s"):format(out, d.min)) end
  if d.max and type(out) == "number" and out > d.max then fail(("%s is above the maximum %s"):format(out, d.max)) end
  return out
end

local sorted_names = text.sorted_keys

-- commscript's own options (their one table: bindings/lua/cli_options.hpp): given after the
-- recipe they reach the recipe, which is a common slip.
local CLI = {}
for _, n in ipairs(native.cli_options) do CLI[n:sub(3)] = true end

-- The closest of `names` to `name` when it is close enough to be a slip, else nil.
function M.did_you_mean(name, names)
  local best, best_d
  for _, n in ipairs(names) do
    local d = (#name > 64 or #n > 64) and math.huge or text.distance(name, n)
    if d <= math.max(1, math.floor(#name / 3)) and (not best_d or d < best_d) then best, best_d = n, d end
  end
  return best
end

local function unknown(decls, key, recipe_name)
  local known = {}
  for _, n in ipairs(sorted_names(decls)) do known[#known + 1] = "--" .. n:gsub("_", "-") end
  local hint = ""
  local bare = key:match("^%-%-([%w%-]+)")
  if bare and CLI[bare] then
    hint = "; commscript's own options go before the recipe: commscript " .. key .. " ... RECIPE"
  else
    local plain = (bare or key:match("^[%w_%-]+") or key):gsub("_", "-")
    local guess = M.did_you_mean(plain, (function()
      local l = {}
      for i, k in ipairs(known) do l[i] = k:sub(3) end
      return l
    end)())
    if guess then hint = ("; did you mean --%s?"):format(guess) end
  end
  bad(("unknown option '%s' for recipe %s (known: %s)%s"):format(key, recipe_name,
    #known > 0 and table.concat(known, ", ") or "none", hint))
end

local BOOL_WORDS = { ["true"] = true, ["false"] = true, yes = true, no = true, on = true, off = true,
                     ["1"] = true, ["0"] = true }

-- decls: name -> normalised declaration; config: table from [options]; argv: list of strings.
function M.resolve(decls, config, argv, recipe_name)
  local opt = {}
  for n, d in pairs(decls) do opt[n] = d.default end
  if config ~= nil and type(config) ~= "table" then
    bad(("[options] in the config must be a table of option = value, not a %s"):format(type(config)))
  end
  for k, v in pairs(config or {}) do
    local d = decls[k] or decls[tostring(k):gsub("-", "_")]
    if not d then unknown(decls, tostring(k) .. " (in [options])", recipe_name) end
    opt[d.name] = M.convert(d, v, "config")
  end
  local i = 1
  argv = argv or {}
  while i <= #argv do
    local a = argv[i]
    local key, val = a:match("^%-%-([^=]+)=(.*)$")
    if not key then key = a:match("^%-%-(.+)$") end
    if not key then bad(("unexpected argument '%s' (recipe options look like --name value)"):format(a)) end
    local name = key:gsub("-", "_")
    local d = decls[name]
    if not d and name:match("^no_") and decls[name:sub(4)] and decls[name:sub(4)].type == "bool" and val == nil then
      opt[name:sub(4)] = false
    elseif not d then
      unknown(decls, "--" .. key, recipe_name)
    elseif d.type == "bool" and val == nil then
      -- "--flag false" would leave "false" as a stray argument: say how to write it.
      if argv[i + 1] ~= nil and BOOL_WORDS[tostring(argv[i + 1]):lower()] then
        bad(("option --%s is a flag and takes no separate value: write --%s or --no-%s (or --%s=%s)"):format(key, key,
          key, key, argv[i + 1]))
      end
      opt[name] = true
    else
      if val == nil then
        i = i + 1
        val = argv[i]
        if val == nil then bad(("option --%s needs a value"):format(key)) end
      end
      opt[name] = M.convert(d, val, nil)
    end
    i = i + 1
  end
  return opt
end

local function show(v, t)
  if t == "list" then return table.concat(v, ",") end
  if t == "size" then return native.format_size(v) end
  return tostring(v)
end

-- The text `commscript RECIPE --help` prints.
function M.help(recipe)
  local lines = {}
  lines[#lines + 1] = ("%s %s - %s"):format(recipe.name, recipe.version, recipe.summary or "")
  lines[#lines + 1] = ""
  lines[#lines + 1] = "options:"
  for _, n in ipairs(sorted_names(recipe.options)) do
    local d = recipe.options[n]
    local flag = "--" .. n:gsub("_", "-") .. (d.type == "bool" and "" or (" <" .. d.type .. ">"))
    local extra = d.choices and (" {" .. table.concat(d.choices, ",") .. "}") or ""
    lines[#lines + 1] = ("  %-24s %s%s (default: %s)"):format(flag, d.help, extra, show(d.default, d.type))
  end
  return table.concat(lines, "\n")
end

return M
