#include "memory_share.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace cs {

namespace {

size_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  size_t kb = 0;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

// A number from a cgroup file; 0 for "max", a missing file or garbage.
size_t read_bytes(const std::string& path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v) || v == "max" || v.empty()) return 0;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (*end) return 0;
  // cgroup v1 writes "no limit" as a huge number near 2^63.
  if (n >= (1ULL << 60)) return 0;
  return static_cast<size_t>(n);
}

// The tightest limit from this process's cgroup up to the root (a parent's limit counts too).
size_t cgroup_left(const std::string& root) {
  std::ifstream in("/proc/self/cgroup");
  size_t best = 0;
  auto consider = [&](size_t limit, size_t usage) {
    if (!limit) return;
    const size_t left = usage < limit ? limit - usage : 0;
    if (!best || left < best) best = left ? left : 1;
  };
  for (std::string line; std::getline(in, line);) {
    // v2: "0::/path"; v1: "N:memory:/path" (or a list of controllers containing memory)
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string ctrls = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    const bool v2 = ctrls.empty();
    bool v1 = false;
    std::stringstream cs(ctrls);
    for (std::string c; std::getline(cs, c, ',');) v1 = v1 || c == "memory";
    if (!v2 && !v1) continue;
    // v2 alone is mounted at the root; beside v1 ("hybrid") under unified/.
    std::string base = v2 ? root : root + "/memory";
    if (v2 && !std::ifstream(root + "/cgroup.controllers") && std::ifstream(root + "/unified/cgroup.controllers"))
      base = root + "/unified";
    while (true) {
      const std::string dir = base + (path == "/" ? "" : path);
      if (v2)
        consider(read_bytes(dir + "/memory.max"), read_bytes(dir + "/memory.current"));
      else
        consider(read_bytes(dir + "/memory.limit_in_bytes"), read_bytes(dir + "/memory.usage_in_bytes"));
      if (path.empty() || path == "/") break;
      const size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  }
  return best;
}

}  // namespace

int local_rank_count() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"})
    if (const char* s = std::getenv(v); s && *s) {
      const int n = std::atoi(s);
      if (n >= 1) return n;
    }
  return 1;
}

MemoryShare memory_share(const std::string& cgroup_root) {
  MemoryShare m;
  const size_t avail = mem_available();
  m.cgroup_left = cgroup_left(cgroup_root);
  m.available = avail;
  m.source = "MemAvailable";
  if (m.cgroup_left && (!avail || m.cgroup_left < avail)) {
    m.available = m.cgroup_left;
    m.source = "the cgroup's memory limit";
  }
  m.local_ranks = local_rank_count();
  m.per_rank = m.available / static_cast<size_t>(m.local_ranks);
  return m;
}

}  // namespace cs
