#pragma once
// The CUDA runtime's side of cuda_support.hpp, with CUDA types: included only by sources that a
// build with CUDA compiles (engine/CMakeLists.txt lists them apart), never by a file both builds
// compile. What a build without CUDA answers instead is in cuda_absent.cpp.
#include <cuda_runtime_api.h>

#include <string>

#include "cuda_support.hpp"

namespace cs {

// Throws Error(runtime) "<call>: <cudaGetErrorName>: <cudaGetErrorString>" unless e is success.
void cuda_check(cudaError_t e, const char* call);
std::string cuda_error_text(cudaError_t e);

// cudaMemcpy from pageable memory to a device, device-to-device copies and cudaMemset on device
// memory may return before the data lands, and they run on the legacy default stream, which
// the NCCL backend's non-blocking stream does not wait for: a write to device memory is
// complete only after this (else a fill or a poisoning may land after NCCL read the buffer).
void settle_legacy_stream();

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

}  // namespace cs
