// A host-side stand-in for the CUDA runtime subset commscript uses (libcudart.so.13). Device
// memory is host memory, registered so cudaPointerGetAttributes can tell where a pointer lives;
// every stream is a worker thread that really runs its work asynchronously. A stream's clock is
// the host's steady clock, as a GPU's timestamps are real time: a piece of work starts when the
// stream reaches it (not before it was enqueued) and ends after its modelled cost or after the
// host work that performs it, whichever is later (the worker waits out the difference, so the
// host sees the stream busy for as long as its events say); events stamp that clock
// (cudaEventRecord, cudaEventElapsedTime). Where the modelled cost dominates (a slow
// FAKE_GPU_BUSBW_GBPS) and the work was enqueued ahead, elapsed times are exactly the model's. The legacy default
// stream orders itself against the blocking streams of its device, non-blocking streams do not; cudaMemcpy from
// pageable memory to a device and cudaMemset return before the data lands (after FAKE_GPU_DMA_DELAY_US), as the CUDA
// documentation allows. Test-only: never shipped.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "fake_gpu.hpp"

namespace fakegpu {

namespace {
double env_num(const char* name, double dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atof(v) : dflt;
}
}  // namespace

const Knobs& knobs() {
  static const Knobs k = [] {
    Knobs k;
    k.devices = static_cast<int>(env_num("FAKE_GPU_COUNT", 8));
    k.strict = env_num("FAKE_GPU_STRICT", 0) != 0;
    if (const char* d = std::getenv("FAKE_GPU_DRIVER")) k.driver = d;
    k.busbw_gbps = env_num("FAKE_GPU_BUSBW_GBPS", 100);
    k.copy_gbps = env_num("FAKE_GPU_COPY_GBPS", 50);
    k.lat_us = env_num("FAKE_GPU_LAT_US", 0);
    k.dma_delay_us = static_cast<int>(env_num("FAKE_GPU_DMA_DELAY_US", 2000));
    k.mem_bytes = static_cast<size_t>(env_num("FAKE_GPU_MEM_GB", 16) * (1ull << 30));
    if (const char* t = std::getenv("FAKE_GPU_TOPO")) k.topo = t;
    return k;
  }();
  return k;
}

void misuse(const std::string& what) {
  std::fprintf(stderr, "fake GPU (strict): misuse: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

std::string bus_id(int device) {
  static const int buses[] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};
  char b[32];
  std::snprintf(b, sizeof b, "0000:%02x:00.0", device < 8 ? buses[device] : 0xe0 + device);
  return b;
}

namespace {

struct Event;

// The stream clock: microseconds of the host's steady clock since the first use.
double real_us() {
  static const auto t0 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

struct Task {
  std::function<void()> fn;
  double cost_us = 0;
  double enq_us = 0;                                       // when the host enqueued it
  Event* event = nullptr;                                  // a record: stamps the clock
  std::vector<std::pair<struct Stream*, uint64_t>> after;  // (stream, tasks it must have done)
  int delay_us = 0;
};

struct Event {
  std::atomic<bool> recorded{false}, done{false};
  double t_us = 0;
  std::atomic<uint64_t> generation{0};
};

struct Stream {
  int device = 0;
  bool nonblocking = false, legacy = false;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Task> q;
  uint64_t enq = 0, done = 0;
  double vclock = 0;
  bool stop = false;
  std::thread worker;

  void loop() {
    for (;;) {
      Task t;
      {
        std::unique_lock<std::mutex> g(mu);
        cv.wait(g, [&] { return stop || !q.empty(); });
        if (q.empty()) return;
        t = std::move(q.front());
      }
      double start = t.enq_us;
      for (auto& [s, n] : t.after) {
        std::unique_lock<std::mutex> g(s->mu);
        s->cv.wait(g, [&] { return s->done >= n; });
        start = std::max(start, s->vclock);
      }
      {
        std::lock_guard<std::mutex> g(mu);
        start = std::max(start, vclock);
      }
      if (t.delay_us) std::this_thread::sleep_for(std::chrono::microseconds(t.delay_us));
      if (t.fn) t.fn();
      double end = start + t.cost_us;
      if (t.fn || t.delay_us || t.cost_us > 0) {
        const double now = real_us();
        if (now < end)
          std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(end - now));
        else
          end = now;  // the host work took longer than the modelled cost
      }
      {
        std::lock_guard<std::mutex> g(mu);
        vclock = end;
        if (t.event) {
          t.event->t_us = vclock;
          t.event->done = true;
        }
        q.pop_front();
        ++done;
      }
      cv.notify_all();
    }
  }
  void start() {
    worker = std::thread([this] { loop(); });
  }
  void finish() {
    {
      std::lock_guard<std::mutex> g(mu);
      stop = true;
    }
    cv.notify_all();
    if (worker.joinable()) worker.join();
  }
  bool idle() {
    std::lock_guard<std::mutex> g(mu);
    return done == enq;
  }
  void sync() {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [&] { return done == enq; });
  }
};

struct Alloc {
  size_t bytes;
  int device;  // -1: pinned host
};

struct State {
  std::mutex mu;
  std::map<uintptr_t, Alloc> allocs;
  std::vector<Stream*> streams;  // every live stream
  std::map<int, Stream*> legacy;
  std::map<int, size_t> used;
  std::map<std::pair<int, int>, bool> peer;
};
State& st() {
  static State* s = new State;  // never destroyed: workers may outlive static destruction
  return *s;
}

thread_local int t_device = 0;
thread_local cudaError_t t_last = cudaSuccess;

cudaError_t ret(cudaError_t e) {
  if (e != cudaSuccess) t_last = e;
  return e;
}

cudaError_t driver_error() {
  const std::string& d = knobs().driver;
  if (d == "none" || d == "old") return cudaErrorInsufficientDriver;
  if (knobs().devices <= 0) return cudaErrorNoDevice;
  return cudaSuccess;
}

Stream* legacy_of(int device) {
  std::lock_guard<std::mutex> g(st().mu);
  Stream*& l = st().legacy[device];
  if (!l) {
    l = new Stream;
    l->device = device;
    l->legacy = true;
    l->start();
    st().streams.push_back(l);
  }
  return l;
}

Stream* resolve(cudaStream_t s) {
  if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return legacy_of(t_device);
  Stream* p = reinterpret_cast<Stream*>(s);
  std::lock_guard<std::mutex> g(st().mu);
  for (Stream* x : st().streams)
    if (x == p) return p;
  strict_check(false, "a stream that does not exist (destroyed?)");
  return nullptr;
}

// The legacy stream's implicit ordering.
std::vector<std::pair<Stream*, uint64_t>> implicit_deps(Stream* s) {
  std::vector<std::pair<Stream*, uint64_t>> deps;
  if (s->nonblocking) return deps;
  std::lock_guard<std::mutex> g(st().mu);
  for (Stream* x : st().streams) {
    if (x == s || x->device != s->device || x->nonblocking) continue;
    if (s->legacy || x->legacy) {
      std::lock_guard<std::mutex> gx(x->mu);
      deps.emplace_back(x, x->enq);
    }
  }
  return deps;
}

void push(Stream* s, Task t) {
  t.after = implicit_deps(s);
  t.enq_us = real_us();
  {
    std::lock_guard<std::mutex> g(s->mu);
    s->q.push_back(std::move(t));
    ++s->enq;
  }
  s->cv.notify_all();
}

// Where a pointer lives: -2 pageable (unknown), -1 pinned, >= 0 device.
int where(const void* p, size_t* left = nullptr) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> g(st().mu);
  auto it = st().allocs.upper_bound(u);
  if (it == st().allocs.begin()) return -2;
  --it;
  if (u >= it->first + std::max<size_t>(it->second.bytes, 1)) return -2;
  if (left) *left = it->first + it->second.bytes - u;
  return it->second.device;
}

void device_sync(int device) {
  std::vector<Stream*> all;
  {
    std::lock_guard<std::mutex> g(st().mu);
    for (Stream* x : st().streams)
      if (x->device == device) all.push_back(x);
  }
  for (Stream* x : all) x->sync();
}

double copy_cost(size_t n) { return static_cast<double>(n) / (knobs().copy_gbps * 1e3); }

}  // namespace

