// cs.chaos: inject faults from Lua (the same rules as the config's [[chaos]] tables).
#include "chaos.hpp"
#include "lua_support.hpp"

namespace cs::lua {

namespace {

// inject{kind=, ranks=, ops=, after=, every=, probability=, duration=, ms=, jitter_ms=, factor=,
//        status=, elements=, op=, limit=}
int ch_inject(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  Chaos::instance().add(chaos_rule_from_json(to_json(L, 1)));
  return 0;
}
int ch_clear(lua_State*) {
  Chaos::instance().clear();
  return 0;
}
int ch_fired(lua_State* L) {
  push_json(L, Chaos::instance().fired());
  return 1;
}

}  // namespace

void register_chaos(lua_State* L) {
  lua_newtable(L);
  static const luaL_Reg fns[] = {
      {"inject", entry<ch_inject>}, {"clear", entry<ch_clear>}, {"fired", entry<ch_fired>}, {nullptr, nullptr}};
  luaL_register(L, nullptr, fns);
  lua_setfield(L, -2, "chaos");  // native.chaos
}

}  // namespace cs::lua
