#pragma once
// Registers the engine's objects with a Lua state as the table `commscript.native`
// (package.loaded["commscript.native"]); stdlib/commscript.lua builds the public `cs` on it.
#include <lua.hpp>
#include <memory>
#include <string>

#include "communicator.hpp"
#include "tensor.hpp"

namespace cs {
class Session;

namespace lua {

void open_native(lua_State* L, Session* session);
void register_tensor(lua_State* L);                // adds native.tensor and the tensor metatable
void register_communicator(lua_State* L);          // the communicator metatable
void register_chaos(lua_State* L);                 // adds native.chaos (inject, clear, fired)
void register_topology(lua_State* L, Session* s);  // adds native.topology([sysfs_root])
void register_gpu(lua_State* L);                   // adds native.gpu_* and the module "cs.gpu"
void register_backends(lua_State* L, Session* s);  // adds native.comm (available, open)
void register_triage(lua_State* L);                // adds native.triage_* (bind_triage.cpp)
void register_files(lua_State* L, Session* s);     // adds native.read_conf_file, probe_file ... (bind_files.cpp)
// Whether a recipe may learn about `path` (bind_files.cpp): --trusted, or a path the run was given
// (its command line, the recipe's options, a value of its environment). kNotChecked says why not.
bool path_given(const Session* s, const std::string& path);
extern const char* const kNotChecked;
void register_metrics(lua_State* L, Session* s);  // adds native.metrics_text, metrics_publish
void push_communicator(lua_State* L, std::shared_ptr<Communicator> c);
Tensor& check_tensor(lua_State* L, int idx);
void push_tensor(lua_State* L, Tensor t);

}  // namespace lua
}  // namespace cs
