#pragma once
// The GPUs of this host as CUDA and NVML see them: name, PCI bus id, PCIe link (sysfs), NUMA
// node, memory, peer access between every pair, and NVLink state per GPU and per pair. NVML is
// loaded at run time (dlopen "libnvidia-ml.so.1") when present, so the binary needs no driver
// to start. Built only with CUDA (gpu_topology.cpp); elsewhere there is no driver to ask
// (cuda_absent.cpp). topology_level_name is in topology.cpp, for both builds.
#include <nlohmann/json.hpp>
#include <string>

namespace cs {

struct GpuTopologyOptions {
  std::string sysfs_root = "/sys";  // for the PCIe link and NUMA node of each GPU
  bool use_nvml = true;
};

// {host, cuda_runtime, cuda_driver, device_count,
//  gpus = [{index, name, pci_bus_id, uuid, memory_bytes, compute_capability, multiprocessors,
//           numa_node, pcie = {...} (sysfs; see read_pcie_link in topology.hpp; where sysfs
//           does not say, NVML's nvmlDeviceGet{Curr,Max}PcieLink{Generation,Width} with
//           source = "nvml", and the NUMA node from nvmlDeviceGetMemoryAffinity),
//           nvlink = {active, present, down = [links present but not up],
//                     links = [{link, version, remote_pci_bus_id, remote_index, remote_type}]}
//                    or {available = false, why}}],
//  peer_access = [[bool or null]]   (cudaDeviceCanAccessPeer(row, column); null on the diagonal),
//  nvlink_matrix = [[links]]        (active NVLinks between row and column; null without NVML),
//  path = [[name]]                  (NVML common ancestor of row and column: topology_level_name),
//  nvml = {available, driver_version | why}}
// When there is no usable device it returns an empty object and sets *error (never throws for
// a missing driver).
nlohmann::json gpu_topology(const GpuTopologyOptions& opt, std::string* error);

// The probe topology.hpp's local_topology() calls (set_gpu_probe): adds CUDA and NVML details to
// the GPUs it found on the PCI bus (matched by PCI address) and the NVLink / PCIe path between
// every pair to gpu_links ({a, b, kind = "NVLink" | "PIX" | "PXB" | "PHB" | "NODE" | "SYS",
// links, version}, a and b indexes into gpus). Each GPU gains nvlinks_active, nvlinks_present,
// nvlinks_down (when some are down), nvswitch_links, nvlink_version. GPUs CUDA sees that sysfs
// does not list are appended (source "cuda+nvml"). Leaves both untouched without a device.
void probe_gpus(nlohmann::json& gpus, nlohmann::json& gpu_links);

// NVML's topology level (nvmlGpuTopologyLevel_t: 0, 10, 20, 30, 40, 50) as `nvidia-smi topo -m`
// names it: "internal" (one board), "PIX", "PXB", "PHB", "NODE", "SYS"; "" for anything else.
std::string topology_level_name(int level);

}  // namespace cs
