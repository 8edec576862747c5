// A host-side stand-in for NCCL 2.28 (libnccl.so.2): ranks are processes on this host, joined
// through shared memory named after the unique id; each operation runs on the caller's stream
// (fake_cuda.cpp's worker thread) and moves the data through single-producer rings between
// every pair of ranks, reducing for real (every dtype and op, float16/bfloat16 included) in rank
// order so that every rank gets bit-identical results. The device time of an operation is at
// least its bus bytes at FAKE_GPU_BUSBW_GBPS (nccl-tests' busbw factors) plus FAKE_GPU_LAT_US.
//
// The API's behaviour is a model of NCCL's own source (v2.28.9-1, read in src/init.cc,
// src/group.cc, src/enqueue.cc, src/debug.cc): each behaviour below cites the function it
// imitates, next to the code that models it. The ones commscript depends on:
//   - non-blocking work runs on a background thread of its own (group.cc ncclGroupEndInternal:
//     pthread_create per call), after FAKE_NCCL_ASYNC_DELAY_MS (init, split, shrink, finalize,
//     revoke; default 5) or FAKE_NCCL_NONBLOCKING_US (a collective's launch; default 20), and
//     the communicator's asyncResult reads ncclInProgress until that thread stores the result;
//   - a communicator used while its asyncResult is ncclInProgress is refused with
//     ncclInvalidArgument, "Attempt to use communicator before the previous operation returned
//     ncclSuccess" (init.cc ncclCommEnsureReady), stored on it by collectives and finalize;
//   - ncclCommSplit/ncclCommShrink on a non-blocking parent return ncclSuccess with *newcomm
//     NULL; the parent carries ncclInProgress; the background thread writes the child through
//     the caller's pointer when it ends, on failure too (init.cc ncclCommInitChildComm,
//     ncclCommInitRankFunc);
//   - ncclGetLastError is one process-wide buffer, whatever the communicator (debug.cc);
//   - ncclCommAbort joins the communicator's background job (group.cc ncclGroupJobAbort);
//   - blocking communicators connect lazily at their first operation and wait for peers there
//     (transport.cc ncclTransportP2pSetup: interrupted by the abort flag only), and wait for
//     work-FIFO space with no abort check (enqueue.cc waitWorkFifoAvailable);
//   - splitShare shares the abort flag of parent and child (init.cc ncclCommInitChildComm).
// Faults by environment: FAKE_NCCL_HANG=R:N (rank R's N-th operation, counted from 1, never
// completes), FAKE_NCCL_ASYNC_ERROR=R:N (it raises ncclSystemError and never completes),
// FAKE_NCCL_SPLIT_ERROR=R[:N] (rank R's splits, or only its N-th, fail), FAKE_NCCL_VERSION=code,
// FAKE_NCCL_FIFO_DEPTH (operations in flight before a blocking launch waits, 1024).
// FAKE_GPU_STRICT=1 aborts on misuse that NCCL leaves undefined. Test-only: never shipped.
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
  std::atomic<int> coll_connected;      // this rank reached its first collective (lazy connect)
  std::atomic<uint64_t> p2p_connected;  // bit p: this rank connected its point-to-point path to p
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

// debug.cc: `char ncclLastError[1024] = "";` written under a global mutex by every WARN, from
// any thread and communicator; init.cc ncclGetLastError(comm) returns it, ignoring comm.
std::mutex g_last_mu;
char g_last_error[1024] = "";
void set_last_error(const std::string& why) {
  std::lock_guard<std::mutex> g(g_last_mu);
  std::snprintf(g_last_error, sizeof g_last_error, "%s", why.c_str());
}
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

struct Comm {
  std::shared_ptr<Segment> seg;
  // comm->abortFlag: shared with a splitShare child (init.cc ncclCommInitChildComm:
  // `childComm->abortFlag = comm->abortFlag`), read by the work on the streams.
  std::shared_ptr<std::atomic<bool>> aborted = std::make_shared<std::atomic<bool>>(false);
  int rank = 0, n = 1, device = 0;
  bool blocking = true, share = false;
  std::string id;         // segment name
  const char* name = "";  // config.commName: the caller's pointer, kept (init.cc parseCommConfig)
  // comm->asyncResult (init.cc ncclCommSetAsyncError / ncclCommGetAsyncError).
  std::atomic<ncclResult_t> async{ncclSuccess};
  // proxyState->asyncResult: an error raised by the work itself (read by ncclCommGetAsyncError
  // when asyncResult is ncclSuccess); shared with the queued work, which may outlive the handle.
  std::shared_ptr<std::atomic<ncclResult_t>> proxy = std::make_shared<std::atomic<ncclResult_t>>(ncclSuccess);
  std::thread job;           // comm->groupJob: the background thread of the last non-blocking call
  std::mutex job_mu;         // one thread starts or joins the job at a time
  bool init_failed = false;  // a half-initialised split child (published on failure too)
  bool finalized = false;    // comm->finalizeCalled
  bool revoked = false;      // comm->revokedFlag
  bool coll_connected = false;
  uint64_t p2p_connected = 0;
  uint64_t splits = 0;
  std::shared_ptr<std::atomic<int>> inflight = std::make_shared<std::atomic<int>>(0);  // work on the streams
};

