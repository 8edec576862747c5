// The copy-engine bandwidths (copy_bw.hpp), CUDA's half: compiled only in a build with CUDA
// (engine/CMakeLists.txt); measure/cuda_absent.cpp refuses them in a build without.
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "copy_bw.hpp"
#include "cuda_device.hpp"
#include "error.hpp"
#include "host_name.hpp"
#include "tensor.hpp"

namespace cs {

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

struct Copy {
  int device;  // whose copy engine (the stream's device)
  void* dst;
  const void* src;
};

// nvbandwidth's method without its spin kernel: one untimed copy each, then per sample a start
// event, `loops` copies and a stop event on each copy's own stream, the copies of all streams
// enqueued interleaved so that they run at the same time; per copy, the median sample's GB/s.
std::vector<double> measure_many(const std::vector<Copy>& copies, const CopyBwSpec& spec) {
  std::vector<std::unique_ptr<Timer> > t;
  for (const Copy& c : copies) t.push_back(std::make_unique<Timer>(c.device));
  for (size_t i = 0; i < copies.size(); ++i)
    cuda_check(cudaMemcpyAsync(copies[i].dst, copies[i].src, spec.bytes, cudaMemcpyDefault, t[i]->stream),
               "cudaMemcpyAsync");
  for (auto& x : t) cuda_check(cudaStreamSynchronize(x->stream), "cudaStreamSynchronize");
  std::vector<std::vector<double> > gbs(copies.size());
  for (int s = 0; s < spec.samples; ++s) {
    for (auto& x : t) cuda_check(cudaEventRecord(x->start, x->stream), "cudaEventRecord");
    for (int l = 0; l < spec.loops; ++l)
      for (size_t i = 0; i < copies.size(); ++i)
        cuda_check(cudaMemcpyAsync(copies[i].dst, copies[i].src, spec.bytes, cudaMemcpyDefault, t[i]->stream),
                   "cudaMemcpyAsync");
    for (auto& x : t) cuda_check(cudaEventRecord(x->stop, x->stream), "cudaEventRecord");
    for (size_t i = 0; i < copies.size(); ++i) {
      cuda_check(cudaEventSynchronize(t[i]->stop), "cudaEventSynchronize");
      float ms = 0;
      cuda_check(cudaEventElapsedTime(&ms, t[i]->start, t[i]->stop), "cudaEventElapsedTime");
      const double sec = static_cast<double>(ms) * 1e-3;
      gbs[i].push_back(sec > 0 ? static_cast<double>(spec.bytes) * spec.loops / sec / 1e9 : 0.0);
    }
  }
  std::vector<double> out;
  for (auto& v : gbs) {
    std::sort(v.begin(), v.end());
    out.push_back(v[v.size() / 2]);
  }
  return out;
}

double measure(int device, void* dst, const void* src, const CopyBwSpec& spec) {
  DeviceGuard g(device);
  return measure_many({{device, dst, src}}, spec)[0];
}

// Runs this thread on `cpus` for its lifetime (nothing when empty or refused), then restores.
class CpuPin {
 public:
  explicit CpuPin(const std::vector<int>& cpus) {
    if (cpus.empty() || sched_getaffinity(0, sizeof saved_, &saved_) != 0) return;
    cpu_set_t want;
    CPU_ZERO(&want);
    for (int c : cpus)
      if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &want);
    pinned_ = sched_setaffinity(0, sizeof want, &want) == 0;
  }
  ~CpuPin() {
    if (pinned_) sched_setaffinity(0, sizeof saved_, &saved_);
  }
  bool pinned() const { return pinned_; }
  CpuPin(const CpuPin&) = delete;
  CpuPin& operator=(const CpuPin&) = delete;

