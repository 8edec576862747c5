#include "lua_vm.hpp"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "bindings.hpp"
#include "embedded.hpp"
#include "lua_support.hpp"

namespace cs {

namespace embedded {
const File* find(std::string_view path) {
  for (const File* f = kFiles; f->path; ++f)
    if (path == f->path) return f;
  return nullptr;
}
}  // namespace embedded

namespace {

const char* kRecipeChunkKey = "commscript.recipe_chunk";

// package.loaders entry: modules of the stdlib by name ("cs.stats" -> stdlib/cs/stats.lua).
int embedded_loader(lua_State* L) {
  std::string name = luaL_checkstring(L, 1);
  std::string rel = name;
  for (char& c : rel)
    if (c == '.') c = '/';
  rel = "stdlib/" + rel + ".lua";
  if (const char* dir = std::getenv("COMMSCRIPT_STDLIB"); dir && *dir) {
    const std::string path = std::string(dir) + "/" + rel.substr(7);
    std::ifstream in(path);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string src = ss.str();
      if (luaL_loadbuffer(L, src.data(), src.size(), ("@" + path).c_str()) != 0) return lua_error(L);
      return 1;
    }
  }
  const embedded::File* f = embedded::find(rel);
  if (!f) {
    lua_pushfstring(L, "\n\tno module '%s' in commscript's stdlib", name.c_str());
    return 1;
  }
  if (luaL_loadbuffer(L, f->data, f->size, ("@" + rel).c_str()) != 0) return lua_error(L);
  return 1;
}

// Error handler: turns any error value into {code, message, traceback}; when the error did not
// arise in the recipe itself, prefixes the recipe's innermost file:line so the user sees which
// line of their recipe led to it.
int traceback_handler(lua_State* L) {
  const ExitCode code = lua::error_code(L, 1);
  std::string msg = lua::error_message(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, kRecipeChunkKey);
  const std::string chunk = lua_isstring(L, -1) ? lua_tostring(L, -1) : "";
  lua_pop(L, 1);
  if (!chunk.empty()) {
    const std::string file = chunk.substr(1);
    lua_Debug ar;
    for (int level = 1; lua_getstack(L, level, &ar); ++level) {
      lua_getinfo(L, "Sl", &ar);
      if (ar.source && chunk == ar.source && ar.currentline > 0) {
        const std::string where = file + ":" + std::to_string(ar.currentline) + ":";
        if (msg.compare(0, where.size(), where) != 0) msg = where + " " + msg;
        break;
      }
    }
  }
  luaL_traceback(L, L, nullptr, 1);
  const std::string tb = lua_tostring(L, -1);
  lua_pop(L, 1);
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, static_cast<int>(code));
  lua_setfield(L, -2, "code");
  lua_pushstring(L, msg.c_str());
  lua_setfield(L, -2, "message");
  lua_pushstring(L, tb.c_str());
  lua_setfield(L, -2, "traceback");
  return 1;
}

}  // namespace

LuaVm::LuaVm(Session* session) : L_(luaL_newstate()) {
  if (!L_) throw Error(ExitCode::internal, "cannot create a Lua state");
  luaL_openlibs(L_);
  // Our loader goes right after package.preload's, before the file-system searchers.
  lua_getglobal(L_, "table");
  lua_getfield(L_, -1, "insert");
  lua_getglobal(L_, "package");
  lua_getfield(L_, -1, "loaders");
  lua_remove(L_, -2);
  lua_pushinteger(L_, 2);
  lua_pushcfunction(L_, embedded_loader);
  lua_call(L_, 3, 0);
  lua_pop(L_, 1);
  lua::open_native(L_, session);
}

LuaVm::~LuaVm() { lua_close(L_); }

void LuaVm::set_recipe_chunk(const std::string& chunkname) {
  lua_pushstring(L_, chunkname.c_str());
  lua_setfield(L_, LUA_REGISTRYINDEX, kRecipeChunkKey);
}

static void read_failure(lua_State* L, LuaFailure* f) {
  if (f) {
    f->code = lua::error_code(L, -1);
    f->message = lua::error_message(L, -1);
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "traceback");
      if (lua_isstring(L, -1)) f->traceback = lua_tostring(L, -1);
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
}

bool LuaVm::load(const std::string& source, const std::string& name, LuaFailure* f) {
  if (luaL_loadbuffer(L_, source.data(), source.size(), ("@" + name).c_str()) == 0) return true;
  if (f) {
    f->code = ExitCode::bad_input;
    f->message = lua_tostring(L_, -1);
  }
  lua_pop(L_, 1);
  return false;
}

bool LuaVm::call(int nargs, int nresults, LuaFailure* f) {
  const int base = lua_gettop(L_) - nargs;
  lua_pushcfunction(L_, traceback_handler);
  lua_insert(L_, base);
  const int rc = lua_pcall(L_, nargs, nresults, base);
  lua_remove(L_, base);
  if (rc == 0) return true;
  if (rc == LUA_ERRMEM && f) {
    f->code = ExitCode::runtime;
    f->message = "Lua ran out of memory";
    lua_pop(L_, 1);
    return false;
  }
  read_failure(L_, f);
  return false;
}

bool LuaVm::require(const char* module, LuaFailure* f) {
  lua_getglobal(L_, "require");
  lua_pushstring(L_, module);
  return call(1, 1, f);
}

}  // namespace cs
