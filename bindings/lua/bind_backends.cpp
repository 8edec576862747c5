// cs.comm: the backends a recipe can open beside ctx.comm in this run (recipes that compare
// backends on the same ranks: recipes/protocol_compare.lua).
#include "backend_open.hpp"
#include "bindings.hpp"
#include "lua_support.hpp"
#include "session.hpp"

namespace cs::lua {

namespace {

Session& session(lua_State* L) { return *static_cast<Session*>(lua_touserdata(L, lua_upvalueindex(1))); }

// available() -> {"mpi", "gloo", ...}: what open() can try (nccl still needs a GPU on every rank).
int cm_available(lua_State* L) {
  Session& s = session(L);
  const auto names = backends_available(*s.world);
  lua_createtable(L, static_cast<int>(names.size()), 0);
  for (size_t i = 0; i < names.size(); ++i) {
    lua_pushstring(L, names[i].c_str());
    lua_rawseti(L, -2, static_cast<int>(i) + 1);
  }
  mark_array(L, -1);
  return 1;
}

// open(name) -> communicator: `name` over the ranks of ctx.comm, rank for rank (collective: every
// rank calls it). The world's own backend gives the world itself.
int cm_open(lua_State* L) {
  Session& s = session(L);
  const std::string name = check_string(L, 1);
  if (name == s.world->backend()) {
    push_communicator(L, s.world);
    return 1;
  }
  push_communicator(L, std::shared_ptr<Communicator>(open_backend(name, *s.world, s.timeout_s)));
  return 1;
}

}  // namespace

void register_backends(lua_State* L, Session* s) {
  lua_newtable(L);
  static const luaL_Reg fns[] = {{"available", entry<cm_available>}, {"open", entry<cm_open>}, {nullptr, nullptr}};
  for (const luaL_Reg* f = fns; f->name; ++f) {
    lua_pushlightuserdata(L, s);
    lua_pushcclosure(L, f->func, 1);
    lua_setfield(L, -2, f->name);
  }
  lua_setfield(L, -2, "comm");  // native.comm
}

}  // namespace cs::lua
