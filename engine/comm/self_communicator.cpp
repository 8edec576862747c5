#include "self_communicator.hpp"

#include <cstring>

#include "error.hpp"

namespace cs {

std::unique_ptr<Communicator> SelfCommunicator::split(int color, int) {
  if (color < 0) return nullptr;
  return std::make_unique<SelfCommunicator>();
}

void SelfCommunicator::run(const Op& op) {
  const size_t bytes = op.count * dtype_size(op.dtype);
  switch (op.coll) {
    case Collective::barrier:
      return;
    case Collective::send: {
      const char* p = static_cast<const char*>(op.send);
      mailbox_.emplace_back(p, p + bytes);
      return;
    }
    case Collective::recv: {
      if (mailbox_.empty())
        throw Error(ExitCode::runtime, "recv on a self communicator with no matching send (would hang)");
      std::vector<char> m = std::move(mailbox_.front());
      mailbox_.pop_front();
      if (m.size() != bytes)
        throw Error(ExitCode::runtime,
                    "recv of " + std::to_string(bytes) + " bytes matched a send of " + std::to_string(m.size()));
      std::memcpy(op.recv, m.data(), bytes);
      return;
    }
    default:
      // With one rank every result equals the rank's own input (avg divides by 1).
      if (!op.in_place(0)) std::memmove(op.recv, op.send, bytes);
      return;
  }
}

}  // namespace cs
