#include "value_exchange.hpp"

namespace cs {

namespace {
ValueTraffic g_traffic;

void add(std::atomic<uint64_t>& counter, uint64_t n) { counter.fetch_add(n, std::memory_order_relaxed); }
}  // namespace

const ValueTraffic& value_traffic() { return g_traffic; }

std::vector<std::string> allgather_value(Communicator& comm, const std::string& mine) {
  std::vector<std::string> all = comm.allgather(mine);
  add(g_traffic.calls, 1);
  add(g_traffic.sent, mine.size());
  for (const auto& v : all) add(g_traffic.received, v.size());
  return all;
}

std::vector<std::string> gather_value(Communicator& comm, const std::string& mine, int root) {
  std::vector<std::string> all = comm.gather(mine, root);
  add(g_traffic.calls, 1);
  if (comm.rank() != root) {
    add(g_traffic.sent, mine.size());
    return {};
  }
  for (size_t i = 0; i < all.size(); ++i)
    if (static_cast<int>(i) != root) add(g_traffic.received, all[i].size());
  return all;
}

std::string broadcast_value(Communicator& comm, const std::string& mine, int root) {
  std::string got = comm.broadcast(mine, root);
  add(g_traffic.calls, 1);
  if (comm.rank() == root)  // root's share: n-1 copies at most
    add(g_traffic.sent, got.size() * static_cast<uint64_t>(comm.size() - 1));
  else
    add(g_traffic.received, got.size());
  return got;
}

}  // namespace cs
