// Lua view of cs::Tensor. Indexes are 1-based in Lua, like every Lua sequence.
#include <cstdint>
#include <limits>
#include <string>

#include "bench.hpp"
#include "bindings.hpp"
#include "error.hpp"
#include "lua_support.hpp"
#include "lua_vm.hpp"
#include "pattern.hpp"
#include "size.hpp"

namespace cs::lua {

namespace {

constexpr const char* kMT = "commscript.tensor";

size_t check_index(lua_State* L, int idx, const Tensor& t) {
  const int64_t i = check_integer(L, idx);
  if (i < 1 || static_cast<uint64_t>(i) > t.count())
    luaL_argerror(L, idx, ("index " + std::to_string(i) + " out of range 1.." + std::to_string(t.count())).c_str());
  return static_cast<size_t>(i - 1);
}

int t_new(lua_State* L) {
  DType dt;
  int64_t count;
  if (lua_istable(L, 1)) {
    static const char* const fields[] = {"dtype", "count", nullptr};
    check_fields(L, 1, "tensor", fields);
    dt = dtype_arg(field_string(L, 1, "tensor", "dtype", "float32"));
    count = field_integer(L, 1, "tensor", "count", -1);
    if (count < 0) luaL_argerror(L, 1, "field 'count': non-negative integer expected");
  } else {
    dt = dtype_arg(check_string(L, 1));
    count = check_integer(L, 2);
    if (count < 0) luaL_argerror(L, 2, "non-negative count expected");
  }
  push_box(L, std::make_shared<Tensor>(Tensor::host(dt, static_cast<size_t>(count))), kMT);
  return 1;
}

int t_dtype(lua_State* L) {
  lua_pushstring(L, std::string(dtype_name(check_tensor(L, 1).dtype())).c_str());
  return 1;
}
int t_count(lua_State* L) {
  lua_pushnumber(L, static_cast<double>(check_tensor(L, 1).count()));
  return 1;
}
int t_bytes(lua_State* L) {
  lua_pushnumber(L, static_cast<double>(check_tensor(L, 1).bytes()));
  return 1;
}
int t_get(lua_State* L) {
  Tensor& t = check_tensor(L, 1);
  lua_pushnumber(L, t.get(check_index(L, 2, t)));
  return 1;
}
int t_set(lua_State* L) {
  Tensor& t = check_tensor(L, 1);
  const size_t i = check_index(L, 2, t);
  t.set(i, luaL_checknumber(L, 3));
  return 0;
}
int t_fill(lua_State* L) {
  check_tensor(L, 1).fill(luaL_checknumber(L, 2));
  lua_settop(L, 1);
  return 1;
}
int t_fill_pattern(lua_State* L) {
  Tensor& t = check_tensor(L, 1);
  const int64_t rank = check_integer(L, 2);
  const ReduceOp op = redop_arg(luaL_optstring(L, 3, "sum"));
  const int64_t salt = lua_isnoneornil(L, 4) ? 0 : check_integer(L, 4);
  if (rank < 0) luaL_argerror(L, 2, "non-negative rank expected");
  fill_pattern(t, static_cast<int>(rank), op, static_cast<uint32_t>(salt));
  lua_settop(L, 1);
  return 1;
}
int t_slice(lua_State* L) {
  Tensor& t = check_tensor(L, 1);
  const int64_t first = check_integer(L, 2);
  const int64_t n = check_integer(L, 3);
  if (first < 1) luaL_argerror(L, 2, "first index must be at least 1");
  if (n < 0) luaL_argerror(L, 3, "non-negative count expected");
  if (static_cast<uint64_t>(first - 1) > t.count() ||
      static_cast<uint64_t>(n) > t.count() - static_cast<uint64_t>(first - 1))
    luaL_error(L, "slice(%d, %d): elements %d..%d are outside a tensor of %d elements", static_cast<int>(first),
               static_cast<int>(n), static_cast<int>(first), static_cast<int>(first + n - 1),
               static_cast<int>(t.count()));
  push_box(L, std::make_shared<Tensor>(t.slice(static_cast<size_t>(first - 1), static_cast<size_t>(n))), kMT);
  return 1;
}
int t_to_table(lua_State* L) {
  Tensor& t = check_tensor(L, 1);
  if (t.count() > 1000000) luaL_error(L, "to_table: tensor of %d elements is too large", static_cast<int>(t.count()));
  lua_createtable(L, static_cast<int>(t.count()), 0);
  for (size_t i = 0; i < t.count(); ++i) {
    lua_pushnumber(L, t.get(i));
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}
int t_tostring(lua_State* L) {
  Tensor& t = check_tensor(L, 1);
  lua_pushfstring(L, "tensor<%s>[%d]", std::string(dtype_name(t.dtype())).c_str(), static_cast<int>(t.count()));
  return 1;
}

// copy_bandwidth([bytes [, iters]]) -> GB/s of a host memcpy (the shared-memory ceiling)
constexpr double kCopyBandwidthS = 5;
int t_copy_bandwidth(lua_State* L) {
  const int64_t bytes = lua_isnoneornil(L, 1) ? (64 << 20) : check_integer(L, 1);
  const int64_t iters = lua_isnoneornil(L, 2) ? 5 : check_integer(L, 2);
  if (bytes < 1) luaL_argerror(L, 1, "positive byte count expected");
  if (iters < 1) luaL_argerror(L, 2, "positive iteration count expected");
  check_engine_memory(L, static_cast<uint64_t>(bytes) > (SIZE_MAX >> 2) ? SIZE_MAX : 2 * static_cast<size_t>(bytes),
                      "copy_bandwidth: two buffers of " + format_size(static_cast<uint64_t>(bytes)) + "B");
  // At most kCopyBandwidthS of copying whatever the count (2^31 iterations of 64 MiB ran for
  // hours inside C, where no deadline reaches): the best of the copies done by then.
  const int n = static_cast<int>(std::min<int64_t>(iters, std::numeric_limits<int>::max()));
  lua_pushnumber(L, memcpy_bandwidth(static_cast<size_t>(bytes), n, kCopyBandwidthS));
  return 1;
}

}  // namespace

void push_tensor(lua_State* L, Tensor t) { push_box(L, std::make_shared<Tensor>(std::move(t)), kMT); }

Tensor& check_tensor(lua_State* L, int idx) { return *check_box<Tensor>(L, idx, kMT, "tensor"); }

void register_tensor(lua_State* L) {
  luaL_newmetatable(L, kMT);
  static const luaL_Reg methods[] = {{"dtype", entry<t_dtype>},
                                     {"count", entry<t_count>},
                                     {"bytes", entry<t_bytes>},
                                     {"get", entry<t_get>},
                                     {"set", entry<t_set>},
                                     {"fill", entry<t_fill>},
                                     {"fill_pattern", entry<t_fill_pattern>},
                                     {"slice", entry<t_slice>},
                                     {"to_table", entry<t_to_table>},
                                     {nullptr, nullptr}};
  lua_newtable(L);
  luaL_register(L, nullptr, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, entry<t_count>);
  lua_setfield(L, -2, "__len");
  lua_pushcfunction(L, entry<t_tostring>);
  lua_setfield(L, -2, "__tostring");
  lua_pushcfunction(L, gc_box<Tensor>);
  lua_setfield(L, -2, "__gc");
  lua_pushstring(L, "tensor");
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
  lua_pushcfunction(L, entry<t_new>);
  lua_setfield(L, -2, "tensor");  // into the native table on top of the stack
  lua_pushcfunction(L, entry<t_copy_bandwidth>);
  lua_setfield(L, -2, "copy_bandwidth");
  lua_pushlightuserdata(L, nullptr);  // JSON null, for holes in lists (a matrix's diagonal)
  lua_setfield(L, -2, "null");
}

}  // namespace cs::lua