std::mutex g_mu;
std::vector<Comm*> g_live;
bool live(Comm* c) {
  std::lock_guard<std::mutex> g(g_mu);
  return std::find(g_live.begin(), g_live.end(), c) != g_live.end();
}

// What a WARN does before a call returns its error: the text goes to the global last error.
ncclResult_t bad(const std::string& why, ncclResult_t r = ncclInvalidArgument) {
  set_last_error(why);
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

// FAKE_GPU_BUSBW_GBPS, read at every use (a test may set it between communicators).
double busbw_gbps_now() {
  const char* v = std::getenv("FAKE_GPU_BUSBW_GBPS");
  const double x = v && *v ? std::atof(v) : 0;
  return x > 0 ? x : knobs().busbw_gbps;
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
  return knobs().lat_us + static_cast<double>(bytes) * factor / (busbw_gbps_now() * 1e3);
}

// Group state (per thread, as NCCL's).

// ---- the communicator's state: asyncResult, the background job, the ensure-ready rule ----

int env_ms(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::max(0, std::atoi(v)) : dflt;
}
// How long a non-blocking init/split/shrink/finalize/revoke takes on its background thread.
int async_delay_ms() { return env_ms("FAKE_NCCL_ASYNC_DELAY_MS", 5); }
// The host time of a non-blocking collective's thread (create, launch, join) before its work
// reaches the stream.
double launch_us() {
  static const double v = [] {
    const char* e = std::getenv("FAKE_NCCL_NONBLOCKING_US");
    return e && *e ? std::atof(e) : 20.0;
  }();
  return v;
}

void sleep_ms(int ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// init.cc ncclCommGetAsyncError: loads comm->asyncResult; when it reads ncclSuccess and a
// background job is linked, that thread is joined (group.cc ncclGroupJobComplete).
ncclResult_t async_state(Comm* c) {
  ncclResult_t r = c->async.load(std::memory_order_acquire);
  if (r == ncclSuccess) {
    std::lock_guard<std::mutex> g(c->job_mu);
    if (c->job.joinable()) c->job.join();
  }
  if (r == ncclSuccess) r = c->proxy->load();  // then proxyState->asyncResult
  return r;
}

// init.cc ncclCommEnsureReady: a communicator whose asyncResult is ncclInProgress is refused
// with ncclInvalidArgument and this WARN; any other stored error is returned as it is.
ncclResult_t ensure_ready(Comm* c) {
  const ncclResult_t r = async_state(c);
  if (r == ncclInProgress) return bad("Attempt to use communicator before the previous operation returned ncclSuccess");
  return r;
}

// group.cc ncclGroupEndInternal (non-blocking): comm->asyncResult = ncclInProgress, then a new
// pthread (ncclAsyncJobMain) runs the work and stores its result (groupLaunch /
// groupCleanup: ncclCommSetAsyncError(job->comm, ret)).
void launch_job(Comm* c, std::function<ncclResult_t()> work) {
  std::lock_guard<std::mutex> g(c->job_mu);
  if (c->job.joinable()) c->job.join();  // finished: its state was read as not in progress
  c->async.store(ncclInProgress, std::memory_order_release);
  c->job = std::thread([c, work = std::move(work)] { c->async.store(work(), std::memory_order_release); });
}

// group.cc ncclGroupJobAbort: the abort flag, then pthread_join of the in-flight job.
void join_job(Comm* c) {
  std::lock_guard<std::mutex> g(c->job_mu);
  if (c->job.joinable()) c->job.join();
}

ncclResult_t check_handle(Comm* c, const char* call) {
  if (!c) return bad(std::string(call) + ": comm argument is NULL");
  if (!live(c)) {
    strict_check(false, std::string(call) + " on a communicator already aborted or destroyed");
    return bad(std::string(call) + ": invalid communicator", ncclInvalidUsage);
  }
  if (c->init_failed) {
    strict_check(false, std::string(call) + " on the half-initialised child of a failed split");
    return bad(std::string(call) + ": the communicator's initialization failed", ncclInvalidUsage);
  }
  return ncclSuccess;
}

// ---- operations: enqueue, lazy connect, work FIFO ----

thread_local int t_group_depth = 0;
struct Grouped {
  Comm* comm;
  cudaStream_t stream;
  Work work;
};
thread_local std::vector<Grouped> t_group;

void hook_faults(Comm* c, std::function<void()>& fn) {
  const uint64_t k = ++g_ops;
  int hr, hn, er, en;
  const bool hang = env_pair("FAKE_NCCL_HANG", &hr, &hn) && hr == g_world_rank && static_cast<uint64_t>(hn) == k;
  const bool err = env_pair("FAKE_NCCL_ASYNC_ERROR", &er, &en) && er == g_world_rank && static_cast<uint64_t>(en) == k;
  if (!hang && !err) return;
  auto aborted = c->aborted;
  auto proxy = c->proxy;
  fn = [aborted, err, proxy] {
    if (err) proxy->store(ncclSystemError);  // as the proxy thread reports a network error
    spin_until(*aborted, [] { return false; });
  };
}

// enqueue.cc scheduleP2pTasksToPlan: a send to self needs a receive from self in the same
// group and the other way round ("Trying to recv to self without a matching send":
// ncclInvalidUsage); an in-place pair to self is skipped.
ncclResult_t check_self_p2p(Comm* c, const Work& w) {
  if (w.kind != Kind::p2p) return ncclSuccess;
  int sends = 0, recvs = 0;
  for (const P2p& x : w.p2p)
    if (x.peer == c->rank) (x.send ? sends : recvs) += 1;
  if (sends > recvs) return bad("Trying to send to self without a matching recv", ncclInvalidUsage);
  if (recvs > sends) return bad("Trying to recv to self without a matching send", ncclInvalidUsage);
  return ncclSuccess;
}

// Lazy connection (NCCL_RUNTIME_CONNECT, the default): the first collective connects the
// rings/trees of every rank (group.cc ncclCollPreconnect -> transport.cc
// ncclTransportRingConnect), the first point-to-point call to a peer connects that pair
// (ncclP2PPreconnectFunc -> ncclTransportP2pSetup). Both wait for the peers with no timeout;
// the socket loops check the abort flag (misc/socket.cc), which ends them with
// ncclInternalError.
ncclResult_t connect(Comm* c, const Work& w) {
  Header* h = c->seg->hdr();
  Slot& mine = h->slot[c->rank];
  if (w.kind != Kind::p2p) {
    if (c->coll_connected) return ncclSuccess;
    mine.coll_connected.store(1);
    const bool ok = spin_until(*c->aborted, [&] {
      for (int r = 0; r < c->n; ++r)
        if (!h->slot[r].coll_connected.load()) return false;
      return true;
    });
    if (!ok) return bad("connection setup interrupted: the communicator was aborted", ncclInternalError);
    c->coll_connected = true;
    return ncclSuccess;
  }
  // Every peer of the group at once (ncclTransportP2pSetup takes the connectSend/connectRecv
  // masks together), so that no order of peers can deadlock.
  uint64_t want = 0;
  for (const P2p& x : w.p2p)
    if (x.peer != c->rank && x.peer < 64) want |= uint64_t{1} << x.peer;
  want &= ~c->p2p_connected;
  if (!want) return ncclSuccess;
  mine.p2p_connected.fetch_or(want);
  const bool ok = spin_until(*c->aborted, [&] {
    for (int p = 0; p < c->n && p < 64; ++p)
      if ((want >> p & 1) && !((h->slot[p].p2p_connected.load() >> c->rank) & 1)) return false;
    return true;
  });
  if (!ok) return bad("connection setup interrupted: the communicator was aborted", ncclInternalError);
  c->p2p_connected |= want;
  return ncclSuccess;
}

// enqueue.cc waitWorkFifoAvailable: a launch waits for room in the work FIFO, polling event
// callbacks and yielding, with no abort check and no bound: it ends only when earlier kernels
// end (which the abort flag makes them do).
void wait_fifo(Comm* c) {
  const char* v = std::getenv("FAKE_NCCL_FIFO_DEPTH");
  const int depth = v && *v ? std::max(1, std::atoi(v)) : 1024;
  while (c->inflight->load() >= depth) std::this_thread::yield();
}

// The launch: connect, FIFO, then the work on the stream (group.cc groupLaunch -> doLaunches).
ncclResult_t launch(Comm* c, cudaStream_t s, const Work& w) {
  if (const ncclResult_t r = check_self_p2p(c, w); r != ncclSuccess) return r;
  if (const ncclResult_t r = connect(c, w); r != ncclSuccess) return r;
  wait_fifo(c);
  auto seg = c->seg;
  auto aborted = c->aborted;
  const int me = c->rank;
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
  if (!enqueue(s, std::move(fn), cost_us(w, c->n))) {
    inflight->fetch_sub(1);
    return bad("cudaLaunchKernel: invalid stream", ncclUnhandledCudaError);
  }
  return ncclSuccess;
}

// Runs `works` (all on communicator c) as NCCL's group end does: inline on a blocking
// communicator; on a non-blocking one, on a new thread, returning ncclInProgress (enqueue.cc
// ncclEnqueueCheck returns ncclCommGetAsyncError(comm) after the group end).
ncclResult_t run_group(Comm* c, std::vector<std::pair<cudaStream_t, Work>> works) {
  if (c->blocking) {
    for (auto& [s, w] : works)
      if (const ncclResult_t r = launch(c, s, w); r != ncclSuccess) return r;
    return ncclSuccess;
  }
  launch_job(c, [c, works = std::move(works)] {
    const double us = launch_us();
    if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(us)));
    for (auto& [s, w] : works)
      if (const ncclResult_t r = launch(c, s, w); r != ncclSuccess) return r;
    return ncclSuccess;
  });
  const ncclResult_t r = c->async.load();
  return r == ncclSuccess ? ncclSuccess : r;
}

