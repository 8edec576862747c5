// A host-side stand-in for NCCL 2.28 (libnccl.so.2): ranks are processes on this host, joined
// through shared memory named after the unique id; each operation runs on the caller's stream
// (fake_cuda.cpp's worker thread) and moves the data through single-producer rings between
// every pair of ranks, reducing for real (every dtype and op, float16/bfloat16 included) in rank
// order so that every rank gets bit-identical results. The virtual clock advances by the
// operation's bus bytes at FAKE_GPU_BUSBW_GBPS (nccl-tests' busbw factors) plus FAKE_GPU_LAT_US.
//
// NCCL 2.28 semantics kept: on a non-blocking communicator every call returns ncclInProgress
// and the work reaches the stream only once ncclCommGetAsyncError has been polled to ncclSuccess
// (FAKE_NCCL_POLLS polls); errors persist on the communicator (ncclInvalidArgument included);
// ncclCommSplit publishes the child handle at once and its progress is reported on the parent;
// NCCL_COMM_BLOCKING overrides config.blocking; duplicate GPUs on a host and mismatched
// versions fail the init. Faults by environment: FAKE_NCCL_HANG=R:N (rank R's N-th operation,
// counted from 1, never completes), FAKE_NCCL_ASYNC_ERROR=R:N (it raises ncclSystemError and
// never completes), FAKE_NCCL_SPLIT_ERROR=R[:N] (rank R's splits, or only its N-th, fail), FAKE_NCCL_VERSION=code.
// FAKE_GPU_STRICT=1 aborts on misuse. Test-only: never shipped.
#include <fcntl.h>
#include <nccl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "fake_gpu.hpp"

using namespace fakegpu;

namespace {

constexpr size_t kRing = 256 << 10;
constexpr int kMaxRanks = 64;

struct Ring {
  alignas(64) std::atomic<uint64_t> head;  // bytes written (producer)
  alignas(64) std::atomic<uint64_t> tail;  // bytes read (consumer)
  alignas(64) char data[kRing];
};

struct Slot {
  std::atomic<int> joined;
  int version;
  int device;
  char bus[32];
  char host[64];
  std::atomic<uint64_t> split_epoch;  // last split this rank published
  int split_color[2], split_key[2];
};

struct Header {
  std::atomic<int> joined;
  int nranks;
  Slot slot[kMaxRanks];
};

size_t seg_bytes(int n) { return (sizeof(Header) + 4095) / 4096 * 4096 + sizeof(Ring) * size_t(n) * size_t(n); }

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}
bool env_pair(const char* name, int* a, int* b) {
  const char* v = std::getenv(name);
  return v && std::sscanf(v, "%d:%d", a, b) == 2;
}

thread_local std::string t_last_error;
int g_world_rank = -1;           // rank of this process in its first communicator
std::atomic<uint64_t> g_ops{0};  // operations enqueued by this process

// The shared memory of one communicator; freed when the last user (handle or queued work) goes.
struct Segment {
  std::string name;
  void* base = nullptr;
  size_t bytes = 0;
  int n = 0;
  Header* hdr() const { return static_cast<Header*>(base); }
  Ring* ring(int from, int to) const {
    char* r0 = static_cast<char*>(base) + (sizeof(Header) + 4095) / 4096 * 4096;
    return reinterpret_cast<Ring*>(r0) + (from * n + to);
  }
  ~Segment() {
    if (base) munmap(base, bytes);
  }
};

enum class State { ready, in_progress, error };

struct Comm;
struct Pending {
  std::function<void()> fn;
  double cost_us;
  cudaStream_t stream;
};

struct Comm {
  std::shared_ptr<Segment> seg;
  std::shared_ptr<std::atomic<bool>> aborted = std::make_shared<std::atomic<bool>>(false);
  int rank = 0, n = 1, device = 0;
  bool blocking = true;
  std::string id;  // segment name
  std::shared_ptr<std::atomic<ncclResult_t>> error = std::make_shared<std::atomic<ncclResult_t>>(ncclSuccess);
  State state = State::ready;
  int polls_left = 0;
  std::vector<Pending> pending;  // work waiting for the enqueue to finish (non-blocking)
  // init / split in progress
  bool initializing = false;
  std::thread helper;
  std::atomic<bool> helper_done{false};
  std::atomic<ncclResult_t> helper_result{ncclSuccess};
  Comm* split_child = nullptr;  // the child a split on this (parent) communicator will finish
  bool child_waiting = false;   // this is a split child not yet finished by its parent
  uint64_t splits = 0;
  // ncclCommRevoke: in-flight work is stopped; the state is ncclInProgress until the work that
  // was running has left the streams (inflight == 0), then ncclSuccess; collectives and
  // ncclCommFinalize are refused from then on; destroy, abort, split and shrink remain.
  bool revoked = false;
  std::shared_ptr<std::atomic<int>> inflight = std::make_shared<std::atomic<int>>(0);
  bool dead = false;  // aborted/destroyed (kept for strict-mode checks only)
};

std::mutex g_mu;
std::vector<Comm*> g_live;
bool live(Comm* c) {
  std::lock_guard<std::mutex> g(g_mu);
  return std::find(g_live.begin(), g_live.end(), c) != g_live.end();
}

ncclResult_t bad(const std::string& why, ncclResult_t r = ncclInvalidArgument) {
  t_last_error = why;
  return r;
}

// Blocks (polling) until `done` or the communicator is aborted. Returns false when aborted.
template <class F>
bool spin_until(const std::atomic<bool>& aborted, F&& done) {
  for (unsigned i = 0;; ++i) {
    if (done()) return true;
    if (aborted.load(std::memory_order_relaxed)) return false;
    if (i < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(i < 4096 ? 5 : 100));
  }
}

