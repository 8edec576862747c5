#include "lua_support.hpp"

#include <cmath>
#include <cstring>

namespace cs::lua {

namespace {
int error_tostring(lua_State* L) {
  lua_pushliteral(L, "message");
  lua_rawget(L, 1);
  return 1;
}

// A metatable the engine relies on (error objects, cs.array's JSON type) is shared by every
// object of its kind: __metatable hides it from getmetatable and makes setmetatable on those
// objects an error, so no recipe or rule file changes it (the sandbox has no debug library).
void protect_metatable(lua_State* L) {
  lua_pushliteral(L, "commscript: read-only (an engine metatable)");
  lua_setfield(L, -2, "__metatable");
}

// Pushes a new error object {code=, message=} with room for `fields` fields in all.
void push_error_object(lua_State* L, ExitCode code, const std::string& message, int fields) {
  lua_createtable(L, 0, fields);
  lua_pushinteger(L, static_cast<int>(code));
  lua_setfield(L, -2, "code");
  lua_pushlstring(L, message.data(), message.size());
  lua_setfield(L, -2, "message");
}

// Gives the error object on top of the stack its shared metatable and raises it.
[[noreturn]] void raise_error_object(lua_State* L) {
  if (luaL_newmetatable(L, "commscript.error")) {
    lua_pushcfunction(L, error_tostring);
    lua_setfield(L, -2, "__tostring");
    protect_metatable(L);
  }
  lua_setmetatable(L, -2);
  lua_error(L);
  __builtin_unreachable();  // lua_error does not return
}
}  // namespace

void raise(lua_State* L, ExitCode code, const std::string& message, bool limit) {
  push_error_object(L, code, message, 3);
  if (limit) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "limit");
  }
  raise_error_object(L);
}