// enqueue.cc ncclEnqueueCheck: ensure ready, check the arguments, append the task; on failure a
// non-blocking communicator stores the error (`ncclCommSetAsyncError(info->comm, ret)`).
ncclResult_t enqueue_check(Comm* c, const char* call, cudaStream_t s, Work w) {
  if (const ncclResult_t r = check_handle(c, call); r != ncclSuccess) return r;
  auto fail = [&](ncclResult_t r) {
    if (!c->blocking) c->async.store(r);
    return r;
  };
  if (c->revoked) return fail(bad(std::string(call) + ": communicator was revoked", ncclInvalidUsage));
  if (const ncclResult_t r = ensure_ready(c); r != ncclSuccess) return fail(r);
  auto invalid = [&](const std::string& why) { return fail(bad(std::string(call) + ": " + why)); };
  if (type_size(w.type) == 0) return invalid("invalid data type " + std::to_string(w.type));
  for (const P2p& x : w.p2p)
    if (x.peer < 0 || x.peer >= c->n || (x.bytes && !x.buf)) return invalid("invalid peer " + std::to_string(x.peer));
  if (w.kind != Kind::p2p) {
    if (w.kind != Kind::allgather && w.kind != Kind::broadcast && (w.op < ncclSum || w.op > ncclAvg))
      return invalid("invalid reduction operation " + std::to_string(w.op));
    if ((w.kind == Kind::reduce || w.kind == Kind::broadcast) && (w.root < 0 || w.root >= c->n))
      return invalid("invalid root " + std::to_string(w.root));
    if (w.count && ((!w.send && !(w.kind == Kind::broadcast && c->rank != w.root)) || !w.recv))
      return invalid("NULL buffer");
  }
  if (t_group_depth > 0) {
    if (w.kind == Kind::p2p)
      for (Grouped& g : t_group)
        if (g.comm == c && g.work.kind == Kind::p2p && g.stream == s) {
          g.work.p2p.insert(g.work.p2p.end(), w.p2p.begin(), w.p2p.end());
          return ncclSuccess;
        }
    t_group.push_back({c, s, std::move(w)});
    return ncclSuccess;
  }
  std::vector<std::pair<cudaStream_t, Work>> one;
  one.emplace_back(s, std::move(w));
  const ncclResult_t r = run_group(c, std::move(one));
  if (r != ncclSuccess && r != ncclInProgress) return fail(r);
  return r;
}

