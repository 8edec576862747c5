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

#include "clock.hpp"  // now_ns(): the steady clock of start_ns and the ages
#include "collective.hpp"

namespace cs {

struct OpRecord {
  uint64_t seq = 0;   // operations started on its communicator, this one included
  uint64_t cseq = 0;  // collectives among them (a pairwise one counts those before it): the
                      // number every rank of the communicator agrees on, seq is not
  Collective coll = Collective::barrier;
  uint64_t bytes = 0;
  int64_t start_ns = 0;   // steady clock
  double deadline_s = 0;  // of this operation (0: none)
  uint64_t count = 0;     // the per-call element count (what the ranks must agree on)
  int32_t dtype = -1;     // DType as a number

  uint64_t ops = 1;  // operations this record stands for: a timed loop's, up to and including seq

  char comm[32] = {0};  // a copy: communicators may be gone when the record is read
  std::string_view comm_name() const { return std::string_view(comm); }
};

// One step of a timed loop as Progress records it: `repeat` operations of one kind per iteration.
struct LoopKind {
  Collective coll = Collective::barrier;
  uint64_t bytes = 0;
  uint64_t count = 0;
  int32_t dtype = -1;
  uint32_t repeat = 1;
};

class Progress {
 public:
  static Progress& instance();

  // Called at the start of every operation; returns the start time (steady clock, ns).
  int64_t begin(uint64_t seq, uint64_t cseq, Collective coll, uint64_t bytes, std::string_view comm_name,
                double deadline_s, uint64_t count = 0, int32_t dtype = -1);
  void end() { in_flight_.store(false, std::memory_order_release); }

  // A timed loop (Communicator::time_steps_us without an operation hook) is recorded once: one
  // ring record for all its operations, and per operation nothing but loop_op(k), one relaxed
  // store of its index within the loop (0-based), before it starts. Readers derive the current
  // operation from that index (seq = first_seq + k, cseq = cseq_before + the collectives among
  // operations 0..k, its kind from `kinds`, each iteration being
  // kinds[0] x repeat, kinds[1] x repeat, ...). Its start time is not read per operation: readers
  // take the moment one of them first saw index k (the loop's own start for k = 0), so an age is
  // short by at most the readers' polling interval (watchdog 50 ms, heartbeat 100 ms).
  // end_loop(ops) leaves the record describing the last of the `ops` operations started, with
  // ops set; `failed` (that operation threw) leaves it in flight, as an operation that threw
  // after begin() is left.
  static constexpr size_t kLoopKinds = 4;
  int64_t begin_loop(uint64_t first_seq, uint64_t cseq_before, const LoopKind* kinds, size_t nkinds,
                     std::string_view comm_name, double deadline_s);
  void loop_op(uint64_t k) { loop_k_.store(k, std::memory_order_relaxed); }
  void end_loop(uint64_t ops, bool failed = false);

  bool in_flight() const { return in_flight_.load(std::memory_order_acquire); }
  int64_t current_start_ns() const { return current().start_ns; }
  uint64_t ops_started() const;  // operations, a timed loop's counted one by one
  OpRecord current() const;
  std::vector<OpRecord> recent() const;  // oldest first

  // The recipe file:line of the latest verified call (set only when call verification
  // exchanges a new signature, so not on every operation), for the watchdog's desync line.
  void set_site(const std::string& site);
  std::string site() const;

  // Where the recipe's Lua code was last seen running (file:line, sampled every ~100 ms by the
  // bindings' profiler hook) and when (steady clock, ns): names a rank busy in Lua. `since_ns`:
  // the first sample taken after its latest operation started (how long it has been in Lua since
  // then, to one sampling interval); `ops`: operations started when the site was sampled.
  struct LuaSite {
    std::string site;
    int64_t at_ns = 0;
    int64_t since_ns = 0;
    uint64_t ops = 0;
  };
  void set_lua_site(const char* site, size_t len);
  std::string lua_site(int64_t* at_ns = nullptr) const;
  LuaSite lua_sample() const;

  // For a reader in another process whose writer is gone (the guardian): the ring as it was
  // left, without waiting for a write that will never finish.
  std::vector<OpRecord> recent_left() const;
  std::string site_left() const { return std::string(site_, strnlen(site_, sizeof site_)); }

 private:
  struct Loop {
    std::array<LoopKind, kLoopKinds> kinds{};
    size_t nkinds = 0;
    uint64_t per_iter = 0;        // operations per iteration
    uint64_t cseq_before = 0;     // the communicator's collective count before the loop
    uint64_t colls_per_iter = 0;  // collectives among the per_iter operations
  };
  // The loop's k-th operation, in `r` (the loop's record as begin_loop wrote it).
  void describe_loop_op(OpRecord& r, const Loop& loop, uint64_t k) const;
  int64_t observed_start(uint64_t record, uint64_t k, int64_t loop_start_ns) const;

  static constexpr size_t kRing = 64;
  std::array<OpRecord, kRing> ring_{};
  std::atomic<uint64_t> records_{0};  // records written (the ring's position)
  std::atomic<uint64_t> started_{0};  // operations started (a loop's first one only, until it ends)
  std::atomic<uint64_t> version_{0};  // odd while a record is being written (seqlock)
  std::atomic<bool> in_flight_{false};
  std::atomic<bool> in_loop_{false};
  std::atomic<uint64_t> loop_k_{0};
  Loop loop_;
  // Readers' estimate of when a loop's current operation started (readers only; never the writer).
  mutable std::mutex obs_mu_;
  mutable uint64_t obs_record_ = 0, obs_k_ = 0;
  mutable int64_t obs_ns_ = 0;
  mutable std::mutex site_mu_;
  char site_[256] = {0};
  std::atomic<uint64_t> lua_version_{0};  // seqlock of lua_site_
  std::atomic<int64_t> lua_at_ns_{0};
  std::atomic<int64_t> lua_since_ns_{0};
  std::atomic<uint64_t> lua_ops_{~uint64_t{0}};
  char lua_site_[256] = {0};
};

}  // namespace cs
