-- LuaUnit tests of stdlib/cs/options.lua: declarations, conversions, command-line and config
-- resolution, error messages, help text.
-- Run: commscript --backend self --trusted tests/lua/test_options.lua
local cs = require "commscript"
local lu = require "luaunit"
local options = require "cs.options"

local recipe = cs.recipe {
  name = "test_options",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.options",
}

-- Calls f and returns the error it raised (fails when it raised none).
local function raises(f, ...)
  local ok, err = pcall(f, ...)
  lu.assertFalse(ok, "expected an error, got none")
  return err
end

-- A stdlib input error: a table {code = 1, message = ...}; returns the message.
local function input_error(f, ...)
  local err = raises(f, ...)
  lu.assertEquals(type(err), "table", "expected an error object, got: " .. tostring(err))
  lu.assertEquals(err.code, cs.exit.bad_input)
  lu.assertEquals(type(err.message), "string")
  return err.message
end

local function decls()
  return {
    min = options.normalise("min", { default = "8", help = "smallest size", type = "size" }),
    max = options.normalise("max", { default = "1M", help = "largest size", type = "size" }),
    iters = options.normalise("iters", { 20, "timed iterations", min = 1, max = 1000 }),
    factor = options.normalise("factor", { 2, "step", type = "number", min = 1.0001 }),
    check = options.normalise("check", { true, "check results" }),
    in_place = options.normalise("in_place", { false, "in-place variant" }),
    dtype = options.normalise("dtype", { default = "float32", help = "element type", choices = cs.dtypes }),
    ops = options.normalise("ops", { default = "allreduce", help = "collectives", type = "list",
                                     choices = { "allreduce", "allgather", "broadcast" } }),
    label = options.normalise("label", { "run", "a label" }),
  }
end

local function resolve(argv, config)
  return options.resolve(decls(), config or {}, argv, "rx")
end

-- ---------------------------------------------------------------------------------------------
TestNormalise = {}

function TestNormalise:test_types_from_defaults()
  lu.assertEquals(options.normalise("a", { 64, "h" }).type, "int")
  lu.assertEquals(options.normalise("a", { 1.5, "h" }).type, "number")
  lu.assertEquals(options.normalise("a", { true, "h" }).type, "bool")
  lu.assertEquals(options.normalise("a", { "x", "h" }).type, "string")
  lu.assertEquals(options.normalise("a", { { "x", "y" }, "h" }).type, "list")
end

function TestNormalise:test_positional_and_keyed_forms()
  local a = options.normalise("a", { 3, "three" })
  lu.assertEquals(a.default, 3)
  lu.assertEquals(a.help, "three")
  lu.assertEquals(a.name, "a")
  local b = options.normalise("b", { default = 4, help = "four" })
  lu.assertEquals(b.default, 4)
  lu.assertEquals(b.help, "four")
end

function TestNormalise:test_false_default_positional()
  local d = options.normalise("flag", { false, "off by default" })
  lu.assertEquals(d.type, "bool")
  lu.assertIsFalse(d.default)
end

-- { default = false } must be a valid declaration, like { false, "help" }.
function TestNormalise:test_false_default_keyed()
  local ok, d = pcall(options.normalise, "flag", { default = false, help = "off by default" })
  lu.assertTrue(ok, "{ default = false } was refused: " .. tostring(type(d) == "table" and d.message or d))
  lu.assertEquals(d.type, "bool")
  lu.assertIsFalse(d.default)
end

function TestNormalise:test_size_default_is_converted()
  lu.assertEquals(options.normalise("m", { default = "64K", type = "size" }).default, 65536)
  lu.assertEquals(options.normalise("m", { default = "1M", type = "size" }).default, 1048576)
  lu.assertEquals(options.normalise("m", { default = 100, type = "size" }).default, 100)
end

function TestNormalise:test_no_default()
  lu.assertStrContains(input_error(options.normalise, "x", { help = "h" }), "option 'x': no default")
end

function TestNormalise:test_bad_name()
  lu.assertStrContains(input_error(options.normalise, "1x", { 1, "h" }), "not an identifier")
  lu.assertStrContains(input_error(options.normalise, "a-b", { 1, "h" }), "not an identifier")