std::shared_ptr<Segment> open_segment(const std::string& name, int n) {
  auto s = std::make_shared<Segment>();
  s->name = name;
  s->n = n;
  s->bytes = seg_bytes(n);
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return nullptr;
  if (ftruncate(fd, static_cast<off_t>(s->bytes)) != 0) {
    close(fd);
    return nullptr;
  }
  s->base = mmap(nullptr, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (s->base == MAP_FAILED) {
    s->base = nullptr;
    return nullptr;
  }
  return s;
}

int nccl_version() { return env_int("FAKE_NCCL_VERSION", NCCL_VERSION_CODE); }

std::string host() {
  char h[64] = {};
  gethostname(h, sizeof h - 1);
  return h;
}

// Joins the segment (non-blocking); finish_join() completes it.
void join(Comm* c) {
  Slot& s = c->seg->hdr()->slot[c->rank];
  s.version = nccl_version();
  s.device = c->device;
  std::snprintf(s.bus, sizeof s.bus, "%s", bus_id(c->device).c_str());
  std::snprintf(s.host, sizeof s.host, "%s", host().c_str());
  s.joined.store(1);
  c->seg->hdr()->joined.fetch_add(1);
}

bool all_joined(Comm* c) { return c->seg->hdr()->joined.load() >= c->n; }

// After every rank joined: the checks NCCL makes at init.
ncclResult_t check_join(Comm* c) {
  Header* h = c->seg->hdr();
  if (c->rank == 0) shm_unlink(c->seg->name.c_str());  // every rank has it mapped now
  for (int r = 0; r < c->n; ++r) {
    if (h->slot[r].version != h->slot[c->rank].version)
      return bad("NCCL version mismatch between rank " + std::to_string(r) + " and rank " + std::to_string(c->rank),
                 ncclInvalidUsage);
    if (r != c->rank && std::strcmp(h->slot[r].host, h->slot[c->rank].host) == 0 &&
        std::strcmp(h->slot[r].bus, h->slot[c->rank].bus) == 0)
      return bad("Duplicate GPU detected : rank " + std::to_string(c->rank) + " and rank " + std::to_string(r) +
                     " both on CUDA device " + h->slot[r].bus,
                 ncclInvalidUsage);
  }
  return ncclSuccess;
}

// ---- data movement ----

struct Xfer {
  int peer;
  const char* src = nullptr;   // send
  char* dst = nullptr;         // recv
  size_t bytes = 0, done = 0;  // done counts the 8-byte header too
  uint64_t hdr = 0;            // the byte count, sent ahead of the data
};

// Moves every send and receive through the rings, making progress on all of them at once (so no
// order of peers can deadlock). Every message is preceded by its byte count: a receiver that
// expected another count (ranks calling with different counts: a desynchronised job) waits
// until the communicator is aborted, as NCCL hangs on it. Returns false when aborted.
bool exchange(Segment& seg, int me, const std::atomic<bool>& aborted, std::vector<Xfer>& sends,
              std::vector<Xfer>& recvs) {
  constexpr size_t kHdr = sizeof(uint64_t);
  bool mismatch = false;
  const bool ok = spin_until(aborted, [&] {
    if (mismatch) return false;
    bool all = true;
    for (Xfer& x : sends) {
      const size_t total = x.bytes + kHdr;
      if (x.done == total) continue;
      x.hdr = x.bytes;
      Ring* r = seg.ring(me, x.peer);
      const uint64_t head = r->head.load(std::memory_order_relaxed), tail = r->tail.load(std::memory_order_acquire);
      size_t room = kRing - static_cast<size_t>(head - tail);
      uint64_t h = head;
      while (room && x.done < total) {
        const size_t off = static_cast<size_t>(h % kRing);
        const bool in_hdr = x.done < kHdr;
        const size_t left = in_hdr ? kHdr - x.done : total - x.done;
        const size_t k = std::min({room, left, kRing - off});
        const char* from = in_hdr ? reinterpret_cast<const char*>(&x.hdr) + x.done : x.src + (x.done - kHdr);
        std::memcpy(r->data + off, from, k);
        x.done += k;
        h += k;
        room -= k;
      }
      r->head.store(h, std::memory_order_release);
      if (x.done < total) all = false;
    }
    for (Xfer& x : recvs) {
      const size_t total = x.bytes + kHdr;
      if (x.done == total) continue;
      Ring* r = seg.ring(x.peer, me);
      const uint64_t head = r->head.load(std::memory_order_acquire);
      uint64_t t = r->tail.load(std::memory_order_relaxed);
      while (t < head && x.done < total) {
        const size_t off = static_cast<size_t>(t % kRing);
        const bool in_hdr = x.done < kHdr;
        const size_t left = in_hdr ? kHdr - x.done : total - x.done;
        const size_t k = std::min({static_cast<size_t>(head - t), left, kRing - off});
        char* to = in_hdr ? reinterpret_cast<char*>(&x.hdr) + x.done : x.dst + (x.done - kHdr);
        std::memcpy(to, r->data + off, k);
        x.done += k;
        t += k;
        if (x.done == kHdr && x.hdr != x.bytes) {
          mismatch = true;  // the peer sent another count: never completes
          break;
        }
      }
      r->tail.store(t, std::memory_order_release);
      if (mismatch) return false;
      if (x.done < total) all = false;
    }
    return all;
  });
  return ok;
}

// ---- reductions ----

float h2f(uint16_t h) {
  const uint32_t s = static_cast<uint32_t>(h & 0x8000u) << 16;
  int e = (h >> 10) & 0x1f;
  uint32_t m = h & 0x3ffu, x;
  if (e == 0x1f)
    x = s | 0x7f800000u | (m << 13);
  else if (e == 0) {
    if (!m)
      x = s;
    else {
      e = 1;
      while (!(m & 0x400u)) {
        m <<= 1;
        --e;
      }
      x = s | (static_cast<uint32_t>(e - 15 + 127) << 23) | ((m & 0x3ffu) << 13);
    }
  } else
    x = s | (static_cast<uint32_t>(e - 15 + 127) << 23) | (m << 13);
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
uint16_t f2h(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t s = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return static_cast<uint16_t>(s | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(s | 0x7c00u);  // rounds past 65504
  if (ax < 0x33000001u) return s;                                    // below half the smallest subnormal
  int e = static_cast<int>(ax >> 23) - 127 + 15;
  uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  unsigned shift = e > 0 ? 13u : static_cast<unsigned>(14 - e);
  uint32_t v = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (v & 1u))) ++v;
  if (e > 0) v = (static_cast<uint32_t>(e) << 10) + (v - 0x400u);
  return static_cast<uint16_t>(s | v);
}
float b2f(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
uint16_t f2b(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

template <class T>
T op2(T a, T b, ncclRedOp_t op) {
  switch (op) {
    case ncclProd:
      return static_cast<T>(a * b);
    case ncclMax:
      return std::max(a, b);
    case ncclMin:
      return std::min(a, b);
    default:  // sum, avg (divided at the end)
      return static_cast<T>(a + b);
  }
}

template <class T>
void red(void* acc, const void* in, size_t n, ncclRedOp_t op) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(in);
  for (size_t i = 0; i < n; ++i) a[i] = op2<T>(a[i], b[i], op);
}
template <class T>
void avg_div(void* acc, size_t n, int ranks) {
  T* a = static_cast<T*>(acc);
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<T>(a[i] / static_cast<T>(ranks));
}
template <uint16_t (*F2)(float), float (*T2)(uint16_t)>
void red16(void* acc, const void* in, size_t n, ncclRedOp_t op) {
  uint16_t* a = static_cast<uint16_t*>(acc);
  const uint16_t* b = static_cast<const uint16_t*>(in);
  for (size_t i = 0; i < n; ++i) a[i] = F2(op2<float>(T2(a[i]), T2(b[i]), op));
}

// acc = acc (op) in, elementwise.
void reduce_into(void* acc, const void* in, size_t n, ncclDataType_t t, ncclRedOp_t op) {
  switch (t) {
    case ncclInt8:
      return red<int8_t>(acc, in, n, op);
    case ncclUint8:
      return red<uint8_t>(acc, in, n, op);
    case ncclInt32:
      return red<int32_t>(acc, in, n, op);
    case ncclUint32:
      return red<uint32_t>(acc, in, n, op);
    case ncclInt64:
      return red<int64_t>(acc, in, n, op);
    case ncclUint64:
      return red<uint64_t>(acc, in, n, op);
    case ncclFloat32:
      return red<float>(acc, in, n, op);
    case ncclFloat64:
      return red<double>(acc, in, n, op);
    case ncclFloat16:
      return red16<f2h, h2f>(acc, in, n, op);
    case ncclBfloat16:
      return red16<f2b, b2f>(acc, in, n, op);
    default:
      return;
  }
}
void finish_avg(void* acc, size_t n, ncclDataType_t t, int ranks) {
  switch (t) {
    case ncclInt8:
      return avg_div<int8_t>(acc, n, ranks);
    case ncclUint8:
      return avg_div<uint8_t>(acc, n, ranks);
    case ncclInt32:
      return avg_div<int32_t>(acc, n, ranks);
    case ncclUint32:
      return avg_div<uint32_t>(acc, n, ranks);
    case ncclInt64:
      return avg_div<int64_t>(acc, n, ranks);
    case ncclUint64:
      return avg_div<uint64_t>(acc, n, ranks);
    case ncclFloat32:
      return avg_div<float>(acc, n, ranks);
    case ncclFloat64:
      return avg_div<double>(acc, n, ranks);
    case ncclFloat16: {
      uint16_t* a = static_cast<uint16_t*>(acc);
      for (size_t i = 0; i < n; ++i) a[i] = f2h(h2f(a[i]) / static_cast<float>(ranks));
      return;
    }
    case ncclBfloat16: {
      uint16_t* a = static_cast<uint16_t*>(acc);
      for (size_t i = 0; i < n; ++i) a[i] = f2b(b2f(a[i]) / static_cast<float>(ranks));
      return;
    }
    default:
      return;
  }
}

// ---- operations ----

enum class Kind { allreduce, reduce, broadcast, allgather, reduce_scatter, p2p };

struct P2p {
  bool send;
  int peer;
  const void* buf;
  size_t bytes;
};

struct Work {
  Kind kind;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclInt8;
  ncclRedOp_t op = ncclSum;
  int root = 0;
  std::vector<P2p> p2p;
};

// Runs on the stream's worker. The ranks' buffers are all in host memory of their processes.
void perform(const std::shared_ptr<Segment>& seg, const std::shared_ptr<std::atomic<bool>>& aborted, int me,
             const Work& w) {
  const int n = seg->n;
  const size_t es = type_size(w.type), bytes = w.count * es;
  std::vector<Xfer> sends, recvs;
  std::vector<std::vector<char>> tmp;
  auto reduce_all = [&](void* out, const void* mine, const std::vector<std::vector<char>>& from) {
    // Rank order, so every rank computes the same bits.
    std::vector<char> acc;
    for (int p = 0; p < n; ++p) {
      const void* src = p == me ? mine : from[static_cast<size_t>(p)].data();
      if (p == 0)
        acc.assign(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
      else
        reduce_into(acc.data(), src, w.count, w.type, w.op);
    }
    if (w.op == ncclAvg) finish_avg(acc.data(), w.count, w.type, n);
    std::memcpy(out, acc.data(), bytes);
  };
  switch (w.kind) {
    case Kind::allreduce:
    case Kind::reduce: {
      tmp.assign(static_cast<size_t>(n), {});
      const bool gets = w.kind == Kind::allreduce || me == w.root;
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        if (w.kind == Kind::allreduce || p == w.root)
          sends.push_back({p, static_cast<const char*>(w.send), nullptr, bytes});
        if (gets) {
          tmp[static_cast<size_t>(p)].resize(bytes);
          recvs.push_back({p, nullptr, tmp[static_cast<size_t>(p)].data(), bytes});
        }
      }
      if (!exchange(*seg, me, *aborted, sends, recvs)) return;
      if (gets) reduce_all(w.recv, w.send, tmp);
      return;
    }
    case Kind::broadcast: {
      if (me == w.root) {
        for (int p = 0; p < n; ++p)
          if (p != me) sends.push_back({p, static_cast<const char*>(w.send), nullptr, bytes});
      } else {
        recvs.push_back({w.root, nullptr, static_cast<char*>(w.recv), bytes});
      }
      if (!exchange(*seg, me, *aborted, sends, recvs)) return;
      if (me == w.root && w.recv != w.send) std::memmove(w.recv, w.send, bytes);
      return;
    }
    case Kind::allgather: {
      std::vector<char> mine(static_cast<const char*>(w.send), static_cast<const char*>(w.send) + bytes);
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        sends.push_back({p, mine.data(), nullptr, bytes});
        recvs.push_back({p, nullptr, static_cast<char*>(w.recv) + bytes * static_cast<size_t>(p), bytes});
      }
      if (!exchange(*seg, me, *aborted, sends, recvs)) return;
      std::memcpy(static_cast<char*>(w.recv) + bytes * static_cast<size_t>(me), mine.data(), bytes);
      return;
    }
    case Kind::reduce_scatter: {
      // count is per rank; the send buffer holds n blocks.
      std::vector<char> all(static_cast<const char*>(w.send), static_cast<const char*>(w.send) + bytes * n);
      tmp.assign(static_cast<size_t>(n), {});
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        sends.push_back({p, all.data() + bytes * static_cast<size_t>(p), nullptr, bytes});
        tmp[static_cast<size_t>(p)].resize(bytes);
        recvs.push_back({p, nullptr, tmp[static_cast<size_t>(p)].data(), bytes});
      }
      if (!exchange(*seg, me, *aborted, sends, recvs)) return;
      reduce_all(w.recv, all.data() + bytes * static_cast<size_t>(me), tmp);
      return;
    }
    case Kind::p2p: {
      std::vector<std::vector<char>> copies;
      for (const P2p& x : w.p2p) {
        if (!x.send) continue;
        copies.emplace_back(static_cast<const char*>(x.buf), static_cast<const char*>(x.buf) + x.bytes);
      }
      size_t k = 0;
      std::vector<const P2p*> self_sends, self_recvs;
      for (const P2p& x : w.p2p) {
        if (x.send) {
          const char* src = copies[k++].data();
          if (x.peer == me)
            self_sends.push_back(&x), tmp.emplace_back(src, src + x.bytes);
          else
            sends.push_back({x.peer, src, nullptr, x.bytes});
        } else if (x.peer == me) {
          self_recvs.push_back(&x);
        } else {
          recvs.push_back({x.peer, nullptr, static_cast<char*>(const_cast<void*>(x.buf)), x.bytes});
        }
      }
      for (size_t i = 0; i < self_recvs.size() && i < tmp.size(); ++i)
        std::memcpy(const_cast<void*>(self_recvs[i]->buf), tmp[i].data(),
                    std::min(tmp[i].size(), self_recvs[i]->bytes));
      exchange(*seg, me, *aborted, sends, recvs);
      return;
    }
  }
}

