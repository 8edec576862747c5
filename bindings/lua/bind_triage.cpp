// native.triage_* : what stdlib/cs/triage.lua needs from the engine to read a customer's
// artifacts. Reading is limited to the paths of --paths on commscript's own command line
// (engine/core/triage_input.hpp), so a shared recipe cannot read files the user did not name.
//   triage_read(path) -> bytes            the file, gzip inflated (InputError: exit 1)
//   triage_list(dir) -> {paths}           regular files under a named directory, sorted
//   triage_kind(path) -> "file"|"directory"|nil
//   triage_unpickle(bytes) -> json text    the Flight Recorder pickle subset (pickle_subset.hpp)
//   triage_json_depth(text, stop) -> n     nesting depth of JSON text (checked before decoding)
#include <string>
#include <vector>

#include "bindings.hpp"
#include "lua_support.hpp"
#include "pickle_subset.hpp"
#include "triage_input.hpp"

namespace cs::lua {

namespace {

void check_named(const std::string& path) {
  static const std::vector<std::string> named = triage::command_line_paths();
  if (!triage::path_named(path, named))
    throw InputError(path +
                     ": not named on the command line (triage reads only the files and directories "
                     "given to it, e.g. --paths " +
                     path + ")");
}

int n_triage_read(lua_State* L) {
  const std::string path = check_string(L, 1);
  check_named(path);
  const std::string data = triage::read_artifact(path);
  lua_pushlstring(L, data.data(), data.size());
  return 1;
}

int n_triage_list(lua_State* L) {
  const std::string dir = check_string(L, 1);
  check_named(dir);
  const auto files = triage::list_files(dir);
  lua_createtable(L, static_cast<int>(files.size()), 0);
  int i = 1;
  for (const auto& f : files) {
    lua_pushlstring(L, f.data(), f.size());
    lua_rawseti(L, -2, i++);
  }
  return 1;
}

int n_triage_kind(lua_State* L) {
  const std::string kind = triage::path_kind(check_string(L, 1));
  if (kind.empty())
    lua_pushnil(L);
  else
    lua_pushstring(L, kind.c_str());
  return 1;
}

int n_triage_unpickle(lua_State* L) {
  size_t n = 0;
  const char* s = luaL_checklstring(L, 1, &n);
  const std::string json = pickle_subset_to_json(std::string_view(s, n));
  lua_pushlstring(L, json.data(), json.size());
  return 1;
}

int n_triage_json_depth(lua_State* L) {
  size_t n = 0;
  const char* s = luaL_checklstring(L, 1, &n);
  const auto stop = static_cast<size_t>(luaL_checkinteger(L, 2));
  lua_pushinteger(L, static_cast<lua_Integer>(json_nesting_depth(std::string_view(s, n), stop)));
  return 1;
}

}  // namespace

void register_triage(lua_State* L) {
  static const luaL_Reg fns[] = {{"triage_read", entry<n_triage_read>},
                                 {"triage_list", entry<n_triage_list>},
                                 {"triage_kind", entry<n_triage_kind>},
                                 {"triage_unpickle", entry<n_triage_unpickle>},
                                 {"triage_json_depth", entry<n_triage_json_depth>},
                                 {nullptr, nullptr}};
  for (const luaL_Reg* f = fns; f->name; ++f) {
    lua_pushcfunction(L, f->func);
    lua_setfield(L, -2, f->name);
  }
}

}  // namespace cs::lua
