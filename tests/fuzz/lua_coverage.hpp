#pragma once
// Lua line coverage as libFuzzer feedback, for the targets that run stdlib code (fuzz_options,
// fuzz_env). libFuzzer sees only the instrumented C++; LuaJIT is an uninstrumented library, so
// without this every input that reaches new Lua lines looks the same to it. A line hook maps
// each (chunk, previous line, line) step to one of libFuzzer's extra counters (the
// __libfuzzer_extra_counters section). Hooks run in the interpreter only: the JIT is turned off
// in the fuzzed state, and jit.on (which cs.runner calls after a recipe's top level) does nothing.
// The engine's own count hook (the C-stack guard, the top-level budget) is kept.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <lua.hpp>

namespace fuzz_lua {

constexpr size_t kCounters = 1 << 16;
__attribute__((used, section("__libfuzzer_extra_counters"))) static uint8_t g_counters[kCounters];
static lua_Hook g_engine_hook = nullptr;
static uint64_t g_prev = 0;

inline void hook(lua_State* L, lua_Debug* ar) {
  if (ar->event != LUA_HOOKLINE) {
    if (g_engine_hook) g_engine_hook(L, ar);
    return;
  }
  // The line alone (asking which chunk costs a lua_getinfo per line, several times the rest); a
  // step from one line to the next mostly tells the files apart.
  const uint64_t loc = (static_cast<uint64_t>(ar->currentline) * 0x9E3779B97F4A7C15ull) >> 40;
  uint8_t& c = g_counters[(loc ^ g_prev) % kCounters];
  if (c != 255) ++c;
  g_prev = loc >> 1;
}

// Installs the hook on L (after the engine's) and keeps the JIT off.
inline void install(lua_State* L) {
  g_engine_hook = lua_gethook(L);
  const int count = lua_gethookcount(L);
  lua_sethook(L, hook, LUA_MASKLINE | (g_engine_hook ? LUA_MASKCOUNT : 0), count > 0 ? count : 1000);
  const char* const kOff = "jit.off(); jit.flush(); jit.on = function() end";
  if (luaL_loadstring(L, kOff) == 0) lua_pcall(L, 0, 0, 0);
  lua_settop(L, 0);
}

}  // namespace fuzz_lua