end

function TestNormalise:test_declaration_not_a_table()
  lu.assertStrContains(input_error(options.normalise, "x", 5), "option 'x': declaration must be a table")
end

function TestNormalise:test_unknown_type()
  lu.assertStrContains(input_error(options.normalise, "x", { 1, "h", type = "float" }), "unknown type 'float'")
end

function TestNormalise:test_default_outside_choices()
  local m = input_error(options.normalise, "n", { default = "x", choices = { "a", "b" } })
  lu.assertEquals(m, "option --n: 'x' is not one of a, b (from default)")
end

function TestNormalise:test_default_below_min()
  lu.assertStrContains(input_error(options.normalise, "n", { 0, "h", min = 1 }), "below the minimum 1")
end

-- ---------------------------------------------------------------------------------------------
TestConvert = {}

local function conv(spec, v)
  return options.convert(options.normalise("o", spec), v)
end

function TestConvert:test_sizes()
  local s = { default = "8", type = "size" }
  lu.assertEquals(conv(s, "64K"), 65536)
  lu.assertEquals(conv(s, "64KB"), 65536)
  lu.assertEquals(conv(s, "64KiB"), 65536)
  lu.assertEquals(conv(s, "1M"), 1048576)
  lu.assertEquals(conv(s, "2G"), 2 * 1024 ^ 3)
  lu.assertEquals(conv(s, "100"), 100)
  lu.assertEquals(conv(s, 4096), 4096)
  lu.assertStrContains(input_error(conv, s, "64Q"), "'64Q' is not a size")
  lu.assertStrContains(input_error(conv, s, "-1"), "'-1' is not a size")
end

function TestConvert:test_int_and_number()
  lu.assertEquals(conv({ 1, "h" }, "42"), 42)
  lu.assertEquals(conv({ 1.5, "h" }, "2.25"), 2.25)
  lu.assertEquals(input_error(conv, { 1, "h" }, "2.5"), "option --o: '2.5' is not an integer")
  lu.assertEquals(input_error(conv, { 1, "h" }, "abc"), "option --o: 'abc' is not a number")
end

function TestConvert:test_bools()
  for _, v in ipairs { "true", "1", "yes", "on", true } do lu.assertIsTrue(conv({ false, "h" }, v), tostring(v)) end
  for _, v in ipairs { "false", "0", "no", "off", false } do lu.assertIsFalse(conv({ true, "h" }, v), tostring(v)) end
  lu.assertStrContains(input_error(conv, { true, "h" }, "maybe"), "'maybe' is not a boolean")
end

function TestConvert:test_lists()
  local spec = { default = "a", type = "list", choices = { "a", "b", "c" } }
  lu.assertEquals(conv(spec, "a,b"), { "a", "b" })
  lu.assertEquals(conv(spec, " a , c ,"), { "a", "c" })
  lu.assertEquals(conv(spec, { "b", "c" }), { "b", "c" })
  lu.assertEquals(input_error(conv, spec, "a,z"), "option --o: 'z' is not one of a, b, c")
end

