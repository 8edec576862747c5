#include "op.hpp"

#include <algorithm>
#include <string>

#include "communicator.hpp"
#include "error.hpp"

namespace cs {

size_t Op::bytes() const {
  const Counts n = collective_counts(coll, count, nranks);
  return std::max(n.send, n.recv) * dtype_size(dtype);
}

bool Op::in_place(int rank) const { return op_in_place(coll, send, recv, count * dtype_size(dtype), rank, root); }

static std::string where(const Communicator& c, Collective coll) {
  return std::string(collective_name(coll)) + " on communicator '" + c.name() + "'";
}

Op make_op(const Communicator& comm, Collective coll, const Tensor& send, const Tensor& recv, ReduceOp redop, int root,
           int peer, int recv_peer, size_t count) {
  const int n = comm.size();
  const std::string w = where(comm, coll);
  Op op;
  op.coll = coll;
  op.redop = redop;
  op.root = root;
  op.peer = peer;
  op.recv_peer = recv_peer;
  op.nranks = n;
  if (coll == Collective::barrier) return op;

  const bool has_send = coll != Collective::recv;
  const bool has_recv = coll != Collective::send;
  if (has_send && !send.valid()) throw UsageError(w + ": no send tensor");
  if (has_recv && !recv.valid()) throw UsageError(w + ": no receive tensor");
  if (has_send && has_recv && send.dtype() != recv.dtype())
    throw UsageError(w + ": send is " + std::string(dtype_name(send.dtype())) + " but receive is " +
                     std::string(dtype_name(recv.dtype())));
  op.dtype = has_send ? send.dtype() : recv.dtype();
  if (const std::string why = comm.dtype_refusal(op.dtype); !why.empty())
    throw InputError(w + ": dtype " + std::string(dtype_name(op.dtype)) + " is not supported by --backend " +
                     comm.backend() + ": " + why);
  if (collective_reduces(coll)) {
    try {
      check_reduce_op(redop, op.dtype);
    } catch (const InputError& e) {
      throw UsageError(w + ": " + e.what());
    }
  }
  if (collective_has_root(coll) && (root < 0 || root >= n))
    throw UsageError(w + ": root " + std::to_string(root) + " is not a rank of a communicator of " + std::to_string(n));
  auto check_peer = [&](int p, const char* what) {
    if (p < 0 || p >= n)
      throw UsageError(w + ": " + what + " " + std::to_string(p) + " is not a rank of a communicator of " +
                       std::to_string(n));
  };
  if (coll == Collective::send || coll == Collective::recv || coll == Collective::sendrecv) check_peer(peer, "peer");
  if (coll == Collective::sendrecv) check_peer(recv_peer, "receive peer");

  if (count == static_cast<size_t>(-1)) {
    // Derive the per-call count from the tensors, the way each collective shapes its buffers.
    const size_t un = static_cast<size_t>(n);
    switch (coll) {
      case Collective::allgather:
      case Collective::gather:
        count = send.count();
        break;
      case Collective::reduce_scatter:
        count = recv.count();
        break;
      case Collective::scatter:
        count = recv.count();
        break;
      case Collective::alltoall:
        count = send.count() / un;
        break;
      case Collective::recv:
        count = recv.count();
        break;
      default:
        count = send.count();
        break;
    }
  }
  op.count = count;
  const Counts need = collective_counts(coll, count, n);
  const bool root_only_recv = coll == Collective::gather || coll == Collective::reduce;
  const bool root_only_send = coll == Collective::scatter;
  const bool me_root = comm.rank() == root;
  if (has_send && (!root_only_send || me_root) && send.count() < need.send)
    throw UsageError(w + ": send tensor has " + std::to_string(send.count()) + " elements, needs " +
                     std::to_string(need.send));
  if (has_recv && (!root_only_recv || me_root) && recv.count() < need.recv)
    throw UsageError(w + ": receive tensor has " + std::to_string(recv.count()) + " elements, needs " +
                     std::to_string(need.recv));
  op.send = has_send ? send.data() : nullptr;
  op.recv = has_recv ? recv.data() : nullptr;
  return op;
}

}  // namespace cs
