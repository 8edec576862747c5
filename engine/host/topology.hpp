#pragma once
// What this process runs on: host, CPU binding and its NUMA nodes, the CPU/NUMA/PCI summary of
// hwloc (when built with it), NICs (InfiniBand HCAs and their ports, network interfaces) with
// their speeds and PCIe links, GPUs seen on the PCI bus, the binary's hash, NCCL-related
// environment variables and the library versions the caller passes in. One JSON object per
// process; stdlib/cs/topo.lua gathers them from every rank and compares them.
//
// Every sysfs read goes through TopologyOptions::sysfs_root, so tests run on fixture trees
// (tests/fixtures/sysfs/<case>/...). Nothing here throws for a missing or unreadable file: what
// cannot be read is left out.
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "env_policy.hpp"

namespace cs {

// The hook for the CUDA/NVML side (left for the NCCL issue): called with the GPUs found on the
// PCI bus through sysfs (each {bdf, vendor, vendor_id, device_id, class_id, numa_node, pcie,
// source = "sysfs"}) and an empty list of links. It may add details to each GPU (name, uuid,
// cuda index, memory, driver) or replace the list, and fill gpu_links with the GPU<->GPU
// connections, e.g. {a = 0, b = 1, kind = "NVLink", gen = 4, links = 18} or
// {a =, b =, kind = "PIX" | "PXB" | "PHB" | "NODE" | "SYS"} as `nvidia-smi topo -m` names them.
// The results are the report's "gpus" and "gpu_links".
using GpuProbe = std::function<void(nlohmann::json& gpus, nlohmann::json& gpu_links)>;

// Sets the process-wide GPU probe used when TopologyOptions::gpu_probe is empty.
void set_gpu_probe(GpuProbe probe);

struct TopologyOptions {
  std::string sysfs_root = "/sys";
  // The binary whose SHA-256 is reported (empty: none).
  std::string exe_path = "/proc/self/exe";
  // Where the binary's hash is cached for the other ranks of this host and later runs, keyed by
  // the file's identity (device, inode, size, mtime, ctime): "auto" is default_hash_cache_dir()
  // (core/file_digest.hpp), "" no cache (every process hashes).
  std::string hash_cache_dir = "auto";
  // A hash is cached only for a file whose ctime is at least this old (a file rewritten within
  // the clock's granularity of its hash would keep its identity).
  double hash_cache_min_age_s = 2;
  // hwloc's summary; only taken when sysfs_root is "/sys" (hwloc reads the real machine).
  bool use_hwloc = true;
  // Environment variables reported (and compared across ranks): names with one of these
  // prefixes, or equal to one of them when the entry does not end in '_'. The default is the
  // engine's one list (env_policy.hpp): every family the environment audit lints, and
  // CUDA_VISIBLE_DEVICES. Credentials (is_secret_env_name) are never recorded.
  std::vector<std::string> env_prefixes = env_topology_names();
  // Library versions, reported as given (the bindings pass versions_json()).
  nlohmann::json versions = nlohmann::json::object();
  // Tests: these CPUs instead of the process's affinity mask.
  std::optional<std::vector<int>> affinity;
  // Overrides the process-wide GPU probe.
  GpuProbe gpu_probe;
};

// This process's topology. Keys: host, pid, exe {path, size, sha256, sha256_from}, cpu {affinity, cpus,
// count, numa_nodes, online}, numa [{node, cpus, count}], hwloc {...} (available = false when
// not built or not taken), nics [...], gpus [...], gpu_links [...], env {NAME = value},
// versions {...}. See docs in topology.cpp for each NIC's fields.
nlohmann::json local_topology(const TopologyOptions& opt = {});

// ---- pieces, public for the tests ----

// {path, size, sha256, sha256_from = "computed" | "host cache"} or {path, error}: the file's
// hash through core/file_digest.hpp's cache (with a cache_dir, the processes of a host hash each
// version of a file once; docs/scale.md).
nlohmann::json exe_info(const std::string& path, const std::string& cache_dir = "", double min_age_s = 2);

// "16.0 GT/s PCIe" / "8 GT/s" -> 4 / 3; 0 when unknown.
int pcie_gen_from_speed(const std::string& speed);
// The usable bandwidth of one lane in one direction, GB/s, by generation (after encoding).
double pcie_lane_gbytes(int gen);
// The PCIe link of a PCI device directory ({speed, gen, width, max_speed, max_gen, max_width,
// gbytes_per_s, max_gbytes_per_s, below_max_width, below_max_speed}); null when sysfs has no
// link attributes (virtual devices).
nlohmann::json read_pcie_link(const std::string& pci_dir);
// "200 Gb/sec (4X HDR)" -> 200; 0 when unknown.
double ib_rate_gbps(const std::string& rate);
// The PCI address (domain:bus:dev.fn) of a sysfs device entry (class/net/<if>/device,
// class/infiniband/<dev>/device), or "" when it is not a PCI device.
std::string pci_address_of(const std::string& device_path);
// "4: ACTIVE" -> "ACTIVE".
std::string strip_state_number(const std::string& s);

}  // namespace cs
