// What the stdlib may learn about files for a recipe (the env audit's NCCL conf files and *_FILE
// variables, topology's sysfs root). Issue 30, class 4: a sandboxed recipe learned whether any
// path existed (cs.env.audit{NCCL_TOPO_FILE=...} said "does not exist"), and a FIFO it named
// blocked the rank in open(). Now:
//   - every file is read through file_read.hpp (non-blocking, regular files only, bounded);
//   - a file's text is read only for NCCL's own conf files and the files the user named
//     (allow_file, from the recipe's options: env_audit --conf FILE);
//   - whether a path exists is answered only for paths the run was given: its command line, the
//     recipe's options and the values of its environment (config [env] included); any other path
//     is "not checked", whatever is there (missing, unreadable, forbidden). --trusted lifts both.
//
//   read_conf_file(path [, max_bytes]) -> text | nil, why
//   allow_file(path)                   the runner: a file the user named
//   file_allowed(path) -> bool         one of those
//   path_given(path) -> bool           trusted, or a path the run was given
//   probe_file(path) -> true | false, why | nil, why   a regular file this process can read?
#include <cstring>
#include <lua.hpp>
#include <set>
#include <string>

#include "bindings.hpp"
#include "file_read.hpp"
#include "lua_support.hpp"
#include "session.hpp"

extern char** environ;

namespace cs::lua {

namespace {

Session* session(lua_State* L) { return static_cast<Session*>(lua_touserdata(L, lua_upvalueindex(1))); }

std::set<std::string>& user_files() {
  static std::set<std::string> files;
  return files;
}

bool in_environment(const std::string& path) {
  for (char** p = environ; p && *p; ++p) {
    const char* eq = std::strchr(*p, '=');
    if (eq && path == eq + 1) return true;
  }
  return false;
}

bool on_command_line(const Session& s, const std::string& path) {
  for (const std::string& a : s.argv) {
    if (a == path) return true;
    const size_t eq = a.find('=');
    if (eq != std::string::npos && a.compare(eq + 1, std::string::npos, path) == 0) return true;  // --x=P, k=P
  }
  return false;
}

// read_conf_file(path [, max_bytes]): regular files only, at most max_bytes (default 1 MiB).
int n_read_conf_file(lua_State* L) {
  const std::string path = check_string(L, 1);
  const lua_Number max_n = luaL_optnumber(L, 2, 1 << 20);
  const size_t max = max_n >= 1 && max_n <= (1 << 30) ? static_cast<size_t>(max_n) : (1u << 20);
  const FileRead r = read_regular_file(path, max);
  if (!r.ok()) {
    lua_pushnil(L);
    lua_pushstring(L, r.why.c_str());
    return 2;
  }
  lua_pushlstring(L, r.text.data(), r.text.size());
  return 1;
}

int n_allow_file(lua_State* L) {
  user_files().insert(check_string(L, 1));
  return 0;
}
int n_file_allowed(lua_State* L) {
  lua_pushboolean(L, user_files().count(check_string(L, 1)) > 0);
  return 1;
}
int n_path_given(lua_State* L) {
  lua_pushboolean(L, path_given(session(L), check_string(L, 1)));
  return 1;
}

int n_probe_file(lua_State* L) {
  const std::string path = check_string(L, 1);
  if (!path_given(session(L), path)) {
    lua_pushnil(L);
    lua_pushstring(L, kNotChecked);
    return 2;
  }
  const FileRead r = probe_regular_file(path);
  lua_pushboolean(L, r.ok());
  if (r.ok()) return 1;
  lua_pushstring(L, r.why.c_str());
  return 2;
}

}  // namespace

const char* const kNotChecked =
    "not checked: a sandboxed recipe learns about a path only when the run was given it (its command line, "
    "its environment, the recipe's options); --trusted lifts it";

bool path_given(const Session* s, const std::string& path) {
  if (s && s->trusted) return true;
  if (path.empty()) return false;
  return user_files().count(path) > 0 || in_environment(path) || (s && on_command_line(*s, path));
}

void register_files(lua_State* L, Session* s) {
  static const luaL_Reg fns[] = {{"read_conf_file", entry<n_read_conf_file>}, {"allow_file", entry<n_allow_file>},
                                 {"file_allowed", entry<n_file_allowed>},     {"path_given", entry<n_path_given>},
                                 {"probe_file", entry<n_probe_file>},         {nullptr, nullptr}};
  for (const luaL_Reg* f = fns; f->name; ++f) {
    lua_pushlightuserdata(L, s);
    lua_pushcclosure(L, f->func, 1);
    lua_setfield(L, -2, f->name);
  }
}

}  // namespace cs::lua
