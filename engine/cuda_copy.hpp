#pragma once
// The CUDA side shared by the device code of the engine (tensors, the NCCL backend, GPU
// topology), and nvbandwidth-style copy bandwidths between the host and the GPUs of this host
// (shared/reference/benchmarks.md §4).
//
// Everything here compiles without CUDA: then there is no device, and cuda_probe() says why.
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#ifdef COMMSCRIPT_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

namespace cs {

// What cudaGetDeviceCount says on this process. count is 0 when there is no usable device, and
// `error` then tells why ("cudaErrorNoDevice: no CUDA-capable device is detected", or "built
// without CUDA"); it is empty when the call succeeded.
struct CudaProbe {
  int count = 0;
  std::string error;
};
CudaProbe cuda_probe();

// "<what>: no usable CUDA device on host <host> (cudaGetDeviceCount: <error or '0 devices'>)".
std::string no_device_message(std::string_view what, const std::string& host, const CudaProbe& p);

// Throws InputError with no_device_message() when this process sees no device; returns the
// number of devices otherwise.
int require_cuda_devices(std::string_view what);

// PCI addresses as sysfs writes them: "00000000:3B:00.0" (NVML) or "0000:3B:00.0" (CUDA) ->
// "0000:3b:00.0". Anything that is not domain:bus:dev.fn is returned lower-cased.
std::string normalize_bdf(std::string_view bdf);

#ifdef COMMSCRIPT_HAVE_NCCL
// Throws Error(runtime) "<call>: <cudaGetErrorName>: <cudaGetErrorString>" unless e is success.
void cuda_check(cudaError_t e, const char* call);
std::string cuda_error_text(cudaError_t e);

// Makes `device` current for its lifetime and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};
#endif

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
