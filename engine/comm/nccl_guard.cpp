// The monitor thread of the NCCL backend (nccl_guard.hpp): aborts the parent of a blocking call
// that is past its deadline.
#include "nccl_guard.hpp"

#include <time.h>

#include <algorithm>

namespace cs {

GuardMonitor& GuardMonitor::get() {
  static auto* m = new GuardMonitor;  // never destroyed: its thread may outlive static destruction
  return *m;
}

void GuardMonitor::add(const std::shared_ptr<NcclGuard>& g) {
  std::lock_guard<std::mutex> l(mu_);
  guards_.push_back(g);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

void GuardMonitor::remove(const NcclGuard* g) {
  std::lock_guard<std::mutex> l(mu_);
  guards_.erase(std::remove_if(guards_.begin(), guards_.end(), [&](const auto& x) { return x.get() == g; }),
                guards_.end());
}

void GuardMonitor::loop() {
  for (;;) {
    const timespec ts{0, 20000000};
    nanosleep(&ts, nullptr);
    std::vector<std::shared_ptr<NcclGuard>> now;
    {
      std::lock_guard<std::mutex> l(mu_);
      now = guards_;
    }
    const int64_t t = now_ns();
    for (const auto& g : now) {
      if (g->state.load(std::memory_order_acquire) != NcclGuard::inside || t < g->deadline_ns.load()) continue;
      int expected = NcclGuard::inside;
      if (!g->state.compare_exchange_strong(expected, NcclGuard::firing)) continue;
      if (ncclComm_t v = g->victim.load()) ncclCommAbort(v);
      g->state.store(NcclGuard::fired, std::memory_order_release);
    }
  }
}

}  // namespace cs
