#include "progress.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace cs {

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
  const int64_t t = now_ns();
  lua_at_ns_.store(t, std::memory_order_relaxed);
  // The first sample since the latest operation started opens a new stretch of Lua.
  const uint64_t ops = started_.load(std::memory_order_relaxed);
  if (ops != lua_ops_.load(std::memory_order_relaxed)) {
    lua_since_ns_.store(t, std::memory_order_relaxed);
    lua_ops_.store(ops, std::memory_order_relaxed);
  }
  lua_version_.store(v + 2, std::memory_order_release);
}

Progress::LuaSite Progress::lua_sample() const {
  for (int tries = 0;; ++tries) {
    const uint64_t v = lua_version_.load(std::memory_order_acquire);
    if ((v & 1) && tries < 1000) continue;
    char copy[sizeof lua_site_];
    std::memcpy(copy, lua_site_, sizeof copy);
    LuaSite s;
    s.at_ns = lua_at_ns_.load(std::memory_order_relaxed);
    s.since_ns = lua_since_ns_.load(std::memory_order_relaxed);
    s.ops = lua_ops_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (lua_version_.load(std::memory_order_relaxed) == v || tries >= 1000) {
      copy[sizeof copy - 1] = '\0';
      s.site = copy;
      return s;
    }
  }
}

std::string Progress::lua_site(int64_t* at_ns) const {
  LuaSite s = lua_sample();
  if (at_ns) *at_ns = s.at_ns;
  return std::move(s.site);
}

std::vector<OpRecord> Progress::recent_left() const {
  // The ring's position is records_, not started_: a timed loop is one record for all its
  // operations, so after one the operation count ran ahead of the ring and the guardian read
  // slots never written ("last completed: barrier #0 on ").
  const uint64_t m = records_.load(std::memory_order_acquire);
  std::vector<OpRecord> out;
  for (uint64_t i = m > kRing ? m - kRing : 0; i < m; ++i) out.push_back(ring_[i % kRing]);
  for (OpRecord& r : out) r.comm[sizeof r.comm - 1] = '\0';
  if (in_loop_.load(std::memory_order_relaxed) && !out.empty())  // died inside a timed loop: its call
    describe_loop_op(out.back(), loop_, loop_k_.load(std::memory_order_relaxed));
  return out;
}

