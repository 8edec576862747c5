#pragma once
// nvbandwidth-style copy bandwidths between the host and the GPUs of this host
// (docs/building.md "GPU"; nvbandwidth's method without its spin kernel).
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace cs {

struct CopyBwSpec {
  size_t bytes = size_t{64} << 20;  // per copy
  int loops = 16;                   // copies between the two events of one sample
  int samples = 3;                  // the median is reported
  bool peer = true;                 // also GPU<->GPU
};

// Where a GPU sits in the host, from sysfs (what hwloc reads for a PCI device):
// <sysfs>/bus/pci/devices/<bdf>/numa_node and local_cpulist. numa is -1 and cpus empty when
// the kernel does not say (no NUMA, a virtual device).
struct GpuLocality {
  int numa = -1;
  std::vector<int> cpus;
};
GpuLocality gpu_locality(const std::string& bdf, const std::string& sysfs_root);
// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; empty on anything malformed.

// Copy-engine bandwidths (cudaMemcpyAsync between CUDA events, GB/s = 1e9 B/s) of every GPU this
// process sees. Host buffers are NUMA-local to each GPU, as nvbandwidth places them: the
// measuring thread runs on the GPU's local CPUs (sysfs local_cpulist; COMMSCRIPT_SYSFS replaces
// /sys for tests) while it allocates, first-touches and copies that GPU's host buffers.
// One copy at a time with nothing else running, then concurrent copies:
//   {host, bytes, loops, samples,
//    devices = [{index, name, pci_bus_id, numa_node (or null), host_buffers_local (bool)}],
//    host_to_device = {pageable = [per GPU], pinned = [...]},
//    device_to_host = {pageable = [...], pinned = [...]},
//    device_local = [...]                      (a copy inside each GPU's memory),
//    peer_access = [[bool]]                    (cudaDeviceCanAccessPeer(row, column)),
//    peer = [[GB/s or null]]                   (GPU(row) -> GPU(column); null on the diagonal
//                                               and where peer access is not possible),
//    bidirectional = {host_to_device = [...], device_to_host = [...]}
//                                              (pinned, both directions of one GPU at once),
//    all_gpus = {host_to_device = [...], device_to_host = [...],
//                host_to_device_total, device_to_host_total}
//                                              (pinned, every GPU at once in one direction;
//                                               each value is that GPU's copy, total the sum)}
// Concurrent copies are enqueued interleaved on one stream each (no spin kernel holds them at
// the start line, so the first copies of the first stream may run alone for a moment).
// Throws InputError (no_device_message) when there is no usable device, UsageError on a bad spec.
nlohmann::json gpu_copy_bandwidth(const CopyBwSpec& spec);

}  // namespace cs
