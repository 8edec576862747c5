#pragma once
// What this rank is doing right now, readable from other threads (watchdog, heartbeat) without
// locks, and a ring of the last operations (the flight recorder). Written on every operation:
// a few stores, no allocation.
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "collective.hpp"

namespace cs {

struct OpRecord {
  uint64_t seq = 0;
  Collective coll = Collective::barrier;
  uint64_t bytes = 0;
  int64_t start_ns = 0;   // steady clock
  double deadline_s = 0;  // of this operation (0: none)
  uint64_t count = 0;     // the per-call element count (what the ranks must agree on)
  int32_t dtype = -1;     // DType as a number

  char comm[32] = {0};  // a copy: communicators may be gone when the record is read
  std::string_view comm_name() const { return std::string_view(comm); }
};

class Progress {
 public:
  static Progress& instance();

  // Called at the start of every operation; returns the start time (steady clock, ns).
  int64_t begin(uint64_t seq, Collective coll, uint64_t bytes, std::string_view comm_name, double deadline_s,
                uint64_t count = 0, int32_t dtype = -1);
  void end() { in_flight_.store(false, std::memory_order_release); }

  bool in_flight() const { return in_flight_.load(std::memory_order_acquire); }
  int64_t current_start_ns() const { return cur_start_.load(std::memory_order_acquire); }
  uint64_t ops_started() const { return started_.load(std::memory_order_acquire); }
  OpRecord current() const;
  std::vector<OpRecord> recent() const;  // oldest first

  // The recipe file:line of the latest verified call (set only when call verification
  // exchanges a new signature, so not on every operation), for the watchdog's desync line.
  void set_site(std::string site) {
    std::lock_guard<std::mutex> g(site_mu_);
    site_ = std::move(site);
  }
  std::string site() const {
    std::lock_guard<std::mutex> g(site_mu_);
    return site_;
  }

 private:
  static constexpr size_t kRing = 64;
  std::array<OpRecord, kRing> ring_{};
  std::atomic<uint64_t> started_{0};
  std::atomic<uint64_t> version_{0};  // odd while a record is being written (seqlock)
  std::atomic<int64_t> cur_start_{0};
  std::atomic<bool> in_flight_{false};
  mutable std::mutex site_mu_;
  std::string site_;
};

int64_t now_ns();

}  // namespace cs
