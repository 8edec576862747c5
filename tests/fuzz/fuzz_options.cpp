// Option parsing as a user meets it: the command line through CLI11 (cs::cli_parse, phase 1 of
// the commscript command), then --set into the config and the recipe's options through
// cs.runner/cs.options in a Lua state made as the engine makes one (cs::LuaVm: the sandbox, the
// embedded stdlib, the memory limit and the C-stack guard).
// Input: the words after `commscript`, one per line. The recipe is the bundled one the words
// name (latency, bw_sweep, ...), else a recipe declaring an option of every type.
// A bug is a crash, a hang (-timeout), an exception other than cs::Error, or a Lua error from the
// option code that is not a clean message: cs.options refuses bad input with {code = 1,
// message = ...}; anything else ("attempt to index a nil value", "bad argument #1 to 'pairs'")
// is stdlib code failing on input it did not expect, and the user would see an internal error.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "error.hpp"
#include "lua_coverage.hpp"
#include "lua_support.hpp"
#include "lua_vm.hpp"
#include "recipe_run.hpp"
#include "session.hpp"

namespace {

const char kRecipe[] = R"(local cs = require "commscript"
local recipe = cs.recipe {
  name = "fuzz_options",
  version = "1.0.0",
  summary = "an option of every type",
  options = {
    iters = { 100, "an int", min = 1, max = 1e6 },
    factor = { 1.5, "a number", type = "number", min = 1.0001 },
    check_all = { false, "a bool" },
    verbose = { true, "a bool that is on" },
    label = { "x", "a string" },
    mode = { default = "zero", help = "a string with choices", choices = { "zero", "all" } },
    ops = { default = { "allreduce" }, help = "a list", choices = { "allreduce", "broadcast", "alltoall" } },
    names = { {}, "a list without choices" },
    size = { default = "4M", help = "a size", type = "size" },
    limit = { default = 8, help = "an int by type", type = "int", min = 0 },
  },
}
function recipe.run(ctx) end
return recipe
)";

[[noreturn]] void bug(const std::string& what) {
  std::fprintf(stderr, "fuzz_options: BUG: %s\n", what.c_str());
  std::abort();
}

std::vector<std::string> words_of(const uint8_t* data, size_t size) {
  std::vector<std::string> w;
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      w.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  if (!cur.empty()) w.push_back(cur);
  return w;
}

cs::Session* g_session = nullptr;
cs::LuaVm* g_vm = nullptr;
int g_runner = LUA_NOREF;

// Runs the option code of `src` on `rargs` and `config` as resolve_options does, in the
// one state every input shares (one per input ran a few inputs a second).
void resolve(const cs::Config& config, const cs::RecipeSource& src, const std::vector<std::string>& rargs) {
  cs::LuaVm& vm = *g_vm;
  lua_State* L = vm.state();
  cs::LuaFailure f;
  lua_settop(L, 0);
  lua_rawgeti(L, LUA_REGISTRYINDEX, g_runner);
  vm.set_recipe_chunk("@" + src.name);
  lua_getfield(L, -1, "load");
  if (!vm.load(src.text, src.name, &f)) bug("the recipe does not compile: " + f.message);
  lua_pushboolean(L, 0);
  if (!vm.call(2, 1, &f)) bug("the recipe does not load: " + f.message);  // [runner, recipe]
  bool help = false;
  for (const auto& a : rargs) help = help || a == "--help" || a == "-h";
  if (help) {
    lua_getfield(L, -2, "help");
    lua_pushvalue(L, -2);
    if (!vm.call(1, 1, &f)) bug("help: " + f.message);
    lua_pop(L, 1);
  }
  lua_getfield(L, -2, "options");
  lua_pushvalue(L, -2);
  cs::lua::push_json(L, config.section("options"));
  lua_createtable(L, static_cast<int>(rargs.size()), 0);
  for (size_t i = 0; i < rargs.size(); ++i) {
    lua_pushlstring(L, rargs[i].data(), rargs[i].size());
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  if (!vm.call(3, 1, &f) && f.code != cs::ExitCode::bad_input && !f.limit)
    bug("not a clean refusal (exit " + std::to_string(static_cast<int>(f.code)) + "): " + f.message);
  lua_settop(L, 0);
}

}  // namespace

// Only the launcher's rank 0 prints the command line's refusals (cli.cpp prints_early): a rank 1
// keeps thousands of them per second out of the fuzzer's log. The checks are the same.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  g_session = new cs::Session;
  g_vm = new cs::LuaVm(g_session);
  fuzz_lua::install(g_vm->state());
  cs::LuaFailure f;
  if (!g_vm->require("cs.runner", &f)) bug("require cs.runner: " + f.message);
  g_runner = luaL_ref(g_vm->state(), LUA_REGISTRYINDEX);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> words = words_of(data, size);
  if (words.size() > 256) return 0;
  std::vector<char*> argv;
  std::string prog = "commscript";
  argv.push_back(prog.data());
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::vector<std::string> rest, sets;
  try {
    if (cs::cli_parse(static_cast<int>(argv.size() - 1), argv.data(), &rest, &sets) >= 0) return 0;
  } catch (const std::exception& e) {
    bug(std::string("cli_parse threw ") + e.what());
  }
  if (rest.empty()) return 0;  // --replay: fuzz_replay's
  std::optional<cs::RecipeSource> src = cs::bundled_recipe(rest[0]);
  if (!src) src = cs::bundled_recipe("recipes/" + rest[0] + ".lua");
  if (!src) src = cs::RecipeSource{"fuzz_options.lua", kRecipe, false};
  const std::vector<std::string> rargs(rest.begin() + 1, rest.end());
  cs::Config config;
  try {
    for (const auto& kv : sets) config.set(kv);
    config.check();
  } catch (const cs::Error&) {
    return 0;  // refused as the command would refuse it (fuzz_config covers --set)
  }
  try {
    resolve(config, *src, rargs);
  } catch (const cs::Error& e) {
    bug(std::string("an engine error escaped the Lua state: ") + e.what());
  }
  return 0;
}
