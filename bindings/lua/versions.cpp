#include "versions.hpp"

#include <luajit.h>

#include <nlohmann/json.hpp>

#include "backends.hpp"
#include "commscript_version.hpp"
#include "json_text.hpp"

namespace cs {

namespace {

nlohmann::json collect() {
  nlohmann::json j;
  j["version"] = COMMSCRIPT_VERSION;
  j["luajit"] = LUAJIT_VERSION;
  j["backends"] = backend_versions();  // every backend, built or not (engine/comm/backends.cpp)
  return j;
}

}  // namespace

std::string versions_json() { return json_text(collect()); }

std::string version_text() {
  const nlohmann::json j = collect();
  std::string s = "commscript " + j["version"].get<std::string>() + "\n";
  s += std::string("LuaJIT: ") + LUAJIT_VERSION + "\n";
  for (const std::string& name : backend_names()) {
    const auto& b = j["backends"][name];
    const bool built = !b.contains("why");
    if (name == "nccl" && built)
      s += "NCCL: header " + b["header"].get<std::string>() + ", library " + b["library"].get<std::string>() +
           "\nCUDA: runtime " + b["cuda_runtime"].get<std::string>() + ", driver " +
           b["cuda_driver"].get<std::string>() + "\n";
    else if (name == "nccl")
      s += "NCCL/CUDA: not built (configure with the CUDA toolkit and NCCL present)\n";
    else
      s += (name == "mpi" ? std::string("MPI") : name) + ": " +
           (built ? b["library"].get<std::string>() : "not built (" + b["why"].get<std::string>() + ")") + "\n";
  }
  return s;
}

}  // namespace cs