double bus_factor(Kind k, int n) {
  switch (k) {
    case Kind::allreduce:
      return 2.0 * (n - 1) / n;
    case Kind::allgather:
    case Kind::reduce_scatter:
      return static_cast<double>(n - 1) / n;  // of the total (count * n) bytes
    default:
      return 1.0;
  }
}

double cost_us(const Work& w, int n) {
  size_t bytes = w.count * type_size(w.type);
  if (w.kind == Kind::allgather || w.kind == Kind::reduce_scatter) bytes *= static_cast<size_t>(n);
  if (w.kind == Kind::p2p) {
    size_t sent = 0;
    for (const P2p& x : w.p2p)
      if (x.send) sent += x.bytes;
    bytes = sent;
  }
  // One rank moves nothing (bus factor 0): charge its bytes once, so that its times are not 0.
  const double factor = n > 1 ? bus_factor(w.kind, n) : 1.0;
  return knobs().lat_us + static_cast<double>(bytes) * factor / (knobs().busbw_gbps * 1e3);
}

// Group state (per thread, as NCCL's).
thread_local int t_group_depth = 0;
struct Grouped {
  Comm* comm;
  cudaStream_t stream;
  Work work;
};
thread_local std::vector<Grouped> t_group;

ncclResult_t check_comm(Comm* c, const char* call) {
  if (!c) return bad(std::string(call) + ": comm is NULL");
  if (!live(c)) {
    strict_check(false, std::string(call) + " on a communicator already aborted or destroyed");
    return bad(std::string(call) + ": invalid communicator", ncclInvalidUsage);
  }
  if (c->state == State::in_progress && !c->initializing) {
    strict_check(false,
                 std::string(call) + " while the previous call is still in progress (poll ncclCommGetAsyncError)");
  }
  if (c->revoked) return bad(std::string(call) + ": the communicator was revoked (ncclCommRevoke)", ncclInvalidUsage);
  if (const ncclResult_t e = c->error->load(); e != ncclSuccess && e != ncclInProgress) return e;
  if (c->initializing || c->child_waiting) {
    strict_check(false, std::string(call) + " on a communicator whose init/split has not completed");
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

void hook_faults(Comm* c, std::function<void()>& fn) {
  const uint64_t k = ++g_ops;
  int hr, hn, er, en;
  const bool hang = env_pair("FAKE_NCCL_HANG", &hr, &hn) && hr == g_world_rank && static_cast<uint64_t>(hn) == k;
  const bool err = env_pair("FAKE_NCCL_ASYNC_ERROR", &er, &en) && er == g_world_rank && static_cast<uint64_t>(en) == k;
  if (!hang && !err) return;
  auto aborted = c->aborted;
  auto error = c->error;
  fn = [aborted, err, error] {
    if (err) error->store(ncclSystemError);
    spin_until(*aborted, [] { return false; });
  };
}

ncclResult_t submit(Comm* c, cudaStream_t s, Work w) {
  auto seg = c->seg;
  auto aborted = c->aborted;
  const int me = c->rank;
  // On a non-blocking communicator NCCL >= 2.23 spawns and joins a thread for every call; that
  // host time delays the launch, which a pipelined loop timed with events sees as a gap on the
  // stream (FAKE_NCCL_NONBLOCKING_US, 20): timed loops belong on a blocking communicator.
  static const double nb_us = [] {
    const char* v = std::getenv("FAKE_NCCL_NONBLOCKING_US");
    return v && *v ? std::atof(v) : 20.0;
  }();
  const double cost = cost_us(w, c->n) + (c->blocking ? 0.0 : nb_us);
  std::function<void()> fn = [seg, aborted, me, w] {
    if (!aborted->load()) perform(seg, aborted, me, w);
  };
  hook_faults(c, fn);
  auto inflight = c->inflight;
  inflight->fetch_add(1);
  fn = [inner = std::move(fn), inflight] {
    inner();
    inflight->fetch_sub(1);
  };
  if (c->blocking) {
    enqueue(s, std::move(fn), cost);
    return ncclSuccess;
  }
  c->pending.push_back({std::move(fn), cost, s});
  c->state = State::in_progress;
  c->polls_left = std::max(1, env_int("FAKE_NCCL_POLLS", 1));
  return ncclInProgress;
}

ncclResult_t coll(Work w, ncclComm_t comm, cudaStream_t s, const char* call) {
  Comm* c = reinterpret_cast<Comm*>(comm);
  if (const ncclResult_t r = check_comm(c, call); r != ncclSuccess) return r;
  auto invalid = [&](const std::string& why) {
    if (!c->blocking) c->error->store(ncclInvalidArgument);  // persists, as in NCCL 2.28
    return bad(std::string(call) + ": " + why);
  };
  if (type_size(w.type) == 0) return invalid("invalid data type " + std::to_string(w.type));
  if (w.kind != Kind::p2p && w.kind != Kind::allgather && w.kind != Kind::broadcast &&
      (w.op < ncclSum || w.op > ncclAvg))
    return invalid("invalid reduction operation " + std::to_string(w.op));
  if ((w.kind == Kind::reduce || w.kind == Kind::broadcast) && (w.root < 0 || w.root >= c->n))
    return invalid("invalid root " + std::to_string(w.root));
  if (w.count && ((!w.send && !(w.kind == Kind::broadcast && c->rank != w.root)) || !w.recv))
    return invalid("NULL buffer");
  if (t_group_depth > 0) {
    t_group.push_back({c, s, std::move(w)});
    return ncclSuccess;
  }
  return submit(c, s, std::move(w));
}

ncclResult_t p2p(bool send, const void* buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
                 cudaStream_t s) {
  Comm* c = reinterpret_cast<Comm*>(comm);
  const char* call = send ? "ncclSend" : "ncclRecv";
  if (const ncclResult_t r = check_comm(c, call); r != ncclSuccess) return r;
  if (type_size(t) == 0 || peer < 0 || peer >= c->n || (count && !buf)) {
    if (!c->blocking) c->error->store(ncclInvalidArgument);
    return bad(std::string(call) + ": invalid argument (peer " + std::to_string(peer) + ")");
  }
  const P2p x{send, peer, buf, count * type_size(t)};
  if (t_group_depth > 0) {
    for (Grouped& g : t_group)
      if (g.comm == c && g.work.kind == Kind::p2p && g.stream == s) {
        g.work.p2p.push_back(x);
        return ncclSuccess;
      }
    Work w;
    w.kind = Kind::p2p;
    w.type = ncclInt8;
    w.p2p.push_back(x);
    t_group.push_back({c, s, std::move(w)});
    return ncclSuccess;
  }
  Work w;
  w.kind = Kind::p2p;
  w.type = ncclInt8;
  w.p2p.push_back(x);
  return submit(c, s, std::move(w));
}

// ---- init and split ----

bool blocking_of(const ncclConfig_t* cfg) {
  int b = cfg && cfg->blocking != NCCL_CONFIG_UNDEF_INT ? cfg->blocking : 1;
  if (const char* e = std::getenv("NCCL_COMM_BLOCKING"); e && *e) b = std::atoi(e);  // overrides, as NCCL does
  return b != 0;
}

Comm* new_comm(const std::string& seg_name, int n, int rank, const ncclConfig_t* cfg) {
  Comm* c = new Comm;
  c->n = n;
  c->rank = rank;
  c->device = current_device();
  c->blocking = blocking_of(cfg);
  c->id = seg_name;
  c->seg = open_segment(seg_name, n);
  std::lock_guard<std::mutex> g(g_mu);
  g_live.push_back(c);
  return c;
}

void forget(Comm* c) {
  if (c->child_waiting) {
    // Its parent's split is still running and uses it: NCCL wants the parent aborted first.
    strict_check(false, "a split child aborted/destroyed before its parent finished (or was aborted)");
    std::lock_guard<std::mutex> g(g_mu);
    g_live.erase(std::remove(g_live.begin(), g_live.end(), c), g_live.end());
    c->aborted->store(true);
    return;  // left allocated: the parent's helper still holds it
  }
  {
    std::lock_guard<std::mutex> g(g_mu);
    g_live.erase(std::remove(g_live.begin(), g_live.end(), c), g_live.end());
  }
  c->aborted->store(true);
  if (c->helper.joinable()) c->helper.join();
  if (c->split_child) {  // the split never finished: its child is dead too
    c->split_child->child_waiting = false;
    c->split_child->error->store(ncclSystemError);
  }
  delete c;  // queued work keeps the segment alive through its shared_ptr
}

// The split's exchange, on the helper thread: every parent rank publishes (color, key).
ncclResult_t split_exchange(Comm* parent, int color, int key, uint64_t epoch, int* nranks, int* rank) {
  Header* h = parent->seg->hdr();
  Slot& mine = h->slot[parent->rank];
  mine.split_color[epoch % 2] = color;
  mine.split_key[epoch % 2] = key;
  mine.split_epoch.store(epoch);
  const bool ok = spin_until(*parent->aborted, [&] {
    for (int r = 0; r < parent->n; ++r)
      if (h->slot[r].split_epoch.load() < epoch) return false;
    return true;
  });
  if (!ok) return ncclSystemError;
  std::vector<std::pair<int, int>> members;  // (key, parent rank)
  for (int r = 0; r < parent->n; ++r)
    if (h->slot[r].split_color[epoch % 2] == color) members.emplace_back(h->slot[r].split_key[epoch % 2], r);
  std::sort(members.begin(), members.end());
  *nranks = static_cast<int>(members.size());
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i].second == parent->rank) *rank = static_cast<int>(i);
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* v) {
  if (!v) return ncclInvalidArgument;
  *v = nccl_version();
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) { return t_last_error.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return ncclInvalidArgument;
  std::memset(id->internal, 0, sizeof id->internal);
  std::random_device rd;
  const unsigned long long a = (static_cast<unsigned long long>(rd()) << 32) ^ rd() ^ static_cast<unsigned>(getpid());
  std::snprintf(id->internal, sizeof id->internal, "/csfake-%016llx", a);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int n, ncclUniqueId id, int rank, ncclConfig_t* cfg) {
  if (!out) return bad("ncclCommInitRankConfig: comm is NULL");
  *out = nullptr;
  if (n < 1 || n > kMaxRanks || rank < 0 || rank >= n) return bad("ncclCommInitRankConfig: invalid rank/size");
  if (std::strncmp(id.internal, "/csfake-", 8) != 0) return bad("ncclCommInitRankConfig: invalid unique id");
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return bad("cudaGetDevice failed", ncclUnhandledCudaError);
  Comm* c = new_comm(id.internal, n, rank, cfg);
  if (!c->seg) return bad("shm_open failed", ncclSystemError);
  if (g_world_rank < 0) g_world_rank = rank;
  join(c);
  *out = reinterpret_cast<ncclComm_t>(c);
  auto finish = [c] {
    const ncclResult_t r = check_join(c);
    c->initializing = false;
    c->state = r == ncclSuccess ? State::ready : State::error;
    if (r != ncclSuccess) c->error->store(r);
    return r;
  };
  if (c->blocking) {
    spin_until(*c->aborted, [&] { return all_joined(c); });
    return finish();
  }
  c->initializing = true;
  c->state = State::in_progress;
  c->polls_left = std::max(1, env_int("FAKE_NCCL_POLLS", 1));
  c->error->store(ncclInProgress);
  return ncclInProgress;
}

