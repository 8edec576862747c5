#include "versions.hpp"

#include <luajit.h>

#include <nlohmann/json.hpp>

#include "commscript_version.hpp"
#include "mpi_communicator.hpp"

#ifdef COMMSCRIPT_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "cuda_support.hpp"
#include "gpu_libs.hpp"
#include "nccl_communicator.hpp"
#endif

namespace cs {

namespace {

nlohmann::json collect() {
  nlohmann::json j;
  j["version"] = COMMSCRIPT_VERSION;
  j["luajit"] = LUAJIT_VERSION;
  j["backends"]["self"] = {{"library", "built-in"}};
  j["backends"]["mpi"] = {{"library", mpi_library_version()}};
#ifdef COMMSCRIPT_HAVE_NCCL
  int nccl = 0;
  ncclGetVersion(&nccl);
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  const cudaError_t derr = cudaDriverGetVersion(&drv);
  j["backends"]["nccl"] = {
      {"header", std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH)},
      {"library", nccl_version_string(nccl)},
      {"cuda_runtime", cuda_version_text(rt)},
      {"cuda_driver", derr == cudaSuccess && drv > 0 ? cuda_version_text(drv) : std::string("none (no driver)")},
      {"built", true}};
  // The libraries are opened at run time: which ones, or why not; and whether they are the
  // test stand-in (a run on it measured no GPU).
  const GpuLib &rl = cudart_lib(), &nl = nccl_lib();
  auto& b = j["backends"]["nccl"];
  if (!nl.loaded) b["library"] = "not loaded: " + nl.why;
  if (!rl.loaded) b["cuda_runtime"] = "not loaded: " + rl.why;
  b["library_path"] = nl.path;
  b["cuda_runtime_path"] = rl.path;
  b["fake"] = nl.fake || rl.fake;
#else
  j["backends"]["nccl"] = {{"built", false}, {"why", "built without CUDA/NCCL"}};
#endif
#ifdef COMMSCRIPT_HAVE_GLOO
  j["backends"]["gloo"] = {{"library", "Gloo (TCP transport)"}, {"built", true}};
#else
  j["backends"]["gloo"] = {{"built", false}, {"why", "built without Gloo (libgloo-dev)"}};
#endif
  return j;
}

}  // namespace

std::string versions_json() { return collect().dump(); }

std::string version_text() {
  const nlohmann::json j = collect();
  std::string s = "commscript " + j["version"].get<std::string>() + "\n";
  s += "MPI: " + j["backends"]["mpi"]["library"].get<std::string>() + "\n";
  s += std::string("LuaJIT: ") + LUAJIT_VERSION + "\n";
  const auto& n = j["backends"]["nccl"];
  if (n["built"].get<bool>())
    s += "NCCL: header " + n["header"].get<std::string>() + ", library " + n["library"].get<std::string>() +
         "\nCUDA: runtime " + n["cuda_runtime"].get<std::string>() + ", driver " + n["cuda_driver"].get<std::string>() +
         "\n";
  else
    s += "NCCL/CUDA: not built (configure with the CUDA toolkit and NCCL present)\n";
  return s;
}

}  // namespace cs
