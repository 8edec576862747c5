#include "progress.hpp"

#include <chrono>

namespace cs {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Progress& Progress::instance() {
  static Progress p;
  return p;
}

int64_t Progress::begin(uint64_t seq, Collective coll, uint64_t bytes, std::string_view comm) {
  const int64_t t = now_ns();
  const uint64_t n = started_.load(std::memory_order_relaxed);
  ring_[n % kRing] = OpRecord{seq, coll, bytes, t, comm};
  cur_start_.store(t, std::memory_order_relaxed);
  in_flight_.store(true, std::memory_order_relaxed);
  started_.store(n + 1, std::memory_order_release);
  return t;
}

OpRecord Progress::current() const {
  const uint64_t n = started_.load(std::memory_order_acquire);
  return n ? ring_[(n - 1) % kRing] : OpRecord{};
}

std::vector<OpRecord> Progress::recent() const {
  const uint64_t n = started_.load(std::memory_order_acquire);
  std::vector<OpRecord> out;
  for (uint64_t i = n > kRing ? n - kRing : 0; i < n; ++i) out.push_back(ring_[i % kRing]);
  return out;
}

}  // namespace cs
