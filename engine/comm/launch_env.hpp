#pragma once
// How this process was launched, read from its environment: by an MPI launcher (mpirun, srun
// with PMIx), torchrun-style variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)
// or Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; MASTER_ADDR/MASTER_PORT for the store).
#include <nlohmann/json.hpp>
#include <string>

namespace cs {

struct LaunchEnv {
  std::string kind;       // "mpi", "env" or "slurm"
  bool detected = false;  // chosen by --launcher auto rather than named
  int rank = 0, size = 1, local_rank = 0;
  std::string master_addr;
  int master_port = 0;
  nlohmann::json to_json() const;
};

// `kind`: "auto", "mpi", "env" or "slurm". Throws InputError naming the missing or inconsistent
// variable.
LaunchEnv read_launch_env(const std::string& kind);

}  // namespace cs
