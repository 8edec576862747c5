#include "communicator.hpp"

#include "chaos.hpp"

namespace cs {

int64_t Communicator::execute_with_chaos(const Op& op) {
  // Injections that keep the rank from arriving (delay, hang, exit) or change what it calls
  // (desync) happen before the operation is recorded as started: to everyone else this rank
  // simply has not arrived yet.
  Op actual = op;
  Chaos::instance().before(actual, seq_ + 1, name_);
  const int64_t t0 = Progress::instance().begin(++seq_, actual.coll, actual.bytes(), name_, timeout_s_);
  run(actual);
  Progress::instance().end();
  Chaos::instance().after(actual, seq_, t0);
  return t0;
}

}  // namespace cs