ncclResult_t coll(Work w, ncclComm_t comm, cudaStream_t s, const char* call) {
  return enqueue_check(reinterpret_cast<Comm*>(comm), call, s, std::move(w));
}

ncclResult_t p2p(bool send, const void* buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
                 cudaStream_t s) {
  Comm* c = reinterpret_cast<Comm*>(comm);
  const char* call = send ? "ncclSend" : "ncclRecv";
  Work w;
  w.kind = Kind::p2p;
  w.type = t;
  w.p2p.push_back({send, peer, buf, count * type_size(t)});
  return enqueue_check(c, call, s, std::move(w));
}

// ---- init and split ----

// init.cc envConfigOverride: NCCL_COMM_BLOCKING (0 or 1) wins over config.blocking; an
// undefined config.blocking means blocking (parseCommConfig).
bool blocking_of(const ncclConfig_t* cfg) {
  int b = cfg && cfg->blocking != NCCL_CONFIG_UNDEF_INT ? cfg->blocking : 1;
  if (const char* e = std::getenv("NCCL_COMM_BLOCKING"); e && (std::string(e) == "0" || std::string(e) == "1"))
    b = std::atoi(e);
  return b != 0;
}

Comm* new_comm(const std::string& seg_name, int n, int rank, const ncclConfig_t* cfg, bool open = true) {
  Comm* c = new Comm;
  c->n = n;
  c->rank = rank;
  c->device = current_device();
  c->blocking = blocking_of(cfg);
  c->share = cfg && cfg->splitShare != NCCL_CONFIG_UNDEF_INT && cfg->splitShare == 1;
  if (cfg && cfg->commName) c->name = cfg->commName;  // the pointer, not a copy (parseCommConfig)
  c->id = seg_name;
  if (open) c->seg = open_segment(seg_name, n);
  std::lock_guard<std::mutex> g(g_mu);
  g_live.push_back(c);
  return c;
}