int64_t Progress::begin(uint64_t seq, uint64_t cseq, Collective coll, uint64_t bytes, std::string_view comm,
                        double deadline_s, uint64_t count, int32_t dtype) {
  const int64_t t = now_ns();
  const uint64_t m = records_.load(std::memory_order_relaxed);
  // Single writer (this rank's main thread): plain stores, no locked instructions.
  const uint64_t v = version_.load(std::memory_order_relaxed);
  version_.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  OpRecord& r = ring_[m % kRing];
  r.seq = seq;
  r.cseq = cseq;
  r.coll = coll;
  r.bytes = bytes;
  r.start_ns = t;
  r.deadline_s = deadline_s;
  r.count = count;
  r.dtype = dtype;
  r.ops = 1;
  const size_t len = comm.size() < sizeof r.comm - 1 ? comm.size() : sizeof r.comm - 1;
  std::memcpy(r.comm, comm.data(), len);
  r.comm[len] = '\0';
  in_flight_.store(true, std::memory_order_relaxed);
  in_loop_.store(false, std::memory_order_relaxed);  // a loop that ended by an exception is over too
  records_.store(m + 1, std::memory_order_relaxed);
  started_.store(started_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  version_.store(v + 2, std::memory_order_release);
  return t;
}

int64_t Progress::begin_loop(uint64_t first_seq, uint64_t cseq_before, const LoopKind* kinds, size_t nkinds,
                             std::string_view comm, double deadline_s) {
  if (nkinds > kLoopKinds) nkinds = kLoopKinds;  // the caller falls back to per-operation records before this
  // The loop's first operation, as any other: a reader in between sees exactly that.
  const int64_t t = begin(first_seq, cseq_before + (collective_is_pairwise(kinds[0].coll) ? 0 : 1), kinds[0].coll,
                          kinds[0].bytes, comm, deadline_s, kinds[0].count, kinds[0].dtype);
  const uint64_t v = version_.load(std::memory_order_relaxed);
  version_.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  loop_.nkinds = nkinds;
  loop_.per_iter = 0;
  loop_.cseq_before = cseq_before;
  loop_.colls_per_iter = 0;
  for (size_t i = 0; i < nkinds; ++i) {
    loop_.kinds[i] = kinds[i];
    if (!collective_is_pairwise(kinds[i].coll)) loop_.colls_per_iter += kinds[i].repeat;
    loop_.per_iter += kinds[i].repeat;
  }
  loop_k_.store(0, std::memory_order_relaxed);
  in_loop_.store(true, std::memory_order_relaxed);
  version_.store(v + 2, std::memory_order_release);
  return t;
}

void Progress::end_loop(uint64_t ops, bool failed) {
  const uint64_t v = version_.load(std::memory_order_relaxed);
  version_.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  const uint64_t m = records_.load(std::memory_order_relaxed);
  if (ops > 0 && m > 0) {
    OpRecord& r = ring_[(m - 1) % kRing];
    describe_loop_op(r, loop_, ops - 1);
    started_.store(started_.load(std::memory_order_relaxed) + ops - 1, std::memory_order_relaxed);
  }
  in_loop_.store(false, std::memory_order_relaxed);
  if (!failed)
    in_flight_.store(false, std::memory_order_relaxed);  // as end(): a failed operation stays the current one
  version_.store(v + 2, std::memory_order_release);
}

void Progress::describe_loop_op(OpRecord& r, const Loop& loop, uint64_t k) const {
  uint64_t j = loop.per_iter ? k % loop.per_iter : 0;
  uint64_t colls = 0;  // collectives in op k's iteration up to and including it
  const LoopKind* kind = &loop.kinds[0];
  for (size_t i = 0; i < loop.nkinds; ++i) {
    const bool coll = !collective_is_pairwise(loop.kinds[i].coll);
    if (j < loop.kinds[i].repeat) {
      kind = &loop.kinds[i];
      if (coll) colls += j + 1;  // op k itself included
      break;
    }
    if (coll) colls += loop.kinds[i].repeat;
    j -= loop.kinds[i].repeat;
  }
  r.cseq = loop.cseq_before + (loop.per_iter ? k / loop.per_iter : 0) * loop.colls_per_iter + colls;
  r.seq += k;
  r.coll = kind->coll;
  r.bytes = kind->bytes;
  r.count = kind->count;
  r.dtype = kind->dtype;
  r.ops = k + 1;
}

int64_t Progress::observed_start(uint64_t record, uint64_t k, int64_t loop_start_ns) const {
  std::lock_guard<std::mutex> g(obs_mu_);
  if (obs_record_ != record || obs_k_ != k) {
    obs_record_ = record;
    obs_k_ = k;
    obs_ns_ = k == 0 ? loop_start_ns : now_ns();
  }
  return obs_ns_;
}

uint64_t Progress::ops_started() const {
  while (true) {
    const uint64_t v = version_.load(std::memory_order_acquire);
    if (v & 1) continue;
    uint64_t n = started_.load(std::memory_order_acquire);
    if (in_loop_.load(std::memory_order_relaxed)) n += loop_k_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (version_.load(std::memory_order_relaxed) == v) return n;
  }
}

OpRecord Progress::current() const {
  while (true) {
    const uint64_t v = version_.load(std::memory_order_acquire);
    if (v & 1) continue;
    const uint64_t m = records_.load(std::memory_order_acquire);
    OpRecord r = m ? ring_[(m - 1) % kRing] : OpRecord{};
    const bool looping = in_loop_.load(std::memory_order_relaxed);
    const uint64_t k = looping ? loop_k_.load(std::memory_order_relaxed) : 0;
    Loop loop;
    if (looping) loop = loop_;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (version_.load(std::memory_order_relaxed) != v) continue;
    if (looping) {
      describe_loop_op(r, loop, k);
      r.start_ns = observed_start(m, k, r.start_ns);
    }
    return r;
  }
}

std::vector<OpRecord> Progress::recent() const {
  while (true) {
    const uint64_t v = version_.load(std::memory_order_acquire);
    if (v & 1) continue;
    const uint64_t m = records_.load(std::memory_order_acquire);
    std::vector<OpRecord> out;
    for (uint64_t i = m > kRing ? m - kRing : 0; i < m; ++i) out.push_back(ring_[i % kRing]);
    const bool looping = in_loop_.load(std::memory_order_relaxed);
    const uint64_t k = looping ? loop_k_.load(std::memory_order_relaxed) : 0;
    Loop loop;
    if (looping) loop = loop_;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (version_.load(std::memory_order_relaxed) != v) continue;
    if (looping && !out.empty()) {
      describe_loop_op(out.back(), loop, k);
      out.back().start_ns = observed_start(m, k, out.back().start_ns);
    }
    return out;
  }
}

}  // namespace cs
