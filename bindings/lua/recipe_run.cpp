#include "recipe_run.hpp"

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "bindings.hpp"
#include "embedded.hpp"
#include "file_read.hpp"
#include "lua_support.hpp"
#include "lua_vm.hpp"
#include "versions.hpp"

namespace cs {

namespace {

RecipeFailure to_failure(const LuaFailure& f) { return RecipeFailure{f.code, f.message, f.traceback}; }

// One of commscript's own recipes: bundled and, byte for byte, the file embedded in the binary. A
// replayed report's `bundled` is only the report's word, and its source the report's text.
bool own_recipe(const RecipeSource& src) {
  if (!src.bundled) return false;
  const embedded::File* f = embedded::find(src.name);
  return f && std::string_view(f->data, f->size) == src.text;
}

// The document cs.html renders: the report, less the per-pair results when a matrix section
// holds the pattern (half a million tables at 1024 ranks that the page does not draw).
void push_for_html(lua_State* L, const nlohmann::json& doc) {
  const auto results = doc.is_object() ? doc.find("results") : doc.end();
  if (!doc.is_object() || !doc.contains("matrix") || results == doc.end() || !results->is_array()) {
    lua::push_json(L, doc);
    return;
  }
  lua_createtable(L, 0, static_cast<int>(doc.size()));
  for (const auto& [key, value] : doc.items()) {
    if (key == "results") {
      lua_createtable(L, 0, 0);
      int i = 1;
      for (const auto& r : value) {
        const auto kind = r.is_object() ? r.find("kind") : r.end();
        if (kind != r.end() && kind->is_string() && kind->get_ref<const std::string&>() == "pair") continue;
        lua::push_json(L, r);
        lua_rawseti(L, -2, i++);
      }
    } else {
      lua::push_json(L, value);
    }
    lua_setfield(L, -2, key.c_str());
  }
}

// The page cs.html renders from `doc` in a fresh Lua state for `session`, or "" and *why (a
// render error; cs.html absent from a COMMSCRIPT_STDLIB that lacks it is no error).
std::string render_page(Session* session, const nlohmann::json& doc, std::string* why) {
  LuaVm vm(session);
  lua_State* L = vm.state();
  LuaFailure f;
  std::string page;
  if (vm.require("cs.html", &f)) {
    lua_getfield(L, -1, "render");
    push_for_html(L, doc);
    if (lua_isfunction(L, -2) && vm.call(1, 1, &f) && lua_isstring(L, -1)) {
      size_t n = 0;
      const char* html = lua_tolstring(L, -1, &n);
      page.assign(html, n);
    } else if (f.message.empty()) {
      f.message = "cs.html.render returned no page";
    }
  }
  if (page.empty() && why && f.message.find("no module 'cs.html'") == std::string::npos) *why = f.message;
  return page;
}

// report.html with nothing of a recipe's state, nor --trusted.
class SandboxedPages final : public PageRenderer {
 public:
  std::string render_html(const nlohmann::json& doc, std::string* why) const override {
    Session blank;
    return render_page(&blank, doc, why);
  }
};

// A recipe in a Lua state of its own: cs.runner's load, options, help and run. The runner, the
// recipe table and its resolved options are held in the registry between the phases.
class LuaRecipeHost final : public RecipeHost {
 public:
  explicit LuaRecipeHost(Session* s) : session_(s), vm_(s) {}