ncclResult_t ncclCommInitRank(ncclComm_t* out, int n, ncclUniqueId id, int rank) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;
  return ncclCommInitRankConfig(out, n, id, rank, &cfg);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  Comm* c = reinterpret_cast<Comm*>(comm);
  if (!c || !state) return ncclInvalidArgument;
  if (!live(c)) {
    strict_check(false, "ncclCommGetAsyncError on a communicator already aborted or destroyed");
    return ncclInvalidUsage;
  }
  if (c->revoked && c->error->load() == ncclInProgress) {  // quiescent once the stopped work has left
    if (c->inflight->load() > 0 || --c->polls_left > 0) {
      *state = ncclInProgress;
      return ncclSuccess;
    }
    c->error->store(ncclSuccess);
    c->state = State::ready;
  }
  if (c->child_waiting) {  // a split child: its progress is reported on the parent
    *state = c->error->load() == ncclInProgress ? ncclInProgress : c->error->load();
    return ncclSuccess;
  }
  if (c->initializing) {
    if (all_joined(c) && --c->polls_left <= 0) {
      *state = [&] {
        const ncclResult_t r = check_join(c);
        c->initializing = false;
        c->state = r == ncclSuccess ? State::ready : State::error;
        c->error->store(r);
        return r;
      }();
    } else {
      *state = ncclInProgress;
    }
    return ncclSuccess;
  }
  if (c->helper.joinable()) {  // a split in progress on this parent
    if (!c->helper_done.load() || --c->polls_left > 0) {
      *state = ncclInProgress;
      return ncclSuccess;
    }
    c->helper.join();
    const ncclResult_t r = c->helper_result.load();
    if (c->split_child) {
      c->split_child->child_waiting = false;
      c->split_child->error->store(r == ncclSuccess ? ncclSuccess : r);
      c->split_child = nullptr;
    }
    c->state = State::ready;
    if (r != ncclSuccess) c->error->store(r);  // a failed split leaves its error on the parent
    *state = r;
    return ncclSuccess;
  }
  const ncclResult_t e = c->error->load();
  if (e != ncclSuccess) {
    *state = e;
    return ncclSuccess;
  }
  if (c->state == State::in_progress) {
    if (--c->polls_left > 0) {
      *state = ncclInProgress;
      return ncclSuccess;
    }
    for (Pending& p : c->pending) enqueue(p.stream, std::move(p.fn), p.cost_us);
    c->pending.clear();
    c->state = State::ready;
  }
  *state = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* cfg) {
  Comm* p = reinterpret_cast<Comm*>(comm);
  if (const ncclResult_t r = check_comm(p, "ncclCommSplit"); r != ncclSuccess) return r;
  if (!newcomm) return bad("ncclCommSplit: newcomm is NULL");
  *newcomm = nullptr;
  const uint64_t epoch = ++p->splits;
  static std::atomic<int> g_splits{0};  // splits this process made, counted from 1
  const int nth = ++g_splits;
  int fr = -1, fn = 0;
  const char* fe = std::getenv("FAKE_NCCL_SPLIT_ERROR");
  const int got = fe ? std::sscanf(fe, "%d:%d", &fr, &fn) : 0;
  const bool fail = got >= 1 && fr == g_world_rank && (got == 1 || fn == nth);
  Comm* child = nullptr;
  const std::string base = p->id + ".s" + std::to_string(epoch) + "c" + std::to_string(color);
  auto work = [p, color, key, epoch, fail, base](Comm* ch) -> ncclResult_t {
    if (fail) return bad("ncclCommSplit: injected failure (FAKE_NCCL_SPLIT_ERROR)", ncclInvalidArgument);
    int n = 0, r = 0;
    if (const ncclResult_t e = split_exchange(p, color, key, epoch, &n, &r); e != ncclSuccess) return e;
    if (color == NCCL_SPLIT_NOCOLOR || !ch) return ncclSuccess;
    ch->n = n;
    ch->rank = r;
    ch->seg = open_segment(base, n);
    if (!ch->seg) return ncclSystemError;
    join(ch);
    if (!spin_until(*ch->aborted, [&] { return all_joined(ch) || p->aborted->load(); }) || p->aborted->load())
      return ncclSystemError;
    return check_join(ch);
  };
  if (color != NCCL_SPLIT_NOCOLOR) {
    child = new Comm;
    child->device = p->device;
    child->blocking = blocking_of(cfg);
    child->id = base;
    std::lock_guard<std::mutex> g(g_mu);
    g_live.push_back(child);
  }
  if (p->blocking) {
    const ncclResult_t r = work(child);
    if (r != ncclSuccess) {
      if (child) forget(child);
      p->error->store(r);
      return r;
    }
    *newcomm = reinterpret_cast<ncclComm_t>(child);
    return ncclSuccess;
  }
  // Non-blocking: the child handle is published now, the parent reports the progress.
  if (child) {
    child->child_waiting = true;
    child->error->store(ncclInProgress);
  }
  *newcomm = reinterpret_cast<ncclComm_t>(child);
  p->split_child = child;
  p->state = State::in_progress;
  p->helper_done = false;
  p->polls_left = std::max(1, env_int("FAKE_NCCL_POLLS", 1));
  p->helper = std::thread([p, child, work] {
    p->helper_result.store(work(child));
    p->helper_done.store(true);
  });
  return ncclInProgress;
}