void raise_ranks_lost(lua_State* L, const std::string& message, const std::vector<int>& gone) {
  // Built like raise()'s object, plus what a recipe that survives drops needs.
  push_error_object(L, ExitCode::runtime, message, 4);
  lua_pushliteral(L, "ranks_lost");
  lua_setfield(L, -2, "kind");
  lua_createtable(L, static_cast<int>(gone.size()), 0);
  for (size_t i = 0; i < gone.size(); ++i) {
    lua_pushinteger(L, gone[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  lua_setfield(L, -2, "gone");
  raise_error_object(L);
}

ExitCode error_code(lua_State* L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE) return ExitCode::runtime;
  // Raw reads, here and in error_message: an error object's metatable is the recipe's, and its
  // __index (an endless loop, an error) must not run inside the engine's error handling.
  if (idx < 0) idx = lua_gettop(L) + idx + 1;
  lua_pushliteral(L, "code");
  lua_rawget(L, idx);
  // A recipe may raise error{code=} itself: only the failure codes 1..5 pass (6, an output the
  // engine could not write, only from the engine); 0, 70 (commscript's own bugs), 256, NaN, 1e10 or a string become 2,
  // so a failed run never exits 0 (nor wraps to 0).
  const double d = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : 2.0;
  lua_pop(L, 1);
  if (d >= 1 && d <= static_cast<int>(ExitCode::hang_or_desync) && d == std::floor(d))
    return static_cast<ExitCode>(static_cast<int>(d));
  // 6 (an output the engine could not write) only from the engine's own error objects, whose
  // metatable no recipe can get or set (docs/sandbox.md: a recipe's error{code=N} is 1..5).
  if (d == static_cast<int>(ExitCode::output) && lua_getmetatable(L, idx)) {
    luaL_getmetatable(L, "commscript.error");
    const bool engine = lua_rawequal(L, -1, -2) != 0;
    lua_pop(L, 2);
    if (engine) return ExitCode::output;
  }
  return ExitCode::runtime;
}

std::string error_message(lua_State* L, int idx) {
  if (lua_type(L, idx) == LUA_TTABLE) {
    if (idx < 0) idx = lua_gettop(L) + idx + 1;
    lua_pushliteral(L, "message");
    lua_rawget(L, idx);
    std::string m = lua_isstring(L, -1) ? lua_tostring(L, -1) : "(error object without message)";
    lua_pop(L, 1);
    return m;
  }
  if (lua_isstring(L, idx)) return lua_tostring(L, idx);
  return std::string("(error object is a ") + luaL_typename(L, idx) + " value)";
}

DType dtype_arg(std::string_view name) {
  try {
    return dtype_from_string(name);
  } catch (const InputError& e) {
    throw UsageError(e.what());
  }
}

ReduceOp redop_arg(std::string_view name) {
  try {
    return reduce_op_from_string(name);
  } catch (const InputError& e) {
    throw UsageError(e.what());
  }
}

std::string check_string(lua_State* L, int idx) {
  size_t n = 0;
  const char* s = luaL_checklstring(L, idx, &n);
  return std::string(s, n);
}

int64_t check_integer(lua_State* L, int idx) {
  const double d = luaL_checknumber(L, idx);
  if (d != std::floor(d) || std::fabs(d) > 9.007199254740992e15)
    luaL_argerror(L, idx, "integer expected, got non-integer number");
  return static_cast<int64_t>(d);
}

// luaL_argerror formats "bad argument #n to 'f' (...)" and counts arguments the way the
// caller sees them (without self for methods).
static void field_error(lua_State* L, int idx, const char* key, const char* want) {
  lua_getfield(L, idx, key);
  const std::string msg = std::string("field '") + key + "': " + want + " expected, got " + luaL_typename(L, -1);
  lua_pop(L, 1);
  luaL_argerror(L, idx, msg.c_str());
}

bool has_field(lua_State* L, int idx, const char* key) {
  lua_getfield(L, idx, key);
  const bool r = !lua_isnil(L, -1);
  lua_pop(L, 1);
  return r;
}

// Pushes t[key] of the table at idx and returns true when it is set; raises (field_error) when it
// is set to a value of another type than `type`; pushes nothing and returns false when nil.
static bool push_field(lua_State* L, int idx, const char* key, int type, const char* want) {
  lua_getfield(L, idx, key);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return false;
  }
  if (lua_type(L, -1) != type) field_error(L, idx, key, want);
  return true;
}

double field_number(lua_State* L, int idx, const char* /*fn: luaL_argerror finds the name*/, const char* key,
                    double dflt) {
  if (!push_field(L, idx, key, LUA_TNUMBER, "number")) return dflt;
  const double v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

int64_t field_integer(lua_State* L, int idx, const char* /*fn: luaL_argerror finds the name*/, const char* key,
                      int64_t dflt) {
  if (!push_field(L, idx, key, LUA_TNUMBER, "integer")) return dflt;
  const double d = lua_tonumber(L, -1);
  if (d != std::floor(d) || std::fabs(d) > 9.007199254740992e15) field_error(L, idx, key, "integer");
  lua_pop(L, 1);
  return static_cast<int64_t>(d);
}

std::string field_string(lua_State* L, int idx, const char* /*fn: luaL_argerror finds the name*/, const char* key,
                         const std::string& dflt) {
  if (!push_field(L, idx, key, LUA_TSTRING, "string")) return dflt;
  std::string v = lua_tostring(L, -1);
  lua_pop(L, 1);
  return v;
}

bool field_bool(lua_State* L, int idx, const char* /*fn: luaL_argerror finds the name*/, const char* key, bool dflt) {
  if (!push_field(L, idx, key, LUA_TBOOLEAN, "boolean")) return dflt;
  const bool v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

void check_fields(lua_State* L, int idx, const char* /*fn: luaL_argerror finds the name*/, const char* const* allowed) {
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    bool ok = false;
    if (lua_type(L, -1) == LUA_TSTRING) {
      const char* k = lua_tostring(L, -1);
      for (const char* const* a = allowed; *a; ++a) ok = ok || std::strcmp(k, *a) == 0;
      if (!ok) {
        std::string all;
        for (const char* const* a = allowed; *a; ++a) all += (all.empty() ? "" : ", ") + std::string(*a);
        luaL_argerror(L, idx, ("unknown field '" + std::string(k) + "'; known: " + all).c_str());
      }
    } else {
      luaL_argerror(L, idx, "table with string keys expected");
    }
  }
}

void mark_array(lua_State* L, int idx) {
  if (idx < 0) idx = lua_gettop(L) + idx + 1;
  if (luaL_newmetatable(L, "commscript.array")) {
    lua_pushstring(L, "array");
    lua_setfield(L, -2, "__jsontype");
  }
  lua_setmetatable(L, idx);
}

static bool marked_array(lua_State* L, int idx) {
  // The engine's own metatable is an array by identity, whatever its fields now say: it is
  // shared by every cs.array of the state (and gettable, so that copies keep it), and a recipe or
  // rule file that set its __jsontype changed how every empty list was written.
  if (lua_getmetatable(L, idx)) {
    luaL_getmetatable(L, "commscript.array");
    const bool engine = lua_rawequal(L, -1, -2) != 0;
    lua_pop(L, 2);
    if (engine) return true;
  }
  if (!luaL_getmetafield(L, idx, "__jsontype")) return false;
  const bool r = lua_isstring(L, -1) && std::strcmp(lua_tostring(L, -1), "array") == 0;
  lua_pop(L, 1);
  return r;
}

void push_json(lua_State* L, const nlohmann::json& j) {
  luaL_checkstack(L, 4, "json nesting too deep");
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      lua_pushnil(L);
      break;
    case nlohmann::json::value_t::boolean:
      lua_pushboolean(L, j.get<bool>());
      break;
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
      lua_pushnumber(L, j.get<double>());
      break;
    case nlohmann::json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      lua_pushlstring(L, s.data(), s.size());
      break;
    }
    case nlohmann::json::value_t::array: {
      lua_createtable(L, static_cast<int>(j.size()), 0);
      int i = 1;
      for (const auto& v : j) {
        push_json(L, v);
        lua_rawseti(L, -2, i++);
      }
      mark_array(L, -1);  // round-trips as a list, even when empty
      break;
    }
    case nlohmann::json::value_t::object: {
      lua_createtable(L, 0, static_cast<int>(j.size()));
      for (const auto& [k, v] : j.items()) {
        push_json(L, v);
        lua_setfield(L, -2, k.c_str());
      }
      break;
    }
    default:
      lua_pushnil(L);
      break;
  }
}