  bool declare(const RecipeSource& src, bool trusted, RecipeFailure* out) override {
    lua_State* L = vm_.state();
    const int top = lua_gettop(L);
    LuaFailure f;
    bool ok = vm_.require("cs.runner", &f);  // [runner]
    if (ok) {
      vm_.set_recipe_chunk("@" + src.name);
      lua_getfield(L, -1, "load");
      ok = vm_.load(src.text, src.name, &f);
    }
    if (ok) {
      lua_pushboolean(L, trusted);
      lua_pushboolean(L, own_recipe(src));  // commscript's own recipe (its chaos may exit 99)
      ok = vm_.call(3, 1, &f);              // [runner, recipe]
      // Errors while loading are bad input (exit 1), unless an engine limit ended the code.
      if (!ok && f.code == ExitCode::runtime && !f.limit) f.code = ExitCode::bad_input;
    }
    if (ok) {
      lua_getfield(L, -2, "check_requires");
      lua_pushvalue(L, -2);
      ok = vm_.call(1, 0, &f);
    }
    if (ok) {
      recipe_ = luaL_ref(L, LUA_REGISTRYINDEX);
      runner_ = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    lua_settop(L, top);
    if (!ok) *out = to_failure(f);
    return ok;
  }

  std::string name() const override { return recipe_field("name"); }
  std::string version() const override { return recipe_field("version"); }
  std::string summary() const { return recipe_field("summary"); }

  bool resolve_options(const nlohmann::json& configured, const std::vector<std::string>& args,
                       RecipeFailure* out) override {
    lua_State* L = vm_.state();
    const int top = lua_gettop(L);
    push_runner_function("options");
    lua_rawgeti(L, LUA_REGISTRYINDEX, recipe_);
    lua::push_json(L, configured);
    lua_createtable(L, static_cast<int>(args.size()), 0);
    for (size_t i = 0; i < args.size(); ++i) {
      lua_pushstring(L, args[i].c_str());
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    LuaFailure f;
    const bool ok = vm_.call(3, 1, &f);
    if (ok) opt_ = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, top);
    if (!ok && f.code == ExitCode::runtime) f.code = ExitCode::bad_input;
    if (!ok) *out = to_failure(f);
    return ok;
  }

  nlohmann::json options() const override {
    lua_State* L = vm_.state();
    lua_rawgeti(L, LUA_REGISTRYINDEX, opt_);
    nlohmann::json j = lua::to_json(L, -1);
    lua_pop(L, 1);
    return j;
  }

  // runner.help(recipe): the recipe's options, for --help.
  bool help(std::string* text, RecipeFailure* out) {
    lua_State* L = vm_.state();
    push_runner_function("help");
    lua_rawgeti(L, LUA_REGISTRYINDEX, recipe_);
    LuaFailure f;
    if (!vm_.call(1, 1, &f)) {
      *out = to_failure(f);
      return false;
    }
    const char* t = lua_tostring(L, -1);
    *text = t ? t : "";
    lua_pop(L, 1);
    return true;
  }

  // runner.run(recipe, comm, opt, info) -> exit code.
  bool run(Session& s, int* code, RecipeFailure* out) override {
    lua_State* L = vm_.state();
    const int top = lua_gettop(L);
    push_runner_function("run");
    lua_rawgeti(L, LUA_REGISTRYINDEX, recipe_);
    lua::push_communicator(L, s.world);
    lua_rawgeti(L, LUA_REGISTRYINDEX, opt_);
    push_run_info(L, s);
    if (!s.embedded) vm_.sample_positions(true);  // "busy in Lua at file:line" (a host may profile itself)
    LuaFailure f;
    const bool ok = vm_.call(4, 1, &f);
    vm_.sample_positions(false);
    if (ok) *code = static_cast<int>(lua_tointeger(L, -1));
    lua_settop(L, top);
    if (!ok) *out = to_failure(f);
    return ok;
  }

  std::string render_html(const nlohmann::json& doc, std::string* why) const override {
    return render_page(session_, doc, why);
  }

  nlohmann::json versions() const override { return nlohmann::json::parse(versions_json()); }

 private:
  std::string recipe_field(const char* k) const {
    lua_State* L = vm_.state();
    lua_rawgeti(L, LUA_REGISTRYINDEX, recipe_);
    if (!lua_istable(L, -1)) {  // not declared
      lua_pop(L, 1);
      return "";
    }
    lua_getfield(L, -1, k);
    std::string v = lua_isstring(L, -1) ? lua_tostring(L, -1) : "";
    lua_pop(L, 2);
    return v;
  }

  void push_runner_function(const char* k) {
    lua_State* L = vm_.state();
    lua_rawgeti(L, LUA_REGISTRYINDEX, runner_);
    lua_getfield(L, -1, k);
    lua_remove(L, -2);
  }

  // The run's info table: its seed, --fail-below and --baseline.
  static void push_run_info(lua_State* L, const Session& s) {
    lua_createtable(L, 0, 3);
    lua_pushnumber(L, static_cast<double>(s.seed));
    lua_setfield(L, -2, "seed");
    if (s.fail_below >= 0) {
      lua_pushnumber(L, s.fail_below);
      lua_setfield(L, -2, "fail_below");
    }
    if (!s.baseline.empty()) {
      lua::push_json(L, nlohmann::json::parse(s.baseline));
      lua_setfield(L, -2, "baseline");
    }
  }

  Session* session_;
  LuaVm vm_;
  int runner_ = LUA_NOREF, recipe_ = LUA_NOREF, opt_ = LUA_NOREF;
};

}  // namespace

const PageRenderer& sandboxed_pages() {
  static const SandboxedPages pages;
  return pages;
}

std::optional<RecipeSource> bundled_recipe(const std::string& path) {
  if (const embedded::File* f = embedded::find(path)) return RecipeSource{path, std::string(f->data, f->size), true};
  return std::nullopt;
}

// A recipe file of more than this is refused (bundled recipes are 100 KiB at most).
constexpr size_t kMaxRecipeBytes = size_t{64} << 20;

std::optional<RecipeSource> find_recipe(const std::string& arg, std::string* why) {
  namespace fs = std::filesystem;
  // file_read.hpp: a FIFO or a device put there is refused, not read (nor waited on).
  FileRead r = read_regular_file(arg, kMaxRecipeBytes);
  if (r.ok()) return RecipeSource{arg, std::move(r.text), false};
  const bool absent = r.failure == ReadFailure::open && (r.error == ENOENT || r.error == ENOTDIR);
  if (!absent && r.failure != ReadFailure::not_regular) {
    *why = arg + ": cannot read recipe file (" + r.why + ")";
    return std::nullopt;
  }
  std::string base = fs::path(arg).filename().string();
  if (base.size() < 4 || base.substr(base.size() - 4) != ".lua") base += ".lua";
  const bool plain_name = arg.find('/') == std::string::npos;
  if (plain_name || arg == "recipes/" + base)
    if (auto b = bundled_recipe("recipes/" + base)) return b;
  if (!absent)
    *why = arg + ": not a regular file";
  else
    *why = arg + ": recipe file not found (try --list for the bundled recipes)";
  return std::nullopt;
}

int list_recipes() {
  Session s;
  std::printf("%-16s %-8s %s\n", "recipe", "version", "summary");
  for (const embedded::File* f = embedded::kFiles; f->path; ++f) {
    std::string p = f->path;
    if (p.rfind("recipes/", 0) != 0) continue;
    LuaRecipeHost host(&s);
    RecipeFailure fail;
    if (!host.declare(RecipeSource{p, std::string(f->data, f->size), true}, false, &fail)) {
      std::printf("%-16s %-8s (does not load: %s)\n", p.c_str(), "?", fail.message.c_str());
      continue;
    }
    std::printf("%-16s %-8s %s\n", host.name().c_str(), host.version().c_str(), host.summary().c_str());
  }
  return 0;
}

int answer_without_ranks(Session& s, const RecipeSource& src, const std::vector<std::string>& rargs, bool help,
                         bool print) {
  LuaRecipeHost host(&s);
  RecipeFailure f;
  auto fail = [&] {
    if (print) std::fprintf(stderr, "commscript: %s\n", f.message.c_str());
    return static_cast<int>(f.code);
  };
  if (!host.declare(src, s.trusted, &f)) return fail();
  if (help) {
    std::string text;
    if (!host.help(&text, &f)) return fail();
    if (print) std::printf("%s\n", text.c_str());
    return 0;
  }
  if (!host.resolve_options(s.config.section("options"), rargs, &f)) return fail();
  if (print)
    std::printf("ok: %s %s (%s) loads, and its options are valid\n", host.name().c_str(), host.version().c_str(),
                src.name.c_str());
  return 0;
}

std::unique_ptr<RecipeHost> make_recipe_host(Session* s) { return std::make_unique<LuaRecipeHost>(s); }

int run_recipe(Session& s, const RecipeSource& src, const std::vector<std::string>& rargs, const RunInfo& info) {
  LuaRecipeHost host(&s);
  return run::run_recipe(s, host, src, rargs, info);
}

}  // namespace cs
