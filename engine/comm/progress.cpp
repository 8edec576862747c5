#include "progress.hpp"

#include <chrono>
#include <cstring>

namespace cs {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Progress& Progress::instance() {
  static Progress p;
  return p;
}

int64_t Progress::begin(uint64_t seq, Collective coll, uint64_t bytes, std::string_view comm, double deadline_s,
                        uint64_t count, int32_t dtype) {
  const int64_t t = now_ns();
  const uint64_t n = started_.load(std::memory_order_relaxed);
  // Single writer (this rank's main thread): plain stores, no locked instructions.
  const uint64_t v = version_.load(std::memory_order_relaxed);
  version_.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  OpRecord& r = ring_[n % kRing];
  r.seq = seq;
  r.coll = coll;
  r.bytes = bytes;
  r.start_ns = t;
  r.deadline_s = deadline_s;
  r.count = count;
  r.dtype = dtype;
  const size_t len = comm.size() < sizeof r.comm - 1 ? comm.size() : sizeof r.comm - 1;
  std::memcpy(r.comm, comm.data(), len);
  r.comm[len] = '\0';
  cur_start_.store(t, std::memory_order_relaxed);
  in_flight_.store(true, std::memory_order_relaxed);
  started_.store(n + 1, std::memory_order_release);
  version_.store(v + 2, std::memory_order_release);
  return t;
}

OpRecord Progress::current() const {
  while (true) {
    const uint64_t v = version_.load(std::memory_order_acquire);
    if (v & 1) continue;
    const uint64_t n = started_.load(std::memory_order_acquire);
    OpRecord r = n ? ring_[(n - 1) % kRing] : OpRecord{};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (version_.load(std::memory_order_relaxed) == v) return r;
  }
}

std::vector<OpRecord> Progress::recent() const {
  while (true) {
    const uint64_t v = version_.load(std::memory_order_acquire);
    if (v & 1) continue;
    const uint64_t n = started_.load(std::memory_order_acquire);
    std::vector<OpRecord> out;
    for (uint64_t i = n > kRing ? n - kRing : 0; i < n; ++i) out.push_back(ring_[i % kRing]);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (version_.load(std::memory_order_relaxed) == v) return out;
  }
}

}  // namespace cs