bool enqueue(cudaStream_t s, std::function<void()> fn, double cost_us) {
  Stream* p = resolve(s);
  if (!p) return false;
  Task t;
  t.fn = std::move(fn);
  t.cost_us = cost_us;
  push(p, std::move(t));
  return true;
}

int current_device() { return t_device; }

}  // namespace fakegpu

using namespace fakegpu;

extern "C" {

cudaError_t cudaGetDeviceCount(int* n) {
  if (const cudaError_t e = driver_error(); e != cudaSuccess) {
    *n = 0;
    return ret(e);
  }
  *n = knobs().devices;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* v) {
  const std::string& d = knobs().driver;
  *v = d == "none" ? 0 : d == "old" ? 12020 : 13000;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInsufficientDriver:
      return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorPeerAccessAlreadyEnabled:
      return "cudaErrorPeerAccessAlreadyEnabled";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    default:
      return "fake GPU error";
  }
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = t_last;
  t_last = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return t_last; }

cudaError_t cudaSetDevice(int d) {
  if (const cudaError_t e = driver_error(); e != cudaSuccess) return ret(e);
  if (d < 0 || d >= knobs().devices) return ret(cudaErrorInvalidDevice);
  t_device = d;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* d) {
  if (const cudaError_t e = driver_error(); e != cudaSuccess) return ret(e);
  *d = t_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  if (d < 0 || d >= knobs().devices) return ret(cudaErrorInvalidDevice);
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->name, sizeof p->name, "Fake GPU %d (commscript stand-in, host memory)", d);
  p->totalGlobalMem = knobs().mem_bytes;
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = 132;
  unsigned bus = 0;
  std::sscanf(bus_id(d).c_str(), "0000:%x", &bus);
  p->pciBusID = static_cast<int>(bus);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* out, int len, int d) {
  if (d < 0 || d >= knobs().devices) return ret(cudaErrorInvalidDevice);
  std::snprintf(out, static_cast<size_t>(len), "%s", bus_id(d).c_str());
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int* can, int a, int b) {
  if (a < 0 || b < 0 || a >= knobs().devices || b >= knobs().devices) return ret(cudaErrorInvalidDevice);
  *can = a != b;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int) {
  std::lock_guard<std::mutex> g(st().mu);
  bool& on = st().peer[{t_device, peer}];
  if (on) return ret(cudaErrorPeerAccessAlreadyEnabled);
  on = true;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  device_sync(t_device);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_b, size_t* total) {
  std::lock_guard<std::mutex> g(st().mu);
  *total = knobs().mem_bytes;
  const size_t used = st().used[t_device];
  *free_b = used < *total ? *total - used : 0;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t n) {
  if (const cudaError_t e = driver_error(); e != cudaSuccess) return ret(e);
  {
    std::lock_guard<std::mutex> g(st().mu);
    if (st().used[t_device] + n > knobs().mem_bytes) return ret(cudaErrorMemoryAllocation);
  }
  void* q = std::aligned_alloc(256, (std::max<size_t>(n, 1) + 255) / 256 * 256);
  if (!q) return ret(cudaErrorMemoryAllocation);
  std::memset(q, 0xA5, std::max<size_t>(n, 1));  // device memory starts as garbage
  std::lock_guard<std::mutex> g(st().mu);
  st().allocs[reinterpret_cast<uintptr_t>(q)] = {n, t_device};
  st().used[t_device] += n;
  *p = q;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  const int d = where(p);
  if (d < 0) {
    strict_check(false, "cudaFree of a pointer cudaMalloc did not return");
    return ret(cudaErrorInvalidValue);
  }
  device_sync(d);  // cudaFree synchronises the device
  {
    std::lock_guard<std::mutex> g(st().mu);
    auto it = st().allocs.find(reinterpret_cast<uintptr_t>(p));
    if (it == st().allocs.end()) return ret(cudaErrorInvalidValue);
    st().used[d] -= it->second.bytes;
    st().allocs.erase(it);
  }
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** p, size_t n, unsigned int) {
  if (const cudaError_t e = driver_error(); e != cudaSuccess) return ret(e);
  void* q = std::aligned_alloc(4096, (std::max<size_t>(n, 1) + 4095) / 4096 * 4096);
  if (!q) return ret(cudaErrorMemoryAllocation);
  std::lock_guard<std::mutex> g(st().mu);
  st().allocs[reinterpret_cast<uintptr_t>(q)] = {n, -1};
  *p = q;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t n) { return cudaHostAlloc(p, n, 0); }

cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  {
    std::lock_guard<std::mutex> g(st().mu);
    auto it = st().allocs.find(reinterpret_cast<uintptr_t>(p));
    if (it == st().allocs.end() || it->second.device != -1) {
      strict_check(false, "cudaFreeHost of a pointer cudaHostAlloc did not return");
      return ret(cudaErrorInvalidValue);
    }
    st().allocs.erase(it);
  }
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
  std::memset(a, 0, sizeof *a);
  const int d = where(p);
  if (d == -2) {
    a->type = cudaMemoryTypeUnregistered;
    a->device = -2;
    a->hostPointer = const_cast<void*>(p);
  } else if (d == -1) {
    a->type = cudaMemoryTypeHost;
    a->device = t_device;
    a->hostPointer = a->devicePointer = const_cast<void*>(p);
  } else {
    a->type = cudaMemoryTypeDevice;
    a->device = d;
    a->devicePointer = const_cast<void*>(p);
  }
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  if (const cudaError_t e = driver_error(); e != cudaSuccess) return ret(e);
  // FAKE_CUDA_STREAM_ERROR=R:N: the N-th stream the process of launcher rank R creates fails
  // (out of memory), as a device setup failure on one rank.
  static std::atomic<int> created{0};
  const int nth = ++created;
  if (const char* f = std::getenv("FAKE_CUDA_STREAM_ERROR")) {
    int r = -1, n = 0;
    const char* me = std::getenv("OMPI_COMM_WORLD_RANK");
    if (!me) me = std::getenv("RANK");
    if (std::sscanf(f, "%d:%d", &r, &n) == 2 && me && std::atoi(me) == r && n == nth)
      return ret(cudaErrorMemoryAllocation);
  }
  Stream* p = new Stream;
  p->device = t_device;
  p->nonblocking = (flags & cudaStreamNonBlocking) != 0;
  p->start();
  {
    std::lock_guard<std::mutex> g(st().mu);
    st().streams.push_back(p);
  }
  *s = reinterpret_cast<cudaStream_t>(p);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  Stream* p = resolve(s);
  if (!p || p->legacy) return ret(cudaErrorInvalidResourceHandle);
  p->sync();  // work already enqueued completes, as CUDA does
  {
    std::lock_guard<std::mutex> g(st().mu);
    auto& v = st().streams;
    v.erase(std::remove(v.begin(), v.end(), p), v.end());
  }
  p->finish();
  delete p;
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
  Stream* p = resolve(s);
  if (!p) return ret(cudaErrorInvalidResourceHandle);
  if (p->idle()) return cudaSuccess;
  // A poller spinning on this would take the CPU from the stream's worker (a real GPU runs
  // beside the CPU): hand it over briefly.
  std::this_thread::sleep_for(std::chrono::microseconds(20));
  return cudaErrorNotReady;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  Stream* p = resolve(s);
  if (!p) return ret(cudaErrorInvalidResourceHandle);
  p->sync();
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = reinterpret_cast<cudaEvent_t>(new Event);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) { return cudaEventCreate(e); }

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  Event* ev = reinterpret_cast<Event*>(e);
  while (ev->recorded && !ev->done) std::this_thread::yield();
  delete ev;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  Stream* p = resolve(s);
  if (!p) return ret(cudaErrorInvalidResourceHandle);
  Event* ev = reinterpret_cast<Event*>(e);
  ev->done = false;
  ev->recorded = true;
  Task t;
  t.event = ev;
  push(p, std::move(t));
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  Event* ev = reinterpret_cast<Event*>(e);
  return !ev->recorded || ev->done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  Event* ev = reinterpret_cast<Event*>(e);
  while (ev->recorded && !ev->done) std::this_thread::sleep_for(std::chrono::microseconds(20));
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  Event* x = reinterpret_cast<Event*>(a);
  Event* y = reinterpret_cast<Event*>(b);
  if (!x->recorded || !y->recorded) {
    strict_check(false, "cudaEventElapsedTime on an event never recorded");
    return ret(cudaErrorInvalidResourceHandle);
  }
  if (!x->done || !y->done) return ret(cudaErrorNotReady);
  *ms = static_cast<float>((y->t_us - x->t_us) * 1e-3);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind, cudaStream_t s) {
  Stream* p = resolve(s);
  if (!p) return ret(cudaErrorInvalidResourceHandle);
  const int ds = where(dst), ss = where(src);
  Task t;
  t.cost_us = copy_cost(n);
  if (ss == -2 && ds >= 0) {  // from pageable memory: staged, then returns (DMA later)
    auto stage = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + n);
    t.fn = [dst, stage] { std::memcpy(dst, stage->data(), stage->size()); };
    push(p, std::move(t));
    return cudaSuccess;
  }
  t.fn = [dst, src, n] { std::memmove(dst, src, n); };
  push(p, std::move(t));
  if (ds == -2) p->sync();  // into pageable memory: synchronous
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind) {
  Stream* l = legacy_of(t_device);
  const int ds = where(dst), ss = where(src);
  Task t;
  t.cost_us = copy_cost(n);
  if (ds >= 0 && ss == -2) {
    // Pageable host -> device: the source is staged and the call returns; the DMA to the
    // destination lands later (CUDA's documented behaviour, with a delay to make it visible).
    auto stage = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + n);
    t.fn = [dst, stage] { std::memcpy(dst, stage->data(), stage->size()); };
    t.delay_us = knobs().dma_delay_us;
    push(l, std::move(t));
    return cudaSuccess;
  }
  t.fn = [dst, src, n] { std::memmove(dst, src, n); };
  if (ds >= 0 && ss >= 0) {  // device to device: asynchronous to the host
    t.delay_us = knobs().dma_delay_us;
    push(l, std::move(t));
    return cudaSuccess;
  }
  push(l, std::move(t));
  l->sync();
  return cudaSuccess;
}

cudaError_t cudaMemset(void* dst, int v, size_t n) {
  const int d = where(dst);
  Stream* l = legacy_of(d >= 0 ? d : t_device);
  Task t;
  t.cost_us = copy_cost(n);
  t.fn = [dst, v, n] { std::memset(dst, v, n); };
  if (d >= 0) {  // device memory: asynchronous to the host
    t.delay_us = knobs().dma_delay_us;
    push(l, std::move(t));
    return cudaSuccess;
  }
  push(l, std::move(t));
  l->sync();
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dst, int v, size_t n, cudaStream_t s) {
  Stream* p = resolve(s);
  if (!p) return ret(cudaErrorInvalidResourceHandle);
  Task t;
  t.cost_us = copy_cost(n);
  t.fn = [dst, v, n] { std::memset(dst, v, n); };
  push(p, std::move(t));
  return cudaSuccess;
}

}  // extern "C"
extern "C" {
int commscript_fake_gpu = 1;
}
