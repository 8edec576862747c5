#pragma once
// nvbandwidth-style copy bandwidths between the host and the GPUs of this host
// (docs/building.md "GPU"; nvbandwidth's method without its spin kernel).
#include <cstddef>
#include <nlohmann/json.hpp>

namespace cs {

struct CopyBwSpec {
  size_t bytes = size_t{64} << 20;  // per copy
  int loops = 16;                   // copies between the two events of one sample
  int samples = 3;                  // the median is reported
  bool peer = true;                 // also GPU<->GPU
};

// Copy-engine bandwidths (cudaMemcpyAsync between CUDA events, GB/s = 1e9 B/s) of every GPU this
// process sees, one pair at a time with nothing else running:
//   {host, bytes, loops, samples, devices = [{index, name, pci_bus_id}],
//    host_to_device = {pageable = [per GPU], pinned = [...]},
//    device_to_host = {pageable = [...], pinned = [...]},
//    device_local = [...]                      (a copy inside each GPU's memory),
//    peer_access = [[bool]]                    (cudaDeviceCanAccessPeer(row, column)),
//    peer = [[GB/s or null]]                   (GPU(row) -> GPU(column); null on the diagonal
//                                               and where peer access is not possible)}
// Throws InputError (no_device_message) when there is no usable device, UsageError on a bad spec.
nlohmann::json gpu_copy_bandwidth(const CopyBwSpec& spec);

}  // namespace cs
