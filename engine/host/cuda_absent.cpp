// What this layer answers in a build without CUDA (compiled only then; engine/CMakeLists.txt
// picks this file or gpu_topology.cpp): no driver to ask, so no GPU details.
#include "gpu_topology.hpp"

namespace cs {

nlohmann::json gpu_topology(const GpuTopologyOptions&, std::string* error) {
  if (error) *error = "built without CUDA";
  return nlohmann::json::object();
}

void probe_gpus(nlohmann::json&, nlohmann::json&) {}

}  // namespace cs
