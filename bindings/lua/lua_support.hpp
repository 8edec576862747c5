#pragma once
// The rules of the Lua boundary, in one place:
//  - every lua_CFunction is wrapped by lua_entry<>: engine exceptions become Lua errors that
//    carry the exit code (an error object with `code` and `message`, printable with tostring),
//    prefixed with the calling recipe's file:line; there is no catch (...), so Lua's own errors
//    pass through untouched;
//  - arguments are checked with the standard "bad argument #n to 'f' (...)" messages;
//  - userdata box a shared_ptr, and a destroyed/closed object raises instead of crashing.
#include <lua.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dtype.hpp"
#include "error.hpp"
#include "reduce_op.hpp"

namespace cs::lua {

// Pushes an error object {code=, message=} (with __tostring) and raises it.
// `limit`: an engine limit (C-stack depth, time budget) ended the code: see LuaFailure::limit.
[[noreturn]] void raise(lua_State* L, ExitCode code, const std::string& message, bool limit = false);
// The same with kind = "ranks_lost" and gone = {ranks...} (a RanksLostError).
[[noreturn]] void raise_ranks_lost(lua_State* L, const std::string& message, const std::vector<int>& gone);
// The exit code carried by the error value at `idx` (runtime for plain strings).
ExitCode error_code(lua_State* L, int idx);
// The message of the error value at `idx`.
std::string error_message(lua_State* L, int idx);

template <lua_CFunction F>
int entry(lua_State* L) {
  ExitCode code = ExitCode::internal;
  std::string msg;
  try {
    return F(L);
  } catch (const RanksLostError& e) {
    luaL_where(L, 1);
    std::string where = lua_tostring(L, -1);
    lua_pop(L, 1);
    raise_ranks_lost(L, where + e.what(), e.gone);
  } catch (const Error& e) {
    code = e.code();
    msg = e.what();
  } catch (const nlohmann::json::exception& e) {
    code = ExitCode::bad_input;
    msg = e.what();
  } catch (const std::bad_alloc&) {
    code = ExitCode::runtime;
    msg = "out of memory";
  } catch (const std::exception& e) {
    code = ExitCode::internal;
    msg = e.what();
  }
  luaL_where(L, 1);
  std::string where = lua_tostring(L, -1);
  lua_pop(L, 1);
  raise(L, code, where + msg);
}

// ---- argument checks ----
std::string check_string(lua_State* L, int idx);
// Table field helpers: typed, with "bad argument #idx to 'fn' (field 'k': number expected, got x)".
double field_number(lua_State* L, int idx, const char* fn, const char* key, double dflt);
int64_t field_integer(lua_State* L, int idx, const char* fn, const char* key, int64_t dflt);
std::string field_string(lua_State* L, int idx, const char* fn, const char* key, const std::string& dflt);
bool field_bool(lua_State* L, int idx, const char* fn, const char* key, bool dflt);
bool has_field(lua_State* L, int idx, const char* key);
// Raises when the table at idx has a key not in `allowed` (nullptr-terminated).
void check_fields(lua_State* L, int idx, const char* fn, const char* const* allowed);
int64_t check_integer(lua_State* L, int idx);
// A dtype or reduction named by a recipe: an unknown name is a bug in the recipe (exit 2, a
// UsageError), not bad user input, wherever the engine's parser would say InputError.
DType dtype_arg(std::string_view name);
ReduceOp redop_arg(std::string_view name);

// ---- userdata boxing shared_ptr<T> ----
template <class T>
struct Box {
  std::shared_ptr<T> p;
};

template <class T>
void push_box(lua_State* L, std::shared_ptr<T> p, const char* mt) {
  void* mem = lua_newuserdata(L, sizeof(Box<T>));
  new (mem) Box<T>{std::move(p)};
  luaL_getmetatable(L, mt);
  lua_setmetatable(L, -2);
}

template <class T>
std::shared_ptr<T>& check_box(lua_State* L, int idx, const char* mt, const char* what) {
  auto* b = static_cast<Box<T>*>(luaL_checkudata(L, idx, mt));
  if (!b->p) luaL_error(L, "attempt to use a released %s", what);
  return b->p;
}

template <class T>
int gc_box(lua_State* L) {
  auto* b = static_cast<Box<T>*>(lua_touserdata(L, 1));
  if (b) b->~Box<T>();  // safe twice: the shared_ptr is empty after the first destruction
  if (b) new (b) Box<T>{};
  return 0;
}

// ---- JSON <-> Lua (plain data only: nil, boolean, number, string, tables) ----
// Marks the table at idx as a list, so that it is written as [] even when empty.
void mark_array(lua_State* L, int idx);
void push_json(lua_State* L, const nlohmann::json& j);
// Arrays are tables with keys 1..n; a table with no keys becomes {} (an object), except in
// places where the caller knows it is a list.
nlohmann::json to_json(lua_State* L, int idx, int depth = 0);

}  // namespace cs::lua
