#pragma once
// The monitor thread of the NCCL backend, internal to engine/comm/nccl_*.cpp. A blocking NCCL
// call (on the timed twin: the timed loops, its destruction at teardown) can wait inside NCCL
// with no deadline of its own (lazy connection setup, the work FIFO); NcclCommunicator::guarded
// runs it watched: past the deadline the monitor thread aborts the twin's non-blocking parent,
// which shares the twin's abort flag, and that ends NCCL's wait.
#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "nccl_communicator.hpp"
#include "nccl_shared.hpp"
#include "progress.hpp"

namespace cs {

// One blocking NCCL call on a timed twin, watched by the monitor thread: past its deadline the
// monitor aborts `victim` (the twin's non-blocking parent, which shares its abort flag), so that
// NCCL's host-side wait inside the call (lazy connection setup, the work FIFO) ends.
struct NcclGuard {
  enum : int { idle = 0, inside = 1, firing = 2, fired = 3 };
  std::atomic<int> state{idle};
  std::atomic<int64_t> deadline_ns{0};
  std::atomic<ncclComm_t> victim{nullptr};
};

// The one thread that watches every communicator's guard (every 20 ms), started with the first.
class GuardMonitor {
 public:
  static GuardMonitor& get();
  void add(const std::shared_ptr<NcclGuard>& g);
  void remove(const NcclGuard* g);

 private:
  void loop();
  std::mutex mu_;
  std::vector<std::shared_ptr<NcclGuard>> guards_;
  std::thread thread_;
};

template <class F>
ncclResult_t NcclCommunicator::guarded(double limit_s, F&& call, bool* fired) {
  *fired = false;
  // Only a twin that shares comm_'s abort flag can be interrupted this way (an abort of the twin
  // itself from another thread would free it under the call: NCCL does not allow that).
  const bool watch = limit_s > 0 && comm_ && split_share_on();
  if (watch) {
    guard_->victim.store(comm_);
    guard_->deadline_ns.store(now_ns() + static_cast<int64_t>(limit_s * 1e9));
    guard_->state.store(NcclGuard::inside, std::memory_order_release);
  }
  auto leave = [&] {
    if (!watch) return;
    int expected = NcclGuard::inside;
    if (guard_->state.compare_exchange_strong(expected, NcclGuard::idle)) return;
    while (guard_->state.load(std::memory_order_acquire) != NcclGuard::fired) std::this_thread::yield();
    guard_->state.store(NcclGuard::idle);
    comm_ = nullptr;  // the monitor aborted it
    *fired = true;
  };
  ncclResult_t r = ncclSuccess;
  try {
    r = call();
  } catch (...) {
    leave();
    throw;
  }
  leave();
  return r;
}

}  // namespace cs