// NCCL 2.27+: a new communicator of the parent's ranks less `exclude`, ranks renumbered in order.
// Every survivor calls it; an excluded rank must not. NCCL_SHRINK_ABORT first stops the
// parent's in-flight work (a parent in error needs it, unless revoked); the new communicator
// follows its config (non-blocking: ncclInProgress until polled on it, as an init).
ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude, int nexclude, ncclComm_t* newcomm, ncclConfig_t* cfg,
                            int flags) {
  Comm* p = reinterpret_cast<Comm*>(comm);
  if (!p || !newcomm || nexclude < 0 || (nexclude && !exclude)) return bad("ncclCommShrink: invalid argument");
  *newcomm = nullptr;
  if (!live(p)) {
    strict_check(false, "ncclCommShrink on a communicator already aborted or destroyed");
    return bad("ncclCommShrink: invalid communicator", ncclInvalidUsage);
  }
  if (flags != NCCL_SHRINK_DEFAULT && flags != NCCL_SHRINK_ABORT)
    return bad("ncclCommShrink: invalid shrinkFlags " + std::to_string(flags));
  for (int i = 0; i < nexclude; ++i)
    if (exclude[i] < 0 || exclude[i] >= p->n || std::count(exclude, exclude + nexclude, exclude[i]) > 1)
      return bad("ncclCommShrink: invalid exclude list (rank " + std::to_string(exclude[i]) + ")");
  if (p->revoked && p->error->load() == ncclInProgress) {
    strict_check(false, "ncclCommShrink on a revoked communicator that is not quiescent yet (poll it first)");
    return bad("ncclCommShrink: revoked communicator not quiescent", ncclInvalidUsage);
  }
  if (flags & NCCL_SHRINK_ABORT) {
    p->aborted->store(true);  // the parent's in-flight work stops
    p->pending.clear();
  } else if (const ncclResult_t e = p->error->load(); !p->revoked && e != ncclSuccess && e != ncclInProgress) {
    return bad("ncclCommShrink: the parent communicator is in error (" + std::string(ncclGetErrorString(e)) +
                   "): shrink it with NCCL_SHRINK_ABORT",
               ncclInvalidUsage);
  }
  std::vector<int> keep;
  for (int r = 0; r < p->n; ++r)
    if (std::find(exclude, exclude + nexclude, r) == exclude + nexclude) keep.push_back(r);
  const auto at = std::find(keep.begin(), keep.end(), p->rank);
  if (at == keep.end()) return bad("ncclCommShrink: called by an excluded rank", ncclInvalidUsage);
  if (keep.empty()) return bad("ncclCommShrink: every rank excluded");
  const std::string name = p->id + ".k" + std::to_string(++p->splits);
  Comm* c = new_comm(name, static_cast<int>(keep.size()), static_cast<int>(at - keep.begin()), cfg);
  if (!c->seg) return bad("shm_open failed", ncclSystemError);
  c->device = p->device;
  join(c);
  *newcomm = reinterpret_cast<ncclComm_t>(c);
  if (c->blocking) {
    spin_until(*c->aborted, [&] { return all_joined(c); });
    const ncclResult_t r = check_join(c);
    c->state = r == ncclSuccess ? State::ready : State::error;
    if (r != ncclSuccess) c->error->store(r);
    return r;
  }
  c->initializing = true;  // finished by ncclCommGetAsyncError on it, as an init
  c->state = State::in_progress;
  c->polls_left = std::max(1, env_int("FAKE_NCCL_POLLS", 1));
  c->error->store(ncclInProgress);
  return ncclInProgress;
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags) {
  Comm* c = reinterpret_cast<Comm*>(comm);
  if (!c || !live(c)) {
    strict_check(false, "ncclCommRevoke on a communicator already aborted or destroyed");
    return bad("ncclCommRevoke: invalid communicator", ncclInvalidUsage);
  }
  if (flags != NCCL_REVOKE_DEFAULT) return bad("ncclCommRevoke: revokeFlags must be NCCL_REVOKE_DEFAULT");
  c->aborted->store(true);  // in-flight work stops
  c->pending.clear();
  c->revoked = true;
  c->state = State::in_progress;
  c->polls_left = std::max(1, env_int("FAKE_NCCL_POLLS", 1));
  c->error->store(ncclInProgress);  // until quiescent
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  Comm* c = reinterpret_cast<Comm*>(comm);
  if (c && c->revoked) {
    strict_check(false, "ncclCommFinalize after ncclCommRevoke (invalid: destroy or abort it)");
    return bad("ncclCommFinalize: the communicator was revoked", ncclInvalidUsage);
  }
  if (const ncclResult_t r = check_comm(c, "ncclCommFinalize"); r != ncclSuccess) return r;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  Comm* c = reinterpret_cast<Comm*>(comm);
  if (!c) return ncclSuccess;
  if (!live(c)) {
    strict_check(false, "ncclCommDestroy of a communicator already aborted or destroyed");
    return ncclInvalidUsage;
  }
  strict_check(t_group_depth == 0, "ncclCommDestroy inside a group");
  forget(c);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  Comm* c = reinterpret_cast<Comm*>(comm);
  if (!c) return ncclSuccess;
  if (!live(c)) {
    strict_check(false, "ncclCommAbort of a communicator already aborted or destroyed");
    return ncclInvalidUsage;
  }
  forget(c);
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* n) {
  *n = reinterpret_cast<Comm*>(comm)->n;
  return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* d) {
  *d = reinterpret_cast<Comm*>(comm)->device;
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* r) {
  *r = reinterpret_cast<Comm*>(comm)->rank;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group_depth <= 0) {
    strict_check(false, "ncclGroupEnd without ncclGroupStart");
    return bad("ncclGroupEnd without ncclGroupStart", ncclInvalidUsage);
  }
  if (--t_group_depth > 0) return ncclSuccess;
  std::vector<Grouped> g;
  g.swap(t_group);
  ncclResult_t out = ncclSuccess;
  for (Grouped& x : g) {
    const ncclResult_t r = submit(x.comm, x.stream, std::move(x.work));
    if (r == ncclInProgress && out == ncclSuccess) out = ncclInProgress;
    if (r != ncclSuccess && r != ncclInProgress) out = r;
  }
  return out;
}

