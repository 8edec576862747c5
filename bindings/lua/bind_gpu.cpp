// The GPUs of this host for Lua: native.gpu_topology(), native.gpu_device_count() and
// native.gpu_copy_bandwidth{...}, also loaded as the module "cs.gpu" (which sandboxed recipes
// may require). With CUDA it also installs the GPU probe of native.topology()
// (engine/topology.hpp), so that the host topology names the GPUs and their links.
#include "bindings.hpp"
#include "copy_bw.hpp"
#include "cuda_support.hpp"
#include "gpu_topology.hpp"
#include "lua_support.hpp"
#include "topology.hpp"

namespace cs::lua {

namespace {

// gpu_topology() -> table; or {} and the reason when there is no usable device or driver
int g_topology(lua_State* L) {
  std::string why;
  const nlohmann::json t = gpu_topology({}, &why);
  if (t.empty()) {
    lua_newtable(L);
    lua_pushstring(L, why.c_str());
    return 2;
  }
  push_json(L, t);
  return 1;
}

// gpu_device_count() -> n, and when n is 0 why ("cudaErrorNoDevice: ...", "built without CUDA")
int g_device_count(lua_State* L) {
  const CudaProbe p = cuda_probe();
  lua_pushinteger(L, p.count);
  if (p.count > 0) return 1;
  lua_pushstring(L, p.error.empty() ? "0 devices" : p.error.c_str());
  return 2;
}

// gpu_copy_bandwidth{bytes=, loops=, samples=, peer=} -> engine/cuda_copy.hpp's table (GB/s)
int g_copy_bandwidth(lua_State* L) {
  CopyBwSpec spec;
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
    static const char* const f[] = {"bytes", "loops", "samples", "peer", nullptr};
    check_fields(L, 1, "gpu_copy_bandwidth", f);
    const int64_t bytes = field_integer(L, 1, "gpu_copy_bandwidth", "bytes", static_cast<int64_t>(spec.bytes));
    const int64_t loops = field_integer(L, 1, "gpu_copy_bandwidth", "loops", spec.loops);
    const int64_t samples = field_integer(L, 1, "gpu_copy_bandwidth", "samples", spec.samples);
    if (bytes < 1) luaL_argerror(L, 1, "field 'bytes': positive expected");
    if (loops < 1 || loops > 1000000) luaL_argerror(L, 1, "field 'loops': 1..1000000 expected");
    if (samples < 1 || samples > 1000) luaL_argerror(L, 1, "field 'samples': 1..1000 expected");
    spec.bytes = static_cast<size_t>(bytes);
    spec.loops = static_cast<int>(loops);
    spec.samples = static_cast<int>(samples);
    spec.peer = field_bool(L, 1, "gpu_copy_bandwidth", "peer", true);
  }
  push_json(L, gpu_copy_bandwidth(spec));
  return 1;
}

}  // namespace

void register_gpu(lua_State* L) {
  static const luaL_Reg fns[] = {{"gpu_topology", entry<g_topology>},
                                 {"gpu_device_count", entry<g_device_count>},
                                 {"gpu_copy_bandwidth", entry<g_copy_bandwidth>},
                                 {nullptr, nullptr}};
  luaL_register(L, nullptr, fns);  // into native, on top of the stack
  // package.loaded["cs.gpu"] = {topology, device_count, copy_bandwidth}
  lua_newtable(L);
  lua_getfield(L, -2, "gpu_topology");
  lua_setfield(L, -2, "topology");
  lua_getfield(L, -2, "gpu_device_count");
  lua_setfield(L, -2, "device_count");
  lua_getfield(L, -2, "gpu_copy_bandwidth");
  lua_setfield(L, -2, "copy_bandwidth");
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "loaded");
  lua_pushvalue(L, -3);
  lua_setfield(L, -2, "cs.gpu");
  lua_pop(L, 3);
  set_gpu_probe(probe_gpus);  // without CUDA a probe that adds nothing (host/cuda_absent.cpp)
}

}  // namespace cs::lua
