// The CUDA runtime's half of cuda_support.hpp and cuda_device.hpp: compiled only in a build with
// CUDA (engine/CMakeLists.txt); cuda_absent.cpp answers in a build without.
#include "cuda_device.hpp"

#include <string>

#include "error.hpp"
#include "gpu_libs.hpp"

namespace cs {

std::string cuda_error_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

void cuda_check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // reset the thread's last error, so the next call does not report it again
  throw Error(ExitCode::runtime, std::string(call) + " failed: " + cuda_error_text(e));
}

void settle_legacy_stream() { cuda_check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize"); }

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (previous_ != device) cuda_check(cudaSetDevice(device), "cudaSetDevice");
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

CudaProbe cuda_probe() {
  CudaProbe p;
  if (const GpuLib& rt = cudart_lib(); !rt.loaded) {
    p.error = rt.why;
    return p;
  }
  const cudaError_t e = cudaGetDeviceCount(&p.count);
  if (e != cudaSuccess) {
    p.count = 0;
    p.error = cuda_error_text(e);
    cudaGetLastError();
    if (e == cudaErrorInsufficientDriver) {
      // CUDA says the same with no driver at all and with one too old: tell them apart.
      int drv = 0, rt = 0;
      cudaDriverGetVersion(&drv);
      cudaRuntimeGetVersion(&rt);
      auto ver = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
      if (drv <= 0)
        p.error = "no NVIDIA driver is installed (libcuda.so.1 not found; " + p.error + ")";
      else
        p.error = "the NVIDIA driver is too old: it supports CUDA " + ver(drv) +
                  ", this commscript's runtime is CUDA " + ver(rt) + " (update the driver; " + p.error + ")";
    }
  }
  return p;
}

bool is_device_memory(const void* p) {
  cudaPointerAttributes at{};
  if (cudaPointerGetAttributes(&at, p) == cudaSuccess && at.type == cudaMemoryTypeDevice) return true;
  cudaGetLastError();  // a host pointer the runtime does not know: not an error to keep
  return false;
}

void copy_memory(void* dst, const void* src, size_t n) {
  cuda_check(cudaMemcpy(dst, src, n, cudaMemcpyDefault), "cudaMemcpy");
  settle_legacy_stream();
}

bool zero_device_memory(void* p, size_t n) {
  cuda_check(cudaMemset(p, 0, n), "cudaMemset");
  settle_legacy_stream();
  return true;
}

void free_pinned_memory(void* p) { cudaFreeHost(p); }

void free_device_memory(void* p) { cudaFree(p); }

}  // namespace cs
