#pragma once
// Plain data between ranks (serialised values: the recipes' allgather_value, gather_value and
// broadcast_value), for orchestration, not timing, and what it cost this process: calls, bytes
// this rank sent and bytes it received, over every communicator (cs.traffic, docs/lua-api.md).
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "communicator.hpp"

namespace cs {

struct ValueTraffic {
  std::atomic<uint64_t> calls{0}, sent{0}, received{0};
};
// This process's counters since it started.
const ValueTraffic& value_traffic();

std::vector<std::string> allgather_value(Communicator& comm, const std::string& mine);
// Every rank's value on `root` (entry i is rank i's); empty on the others.
std::vector<std::string> gather_value(Communicator& comm, const std::string& mine, int root);
std::string broadcast_value(Communicator& comm, const std::string& mine, int root);

}  // namespace cs
