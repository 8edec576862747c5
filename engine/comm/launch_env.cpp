#include "launch_env.hpp"

#include <cstdlib>

#include "error.hpp"

namespace cs {

namespace {

const char* get(const char* v) {
  const char* s = std::getenv(v);
  return s && *s ? s : nullptr;
}

int int_var(const std::string& who, const char* v, bool required, int fallback, int lo, int hi) {
  const char* s = get(v);
  if (!s) {
    if (required) throw InputError(who + ": " + v + " is not set");
    return fallback;
  }
  char* end = nullptr;
  const long x = std::strtol(s, &end, 10);
  if (*end || x < lo || x > hi)
    throw InputError(who + ": " + v + "='" + s + "' is not an integer in " + std::to_string(lo) + ".." +
                     std::to_string(hi));
  return static_cast<int>(x);
}

void check_rank(const std::string& who, const LaunchEnv& e, const char* rank_var, const char* size_var) {
  if (e.rank >= e.size)
    throw InputError(who + ": " + rank_var + "=" + std::to_string(e.rank) + " is not below " + size_var + "=" +
                     std::to_string(e.size));
}

}  // namespace

nlohmann::json LaunchEnv::to_json() const {
  nlohmann::json j = {{"kind", kind}, {"detected", detected}};
  if (kind != "mpi") {  // MPI's size is the run's ranks
    j["size"] = size;
    j["master_addr"] = master_addr;
    j["master_port"] = master_port;
  }
  return j;
}

LaunchEnv read_launch_env(const std::string& kind_in) {
  LaunchEnv e;
  e.kind = kind_in;
  if (kind_in == "auto") {
    e.detected = true;
    if (get("OMPI_COMM_WORLD_RANK") || get("PMI_RANK") || get("PMIX_RANK"))
      e.kind = "mpi";
    else if (get("RANK") && get("WORLD_SIZE"))
      e.kind = "env";
    else if (get("SLURM_PROCID") && get("SLURM_NTASKS") && get("SLURM_STEP_ID"))
      e.kind = "slurm";
    else
      e.kind = "mpi";  // mpirun, or a process on its own (an MPI singleton)
  }
  if (e.kind == "mpi") return e;
  if (e.kind == "env") {
    const std::string who = "--launcher env (torchrun-style: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)";
    e.size = int_var(who, "WORLD_SIZE", true, 1, 1, 1 << 20);
    e.rank = int_var(who, "RANK", true, 0, 0, 1 << 20);
    check_rank(who, e, "RANK", "WORLD_SIZE");
    e.local_rank = int_var(who, "LOCAL_RANK", false, 0, 0, 1 << 20);
    if (get("LOCAL_WORLD_SIZE")) {
      const int lws = int_var(who, "LOCAL_WORLD_SIZE", true, 1, 1, 1 << 20);
      if (e.local_rank >= lws)
        throw InputError(who + ": LOCAL_RANK=" + std::to_string(e.local_rank) +
                         " is not below LOCAL_WORLD_SIZE=" + std::to_string(lws));
      if (lws > e.size)
        throw InputError(who + ": LOCAL_WORLD_SIZE=" + std::to_string(lws) +
                         " exceeds WORLD_SIZE=" + std::to_string(e.size));
    }
    if (!get("MASTER_ADDR")) throw InputError(who + ": MASTER_ADDR is not set");
    e.master_addr = get("MASTER_ADDR");
    e.master_port = int_var(who, "MASTER_PORT", true, 0, 1, 65535);
    return e;
  }
  if (e.kind == "slurm") {
    const std::string who = "--launcher slurm (SLURM_PROCID, SLURM_NTASKS; MASTER_ADDR, MASTER_PORT)";
    e.size = int_var(who, "SLURM_NTASKS", true, 1, 1, 1 << 20);
    e.rank = int_var(who, "SLURM_PROCID", true, 0, 0, 1 << 20);
    check_rank(who, e, "SLURM_PROCID", "SLURM_NTASKS");
    e.local_rank = int_var(who, "SLURM_LOCALID", false, 0, 0, 1 << 20);
    if (!get("MASTER_ADDR"))
      throw InputError(who +
                       ": MASTER_ADDR is not set (export the first node's address, e.g. from "
                       "scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)");
    e.master_addr = get("MASTER_ADDR");
    e.master_port = int_var(who, "MASTER_PORT", false, 29500, 1, 65535);
    return e;
  }
  throw InputError("--launcher " + kind_in + ": expected auto, mpi, env or slurm");
}

}  // namespace cs
