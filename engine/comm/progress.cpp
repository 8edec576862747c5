#include "progress.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>

namespace cs {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Progress& Progress::instance() {
  // Shared with the guardian process forked after the first call (MAP_SHARED survives fork).
  static Progress* p = [] {
    void* m = mmap(nullptr, sizeof(Progress), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return new Progress();
    return new (m) Progress();
  }();
  return *p;
}

void Progress::set_site(const std::string& site) {
  std::lock_guard<std::mutex> g(site_mu_);
  const size_t n = std::min(site.size(), sizeof site_ - 1);
  std::memcpy(site_, site.data(), n);
  site_[n] = '\0';
}

std::string Progress::site() const {
  std::lock_guard<std::mutex> g(site_mu_);
  return std::string(site_, strnlen(site_, sizeof site_));
}

void Progress::set_lua_site(const char* site, size_t len) {
  const uint64_t v = lua_version_.load(std::memory_order_relaxed);
  lua_version_.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  const size_t n = std::min(len, sizeof lua_site_ - 1);
  std::memcpy(lua_site_, site, n);
  lua_site_[n] = '\0';
  lua_at_ns_.store(now_ns(), std::memory_order_relaxed);
  lua_version_.store(v + 2, std::memory_order_release);
}

std::string Progress::lua_site(int64_t* at_ns) const {
  for (int tries = 0;; ++tries) {
    const uint64_t v = lua_version_.load(std::memory_order_acquire);
    if ((v & 1) && tries < 1000) continue;
    char copy[sizeof lua_site_];
    std::memcpy(copy, lua_site_, sizeof copy);
    const int64_t at = lua_at_ns_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (lua_version_.load(std::memory_order_relaxed) == v || tries >= 1000) {
      copy[sizeof copy - 1] = '\0';
      if (at_ns) *at_ns = at;
      return copy;
    }
  }
}

std::vector<OpRecord> Progress::recent_left() const {
  const uint64_t n = started_.load(std::memory_order_acquire);
  std::vector<OpRecord> out;
  for (uint64_t i = n > kRing ? n - kRing : 0; i < n; ++i) out.push_back(ring_[i % kRing]);
  for (OpRecord& r : out) r.comm[sizeof r.comm - 1] = '\0';
  return out;
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