// Destroy frees an idle communicator; abort raises the abort flag first (shared with a
// splitShare relative: init.cc setCommAbortFlags), which ends the work on the streams.
void forget(Comm* c, bool abort = true) {
  {
    std::lock_guard<std::mutex> g(g_mu);
    g_live.erase(std::remove(g_live.begin(), g_live.end(), c), g_live.end());
  }
  if (abort) c->aborted->store(true);
  join_job(c);
  delete c;  // queued work keeps the segment and the flags alive through its shared_ptrs
}

// The profiler plugin reads config.commName on the init thread (plugin/profiler.cc
// ncclProfilerPluginInit, from initTransportsRank): a name that died with its caller's frame
// is read here, so that AddressSanitizer sees it.
void read_name(const Comm* c) {
  volatile size_t n = std::strlen(c->name);
  (void)n;
}

// The split's exchange (init.cc commGetSplitInfo: a bootstrapAllGather of (color, key) over the
// parent): every parent rank publishes (color, key); NCCL_SPLIT_NOCOLOR ranks take part too.
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
  if (!ok) return bad("bootstrap allgather of the split interrupted: the communicator was aborted", ncclInternalError);
  std::vector<std::pair<int, int>> members;  // (key, parent rank)
  for (int r = 0; r < parent->n; ++r)
    if (h->slot[r].split_color[epoch % 2] == color) members.emplace_back(h->slot[r].split_key[epoch % 2], r);
  std::sort(members.begin(), members.end());
  *nranks = static_cast<int>(members.size());
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i].second == parent->rank) *rank = static_cast<int>(i);
  return ncclSuccess;
}

// The child's init (init.cc ncclCommInitRankFunc): its ranks meet in its own segment.
ncclResult_t init_child(Comm* parent, Comm* child, const std::string& seg_name, int n, int r) {
  child->n = n;
  child->rank = r;
  child->seg = open_segment(seg_name, n);
  if (!child->seg) return bad("shm_open failed", ncclSystemError);
  join(child);
  read_name(child);
  if (!spin_until(*child->aborted, [&] { return all_joined(child) || parent->aborted->load(); }) ||
      parent->aborted->load())
    return bad("child communicator init interrupted: the parent was aborted", ncclInternalError);
  sleep_ms(async_delay_ms());
  return check_join(child);
}

// init.cc ncclCommInitChildComm, for split (isShrink false) and shrink: *newcomm = NULL first;
// the job (ncclCommInitRankFunc) is launched against the PARENT, whose asyncResult carries its
// progress; the job ends with `__atomic_store_n(job->newcomm, comm, __ATOMIC_RELEASE)` at its
// exit label, on failure too (a half-initialised child). A non-blocking parent returns
// ncclSuccess at once (ncclCommSplit: `NCCLCHECK(ncclGroupEndInternal()); return res;`, the
// group end's ncclInProgress swallowed by NCCLCHECK); a blocking one returns the result.
ncclResult_t child_comm(Comm* p, ncclComm_t* newcomm, bool create, const ncclConfig_t* cfg,
                        std::function<ncclResult_t(Comm* child)> work) {
  *newcomm = nullptr;
  Comm* child = nullptr;
  if (create) {
    child = new_comm("", 0, 0, cfg, false);
    child->device = p->device;
    // The parent's splitShare decides (init.cc: `comm->shareResources = ... comm->config.splitShare`),
    // never on a revoked parent.
    if (p->share && !p->revoked) child->aborted = p->aborted;
  }
  auto body = [p, child, newcomm, work] {
    const ncclResult_t r = work(child);
    if (child && r != ncclSuccess) child->init_failed = true;
    __atomic_store_n(newcomm, reinterpret_cast<ncclComm_t>(child), __ATOMIC_RELEASE);
    (void)p;
    return r;
  };
  if (p->blocking) return body();
  launch_job(p, body);
  return ncclSuccess;
}

