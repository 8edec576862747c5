#pragma once
// What this rank is doing right now, readable from other threads (watchdog, heartbeat) without
// locks, and a ring of the last operations (the flight recorder). Written on every operation:
// a few stores, no allocation. The object lives in shared anonymous memory (plain data only, no
// heap pointers), so the rank's guardian process (control/guardian.hpp), forked before MPI
// starts, still reads it after the rank was killed.
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
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
  void set_site(const std::string& site);
  std::string site() const;

  // Where the recipe's Lua code was last seen running (file:line, sampled every ~100 ms by the
  // bindings' profiler hook) and when (steady clock, ns): names a rank busy in Lua.
  void set_lua_site(const char* site, size_t len);
  std::string lua_site(int64_t* at_ns = nullptr) const;

  // For a reader in another process whose writer is gone (the guardian): the ring as it was
  // left, without waiting for a write that will never finish.
  std::vector<OpRecord> recent_left() const;
  std::string site_left() const { return std::string(site_, strnlen(site_, sizeof site_)); }

 private:
  static constexpr size_t kRing = 64;
  std::array<OpRecord, kRing> ring_{};
  std::atomic<uint64_t> started_{0};
  std::atomic<uint64_t> version_{0};  // odd while a record is being written (seqlock)
  std::atomic<int64_t> cur_start_{0};
  std::atomic<bool> in_flight_{false};
  mutable std::mutex site_mu_;
  char site_[256] = {0};
  std::atomic<uint64_t> lua_version_{0};  // seqlock of lua_site_
  std::atomic<int64_t> lua_at_ns_{0};
  char lua_site_[256] = {0};
};

int64_t now_ns();

}  // namespace cs