 private:
  cpu_set_t saved_{};
  bool pinned_ = false;
};

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
  const char* sys_env = std::getenv("COMMSCRIPT_SYSFS");
  const std::string sysfs = sys_env && *sys_env ? sys_env : "/sys";
  json devices = json::array();
  std::vector<GpuLocality> where;
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties");
    char bus[32] = {0};
    cuda_check(cudaDeviceGetPCIBusId(bus, sizeof bus, d), "cudaDeviceGetPCIBusId");
    where.push_back(gpu_locality(normalize_bdf(bus), sysfs));
    devices.push_back({{"index", d},
                       {"name", prop.name},
                       {"pci_bus_id", normalize_bdf(bus)},
                       {"numa_node", where.back().numa >= 0 ? json(where.back().numa) : json(nullptr)}});
  }

  // Each GPU's host buffers, allocated and first touched on the GPU's local CPUs, so that the
  // kernel places them on its NUMA node.
  std::vector<Tensor> pageable, pinned, dev_a, dev_b;
  for (int d = 0; d < n; ++d) {
    const size_t i = static_cast<size_t>(d);
    CpuPin pin(where[i].cpus);
    devices[i]["host_buffers_local"] = pin.pinned();
    pageable.push_back(Tensor::host(DType::uint8, spec.bytes));
    pinned.push_back(Tensor::pinned(DType::uint8, spec.bytes));
    dev_a.push_back(Tensor::on_device(DType::uint8, spec.bytes, d));
    dev_b.push_back(Tensor::on_device(DType::uint8, spec.bytes, d));
  }
  out["devices"] = devices;
  json h2d_pageable = json::array(), h2d_pinned = json::array(), d2h_pageable = json::array(),
       d2h_pinned = json::array(), local = json::array(), bi_h2d = json::array(), bi_d2h = json::array();
  for (int d = 0; d < n; ++d) {
    const size_t i = static_cast<size_t>(d);
    CpuPin pin(where[i].cpus);
    h2d_pageable.push_back(measure(d, dev_a[i].data(), pageable[i].data(), spec));
    h2d_pinned.push_back(measure(d, dev_a[i].data(), pinned[i].data(), spec));
    d2h_pageable.push_back(measure(d, pageable[i].data(), dev_a[i].data(), spec));
    d2h_pinned.push_back(measure(d, pinned[i].data(), dev_a[i].data(), spec));
    local.push_back(measure(d, dev_b[i].data(), dev_a[i].data(), spec));
    // Both directions at once: host -> dev_a while dev_b -> host (its own pinned buffer).
    Tensor back = Tensor::pinned(DType::uint8, spec.bytes);
    DeviceGuard g(d);
    const auto both = measure_many({{d, dev_a[i].data(), pinned[i].data()}, {d, back.data(), dev_b[i].data()}}, spec);
    bi_h2d.push_back(both[0]);
    bi_d2h.push_back(both[1]);
  }
  out["host_to_device"] = {{"pageable", h2d_pageable}, {"pinned", h2d_pinned}};
  out["device_to_host"] = {{"pageable", d2h_pageable}, {"pinned", d2h_pinned}};
  out["device_local"] = local;
  out["bidirectional"] = {{"host_to_device", bi_h2d}, {"device_to_host", bi_d2h}};
  {  // every GPU at once, one direction at a time, each from its NUMA-local pinned buffer
    std::vector<Copy> h2d, d2h;
    for (int d = 0; d < n; ++d) {
      const size_t i = static_cast<size_t>(d);
      h2d.push_back({d, dev_a[i].data(), pinned[i].data()});
      d2h.push_back({d, pinned[i].data(), dev_a[i].data()});
    }
    const auto up = measure_many(h2d, spec), down = measure_many(d2h, spec);
    double up_sum = 0, down_sum = 0;
    for (double v : up) up_sum += v;
    for (double v : down) down_sum += v;
    out["all_gpus"] = {{"host_to_device", up},
                       {"device_to_host", down},
                       {"host_to_device_total", up_sum},
                       {"device_to_host_total", down_sum}};
  }

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

}  // namespace cs