// A field of a ready communicator (the three queries below).
ncclResult_t comm_field(ncclComm_t comm, const char* call, int Comm::*field, int* out) {
  Comm* c = reinterpret_cast<Comm*>(comm);
  if (const ncclResult_t r = check_handle(c, call); r != ncclSuccess) return r;
  if (const ncclResult_t r = ensure_ready(c); r != ncclSuccess) return r;
  *out = c->*field;
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

// init.cc: `const char* ncclGetLastError(ncclComm_t comm) { return ncclLastError; }`
const char* ncclGetLastError(ncclComm_t) { return g_last_error; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return ncclInvalidArgument;
  std::memset(id->internal, 0, sizeof id->internal);
  std::random_device rd;
  const unsigned long long a = (static_cast<unsigned long long>(rd()) << 32) ^ rd() ^ static_cast<unsigned>(getpid());
  std::snprintf(id->internal, sizeof id->internal, "/csfake-%016llx", a);
  return ncclSuccess;
}

// init.cc ncclCommInitRankDev: the communicator is allocated and published (*newcomm = comm)
// before its job starts; ncclCommInitRankConfig returns ncclCommGetAsyncError's state
// (ncclInProgress while the job runs) on a non-blocking communicator.
ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int n, ncclUniqueId id, int rank, ncclConfig_t* cfg) {
  if (!out) return bad("ncclCommInitRankConfig: comm is NULL");
  *out = nullptr;
  if (n < 1 || n > kMaxRanks || rank < 0 || rank >= n) return bad("ncclCommInitRankConfig: invalid rank/size");
  if (std::strncmp(id.internal, "/csfake-", 8) != 0) return bad("ncclCommInitRankConfig: invalid unique id");
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return bad("cudaGetDevice failed", ncclUnhandledCudaError);
  Comm* c = new_comm(id.internal, n, rank, cfg);
  if (!c->seg) {
    forget(c);
    return bad("shm_open failed", ncclSystemError);
  }
  if (g_world_rank < 0) g_world_rank = rank;
  *out = reinterpret_cast<ncclComm_t>(c);
  auto work = [c] {
    join(c);
    read_name(c);
    if (!spin_until(*c->aborted, [&] { return all_joined(c); }))
      return bad("bootstrap interrupted: the communicator was aborted", ncclInternalError);
    if (!c->blocking) sleep_ms(async_delay_ms());
    return check_join(c);
  };
  if (c->blocking) {
    const ncclResult_t r = work();
    c->async.store(r);
    return r;
  }
  launch_job(c, work);
  return async_state(c);
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
  *state = async_state(c);
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* cfg) {
  Comm* p = reinterpret_cast<Comm*>(comm);
  if (const ncclResult_t r = check_handle(p, "ncclCommSplit"); r != ncclSuccess) return r;
  if (!newcomm) return bad("ncclCommSplit: newcomm is NULL");
  // ncclCommInitChildComm: ensure ready first; a refusal is returned, not stored on the parent.
  if (const ncclResult_t r = ensure_ready(p); r != ncclSuccess) return r;
  const uint64_t epoch = ++p->splits;
  static std::atomic<int> g_splits{0};  // splits this process made, counted from 1
  const int nth = ++g_splits;
  int fr = -1, fn = 0;
  const char* fe = std::getenv("FAKE_NCCL_SPLIT_ERROR");
  const int got = fe ? std::sscanf(fe, "%d:%d", &fr, &fn) : 0;
  const bool fail = got >= 1 && fr == g_world_rank && (got == 1 || fn == nth);
  const std::string base = p->id + ".s" + std::to_string(epoch) + "c" + std::to_string(color);
  return child_comm(p, newcomm, color != NCCL_SPLIT_NOCOLOR, cfg, [p, color, key, epoch, fail, base](Comm* ch) {
    if (fail) return bad("ncclCommSplit: injected failure (FAKE_NCCL_SPLIT_ERROR)", ncclInternalError);
    int n = 0, r = 0;
    if (const ncclResult_t e = split_exchange(p, color, key, epoch, &n, &r); e != ncclSuccess) return e;
    if (!ch) return ncclSuccess;  // NCCL_SPLIT_NOCOLOR: `goto exit`, *newcomm stays NULL
    return init_child(p, ch, base, n, r);
  });
}

