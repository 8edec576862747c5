#include "cuda_support.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include "error.hpp"
#include "gpu_libs.hpp"
#include "host_name.hpp"

namespace cs {

std::string no_device_message(std::string_view what, const std::string& host, const CudaProbe& p) {
  const std::string why = p.error.empty() ? std::to_string(p.count) + " devices" : p.error;
  return std::string(what) + ": no usable CUDA device on host " + host + " (cudaGetDeviceCount: " + why + ")";
}

int require_cuda_devices(std::string_view what) {
  const CudaProbe p = cuda_probe();
  if (p.count <= 0) throw InputError(no_device_message(what, host_name(), p));
  return p.count;
}

std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

std::string normalize_bdf(std::string_view bdf) {
  std::string s;
  for (char c : bdf) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  // domain:bus:dev.fn with a domain of any width: keep four hex digits, as sysfs does.
  const size_t c1 = s.find(':');
  if (c1 == std::string::npos || s.find(':', c1 + 1) == std::string::npos) return s;
  std::string dom = s.substr(0, c1);
  if (dom.empty() ||
      !std::all_of(dom.begin(), dom.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
    return s;
  while (dom.size() > 4 && dom[0] == '0') dom.erase(0, 1);
  while (dom.size() < 4) dom.insert(0, "0");
  return dom + s.substr(c1);
}

#ifndef COMMSCRIPT_HAVE_NCCL

CudaProbe cuda_probe() { return {0, "built without CUDA"}; }

#else

std::string cuda_error_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

void cuda_check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // reset the thread's last error, so the next call does not report it again
  throw Error(ExitCode::runtime, std::string(call) + " failed: " + cuda_error_text(e));
}

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

#endif

}  // namespace cs
