#include "communicator.hpp"

namespace cs {

// The host steady clock around the loop: nothing between the calls but the loop counter, so the
// time per iteration is what a plain MPI loop (nccl-tests, OSU, IMB) would measure plus
// execute()'s bookkeeping (one branch and the flight-recorder stores).
double Communicator::time_loop_us(const Op& op, size_t iters) {
  const int64_t t0 = now_ns();
  for (size_t i = 0; i < iters; ++i) execute(op);
  return static_cast<double>(now_ns() - t0) * 1e-3;
}

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
