// native.topology([sysfs_root [, opts]]) -> this process's topology as a table (engine/topology.hpp),
// with the library versions of `commscript --version` (versions.cpp) in its `versions` key.
// stdlib/cs/topo.lua gathers it from every rank.
#include <nlohmann/json.hpp>

#include "bindings.hpp"
#include "lua_support.hpp"
#include "topology.hpp"
#include "versions.hpp"

namespace cs::lua {

namespace {

// topology([sysfs_root [, {hwloc = true}]]): hwloc = false leaves out hwloc's summary (the
// ranks of a host other than the first do not need it).
int n_topology(lua_State* L) {
  TopologyOptions opt;
  if (!lua_isnoneornil(L, 1)) opt.sysfs_root = check_string(L, 1);
  if (opt.sysfs_root.empty()) luaL_argerror(L, 1, "a directory expected");
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    static const char* const allowed[] = {"hwloc", nullptr};
    check_fields(L, 2, "topology", allowed);
    opt.use_hwloc = field_bool(L, 2, "topology", "hwloc", true);
  }
  opt.versions = nlohmann::json::parse(versions_json());
  push_json(L, local_topology(opt));
  return 1;
}

}  // namespace

void register_topology(lua_State* L) {
  lua_pushcfunction(L, entry<n_topology>);
  lua_setfield(L, -2, "topology");  // native.topology
}

}  // namespace cs::lua