// init.cc ncclCommShrink (NCCL 2.27.3+): the exclude list is sorted in place (qsort), a rank in
// it is refused; NCCL_SHRINK_ABORT raises the abort flags, waits for the device stream and
// clears them, then the parent must be ready (ncclCommEnsureReady: a parent in error is refused
// unless revoked, which resets its state); the rest is ncclCommInitChildComm, as a split.
ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude, int nexclude, ncclComm_t* newcomm, ncclConfig_t* cfg,
                            int flags) {
  Comm* p = reinterpret_cast<Comm*>(comm);
  if (const ncclResult_t r = check_handle(p, "ncclCommShrink"); r != ncclSuccess) return r;
  if (!newcomm || nexclude < 0 || (nexclude && !exclude)) return bad("ncclCommShrink: invalid argument");
  if (flags != NCCL_SHRINK_DEFAULT && flags != NCCL_SHRINK_ABORT)
    return bad("ncclCommShrink: invalid shrinkFlags " + std::to_string(flags));
  std::sort(exclude, exclude + nexclude);
  for (int i = 0; i < nexclude; ++i)
    if (exclude[i] < 0 || exclude[i] >= p->n || (i && exclude[i] == exclude[i - 1]))
      return bad("ncclCommShrink: invalid exclude list (rank " + std::to_string(exclude[i]) + ")");
  if (std::binary_search(exclude, exclude + nexclude, p->rank))
    return bad("ncclCommShrink: rank " + std::to_string(p->rank) + " is in the exclude list");
  if (flags & NCCL_SHRINK_ABORT) {
    p->aborted->store(true);
    while (p->inflight->load() > 0) std::this_thread::yield();
    p->aborted->store(false);
  }
  if (const ncclResult_t r = ensure_ready(p); r != ncclSuccess) return r;
  std::vector<int> keep;
  for (int r = 0; r < p->n; ++r)
    if (!std::binary_search(exclude, exclude + nexclude, r)) keep.push_back(r);
  if (keep.empty()) return bad("ncclCommShrink: every rank excluded");
  const int me = static_cast<int>(std::find(keep.begin(), keep.end(), p->rank) - keep.begin());
  const int n = static_cast<int>(keep.size());
  const std::string name = p->id + ".k" + std::to_string(++p->splits);
  ncclConfig_t c2 = cfg ? *cfg : ncclConfig_t(NCCL_CONFIG_INITIALIZER);
  if (flags & NCCL_SHRINK_ABORT) c2.splitShare = 0;  // never shared after an abort
  const bool was_share = p->share;
  if (flags & NCCL_SHRINK_ABORT) p->share = false;
  const ncclResult_t r =
      child_comm(p, newcomm, true, &c2, [p, name, n, me](Comm* ch) { return init_child(p, ch, name, n, me); });
  p->share = was_share;
  return r;
}

// init.cc ncclCommRevoke (2.28.7+): flags other than NCCL_REVOKE_DEFAULT, or a communicator being
// destroyed, finalized or already revoked, get ncclInvalidArgument. It raises the abort flags,
// sets revokedFlag, joins the in-flight job, marks finalizeCalled; its job (commRevokeAsync)
// waits for the streams, clears the abort flags and stores its result, which resets an error
// to ncclSuccess. Non-blocking: ncclInProgress until then.
ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags) {
  Comm* c = reinterpret_cast<Comm*>(comm);
  if (const ncclResult_t r = check_handle(c, "ncclCommRevoke"); r != ncclSuccess) return r;
  if (flags != NCCL_REVOKE_DEFAULT) return bad("ncclCommRevoke: revokeFlags must be NCCL_REVOKE_DEFAULT");
  if (c->revoked || c->finalized) return bad("ncclCommRevoke: communicator already revoked or finalized");
  c->aborted->store(true);
  c->revoked = true;
  join_job(c);
  c->finalized = true;
  auto work = [c] {
    while (c->inflight->load() > 0) std::this_thread::yield();
    if (!c->blocking) sleep_ms(async_delay_ms());
    c->aborted->store(false);
    return ncclSuccess;
  };
  if (c->blocking) {
    const ncclResult_t r = work();
    c->async.store(r);
    return r;
  }
  launch_job(c, work);
  return async_state(c);
}

// init.cc ncclCommFinalize: ensure ready (refused while in progress or in error; the refusal is
// stored on a non-blocking communicator), a second call is invalid; the job (commDestroySync)
// waits for the communicator's streams. Non-blocking: ncclInProgress, to be polled.
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  Comm* c = reinterpret_cast<Comm*>(comm);
  if (const ncclResult_t r = check_handle(c, "ncclCommFinalize"); r != ncclSuccess) return r;
  auto fail = [&](ncclResult_t r) {
    if (!c->blocking) c->async.store(r);
    return r;
  };
  if (c->finalized) {
    strict_check(!c->revoked, "ncclCommFinalize after ncclCommRevoke (destroy or abort it)");
    return fail(bad("ncclCommFinalize: finalize already called (or the communicator was revoked)"));
  }
  if (const ncclResult_t r = ensure_ready(c); r != ncclSuccess) return fail(r);
  c->finalized = true;
  auto work = [c] {
    while (c->inflight->load() > 0 && !c->aborted->load()) std::this_thread::yield();
    if (!c->blocking) sleep_ms(async_delay_ms());
    return ncclSuccess;
  };
  if (c->blocking) {
    const ncclResult_t r = work();
    c->async.store(r);
    return r;
  }
  launch_job(c, work);
  return async_state(c);
}

