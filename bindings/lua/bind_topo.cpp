// native.topology([sysfs_root [, opts]]) -> this process's topology as a table (engine/topology.hpp),
// with the library versions of `commscript --version` (versions.cpp) in its `versions` key.
// stdlib/cs/topo.lua gathers it from every rank.
// native.interfaces() -> the names of this host's network interfaces, sorted (if_nameindex: the
// kernel's list, virtual interfaces included, the set NCCL_SOCKET_IFNAME is matched against), or
// nil when it cannot be read.
#include <net/if.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "error.hpp"
#include "lua_support.hpp"
#include "session.hpp"
#include "topology.hpp"
#include "versions.hpp"

namespace cs::lua {

namespace {

// topology([sysfs_root [, {hwloc = true, exe = true}]]): hwloc = false leaves out hwloc's summary
// (the ranks of a host other than the first do not need it); exe = false the binary's path, size
// and sha256 (the env audit only wants the NICs). A sysfs_root other than /sys must be one the run
// was given (bind_files.cpp): its listing and files told a sandboxed recipe what any directory held.
int n_topology(lua_State* L) {
  TopologyOptions opt;
  if (!lua_isnoneornil(L, 1)) opt.sysfs_root = check_string(L, 1);
  if (opt.sysfs_root.empty()) luaL_argerror(L, 1, "a directory expected");
  const auto* s = static_cast<const Session*>(lua_touserdata(L, lua_upvalueindex(1)));
  if (opt.sysfs_root != "/sys" && !path_given(s, opt.sysfs_root))
    throw UsageError("topology: sysfs_root " + opt.sysfs_root + " " + kNotChecked);
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    static const char* const allowed[] = {"hwloc", "exe", nullptr};
    check_fields(L, 2, "topology", allowed);
    opt.use_hwloc = field_bool(L, 2, "topology", "hwloc", true);
    if (!field_bool(L, 2, "topology", "exe", true)) opt.exe_path.clear();  // no binary hash
  }
  opt.versions = nlohmann::json::parse(versions_json());
  push_json(L, local_topology(opt));
  return 1;
}

// nil when the kernel's list cannot be read (then nothing is checked against it).
int n_interfaces(lua_State* L) {
  struct if_nameindex* list = if_nameindex();
  if (list == nullptr) {
    lua_pushnil(L);
    return 1;
  }
  std::vector<std::string> names;
  for (struct if_nameindex* i = list; i->if_index != 0 && i->if_name != nullptr; ++i) names.emplace_back(i->if_name);
  if_freenameindex(list);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  push_json(L, nlohmann::json(names));
  return 1;
}

}  // namespace

void register_topology(lua_State* L, Session* s) {
  lua_pushlightuserdata(L, s);
  lua_pushcclosure(L, entry<n_topology>, 1);
  lua_setfield(L, -2, "topology");  // native.topology
  lua_pushcfunction(L, entry<n_interfaces>);
  lua_setfield(L, -2, "interfaces");  // native.interfaces
}

}  // namespace cs::lua
