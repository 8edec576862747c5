#pragma once
// The CUDA side shared by the device code of the engine (tensors, the NCCL backend, GPU
// topology): probing for devices, error checks, the current-device guard.
//
// Everything here compiles without CUDA: then there is no device, and cuda_probe() says why.
#include <cstddef>
#include <string>
#include <string_view>

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

// A CUDA version number (cudaRuntimeGetVersion, cudaDriverGetVersion, NVML's) as text: 13000 -> "13.0".
std::string cuda_version_text(int v);

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

}  // namespace cs