nlohmann::json to_json(lua_State* L, int idx, int depth) {
  if (idx < 0) idx = lua_gettop(L) + idx + 1;
  if (depth > 64) luaL_error(L, "cannot convert to JSON: nesting deeper than 64 (a cycle?)");
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
      return nullptr;
    case LUA_TLIGHTUSERDATA:
      if (lua_touserdata(L, idx) == nullptr) return nullptr;  // cs.json.null
      luaL_error(L, "cannot convert a light userdata to JSON");
      return nullptr;
    case LUA_TBOOLEAN:
      return static_cast<bool>(lua_toboolean(L, idx));
    case LUA_TNUMBER: {
      const double d = lua_tonumber(L, idx);
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.007199254740992e15) return static_cast<int64_t>(d);
      if (!std::isfinite(d)) return nullptr;  // JSON has no NaN/inf
      return d;
    }
    case LUA_TSTRING: {
      size_t n = 0;
      const char* s = lua_tolstring(L, idx, &n);
      return std::string(s, n);
    }
    case LUA_TTABLE: {
      const size_t n = lua_objlen(L, idx);
      // An array when keys are exactly 1..n (n > 0).
      size_t keys = 0;
      bool all_int = true;
      lua_pushnil(L);
      while (lua_next(L, idx)) {
        ++keys;
        if (lua_type(L, -2) != LUA_TNUMBER) all_int = false;
        lua_pop(L, 1);
      }
      if ((n > 0 && all_int && keys == n) || (keys == 0 && marked_array(L, idx))) {
        nlohmann::json a = nlohmann::json::array();
        for (size_t i = 1; i <= n; ++i) {
          lua_rawgeti(L, idx, static_cast<int>(i));
          a.push_back(to_json(L, -1, depth + 1));
          lua_pop(L, 1);
        }
        return a;
      }
      nlohmann::json o = nlohmann::json::object();
      lua_pushnil(L);
      while (lua_next(L, idx)) {
        std::string key;
        if (lua_type(L, -2) == LUA_TSTRING)
          key = lua_tostring(L, -2);
        else if (lua_type(L, -2) == LUA_TNUMBER) {
          lua_pushvalue(L, -2);
          key = lua_tostring(L, -1);
          lua_pop(L, 1);
        } else {
          luaL_error(L, "cannot convert to JSON: a table key is a %s", luaL_typename(L, -2));
        }
        o[key] = to_json(L, -1, depth + 1);
        lua_pop(L, 1);
      }
      return o;
    }
    default:
      luaL_error(L, "cannot convert a %s value to JSON", luaL_typename(L, idx));
      return nullptr;
  }
}

}  // namespace cs::lua
