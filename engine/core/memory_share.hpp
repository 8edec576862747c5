#pragma once
// How much memory one rank may use: what this host (or its cgroup: Slurm, Kubernetes, systemd
// give jobs a memory.max that /proc/meminfo does not show) can still give, divided among the
// ranks that run on it. The Lua memory limit and the tensor size check derive from it.
#include <cstddef>
#include <string>

namespace cs {

struct MemoryShare {
  size_t available = 0;    // min(MemAvailable, cgroup limit - usage); 0 when unknown
  size_t cgroup_left = 0;  // the cgroup's limit less its usage (0: no limit found)
  int local_ranks = 1;     // ranks of this job on this host (from the launcher's environment)
  size_t per_rank = 0;     // available / local_ranks (0 when unknown)
  std::string source;      // "MemAvailable", "cgroup memory.max" ...: what bounded it
};

// Reads /proc/meminfo and this process's cgroup (v2 memory.max/memory.current, v1
// memory.limit_in_bytes/usage_in_bytes). `cgroup_root` is where cgroups are mounted (tests).
MemoryShare memory_share(const std::string& cgroup_root = "/sys/fs/cgroup");

// The launcher's count of ranks on this host (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS,
// SLURM_NTASKS_PER_NODE, LOCAL_WORLD_SIZE), at least 1.
int local_rank_count();

}  // namespace cs
