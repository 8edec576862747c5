// native.metrics_*: what cs.metrics (stdlib/cs/metrics.lua) hands to the engine's metrics
// (engine/control/metrics.hpp, docs/monitoring.md).
#include "bindings.hpp"
#include "lua_support.hpp"
#include "session.hpp"

namespace cs::lua {

namespace {

Session& session(lua_State* L) { return *static_cast<Session*>(lua_touserdata(L, lua_upvalueindex(1))); }

// The families of argument 1 (a list of {name, help, type, samples}); a malformed one is the
// recipe's error (exit 2), not the user's input.
std::vector<MetricFamily> families_arg(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  try {
    return metric_families_from_json(to_json(L, 1));
  } catch (const InputError& e) {
    raise(L, ExitCode::runtime, e.what());
  }
}

// metrics_text(families) -> the Prometheus text of them (the engine's writer, for tests).
int n_metrics_text(lua_State* L) {
  const auto fams = families_arg(L);
  std::string text;
  try {
    text = metrics_text(fams);
  } catch (const InputError& e) {
    raise(L, ExitCode::runtime, e.what());
  }
  lua_pushlstring(L, text.data(), text.size());
  return 1;
}

// metrics_publish(families) -> true when published (rank 0 of a run with --metrics or
// --metrics-listen), false otherwise: the run's own families from the report as it stands plus
// these (kept for the final values at the run's end).
int n_metrics_publish(lua_State* L) {
  const auto fams = families_arg(L);
  Session& s = session(L);
  if (!s.metrics || !s.report) {
    lua_pushboolean(L, 0);
    return 1;
  }
  {
    std::lock_guard<std::recursive_mutex> g(s.report->mutex());
    s.metrics->publish(s.report->doc(), fams);
  }
  lua_pushboolean(L, 1);
  return 1;
}

}  // namespace

void register_metrics(lua_State* L, Session* s) {
  static const luaL_Reg fns[] = {
      {"metrics_text", entry<n_metrics_text>}, {"metrics_publish", entry<n_metrics_publish>}, {nullptr, nullptr}};
  for (const luaL_Reg* f = fns; f->name; ++f) {
    lua_pushlightuserdata(L, s);
    lua_pushcclosure(L, f->func, 1);
    lua_setfield(L, -2, f->name);
  }
}

}  // namespace cs::lua