-- Found by fuzz_options: a config value of another TOML type reached parse_size ("bad argument #1
-- to 'parse_size'"), and a nested table became the list item "table: 0x...".
function TestConvert:test_config_values_of_other_types()
  local s = { default = "8", type = "size" }
  lu.assertEquals(input_error(conv, s, true), "option --o: boolean is not a size (like 8, 64K, 1M, 2G)")
  lu.assertEquals(input_error(conv, s, { 1, 2 }), "option --o: table is not a size (like 8, 64K, 1M, 2G)")
  local l = { default = { "a" }, type = "list" }
  lu.assertEquals(input_error(conv, l, { { x = 1 } }), "option --o: a list of words is expected, got a nested table")
  lu.assertEquals(conv(l, { "b", 3 }), { "b", "3" })
end

function TestConvert:test_string_refuses_list()
  lu.assertStrContains(input_error(conv, { "x", "h" }, { "a" }), "a string is expected")
end

function TestConvert:test_min_max()
  local spec = { 5, "h", min = 1, max = 10 }
  lu.assertEquals(conv(spec, "10"), 10)
  lu.assertEquals(input_error(conv, spec, "11"), "option --o: 11 is above the maximum 10")
  lu.assertEquals(input_error(conv, spec, "0"), "option --o: 0 is below the minimum 1")
end

-- ---------------------------------------------------------------------------------------------
TestResolve = {}

function TestResolve:test_defaults()
  local o = resolve {}
  lu.assertEquals(o.min, 8)
  lu.assertEquals(o.max, 1048576)
  lu.assertEquals(o.iters, 20)
  lu.assertEquals(o.factor, 2)
  lu.assertIsTrue(o.check)
  lu.assertIsFalse(o.in_place)
  lu.assertEquals(o.dtype, "float32")
  lu.assertEquals(o.ops, { "allreduce" })
  lu.assertEquals(o.label, "run")
end

function TestResolve:test_size_conversion_from_argv()
  lu.assertEquals(resolve({ "--max", "64K" }).max, 65536)
  lu.assertEquals(resolve({ "--max=64K" }).max, 65536)
  lu.assertEquals(resolve({ "--min", "1K", "--max", "4M" }).min, 1024)
  lu.assertEquals(resolve({ "--min", "1K", "--max", "4M" }).max, 4194304)
end

function TestResolve:test_numbers_from_argv()
  local o = resolve { "--iters", "7", "--factor=1.5" }
  lu.assertEquals(o.iters, 7)
  lu.assertEquals(o.factor, 1.5)
end

function TestResolve:test_bool_flags()
  lu.assertIsFalse(resolve({ "--no-check" }).check)
  lu.assertIsTrue(resolve({ "--check" }).check)
  lu.assertIsFalse(resolve({ "--check=false" }).check)
  lu.assertIsFalse(resolve({ "--check=no" }).check)
  lu.assertIsTrue(resolve({ "--in-place" }).in_place)
  lu.assertIsTrue(resolve({ "--in_place" }).in_place)
  lu.assertIsTrue(resolve({ "--no-check", "--check" }).check, "the last flag wins")
end

function TestResolve:test_no_prefix_only_for_bools()
  lu.assertStrContains(input_error(resolve, { "--no-iters" }), "unknown option '--no-iters'")
  lu.assertStrContains(input_error(resolve, { "--no-check=1" }), "unknown option '--no-check'")
end

function TestResolve:test_unknown_option_names_it_and_lists_known()
  local m = input_error(resolve, { "--bogus", "1" })
  lu.assertEquals(m, "unknown option '--bogus' for recipe rx (known: --check, --dtype, --factor, --in-place, "
    .. "--iters, --label, --max, --min, --ops)")
end

function TestResolve:test_choices()
  lu.assertEquals(resolve({ "--dtype", "int8" }).dtype, "int8")
  lu.assertStrContains(input_error(resolve, { "--dtype", "float8" }), "option --dtype: 'float8' is not one of int8,")
end

function TestResolve:test_list_choices()
  lu.assertEquals(resolve({ "--ops", "allgather,broadcast" }).ops, { "allgather", "broadcast" })
  lu.assertEquals(input_error(resolve, { "--ops", "allreduce,alltoall" }),
    "option --ops: 'alltoall' is not one of allreduce, allgather, broadcast")
end

function TestResolve:test_bad_values_name_the_option()
  lu.assertEquals(input_error(resolve, { "--iters", "x" }), "option --iters: 'x' is not a number")
  lu.assertEquals(input_error(resolve, { "--iters", "0" }), "option --iters: 0 is below the minimum 1")
  lu.assertEquals(input_error(resolve, { "--max", "lots" }),
    "option --max: 'lots' is not a size (like 8, 64K, 1M, 2G)")
  lu.assertEquals(input_error(resolve, { "--in-place=maybe" }), "option --in-place: 'maybe' is not a boolean (true/false)")
end

function TestResolve:test_missing_value()
  lu.assertEquals(input_error(resolve, { "--iters" }), "option --iters needs a value")
end

function TestResolve:test_positional_argument_refused()
  lu.assertStrContains(input_error(resolve, { "extra" }), "unexpected argument 'extra'")
end

function TestResolve:test_config_then_command_line()
  lu.assertEquals(resolve({}, { iters = 7 }).iters, 7)
  lu.assertEquals(resolve({ "--iters", "9" }, { iters = 7 }).iters, 9)
  lu.assertEquals(resolve({}, { max = "2M" }).max, 2097152)
  lu.assertIsTrue(resolve({}, { ["in-place"] = true }).in_place)
  lu.assertEquals(resolve({}, { ops = { "broadcast" } }).ops, { "broadcast" })
end

function TestResolve:test_config_errors_say_config()
  lu.assertEquals(input_error(resolve, {}, { iters = "x" }), "option --iters: 'x' is not a number (from config)")
  lu.assertStrContains(input_error(resolve, {}, { bogus = 1 }), "unknown option 'bogus (in [options])' for recipe rx")
end

-- Issue 13: numbers that tonumber accepts but no option can mean; [options] not a table.
function TestResolve:test_non_finite_numbers_refused()
  for _, v in ipairs({ "nan", "inf", "-inf", "1e400", "-nan" }) do
    lu.assertStrContains(input_error(resolve, { "--factor", v }), "is not a finite number")
    lu.assertStrContains(input_error(resolve, { "--iters", v }), "is not a finite number")
  end
  lu.assertStrContains(input_error(resolve, {}, { factor = 0 / 0 }), "is not a finite number (from config)")
  lu.assertStrContains(input_error(resolve, { "--iters=1e300" }), "out of range")
  lu.assertStrContains(input_error(resolve, {}, { iters = true }), "is not a number (from config)")
end

function TestResolve:test_config_options_must_be_a_table()
  lu.assertStrContains(input_error(resolve, {}, 5), "[options] in the config must be a table")
  lu.assertStrContains(input_error(resolve, {}, "x"), "[options] in the config must be a table")
end

function TestResolve:test_did_you_mean()
  lu.assertStrContains(input_error(resolve, { "--iter", "3" }), "did you mean --iters?")
  lu.assertStrContains(input_error(resolve, { "--in-plcae" }), "did you mean --in-place?")
  lu.assertStrContains(input_error(resolve, {}, { itres = 3 }), "did you mean --iters?")
  lu.assertNotStrContains(input_error(resolve, { "--zzzzzz" }), "did you mean")
end

function TestResolve:test_bool_flag_followed_by_a_value_says_how_to_write_it()
  local msg = input_error(resolve, { "--check", "false" })
  lu.assertStrContains(msg, "option --check is a flag and takes no separate value: write --check or --no-check")
  lu.assertStrContains(msg, "--check=false")
  lu.assertEquals(resolve({ "--check=false" }).check, false)
end

function TestResolve:test_value_looking_like_an_option_is_taken_as_the_value()
  lu.assertEquals(resolve({ "--label", "--x" }).label, "--x")
end

-- ---------------------------------------------------------------------------------------------
TestHelp = {}

function TestHelp:test_help_lists_every_option_with_its_default()
  local text = options.help { name = "rx", version = "1.2.3", summary = "a recipe", options = decls() }
  local lines = {}
  for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
  lu.assertEquals(lines[1], "rx 1.2.3 - a recipe")
  lu.assertEquals(lines[2], "options:")
  lu.assertEquals(#lines, 2 + 9)
  lu.assertStrContains(text, "--max <size>")
  lu.assertStrContains(text, "(default: 1M)")
  lu.assertStrContains(text, "--in-place ")
  lu.assertNotStrContains(text, "--in-place <")
  lu.assertStrContains(text, "{allreduce,allgather,broadcast} (default: allreduce)")
  lu.assertStrContains(text, "--iters <int>")
  -- sorted by name
  lu.assertTrue(text:find("--check", 1, true) < text:find("--dtype", 1, true))
  lu.assertTrue(text:find("--min", 1, true) < text:find("--ops", 1, true))
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestNormalise", TestNormalise },
    { "TestConvert", TestConvert },
    { "TestResolve", TestResolve },
    { "TestHelp", TestHelp },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