ncclResult_t ncclAllReduce(const void* s, void* r, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t st) {
  Work w{Kind::allreduce, s, r, count, t, op};
  return coll(std::move(w), comm, st, "ncclAllReduce");
}
ncclResult_t ncclReduce(const void* s, void* r, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t st) {
  Work w{Kind::reduce, s, r, count, t, op, root};
  return coll(std::move(w), comm, st, "ncclReduce");
}
ncclResult_t ncclBroadcast(const void* s, void* r, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t st) {
  Work w{Kind::broadcast, s, r, count, t, ncclSum, root};
  return coll(std::move(w), comm, st, "ncclBroadcast");
}
ncclResult_t ncclAllGather(const void* s, void* r, size_t count, ncclDataType_t t, ncclComm_t comm, cudaStream_t st) {
  Work w{Kind::allgather, s, r, count, t};
  return coll(std::move(w), comm, st, "ncclAllGather");
}
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t st) {
  Work w{Kind::reduce_scatter, s, r, count, t, op};
  return coll(std::move(w), comm, st, "ncclReduceScatter");
}
ncclResult_t ncclSend(const void* b, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t st) {
  return p2p(true, b, count, t, peer, comm, st);
}
ncclResult_t ncclRecv(void* b, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t st) {
  return p2p(false, b, count, t, peer, comm, st);
}

}  // extern "C"
extern "C" {
int commscript_fake_gpu = 1;
}
