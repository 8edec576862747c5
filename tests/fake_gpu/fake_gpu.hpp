#pragma once
// Shared between the stand-in libcudart (fake_cuda.cpp) and libnccl (fake_nccl.cpp): the stream
// workers and the knobs. Test-only code: never built into a release (COMMSCRIPT_FAKE_GPU=ON).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

namespace fakegpu {

// Knobs from the environment (FAKE_GPU_*), read once.
struct Knobs {
  int devices = 8;                 // FAKE_GPU_COUNT
  bool strict = false;             // FAKE_GPU_STRICT=1: abort on misuse
  std::string driver;              // FAKE_GPU_DRIVER: "" (fine), "none", "old"
  double busbw_gbps = 100;         // FAKE_GPU_BUSBW_GBPS: virtual NCCL bus bandwidth (GB/s, 1e9 B/s)
  double copy_gbps = 50;           // FAKE_GPU_COPY_GBPS: virtual copy-engine bandwidth
  double lat_us = 0;               // FAKE_GPU_LAT_US: virtual latency of every NCCL operation
  int dma_delay_us = 2000;         // FAKE_GPU_DMA_DELAY_US: real delay of legacy-stream copies/memsets
  size_t mem_bytes = 16ull << 30;  // FAKE_GPU_MEM_GB
  std::string topo = "nvswitch";   // FAKE_GPU_TOPO: nvswitch | nvlink-pairs | pcie
};
const Knobs& knobs();

// Aborts the process with a message (strict mode).
[[noreturn]] void misuse(const std::string& what);
inline void strict_check(bool ok, const std::string& what) {
  if (!ok && knobs().strict) misuse(what);
}

// Work on a stream: `fn` runs on the stream's worker thread, in order, after everything enqueued
// before it (and, for the legacy stream, after the blocking streams' work); then the stream's
// virtual clock advances by `cost_us`. Returns false when the stream is not valid.
bool enqueue(cudaStream_t s, std::function<void()> fn, double cost_us);
int current_device();
std::string bus_id(int device);  // "0000:18:00.0"

}  // namespace fakegpu
