#include "communicator.hpp"

namespace cs {

int64_t Communicator::execute_with_hook(OpHook& h, const Op& op) {
  // What a hook does to keep the rank from arriving (a delay, a hang, an exit) or to change what
  // it calls happens before the operation is recorded as started: to everyone else this rank
  // simply has not arrived yet.
  Op actual = op;
  h.before(actual, seq_ + 1, name_);
  const int64_t t0 = Progress::instance().begin(++seq_, actual.coll, actual.bytes(), name_, timeout_s_);
  run(actual);
  Progress::instance().end();
  h.after(actual, seq_, t0);
  return t0;
}

}  // namespace cs
