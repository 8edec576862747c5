#include "cuda_copy.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include "error.hpp"
#include "job.hpp"
#include "tensor.hpp"

namespace cs {

std::string no_device_message(std::string_view what, const std::string& host, const CudaProbe& p) {
  const std::string why = p.error.empty() ? std::to_string(p.count) + " devices" : p.error;
  return std::string(what) + ": no usable CUDA device on host " + host + " (cudaGetDeviceCount: " + why + ")";
}

int require_cuda_devices(std::string_view what) {
  const CudaProbe p = cuda_probe();
  if (p.count <= 0) throw InputError(no_device_message(what, job::hostname(), p));
  return p.count;
}

std::string normalize_bdf(std::string_view bdf) {
  std::string s;
  for (char c : bdf) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  // domain:bus:dev.fn with a domain of any width: keep four hex digits, as sysfs does.
  const size_t c1 = s.find(':');
  if (c1 == std::string::npos || s.find(':', c1 + 1) == std::string::npos) return s;
  std::string dom = s.substr(0, c1);
  if (dom.empty() || !std::all_of(dom.begin(), dom.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
    return s;
  while (dom.size() > 4 && dom[0] == '0') dom.erase(0, 1);
  while (dom.size() < 4) dom.insert(0, "0");
  return dom + s.substr(c1);
}

#ifndef COMMSCRIPT_HAVE_NCCL

CudaProbe cuda_probe() { return {0, "built without CUDA"}; }

nlohmann::json gpu_copy_bandwidth(const CopyBwSpec&) {
  require_cuda_devices("gpu_copy_bw");
  return nullptr;  // not reached
}

#else

std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

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
  const cudaError_t e = cudaGetDeviceCount(&p.count);
  if (e != cudaSuccess) {
    p.count = 0;
    p.error = cuda_error_text(e);
    cudaGetLastError();
  }
  return p;
}

namespace {

// A stream and two events on one device.
struct Timer {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  explicit Timer(int device) {
    DeviceGuard g(device);
    cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    cuda_check(cudaEventCreate(&start), "cudaEventCreate");
    cuda_check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~Timer() {
    if (stop) cudaEventDestroy(stop);
    if (start) cudaEventDestroy(start);
    if (stream) cudaStreamDestroy(stream);
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
};

// nvbandwidth's method without its spin kernel: one untimed copy, then per sample a start
// event, `loops` copies and a stop event; the median sample's GB/s.
double measure(int device, void* dst, const void* src, const CopyBwSpec& spec) {
  DeviceGuard g(device);
  Timer t(device);
  cuda_check(cudaMemcpyAsync(dst, src, spec.bytes, cudaMemcpyDefault, t.stream), "cudaMemcpyAsync");
  cuda_check(cudaStreamSynchronize(t.stream), "cudaStreamSynchronize");
  std::vector<double> gbs;
  for (int s = 0; s < spec.samples; ++s) {
    cuda_check(cudaEventRecord(t.start, t.stream), "cudaEventRecord");
    for (int i = 0; i < spec.loops; ++i)
      cuda_check(cudaMemcpyAsync(dst, src, spec.bytes, cudaMemcpyDefault, t.stream), "cudaMemcpyAsync");
    cuda_check(cudaEventRecord(t.stop, t.stream), "cudaEventRecord");
    cuda_check(cudaEventSynchronize(t.stop), "cudaEventSynchronize");
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, t.start, t.stop), "cudaEventElapsedTime");
    const double sec = static_cast<double>(ms) * 1e-3;
    gbs.push_back(sec > 0 ? static_cast<double>(spec.bytes) * spec.loops / sec / 1e9 : 0.0);
  }
  std::sort(gbs.begin(), gbs.end());
  return gbs[gbs.size() / 2];
}

}  // namespace

nlohmann::json gpu_copy_bandwidth(const CopyBwSpec& spec) {
  if (spec.bytes == 0 || spec.loops < 1 || spec.samples < 1)
    throw UsageError("gpu copy bandwidth: bytes, loops and samples must be positive");
  const int n = require_cuda_devices("gpu_copy_bw");
  using json = nlohmann::json;
  json out;
  out["host"] = job::hostname();
  out["bytes"] = spec.bytes;
  out["loops"] = spec.loops;
  out["samples"] = spec.samples;
  json devices = json::array();
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties");
    char bus[32] = {0};
    cuda_check(cudaDeviceGetPCIBusId(bus, sizeof bus, d), "cudaDeviceGetPCIBusId");
    devices.push_back({{"index", d}, {"name", prop.name}, {"pci_bus_id", normalize_bdf(bus)}});
  }
  out["devices"] = devices;

  Tensor pageable = Tensor::host(DType::uint8, spec.bytes);
  Tensor pinned = Tensor::pinned(DType::uint8, spec.bytes);
  std::vector<Tensor> dev_a, dev_b;
  for (int d = 0; d < n; ++d) {
    dev_a.push_back(Tensor::on_device(DType::uint8, spec.bytes, d));
    dev_b.push_back(Tensor::on_device(DType::uint8, spec.bytes, d));
  }
  json h2d_pageable = json::array(), h2d_pinned = json::array(), d2h_pageable = json::array(),
       d2h_pinned = json::array(), local = json::array();
  for (int d = 0; d < n; ++d) {
    const size_t i = static_cast<size_t>(d);
    h2d_pageable.push_back(measure(d, dev_a[i].data(), pageable.data(), spec));
    h2d_pinned.push_back(measure(d, dev_a[i].data(), pinned.data(), spec));
    d2h_pageable.push_back(measure(d, pageable.data(), dev_a[i].data(), spec));
    d2h_pinned.push_back(measure(d, pinned.data(), dev_a[i].data(), spec));
    local.push_back(measure(d, dev_b[i].data(), dev_a[i].data(), spec));
  }
  out["host_to_device"] = {{"pageable", h2d_pageable}, {"pinned", h2d_pinned}};
  out["device_to_host"] = {{"pageable", d2h_pageable}, {"pinned", d2h_pinned}};
  out["device_local"] = local;

  json access = json::array(), peer = json::array();
  for (int a = 0; a < n; ++a) {
    json arow = json::array(), prow = json::array();
    for (int b = 0; b < n; ++b) {
      int can = 0;
      if (a != b) cuda_check(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer");
      arow.push_back(a == b ? json(nullptr) : json(can != 0));
      if (a == b || !can || !spec.peer) {
        prow.push_back(nullptr);
        continue;
      }
      {
        DeviceGuard g(a);  // the copy engine of the source pushes (nvbandwidth's "write")
        const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
        else cuda_check(e, "cudaDeviceEnablePeerAccess");
      }
      prow.push_back(measure(a, dev_a[static_cast<size_t>(b)].data(), dev_a[static_cast<size_t>(a)].data(), spec));
    }
    access.push_back(arow);
    peer.push_back(prow);
  }
  out["peer_access"] = access;
  out["peer"] = peer;
  return out;
}

#endif

}  // namespace cs