// init.cc ncclCommDestroy: always blocking (destroyFlag); refused by ncclCommEnsureReady while an
// operation is in progress or the communicator is in error; without a finalize before it,
// commReclaim waits for the streams (commDestroySync) with no timeout.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  Comm* c = reinterpret_cast<Comm*>(comm);
  if (!c) return ncclSuccess;
  if (!live(c)) {
    strict_check(false, "ncclCommDestroy of a communicator already aborted or destroyed");
    return ncclInvalidUsage;
  }
  strict_check(t_group_depth == 0, "ncclCommDestroy inside a group");
  if (!c->init_failed)
    if (const ncclResult_t r = ensure_ready(c); r != ncclSuccess) return r;
  while (c->inflight->load() > 0) std::this_thread::yield();
  forget(c, false);
  return ncclSuccess;
}

// init.cc ncclCommAbort: callable in any state; raises the abort flags (the work on the streams
// ends), joins the communicator's in-flight job (ncclGroupJobAbort), then frees it.
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

// init.cc ncclCommCount / ncclCommCuDevice / ncclCommUserRank: ncclCommEnsureReady first.
ncclResult_t ncclCommCount(const ncclComm_t comm, int* n) { return comm_field(comm, "ncclCommCount", &Comm::n, n); }
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* d) {
  return comm_field(comm, "ncclCommCuDevice", &Comm::device, d);
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* r) {
  return comm_field(comm, "ncclCommUserRank", &Comm::rank, r);
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

// group.cc ncclGroupEndInternal: the outermost end launches the group's tasks; blocking and
// non-blocking communicators cannot be mixed in one group (ncclAsyncLaunch / ncclGroupCommJoin:
// ncclInvalidArgument); a non-blocking group runs on one new thread and returns ncclInProgress.
ncclResult_t ncclGroupEnd() {
  if (t_group_depth <= 0) {
    strict_check(false, "ncclGroupEnd without ncclGroupStart");
    return bad("ncclGroupEnd: not in a group call.", ncclInvalidUsage);
  }
  if (--t_group_depth > 0) return ncclSuccess;
  std::vector<Grouped> g;
  g.swap(t_group);
  if (g.empty()) return ncclSuccess;
  for (const Grouped& x : g)
    if (x.comm->blocking != g.front().comm->blocking)
      return bad("ncclGroupEnd: blocking and non-blocking communicators in one group");
  ncclResult_t out = ncclSuccess;
  std::vector<Comm*> comms;
  for (const Grouped& x : g)
    if (std::find(comms.begin(), comms.end(), x.comm) == comms.end()) comms.push_back(x.comm);
  for (Comm* c : comms) {
    std::vector<std::pair<cudaStream_t, Work>> works;
    for (Grouped& x : g)
      if (x.comm == c) works.emplace_back(x.stream, std::move(x.work));
    const ncclResult_t r = run_group(c, std::move(works));
    if (r != ncclSuccess && r != ncclInProgress) {
      if (!c->blocking) c->async.store(r);
      out = r;
    } else if (r == ncclInProgress && out == ncclSuccess) {
      out = ncclInProgress;
    }
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
// collectives.cc ncclAlltoAll -> enqueue.cc ncclEnqueueCheck/taskAppend (v2.28.9-1): a count of 0 is
// discarded; on one rank ncclLaunchOneRank copies count elements (nothing when in place); on more,
// p2pTaskAppend adds per peer r a send from sendbuff + r*count and a receive into recvbuff + r*count,
// which run as one group's point-to-point work. Modelled as that send/receive list.
ncclResult_t ncclAlltoAll(const void* s, void* r, size_t count, ncclDataType_t t, ncclComm_t comm, cudaStream_t st) {
  Comm* c = reinterpret_cast<Comm*>(comm);
  if (const ncclResult_t e = check_handle(c, "ncclAlltoAll"); e != ncclSuccess) return e;
  Work w;
  w.kind = Kind::p2p;
  w.type = t;
  const size_t b = count * type_size(t);
  if (count && (!s || !r))  // ArgsCheck's NULL-buffer refusal, as for every collective
    return enqueue_check(c, "ncclAlltoAll", st, Work{Kind::allgather, s, r, count, t});
  for (int p = 0; count && p < c->n && (c->n > 1 || s != r); ++p) {
    w.p2p.push_back({true, p, static_cast<const char*>(s) + size_t(p) * b, b});
    w.p2p.push_back({false, p, static_cast<char*>(r) + size_t(p) * b, b});
  }
  return enqueue_check(c, "ncclAlltoAll", st, std::move(w));
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
// Test hook: operations enqueued by this process so far (FAKE_NCCL_HANG=R:N counts them).
uint64_t fake_nccl_op_count() { return g_ops.load(); }
}
