#include "copy_bw.hpp"

#include <algorithm>
#include <vector>

#include "cuda_support.hpp"
#include "error.hpp"
#include "host_name.hpp"
#include "tensor.hpp"

namespace cs {

#ifndef COMMSCRIPT_HAVE_NCCL

nlohmann::json gpu_copy_bandwidth(const CopyBwSpec&) {
  require_cuda_devices("gpu_copy_bw");
  return nullptr;  // not reached
}

#else

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
  out["host"] = host_name();
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
        if (e == cudaErrorPeerAccessAlreadyEnabled)
          cudaGetLastError();
        else
          cuda_check(e, "cudaDeviceEnablePeerAccess");
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
