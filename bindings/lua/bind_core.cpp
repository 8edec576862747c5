// commscript.native: the engine's plain functions (sizes, bandwidth factors, statistics, clock,
// JSON, report output) and the constructors registered by the other bind_*.cpp files.
#include <cstring>
#include <lua.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "cli_options.hpp"
#include "collective.hpp"
#include "commscript_version.hpp"
#include "digest.hpp"
#include "edit_distance.hpp"
#include "env_policy.hpp"
#include "error.hpp"
#include "host_name.hpp"
#include "job.hpp"
#include "json_text.hpp"
#include "lua_support.hpp"
#include "progress.hpp"
#include "run_inputs.hpp"
#include "semver.hpp"
#include "session.hpp"
#include "size.hpp"
#include "stats.hpp"
#include "tensor.hpp"

namespace cs::lua {

namespace {

Session& session(lua_State* L) { return *static_cast<Session*>(lua_touserdata(L, lua_upvalueindex(1))); }

Collective check_coll(lua_State* L, int idx) {
  const std::string n = check_string(L, idx);
  auto c = parse_collective(n);
  if (!c) luaL_argerror(L, idx, ("unknown operation '" + n + "'").c_str());
  return *c;
}

int n_parse_size(lua_State* L) {
  if (lua_type(L, 1) == LUA_TNUMBER) {
    const double d = lua_tonumber(L, 1);
    if (d >= 0 && d == static_cast<double>(static_cast<uint64_t>(d))) {
      lua_pushnumber(L, d);
      return 1;
    }
    lua_pushnil(L);
    return 1;
  }
  auto v = parse_size(check_string(L, 1));
  if (v && *v <= (1ULL << 53))
    lua_pushnumber(L, static_cast<double>(*v));
  else
    lua_pushnil(L);
  return 1;
}

int n_format_size(lua_State* L) {
  const int64_t v = check_integer(L, 1);
  if (v < 0) luaL_argerror(L, 1, "non-negative size expected");
  lua_pushstring(L, format_size(static_cast<uint64_t>(v)).c_str());
  return 1;
}

int n_edit_distance(lua_State* L) {
  lua_pushinteger(L, static_cast<lua_Integer>(edit_distance(check_string(L, 1), check_string(L, 2))));
  return 1;
}

int check_nranks(lua_State* L, int idx) {
  const int64_t n = check_integer(L, idx);
  if (n < 1) luaL_argerror(L, idx, "at least 1 rank expected");
  // An int holds it: 2^31 wrapped to a negative count (algbw_bytes went negative).
  if (n > (1 << 30)) luaL_argerror(L, idx, "at most 2^30 ranks expected");
  return static_cast<int>(n);
}

int n_busbw_factor(lua_State* L) {
  lua_pushnumber(L, busbw_factor(check_coll(L, 1), check_nranks(L, 2)));
  return 1;
}
// The arguments (op, n, dtype, nranks) of algbw_bytes and count_for_bytes, checked in that order;
// `negative` is the message for an n below 0.
struct SizeArgs {
  Collective c;
  size_t n;
  size_t dtype_bytes;
  int nranks;
};
SizeArgs check_size_args(lua_State* L, const char* negative) {
  const Collective c = check_coll(L, 1);
  const int64_t n = check_integer(L, 2);
  if (n < 0) luaL_argerror(L, 2, negative);
  const DType t = dtype_arg(check_string(L, 3));
  return {c, static_cast<size_t>(n), dtype_size(t), check_nranks(L, 4)};
}
// algbw_bytes(op, count, dtype, nranks)
int n_algbw_bytes(lua_State* L) {
  const SizeArgs a = check_size_args(L, "non-negative count expected");
  lua_pushnumber(L, algbw_bytes(a.c, a.n, a.dtype_bytes, a.nranks));
  return 1;
}
// count_for_bytes(op, bytes, dtype, nranks)
int n_count_for_bytes(lua_State* L) {
  const SizeArgs a = check_size_args(L, "non-negative size expected");
  lua_pushnumber(L, static_cast<double>(count_for_bytes(a.c, a.n, a.dtype_bytes, a.nranks)));
  return 1;
}
int n_dtype_size(lua_State* L) {
  lua_pushinteger(L, static_cast<lua_Integer>(dtype_size(dtype_arg(check_string(L, 1)))));
  return 1;
}
int n_has_root(lua_State* L) {
  lua_pushboolean(L, collective_has_root(check_coll(L, 1)));
  return 1;
}
int n_reduces(lua_State* L) {
  lua_pushboolean(L, collective_reduces(check_coll(L, 1)));
  return 1;
}

int n_summary(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  std::vector<double> v;
  const size_t n = lua_objlen(L, 1);
  v.reserve(n);
  for (size_t i = 1; i <= n; ++i) {
    lua_rawgeti(L, 1, static_cast<int>(i));
    if (lua_type(L, -1) != LUA_TNUMBER)
      luaL_error(L, "bad argument #1 to 'summary' (element %d: number expected, got %s)", static_cast<int>(i),
                 luaL_typename(L, -1));
    v.push_back(lua_tonumber(L, -1));
    lua_pop(L, 1);
  }
  const Summary s = summarize(std::move(v));
  lua_createtable(L, 0, 9);
  const std::pair<const char*, double> f[] = {{"n", static_cast<double>(s.n)},
                                              {"min", s.min},
                                              {"mean", s.mean},
                                              {"p50", s.p50},
                                              {"p95", s.p95},
                                              {"p99", s.p99},
                                              {"max", s.max},
                                              {"stdev", s.stdev},
                                              {"cv", s.cv()}};
  for (auto& [k, x] : f) {
    lua_pushnumber(L, x);
    lua_setfield(L, -2, k);
  }
  return 1;
}

int n_now(lua_State* L) {
  lua_pushnumber(L, static_cast<double>(now_ns()) * 1e-9);
  return 1;
}
int n_hostname(lua_State* L) {
  lua_pushstring(L, host_name().c_str());
  return 1;
}
int n_memory_available(lua_State* L) {
  lua_pushnumber(L, static_cast<double>(host_memory_available()));
  return 1;
}
int n_json_encode(lua_State* L) {
  luaL_checkany(L, 1);
  const bool pretty = lua_toboolean(L, 2);
  const std::string s = json_text(to_json(L, 1), pretty ? 2 : -1);
  lua_pushlstring(L, s.data(), s.size());
  return 1;
}
int n_json_decode(lua_State* L) {
  const std::string s = check_string(L, 1);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(s);
  } catch (const nlohmann::json::parse_error& e) {
    return luaL_error(L, "json_decode: %s", e.what());
  }
  push_json(L, j);
  return 1;
}
int n_sha256(lua_State* L) {
  lua_pushstring(L, sha256_hex(check_string(L, 1)).c_str());
  return 1;
}
// version_satisfies(range [, version]) -> boolean; raises on a malformed range
int n_version_satisfies(lua_State* L) {
  const std::string range = check_string(L, 1);
  const std::string ver = luaL_optstring(L, 2, COMMSCRIPT_VERSION);
  auto v = parse_version(ver);
  if (!v) luaL_argerror(L, 2, "malformed version");
  lua_pushboolean(L, version_satisfies(*v, range));
  return 1;
}
int n_parse_version(lua_State* L) {
  lua_pushboolean(L, parse_version(check_string(L, 1)).has_value());
  return 1;
}

// ---- report ----
Report& report(lua_State* L) {
  Session& s = session(L);
  if (!s.report) luaL_error(L, "the report is not open yet (recipes may report only from run)");
  return *s.report;
}
int n_report_result(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  report(L).add_result(to_json(L, 1));
  return 0;
}
int n_report_add(lua_State* L) {
  const std::string section = check_string(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  if (section != "findings" && section != "incidents" && section != "chaos")
    luaL_argerror(L, 1, "one of 'findings', 'incidents', 'chaos' expected");
  report(L).add(section, to_json(L, 2));
  return 0;
}
// report_set(key, value): top-level sections written whole (scorecard, topology, env ...)
int n_report_set(lua_State* L) {
  const std::string key = check_string(L, 1);
  luaL_checkany(L, 2);
  // Sections the engine writes (and the renderer and --replay read with a fixed shape): a recipe
  // replacing them would make the report lie or fail to write. Use report:finding for findings.
  static const char* const kEngineOwned[] = {"schema",  "commscript", "recipe",    "run",   "env",
                                             "results", "findings",   "incidents", "chaos", nullptr};
  for (const char* const* k = kEngineOwned; *k; ++k)
    if (key == *k)
      raise(L, ExitCode::runtime,
            "report:set: section '" + key +
                "' is written by the engine (engine-owned: schema, commscript, recipe, run, env, results, findings, "
                "incidents, chaos); use report:finding for findings, or a key of your own");
  auto v = to_json(L, 2);
  if (v.is_array() && v.empty()) v = nlohmann::json::object();
  report(L).doc()[key] = v;
  return 0;
}
int n_report_get(lua_State* L) {
  const std::string key = check_string(L, 1);
  auto& d = report(L).doc();
  if (d.contains(key))
    push_json(L, d[key]);
  else
    lua_pushnil(L);
  return 1;
}
int n_report_dir(lua_State* L) {
  Session& s = session(L);
  lua_pushstring(L, s.out_dir.c_str());
  return 1;
}
// environ() -> { NAME = value, ... }: this process's whole environment (for the env audit).
int n_environ(lua_State* L) {
  lua_newtable(L);
  for (char** p = environ; p && *p; ++p) {
    const char* eq = std::strchr(*p, '=');
    if (!eq) continue;
    lua_pushlstring(L, *p, static_cast<size_t>(eq - *p));
    lua_pushstring(L, eq + 1);
    lua_settable(L, -3);
  }
  return 1;
}

// array(t): marks t as a list for JSON output (an empty one is written as [], not {}).
int n_array(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  mark_array(L, 1);
  return 1;
}
// env_policy() -> {audited_prefixes, topology_names, snapshot_prefixes, secret_patterns}: the
// engine's one policy (env_policy.hpp).
int n_env_policy(lua_State* L) {
  push_json(L, {{"audited_prefixes", env_audited_prefixes()},
                {"topology_names", env_topology_names()},
                {"snapshot_prefixes", env_snapshot_prefixes()},
                {"secret_patterns", env_secret_patterns()}});
  return 1;
}
int n_config(lua_State* L) {
  push_json(L, session(L).config.data());
  return 1;
}

}  // namespace

void open_native(lua_State* L, Session* s) {
  lua_newtable(L);
  static const luaL_Reg fns[] = {{"parse_size", entry<n_parse_size>},
                                 {"format_size", entry<n_format_size>},
                                 {"edit_distance", entry<n_edit_distance>},
                                 {"env_policy", entry<n_env_policy>},
                                 {"busbw_factor", entry<n_busbw_factor>},
                                 {"algbw_bytes", entry<n_algbw_bytes>},
                                 {"count_for_bytes", entry<n_count_for_bytes>},
                                 {"dtype_size", entry<n_dtype_size>},
                                 {"has_root", entry<n_has_root>},
                                 {"reduces", entry<n_reduces>},
                                 {"summary", entry<n_summary>},
                                 {"now", entry<n_now>},
                                 {"hostname", entry<n_hostname>},
                                 {"memory_available", entry<n_memory_available>},
                                 {"json_encode", entry<n_json_encode>},
                                 {"json_decode", entry<n_json_decode>},
                                 {"sha256", entry<n_sha256>},
                                 {"version_satisfies", entry<n_version_satisfies>},
                                 {"is_version", entry<n_parse_version>},
                                 {"report_result", entry<n_report_result>},
                                 {"report_add", entry<n_report_add>},
                                 {"report_set", entry<n_report_set>},
                                 {"report_get", entry<n_report_get>},
                                 {"report_dir", entry<n_report_dir>},
                                 {"config", entry<n_config>},
                                 {"array", entry<n_array>},
                                 {"environ", entry<n_environ>},
                                 {nullptr, nullptr}};
  for (const luaL_Reg* f = fns; f->name; ++f) {
    lua_pushlightuserdata(L, s);
    lua_pushcclosure(L, f->func, 1);
    lua_setfield(L, -2, f->name);
  }
  lua_pushstring(L, COMMSCRIPT_VERSION);
  lua_setfield(L, -2, "version");
  lua_newtable(L);
  int i = 1;
  for (DType t : kAllDTypes) {
    lua_pushstring(L, std::string(dtype_name(t)).c_str());
    lua_rawseti(L, -2, i++);
  }
  lua_setfield(L, -2, "dtypes");
  lua_newtable(L);
  i = 1;
  for (Collective c : kBenchCollectives) {
    lua_pushstring(L, std::string(collective_name(c)).c_str());
    lua_rawseti(L, -2, i++);
  }
  lua_setfield(L, -2, "collectives");
  lua_newtable(L);
  for (const auto& e : kExitCodes) {
    lua_pushinteger(L, static_cast<int>(e.code));
    lua_setfield(L, -2, e.name);
  }
  lua_setfield(L, -2, "exit_codes");
  lua_newtable(L);  // commscript's own options (cs/options.lua: the hint to move one before the recipe)
  i = 1;
  for (const auto& o : kCliOptions) {
    lua_pushstring(L, o.name);
    lua_rawseti(L, -2, i++);
  }
  lua_setfield(L, -2, "cli_options");
  register_tensor(L);
  register_communicator(L);
  register_chaos(L);
  register_topology(L, s);
  register_files(L, s);
  register_gpu(L);
  register_backends(L, s);
  register_triage(L);
  register_metrics(L, s);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "loaded");
  lua_pushvalue(L, -3);
  lua_setfield(L, -2, "commscript.native");
  lua_pop(L, 3);
}

}  // namespace cs::lua
